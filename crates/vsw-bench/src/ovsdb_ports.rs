//! How fast `ovs-vsctl` changes take effect, vswd (`--ovsdb`) beside ovs-vswitchd
//! (netdev) on the same private ovsdb-server set-up:
//!
//! - first packet: a host in a namespace sends ICMP every millisecond to a second
//!   host (its neighbour entry fixed, so nothing waits on ARP) whose port is not on
//!   the bridge yet; the clock starts as `ovs-vsctl add-port` is run and stops when
//!   the switch first sends on that port (its veth's transmit counter moves, polled
//!   every 100 µs). Also when ovs-vsctl returned (it waits for `cur_cfg`).
//! - many ports: N veths added in one `ovs-vsctl` transaction, timed to its return
//!   (which waits until the daemon has carried all of them out), then deleted in one.
//! - optionally with `options:n_rxq_desc`/`n_txq_desc` on every port (vsw's ring
//!   sizes; Open vSwitch's system ports have no rings and ignore them).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::switches::Ovs;
use crate::topology::run;

/// One daemon's figures in one round.
#[derive(Clone, Debug, serde::Serialize)]
pub struct PortsRun {
    pub switch: String,
    /// `ovs-vsctl add-port` → its return, and → the first packet sent on the port.
    pub add_port_returned_ms: f64,
    pub first_packet_ms: f64,
    pub ports: u32,
    /// N ports in one transaction → ovs-vsctl's return.
    pub many_ports_ms: f64,
    /// The N ports deleted in one transaction → ovs-vsctl's return.
    pub del_many_ms: f64,
}

impl PortsRun {
    /// The figures in a line.
    pub fn summary(&self) -> String {
        format!(
            "add-port {:.1} ms, first packet {:.1} ms, {} ports added {:.0} ms, deleted {:.0} ms",
            self.add_port_returned_ms,
            self.first_packet_ms,
            self.ports,
            self.many_ports_ms,
            self.del_many_ms
        )
    }
}

/// Descriptor counts given to every port added (`options:n_rxq_desc`/`n_txq_desc`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Descriptors {
    pub rx: Option<u32>,
    pub tx: Option<u32>,
}

impl Descriptors {
    /// The `-- set Interface` words for port `name`, if any are given.
    fn words(&self, name: &str) -> Vec<String> {
        let mut set = Vec::new();
        if let Some(n) = self.rx {
            set.push(format!("options:n_rxq_desc={n}"));
        }
        if let Some(n) = self.tx {
            set.push(format!("options:n_txq_desc={n}"));
        }
        if set.is_empty() {
            return set;
        }
        let mut w = vec!["--".into(), "set".into(), "Interface".into(), name.into()];
        w.extend(set);
        w
    }
}

struct Hosts {
    tag: String,
}

impl Hosts {
    fn port(&self, i: u32) -> String {
        format!("{}h{i}", self.tag)
    }

    fn ns(&self, i: u32) -> String {
        format!("{}n{i}", self.tag)
    }

    /// Two hosts 198.18.0.1 and .2, each in its namespace behind a veth.
    fn create(tag: &str) -> anyhow::Result<Hosts> {
        let h = Hosts { tag: tag.into() };
        for i in 1..=2u32 {
            let (ns, port) = (h.ns(i), h.port(i));
            run(&["ip", "netns", "add", &ns])?;
            run(&[
                "ip",
                "link",
                "add",
                &port,
                "type",
                "veth",
                "peer",
                "name",
                "eth0",
                "address",
                &format!("02:00:c6:12:00:0{i}"),
                "netns",
                &ns,
            ])?;
            run(&["ip", "link", "set", &port, "up"])?;
            let exec = |args: &[&str]| {
                let mut a = vec!["ip", "netns", "exec", ns.as_str()];
                a.extend_from_slice(args);
                run(&a)
            };
            exec(&[
                "ip",
                "addr",
                "add",
                &format!("198.18.0.{i}/24"),
                "dev",
                "eth0",
            ])?;
            exec(&["ip", "link", "set", "eth0", "up"])?;
            exec(&["ip", "link", "set", "lo", "up"])?;
        }
        // Host 1 knows host 2's address: its first packet goes out at once.
        run(&[
            "ip",
            "netns",
            "exec",
            &h.ns(1),
            "ip",
            "neigh",
            "replace",
            "198.18.0.2",
            "lladdr",
            "02:00:c6:12:00:02",
            "dev",
            "eth0",
            "nud",
            "permanent",
        ])?;
        Ok(h)
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for i in 1..=2 {
            let _ = run(&["ip", "netns", "del", &self.ns(i)]);
            let _ = run(&["ip", "link", "del", &self.port(i)]);
        }
    }
}

