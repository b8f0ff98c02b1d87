//! Several PMDs: queue placement, output from many PMDs to one port, MAC learning
//! across PMDs, PMDs coming and going under traffic.

mod common;

use std::collections::HashMap;

use common::*;
use vsw_datapath::RxqAssign;

fn placement(sw: &Switch) -> HashMap<usize, Vec<(String, usize)>> {
    sw.dp
        .rxq_show()
        .into_iter()
        .map(|p| {
            (
                p.core,
                p.queues.into_iter().map(|q| (q.port, q.queue)).collect(),
            )
        })
        .collect()
}

#[test]
fn queues_spread_over_pmds_and_every_packet_arrives_in_order() {
    let mut sw = switch_with(2, 2, &[0, 1], 8192);
    sw.dp.set_rxq_assign(RxqAssign::RoundRobin).unwrap();
    let p = placement(&sw);
    assert_eq!(p[&0], vec![("p1".to_string(), 0), ("p2".to_string(), 0)]);
    assert_eq!(p[&1], vec![("p1".to_string(), 1), ("p2".to_string(), 1)]);
    rules(&mut sw.dp, &["in_port=1,actions=output:2"]);
    // Queue q carries UDP destination ports q*10000 + sequence.
    for i in 0..1000u16 {
        for q in 0..2u16 {
            sw.peers[0].send_to(q as usize, &frame(1, mac(2), q * 10000 + i));
        }
    }
    let mut next = [0u16; 2];
    for _ in 0..2000 {
        let f = sw.peers[1].recv_timeout(WAIT).expect("a frame was lost");
        let d = u16::from_be_bytes([f[36], f[37]]);
        let q = (d / 10000) as usize;
        assert_eq!(d % 10000, next[q], "queue {q} out of order");
        next[q] += 1;
    }
    let stats = sw.dp.pmd_stats();
    eventually("both PMDs counted their packets", || {
        sw.dp.pmd_stats().iter().map(|s| s.packets).sum::<u64>() == 2000
    });
    assert!(stats.iter().all(|s| s.packets > 0), "both PMDs worked");
}

#[test]
fn a_host_learned_by_one_pmd_is_known_to_the_others() {
    let mut sw = switch_with(3, 1, &[0, 1], 4096);
    sw.dp.set_rxq_assign(RxqAssign::RoundRobin).unwrap();
    let p = placement(&sw);
    assert_eq!(p[&0], vec![("p1".to_string(), 0), ("p3".to_string(), 0)]);
    assert_eq!(p[&1], vec![("p2".to_string(), 0)]);
    // Host 1 (port 1, PMD 0) talks first: flooded.
    sw.peers[0].send(&frame(1, mac(2), 1));
    assert!(sw.peers[1].recv_timeout(WAIT).is_some());
    assert!(sw.peers[2].recv_timeout(WAIT).is_some());
    // Host 2 answers through PMD 1, which never saw host 1's frames. The first answer
    // may race the news; by the second, PMD 1 knows.
    sw.peers[1].send(&frame(2, mac(1), 2));
    assert!(sw.peers[0].recv_timeout(WAIT).is_some());
    drain(&sw.peers[2]);
    sw.peers[1].send(&frame(2, mac(1), 3));
    assert!(sw.peers[0].recv_timeout(WAIT).is_some());
    assert!(
        sw.peers[2].recv_timeout(QUIET).is_none(),
        "PMD 1 flooded a frame to a host PMD 0 had learned"
    );
}

#[test]
fn a_pinned_queue_isolates_its_pmd() {
    let mut sw = switch_with(3, 1, &[0, 1], 4096);
    sw.dp.set_rxq_affinity(1, vec![(0, 1)]).unwrap();
    let view = sw.dp.rxq_show();
    let core1 = view.iter().find(|p| p.core == 1).unwrap();
    assert!(core1.isolated);
    assert_eq!(core1.queues.len(), 1);
    assert!(core1.queues[0].pinned && core1.queues[0].port == "p1");
    let core0 = view.iter().find(|p| p.core == 0).unwrap();
    assert!(!core0.isolated);
    assert_eq!(core0.queues.len(), 2);
    // A queue that does not exist is refused and nothing changes.
    let e = sw.dp.set_rxq_affinity(2, vec![(3, 0)]).unwrap_err();
    assert!(e.to_string().contains("queue 3 does not exist"), "{e}");
    assert_eq!(sw.dp.rxq_show(), view);
    // Unpinning gives core 1 work again.
    sw.dp.set_rxq_affinity(1, vec![]).unwrap();
    assert!(sw.dp.rxq_show().iter().all(|p| !p.isolated));
}

