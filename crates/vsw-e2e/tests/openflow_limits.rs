//! OpenFlow peers vsw cannot trust (issue 29): what one peer asks for, how slowly it
//! reads, how many connect, never costs another peer its answers, its packet-ins or
//! its connection, nor the switch its memory; no message leaves with a length that
//! lies.

use std::io::BufRead;
use std::process::{Command, Stdio};
use std::time::Duration;

use vsw_e2e::{serial, wait_until, Vswd};

fn mgmt(d: &Vswd) -> String {
    format!("unix:{}", d.dir.join("br0.mgmt").display())
}

/// `ovs-ofctl -O OpenFlow13 ARGS[0] <br0> ARGS[1..]`, once it succeeded.
fn of13(d: &Vswd, args: &[&str]) -> String {
    let out = Command::new("ovs-ofctl")
        .args(["-t", "10", "-O", "OpenFlow13", args[0], &mgmt(d)])
        .args(&args[1..])
        .output()
        .expect("ovs-ofctl");
    assert!(
        out.status.success(),
        "ovs-ofctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A frame of `len` bytes (a local experimental ethertype).
fn frame_hex(len: usize) -> String {
    let mut f = vec![0u8; len];
    f[..12].copy_from_slice(&[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&[0x88, 0xb5]);
    f.iter().map(|b| format!("{b:02x}")).collect()
}

/// The largest packet-out there is (its message 65,535 bytes), sent to CONTROLLER:
/// the packet-in it makes would be 65,537 bytes whole. It is cut to fit (its
/// total_len says how long the frame was), and the monitoring peer's stream stays
/// whole: the packet-in after it reads as well.
/// `ovs-ofctl monitor` on `d` (miss_send_len 65535), its packet-in lines as they come.
/// `ovs-ofctl monitor` with packet-ins in `format`, and the packet-in lines it
/// prints.
fn monitor(d: &Vswd, format: &str) -> (std::process::Child, std::sync::mpsc::Receiver<String>) {
    let mut child = Command::new("timeout")
        .args([
            "60",
            "ovs-ofctl",
            "-O",
            "OpenFlow13",
            "-P",
            format,
            "monitor",
            &mgmt(d),
            "65535",
        ])
        .env("OVS_RUNDIR", &d.dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ovs-ofctl monitor");
    let lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in lines.map_while(Result::ok) {
            let packet_in = l.starts_with("OFPT_PACKET_IN") || l.starts_with("NXT_PACKET_IN2");
            if packet_in && tx.send(l).is_err() {
                return;
            }
        }
    });
    (child, rx)
}

fn packet_out_to_controller(d: &Vswd, hex: &str) {
    of13(
        d,
        &[
            "packet-out",
            &format!("in_port=CONTROLLER packet={hex} actions=output:CONTROLLER"),
        ],
    );
}

/// The largest packet-out there is (its message 65,535 bytes), sent to CONTROLLER:
/// the packet-in it makes would be 65,537 bytes whole. It is cut to fit (its
/// total_len says how long the frame was), and the monitoring peer's stream stays
/// whole: the packet-in after it reads as well.
#[test]
fn a_maximal_packet_out_to_the_controller_leaves_every_stream_whole() {
    let _g = serial();
    let d = Vswd::start();
    of13(&d, &["del-flows"]);
    // OpenFlow's packet-in, and NXT_PACKET_IN2 (its properties around the packet).
    for format in ["standard", "nxt_packet_in2"] {
        let (child, packet_ins) = monitor(&d, format);
        let (big, small) = (frame_hex(65_495), frame_hex(60));
        // The monitor listens once it has set its miss_send_len: small packet-outs
        // until one reaches it.
        wait_until("the monitor to listen", Duration::from_secs(20), || {
            packet_out_to_controller(&d, &small);
            packet_ins.recv_timeout(Duration::from_millis(300)).is_ok()
        });
        while packet_ins.try_recv().is_ok() {}
        packet_out_to_controller(&d, &big);
        packet_out_to_controller(&d, &small);
        let next = || packet_ins.recv_timeout(Duration::from_secs(10));
        let (first, second) = (next(), next());
        vsw_e2e::end(child);
        let big_in = first.expect("the large frame's packet-in");
        assert!(big_in.contains("total_len=65495"), "{format}: {big_in}");
        let data_len: usize = big_in
            .split("data_len=")
            .nth(1)
            .and_then(|t| t.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        assert!(
            (65_000..65_495).contains(&data_len),
            "{format}: cut to what fits one message: {big_in}"
        );
        let after = second.expect("the stream after the large packet-in reads on");
        assert!(
            after.contains("total_len=60") && after.contains("data_len=60"),
            "{format}: {after}"
        );
    }
}

fn mgmt_socket(d: &Vswd) -> std::os::unix::net::UnixStream {
    let c = std::os::unix::net::UnixStream::connect(d.dir.join("br0.mgmt")).unwrap();
    c.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    c
}

/// vswd's resident memory now, KiB.
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap()
}

/// Ten peers each ask for the tables' features 4,096 times in one write (about
/// 900 MiB of answers each, were they built at once) and read none of them: vswd's
/// memory grows by what their queues hold, and the control plane answers at once.
#[test]
fn floods_of_large_answers_cost_little_memory_and_stall_nobody() {
    use std::io::Write;
    use vsw_e2e::openflow::OfPeer;
    use vsw_openflow::{Message, MultipartRequest, Version};
    let _g = serial();
    let mut d = Vswd::start();
    let pid = d.pid().unwrap();
    d.ctl_ok(&["show"]);
    let before = rss_kib(pid);
    let flood: Vec<u8> = (0..4096u32)
        .flat_map(|x| Message::MultipartRequest(MultipartRequest::TableFeatures).encode(4, x))
        .collect();
    assert_eq!(flood.len(), 4096 * 16);
    let mut peers: Vec<OfPeer> = (0..10)
        .map(|_| {
            let mut p = OfPeer::over(Box::new(mgmt_socket(&d)), Version::V1_3);
            p.greet();
            p.conn.write_all(&flood).unwrap();
            p
        })
        .collect();
    let mut peak = before;
    let mut slowest = Duration::ZERO;
    let until = std::time::Instant::now() + Duration::from_secs(3);
    while std::time::Instant::now() < until {
        peak = peak.max(rss_kib(pid));
        let asked = std::time::Instant::now();
        d.ctl_ok(&["show"]);
        slowest = slowest.max(asked.elapsed());
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!(
        "RSS {} -> {} MiB under the flood; vswctl show at most {slowest:?}",
        before / 1024,
        peak / 1024
    );
    assert!(
        peak - before < 100 * 1024,
        "RSS grew by {} MiB (from {} MiB)",
        (peak - before) / 1024,
        before / 1024
    );
    assert!(
        slowest < Duration::from_secs(1),
        "vswctl show took {slowest:?}"
    );
    // A peer that reads gets its answers, whole: the table features of table 0
    // first, in a reply of its own.
    let first = peers[0].next_raw_within(Duration::from_secs(5), 19);
    let first = first.expect("the first answer");
    assert_eq!(&first[4..8], &0u32.to_be_bytes(), "its xid");
    assert_eq!(&first[8..10], &12u16.to_be_bytes(), "OFPMP_TABLE_FEATURES");
    drop(peers);
}

/// Remote peers that connect and trickle bytes without ever saying hello are
/// closed 5 s after they connected, and a listener's 64 slots are its own: the
/// local management socket answers all along.
#[test]
fn peers_that_never_say_hello_lose_their_slots_and_never_take_the_local_ones() {
    use std::io::{Read, Write};
    use std::net::TcpStream;
    let _g = serial();
    let d = Vswd::start();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap();
    d.ctl_ok(&["set-controller", &format!("ptcp:{port}:127.0.0.1")]);
    wait_until("the listener", Duration::from_secs(10), || {
        TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    // Every conn before this one has gone away by now (each closed at once).
    std::thread::sleep(Duration::from_millis(300));
    let started = std::time::Instant::now();
    // A header that claims 65,535 bytes, sent a byte every half second: never a
    // whole message, never silent.
    let header = [4u8, 0, 0xff, 0xff, 0, 0, 0, 1];
    let mut open: Vec<Option<TcpStream>> = (0..64)
        .map(|_| {
            let c = TcpStream::connect(("127.0.0.1", port)).unwrap();
            c.set_nonblocking(true).unwrap();
            Some(c)
        })
        .collect();
    // The 65th is refused at once (closed by vswd).
    let mut extra = TcpStream::connect(("127.0.0.1", port)).unwrap();
    extra
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let mut sink = Vec::new();
    let _ = extra.read_to_end(&mut sink);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "a 65th peer was served"
    );
    let mut closed_at = Vec::new();
    let mut sent = 0;
    while open.iter().any(Option::is_some) && started.elapsed() < Duration::from_secs(15) {
        // The local management socket is never short of a slot.
        of13(&d, &["show"]);
        for slot in open.iter_mut() {
            let Some(c) = slot else { continue };
            let _ = c.write_all(&header[sent.min(7)..sent.min(7) + 1]);
            let mut buf = [0u8; 256];
            loop {
                match c.read(&mut buf) {
                    Ok(0) => {
                        closed_at.push(started.elapsed());
                        *slot = None;
                        break;
                    }
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
        }
        sent += 1;
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(closed_at.len(), 64, "peers still open after 15 s");
    let latest = closed_at.iter().max().unwrap();
    assert!(
        *latest < Duration::from_secs(8),
        "the last trickling peer closed after {latest:?}"
    );
    assert!(
        *closed_at.iter().min().unwrap() >= Duration::from_secs(4),
        "closed before their hello deadline: {closed_at:?}"
    );
    // The slots are free again.
    let mut again = vsw_e2e::openflow::OfPeer::over(
        Box::new({
            let c = TcpStream::connect(("127.0.0.1", port)).unwrap();
            c.set_read_timeout(Some(Duration::from_millis(200)))
                .unwrap();
            c
        }),
        vsw_openflow::Version::V1_3,
    );
    again.greet();
}

/// Counts the packet-ins `c` gets in `window`.
fn packet_ins(c: &mut vsw_e2e::openflow::OfPeer, window: Duration) -> u64 {
    let until = std::time::Instant::now() + window;
    let mut n = 0;
    while let Some(left) = until.checked_duration_since(std::time::Instant::now()) {
        if c.next_within(left, |m| matches!(m, vsw_openflow::Message::PacketIn(_)))
            .is_some()
        {
            n += 1;
        }
    }
    n
}

/// A management-socket peer that asks for every asynchronous message and then reads
/// a byte every 20 ms, while it sends an echo request every half second to look
/// alive; until `stop`.
fn trickler(
    d: &Vswd,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<()> {
    use std::io::{Read, Write};
    use vsw_openflow::{Message, SwitchConfig, Version};
    let mut p = vsw_e2e::openflow::OfPeer::over(Box::new(mgmt_socket(d)), Version::V1_3);
    p.greet();
    p.send(Message::SetConfig(SwitchConfig {
        flags: 0,
        miss_send_len: 0xffff,
    }));
    std::thread::spawn(move || {
        let mut byte = [0u8; 1];
        let mut last_echo = std::time::Instant::now();
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let _ = p.conn.read(&mut byte);
            std::thread::sleep(Duration::from_millis(20));
            if last_echo.elapsed() > Duration::from_millis(500) {
                let _ = p.conn.write_all(&Message::EchoRequest(vec![]).encode(4, 7));
                last_echo = std::time::Instant::now();
            }
        }
    })
}

/// A peer that reads its messages a trickle at a time holds up nobody: the real
/// controller keeps its packet-ins, and the fail mode is decided on time while
/// port status for the slow peer piles up.
#[test]
fn a_peer_that_reads_a_trickle_costs_the_others_nothing() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let _g = serial();
    let d = Vswd::start();
    d.ctl_ok(&["set", "inactivity-probe=1000"]);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    d.ctl_ok(&[
        "set-controller",
        &format!("tcp:{}", listener.local_addr().unwrap()),
    ]);
    let mut ctrl = vsw_e2e::openflow::OfPeer::accept(&listener, vsw_openflow::Version::V1_3);
    d.ctl_ok(&[
        "add-port",
        "gen",
        "type=ring",
        "ring-flows=1",
        "ring-rate=2000",
    ]);
    d.ctl_ok(&["add-flow", "in_port=1,actions=controller:64"]);
    // Settled: packet-ins flow.
    wait_until("packet-ins", Duration::from_secs(10), || {
        packet_ins(&mut ctrl, Duration::from_millis(200)) > 0
    });
    let alone = packet_ins(&mut ctrl, Duration::from_secs(2));
    let stop = Arc::new(AtomicBool::new(false));
    let slow = trickler(&d, stop.clone());
    // Long enough for the slow peer's socket to fill.
    packet_ins(&mut ctrl, Duration::from_secs(1));
    let beside = packet_ins(&mut ctrl, Duration::from_secs(2));
    eprintln!("packet-ins in 2 s: {alone} alone, {beside} beside the trickling peer");
    assert!(
        beside * 10 >= alone * 9,
        "{beside} packet-ins beside the slow peer against {alone} alone"
    );
    // Ports come and go (port status for both peers), and the controller goes
    // away for good: standalone fails open after three probes (3 s).
    let churn_stop = Arc::new(AtomicBool::new(false));
    let churn = {
        let (socket, stop) = (d.socket.clone(), churn_stop.clone());
        std::thread::spawn(move || {
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                for verb in [
                    vec!["add-port", "churn", "type=ring"],
                    vec!["del-port", "churn"],
                ] {
                    let _ = std::process::Command::new(vsw_e2e::binary("vswctl"))
                        .arg("--socket")
                        .arg(&socket)
                        .args(&verb)
                        .output();
                }
                i += 1;
            }
            i
        })
    };
    drop(ctrl);
    drop(listener);
    let gone = std::time::Instant::now();
    wait_until("standalone to fail open", Duration::from_secs(15), || {
        d.log().contains("no controller reachable")
    });
    let after = gone.elapsed();
    churn_stop.store(true, Ordering::Relaxed);
    let churned = churn.join().unwrap();
    stop.store(true, Ordering::Relaxed);
    slow.join().unwrap();
    eprintln!("failed open {after:?} after the controller went ({churned} port churns)");
    assert!(churned > 0);
    assert!(
        after < Duration::from_secs(5),
        "fail-open came {after:?} after the controller went"
    );
}

fn journal_lines(d: &Vswd) -> usize {
    let mut name = d.state.file_name().unwrap().to_os_string();
    name.push(".journal");
    std::fs::read_to_string(d.state.with_file_name(name))
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

/// A flow-mod of `command` for `priority=10,udp,tp_dst=PORT` (OpenFlow 1.3).
fn udp_flow_mod(
    command: vsw_openflow::flow_mod::Command,
    tp_dst: u16,
    actions: Vec<vsw_openflow::flow_mod::Action>,
) -> vsw_openflow::Message {
    use vsw_openflow::flow_mod::{FlowMod, Instruction};
    use vsw_openflow::oxm::{OxmField, OxmMatch};
    // OXM basic fields: ETH_TYPE (5), IP_PROTO (10), UDP_DST (16).
    let f = |field: u8, value: &[u8]| OxmField {
        field,
        value: value.to_vec(),
        mask: None,
    };
    let matcher = OxmMatch {
        fields: vec![f(5, &[8, 0]), f(10, &[17]), f(16, &tp_dst.to_be_bytes())],
    };
    vsw_openflow::Message::FlowMod(FlowMod {
        priority: 10,
        instructions: vec![Instruction::ApplyActions(actions)],
        ..FlowMod::new(command, matcher)
    })
}

/// Sends `mods` and a barrier in one write over a fresh management connection;
/// the errors they were answered with, once the barrier's reply came.
fn burst(d: &Vswd, mods: &[vsw_openflow::Message]) -> Vec<vsw_openflow::Message> {
    use std::io::Write;
    use vsw_openflow::{Message, Version};
    let mut p = vsw_e2e::openflow::OfPeer::over(Box::new(mgmt_socket(d)), Version::V1_3);
    p.greet();
    let mut bytes: Vec<u8> = mods.iter().flat_map(|m| m.encode(4, 1)).collect();
    bytes.extend(Message::BarrierRequest.encode(4, 99));
    p.conn.write_all(&bytes).unwrap();
    let mut errors = Vec::new();
    loop {
        match p.next(|m| matches!(m, Message::Error(_) | Message::BarrierReply)) {
            Some((_, Message::BarrierReply)) => return errors,
            Some((_, e)) => errors.push(e),
            None => panic!("no barrier reply"),
        }
    }
}

/// Consecutive flow-mods of any kind are one change of the tables (one journal
/// line a batch of at most 1,024, one revalidation), each answered on its own;
/// deletes of rules that are not there change nothing and write nothing.
#[test]
fn flow_mods_in_a_burst_are_one_change_and_deletes_of_nothing_write_nothing() {
    use vsw_openflow::flow_mod::{Action, Command};
    let _g = serial();
    let d = Vswd::start();
    of13(&d, &["del-flows"]);
    d.ctl_ok(&["set", "pmd-sleep-max=100"]); // written whole: the journal starts empty
    let adds: Vec<_> = (1..=1000)
        .map(|i| udp_flow_mod(Command::Add, i, vec![]))
        .collect();
    assert!(burst(&d, &adds).is_empty());
    assert_eq!(d.all_flows().len(), 1000);
    let after_adds = journal_lines(&d);
    assert!(
        (1..=4).contains(&after_adds),
        "{after_adds} journal lines for 1,000 adds"
    );
    // 1,000 strict deletes of rules that are not there: nothing at all.
    let absent: Vec<_> = (2001..=3000)
        .map(|i| udp_flow_mod(Command::DeleteStrict, i, vec![]))
        .collect();
    assert!(burst(&d, &absent).is_empty());
    assert_eq!(
        journal_lines(&d),
        after_adds,
        "deletes of nothing were written"
    );
    assert_eq!(d.all_flows().len(), 1000);
    // Deletes, adds and a modify mixed in one burst: each carried out in order.
    let mut mixed = Vec::new();
    for i in 1..=500 {
        mixed.push(udp_flow_mod(Command::DeleteStrict, i, vec![]));
        mixed.push(udp_flow_mod(Command::Add, i + 5000, vec![]));
    }
    let to_port_1 = vec![Action::Output {
        port: 1,
        max_len: 0,
    }];
    mixed.push(udp_flow_mod(Command::ModifyStrict, 5001, to_port_1));
    mixed.push(udp_flow_mod(Command::DeleteStrict, 5002, vec![]));
    assert!(burst(&d, &mixed).is_empty());
    let lines = journal_lines(&d) - after_adds;
    assert!(
        (1..=4).contains(&lines),
        "{lines} journal lines for 1,002 flow-mods"
    );
    let flows = d.all_flows();
    assert_eq!(flows.len(), 1000 - 500 + 500 - 1);
    assert!(!flows.iter().any(|f| f.matching.ends_with("tp_dst=1")));
    assert!(!flows.iter().any(|f| f.matching.ends_with("tp_dst=5002")));
    let modified = flows
        .iter()
        .find(|f| f.matching.ends_with("tp_dst=5001"))
        .expect("the modified rule");
    assert_eq!(modified.actions, "output:1");
    // What the journal says comes back after a restart.
    let mut before: Vec<String> = flows.iter().map(|f| f.flow.clone()).collect();
    let mut d = d;
    d.restart();
    let mut after: Vec<String> = d.all_flows().iter().map(|f| f.flow.clone()).collect();
    before.sort();
    after.sort();
    assert_eq!(after, before);
}

/// `out_group` picks the rules that hand packets to a group, in deletes and flow
/// statistics, as Open vSwitch's does.
#[test]
fn out_group_selects_in_deletes_and_dumps() {
    let _g = serial();
    let d = Vswd::start();
    of13(&d, &["del-flows"]);
    d.ctl_ok(&["add-port", "gen", "type=ring"]);
    of13(&d, &["add-group", "group_id=1,type=all,bucket=output:1"]);
    of13(&d, &["add-group", "group_id=2,type=all,bucket=output:1"]);
    of13(&d, &["add-flow", "priority=5,udp,actions=group:1"]);
    of13(&d, &["add-flow", "priority=6,tcp,actions=group:1"]);
    of13(&d, &["add-flow", "priority=7,arp,actions=group:2"]);
    let dumped = of13(&d, &["dump-flows", "out_group=1"]);
    let lines: Vec<&str> = dumped.lines().filter(|l| l.contains("actions=")).collect();
    assert_eq!(lines.len(), 2, "{dumped}");
    assert!(lines.iter().all(|l| l.contains("group:1")), "{dumped}");
    of13(&d, &["del-flows", "out_group=1"]);
    let left = of13(&d, &["dump-flows"]);
    assert!(
        !left.contains("group:1") && left.contains("group:2"),
        "{left}"
    );
}

/// From OpenFlow 1.4 on, a master that a new master made a slave is told so
/// (OFPT_ROLE_STATUS).
#[test]
fn a_demoted_master_hears_of_it() {
    use vsw_e2e::openflow::OfPeer;
    use vsw_openflow::role::{RoleStatus, OFPCRR_MASTER_REQUEST};
    use vsw_openflow::{Message, Role, Version};
    let _g = serial();
    let d = Vswd::start();
    let (l1, l2) = (
        std::net::TcpListener::bind("127.0.0.1:0").unwrap(),
        std::net::TcpListener::bind("127.0.0.1:0").unwrap(),
    );
    let target = |l: &std::net::TcpListener| format!("tcp:{}", l.local_addr().unwrap());
    d.ctl_ok(&["set", "inactivity-probe=60000"]);
    d.ctl_ok(&["set-controller", &target(&l1), &target(&l2)]);
    let (mut c1, mut c2) = (
        OfPeer::accept(&l1, Version::V1_4),
        OfPeer::accept(&l2, Version::V1_4),
    );
    assert_eq!(c1.role(Some(Role::Master), 1), Ok(Role::Master));
    assert_eq!(c2.role(Some(Role::Master), 2), Ok(Role::Master));
    let told = c1.next(|m| matches!(m, Message::RoleStatus(_)));
    assert_eq!(
        told.map(|(_, m)| m),
        Some(Message::RoleStatus(RoleStatus {
            role: Role::Slave,
            reason: OFPCRR_MASTER_REQUEST,
            generation_id: 2,
        }))
    );
    assert!(
        c2.next_within(Duration::from_millis(500), |m| matches!(
            m,
            Message::RoleStatus(_)
        ))
        .is_none(),
        "the new master was told of a change it made"
    );
}
