//! VXLAN with the Linux kernel's vxlan device as the peer: vswd (configured through
//! ovs-vsctl, in a namespace of its own) carries a workload on br-int and a VXLAN
//! port whose underlay is br-phy, whose LOCAL port holds this host's address, as
//! Open vSwitch users set it up; the other host is a namespace with a vxlan device.

use std::time::Duration;

use vsw_e2e::ovsdb::{OvsVswitchd, OvsdbServer};
use vsw_e2e::{must, serial, unique, wait_until, Host, Namespace, Vswd};

#[test]
fn vxlan_to_the_linux_kernel_both_ways() {
    let _g = serial();
    // This host (vswd's namespace) and the other (a kernel vxlan device).
    let (here, there) = (Namespace::new("vttn"), Namespace::new("vttn"));
    let (u0, u1) = (unique("vtu"), unique("vtu"));
    veth(&u0, &here, &u1, &there);
    there.ip(&["addr", "add", "198.18.5.1/24", "dev", &u1]);
    there.ip(&["link", "set", &u1, "up"]);
    kernel_vxlan(&there, &u1, "198.18.5.1", "198.18.5.2", "198.19.0.1/24");
    // The workload, its switch side in vswd's namespace, on the overlay's subnet.
    let w = Host::new(2);
    w.exec_ok(&["ip", "addr", "add", "198.19.0.2/24", "dev", "eth0"]);
    let (db, d) = vsw_host(&here, &u0, "198.18.5.2", "198.18.5.1", &w);
    assert_ne!(
        db.vsctl(&["get", "Interface", "vx0", "ofport"]),
        "-1",
        "{}",
        d.log()
    );
    // The first packets wait for the underlay neighbour (ARP), then go through.
    pings_both_ways(
        &w,
        &there,
        "198.19.0.1",
        "198.19.0.2",
        "a ping through the VXLAN tunnel",
    );
    // The other way, and a 1,400-byte packet that must not be fragmented.
    let big = df_ping(|a| w.exec(a), "1372", "198.19.0.1");
    assert!(
        big.status.success(),
        "{}",
        String::from_utf8_lossy(&big.stdout)
    );
    // The inner MTU the tunnel allows is reported (1,500 less VXLAN's 50 bytes).
    assert_eq!(db.vsctl(&["get", "Interface", "vx0", "mtu"]), "1450");
    // Larger unfragmentable packets are dropped and counted at the tunnel port (no
    // ICMP "fragmentation needed": see ARCHITECTURE.md).
    w.exec_ok(&["ip", "link", "set", "eth0", "mtu", "1500"]);
    let too_big = df_ping(|a| w.exec(a), "1472", "198.19.0.1");
    assert!(
        !too_big.status.success(),
        "a 1,500-byte packet crossed a 1,450 MTU"
    );
    wait_until(
        "the oversize packets counted",
        Duration::from_secs(5),
        || {
            d.ctl_ok(&["dump-ports"])
                .lines()
                .skip_while(|l| !l.contains("vx0"))
                .nth(2)
                .is_some_and(|tx| tx.contains("mtu=2"))
        },
    );
    w.exec_ok(&["ip", "link", "set", "eth0", "mtu", "1450"]);
    // What vswd learned and routes by, as ovs-appctl shows it.
    let appctl = |args: &[&str]| appctl(&d, args);
    // The workload's packets got their outer headers in their own datapath pass
    // (native tunnelling: one flow from the workload's port to the wire).
    // And the kernel's packets had theirs taken off in theirs (looked up again as
    // received on the VXLAN receive point).
    let dp_flows = appctl(&["dpctl/dump-flows"]);
    assert!(dp_flows.contains("tnl_push("), "{dp_flows}");
    assert!(dp_flows.contains("tnl_pop(vxlan_sys_4789)"), "{dp_flows}");
    assert!(appctl(&["tnl/neigh/show"]).contains("198.18.5.1"));
    assert!(appctl(&["ovs/route/show"]).contains("198.18.5.0/24 dev br-phy SRC 198.18.5.2"));
    let ports = appctl(&["tnl/ports/show"]);
    assert!(ports.contains("vx0 (4789)"), "{ports}");
    // The first packet met an unknown next hop: dropped and counted, as in OVS.
    assert!(ports.contains("neighbour_unknown="), "{ports}");
    // A VXLAN packet without its VNI flag: counted by its reason, never forwarded.
    let sent = there.exec(&[
        "python3",
        "-c",
        "import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); \
         s.sendto(bytes(8) + bytes.fromhex('ffffffffffff020000000009') + bytes(50), ('198.18.5.2', 4789))",
    ]);
    assert!(sent.status.success());
    wait_until(
        "the malformed packet to be counted",
        Duration::from_secs(5),
        || appctl(&["tnl/ports/show"]).contains("vxlan_no_vni=1"),
    );
    // TCP both ways, the kernel's offloads on. To the kernel's side: vsw
    // encapsulates the workload's super-frames whole and hands them, UDP-tunnelled,
    // to the underlay veth through the port's tunnel tap (`vswg<ifindex>q<n>`), so the
    // kernel carries them whole to the peer. From it: the kernel's vxlan device hands
    // the veth UDP-tunnelled super-frames (one outer header in front of 64 KiB of
    // inner TCP), which vsw decapsulates whole; smaller packets carry their inner
    // checksums unfinished, which vsw keeps so.
    for reverse in [false, true] {
        let received = iperf3_through(&there, &w, reverse);
        assert!(
            received > 1_000_000,
            "TCP through the tunnel (reverse: {reverse}): {received} bytes"
        );
    }
    // What went through the tunnel tap went in frames far larger than the underlay's
    // 1,500 bytes: super-frames, whole.
    let ifindex = here
        .exec(&["cat", &format!("/sys/class/net/{u0}/ifindex")])
        .stdout;
    // One tap per transmit queue: `vswg<ifindex>q<n>`.
    let prefix = format!("vswg{}q", String::from_utf8_lossy(&ifindex).trim());
    let links = here.exec(&["ls", "/sys/class/net"]).stdout;
    let tap = String::from_utf8_lossy(&links)
        .split_whitespace()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no {prefix}* tap: {}", d.log()))
        .to_string();
    let stat = |what: &str| -> u64 {
        let out = here.exec(&["cat", &format!("/sys/class/net/{tap}/statistics/{what}")]);
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .unwrap_or(0)
    };
    let (frames, bytes) = (stat("rx_packets"), stat("rx_bytes"));
    assert!(frames > 0, "nothing went through {tap}: {}", d.log());
    assert!(
        bytes / frames > 8_000,
        "{frames} frames of {bytes} bytes through {tap}: not super-frames"
    );
    // The 1,400-byte unfragmentable ping from the kernel's side too.
    let big_back = df_ping(|a| there.exec(a), "1372", "198.19.0.2");
    assert!(
        big_back.status.success(),
        "{}",
        String::from_utf8_lossy(&big_back.stdout)
    );
}

