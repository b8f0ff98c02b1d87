use super::*;
use crate::syntax::{parse_flow, parse_match};
use crate::Action;
use proptest::prelude::*;
use vsw_packet::{EtherType, FlowKey};

fn no_names(_: &str) -> Option<u32> {
    None
}

fn add(c: &mut Classifier, text: &str) {
    c.insert(parse_flow(text, &no_names).unwrap(), 0);
}

fn udp_key(in_port: u32, dport: u16) -> MatchKey {
    FlowKey {
        in_port,
        dl_type: EtherType::IPV4,
        nw_proto: 17,
        nw_dst: 0xc612_0002,
        tp_dst: dport,
        ..FlowKey::default()
    }
    .into()
}

#[test]
fn highest_priority_wins() {
    let mut c = Classifier::new();
    add(&mut c, "priority=10,ip,actions=output:3");
    add(&mut c, "priority=100,in_port=1,udp,tp_dst=53,actions=drop");
    add(&mut c, "priority=50,udp,actions=output:2");
    assert_eq!(c.subtables(), 3);
    let hit = |k| c.lookup(&k).map(|r| r.spec.actions.clone());
    assert_eq!(hit(udp_key(1, 53)), Some(vec![Action::Drop]));
    assert_eq!(hit(udp_key(2, 53)), Some(vec![Action::Output(2)]));
    let mut tcp = udp_key(1, 53);
    tcp.nw_proto = 6;
    assert_eq!(hit(tcp), Some(vec![Action::Output(3)]));
    assert_eq!(hit(MatchKey::default()), None);
}

/// A rule that names no packet_type is for Ethernet frames (Open vSwitch's
/// implied `packet_type=(0,0)`): an IP packet without Ethernet (1,0x800) passes
/// it by for a rule that names its type, or for none.
#[test]
fn a_rule_without_packet_type_takes_ethernet_frames_only() {
    let mut c = Classifier::new();
    add(&mut c, "priority=100,ip,actions=output:1");
    add(&mut c, "priority=50,packet_type=(1,0x800),actions=output:2");
    let mut bare = udp_key(1, 53);
    bare.pipeline.packet_type = crate::packet_type::of_ethertype(EtherType::IPV4);
    let hit = |c: &Classifier, k: &MatchKey| c.lookup(k).map(|r| r.spec.actions.clone());
    assert_eq!(hit(&c, &udp_key(1, 53)), Some(vec![Action::Output(1)]));
    assert_eq!(hit(&c, &bare), Some(vec![Action::Output(2)]));
    let mut wc = MatchKey::default();
    c.lookup_wc(&bare, &mut wc);
    assert_eq!(
        wc.pipeline.packet_type,
        u32::MAX,
        "the answer read the type"
    );
    add(&mut c, "priority=10,actions=output:3");
    bare.pipeline.packet_type = crate::packet_type::of_ethertype(EtherType::IPV6);
    assert_eq!(hit(&c, &bare), None);
}

#[test]
fn equal_priorities_give_one_of_the_matching_rules() {
    let mut c = Classifier::new();
    add(&mut c, "priority=5,udp,actions=output:1");
    add(&mut c, "priority=5,in_port=1,actions=output:2");
    add(&mut c, "priority=4,actions=output:3");
    let got = &c.lookup(&udp_key(1, 9)).unwrap().spec.actions;
    assert!(
        *got == vec![Action::Output(1)] || *got == vec![Action::Output(2)],
        "{got:?}"
    );
}

#[test]
fn many_rules_in_one_subtable() {
    let mut c = Classifier::new();
    for port in 0..1000u16 {
        add(
            &mut c,
            &format!("udp,tp_dst={port},actions=output:{}", port + 1),
        );
    }
    assert_eq!((c.len(), c.subtables()), (1000, 1));
    let r = c.lookup(&udp_key(1, 777)).unwrap();
    assert_eq!(r.spec.actions, vec![Action::Output(778)]);
    assert!(c.lookup(&udp_key(1, 1000)).is_none());
}

