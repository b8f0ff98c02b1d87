//! Flow offload through vswd: with the `dummy` provider, which flows the manager puts
//! into a full provider, what dump-flows and offload-show say, and bad offload
//! settings refused with nothing changed; with the `ebpf` provider, frames forwarded
//! by the kernel between veths without the PMD seeing them, exact counters, and a swap
//! under traffic that loses nothing.

use std::time::Duration;

use vsw_e2e::{quiet_hosts, serial, udp_frame, wait_until, Host, Vswd};

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
            .is_some_and(|p| p.stats.used == 2 && p.stats.oor && p.stats.passes >= 2)
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
    // The rule with two outputs has no traffic, so no datapath flow to offload.
    assert!(status.contains(&"no-datapath-flow"), "{status:?}");
    // What the datapath flows say: two offloaded by the dummy provider, two waiting.
    let dp = d.ctl_ok(&["dump-dp-flows", "--more"]);
    assert_eq!(dp.matches("offloaded:yes, dp:dummy").count(), 2, "{dp}");
    assert_eq!(
        dp.matches("offloaded:no (pending:OOR), dp:ovs").count(),
        2,
        "{dp}"
    );
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
    // A rule above an offloaded one: its datapath flow now drops, and the rule
    // below serves none (the fast path holds what the new rule says, or nothing).
    let first = offloaded[0].matching.clone();
    d.ctl_ok(&["add-flow", &format!("priority=20,{first},actions=drop")]);
    let below = d
        .flows()
        .into_iter()
        .find(|f| f.priority == 10 && f.matching == first)
        .unwrap();
    assert_eq!(below.offload_status, "no-datapath-flow", "{below:?}");
    d.ctl_ok(&["del-flows", "--strict", &format!("priority=20,{first}")]);
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
                .is_some_and(|p| p.stats.used == 2 && !p.stats.oor)
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

fn flow_packets(d: &Vswd, sport: u16) -> u64 {
    d.flows()
        .iter()
        .find(|f| f.matching.contains(&format!("tp_src={sport}")))
        .map(|f| f.n_packets)
        .unwrap_or_else(|| panic!("no flow for {sport}"))
}

fn udp_flow(a: &Host, b: &Host, sport: u16) -> String {
    format!(
        "priority=10,in_port={},udp,nw_src={},nw_dst={},tp_src={sport},tp_dst=5001,actions=output:{}",
        a.port, a.addr, b.addr, b.port
    )
}

#[test]
fn an_ebpf_offloaded_flow_bypasses_the_pmd_and_keeps_counting() {
    let _g = serial();
    let d = Vswd::start();
    let (a, b) = quiet_hosts();
    d.ctl_ok(&["add-port", &a.port, "offload=ebpf", "offload-capacity=4"]);
    d.ctl_ok(&["add-port", &b.port]);
    d.ctl_ok(&["add-flow", &udp_flow(&a, &b, 4000)]);
    let frame = udp_frame(&a, &b, 4000);
    // In userspace first.
    a.send_raw(&frame, 100);
    wait_until("100 frames through the PMD", Duration::from_secs(5), || {
        flow_packets(&d, 4000) == 100
    });
    d.ctl_ok(&["set", "hw-offload=true", "offload-interval=100"]);
    // On a port with a provider, each connection gets a datapath flow of its own:
    // the flow is made again by the next packets, and offloaded.
    a.send_raw(&frame, 10);
    let offloaded = || d.flows_of("offloaded").len() == 1;
    for _ in 0..100 {
        if offloaded() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        offloaded(),
        "not offloaded: {}\n{}\n{}",
        d.ctl_ok(&["offload-show"]),
        d.ctl_ok(&["dump-flows"]),
        d.log()
    );
    let pmd_before: u64 = d.pmd_stats().iter().map(|p| p.packets).sum();
    let rx_a = d.port(&a.port).stats.rx_packets;
    let counter = udp_counter(&b);
    a.send_raw(&frame, 1000);
    let out = counter.wait_with_output().expect("counter");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "4000 1000",
        "each frame at b once"
    );
    assert_eq!(
        d.port(&a.port).stats.rx_packets,
        rx_a,
        "vsw's socket saw none of them"
    );
    let pmd_after: u64 = d.pmd_stats().iter().map(|p| p.packets).sum();
    assert_eq!(pmd_after, pmd_before, "the PMD saw none of them");
    assert_eq!(
        flow_packets(&d, 4000),
        1110,
        "userspace and kernel counted together"
    );
    // Off again: the kernel path goes and the PMD forwards.
    d.ctl_ok(&["set", "hw-offload=false"]);
    a.send_raw(&frame, 10);
    wait_until("10 more through the PMD", Duration::from_secs(5), || {
        d.port(&a.port).stats.rx_packets >= rx_a + 10
    });
}

