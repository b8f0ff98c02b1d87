//! Rules change under traffic: adding and removing 10,000 rules (each change
//! revalidating the datapath flows) never loses a packet of a flow whose rule stays.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::*;
use vsw_flow::{parse_flow, parse_match};

fn no_names(_: &str) -> Option<u32> {
    None
}

fn churn_rule(i: u32) -> String {
    vsw_flow::samples::churn_rule(i, "output:3")
}

#[test]
fn ten_thousand_rules_come_and_go_while_a_steady_flow_loses_nothing() {
    let mut sw = switch_with(3, 1, &[0], 200_000);
    let ofproto = rules(
        &mut sw.dp,
        &["priority=500,in_port=1,udp,tp_dst=7,actions=output:2"],
    );
    let stop = Arc::new(AtomicBool::new(false));
    let peer = sw.peers.remove(0);
    let sending = stop.clone();
    let sender = std::thread::spawn(move || {
        let f = frame(1, mac(2), 7);
        let mut sent = 0u64;
        while !sending.load(Ordering::Relaxed) {
            for _ in 0..20 {
                peer.send(&f);
            }
            sent += 20;
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        sent
    });
    // Port 2's peer is drained as the frames come, so that its queue never fills.
    let sink = sw.peers.remove(0);
    let received = std::thread::spawn(move || {
        let mut n = 0u64;
        while sink
            .recv_timeout(std::time::Duration::from_secs(1))
            .is_some()
        {
            n += 1;
        }
        (n, sink)
    });
    const RULES: u32 = 10_000;
    const STEP: u32 = 250;
    for start in (0..RULES).step_by(STEP as usize) {
        let mut c = (*ofproto.pipeline()).clone();
        for i in start..start + STEP {
            c.insert(parse_flow(&churn_rule(i), &no_names).unwrap(), 1);
        }
        replace_rules(&mut sw.dp, &ofproto, c);
    }
    let full = ofproto.pipeline();
    // The churn's rules, the steady one, and the learning switch's NORMAL.
    assert_eq!(full.len(), RULES as usize + 2);
    let masks = full.table(0).unwrap().subtables();
    assert!(masks >= 10, "{masks} masks");
    for start in (0..RULES).step_by(STEP as usize) {
        let mut c = (*ofproto.pipeline()).clone();
        for i in start..start + STEP {
            let text = churn_rule(i);
            let (prio_and_match, _) = text.split_once(",actions=").unwrap();
            let sel = parse_match(prio_and_match, &no_names).unwrap();
            assert_eq!(c.remove(&sel, true), 1, "{text}");
        }
        replace_rules(&mut sw.dp, &ofproto, c);
    }
    assert_eq!(ofproto.pipeline().len(), 2);
    stop.store(true, Ordering::Relaxed);
    let sent = sender.join().unwrap();
    let steady = ofproto.pipeline().rules()[0].clone();
    assert_eq!(steady.spec.priority, 500);
    eventually("every packet counted on the steady rule", || {
        sw.dp.push_flow_stats();
        steady.stats.packets() == sent
    });
    // The sink thread ends a second after the last frame.
    let (got, _sink) = received.join().unwrap();
    assert_eq!(got, sent, "frames of the steady flow lost");
    assert!(
        sent > 1000,
        "the test sent too little to mean anything: {sent}"
    );
    assert!(
        sw.peers[0].try_recv().is_none(),
        "nothing went to the churn's port"
    );
}
