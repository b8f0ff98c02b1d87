//! `learn(…)` in translation: the rule it makes goes in place while a packet passes
//! (not while revalidating), the packet that made it is not cached, the flow
//! depends on the bits it was made from, and losing the rule makes the flow learn
//! it again.

use std::sync::Arc;

use vsw_datapath::DpAction::Output;
use vsw_datapath::Upcall;
use vsw_flow::{parse_flow, parse_match, Pipeline};
use vsw_ofproto::{Backer, Ofproto};
use vsw_packet::{FlowKey, MacAddr};

fn pipeline(flows: &[&str]) -> Pipeline {
    let mut p = Pipeline::new();
    for f in flows {
        p.insert(parse_flow(f, &|_: &str| None).unwrap(), 1);
    }
    p
}

/// One bridge of `flows`, its ports 1..=3 datapath ports 1..=3.
fn bridge(flows: &[&str]) -> (Arc<Backer>, Arc<Ofproto>) {
    let backer = Backer::new();
    let (slot, o) = Ofproto::join(&backer, "br", pipeline(flows)).unwrap();
    o.set_ports(vec![1, 2, 3]);
    for p in 1..=3 {
        backer.set_port(slot, p, p).unwrap();
    }
    (backer, o)
}

fn frame(in_port: u32, src: u8, dst: u8) -> FlowKey {
    FlowKey {
        in_port,
        dl_src: MacAddr([2, 0, 0, 0, 0, src]),
        dl_dst: MacAddr([2, 0, 0, 0, 0, dst]),
        dl_type: 0x0800,
        ..FlowKey::default()
    }
}

/// The rules of `table` now, as text.
fn rules_of(o: &Ofproto, table: u8) -> Vec<String> {
    o.pipeline()
        .rules()
        .iter()
        .filter(|r| r.spec.table == table)
        .map(|r| vsw_flow::syntax::format_flow(&r.spec))
        .collect()
}

/// The classic MAC-learning switch of `learn` (Open vSwitch's own example).
const MAC_LEARNING: [&str; 2] = [
    "table=0,actions=learn(table=1,hard_timeout=10,NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],\
     output:NXM_OF_IN_PORT[]),resubmit(,1)",
    "table=1,priority=0,actions=flood",
];

#[test]
fn a_learned_rule_forwards_the_replies_and_the_learning_packet_is_not_cached() {
    let (backer, o) = bridge(&MAC_LEARNING);
    let t = backer.translate(&frame(1, 0xa, 0xb), 1_000, true);
    assert!(
        !t.cacheable,
        "its translation saw the tables without its rule"
    );
    let mut outs: Vec<_> = t.actions.clone();
    outs.sort_by_key(|a| format!("{a:?}"));
    assert_eq!(outs, vec![Output(2), Output(3)], "flooded");
    assert_eq!(t.mask.dl_src, MacAddr::BROADCAST, "made from the source");
    let learned = rules_of(&o, 1);
    assert_eq!(
        learned,
        [
            "table=1,hard_timeout=10,priority=32768,dl_dst=02:00:00:00:00:0a,actions=output:1",
            "table=1,priority=0,actions=FLOOD"
        ]
    );
    assert!(o.pipeline().rules().iter().any(|r| r.learned));
    // The next packet finds it in place: cached; and the replies go to port 1.
    assert!(backer.translate(&frame(1, 0xa, 0xb), 1_001, true).cacheable);
    let reply = backer.translate(&frame(2, 0xb, 0xa), 1_002, true);
    assert!(!reply.cacheable, "it learned 0xb");
    assert_eq!(reply.actions, vec![Output(1)]);
    let reply = backer.translate(&frame(2, 0xb, 0xa), 1_003, true);
    assert!(reply.cacheable);
    assert_eq!(reply.actions, vec![Output(1)]);
    // A revalidation finds it in place and changes nothing.
    let g = backer.generation();
    assert!(
        backer
            .translate(&frame(1, 0xa, 0xb), 1_004, false)
            .cacheable
    );
    assert_eq!(backer.generation(), g);
}

#[test]
fn a_flow_whose_learned_rule_went_is_translated_again_and_not_kept() {
    let (backer, o) = bridge(&MAC_LEARNING);
    backer.translate(&frame(1, 0xa, 0xb), 1_000, true);
    let t = backer.translate(&frame(1, 0xa, 0xb), 1_001, true);
    assert!(t.cacheable);
    let made = backer.generation();
    assert!(t.attribution.unchanged_since(made));
    // The learned rule goes (a timeout, a del-flows): the flow that made it is
    // stale, and revalidating it (no packet: nothing learned) does not keep it.
    let mut p = (*o.pipeline()).clone();
    let sel = parse_match("table=1,dl_dst=02:00:00:00:00:0a", &|_: &str| None).unwrap();
    let removed = p.remove_rules(&sel, false);
    assert_eq!(removed.len(), 1);
    o.set_pipeline_removing(p, &removed);
    assert!(!t.attribution.unchanged_since(made));
    let again = backer.translate(&frame(1, 0xa, 0xb), 1_002, false);
    assert!(!again.cacheable, "the revalidator retires it");
    assert_eq!(rules_of(&o, 1).len(), 1, "nothing learned without a packet");
    // The next packet learns it again.
    backer.translate(&frame(1, 0xa, 0xb), 1_003, true);
    assert_eq!(rules_of(&o, 1).len(), 2);
}