/// Counts UDP datagrams to port 5001 in `h`'s namespace by source port until none
/// came for a second; prints "sport count" lines.
fn udp_counter(h: &Host) -> std::process::Child {
    let script = format!(
        "import socket, collections\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
         s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 24)\n\
         s.bind(('{}', 5001))\nprint('ready', flush=True)\nc = collections.Counter()\ns.settimeout(30)\n\
         d, a = s.recvfrom(2048)\nc[a[1]] += 1\ns.settimeout(1.5)\n\
         while True:\n    try:\n        d, a = s.recvfrom(2048)\n    except socket.timeout:\n        break\n    c[a[1]] += 1\n\
         for k, v in sorted(c.items()):\n    print(k, v, flush=True)\n",
        h.addr
    );
    h.python_ready(&script)
}

#[test]
fn a_swap_under_traffic_loses_no_packet_of_either_flow() {
    let _g = serial();
    let d = Vswd::start();
    let (a, b) = quiet_hosts();
    d.ctl_ok(&["add-port", &a.port, "offload=ebpf", "offload-capacity=1"]);
    d.ctl_ok(&["add-port", &b.port]);
    d.ctl_ok(&["add-flow", &udp_flow(&a, &b, 4000)]);
    d.ctl_ok(&[
        "set",
        "hw-offload=true",
        "offload-rebalance=true",
        "offload-interval=200",
    ]);
    // A datapath flow is offloaded once a packet made it.
    const PRIMING: u64 = 5;
    a.send_raw(&udp_frame(&a, &b, 4000), PRIMING as u32);
    wait_until("the slow flow offloaded", Duration::from_secs(10), || {
        d.flows_of("offloaded").len() == 1
    });
    d.ctl_ok(&["add-flow", &udp_flow(&a, &b, 4001)]);
    let counter = udp_counter(&b);
    // 4001 ten times as fast as 4000, for about four seconds.
    let (slow, fast) = (udp_frame(&a, &b, 4000), udp_frame(&a, &b, 4001));
    let script = format!(
        "import socket, time\ns = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)\ns.bind(('eth0', 0))\n\
         slow = bytes.fromhex('{slow}')\nfast = bytes.fromhex('{fast}')\n\
         for i in range(20000):\n    s.send(fast)\n    if i % 10 == 0:\n        s.send(slow)\n    \
         if i % 20 == 0:\n        time.sleep(0.004)\n"
    );
    a.exec_ok(&["python3", "-c", &script]);
    let out = counter.wait_with_output().expect("counter");
    let counts: Vec<(u16, u64)> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (p, n) = l.split_once(' ')?;
            Some((p.parse().ok()?, n.parse().ok()?))
        })
        .collect();
    assert_eq!(
        counts,
        vec![(4000, 2000), (4001, 20000)],
        "every frame of both flows arrived once"
    );
    let show = d.offload_show();
    assert!(show[0].stats.swaps >= 1, "{show:?}");
    let offloaded = d.flows_of("offloaded");
    assert!(
        offloaded.len() == 1 && offloaded[0].matching.contains("tp_src=4001"),
        "the fast flow holds the place: {offloaded:?}"
    );
    assert_eq!(
        flow_packets(&d, 4000),
        2000 + PRIMING,
        "exact across the move"
    );
    assert_eq!(flow_packets(&d, 4001), 20000);
}

