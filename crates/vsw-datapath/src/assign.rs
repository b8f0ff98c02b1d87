//! Which PMD polls which receive queue.
//!
//! Queues pinned with `pmd-rxq-affinity` go to their core, and a PMD with pinned
//! queues polls nothing else (it is isolated, as in Open vSwitch). The others are
//! dealt out round-robin, or by measured load (`cycles`): busiest queue first, each
//! to the PMD with the least load so far.

use std::fmt;
use std::str::FromStr;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum RxqAssign {
    RoundRobin,
    #[default]
    Cycles,
}

impl FromStr for RxqAssign {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "roundrobin" => Ok(RxqAssign::RoundRobin),
            "cycles" => Ok(RxqAssign::Cycles),
            _ => Err(format!(
                "pmd-rxq-assign '{s}' is not one of roundrobin, cycles"
            )),
        }
    }
}

impl fmt::Display for RxqAssign {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RxqAssign::RoundRobin => "roundrobin",
            RxqAssign::Cycles => "cycles",
        })
    }
}

/// One receive queue to place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueToPlace {
    pub port: u32,
    pub queue: usize,
    /// Measured busy cycles per second (0 when unknown).
    pub load: u64,
    /// The core the user pinned it to.
    pub affinity: Option<usize>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Placement {
    /// For each queue (in the order given), the core of its PMD.
    pub core_of: Vec<usize>,
    /// Cores whose PMD polls only pinned queues.
    pub isolated: Vec<usize>,
    /// Problems worth telling the user (a pin to a core without a PMD).
    pub warnings: Vec<String>,
}

/// Places `queues` on the PMDs of `cores` (not empty).
pub fn place(queues: &[QueueToPlace], cores: &[usize], mode: RxqAssign) -> Placement {
    let mut cores = cores.to_vec();
    cores.sort_unstable();
    cores.dedup();
    assert!(!cores.is_empty(), "at least one PMD");
    let mut out = Placement {
        core_of: vec![usize::MAX; queues.len()],
        ..Placement::default()
    };
    let mut free = Vec::new();
    for (i, q) in queues.iter().enumerate() {
        match q.affinity {
            Some(core) if cores.contains(&core) => {
                out.core_of[i] = core;
                if !out.isolated.contains(&core) {
                    out.isolated.push(core);
                }
            }
            Some(core) => {
                out.warnings.push(format!(
                    "port {} queue {} is pinned to core {core}, which has no PMD; placed as if unpinned",
                    q.port, q.queue
                ));
                free.push(i);
            }
            None => free.push(i),
        }
    }
    out.isolated.sort_unstable();
    let mut open: Vec<usize> = cores
        .iter()
        .copied()
        .filter(|c| !out.isolated.contains(c))
        .collect();
    if open.is_empty() && !free.is_empty() {
        out.warnings.push(
            "every PMD polls pinned queues only; the unpinned queues are shared among them".into(),
        );
        open = cores.clone();
    }
    match mode {
        RxqAssign::RoundRobin => {
            free.sort_by_key(|&i| (queues[i].port, queues[i].queue));
            for (n, &i) in free.iter().enumerate() {
                out.core_of[i] = open[n % open.len()];
            }
        }
        RxqAssign::Cycles => {
            free.sort_by_key(|&i| {
                (
                    std::cmp::Reverse(queues[i].load),
                    queues[i].port,
                    queues[i].queue,
                )
            });
            // (load so far, queues so far) per open core.
            let mut tally: Vec<(u64, usize)> = vec![(0, 0); open.len()];
            for &i in &free {
                let k = (0..open.len())
                    .min_by_key(|&k| (tally[k].0, tally[k].1, open[k]))
                    .unwrap_or(0);
                tally[k].0 += queues[i].load;
                tally[k].1 += 1;
                out.core_of[i] = open[k];
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(port: u32, queue: usize, load: u64, affinity: Option<usize>) -> QueueToPlace {
        QueueToPlace {
            port,
            queue,
            load,
            affinity,
        }
    }

    #[test]
    fn round_robin_deals_queues_out_in_port_order() {
        let qs = [q(2, 0, 0, None), q(1, 0, 0, None), q(1, 1, 0, None)];
        let p = place(&qs, &[3, 1], RxqAssign::RoundRobin);
        // Sorted: (1,0)→core 1, (1,1)→core 3, (2,0)→core 1.
        assert_eq!(p.core_of, vec![1, 1, 3]);
        assert!(p.isolated.is_empty());
    }

    #[test]
    fn cycles_balances_the_measured_load() {
        let qs = [
            q(1, 0, 900, None),
            q(2, 0, 500, None),
            q(3, 0, 450, None),
            q(4, 0, 10, None),
        ];
        let p = place(&qs, &[0, 1], RxqAssign::Cycles);
        // 900 → core 0; 500 → core 1; 450 → core 1 (500 < 900); 10 → core 0 (900 < 950).
        assert_eq!(p.core_of, vec![0, 1, 1, 0]);
    }

    #[test]
    fn pinned_queues_isolate_their_pmd() {
        let qs = [q(1, 0, 5, Some(1)), q(2, 0, 5, None), q(3, 0, 5, None)];
        let p = place(&qs, &[0, 1], RxqAssign::Cycles);
        assert_eq!(p.core_of, vec![1, 0, 0]);
        assert_eq!(p.isolated, vec![1]);
        assert!(p.warnings.is_empty());
    }

    #[test]
    fn a_pin_to_a_missing_core_is_a_warning_not_a_loss() {
        let qs = [q(1, 0, 5, Some(7))];
        let p = place(&qs, &[0], RxqAssign::RoundRobin);
        assert_eq!(p.core_of, vec![0]);
        assert_eq!(p.warnings.len(), 1);
        assert!(p.warnings[0].contains("core 7"), "{}", p.warnings[0]);
    }

    #[test]
    fn unpinned_queues_are_polled_even_when_every_pmd_is_isolated() {
        let qs = [q(1, 0, 5, Some(0)), q(2, 0, 5, None)];
        let p = place(&qs, &[0], RxqAssign::RoundRobin);
        assert_eq!(p.core_of, vec![0, 0]);
        assert_eq!(p.warnings.len(), 1);
    }

    #[test]
    fn modes_parse_and_print() {
        for m in [RxqAssign::RoundRobin, RxqAssign::Cycles] {
            assert_eq!(m.to_string().parse::<RxqAssign>(), Ok(m));
        }
        assert!("fastest"
            .parse::<RxqAssign>()
            .unwrap_err()
            .contains("roundrobin"));
    }
}
