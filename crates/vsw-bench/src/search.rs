//! RFC 2544 throughput: the highest offered rate whose loss stays within a tolerance,
//! found by binary search over trials, then confirmed by a validation trial.

use serde::{Deserialize, Serialize};

/// How many of the best passing rates are tried for validation before giving up.
const VALIDATIONS: usize = 3;

/// What one trial at one offered rate gave.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Trial {
    /// The rate asked of the generator.
    pub requested_pps: f64,
    /// The rate the generator really sent at.
    pub sent_pps: f64,
    pub sent: u64,
    pub received: u64,
}

impl Trial {
    /// Fraction of sent frames that did not arrive (never negative: frames that
    /// arrive from elsewhere do not make up for lost ones).
    pub fn loss(&self) -> f64 {
        if self.sent == 0 {
            return 1.0;
        }
        self.sent.saturating_sub(self.received) as f64 / self.sent as f64
    }

    /// The generator fell short of the requested rate by more than 5 %.
    pub fn generator_short(&self) -> bool {
        self.sent_pps < 0.95 * self.requested_pps
    }
}

/// Runs a trial at a rate. Implemented by the real traffic generator and, in tests,
/// by simulated devices.
pub trait TrialRunner {
    type Error;
    fn run(&mut self, rate_pps: f64) -> Result<Trial, Self::Error>;
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct SearchConfig {
    pub min_pps: f64,
    pub max_pps: f64,
    /// Acceptable loss as a fraction (RFC 2544 says 0; 0.002 % = 0.00002 is common).
    pub loss_tolerance: f64,
    /// Stop when the bracket is narrower than this fraction of `max_pps`.
    pub resolution: f64,
    pub max_trials: usize,
}

impl Default for SearchConfig {
    fn default() -> Self {
        SearchConfig {
            min_pps: 10_000.0,
            max_pps: 5_000_000.0,
            loss_tolerance: 0.002 / 100.0,
            resolution: 0.005,
            max_trials: 20,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SearchResult {
    /// The highest rate (as sent) with loss within tolerance, confirmed by the
    /// validation trial; `None` when even the lowest rate lost too much.
    pub throughput_pps: Option<f64>,
    /// Every trial in order, validation last.
    pub trials: Vec<Trial>,
    /// The generator could not send as fast as asked, and no trial showed the switch
    /// losing frames at a rate the generator did reach: the result is a lower bound
    /// set by the generator, not by the switch.
    pub generator_limited: bool,
}

/// The binary search. A trial passes when its loss is within tolerance. When the
/// generator sends slower than asked, the rate it did reach is what the trial proves,
/// and the search goes no higher than that.
pub fn binary_search<R: TrialRunner>(
    runner: &mut R,
    cfg: &SearchConfig,
) -> Result<SearchResult, R::Error> {
    search(runner, cfg, RESEARCHES)
}

/// When every validation fails, the search starts again below the rates that failed,
/// at most this many times.
const RESEARCHES: usize = 2;

fn search<R: TrialRunner>(
    runner: &mut R,
    cfg: &SearchConfig,
    researches: usize,
) -> Result<SearchResult, R::Error> {
    let mut trials = Vec::new();
    let mut generator_short = false;
    let mut switch_lost = false;
    let passes = |t: &Trial| t.loss() <= cfg.loss_tolerance;
    let (mut lo, mut hi) = (cfg.min_pps, cfg.max_pps);
    // Rates that passed, as proven (sent) rates.
    let mut passed: Vec<f64> = Vec::new();
    let mut rate = cfg.max_pps;
    while trials.len() < cfg.max_trials {
        let t = runner.run(rate)?;
        trials.push(t);
        // A trial proves the rate that was really sent, never more than asked.
        let proven = t.sent_pps.min(rate);
        generator_short |= t.generator_short();
        if passes(&t) {
            passed.push(proven);
            lo = proven;
            if t.generator_short() {
                // Nothing above what the generator reached can be shown.
                hi = proven;
            }
        } else {
            switch_lost = true;
            hi = rate.min(hi);
            if t.generator_short() {
                hi = hi.min(proven);
            }
        }
        if hi - lo <= cfg.resolution * cfg.max_pps || hi <= cfg.min_pps {
            break;
        }
        rate = (lo + hi) / 2.0;
    }
    // Validation: the best rate once more. A rate at the edge may fail now; then the
    // next best that passed is validated instead (at most VALIDATIONS times).
    passed.sort_by(|a, b| b.total_cmp(a));
    let mut throughput_pps = None;
    for &b in passed.iter().take(VALIDATIONS) {
        let v = runner.run(b)?;
        trials.push(v);
        generator_short |= v.generator_short();
        if passes(&v) {
            throughput_pps = Some(v.sent_pps.min(b));
            break;
        }
        switch_lost = true;
    }
    let lowest_failed = passed.iter().take(VALIDATIONS).next_back().copied();
    if let (None, Some(failed), true) = (throughput_pps, lowest_failed, researches > 0) {
        let below = SearchConfig {
            max_pps: failed * (1.0 - 2.0 * cfg.resolution),
            ..*cfg
        };
        if below.max_pps > cfg.min_pps {
            let r = search(runner, &below, researches - 1)?;
            trials.extend(r.trials);
            return Ok(SearchResult {
                throughput_pps: r.throughput_pps,
                trials,
                // The failed validation showed the switch losing frames.
                generator_limited: false,
            });
        }
    }
    Ok(SearchResult {
        throughput_pps,
        trials,
        generator_limited: generator_short && !switch_lost,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A device that forwards up to `capacity` pps and drops the excess; a generator
    /// that cannot send faster than `gen_max`.
    struct Simulated {
        capacity: f64,
        gen_max: f64,
        seconds: f64,
    }

    impl TrialRunner for Simulated {
        type Error = ();
        fn run(&mut self, rate: f64) -> Result<Trial, ()> {
            let sent_pps = rate.min(self.gen_max);
            let sent = (sent_pps * self.seconds) as u64;
            let received = (sent_pps.min(self.capacity) * self.seconds) as u64;
            Ok(Trial {
                requested_pps: rate,
                sent_pps,
                sent,
                received,
            })
        }
    }

    fn cfg() -> SearchConfig {
        SearchConfig {
            min_pps: 10_000.0,
            max_pps: 2_000_000.0,
            loss_tolerance: 0.00002,
            resolution: 0.005,
            max_trials: 30,
        }
    }

    #[test]
    fn finds_the_capacity_within_the_resolution() {
        let mut dev = Simulated {
            capacity: 812_345.0,
            gen_max: 1e9,
            seconds: 10.0,
        };
        let r = binary_search(&mut dev, &cfg()).unwrap();
        let t = r.throughput_pps.unwrap();
        assert!(t <= 812_345.0 * (1.0 + 0.00002), "{t} above capacity");
        assert!(
            t >= 812_345.0 - 0.005 * 2_000_000.0,
            "{t} too far below capacity"
        );
        assert!(!r.generator_limited);
        assert!(r.trials.len() <= 30);
    }

    #[test]
    fn a_switch_faster_than_the_generator_is_reported_as_generator_limited() {
        let mut dev = Simulated {
            capacity: 3e6,
            gen_max: 600_000.0,
            seconds: 2.0,
        };
        let r = binary_search(&mut dev, &cfg()).unwrap();
        assert!(r.generator_limited);
        assert_eq!(
            r.throughput_pps,
            Some(600_000.0),
            "the proven rate is what was sent"
        );
    }

    #[test]
    fn a_switch_that_loses_below_the_generator_limit_is_the_limit() {
        let mut dev = Simulated {
            capacity: 500_000.0,
            gen_max: 650_000.0,
            seconds: 2.0,
        };
        let r = binary_search(&mut dev, &cfg()).unwrap();
        assert!(
            !r.generator_limited,
            "the switch lost frames the generator did send"
        );
        let t = r.throughput_pps.unwrap();
        assert!((490_000.0..=500_010.0).contains(&t), "{t}");
    }

    /// A device that drops a little at rates near its capacity, one trial in two.
    struct Flaky {
        capacity: f64,
        calls: u32,
    }

    impl TrialRunner for Flaky {
        type Error = ();
        fn run(&mut self, rate: f64) -> Result<Trial, ()> {
            self.calls += 1;
            let edge = rate > 0.98 * self.capacity && self.calls.is_multiple_of(2);
            let sent = (rate * 2.0) as u64;
            let received = if rate > self.capacity || edge {
                sent - sent / 100
            } else {
                sent
            };
            Ok(Trial {
                requested_pps: rate,
                sent_pps: rate,
                sent,
                received,
            })
        }
    }

    #[test]
    fn a_failed_validation_falls_back_to_the_next_best_rate() {
        let mut dev = Flaky {
            capacity: 700_000.0,
            calls: 0,
        };
        let r = binary_search(&mut dev, &cfg()).unwrap();
        let t = r.throughput_pps.expect("a lower passing rate is validated");
        assert!(t <= 700_000.0 && t > 600_000.0, "{t}");
    }

    /// A generator that tops out at 700 kpps and a switch that loses frames in one
    /// trial only: the second one.
    struct OneBadTrial {
        calls: u32,
    }

    impl TrialRunner for OneBadTrial {
        type Error = ();
        fn run(&mut self, rate: f64) -> Result<Trial, ()> {
            self.calls += 1;
            let sent_pps = rate.min(700_000.0);
            let sent = (sent_pps * 2.0) as u64;
            let received = if self.calls == 2 { sent - 100 } else { sent };
            Ok(Trial {
                requested_pps: rate,
                sent_pps,
                sent,
                received,
            })
        }
    }

    #[test]
    fn when_every_validation_fails_the_search_goes_on_below() {
        let mut dev = OneBadTrial { calls: 0 };
        let r = binary_search(&mut dev, &cfg()).unwrap();
        let t = r
            .throughput_pps
            .expect("a rate below the failed validation passes");
        assert!(t < 700_000.0 && t > 680_000.0, "{t}");
        assert!(!r.generator_limited, "frames were lost at 700 kpps once");
    }

    #[test]
    fn nothing_passes_gives_none() {
        let mut dev = Simulated {
            capacity: 1_000.0,
            gen_max: 1e9,
            seconds: 1.0,
        };
        let r = binary_search(&mut dev, &cfg()).unwrap();
        assert_eq!(r.throughput_pps, None);
    }

    #[test]
    fn full_rate_passes_at_once() {
        let mut dev = Simulated {
            capacity: 1e9,
            gen_max: 1e9,
            seconds: 1.0,
        };
        let r = binary_search(&mut dev, &cfg()).unwrap();
        assert_eq!(r.throughput_pps, Some(2_000_000.0));
        assert_eq!(r.trials.len(), 2, "one trial and its validation");
    }

    #[test]
    fn loss_is_never_negative() {
        let t = Trial {
            requested_pps: 1.0,
            sent_pps: 1.0,
            sent: 10,
            received: 12,
        };
        assert_eq!(t.loss(), 0.0);
    }

    proptest! {
        #[test]
        fn never_reports_a_rate_the_device_cannot_carry(capacity in 20_000.0f64..3e6, gen in 50_000.0f64..4e6) {
            let mut dev = Simulated { capacity, gen_max: gen, seconds: 5.0 };
            let r = binary_search(&mut dev, &cfg()).unwrap();
            if let Some(t) = r.throughput_pps {
                prop_assert!(t <= capacity * 1.00003 + 1.0, "{} > capacity {}", t, capacity);
                prop_assert!(t <= gen + 1.0);
            }
        }
    }
}
