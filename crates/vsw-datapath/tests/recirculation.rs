//! Recirculation through the whole datapath: a packet looked up again on the same
//! PMD, within its batch, by its `recirc_id` and `dp_hash`.

mod common;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use common::*;
use vsw_datapath::{DpAction, NoAttribution, Translation, Upcall, MAX_RECIRC_DEPTH};
use vsw_flow::Pipeline;
use vsw_ofproto::{Backer, Ofproto};
use vsw_packet::FlowKey;

/// A UDP frame of host 1 to host 2 from source port `sport`.
fn connection(sport: u16) -> Vec<u8> {
    let mut f = vsw_packet::builder::udp4_frame([198, 18, 0, 1], [198, 18, 0, 2], sport, 53, 18);
    f[0..6].copy_from_slice(&mac(2));
    f[6..12].copy_from_slice(&mac(1));
    f
}

/// `sw`'s ports as the only bridge of a backer with these rules and groups.
fn bridge(sw: &mut Switch, groups: &[&str], flows: &[&str]) -> Arc<Backer> {
    let mut p = Pipeline::new();
    for g in groups {
        let spec = vsw_flow::parse_group(g, &|_: &str| None).unwrap();
        p.set_group(spec, false, 1).unwrap();
    }
    for f in flows {
        p.insert(vsw_flow::parse_flow(f, &|_: &str| None).unwrap(), 1);
    }
    let backer = Backer::new();
    let (slot, ofproto) = Ofproto::join(&backer, "br", p).unwrap();
    let ports: Vec<u32> = sw.dp.ports().iter().map(|p| p.no).collect();
    ofproto.set_ports(ports.clone());
    for no in ports {
        backer.set_port(slot, no, no).unwrap();
    }
    sw.dp.set_upcall(backer.clone()).unwrap();
    backer
}

#[test]
fn a_select_group_spreads_connections_by_the_datapaths_hash_in_few_flows() {
    let mut sw = switch(3);
    let _backer = bridge(
        &mut sw,
        &["group_id=1,type=select,bucket=actions=output:2,bucket=actions=mod_tp_dst:99,output:3"],
        &["in_port=1,actions=group:1"],
    );
    // One packet first: its two passes' upcalls, then at most one more per hash
    // slot in any batch — within a batch's budget of upcalls, so none is lost.
    sw.peers[0].send(&connection(999));
    eventually("the first packet out", || {
        sw.peers[1..].iter().any(|p| p.try_recv().is_some())
    });
    let connections = 200u16;
    let mut first_round = HashMap::new();
    for round in 0..2 {
        for sport in 1000..1000 + connections {
            sw.peers[0].send(&connection(sport));
        }
        // Every connection out of one bucket, the same one each round.
        let mut at: HashMap<u16, usize> = HashMap::new();
        let mut got = 0;
        eventually("every connection out of a bucket", || {
            for (i, peer) in sw.peers[1..].iter().enumerate() {
                while let Some(f) = peer.try_recv() {
                    let sport = u16::from_be_bytes([f[34], f[35]]);
                    let dport = u16::from_be_bytes([f[36], f[37]]);
                    assert_eq!(dport, if i == 0 { 53 } else { 99 }, "each bucket's actions");
                    assert!(at.insert(sport, i).is_none(), "{sport} twice");
                    got += 1;
                }
            }
            got == connections
        });
        if round == 1 {
            assert_eq!(at, first_round, "each connection keeps its bucket");
        }
        first_round = at.clone();
        let per_bucket = at.values().filter(|b| **b == 0).count();
        assert!(
            (50..150).contains(&per_bucket),
            "round {round}: {per_bucket} of {connections} in the first bucket"
        );
    }
    let stats = sw.dp.pmd_stats();
    let recirculations: u64 = stats.iter().map(|p| p.recirculations).sum();
    assert_eq!(
        recirculations,
        2 * u64::from(connections) + 1,
        "one per packet"
    );
    // One flow for the first pass; the second pass's by the runs of hash slots
    // each bucket holds — two equal buckets, one half of the slots each: one flow
    // a bucket, whatever the connections.
    let flows = sw.dp.dump_flows();
    let (first, second): (Vec<_>, Vec<_>) = flows.iter().partition(|f| f.key.recirc_id == 0);
    assert_eq!(first.len(), 1, "{first:?}");
    assert!(
        matches!(first[0].actions[..], [DpAction::Hash, DpAction::Recirc(_)]),
        "{:?}",
        first[0].actions
    );
    assert_eq!(second.len(), 2, "{second:?}");
    let slots = vsw_ofproto::xlate::hash_slots(2);
    let masks: BTreeSet<u32> = second.iter().map(|f| f.matcher.mask().dp_hash).collect();
    assert_eq!(masks, BTreeSet::from([slots / 2]));
}

/// A slow path whose every pass recirculates again: a loop no translation should
/// make, which the datapath must still end.
struct Loop;

impl Upcall for Loop {
    fn generation(&self) -> u64 {
        0
    }

    fn translate(&self, key: &FlowKey, _: u64, _: bool) -> Translation {
        let mut actions = vec![DpAction::Recirc(key.recirc_id + 1)];
        if key.recirc_id == 0 {
            // What the first pass sends survives the loop after it.
            actions.insert(0, DpAction::Output(2));
        }
        Translation {
            mask: FlowKey {
                recirc_id: u32::MAX,
                ..FlowKey::default()
            },
            actions,
            headers: Vec::new(),
            attribution: Arc::new(NoAttribution),
            generation: 0,
            rx_port: None,
            cacheable: true,
        }
    }
}

#[test]
fn a_recirculation_loop_is_cut_at_the_depth_limit_and_counted() {
    let mut sw = switch(2);
    sw.dp.set_upcall(Arc::new(Loop)).unwrap();
    for sport in 0..3 {
        sw.peers[0].send(&connection(2000 + sport));
        assert!(
            sw.peers[1].recv_timeout(WAIT).is_some(),
            "the first pass's output"
        );
    }
    eventually("the loops counted", || {
        let s = sw.dp.pmd_stats();
        s.iter().map(|p| p.recirculations).sum::<u64>() == 3 * MAX_RECIRC_DEPTH as u64
            && s.iter().map(|p| p.lost).sum::<u64>() == 3
    });
    // Each pass one flow (the first, then one per depth), the loop's last step none.
    let passes: BTreeSet<u32> = sw.dp.dump_flows().iter().map(|f| f.key.recirc_id).collect();
    assert_eq!(passes, (0..=MAX_RECIRC_DEPTH as u32).collect());
}
