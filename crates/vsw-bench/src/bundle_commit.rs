//! An atomic bundle's commit, switch beside switch, as a controller sends one: N
//! flow-mods (OpenFlow 1.4 bundle-adds, encoded before the clock starts) written at
//! once with a barrier behind them, then one commit request. Three times: the adds
//! (first byte to the barrier's reply), the commit (request to reply), and the first
//! packet the new rules forward (from the commit request), seen by a probe that sends
//! a frame to the last rule's address every 100 µs from before the commit.
//!
//! `ovs-ofctl --bundle add-flows` (the `flow-mods --bundle` figure) times all of it
//! together with ovs-ofctl's own parsing of the text, which is the same work for both
//! switches and more than half of Open vSwitch's whole run; this times the switch.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use vsw_datapath::{PacketMeta, RxBatch};
use vsw_openflow::bundle::{
    BundleAdd, BundleCtrl, OFPBCT_COMMIT_REQUEST, OFPBCT_OPEN_REQUEST, OFPBF_ATOMIC,
};
use vsw_openflow::flow_mod::{Action, Command, FlowMod, Instruction};
use vsw_openflow::oxm::{OxmField, OxmMatch};
use vsw_openflow::{next_message, Message, VersionSet};

use crate::frame::{self, Addresses};
use crate::traffic::{open_in, Traffic};

/// OpenFlow 1.4 on the wire.
const VERSION: u8 = 5;
/// The output port of every rule: the receiver's (the second port added).
const RECEIVER_PORT: u32 = 2;

/// The address rule `i` forwards (10.0.0.0 on, as `flow_mods::write_flows`).
pub fn rule_address(i: u32) -> [u8; 4] {
    let [_, a, b, c] = i.to_be_bytes();
    [10, a, b, c]
}

/// One measurement.
#[derive(Clone, Debug, serde::Serialize)]
pub struct CommitRun {
    /// The round it was measured in (1 on).
    pub round: u32,
    pub switch: String,
    pub flows: u32,
    /// From the first bundle-add written to the barrier's reply behind the last.
    pub add_seconds: f64,
    /// From the commit request written to its reply.
    pub commit_seconds: f64,
    /// From the commit request written to the first probe frame the receiver saw.
    pub first_packet_seconds: Option<f64>,
}

/// Every message of the bundle, encoded: open, N adds, a barrier (xid 7); then the
/// commit (xid 8) apart.
fn bundle_bytes(n: u32) -> (Vec<u8>, Vec<u8>) {
    let ctrl = |kind: u16| {
        Message::BundleControl(BundleCtrl {
            bundle_id: 1,
            kind,
            flags: OFPBF_ATOMIC,
        })
    };
    let field = |field: u8, value: Vec<u8>| OxmField {
        field,
        value,
        mask: None,
    };
    let mut adds = ctrl(OFPBCT_OPEN_REQUEST).encode(VERSION, 2);
    adds.reserve(n as usize * 112);
    for i in 0..n {
        // OXM basic fields: ETH_TYPE (5), IPV4_DST (12).
        let matcher = OxmMatch {
            fields: vec![field(5, vec![8, 0]), field(12, rule_address(i).to_vec())],
        };
        let fm = Message::FlowMod(FlowMod {
            priority: 10,
            instructions: vec![Instruction::ApplyActions(vec![Action::Output {
                port: RECEIVER_PORT,
                max_len: 0,
            }])],
            ..FlowMod::new(Command::Add, matcher)
        });
        let add = Message::BundleAdd(BundleAdd {
            bundle_id: 1,
            flags: OFPBF_ATOMIC,
            message: fm.encode(VERSION, 10 + i),
        });
        adds.extend(add.encode(VERSION, 10 + i));
    }
    adds.extend(Message::BarrierRequest.encode(VERSION, 7));
    (adds, ctrl(OFPBCT_COMMIT_REQUEST).encode(VERSION, 8))
}

