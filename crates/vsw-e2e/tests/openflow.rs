//! vswd's OpenFlow management socket, driven by the real `ovs-ofctl`.

use std::process::Command;
use std::time::Duration;

use vsw_e2e::{serial, wait_until, Vswd};
use vsw_openflow::{Message, Version};

/// `ovs-ofctl [OPTIONS] COMMAND <br0> ARGS…`, whatever its status.
fn ofctl_raw(d: &Vswd, args: &[&str]) -> std::process::Output {
    vsw_e2e::openflow::ovs_ofctl(d, args)
}

fn ofctl(d: &Vswd, args: &[&str]) -> String {
    let out = ofctl_raw(d, args);
    assert!(
        out.status.success(),
        "ovs-ofctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `ovs-ofctl -O OpenFlow13 ARGS…` against `d`.
fn of13(d: &Vswd, args: &[&str]) -> String {
    let mut a = vec!["-O", "OpenFlow13"];
    a.extend_from_slice(args);
    ofctl(d, &a)
}

/// How Open vSwitch prints `flow` (`ovs-ofctl -O VERSION parse-flow`: `… ADD <flow>`).
use vsw_e2e::openflow::{assert_dumped_as_ovs_prints, ovs_prints};

fn monitor_lines<T>(
    d: &Vswd,
    format: &str,
    read: impl FnOnce(&mut Box<dyn Iterator<Item = String>>) -> T,
) -> T {
    monitor_lines_with(d, format, &[], read)
}

/// [`monitor_lines`] with more of `ovs-ofctl monitor`'s arguments (`resume`).
fn monitor_lines_with<T>(
    d: &Vswd,
    format: &str,
    more: &[&str],
    read: impl FnOnce(&mut Box<dyn Iterator<Item = String>>) -> T,
) -> T {
    use std::io::BufRead;
    use std::process::Stdio;
    let target = format!("unix:{}", d.dir.join("br0.mgmt").display());
    let mut monitor = Command::new("timeout")
        .args([
            "20",
            "ovs-ofctl",
            "-O",
            "OpenFlow13",
            "-P",
            format,
            "monitor",
            &target,
            "65535",
        ])
        .args(more)
        .env("OVS_RUNDIR", &d.dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ovs-ofctl monitor");
    let out = std::io::BufReader::new(monitor.stderr.take().expect("stderr"));
    let mut lines: Box<dyn Iterator<Item = String>> = Box::new(out.lines().map_while(Result::ok));
    let got = read(&mut lines);
    drop(lines);
    // The pipe is closed by now: a monitor blocked writing to it ends.
    vsw_e2e::end(monitor);
    got
}

/// Hosts 1 and 2 in namespaces of their own, their ports vswd's ports 1 and 2.
fn two_hosts(d: &Vswd) -> (vsw_e2e::Host, vsw_e2e::Host) {
    let (h1, h2) = (vsw_e2e::Host::new(1), vsw_e2e::Host::new(2));
    d.ctl_ok(&["add-port", &h1.port]);
    d.ctl_ok(&["add-port", &h2.port]);
    (h1, h2)
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
    // A `ptcp:` listener takes OpenFlow connections as the management socket does.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap();
    d.ctl_ok(&["set-controller", &format!("ptcp:{port}:127.0.0.1")]);
    let tcp = format!("tcp:127.0.0.1:{port}");
    let mut shown = None;
    wait_until("the listener to answer", Duration::from_secs(10), || {
        let out = Command::new("ovs-ofctl")
            .args(["-t", "5", "-O", "OpenFlow13", "show", &tcp])
            .output()
            .expect("ovs-ofctl");
        shown = Some(String::from_utf8_lossy(&out.stdout).into_owned());
        out.status.success()
    });
    assert_eq!(dpid(&shown.unwrap_or_default()), "00000000000000ab");
    d.ctl_ok(&["del-controller"]);
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

#[test]
fn flows_options_of_ovs_ofctl_land_in_vsws_tables_and_forward() {
    let _g = serial();
    let d = Vswd::start();
    // Everything goes: the learning switch's rule too, as with Open vSwitch.
    ofctl(&d, &["-O", "OpenFlow13", "del-flows"]);
    assert!(d.all_flows().is_empty(), "{:?}", d.all_flows());
    // Ports 1, 2, 3; the generator sends from the moment it is added (into no
    // flow: dropped).
    d.ctl_ok(&["add-port", "gen", "type=ring", "ring-flows=4"]);
    d.ctl_ok(&["add-port", "sink", "type=ring"]);
    d.ctl_ok(&["add-port", "other", "type=ring"]);
    ofctl(
        &d,
        &[
            "-O",
            "OpenFlow13",
            "add-flow",
            "table=0,priority=10,in_port=1,actions=goto_table:3",
        ],
    );
    ofctl(
        &d,
        &[
            "-O",
            "OpenFlow13",
            "add-flow",
            "table=3,priority=20,actions=output:2",
        ],
    );
    let flows = d.all_flows();
    assert_eq!(flows.len(), 2, "{flows:?}");
    assert!(
        flows
            .iter()
            .any(|f| f.table == 3 && f.priority == 20 && f.actions == "output:2"),
        "{flows:?}"
    );
    // Traffic follows the controller's pipeline: gen (1) -> table 3 -> sink (2).
    wait_until(
        "the sink to be sent packets",
        Duration::from_secs(10),
        || d.port("sink").stats.tx_packets > 1000,
    );
    assert_eq!(d.port("other").stats.tx_packets, 0);
    // Flow stats echo the flows as installed, with their counters.
    let dump = ofctl(&d, &["-O", "OpenFlow13", "dump-flows"]);
    assert!(
        dump.contains("table=0, ") && dump.contains("priority=10,in_port=1 actions=goto_table:3"),
        "{dump}"
    );
    assert!(
        dump.contains("table=3, ") && dump.contains("priority=20 actions=output:2"),
        "{dump}"
    );
    let counted = dump
        .lines()
        .find(|l| l.contains("table=3"))
        .and_then(|l| l.split("n_packets=").nth(1))
        .and_then(|n| n.split(',').next())
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or(0);
    assert!(counted > 1000, "{dump}");
    // Table stats: what was looked up and matched where (table 0 also saw the
    // generator's packets before any flow: lookups, no matches).
    let tables = ofctl(&d, &["-O", "OpenFlow13", "dump-tables"]);
    let table = |n: u8, what: &str| -> u64 {
        tables
            .split(&format!("table {n}:"))
            .nth(1)
            .and_then(|t| t.split(&format!("{what}=")).nth(1))
            .and_then(|v| v.split([',', '\n']).next())
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {what} for table {n} in {tables}"))
    };
    assert_eq!((table(0, "active"), table(3, "active")), (1, 1), "{tables}");
    assert!(
        table(3, "lookup") > 1000 && table(3, "matched") > 1000,
        "{tables}"
    );
    assert!(table(0, "lookup") >= table(0, "matched"), "{tables}");
    let aggregate = ofctl(&d, &["-O", "OpenFlow15", "dump-aggregate"]);
    assert!(aggregate.contains("flow_count=2"), "{aggregate}");
    // Port stats count what the ports sent, in both layouts.
    for version in ["OpenFlow13", "OpenFlow14"] {
        let ports = ofctl(&d, &["-O", version, "dump-ports"]);
        let sink_tx = ports
            .split("port  2:")
            .nth(1)
            .and_then(|p| p.split("tx pkts=").nth(1))
            .and_then(|n| n.split(',').next())
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0);
        assert!(sink_tx > 1000, "{version}: {ports}");
        assert!(ports.contains("port  3:"), "{ports}");
    }
    let one_port = ofctl(&d, &["-O", "OpenFlow13", "dump-ports", "3"]);
    assert!(
        one_port.contains("port  3:") && !one_port.contains("port  2:"),
        "{one_port}"
    );
    let one_table = ofctl(&d, &["-O", "OpenFlow14", "dump-flows", "table=3"]);
    assert_eq!(
        one_table
            .lines()
            .filter(|l| l.contains("priority="))
            .count(),
        1,
        "{one_table}"
    );
    // A match vsw cannot do yet is refused with the error OpenFlow names, and the
    // tables stay as they were.
    let out = ofctl_raw(
        &d,
        &[
            "-O",
            "OpenFlow13",
            "add-flow",
            "table=0,tun_gbp_id=1,actions=drop",
        ],
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("OFPBMC_BAD_FIELD"), "{err}");
    assert_eq!(d.all_flows().len(), 2);
    // A strict delete takes the one flow; then the sink hears nothing more.
    ofctl(
        &d,
        &[
            "-O",
            "OpenFlow13",
            "--strict",
            "del-flows",
            "table=3,priority=20",
        ],
    );
    assert_eq!(d.all_flows().len(), 1);
    let before = d.port("sink").stats.tx_packets;
    std::thread::sleep(Duration::from_millis(300));
    let after = d.port("sink").stats.tx_packets;
    assert!(
        after - before < 100,
        "{before} -> {after}: forwarding went on"
    );
}

#[test]
fn a_silent_peer_is_probed_then_closed_and_an_old_one_refused() {
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;
    // Timed by the probe interval: not beside the tests that flood packet-ins.
    let _g = serial();
    let d = Vswd::start();
    let path = d.dir.join("br0.mgmt");
    // An OpenFlow 1.3 hello without a bitmap, then silence.
    let mut c = UnixStream::connect(&path).unwrap();
    c.write_all(&[4, 0, 0, 8, 0, 0, 0, 1]).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 256];
    let started = std::time::Instant::now();
    // vsw's hello, then (after the probe interval) an echo request, then the end.
    loop {
        match c.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) => panic!("no close within 20 s: {e}"),
        }
    }
    let kinds: Vec<u8> = {
        let mut k = Vec::new();
        let mut at = 0;
        while at + 8 <= got.len() {
            k.push(got[at + 1]);
            at += usize::from(u16::from_be_bytes([got[at + 2], got[at + 3]]));
        }
        k
    };
    assert_eq!(kinds, vec![0, 2], "hello, then one echo request");
    assert!(
        started.elapsed() >= Duration::from_secs(9),
        "probed, then given time"
    );
    // A peer that speaks only a later OpenFlow (its hello's bitmap says 1.6) is
    // told why and closed.
    let mut c = UnixStream::connect(&path).unwrap();
    c.write_all(&[7, 0, 0, 16, 0, 0, 0, 7, 0, 1, 0, 8, 0, 0, 0, 0x80])
        .unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut got = Vec::new();
    let _ = c.read_to_end(&mut got);
    let error_at = usize::from(u16::from_be_bytes([got[2], got[3]]));
    assert_eq!(&got[error_at..error_at + 2], &[6, 1], "an error, in 1.5");
    assert_eq!(
        &got[error_at + 8..error_at + 12],
        &[0, 0, 0, 0],
        "HELLO_FAILED/INCOMPATIBLE"
    );
}

