//! Flow offload through vswd with the `dummy` provider: which flows the manager puts
//! into a full provider, what dump-flows and offload-show say, and bad offload
//! settings refused with nothing changed.

use std::time::Duration;

use vsw_e2e::{serial, wait_until, Vswd};

fn set_up(d: &Vswd) {
    d.ctl_ok(&[
        "add-port",
        "gen",
        "type=ring",
        "ring-flows=4",
        "ring-rate=4000",
        "offload=dummy",
        "offload-capacity=2",
    ]);
    d.ctl_ok(&["add-port", "sink", "type=ring"]);
    for sport in 1..=4 {
        d.ctl_ok(&[
            "add-flow",
            &format!("priority=10,in_port=gen,udp,tp_src={sport},actions=output:sink"),
        ]);
    }
    // Not offloadable: two outputs.
    d.ctl_ok(&[
        "add-flow",
        "priority=5,in_port=gen,actions=output:sink,output:sink",
    ]);
}

#[test]
fn a_full_provider_holds_what_fits_and_the_rest_waits() {
    let _g = serial();
    let d = Vswd::start();
    set_up(&d);
    // Off by default: flows say so, no providers.
    assert!(d.flows().iter().all(|f| f.offload_status == "off"));
    assert!(d.offload_show().is_empty());
    d.ctl_ok(&["set", "hw-offload=true", "offload-interval=100"]);
    wait_until("two flows offloaded", Duration::from_secs(10), || {
        d.offload_show()
            .first()
            .is_some_and(|p| p.used == 2 && p.oor && p.passes >= 2)
    });
    let offloaded = d.flows_of("offloaded");
    assert_eq!(offloaded.len(), 2, "{offloaded:?}");
    assert!(offloaded
        .iter()
        .all(|f| f.offloaded && f.offload_status == "yes"));
    let ovs = d.flows_of("ovs");
    assert_eq!(ovs.len(), 3, "{ovs:?}");
    let status: Vec<&str> = ovs.iter().map(|f| f.offload_status.as_str()).collect();
    assert_eq!(
        status.iter().filter(|s| **s == "pending:OOR").count(),
        2,
        "{status:?}"
    );
    assert!(status.contains(&"not-eligible:actions"), "{status:?}");
    assert_eq!(d.flows_of("all").len(), 5);
    // Rates are measured: about 1,000 per second each.
    wait_until("rates measured", Duration::from_secs(10), || {
        d.flows_of("offloaded").iter().all(|f| f.pps > 500.0)
    });
    let text = d.ctl_ok(&["dump-flows"]);
    assert!(text.contains("offloaded:yes, pps="), "{text}");
    assert!(text.contains("offloaded:no (pending:OOR)"), "{text}");
    let show = d.ctl_ok(&["offload-show"]);
    assert!(
        show.contains("port gen: provider dummy, capacity 2, used 2, out of resources"),
        "{show}"
    );
    // Deleting the offloaded flows makes room: the waiting ones move in and the
    // provider is no longer out of resources.
    for f in &offloaded {
        d.ctl_ok(&[
            "del-flows",
            "--strict",
            &format!("priority=10,{}", f.matching),
        ]);
    }
    wait_until(
        "the waiting flows offloaded",
        Duration::from_secs(10),
        || {
            d.offload_show()
                .first()
                .is_some_and(|p| p.used == 2 && !p.oor)
        },
    );
    assert_eq!(d.flows_of("offloaded").len(), 2);
    // Off again: providers go, flows stay.
    d.ctl_ok(&["set", "hw-offload=false"]);
    assert!(d.offload_show().is_empty());
    assert_eq!(d.flows().len(), 3);
}

#[test]
fn bad_offload_settings_are_refused_and_change_nothing() {
    let _g = serial();
    let d = Vswd::start();
    set_up(&d);
    for (args, says) in [
        (vec!["set", "hw-offload=maybe"], "hw-offload"),
        (vec!["set", "offload-interval=5"], "offload-interval"),
        (vec!["set-port", "gen", "offload=ebpf"], "not built yet"),
        (vec!["set-port", "gen", "offload=fpga"], "offload"),
        (
            vec!["set-port", "gen", "offload-capacity=0"],
            "offload-capacity",
        ),
        (vec!["dump-flows", "type=fast"], "type"),
    ] {
        let out = d.ctl(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} accepted");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    let show = d.show();
    assert!(!show
        .options
        .iter()
        .any(|(k, _)| k.starts_with("hw-offload")));
    let gen = d.port("gen");
    assert!(gen.options.contains(&("offload".into(), "dummy".into())));
}
