//! Real traffic through vsw between network namespaces.

use std::time::Duration;

use vsw_e2e::{serial, wait_until, Host, Vswd};

fn two_hosts(mode: &str) -> (Vswd, Host, Host) {
    let d = Vswd::start();
    let (a, b) = (Host::new(1), Host::new(2));
    d.ctl_ok(&["add-port", &a.port, &format!("afpacket-mode={mode}")]);
    d.ctl_ok(&["add-port", &b.port, &format!("afpacket-mode={mode}")]);
    (d, a, b)
}

#[test]
fn ping_both_ways_in_both_afpacket_modes() {
    let _g = serial();
    for mode in ["ring", "ring-v3", "mmsg"] {
        let (d, a, b) = two_hosts(mode);
        assert!(a.ping(&b, 3), "{mode}: ping a -> b failed\n{}", d.log());
        assert!(b.ping(&a, 3), "{mode}: ping b -> a failed\n{}", d.log());
        let pa = d.port(&a.port);
        assert!(
            pa.stats.rx_packets >= 6 && pa.stats.tx_packets >= 6,
            "{mode}: counters did not move: {pa:?}"
        );
        assert!(pa.options.contains(&("afpacket-mode".into(), mode.into())));
        let pmd = &d.ctl_ok(&["pmd-stats-show"]);
        assert!(pmd.contains("packets received"), "{pmd}");
    }
}

/// Ends a daemonised process by its pidfile (an iperf3 server still waiting for a
/// client that never got through), also when the test fails.
struct StopOnDrop(std::path::PathBuf);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(&self.0) {
            let pid = pid.trim_matches(char::from(0)).trim().to_string();
            let _ = vsw_e2e::run("kill", &["-TERM", &pid]);
        }
    }
}

/// TCP through the switch with the veths' default offloads (TSO, checksum offload) on:
/// super-frames with partial checksums must come out right.
#[test]
fn iperf3_tcp_with_default_offloads() {
    let _g = serial();
    for mode in ["ring", "ring-v3", "mmsg"] {
        let (d, a, b) = two_hosts(mode);
        let pidfile = d.dir.join("iperf3.pid");
        let offloads = a.exec_ok(&["ethtool", "-k", "eth0"]);
        assert!(
            offloads.contains("tcp-segmentation-offload: on"),
            "TSO should be on by default: {offloads}"
        );
        assert!(offloads.contains("tx-checksumming: on"));
        let server = b.exec(&[
            "sh",
            "-c",
            &format!(
                "iperf3 -s -1 -D -B {} --logfile /dev/null -I {}",
                b.addr,
                pidfile.display()
            ),
        ]);
        assert!(server.status.success());
        let _server = StopOnDrop(pidfile.clone());
        let out = a.exec(&[
            "iperf3",
            "-c",
            &b.addr,
            // A fixed amount, not a fixed time: what crosses does not hang on the
            // machine's speed.
            "-n",
            "256M",
            "-J",
            "--connect-timeout",
            "3000",
        ]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{mode}: iperf3 through vsw failed: {text}\n{}",
            d.log()
        );
        let v: serde_json::Value = serde_json::from_str(&text).expect("iperf3 JSON");
        let bps = v["end"]["sum_received"]["bits_per_second"]
            .as_f64()
            .unwrap_or(0.0);
        let pb = d.port(&b.port);
        // Everything that says where the bytes went, should this ever fail: iperf3's
        // own report, both ports' counters, the PMD's and the datapath flows.
        let why = || {
            format!(
                "iperf3: {text}\nport a: {:?}\nport b: {pb:?}\n{}\n{}\n{}",
                d.port(&a.port),
                d.ctl_ok(&["pmd-stats-show"]),
                d.ctl_ok(&["dump-dp-flows"]),
                last_lines(&d.log(), 200)
            )
        };
        // How fast is the benchmarks' to say (docs/BENCHMARKS.md); here: the stream
        // flowed, and below, as super-frames, all of it arriving.
        assert!(bps > 0.0, "{mode}: TCP moved nothing\n{}", why());
        assert!(pb.stats.tx_bytes > 100_000_000, "{mode}: {}", why());
        let avg = pb.stats.tx_bytes / pb.stats.tx_packets;
        assert!(
            avg > 3000,
            "{mode}: TSO super-frames must cross whole, average frame {avg} bytes"
        );
        // What vsw counts as sent must have arrived: nothing is lost silently.
        let arrived: u64 = b
            .exec_ok(&["cat", "/sys/class/net/eth0/statistics/rx_bytes"])
            .trim()
            .parse()
            .unwrap();
        assert!(
            arrived as f64 >= pb.stats.tx_bytes as f64 * 0.999,
            "{mode}: vsw sent {} bytes to b, b received {arrived}",
            pb.stats.tx_bytes
        );
        assert_eq!(pb.stats.tx_too_big, 0, "{mode}: super-frames must fit");
    }
}

