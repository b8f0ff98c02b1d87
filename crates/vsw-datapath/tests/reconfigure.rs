//! Rules change under traffic: adding and removing 10,000 rules never loses a packet
//! of a flow whose rule stays.

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
    rules(
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
        let mut c = (*sw.dp.classifier()).clone();
        for i in start..start + STEP {
            c.insert(parse_flow(&churn_rule(i), &no_names).unwrap(), 1);
        }
        sw.dp.set_classifier(c).unwrap();
    }
    let full = sw.dp.classifier();
    assert_eq!(full.len(), RULES as usize + 1);
    assert!(full.subtables() >= 10, "{} masks", full.subtables());
    for start in (0..RULES).step_by(STEP as usize) {
        let mut c = (*sw.dp.classifier()).clone();
        for i in start..start + STEP {
            let text = churn_rule(i);
            let (prio_and_match, _) = text.split_once(",actions=").unwrap();
            let sel = parse_match(prio_and_match, &no_names).unwrap();
            let (p, m) = (sel.priority, sel.matcher);
            assert_eq!(c.remove(&m, p, true), 1, "{text}");
        }
        sw.dp.set_classifier(c).unwrap();
    }
    assert_eq!(sw.dp.classifier().len(), 1);
    stop.store(true, Ordering::Relaxed);
    let sent = sender.join().unwrap();
    let steady = sw.dp.classifier().rules()[0].clone();
    eventually("every packet counted on the steady rule", || {
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
