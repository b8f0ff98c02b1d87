//! Connection tracking through vswd: `ct(…)` rules of a stateful firewall between
//! two hosts (namespaces), the connection tracker deciding per packet.

use vsw_e2e::openflow::{assert_dumped_as_ovs_prints, ovs_ofctl};
use vsw_e2e::ovsdb::{OvsVswitchd, OvsdbServer};
use vsw_e2e::{serial, Host, Namespace, Vswd};

/// A firewall in zone 7: the inside host (port 1) opens connections, the outside
/// one (port 2) answers them; ARP passes. A commit marks its connection 0x2a.
const ZONE_7_FIREWALL: [&str; 7] = [
    "priority=10,arp,actions=NORMAL",
    "priority=10,ip,ct_state=-trk,actions=ct(table=1,zone=7)",
    "table=1,priority=20,in_port=1,ip,ct_state=+trk+new,actions=ct(commit,zone=7,exec(set_field:0x2a->ct_mark)),NORMAL",
    "table=1,priority=30,ip,ct_state=+trk+est,ct_mark=0x2a,actions=NORMAL",
    "table=1,priority=20,ip,ct_state=+trk+est,actions=NORMAL",
    "table=1,priority=20,ip,ct_state=+trk+rel,actions=NORMAL",
    "table=1,priority=1,actions=drop",
];

/// [`ZONE_7_FIREWALL`] in vswd.
fn stateful_firewall() -> (Vswd, Host, Host) {
    let (d, inside, outside) = inside_and_outside();
    for flow in ZONE_7_FIREWALL {
        d.ctl_ok(&["add-flow", flow]);
    }
    (d, inside, outside)
}

/// A switch with an inside host (port 1) and an outside one (port 2), no rules.
fn inside_and_outside() -> (Vswd, Host, Host) {
    let d = Vswd::start();
    let (inside, outside) = (Host::new(1), Host::new(2));
    d.ctl_ok(&["add-port", &inside.port]);
    d.ctl_ok(&["add-port", &outside.port]);
    d.ctl_ok(&["del-flows"]);
    (d, inside, outside)
}

fn packets_of(d: &Vswd, needle: &str) -> u64 {
    d.all_flows()
        .iter()
        .filter(|f| f.flow.contains(needle))
        .map(|f| f.n_packets)
        .sum()
}

