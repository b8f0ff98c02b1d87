//! The datapath on in-memory ports: forwarding decisions, counters and reconfiguration.

mod common;

use common::*;

#[test]
fn normal_floods_unknown_then_forwards_learned() {
    let sw = switch(3);
    let (p1, p2, p3) = (&sw.peers[0], &sw.peers[1], &sw.peers[2]);
    let f = frame(1, mac(2), 9);
    p1.send(&f);
    assert_eq!(
        p2.recv_timeout(WAIT).as_deref(),
        Some(&f[..]),
        "unknown destination floods to port 2"
    );
    assert_eq!(
        p3.recv_timeout(WAIT).as_deref(),
        Some(&f[..]),
        "unknown destination floods to port 3"
    );
    assert!(
        p1.try_recv().is_none(),
        "never back out of the port it came in"
    );
    // Port 2 answers: 1 is known now, so only port 1 gets it.
    let back = frame(2, mac(1), 9);
    p2.send(&back);
    assert_eq!(p1.recv_timeout(WAIT).as_deref(), Some(&back[..]));
    assert!(p3.recv_timeout(QUIET).is_none(), "a learned destination");
    // And now 2 is known too: once the revalidator has been (vswd's runs at once when
    // a host is learned), the flow that flooded is gone.
    revalidate(&sw.dp);
    p1.send(&f);
    assert_eq!(p2.recv_timeout(WAIT).as_deref(), Some(&f[..]));
    assert!(
        p3.recv_timeout(QUIET).is_none(),
        "a learned destination is not flooded"
    );
    let s1 = sw.stats[0].view();
    assert_eq!((s1.rx_packets, s1.tx_packets), (2, 1));
    assert_eq!(sw.dp.pmd_stats()[0].upcalls, 3);
}

#[test]
fn drop_rule_drops_and_counts() {
    let mut sw = switch(2);
    let ofproto = rules(
        &mut sw.dp,
        &[
            "priority=100,in_port=1,udp,tp_dst=53,actions=drop",
            "priority=10,actions=output:2",
        ],
    );
    sw.peers[0].send(&frame(1, mac(2), 53));
    let pass = frame(1, mac(2), 54);
    sw.peers[0].send(&pass);
    assert_eq!(
        sw.peers[1].recv_timeout(WAIT).as_deref(),
        Some(&pass[..]),
        "the other flow passes"
    );
    assert!(
        sw.peers[1].recv_timeout(QUIET).is_none(),
        "the dropped flow must not come out"
    );
    sw.dp.push_flow_stats();
    let c = ofproto.pipeline();
    let drop_rule = &c.rules()[0];
    assert_eq!(drop_rule.stats.packets(), 1);
    assert_eq!(drop_rule.stats.bytes(), 60);
    assert_eq!(c.rules()[1].stats.packets(), 1);
}

#[test]
fn malformed_frames_are_counted_drops() {
    let sw = switch(2);
    sw.peers[0].send(&[1, 2, 3]);
    let mut bad_ip = frame(1, mac(2), 1);
    bad_ip[14] = 0x41;
    sw.peers[0].send(&bad_ip);
    let good = frame(1, mac(2), 1);
    sw.peers[0].send(&good);
    assert_eq!(sw.peers[1].recv_timeout(WAIT).as_deref(), Some(&good[..]));
    let s = sw.stats[0].view();
    assert_eq!(s.rx_malformed, 2);
    assert_eq!(s.rx_packets, 3);
}

#[test]
fn removed_port_stops_receiving_and_others_go_on() {
    let mut sw = switch(3);
    rules(&mut sw.dp, &["actions=flood"]);
    sw.dp.remove_port(3).unwrap();
    let f = frame(1, mac(2), 1);
    sw.peers[0].send(&f);
    assert_eq!(sw.peers[1].recv_timeout(WAIT).as_deref(), Some(&f[..]));
    assert!(
        sw.peers[2].recv_timeout(QUIET).is_none(),
        "a removed port gets nothing"
    );
    assert!(sw.dp.remove_port(3).is_err(), "removing twice is an error");
    assert_eq!(sw.dp.ports().len(), 2);
}

#[test]
fn many_packets_arrive_in_order() {
    let mut sw = switch(2);
    rules(&mut sw.dp, &["in_port=1,actions=output:2"]);
    for i in 0..1000u16 {
        sw.peers[0].send(&frame(1, mac(2), i));
        if i % 500 == 499 {
            for j in i - 499..=i {
                let got = sw.peers[1].recv_timeout(WAIT).expect("frame lost");
                assert_eq!(u16::from_be_bytes([got[36], got[37]]), j, "out of order");
            }
        }
    }
    // The PMD counts a batch just after handing it over: wait for the count.
    eventually("1000 packets counted as sent", || {
        sw.stats[1].view().tx_packets == 1000
    });
    assert!(sw.stats[1].view().tx_batches <= 1000);
    assert!(sw.dp.pmd_stats()[0].packets >= 1000);
}
