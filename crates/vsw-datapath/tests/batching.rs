//! Time-based transmit batching through the datapath: intervals per switch and per
//! port, held packets leave by their deadline, changes apply while traffic flows,
//! and the PMD's sleep never holds a packet past its deadline.

mod common;

use std::time::{Duration, Instant};

use common::*;
use vsw_datapath::txbatch::{FlushSetting, IntervalSource};

#[test]
fn a_held_packet_leaves_by_its_deadline_and_not_before() {
    let mut sw = switch(2);
    rules(&mut sw.dp, &["in_port=1,actions=output:2"]);
    sw.dp.set_tx_flush_interval(300_000).unwrap();
    // The first packet after a quiet time leaves at once; the next one waits for the
    // interval since that send.
    sw.peers[0].send(&frame(1, mac(2), 1));
    let first = sw.peers[1].recv_timeout(WAIT).expect("first packet");
    let sent_at = Instant::now();
    assert_eq!(u16::from_be_bytes([first[36], first[37]]), 1);
    sw.peers[0].send(&frame(1, mac(2), 2));
    assert!(
        sw.peers[1]
            .recv_timeout(Duration::from_millis(150))
            .is_none(),
        "the second packet left before its batch was due"
    );
    sw.peers[1].recv_timeout(WAIT).expect("second packet");
    let waited = sent_at.elapsed();
    assert!(
        waited < Duration::from_millis(300 + 200),
        "held {waited:?}, past its 300 ms interval"
    );
    eventually("the wait counted", || {
        let s = sw.stats[1].view();
        s.tx_packets == 2 && s.tx_wait_us_max >= 150_000
    });
    let s = sw.stats[1].view();
    assert_eq!(s.tx_batch_hist[0], 2, "two batches of one");
    assert!(s.tx_wait_us_max < 500_000);
}

#[test]
fn a_port_setting_overrides_the_switch_and_changes_apply_at_once() {
    let mut sw = switch(3);
    rules(&mut sw.dp, &["in_port=1,actions=output:2,output:3"]);
    sw.dp.set_tx_flush_interval(1_000_000).unwrap();
    sw.dp.set_port_tx_flush(3, FlushSetting::Port(0)).unwrap();
    assert_eq!(sw.dp.tx_flush_of(2), (1_000_000, IntervalSource::Switch));
    assert_eq!(sw.dp.tx_flush_of(3), (0, IntervalSource::Port));
    sw.peers[0].send(&frame(1, mac(2), 1));
    sw.peers[1].recv_timeout(WAIT).expect("port 2, first");
    sw.peers[2].recv_timeout(WAIT).expect("port 3, first");
    sw.peers[0].send(&frame(1, mac(2), 2));
    sw.peers[2]
        .recv_timeout(WAIT)
        .expect("port 3 sends at once (interval 0)");
    assert!(
        sw.peers[1]
            .recv_timeout(Duration::from_millis(100))
            .is_none(),
        "port 2 holds it (1 s)"
    );
    // Shortening the switch-wide interval releases what port 2 holds.
    let t = Instant::now();
    sw.dp.set_tx_flush_interval(0).unwrap();
    sw.peers[1]
        .recv_timeout(WAIT)
        .expect("released by the change");
    assert!(t.elapsed() < Duration::from_millis(500));
    sw.dp.set_port_tx_flush(3, FlushSetting::Switch).unwrap();
    assert_eq!(sw.dp.tx_flush_of(3), (0, IntervalSource::Switch));
}

