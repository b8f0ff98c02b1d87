//! The datapath core through vswd: ring ports, the cache and classifier counters,
//! several PMDs with queue pins, flow timeouts.

use std::time::Duration;

use vsw_e2e::{serial, wait_until, Vswd};

#[test]
fn ring_ports_forward_inside_vswd_and_the_counters_show_it() {
    let _g = serial();
    let d = Vswd::start();
    d.ctl_ok(&["add-port", "gen", "type=ring", "ring-flows=4"]);
    d.ctl_ok(&["add-port", "sink", "type=ring"]);
    d.ctl_ok(&["add-flow", "in_port=gen,actions=output:sink"]);
    // The sink counts from its start (NORMAL forwarded to it before the rule), the
    // PMD from the clear, and publishes its counts once per loop iteration: each
    // is awaited from where it starts.
    let before = d.port("sink").stats.tx_packets;
    d.ctl_ok(&["pmd-stats-clear"]);
    wait_until(
        "the sink to be sent 10,000 packets",
        Duration::from_secs(10),
        || d.port("sink").stats.tx_packets > before + 10_000,
    );
    wait_until(
        "the PMD to count 10,000 lookups",
        Duration::from_secs(10),
        || {
            let p = d.pmd_stats()[0];
            p.emc_hits + p.megaflow_hits + p.upcalls >= 10_000
        },
    );
    let pmd = d.pmd_stats()[0];
    assert!(pmd.emc_hits > 0, "{pmd:?}");
    let text = d.ctl_ok(&["pmd-stats-show"]);
    for line in [
        "emc hits:",
        "megaflow hits:",
        "miss with success upcall:",
        "avg. packets per output batch: 32.00",
    ] {
        assert!(text.contains(line), "no '{line}' in\n{text}");
    }
    let rxq = d.ctl_ok(&["pmd-rxq-show"]);
    assert!(
        rxq.contains("port: gen") && rxq.contains("pmd usage"),
        "{rxq}"
    );
    assert_eq!(d.show().ports.len(), 2);
    assert!(d.port("gen").status == "up");
    // A ring port's type cannot change; the port stays as it was.
    let out = d.ctl(&["set-port", "gen", "type=afpacket"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("type is fixed"));
    d.ctl_ok(&["del-port", "gen"]);
    let before = d.port("sink").stats.tx_packets;
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        d.port("sink").stats.tx_packets,
        before,
        "the generator is gone"
    );
}

#[test]
fn flows_with_timeouts_go_away_by_themselves() {
    let _g = serial();
    let mut d = Vswd::start();
    d.ctl_ok(&[
        "add-flow",
        "hard_timeout=1,priority=7,udp,tp_dst=9,actions=drop",
    ]);
    d.ctl_ok(&[
        "add-flow",
        "idle_timeout=2,priority=8,udp,tp_dst=10,actions=drop",
    ]);
    d.ctl_ok(&["add-flow", "priority=9,udp,tp_dst=11,actions=drop"]);
    let text = d.ctl_ok(&["dump-flows"]);
    assert!(
        text.contains("hard_timeout=1") && text.contains("idle_timeout=2"),
        "{text}"
    );
    wait_until("the timed flows to expire", Duration::from_secs(10), || {
        d.flows().len() == 1
    });
    assert_eq!(d.flows()[0].flow, "priority=9,udp,tp_dst=11,actions=drop");
    d.restart();
    assert_eq!(d.flows().len(), 1, "expired flows are not restored");
}

#[test]
fn several_pmds_place_and_pin_queues() {
    let _g = serial();
    let cpus = vswd::options::allowed_cpus();
    if cpus.len() < 2 {
        eprintln!("one CPU: nothing to spread");
        return;
    }
    let (c0, c1) = (cpus[0], cpus[1]);
    let d = Vswd::start();
    let mask = format!("{c0},{c1}");
    d.ctl_ok(&[
        "set",
        &format!("pmd-cpu-mask={mask}"),
        "pmd-rxq-assign=roundrobin",
    ]);
    assert_eq!(d.show().pmd_cores, vec![c0, c1]);
    assert_eq!(d.pmd_stats().len(), 2);
    for name in ["r1", "r2", "r3"] {
        d.ctl_ok(&["add-port", name, "type=ring"]);
    }
    d.ctl_ok(&["set-port", "r1", &format!("pmd-rxq-affinity=0:{c1}")]);
    let view = d.rxq_show();
    let pmd1 = view.iter().find(|p| p.core == c1).unwrap();
    assert!(pmd1.isolated, "{view:?}");
    assert_eq!(pmd1.queues.len(), 1);
    assert!(pmd1.queues[0].pinned && pmd1.queues[0].port == "r1");
    let pmd0 = view.iter().find(|p| p.core == c0).unwrap();
    assert_eq!(pmd0.queues.len(), 2);
    // Bad pins are refused with the reason and change nothing.
    for (bad, why) in [
        ("pmd-rxq-affinity=0:x", "queue:core pairs"),
        ("pmd-rxq-affinity=5:0", "queue 5 does not exist"),
    ] {
        let out = d.ctl(&["set-port", "r2", bad]);
        assert!(!out.status.success(), "{bad} accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(why), "{bad}: {err}");
    }
    assert_eq!(d.rxq_show(), view);
    // Back to one PMD: every queue is on it.
    d.ctl_ok(&["set", &format!("pmd-cpu-mask={c0}")]);
    let view = d.rxq_show();
    assert_eq!(view.len(), 1);
    assert_eq!(view[0].queues.len(), 3);
}

#[test]
fn several_pmds_forward_between_real_interfaces() {
    let _g = serial();
    let cpus = vswd::options::allowed_cpus();
    if cpus.len() < 2 {
        eprintln!("one CPU: nothing to spread");
        return;
    }
    let d = Vswd::start();
    let (a, b) = (vsw_e2e::Host::new(1), vsw_e2e::Host::new(2));
    d.ctl_ok(&["add-port", &a.port]);
    d.ctl_ok(&["add-port", &b.port, "afpacket-mode=mmsg"]);
    d.ctl_ok(&[
        "set",
        &format!("pmd-cpu-mask={},{}", cpus[0], cpus[1]),
        "pmd-rxq-assign=roundrobin",
    ]);
    // Each port is polled by its own PMD: every packet crosses from one PMD to the
    // other's port through that PMD's own transmit queue, and each PMD learns the
    // host on the other side from the other PMD.
    let view = d.rxq_show();
    assert!(view.iter().all(|p| p.queues.len() == 1), "{view:?}");
    assert!(a.ping(&b, 3), "ping across two PMDs\n{}", d.log());
    assert!(b.ping(&a, 3), "and back");
    let stats = d.pmd_stats();
    assert!(stats.iter().all(|s| s.packets > 0), "{stats:?}");
}
