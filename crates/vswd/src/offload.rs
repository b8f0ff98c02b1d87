//! The revalidator's offload side: one offload manager per port that names a
//! provider (while `hw-offload=true`), fed every interval with the rules whose
//! receive port it serves.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use vsw_datapath::offload::{
    offloadable, DummyProvider, FlowSample, OffloadManager, OffloadPolicy, OffloadState,
};
use vsw_flow::Rule;

use crate::options::{OffloadKind, PortOptions, SwitchOptions};

/// What `offload-show` prints of one provider.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OffloadShowView {
    pub port: String,
    pub provider: String,
    pub capacity: usize,
    pub used: usize,
    pub oor: bool,
    pub passes: u64,
    pub rebalance_passes: u64,
    pub swaps: u64,
    pub last_pass_us: u64,
}

/// Where a flow stands, for `dump-flows`.
pub struct FlowOffload {
    pub offloaded: bool,
    /// "yes", "not-eligible:REASON", "pending:OOR", "failed:REASON", or "off".
    pub status: String,
    pub pps: f64,
    /// Userspace and provider packets together.
    pub packets: u64,
}

struct PortOffload {
    name: String,
    kind: OffloadKind,
    capacity: usize,
    manager: OffloadManager,
}

/// Every port's offload manager and when the last pass ran.
pub struct Offloads {
    ports: BTreeMap<u32, PortOffload>,
    enabled: bool,
    policy: OffloadPolicy,
    interval_ms: u64,
    last_pass: Option<Instant>,
}

impl Default for Offloads {
    fn default() -> Self {
        Offloads {
            ports: BTreeMap::new(),
            enabled: false,
            policy: OffloadPolicy::default(),
            interval_ms: u64::from(crate::options::DEFAULT_OFFLOAD_INTERVAL_MS),
            last_pass: None,
        }
    }
}

impl Offloads {
    /// Brings the managers in line with the options: one per port that names a
    /// provider while `hw-offload` is on; a port whose provider or capacity changed
    /// starts over (its flows go back to the PMDs first).
    pub fn sync<'a>(
        &mut self,
        switch: &SwitchOptions,
        ports: impl Iterator<Item = (u32, &'a str, &'a PortOptions)>,
    ) {
        self.enabled = switch.hw_offload;
        self.policy.rebalance = switch.offload_rebalance;
        self.interval_ms = u64::from(switch.offload_interval_ms);
        let mut wanted = BTreeMap::new();
        if self.enabled {
            for (no, name, o) in ports {
                if let Some(kind) = o.offload {
                    wanted.insert(no, (name.to_string(), kind, o.offload_capacity));
                }
            }
        }
        self.ports.retain(|no, p| {
            wanted
                .get(no)
                .is_some_and(|(_, kind, cap)| *kind == p.kind && *cap == p.capacity)
        });
        for (no, (name, kind, capacity)) in wanted {
            let policy = self.policy;
            let entry = self.ports.entry(no).or_insert_with(|| PortOffload {
                name: name.clone(),
                kind,
                capacity,
                manager: OffloadManager::new(
                    match kind {
                        OffloadKind::Dummy => Box::new(DummyProvider::new(capacity)),
                    },
                    policy,
                ),
            });
            entry.name = name;
            entry.manager.policy = policy;
        }
    }

    /// One pass over `rules` if the interval has run out (or `force`).
    pub fn revalidate(&mut self, rules: &[Arc<Rule>], force: bool) {
        if self.ports.is_empty() {
            return;
        }
        let now = Instant::now();
        let elapsed_ms = self.last_pass.map_or(self.interval_ms, |t| {
            now.duration_since(t).as_millis() as u64
        });
        if !force && elapsed_ms < self.interval_ms {
            return;
        }
        self.last_pass = Some(now);
        for (no, p) in self.ports.iter_mut() {
            let samples: Vec<FlowSample> = rules
                .iter()
                .filter(|r| {
                    let m = &r.spec.matcher;
                    m.mask().in_port == u32::MAX && m.value().in_port == *no
                })
                .map(|r| FlowSample {
                    id: r.seq,
                    userspace_packets: r.stats.packets(),
                    offload: offloadable(r),
                })
                .collect();
            p.manager.pass(elapsed_ms, &samples);
        }
    }

    /// Where `rule` stands.
    pub fn flow(&self, rule: &Rule) -> FlowOffload {
        let userspace = rule.stats.packets();
        let not = |status: String| FlowOffload {
            offloaded: false,
            status,
            pps: 0.0,
            packets: userspace,
        };
        if !self.enabled {
            return not("off".into());
        }
        let m = &rule.spec.matcher;
        if m.mask().in_port != u32::MAX {
            return not("not-eligible:no-in_port".into());
        }
        let Some(p) = self.ports.get(&m.value().in_port) else {
            return not("not-eligible:port-without-offload".into());
        };
        match p.manager.view(rule.seq, userspace) {
            None => match offloadable(rule) {
                Err(why) => not(format!("not-eligible:{why}")),
                Ok(_) => not("pending:next-pass".into()),
            },
            Some(v) => FlowOffload {
                offloaded: v.state == OffloadState::Offloaded,
                status: match v.state {
                    OffloadState::Offloaded => "yes".into(),
                    OffloadState::PendingOor => "pending:OOR".into(),
                    OffloadState::NotEligible(why) => format!("not-eligible:{why}"),
                    OffloadState::Failed(why) => format!("failed:{why}"),
                },
                pps: v.pps,
                packets: v.packets,
            },
        }
    }

    pub fn show(&self) -> Vec<OffloadShowView> {
        self.ports
            .values()
            .map(|p| {
                let s = p.manager.stats();
                OffloadShowView {
                    port: p.name.clone(),
                    provider: p.manager.kind().to_string(),
                    capacity: s.capacity,
                    used: s.used,
                    oor: s.oor,
                    passes: s.passes,
                    rebalance_passes: s.rebalance_passes,
                    swaps: s.swaps,
                    last_pass_us: s.last_pass_us,
                }
            })
            .collect()
    }
}