#[test]
fn the_search_stops_when_no_later_subtable_can_win() {
    let mut c = Classifier::new();
    add(&mut c, "priority=100,udp,actions=output:1");
    for i in 0..10u32 {
        add(&mut c, &format!("priority=1,in_port={i},ip,actions=drop"));
    }
    add(&mut c, "priority=1,ip,nw_src=1.2.3.4,actions=drop");
    let mut order = SubtableOrder::new(&c);
    let l = c.lookup_ordered(&udp_key(1, 9), &mut order);
    assert_eq!(l.rule.unwrap().spec.priority, 100);
    assert_eq!(l.probes, 1, "a hit in the top subtable ends the search");
}

#[test]
fn the_hit_order_only_swaps_subtables_of_equal_top_priority() {
    let mut c = Classifier::new();
    add(&mut c, "priority=7,in_port=1,actions=output:1");
    add(&mut c, "priority=7,udp,actions=output:2");
    add(&mut c, "priority=9,ip,nw_src=1.2.3.4,actions=output:3");
    let mut order = SubtableOrder::new(&c);
    for _ in 0..10 {
        c.lookup_ordered(&udp_key(2, 1), &mut order);
    }
    order.resort(&c);
    assert_eq!(c.subtables[usize::from(order.order[0])].max_priority, 9);
    // The udp subtable (10 hits) now comes before the in_port one.
    let second = &c.subtables[usize::from(order.order[1])];
    assert_eq!(second.mask.nw_proto, 0xff);
    // A packet both priority-7 rules match gets the first found in the new order,
    // and the search ends there.
    let l = c.lookup_ordered(&udp_key(1, 1), &mut order);
    assert_eq!(l.rule.unwrap().spec.actions, vec![Action::Output(2)]);
    assert_eq!(l.probes, 2);
}

#[test]
fn same_match_and_priority_replaces() {
    let mut c = Classifier::new();
    add(&mut c, "priority=5,in_port=1,actions=drop");
    c.rules()[0].stats.add(3, 300, 1);
    add(&mut c, "priority=5,in_port=1,actions=output:2");
    assert_eq!(c.len(), 1);
    assert_eq!(c.rules()[0].spec.actions, vec![Action::Output(2)]);
    assert_eq!(c.rules()[0].stats.packets(), 0);
    add(&mut c, "priority=6,in_port=1,actions=drop");
    assert_eq!(c.len(), 2);
}

#[test]
fn an_insert_says_which_rule_it_replaced() {
    let mut c = Classifier::new();
    let spec = |t: &str| parse_flow(t, &no_names).unwrap();
    let first = c.insert(spec("priority=5,in_port=1,actions=drop"), 0);
    assert!(first.replaced.is_empty());
    let second = c.insert(spec("priority=5,in_port=1,actions=output:2"), 0);
    assert_eq!(second.replaced.len(), 1);
    assert!(Arc::ptr_eq(&second.replaced[0], &first.rule));
    // Another priority, or another value under the same mask: nothing replaced.
    assert!(c
        .insert(spec("priority=6,in_port=1,actions=drop"), 0)
        .replaced
        .is_empty());
    assert!(c
        .insert(spec("priority=5,in_port=2,actions=drop"), 0)
        .replaced
        .is_empty());
    assert_eq!(c.len(), 3);
    let found = c.find_exact(&second.rule.spec.matcher, 5).unwrap();
    assert!(Arc::ptr_eq(found, &second.rule));
}

#[test]
fn del_flows_non_strict_and_strict() {
    let mut c = Classifier::new();
    add(&mut c, "priority=5,in_port=1,udp,actions=drop");
    add(&mut c, "priority=6,in_port=1,actions=drop");
    add(&mut c, "priority=7,in_port=2,actions=drop");
    let sel = parse_match("in_port=1", &no_names).unwrap();
    let (p, m) = (sel.priority, sel.matcher);
    assert_eq!(
        c.remove(&m, p, true),
        1,
        "strict removes only the exact match"
    );
    add(&mut c, "priority=6,in_port=1,actions=drop");
    assert_eq!(
        c.remove(&m, p, false),
        2,
        "non-strict removes every more specific rule"
    );
    assert_eq!(c.len(), 1);
    assert_eq!(c.remove(&Match::any(), None, false), 1);
    assert!(c.is_empty());
    assert_eq!(c.subtables(), 0, "empty subtables go away");
}