/// The last `n` lines of `text` (a debug log is long).
fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[test]
fn drop_rule_drops_and_counts() {
    let _g = serial();
    let (d, a, b) = two_hosts("ring");
    assert!(a.ping(&b, 1));
    d.ctl_ok(&[
        "add-flow",
        &format!("priority=100,in_port={},icmp,actions=drop", a.port),
    ]);
    assert!(!a.ping(&b, 3), "ICMP from a must be dropped");
    let flows = d.flows();
    assert_eq!(flows.len(), 1);
    assert!(
        flows[0].n_packets >= 3,
        "the drop rule counts what it dropped: {:?}",
        flows[0]
    );
    assert_eq!(flows[0].matching, "icmp,in_port=1");
    // Other traffic (ARP) still passes, and deleting the rule restores ICMP.
    d.ctl_ok(&["del-flows", "icmp"]);
    assert!(d.flows().is_empty());
    assert!(a.ping(&b, 2), "ping must work again after del-flows");
}

#[test]
fn output_rules_by_port_name() {
    let _g = serial();
    let (d, a, b) = two_hosts("ring");
    d.ctl_ok(&[
        "add-flow",
        &format!("priority=10,in_port={},actions=output:{}", a.port, b.port),
    ]);
    d.ctl_ok(&[
        "add-flow",
        &format!("priority=10,in_port={},actions=output:{}", b.port, a.port),
    ]);
    assert!(a.ping(&b, 3));
    let flows = d.flows();
    assert!(flows.iter().all(|f| f.n_packets >= 3), "{flows:?}");
    let text = d.ctl_ok(&["dump-flows"]);
    assert!(
        text.contains("priority=10,in_port=1 actions=output:2"),
        "{text}"
    );
}

#[test]
fn del_port_under_traffic() {
    let _g = serial();
    let (d, a, b) = two_hosts("ring");
    assert!(a.ping(&b, 1));
    let flood = std::thread::scope(|s| {
        let h = s.spawn(|| a.exec(&["ping", "-f", "-w", "3", "-q", &b.addr]));
        wait_until("traffic to flow", Duration::from_secs(5), || {
            d.port(&a.port).stats.rx_packets > 1000
        });
        d.ctl_ok(&["del-port", &b.port]);
        h.join().expect("ping thread")
    });
    let summary = String::from_utf8_lossy(&flood.stdout);
    assert!(
        !summary.contains(" 0% packet loss"),
        "with the port gone, not every ping can come back: {summary}"
    );
    assert!(
        d.show().ports.len() == 1,
        "vswd answers after del-port under traffic"
    );
    let ports = d.ports();
    assert_eq!(ports.len(), 1, "{ports:?}");
    assert_eq!(ports[0].name, a.port);
    // The interface is handed back as it was: not promiscuous any more.
    let flags = std::fs::read_to_string(format!("/sys/class/net/{}/flags", b.port)).unwrap();
    let flags = u32::from_str_radix(flags.trim().trim_start_matches("0x"), 16).unwrap();
    assert_eq!(
        flags & 0x100,
        0,
        "IFF_PROMISC must be cleared after del-port"
    );
    // And it can be added back.
    d.ctl_ok(&["add-port", &b.port]);
    assert!(a.ping(&b, 2));
}

/// The switch never receives its own transmissions back (PACKET_IGNORE_OUTGOING): what
/// it sends out of a port does not come in again on that port.
#[test]
fn own_transmissions_are_not_received_again() {
    let _g = serial();
    let (d, a, b) = two_hosts("ring");
    d.ctl_ok(&[
        "add-flow",
        &format!("in_port={},actions=output:{}", a.port, b.port),
    ]);
    // UDP to a MAC address nobody owns: b's stack drops it and answers nothing.
    let frame = [
        "0200c6120063",
        "0200c6120001",
        "0800", // Ethernet: to a stranger, IPv4
        "450000200000400040110000",
        "c6120001",
        "c6120063", // IPv4 header (no checksum needed)
        "04000009000c0000",
        "00000000", // UDP, 4 bytes of payload
    ]
    .concat();
    a.send_raw(&frame, 100);
    wait_until("100 frames out of b's port", Duration::from_secs(5), || {
        d.port(&b.port).stats.tx_packets >= 100
    });
    let pb = d.port(&b.port);
    // A stray frame from a host's own stack may come along; the 100 must not come back.
    assert!(
        pb.stats.rx_packets < 100,
        "vsw received its own transmissions back: {pb:?}"
    );
    assert!(d.port(&a.port).stats.rx_packets >= 100);
}
