//! Time-based transmit batching: when an output batch that is not full leaves.
//!
//! A batch is sent when it is full, or at the end of a received batch / idle PMD
//! iteration once `now >= last send + interval`. The last-send time is set when a
//! batch actually leaves, so a packet after a quiet gap longer than the interval
//! goes out at once; interval 0 sends at the end of every received batch. A packet
//! thus waits at most its interval plus one PMD iteration. Time is the PMD's own, in
//! microseconds, taken once per iteration; nothing here reads a clock.

use std::fmt;
use std::str::FromStr;

/// The largest interval accepted (one second).
pub const MAX_INTERVAL_US: u32 = 1_000_000;

/// A port's `tx-flush-interval` setting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum FlushSetting {
    /// Follow the switch-wide value.
    #[default]
    Switch,
    /// This many microseconds.
    Port(u32),
    /// The interval applies only while the port's receiver wants to be notified
    /// (a vhost-user guest that has not set VRING_AVAIL_F_NO_INTERRUPT); a receiver
    /// that polls gets 0. For afpacket and tap ports, whose receiver is the kernel,
    /// `auto` is the switch-wide value.
    Auto,
}

impl FromStr for FlushSetting {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "auto" {
            return Ok(FlushSetting::Auto);
        }
        parse_interval(s).map(FlushSetting::Port)
    }
}

impl fmt::Display for FlushSetting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FlushSetting::Switch => f.write_str("switch"),
            FlushSetting::Port(us) => write!(f, "{us}"),
            FlushSetting::Auto => f.write_str("auto"),
        }
    }
}

/// A number of microseconds, 0..=1,000,000.
pub fn parse_interval(s: &str) -> Result<u32, String> {
    s.parse::<u32>()
        .ok()
        .filter(|v| *v <= MAX_INTERVAL_US)
        .ok_or_else(|| format!("'{s}' is not a number of microseconds 0..{MAX_INTERVAL_US}"))
}

/// What `auto` uses for a receiver that wants notifications when no switch-wide
/// interval is set.
pub const AUTO_DEFAULT_US: u32 = 50;

/// Where a port's interval in effect comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum IntervalSource {
    Port,
    Switch,
    Auto,
}

/// The interval in effect for a port (microseconds) and where it comes from.
pub fn effective_interval(port: FlushSetting, switch_us: u32) -> (u32, IntervalSource) {
    match port {
        FlushSetting::Port(us) => (us, IntervalSource::Port),
        FlushSetting::Switch => (switch_us, IntervalSource::Switch),
        // No port type here has a receiver that polls; see `FlushSetting::Auto`.
        FlushSetting::Auto => (switch_us, IntervalSource::Auto),
    }
}

/// One output batch's clock: when it last left and when what it holds arrived.
#[derive(Clone, Copy, Debug, Default)]
pub struct BatchClock {
    pub interval_us: u64,
    /// `None` until the first send: the first packet never waits.
    last_send_us: Option<u64>,
    /// Packets staged since the last send and the sum of their staging times.
    staged: u64,
    staged_at_sum: u64,
    first_staged_us: u64,
}

/// What one send of a batch tells the counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sent {
    pub packets: u64,
    /// The longest any of them waited, and all their waits added up (µs).
    pub max_wait_us: u64,
    pub wait_sum_us: u64,
}

impl BatchClock {
    pub fn new(interval_us: u32) -> BatchClock {
        BatchClock {
            interval_us: u64::from(interval_us),
            ..BatchClock::default()
        }
    }

    /// A packet joined the batch at `now_us`.
    #[inline]
    pub fn staged(&mut self, now_us: u64) {
        if self.staged == 0 {
            self.first_staged_us = now_us;
        }
        self.staged += 1;
        self.staged_at_sum += now_us;
    }

    pub fn pending(&self) -> u64 {
        self.staged
    }

    /// Whether a batch that is not full should leave at `now_us`.
    #[inline]
    pub fn due(&self, now_us: u64) -> bool {
        self.staged > 0 && self.deadline_of_next().is_none_or(|d| now_us >= d)
    }

    fn deadline_of_next(&self) -> Option<u64> {
        self.last_send_us
            .map(|t| t.saturating_add(self.interval_us))
    }

    /// When the batch must leave at the latest (if it holds anything).
    pub fn deadline(&self) -> Option<u64> {
        (self.staged > 0).then(|| self.deadline_of_next().unwrap_or(0))
    }

    /// The batch left at `now_us`.
    pub fn sent(&mut self, now_us: u64) -> Sent {
        let s = Sent {
            packets: self.staged,
            max_wait_us: now_us.saturating_sub(self.first_staged_us),
            wait_sum_us: (self.staged * now_us).saturating_sub(self.staged_at_sum),
        };
        self.last_send_us = Some(now_us);
        self.staged = 0;
        self.staged_at_sum = 0;
        s
    }
}

/// Buckets of the packets-per-batch histogram: 1, 2–3, 4–7, 8–15, 16–31, 32 and more.
pub const BATCH_BUCKETS: usize = vsw_protocol::BATCH_BUCKETS;

