//! One-way latency bookkeeping: an HDR histogram of nanoseconds.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Latencies above this (10 s) are clamped: something is badly wrong by then.
const MAX_NS: u64 = 10_000_000_000;

#[derive(Debug)]
pub struct LatencyRecorder {
    hist: Histogram<u64>,
}

impl Default for LatencyRecorder {
    fn default() -> Self {
        LatencyRecorder::new()
    }
}

/// The summary a report shows, in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    pub count: u64,
    pub min_us: f64,
    pub avg_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
}

impl LatencyRecorder {
    pub fn new() -> LatencyRecorder {
        LatencyRecorder {
            // Three significant digits from 1 ns to 10 s.
            hist: Histogram::new_with_bounds(1, MAX_NS, 3).expect("valid histogram bounds"),
        }
    }

    /// Records one latency. A negative one (clocks that disagree) counts as 0.
    pub fn record(&mut self, ns: i64) {
        let v = (ns.max(1) as u64).min(MAX_NS);
        self.hist.saturating_record(v);
    }

    pub fn merge(&mut self, other: &LatencyRecorder) {
        // Same bounds on both sides, so adding cannot fail.
        let _ = self.hist.add(&other.hist);
    }

    pub fn summary(&self) -> LatencySummary {
        let h = &self.hist;
        if h.is_empty() {
            return LatencySummary::default();
        }
        let us = |ns: u64| ns as f64 / 1000.0;
        LatencySummary {
            count: h.len(),
            min_us: us(h.min()),
            avg_us: h.mean() / 1000.0,
            p50_us: us(h.value_at_quantile(0.5)),
            p99_us: us(h.value_at_quantile(0.99)),
            p999_us: us(h.value_at_quantile(0.999)),
            max_us: us(h.max()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_a_known_distribution() {
        let mut r = LatencyRecorder::new();
        for i in 1..=1000 {
            r.record(i * 1000); // 1 .. 1000 us
        }
        let s = r.summary();
        assert_eq!(s.count, 1000);
        assert!((s.min_us - 1.0).abs() < 0.01);
        assert!((s.max_us - 1000.0).abs() < 1.0);
        assert!((s.p50_us - 500.0).abs() < 1.0, "{s:?}");
        assert!((s.p99_us - 990.0).abs() < 1.0, "{s:?}");
        assert!((s.avg_us - 500.5).abs() < 1.0, "{s:?}");
    }

    #[test]
    fn empty_and_odd_inputs() {
        assert_eq!(LatencyRecorder::new().summary(), LatencySummary::default());
        let mut r = LatencyRecorder::new();
        r.record(-5);
        r.record(i64::MAX);
        let s = r.summary();
        assert_eq!(s.count, 2);
        assert!(s.min_us <= 0.001);
        assert!(s.max_us <= 10_010_000.0, "clamped near 10 s: {s:?}");
    }

    #[test]
    fn merge_adds_counts() {
        let (mut a, mut b) = (LatencyRecorder::new(), LatencyRecorder::new());
        a.record(1000);
        b.record(3000);
        a.merge(&b);
        assert_eq!(a.summary().count, 2);
        assert!((a.summary().avg_us - 2.0).abs() < 0.01);
    }
}
