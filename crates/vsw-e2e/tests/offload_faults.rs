//! The ebpf fast path never forwards what userspace would not: a rule change applies
//! to offloaded traffic before the command returns, busy offloaded flows are not idle,
//! `output` to the input port is not a hairpin, and no fast path outlives the daemon's
//! run (stopped, or killed and started again).

use std::io::{BufRead, BufReader, Write};
use std::process::Child;
use std::time::Duration;

use vsw_e2e::{must, quiet_hosts, run, serial, udp_frame, wait_until, Host, Vswd};

fn udp_flow(a: &Host, b: &Host, sport: u16, extra: &str, actions: &str) -> String {
    format!(
        "priority=10,{extra}in_port={},udp,nw_src={},nw_dst={},tp_src={sport},tp_dst=5001,actions={actions}",
        a.port, a.addr, b.addr
    )
}

/// Sends `frame` (hex) out of `from`'s eth0 every half millisecond for `seconds`.
fn stream(from: &Host, frame: &str, seconds: f64) -> Child {
    let script = format!(
        "import socket, time\n\
         s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)\n\
         s.bind(('eth0', 0))\n\
         f = bytes.fromhex('{frame}')\n\
         print('ready', flush=True)\n\
         end = time.monotonic() + {seconds}\n\
         while time.monotonic() < end:\n\
         \x20   s.send(f); time.sleep(0.0005)\n"
    );
    from.python_ready(&script)
}

/// Counts UDP datagrams to port 5001 on `h`; on a line `mark` from the test it notes
/// the count, on `end` it prints how many came since the mark.
fn marking_counter(h: &Host) -> Child {
    let script = format!(
        "import select, socket, sys\n\
         s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
         s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 24)\n\
         s.bind(('{}', 5001)); s.setblocking(False)\n\
         print('ready', flush=True)\n\
         n = 0; mark = None\n\
         while True:\n\
         \x20   r, _, _ = select.select([s, sys.stdin], [], [], 30)\n\
         \x20   if not r: break\n\
         \x20   if s in r:\n\
         \x20       while True:\n\
         \x20           try: s.recv(2048); n += 1\n\
         \x20           except BlockingIOError: break\n\
         \x20   if sys.stdin in r:\n\
         \x20       line = sys.stdin.readline().strip()\n\
         \x20       if line == 'mark': mark = n\n\
         \x20       else: print(n, n - (mark or 0), flush=True); break\n",
        h.addr
    );
    h.python_ready_with_input(&script, 60)
}

fn tell(child: &mut Child, what: &str) {
    writeln!(child.stdin.as_mut().unwrap(), "{what}").unwrap();
}

/// (all received, received since the mark).
fn counted(mut child: Child) -> (u64, u64) {
    tell(&mut child, "end");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let _ = child.wait();
    let v: Vec<u64> = line
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    (v[0], v[1])
}

/// Streams `frame` from `from` to `to` for 3 s and runs `change` half a second in;
/// returns the frames `to` received in all, and those received from 100 ms after
/// `change` returned on (frames handed on before it returned may still be on their
/// way for a moment).
fn across_a_change(from: &Host, to: &Host, frame: &str, change: impl FnOnce()) -> (u64, u64) {
    let mut counter = marking_counter(to);
    let mut sender = stream(from, frame, 3.0);
    std::thread::sleep(Duration::from_millis(500));
    change();
    std::thread::sleep(Duration::from_millis(100));
    tell(&mut counter, "mark");
    std::thread::sleep(Duration::from_secs(1));
    let counts = counted(counter);
    let _ = sender.wait();
    counts
}

/// A port with the ebpf fast path and a flow on it offloaded; then the revalidator
/// is slowed to a pass a minute, so that only the command itself can change what
/// the kernel does.
fn offloaded(d: &Vswd, a: &Host, b: &Host, flow: &str, frame: &str) {
    d.ctl_ok(&["add-port", &a.port, "offload=ebpf", "offload-capacity=16"]);
    d.ctl_ok(&["add-port", &b.port]);
    d.ctl_ok(&["add-flow", flow]);
    d.ctl_ok(&["set", "hw-offload=true", "offload-interval=100"]);
    a.send_raw(frame, 10);
    wait_until("the flow to be offloaded", Duration::from_secs(10), || {
        d.flows_of("offloaded").len() == 1
    });
    d.ctl_ok(&["set", "offload-interval=60000"]);
}

