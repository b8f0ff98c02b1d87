//! The offload side: one offload manager per port that names a provider (while
//! `hw-offload=true`), fed every interval with the datapath flows received on that
//! port. A flow a provider can express (an exact entry: see
//! `vsw_datapath::offload::offloadable`) is a candidate, whatever rules made it.

use std::collections::{BTreeMap, HashMap};
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use vsw_datapath::offload::{
    offloadable, DummyProvider, FlowSample, OffloadManager, OffloadPolicy, OffloadProvider,
    OffloadState, OffloadStats,
};
use vsw_datapath::DpFlow;
use vsw_flow::Rule;
use vsw_netdev::ebpf::{EbpfProvider, PortIfindex};
use vsw_packet::FlowKey;
use vsw_protocol::OffloadShowView;

use crate::options::{OffloadKind, PortOptions, SwitchOptions};

/// Every live datapath flow received on port `no`, as its offload manager sees it.
/// Two flows (of two PMDs) asking for the same exact entry: the first one holds it.
fn samples(no: u32, flows: &[Arc<DpFlow>]) -> Vec<FlowSample> {
    let mut entries: HashMap<FlowKey, u64> = HashMap::new();
    flows
        .iter()
        .filter(|f| !f.is_dead() && f.key.in_port == no)
        .map(|f| FlowSample {
            id: f.id,
            userspace_packets: f.pmd_packets(),
            offload: offloadable(f).and_then(|o| match entries.get(&o.key) {
                Some(first) => Err(format!("same-entry-as-ufid:{first}")),
                None => {
                    entries.insert(o.key, f.id);
                    Ok(o)
                }
            }),
        })
        .collect()
}

/// Where a flow stands, for `dump-flows` and `dump-dp-flows`.
#[derive(Clone, Debug)]
pub struct FlowOffload {
    pub offloaded: bool,
    /// "yes", "not-eligible:REASON", "pending:OOR", "failed:REASON", or "off".
    pub status: String,
    pub pps: f64,
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

    /// The provider of port `no`'s flows ("ebpf", "dummy"), or "ovs".
    pub fn kind_of(&self, no: u32) -> &'static str {
        self.ports.get(&no).map_or("ovs", |p| p.manager.kind())
    }

    /// The ports with a provider.
    pub fn port_numbers(&self) -> Vec<u32> {
        self.ports.keys().copied().collect()
    }

    /// Whether any port has an offload provider (otherwise there is nothing to do).
    pub fn any(&self) -> bool {
        !self.ports.is_empty()
    }

    /// Whether the offload interval has run out since the last pass.
    pub fn due(&self) -> bool {
        self.last_pass
            .is_none_or(|t| t.elapsed().as_millis() as u64 >= self.interval_ms)
    }

    /// One pass over the datapath `flows` if the interval has run out (or `force`).
    pub fn revalidate(&mut self, flows: &[Arc<DpFlow>], force: bool) {
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
            p.manager.pass(elapsed_ms, &samples(*no, flows));
        }
        self.note_activity(flows, vsw_datapath::clock::now_ms());
    }

    /// Takes out of the fast paths, at once, every entry whose datapath flow the
    /// revalidator retired (the rules or the MAC table no longer give it): run by
    /// every change of the rules before it is answered, and by the main loop for
    /// what hosts moving retired.
    pub fn withdraw(&mut self, flows: &[Arc<DpFlow>]) {
        for (no, p) in self.ports.iter_mut() {
            p.manager.withdraw(&samples(*no, flows));
        }
    }

    /// Gives each datapath flow what its provider forwarded (so the rules' counters
    /// stay exact) and marks the flows a provider forwarded packets of since the last
    /// look as used at `now_ms`: a busy offloaded flow is not idle, though the PMD
    /// sees none of its packets.
    pub fn note_activity(&mut self, flows: &[Arc<DpFlow>], now_ms: u64) {
        self.count(flows);
        let by_id: HashMap<u64, &Arc<DpFlow>> = flows.iter().map(|f| (f.id, f)).collect();
        for p in self.ports.values_mut() {
            for id in p.manager.active() {
                if let Some(f) = by_id.get(&id) {
                    f.seen(now_ms);
                }
            }
        }
    }

    /// Gives each datapath flow what its provider forwarded so far.
    pub fn count(&self, flows: &[Arc<DpFlow>]) {
        for f in flows {
            let Some(p) = self.ports.get(&f.key.in_port) else {
                continue;
            };
            let pmd = f.pmd_packets();
            if let Some(v) = p.manager.view(f.id, pmd) {
                f.set_provider_packets(v.packets - pmd);
            }
        }
    }

    /// Lets go of every fast path (the kernel forwards nothing for vsw afterwards).
    pub fn clear(&mut self) {
        self.ports.clear();
        self.problems.clear();
    }

    /// Where a datapath flow stands.
    pub fn dp_flow(&self, flow: &DpFlow) -> FlowOffload {
        let not = |status: String| FlowOffload {
            offloaded: false,
            status,
            pps: 0.0,
        };
        if !self.enabled {
            return not("off".into());
        }
        let Some(p) = self.ports.get(&flow.key.in_port) else {
            return not("not-eligible:port-without-offload".into());
        };
        match p.manager.view(flow.id, flow.pmd_packets()) {
            None => match offloadable(flow) {
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
            },
        }
    }

    /// Where each rule stands, by the datapath flows it serves (those whose
    /// translation went through it): offloaded if one of them is, their rates summed.
    /// Keyed by the rule's address; a rule not in it serves no flow.
    pub fn by_rule(&self, flows: &[Arc<DpFlow>]) -> HashMap<*const Rule, FlowOffload> {
        let mut out: HashMap<*const Rule, FlowOffload> = HashMap::new();
        if !self.enabled {
            return out;
        }
        for f in flows.iter().filter(|f| !f.is_dead()) {
            let o = self.dp_flow(f);
            for r in &f.rules() {
                let e = out.entry(Arc::as_ptr(r)).or_insert_with(|| FlowOffload {
                    offloaded: false,
                    status: o.status.clone(),
                    pps: 0.0,
                });
                e.pps += o.pps;
                if o.offloaded && !e.offloaded {
                    e.offloaded = true;
                    e.status = o.status.clone();
                }
            }
        }
        out
    }

    /// Where a rule that `by_rule` does not list stands.
    pub fn rule_without_flows(&self) -> FlowOffload {
        FlowOffload {
            offloaded: false,
            status: if self.enabled {
                "no-datapath-flow"
            } else {
                "off"
            }
            .into(),
            pps: 0.0,
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