#[test]
fn tcp_through_the_learning_switch_is_offloaded_within_a_pass() {
    let _g = serial();
    let d = Vswd::start();
    let (a, b) = (Host::new(1), Host::new(2));
    for h in [&a, &b] {
        d.ctl_ok(&["add-port", &h.port, "offload=ebpf"]);
    }
    // No rule written: the learning switch's NORMAL, with the veths' default offloads
    // (super-frames, partial checksums).
    d.ctl_ok(&["set", "hw-offload=true", "offload-interval=100"]);
    b.exec_ok(&["iperf3", "-s", "-1", "-D", "-B", &b.addr]);
    wait_until("iperf3 to listen", Duration::from_secs(5), || {
        String::from_utf8_lossy(&b.exec(&["ss", "-ltn"]).stdout).contains(":5201")
    });
    let rx_a = d.port(&a.port).stats.rx_packets;
    let out = a.exec(&[
        "timeout", "30", "iperf3", "-c", &b.addr, "-t", "3", "--cport", "40000", "-J",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("iperf3 JSON");
    let bytes = v["end"]["sum_received"]["bytes"].as_u64().unwrap_or(0);
    assert!(
        bytes > 10_000_000,
        "TCP over the kernel path: {bytes} bytes, {v}"
    );
    // The data connection's datapath flows, both ways, went to the kernel within a
    // pass of their first packets: vsw's socket saw the start of the connection, the
    // control connection and address resolution.
    let text = d.ctl_ok(&["--format", "json", "dump-dp-flows", "type=offloaded"]);
    let offloaded: Vec<vsw_protocol::DpFlowInfo> = serde_json::from_str(&text).unwrap();
    let data: Vec<_> = offloaded
        .iter()
        .filter(|f| f.matching.contains("tp_src=40000") || f.matching.contains("tp_dst=40000"))
        .collect();
    assert_eq!(data.len(), 2, "{offloaded:?}");
    assert!(data.iter().all(|f| f.dp == "ebpf"), "{data:?}");
    let seen = d.port(&a.port).stats.rx_packets - rx_a;
    let packets: u64 = data.iter().map(|f| f.packets).sum();
    assert!(
        packets > 1000 && seen * 10 < packets,
        "{seen} frames through vsw, {packets} on the offloaded flows"
    );
    // The rule that decided counts them all.
    let normal = &d.all_flows()[0];
    assert!(normal.n_packets >= packets, "{normal:?}");
}

#[test]
fn an_offload_port_that_comes_back_is_offloaded_again_without_duplicates() {
    let _g = serial();
    let d = Vswd::start();
    let (a, b) = quiet_hosts();
    d.ctl_ok(&["add-port", &a.port, "offload=ebpf"]);
    d.ctl_ok(&["add-port", &b.port]);
    d.ctl_ok(&["add-flow", &udp_flow(&a, &b, 4000)]);
    d.ctl_ok(&["set", "hw-offload=true", "offload-interval=100"]);
    // A datapath flow is offloaded once a packet made it.
    a.send_raw(&udp_frame(&a, &b, 4000), 5);
    let offloaded = || d.flows_of("offloaded").len() == 1;
    wait_until("the flow offloaded", Duration::from_secs(10), offloaded);
    // The VM side goes away and comes back (a new veth, a new socket for vsw).
    a.unplug();
    wait_until("the port down", Duration::from_secs(10), || {
        d.port(&a.port).status != "up"
    });
    a.plug();
    a.exec_ok(&["sysctl", "-q", "-w", "net.ipv6.conf.eth0.disable_ipv6=1"]);
    wait_until("the port up", Duration::from_secs(10), || {
        d.port(&a.port).status == "up"
    });
    a.send_raw(&udp_frame(&a, &b, 4000), 5);
    wait_until("the flow offloaded again", Duration::from_secs(10), || {
        offloaded() && d.offload_show()[0].stats.used == 1
    });
    let pmd_before: u64 = d.pmd_stats().iter().map(|p| p.packets).sum();
    let counter = udp_counter(&b);
    a.send_raw(&udp_frame(&a, &b, 4000), 500);
    let out = counter.wait_with_output().expect("counter");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "4000 500",
        "each frame once, by the kernel"
    );
    let pmd_after: u64 = d.pmd_stats().iter().map(|p| p.packets).sum();
    assert_eq!(
        pmd_after,
        pmd_before,
        "the PMD saw none of them: {}\n{}\n{}",
        d.ctl_ok(&["offload-show"]),
        d.ctl_ok(&["dump-flows"]),
        d.log()
    );
}