/// Bytes received in a 2-second iperf3 TCP test from workload `w` to a one-off server
/// on the kernel's side (`reverse`: from the server to the workload).
fn iperf3_through(there: &Namespace, w: &Host, reverse: bool) -> u64 {
    let mut server = std::process::Command::new("ip")
        .args([
            "netns",
            "exec",
            &there.0,
            "timeout",
            "20",
            "iperf3",
            "-s",
            "-1",
            "-B",
            "198.19.0.1",
        ])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_until("the iperf3 server", Duration::from_secs(5), || {
        there
            .exec(&["ss", "-ltn", "sport = :5201"])
            .stdout
            .windows(4)
            .any(|w| w == b"5201")
    });
    let mut args = vec![
        "timeout",
        "15",
        "iperf3",
        "-c",
        "198.19.0.1",
        "-t",
        "2",
        "-J",
        "--connect-timeout",
        "3000",
    ];
    if reverse {
        args.push("-R");
    }
    let out = w.exec(&args);
    // A one-off server ends with its test (or when `timeout` ends it): waited for,
    // never killed (killing `timeout` would leave iperf3 behind).
    let _ = server.wait();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    report["end"]["sum_received"]["bytes"].as_u64().unwrap_or(0)
}

/// A vsw host in namespace `here`: its own ovsdb-server and vswd (run directory of
/// its own), br-phy on `underlay` with `local_ip` on its LOCAL port, br-int with the
/// workload `w` and a VXLAN port (VNI 42) to `remote_ip`.
fn vsw_host(
    here: &Namespace,
    underlay: &str,
    local_ip: &str,
    remote_ip: &str,
    w: &Host,
) -> (OvsdbServer, Vswd) {
    vsw_host_of(("vxlan", &[]), here, underlay, local_ip, remote_ip, w)
}

/// [`vsw_host`] with a tunnel port of type `kind` (`vxlan` or `geneve`) and these
/// options besides (`options:…=…`).
fn vsw_host_of(
    (kind, options): (&str, &[&str]),
    here: &Namespace,
    underlay: &str,
    local_ip: &str,
    remote_ip: &str,
    w: &Host,
) -> (OvsdbServer, Vswd) {
    let db = OvsdbServer::start();
    must("ip", &["link", "set", &w.port, "netns", &here.0]);
    here.ip(&["link", "set", &w.port, "up"]);
    here.ip(&["link", "set", underlay, "up"]);
    w.exec_ok(&["ip", "link", "set", "eth0", "mtu", "1450"]);
    let d = Vswd::start_through_with_args(
        &["ip", "netns", "exec", &here.0],
        &["--ovsdb", &db.target(), "--bridge", "br-int"],
    );
    db.add_netdev_bridge("br-phy");
    db.add_port("br-phy", underlay, None);
    if local_ip.contains(':') {
        // No duplicate address detection: the address is usable at once.
        let cidr = format!("{local_ip}/64");
        here.ip(&["addr", "add", &cidr, "dev", "br-phy", "nodad"]);
    } else {
        here.ip(&["addr", "add", &format!("{local_ip}/24"), "dev", "br-phy"]);
    }
    here.ip(&["link", "set", "br-phy", "up"]);
    db.add_netdev_bridge("br-int");
    db.add_port("br-int", &w.port, None);
    let (port_type, remote) = (
        format!("type={kind}"),
        format!("options:remote_ip={remote_ip}"),
    );
    let mut add = vec![
        "add-port",
        "br-int",
        "vx0",
        "--",
        "set",
        "Interface",
        "vx0",
        &port_type,
        &remote,
        "options:key=42",
    ];
    add.extend_from_slice(options);
    db.vsctl(&add);
    (db, d)
}

