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

/// A flow installed without a packet (`Datapath::install_flows`, for entries a kernel
/// fast path kept forwarding across a restart) is cached by the PMD that polls its
/// port, translated by the rules, counted as no upcall; its first packet hits it. A
/// long list is taken a little at a time, all of it in the end.
#[test]
fn installed_flows_are_cached_without_a_packet() {
    let mut sw = switch(2);
    sw.dp.set_emc_insert_inv_prob(0).unwrap();
    // A rule on the UDP source port makes every source port a megaflow of its own.
    rules(
        &mut sw.dp,
        &[
            "in_port=1,udp,tp_src=1,actions=drop",
            "in_port=1,actions=output:2",
        ],
    );
    let f = frame(1, mac(2), 7);
    let mut key = vsw_packet::FlowKey::default();
    vsw_packet::extract(&f, 1, None, &mut key).unwrap();
    // 100 keys of port 1 (more than one iteration takes), one of a port no PMD polls.
    let mut keys: Vec<_> = (0..100u16)
        .map(|i| vsw_packet::FlowKey {
            tp_src: 2000 + i,
            ..key
        })
        .collect();
    keys.push(key);
    keys.push(vsw_packet::FlowKey { in_port: 9, ..key });
    assert_eq!(
        sw.dp.install_flows(keys),
        101,
        "the one of port 9 is left out"
    );
    eventually("the 101 flows cached", || sw.dp.dump_flows().len() == 101);
    let flows = sw.dp.dump_flows();
    assert!(
        flows.iter().any(|fl| fl.key == key),
        "the installed key's flow is there"
    );
    assert!(flows.iter().all(|fl| fl.key.in_port == 1));
    assert_eq!(sw.dp.pmd_stats()[0].upcalls, 0, "installs are not upcalls");
    sw.peers[0].send(&f);
    assert!(sw.peers[1].recv_timeout(WAIT).is_some());
    eventually("the packet counted", || sw.dp.pmd_stats()[0].packets == 1);
    let s = sw.dp.pmd_stats()[0];
    assert_eq!(
        (s.upcalls, s.megaflow_hits),
        (0, 1),
        "it hit the installed flow"
    );
}
