//! A guest that fills its transmit queue with chains of 65,535 empty descriptors (all
//! through one indirect table) must not starve another port on the same PMD. Alone in
//! its test binary: it measures a rate.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use virtio_queue::desc::{split::Descriptor, RawDescriptor};
use vm_memory::{Bytes, GuestAddress};
use vsw_datapath::ring::paced_ring_port;
use vsw_datapath::{Datapath, PmdConfig, PortHandle, PortStats};
use vsw_netdev::vhost::open_server;

/// Frames per second the well-behaved port offers.
const RATE: u64 = 20_000;
const TABLE_AT: u64 = 0x20_0000;
const TABLE_LEN: u64 = 65_535;

/// Frames per second the well-behaved port gets through, with or without a hostile
/// guest on the same PMD; and how many of the guest's chains were dropped.
fn good_port_rate(hostile: bool) -> (f64, u64) {
    let mut dp = Datapath::start(PmdConfig {
        cores: vec![0],
        pin: false,
    })
    .unwrap();
    let path = temp(&format!("budget-{hostile}.sock"));
    let (queues, status) = open_server(&path, 0o600, None).unwrap();
    dp.add_port(PortHandle::new(
        1,
        "vm",
        queues,
        Arc::new(PortStats::default()),
    ))
    .unwrap();
    let g = set_up_with(
        &format!("budget-{hostile}"),
        connect(&path),
        VERSION_1 | INDIRECT_DESC,
    );
    let sink = Arc::new(PortStats::default());
    dp.add_port(PortHandle::new(
        2,
        "src",
        paced_ring_port(1, 64, RATE),
        Arc::new(PortStats::default()),
    ))
    .unwrap();
    dp.add_port(PortHandle::new(
        3,
        "sink",
        paced_ring_port(0, 64, 0),
        sink.clone(),
    ))
    .unwrap();
    let mut c = vsw_flow::Pipeline::new();
    c.insert(
        vsw_flow::parse_flow("in_port=2,actions=output:3", &|_: &str| None).unwrap(),
        0,
    );
    let ofproto = vsw_ofproto::Ofproto::new(c);
    ofproto.set_ports(vec![1, 2, 3]);
    dp.set_upcall(ofproto).unwrap();
    let running = Arc::new(AtomicBool::new(true));
    let refill = hostile.then(|| {
        // One indirect table of 65,535 empty descriptors, each pointing on to the next.
        for i in 0..TABLE_LEN {
            let next = if i + 1 < TABLE_LEN { 1 } else { 0 };
            let d = Descriptor::new(BUFS_AT, 0, next * VRING_DESC_F_NEXT, (i + 1) as u16);
            g.mem
                .write_obj(RawDescriptor::from(d), GuestAddress(TABLE_AT + 16 * i))
                .unwrap();
        }
        let d = Descriptor::new(TABLE_AT, (TABLE_LEN * 16) as u32, VRING_DESC_F_INDIRECT, 0);
        g.mem
            .write_obj(RawDescriptor::from(d), GuestAddress(g.rings[1].desc))
            .unwrap();
        let (mem, ring, running) = (g.mem.clone(), g.rings[1], running.clone());
        // Every chain the guest offers is that table, and the ring is kept full.
        std::thread::spawn(move || {
            let mut avail: u16 = 0;
            while running.load(Ordering::Relaxed) {
                let used: u16 = mem.read_obj(GuestAddress(ring.used + 2)).unwrap();
                while avail.wrapping_sub(used) < QSIZE {
                    let slot = ring.avail + 4 + 2 * u64::from(avail % QSIZE);
                    mem.write_obj(0u16, GuestAddress(slot)).unwrap();
                    avail = avail.wrapping_add(1);
                    mem.write_obj(avail, GuestAddress(ring.avail + 2)).unwrap();
                }
                std::thread::sleep(Duration::from_micros(100));
            }
        })
    });
    std::thread::sleep(Duration::from_millis(500));
    let before = sink.view().tx_packets;
    let window = Duration::from_secs(2);
    std::thread::sleep(window);
    let rate = (sink.view().tx_packets - before) as f64 / window.as_secs_f64();
    running.store(false, Ordering::Relaxed);
    if let Some(t) = refill {
        t.join().unwrap();
    }
    let bad = status.bad_chains.load(Ordering::Relaxed);
    drop(dp);
    drop(g);
    (rate, bad)
}

#[test]
fn a_hostile_guest_cannot_starve_another_port_on_its_pmd() {
    let (alone, _) = good_port_rate(false);
    assert!(
        alone > 0.9 * RATE as f64,
        "the port alone should get its {RATE}/s through: {alone}"
    );
    let (beside, dropped) = good_port_rate(true);
    assert!(dropped > 0, "the hostile chains were dropped and counted");
    assert!(
        beside >= 0.9 * alone,
        "beside a hostile guest the port got {beside:.0}/s, alone {alone:.0}/s"
    );
}
