//! The offload seed's experiment in small, for docs/BENCHMARKS.md (run by hand; it
//! prints figures and asserts only that the set-up worked):
//! `cargo test --release -p vsw-e2e --test offload_experiment -- --ignored --nocapture --test-threads 1`
//!
//! A provider (ebpf) with room for N flows; N slow flows are offloaded first, then N
//! fast flows start. The PMD's busy time per second is measured with rebalancing off
//! (the fast flows stay in userspace) and on (they displace the slow ones); then one
//! offload pass is timed with 1,000 flows installed.

use std::time::Duration;

use vsw_e2e::{serial, udp_frame, wait_until, Host, Vswd};

const N: u16 = 8;

fn flow(a: &Host, b: &Host, sport: u16) -> String {
    format!(
        "priority=10,in_port={},udp,nw_src={},nw_dst={},tp_src={sport},tp_dst=5001,actions=output:{}",
        a.port, a.addr, b.addr, b.port
    )
}

/// One frame of each source port from `a` to `b`, in one process: a datapath flow is
/// offloaded once a packet made it.
fn prime(a: &Host, b: &Host, sports: impl Iterator<Item = u16>) {
    let frames: Vec<String> = sports
        .map(|p| format!("'{}'", udp_frame(a, b, p)))
        .collect();
    let script = format!(
        "import socket\ns = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)\ns.bind(('eth0', 0))\n\
         for f in [{}]: s.send(bytes.fromhex(f))\n",
        frames.join(",")
    );
    a.exec_ok(&["python3", "-c", &script]);
}

/// PMD busy seconds and packets so far.
fn pmd(d: &Vswd) -> (f64, u64) {
    let hz = vsw_datapath::clock::cycles_per_second() as f64;
    let s = d.pmd_stats();
    (
        s.iter().map(|p| p.busy_cycles as f64).sum::<f64>() / hz,
        s.iter().map(|p| p.packets).sum(),
    )
}

fn window(d: &Vswd, label: &str) {
    let (b0, p0) = pmd(d);
    std::thread::sleep(Duration::from_secs(5));
    let (b1, p1) = pmd(d);
    let offloaded = d.flows_of("offloaded");
    let fast = offloaded
        .iter()
        .filter(|f| {
            f.matching
                .split("tp_src=")
                .nth(1)
                .and_then(|v| v.split(',').next())
                .and_then(|v| v.parse::<u16>().ok())
                .is_some_and(|p| p >= 5000 + N)
        })
        .count();
    println!(
        "| {label} | {:.1} % | {:.0} | {fast} of {N} |",
        (b1 - b0) / 5.0 * 100.0,
        (p1 - p0) as f64 / 5.0
    );
}

#[test]
#[ignore = "a measurement: run by hand with --ignored --nocapture"]
fn rebalancing_moves_the_fast_flows_into_the_kernel() {
    let _g = serial();
    let d = Vswd::start();
    let (a, b) = (Host::new(1), Host::new(2));
    d.ctl_ok(&[
        "add-port",
        &a.port,
        "offload=ebpf",
        &format!("offload-capacity={N}"),
    ]);
    d.ctl_ok(&["add-port", &b.port]);
    for k in 0..N {
        d.ctl_ok(&["add-flow", &flow(&a, &b, 5000 + k)]);
    }
    d.ctl_ok(&["set", "hw-offload=true", "offload-interval=500"]);
    prime(&a, &b, 5000..5000 + N);
    wait_until("the slow flows offloaded", Duration::from_secs(10), || {
        d.flows_of("offloaded").len() == usize::from(N)
    });
    for k in N..2 * N {
        d.ctl_ok(&["add-flow", &flow(&a, &b, 5000 + k)]);
    }
    // N slow flows at ~100 frames/s each, N fast ones at ~5,000 each, for 30 s.
    let frames: Vec<String> = (0..2 * N)
        .map(|k| {
            let f = format!(
                "{}{}0800450000300000400040110000{}{}{:04x}1389001c0000{}",
                b.mac.replace(':', ""),
                a.mac.replace(':', ""),
                "c6120001",
                "c6120002",
                5000 + k,
                "00".repeat(20)
            );
            format!("bytes.fromhex('{f}')")
        })
        .collect();
    let script = format!(
        "import socket, time\ns = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)\ns.bind(('eth0', 0))\n\
         f = [{}]\nt0 = time.monotonic()\ni = 0\n\
         while time.monotonic() - t0 < 30:\n    for k in range({N}, {}):\n        s.send(f[k])\n    \
         if i % 50 == 0:\n        for k in range({N}):\n            s.send(f[k])\n    i += 1\n    \
         if i % 5 == 0:\n        time.sleep(0.001)\n",
        frames.join(", "),
        2 * N
    );
    let mut gen = std::process::Command::new("ip")
        .args(["netns", "exec", &a.ns, "python3", "-c", &script])
        .spawn()
        .expect("python3");
    std::thread::sleep(Duration::from_secs(2));
    println!("N = {N}: {N} slow flows offloaded first, then {N} fast ones");
    println!("| rebalancing | PMD busy | packets/s through the PMD | fast flows offloaded |");
    println!("|---|---|---|---|");
    window(&d, "off");
    d.ctl_ok(&["set", "offload-rebalance=true"]);
    std::thread::sleep(Duration::from_secs(3));
    window(&d, "on (after 3 s)");
    let show = d.offload_show();
    println!(
        "swaps {}, rebalancing passes {}, last pass {} us",
        show[0].stats.swaps, show[0].stats.rebalance_passes, show[0].stats.last_pass_us
    );
    let _ = gen.wait();
    assert!(show[0].stats.swaps >= u64::from(N));
}

#[test]
#[ignore = "a measurement: run by hand with --ignored --nocapture"]
fn one_offload_pass_over_1000_flows() {
    let _g = serial();
    let d = Vswd::start();
    let (a, b) = (Host::new(1), Host::new(2));
    d.ctl_ok(&["add-port", &a.port, "offload=ebpf", "offload-capacity=500"]);
    d.ctl_ok(&["add-port", &b.port]);
    let rules: String = (0..1000u16)
        .map(|k| flow(&a, &b, 10_000 + k) + "\n")
        .collect();
    let file = d.dir.join("flows.txt");
    std::fs::write(&file, rules).unwrap();
    d.ctl_ok(&["add-flows", file.to_str().unwrap()]);
    d.ctl_ok(&[
        "set",
        "hw-offload=true",
        "offload-rebalance=true",
        "offload-interval=200",
    ]);
    prime(&a, &b, 10_000..11_000);
    wait_until(
        "500 offloaded and passes run",
        Duration::from_secs(20),
        || {
            d.offload_show()
                .first()
                .is_some_and(|p| p.stats.used == 500 && p.stats.passes >= 5)
        },
    );
    let mut us = Vec::new();
    for _ in 0..10 {
        let before = d.offload_show()[0].stats.passes;
        wait_until("the next pass", Duration::from_secs(5), || {
            d.offload_show()[0].stats.passes > before
        });
        us.push(d.offload_show()[0].stats.last_pass_us);
    }
    us.sort_unstable();
    println!(
        "one pass over 1,000 flows (500 offloaded, rebalancing on): median {} us, min {} us, max {} us",
        us[us.len() / 2],
        us[0],
        us[us.len() - 1]
    );
}