#[test]
fn two_vsw_hosts_learn_across_the_tunnel_and_follow_a_neighbour_changing_mac() {
    let _g = serial();
    let (ns_a, ns_b) = (Namespace::new("vt2h"), Namespace::new("vt2h"));
    let (ua, ub) = (unique("vtu"), unique("vtu"));
    veth(&ua, &ns_a, &ub, &ns_b);
    // Workloads on the overlay's subnet (198.18.0.0/24), one behind each host.
    let (wa, wb) = (Host::new(1), Host::new(2));
    let (db_a, d_a) = vsw_host(&ns_a, &ua, "198.18.9.1", "198.18.9.2", &wa);
    let (_db_b, d_b) = vsw_host(&ns_b, &ub, "198.18.9.2", "198.18.9.1", &wb);
    wait_until(
        "a ping between the workloads across the tunnel",
        Duration::from_secs(15),
        || wa.ping(&wb, 1),
    );
    assert!(wb.ping(&wa, 3), "and back");
    // Each host learned the other's workload on its tunnel port (NORMAL).
    let learned = |d: &Vswd, mac: &str| {
        appctl(d, &["fdb/show", "br-int"])
            .lines()
            .any(|l| l.contains(mac) && l.trim_start().starts_with('2'))
    };
    assert!(
        learned(&d_a, &wb.mac),
        "{}",
        appctl(&d_a, &["fdb/show", "br-int"])
    );
    assert!(
        learned(&d_b, &wa.mac),
        "{}",
        appctl(&d_b, &["fdb/show", "br-int"])
    );
    // Host B's underlay address moves to a new MAC; once its stack speaks ARP from
    // it, host A's neighbour table follows and the tunnel carries on.
    let new_mac = "02:00:c6:12:09:99";
    ns_b.ip(&["link", "set", "br-phy", "address", new_mac]);
    ns_b.ip(&["neigh", "flush", "dev", "br-phy"]);
    let _ = ns_b.exec(&["ping", "-c", "1", "-W", "1", "198.18.9.1"]);
    wait_until(
        "host A to learn host B's new MAC",
        Duration::from_secs(10),
        || {
            appctl(&d_a, &["tnl/neigh/show"])
                .lines()
                .any(|l| l.contains("198.18.9.2") && l.contains(new_mac))
        },
    );
    assert!(wa.ping(&wb, 3), "the tunnel after the MAC change");
    assert!(wb.ping(&wa, 3), "and back");
    // Host A's port takes its VNI from the flows (`key=flow`): rules set it on the
    // way out and match it on the way in, as OVN's do. Host B still sends VNI 42.
    db_a.vsctl(&["set", "Interface", "vx0", "options:key=flow"]);
    d_a.ctl_ok(&["del-flows"]);
    d_a.ctl_ok(&[
        "add-flow",
        "in_port=1,actions=set_field:42->tun_id,output:2",
    ]);
    d_a.ctl_ok(&["add-flow", "in_port=2,tun_id=42,actions=output:1"]);
    wait_until(
        "a ping with the VNI the flows set",
        Duration::from_secs(10),
        || wa.ping(&wb, 1),
    );
    let flows = appctl(&d_a, &["dpctl/dump-flows", "br-int"]);
    assert!(flows.contains("set(tunnel(tun_id=0x2a))"), "{flows}");
    assert!(flows.contains("tun_id=0x2a"), "{flows}");
    // Another VNI matches no rule of host A's: nothing gets through.
    d_a.ctl_ok(&["del-flows"]);
    d_a.ctl_ok(&[
        "add-flow",
        "in_port=1,actions=set_field:43->tun_id,output:2",
    ]);
    d_a.ctl_ok(&["add-flow", "in_port=2,tun_id=42,actions=output:1"]);
    assert!(!wa.ping(&wb, 2), "VNI 43 reached host B's VNI 42 port");
    // Host A's port takes its remote from the flows too (`remote_ip=flow`), and the
    // rules, sent by the real ovs-ofctl (OpenFlow 1.3, Nicira's tun_src/tun_dst
    // fields), say where each packet goes and which tunnel packets come in.
    db_a.vsctl(&["set", "Interface", "vx0", "options:remote_ip=flow"]);
    let ofctl = |args: &[&str]| ofctl_br_int(&d_a, args);
    let inbound = |src: &str| {
        format!("in_port=2,tun_src={src},tun_dst=198.18.9.1,tun_id=42,actions=output:1")
    };
    ofctl(&["del-flows"]);
    ofctl(&[
        "add-flow",
        "in_port=1,actions=set_field:198.18.9.2->tun_dst,set_field:42->tun_id,output:2",
    ]);
    ofctl(&["add-flow", &inbound("198.18.9.2")]);
    wait_until(
        "a ping to the remote the flows set",
        Duration::from_secs(10),
        || wa.ping(&wb, 1),
    );
    let dumped = ofctl(&["dump-flows"]);
    assert!(
        dumped.contains("tun_src=198.18.9.2,tun_dst=198.18.9.1"),
        "{dumped}"
    );
    assert!(dumped.contains("set_field:198.18.9.2->tun_dst"), "{dumped}");
    let flows = appctl(&d_a, &["dpctl/dump-flows", "br-int"]);
    assert!(flows.contains("set(tunnel(dst=198.18.9.2))"), "{flows}");
    // Tunnel packets from another source match no rule: the replies stop.
    ofctl(&["del-flows", "in_port=2"]);
    ofctl(&["add-flow", &inbound("198.18.9.3")]);
    assert!(!wa.ping(&wb, 2), "a reply matched tun_src=198.18.9.3");
}

