//! TCP with the veths' offloads on, off and mixed; MTU: frames above it dropped and
//! counted, a change of it under traffic.

use std::time::Duration;

use vsw_e2e::{serial, wait_until, Host, Vswd};

const MB: u64 = 1 << 20;

fn pair() -> (Vswd, Host, Host) {
    let d = Vswd::start();
    let (a, b) = (Host::new(1), Host::new(2));
    d.ctl_ok(&["add-port", &a.port]);
    d.ctl_ok(&["add-port", &b.port]);
    (d, a, b)
}

#[test]
fn tcp_crosses_in_both_directions_with_offloads_on_off_and_mixed() {
    let _g = serial();
    let (d, a, b) = pair();
    for (a_on, b_on) in [(true, true), (false, false), (true, false), (false, true)] {
        a.set_offloads(a_on);
        b.set_offloads(b_on);
        for (from, to, dir) in [(&a, &b, "a→b"), (&b, &a, "b→a")] {
            let got = from
                .iperf_to(to, 1)
                .unwrap_or_else(|e| panic!("{dir}, offloads a={a_on} b={b_on}: {e}\n{}", d.log()));
            assert!(
                got > 10 * MB,
                "{dir}, offloads a={a_on} b={b_on}: only {got} bytes"
            );
        }
    }
    let p = d.port(&b.port);
    assert_eq!(p.stats.tx_mtu_drops, 0);
}

#[test]
fn a_frame_above_the_output_mtu_is_dropped_and_counted() {
    let _g = serial();
    let (d, a, b) = pair();
    assert!(a.ping(&b, 1), "learn both hosts");
    d.ctl_ok(&["set-port", &b.port, "mtu_request=1000"]);
    assert_eq!(
        d.port(&b.port).mtu,
        Some(1000),
        "show prints the MTU in effect"
    );
    let text = d.ctl_ok(&["show"]);
    assert!(text.contains("mtu=1000"), "{text}");
    // 1,200 bytes of ICMP fit a's MTU, not b's port: dropped by vsw, never cut.
    let big = a.exec(&[
        "ping", "-c", "1", "-W", "1", "-s", "1200", "-M", "do", &b.addr,
    ]);
    assert!(!big.status.success(), "a frame above the MTU got through");
    wait_until("the drop to be counted", Duration::from_secs(5), || {
        d.port(&b.port).stats.tx_mtu_drops >= 1
    });
    assert!(a.ping(&b, 2), "frames that fit still pass");
    let dump = d.ctl_ok(&["dump-ports"]);
    assert!(
        dump.contains("mtu=1") && dump.contains("tx_gso_segments="),
        "{dump}"
    );
}

#[test]
fn changing_the_mtu_under_tcp_traffic_keeps_the_transfer_alive() {
    let _g = serial();
    let (d, a, b) = pair();
    assert!(a.ping(&b, 1));
    let port = b.port.clone();
    let socket = d.socket.clone();
    let changer = std::thread::spawn(move || {
        for mtu in ["9000", "1500", "4000", "1500"] {
            std::thread::sleep(Duration::from_millis(700));
            let out = std::process::Command::new(vsw_e2e_binary("vswctl"))
                .args(["--socket", &socket.display().to_string()])
                .args(["set-port", &port, &format!("mtu_request={mtu}")])
                .output()
                .expect("vswctl");
            assert!(
                out.status.success(),
                "mtu_request={mtu}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    });
    let got = a
        .iperf_to(&b, 4)
        .unwrap_or_else(|e| panic!("{e}\n{}", d.log()));
    changer.join().unwrap();
    assert!(got > 10 * MB, "only {got} bytes across four MTU changes");
    assert_eq!(d.port(&b.port).mtu, Some(1500));
    assert_eq!(d.port(&b.port).status, "up");
}

#[test]
fn a_bad_mtu_request_is_refused_and_changes_nothing() {
    let _g = serial();
    let (d, _a, b) = pair();
    let before = d.port(&b.port);
    for bad in ["mtu_request=10", "mtu_request=70000", "mtu_request=x"] {
        let out = d.ctl(&["set-port", &b.port, bad]);
        assert!(!out.status.success(), "{bad} accepted");
        assert!(String::from_utf8_lossy(&out.stderr).contains("mtu_request"));
    }
    let out = d.ctl(&["add-port", "r1", "type=ring", "mtu_request=9000"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not to ring ports"));
    let after = d.port(&b.port);
    assert_eq!((after.mtu, after.options), (before.mtu, before.options));
}

fn vsw_e2e_binary(name: &str) -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("test path");
    exe.parent()
        .and_then(std::path::Path::parent)
        .expect("target dir")
        .join(name)
}

#[test]
fn a_tap_port_carries_tcp_with_offloads_in_both_directions() {
    let _g = serial();
    let d = Vswd::start();
    let b = Host::new(2);
    d.ctl_ok(&["add-port", &b.port]);
    // vsw creates the tap; the host gets it moved into its namespace, as a container
    // runtime or VM manager would hand it over.
    let ns = vsw_e2e::unique("vtt");
    let tap = format!("{ns}t");
    vsw_e2e::must("ip", &["netns", "add", &ns]);
    let host = Host {
        ns: ns.clone(),
        mac: "02:00:c6:12:00:03".into(),
        port: tap.clone(),
        addr: "198.18.0.3".into(),
    };
    d.ctl_ok(&["add-port", &tap, "type=tap"]);
    vsw_e2e::must("ip", &["link", "set", &tap, "netns", &ns]);
    host.exec_ok(&[
        "sysctl",
        "-q",
        "-w",
        &format!("net.ipv6.conf.{tap}.disable_ipv6=1"),
    ]);
    host.exec_ok(&["ip", "link", "set", &tap, "address", &host.mac]);
    host.exec_ok(&["ip", "addr", "add", "198.18.0.3/24", "dev", &tap]);
    host.exec_ok(&["ip", "link", "set", &tap, "up"]);
    host.exec_ok(&["ip", "link", "set", "lo", "up"]);
    assert!(host.ping(&b, 3), "ping across the tap\n{}", d.log());
    for (from, to, dir) in [(&host, &b, "tap→veth"), (&b, &host, "veth→tap")] {
        let got = from
            .iperf_to(to, 2)
            .unwrap_or_else(|e| panic!("{dir}: {e}\n{}", d.log()));
        assert!(got > 10 * MB, "{dir}: only {got} bytes");
    }
    let p = d.port(&tap);
    assert_eq!(p.status, "up", "a tap moved away stays attached");
    assert!(p.stats.rx_packets > 0 && p.stats.tx_packets > 0);
    // A frame the tap refuses under load (its buffer full) is counted, rarely.
    assert_eq!(
        p.stats.tx_mtu_drops + p.stats.tx_too_big,
        0,
        "{:?}",
        p.stats
    );
    assert!(
        p.stats.tx_errors * 1000 <= p.stats.tx_packets,
        "{:?}",
        p.stats
    );
}
