//! `offload-persist`: offloaded flows keep forwarding in the kernel while vswd is away
//! (stopped, restarting), the next run adopts the pinned fast path rather than making
//! it anew, checks each entry against its restored pipeline (not before
//! `flow-restore-wait` is lifted) and hands the ones it gives back to normal
//! management; off, nothing pinned outlives a run.
//!
//! Each test mounts a BPF filesystem of its own for the pins (`--bpf-pin-dir`).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::Duration;

use vsw_e2e::{must, quiet_hosts, run, serial, udp_frame, unique, wait_until, Host, Vswd};

/// A BPF filesystem mounted for one test; unmounted when dropped.
struct BpfFs(PathBuf);

impl BpfFs {
    fn mount() -> BpfFs {
        let dir = std::env::temp_dir().join(unique("vsw-bpffs-"));
        std::fs::create_dir_all(&dir).unwrap();
        must("mount", &["-t", "bpf", "bpf", dir.to_str().unwrap()]);
        BpfFs(dir)
    }

    /// The pin root vswd is given (made by vswd).
    fn root(&self) -> PathBuf {
        self.0.join("vsw")
    }

    /// What is pinned for interface `ifname`.
    fn pinned(&self, ifname: &str) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.root().join(ifname))
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }
}

impl Drop for BpfFs {
    fn drop(&mut self) {
        let _ = run("umount", &[self.0.to_str().unwrap()]);
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn vswd(pins: &BpfFs) -> Vswd {
    Vswd::start_with_args(&["--bpf-pin-dir", pins.root().to_str().unwrap()])
}

/// Frames `h`'s eth0 received (the hosts are quiet: only the test's frames).
fn received(h: &Host) -> u64 {
    let out = h.exec_ok(&["ip", "-s", "-j", "link", "show", "eth0"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v[0]["stats64"]["rx"]["packets"].as_u64().unwrap()
}

fn udp_flow(a: &Host, b: &Host, sport: u16, actions: &str) -> String {
    format!(
        "priority=10,in_port={},udp,nw_src={},nw_dst={},tp_src={sport},tp_dst=5001,actions={actions}",
        a.port, a.addr, b.addr
    )
}

/// Sends `frame` (hex) out of `from`'s eth0 every half millisecond until told to
/// stop (a line on its standard input); then prints how many it sent.
fn stream(from: &Host, frame: &str) -> Child {
    let script = format!(
        "import socket, sys, select, time\n\
         s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)\n\
         s.bind(('eth0', 0))\n\
         f = bytes.fromhex('{frame}')\n\
         print('ready', flush=True)\n\
         n = 0\n\
         while not select.select([sys.stdin], [], [], 0)[0]:\n\
         \x20   s.send(f); n += 1; time.sleep(0.0005)\n\
         print(n, flush=True)\n"
    );
    from.python_ready_with_input(&script, 60)
}

/// Stops a `stream`; how many frames it sent.
fn sent(mut child: Child) -> u64 {
    use std::io::Write;
    writeln!(child.stdin.as_mut().unwrap(), "stop").unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let _ = child.wait();
    line.trim().parse().unwrap()
}

/// Waits until every frame `from` sent since `before` reached `to`, at most 5 s; the
/// frames that came.
fn settle(to: &Host, before: u64, sent: u64) -> u64 {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let got = received(to) - before;
        if got >= sent || std::time::Instant::now() > deadline {
            return got;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Ports a and b with the ebpf fast path, `flow` (a UDP flow from a) offloaded, the
/// fast path persistent.
fn offloaded(d: &Vswd, a: &Host, b: &Host, flow: &str, frame: &str) {
    d.ctl_ok(&["add-port", &a.port, "offload=ebpf", "offload-capacity=16"]);
    d.ctl_ok(&["add-port", &b.port, "offload=ebpf", "offload-capacity=16"]);
    d.ctl_ok(&["add-flow", flow]);
    d.ctl_ok(&[
        "set",
        "hw-offload=true",
        "offload-interval=100",
        "offload-persist=true",
    ]);
    wait_until("the flow to be offloaded", Duration::from_secs(10), || {
        a.send_raw(frame, 1);
        d.flows_of("offloaded").len() == 1
    });
}

/// With `offload-persist` off the pins go: the provider is made again unpinned.
fn unpin(d: &Vswd, pins: &BpfFs, ports: &[&str]) {
    d.ctl_ok(&["set", "offload-persist=false"]);
    for p in ports {
        assert!(pins.pinned(p).is_empty(), "{p}: {:?}", pins.pinned(p));
    }
}

#[test]
fn an_offloaded_flow_forwards_while_vswd_is_away_and_the_next_run_adopts_it() {
    let _g = serial();
    let pins = BpfFs::mount();
    let mut d = vswd(&pins);
    let (a, b) = quiet_hosts();
    let frame = udp_frame(&a, &b, 4500);
    let other = udp_frame(&a, &b, 4501);
    let out = format!("output:{}", b.port);
    offloaded(&d, &a, &b, &udp_flow(&a, &b, 4500, &out), &frame);
    d.ctl_ok(&["add-flow", &udp_flow(&a, &b, 4501, &out)]);
    assert_eq!(
        pins.pinned(&a.port),
        ["COUNTS", "FLOWS", "tc_link"],
        "the fast path is pinned"
    );
    let program = vsw_netdev::ebpf::attached_programs(&a.port);
    assert_eq!(program.len(), 1);

    // A stream across stop, time away and start: every frame arrives, once.
    let before = received(&b);
    let sender = stream(&a, &frame);
    std::thread::sleep(Duration::from_millis(300));
    assert!(d.stop(), "vswd stops cleanly");
    assert_eq!(
        vsw_netdev::ebpf::attached_programs(&a.port),
        program,
        "the classifier stays attached while no vswd runs"
    );
    // Away: the offloaded flow is forwarded, the flow that was not is not (nothing
    // forwards it).
    let away = received(&b);
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        received(&b) > away + 100,
        "the kernel forwards the offloaded flow while vswd is away"
    );
    let at = received(&b);
    a.send_raw(&other, 20);
    d.restart();
    // (frames of the stream keep arriving; the 20 others must not be among them)
    std::thread::sleep(Duration::from_millis(500));
    let n = sent(sender);
    let got = settle(&b, before, n);
    assert_eq!(
        got,
        n,
        "frames of the offloaded flow lost (or doubled) across the restart: sent {n}, received {got}\n{}",
        d.log()
    );
    assert!(at > before);
    // The new run adopted the classifier rather than attaching another.
    assert_eq!(vsw_netdev::ebpf::attached_programs(&a.port), program);
    assert!(
        d.log().contains("adopted the pinned classifier"),
        "{}",
        d.log()
    );
    // ... and handed the entry back: the flow is a datapath flow of this run again,
    // offloaded, its rule counting what the kernel forwards.
    wait_until(
        "the adopted entry to be handed back",
        Duration::from_secs(10),
        || {
            let shows = d.offload_show();
            let a_show = shows.iter().find(|s| s.port == a.port).unwrap();
            a_show.stats.adopted == 0 && a_show.stats.used == 1
        },
    );
    let flow = d
        .flows_of("offloaded")
        .into_iter()
        .find(|f| f.flow.contains("tp_src=4500"))
        .expect("the rule serves an offloaded flow");
    let counted = flow.n_packets;
    a.send_raw(&frame, 50);
    wait_until(
        "the rule to count the kernel's packets",
        Duration::from_secs(10),
        || {
            d.flows_of("offloaded")
                .iter()
                .any(|f| f.flow.contains("tp_src=4500") && f.n_packets >= counted + 50)
        },
    );
    // Under normal management: a rule change stops it before the command returns.
    let drop = udp_flow(&a, &b, 4500, "drop").replace("priority=10", "priority=20");
    d.ctl_ok(&["add-flow", &drop]);
    let now = received(&b);
    a.send_raw(&frame, 20);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(received(&b), now, "a dropped flow still forwarded");

    unpin(&d, &pins, &[&a.port, &b.port]);
    assert!(d.stop());
    assert!(vsw_netdev::ebpf::attached_programs(&a.port).is_empty());
}

#[test]
fn adopted_entries_wait_for_the_restore_and_go_if_the_restored_pipeline_differs() {
    let _g = serial();
    let pins = BpfFs::mount();
    let mut d = vswd(&pins);
    let (a, b) = quiet_hosts();
    let frame = udp_frame(&a, &b, 4600);
    let out = format!("output:{}", b.port);
    let flow = udp_flow(&a, &b, 4600, &out);
    offloaded(&d, &a, &b, &flow, &frame);
    assert!(d.stop());
    // As a restart script does while the daemon is down: forwarding is held until
    // the flows are restored.
    let text = std::fs::read_to_string(&d.state).unwrap();
    let mut state: serde_json::Value = serde_json::from_str(&text).unwrap();
    state["options"]["flow-restore-wait"] = "true".into();
    std::fs::write(&d.state, state.to_string()).unwrap();
    d.restart();
    // Held: userspace forwards nothing, the adopted entry keeps forwarding by the
    // policy it was made by.
    let before = received(&b);
    a.send_raw(&frame, 30);
    assert_eq!(settle(&b, before, 30), 30, "{}", d.log());
    let shows = d.offload_show();
    let a_show = shows.iter().find(|s| s.port == a.port).unwrap();
    assert_eq!(a_show.stats.adopted, 1, "held: not handed back yet");
    // The controller restores other flows (this one dropped), then lifts the wait:
    // the entry goes before the command returns.
    d.ctl_ok(&["del-flows"]);
    d.ctl_ok(&["add-flow", &udp_flow(&a, &b, 4600, "drop")]);
    d.ctl_ok(&["set", "flow-restore-wait=false"]);
    let now = received(&b);
    a.send_raw(&frame, 20);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        received(&b),
        now,
        "the fast path forwards what the restored pipeline drops\n{}",
        d.log()
    );
    let shows = d.offload_show();
    let a_show = shows.iter().find(|s| s.port == a.port).unwrap();
    assert_eq!(a_show.stats.adopted, 0);
    unpin(&d, &pins, &[&a.port, &b.port]);
    assert!(d.stop());
}

#[test]
fn without_offload_persist_nothing_pinned_outlives_the_run() {
    let _g = serial();
    let pins = BpfFs::mount();
    let mut d = vswd(&pins);
    let (a, b) = quiet_hosts();
    let frame = udp_frame(&a, &b, 4700);
    let out = format!("output:{}", b.port);
    offloaded(&d, &a, &b, &udp_flow(&a, &b, 4700, &out), &frame);
    assert!(d.stop());
    assert!(!vsw_netdev::ebpf::attached_programs(&a.port).is_empty());
    // The next run is told to fail closed (its state says offload-persist=false):
    // the earlier run's fast path goes before anything forwards by it.
    let text = std::fs::read_to_string(&d.state).unwrap();
    let mut state: serde_json::Value = serde_json::from_str(&text).unwrap();
    state["options"]["offload-persist"] = "false".into();
    state["options"]["hw-offload"] = "false".into();
    std::fs::write(&d.state, state.to_string()).unwrap();
    d.restart();
    assert!(
        pins.pinned(&a.port).is_empty(),
        "{:?}",
        pins.pinned(&a.port)
    );
    assert!(
        vsw_netdev::ebpf::attached_programs(&a.port).is_empty(),
        "an earlier run's classifier still attached\n{}",
        d.log()
    );
    // Detached, not left to the kernel's deferred release of an unlinked pin.
    assert!(!d.log().contains("pinned link not detached"), "{}", d.log());
    let before = received(&b);
    a.send_raw(&frame, 20);
    // Userspace forwards it now (hw-offload off): each frame once.
    assert_eq!(settle(&b, before, 20), 20);
    assert!(d.stop());
    // The bpffs is the test's own: nothing of it can be left.
    assert!(!Path::new(&pins.root()).join(&a.port).exists());
}

/// With a database, what an earlier run pinned goes before vswd waits for the
/// database: no fast path forwards by a configuration vswd has not read while the
/// server is down.
#[test]
fn pins_no_port_adopts_go_before_vswd_waits_for_its_database() {
    let _g = serial();
    let pins = BpfFs::mount();
    let mut d = vswd(&pins);
    let (a, b) = quiet_hosts();
    let frame = udp_frame(&a, &b, 4600);
    let out = format!("output:{}", b.port);
    offloaded(&d, &a, &b, &udp_flow(&a, &b, 4600, &out), &frame);
    assert!(d.stop());
    assert!(!pins.pinned(&a.port).is_empty(), "pinned for the next run");
    // The next run is told of a database that is not there.
    let mut db = vsw_e2e::ovsdb::OvsdbServer::start();
    let target = db.target();
    db.stop();
    let d2 = Vswd::start_with_args(&[
        "--bpf-pin-dir",
        pins.root().to_str().unwrap(),
        "--ovsdb",
        &target,
    ]);
    wait_until(
        "the earlier run's pins to go",
        Duration::from_secs(5),
        || pins.pinned(&a.port).is_empty() && pins.pinned(&b.port).is_empty(),
    );
    assert!(
        vsw_netdev::ebpf::attached_programs(&a.port).is_empty(),
        "the classifier forwards on with no configuration read"
    );
    drop(d2);
}