#[test]
fn packet_ins_reach_ovs_ofctl_monitor_and_packet_outs_are_sent() {
    let _g = serial();
    let d = Vswd::start();
    ofctl(&d, &["-O", "OpenFlow13", "del-flows"]);
    d.ctl_ok(&["add-port", "gen", "type=ring", "ring-flows=1"]);
    d.ctl_ok(&["add-port", "sink", "type=ring"]);
    ofctl(
        &d,
        &[
            "-O",
            "OpenFlow13",
            "add-flow",
            "cookie=0x5,in_port=1,actions=set_field:0x2a->reg3,set_field:0x7->metadata,controller:32",
        ],
    );
    // A service connection gets packet-ins once it sets a miss_send_len (the
    // monitor's argument), as with Open vSwitch. (The monitor prints them on its
    // standard error.) OpenFlow's own packet-in: the monitor asks for
    // NXT_PACKET_IN2 unless told otherwise (that one has a test of its own).
    let first = monitor_lines(&d, "standard", |lines| {
        lines.find(|l| l.starts_with("OFPT_PACKET_IN"))
    });
    let first = first.expect("a packet-in before the monitor's time ran out");
    assert!(
        // What only translation knew (registers, metadata) is in the match.
        first.contains(
            "cookie=0x5 total_len=60 reg3=0x2a,metadata=0x7,in_port=1 (via action) data_len=32"
        ),
        "{first}"
    );
    // Cut to the action's 32 bytes; the whole length is said.
    // Packet-outs: to a port from CONTROLLER (1.3), flooded from port 1 (1.5, whose
    // packet-out names the input port in a match); the flow sends the sink nothing.
    assert_eq!(d.port("sink").stats.tx_packets, 0);
    let frame = "020000000002020000000001080045000014000100004011f8d3c6120001c6120002";
    for (version, from, actions) in [
        ("OpenFlow13", "CONTROLLER", "output:2"),
        ("OpenFlow15", "1", "FLOOD"),
    ] {
        let spec = format!("in_port={from} packet={frame} actions={actions}");
        ofctl(&d, &["-O", version, "packet-out", &spec]);
    }
    wait_until("both packet-outs sent", Duration::from_secs(5), || {
        d.port("sink").stats.tx_packets == 2
    });
    // One whose action the packet cannot take is refused with the error Open vSwitch
    // gives (MATCH_INCONSISTENT), and nothing is sent: an ARP packet has no IPv4
    // source to set.
    let arp = concat!(
        "ffffffffffff020000000001",
        "08060001080006040001020000000001c6120001000000000000c6120002"
    );
    let spec = format!("in_port=1 packet={arp} actions=mod_nw_src:198.18.0.9,output:2");
    let out = ofctl_raw(&d, &["-O", "OpenFlow13", "packet-out", &spec]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("OFPBAC_MATCH_INCONSISTENT"),
        "{err}"
    );
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(d.port("sink").stats.tx_packets, 2);
}