/// Reads messages until one of `kind` with `xid` arrives; an error message fails.
pub(crate) fn await_reply(
    c: &mut UnixStream,
    got: &mut Vec<u8>,
    kind: u8,
    xid: u32,
) -> anyhow::Result<()> {
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let mut at = 0;
        while let Ok(Some((h, m))) = next_message(&got[at..]) {
            let len = m.len();
            if h.kind == kind && h.xid == xid {
                got.drain(..at + len);
                return Ok(());
            }
            // ERROR
            if h.kind == 1 {
                bail!("the switch refused xid {}: {m:?}", h.xid);
            }
            at += len;
        }
        got.drain(..at);
        let k = c.read(&mut buf)?;
        if k == 0 {
            bail!("the switch closed the connection");
        }
        got.extend_from_slice(&buf[..k]);
    }
}

/// The probe: once `go`, sends a frame to `dst_ip` every 100 µs until `stop`, and
/// returns when the receiver first saw one (sleeping between sends, so it takes
/// little of the core the switch's control thread may share; idle while the adds
/// are sent, so it does not slow them).
fn spawn_probe(
    traffic: &Traffic,
    dst_ip: [u8; 4],
    go: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<anyhow::Result<Option<Instant>>> {
    let t = traffic.clone();
    std::thread::spawn(move || {
        if let Some(cpu) = t.cpu {
            core_affinity::set_for_current(core_affinity::CoreId { id: cpu });
        }
        let mut gen = open_in(&t.gen_ns, &t.ifname)?;
        let mut rcv = open_in(&t.rcv_ns, &t.ifname)?;
        let addresses = Addresses {
            dst_ip,
            ..t.addresses
        };
        let mut f = vec![0u8; 64];
        let meta = PacketMeta::default();
        let mut seq = 0u64;
        let mut first = None;
        while !go.load(Ordering::Relaxed) && !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(1));
        }
        while !stop.load(Ordering::Relaxed) {
            frame::build(&mut f, 64, &addresses, 0, seq, 0);
            seq += 1;
            if gen.tx.stage(&f, &meta).is_ok() {
                gen.tx.flush();
            }
            std::thread::sleep(Duration::from_micros(100));
            let mut batch = RxBatch::new();
            rcv.rx[0].recv(&mut batch);
            let arrived = batch
                .into_iter()
                .any(|p| frame::read_stamp(p.data).is_some());
            rcv.rx[0].release();
            if arrived && first.is_none() {
                first = Some(Instant::now());
            }
        }
        Ok(first)
    })
}

/// Sends the bundle of `n` rules to the switch at `mgmt` (its table empty) and times
/// it; the probe frames go to the last rule's address.
pub fn measure(switch: &str, mgmt: &Path, n: u32, traffic: &Traffic) -> anyhow::Result<CommitRun> {
    let (adds, commit) = bundle_bytes(n);
    let mut c = UnixStream::connect(mgmt).with_context(|| format!("{}", mgmt.display()))?;
    c.set_read_timeout(Some(Duration::from_secs(600)))?;
    let hello = Message::Hello {
        versions: Some(VersionSet(1 << VERSION)),
    };
    c.write_all(&hello.encode(VERSION, 1))?;
    let (go, stop) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let probe = spawn_probe(
        traffic,
        rule_address(n.saturating_sub(1)),
        go.clone(),
        stop.clone(),
    );
    let result = (|| {
        let mut got = Vec::new();
        let started = Instant::now();
        c.write_all(&adds)?;
        // BARRIER_REPLY (1.3 on)
        await_reply(&mut c, &mut got, 21, 7)?;
        let add_seconds = started.elapsed().as_secs_f64();
        // The probe sends into the table without the new rules for a while first:
        // nothing may be through.
        go.store(true, Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(50));
        let committed = Instant::now();
        c.write_all(&commit)?;
        // BUNDLE_CONTROL (1.4 on)
        await_reply(&mut c, &mut got, 33, 8)?;
        let commit_seconds = committed.elapsed().as_secs_f64();
        anyhow::Ok((add_seconds, committed, commit_seconds))
    })();
    // The first packet may trail the reply by the datapath's revalidation.
    if result.is_ok() {
        std::thread::sleep(Duration::from_millis(200));
    }
    stop.store(true, Ordering::Relaxed);
    let first = probe
        .join()
        .map_err(|_| anyhow::anyhow!("the probe panicked"))??;
    let (add_seconds, committed, commit_seconds) = result?;
    if first.is_some_and(|f| f < committed) {
        bail!("{switch} forwarded a probe frame before the commit");
    }
    Ok(CommitRun {
        round: 0,
        switch: switch.into(),
        flows: n,
        add_seconds,
        commit_seconds,
        first_packet_seconds: first.map(|f| (f - committed).as_secs_f64()),
    })
}

