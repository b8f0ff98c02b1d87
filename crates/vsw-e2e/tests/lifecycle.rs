//! Restarts, vanishing interfaces and bad input: the switch keeps its state and lives on.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use vsw_e2e::{serial, wait_until, Host, Vswd};

#[test]
fn restart_restores_ports_and_flows() {
    let _g = serial();
    let mut d = Vswd::start();
    let (a, b) = (Host::new(1), Host::new(2));
    d.ctl_ok(&["add-port", &a.port]);
    d.ctl_ok(&["add-port", &b.port, "afpacket-mode=mmsg"]);
    d.ctl_ok(&["add-flow", "priority=5,udp,tp_dst=9,actions=drop"]);
    assert!(d.stop(), "vswd must exit cleanly on SIGTERM");
    d.restart();
    let show = d.show();
    let names: Vec<_> = show
        .ports
        .iter()
        .map(|p| (p.name.clone(), p.no, p.status.clone()))
        .collect();
    assert_eq!(
        names,
        vec![
            (a.port.clone(), 1, "up".into()),
            (b.port.clone(), 2, "up".into())
        ]
    );
    assert!(show.ports[1]
        .options
        .contains(&("afpacket-mode".into(), "mmsg".into())));
    let flows = d.flows();
    assert_eq!(flows.len(), 1);
    assert_eq!(flows[0].flow, "priority=5,udp,tp_dst=9,actions=drop");
    assert!(a.ping(&b, 2), "forwarding after restart");
}

/// `flow-restore-wait` as in Open vSwitch: while it is set nothing is forwarded (a
/// restart with it set comes up holding), and clearing it forwards by the flows that
/// were restored meanwhile.
#[test]
fn flow_restore_wait_holds_forwarding_until_it_is_cleared() {
    let _g = serial();
    let mut d = Vswd::start();
    let (a, b) = (Host::new(1), Host::new(2));
    d.ctl_ok(&["add-port", &a.port]);
    d.ctl_ok(&["add-port", &b.port]);
    assert!(a.ping(&b, 1), "{}", d.log());
    d.ctl_ok(&["set", "flow-restore-wait=true"]);
    assert!(!a.ping(&b, 2), "forwarded while waiting for the flows");
    let trace = d.ctl_ok(&["trace", "in_port=1,dl_dst=02:00:c6:12:00:02"]);
    assert!(trace.contains("flow-restore-wait"), "{trace}");
    // Restarted with it set: up, holding, while its flows are put back.
    assert!(d.stop());
    d.restart();
    assert!(!a.ping(&b, 2), "forwarded after a restart while waiting");
    d.ctl_ok(&["del-flows"]);
    d.ctl_ok(&["add-flow", "actions=NORMAL"]);
    d.ctl_ok(&["set", "flow-restore-wait=false"]);
    assert!(a.ping(&b, 3), "not forwarding once the flows were restored");
    assert!(
        d.ctl(&["set", "flow-restore-wait=maybe"])
            .status
            .code()
            .is_some_and(|c| c != 0),
        "a bad value was taken"
    );
}

#[test]
fn vanished_interface_goes_down_and_comes_back() {
    let _g = serial();
    let d = Vswd::start();
    let (a, b) = (Host::new(1), Host::new(2));
    d.ctl_ok(&["add-port", &a.port]);
    d.ctl_ok(&["add-port", &b.port]);
    assert!(a.ping(&b, 1));
    b.unplug();
    wait_until("port to go down", Duration::from_secs(5), || {
        d.port(&b.port).status.starts_with("down")
    });
    assert_eq!(d.ports().len(), 2, "the port's configuration stays");
    b.plug();
    wait_until("port to come back up", Duration::from_secs(5), || {
        d.port(&b.port).status == "up"
    });
    assert!(
        a.ping(&b, 2),
        "forwarding resumes on the new interface\n{}",
        d.log()
    );
}

#[test]
fn bad_commands_are_refused_and_change_nothing() {
    let _g = serial();
    let d = Vswd::start();
    let a = Host::new(1);
    d.ctl_ok(&["add-port", &a.port]);
    d.ctl_ok(&["add-flow", "priority=1,actions=normal"]);
    let before = (
        d.ports().len(),
        d.flows().len(),
        std::fs::read_to_string(&d.state).unwrap(),
    );

    let cases: &[(&[&str], &str)] = &[
        (
            &["add-port", "vsw-no-such0"],
            "no network interface named 'vsw-no-such0'",
        ),
        (&["add-port", &a.port], "already exists"),
        (&["add-port", "bad/name"], "not a valid interface name"),
        (
            &["add-flow", "priority=1,nw_src=1.2.3.999,ip,actions=drop"],
            "bad value '1.2.3.999' for nw_src",
        ),
        (
            &["add-flow", "priority=1,frob=2,actions=drop"],
            "unknown field 'frob'",
        ),
        (
            &["add-flow", "in_port=nosuch,actions=drop"],
            "no port named 'nosuch'",
        ),
        (
            &["add-flow", "tp_dst=80,actions=drop"],
            "needs a transport protocol",
        ),
        (
            &["set", "pmd-cpu-mask=0x0"],
            "bad value '0x0' for pmd-cpu-mask",
        ),
        (&["set", "nonsense=1"], "unknown option 'nonsense'"),
        (
            &["set-port", &a.port, "afpacket-mode=warp"],
            "afpacket-mode must be 'ring', 'ring-v3' or 'mmsg'",
        ),
        (&["del-port", "ghost"], "no port named 'ghost'"),
    ];
    for (args, expect) in cases {
        let out = d.ctl(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "vswctl {args:?} should fail");
        assert!(
            err.contains(expect),
            "vswctl {args:?}: expected '{expect}' in: {err}"
        );
    }
    // add-flows is all or nothing, and names the line.
    let file = d.dir.join("flows.txt");
    std::fs::write(
        &file,
        "priority=2,actions=drop\n# comment\npriority=3,ip,nw_dst=x,actions=drop\n",
    )
    .unwrap();
    let out = d.ctl(&["add-flows", file.to_str().unwrap()]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("line 2"),
        "{out:?}"
    );

    let after = (
        d.ports().len(),
        d.flows().len(),
        std::fs::read_to_string(&d.state).unwrap(),
    );
    assert_eq!(before, after, "a refused command must change nothing");
}

