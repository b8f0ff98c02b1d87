//! A datapath on in-memory ports, for the integration tests.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use vsw_datapath::memory::{memory_port_with, memory_port_with_queues, MemoryPeer};
use vsw_datapath::{Datapath, PmdConfig, PortHandle, PortStats, TxOffloads};
use vsw_flow::{parse_flow, Pipeline};
use vsw_ofproto::Ofproto;

/// `max-idle` in these tests: no flow ages out while a test runs.
pub const MAX_IDLE_MS: u64 = 600_000;

pub const WAIT: Duration = Duration::from_secs(10);
pub const QUIET: Duration = Duration::from_millis(200);

pub struct Switch {
    pub dp: Datapath,
    /// The slow path: a learning switch until a test gives rules.
    pub ofproto: Arc<Ofproto>,
    pub peers: Vec<MemoryPeer>,
    pub stats: Vec<Arc<PortStats>>,
}

/// `ports` ports numbered 1.., each with `queues` receive queues, on PMDs with the
/// nominal `cores` (not pinned: the tests share the machine).
pub fn switch_with(ports: u32, queues: usize, cores: &[usize], capacity: usize) -> Switch {
    let dp = Datapath::start(PmdConfig {
        cores: cores.to_vec(),
        pin: false,
    })
    .unwrap();
    let queues = (1..=ports).map(|_| memory_port_with_queues(queues, capacity));
    attach(dp, queues.collect())
}

/// Ports 1.. of these queues on `dp`, a learning switch over them.
fn attach(mut dp: Datapath, ports: Vec<(vsw_datapath::PortQueues, MemoryPeer)>) -> Switch {
    let mut peers = Vec::new();
    let mut stats = Vec::new();
    for (i, (q, peer)) in ports.into_iter().enumerate() {
        let no = i as u32 + 1;
        let s = Arc::new(PortStats::default());
        dp.add_port(PortHandle::new(no, &format!("p{no}"), q, s.clone()))
            .unwrap();
        peers.push(peer);
        stats.push(s);
    }
    let ofproto = learning_switch(&mut dp);
    Switch {
        dp,
        ofproto,
        peers,
        stats,
    }
}

/// Attaches a learning switch (`priority=0,actions=NORMAL`) to `dp`'s ports.
pub fn learning_switch(dp: &mut Datapath) -> Arc<Ofproto> {
    let ofproto = Ofproto::new(Pipeline::learning_switch(0));
    ofproto.set_ports(dp.ports().iter().map(|p| p.no).collect());
    dp.set_upcall(ofproto.clone()).unwrap();
    ofproto
}

/// One port per entry of `offloads` (what its transmit side finishes by itself).
pub fn switch_with_offloads(offloads: &[TxOffloads]) -> Switch {
    let ports = offloads.iter().map(|o| memory_port_with(1, 4096, *o));
    switch_of(ports.collect())
}

/// A learning switch on one PMD over these ports (numbered from 1).
pub fn switch_of(ports: Vec<(vsw_datapath::PortQueues, MemoryPeer)>) -> Switch {
    let dp = Datapath::start(PmdConfig {
        cores: vec![0],
        pin: false,
    })
    .unwrap();
    attach(dp, ports)
}

pub fn switch(ports: u32) -> Switch {
    switch_with(ports, 1, &[0], 4096)
}

/// A new slow path with these rules above the learning switch's NORMAL at priority
/// 0 (what a miss did before rules had tables).
pub fn rules(dp: &mut Datapath, flows: &[&str]) -> Arc<Ofproto> {
    let mut p = Pipeline::learning_switch(1);
    for f in flows {
        p.insert(parse_flow(f, &|_: &str| None).unwrap(), 1);
    }
    let ofproto = Ofproto::new(p);
    ofproto.set_ports(dp.ports().iter().map(|p| p.no).collect());
    dp.set_upcall(ofproto.clone()).unwrap();
    ofproto
}

/// A revalidator pass now (the tests run no revalidator thread: they say when).
pub fn revalidate(dp: &Datapath) {
    dp.revalidate(vsw_datapath::clock::now_ms(), MAX_IDLE_MS)
        .unwrap();
}

/// Replaces `ofproto`'s rules and revalidates, as vswd answers a rule change.
pub fn replace_rules(dp: &mut Datapath, ofproto: &Ofproto, pipeline: Pipeline) {
    ofproto.set_pipeline(pipeline);
    dp.revalidate(vsw_datapath::clock::now_ms(), MAX_IDLE_MS)
        .unwrap();
}

pub fn mac(n: u8) -> [u8; 6] {
    [2, 0, 0, 0, 0, n]
}

/// A UDP frame from host `src` to the host with MAC `dst`, destination port `dport`.
pub fn frame(src: u8, dst: [u8; 6], dport: u16) -> Vec<u8> {
    let mut f =
        vsw_packet::builder::udp4_frame([198, 18, 0, src], [198, 18, 0, dst[5]], 1000, dport, 18);
    f[0..6].copy_from_slice(&dst);
    f[6..12].copy_from_slice(&mac(src));
    f
}

/// Waits (bounded) for a condition the PMD makes true shortly after an event.
pub fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Every frame the peer has been sent within `QUIET` of the last.
pub fn drain(peer: &MemoryPeer) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    while let Some(f) = peer.recv_timeout(QUIET) {
        out.push(f);
    }
    out
}