#[test]
fn a_rule_change_applies_to_offloaded_traffic_before_the_command_returns() {
    let _g = serial();
    let d = Vswd::start();
    let (a, b) = quiet_hosts();
    let frame = udp_frame(&a, &b, 4100);
    let out = format!("output:{}", b.port);
    offloaded(&d, &a, &b, &udp_flow(&a, &b, 4100, "", &out), &frame);
    // A drop rule above it: the kernel must not forward another frame of the flow.
    let (all, after) = across_a_change(&a, &b, &frame, || {
        d.ctl_ok(&[
            "add-flow",
            &format!("priority=20,in_port={},udp,actions=drop", a.port),
        ]);
    });
    assert!(all > 100, "the flow ran before the change: {all}");
    assert_eq!(
        after,
        0,
        "frames delivered after add-flow of a drop rule returned\n{}",
        d.ctl_ok(&["dump-flows"])
    );
    assert!(d.flows_of("offloaded").is_empty());

    // Deleting the offloaded flow: what is left (the drop rule) applies at once too.
    d.ctl_ok(&[
        "del-flows",
        "--strict",
        &format!("priority=20,in_port={},udp", a.port),
    ]);
    d.ctl_ok(&[
        "add-flow",
        &format!("priority=1,in_port={},actions=drop", a.port),
    ]);
    d.ctl_ok(&["set", "offload-interval=100"]);
    a.send_raw(&frame, 10);
    wait_until(
        "the flow to be offloaded again",
        Duration::from_secs(10),
        || d.flows_of("offloaded").len() == 1,
    );
    d.ctl_ok(&["set", "offload-interval=60000"]);
    let (all, after) = across_a_change(&a, &b, &frame, || {
        d.ctl_ok(&[
            "del-flows",
            "--strict",
            &udp_flow(&a, &b, 4100, "", &out).replace(&format!(",actions={out}"), ""),
        ]);
    });
    assert!(all > 100, "{all}");
    assert_eq!(after, 0, "frames delivered after del-flows returned");
}

#[test]
fn a_busy_offloaded_flow_does_not_time_out() {
    let _g = serial();
    let d = Vswd::start();
    let (a, b) = quiet_hosts();
    let frame = udp_frame(&a, &b, 4200);
    let out = format!("output:{}", b.port);
    offloaded(
        &d,
        &a,
        &b,
        &udp_flow(&a, &b, 4200, "idle_timeout=2,", &out),
        &frame,
    );
    d.ctl_ok(&["set", "offload-interval=1000"]);
    // Five seconds of traffic the kernel forwards: userspace sees none of it.
    let mut sender = stream(&a, &frame, 5.0);
    let _ = sender.wait();
    let flows = d.flows();
    assert_eq!(flows.len(), 1, "the busy flow timed out");
    assert!(flows[0].offloaded);
    assert!(flows[0].n_packets > 1000, "{:?}", flows[0]);
    // Quiet, it goes.
    wait_until("the idle flow to time out", Duration::from_secs(10), || {
        d.flows().is_empty()
    });
}

/// Counts frames arriving on `h`'s eth0 from `src_mac` (sent back to where they came
/// from); prints the count after `seconds`.
fn returned_counter(h: &Host, seconds: f64) -> Child {
    let script = format!(
        "import socket, time\n\
         s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))\n\
         s.bind(('eth0', 0)); s.settimeout(0.1)\n\
         src = bytes.fromhex('{}')\n\
         print('ready', flush=True)\n\
         n = 0; end = time.monotonic() + {seconds}\n\
         while time.monotonic() < end:\n\
         \x20   try: d, a = s.recvfrom(2048)\n\
         \x20   except socket.timeout: continue\n\
         \x20   if a[2] != socket.PACKET_OUTGOING and d[6:12] == src: n += 1\n\
         print(n, flush=True)\n",
        h.mac.replace(':', "")
    );
    h.python_ready(&script)
}

#[test]
fn output_to_the_input_port_is_dropped_by_the_fast_path_too() {
    let _g = serial();
    let d = Vswd::start();
    let (a, b) = quiet_hosts();
    let frame = udp_frame(&a, &b, 4300);
    // Userspace drops what `output` would send back out of its input port.
    offloaded(
        &d,
        &a,
        &b,
        &udp_flow(&a, &b, 4300, "", &format!("output:{}", a.port)),
        &frame,
    );
    let counter = returned_counter(&a, 2.0);
    a.send_raw(&frame, 200);
    let out = counter.wait_with_output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "0",
        "frames came back out of their input port"
    );
    let f = &d.flows_of("offloaded")[0];
    assert!(f.n_packets >= 210, "counted as dropped: {f:?}");
}

/// The ids of vsw's classifiers on `port`'s ingress: tcx links (kernels from 6.6) and
/// netlink tc filters (older kernels).
fn vsw_filters(port: &str) -> Vec<String> {
    let out = run("tc", &["filter", "show", "dev", port, "ingress"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let netlink = text
        .lines()
        .filter(|l| l.contains("vsw_tc_ingress"))
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            words.find(|w| *w == "id")?;
            words.next().map(String::from)
        });
    let tcx = vsw_netdev::ebpf::attached_programs(port)
        .into_iter()
        .map(|id| id.to_string());
    netlink.chain(tcx).collect()
}

