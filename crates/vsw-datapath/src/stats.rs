//! Counters, written by PMDs once per batch and read by the control plane.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::txbatch::{batch_bucket, Sent, BATCH_BUCKETS};
pub use vsw_protocol::{PmdRxqView, PmdStatsView, PortStatsView, RxqView};

/// Per-port counters. Drops are kept by reason.
#[derive(Debug, Default)]
pub struct PortStats {
    pub rx_packets: AtomicU64,
    pub rx_bytes: AtomicU64,
    pub tx_packets: AtomicU64,
    pub tx_bytes: AtomicU64,
    pub tx_batches: AtomicU64,
    /// Frames too short or with broken headers.
    pub rx_malformed: AtomicU64,
    /// Frames longer than the receive buffer.
    pub rx_truncated: AtomicU64,
    /// Frames the kernel dropped because the receive ring was full.
    pub rx_overrun: AtomicU64,
    /// Packets for this port dropped because its transmit queue was full.
    pub tx_queue_full: AtomicU64,
    /// Packets larger than this port's transmit buffer.
    pub tx_too_big: AtomicU64,
    /// Packets the device refused to send.
    pub tx_errors: AtomicU64,
    /// Frames larger than this port's MTU (and not segmentable): dropped, never cut.
    pub tx_mtu_drops: AtomicU64,
    /// Segments vsw cut super-frames into for this port (it could not take them).
    pub tx_gso_segments: AtomicU64,
    /// Super-frames vsw would not cut: headers it cannot segment, or more than
    /// `gso::MAX_SEGMENTS` segments (a segment size far too small).
    pub tx_gso_refused: AtomicU64,
    /// Checksums vsw completed for this port (it could not finish them itself).
    pub tx_csum_sw: AtomicU64,
    /// TCP segments vsw merged into super-frames for this port.
    pub tx_gro_segments: AtomicU64,
    /// Batches sent by size: 1, 2–3, 4–7, 8–15, 16–31, 32+ packets.
    pub tx_batch_hist: [AtomicU64; BATCH_BUCKETS],
    /// Time packets waited in an output batch: all added up, and the longest (µs).
    pub tx_wait_us_sum: AtomicU64,
    pub tx_wait_us_max: AtomicU64,
}

fn add(c: &AtomicU64, n: u64) {
    if n != 0 {
        c.fetch_add(n, Ordering::Relaxed);
    }
}

impl PortStats {
    pub(crate) fn add_rx(&self, packets: u64, bytes: u64) {
        add(&self.rx_packets, packets);
        add(&self.rx_bytes, bytes);
    }

    pub(crate) fn add_tx(&self, packets: u64, bytes: u64) {
        add(&self.tx_packets, packets);
        add(&self.tx_bytes, bytes);
        add(&self.tx_batches, 1);
    }

    pub(crate) fn add_drop(c: &AtomicU64, n: u64) {
        add(c, n);
    }

    /// One output batch left: its size and how long its packets waited.
    pub(crate) fn add_batch(&self, sent: &Sent) {
        if sent.packets == 0 {
            return;
        }
        add(&self.tx_batch_hist[batch_bucket(sent.packets)], 1);
        add(&self.tx_wait_us_sum, sent.wait_sum_us);
        self.tx_wait_us_max
            .fetch_max(sent.max_wait_us, Ordering::Relaxed);
    }

    pub fn view(&self) -> PortStatsView {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        PortStatsView {
            rx_packets: g(&self.rx_packets),
            rx_bytes: g(&self.rx_bytes),
            tx_packets: g(&self.tx_packets),
            tx_bytes: g(&self.tx_bytes),
            tx_batches: g(&self.tx_batches),
            rx_malformed: g(&self.rx_malformed),
            rx_truncated: g(&self.rx_truncated),
            rx_overrun: g(&self.rx_overrun),
            tx_queue_full: g(&self.tx_queue_full),
            tx_too_big: g(&self.tx_too_big),
            tx_errors: g(&self.tx_errors),
            tx_mtu_drops: g(&self.tx_mtu_drops),
            tx_gso_segments: g(&self.tx_gso_segments),
            tx_gso_refused: g(&self.tx_gso_refused),
            tx_csum_sw: g(&self.tx_csum_sw),
            tx_gro_segments: g(&self.tx_gro_segments),
            tx_batch_hist: std::array::from_fn(|i| g(&self.tx_batch_hist[i])),
            tx_wait_us_sum: g(&self.tx_wait_us_sum),
            tx_wait_us_max: g(&self.tx_wait_us_max),
        }
    }
}