/// `ovs-ofctl -O OpenFlow13 ARGS[0] <vswd's br-int> ARGS[1..]`: its output, once it
/// succeeded.
fn ofctl_br_int(d: &Vswd, args: &[&str]) -> String {
    let mgmt = format!("unix:{}", d.dir.join("br-int.mgmt").display());
    let out = std::process::Command::new("ovs-ofctl")
        .args(["-t", "5", "-O", "OpenFlow13", args[0], &mgmt])
        .args(&args[1..])
        .output()
        .expect("ovs-ofctl (openvswitch-common)");
    assert!(
        out.status.success(),
        "ovs-ofctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Two hosts joined by a tunnel (VNI 42) over a veth: A runs vsw (`vsw_host_of`), B
/// Open vSwitch's ovs-vswitchd (Debian's 3.1, netdev datapath, userspace tunneling)
/// on a private ovsdb-server, configured the same way; workload `wa` on A, `wb` on
/// B, both with an MTU of 1,400. Everything ends when it is dropped.
/// (Fields end in the order the test's locals used to: the daemons first.)
struct OvsPair {
    ovs: OvsVswitchd,
    _db_b: OvsdbServer,
    d_a: Vswd,
    _db_a: OvsdbServer,
    wb: Host,
    wa: Host,
    ua: String,
    _ns_b: Namespace,
    ns_a: Namespace,
}

fn geneve_vsw_and_ovs() -> OvsPair {
    vsw_and_ovs(("geneve", &[]))
}

/// [`OvsPair`] with ports of this type and options (`options:…=…`) on both sides.
fn vsw_and_ovs((kind, options): (&str, &[&str])) -> OvsPair {
    let (ns_a, ns_b) = (Namespace::new("vtgv"), Namespace::new("vtgv"));
    let (ua, ub) = (unique("vtu"), unique("vtu"));
    veth(&ua, &ns_a, &ub, &ns_b);
    let (wa, wb) = (Host::new(1), Host::new(2));
    // Host A: vsw with the tunnel port.
    let (_db_a, d_a) = vsw_host_of((kind, options), &ns_a, &ua, "198.18.9.1", "198.18.9.2", &wa);
    // Host B: Open vSwitch, configured the same way.
    let db_b = OvsdbServer::start();
    let ovs = OvsVswitchd::start(&ns_b, &db_b);
    must("ip", &["link", "set", &wb.port, "netns", &ns_b.0]);
    ns_b.ip(&["link", "set", &wb.port, "up"]);
    ns_b.ip(&["link", "set", &ub, "up"]);
    wb.exec_ok(&["ip", "link", "set", "eth0", "mtu", "1400"]);
    wa.exec_ok(&["ip", "link", "set", "eth0", "mtu", "1400"]);
    db_b.add_netdev_bridge("br-phy");
    db_b.add_port("br-phy", &ub, None);
    ns_b.ip(&["addr", "add", "198.18.9.2/24", "dev", "br-phy"]);
    ns_b.ip(&["link", "set", "br-phy", "up"]);
    db_b.add_netdev_bridge("br-int");
    db_b.add_port("br-int", &wb.port, Some(1));
    let port_type = format!("type={kind}");
    let mut add = vec![
        "add-port",
        "br-int",
        "gv0",
        "--",
        "set",
        "Interface",
        "gv0",
        &port_type,
        "options:remote_ip=198.18.9.1",
        "options:key=42",
        "ofport_request=2",
    ];
    add.extend_from_slice(options);
    db_b.vsctl(&add);
    OvsPair {
        wa,
        wb,
        ovs,
        d_a,
        ns_a,
        ua,
        _db_a,
        _db_b: db_b,
        _ns_b: ns_b,
    }
}

/// Open vSwitch on the far side of a Geneve tunnel: pings cross both ways, and its
/// Geneve option reaches vsw's rules as `tun_metadata0`.
#[test]
fn geneve_to_open_vswitch_netdev_with_an_option_it_sends() {
    let _g = serial();
    // Every part bound (`..` would end the rest here and now).
    let OvsPair {
        wa,
        wb,
        ovs,
        d_a,
        ns_a,
        ua,
        _db_a,
        _db_b,
        _ns_b,
    } = geneve_vsw_and_ovs();
    wait_until(
        "a ping across Geneve between vsw and Open vSwitch",
        Duration::from_secs(20),
        || wa.ping(&wb, 1),
    );
    assert!(wb.ping(&wa, 3), "and from Open vSwitch's side");
    // Open vSwitch puts a Geneve option on what it sends (class 0xffff, type 0x01,
    // as tun_metadata0): vsw takes such packets (the option is not critical) and
    // forwards their inner frames; a critical one it does not know (type 0x80 and
    // up) it drops and counts, as RFC 8926 asks.
    ovs.ofctl(&[
        "add-tlv-map",
        "br-int",
        "{class=0xffff,type=0x01,len=4}->tun_metadata0",
    ]);
    ovs.ofctl(&[
        "add-flow",
        "br-int",
        "priority=100,in_port=1,actions=set_field:0x1234->tun_metadata0,output:2",
    ]);
    ovs.ofctl(&[
        "add-flow",
        "br-int",
        "priority=100,in_port=2,actions=output:1",
    ]);
    // What arrives at host A carries the option (tcpdump decodes Geneve).
    let mut capture = std::process::Command::new("ip")
        .args([
            "netns",
            "exec",
            &ns_a.0,
            "timeout",
            "15",
            "tcpdump",
            "-c",
            "1",
            "-nn",
            "-vv",
            "-i",
            &ua,
            "udp",
            "port",
            "6081",
            "and",
            "src",
            "198.18.9.2",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_until(
        "a Geneve packet from Open vSwitch captured",
        Duration::from_secs(15),
        || {
            let _ = wb.ping(&wa, 1);
            capture.try_wait().ok().flatten().is_some()
        },
    );
    let seen = capture.wait_with_output().unwrap();
    let seen = String::from_utf8_lossy(&seen.stdout);
    assert!(seen.contains("00001234"), "{seen}");
    assert!(wb.ping(&wa, 3), "with the option on Open vSwitch's packets");
    assert!(wa.ping(&wb, 3));
    let ports = appctl(&d_a, &["tnl/ports/show"]);
    assert!(ports.contains("vx0 (6081)"), "{ports}");
    assert!(!ports.contains("unknown_critical_option="), "{ports}");
    ovs.ofctl(&[
        "add-tlv-map",
        "br-int",
        "{class=0xffff,type=0x80,len=4}->tun_metadata1",
    ]);
    ovs.ofctl(&[
        "add-flow",
        "br-int",
        "priority=200,in_port=1,actions=set_field:0x99->tun_metadata1,output:2",
    ]);
    assert!(!wb.ping(&wa, 2), "an unknown critical option was ignored");
    wait_until(
        "the critical option counted",
        Duration::from_secs(5),
        || {
            let out = std::process::Command::new("ovs-appctl")
                .env("OVS_RUNDIR", &d_a.dir)
                .args(["--timeout=10", "-t", "ovs-vswitchd", "tnl/ports/show"])
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout).contains("unknown_critical_option=")
        },
    );
    // The option round-trips as tun_metadata0: vsw is given the same TLV map by
    // ovs-ofctl; each side's rules match the value the other side's rules set
    // (Open vSwitch 0x1234, vsw 0x5678), so a ping crosses only if both do.
    ovs.ofctl(&["del-flows", "br-int", "in_port=1"]);
    ovs.ofctl(&[
        "add-flow",
        "br-int",
        "priority=100,in_port=1,actions=set_field:0x1234->tun_metadata0,output:2",
    ]);
    ovs.ofctl(&["del-flows", "br-int", "in_port=2"]);
    ovs.ofctl(&[
        "add-flow",
        "br-int",
        "priority=100,in_port=2,tun_metadata0=0x5678,actions=output:1",
    ]);
    // (Below it, the bridge's priority=0 NORMAL would pass anything.)
    ovs.ofctl(&["add-flow", "br-int", "priority=50,in_port=2,actions=drop"]);
    let vsw = |args: &[&str]| ofctl_br_int(&d_a, args);
    vsw(&[
        "add-tlv-map",
        "{class=0xffff,type=0x01,len=4}->tun_metadata0",
    ]);
    let map = vsw(&["dump-tlv-map"]);
    assert!(
        map.contains("0xffff") && map.contains("tun_metadata0"),
        "{map}"
    );
    vsw(&["del-flows"]);
    vsw(&[
        "add-flow",
        "in_port=1,actions=set_field:0x5678->tun_metadata0,output:2",
    ]);
    vsw(&[
        "add-flow",
        "in_port=2,tun_metadata0=0x1234,actions=output:1",
    ]);
    wait_until(
        "a ping whose Geneve option each side's rules match",
        Duration::from_secs(10),
        || wa.ping(&wb, 1),
    );
    assert!(wb.ping(&wa, 3), "and from Open vSwitch's side");
    // Popped in the datapath with the option read there (every Geneve port's
    // bridge names the same one).
    let dp_flows = appctl(&d_a, &["dpctl/dump-flows"]);
    assert!(
        dp_flows.contains("tnl_pop(genev_sys_6081,tun_metadata0=0xffff/0x01)"),
        "{dp_flows}"
    );
    let dumped = vsw(&["dump-flows"]);
    assert!(dumped.contains("tun_metadata0=0x1234"), "{dumped}");
    assert!(
        dumped.contains("set_field:0x5678->tun_metadata0"),
        "{dumped}"
    );
    // Another value from vsw matches no rule of Open vSwitch's.
    vsw(&["del-flows", "in_port=1"]);
    vsw(&[
        "add-flow",
        "in_port=1,actions=set_field:0x5679->tun_metadata0,output:2",
    ]);
    assert!(!wa.ping(&wb, 2), "tun_metadata0=0x5679 matched 0x5678");
}

/// VXLAN-GPE between vsw and Open vSwitch (Debian's 3.1, netdev): Ethernet frames
/// between the two ports' default (legacy_l2) modes, with ARP and NORMAL; then IP
/// without an Ethernet header, Open vSwitch's port an L3 one (legacy_l3), vsw's
/// packet-type-aware (ptap: its rules see packet_type=(1,0x800), take the Ethernet
/// header off with decap() and put one on with encap(ethernet)), then vsw's an L3
/// one too (its rules see Ethernet frames of zero addresses); then NSH, both
/// ports packet-type-aware. Open vSwitch's L3 port takes only GPE packets that
/// say IPv4, so every ping that crosses it carried IP without Ethernet.
#[test]
fn vxlan_gpe_to_open_vswitch_carries_ethernet_bare_ip_and_nsh() {
    let _g = serial();
    let OvsPair {
        wa,
        wb,
        ovs,
        d_a,
        ns_a: _ns_a,
        ua: _ua,
        _db_a: db_a,
        _db_b: db_b,
        _ns_b,
    } = vsw_and_ovs(("vxlan", &["options:exts=gpe"]));
    wait_until(
        "a ping across VXLAN-GPE (Ethernet) between vsw and Open vSwitch",
        Duration::from_secs(20),
        || wa.ping(&wb, 1),
    );
    assert!(wb.ping(&wa, 3), "and from Open vSwitch's side");
    // IP without Ethernet: no ARP crosses, so each workload knows the other's
    // address (any MAC: the switches replace the header).
    wa.exec_ok(&[
        "ip", "neigh", "replace", &wb.addr, "lladdr", &wb.mac, "dev", "eth0",
    ]);
    wb.exec_ok(&[
        "ip", "neigh", "replace", &wa.addr, "lladdr", &wa.mac, "dev", "eth0",
    ]);
    db_b.vsctl(&["set", "Interface", "gv0", "options:packet_type=legacy_l3"]);
    ovs.ofctl(&["del-flows", "br-int"]);
    let to_b = format!(
        "in_port=2,ip,actions=mod_dl_src:{},mod_dl_dst:{},output:1",
        wa.mac, wb.mac
    );
    ovs.ofctl(&["add-flow", "br-int", "in_port=1,ip,actions=output:2"]);
    ovs.ofctl(&["add-flow", "br-int", &to_b]);
    db_a.vsctl(&["set", "Interface", "vx0", "options:packet_type=ptap"]);
    let vsw = |args: &[&str]| ofctl_br_int(&d_a, args);
    vsw(&["del-flows"]);
    vsw(&["add-flow", "in_port=1,ip,actions=decap(),output:2"]);
    let to_a = format!(
        "in_port=2,packet_type=(1,0x800),actions=encap(ethernet),mod_dl_src:{},mod_dl_dst:{},output:1",
        wb.mac, wa.mac
    );
    vsw(&["add-flow", &to_a]);
    // (Were the frames Ethernet, this rule without packet_type would take them.)
    vsw(&["add-flow", "priority=1,in_port=2,actions=output:1"]);
    wait_until(
        "a ping as IP without Ethernet, vsw's port packet-type-aware",
        Duration::from_secs(20),
        || wa.ping(&wb, 1),
    );
    assert!(wb.ping(&wa, 3), "and from Open vSwitch's side");
    let dumped = vsw(&["dump-flows"]);
    let counted = |rule: &str| {
        dumped
            .lines()
            .find(|l| l.contains(rule))
            .and_then(|l| l.split("n_packets=").nth(1))
            .and_then(|n| n.split(',').next())
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0)
    };
    assert!(counted("packet_type=(1,0x800)") >= 4, "{dumped}");
    assert_eq!(counted("priority=1,in_port=2"), 0, "{dumped}");
    // vsw's port an L3 one: its rules see Ethernet frames of zero addresses, and
    // its Ethernet frames leave without their header.
    db_a.vsctl(&["set", "Interface", "vx0", "options:packet_type=legacy_l3"]);
    vsw(&["del-flows"]);
    vsw(&["add-flow", "in_port=1,ip,actions=output:2"]);
    let to_a = format!(
        "in_port=2,ip,dl_src=00:00:00:00:00:00,actions=mod_dl_src:{},mod_dl_dst:{},output:1",
        wb.mac, wa.mac
    );
    vsw(&["add-flow", &to_a]);
    wait_until(
        "a ping as IP without Ethernet, vsw's port an L3 one",
        Duration::from_secs(20),
        || wa.ping(&wb, 1),
    );
    assert!(wb.ping(&wa, 3), "and from Open vSwitch's side");
    // TCP from vsw's side with the workload's offloads on: its super-frames lose
    // their Ethernet header in the push, so vsw cuts them into packets first
    // (Open vSwitch's userspace side takes no super-frames: its workload's are off).
    wb.set_offloads(false);
    let bytes = wa
        .iperf_to(&wb, 2)
        .unwrap_or_else(|e| panic!("TCP over GPE without Ethernet: {e}"));
    // A stalled connection (super-frames dropped) moves next to nothing.
    assert!(bytes > 1_000_000, "{bytes} bytes");
    // NSH over GPE, both ports packet-type-aware: each side puts its service
    // path on the Ethernet frame and takes the other's off; an encap(nsh) goes
    // out of the GPE port as NSH (no encap(ethernet) between).
    db_b.vsctl(&["set", "Interface", "gv0", "options:packet_type=ptap"]);
    db_a.vsctl(&["set", "Interface", "vx0", "options:packet_type=ptap"]);
    let of13 = |args: &[&str]| {
        let mut all = vec!["-O", "OpenFlow13"];
        all.extend_from_slice(args);
        ovs.ofctl(&all)
    };
    of13(&["del-flows", "br-int"]);
    of13(&[
        "add-flow",
        "br-int",
        "in_port=1,actions=encap(nsh(md_type=1)),set_field:0x1234->nsh_spi,output:2",
    ]);
    of13(&[
        "add-flow",
        "br-int",
        "in_port=2,packet_type=(1,0x894f),nsh_spi=0x4321,actions=decap(),output:1",
    ]);
    vsw(&["del-flows"]);
    vsw(&[
        "add-flow",
        "in_port=1,actions=encap(nsh(md_type=1)),set_field:0x4321->nsh_spi,output:2",
    ]);
    vsw(&[
        "add-flow",
        "in_port=2,packet_type=(1,0x894f),nsh_spi=0x1234,actions=decap(),output:1",
    ]);
    wait_until(
        "a ping as Ethernet in NSH over VXLAN-GPE",
        Duration::from_secs(20),
        || wa.ping(&wb, 1),
    );
    assert!(wb.ping(&wa, 3), "and from Open vSwitch's side");
    let dumped = vsw(&["dump-flows"]);
    assert!(dumped.contains("nsh_spi=0x1234"), "{dumped}");
    let ports = appctl(&d_a, &["tnl/ports/show"]);
    assert!(
        ports.contains("vx0 (4789) vxlan_sys_4789, gpe, ptap"),
        "{ports}"
    );
    assert!(!ports.contains("gpe_not_carried="), "{ports}");
}

/// TCP across Geneve between vsw and Open vSwitch, both ways, with the workloads'
/// offloads off (what a userspace Open vSwitch peer needs: it reads its underlay
/// through a packet socket, and takes neither super-frames nor unfinished
/// checksums). vsw used to merge the sender's segments into super-frames for the
/// tunnel, which such a peer cannot take: TCP from the vsw host stalled.
#[test]
fn geneve_tcp_to_open_vswitch_both_ways() {
    let _g = serial();
    let p = geneve_vsw_and_ovs();
    wait_until(
        "a ping across Geneve between vsw and Open vSwitch",
        Duration::from_secs(20),
        || p.wa.ping(&p.wb, 1),
    );
    p.wa.set_offloads(false);
    p.wb.set_offloads(false);
    for (way, from, to) in [
        ("vsw to Open vSwitch", &p.wa, &p.wb),
        ("Open vSwitch to vsw", &p.wb, &p.wa),
    ] {
        let bytes = from
            .iperf_to(to, 2)
            .unwrap_or_else(|e| panic!("{way}: {e}\n{}", appctl(&p.d_a, &["tnl/ports/show"])));
        // 10 MB in 2 s is 40 Mbit/s: far below what either side carries, far above
        // what a stalled connection's retransmits move.
        assert!(
            bytes > 10_000_000,
            "{way}: {bytes} bytes\n{}",
            appctl(&p.d_a, &["tnl/ports/show"])
        );
    }
    // Nothing merged for the tunnel: what the workload sent crossed as it was.
    let vx = p.d_a.port("vx0");
    assert_eq!(vx.stats.tx_gro_segments, 0, "{vx:?}");
}

#[test]
fn vxlan_through_a_router_by_the_kernel_route() {
    let _g = serial();
    // Host A (vsw) on 198.18.9.0/24, host B (Linux's vxlan device) on
    // 198.18.10.0/24, a router between them; host A's route to host B's subnet is
    // the kernel's (`ip route add … via`), which vsw reads.
    let (here, router, there) = (
        Namespace::new("vtrt"),
        Namespace::new("vtrt"),
        Namespace::new("vtrt"),
    );
    let (ua, ra, rb, ub) = (unique("vtu"), unique("vtr"), unique("vtr"), unique("vtu"));
    veth(&ua, &here, &ra, &router);
    veth(&rb, &router, &ub, &there);
    router.ip(&["addr", "add", "198.18.9.254/24", "dev", &ra]);
    router.ip(&["addr", "add", "198.18.10.254/24", "dev", &rb]);
    router.ip(&["link", "set", &ra, "up"]);
    router.ip(&["link", "set", &rb, "up"]);
    let fwd = router.exec(&["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"]);
    assert!(fwd.status.success());
    there.ip(&["addr", "add", "198.18.10.2/24", "dev", &ub]);
    there.ip(&["link", "set", &ub, "up"]);
    there.ip(&["route", "add", "198.18.9.0/24", "via", "198.18.10.254"]);
    kernel_vxlan(&there, &ub, "198.18.10.2", "198.18.9.1", "198.18.0.2/24");
    let w = Host::new(1);
    let (_db, d) = vsw_host(&here, &ua, "198.18.9.1", "198.18.10.2", &w);
    here.ip(&[
        "route",
        "add",
        "198.18.10.0/24",
        "via",
        "198.18.9.254",
        "dev",
        "br-phy",
    ]);
    pings_both_ways(
        &w,
        &there,
        "198.18.0.2",
        "198.18.0.1",
        "a ping through the tunnel, by way of the router",
    );
    let appctl = |args: &[&str]| appctl(&d, args);
    // The route is the kernel's, with its gateway; the neighbour vsw learned and
    // sends to is the router.
    let routes = appctl(&["ovs/route/show"]);
    assert!(routes.contains("198.18.10.0/24"), "{routes}");
    assert!(routes.contains("198.18.9.254"), "{routes}");
    let neigh = appctl(&["tnl/neigh/show"]);
    assert!(neigh.contains("198.18.9.254"), "{neigh}");
}

#[test]
fn vxlan_over_an_ipv6_underlay_to_the_linux_kernel() {
    let _g = serial();
    let (here, there) = (Namespace::new("vtv6"), Namespace::new("vtv6"));
    let (u0, u1) = (unique("vtu"), unique("vtu"));
    veth(&u0, &here, &u1, &there);
    there.ip(&["addr", "add", "2001:db8:9::2/64", "dev", &u1, "nodad"]);
    there.ip(&["link", "set", &u1, "up"]);
    kernel_vxlan(
        &there,
        &u1,
        "2001:db8:9::2",
        "2001:db8:9::1",
        "198.18.0.2/24",
    );
    let w = Host::new(1);
    let (_db, d) = vsw_host(&here, &u0, "2001:db8:9::1", "2001:db8:9::2", &w);
    // IPv6's 70 bytes of outer headers leave 1,430 for the inner packet.
    w.exec_ok(&["ip", "link", "set", "eth0", "mtu", "1400"]);
    // vsw asks for host B's MAC with a neighbour solicitation (nothing else would
    // tell it: host B sends nothing first).
    pings_both_ways(
        &w,
        &there,
        "198.18.0.2",
        "198.18.0.1",
        "a ping through the tunnel over IPv6",
    );
    let neigh = appctl(&d, &["tnl/neigh/show"]);
    assert!(neigh.contains("2001:db8:9::2"), "{neigh}");
    // Natively both ways over IPv6 too: pushed, and popped onto the remote end's
    // own receive point.
    let dp_flows = appctl(&d, &["dpctl/dump-flows"]);
    assert!(dp_flows.contains("tnl_push("), "{dp_flows}");
    assert!(
        dp_flows.contains("tnl_pop(vxlan_sys_4789,ipv6_remote=0)"),
        "{dp_flows}"
    );
}

/// A veth pair: `a` in namespace `a_ns`, `b` in `b_ns`.
fn veth(a: &str, a_ns: &Namespace, b: &str, b_ns: &Namespace) {
    must(
        "ip",
        &[
            "link", "add", a, "netns", &a_ns.0, "type", "veth", "peer", "name", b, "netns", &b_ns.0,
        ],
    );
}

/// Linux's vxlan device `vx0` (VNI 42, port 4789) in `ns` over `dev`, from `local`
/// to `remote`, holding the overlay address `overlay` (with its prefix).
fn kernel_vxlan(ns: &Namespace, dev: &str, local: &str, remote: &str, overlay: &str) {
    ns.ip(&[
        "link", "add", "vx0", "type", "vxlan", "id", "42", "remote", remote, "local", local,
        "dstport", "4789", "dev", dev,
    ]);
    ns.ip(&["addr", "add", overlay, "dev", "vx0"]);
    ns.ip(&["link", "set", "vx0", "up"]);
}

/// `ovs-appctl` to vswd `d` (its run directory), what it printed.
fn appctl(d: &Vswd, args: &[&str]) -> String {
    let out = std::process::Command::new("ovs-appctl")
        .env("OVS_RUNDIR", &d.dir)
        .args(["--timeout=10", "-t", "ovs-vswitchd"])
        .args(args)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Two unfragmentable pings with `size` bytes of payload to `to`, run by `exec`.
fn df_ping(
    exec: impl Fn(&[&str]) -> std::process::Output,
    size: &str,
    to: &str,
) -> std::process::Output {
    exec(&["ping", "-c", "2", "-M", "do", "-s", size, "-W", "1", to])
}

/// Waits (15 s at most: the first packets wait for the underlay neighbour) for a
/// ping from workload `w` to `to`, then pings `back_to` three times from `there`.
fn pings_both_ways(w: &Host, there: &Namespace, to: &str, back_to: &str, what: &str) {
    wait_until(what, Duration::from_secs(15), || {
        w.exec(&["ping", "-c", "1", "-W", "1", to]).status.success()
    });
    let back = there.exec(&["ping", "-c", "3", "-i", "0.2", "-W", "1", back_to]);
    assert!(
        back.status.success(),
        "{}",
        String::from_utf8_lossy(&back.stdout)
    );
}

/// ARP frames from `ns`'s `dev`: `count` requests for `target`, each from sender
/// `base + n` for a random `n` below `span` (one MAC for all: the bridge learns one
/// host, the neighbour table many addresses), at most `rate` a second (evenly
/// paced: the switch's receive ring is no test subject here).
fn arp_flood(
    ns: &Namespace,
    dev: &str,
    target: &str,
    base: &str,
    span: u32,
    count: u32,
    rate: u32,
) {
    let script = format!(
        "import ipaddress, random, socket, struct, time\n\
         s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)\n\
         s.bind(('{dev}', 0))\n\
         tpa = ipaddress.IPv4Address('{target}').packed\n\
         base = int(ipaddress.IPv4Address('{base}'))\n\
         t0 = time.monotonic()\n\
         for i in range({count}):\n\
         \x20   sha = bytes.fromhex('020000007777')\n\
         \x20   spa = struct.pack('!I', base + random.randrange({span}))\n\
         \x20   arp = struct.pack('!HHBBH', 1, 0x0800, 6, 4, 1) + sha + spa + bytes(6) + tpa\n\
         \x20   s.send(b'\\xff' * 6 + sha + b'\\x08\\x06' + arp)\n\
         \x20   if i % 100 == 0:\n\
         \x20       ahead = t0 + i / {rate} - time.monotonic()\n\
         \x20       if ahead > 0: time.sleep(ahead)\n"
    );
    let out = ns.exec(&["python3", "-c", &script]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The MAC `tnl/neigh/show` gives for `ip` on `bridge`.
fn neighbour(d: &Vswd, ip: &str, bridge: &str) -> Option<String> {
    appctl(d, &["tnl/neigh/show"]).lines().find_map(|l| {
        let cols: Vec<&str> = l.split_whitespace().collect();
        (cols.len() == 3 && cols[0] == ip && cols[2] == bridge).then(|| cols[1].to_string())
    })
}

/// A tenant cannot poison the tunnel's neighbour table: its gratuitous ARP for the
/// remote tunnel end (from br-int) teaches nothing, and tunnel traffic goes on. And
/// a flood of ARP from the underlay's many senders leaves the table bounded, the
/// tunnel's own next hop kept, and the control plane answering at once.
#[test]
fn tunnel_neighbours_are_learned_only_from_the_underlay_and_stay_bounded() {
    let _g = serial();
    let (here, there) = (Namespace::new("vtnb"), Namespace::new("vtnb"));
    let (u0, u1) = (unique("vtu"), unique("vtu"));
    veth(&u0, &here, &u1, &there);
    there.ip(&["addr", "add", "198.18.5.1/24", "dev", &u1]);
    there.ip(&["link", "set", &u1, "up"]);
    kernel_vxlan(&there, &u1, "198.18.5.1", "198.18.5.2", "198.19.0.1/24");
    let w = Host::new(2);
    w.exec_ok(&["ip", "addr", "add", "198.19.0.2/24", "dev", "eth0"]);
    let (_db, d) = vsw_host(&here, &u0, "198.18.5.2", "198.18.5.1", &w);
    pings_both_ways(
        &w,
        &there,
        "198.19.0.1",
        "198.19.0.2",
        "a ping through the tunnel",
    );
    let vtep_mac = neighbour(&d, "198.18.5.1", "br-phy").expect("the remote end learned");
    // The tenant claims the remote tunnel end's address, gratuitously (a reply and
    // a request to itself), three times each.
    let liar = "020000006666";
    for op in ["0002", "0001"] {
        let frame =
            format!("ffffffffffff{liar}0806000108000604{op}{liar}c6120501000000000000c6120501");
        w.send_raw(&frame, 3);
    }
    // Then the underlay's real host asks for our address from a marker address:
    // once that is learned, the tenant's frames (sent before) have been looked at.
    arp_flood(&there, &u1, "198.18.5.2", "198.18.5.77", 1, 1, 1000);
    wait_until("the marker neighbour", Duration::from_secs(10), || {
        neighbour(&d, "198.18.5.77", "br-phy").is_some()
    });
    assert_eq!(
        neighbour(&d, "198.18.5.1", "br-phy"),
        Some(vtep_mac.clone()),
        "{}",
        appctl(&d, &["tnl/neigh/show"])
    );
    assert!(
        !appctl(&d, &["tnl/neigh/show"]).contains("02:00:00:00:66:66"),
        "the tenant taught the table"
    );
    pings_both_ways(
        &w,
        &there,
        "198.19.0.1",
        "198.19.0.2",
        "the tunnel after the lie",
    );

    // A /17 on br-phy: 32,766 possible neighbours asking for our address there.
    here.ip(&["addr", "add", "198.18.128.1/17", "dev", "br-phy"]);
    wait_until("the new route", Duration::from_secs(5), || {
        appctl(&d, &["ovs/route/show"]).contains("198.18.128.0/17")
    });
    arp_flood(
        &there,
        &u1,
        "198.18.128.1",
        "198.18.128.2",
        32_000,
        100_000,
        15_000,
    );
    arp_flood(&there, &u1, "198.18.128.1", "198.18.255.250", 1, 1, 1000);
    wait_until("the flood absorbed", Duration::from_secs(10), || {
        neighbour(&d, "198.18.255.250", "br-phy").is_some()
    });
    let rows = appctl(&d, &["tnl/neigh/show"])
        .lines()
        .filter(|l| l.contains("br-phy"))
        .count();
    eprintln!("{rows} neighbours on br-phy after the flood");
    assert!(
        (10_000..=vsw_tunnel::neigh::MAX_NEIGHBOURS).contains(&rows),
        "{rows} neighbours after the flood"
    );
    assert_eq!(
        neighbour(&d, "198.18.5.1", "br-phy"),
        Some(vtep_mac),
        "the tunnel's next hop was evicted"
    );
    let started = std::time::Instant::now();
    d.ctl_ok(&["show"]);
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    pings_both_ways(
        &w,
        &there,
        "198.19.0.1",
        "198.19.0.2",
        "the tunnel after the flood",
    );
}

/// 200,000 kernel routes: read over rtnetlink as they come (the main loop reads
/// none), looked up in a prefix trie; the tunnel carries on and the control plane
/// answers at once.
#[test]
fn two_hundred_thousand_kernel_routes_slow_nothing() {
    let _g = serial();
    let (here, there) = (Namespace::new("vtrt2"), Namespace::new("vtrt2"));
    let (u0, u1) = (unique("vtu"), unique("vtu"));
    veth(&u0, &here, &u1, &there);
    there.ip(&["addr", "add", "198.18.5.1/24", "dev", &u1]);
    there.ip(&["link", "set", &u1, "up"]);
    kernel_vxlan(&there, &u1, "198.18.5.1", "198.18.5.2", "198.19.0.1/24");
    let w = Host::new(2);
    w.exec_ok(&["ip", "addr", "add", "198.19.0.2/24", "dev", "eth0"]);
    let (_db, d) = vsw_host(&here, &u0, "198.18.5.2", "198.18.5.1", &w);
    pings_both_ways(
        &w,
        &there,
        "198.19.0.1",
        "198.19.0.2",
        "a ping through the tunnel",
    );
    // 200,000 host routes through the remote end, in one batch.
    let batch: String = (0..200_000u32)
        .map(|i| {
            let a = 0x0a00_0000 + i;
            format!(
                "route add {}.{}.{}.{}/32 via 198.18.5.1 dev br-phy\n",
                a >> 24,
                (a >> 16) & 0xff,
                (a >> 8) & 0xff,
                a & 0xff
            )
        })
        .collect();
    let file = d.dir.join("routes.batch");
    std::fs::write(&file, batch).unwrap();
    here.ip(&["-batch", file.to_str().unwrap()]);
    // The last one is there (read by the watcher or, at the latest, by the lookup).
    wait_until("the routes read", Duration::from_secs(60), || {
        appctl(&d, &["ovs/route/lookup", "10.3.13.63"]).contains("gateway 198.18.5.1")
    });
    let started = std::time::Instant::now();
    d.ctl_ok(&["show"]);
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    pings_both_ways(
        &w,
        &there,
        "198.19.0.1",
        "198.19.0.2",
        "the tunnel beside 200,000 routes",
    );
    // Gone again: the table follows.
    here.ip(&[
        "route",
        "flush",
        "proto",
        "boot",
        "dev",
        "br-phy",
        "via",
        "198.18.5.1",
    ]);
    wait_until("the routes gone", Duration::from_secs(60), || {
        !appctl(&d, &["ovs/route/lookup", "10.3.13.63"]).contains("gateway")
    });
}
