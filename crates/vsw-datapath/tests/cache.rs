//! The caches in front of the slow path (exact-match cache, datapath flows): hits
//! counted, and never a stale answer after a change.

mod common;

use common::*;

#[test]
fn repeated_packets_hit_the_cache_and_a_rule_change_takes_effect_at_once() {
    let mut sw = switch(3);
    sw.dp.set_emc_insert_inv_prob(1).unwrap();
    let ofproto = rules(&mut sw.dp, &["in_port=1,actions=output:2"]);
    let f = frame(1, mac(2), 7);
    for _ in 0..50 {
        sw.peers[0].send(&f);
        assert!(sw.peers[1].recv_timeout(WAIT).is_some());
    }
    eventually("50 packets counted", || sw.dp.pmd_stats()[0].packets == 50);
    let s = sw.dp.pmd_stats()[0];
    assert_eq!(s.upcalls, 1, "only the first was translated");
    assert_eq!(s.emc_hits, 49);
    // The cached flow follows the new rule immediately: the revalidator retired it
    // before the change returned.
    let mut p = (*ofproto.pipeline()).clone();
    p.insert(
        vsw_flow::parse_flow("in_port=1,actions=output:3", &|_: &str| None).unwrap(),
        2,
    );
    replace_rules(&mut sw.dp, &ofproto, p);
    sw.peers[0].send(&f);
    assert!(
        sw.peers[2].recv_timeout(WAIT).is_some(),
        "the new rule applies"
    );
    assert!(
        sw.peers[1].recv_timeout(QUIET).is_none(),
        "the cached answer is gone"
    );
}

#[test]
fn insertion_off_means_every_packet_goes_to_the_megaflows() {
    let mut sw = switch(2);
    sw.dp.set_emc_insert_inv_prob(0).unwrap();
    rules(&mut sw.dp, &["in_port=1,actions=output:2"]);
    for _ in 0..20 {
        sw.peers[0].send(&frame(1, mac(2), 7));
    }
    eventually("20 packets counted", || sw.dp.pmd_stats()[0].packets == 20);
    let s = sw.dp.pmd_stats()[0];
    assert_eq!((s.emc_hits, s.megaflow_hits, s.upcalls), (0, 19, 1));
    assert_eq!(s.avg_subtable_lookups(), Some(1.0));
}