#[test]
fn traffic_through_the_learning_flow_restarts_the_learned_rules_hard_timeout() {
    let (backer, o) = bridge(&MAC_LEARNING);
    backer.translate(&frame(1, 0xa, 0xb), 1_000, true);
    let t = backer.translate(&frame(1, 0xa, 0xb), 1_000, true);
    let rule = |o: &Ofproto| {
        o.pipeline()
            .rules()
            .into_iter()
            .find(|r| r.learned)
            .unwrap()
    };
    assert!(
        rule(&o).expired(11_000),
        "hard_timeout=10 from its learning"
    );
    t.attribution.credit(3, 192, 9_000);
    assert!(!rule(&o).expired(11_000), "learned again at 9 s");
    assert!(rule(&o).expired(19_000));
    // No packets: nothing restarts.
    t.attribution.credit(0, 0, 15_000);
    assert!(rule(&o).expired(19_000));
}

#[test]
fn a_limit_keeps_rules_out_and_result_dst_says_so() {
    let (backer, o) = bridge(&[
        "table=0,actions=learn(table=1,limit=1,cookie=0x5,result_dst=NXM_NX_REG0[0],\
         NXM_OF_ETH_SRC[]),resubmit(,2)",
        "table=2,reg0=1,actions=output:2",
        "table=2,priority=0,actions=output:3",
    ]);
    let first = backer.translate(&frame(1, 0xa, 0xb), 1_000, true);
    assert_eq!(first.actions, vec![Output(2)], "learned: result 1");
    let second = backer.translate(&frame(1, 0xc, 0xb), 1_001, true);
    assert_eq!(second.actions, vec![Output(3)], "over the limit: result 0");
    // Cached: room is made only by a rule going, which looks at every flow.
    assert!(second.cacheable);
    assert_eq!(
        rules_of(&o, 1),
        ["cookie=0x5,table=1,priority=32768,dl_src=02:00:00:00:00:0a,actions=drop"]
    );
    // The first source is in place: its result is 1 again, and it is cached.
    let again = backer.translate(&frame(1, 0xa, 0xb), 1_002, true);
    assert_eq!(
        (again.actions.clone(), again.cacheable),
        (vec![Output(2)], true)
    );
}

#[test]
fn a_learn_while_the_rules_are_being_changed_is_left_to_the_next_packet() {
    let (backer, o) = bridge(&MAC_LEARNING);
    {
        let _changing = o.writing_rules();
        let t = backer.translate(&frame(1, 0xa, 0xb), 1_000, true);
        assert!(!t.cacheable);
        assert_eq!(rules_of(&o, 1).len(), 1, "nothing learned");
    }
    assert!(!backer.translate(&frame(1, 0xa, 0xb), 1_001, true).cacheable);
    assert_eq!(rules_of(&o, 1).len(), 2);
}

#[test]
fn a_learn_across_a_patch_port_puts_its_rule_in_the_peers_bridge() {
    let backer = Backer::new();
    let (a, oa) = Ofproto::join(&backer, "a", pipeline(&["actions=output:2"])).unwrap();
    let (b, ob) = Ofproto::join(&backer, "b", pipeline(&MAC_LEARNING)).unwrap();
    oa.set_ports(vec![1, 2]);
    ob.set_ports(vec![1, 2]);
    for (slot, of, dp) in [(a, 1, 1), (a, 2, 2), (b, 1, 3), (b, 2, 4)] {
        backer.set_port(slot, of, dp).unwrap();
    }
    backer.set_patch(a, 2, "pa", "pb");
    backer.set_patch(b, 2, "pb", "pa");
    let t = backer.translate(&frame(1, 0xa, 0xb), 1_000, true);
    assert!(!t.cacheable);
    assert_eq!(rules_of(&ob, 1).len(), 2, "learned in b, from b's port 2");
    assert!(rules_of(&ob, 1)[0].contains("actions=output:2"));
    assert!(rules_of(&oa, 1).is_empty());
    assert!(backer.translate(&frame(1, 0xa, 0xb), 1_001, true).cacheable);
}

#[test]
fn a_packet_out_learns_as_a_packet_passing_does() {
    let (_backer, o) = bridge(&["table=1,priority=0,actions=drop"]);
    let actions = vsw_flow::parse_actions(
        "learn(table=1,NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],output:NXM_OF_IN_PORT[]),output:2",
        &|_: &str| None,
        &vsw_flow::Match::any(),
    )
    .unwrap();
    let key = vsw_flow::MatchKey::from(frame(1, 0xa, 0xb));
    let x = o.translate_packet_out(&key, &actions, 1_000);
    assert_eq!(x.actions, vec![Output(2)]);
    assert_eq!(rules_of(&o, 1).len(), 2, "{:?}", rules_of(&o, 1));
}