#[test]
fn pmds_come_and_go_under_traffic_without_losing_a_packet() {
    let mut sw = switch_with(2, 2, &[0], 20_000);
    rules(&mut sw.dp, &["in_port=1,actions=output:2"]);
    let total = 6000u16;
    let sender = {
        let peer = sw.peers.remove(0);
        std::thread::spawn(move || {
            for i in 0..total {
                peer.send_to(usize::from(i % 2), &frame(1, mac(2), i));
                if i % 200 == 0 {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
            }
            peer
        })
    };
    for cores in [vec![0, 1], vec![1], vec![0, 1], vec![0]] {
        sw.dp.set_pmd_cores(cores.clone()).unwrap();
        assert_eq!(sw.dp.pmd_cores(), cores);
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _peer = sender.join().unwrap();
    let mut got = 0;
    while got < total {
        if sw.peers[0].recv_timeout(WAIT).is_none() {
            panic!("only {got} of {total} frames arrived");
        }
        got += 1;
    }
    assert!(sw.peers[0].recv_timeout(QUIET).is_none(), "no duplicates");
}

#[test]
fn queue_usage_is_measured() {
    let mut sw = switch_with(2, 1, &[0], 4096);
    rules(&mut sw.dp, &["in_port=1,actions=output:2"]);
    for i in 0..100 {
        sw.peers[0].send(&frame(1, mac(2), i));
    }
    drain(&sw.peers[1]);
    eventually("a usage figure for p1", || {
        sw.dp.rxq_show()[0]
            .queues
            .iter()
            .any(|q| q.port == "p1" && q.usage_percent.is_some_and(|u| u > 0.0))
    });
    sw.dp.rebalance().unwrap();
}

#[test]
fn the_flow_limit_bounds_what_a_pmd_caches() {
    let mut sw = switch(2);
    sw.dp.set_flow_limit(100).unwrap();
    // 1,000 hosts behind port 1, each its own datapath flow (NORMAL matches the
    // source address).
    let host = |k: u16| {
        let mut f = frame(1, mac(2), 7);
        f[6..12].copy_from_slice(&[6, 0, 0, 0, (k >> 8) as u8, k as u8]);
        f
    };
    for k in 0..1000 {
        sw.peers[0].send(&host(k));
        // Paced by the switch, so that frames never pile up in the test's channels.
        eventually("the switch took the frame", || {
            sw.stats[0].view().rx_packets == u64::from(k) + 1
        });
    }
    let s = sw.dp.pmd_stats()[0];
    assert_eq!(s.upcalls, 1000, "{s:?}");
    assert!(sw.dp.flow_count() <= 100, "{} flows", sw.dp.flow_count());
    assert!(s.uncached_upcalls >= 900, "{s:?}");
    // Every frame was forwarded all the same (flooded: host 2 is not known).
    let got = drain(&sw.peers[1]);
    assert_eq!(got.len(), 1000);
    // And counted on the rule, cached or not.
    sw.dp.push_flow_stats();
    assert_eq!(sw.ofproto.pipeline().rules()[0].stats.packets(), 1000);
}

#[test]
fn a_failed_pmd_never_keeps_a_change_waiting() {
    use std::time::{Duration, Instant};
    let mut sw = switch_with(2, 1, &[0, 1], 1024);
    assert!(sw.dp.failed_pmd().is_none());
    let started = Instant::now();
    let e = sw.dp.inject_pmd_failure(1).unwrap_err();
    assert!(
        matches!(&e, vsw_datapath::DatapathError::PmdFailed { core: 1, why } if why.contains("injected")),
        "{e}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(sw.dp.failed_pmd().map(|(core, _)| core), Some(1));
    // Every later change says so at once, instead of waiting out the timeout.
    let started = Instant::now();
    let e = sw
        .dp
        .set_upcall(std::sync::Arc::new(vsw_datapath::DropAll))
        .unwrap_err();
    assert!(e.to_string().contains("core 1"), "{e}");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
}

/// A transmit queue that says which thread closed (dropped) it.
struct WhereClosed {
    inner: Box<dyn vsw_datapath::TxQueue>,
    closed_on: std::sync::Arc<std::sync::Mutex<Option<String>>>,
}

impl vsw_datapath::TxQueue for WhereClosed {
    fn stage(
        &mut self,
        data: &[u8],
        meta: &vsw_datapath::PacketMeta,
    ) -> Result<(), vsw_datapath::StageError> {
        self.inner.stage(data, meta)
    }

    fn pending(&self) -> usize {
        self.inner.pending()
    }

    fn flush(&mut self) -> usize {
        self.inner.flush()
    }
}

impl Drop for WhereClosed {
    fn drop(&mut self) {
        let me = std::thread::current();
        *self.closed_on.lock().unwrap() = Some(me.name().unwrap_or("unnamed").to_string());
    }
}

#[test]
fn a_removed_ports_transmit_queue_is_closed_by_its_last_handle_never_by_a_pmd() {
    use std::sync::{Arc, Mutex};
    let mut sw = switch_with(2, 1, &[0], 1024);
    let (q, peer) = vsw_datapath::memory::memory_port_with_queues(1, 1024);
    let closed_on = Arc::new(Mutex::new(None));
    let queues = vsw_datapath::PortQueues {
        rx: q.rx,
        tx: Box::new(WhereClosed {
            inner: q.tx,
            closed_on: closed_on.clone(),
        }),
        // A device that can open more queues: each PMD holds one of its own (one PMD
        // here, so none more is opened).
        tx_factory: Some(Box::new(|| Err(std::io::Error::other("no more queues")))),
    };
    let stats = Arc::new(vsw_datapath::PortStats::default());
    sw.dp
        .add_port(vsw_datapath::PortHandle::new(3, "p3", queues, stats))
        .unwrap();
    // The port is flooded to: the PMD holds its transmit queue.
    sw.ofproto = learning_switch(&mut sw.dp);
    sw.peers[0].send(&frame(1, [0xff; 6], 7));
    assert!(
        peer.recv_timeout(WAIT).is_some(),
        "the flood reaches the new port"
    );
    let handle = sw.dp.remove_port(3).unwrap();
    assert_eq!(
        *closed_on.lock().unwrap(),
        None,
        "the PMD gave the queue back instead of closing it (closing can wait in the kernel)"
    );
    std::thread::Builder::new()
        .name("control".into())
        .spawn(move || drop(handle))
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(closed_on.lock().unwrap().as_deref(), Some("control"));
}