#[test]
fn removing_a_port_removes_its_rules() {
    let mut c = Classifier::new();
    add(&mut c, "in_port=1,actions=output:2");
    add(&mut c, "in_port=3,actions=output:1");
    add(&mut c, "in_port=3,ip,actions=output:4");
    assert_eq!(c.remove_port(1), 2);
    assert_eq!(c.len(), 1);
}

#[test]
fn timeouts_expire_rules() {
    let mut c = Classifier::new();
    c.insert(
        parse_flow("idle_timeout=10,in_port=1,actions=drop", &no_names).unwrap(),
        1_000,
    );
    c.insert(
        parse_flow("hard_timeout=30,in_port=2,actions=drop", &no_names).unwrap(),
        1_000,
    );
    add(&mut c, "in_port=3,actions=drop");
    assert!(c.has_timeouts());
    let idle = c.lookup(&udp_key(1, 0)).unwrap().clone();
    idle.stats.add(1, 60, 9_000);
    assert!(
        c.remove_expired(18_999).is_empty(),
        "hit at 9 s: idle until 19 s"
    );
    let gone = c.remove_expired(19_000);
    assert_eq!(gone.len(), 1);
    assert_eq!(gone[0].spec.idle_timeout, 10);
    let gone = c.remove_expired(31_000);
    assert_eq!(gone.len(), 1);
    assert_eq!(gone[0].spec.hard_timeout, 30);
    assert_eq!(c.len(), 1);
    assert!(!c.has_timeouts());
}

#[test]
fn a_fin_timeout_cuts_timeouts_and_never_lengthens_them() {
    let mut c = Classifier::new();
    let spec = |t: &str| parse_flow(t, &no_names).unwrap();
    let r = c
        .insert(
            spec("hard_timeout=30,tcp,tp_dst=80,actions=fin_timeout(idle_timeout=2,hard_timeout=60),output:1"),
            1_000,
        )
        .rule;
    // Without a timeout of its own, a rule with a fin_timeout is watched too.
    c.insert(
        spec("tcp,tp_dst=81,actions=fin_timeout(idle_timeout=5)"),
        1_000,
    );
    assert!(c.has_timeouts());
    assert_eq!((r.idle_timeout(), r.hard_timeout()), (0, 30));
    r.cut_timeouts(2, 60);
    assert_eq!(
        (r.idle_timeout(), r.hard_timeout()),
        (2, 30),
        "60 s is longer than 30"
    );
    r.cut_timeouts(4, 10);
    assert_eq!((r.idle_timeout(), r.hard_timeout()), (2, 10), "2 s stays");
    // The spec keeps what the rule was installed with (it is what is saved).
    assert_eq!((r.spec.idle_timeout, r.spec.hard_timeout), (0, 30));
    assert!(c.remove_expired(2_999).is_empty());
    let gone = c.remove_expired(3_000);
    assert_eq!(gone.len(), 1);
    assert!(Arc::ptr_eq(&gone[0], &r));
}

fn clause_of(s: &FlowSpec) -> Option<(u32, u8, u8)> {
    match s.actions.first() {
        Some(Action::Conjunction {
            id,
            clause,
            n_clauses,
        }) => Some((*id, *clause, *n_clauses)),
        _ => None,
    }
}

/// The ordinary rules of the highest priority that match (any may be the answer).
fn scan_hard<'a>(rules: &'a [(FlowSpec, u64)], key: &MatchKey) -> Vec<&'a FlowSpec> {
    let matching: Vec<&FlowSpec> = rules
        .iter()
        .map(|(s, _)| s)
        .filter(|s| clause_of(s).is_none() && s.matcher.matches(key))
        // A rule without packet_type is for Ethernet frames only.
        .filter(|s| key.pipeline.packet_type == 0 || s.matcher.mask().pipeline.packet_type != 0)
        .collect();
    let top = matching.iter().map(|s| s.priority).max();
    matching
        .into_iter()
        .filter(|s| Some(s.priority) == top)
        .collect()
}