#[test]
fn garbage_on_the_control_socket_gets_an_error_reply() {
    let _g = serial();
    let mut d = Vswd::start();
    for garbage in [
        "hello\n",
        "{\"cmd\":\"explode\"}\n",
        "{\"cmd\":\"add-port\"}\n",
        "[1,2,3]\n",
    ] {
        let mut s = UnixStream::connect(&d.socket).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(garbage.as_bytes()).unwrap();
        let mut reply = String::new();
        BufReader::new(s).read_line(&mut reply).unwrap();
        let v: serde_json::Value = serde_json::from_str(&reply).unwrap();
        assert_eq!(v["ok"], false, "{garbage:?} -> {reply}");
        assert!(
            v["error"].as_str().unwrap().starts_with("bad request"),
            "{reply}"
        );
    }
    // Invalid UTF-8 and a client that hangs up mid-line.
    let mut s = UnixStream::connect(&d.socket).unwrap();
    s.write_all(&[0xff, 0xfe, b'\n']).unwrap();
    drop(s);
    let mut s = UnixStream::connect(&d.socket).unwrap();
    s.write_all(b"{\"cmd\":").unwrap();
    drop(s);
    assert!(d.is_running(), "vswd must survive garbage");
    d.ctl_ok(&["show"]);
}

#[test]
fn corrupt_state_file_is_refused_and_kept() {
    let _g = serial();
    let mut d = Vswd::start();
    assert!(d.stop());
    std::fs::write(&d.state, "{\"version\": 1, \"ports\": [oops").unwrap();
    let out = std::process::Command::new(
        std::env::current_exe()
            .unwrap()
            .parent()
            .unwrap()
            .parent()
            .unwrap()
            .join("vswd"),
    )
    .arg("--socket")
    .arg(&d.socket)
    .arg("--state-file")
    .arg(&d.state)
    .output()
    .unwrap();
    assert!(
        !out.status.success(),
        "vswd must refuse a corrupt state file"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&d.state.display().to_string()) && err.contains("corrupt"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(&d.state).unwrap(),
        "{\"version\": 1, \"ports\": [oops"
    );
}

#[test]
fn garbage_frames_are_counted_drops() {
    let _g = serial();
    let d = Vswd::start();
    let (a, b) = (Host::new(1), Host::new(2));
    d.ctl_ok(&["add-port", &a.port]);
    d.ctl_ok(&["add-port", &b.port]);
    // Ethernet headers saying IPv4 followed by 5 bytes, and an IHL below 5.
    let script = [
        "import socket",
        "s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)",
        "s.bind(('eth0', 0))",
        "eth = b'\\xff'*6 + b'\\x02\\x00\\x00\\x00\\x00\\x09' + b'\\x08\\x00'",
        "for i in range(50): s.send(eth + b'\\x45\\x00\\x00'); s.send(eth + b'\\x41' + b'\\x00'*40)",
    ]
    .join("\n");
    a.exec_ok(&["python3", "-c", &script]);
    wait_until(
        "100 malformed frames counted",
        Duration::from_secs(5),
        || d.port(&a.port).stats.rx_malformed >= 100,
    );
    let pa = d.port(&a.port);
    assert_eq!(pa.stats.rx_malformed, 100, "{pa:?}");
    // (A stray frame of a's own may pass; the 100 malformed ones must not.)
    assert!(
        d.port(&b.port).stats.tx_packets < 100,
        "malformed frames are not forwarded"
    );
    assert!(a.ping(&b, 2), "the switch forwards on");
}

#[test]
fn a_failed_pmd_stops_vswd_with_a_clear_error() {
    let _g = vsw_e2e::serial();
    // Debug commands are off unless vswd is started for them.
    let d = vsw_e2e::Vswd::start();
    let core = d.show().pmd_cores[0];
    let reply = d.raw_request(&format!(r#"{{"cmd":"debug-pmd-failure","core":{core}}}"#));
    assert!(reply.contains("debug commands are off"), "{reply}");
    d.ctl_ok(&["show"]);
    drop(d);
    let mut d = vsw_e2e::Vswd::start_through(&["env", "VSWD_FAULT_INJECTION=1"]);
    d.ctl_ok(&["add-port", "gen", "type=ring", "ring-flows=1"]);
    let started = std::time::Instant::now();
    let reply = d.raw_request(&format!(r#"{{"cmd":"debug-pmd-failure","core":{core}}}"#));
    assert!(
        reply.contains(&format!("PMD on core {core} has failed")),
        "{reply}"
    );
    let status = d
        .wait_exit(std::time::Duration::from_secs(5))
        .expect("vswd stops by itself");
    assert_eq!(status.code(), Some(70), "{status}");
    assert!(started.elapsed() < std::time::Duration::from_secs(3));
    let log = d.log();
    assert!(
        log.contains(&format!("the PMD on core {core} failed; vswd stops")),
        "{log}"
    );
    // Started again, it runs from its state file as before.
    d.restart();
    assert_eq!(d.show().ports.len(), 1);
}