/// The report: each round's times, and vsw's against Open vSwitch's (time ratios:
/// below 1 is faster).
pub fn report_markdown(runs: &[CommitRun]) -> String {
    let mut o = String::from(
        "| round | switch | flows | adds (to barrier) s | commit s | first packet s | vsw / ovs commit time | vsw / ovs first packet |\n|---|---|---|---|---|---|---|---|\n",
    );
    let secs = |s: Option<f64>| s.map_or("none".to_string(), |s| format!("{s:.3}"));
    for pair in runs.chunk_by(|a, b| a.round == b.round) {
        let (commit_ratio, first_ratio) = match pair {
            [a, b] if a.switch != b.switch => {
                let (vsw, ovs) = if a.switch == "vsw" { (a, b) } else { (b, a) };
                let first = match (vsw.first_packet_seconds, ovs.first_packet_seconds) {
                    (Some(v), Some(o)) => format!("{:.3} ×", v / o),
                    _ => String::new(),
                };
                (
                    format!("{:.3} ×", vsw.commit_seconds / ovs.commit_seconds),
                    first,
                )
            }
            _ => (String::new(), String::new()),
        };
        for r in pair {
            o.push_str(&format!(
                "| {} | {} | {} | {:.3} | {:.3} | {} | {commit_ratio} | {first_ratio} |\n",
                r.round,
                r.switch,
                r.flows,
                r.add_seconds,
                r.commit_seconds,
                secs(r.first_packet_seconds),
            ));
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(round: u32, switch: &str, commit: f64) -> CommitRun {
        CommitRun {
            round,
            switch: switch.into(),
            flows: 10,
            add_seconds: 0.1,
            commit_seconds: commit,
            first_packet_seconds: Some(commit),
        }
    }

    #[test]
    fn rounds_pair_vsw_with_open_vswitch_and_a_round_of_one_has_no_ratio() {
        let both = report_markdown(&[run(1, "vsw", 0.3), run(1, "ovs-netdev", 0.1)]);
        assert_eq!(both.matches("3.000 ×").count(), 4, "{both}");
        let alone = report_markdown(&[run(1, "vsw", 0.3), run(2, "vsw", 0.2)]);
        assert!(!alone.contains('×'), "{alone}");
        assert!(alone.contains("| 2 | vsw |"), "{alone}");
    }

    #[test]
    fn the_bundle_is_open_adds_and_a_barrier_then_the_commit() {
        let (adds, commit) = bundle_bytes(3);
        let kinds: Vec<u8> = std::iter::successors(Some(0usize), |at| {
            let len = u16::from_be_bytes([adds[at + 2], adds[at + 3]]) as usize;
            (at + len < adds.len()).then_some(at + len)
        })
        .map(|at| adds[at + 1])
        .collect();
        // BUNDLE_CONTROL (33), three BUNDLE_ADD_MESSAGEs (34), BARRIER_REQUEST (20).
        assert_eq!(kinds, vec![33, 34, 34, 34, 20]);
        assert_eq!((commit[0], commit[1]), (VERSION, 33));
    }
}
