//! The generator and receiver: one thread on the generator's core that sends paced,
//! stamped frames into the generator host's interface and reads what reaches the
//! receiver host's interface, both through vsw's own AF_PACKET rings.
//!
//! One thread for both, because on a 2-core machine the switch's PMD has the other
//! core: a busy-polling receiver on its own thread would fight the generator for CPU 0.

use std::time::{Duration, Instant};

use vsw_datapath::{PacketMeta, PortQueues, RxBatch, StageError};
use vsw_netdev::afpacket::{self, AfPacketMode};

use crate::frame::{self, Addresses};
use crate::latency::LatencyRecorder;
use crate::pacing::Pacer;
use crate::search::Trial;

#[derive(Debug, thiserror::Error)]
pub enum TrafficError {
    #[error("cannot enter network namespace {ns}: {source}")]
    Netns { ns: String, source: std::io::Error },
    #[error("cannot open {ifname} in {ns}: {source}")]
    Open {
        ns: String,
        ifname: String,
        source: vsw_netdev::NetdevError,
    },
    #[error("the traffic thread failed: {0}")]
    Thread(String),
}

/// What to send in a trial.
#[derive(Clone, Debug)]
pub struct Traffic {
    pub gen_ns: String,
    pub rcv_ns: String,
    pub ifname: String,
    pub addresses: Addresses,
    /// Frame lengths (without FCS), used in turn: one entry for a fixed size, the
    /// IMIX pattern for a mix.
    pub frame_lens: Vec<usize>,
    /// Distinct UDP 5-tuples.
    pub flows: u16,
    pub duration: Duration,
    /// CPU the traffic thread runs on.
    pub cpu: Option<usize>,
}

impl crate::topology::Topology {
    /// Traffic from the generator host to the receiver host (through their
    /// `eth0`s), from a thread on `cpu`.
    pub fn traffic(
        &self,
        frame_lens: Vec<usize>,
        flows: u16,
        duration: Duration,
        cpu: usize,
    ) -> Traffic {
        Traffic {
            gen_ns: self.gen_ns.clone(),
            rcv_ns: self.rcv_ns.clone(),
            ifname: "eth0".into(),
            addresses: self.addresses,
            frame_lens,
            flows,
            duration,
            cpu: Some(cpu),
        }
    }
}

/// What one trial measured.
#[derive(Debug)]
pub struct TrialStats {
    pub trial: Trial,
    pub reordered: u64,
    pub latency: LatencyRecorder,
    pub bytes_sent: u64,
}

pub(crate) fn open_in(ns: &str, ifname: &str) -> Result<PortQueues, TrafficError> {
    vsw_netdev::enter_netns(ns).map_err(|source| TrafficError::Netns {
        ns: ns.into(),
        source,
    })?;
    afpacket::open(ifname, AfPacketMode::Ring).map_err(|source| TrafficError::Open {
        ns: ns.into(),
        ifname: ifname.into(),
        source,
    })
}

/// Runs one trial at `rate_pps` on a thread of its own (it enters the hosts'
/// namespaces, which must not leak to the caller's thread).
pub fn run_trial(traffic: &Traffic, rate_pps: f64) -> Result<TrialStats, TrafficError> {
    let t = traffic.clone();
    std::thread::Builder::new()
        .name("vsw-bench-traffic".into())
        .spawn(move || {
            if let Some(cpu) = t.cpu {
                core_affinity::set_for_current(core_affinity::CoreId { id: cpu });
            }
            let gen = open_in(&t.gen_ns, &t.ifname)?;
            let rcv = open_in(&t.rcv_ns, &t.ifname)?;
            Ok(send_and_receive(&t, gen, rcv, rate_pps))
        })
        .map_err(|e| TrafficError::Thread(e.to_string()))?
        .join()
        .map_err(|_| TrafficError::Thread("panicked".into()))?
}

/// How long the receiver keeps reading after the last frame was sent.
const DRAIN: Duration = Duration::from_millis(200);

fn send_and_receive(
    t: &Traffic,
    mut gen: PortQueues,
    mut rcv: PortQueues,
    rate_pps: f64,
) -> TrialStats {
    let epoch = Instant::now();
    let now_ns = || epoch.elapsed().as_nanos() as u64;
    let mut pacer = Pacer::new(now_ns(), rate_pps, 32);
    // One ready-made frame per entry of the size pattern; per packet only the flow
    // (UDP source port, outside the IP checksum) and the stamp change.
    let mut templates: Vec<Vec<u8>> = t
        .frame_lens
        .iter()
        .map(|&len| {
            let mut f = vec![0u8; len];
            frame::build(&mut f, len, &t.addresses, 0, 0, 0);
            f
        })
        .collect();
    let meta = PacketMeta::default();
    let mut latency = LatencyRecorder::new();
    let (mut received, mut reordered, mut last_seq, mut bytes_sent) =
        (0u64, 0u64, None::<u64>, 0u64);
    let mut receive = |rcv: &mut PortQueues, latency: &mut LatencyRecorder| {
        let mut batch = RxBatch::new();
        rcv.rx[0].recv(&mut batch);
        let now = epoch.elapsed().as_nanos() as u64;
        for p in &batch {
            if let Some((seq, sent)) = frame::read_stamp(p.data) {
                received += 1;
                latency.record(now as i64 - sent as i64);
                if last_seq.is_some_and(|l| seq < l) {
                    reordered += 1;
                }
                last_seq = Some(last_seq.map_or(seq, |l| l.max(seq)));
            }
        }
        drop(batch);
        rcv.rx[0].release();
    };
    let end = now_ns() + t.duration.as_nanos() as u64;
    let mut seq = 0u64;
    loop {
        let now = now_ns();
        if now >= end {
            break;
        }
        let due = pacer.due(now);
        let mut staged = 0;
        while staged < due {
            let f = &mut templates[(seq % t.frame_lens.len() as u64) as usize];
            frame::set_flow(f, (seq % u64::from(t.flows.max(1))) as u16);
            frame::stamp(f, seq, now);
            let len = f.len();
            match gen.tx.stage(f, &meta) {
                Ok(()) => {
                    staged += 1;
                    seq += 1;
                    bytes_sent += len as u64;
                }
                // The TX ring is full: the generator is at its limit; send what it has.
                Err(StageError::QueueFull | StageError::TooBig) => break,
            }
        }
        if staged > 0 {
            gen.tx.flush();
            pacer.sent(staged);
        }
        receive(&mut rcv, &mut latency);
    }
    let sent_duration = epoch.elapsed();
    let drain_end = Instant::now() + DRAIN;
    while Instant::now() < drain_end {
        receive(&mut rcv, &mut latency);
    }
    let sent = pacer.total_sent();
    TrialStats {
        trial: Trial {
            requested_pps: rate_pps,
            sent_pps: sent as f64 / sent_duration.as_secs_f64(),
            sent,
            received,
        },
        reordered,
        latency,
        bytes_sent,
    }
}