fn tx_packets(port: &str) -> u64 {
    std::fs::read_to_string(format!("/sys/class/net/{port}/statistics/tx_packets"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// Veths `<tag>v<i>` (their peers `<tag>w<i>`), up, for the many-ports figure.
struct Veths {
    names: Vec<String>,
}

impl Veths {
    fn create(tag: &str, n: u32) -> anyhow::Result<Veths> {
        let mut v = Veths { names: Vec::new() };
        for i in 0..n {
            let (a, b) = (format!("{tag}v{i}"), format!("{tag}w{i}"));
            run(&["ip", "link", "add", &a, "type", "veth", "peer", "name", &b])?;
            run(&["ip", "link", "set", &a, "up"])?;
            run(&["ip", "link", "set", &b, "up"])?;
            v.names.push(a);
        }
        Ok(v)
    }
}

impl Drop for Veths {
    fn drop(&mut self) {
        for n in &self.names {
            let _ = run(&["ip", "link", "del", n]);
        }
    }
}

/// One round of one daemon: `vswd` (a path) or None for ovs-vswitchd.
pub fn measure(
    vswd: Option<&Path>,
    pmd_cpu: usize,
    ports: u32,
    desc: Descriptors,
) -> anyhow::Result<PortsRun> {
    let mut ovs = Ovs::new(false, pmd_cpu);
    let name = if vswd.is_some() { "vsw" } else { "ovs-netdev" };
    let tag = format!("vb{}", std::process::id() % 10_000);
    let result = (|| {
        match vswd {
            Some(p) => ovs.launch_vswd(p, 1u64 << pmd_cpu)?,
            None => ovs.launch("ovs-vswitchd", 1u64 << pmd_cpu, &[])?,
        }
        let hosts = Hosts::create(&tag)?;
        ovs.vsctl(&["--timeout=20", "add-port", "br0", &hosts.port(1)])?;
        // Host 1 sends every millisecond from now on.
        let mut sender: Child = Command::new("ip")
            .args([
                "netns",
                "exec",
                &hosts.ns(1),
                "ping",
                "-q",
                "-i",
                "0.001",
                "198.18.0.2",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("ping")?;
        let watched = hosts.port(2);
        let before = tx_packets(&watched);
        let started = Instant::now();
        let mut add: Vec<String> = ["--timeout=20", "add-port", "br0", &watched]
            .iter()
            .map(|s| s.to_string())
            .collect();
        add.extend(desc.words(&watched));
        let add: Vec<&str> = add.iter().map(String::as_str).collect();
        let added = ovs.vsctl(&add);
        let returned = started.elapsed();
        let mut first = None;
        while started.elapsed() < Duration::from_secs(20) {
            if tx_packets(&watched) > before {
                first = Some(started.elapsed());
                break;
            }
            std::thread::sleep(Duration::from_micros(100));
        }
        let _ = sender.kill();
        let _ = sender.wait();
        added?;
        let first = first.context("no packet reached the new port within 20 s")?;

        let veths = Veths::create(&tag, ports)?;
        let mut args: Vec<String> = vec!["--timeout=60".into()];
        for v in &veths.names {
            args.extend(["--".into(), "add-port".into(), "br0".into(), v.clone()]);
            args.extend(desc.words(v));
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let started = Instant::now();
        ovs.vsctl(&args)?;
        let many = started.elapsed();
        let listed = ovs.vsctl(&["list-ports", "br0"])?;
        if listed.lines().count() < ports as usize + 2 {
            bail!("{name}: br0 has only {} ports", listed.lines().count());
        }
        // Gone (in one transaction) before the veths are.
        let mut args: Vec<String> = vec!["--timeout=60".into()];
        for v in &veths.names {
            args.extend(["--".into(), "del-port".into(), "br0".into(), v.clone()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let started = Instant::now();
        ovs.vsctl(&args)?;
        let del_many = started.elapsed();
        drop(veths);
        drop(hosts);
        Ok(PortsRun {
            switch: name.into(),
            add_port_returned_ms: returned.as_secs_f64() * 1e3,
            first_packet_ms: first.as_secs_f64() * 1e3,
            ports,
            many_ports_ms: many.as_secs_f64() * 1e3,
            del_many_ms: del_many.as_secs_f64() * 1e3,
        })
    })();
    ovs.shut_down();
    result
}

pub fn report_markdown(runs: &[PortsRun]) -> String {
    let mut o = String::from(
        "| round | daemon | add-port → ovs-vsctl returns (ms) | add-port → first packet on the port (ms) | ports in one transaction | added → ovs-vsctl returns (ms) | deleted → returns (ms) |\n|---|---|---|---|---|---|---|\n",
    );
    for (i, pair) in runs.chunks(2).enumerate() {
        for r in pair {
            o.push_str(&format!(
                "| {} | {} | {:.1} | {:.1} | {} | {:.0} | {:.0} |\n",
                i + 1,
                r.switch,
                r.add_port_returned_ms,
                r.first_packet_ms,
                r.ports,
                r.many_ports_ms,
                r.del_many_ms
            ));
        }
    }
    o
}