/// The linear scan the classifier must agree with, conjunctions as Open vSwitch
/// defines them: a conjunction above the best ordinary rule, all of whose clauses
/// match at its priority, answers with the rules of `conj_id` = its id.
fn scan<'a>(rules: &'a [(FlowSpec, u64)], key: &MatchKey) -> Vec<&'a FlowSpec> {
    let hard = scan_hard(rules, key);
    let floor = hard.first().map_or(0, |s| u32::from(s.priority) + 1);
    let mut complete: Vec<(u16, u32)> = Vec::new();
    for (s, _) in rules {
        let Some((id, _, n)) = clause_of(s) else {
            continue;
        };
        if u32::from(s.priority) < floor || complete.contains(&(s.priority, id)) {
            continue;
        }
        let all = (1..=n).all(|k| {
            rules.iter().any(|(t, _)| {
                t.priority == s.priority
                    && clause_of(t) == Some((id, k, n))
                    && t.matcher.matches(key)
            })
        });
        if all {
            complete.push((s.priority, id));
        }
    }
    complete.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    for (_, id) in complete {
        let mut k = *key;
        k.pipeline.conj_id = id;
        let answer = scan_hard(rules, &k);
        if !answer.is_empty() {
            return answer;
        }
    }
    hard
}

/// A few masks and values from small ranges, so that rules overlap and packets hit;
/// some match a register, as a pipeline's later tables do.
fn arb_field_key() -> impl Strategy<Value = (MatchKey, MatchKey)> {
    (
        proptest::option::of(0u32..3),
        proptest::option::of(prop_oneof![Just(6u8), Just(17u8)]),
        proptest::option::of((0u16..4, prop_oneof![Just(0xffffu16), Just(0xfffeu16)])),
        proptest::option::of((0u128..4, prop_oneof![Just(u128::MAX), Just(!1u128)])),
        proptest::option::of((0u32..4, prop_oneof![Just(u32::MAX), Just(!1u32)])),
        proptest::option::of(prop_oneof![Just(0u32), Just(0x1_0800u32)]),
    )
        .prop_map(|(port, proto, tp, nw, reg, packet_type)| {
            let (mut v, mut m) = (MatchKey::default(), MatchKey::default());
            if let Some(t) = packet_type {
                (v.pipeline.packet_type, m.pipeline.packet_type) = (t, u32::MAX);
            }
            if let Some((r, mask)) = reg {
                (v.pipeline.regs[3], m.pipeline.regs[3]) = (r, mask);
            }
            if let Some(p) = port {
                (v.in_port, m.in_port) = (p, u32::MAX);
            }
            if let Some(p) = proto {
                (v.nw_proto, m.nw_proto) = (p, 0xff);
            }
            if let Some((t, mask)) = tp {
                (v.tp_dst, m.tp_dst) = (t, mask);
            }
            if let Some((a, mask)) = nw {
                (v.nw_src, m.nw_src) = (a, mask);
            }
            (v, m)
        })
}

fn arb_packet() -> impl Strategy<Value = MatchKey> {
    (
        0u32..3,
        prop_oneof![Just(6u8), Just(17u8)],
        0u16..4,
        0u128..4,
        0u32..4,
        prop_oneof![3 => Just(0u32), 1 => Just(0x1_0800u32)],
    )
        .prop_map(|(in_port, nw_proto, tp_dst, nw_src, reg3, packet_type)| {
            let mut k = MatchKey::from(FlowKey {
                in_port,
                nw_proto,
                tp_dst,
                nw_src,
                ..FlowKey::default()
            });
            k.pipeline.regs[3] = reg3;
            k.pipeline.packet_type = packet_type;
            k
        })
}

