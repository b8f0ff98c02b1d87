//! The revalidator's offload side: one offload manager per port that names a
//! provider (while `hw-offload=true`), fed every interval with the rules whose
//! receive port it serves.

use std::collections::{BTreeMap, HashMap};
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use vsw_datapath::offload::{
    offloadable, DummyProvider, FlowSample, OffloadManager, OffloadPolicy, OffloadProvider,
    OffloadState, OffloadStats,
};
use vsw_flow::Rule;
use vsw_netdev::ebpf::{EbpfProvider, PortIfindex};
use vsw_protocol::OffloadShowView;

use crate::options::{OffloadKind, PortOptions, SwitchOptions};

/// Whether a rule of higher priority could take some of `rule`'s packets: the fast
/// path would then forward packets that userspace would not.
fn shadowed(rule: &Rule, rules: &[Arc<Rule>]) -> bool {
    rules.iter().any(|o| {
        o.spec.priority > rule.spec.priority && o.spec.matcher.overlaps(&rule.spec.matcher)
    })
}

/// Every rule whose exact in-port is `no`, as its offload manager sees it.
fn samples(no: u32, rules: &[Arc<Rule>]) -> Vec<FlowSample> {
    rules
        .iter()
        .filter(|r| {
            let m = &r.spec.matcher;
            m.mask().in_port == u32::MAX && m.value().in_port == no
        })
        .map(|r| FlowSample {
            id: r.seq,
            userspace_packets: r.stats.packets(),
            offload: offloadable(r).and_then(|f| match shadowed(r, rules) {
                true => Err("shadowed-by-higher-priority".into()),
                false => Ok(f),
            }),
        })
        .collect()
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
    /// The device opening the provider was made for (a new socket needs a new one).
    opened: u64,
    manager: OffloadManager,
}

/// What the managers need to know of a port.
pub struct OffloadPort<'a> {
    pub no: u32,
    pub name: &'a str,
    pub options: &'a PortOptions,
    /// The interface's index, for an afpacket port that is up.
    pub ifindex: Option<u32>,
    /// vsw's receiving socket on the port (afpacket).
    pub rx_socket: Option<&'a OwnedFd>,
    pub opened: u64,
}

/// Every port's offload manager and when the last pass ran.
pub struct Offloads {
    ports: BTreeMap<u32, PortOffload>,
    /// Ports whose provider could not be set up, and why.
    problems: BTreeMap<u32, (String, String)>,
    /// Port numbers to interface indexes, for the kernel fast path's outputs.
    ifindexes: Arc<Mutex<HashMap<u32, u32>>>,
    enabled: bool,
    policy: OffloadPolicy,
    interval_ms: u64,
    last_pass: Option<Instant>,
}

