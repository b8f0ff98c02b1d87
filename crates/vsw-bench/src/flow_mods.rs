//! OpenFlow flow-mod rate, switch beside switch: `ovs-ofctl add-flows` of N distinct
//! flows into an empty table 0 — as ovs-ofctl 3.1 sends them, each flow-mod followed
//! by a barrier it waits for — timed from start to the last barrier reply, then the
//! switch's flow count checked. vsw and Open vSwitch's userspace datapath (netdev),
//! each started privately, in rounds that interleave them; ovs-ofctl pinned to the
//! same core for both. (Unpinned, the scheduler put it on the PMD's core, idle
//! between packets, for vsw: every barrier and its reply then crossed cores, a
//! wake-up that costs a VM exit here, and that decided the figure.)

use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Context};

use crate::switches::{Ovs, Vsw};
use crate::topology::run;

/// The flows, one per line: IPv4 destinations 10.0.0.0 on.
pub fn write_flows(path: &Path, n: u32) -> anyhow::Result<()> {
    let mut text = String::with_capacity(n as usize * 64);
    for i in 0..n {
        let [_, a, b, c] = i.to_be_bytes();
        text.push_str(&format!(
            "priority=10,ip,nw_dst=10.{a}.{b}.{c},actions=output:1\n"
        ));
    }
    std::fs::write(path, text)?;
    Ok(())
}

/// One measurement.
#[derive(Clone, Debug, serde::Serialize)]
pub struct FlowModRun {
    pub switch: String,
    pub flows: u32,
    pub seconds: f64,
}

impl FlowModRun {
    pub fn per_second(&self) -> f64 {
        f64::from(self.flows) / self.seconds
    }
}

