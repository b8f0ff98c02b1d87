//! Measurements for docs/BENCHMARKS.md, run by hand (they print figures and assert
//! only that the set-up worked):
//! `cargo test --release -p vsw-e2e --test guest_batching -- --ignored --nocapture --test-threads 1`
//!
//! A paced `ring` port (evenly spaced 64-byte UDP frames, generated inside the PMD so
//! that no generator competes for the guest's CPU) streams through vsw to a guest on a
//! vhostuser port; the port's `tx-flush-interval` alternates between modes in
//! interleaved rounds. Per mode: packets delivered into the guest per second,
//! notifications (call eventfd writes) per packet, output batches per packet, the
//! wait vsw added per packet, and the PMD's busy cycles per packet.

use std::time::Duration;

use vsw_e2e::qemu::Guest;
use vsw_e2e::{serial, wait_until, Vswd};

const ROUNDS: usize = 3;
const WINDOW: Duration = Duration::from_secs(5);

/// Counters that the figures are differences of.
#[derive(Clone, Copy, Default)]
struct Sample {
    delivered: u64,
    batches: u64,
    waited_us: u64,
    notifications: u64,
    no_buffer: u64,
    busy_cycles: u64,
    pmd_packets: u64,
}

fn counter(info: &str, name: &str) -> u64 {
    info.split(&format!("{name} "))
        .nth(1)
        .and_then(|v| v.split([',', ' ']).next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{name} in {info}"))
}

fn sample(d: &Vswd) -> Sample {
    let vm = d.port("vm");
    let info = vm.vhost_guest.unwrap_or_default();
    let pmds = d.pmd_stats();
    Sample {
        delivered: vm.stats.tx_packets,
        batches: vm.stats.tx_batches,
        waited_us: vm.stats.tx_wait_us_sum,
        notifications: counter(&info, "notifications"),
        no_buffer: counter(&info, "no buffer"),
        busy_cycles: pmds.iter().map(|p| p.busy_cycles).sum(),
        pmd_packets: pmds.iter().map(|p| p.packets).sum(),
    }
}

/// Runs the rounds with the given port settings; prints one line per mode (medians).
fn measure(d: &Vswd, modes: &[&str], label: &str) {
    let mut rows: Vec<Vec<[f64; 6]>> = vec![Vec::new(); modes.len()];
    for _ in 0..ROUNDS {
        for (m, mode) in modes.iter().enumerate() {
            d.ctl_ok(&["set-port", "vm", &format!("tx-flush-interval={mode}")]);
            std::thread::sleep(Duration::from_secs(1));
            let a = sample(d);
            std::thread::sleep(WINDOW);
            let b = sample(d);
            let pkts = (b.delivered - a.delivered).max(1) as f64;
            rows[m].push([
                pkts / WINDOW.as_secs_f64(),
                (b.notifications - a.notifications) as f64 / pkts,
                (b.batches - a.batches) as f64 / pkts,
                (b.waited_us - a.waited_us) as f64 / pkts,
                (b.busy_cycles - a.busy_cycles) as f64
                    / (b.pmd_packets - a.pmd_packets).max(1) as f64,
                (b.no_buffer - a.no_buffer) as f64 / WINDOW.as_secs_f64(),
            ]);
        }
    }
    println!("{label}: medians of {ROUNDS} interleaved {WINDOW:?} windows");
    println!("| tx-flush-interval | delivered pkt/s | notifications/pkt | batches/pkt | wait µs/pkt | PMD busy cycles/pkt | dropped (no buffer)/s |");
    println!("|---|---|---|---|---|---|---|");
    for (m, mode) in modes.iter().enumerate() {
        let med = |k: usize| {
            let mut v: Vec<f64> = rows[m].iter().map(|r| r[k]).collect();
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        println!(
            "| {mode} | {:.0} | {:.3} | {:.3} | {:.1} | {:.0} | {:.0} |",
            med(0),
            med(1),
            med(2),
            med(3),
            med(4),
            med(5)
        );
    }
}

fn set_up(d: &Vswd) {
    d.ctl_ok(&["add-port", "vm", "type=vhostuser"]);
}

/// The rates to offer: `VSW_GUEST_RATES` (comma-separated frames per second) or
/// `default`.
fn rates(default: &str) -> Vec<u32> {
    std::env::var("VSW_GUEST_RATES")
        .unwrap_or_else(|_| default.to_string())
        .split(',')
        .map(|r| r.trim().parse().expect("a rate in frames per second"))
        .collect()
}

/// Starts (or re-paces) the stream at `rate` frames per second.
fn start_stream(d: &Vswd, rate: u32) {
    let before = d.port("vm").stats.tx_packets;
    if d.ports().iter().any(|p| p.name == "gen") {
        d.ctl_ok(&["set-port", "gen", &format!("ring-rate={rate}")]);
    } else {
        d.ctl_ok(&[
            "add-port",
            "gen",
            "type=ring",
            "ring-flows=1",
            &format!("ring-rate={rate}"),
        ]);
        d.ctl_ok(&["add-flow", "in_port=gen,actions=output:vm"]);
    }
    wait_until("frames reaching the guest", Duration::from_secs(10), || {
        d.port("vm").stats.tx_packets > before + 1000
    });
}

#[test]
#[ignore = "a measurement: run by hand with --ignored --nocapture"]
fn interrupt_driven_guest_notifications_with_interval_0_and_auto() {
    let _g = serial();
    let d = Vswd::start();
    set_up(&d);
    let sock = d.port("vm").vhost_server_path.expect("socket");
    let guest = Guest::boot(&sock, false, "echo VSW-READY");
    guest
        .wait_for("VSW-READY", Duration::from_secs(90))
        .unwrap();
    for rate in rates("20000,100000") {
        start_stream(&d, rate);
        measure(
            &d,
            &["0", "auto"],
            &format!("QEMU (TCG) guest, virtio-net driver, {rate} pkt/s offered"),
        );
    }
    assert!(d.port("vm").stats.tx_packets > 0);
}

#[test]
#[ignore = "a measurement: run by hand with --ignored --nocapture"]
fn poll_mode_guest_pays_no_interval_with_auto() {
    let _g = serial();
    let d = Vswd::start();
    set_up(&d);
    let sock = d.port("vm").vhost_server_path.expect("socket");
    let prefix = vsw_e2e::unique("tp");
    let testpmd = vsw_e2e::testpmd(&sock, &prefix, false, 1, "rxonly", 120);
    wait_until("testpmd's link", Duration::from_secs(20), || {
        d.port("vm")
            .vhost_guest
            .is_some_and(|g| g.contains("link up"))
    });
    for rate in rates("50000") {
        start_stream(&d, rate);
        measure(
            &d,
            &["0", "auto", "50"],
            &format!("testpmd rxonly (poll mode), {rate} pkt/s offered"),
        );
    }
    vsw_e2e::end(testpmd);
}
