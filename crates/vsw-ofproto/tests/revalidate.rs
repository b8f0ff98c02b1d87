//! One datapath, two bridges of one backer: a change in one bridge costs the
//! revalidator only the flows that went through it; a change of the backer's map of
//! ports, every flow.

use std::sync::Arc;
use std::time::{Duration, Instant};

use vsw_datapath::ring::{ring_port, ring_port_with_frames};
use vsw_datapath::{Datapath, PmdConfig, PortHandle, PortStats};
use vsw_flow::{parse_flow, Pipeline};
use vsw_ofproto::{Backer, Ofproto};

fn pipeline(flows: &[&str]) -> Pipeline {
    let mut p = Pipeline::new();
    for f in flows {
        p.insert(parse_flow(f, &|_: &str| None).unwrap(), 0);
    }
    p
}

/// A datapath on one PMD (core 0, not pinned) translating through `backer`.
fn datapath(backer: &Arc<Backer>) -> Datapath {
    let mut dp = Datapath::start(PmdConfig {
        cores: vec![0],
        pin: false,
    })
    .unwrap();
    dp.set_upcall(backer.clone()).unwrap();
    dp
}

/// A ring port `no` that replays one flow's frames.
fn source(dp: &mut Datapath, no: u32) {
    let frames = vsw_datapath::ring::flow_frames(1, 64);
    let stats = Arc::new(PortStats::default());
    dp.add_port(PortHandle::new(
        no,
        "src",
        ring_port_with_frames(frames),
        stats,
    ))
    .unwrap();
}

/// A ring port `no` that takes what it is sent.
fn sink(dp: &mut Datapath, no: u32) {
    let stats = Arc::new(PortStats::default());
    dp.add_port(PortHandle::new(no, "sink", ring_port(0, 64), stats))
        .unwrap();
}

/// Waits (bounded) until `dp` caches `n` flows.
fn flows(dp: &Datapath, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while dp.flow_count() < n {
        assert!(Instant::now() < deadline, "{n} datapath flows");
        std::thread::yield_now();
    }
}

/// A revalidator pass now.
fn pass(dp: &Datapath) -> vsw_datapath::RevalidateSummary {
    dp.revalidate(vsw_datapath::clock::now_ms(), 600_000)
        .unwrap()
}

#[test]
fn a_change_in_one_bridge_revalidates_only_the_flows_through_it() {
    let backer = Backer::new();
    let mut dp = datapath(&backer);
    let rule = "in_port=1,actions=output:2";
    let (a, oa) = Ofproto::join(&backer, "bra", pipeline(&[rule])).unwrap();
    let (b, ob) = Ofproto::join(&backer, "brb", pipeline(&[rule])).unwrap();
    // a: 1 → dp 1, 2 → dp 2; b: 1 → dp 3, 2 → dp 4. Each source replays one flow.
    for (slot, o, base) in [(a, &oa, 1), (b, &ob, 3)] {
        o.set_ports(vec![1, 2]);
        backer.set_port(slot, 1, base).unwrap();
        backer.set_port(slot, 2, base + 1).unwrap();
    }
    for base in [1, 3] {
        sink(&mut dp, base + 1);
        source(&mut dp, base);
    }
    flows(&dp, 2);
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
    flows(&dp, 2);
    backer.set_port(a, 7, 9).unwrap();
    let s = pass(&dp);
    assert_eq!(s.translated, 2, "{s:?}");
}

#[test]
fn a_delete_revalidates_only_the_flows_that_matched_the_deleted_rules() {
    let backer = Backer::new();
    let rules = [
        "priority=5,in_port=1,actions=output:2",
        "priority=5,in_port=3,actions=output:2",
        "priority=9,in_port=4,actions=drop",
    ];
    let (a, oa) = Ofproto::join(&backer, "bra", pipeline(&rules)).unwrap();
    oa.set_ports(vec![1, 2, 3, 4]);
    for p in 1..=4 {
        backer.set_port(a, p, p).unwrap();
    }
    let mut dp = datapath(&backer);
    sink(&mut dp, 2);
    for src in [1, 3] {
        source(&mut dp, src);
    }
    flows(&dp, 2);
    pass(&dp);
    // Deletes a rule as vswd does: the pass of the removal, which looks at the
    // flows that matched it only.
    let delete = |what: &str| {
        let mut p = (*oa.pipeline()).clone();
        let selection = vsw_flow::parse_match(what, &|_: &str| None).unwrap();
        let removed = p.remove_rules(&selection, true);
        assert_eq!(removed.len(), 1, "{what}");
        oa.set_pipeline_removing(p, &removed);
        let at: Vec<usize> = removed.iter().map(|r| Arc::as_ptr(r) as usize).collect();
        dp.revalidate_removed(&at, vsw_datapath::clock::now_ms())
            .unwrap()
    };
    // A rule no flow matched: nothing looked at, nothing for a full pass either.
    let s = delete("priority=9,in_port=4");
    assert_eq!((s.flows, s.translated, s.stale), (0, 0, 0), "{s:?}");
    let s = pass(&dp);
    assert_eq!((s.flows, s.translated, s.stale), (2, 0, 0), "{s:?}");
    // Port 3's rule: its flow alone is translated, and goes before the delete
    // returns.
    let s = delete("priority=5,in_port=3");
    assert_eq!((s.flows, s.translated, s.stale), (1, 1, 1), "{s:?}");
    // Port 1's flow is known right, port 3's new one is newer than the delete.
    assert_eq!(pass(&dp).translated, 0);
    // Any other change: every flow.
    oa.set_pipeline((*oa.pipeline()).clone());
    flows(&dp, 2);
    oa.set_pipeline((*oa.pipeline()).clone());
    assert_eq!(pass(&dp).translated, 2);
}
