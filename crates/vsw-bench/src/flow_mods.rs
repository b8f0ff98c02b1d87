//! OpenFlow flow-mod rate, switch beside switch: `ovs-ofctl add-flows` of N distinct
//! flows into an empty table 0 — as ovs-ofctl 3.1 sends them, each flow-mod followed
//! by a barrier it waits for — timed from start to the last barrier reply, then the
//! switch's flow count checked. vsw and Open vSwitch's userspace datapath (netdev),
//! each started privately, in rounds that interleave them.

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

/// vsw: the flows through its management socket.
pub fn measure_vsw(vsw: &mut Vsw, file: &Path, n: u32) -> anyhow::Result<FlowModRun> {
    vsw.launch(1 << vsw.pmd_cpu)?;
    let result = (|| {
        let target = format!("unix:{}", vsw.mgmt().display());
        run(&["ovs-ofctl", "-O", "OpenFlow13", "del-flows", &target])?;
        let file = file.to_str().context("path")?;
        let started = Instant::now();
        run(&["ovs-ofctl", "-O", "OpenFlow13", "add-flows", &target, file])?;
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
pub fn measure_ovs(pmd_cpu: usize, file: &Path, n: u32) -> anyhow::Result<FlowModRun> {
    let mut ovs = Ovs::new(false, pmd_cpu);
    ovs.launch("ovs-vswitchd", 1u64 << pmd_cpu, &[])?;
    let result = (|| {
        ovs.ofctl(&["-O", "OpenFlow13", "del-flows", "br0"])?;
        let file = file.to_str().context("path")?;
        let started = Instant::now();
        ovs.ofctl(&["-O", "OpenFlow13", "add-flows", "br0", file])?;
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
