//! Progress of a long run: which step, how long so far, and about how long is left.
//!
//! The plan counts the work in "planned seconds" (trial lengths plus a fixed cost per
//! switch start). The time left is the planned seconds still to come, scaled by how
//! much longer than planned the run has really taken so far, so set-up costs and
//! searches that end early correct the estimate as the run goes.

use std::time::Duration;

use crate::search::SearchConfig;

/// Trials one throughput search is expected to take: the halvings until the bracket is
/// as narrow as the resolution, plus the validation trial (capped by `max_trials`).
pub fn expected_search_trials(cfg: &SearchConfig) -> usize {
    let halvings = (1.0 / cfg.resolution.max(1e-6)).log2().ceil().max(1.0) as usize;
    // The first trial is at the maximum rate, then one per halving.
    (halvings + 1).min(cfg.max_trials) + 1
}

/// What a whole run will do, in planned seconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Plan {
    pub switches: usize,
    pub rounds: usize,
    pub trials_per_search: usize,
    /// Trials that run once per switch after the last search (latency loads, CPU).
    pub trials_after: usize,
    pub trial_seconds: f64,
    /// Seconds of TCP per switch after the last search.
    pub tcp_seconds: f64,
    /// Start, settle and stop of one switch in one round.
    pub switch_overhead_seconds: f64,
}

impl Plan {
    pub fn total_seconds(&self) -> f64 {
        let per_round = self.trials_per_search as f64 * self.trial_seconds;
        let last = self.trials_after as f64 * self.trial_seconds + self.tcp_seconds;
        self.switches as f64
            * (self.rounds as f64 * (per_round + self.switch_overhead_seconds) + last)
    }
}

/// Planned seconds done against real time spent.
#[derive(Debug)]
pub struct Progress {
    plan: Plan,
    done: f64,
    trials: usize,
}

impl Progress {
    pub fn new(plan: Plan) -> Self {
        Progress {
            plan,
            done: 0.0,
            trials: 0,
        }
    }

    /// One trial finished.
    pub fn trial_done(&mut self) {
        self.trials += 1;
        self.done += self.plan.trial_seconds;
    }

    /// A switch finished a round; `trials_run` is how many trials it took, so a search
    /// that ended before its expected count gives the rest back.
    pub fn switch_round_done(&mut self, trials_run: usize, last_round: bool) {
        let mut expected = self.plan.trials_per_search;
        if last_round {
            expected += self.plan.trials_after;
        }
        let unused = expected.saturating_sub(trials_run) as f64 * self.plan.trial_seconds;
        self.done += unused + self.plan.switch_overhead_seconds;
        if last_round {
            self.done += self.plan.tcp_seconds;
        }
    }

    /// Trials finished so far.
    pub fn trials(&self) -> usize {
        self.trials
    }

    /// Estimated time left, given the real time spent so far; `None` before any work.
    pub fn remaining(&self, elapsed: Duration) -> Option<Duration> {
        if self.done <= 0.0 {
            return None;
        }
        let total = self.plan.total_seconds();
        let left = (total - self.done).max(0.0);
        let real_per_planned = elapsed.as_secs_f64() / self.done;
        Some(Duration::from_secs_f64(left * real_per_planned))
    }
}

/// "1 h 02 min", "3 min 05 s", "42 s".
pub fn human(d: Duration) -> String {
    let s = d.as_secs();
    match (s / 3600, (s % 3600) / 60, s % 60) {
        (0, 0, s) => format!("{s} s"),
        (0, m, s) => format!("{m} min {s:02} s"),
        (h, m, _) => format!("{h} h {m:02} min"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Plan {
        Plan {
            switches: 2,
            rounds: 3,
            trials_per_search: 10,
            trials_after: 3,
            trial_seconds: 2.0,
            tcp_seconds: 10.0,
            switch_overhead_seconds: 5.0,
        }
    }

    #[test]
    fn a_search_is_expected_to_halve_down_to_the_resolution() {
        let cfg = SearchConfig {
            resolution: 0.005,
            max_trials: 20,
            ..SearchConfig::default()
        };
        // 1/0.005 = 200 → 8 halvings, the first trial at the top, one validation.
        assert_eq!(expected_search_trials(&cfg), 10);
        let capped = SearchConfig {
            max_trials: 4,
            ..cfg
        };
        assert_eq!(expected_search_trials(&capped), 5);
    }

    #[test]
    fn the_total_counts_every_round_and_the_last_round_extras() {
        // Per switch: 3 × (10 × 2 + 5) + 3 × 2 + 10 = 91; two switches.
        assert_eq!(plan().total_seconds(), 182.0);
    }

    #[test]
    fn nothing_done_gives_no_estimate() {
        let p = Progress::new(plan());
        assert_eq!(p.remaining(Duration::from_secs(10)), None);
    }

    #[test]
    fn the_estimate_scales_with_the_real_pace() {
        let mut p = Progress::new(plan());
        for _ in 0..10 {
            p.trial_done();
        }
        // 20 planned seconds done of 182; at the planned pace 162 s are left.
        assert_eq!(
            p.remaining(Duration::from_secs(20)),
            Some(Duration::from_secs(162))
        );
        // Taking twice as long as planned doubles what is left.
        assert_eq!(
            p.remaining(Duration::from_secs(40)),
            Some(Duration::from_secs(324))
        );
    }

    #[test]
    fn a_short_search_gives_back_its_unused_trials() {
        let mut p = Progress::new(plan());
        for _ in 0..4 {
            p.trial_done();
        }
        p.switch_round_done(4, false);
        // 4 trials (8 s) + 6 unused (12 s) + overhead 5 s = one whole round (25 s).
        let left = p.remaining(Duration::from_secs(25)).unwrap();
        assert_eq!(left, Duration::from_secs(182 - 25));
    }

    #[test]
    fn the_end_of_the_plan_leaves_nothing() {
        let mut p = Progress::new(plan());
        for round in 0..3 {
            for _ in 0..2 {
                for _ in 0..10 {
                    p.trial_done();
                }
                if round == 2 {
                    for _ in 0..3 {
                        p.trial_done();
                    }
                }
                p.switch_round_done(if round == 2 { 13 } else { 10 }, round == 2);
            }
        }
        assert_eq!(p.remaining(Duration::from_secs(200)), Some(Duration::ZERO));
        assert_eq!(p.trials(), 66);
    }

    #[test]
    fn durations_read_like_a_person_writes_them() {
        assert_eq!(human(Duration::from_secs(42)), "42 s");
        assert_eq!(human(Duration::from_secs(185)), "3 min 05 s");
        assert_eq!(human(Duration::from_secs(3720)), "1 h 02 min");
    }
}