fn flow_count(aggregate: &str) -> Option<u32> {
    aggregate
        .split("flow_count=")
        .nth(1)?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// `ovs-ofctl`'s arguments that add the flows of `file` to `target`: one flow-mod
/// and barrier after another, or (`bundle`) all in one atomic bundle.
fn add_flows<'a>(target: &'a str, file: &'a str, bundle: bool) -> Vec<&'a str> {
    if bundle {
        vec!["-O", "OpenFlow14", "--bundle", "add-flows", target, file]
    } else {
        vec!["-O", "OpenFlow13", "add-flows", target, file]
    }
}

/// vsw: the flows through its management socket.
pub fn measure_vsw(
    vsw: &mut Vsw,
    file: &Path,
    n: u32,
    bundle: bool,
    ofctl_cpu: usize,
) -> anyhow::Result<FlowModRun> {
    vsw.launch(1 << vsw.pmd_cpu)?;
    let result = (|| {
        let target = format!("unix:{}", vsw.mgmt().display());
        run(&["ovs-ofctl", "-O", "OpenFlow13", "del-flows", &target])?;
        let file = file.to_str().context("path")?;
        let started = Instant::now();
        let cpu = ofctl_cpu.to_string();
        let mut cmd = vec!["taskset", "-c", &cpu, "ovs-ofctl"];
        cmd.extend(add_flows(&target, file, bundle));
        run(&cmd)?;
        let seconds = started.elapsed().as_secs_f64();
        let agg = run(&["ovs-ofctl", "-O", "OpenFlow13", "dump-aggregate", &target])?;
        if flow_count(&agg) != Some(n) {
            bail!("vsw holds {agg}, not {n} flows");
        }
        Ok(FlowModRun {
            switch: "vsw".into(),
            flows: n,
            seconds,
        })
    })();
    vsw.shut_down();
    result
}

/// Open vSwitch (netdev): the flows through its bridge's management socket.
pub fn measure_ovs(
    pmd_cpu: usize,
    file: &Path,
    n: u32,
    bundle: bool,
    ofctl_cpu: usize,
) -> anyhow::Result<FlowModRun> {
    let mut ovs = Ovs::new(false, pmd_cpu);
    ovs.launch("ovs-vswitchd", 1u64 << pmd_cpu, &[])?;
    let result = (|| {
        ovs.ofctl(&["-O", "OpenFlow13", "del-flows", "br0"])?;
        let file = file.to_str().context("path")?;
        let started = Instant::now();
        ovs.ofctl_on(ofctl_cpu, &add_flows("br0", file, bundle))?;
        let seconds = started.elapsed().as_secs_f64();
        let agg = ovs.ofctl(&["-O", "OpenFlow13", "dump-aggregate", "br0"])?;
        if flow_count(&agg) != Some(n) {
            bail!("Open vSwitch holds {agg}, not {n} flows");
        }
        Ok(FlowModRun {
            switch: "ovs-netdev".into(),
            flows: n,
            seconds,
        })
    })();
    ovs.shut_down();
    result
}

/// The report: each round's rates and vsw's against Open vSwitch's.
pub fn report_markdown(runs: &[FlowModRun]) -> String {
    let mut o = String::from("| round | switch | flows | seconds | flow-mods/s | vsw / ovs |\n|---|---|---|---|---|---|\n");
    for (i, pair) in runs.chunks(2).enumerate() {
        let ratio = match pair {
            [a, b] => {
                let (vsw, ovs) = if a.switch == "vsw" { (a, b) } else { (b, a) };
                format!("{:.3} ×", vsw.per_second() / ovs.per_second())
            }
            _ => String::new(),
        };
        for r in pair {
            o.push_str(&format!(
                "| {} | {} | {} | {:.2} | {:.0} | {ratio} |\n",
                i + 1,
                r.switch,
                r.flows,
                r.seconds,
                r.per_second()
            ));
        }
    }
    o
}

/// The rules strict deletes go after: priority 10, UDP from one source port each
/// (from 1024, the generator's flows' ports), and below them every packet to port
/// 2 — so each of the generator's flows is a datapath flow of its own (its source
/// port looked at).
pub fn write_source_port_rules(path: &Path, n: u32) -> anyhow::Result<()> {
    let mut text = String::with_capacity(n as usize * 48);
    for i in 0..n {
        text.push_str(&format!(
            "priority=10,udp,tp_src={},actions=output:2\n",
            1024 + i
        ));
    }
    text.push_str("priority=1,actions=output:2\n");
    std::fs::write(path, text)?;
    Ok(())
}

/// `ovs-ofctl add-flows` lines deleting those rules one by one.
pub fn write_strict_deletes(path: &Path, n: u32) -> anyhow::Result<()> {
    let mut text = String::with_capacity(n as usize * 48);
    for i in 0..n {
        text.push_str(&format!(
            "delete_strict priority=10,udp,tp_src={}\n",
            1024 + i
        ));
    }
    std::fs::write(path, text)?;
    Ok(())
}

/// The same deletes as a controller sends a burst: every DELETE_STRICT written at
/// once, then one barrier, on a connection of this program's own (OpenFlow 1.3);
/// seconds from the first byte to the barrier's reply.
pub fn strict_delete_burst(mgmt: &Path, n: u32) -> anyhow::Result<f64> {
    use std::io::Write;
    use vsw_openflow::flow_mod::{Command, FlowMod};
    use vsw_openflow::oxm::{OxmField, OxmMatch};
    use vsw_openflow::{Message, VersionSet};
    let mut c = std::os::unix::net::UnixStream::connect(mgmt)?;
    c.set_read_timeout(Some(std::time::Duration::from_secs(600)))?;
    let hello = Message::Hello {
        versions: Some(VersionSet(1 << 4)),
    };
    c.write_all(&hello.encode(4, 1))?;
    // OXM basic fields: ETH_TYPE (5), IP_PROTO (10), UDP_SRC (15).
    let f = |field: u8, value: Vec<u8>| OxmField {
        field,
        value,
        mask: None,
    };
    let mut burst = Vec::with_capacity(n as usize * 96);
    for i in 0..n {
        let port = u16::try_from(1024 + i).context("source ports run out")?;
        let matcher = OxmMatch {
            fields: vec![
                f(5, vec![8, 0]),
                f(10, vec![17]),
                f(15, port.to_be_bytes().to_vec()),
            ],
        };
        let fm = Message::FlowMod(FlowMod {
            priority: 10,
            ..FlowMod::new(Command::DeleteStrict, matcher)
        });
        burst.extend(fm.encode(4, 10 + i));
    }
    burst.extend(Message::BarrierRequest.encode(4, 7));
    let started = Instant::now();
    c.write_all(&burst)?;
    // BARRIER_REPLY; an error (a delete refused) fails.
    crate::bundle_commit::await_reply(&mut c, &mut Vec::new(), 21, 7)?;
    Ok(started.elapsed().as_secs_f64())
}

/// One measurement of strict deletes.
#[derive(Clone, Debug, serde::Serialize)]
pub struct DeleteRun {
    pub switch: String,
    /// `burst` (one barrier) or `ovs-ofctl` (a barrier after each).
    pub mode: String,
    pub rules: u32,
    /// Datapath flows cached when the deletes began.
    pub dp_flows: u64,
    pub seconds: f64,
}

/// The report: each delete's time, and vsw's against Open vSwitch's in the same
/// round and mode.
pub fn report_deletes_markdown(runs: &[DeleteRun]) -> String {
    let mut o = String::from(
        "| round | mode | switch | rules deleted | datapath flows | seconds | deletes/s | vsw / ovs (time) |\n|---|---|---|---|---|---|---|---|\n",
    );
    for (i, pair) in runs.chunks(2).enumerate() {
        let ratio = match pair {
            [a, b] => {
                let (vsw, ovs) = if a.switch.starts_with("vsw") {
                    (a, b)
                } else {
                    (b, a)
                };
                format!("{:.3} ×", vsw.seconds / ovs.seconds)
            }
            _ => String::new(),
        };
        for r in pair {
            o.push_str(&format!(
                "| {} | {} | {} | {} | {} | {:.3} | {:.0} | {ratio} |\n",
                i + 1,
                r.mode,
                r.switch,
                r.rules,
                r.dp_flows,
                r.seconds,
                f64::from(r.rules) / r.seconds
            ));
        }
    }
    o
}
