//! Two datapaths (two bridges of one vswd) joined by a pair of patch ports: a frame
//! into one bridge's port comes out of the other bridge's, and back.

use std::sync::Arc;
use std::time::Duration;

use vsw_datapath::memory::{memory_port, MemoryPeer};
use vsw_datapath::{Datapath, PmdConfig, PortHandle, PortStats};
use vsw_flow::Pipeline;
use vsw_ofproto::Ofproto;

/// A learning switch with a memory port (1) and patch port `patch` (2) to `peer`.
fn bridge(patch: &str, peer: &str) -> (Datapath, Arc<Ofproto>, MemoryPeer) {
    let mut dp = Datapath::start(PmdConfig {
        cores: vec![0],
        pin: false,
    })
    .unwrap();
    let (q, host) = memory_port(1024);
    dp.add_port(PortHandle::new(
        1,
        "host",
        q,
        Arc::new(PortStats::default()),
    ))
    .unwrap();
    let q = vsw_netdev::patch::open(patch, peer).unwrap();
    dp.add_port(PortHandle::new(2, patch, q, Arc::new(PortStats::default())))
        .unwrap();
    let ofproto = Ofproto::new(Pipeline::learning_switch(0));
    ofproto.set_ports(vec![1, 2]);
    dp.set_upcall(ofproto.clone()).unwrap();
    (dp, ofproto, host)
}

fn frame(src: u8, dst: [u8; 6]) -> Vec<u8> {
    let mut f = vsw_packet::builder::udp4_frame([198, 18, 0, src], [198, 18, 0, 9], 1000, 7, 18);
    f[0..6].copy_from_slice(&dst);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, src]);
    f
}

#[test]
fn a_patch_joins_two_bridges_both_ways() {
    let (_a, _oa, host_a) = bridge("vsw-tpatch-a", "vsw-tpatch-b");
    let (_b, _ob, host_b) = bridge("vsw-tpatch-b", "vsw-tpatch-a");
    let wait = Duration::from_secs(10);
    // Flooded across (nobody learned yet).
    let out = frame(1, [0xff; 6]);
    host_a.send(&out);
    assert_eq!(host_b.recv_timeout(wait).as_deref(), Some(&out[..]));
    // The answer, to the address learned on the patch.
    let back = frame(2, [2, 0, 0, 0, 0, 1]);
    host_b.send(&back);
    assert_eq!(host_a.recv_timeout(wait).as_deref(), Some(&back[..]));
}
