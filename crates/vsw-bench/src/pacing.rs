//! Send pacing: how many frames are due at a given time for a given rate, so that a
//! generator keeps an exact average rate without sleeping per frame.

/// Paces a stream of frames at `rate_pps` from `start_ns`.
#[derive(Clone, Copy, Debug)]
pub struct Pacer {
    start_ns: u64,
    rate_pps: f64,
    sent: u64,
    /// The most frames released at once after a stall, so that a generator that fell
    /// behind catches up in bursts no larger than this.
    max_burst: u64,
}

impl Pacer {
    pub fn new(start_ns: u64, rate_pps: f64, max_burst: u64) -> Pacer {
        Pacer {
            start_ns,
            rate_pps,
            sent: 0,
            max_burst: max_burst.max(1),
        }
    }

    /// Frames that should have been sent by `now_ns` and were not yet, at most one burst.
    pub fn due(&self, now_ns: u64) -> u64 {
        let elapsed = now_ns.saturating_sub(self.start_ns) as f64 / 1e9;
        let target = (elapsed * self.rate_pps) as u64 + 1;
        target.saturating_sub(self.sent).min(self.max_burst)
    }

    /// Records that `n` frames were sent.
    pub fn sent(&mut self, n: u64) {
        self.sent += n;
    }

    pub fn total_sent(&self) -> u64 {
        self.sent
    }

    /// When the next frame is due, in the same clock as `start_ns`.
    pub fn next_due_ns(&self) -> u64 {
        self.start_ns + ((self.sent as f64 / self.rate_pps) * 1e9) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_average_rate() {
        let mut p = Pacer::new(1_000, 1_000_000.0, 32);
        // Simulate a loop that looks every 10 us for one second.
        let mut t = 1_000;
        while t < 1_000 + 1_000_000_000 {
            let n = p.due(t);
            p.sent(n);
            t += 10_000;
        }
        let sent = p.total_sent();
        assert!(
            (999_900..=1_000_100).contains(&sent),
            "{sent} frames in 1 s at 1 Mpps"
        );
    }

    #[test]
    fn bursts_are_bounded_after_a_stall() {
        let mut p = Pacer::new(0, 1_000_000.0, 32);
        assert_eq!(p.due(0), 1, "the first frame is due at once");
        p.sent(1);
        assert_eq!(p.due(5_000_000), 32, "5 ms late: at most one burst");
        assert_eq!(p.next_due_ns(), 1_000);
    }

    #[test]
    fn nothing_due_before_time() {
        let mut p = Pacer::new(0, 1000.0, 32);
        p.sent(p.due(0));
        assert_eq!(p.due(500_000), 0, "next frame is due at 1 ms");
        assert_eq!(p.due(1_000_000), 1);
    }
}