/// Per-PMD counters. The PMD is their only writer; it stores its running totals
/// once per loop iteration.
#[derive(Debug, Default)]
pub(crate) struct PmdStats {
    pub packets: AtomicU64,
    pub emc_hits: AtomicU64,
    pub megaflow_hits: AtomicU64,
    pub upcalls: AtomicU64,
    pub lost_upcalls: AtomicU64,
    pub recirculations: AtomicU64,
    pub uncached_upcalls: AtomicU64,
    pub lost: AtomicU64,
    pub subtable_lookups: AtomicU64,
    pub busy_cycles: AtomicU64,
    pub idle_cycles: AtomicU64,
    pub iterations: AtomicU64,
    pub tx_batches: AtomicU64,
    pub tx_packets: AtomicU64,
    pub max_iteration_cycles: AtomicU64,
    pub max_reconfigure_cycles: AtomicU64,
    pub sleep_cycles: AtomicU64,
    /// Datapath flows in the PMD's table (a gauge; `/metrics` reads it without the
    /// flow registry's lock, which the PMD takes on upcalls).
    pub flows: AtomicU64,
}

/// A PMD's running totals, kept in plain integers on the PMD's own stack.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PmdCounters {
    pub packets: u64,
    pub emc_hits: u64,
    pub megaflow_hits: u64,
    pub upcalls: u64,
    pub lost_upcalls: u64,
    /// Passes of packets after their first (`DpAction::Recirc`).
    pub recirculations: u64,
    pub uncached_upcalls: u64,
    pub lost: u64,
    pub subtable_lookups: u64,
    pub busy_cycles: u64,
    pub idle_cycles: u64,
    pub iterations: u64,
    pub tx_batches: u64,
    pub tx_packets: u64,
    /// The longest loop iteration (a reconfiguration included) since the last clear.
    pub max_iteration_cycles: u64,
    /// The longest time taking up a new snapshot since the last clear.
    pub max_reconfigure_cycles: u64,
    /// Cycles spent sleeping while idle (`pmd-sleep-max`), part of the idle cycles.
    pub sleep_cycles: u64,
    /// Datapath flows in the PMD's table now.
    pub flows: u64,
}

impl PmdStats {
    pub fn publish(&self, c: &PmdCounters) {
        let set = |a: &AtomicU64, v: u64| a.store(v, Ordering::Relaxed);
        set(&self.packets, c.packets);
        set(&self.emc_hits, c.emc_hits);
        set(&self.megaflow_hits, c.megaflow_hits);
        set(&self.upcalls, c.upcalls);
        set(&self.lost_upcalls, c.lost_upcalls);
        set(&self.recirculations, c.recirculations);
        set(&self.uncached_upcalls, c.uncached_upcalls);
        set(&self.lost, c.lost);
        set(&self.subtable_lookups, c.subtable_lookups);
        set(&self.busy_cycles, c.busy_cycles);
        set(&self.idle_cycles, c.idle_cycles);
        set(&self.iterations, c.iterations);
        set(&self.tx_batches, c.tx_batches);
        set(&self.tx_packets, c.tx_packets);
        set(&self.max_iteration_cycles, c.max_iteration_cycles);
        set(&self.max_reconfigure_cycles, c.max_reconfigure_cycles);
        set(&self.sleep_cycles, c.sleep_cycles);
        set(&self.flows, c.flows);
    }

    pub fn view(&self, core: usize, hz: u64) -> PmdStatsView {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        PmdStatsView {
            core,
            packets: g(&self.packets),
            emc_hits: g(&self.emc_hits),
            megaflow_hits: g(&self.megaflow_hits),
            upcalls: g(&self.upcalls),
            lost_upcalls: g(&self.lost_upcalls),
            recirculations: g(&self.recirculations),
            uncached_upcalls: g(&self.uncached_upcalls),
            lost: g(&self.lost),
            subtable_lookups: g(&self.subtable_lookups),
            busy_cycles: g(&self.busy_cycles),
            idle_cycles: g(&self.idle_cycles),
            iterations: g(&self.iterations),
            tx_batches: g(&self.tx_batches),
            tx_packets: g(&self.tx_packets),
            max_iteration_cycles: g(&self.max_iteration_cycles),
            max_reconfigure_cycles: g(&self.max_reconfigure_cycles),
            sleep_cycles: g(&self.sleep_cycles),
            flows: g(&self.flows),
            cycles_per_second: hz,
        }
    }
}

/// A receive queue's load since it was assigned to its PMD, kept by that PMD.
#[derive(Debug, Default)]
pub(crate) struct RxqStats {
    /// Cycles spent on batches from this queue.
    pub busy_cycles: AtomicU64,
    /// All cycles of the PMD over the same time.
    pub pmd_cycles: AtomicU64,
}

impl RxqStats {
    pub fn usage_percent(&self) -> Option<f64> {
        let total = self.pmd_cycles.load(Ordering::Relaxed);
        (total > 0).then(|| 100.0 * self.busy_cycles.load(Ordering::Relaxed) as f64 / total as f64)
    }

    /// Busy fraction in parts per million (for placing queues by load).
    pub fn load_ppm(&self) -> u64 {
        let total = self.pmd_cycles.load(Ordering::Relaxed);
        if total == 0 {
            return 0;
        }
        (u128::from(self.busy_cycles.load(Ordering::Relaxed)) * 1_000_000 / u128::from(total))
            as u64
    }
}
