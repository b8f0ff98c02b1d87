//! The pipeline through vswd: the learning switch a new switch starts with, tables
//! reached by goto_table, the datapath flows they become (dump-dp-flows), trace,
//! dpif-show, and rule changes that take effect before they are answered.

use std::time::Duration;

use vsw_e2e::{serial, wait_until, Vswd, LEARNING_SWITCH_FLOW};

const LONG: Duration = Duration::from_secs(10);

/// A ring port that generates traffic (port 1) and one that takes it (port 2).
fn generator_and_sink() -> Vswd {
    let d = Vswd::start();
    d.ctl_ok(&["add-port", "gen", "type=ring", "ring-flows=4"]);
    d.ctl_ok(&["add-port", "sink", "type=ring"]);
    d
}

fn sent_to_sink(d: &Vswd) -> u64 {
    d.port("sink").stats.tx_packets
}

/// Waits until the generator has sent `n` more packets, and says whether the sink
/// got any of them.
fn sink_grows_while_gen_sends(d: &Vswd, n: u64) -> bool {
    let (gen0, sink0) = (d.port("gen").stats.rx_packets, sent_to_sink(d));
    wait_until("the generator's packets", LONG, || {
        d.port("gen").stats.rx_packets >= gen0 + n
    });
    sent_to_sink(d) > sink0
}

#[test]
fn a_new_switch_is_a_learning_switch_whose_rule_can_go() {
    let _g = serial();
    let d = generator_and_sink();
    let all = d.all_flows();
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(
        (all[0].flow.as_str(), all[0].table),
        (LEARNING_SWITCH_FLOW, 0)
    );
    // Unknown destinations are flooded: the sink gets the generator's packets.
    wait_until("the sink to get packets", LONG, || sent_to_sink(&d) > 1000);
    // The rule counts what its datapath flows forwarded.
    wait_until("the rule to count", LONG, || {
        d.all_flows()[0].n_packets > 1000
    });
    let dp = d.ctl_ok(&["dump-dp-flows"]);
    assert!(
        dp.contains("in_port=1") && dp.contains("actions:2"),
        "a megaflow from gen to sink:\n{dp}"
    );
    let more = d.ctl_ok(&["dump-dp-flows", "--more"]);
    assert!(
        more.contains("ufid:") && more.contains("dp:ovs") && more.contains("offloaded:no"),
        "{more}"
    );
    let dpif = d.ctl_ok(&["dpif-show"]);
    assert!(
        dpif.contains("flow-limit 200000") && dpif.contains("table 0: 1 rules"),
        "{dpif}"
    );
    // Without it the switch drops everything, from the moment del-flows returns.
    d.ctl_ok(&["del-flows"]);
    assert!(d.all_flows().is_empty());
    assert!(
        !sink_grows_while_gen_sends(&d, 10_000),
        "nothing may reach the sink once the rule is gone"
    );
    assert_eq!(d.ctl_ok(&["dump-dp-flows"]).matches("actions:2").count(), 0);
    let stats = d.ctl_ok(&["pmd-stats-show"]);
    assert!(stats.contains("megaflow hits:"), "{stats}");
}

#[test]
fn tables_goto_and_trace() {
    let _g = serial();
    let d = generator_and_sink();
    d.ctl_ok(&["del-flows"]);
    d.ctl_ok(&["add-flow", "table=0,in_port=gen,actions=goto_table:3"]);
    assert!(
        !sink_grows_while_gen_sends(&d, 10_000),
        "table 3 is empty: a miss drops"
    );
    d.ctl_ok(&["add-flow", "table=3,udp,actions=output:sink"]);
    assert!(sink_grows_while_gen_sends(&d, 10_000));
    let text = d.ctl_ok(&["dump-flows"]);
    assert!(
        text.contains("table=3,") && text.contains("actions=output:2"),
        "{text}"
    );
    let trace = d.ctl_ok(&["trace", "in_port=gen,udp,tp_dst=9"]);
    for want in [
        " 0. priority=32768,in_port=1,actions=goto_table:3",
        " 3. priority=32768,udp,actions=output:2",
        "Datapath actions: 2",
    ] {
        assert!(trace.contains(want), "no '{want}' in\n{trace}");
    }
    // A loop of resubmits is caught when translating: the packets are dropped, and
    // counted as failed translations.
    d.ctl_ok(&["add-flow", "table=3,priority=40000,actions=resubmit(,3)"]);
    assert!(!sink_grows_while_gen_sends(&d, 10_000));
    let trace = d.ctl_ok(&["trace", "in_port=gen,udp"]);
    assert!(
        trace.contains("Translation failed") && trace.contains("Datapath actions: drop"),
        "{trace}"
    );
    let dpif = d.ctl_ok(&["dpif-show"]);
    assert!(!dpif.contains("translation errors: 0"), "{dpif}");
    // A goto to an earlier table is refused, and changes nothing.
    let out = d.ctl(&["add-flow", "table=3,actions=goto_table:1"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("later table"));
    assert_eq!(d.flows().len(), 3);
}