/// Pings and TCP from inside get out and their answers back in; from outside, a
/// new connection does not get in. What was committed carries its mark.
#[test]
fn a_stateful_firewall_lets_answers_in_and_new_connections_from_outside_not() {
    let _g = serial();
    let (d, inside, outside) = stateful_firewall();
    assert!(inside.ping(&outside, 3), "inside out, and the replies back");
    assert!(!outside.ping(&inside, 2), "a new connection from outside");
    let marked = packets_of(&d, "ct_mark=0x2a");
    assert!(
        marked >= 4,
        "established packets of a marked connection: {marked}"
    );
    // TCP both ways of one connection opened from inside (its windows checked),
    // and none opened from outside.
    let bytes = inside
        .iperf_to(&outside, 1)
        .unwrap_or_else(|e| panic!("TCP from inside: {e}\n{}", d.ctl_ok(&["dump-dp-flows"])));
    // A connection the tracker lost would stall at its first window.
    assert!(bytes > 1_000_000, "{bytes} bytes");
    assert!(
        outside.iperf_to(&inside, 1).is_err(),
        "TCP from outside got in"
    );
    // The connections, as Open vSwitch's dpctl/dump-conntrack prints them.
    let dump = d.appctl_ok(&["dpctl/dump-conntrack"]);
    let icmp = format!(
        "icmp,orig=(src={a},dst={b},id=",
        a = inside.addr,
        b = outside.addr
    );
    assert!(
        dump.contains(&icmp) && dump.contains(",zone=7,mark=42"),
        "{dump}"
    );
    assert!(
        dump.contains("tcp,orig=") && dump.contains("protoinfo=(state="),
        "{dump}"
    );
    assert_eq!(d.appctl_ok(&["dpctl/dump-conntrack", "zone=8"]), "");
    // The same connections counted, as Open vSwitch counts them.
    let total = dump.lines().count();
    let stats = d.appctl_ok(&["dpctl/ct-stats-show", "-m"]);
    assert!(
        stats.starts_with(&format!("Connections Stats:\n    Total: {total}\n  TCP: ")),
        "{stats}"
    );
    assert!(stats.contains("    Conn per TCP states:\n\t  ["), "{stats}");
    assert!(stats.contains("\n  ICMP: "), "{stats}");
    assert_eq!(
        d.appctl_ok(&["dpctl/ct-stats-show", "zone=8"]),
        "Connections Stats:\n    Total: 0\n"
    );
    // vswctl answers the same, word for word.
    assert_eq!(d.ctl_ok(&["conntrack", "dump-conntrack"]), dump);
    assert_eq!(d.ctl_ok(&["conntrack", "ct-stats-show", "-m"]), stats);
    let bad = d.ctl(&["conntrack", "flush-conntrack", "ct_tp_src=5"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("port is set without protocol"));
    let n: usize = d
        .appctl_ok(&["dpctl/ct-get-nconns"])
        .trim()
        .parse()
        .unwrap();
    assert!(
        n >= 3,
        "the pings, iperf3's control and data connections: {n}"
    );
    // A full table takes no new connection: the answer to a ping is new then,
    // and from outside.
    d.appctl_ok(&["dpctl/flush-conntrack", "zone=7"]);
    assert_eq!(d.appctl_ok(&["dpctl/ct-get-nconns"]).trim(), "0");
    d.appctl_ok(&["dpctl/ct-set-maxconns", "0"]);
    assert!(
        !inside.ping(&outside, 2),
        "answers got in with nothing committed"
    );
    d.appctl_ok(&["dpctl/ct-set-maxconns", "3000000"]);
    assert!(inside.ping(&outside, 2));
    // A zone's own limit: full, its answers do not get in; as Open vSwitch prints it.
    d.appctl_ok(&["dpctl/ct-set-limits", "default=0", "zone=7,limit=1"]);
    assert_eq!(
        d.appctl_ok(&["dpctl/ct-get-limits", "zone=7"]),
        "default limit=0\nzone=7,limit=1,count=1\n"
    );
    assert!(
        inside.iperf_to(&outside, 1).is_err(),
        "a second connection in a full zone"
    );
    d.appctl_ok(&["dpctl/ct-del-limits", "zone=7"]);
    assert_eq!(d.appctl_ok(&["dpctl/ct-get-limits"]), "default limit=0\n");
    assert_eq!(
        d.appctl_ok(&["dpctl/ct-get-tcp-seq-chk"]),
        "TCP sequence checking: enabled\n"
    );
    // What the datapath runs: the tracker, then a second pass.
    let dp = d.ctl_ok(&["dump-dp-flows"]);
    assert!(dp.contains("ct(zone=7)") && dp.contains("recirc("), "{dp}");
    assert!(dp.contains("ct(commit,zone=7)"), "{dp}");
}

/// The firewall's rules, written as Open vSwitch's tools write them.
const FIREWALL: [&str; 9] = [
    "priority=10,arp,actions=NORMAL",
    // The tracker's fields read into registers (as OVN reads them).
    "table=1,priority=5,ip,ct_state=+est+trk,actions=move:NXM_NX_CT_NW_DST[]->NXM_NX_REG1[],move:NXM_NX_CT_LABEL[96..127]->NXM_NX_REG3[],move:NXM_NX_CT_TP_DST[]->NXM_NX_REG2[0..15],resubmit(,2)",
    // The original direction's fields (NXM_NX_CT_NW_SRC, …, CT_TP_DST).
    "table=1,priority=25,ip,ct_state=+est+trk,ct_nw_src=198.18.0.1,ct_nw_proto=1,actions=NORMAL",
    "table=1,priority=25,tcp,ct_state=+est+trk,ct_nw_dst=198.18.0.0/24,ct_nw_proto=6,ct_tp_dst=5201,actions=NORMAL",
    "priority=10,ip,ct_state=-trk,actions=ct(table=1,zone=NXM_NX_REG6[0..15])",
    "table=1,priority=20,in_port=1,ip,ct_state=+new+trk,actions=ct(commit,zone=7,exec(set_field:0x2a->ct_mark,set_field:0x1/0x1->ct_label)),NORMAL",
    "table=1,priority=20,ip,ct_state=+est+trk,ct_mark=0x2a,actions=NORMAL",
    "table=1,priority=20,ip,ct_state=+rel+trk,actions=ct_clear,NORMAL",
    "table=1,priority=1,actions=drop",
];

/// `ovs-ofctl` installs ct flows in every protocol it speaks to vsw (OpenFlow
/// 1.0 with NXM, 1.3, 1.5): they come back as Open vSwitch prints them, and
/// the firewall they make works (the zone from a register, 7: loaded first).
#[test]
fn ct_flows_go_in_through_ovs_ofctl_in_every_version_and_work() {
    let _g = serial();
    let d = Vswd::start();
    let (inside, outside) = (Host::new(1), Host::new(2));
    d.ctl_ok(&["add-port", &inside.port]);
    d.ctl_ok(&["add-port", &outside.port]);
    for version in ["OpenFlow10", "OpenFlow13", "OpenFlow15"] {
        let of = |args: &[&str]| {
            let mut all = vec!["-O", version];
            all.extend_from_slice(args);
            let out = ovs_ofctl(&d, &all);
            assert!(
                out.status.success(),
                "ovs-ofctl {all:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        of(&["del-flows"]);
        for f in FIREWALL {
            of(&["add-flow", f]);
        }
        // The zone the first ct reads.
        of(&["add-flow", "table=0,priority=20,ip,ct_state=-trk,reg6=0,actions=load:7->NXM_NX_REG6[0..15],resubmit(,0)"]);
        let dump = of(&["dump-flows", "--no-stats"]);
        for f in FIREWALL {
            assert_dumped_as_ovs_prints(&dump, version, f, version);
        }
    }
    assert!(inside.ping(&outside, 3), "inside out, and the replies back");
    assert!(!outside.ping(&inside, 2), "a new connection from outside");
    let dump = d.appctl_ok(&["dpctl/dump-conntrack"]);
    assert!(dump.contains(",zone=7,mark=42,labels=0x1"), "{dump}");

    // Flushes as ovn-controller sends them (NXT_CT_FLUSH, NXT_CT_FLUSH_ZONE),
    // from Open vSwitch 3.1's own tool: another zone's, or another host's
    // connections, take none of these.
    let nconns = || -> usize {
        d.appctl_ok(&["dpctl/ct-get-nconns"])
            .trim()
            .parse()
            .unwrap()
    };
    let flush = |args: &[&str]| {
        let out = ovs_ofctl(&d, &[&["-O", "OpenFlow15"], args].concat());
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let before = nconns();
    assert!(before >= 1, "{dump}");
    let from = |h: &Host| format!("ct_nw_src={}", h.addr);
    flush(&["ct-flush", "zone=8"]);
    flush(&["ct-flush", "zone=7", &from(&outside)]);
    assert_eq!(nconns(), before);
    flush(&["ct-flush", "zone=7", &from(&inside)]);
    assert_eq!(nconns(), 0, "{}", d.appctl_ok(&["dpctl/dump-conntrack"]));
    assert!(inside.ping(&outside, 2));
    assert!(nconns() >= 1);
    flush(&["ct-flush-zone", "8"]);
    assert!(nconns() >= 1);
    flush(&["ct-flush-zone", "7"]);
    assert_eq!(nconns(), 0);
    // The same filter through ovs-appctl, and a bad one named.
    assert!(inside.ping(&outside, 2));
    d.appctl_ok(&["dpctl/flush-conntrack", "zone=7", &from(&outside)]);
    assert!(nconns() >= 1);
    d.appctl_ok(&["dpctl/flush-conntrack", "zone=7", &from(&inside)]);
    assert_eq!(nconns(), 0);
    let bad = d.appctl(&["dpctl/flush-conntrack", "ct_tp_src=5"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("port is set without protocol"));
}

/// SNAT: the inside host's connections leave as 198.18.0.100; the outside host
/// answers that address, and the tracker turns the answers back to the inside host
/// (`ct(nat)` on the way in, then a second pass of the established connection).
#[test]
fn snat_hides_the_inside_host_behind_another_address() {
    let _g = serial();
    let (d, inside, outside) = inside_and_outside();
    for flow in [
        "priority=10,arp,actions=NORMAL",
        "priority=10,in_port=1,ip,actions=ct(commit,zone=3,nat(src=198.18.0.100)),NORMAL",
        "priority=10,in_port=2,ip,actions=ct(table=1,zone=3,nat)",
        // The answers' destination is rewritten: `+dnat`, as Open vSwitch marks an
        // SNAT connection's replies.
        "table=1,priority=10,ip,ct_state=+trk+est+dnat,actions=NORMAL",
        // ICMP errors about the inside host's packets, their quotes turned back.
        "table=1,priority=10,ip,ct_state=+trk+rel+dnat,actions=NORMAL",
        "table=1,priority=1,actions=drop",
    ] {
        d.ctl_ok(&["add-flow", flow]);
    }
    // The outside host reaches the translated address through the switch.
    outside.exec_ok(&[
        "ip",
        "neigh",
        "replace",
        "198.18.0.100",
        "lladdr",
        &inside.mac,
        "dev",
        "eth0",
    ]);
    assert!(inside.ping(&outside, 3), "out translated, the replies back");
    // Datagrams of three fragments: tracked whole, the translation written into
    // each fragment.
    let big = inside.exec(&[
        "ping",
        "-c",
        "2",
        "-i",
        "0.2",
        "-W",
        "1",
        "-q",
        "-s",
        "3000",
        &outside.addr,
    ]);
    assert!(
        big.status.success(),
        "fragments through SNAT: {}",
        d.appctl_ok(&["dpctl/ipf-get-status"])
    );
    let dump = d.appctl_ok(&["dpctl/dump-conntrack", "zone=3"]);
    let reply = format!("reply=(src={},dst=198.18.0.100,", outside.addr);
    assert!(dump.contains(&reply), "{dump}");
    let bytes = inside
        .iperf_to(&outside, 1)
        .unwrap_or_else(|e| panic!("TCP through SNAT: {e}\n{dump}"));
    assert!(bytes > 1_000_000, "{bytes} bytes");
    // A datagram to a closed port: the outside host's "port unreachable" goes to
    // the translated address and quotes the translated datagram. The inside
    // host's socket hears of it (ECONNREFUSED) only if the error reaches it with
    // its quote turned back to the datagram it sent.
    let probe = format!(
        "import socket\n\
         s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
         s.settimeout(3)\n\
         s.connect(('{}', 9))\n\
         s.send(b'anyone?')\n\
         try:\n    s.recv(64)\n    print('answered')\n\
         except ConnectionRefusedError:\n    print('refused')\n\
         except socket.timeout:\n    print('nothing')\n",
        outside.addr
    );
    let heard = inside.exec_ok(&["python3", "-c", &probe]);
    assert_eq!(
        heard.trim(),
        "refused",
        "{}",
        d.appctl_ok(&["dpctl/dump-conntrack"])
    );
    // A connection the outside host opens is none of the inside's: dropped.
    assert!(!outside.ping(&inside, 2));
}

/// A load balancer as OVN builds one: datagrams to the service 198.18.0.100:80
/// go to one of three backends (a select group whose buckets commit with
/// `nat(dst=BACKEND:8080)`), each connection to one backend for its life; the
/// answers come back from the service's address and port (`ct(nat)` on the
/// way back), so the client's connected sockets take them.
#[test]
fn a_dnat_load_balancer_spreads_connections_over_three_backends() {
    let _g = serial();
    let d = Vswd::start();
    let client = Host::new(1);
    let backends = [Host::new(2), Host::new(3), Host::new(4)];
    d.ctl_ok(&["add-port", &client.port]);
    for b in &backends {
        d.ctl_ok(&["add-port", &b.port]);
    }
    d.ctl_ok(&["del-flows"]);
    let buckets: Vec<String> = backends
        .iter()
        .map(|b| {
            format!(
                "bucket=actions=ct(commit,zone=5,nat(dst={}:8080),table=2)",
                b.addr
            )
        })
        .collect();
    d.ctl_ok(&[
        "add-group",
        &format!("group_id=1,type=select,{}", buckets.join(",")),
    ]);
    let mut flows = vec![
        "priority=10,arp,actions=NORMAL".to_string(),
        "priority=10,in_port=1,udp,nw_dst=198.18.0.100,tp_dst=80,actions=ct(table=1,zone=5,nat)"
            .to_string(),
        "table=1,priority=10,udp,ct_state=+trk+new,actions=group:1".to_string(),
        "table=1,priority=10,udp,ct_state=+trk+est,actions=resubmit(,2)".to_string(),
        "priority=10,in_port=2,udp,actions=ct(table=3,zone=5,nat)".to_string(),
        "priority=10,in_port=3,udp,actions=ct(table=3,zone=5,nat)".to_string(),
        "priority=10,in_port=4,udp,actions=ct(table=3,zone=5,nat)".to_string(),
        // Answers of the service, from its address: to the client. They are
        // known by their connection's original direction, as OVN knows a load
        // balancer's (`ct_nw_dst`, `ct_tp_dst`: what the client asked for).
        // The service's address is read into a register too (OVN's hairpin
        // tables read it so), and the answer goes by it.
        "table=3,priority=10,udp,ct_state=+trk+est,nw_src=198.18.0.100,tp_src=80,\
         ct_nw_dst=198.18.0.100,ct_nw_proto=17,ct_tp_dst=80,\
         actions=move:NXM_NX_CT_NW_DST[]->NXM_NX_REG1[],resubmit(,4)"
            .to_string(),
        "table=4,priority=10,reg1=0xc6120064,actions=output:1".to_string(),
        "table=3,priority=1,actions=drop".to_string(),
    ];
    for (i, b) in backends.iter().enumerate() {
        flows.push(format!(
            "table=2,priority=10,ip,nw_dst={},actions=mod_dl_dst:{},output:{}",
            b.addr,
            b.mac,
            i + 2
        ));
    }
    for f in &flows {
        d.ctl_ok(&["add-flow", f]);
    }
    // The client reaches the service's address through the switch.
    client.exec_ok(&[
        "ip",
        "neigh",
        "replace",
        "198.18.0.100",
        "lladdr",
        "02:00:c6:12:00:64",
        "dev",
        "eth0",
    ]);
    // Each backend answers with its own address.
    let server = |addr: &str| {
        format!(
            "import socket\n\
             s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
             s.bind(('{addr}', 8080))\n\
             print('ready', flush=True)\n\
             while True:\n    data, peer = s.recvfrom(64)\n    s.sendto(b'{addr}', peer)\n"
        )
    };
    let mut servers: Vec<_> = backends
        .iter()
        .map(|b| b.python_ready(&server(&b.addr)))
        .collect();
    // 30 connections (source ports), each asked twice: the second answer comes
    // from the backend the first did.
    let client_script = "import socket\n\
        seen = []\n\
        for i in range(30):\n    \
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n    \
            s.settimeout(2)\n    \
            s.connect(('198.18.0.100', 80))\n    \
            answers = []\n    \
            for _ in range(2):\n        \
                s.send(b'who?')\n        \
                try:\n            answers.append(s.recv(64).decode())\n        \
                except socket.timeout:\n            answers.append('nothing')\n    \
            seen.append(answers[0] if answers[0] == answers[1] else 'moved')\n\
        print(' '.join(seen))\n";
    let heard = client.exec_ok(&["python3", "-c", client_script]);
    for s in &mut servers {
        let _ = s.kill();
        let _ = s.wait();
    }
    let words: Vec<&str> = heard.split_whitespace().collect();
    let heard = format!(
        "{heard}\n{}\n{}\n{}",
        d.ctl_ok(&["dump-flows"]),
        d.ctl_ok(&["dump-dp-flows"]),
        d.appctl_ok(&["dpctl/dump-conntrack"])
    );
    assert_eq!(words.len(), 30, "{heard}");
    for b in &backends {
        let n = words.iter().filter(|w| **w == b.addr).count();
        assert!(n > 0, "backend {} took none: {heard}", b.addr);
    }
    assert!(
        words.iter().all(|w| backends.iter().any(|b| b.addr == *w)),
        "every connection answered, by one backend: {heard}"
    );
    let dump = d.appctl_ok(&["dpctl/dump-conntrack", "zone=5"]);
    assert_eq!(dump.lines().count(), 30, "{dump}");
    // The datapath flow of the answers matched the original direction too.
    let dp = d.ctl_ok(&["dump-dp-flows"]);
    assert!(dp.contains("ct_nw_dst=198.18.0.100"), "{dp}");
    assert!(dump.contains("dst=198.18.0.100,sport="), "{dump}");
}

/// Pings of 3,000 bytes, three fragments each way: the firewall tracks each
/// datagram whole (its fragments alone are invalid to it, and dropped) and sends
/// its fragments on; reassembly off, or a smallest fragment larger than these,
/// and they are dropped; Open vSwitch's `dpctl/ipf-*` words set and show it.
#[test]
fn fragmented_datagrams_are_tracked_whole_and_sent_on_as_fragments() {
    let _g = serial();
    let (d, inside, outside) = stateful_firewall();
    let big_ping = |from: &Host, to: &Host| {
        from.exec(&[
            "ping", "-c", "2", "-i", "0.2", "-W", "1", "-q", "-s", "3000", &to.addr,
        ])
        .status
        .success()
    };
    let status = |what: &str| -> u64 {
        d.appctl_ok(&["dpctl/ipf-get-status"])
            .lines()
            .find_map(|l| {
                l.trim()
                    .strip_prefix(&format!("{what}: "))
                    .map(str::to_owned)
            })
            .unwrap_or_else(|| panic!("no {what}"))
            .parse()
            .unwrap()
    };
    assert!(
        big_ping(&inside, &outside),
        "fragmented pings and their answers: {}",
        d.appctl_ok(&["dpctl/ipf-get-status", "-m"])
    );
    // Two datagrams each way, three fragments each: all taken, all sent on.
    assert!(
        status("v4 frags accepted") >= 12,
        "{}",
        d.appctl_ok(&["dpctl/ipf-get-status"])
    );
    assert_eq!(status("v4 frags accepted"), status("v4 frags completed"));
    assert_eq!(status("num frag"), 0);
    assert!(!big_ping(&outside, &inside), "new from outside, fragmented");
    // Off: fragments are invalid; whole pings still pass.
    assert_eq!(
        d.appctl_ok(&["dpctl/ipf-set-disabled", "v4"]),
        "disabling fragmentation reassembly successful"
    );
    assert!(
        !big_ping(&inside, &outside),
        "fragments got through untracked"
    );
    assert!(inside.ping(&outside, 1));
    d.appctl_ok(&["dpctl/ipf-set-enabled", "v4"]);
    // Fragments of 1,500 bytes under a smallest fragment of 2,000: refused, counted.
    d.appctl_ok(&["dpctl/ipf-set-min-frag", "v4", "2000"]);
    assert!(!big_ping(&inside, &outside));
    assert!(status("v4 frags too small") > 0);
    d.appctl_ok(&["dpctl/ipf-set-min-frag", "v4", "1200"]);
    assert!(big_ping(&inside, &outside));
    // A bad setting changes nothing and says why, as Open vSwitch does.
    let bad = d.appctl(&["dpctl/ipf-set-min-frag", "v4", "100"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("minimum fragment size too small"));
    assert_eq!(status("min v4 frag size"), 1200);
    assert_eq!(
        d.ctl_ok(&["conntrack", "ipf-get-status"]),
        d.appctl_ok(&["dpctl/ipf-get-status"])
    );
}

/// The same traffic through [`ZONE_7_FIREWALL`] in vswd and in Open vSwitch 3.1 (netdev
/// datapath, its own namespace): `dpctl/dump-conntrack -m` prints the same lines
/// (a ping's identifier aside, which `ping` picks at random), and so does
/// `dpctl/ct-stats-show -m`.
#[test]
fn the_connections_dump_reads_as_open_vswitch_s_for_the_same_traffic() {
    let _g = serial();
    let (d, v_in, v_out) = stateful_firewall();
    let ns = Namespace::new("vtct");
    let db = OvsdbServer::start();
    let ovs = OvsVswitchd::start(&ns, &db);
    let (o_in, o_out) = (Host::new(1), Host::new(2));
    db.add_netdev_bridge("br0");
    for (h, n) in [(&o_in, 1), (&o_out, 2)] {
        vsw_e2e::must("ip", &["link", "set", &h.port, "netns", &ns.0]);
        ns.ip(&["link", "set", &h.port, "up"]);
        db.add_port("br0", &h.port, Some(n));
    }
    ovs.ofctl(&["del-flows", "br0"]);
    for flow in ZONE_7_FIREWALL {
        ovs.ofctl(&["add-flow", "br0", flow]);
    }
    // Open vSwitch checks TCP checksums a veth leaves to be filled in: filled
    // on both sides, the same traffic.
    for h in [&v_in, &v_out, &o_in, &o_out] {
        h.exec_ok(&["ethtool", "-K", "eth0", "tx", "off"]);
    }
    let traffic = |inside: &Host, outside: &Host| -> Vec<std::process::Child> {
        assert!(inside.ping(outside, 1));
        let udp_server = format!(
            "import socket\n\
             s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
             s.bind(('{}', 5353))\n\
             print('ready', flush=True)\n\
             d, peer = s.recvfrom(64)\n\
             s.sendto(d, peer)\n",
            outside.addr
        );
        let tcp_server = format!(
            "import socket, time\n\
             s = socket.socket()\n\
             s.bind(('{}', 8080))\n\
             s.listen()\n\
             print('ready', flush=True)\n\
             c, _ = s.accept()\n\
             c.send(c.recv(64))\n\
             time.sleep(30)\n",
            outside.addr
        );
        let client = format!(
            "import socket, time\n\
             u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
             u.bind(('{a}', 4444))\n\
             u.settimeout(3)\n\
             u.sendto(b'hi', ('{b}', 5353))\n\
             u.recv(64)\n\
             t = socket.socket()\n\
             t.bind(('{a}', 40000))\n\
             t.connect(('{b}', 8080))\n\
             t.send(b'hi')\n\
             t.recv(64)\n\
             print('ready', flush=True)\n\
             time.sleep(30)\n",
            a = inside.addr,
            b = outside.addr
        );
        vec![
            outside.python_ready_for(&udp_server, 30),
            outside.python_ready_for(&tcp_server, 40),
            inside.python_ready_for(&client, 40),
        ]
    };
    // The ping's identifier: `id=N` in its tuples, then Open vSwitch's own `id=0`.
    let lines = |dump: String| -> Vec<String> {
        let mut v: Vec<String> = dump
            .lines()
            .map(|l| {
                if !l.starts_with("icmp,") {
                    return l.to_owned();
                }
                l.split(',')
                    .map(|f| match f.strip_prefix("id=") {
                        Some(n) if n != "0" => "id=N",
                        _ => f,
                    })
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .collect();
        v.sort();
        v
    };
    let mut v_kids = traffic(&v_in, &v_out);
    let mut o_kids = traffic(&o_in, &o_out);
    let vsw = lines(d.appctl_ok(&["dpctl/dump-conntrack", "-m"]));
    let theirs = lines(ovs.appctl(&["dpctl/dump-conntrack", "-m"]));
    let stats = (
        d.appctl_ok(&["dpctl/ct-stats-show", "-m"]),
        ovs.appctl(&["dpctl/ct-stats-show", "-m"]),
    );
    for k in v_kids.iter_mut().chain(o_kids.iter_mut()) {
        let _ = k.kill();
        let _ = k.wait();
    }
    assert_eq!(vsw.len(), 3, "{vsw:#?}");
    assert!(
        vsw.iter()
            .any(|l| l
                .starts_with("tcp,orig=(src=198.18.0.1,dst=198.18.0.2,sport=40000,dport=8080)")),
        "{vsw:#?}"
    );
    assert_eq!(vsw, theirs);
    assert_eq!(stats.0, stats.1);
}

/// Runs the server script (it prints `ready` when it listens) on its host, then
/// the client script on its own; what the client printed, and with it the
/// switch's connections and datapath flows (for a failure's message).
fn exchange(
    d: &Vswd,
    (server_host, server): (&Host, &str),
    (client_host, client): (&Host, &str),
) -> String {
    let mut srv = server_host.python_ready_for(server, 20);
    let heard = client_host.exec_ok(&["python3", "-c", client]);
    let _ = srv.kill();
    let _ = srv.wait();
    let heard = heard.trim().to_owned();
    eprintln!(
        "heard {heard:?}\n{}\n{}",
        d.appctl_ok(&["dpctl/dump-conntrack"]),
        d.ctl_ok(&["dump-dp-flows"])
    );
    heard
}

/// `ct(commit,alg=tftp)`: a TFTP server answers a request from a port of its
/// own, and the firewall lets the answer in as related. The same exchange with
/// another port, committed without the helper, stays out.
#[test]
fn a_tftp_helper_lets_the_servers_answer_in_as_related() {
    let _g = serial();
    let (d, inside, outside) = stateful_firewall();
    d.ctl_ok(&[
        "add-flow",
        "table=1,priority=25,in_port=1,udp,tp_dst=69,ct_state=+trk+new,actions=ct(commit,zone=7,alg=tftp),NORMAL",
    ]);
    let server = |port: u16| {
        format!(
            "import socket\n\
             s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
             s.bind(('{addr}', {port}))\n\
             print('ready', flush=True)\n\
             d, peer = s.recvfrom(512)\n\
             a = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
             a.bind(('{addr}', 0))\n\
             a.sendto(b'DATA', peer)\n",
            addr = outside.addr
        )
    };
    let client = |port: u16| {
        format!(
            "import socket\n\
             s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
             s.settimeout(2)\n\
             s.sendto(b'RRQ', ('{addr}', {port}))\n\
             try:\n    d, peer = s.recvfrom(512)\n    print('answered from another port' if peer[1] != {port} else 'same port')\n\
             except socket.timeout:\n    print('nothing')\n",
            addr = outside.addr
        )
    };
    for (port, expected) in [(69, "answered from another port"), (6969, "nothing")] {
        let heard = exchange(&d, (&outside, &server(port)), (&inside, &client(port)));
        assert_eq!(heard, expected, "port {port}");
    }
    let dump = d.appctl_ok(&["dpctl/dump-conntrack"]);
    assert!(
        dump.contains(",dport=69),") && dump.contains(",zone=7,helper=tftp"),
        "{dump}"
    );
    let dp = d.ctl_ok(&["dump-dp-flows"]);
    assert!(dp.contains("helper=tftp"), "{dp}");
}

/// `ct(commit,alg=ftp)`: the client's `PORT` command lets the server's data
/// connection in (related, and committed as such). The same exchange with a
/// control port that has no helper lets nothing in.
#[test]
fn an_ftp_helper_lets_the_active_data_connection_in() {
    let _g = serial();
    let (d, inside, outside) = stateful_firewall();
    for flow in [
        "table=1,priority=25,in_port=1,tcp,tp_dst=21,ct_state=+trk+new,actions=ct(commit,zone=7,alg=ftp),NORMAL",
        "table=1,priority=26,in_port=2,ip,ct_state=+trk+new+rel,actions=ct(commit,zone=7),NORMAL",
    ] {
        d.ctl_ok(&["add-flow", flow]);
    }
    let server = |port: u16| {
        format!(
            "import socket\n\
             s = socket.socket()\n\
             s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
             s.bind(('{a}', {port}))\n\
             s.listen()\n\
             print('ready', flush=True)\n\
             c, _ = s.accept()\n\
             n = [int(x) for x in c.recv(256).decode().split()[1].split(',')]\n\
             c.send(b'200 PORT command successful\\r\\n')\n\
             d = socket.socket()\n\
             d.settimeout(3)\n\
             d.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
             d.bind(('{a}', 20))\n\
             try:\n    d.connect(('.'.join(map(str, n[:4])), n[4] * 256 + n[5]))\n    d.send(b'DATA')\n\
             except OSError:\n    pass\n\
             c.recv(16)\n",
            a = outside.addr
        )
    };
    let client = |port: u16| {
        format!(
            "import socket\n\
             l = socket.socket()\n\
             l.bind(('{i}', 0))\n\
             l.listen()\n\
             l.settimeout(4)\n\
             p = l.getsockname()[1]\n\
             c = socket.create_connection(('{o}', {port}), timeout=3)\n\
             c.send(('PORT %s,%d,%d\\r\\n' % ('{i}'.replace('.', ','), p >> 8, p & 255)).encode())\n\
             c.recv(64)\n\
             try:\n    d, _ = l.accept()\n    print(d.recv(16).decode())\n\
             except socket.timeout:\n    print('nothing')\n\
             c.close()\n",
            i = inside.addr,
            o = outside.addr
        )
    };
    for (port, expected) in [(21, "DATA"), (2121, "nothing")] {
        let heard = exchange(&d, (&outside, &server(port)), (&inside, &client(port)));
        assert_eq!(heard, expected, "control port {port}");
    }
    let dump = d.appctl_ok(&["dpctl/dump-conntrack"]);
    assert!(
        dump.contains(",dport=21),") && dump.contains("helper=ftp"),
        "{dump}"
    );
    assert!(
        dump.contains(",sport=20,"),
        "the data connection, committed: {dump}"
    );
}

/// A zone flush cuts live connections: the outside host's datagrams of a
/// connection the inside host opened get in until the firewall's zone is flushed
/// (NXT_CT_FLUSH_ZONE, as ovn-controller sends it), and then they are new
/// connections from outside, dropped.
#[test]
fn a_zone_flush_cuts_live_connections() {
    use std::io::{BufRead, Write};
    let _g = serial();
    let (d, inside, outside) = stateful_firewall();
    // The outside host sends a datagram from port 7000 to the inside host's 6000
    // for each line it is given.
    let mut sender = outside.python_ready_with_input(
        &format!(
            "import socket, sys\n\
             s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
             s.bind(('{}', 7000))\n\
             print('ready', flush=True)\n\
             for line in sys.stdin:\n    s.sendto(b'back', ('{}', 6000))\n    print('sent', flush=True)\n",
            outside.addr, inside.addr
        ),
        60,
    );
    let mut sent = std::io::BufReader::new(sender.stdout.take().expect("stdout"));
    // The inside host opens the connection (port 6000 to 7000), then waits for a
    // datagram back.
    let listen = |open: bool| {
        inside.python_ready(&format!(
            "import socket\n\
             s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
             s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
             s.bind(('{}', 6000))\n\
             s.settimeout(2)\n\
             {}\n\
             print('ready', flush=True)\n\
             try:\n    s.recv(64)\n    print('got', flush=True)\n\
             except socket.timeout:\n    print('nothing', flush=True)\n",
            inside.addr,
            if open {
                format!("s.sendto(b'hello', ('{}', 7000))", outside.addr)
            } else {
                String::new()
            }
        ))
    };
    let mut send_back = |listener: &mut std::process::Child| -> String {
        writeln!(sender.stdin.as_mut().expect("stdin"), "send").unwrap();
        let mut line = String::new();
        sent.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "sent");
        let mut heard = String::new();
        std::io::BufReader::new(listener.stdout.take().expect("stdout"))
            .read_line(&mut heard)
            .unwrap();
        let _ = listener.wait();
        heard.trim().to_string()
    };
    // The inside host's datagram went out once the script said ready: the
    // connection is the tracker's before the answer is sent.
    let conns = || d.appctl_ok(&["dpctl/dump-conntrack", "zone=7"]);
    let mut first = listen(true);
    vsw_e2e::wait_until("the connection", std::time::Duration::from_secs(5), || {
        conns().contains("sport=6000,dport=7000")
    });
    assert_eq!(
        send_back(&mut first),
        "got",
        "an answer of a live connection"
    );
    let flush = ovs_ofctl(&d, &["-O", "OpenFlow13", "ct-flush-zone", "7"]);
    assert!(
        flush.status.success(),
        "{}",
        String::from_utf8_lossy(&flush.stderr)
    );
    assert_eq!(conns(), "");
    let mut second = listen(false);
    assert_eq!(
        send_back(&mut second),
        "nothing",
        "the flushed connection's datagram got in"
    );
    let _ = sender.kill();
    let _ = sender.wait();
}
