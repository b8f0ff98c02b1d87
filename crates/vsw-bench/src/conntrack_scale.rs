//! The connection tracker at scale, in memory (no packets, no devices): a million
//! connections committed (new connections per second, memory per connection),
//! looked up by one thread and by two, a zone of 100,000 flushed and the whole
//! table swept while another thread keeps looking up — how long each takes, and
//! the longest any one lookup waited meanwhile (a PMD's stall).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use vsw_conntrack::{Commit, Conntrack, CtPacket, Timeouts, Tuple};

/// What one run measured.
#[derive(Debug)]
pub struct ScaleReport {
    pub connections: usize,
    pub commits_per_sec: f64,
    pub bytes_per_connection: f64,
    pub lookup_ns_one_thread: f64,
    pub lookups_per_sec_one_thread: f64,
    pub lookups_per_sec_two_threads: f64,
    pub flushed: usize,
    pub flush_ms: f64,
    /// The longest single lookup of the other thread while the flush ran, and
    /// while nothing else did (the machine's own noise).
    pub worst_lookup_during_flush_us: f64,
    pub worst_lookup_idle_us: f64,
    pub sweep_ms: f64,
    pub worst_lookup_during_sweep_us: f64,
}

const FLUSHED_ZONE: u16 = 2;
const KEPT_ZONE: u16 = 1;

/// Connection `i`'s packet: UDP from 10.0.0.0/8, a port of its own.
fn packet(i: usize) -> CtPacket {
    CtPacket {
        tuple: Tuple {
            src: u128::from(0x0a00_0000u32 | (i as u32 >> 8)),
            dst: u128::from(0xc612_0002u32),
            src_port: 1024 + (i & 0xff) as u16,
            dst_port: 53,
            proto: vsw_conntrack::tuple::IPPROTO_UDP,
            ..Tuple::default()
        },
        ..CtPacket::default()
    }
}

fn zone_of(i: usize, flushed: usize) -> u16 {
    if i < flushed {
        FLUSHED_ZONE
    } else {
        KEPT_ZONE
    }
}

/// The process's resident memory, bytes.
fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// Visits 0..n in an order that jumps about the table (a stride prime to n).
fn scattered(n: usize) -> impl Iterator<Item = usize> {
    let stride = 7_919usize;
    (0..n).map(move |k| (k * stride) % n)
}

/// Looks up connections of the kept zone (from `flushed` on) until `stop`; the
/// longest single lookup.
fn look_up_until(ct: &Conntrack, n: usize, flushed: usize, stop: &AtomicBool) -> Duration {
    let mut worst = Duration::ZERO;
    let kept = n - flushed;
    let mut k = 0usize;
    while !stop.load(Ordering::Relaxed) {
        let i = flushed + (k * 7_919) % kept;
        let t = Instant::now();
        std::hint::black_box(ct.execute(&packet(i), KEPT_ZONE, None, 0));
        worst = worst.max(t.elapsed());
        k += 1;
    }
    worst
}

/// While `work` runs on this thread, another looks up; how long `work` took, what
/// it returned, and the other's longest lookup.
fn with_lookups<T>(
    ct: &Conntrack,
    n: usize,
    flushed: usize,
    work: impl FnOnce() -> T,
) -> (Duration, T, Duration) {
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let looker = s.spawn(|| look_up_until(ct, n, flushed, &stop));
        // The looker well under way first.
        std::thread::sleep(Duration::from_millis(50));
        let t = Instant::now();
        let out = work();
        let took = t.elapsed();
        stop.store(true, Ordering::Relaxed);
        (took, out, looker.join().expect("the looker"))
    })
}

/// Commits `n` connections (`flushed` of them in a zone of their own), then
/// measures lookups, a zone flush and a sweep.
pub fn run(n: usize, flushed: usize) -> ScaleReport {
    assert!(flushed < n, "the flushed zone is part of the table");
    let ct = Conntrack::new(Timeouts::default());
    let commit = Commit::default();
    let before = resident_bytes();
    let t = Instant::now();
    for i in 0..n {
        let out = ct.execute(&packet(i), zone_of(i, flushed), Some(&commit), 0);
        std::hint::black_box(out);
    }
    let commit_secs = t.elapsed().as_secs_f64();
    let bytes = resident_bytes().saturating_sub(before);
    assert_eq!(ct.len(), n, "every connection committed");

    let t = Instant::now();
    for i in scattered(n) {
        std::hint::black_box(ct.execute(&packet(i), zone_of(i, flushed), None, 0));
    }
    let one = t.elapsed().as_secs_f64();
    let t = Instant::now();
    std::thread::scope(|s| {
        for half in 0..2 {
            let ct = &ct;
            s.spawn(move || {
                for i in scattered(n).filter(|i| i % 2 == half) {
                    std::hint::black_box(ct.execute(&packet(i), zone_of(i, flushed), None, 0));
                }
            });
        }
    });
    let two = t.elapsed().as_secs_f64();

    // The machine's own noise: the same lookups with nothing else running.
    let (_, (), idle) = with_lookups(&ct, n, flushed, || {
        std::thread::sleep(Duration::from_millis(200))
    });
    let (flush, gone, during_flush) = with_lookups(&ct, n, flushed, || ct.flush_zone(FLUSHED_ZONE));
    assert_eq!(gone, flushed, "the zone's connections, all of them");
    // Nothing expired at time 0: the sweep's walk of the whole table alone.
    let (sweep, _, during_sweep) = with_lookups(&ct, n, flushed, || ct.sweep(0));
    ScaleReport {
        connections: n,
        commits_per_sec: n as f64 / commit_secs,
        bytes_per_connection: bytes as f64 / n as f64,
        lookup_ns_one_thread: one * 1e9 / n as f64,
        lookups_per_sec_one_thread: n as f64 / one,
        lookups_per_sec_two_threads: n as f64 / two,
        flushed: gone,
        flush_ms: flush.as_secs_f64() * 1e3,
        worst_lookup_during_flush_us: during_flush.as_secs_f64() * 1e6,
        worst_lookup_idle_us: idle.as_secs_f64() * 1e6,
        sweep_ms: sweep.as_secs_f64() * 1e3,
        worst_lookup_during_sweep_us: during_sweep.as_secs_f64() * 1e6,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_run_commits_finds_and_flushes_what_it_says() {
        let r = run(2_000, 500);
        assert_eq!(r.connections, 2_000);
        assert_eq!(r.flushed, 500);
        assert!(r.commits_per_sec > 0.0 && r.lookups_per_sec_two_threads > 0.0);
    }

    #[test]
    fn every_connection_has_a_tuple_of_its_own() {
        let n = 1 << 20;
        let tuples: std::collections::HashSet<Tuple> = (0..n).map(|i| packet(i).tuple).collect();
        assert_eq!(tuples.len(), n);
    }
}
