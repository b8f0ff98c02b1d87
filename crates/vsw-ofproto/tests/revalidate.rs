//! One datapath, two bridges of one backer: a change in one bridge costs the
//! revalidator only the flows that went through it; a change of the backer's map of
//! ports, every flow.

use std::sync::Arc;
use std::time::{Duration, Instant};

use vsw_datapath::ring::{ring_port, ring_port_with_frames};
use vsw_datapath::{Datapath, PmdConfig, PortHandle, PortStats};
use vsw_flow::{parse_flow, Pipeline};
use vsw_ofproto::Backer;

fn pipeline(flows: &[&str]) -> Pipeline {
    let mut p = Pipeline::new();
    for f in flows {
        p.insert(parse_flow(f, &|_: &str| None).unwrap(), 0);
    }
    p
}

#[test]
fn a_change_in_one_bridge_revalidates_only_the_flows_through_it() {
    let mut dp = Datapath::start(PmdConfig {
        cores: vec![0],
        pin: false,
    })
    .unwrap();
    let backer = Backer::new();
    let rule = "in_port=1,actions=output:2";
    let (a, oa) = backer.add_bridge("bra", pipeline(&[rule])).unwrap();
    let (b, ob) = backer.add_bridge("brb", pipeline(&[rule])).unwrap();
    // a: 1 → dp 1, 2 → dp 2; b: 1 → dp 3, 2 → dp 4. Each source replays one flow.
    for (slot, o, base) in [(a, &oa, 1), (b, &ob, 3)] {
        o.set_ports(vec![1, 2]);
        backer.set_port(slot, 1, base).unwrap();
        backer.set_port(slot, 2, base + 1).unwrap();
    }
    dp.set_upcall(backer.clone()).unwrap();
    for base in [1, 3] {
        let stats = Arc::new(PortStats::default());
        dp.add_port(PortHandle::new(base + 1, "sink", ring_port(0, 64), stats))
            .unwrap();
        let frames = vsw_datapath::ring::flow_frames(1, 64);
        let stats = Arc::new(PortStats::default());
        dp.add_port(PortHandle::new(
            base,
            "src",
            ring_port_with_frames(frames),
            stats,
        ))
        .unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while dp.flow_count() < 2 {
        assert!(Instant::now() < deadline, "two datapath flows");
        std::thread::yield_now();
    }
    let pass = |dp: &Datapath| {
        dp.revalidate(vsw_datapath::clock::now_ms(), 600_000)
            .unwrap()
    };
    pass(&dp);
    // b's rules change (to the same answer): b's flow is translated again, a's not.
    ob.set_pipeline(pipeline(&[rule, "priority=1,actions=drop"]));
    let s = pass(&dp);
    assert_eq!((s.flows, s.translated, s.stale), (2, 1, 0), "{s:?}");
    // Both now: nothing to translate.
    assert_eq!(pass(&dp).translated, 0);
    // A change b's flow cannot survive: only it goes.
    ob.set_pipeline(pipeline(&["in_port=1,actions=drop"]));
    let s = pass(&dp);
    assert_eq!((s.translated, s.stale), (1, 1), "{s:?}");
    // The backer's map: every flow depends on it.
    while dp.flow_count() < 2 {
        assert!(Instant::now() < deadline, "b's drop flow");
        std::thread::yield_now();
    }
    backer.set_port(a, 7, 9).unwrap();
    let s = pass(&dp);
    assert_eq!(s.translated, 2, "{s:?}");
}

#[test]
fn a_delete_revalidates_only_the_flows_that_matched_the_deleted_rules() {
    let mut dp = Datapath::start(PmdConfig {
        cores: vec![0],
        pin: false,
    })
    .unwrap();
    let backer = Backer::new();
    let rules = [
        "priority=5,in_port=1,actions=output:2",
        "priority=5,in_port=3,actions=output:2",
        "priority=9,in_port=4,actions=drop",
    ];
    let (a, oa) = backer.add_bridge("bra", pipeline(&rules)).unwrap();
    oa.set_ports(vec![1, 2, 3, 4]);
    for p in 1..=4 {
        backer.set_port(a, p, p).unwrap();
    }
    dp.set_upcall(backer.clone()).unwrap();
    let stats = Arc::new(PortStats::default());
    dp.add_port(PortHandle::new(2, "sink", ring_port(0, 64), stats))
        .unwrap();
    for src in [1, 3] {
        let frames = vsw_datapath::ring::flow_frames(1, 64);
        let stats = Arc::new(PortStats::default());
        dp.add_port(PortHandle::new(
            src,
            "src",
            ring_port_with_frames(frames),
            stats,
        ))
        .unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while dp.flow_count() < 2 {
        assert!(Instant::now() < deadline, "two datapath flows");
        std::thread::yield_now();
    }
    let pass = |dp: &Datapath| {
        dp.revalidate(vsw_datapath::clock::now_ms(), 600_000)
            .unwrap()
    };
    pass(&dp);
    let delete = |what: &str| {
        let mut p = (*oa.pipeline()).clone();
        let selection = vsw_flow::parse_match(what, &|_: &str| None).unwrap();
        let removed = p.remove_rules(&selection, true);
        assert_eq!(removed.len(), 1, "{what}");
        oa.set_pipeline_removing(p, &removed);
    };
    // A rule no flow matched: nothing translated.
    delete("priority=9,in_port=4");
    let s = pass(&dp);
    assert_eq!((s.flows, s.translated, s.stale), (2, 0, 0), "{s:?}");
    // Port 3's rule: its flow alone is translated (and goes).
    delete("priority=5,in_port=3");
    let s = pass(&dp);
    assert_eq!((s.flows, s.translated, s.stale), (2, 1, 1), "{s:?}");
    // Any other change: every flow.
    oa.set_pipeline((*oa.pipeline()).clone());
    while dp.flow_count() < 2 {
        assert!(Instant::now() < deadline, "port 3's drop flow");
        std::thread::yield_now();
    }
    oa.set_pipeline((*oa.pipeline()).clone());
    assert_eq!(pass(&dp).translated, 2);
}
