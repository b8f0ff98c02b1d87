//! The test topology: a generator host and a receiver host (network namespaces), each
//! wired by a veth to the switch under test in the root namespace. Removed on drop,
//! so also when a run fails or is interrupted.

use std::process::Command;

use anyhow::{bail, Context};

use crate::frame::Addresses;

pub struct Topology {
    pub gen_ns: String,
    pub rcv_ns: String,
    /// The switch-side ends of the veths.
    pub gen_port: String,
    pub rcv_port: String,
    pub addresses: Addresses,
}

pub const GEN_MAC: [u8; 6] = [0x02, 0x00, 0xc6, 0x12, 0x00, 0x01];
pub const RCV_MAC: [u8; 6] = [0x02, 0x00, 0xc6, 0x12, 0x00, 0x02];
/// Test frames go to a MAC address nobody owns: every switch floods them to the
/// receiver, whose stack drops them at once, so the receiver's own kernel work (which
/// runs on whichever core delivers the frame) stays small and equal for all switches.
pub const STRANGER_MAC: [u8; 6] = [0x02, 0x00, 0xc6, 0x12, 0x00, 0x63];

/// Runs a command that must succeed; returns its standard output.
pub fn run(args: &[&str]) -> anyhow::Result<String> {
    run_with_env(args, &[])
}

/// [`run`] with extra environment variables.
pub fn run_with_env(args: &[&str], env: &[(&str, &std::path::Path)]) -> anyhow::Result<String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .output()
        .with_context(|| format!("cannot run {}", args[0]))?;
    if !out.status.success() {
        bail!(
            "{} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn mac(m: [u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

impl Topology {
    pub fn create() -> anyhow::Result<Topology> {
        let id = std::process::id() % 100_000;
        let t = Topology {
            gen_ns: format!("vswb{id}g"),
            rcv_ns: format!("vswb{id}r"),
            gen_port: format!("vswb{id}g"),
            rcv_port: format!("vswb{id}r"),
            addresses: Addresses {
                src_mac: GEN_MAC,
                dst_mac: STRANGER_MAC,
                src_ip: [198, 18, 0, 1],
                dst_ip: [198, 18, 0, 2],
            },
        };
        for (ns, port, m, ip) in [
            (&t.gen_ns, &t.gen_port, GEN_MAC, "198.18.0.1/24"),
            (&t.rcv_ns, &t.rcv_port, RCV_MAC, "198.18.0.2/24"),
        ] {
            run(&["ip", "netns", "add", ns])?;
            run(&[
                "ip",
                "link",
                "add",
                port,
                "type",
                "veth",
                "peer",
                "name",
                "eth0",
                "address",
                &mac(m),
                "netns",
                ns,
            ])?;
            run(&[
                "sysctl",
                "-q",
                "-w",
                &format!("net.ipv6.conf.{port}.disable_ipv6=1"),
            ])?;
            run(&["ip", "link", "set", port, "up"])?;
            let ns_run = |args: &[&str]| {
                let mut full = vec!["ip", "netns", "exec", ns.as_str()];
                full.extend_from_slice(args);
                run(&full)
            };
            ns_run(&["sysctl", "-q", "-w", "net.ipv6.conf.eth0.disable_ipv6=1"])?;
            ns_run(&["ip", "addr", "add", ip, "dev", "eth0"])?;
            ns_run(&["ip", "link", "set", "eth0", "up"])?;
            ns_run(&["ip", "link", "set", "lo", "up"])?;
        }
        Ok(t)
    }

    /// Runs a command in the generator (`gen = true`) or receiver host.
    pub fn exec(&self, gen: bool, args: &[&str]) -> anyhow::Result<String> {
        let ns = if gen { &self.gen_ns } else { &self.rcv_ns };
        let mut full = vec!["ip", "netns", "exec", ns.as_str()];
        full.extend_from_slice(args);
        run(&full)
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        for ns in [&self.gen_ns, &self.rcv_ns] {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
        for port in [&self.gen_port, &self.rcv_port] {
            let _ = Command::new("ip").args(["link", "del", port]).output();
        }
    }
}
