//! Counters, written by PMDs once per batch and read by the control plane.

use std::sync::atomic::{AtomicU64, Ordering};

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
}

/// A copy of [`PortStats`] at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PortStatsView {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub tx_batches: u64,
    pub rx_malformed: u64,
    pub rx_truncated: u64,
    pub rx_overrun: u64,
    pub tx_queue_full: u64,
    pub tx_too_big: u64,
    pub tx_errors: u64,
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
        }
    }
}

impl PortStatsView {
    pub fn rx_dropped(&self) -> u64 {
        self.rx_malformed + self.rx_truncated + self.rx_overrun
    }

    pub fn tx_dropped(&self) -> u64 {
        self.tx_queue_full + self.tx_too_big + self.tx_errors
    }
}

/// Per-PMD counters. The PMD is their only writer.
#[derive(Debug, Default)]
pub(crate) struct PmdStats {
    pub packets: AtomicU64,
    pub busy_cycles: AtomicU64,
    pub idle_cycles: AtomicU64,
    pub iterations: AtomicU64,
    pub rule_hits: AtomicU64,
    pub rule_misses: AtomicU64,
}

/// A copy of one PMD's counters at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PmdStatsView {
    pub core: Option<usize>,
    pub packets: u64,
    /// Packets that matched a rule.
    pub rule_hits: u64,
    /// Packets no rule matched (handled as `normal`).
    pub rule_misses: u64,
    pub busy_cycles: u64,
    pub idle_cycles: u64,
    pub iterations: u64,
    pub cycles_per_second: u64,
}

impl PmdStatsView {
    pub fn avg_cycles_per_packet(&self) -> Option<f64> {
        (self.packets > 0).then(|| self.busy_cycles as f64 / self.packets as f64)
    }

    /// Counters since `base` (what `pmd-stats-clear` recorded).
    pub fn since(&self, base: &PmdStatsView) -> PmdStatsView {
        PmdStatsView {
            core: self.core,
            packets: self.packets.saturating_sub(base.packets),
            rule_hits: self.rule_hits.saturating_sub(base.rule_hits),
            rule_misses: self.rule_misses.saturating_sub(base.rule_misses),
            busy_cycles: self.busy_cycles.saturating_sub(base.busy_cycles),
            idle_cycles: self.idle_cycles.saturating_sub(base.idle_cycles),
            iterations: self.iterations.saturating_sub(base.iterations),
            cycles_per_second: self.cycles_per_second,
        }
    }
}

impl PmdStats {
    pub fn view(&self, core: Option<usize>, hz: u64) -> PmdStatsView {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        PmdStatsView {
            core,
            packets: g(&self.packets),
            rule_hits: g(&self.rule_hits),
            rule_misses: g(&self.rule_misses),
            busy_cycles: g(&self.busy_cycles),
            idle_cycles: g(&self.idle_cycles),
            iterations: g(&self.iterations),
            cycles_per_second: hz,
        }
    }
}