#[derive(Clone, Debug)]
enum Op {
    Add(u16, (MatchKey, MatchKey), u32),
    /// A clause (k of 2) of conjunction 1 or 2.
    AddClause(u16, (MatchKey, MatchKey), u32, u8),
    /// A rule answering conjunction `id`.
    AddAnswer(u16, u32, u32),
    DelStrict(usize),
    DelLoose((MatchKey, MatchKey)),
}

fn arb_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u16..4, arb_field_key(), 0u32..100).prop_map(|(p, m, o)| Op::Add(p, m, o)),
        2 => (0u16..4, arb_field_key(), 1u32..=2, 1u8..=2)
            .prop_map(|(p, m, id, k)| Op::AddClause(p, m, id, k)),
        1 => (0u16..4, 1u32..=2, 0u32..100).prop_map(|(p, id, o)| Op::AddAnswer(p, id, o)),
        2 => any::<usize>().prop_map(Op::DelStrict),
        1 => arb_field_key().prop_map(Op::DelLoose),
    ]
}

proptest! {
    #[test]
    fn agrees_with_a_linear_scan(
        ops in proptest::collection::vec(arb_op(), 1..60),
        packets in proptest::collection::vec(arb_packet(), 1..40),
    ) {
        let mut c = Classifier::new();
        let mut model: Vec<(FlowSpec, u64)> = Vec::new();
        let mut seq = 0u64;
        for op in ops {
            match op {
                Op::Add(prio, (v, m), out) => {
                    let spec = FlowSpec::new(prio, Match::new(v, m), vec![Action::Output(out)]);
                    model.retain(|(s, _)| !(s.priority == prio && s.matcher == spec.matcher));
                    seq += 1;
                    model.push((spec.clone(), seq));
                    c.insert(spec, 0);
                }
                Op::AddClause(prio, (v, m), id, k) => {
                    let clause = Action::Conjunction { id, clause: k, n_clauses: 2 };
                    let spec = FlowSpec::new(prio, Match::new(v, m), vec![clause]);
                    model.retain(|(s, _)| !(s.priority == prio && s.matcher == spec.matcher));
                    seq += 1;
                    model.push((spec.clone(), seq));
                    c.insert(spec, 0);
                }
                Op::AddAnswer(prio, id, out) => {
                    let (mut v, mut m) = (MatchKey::default(), MatchKey::default());
                    (v.pipeline.conj_id, m.pipeline.conj_id) = (id, u32::MAX);
                    let spec = FlowSpec::new(prio, Match::new(v, m), vec![Action::Output(out)]);
                    model.retain(|(s, _)| !(s.priority == prio && s.matcher == spec.matcher));
                    seq += 1;
                    model.push((spec.clone(), seq));
                    c.insert(spec, 0);
                }
                Op::DelStrict(i) if !model.is_empty() => {
                    let (s, _) = model.remove(i % model.len());
                    prop_assert_eq!(c.remove(&s.matcher, Some(s.priority), true), 1);
                }
                Op::DelStrict(_) => {}
                Op::DelLoose((v, m)) => {
                    let pattern = Match::new(v, m);
                    let before = model.len();
                    model.retain(|(s, _)| !pattern.covers(&s.matcher));
                    prop_assert_eq!(c.remove(&pattern, None, false), before - model.len());
                }
            }
            prop_assert_eq!(c.len(), model.len());
        }
        let mut order = SubtableOrder::new(&c);
        for (round, p) in packets.iter().enumerate() {
            let want = scan(&model, p);
            for got in [c.lookup(p).cloned(), c.lookup_ordered(p, &mut order).rule.cloned()] {
                match got {
                    None => prop_assert!(want.is_empty(), "missed {:?} for {:?}", want, p),
                    Some(r) => prop_assert!(
                        want.iter().any(|s| **s == r.spec),
                        "{:?} is not among the best matches {:?} for {:?}", r.spec, want, p
                    ),
                }
            }
            if round % 7 == 6 {
                order.resort(&c);
            }
            // The bits the lookup says it looked at decide: any packet that agrees
            // with this one on them has this answer among its own.
            let mut wc = MatchKey::default();
            let got = c.lookup_wc(p, &mut wc).cloned();
            for q in &packets {
                if q.masked(&wc) != p.masked(&wc) {
                    continue;
                }
                let want = scan(&model, q);
                match &got {
                    None => prop_assert!(want.is_empty(), "{:?} under {:?}: {:?}", q, wc, want),
                    Some(r) => prop_assert!(
                        want.iter().any(|s| **s == r.spec),
                        "{:?} (for {:?}) is not among {:?} for {:?}", r.spec, p, want, q
                    ),
                }
            }
        }
    }
}