/// The histogram bucket of a batch of `packets` (> 0).
pub fn batch_bucket(packets: u64) -> usize {
    (63 - packets.max(1).leading_zeros() as usize).min(BATCH_BUCKETS - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A port's output as the PMD drives it: stage packets, and at the end of each
    /// iteration send when full or due.
    struct Port {
        clock: BatchClock,
        sends: Vec<(u64, u64)>,
    }

    impl Port {
        fn new(interval: u32) -> Port {
            Port {
                clock: BatchClock::new(interval),
                sends: Vec::new(),
            }
        }
        fn stage(&mut self, now: u64) {
            self.clock.staged(now);
            if self.clock.pending() >= 32 {
                let s = self.clock.sent(now);
                self.sends.push((now, s.packets));
            }
        }
        fn end_of_iteration(&mut self, now: u64) {
            if self.clock.due(now) {
                let s = self.clock.sent(now);
                self.sends.push((now, s.packets));
            }
        }
    }

    #[test]
    fn a_single_packet_leaves_no_later_than_its_deadline() {
        let mut p = Port::new(50);
        p.stage(0);
        p.end_of_iteration(0); // nothing sent for a long time: at once
        p.stage(10);
        for t in (10..=200).step_by(3) {
            p.end_of_iteration(t);
        }
        assert_eq!(p.sends[0], (0, 1));
        // Last send at 0 + 50 µs: the first iteration at or after 50 (52).
        assert_eq!(p.sends[1], (52, 1));
        assert!(
            p.sends[1].0 <= 50 + 3,
            "waited past the interval plus one iteration"
        );
    }

    #[test]
    fn a_burst_of_100_leaves_as_full_batches_plus_one() {
        let mut p = Port::new(50);
        p.stage(0);
        p.end_of_iteration(0);
        p.sends.clear();
        for _ in 0..100 {
            p.stage(5);
        }
        p.end_of_iteration(5);
        assert_eq!(p.sends, vec![(5, 32), (5, 32), (5, 32)]);
        for t in 6..=60 {
            p.end_of_iteration(t);
        }
        assert_eq!(p.sends.last(), Some(&(55, 4)), "the rest at the deadline");
    }

    #[test]
    fn sparse_packets_go_out_at_once() {
        let mut p = Port::new(50);
        for t in [0, 100, 300, 1000] {
            p.stage(t);
            p.end_of_iteration(t);
        }
        assert_eq!(p.sends, vec![(0, 1), (100, 1), (300, 1), (1000, 1)]);
    }

    #[test]
    fn interval_zero_sends_at_the_end_of_every_batch() {
        let mut p = Port::new(0);
        for t in 0..5 {
            p.stage(t);
            p.stage(t);
            p.end_of_iteration(t);
        }
        assert_eq!(p.sends.len(), 5);
        assert!(p.sends.iter().all(|s| s.1 == 2));
    }

    #[test]
    fn changing_the_interval_mid_stream_never_strands_a_packet() {
        let mut p = Port::new(1_000_000);
        p.stage(0);
        p.end_of_iteration(0);
        p.stage(1);
        p.end_of_iteration(1);
        assert_eq!(p.sends.len(), 1, "the second waits for its (long) interval");
        p.clock.interval_us = 10;
        p.end_of_iteration(10);
        assert_eq!(
            p.sends.last(),
            Some(&(10, 1)),
            "a shorter interval applies at once"
        );
        p.stage(11);
        p.clock.interval_us = 0;
        p.end_of_iteration(12);
        assert_eq!(p.sends.last(), Some(&(12, 1)));
    }

    #[test]
    fn waits_are_measured() {
        let mut c = BatchClock::new(50);
        c.sent(0);
        c.staged(10);
        c.staged(20);
        c.staged(30);
        assert_eq!(c.deadline(), Some(50));
        assert!(!c.due(49) && c.due(50));
        let s = c.sent(50);
        assert_eq!(
            s,
            Sent {
                packets: 3,
                max_wait_us: 40,
                wait_sum_us: 40 + 30 + 20
            }
        );
        assert_eq!(c.deadline(), None);
    }

    #[test]
    fn settings_parse_and_resolve() {
        assert_eq!("auto".parse(), Ok(FlushSetting::Auto));
        assert_eq!("50".parse(), Ok(FlushSetting::Port(50)));
        assert!("1000001".parse::<FlushSetting>().is_err());
        assert!("-1".parse::<FlushSetting>().is_err());
        assert_eq!(
            effective_interval(FlushSetting::Port(7), 50),
            (7, IntervalSource::Port)
        );
        assert_eq!(
            effective_interval(FlushSetting::Switch, 50),
            (50, IntervalSource::Switch)
        );
        assert_eq!(
            effective_interval(FlushSetting::Auto, 50),
            (50, IntervalSource::Auto)
        );
    }

    #[test]
    fn batch_buckets() {
        let b: Vec<usize> = [1, 2, 3, 4, 7, 8, 15, 16, 31, 32, 64]
            .iter()
            .map(|p| batch_bucket(*p))
            .collect();
        assert_eq!(b, vec![0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5]);
    }
}