#[test]
fn no_fast_path_outlives_its_daemon() {
    let _g = serial();
    let mut d = Vswd::start();
    let (a, b) = quiet_hosts();
    let frame = udp_frame(&a, &b, 4400);
    let out = format!("output:{}", b.port);
    offloaded(&d, &a, &b, &udp_flow(&a, &b, 4400, "", &out), &frame);
    assert_eq!(vsw_filters(&a.port).len(), 1);
    // Stopped: the fast path goes with it.
    assert!(d.stop());
    assert!(
        vsw_filters(&a.port).is_empty(),
        "a stopped vswd left its tc program"
    );
    // Killed: a tcx link goes with the process; a netlink filter (older kernels)
    // stays until the next start removes it. Either way, once vswd runs again,
    // nothing of the killed run forwards.
    d.restart();
    wait_until("the flow offloaded again", Duration::from_secs(10), || {
        d.ctl_ok(&["set", "offload-interval=100"]);
        a.send_raw(&frame, 1);
        d.flows_of("offloaded").len() == 1
    });
    let left = vsw_filters(&a.port);
    assert_eq!(left.len(), 1);
    let pid = d.pid().unwrap().to_string();
    must("kill", &["-KILL", &pid]);
    wait_until("vswd to die", Duration::from_secs(5), || !d.is_running());
    d.restart();
    let now = vsw_filters(&a.port);
    assert!(
        !now.iter().any(|id| left.contains(id)),
        "the killed run's program {left:?} is still attached: {now:?}\n{}",
        d.log()
    );
    assert!(d.stop());
    assert!(vsw_filters(&a.port).is_empty());
}

/// The datapath flows offloaded (`dump-dp-flows type=offloaded`).
fn offloaded_dp_flows(d: &Vswd) -> Vec<vsw_protocol::DpFlowInfo> {
    let text = d.ctl_ok(&["--format", "json", "dump-dp-flows", "type=offloaded"]);
    serde_json::from_str(&text).unwrap()
}

#[test]
fn the_learning_switch_is_offloaded_and_a_drop_rule_stops_it_before_the_command_returns() {
    let _g = serial();
    let d = Vswd::start();
    let (a, b) = quiet_hosts();
    let frame = udp_frame(&a, &b, 4200);
    // No rule written: the learning switch's NORMAL decides.
    d.ctl_ok(&["add-port", &a.port, "offload=ebpf"]);
    d.ctl_ok(&["add-port", &b.port, "offload=ebpf"]);
    d.ctl_ok(&["set", "hw-offload=true", "offload-interval=100"]);
    a.send_raw(&frame, 10);
    wait_until("NORMAL's flow offloaded", Duration::from_secs(10), || {
        offloaded_dp_flows(&d).len() == 1
    });
    let f = &offloaded_dp_flows(&d)[0];
    assert_eq!(f.dp, "ebpf");
    assert!(
        f.matching.contains("tp_src=4200") && f.matching.contains(&a.mac),
        "one exact flow per connection: {f:?}"
    );
    d.ctl_ok(&["set", "offload-interval=60000"]);
    // The kernel forwards it (the PMD sees none of it); then a drop rule above.
    let pmd_before: u64 = d.pmd_stats().iter().map(|p| p.packets).sum();
    let (all, after) = across_a_change(&a, &b, &frame, || {
        let pmd_during: u64 = d.pmd_stats().iter().map(|p| p.packets).sum();
        assert_eq!(pmd_during, pmd_before, "the PMD saw offloaded frames");
        d.ctl_ok(&["add-flow", "priority=100,udp,actions=drop"]);
    });
    assert!(all > 100, "the flow ran before the change: {all}");
    assert_eq!(
        after, 0,
        "frames delivered after the drop rule's add-flow returned"
    );
}

#[test]
fn a_host_that_moves_takes_its_offloaded_traffic_with_it() {
    let _g = serial();
    let d = Vswd::start();
    let (a, b) = quiet_hosts();
    let c = Host::new(3);
    let frame = udp_frame(&a, &b, 4300);
    for h in [&a, &b, &c] {
        d.ctl_ok(&["add-port", &h.port, "offload=ebpf"]);
    }
    d.ctl_ok(&["set", "hw-offload=true", "offload-interval=100"]);
    // b is known on its port: a's frames to it go there alone, by the kernel.
    b.send_raw(&udp_frame(&b, &a, 4301), 1);
    a.send_raw(&frame, 10);
    wait_until("a's flow to b offloaded", Duration::from_secs(10), || {
        offloaded_dp_flows(&d)
            .iter()
            .any(|f| f.matching.contains("tp_src=4300") && f.actions == "2")
    });
    // b's address now speaks from c's port (a VM moved).
    let moved = udp_frame(&b, &a, 4302);
    c.send_raw(&moved, 1);
    let c_before = d.port(&c.port).stats.tx_packets;
    // The revalidator takes the flow out of the kernel; a's frames follow b to c.
    wait_until("a's frames to reach c", Duration::from_secs(5), || {
        a.send_raw(&frame, 1);
        d.port(&c.port).stats.tx_packets > c_before
    });
    wait_until("the stale entry gone", Duration::from_secs(5), || {
        !offloaded_dp_flows(&d)
            .iter()
            .any(|f| f.matching.contains("tp_src=4300") && f.actions == "2")
    });
}
