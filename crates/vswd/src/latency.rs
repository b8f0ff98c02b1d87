//! How long the switch takes to answer control requests (vswctl, OpenFlow, OVSDB,
//! ovs-appctl all come through `Switch::handle`), by request kind, in fixed buckets:
//! what `/metrics` exports as `vsw_control_request_duration_seconds`. Recorded under
//! the switch's control lock (never a PMD's), one observation per request.

use std::collections::BTreeMap;
use std::time::Duration;

/// Upper bounds of the buckets, in seconds: 100 µs to 10 s (a rule change with its
/// revalidation is milliseconds; adding a thousand ports, seconds).
pub const BUCKETS: [f64; 16] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

/// Observations of one request kind.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LatencyHistogram {
    /// Per bucket of [`BUCKETS`], then one for anything longer (not cumulative).
    pub counts: [u64; BUCKETS.len() + 1],
    pub sum_seconds: f64,
    pub count: u64,
}

impl LatencyHistogram {
    pub fn observe(&mut self, took: Duration) {
        let s = took.as_secs_f64();
        let at = BUCKETS
            .iter()
            .position(|b| s <= *b)
            .unwrap_or(BUCKETS.len());
        self.counts[at] += 1;
        self.sum_seconds += s;
        self.count += 1;
    }

    /// (upper bound, count in that bucket), the last one's bound infinite.
    pub fn buckets(&self) -> Vec<(f64, u64)> {
        BUCKETS
            .iter()
            .copied()
            .chain([f64::INFINITY])
            .zip(self.counts)
            .collect()
    }
}

/// Every request kind's histogram.
#[derive(Clone, Debug, Default)]
pub struct Latencies(BTreeMap<&'static str, LatencyHistogram>);

impl Latencies {
    pub fn observe(&mut self, kind: &'static str, took: Duration) {
        self.0.entry(kind).or_default().observe(took);
    }

    pub fn snapshot(&self) -> Vec<(&'static str, LatencyHistogram)> {
        self.0.iter().map(|(k, h)| (*k, h.clone())).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_observation_lands_in_the_first_bucket_that_holds_it() {
        let mut h = LatencyHistogram::default();
        h.observe(Duration::from_micros(50));
        h.observe(Duration::from_micros(100));
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_secs(60));
        let b = h.buckets();
        assert_eq!(b[0], (0.0001, 2), "50 µs and exactly 100 µs");
        assert_eq!(b[5], (0.005, 1), "3 ms");
        assert_eq!(b[16].1, 1, "a minute: beyond the last bound");
        assert!(b[16].0.is_infinite());
        assert_eq!(h.count, 4);
        assert!((h.sum_seconds - 60.00315).abs() < 1e-9);
    }

    #[test]
    fn kinds_are_kept_apart() {
        let mut l = Latencies::default();
        l.observe("add-flow", Duration::from_millis(1));
        l.observe("add-flow", Duration::from_millis(2));
        l.observe("show", Duration::from_micros(10));
        let s = l.snapshot();
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].0, s[0].1.count), ("add-flow", 2));
        assert_eq!((s[1].0, s[1].1.count), ("show", 1));
    }
}
