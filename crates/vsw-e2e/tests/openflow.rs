//! vswd's OpenFlow management socket, driven by the real `ovs-ofctl`.

use std::process::Command;

use vsw_e2e::Vswd;

fn ofctl(d: &Vswd, args: &[&str]) -> String {
    let target = format!("unix:{}", d.dir.join("br0.mgmt").display());
    let out = Command::new("ovs-ofctl")
        .args(["-t", "5"])
        .args(args)
        .arg(&target)
        .output()
        .expect("ovs-ofctl (openvswitch-common)");
    assert!(
        out.status.success(),
        "ovs-ofctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn dpid(show: &str) -> String {
    show.split("dpid:")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("no dpid in {show}"))
        .to_string()
}

#[test]
fn ovs_ofctl_shows_the_switch_its_ports_and_a_datapath_id_that_survives_a_restart() {
    let mut d = Vswd::start();
    d.ctl_ok(&["add-port", "p1", "type=ring"]);
    d.ctl_ok(&["add-port", "p2", "type=ring", "ofport_request=7"]);
    for version in ["OpenFlow13", "OpenFlow15"] {
        let show = ofctl(&d, &["-O", version, "show"]);
        assert!(show.contains(" 1(p1): addr:"), "{show}");
        assert!(show.contains(" 7(p2): addr:"), "{show}");
        assert!(show.contains("n_tables:254"), "{show}");
    }
    // Without datapath-id: one made from the state file, the same after a restart.
    let made = dpid(&ofctl(&d, &["-O", "OpenFlow13", "show"]));
    assert_eq!(made.len(), 16);
    d.restart();
    assert_eq!(dpid(&ofctl(&d, &["-O", "OpenFlow13", "show"])), made);
    // Set: used, and kept across a restart with the rest of the state.
    d.ctl_ok(&["set", "datapath-id=00000000000000ab"]);
    assert_eq!(
        dpid(&ofctl(&d, &["-O", "OpenFlow13", "show"])),
        "00000000000000ab"
    );
    d.restart();
    assert_eq!(
        dpid(&ofctl(&d, &["-O", "OpenFlow14", "show"])),
        "00000000000000ab"
    );
    // A bad one changes nothing and names the problem.
    let out = d.ctl(&["set", "datapath-id=12"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("16 hex digits"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        dpid(&ofctl(&d, &["-O", "OpenFlow13", "show"])),
        "00000000000000ab"
    );
    assert!(d.stop(), "vswd stopped cleanly");
    assert!(
        !d.dir.join("br0.mgmt").exists(),
        "the management socket is removed with the daemon"
    );
}