impl Default for Offloads {
    fn default() -> Self {
        Offloads {
            ports: BTreeMap::new(),
            problems: BTreeMap::new(),
            ifindexes: Arc::default(),
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
        ports: impl Iterator<Item = OffloadPort<'a>>,
    ) {
        self.enabled = switch.hw_offload;
        self.policy.rebalance = switch.offload_rebalance;
        self.interval_ms = u64::from(switch.offload_interval_ms);
        let ports: Vec<OffloadPort<'a>> = ports.collect();
        *self.ifindexes.lock().unwrap_or_else(|e| e.into_inner()) = ports
            .iter()
            .filter_map(|p| Some((p.no, p.ifindex?)))
            .collect();
        let wanted: BTreeMap<u32, &OffloadPort<'a>> = ports
            .iter()
            .filter(|p| self.enabled && p.options.offload.is_some())
            .map(|p| (p.no, p))
            .collect();
        // A provider whose port went, changed provider or capacity, or was opened
        // again goes (its flows back to the PMDs) and is set up anew.
        self.ports.retain(|no, p| {
            wanted.get(no).is_some_and(|w| {
                w.options.offload == Some(p.kind)
                    && w.options.offload_capacity == p.capacity
                    && w.opened == p.opened
            })
        });
        self.problems.retain(|no, _| wanted.contains_key(no));
        for (no, w) in wanted {
            if let Some(p) = self.ports.get_mut(&no) {
                p.name = w.name.to_string();
                p.manager.policy = self.policy;
                continue;
            }
            let kind = w.options.offload.expect("filtered");
            let capacity = w.options.offload_capacity;
            let provider: Result<Box<dyn OffloadProvider>, String> = match kind {
                OffloadKind::Dummy => Ok(Box::new(DummyProvider::new(capacity))),
                OffloadKind::Ebpf => self.ebpf(w, capacity),
            };
            match provider {
                Ok(provider) => {
                    self.problems.remove(&no);
                    self.ports.insert(
                        no,
                        PortOffload {
                            name: w.name.to_string(),
                            kind,
                            capacity,
                            opened: w.opened,
                            manager: OffloadManager::new(provider, self.policy),
                        },
                    );
                }
                Err(why) => {
                    if self.problems.get(&no).map(|(_, w)| w) != Some(&why) {
                        tracing::warn!(port = w.name, error = %why, "offload provider not set up");
                    }
                    self.problems.insert(no, (w.name.to_string(), why));
                }
            }
        }
    }

    /// The kernel fast path for an afpacket port that is up.
    fn ebpf(
        &self,
        p: &OffloadPort<'_>,
        capacity: usize,
    ) -> Result<Box<dyn OffloadProvider>, String> {
        let socket = p
            .rx_socket
            .ok_or("the ebpf provider needs an afpacket port that is up")?
            .try_clone()
            .map_err(|e| e.to_string())?;
        let ifindexes = self.ifindexes.clone();
        let outputs: PortIfindex = Box::new(move |no| {
            ifindexes
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&no)
                .copied()
        });
        EbpfProvider::new(p.name, socket, capacity, outputs)
            .map(|e| Box::new(e) as Box<dyn OffloadProvider>)
            .map_err(|e| e.to_string())
    }

    /// Whether any port has an offload provider (otherwise there is nothing to do).
    pub fn any(&self) -> bool {
        !self.ports.is_empty()
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
            p.manager.pass(elapsed_ms, &samples(*no, rules));
        }
        self.note_activity(rules, vsw_datapath::clock::now_ms());
    }

    /// Takes out of the fast paths, at once, every flow whose rule went or that a
    /// rule above it now overlaps: run by every change of the rules before it is
    /// answered, so that no packet the new rules would not forward is forwarded by
    /// the kernel afterwards.
    pub fn withdraw(&mut self, rules: &[Arc<Rule>]) {
        for (no, p) in self.ports.iter_mut() {
            p.manager.withdraw(&samples(*no, rules));
        }
    }

    /// Marks the rules whose flows a fast path forwarded since the last look as used
    /// at `now_ms`: a busy offloaded flow is not idle, though userspace sees none of
    /// its packets.
    pub fn note_activity(&mut self, rules: &[Arc<Rule>], now_ms: u64) {
        for p in self.ports.values_mut() {
            for id in p.manager.active() {
                if let Some(r) = rules.iter().find(|r| r.seq == id) {
                    r.stats.seen(now_ms);
                }
            }
        }
    }

    /// Lets go of every fast path (the kernel forwards nothing for vsw afterwards).
    pub fn clear(&mut self) {
        self.ports.clear();
        self.problems.clear();
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
        let failed = self.problems.values().map(|(port, why)| OffloadShowView {
            port: port.clone(),
            provider: format!("none ({why})"),
            stats: OffloadStats::default(),
        });
        self.ports
            .values()
            .map(|p| OffloadShowView {
                port: p.name.clone(),
                provider: p.manager.kind().to_string(),
                stats: p.manager.stats(),
            })
            .chain(failed)
            .collect()
    }
}