/// `n_packets` of the one line of `dump` that contains `needle`.
fn packets_of(dump: &str, needle: &str) -> u64 {
    dump.lines()
        .find(|l| l.contains(needle))
        .and_then(|l| l.split("n_packets=").nth(1))
        .and_then(|n| n.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no {needle} in {dump}"))
}

#[test]
fn modify_cookies_and_selections_act_as_ovs_ofctl_expects() {
    let _g = serial();
    let d = Vswd::start();
    let of = |args: &[&str]| of13(&d, args);
    of(&["del-flows"]);
    d.ctl_ok(&["add-port", "gen", "type=ring", "ring-flows=4"]);
    d.ctl_ok(&["add-port", "sink", "type=ring"]);
    d.ctl_ok(&["add-port", "other", "type=ring"]);
    of(&[
        "add-flow",
        "cookie=0x11,priority=10,in_port=1,actions=output:2",
    ]);
    of(&[
        "add-flow",
        "cookie=0x21,priority=5,in_port=3,actions=output:2",
    ]);
    wait_until(
        "the sink to be sent packets",
        Duration::from_secs(10),
        || d.port("sink").stats.tx_packets > 1000,
    );
    // Modify: new actions, same flow (cookie, counters); the traffic follows.
    of(&["mod-flows", "in_port=1,actions=output:3"]);
    wait_until(
        "the other port to be sent packets",
        Duration::from_secs(10),
        || d.port("other").stats.tx_packets > 1000,
    );
    let sink = d.port("sink").stats.tx_packets;
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        d.port("sink").stats.tx_packets - sink < 100,
        "still sent to the sink"
    );
    let dump = of(&["dump-flows"]);
    assert!(
        dump.contains("cookie=0x11,") && dump.contains("in_port=1 actions=output:3"),
        "{dump}"
    );
    let counted = packets_of(&dump, "cookie=0x11,");
    assert!(counted > 1000, "the counters were kept: {dump}");
    // reset_counts: they start again.
    of(&[
        "--strict",
        "mod-flows",
        "reset_counts,priority=10,in_port=1,actions=output:3",
    ]);
    let after = packets_of(&of(&["dump-flows"]), "cookie=0x11,");
    assert!(after < counted, "{after} after a reset, {counted} before");
    // Selections: by cookie under a mask, by output port.
    let by_cookie = of(&["dump-flows", "cookie=0x21/-1"]);
    assert_eq!(by_cookie.matches("cookie=").count(), 1, "{by_cookie}");
    assert!(by_cookie.contains("in_port=3"), "{by_cookie}");
    let by_out = of(&["dump-flows", "out_port=3"]);
    assert!(
        by_out.contains("in_port=1") && !by_out.contains("in_port=3"),
        "{by_out}"
    );
    of(&["del-flows", "cookie=0x20/0xf0"]);
    let left = of(&["dump-flows"]);
    assert!(
        !left.contains("cookie=0x21") && left.contains("cookie=0x11"),
        "{left}"
    );
    // check_overlap: an add that shares packets with a flow of its priority fails.
    let out = ofctl_raw(
        &d,
        &[
            "-O",
            "OpenFlow13",
            "add-flow",
            "check_overlap,priority=10,ip,actions=drop",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("OFPFMFC_OVERLAP"),
        "{err}"
    );
    assert_eq!(d.all_flows().len(), 1);
    of(&["add-flow", "check_overlap,priority=11,ip,actions=drop"]);
    assert_eq!(d.all_flows().len(), 2);
}

/// `name=N` of the one line of `text` that contains `needle` (`name` as printed).
fn count_of(text: &str, needle: &str, name: &str) -> u64 {
    text.lines()
        .find(|l| l.contains(needle))
        .and_then(|l| l.split(&format!("{name}=")).nth(1))
        .and_then(|n| n.split(',').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} for {needle} in {text}"))
}

/// OpenFlow 1.5's group-mods as ovn-controller sends them: bucket ids, a selection
/// method, and buckets inserted and removed one command at a time — alone and in
/// one bundle with the add — echoed as Open vSwitch would echo them.
#[test]
fn buckets_are_inserted_and_removed_by_id_in_openflow_15() {
    let _g = serial();
    let d = Vswd::start();
    let of = |args: &[&str]| {
        let mut all = vec!["-O", "OpenFlow15"];
        all.extend_from_slice(args);
        ofctl(&d, &all)
    };
    d.ctl_ok(&["add-port", "a", "type=ring"]);
    d.ctl_ok(&["add-port", "b", "type=ring"]);
    of(&[
        "add-group",
        "group_id=1,type=select,selection_method=hash,fields(ip_src,nw_proto),\
         bucket=bucket_id:10,weight:100,actions=output:1,\
         bucket=bucket_id:20,weight:100,actions=output:2",
    ]);
    let order = |groups: &str| -> Vec<u32> {
        groups
            .split("bucket_id:")
            .skip(1)
            .filter_map(|b| b.split(',').next()?.parse().ok())
            .collect()
    };
    let dump = of(&["dump-groups"]);
    assert!(
        dump.contains("selection_method=hash,fields(ip_src,nw_proto)"),
        "{dump}"
    );
    assert_eq!(order(&dump), vec![10, 20], "{dump}");
    of(&[
        "insert-buckets",
        "group_id=1,command_bucket_id=10,bucket=bucket_id:15,actions=output:2",
    ]);
    of(&[
        "insert-buckets",
        "group_id=1,command_bucket_id=first,bucket=bucket_id:5,actions=output:1",
    ]);
    assert_eq!(order(&of(&["dump-groups"])), vec![5, 10, 15, 20]);
    of(&["remove-buckets", "group_id=1,command_bucket_id=10"]);
    of(&["remove-buckets", "group_id=1,command_bucket_id=last"]);
    let dump = of(&["dump-groups"]);
    assert_eq!(order(&dump), vec![5, 15], "{dump}");
    assert!(dump.contains("selection_method=hash"), "{dump}");
    // A bucket id the group has, or a bucket it does not: refused, nothing changed.
    for (bad, code) in [
        (
            "group_id=1,command_bucket_id=last,bucket=bucket_id:5,actions=output:1",
            "OFPGMFC_BUCKET_EXISTS",
        ),
        (
            "group_id=1,command_bucket_id=99,bucket=bucket_id:6,actions=output:1",
            "OFPGMFC_UNKNOWN_BUCKET",
        ),
    ] {
        let out = ofctl_raw(&d, &["-O", "OpenFlow15", "insert-buckets", bad]);
        assert!(!out.status.success(), "{bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(code), "{bad}: {err}");
    }
    // An all group's buckets, inserted as ovs-ofctl sends them (no weight).
    of(&[
        "add-group",
        "group_id=3,type=all,bucket=bucket_id:1,actions=output:1",
    ]);
    of(&[
        "insert-buckets",
        "group_id=3,command_bucket_id=last,bucket=bucket_id:2,actions=output:2",
    ]);
    assert_eq!(order(&of(&["dump-groups", "3"])), vec![1, 2]);
    assert_eq!(order(&of(&["dump-groups", "1"])), vec![5, 15]);
    // In a bundle (as ovn-controller sends every change): on the group as it is.
    of(&[
        "--bundle",
        "insert-buckets",
        "group_id=1,command_bucket_id=last,bucket=bucket_id:30,actions=output:1",
    ]);
    assert_eq!(order(&of(&["dump-groups", "1"])), vec![5, 15, 30]);
}

#[test]
fn groups_options_of_ovs_ofctl_share_copy_and_fail_over_traffic() {
    let _g = serial();
    let mut d = Vswd::start();
    let of = |args: &[&str]| of13(&d, args);
    of(&["del-flows"]);
    d.ctl_ok(&["add-port", "gen", "type=ring", "ring-flows=64"]);
    d.ctl_ok(&["add-port", "a", "type=ring"]);
    d.ctl_ok(&["add-port", "b", "type=ring"]);
    let host = vsw_e2e::Host::new(1);
    d.ctl_ok(&["add-port", &host.port]);
    let tx_of = |d: &Vswd, p: &str| d.port(p).stats.tx_packets;
    let tx = |p: &str| tx_of(&d, p);

    // Select: each connection to one bucket, both buckets used; the buckets' counts
    // add up to the group's.
    of(&[
        "add-group",
        "group_id=1,type=select,bucket=weight:1,actions=output:2,bucket=weight:3,actions=output:3",
    ]);
    of(&["add-flow", "in_port=1,actions=group:1"]);
    wait_until("both buckets to be used", Duration::from_secs(10), || {
        tx("a") > 1000 && tx("b") > 1000
    });
    let stats = of(&["dump-group-stats"]);
    let total = count_of(&stats, "group_id=1", "packet_count");
    let b0 = count_of(&stats, "group_id=1", "bucket0:packet_count");
    let b1 = count_of(&stats, "group_id=1", "bucket1:packet_count");
    assert_eq!(b0 + b1, total, "{stats}");
    assert!(
        of(&["dump-groups"]).contains("group_id=1,type=select"),
        "dump-groups"
    );
    // One that hands packets to a group that is not there is refused.
    let out = ofctl_raw(
        &d,
        &["-O", "OpenFlow13", "add-flow", "in_port=2,actions=group:9"],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("OFPBAC_BAD_OUT_GROUP"), "{err}");
    // Groups are kept across a restart, with the flows that use them.
    d.restart();
    let of = |args: &[&str]| of13(&d, args);
    let tx = |p: &str| tx_of(&d, p);
    assert!(of(&["dump-groups"]).contains("group_id=1,type=select"));
    assert!(of(&["dump-flows"]).contains("actions=group:1"));

    // Modified to all: every packet to both.
    of(&[
        "mod-group",
        "group_id=1,type=all,bucket=actions=output:2,bucket=actions=output:3",
    ]);
    let (a0, b0) = (tx("a"), tx("b"));
    wait_until(
        "both to be sent every packet",
        Duration::from_secs(10),
        || tx("a") > a0 + 5000 && tx("b") > b0 + 5000,
    );
    let stats = of(&["dump-group-stats"]);
    let b0 = count_of(&stats, "group_id=1", "bucket0:packet_count");
    let b1 = count_of(&stats, "group_id=1", "bucket1:packet_count");
    assert!(b0 > 0 && b1 > 0, "{stats}");

    // Fast failover: the host's port while its link is up, then port b.
    of(&[
        "add-group",
        "group_id=2,type=fast_failover,bucket=watch_port:4,actions=output:4,bucket=watch_port:3,actions=output:3",
    ]);
    of(&["mod-flows", "in_port=1,actions=group:2"]);
    let h0 = tx(&host.port);
    wait_until(
        "the watched port to be sent packets",
        Duration::from_secs(10),
        || tx(&host.port) > h0 + 1000,
    );
    host.unplug();
    let b0 = tx("b");
    wait_until(
        "the fast-failover group to fail over",
        Duration::from_secs(15),
        || tx("b") > b0 + 1000,
    );
    // Deleting a group takes the flows that use it.
    of(&["del-groups", "group_id=2"]);
    assert!(d.all_flows().is_empty(), "{:?}", d.all_flows());
    assert!(!of(&["dump-groups"]).contains("group_id=2"));
}

#[test]
fn meters_options_of_ovs_ofctl_limit_and_count_traffic() {
    let _g = serial();
    let d = Vswd::start();
    let of = |version: &str, args: &[&str]| {
        let mut a = vec!["-O", version];
        a.extend_from_slice(args);
        ofctl(&d, &a)
    };
    of("OpenFlow13", &["del-flows"]);
    d.ctl_ok(&["add-port", "gen", "type=ring", "ring-flows=64"]);
    d.ctl_ok(&["add-port", "sink", "type=ring"]);
    of(
        "OpenFlow13",
        &["add-meter", "meter=1,pktps,bands=type=drop,rate=10000"],
    );
    of(
        "OpenFlow13",
        &["add-flow", "in_port=1,actions=meter:1,output:2"],
    );
    // A stream far above the rate: the band drops the rest, and every packet
    // measured either passed or was counted on the band.
    wait_until("the band to drop", Duration::from_secs(10), || {
        let stats = of("OpenFlow13", &["meter-stats"]);
        stats
            .split("0: packet_count:")
            .nth(1)
            .and_then(|n| n.split_whitespace().next())
            .and_then(|n| n.parse::<u64>().ok())
            .is_some_and(|n| n > 100_000)
    });
    // Read before the meter: what the sink was sent had passed the meter by then.
    let passed = d.port("sink").stats.tx_packets;
    let stats = of("OpenFlow13", &["meter-stats"]);
    let field = |name: &str| -> u64 {
        stats
            .split(name)
            .nth(1)
            .and_then(|n| n.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {stats}"))
    };
    let (measured, dropped) = (field("packet_in_count:"), field("0: packet_count:"));
    assert!(
        measured > dropped && dropped > 10 * (measured - dropped),
        "{stats}"
    );
    assert!(passed <= measured - dropped, "{passed} sent, {stats}");
    assert!(stats.contains("flow_count:1"), "{stats}");
    // Configuration as set (no burst flag: burst 0), in 1.3 and 1.5.
    for v in ["OpenFlow13", "OpenFlow15"] {
        let config = of(v, &["dump-meters"]);
        assert!(
            config.contains("meter=1 pktps bands=") && config.contains("type=drop rate=10000"),
            "{config}"
        );
        assert!(!config.contains("burst_size"), "{config}");
    }
    // The 1.5 flow says its meter as an action.
    let flows = of("OpenFlow15", &["dump-flows"]);
    assert!(flows.contains("actions=meter:1,output:2"), "{flows}");
    // A flow with a meter that is not there is refused; deleting the meter takes
    // its flow along.
    let out = ofctl_raw(
        &d,
        &[
            "-O",
            "OpenFlow13",
            "add-flow",
            "in_port=2,actions=meter:9,output:1",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("OFPMMFC_UNKNOWN_METER"), "{err}");
    let out = ofctl_raw(
        &d,
        &[
            "-O",
            "OpenFlow13",
            "add-meter",
            "meter=1,pktps,bands=type=drop,rate=5",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("OFPMMFC_METER_EXISTS"), "{err}");
    of("OpenFlow13", &["del-meter", "meter=1"]);
    assert!(d.all_flows().is_empty(), "{:?}", d.all_flows());
}

#[test]
fn the_bridges_internal_port_is_openflows_local_and_carries_the_hosts_address() {
    let _g = serial();
    let d = Vswd::start();
    let host = vsw_e2e::Host::new(1);
    d.ctl_ok(&["add-port", &host.port]);
    d.ctl_ok(&["add-port", "br0", "type=internal"]);
    assert_eq!(d.port("br0").no, 65534);
    let show = ofctl(&d, &["-O", "OpenFlow13", "show"]);
    assert!(show.contains(" LOCAL(br0): addr:"), "{show}");
    // The host side of the switch: the bridge's port, in a namespace of the test's
    // own with an address there (a tap keeps working wherever it is).
    let ns = vsw_e2e::unique("vtlocal");
    vsw_e2e::must("ip", &["netns", "add", &ns]);
    struct Gone(String);
    impl Drop for Gone {
        fn drop(&mut self) {
            let _ = vsw_e2e::run("ip", &["netns", "del", &self.0]);
        }
    }
    let _gone = Gone(ns.clone());
    vsw_e2e::must("ip", &["link", "set", "br0", "netns", &ns]);
    let in_ns = |args: &[&str]| {
        let mut a = vec!["netns", "exec", ns.as_str()];
        a.extend_from_slice(args);
        vsw_e2e::must("ip", &a)
    };
    in_ns(&["ip", "addr", "add", "198.18.0.254/24", "dev", "br0"]);
    in_ns(&["ip", "link", "set", "br0", "up"]);
    // Flows name it LOCAL in OpenFlow, 65534 in vsw.
    ofctl(
        &d,
        &[
            "-O",
            "OpenFlow13",
            "add-flow",
            "priority=5,in_port=LOCAL,actions=NORMAL",
        ],
    );
    assert!(d.all_flows().iter().any(|f| f.matching == "in_port=65534"));
    let dump = ofctl(&d, &["-O", "OpenFlow13", "dump-flows"]);
    assert!(dump.contains("in_port=LOCAL"), "{dump}");
    let ping = host.exec(&[
        "ping",
        "-c",
        "3",
        "-i",
        "0.2",
        "-W",
        "2",
        "-q",
        "198.18.0.254",
    ]);
    assert!(
        ping.status.success(),
        "{}",
        String::from_utf8_lossy(&ping.stdout)
    );
}

#[test]
fn write_actions_run_when_the_pipeline_ends() {
    let _g = serial();
    let d = Vswd::start();
    ofctl(&d, &["-O", "OpenFlow13", "del-flows"]);
    d.ctl_ok(&["add-port", "gen", "type=ring", "ring-flows=4"]);
    d.ctl_ok(&["add-port", "a", "type=ring"]);
    d.ctl_ok(&["add-port", "b", "type=ring"]);
    for flow in [
        "table=0,in_port=1,actions=write_actions(output:3),goto_table:1",
        "table=1,actions=output:2",
    ] {
        ofctl(&d, &["-O", "OpenFlow13", "add-flow", flow]);
    }
    // Applied in table 1 (a), then the action set (b): both are sent every packet.
    wait_until(
        "both ports to be sent packets",
        Duration::from_secs(10),
        || d.port("a").stats.tx_packets > 1000 && d.port("b").stats.tx_packets > 1000,
    );
    let dump = ofctl(&d, &["-O", "OpenFlow13", "dump-flows"]);
    assert!(
        dump.contains("actions=write_actions(output:3),goto_table:1"),
        "{dump}"
    );
    // clear_actions in table 1: the set is emptied, b hears nothing more.
    ofctl(
        &d,
        &[
            "-O",
            "OpenFlow13",
            "mod-flows",
            "table=1,actions=output:2,clear_actions",
        ],
    );
    let b = d.port("b").stats.tx_packets;
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        d.port("b").stats.tx_packets - b < 100,
        "the action set still ran"
    );
}

#[test]
fn set_fields_options_of_ovs_ofctl_are_installed_echoed_and_rewrite_packets() {
    let _g = serial();
    let d = Vswd::start();
    let of = |args: &[&str]| of13(&d, args);
    of(&["del-flows"]);
    let (h1, h2) = two_hosts(&d);
    // Replies from h2 leave with TTL 5 and ECN 1 (the IPv4 checksum follows: the
    // kernel would drop them otherwise).
    of(&["add-flow", "priority=0,actions=NORMAL"]);
    of(&[
        "add-flow",
        "priority=20,icmp,in_port=2,actions=mod_nw_ttl:5,set_field:1->ip_ecn,NORMAL",
    ]);
    let out = h1.exec(&["ping", "-c", "3", "-i", "0.2", "-W", "2", &h2.addr]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("ttl=5 "), "{text}");
    // Every other writable field, as ovs-ofctl encodes it, comes back as installed.
    for (flow, echoed) in [
        (
            "table=5,ipv6,actions=set_field:2001:db8::1->ipv6_src,set_field:2001:db8::2->ipv6_dst,set_field:0x12345->ipv6_label,output:2",
            "set_field:2001:db8::1->ipv6_src,set_field:2001:db8::2->ipv6_dst,set_field:0x12345->ipv6_label,output:2",
        ),
        (
            "table=5,arp,actions=set_field:2->arp_op,set_field:198.18.0.9->arp_spa,set_field:198.18.0.1->arp_tpa,set_field:02:00:00:00:00:09->arp_sha,set_field:02:00:00:00:00:01->arp_tha,output:2",
            "set_field:2->arp_op,set_field:198.18.0.9->arp_spa,set_field:198.18.0.1->arp_tpa,set_field:02:00:00:00:00:09->arp_sha,set_field:02:00:00:00:00:01->arp_tha,output:2",
        ),
        (
            "table=5,rarp,arp_op=3,actions=set_field:4->arp_op,set_field:02:00:00:00:00:01->arp_tha,output:2",
            "set_field:4->arp_op,set_field:02:00:00:00:00:01->arp_tha,output:2",
        ),
        (
            "table=5,icmp,actions=set_field:0->icmp_type,set_field:3->icmp_code,output:2",
            "set_field:0->icmp_type,set_field:3->icmp_code,output:2",
        ),
        (
            "table=5,icmp6,icmp_type=135,actions=set_field:2001:db8::7->nd_target,set_field:02:00:00:00:00:07->nd_sll,set_field:136->icmpv6_type,output:2",
            "set_field:2001:db8::7->nd_target,set_field:02:00:00:00:00:07->nd_sll,set_field:136->icmpv6_type,output:2",
        ),
        // (ovs-ofctl has no words for OpenFlow's TTL copies: the codec's tests and
        // vsw-packet's carry them.)
        (
            "table=5,ip,actions=mod_nw_ttl:9,dec_ttl,output:2",
            "mod_nw_ttl:9,dec_ttl,output:2",
        ),
        (
            "table=5,actions=set_field:0x64->tun_id,goto_table:6",
            "set_field:0x64->tun_id,goto_table:6",
        ),
    ] {
        of(&["add-flow", flow]);
        let dump = of(&["dump-flows", "table=5"]);
        assert!(dump.contains(echoed), "{flow}\n{dump}");
    }
    let dump = of(&["dump-flows", "table=0"]);
    assert!(
        dump.contains("actions=mod_nw_ttl:5,set_field:1->nw_ecn,NORMAL"),
        "{dump}"
    );
}

/// MPLS as Open vSwitch does it, driven by the real `ovs-ofctl`: each host's packets
/// get a label pushed, a later table matches the label, and the label is popped —
/// one way with a table after the pop, which only a recirculation can answer (the
/// datapath parses nothing behind a label), the other straight out. Pings cross
/// both ways only if every header comes out as it went in; the flows come back
/// as installed.
#[test]
fn mpls_labels_are_pushed_matched_and_popped_between_namespaces() {
    let _g = serial();
    let d = Vswd::start();
    let of = |args: &[&str]| of13(&d, args);
    of(&["del-flows"]);
    let (h1, h2) = two_hosts(&d);
    let flows = [
        (
            "table=0,priority=0,actions=NORMAL",
            "priority=0 actions=NORMAL",
        ),
        (
            "table=0,priority=10,ip,in_port=1,actions=push_mpls:0x8847,set_mpls_label(100),set_mpls_tc(5),goto_table:1",
            "priority=10,ip,in_port=1 actions=push_mpls:0x8847,set_field:100->mpls_label,set_field:5->mpls_tc,goto_table:1",
        ),
        (
            "table=0,priority=10,ip,in_port=2,actions=push_mpls:0x8848,set_mpls_label(200),goto_table:1",
            "priority=10,ip,in_port=2 actions=push_mpls:0x8848,set_field:200->mpls_label,goto_table:1",
        ),
        (
            "table=1,priority=10,mpls,mpls_label=100,mpls_tc=5,mpls_bos=1,actions=dec_mpls_ttl,pop_mpls:0x0800,goto_table:2",
            "priority=10,mpls,mpls_label=100,mpls_tc=5,mpls_bos=1 actions=dec_mpls_ttl,pop_mpls:0x0800,goto_table:2",
        ),
        (
            "table=1,priority=10,mplsm,mpls_label=200,actions=set_mpls_ttl(9),pop_mpls:0x0800,output:1",
            "priority=10,mplsm,mpls_label=200 actions=set_mpls_ttl(9),pop_mpls:0x0800,output:1",
        ),
        (
            "table=2,priority=10,icmp,nw_ttl=64,actions=output:2",
            "priority=10,icmp,nw_ttl=64 actions=output:2",
        ),
    ];
    for (flow, _) in flows {
        of(&["add-flow", flow]);
    }
    let dump = of(&["dump-flows"]);
    for (_, echoed) in flows {
        assert!(dump.contains(echoed), "{echoed}\n{dump}");
    }
    let out = h1.exec(&["ping", "-c", "3", "-i", "0.2", "-W", "2", &h2.addr]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}\n{}", of(&["dump-flows"]));
    // Each way went through its labels, each packet counted once on each rule:
    // the pop before a table (to h2) took a second pass, whose table saw the IP
    // header the label carried.
    let dump = of(&["dump-flows"]);
    for needle in ["mpls_label=100", "mpls_label=200", "nw_ttl=64"] {
        let line = dump.lines().find(|l| l.contains(needle)).unwrap_or("");
        assert!(line.contains("n_packets=3,"), "{needle}: {dump}");
    }
    let dp = d.ctl_ok(&["dump-dp-flows"]);
    assert!(dp.contains("recirc("), "{dp}");
    assert!(
        dp.contains("push_mpls(label=0,tc=0,ttl=64,bos=1,eth_type=0x8847)"),
        "{dp}"
    );
    // A pop needs an MPLS packet where it runs (ovs-ofctl will not even send such a
    // flow in OpenFlow 1.3): refused, the tables as they were.
    let out = d.ctl(&["add-flow", "table=3,ip,actions=pop_mpls:0x0800"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("pop_mpls needs mpls"), "{err}");
    assert_eq!(d.all_flows().len(), flows.len());
}

/// OpenFlow 1.1, through the real `ovs-ofctl -O OpenFlow11`: each 1.1 match field
/// (the fixed `ofp11_match`, masks and all) and each of 1.1's own set actions goes
/// in and comes back as Open vSwitch prints it; a flow 1.1 cannot say in full
/// (written in 1.3) reads with what 1.1 has; traffic crosses a 1.1 NORMAL flow and
/// is counted; a 1.1 delete takes the flows away.
#[test]
fn openflow_1_1_flows_go_in_come_back_and_forward() {
    let _g = serial();
    let d = Vswd::start();
    let of11 = |args: &[&str]| {
        let mut a = vec!["-O", "OpenFlow11"];
        a.extend_from_slice(args);
        ofctl(&d, &a)
    };
    of11(&["del-flows"]);
    let flows = [
        "priority=5,in_port=1,dl_vlan=10,dl_vlan_pcp=3,actions=mod_vlan_vid:20,mod_vlan_pcp:5,output:2",
        "priority=6,ip,nw_src=198.18.0.0/16,nw_tos=32,actions=mod_nw_src:198.18.1.1,mod_nw_dst:198.18.1.2,mod_nw_tos:64,mod_nw_ecn:1,dec_ttl,output:1",
        "priority=7,tcp,tp_src=80,actions=mod_tp_src:8080,mod_tp_dst:443,goto_table:1",
        "priority=8,arp,arp_op=1,arp_tpa=198.18.0.0/24,actions=mod_dl_src:02:00:00:00:00:01,mod_dl_dst:02:00:00:00:00:02,NORMAL",
        "priority=9,mpls,mpls_label=7,mpls_tc=1,actions=pop_mpls:0x0800,output:3",
        "priority=10,icmp,icmp_type=8,icmp_code=0,actions=write_actions(output:2)",
        "priority=11,dl_src=02:00:00:00:00:00/ff:ff:ff:00:00:00,metadata=0x1/0xff,actions=write_metadata:0x5/0xff,goto_table:2",
        "priority=12,dl_vlan=0xffff,actions=push_vlan:0x8100,set_field:4106->vlan_vid,output:2",
    ];
    for f in flows {
        of11(&["add-flow", f]);
        let dump = of11(&["dump-flows", "--no-stats"]);
        assert_dumped_as_ovs_prints(&dump, "OpenFlow11", f, "OpenFlow11");
    }
    // Written in 1.3 with what 1.1 has not (a register, IPv6): 1.1 reads the rest,
    // and the set-field as Nicira's load.
    of13(
        &d,
        &[
            "add-flow",
            "priority=13,ipv6,reg1=5,actions=set_field:::1->ipv6_src,output:1",
        ],
    );
    let dump = of11(&["dump-flows", "--no-stats"]);
    let line = dump
        .lines()
        .find(|l| l.contains("priority=13"))
        .unwrap_or_default();
    assert!(
        line.contains("priority=13,ipv6 actions=")
            && line.to_lowercase().contains("ipv6_src")
            && line.ends_with(",output:1"),
        "{dump}"
    );
    of11(&["del-flows"]);
    assert_eq!(d.all_flows().len(), 0);
    let (h1, h2) = two_hosts(&d);
    of11(&["add-flow", "actions=NORMAL"]);
    let out = h1.exec(&["ping", "-c", "3", "-i", "0.2", "-W", "2", &h2.addr]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let dump = of11(&["dump-flows"]);
    let line = dump
        .lines()
        .find(|l| l.contains("actions=NORMAL"))
        .unwrap_or("");
    let packets: u64 = line
        .split("n_packets=")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(packets >= 6, "{dump}");
}

/// PBB (OpenFlow 1.3's, which Open vSwitch lacks), through vsw's own `vswctl`: each
/// host's IP packets get a backbone header and an I-SID, a later table matches the
/// I-SID and pops the header — one way with a table after the pop (a
/// recirculation shows the customer's frame), the other straight out. Pings cross
/// both ways only if the customer's frame comes out whole.
#[test]
fn pbb_headers_are_pushed_matched_and_popped_between_namespaces() {
    let _g = serial();
    let d = Vswd::start();
    of13(&d, &["del-flows"]);
    let (h1, h2) = two_hosts(&d);
    let flows = [
        "table=0,priority=0,actions=NORMAL",
        "table=0,priority=10,ip,in_port=1,actions=push_pbb:0x88e7,set_field:100->pbb_isid,goto_table:1",
        "table=0,priority=10,ip,in_port=2,actions=push_pbb:0x88e7,set_field:200->pbb_isid,goto_table:1",
        "table=1,priority=10,dl_type=0x88e7,pbb_isid=100,actions=pop_pbb,goto_table:2",
        "table=1,priority=10,dl_type=0x88e7,pbb_isid=200,actions=pop_pbb,output:1",
        "table=2,priority=10,icmp,actions=output:2",
    ];
    for flow in flows {
        d.ctl_ok(&["add-flow", flow]);
    }
    assert!(h1.ping(&h2, 3), "{}", d.ctl_ok(&["dump-flows"]));
    let all = d.all_flows();
    for needle in ["pbb_isid=0x000064", "pbb_isid=0x0000c8", "icmp"] {
        let f = all.iter().find(|f| f.matching.contains(needle));
        assert!(f.is_some_and(|f| f.n_packets >= 3), "{needle}: {all:#?}");
    }
    let dp = d.ctl_ok(&["dump-dp-flows"]);
    assert!(
        dp.contains("push_pbb(itag=0x00000000,eth_type=0x88e7)"),
        "{dp}"
    );
    assert!(dp.contains("pop_pbb") && dp.contains("recirc("), "{dp}");
    // A pop needs a PBB frame where it runs: refused, the tables as they were.
    let out = d.ctl(&["add-flow", "table=3,ip,actions=pop_pbb"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("pop_pbb needs dl_type=0x88e7"), "{err}");
    assert_eq!(d.all_flows().len(), flows.len());
}

/// NSH as a service function chain's classifier and last hop use it, installed
/// with the real `ovs-ofctl` in OpenFlow 1.3 (Nicira's encap and decap, Open
/// vSwitch's experimenter NSH fields) and read back in 1.3 and 1.5 as Open
/// vSwitch prints them: pings from each side are wrapped in NSH and Ethernet
/// (`encap(nsh)` … `encap(ethernet)`), matched by their path, index and context
/// in the next table, unwrapped (`decap()` twice) and sent on — one way after a
/// recirculation (a table looks at the inner frame), the other straight out.
/// Pings cross both ways only if the frame comes out of NSH whole.
#[test]
fn nsh_headers_are_pushed_matched_and_popped_between_namespaces() {
    let _g = serial();
    let d = Vswd::start();
    of13(&d, &["del-flows"]);
    let (h1, h2) = two_hosts(&d);
    let flows = [
        "table=0,priority=0,actions=NORMAL",
        "table=0,priority=10,ip,in_port=1,actions=encap(nsh(md_type=1)),set_field:0x123->nsh_spi,set_field:0xabc->nsh_c1,encap(ethernet),goto_table:1",
        "table=0,priority=10,ip,in_port=2,actions=encap(nsh(md_type=2,tlv(0x1000,10,0x12345678))),set_field:0x456->nsh_spi,set_field:7->nsh_si,encap(ethernet),goto_table:1",
        "table=1,priority=10,dl_type=0x894f,nsh_mdtype=1,nsh_np=3,nsh_spi=0x123,nsh_si=255,nsh_c1=0xabc,actions=dec_nsh_ttl,decap(),decap(),goto_table:2",
        "table=1,priority=10,dl_type=0x894f,nsh_flags=0/0x2,nsh_ttl=63,nsh_spi=0x456,nsh_si=7,actions=decap(packet_type(ns=1,type=0x894f)),goto_table:3",
        "table=2,priority=10,icmp,actions=output:2",
    ];
    // The packet type is OpenFlow 1.5's: after one decap, table 3 sees NSH
    // without Ethernet.
    let of15_flows = [
        "table=3,priority=10,packet_type=(1,0x894f),nsh_spi=0x456,actions=decap(),output:1",
        "table=3,priority=5,packet_type=(0,0),actions=drop",
    ];
    for f in flows {
        of13(&d, &["add-flow", f]);
    }
    for f in of15_flows {
        ofctl(&d, &["-O", "OpenFlow15", "add-flow", f]);
    }
    for (version, written) in [
        ("OpenFlow13", &flows[..]),
        ("OpenFlow15", &[&flows[..], &of15_flows[..]].concat()[..]),
    ] {
        let dump = ofctl(&d, &["-O", version, "dump-flows", "--no-stats"]);
        for f in written.iter().copied() {
            assert_dumped_as_ovs_prints(&dump, version, f, version);
        }
    }
    // OpenFlow 1.0 (ovs-ofctl's default): an NSH set-field has no 1.0 action and
    // goes as Nicira's REG_LOAD2, whose field carries its experimenter ID. (The
    // encaps are Nicira's 1.3 actions: ovs-ofctl reads no 1.0 reply holding one,
    // from Open vSwitch either, so this flow has none.)
    of13(
        &d,
        &[
            "add-flow",
            "table=5,dl_type=0x894f,actions=set_field:5->nsh_si,output:1",
        ],
    );
    let dump10 = ofctl(&d, &["dump-flows", "--no-stats", "table=5"]);
    assert!(
        dump10.contains("actions=set_field:5->nsh_si,output:1"),
        "{dump10}"
    );
    of13(&d, &["del-flows", "table=5"]);
    assert!(h1.ping(&h2, 3), "{}", d.ctl_ok(&["dump-flows"]));
    let all = d.all_flows();
    for needle in [
        "nsh_spi=0x123",
        "nsh_spi=0x456,nsh_si=7",
        "packet_type=(1,0x894f)",
        "icmp",
    ] {
        let f = all.iter().find(|f| f.matching.contains(needle));
        assert!(f.is_some_and(|f| f.n_packets >= 3), "{needle}: {all:#?}");
    }
    let dp = d.ctl_ok(&["dump-dp-flows"]);
    assert!(
        dp.contains("push_nsh(flags=0,ttl=63,mdtype=1,np=3,spi=0x123,si=255)"),
        "{dp}"
    );
    assert!(dp.contains("set(nsh(c1=0xabc))"), "{dp}");
    // MD type 2: the push reserves the TLV's 8 bytes, written word by word.
    assert!(
        dp.contains("mdtype=2,np=3,spi=0x456,si=7,md2_len=8"),
        "{dp}"
    );
    assert!(dp.contains("set(nsh(md2[1]=0x12345678))"), "{dp}");
    assert!(dp.contains("set(nsh(ttl=62))"), "{dp}");
    assert!(
        dp.contains("pop_eth,pop_nsh()") && dp.contains("recirc("),
        "{dp}"
    );
    // An NSH field needs NSH where it is written: refused, the tables as they were.
    let out = d.ctl(&["add-flow", "table=3,ip,actions=set_field:1->nsh_si"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("needs dl_type=0x894f"), "{err}");
    assert_eq!(d.all_flows().len(), flows.len() + of15_flows.len());
}

/// Ethernet over MPLS as Open vSwitch's generic encapsulation writes it
/// (`encap(mpls)` … `encap(ethernet)`, `decap()` then
/// `decap(packet_type(ns=0,type=0))`), installed with the real `ovs-ofctl` and
/// read back as Open vSwitch prints it: pings from each side get a label in front
/// of their whole frame and a new Ethernet header, are matched by the label,
/// and come out whole — one way after a recirculation, the other straight out.
#[test]
fn ethernet_over_mpls_is_encapsulated_matched_and_decapsulated() {
    let _g = serial();
    let d = Vswd::start();
    of13(&d, &["del-flows"]);
    let (h1, h2) = two_hosts(&d);
    let flows = [
        "table=0,priority=0,actions=NORMAL",
        "table=0,priority=10,ip,in_port=1,actions=encap(mpls),set_field:100->mpls_label,encap(ethernet),set_field:02:00:00:00:00:aa->eth_dst,goto_table:1",
        "table=0,priority=10,ip,in_port=2,actions=encap(mpls_mc),set_mpls_label(200),encap(ethernet),goto_table:1",
        "table=1,priority=10,mpls,mpls_label=100,mpls_ttl=64,actions=decap(),decap(packet_type(ns=0,type=0)),goto_table:2",
        "table=1,priority=10,mplsm,mpls_label=200,mpls_bos=1,actions=decap(),decap(packet_type(ns=0,type=0)),output:1",
        "table=2,priority=10,icmp,actions=output:2",
    ];
    for f in flows {
        of13(&d, &["add-flow", f]);
    }
    let dump = of13(&d, &["dump-flows", "--no-stats"]);
    for f in flows {
        assert_dumped_as_ovs_prints(&dump, "OpenFlow13", f, "OpenFlow13");
    }
    assert!(h1.ping(&h2, 3), "{}", d.ctl_ok(&["dump-flows"]));
    let all = d.all_flows();
    for needle in ["mpls_label=100", "mpls_label=200", "icmp"] {
        let f = all.iter().find(|f| f.matching.contains(needle));
        assert!(f.is_some_and(|f| f.n_packets >= 3), "{needle}: {all:#?}");
    }
    let dp = d.ctl_ok(&["dump-dp-flows"]);
    assert!(
        dp.contains("add_mpls(label=100,tc=0,ttl=64,bos=1,eth_type=0x8847)"),
        "{dp}"
    );
    assert!(dp.contains("eth_type=0x8848"), "{dp}");
    assert!(
        dp.contains("pop_eth,pop_mpls(eth_type=0x6558)") && dp.contains("recirc("),
        "{dp}"
    );
}

/// `check_pkt_larger` as OVN uses it for a gateway's MTU: the datapath decides by
/// each packet's length. Pings of 100 bytes cross; of 1,000 bytes, which the rule
/// sends elsewhere, do not — over the same datapath flow.
#[test]
fn check_pkt_larger_sends_each_packet_the_way_its_length_says() {
    let _g = serial();
    let d = Vswd::start();
    let of = |args: &[&str]| of13(&d, args);
    of(&["del-flows"]);
    let (h1, h2) = two_hosts(&d);
    for flow in [
        "table=0,priority=0,actions=NORMAL",
        "table=0,priority=10,icmp,actions=check_pkt_larger(500)->NXM_NX_REG0[0],resubmit(,1)",
        "table=1,priority=10,reg0=0x1/0x1,actions=drop",
        "table=1,priority=1,actions=NORMAL",
    ] {
        of(&["add-flow", flow]);
    }
    let ping = |size: &str| {
        h1.exec(&[
            "ping", "-c", "2", "-i", "0.2", "-W", "1", "-s", size, &h2.addr,
        ])
        .status
        .success()
    };
    assert!(ping("100"), "short pings cross");
    assert!(!ping("1000"), "long pings are dropped");
    assert!(ping("100"), "and short ones still cross");
    // One datapath flow per direction holds both ways.
    let dp = d.ctl_ok(&["dump-dp-flows"]);
    assert!(dp.contains("check_pkt_len(size=500,"), "{dp}");
}

/// Nicira's actions vsw carries out (`resubmit`, `note`, `dec_ttl`, `clone`,
/// `fin_timeout`, …) come back from `ovs-ofctl` in every version exactly as Open
/// vSwitch prints the same flow (`ovs-ofctl parse-flow`), and become vsw's own
/// actions.
#[test]
fn nicira_actions_are_taken_and_come_back_as_open_vswitch_prints_them() {
    let _g = serial();
    let d = Vswd::start();
    let flows = [
        "priority=5,in_port=1,actions=resubmit(,1),resubmit:2,resubmit(3,2)",
        "priority=6,ip,actions=dec_ttl,note:01.02.03,controller:100",
        "priority=9,ip,actions=dec_ttl(1,2,7),output:1",
        "priority=15,ip,actions=check_pkt_larger(1500)->NXM_NX_REG0[0],resubmit(,1)",
        "priority=7,ip,actions=clone(mod_dl_dst:02:00:00:00:00:09,clone(dec_ttl,output:3),output:2),output:4",
        "priority=8,actions=output:NXM_NX_REG0[0..15],pop_queue,exit",
        "priority=16,tcp,actions=fin_timeout(idle_timeout=10,hard_timeout=20),output:1",
        "priority=17,tcp6,actions=fin_timeout(hard_timeout=5),fin_timeout()",
        "priority=18,actions=output(port=2,max_len=100),output(port=LOCAL,max_len=14)",
        "priority=10,actions=bundle(eth_src,0,active_backup,ofport,members:1,2)",
        "priority=13,actions=sample(probability=100,collector_set_id=1,obs_domain_id=2,obs_point_id=3),output:1",
        "priority=14,actions=sample(probability=65535,collector_set_id=0,obs_domain_id=0,obs_point_id=7,sampling_port=2,ingress)",
        "priority=12,actions=multipath(symmetric_l4,1024,hash_threshold,4,0,NXM_NX_REG0[0..1]),resubmit(,1)",
        "priority=11,actions=bundle_load(symmetric_l4,60,hrw,ofport,NXM_NX_REG0[],members:2,3),resubmit(,1)",
    ];
    for version in [
        "OpenFlow10",
        "OpenFlow12",
        "OpenFlow13",
        "OpenFlow14",
        "OpenFlow15",
    ] {
        ofctl(&d, &["-O", version, "del-flows"]);
        for f in flows {
            ofctl(&d, &["-O", version, "add-flow", f]);
            let dump = ofctl(&d, &["-O", version, "dump-flows", "--no-stats"]);
            assert_dumped_as_ovs_prints(&dump, version, f, version);
        }
    }
    // A packet-in for one controller or with another reason: vsw's go to every
    // controller with the reason "action", so it refuses rather than echo what it
    // would not do.
    let refused = ofctl_raw(
        &d,
        &[
            "-O",
            "OpenFlow13",
            "add-flow",
            "priority=7,actions=controller(id=3)",
        ],
    );
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("OFPBAC_BAD_ARGUMENT"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    let vsw_flows: Vec<String> = d.flows().into_iter().map(|f| f.flow).collect();
    assert!(
        vsw_flows
            .iter()
            .any(|f| f.contains("resubmit(,1)") && f.contains("resubmit(3,2)")),
        "{vsw_flows:?}"
    );
    assert!(
        vsw_flows
            .iter()
            .any(|f| f.contains("dec_ttl") && f.contains("CONTROLLER:100")),
        "{vsw_flows:?}"
    );
    assert!(
        vsw_flows
            .iter()
            .any(|f| f
                .contains("clone(mod_dl_dst:02:00:00:00:00:09,clone(dec_ttl,output:3),output:2)")),
        "{vsw_flows:?}"
    );
}

/// `ovs-ofctl` without `-O` speaks OpenFlow 1.0 only: the ports come in the
/// features reply, a flow `ofp10_match` can say goes as OFPT_FLOW_MOD, one it
/// cannot (registers, IPv6, a table) through Nicira's NXM format, and dumps come
/// back as NXST_FLOW — each flow as Open vSwitch prints it, and the same flows
/// through OpenFlow 1.3. Port and aggregate statistics, flow removals and
/// standard packet-ins have 1.0's layouts.
#[test]
fn ovs_ofctl_without_o_speaks_openflow_1_0_with_nxm() {
    let _g = serial();
    let d = Vswd::start();
    d.ctl_ok(&["add-port", "p1", "type=ring"]);
    d.ctl_ok(&["add-port", "p2", "type=ring"]);
    let show = ofctl(&d, &["show"]);
    assert!(show.contains("OFPT_FEATURES_REPLY (xid="), "{show}");
    assert!(show.contains(" 2(p2): addr:"), "{show}");
    assert!(show.contains("OFPT_GET_CONFIG_REPLY"), "{show}");
    ofctl(&d, &["del-flows"]);
    let flows = [
        "priority=5,in_port=1,ip,nw_src=198.18.0.0/24,actions=mod_vlan_vid:9,output:2",
        "priority=6,tcp,dl_vlan=7,dl_vlan_pcp=3,tp_dst=80,actions=strip_vlan,mod_dl_src:02:00:00:00:00:09,mod_nw_tos:16,mod_tp_src:99,output:1",
        "priority=7,arp,arp_tpa=198.18.0.1,actions=CONTROLLER:64",
        "table=3,priority=8,ipv6,reg3=0x7,actions=resubmit(,4)",
        "table=4,priority=9,udp,ipv6_src=2001:db8::/32,reg0=0x1/0x1,actions=load:0x5->NXM_NX_REG1[],output:2",
    ];
    for f in flows {
        ofctl(&d, &["add-flow", f]);
    }
    let with_stats = ofctl(&d, &["dump-flows"]);
    assert!(with_stats.starts_with("NXST_FLOW reply"), "{with_stats}");
    let dump = ofctl(&d, &["dump-flows", "--no-stats"]);
    let dump13 = of13(&d, &["dump-flows", "--no-stats"]);
    for f in flows {
        assert_dumped_as_ovs_prints(&dump, "OpenFlow10", f, "OpenFlow10");
        let priority = f.split(',').find(|w| w.starts_with("priority=")).unwrap();
        assert!(
            dump13.contains(priority),
            "{priority} not in 1.3's\n{dump13}"
        );
    }
    let aggregate = ofctl(&d, &["dump-aggregate"]);
    assert!(aggregate.contains("flow_count=5"), "{aggregate}");
    ofctl(
        &d,
        &["del-flows", "--strict", "table=3,priority=8,ipv6,reg3=0x7"],
    );
    ofctl(&d, &["del-flows", "ip"]);
    let left = ofctl(&d, &["dump-flows", "--no-stats"]);
    assert!(
        !left.contains("reg3=0x7") && !left.contains("nw_src=198.18.0.0/24"),
        "{left}"
    );
    assert!(left.contains("arp_tpa=198.18.0.1"), "{left}");
    // A 1.0 modify that selects no flow adds it (1.1 on, it changes nothing).
    ofctl(&d, &["mod-flows", "priority=9,udp,actions=drop"]);
    of13(&d, &["mod-flows", "priority=8,tcp,actions=drop"]);
    let after = ofctl(&d, &["dump-flows", "--no-stats"]);
    assert!(after.contains("priority=9,udp actions=drop"), "{after}");
    assert!(!after.contains("priority=8,tcp"), "{after}");
    let ports = ofctl(&d, &["dump-ports"]);
    assert!(
        ports.contains("OFPST_PORT reply") && ports.contains("port  2: rx pkts=0"),
        "{ports}"
    );
    // A standard 1.0 packet-in of what a generator port sends, and a flow
    // removal when a flow's idle timeout ends it.
    d.ctl_ok(&["add-port", "gen", "type=ring", "ring-flows=1"]);
    ofctl(
        &d,
        &["add-flow", "priority=20,in_port=3,actions=CONTROLLER:64"],
    );
    use std::io::BufRead;
    let target = format!("unix:{}", d.dir.join("br0.mgmt").display());
    let mut monitor = Command::new("timeout")
        .args([
            "20",
            "ovs-ofctl",
            "-P",
            "standard",
            "monitor",
            &target,
            "65535",
        ])
        .env("OVS_RUNDIR", &d.dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("ovs-ofctl monitor");
    // The monitor prints what it receives on its standard error.
    let mut lines = std::io::BufReader::new(monitor.stderr.take().expect("stderr"))
        .lines()
        .map_while(Result::ok);
    let packet_in = lines
        .find(|l| l.starts_with("OFPT_PACKET_IN"))
        .expect("a packet-in before the monitor's time ran out");
    assert!(packet_in.contains("in_port=3 (via action)"), "{packet_in}");
    // The generator's packet-ins stop (a queue they filled would end the
    // connection before the flow removal got in), and the flow is added once the
    // monitor is listening, so that its going is heard.
    ofctl(&d, &["del-flows", "in_port=3"]);
    ofctl(
        &d,
        &[
            "add-flow",
            "idle_timeout=1,priority=3,in_port=1,send_flow_rem,actions=drop",
        ],
    );
    let removed = lines
        .find(|l| l.starts_with("OFPT_FLOW_REMOVED"))
        .expect("a flow removal before the monitor's time ran out");
    assert!(
        removed.contains("priority=3,in_port=1 reason=idle"),
        "{removed}"
    );
    drop(lines);
    vsw_e2e::end(monitor);
}

/// Registers carry a decision from table to table, as OVN's pipelines do (the
/// logical input port in reg14, the output port in reg15), over OpenFlow 1.5 and
/// 1.3: pings cross only through them. `load`, `move`, `push`, `pop` and
/// `set_field` of registers, `pkt_mark` and the wide registers come back as Open
/// vSwitch prints the same flow.
#[test]
fn registers_carry_a_decision_between_tables_and_come_back_as_installed() {
    let _g = serial();
    let d = Vswd::start();
    let (h1, h2) = two_hosts(&d);
    let pipeline = [
        // reg14 = 1 by way of the stack.
        "table=0,in_port=1,actions=set_field:0x1->reg14,push:NXM_NX_REG14[],load:0->NXM_NX_REG14[],pop:NXM_NX_REG14[],resubmit(,1)",
        "table=0,in_port=2,actions=load:0x2->NXM_NX_REG14[],resubmit(,1)",
        // The output port from the input port: 3 - reg14, by table.
        "table=1,reg14=0x1,actions=move:NXM_NX_REG14[0..1]->NXM_NX_REG15[1..2],resubmit(,2)",
        "table=1,reg14=0x2,actions=load:0x1->NXM_NX_REG15[],resubmit(,2)",
        "table=2,reg15=0x2,actions=load:0x1->NXM_NX_REG15[0],resubmit(,3)",
        "table=2,reg15=0x1,actions=load:0->NXM_NX_REG15[1],resubmit(,3)",
        "table=3,reg15=0x1,actions=output:1",
        "table=3,reg15=0x3,actions=output:2",
    ];
    let echoed = [
        "priority=9,reg0=0x5/0xff,actions=load:0x5->NXM_NX_REG1[0..7],set_field:0x5->reg2,move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[],set_field:0xa->pkt_mark,load:0x3->NXM_NX_XXREG0[0..15],set_field:0x7/0xf->reg3,output:2",
        "priority=9,pkt_mark=0x1,ip,xreg4=0x100000002,xxreg3=0x7,actions=move:NXM_OF_IP_SRC[]->NXM_NX_REG5[],load:0->NXM_OF_IN_PORT[],set_field:0x3->metadata,output:1",
        "priority=9,ip,actions=push:NXM_NX_REG0[],push:NXM_OF_IP_DST[0..15],pop:NXM_NX_REG1[0..15],pop:NXM_NX_REG2[],output:1",
    ];
    for version in ["OpenFlow15", "OpenFlow13"] {
        ofctl(&d, &["-O", version, "del-flows"]);
        for f in pipeline {
            ofctl(&d, &["-O", version, "add-flow", f]);
        }
        let out = h1.exec(&["ping", "-c", "2", "-i", "0.2", "-W", "2", &h2.addr]);
        assert!(
            out.status.success(),
            "{version}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            ofctl(&d, &["-O", version, "dump-flows"])
        );
        if version == "OpenFlow15" {
            // A packet-out's match carries registers into translation (as OVN's
            // pinctrl sends them): reg15 alone decides table 3's port.
            let frame = "020000000002020000000001080045000014000100004011f8d3c6120001c6120002";
            for (reg15, host) in [("0x3", &h2), ("0x1", &h1)] {
                let before = d.port(&host.port).stats.tx_packets;
                let spec =
                    format!("in_port=CONTROLLER,reg15={reg15} packet={frame} actions=resubmit(,3)");
                for _ in 0..20 {
                    ofctl(&d, &["-O", version, "packet-out", &spec]);
                }
                wait_until(
                    "the packet-outs out of reg15's port",
                    Duration::from_secs(5),
                    || d.port(&host.port).stats.tx_packets >= before + 20,
                );
            }
        }
        for f in echoed {
            ofctl(&d, &["-O", version, "add-flow", f]);
            let dump = ofctl(&d, &["-O", version, "dump-flows", "--no-stats"]);
            assert_dumped_as_ovs_prints(&dump, version, f, version);
        }
    }
    // vswctl prints the registers as ovs-ofctl does.
    let vsw_flows: Vec<String> = d.flows().into_iter().map(|f| f.flow).collect();
    assert!(
        vsw_flows.iter().any(|f| f.contains("reg14=0x1")
            && f.contains("move:NXM_NX_REG14[0..1]->NXM_NX_REG15[1..2]")),
        "{vsw_flows:?}"
    );
    // A field vsw cannot write is refused, naming the action.
    let refused = ofctl_raw(
        &d,
        &[
            "-O",
            "OpenFlow13",
            "add-flow",
            "priority=7,actions=load:0x800->NXM_OF_ETH_TYPE[]",
        ],
    );
    assert!(!refused.status.success());
}

/// A conjunctive match (Open vSwitch's `conjunction`, as OVN writes its ACLs over
/// address sets and port groups): a ping crosses only while both clauses match its
/// packets, and the rule of `conj_id` answers; the flows come back as Open vSwitch
/// prints them.
#[test]
fn a_conjunction_forwards_only_while_every_clause_matches() {
    let _g = serial();
    let d = Vswd::start();
    let (h1, h2) = two_hosts(&d);
    let clause_two = format!(
        "priority=10,ip,nw_dst={},actions=conjunction(7,2/2)",
        h2.addr
    );
    let flows = [
        "priority=20,arp,actions=NORMAL".to_string(),
        format!(
            "priority=10,ip,nw_src={},actions=conjunction(7,1/2)",
            h1.addr
        ),
        clause_two.clone(),
        "priority=10,conj_id=7,ip,actions=output:2".to_string(),
        format!("priority=10,ip,nw_src={},actions=output:1", h2.addr),
        "priority=1,actions=drop".to_string(),
    ];
    let ping = || {
        h1.exec(&["ping", "-c", "1", "-W", "1", &h2.addr])
            .status
            .success()
    };
    for version in ["OpenFlow15", "OpenFlow13"] {
        ofctl(&d, &["-O", version, "del-flows"]);
        for f in &flows {
            ofctl(&d, &["-O", version, "add-flow", f]);
        }
        assert!(
            ping(),
            "{version}: {}",
            ofctl(&d, &["-O", version, "dump-flows"])
        );
        let dump = ofctl(&d, &["-O", version, "dump-flows", "--no-stats"]);
        for f in &flows[1..4] {
            assert_dumped_as_ovs_prints(&dump, version, f, version);
        }
        // One clause gone: the conjunction is incomplete, the drop rule decides.
        ofctl(
            &d,
            &[
                "-O",
                version,
                "del-flows",
                "--strict",
                &clause_two.replace(",actions=conjunction(7,2/2)", ""),
            ],
        );
        assert!(!ping(), "{version}: a ping crossed a half conjunction");
    }
    // A clause with another action beside is refused.
    let refused = ofctl_raw(
        &d,
        &[
            "add-flow",
            "priority=9,ip,actions=conjunction(1,1/2),output:1",
        ],
    );
    assert!(!refused.status.success());
}

/// A connection that asks for NXT_PACKET_IN2 (as OVN's ovn-controller does) gets
/// its packet-ins so, with the controller action's userdata and what translation
/// gave the packet; the action comes back as installed.
#[test]
fn packet_in2_carries_the_userdata_and_the_registers() {
    let _g = serial();
    let d = Vswd::start();
    ofctl(&d, &["-O", "OpenFlow13", "del-flows"]);
    d.ctl_ok(&["add-port", "gen", "type=ring", "ring-flows=1"]);
    d.ctl_ok(&["add-port", "sink", "type=ring"]);
    let flow = "cookie=0x6,in_port=1,actions=set_field:0x2a->reg3,controller(userdata=01.02.0a)";
    ofctl(&d, &["-O", "OpenFlow13", "add-flow", flow]);
    let dump = ofctl(&d, &["-O", "OpenFlow13", "dump-flows", "--no-stats"]);
    // (parse-flow prints the cookie apart: its actions are what is compared.)
    let want = ovs_prints("OpenFlow13", flow);
    let actions = want.split_once("actions=").expect("actions").1;
    assert!(
        dump.contains(&format!(" actions={actions}")),
        "{want} not in\n{dump}"
    );
    let (first, userdata) = monitor_lines(&d, "nxt_packet_in2", |lines| {
        let first = lines.find(|l| l.starts_with("NXT_PACKET_IN2"));
        (first, lines.take(4).find(|l| l.contains("userdata=")))
    });
    let first = first.expect("an NXT_PACKET_IN2 before the monitor's time ran out");
    assert!(
        first.contains("cookie=0x6 total_len=60 reg3=0x2a,in_port=1 (via action)"),
        "{first}"
    );
    let userdata = userdata.expect("the userdata line");
    assert!(userdata.contains("userdata=01.02.0a"), "{userdata}");
}

/// A meter on a controller action limits the packet-ins alone (as OVN meters its
/// controller actions): the packets the flow forwards pass whatever the band drops.
#[test]
fn a_metered_controller_action_limits_only_the_packet_ins() {
    let _g = serial();
    let d = Vswd::start();
    let of = |args: &[&str]| of13(&d, args);
    of(&["del-flows"]);
    d.ctl_ok(&["add-port", "gen", "type=ring", "ring-flows=64"]);
    d.ctl_ok(&["add-port", "sink", "type=ring"]);
    of(&["add-meter", "meter=1,pktps,bands=type=drop,rate=10"]);
    let flow = "in_port=1,actions=controller(userdata=01,meter_id=1),output:2";
    of(&["add-flow", flow]);
    let dump = of(&["dump-flows"]);
    assert!(
        dump.contains("controller(userdata=01,meter_id=1),output:2"),
        "{dump}"
    );
    // Far above 10 packets a second reach the sink, while the band drops the
    // packet-ins above its rate.
    wait_until(
        "the sink to get the packets the meter drops",
        Duration::from_secs(10),
        || {
            let stats = of(&["meter-stats"]);
            let dropped = stats
                .split("0: packet_count:")
                .nth(1)
                .and_then(|n| n.split_whitespace().next())
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or(0);
            dropped > 1_000 && d.port("sink").stats.tx_packets > 1_000
        },
    );
}

/// OVN's Geneve flows (a masked set-field, `move` and `load` of `tun_metadata0`,
/// which Open vSwitch names with its longest length) are taken; and a flow written
/// in one version is read in every other, as Open vSwitch writes it there (1.5's
/// copy-field and masked set-field as Nicira's REG_MOVE and REG_LOAD2 before 1.5,
/// and the other way).
#[test]
fn ovn_s_tunnel_flows_are_taken_and_read_in_every_version() {
    let _g = serial();
    let d = Vswd::start();
    for p in ["r1", "r2", "r3", "r4"] {
        d.ctl_ok(&["add-port", p, "type=ring"]);
    }
    let flows = [
        "table=39,priority=100,reg15=0x1,metadata=0x2,actions=set_field:0x2/0xffffff->tun_id,\
         set_field:0x1/0xffff->tun_metadata0,move:NXM_NX_REG14[0..14]->NXM_NX_TUN_METADATA0[16..30],\
         output:4,resubmit(,40)",
        "priority=100,in_port=4,actions=move:NXM_NX_TUN_ID[0..23]->OXM_OF_METADATA[0..23],\
         move:NXM_NX_TUN_METADATA0[16..30]->NXM_NX_REG14[0..14],\
         move:NXM_NX_TUN_METADATA0[0..15]->NXM_NX_REG15[0..15],resubmit(,40)",
        "table=5,priority=5,actions=load:0x1->NXM_NX_TUN_METADATA0[0..15],move:NXM_NX_REG1[]->NXM_NX_REG2[],\
         set_field:0x5/0xff->reg3,clone(move:NXM_NX_REG4[]->NXM_NX_REG5[])",
    ];
    let readers = [
        "OpenFlow10",
        "OpenFlow12",
        "OpenFlow13",
        "OpenFlow14",
        "OpenFlow15",
    ];
    // A group's buckets too: written in 1.5, read from 1.2 on (1.0 has no groups).
    ofctl(
        &d,
        &[
            "-O",
            "OpenFlow15",
            "add-group",
            "group_id=9,type=all,bucket=actions=move:NXM_NX_REG1[]->NXM_NX_REG2[],\
             set_field:0x5/0xff->reg3,output:1",
        ],
    );
    for reader in &readers[1..] {
        let groups = ofctl(&d, &["-O", reader, "dump-groups"]);
        // Before 1.5, the masked set-field is Nicira's load, as Open vSwitch
        // writes it there.
        let load = if *reader == "OpenFlow15" {
            "set_field:0x5/0xff->reg3"
        } else {
            "load:0x5->NXM_NX_REG3[0..7]"
        };
        let want = format!("move:NXM_NX_REG1[]->NXM_NX_REG2[],{load},output:1");
        assert!(groups.contains(&want), "{reader}: {want} not in {groups}");
    }
    for writer in ["OpenFlow15", "OpenFlow13", "OpenFlow10"] {
        ofctl(&d, &["-O", writer, "del-flows"]);
        for f in flows {
            ofctl(&d, &["-O", writer, "add-flow", f]);
        }
        for reader in readers {
            let dump = ofctl(&d, &["-O", reader, "dump-flows", "--no-stats"]);
            for f in flows {
                let what = format!("written in {writer}, read in {reader}");
                assert_dumped_as_ovs_prints(&dump, reader, f, &what);
            }
        }
    }
}

/// `ovs-ofctl mod-port`: a port backed by a kernel interface goes
/// administratively down (its interface too, as Open vSwitch does to a netdev) and
/// carries nothing, then up again; `show` says PORT_DOWN meanwhile. What vsw does
/// not carry out (a ring port's link, `no-flood`) is refused, naming the problem.
#[test]
fn mod_port_takes_a_port_down_and_up() {
    let _g = serial();
    let d = Vswd::start();
    let (h1, h2) = two_hosts(&d);
    d.ctl_ok(&["add-port", "r3", "type=ring"]);
    let ping = || {
        h1.exec(&["ping", "-c", "1", "-W", "1", &h2.addr])
            .status
            .success()
    };
    assert!(ping());
    let admin_up = |name: &str| {
        let flags = std::fs::read_to_string(format!("/sys/class/net/{name}/flags")).unwrap();
        u32::from_str_radix(flags.trim().trim_start_matches("0x"), 16).unwrap() & 1 != 0
    };
    ofctl(&d, &["mod-port", &h1.port, "down"]);
    assert!(!admin_up(&h1.port));
    let show = ofctl(&d, &["show"]);
    let port = show
        .split(&format!("({})", h1.port))
        .nth(1)
        .unwrap_or_else(|| panic!("{show}"));
    assert!(port.lines().nth(1).unwrap().contains("PORT_DOWN"), "{show}");
    assert!(!ping(), "a port that is down carries nothing");
    of13(&d, &["mod-port", "1", "up"]);
    assert!(admin_up(&h1.port));
    wait_until("the port carries again", Duration::from_secs(10), ping);
    for (version, what) in [("OpenFlow15", "down"), ("OpenFlow10", "no-flood")] {
        let port = if what == "down" { "r3" } else { &h1.port };
        let refused = ofctl_raw(&d, &["-O", version, "mod-port", port, what]);
        assert!(!refused.status.success());
        let err = String::from_utf8_lossy(&refused.stderr);
        // 1.0 has no code for it: Open vSwitch's own says it cannot say it.
        let code = if version == "OpenFlow10" {
            "NXBRC_UNENCODABLE_ERROR"
        } else {
            "OFPPMFC_BAD_CONFIG"
        };
        assert!(err.contains(code), "{version} {what}: {err}");
    }
}

/// `ovs-ofctl monitor br0 watch:ARGS` in `version`: the lines it prints (on
/// both of its outputs), and the process to end.
fn watch(
    d: &Vswd,
    version: &str,
    args: &str,
) -> (impl Iterator<Item = String>, std::process::Child) {
    use std::io::BufRead;
    let target = format!("unix:{}", d.dir.join("br0.mgmt").display());
    let mut monitor = Command::new("sh")
        .args([
            "-c",
            "exec timeout 20 ovs-ofctl -O \"$0\" monitor \"$1\" \"watch:$2\" 2>&1",
            version,
            &target,
            args,
        ])
        .env("OVS_RUNDIR", &d.dir)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("ovs-ofctl monitor");
    let lines = std::io::BufReader::new(monitor.stdout.take().expect("stdout"))
        .lines()
        .map_while(Result::ok);
    (lines, monitor)
}

/// The lines up to and with the first that contains `what`.
fn upto(lines: &mut impl Iterator<Item = String>, what: &str) -> Vec<String> {
    let mut seen = Vec::new();
    for l in lines.by_ref() {
        let done = l.contains(what);
        seen.push(l);
        if done {
            return seen;
        }
    }
    panic!("no {what} before the monitor's time ran out: {seen:?}")
}

/// `ovs-ofctl monitor br0 watch:` (flow monitors: Nicira's in OpenFlow 1.0, ONF's
/// in 1.3, 1.4's own after): the flows there first, then each change whoever
/// makes it — a controller's, a `learn` action's as packets pass, and the learned
/// flows' going with the rule that learned them.
#[test]
fn a_flow_monitor_hears_of_every_change_learned_flows_too() {
    let _g = serial();
    let d = Vswd::start();
    let (h1, h2) = two_hosts(&d);
    ofctl(&d, &["del-flows"]);
    let learning = "priority=10,actions=learn(table=1,priority=5,delete_learned,\
                    NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],output:NXM_OF_IN_PORT[]),resubmit(,1)";
    ofctl(&d, &["add-flow", learning]);
    ofctl(&d, &["add-flow", "table=1,priority=0,actions=flood"]);
    let (mut lines, monitor) = watch(&d, "OpenFlow10", "table=1");
    // The initial reply: the flood rule, with its actions.
    let initial = upto(&mut lines, "actions=FLOOD");
    assert!(
        initial
            .iter()
            .any(|l| l.starts_with("NXST_FLOW_MONITOR reply (xid=")),
        "{initial:?}"
    );
    assert!(h1
        .exec(&["ping", "-c", "2", "-i", "0.2", "-W", "1", &h2.addr])
        .status
        .success());
    let learned = upto(&mut lines, &format!("dl_dst={}", h2.mac));
    let line = learned.last().unwrap();
    assert!(
        line.contains("event=ADDED table=1") && line.contains("actions=output:2"),
        "{learned:?}"
    );
    ofctl(&d, &["del-flows", "--strict", "priority=10"]);
    let gone = upto(&mut lines, "event=DELETED");
    assert!(gone.last().unwrap().contains("reason=delete"), "{gone:?}");
    drop(lines);
    vsw_e2e::end(monitor);
    // The same through 1.3 (ONF's experimenter messages) and 1.4/1.5's own.
    for (version, reply, initial) in [
        (
            "OpenFlow13",
            "ONFST_FLOW_MONITOR reply (OF1.3)",
            "event=ADDED",
        ),
        (
            "OpenFlow14",
            "OFPST_FLOW_MONITOR reply (OF1.4)",
            "event=INITIAL",
        ),
        (
            "OpenFlow15",
            "OFPST_FLOW_MONITOR reply (OF1.5)",
            "event=INITIAL",
        ),
    ] {
        let (mut lines, monitor) = watch(&d, version, "udp");
        ofctl(&d, &["add-flow", "priority=20,udp,actions=output:1"]);
        // The flow came before or after the monitor started: told either way.
        let added = upto(&mut lines, "udp actions=output:1");
        let line = added.last().unwrap();
        assert!(
            line.contains(initial) || line.contains("event=ADDED"),
            "{version}: {added:?}"
        );
        assert!(
            added.iter().any(|l| l.starts_with(reply)),
            "{version}: {added:?}"
        );
        ofctl(&d, &["mod-flows", "udp,actions=output:2"]);
        let modified = upto(&mut lines, "udp actions=output:2");
        assert!(
            modified.last().unwrap().contains("event=MODIFIED"),
            "{version}: {modified:?}"
        );
        ofctl(&d, &["del-flows", "udp"]);
        upto(&mut lines, "event=DELETED reason=delete");
        drop(lines);
        vsw_e2e::end(monitor);
    }
}

/// Listens on eth0 for IPv4 frames, says "ready", and prints the lengths of the
/// first five ICMP ones (or of those that came within 5 s).
const ICMP_FRAME_LENGTHS: &str = "
import socket, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0800))
s.bind(('eth0', 0))
s.settimeout(0.2)
print('ready', flush=True)
end, lens = time.time() + 5, []
while time.time() < end and len(lens) < 5:
    try:
        f = s.recv(65535)
    except socket.timeout:
        continue
    if len(f) >= 34 and f[23] == 1:
        lens.append(len(f))
print(' '.join(map(str, lens)), flush=True)
";

/// `output(port=P,max_len=N)`: the packets arrive cut to N bytes, the datapath
/// flow says `trunc(N)`, and
/// `ovs-ofctl` reads the action back as written.
#[test]
fn output_with_max_len_sends_packets_cut_to_that_length() {
    let _g = serial();
    let d = Vswd::start();
    let (h1, h2) = two_hosts(&d);
    ofctl(&d, &["del-flows"]);
    let cut = "priority=10,icmp,in_port=1,actions=output(port=2,max_len=100)";
    for f in [cut, "priority=0,actions=NORMAL"] {
        ofctl(&d, &["-O", "OpenFlow13", "add-flow", f]);
    }
    // A short ping first (98-byte frames: under 100, not cut, answered), which
    // leaves both hosts knowing each other's address: only the long pings are
    // counted below.
    let short = h1.exec(&["ping", "-c", "1", "-W", "2", &h2.addr]);
    assert!(short.status.success(), "{short:?}");
    // What reaches h2: the length of each ICMP frame, seen by a packet socket in
    // h2 (it says "ready" once it listens).
    let mut sniffer = std::process::Command::new("ip")
        .args(["netns", "exec", &h2.ns, "python3", "-c", ICMP_FRAME_LENGTHS])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines =
        std::io::BufRead::lines(std::io::BufReader::new(sniffer.stdout.take().unwrap()));
    assert_eq!(lines.next().unwrap().unwrap(), "ready");
    // 1,042-byte frames; h2 drops the cut ones (shorter than their IP length
    // says), so none is answered.
    let _ = h1.exec(&[
        "ping", "-c", "5", "-s", "1000", "-i", "0.2", "-W", "1", &h2.addr,
    ]);
    let seen = lines.next().unwrap().unwrap();
    let _ = sniffer.wait();
    assert_eq!(seen, "100 100 100 100 100", "ICMP frames h2 received");
    let dp = d.ctl_ok(&["dump-dp-flows"]);
    assert!(dp.contains("trunc(100),2"), "{dp}");
    for version in ["OpenFlow10", "OpenFlow13", "OpenFlow15"] {
        let dump = ofctl(&d, &["-O", version, "dump-flows", "--no-stats"]);
        assert_dumped_as_ovs_prints(&dump, version, cut, version);
    }
}

/// `fin_timeout`: the TCP reset a refused connection gets cuts the timeouts of
/// the rule it passes (its idle timeout, none before, to 2 s: `ovs-ofctl` shows
/// it), and the rule then times out; the rule only the connection's SYN passed
/// keeps none.
#[test]
fn a_tcp_reset_cuts_the_timeouts_of_the_fin_timeout_rule_it_passes() {
    let _g = serial();
    let d = Vswd::start();
    let (h1, h2) = two_hosts(&d);
    ofctl(&d, &["del-flows"]);
    for f in [
        "priority=10,tcp,tp_dst=80,actions=fin_timeout(idle_timeout=2),NORMAL",
        "priority=10,tcp,tp_src=80,actions=fin_timeout(idle_timeout=2),NORMAL",
        "priority=0,actions=NORMAL",
    ] {
        ofctl(&d, &["-O", "OpenFlow13", "add-flow", f]);
    }
    // Nobody listens on h2's port 80: its kernel answers the SYN with a reset.
    let connect = h1.exec(&["bash", "-c", &format!("exec 3<>/dev/tcp/{}/80", h2.addr)]);
    let said = String::from_utf8_lossy(&connect.stderr);
    assert!(said.contains("refused"), "{said}");
    let dump = ofctl(&d, &["-O", "OpenFlow13", "dump-flows", "--no-stats"]);
    let line = |dump: &str, m: &str| dump.lines().find(|l| l.contains(m)).map(str::to_string);
    // What the rule is now, before its actions.
    let head = |l: String| l.split("actions=").next().unwrap_or_default().to_string();
    let reset = head(line(&dump, "tp_src=80").unwrap_or_else(|| panic!("{dump}")));
    assert!(reset.contains("idle_timeout=2"), "{reset}");
    let syn = head(line(&dump, "tp_dst=80").unwrap_or_else(|| panic!("{dump}")));
    assert!(!syn.contains("timeout="), "{syn}");
    wait_until(
        "the rule the reset passed times out",
        Duration::from_secs(15),
        || line(&ofctl(&d, &["dump-flows"]), "tp_src=80").is_none(),
    );
    let dump = ofctl(&d, &["-O", "OpenFlow13", "dump-flows"]);
    assert!(line(&dump, "tp_dst=80").is_some(), "{dump}");
}

/// `learn(…)` as Open vSwitch's MAC-learning example uses it: each host's frames
/// put a rule in table 1 that sends frames to it out of its port; the replies go by
/// them, `ovs-ofctl` sees them, and they go when the rule that learns them does
/// (`delete_learned`). The learning rule comes back as installed.
#[test]
fn learned_flows_forward_the_replies_and_go_with_the_rule_that_learned_them() {
    let _g = serial();
    let d = Vswd::start();
    let (h1, h2) = two_hosts(&d);
    let learning = "priority=10,actions=learn(table=1,hard_timeout=60,priority=5,cookie=0x42,\
                    delete_learned,NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],\
                    load:NXM_OF_IN_PORT[]->NXM_NX_REG1[0..15],output:NXM_OF_IN_PORT[]),\
                    resubmit(,1)";
    let ping = || {
        h1.exec(&["ping", "-c", "2", "-i", "0.2", "-W", "1", &h2.addr])
            .status
            .success()
    };
    for version in ["OpenFlow15", "OpenFlow13"] {
        ofctl(&d, &["-O", version, "del-flows"]);
        ofctl(&d, &["-O", version, "add-flow", learning]);
        ofctl(
            &d,
            &[
                "-O",
                version,
                "add-flow",
                "table=1,priority=0,actions=flood",
            ],
        );
        assert!(
            ping(),
            "{version}: {}",
            ofctl(&d, &["-O", version, "dump-flows"])
        );
        let table0 = ofctl(&d, &["-O", version, "dump-flows", "--no-stats", "table=0"]);
        let want = ovs_prints(version, learning);
        assert!(
            table0.lines().any(|l| l.trim() == want),
            "{version}: {want} not in\n{table0}"
        );
        let table1 = ofctl(&d, &["-O", version, "dump-flows", "table=1"]);
        for (host, port) in [(&h1, 1), (&h2, 2)] {
            let line = table1
                .lines()
                .find(|l| l.contains(&format!("dl_dst={}", host.mac)))
                .unwrap_or_else(|| panic!("{version}: no flow to {} in\n{table1}", host.mac));
            assert!(line.contains("cookie=0x42"), "{line}");
            assert!(line.contains("hard_timeout=60"), "{line}");
            assert!(line.contains("priority=5"), "{line}");
            // As Open vSwitch says a load: OpenFlow 1.5 has only the set-field.
            let load = if version == "OpenFlow15" {
                format!("set_field:{port:#x}/0xffff->reg1")
            } else {
                format!("load:{port:#x}->NXM_NX_REG1[0..15]")
            };
            assert!(
                line.contains(&format!("actions={load},output:{port}")),
                "{line}"
            );
        }
        // The replies to h1 went by what h1's frames taught.
        assert!(
            packets_of(&table1, &format!("dl_dst={}", h1.mac)) > 0,
            "{version}: {table1}"
        );
        // The rule that learned them goes: so do they.
        ofctl(&d, &["-O", version, "del-flows", "--strict", "priority=10"]);
        let table1 = ofctl(&d, &["-O", version, "dump-flows", "--no-stats", "table=1"]);
        assert_eq!(
            table1.lines().filter(|l| l.contains("priority=")).count(),
            1,
            "{version}: only the flood rule stays:\n{table1}"
        );
    }
    // A learn whose new rule could not be a flow is refused, as Open vSwitch does.
    let refused = ofctl_raw(
        &d,
        &[
            "-O",
            "OpenFlow13",
            "add-flow",
            "actions=learn(load:5->NXM_OF_IP_DST[])",
        ],
    );
    assert!(!refused.status.success());
}

/// `controller(pause)` with the real `ovs-ofctl monitor … resume`: a paused packet
/// goes no further until the controller sends it back (NXT_RESUME), then continues
/// where it stopped with the registers it was sent up with.
#[test]
fn a_paused_packet_continues_when_the_controller_resumes_it() {
    let _g = serial();
    let d = Vswd::start();
    let of = |args: &[&str]| of13(&d, args);
    of(&["del-flows"]);
    d.ctl_ok(&["add-port", "gen", "type=ring", "ring-flows=1"]);
    d.ctl_ok(&["add-port", "sink", "type=ring"]);
    // The meter keeps the monitor's share of the generator's packets small.
    of(&["add-meter", "meter=1,pktps,bands=type=drop,rate=20"]);
    let pausing =
        "in_port=1,actions=load:0x5->NXM_NX_REG0[],controller(userdata=01,pause,meter_id=1),resubmit(,1)";
    of(&["add-flow", pausing]);
    of(&["add-flow", "table=1,reg0=5,actions=output:2"]);
    let dump = of(&["dump-flows", "--no-stats", "table=0"]);
    assert_dumped_as_ovs_prints(&dump, "OpenFlow13", pausing, "OpenFlow13");
    // Paused, and nobody resumes: nothing reaches the sink.
    wait_until("packets to pause", Duration::from_secs(10), || {
        packets_of(&of(&["dump-flows", "table=0"]), "pause") > 100
    });
    assert_eq!(d.port("sink").stats.tx_packets, 0);
    let resumed = monitor_lines_with(&d, "nxt_packet_in2", &["resume"], |lines| {
        let sent = lines.find(|l| l.contains("NXT_RESUME")).is_some();
        wait_until(
            "resumed packets at the sink",
            Duration::from_secs(10),
            || d.port("sink").stats.tx_packets > 0,
        );
        sent
    });
    assert!(resumed, "ovs-ofctl sent no NXT_RESUME");
    // A continuation that is no paused translation of this switch is refused, with
    // the request's xid.
    let conn = std::os::unix::net::UnixStream::connect(d.dir.join("br0.mgmt")).unwrap();
    let mut p = vsw_e2e::openflow::OfPeer::over(Box::new(conn), Version::V1_3);
    p.greet();
    let in_port = vsw_openflow::oxm::OxmField {
        field: 0,
        value: 1u32.to_be_bytes().to_vec(),
        mask: None,
    };
    let frame = vsw_datapath::ring::flow_frames(1, 64).remove(0);
    let xid = p.send(Message::Resume(vsw_openflow::packet::Resume {
        packet: frame,
        metadata: vsw_openflow::oxm::OxmMatch {
            fields: vec![in_port],
        },
        continuation: [0xee; 16],
    }));
    let answer = p.next(|m| matches!(m, Message::Error(_)));
    assert!(matches!(answer, Some((x, _)) if x == xid), "{answer:?}");
}

/// `output:SRC[…]` sends out of the port a register names, and `exit` stops every
/// action after it — in its list and in those it was resubmitted from.
#[test]
fn an_output_from_a_register_and_an_exit_forward_as_open_vswitch_does() {
    let _g = serial();
    let d = Vswd::start();
    let (h1, h2) = two_hosts(&d);
    let ping = || {
        h1.exec(&["ping", "-c", "1", "-W", "1", &h2.addr])
            .status
            .success()
    };
    let of = |args: &[&str]| of13(&d, args);
    of(&["del-flows"]);
    // Each port's frames go out of the port reg0 names: the other one.
    of(&[
        "add-flow",
        "in_port=1,actions=load:2->NXM_NX_REG0[0..15],resubmit(,1)",
    ]);
    of(&[
        "add-flow",
        "in_port=2,actions=load:1->NXM_NX_REG0[0..15],resubmit(,1)",
    ]);
    of(&["add-flow", "table=1,actions=output:NXM_NX_REG0[0..15]"]);
    assert!(ping(), "{}", of(&["dump-flows"]));
    // An exit in table 1 before the output: nothing after it runs, not even what
    // table 0 had after its resubmit.
    of(&["add-flow", "table=1,actions=exit,output:NXM_NX_REG0[0..15]"]);
    of(&[
        "add-flow",
        "in_port=2,actions=load:1->NXM_NX_REG0[0..15],resubmit(,1),output:1",
    ]);
    assert!(!ping(), "an exit did not stop the pipeline");
    of(&[
        "add-flow",
        "table=1,actions=output:NXM_NX_REG0[0..15],exit,output:2",
    ]);
    assert!(ping(), "{}", of(&["dump-flows"]));
}