#[test]
fn a_burst_leaves_in_full_batches() {
    let mut sw = switch(2);
    rules(&mut sw.dp, &["in_port=1,actions=output:2"]);
    sw.dp.set_tx_flush_interval(200_000).unwrap();
    sw.peers[0].send(&frame(1, mac(2), 0));
    sw.peers[1].recv_timeout(WAIT).expect("first");
    for i in 1..=100 {
        sw.peers[0].send(&frame(1, mac(2), i));
    }
    for _ in 0..100 {
        sw.peers[1]
            .recv_timeout(WAIT)
            .expect("every packet of the burst");
    }
    eventually("101 packets counted", || {
        sw.stats[1].view().tx_packets == 101
    });
    let s = sw.stats[1].view();
    // Full batches of 32 leave at once; only the rest waits for the interval.
    assert!(s.tx_batch_hist[5] >= 2, "{:?}", s.tx_batch_hist);
    assert!(
        s.tx_batches <= 8,
        "{} batches for 101 packets",
        s.tx_batches
    );
}

#[test]
fn a_sleeping_pmd_still_sends_on_time_and_wakes_for_traffic() {
    let mut sw = switch(2);
    rules(&mut sw.dp, &["in_port=1,actions=output:2"]);
    sw.dp.set_pmd_sleep_max(500).unwrap();
    sw.dp.set_tx_flush_interval(100_000).unwrap();
    std::thread::sleep(Duration::from_millis(50)); // let it fall asleep (idle)
    sw.peers[0].send(&frame(1, mac(2), 1));
    sw.peers[1].recv_timeout(WAIT).expect("woken by traffic");
    let t = Instant::now();
    sw.peers[0].send(&frame(1, mac(2), 2));
    sw.peers[1].recv_timeout(WAIT).expect("second");
    assert!(
        t.elapsed() < Duration::from_millis(100 + 150),
        "a sleep held a packet past its interval: {:?}",
        t.elapsed()
    );
    eventually("sleep counted", || sw.dp.pmd_stats()[0].sleep_cycles > 0);
}

/// A transmit queue whose receiver may poll (as a vhost-user guest), switched by the
/// test.
struct PollingReceiver {
    inner: Box<dyn vsw_datapath::TxQueue>,
    polls: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl vsw_datapath::TxQueue for PollingReceiver {
    fn offloads(&self) -> vsw_datapath::TxOffloads {
        self.inner.offloads()
    }
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
    fn receiver_may_poll(&self) -> bool {
        true
    }
    fn receiver_polls(&self) -> bool {
        self.polls.load(std::sync::atomic::Ordering::Relaxed)
    }
}

#[test]
fn auto_batches_only_while_the_receiver_waits_for_notifications() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use vsw_datapath::memory::memory_port;
    use vsw_datapath::{PortHandle, PortStats};
    let mut sw = switch(1);
    let (mut q, peer) = memory_port(1024);
    let polls = Arc::new(AtomicBool::new(false));
    q.tx = Box::new(PollingReceiver {
        inner: q.tx,
        polls: polls.clone(),
    });
    q.tx_factory = None;
    sw.dp
        .add_port(PortHandle::new(
            2,
            "guest",
            q,
            Arc::new(PortStats::default()),
        ))
        .unwrap();
    rules(&mut sw.dp, &["in_port=1,actions=output:2"]);
    sw.dp.set_tx_flush_interval(300_000).unwrap();
    sw.dp.set_port_tx_flush(2, FlushSetting::Auto).unwrap();
    sw.peers[0].send(&frame(1, mac(2), 1));
    peer.recv_timeout(WAIT).expect("first");
    // The guest wants interrupts: the interval applies.
    sw.peers[0].send(&frame(1, mac(2), 2));
    assert!(
        peer.recv_timeout(Duration::from_millis(150)).is_none(),
        "held for the interval"
    );
    peer.recv_timeout(WAIT).expect("second, at its deadline");
    // The guest polls: nothing waits.
    polls.store(true, Ordering::Relaxed);
    sw.peers[0].send(&frame(1, mac(2), 3));
    let t = Instant::now();
    peer.recv_timeout(WAIT).expect("third");
    assert!(
        t.elapsed() < Duration::from_millis(100),
        "a polling receiver paid the interval: {:?}",
        t.elapsed()
    );
}