fn table_rule(table: u8, priority: u16, (v, m): (MatchKey, MatchKey), out: u32) -> FlowSpec {
    let mut spec = FlowSpec::new(priority, Match::new(v, m), vec![Action::Output(out)]);
    spec.table = table;
    spec
}

/// A table's rules as a dump gives them: spec, place and age, best first.
fn dump(p: &crate::Pipeline, table: u8) -> Vec<(FlowSpec, u64, u64)> {
    p.table(table).map_or(Vec::new(), |c| {
        c.rules()
            .iter()
            .map(|r| (r.spec.clone(), r.seq(), r.installed_ms()))
            .collect()
    })
}

proptest! {
    /// A bundle's adds staged and put in whole are the rules that putting each in
    /// one by one makes — the same specs, places and ages, and lookups of the same
    /// priority. They are refused whole (nothing changed; the caller puts them in
    /// one by one) exactly when a table has rules of one of their masks or an add
    /// took another's place.
    #[test]
    fn staged_adds_put_in_whole_are_the_adds_one_by_one(
        before in proptest::collection::vec((0u16..4, arb_field_key(), 0u32..100), 0..6),
        adds in proptest::collection::vec((0u8..2, 0u16..4, arb_field_key(), 0u32..100), 1..40),
        packets in proptest::collection::vec(arb_packet(), 1..20),
    ) {
        let mut one_by_one = crate::Pipeline::default();
        for (p, k, o) in &before {
            one_by_one.insert(table_rule(0, *p, *k, *o), 1);
        }
        let mut whole = one_by_one.clone();
        let specs: Vec<FlowSpec> =
            adds.iter().map(|(t, p, k, o)| table_rule(*t, *p, *k, *o)).collect();
        let prepared: Vec<PreparedRule> = specs.iter().cloned().map(PreparedRule::new).collect();
        let mut staged = StagedRules::default();
        for r in &prepared {
            staged.stage(r);
        }
        for s in &specs {
            one_by_one.insert(s.clone(), 2);
        }
        let replaced_within = specs.iter().enumerate().any(|(i, a)| {
            specs[..i].iter().any(|b| (a.table, a.priority, a.matcher) == (b.table, b.priority, b.matcher))
        });
        // One add replacing another stops the stage (it lets go of what it had).
        prop_assert_eq!(staged.len(), if replaced_within { 0 } else { specs.len() });
        let mask_taken = specs.iter().any(|a| {
            a.table == 0 && dump(&whole, 0).iter().any(|(b, _, _)| b.matcher.mask() == a.matcher.mask())
        });
        let before_dump = dump(&whole, 0);
        match whole.adopt_staged(&mut staged, 2) {
            true => prop_assert!(!replaced_within && !mask_taken),
            false => {
                prop_assert!(replaced_within || mask_taken);
                prop_assert_eq!(dump(&whole, 0), before_dump);
                prop_assert!(dump(&whole, 1).is_empty());
                for r in prepared {
                    whole.insert_prepared(r, 2);
                }
            }
        }
        for t in 0..2u8 {
            prop_assert_eq!(dump(&whole, t), dump(&one_by_one, t));
            let (w, o) = (whole.table(t), one_by_one.table(t));
            prop_assert_eq!(w.map_or(0, Classifier::len), o.map_or(0, Classifier::len));
            // The same rule, even among overlapping rules of one priority (the
            // subtables are in the same order).
            for p in &packets {
                let best = |c: Option<&Classifier>| c.and_then(|c| c.lookup(p)).map(|r| r.spec.clone());
                prop_assert_eq!(best(w), best(o));
            }
        }
    }
}
