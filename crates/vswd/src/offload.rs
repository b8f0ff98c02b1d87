//! The offload side: one offload manager per port that names a provider (while
//! `hw-offload=true`), fed every interval with the datapath flows received on that
//! port. A flow a provider can express (an exact entry: see
//! `vsw_datapath::offload::offloadable`) is a candidate, whatever rules made it.

use std::collections::{BTreeMap, HashMap};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use vsw_datapath::offload::{
    offloadable, DummyProvider, FlowSample, OffloadFlow, OffloadManager, OffloadPolicy,
    OffloadProvider, OffloadState, OffloadStats,
};
use vsw_datapath::DpFlow;
use vsw_flow::Rule;
use vsw_netdev::ebpf::{EbpfPort, EbpfProvider, Pins, PortIfindexes};
use vsw_packet::FlowKey;
use vsw_protocol::OffloadShowView;

use crate::options::{OffloadKind, PortOptions, SwitchOptions};

/// Where kernel fast paths are pinned with `offload-persist` when vswd is not told
/// otherwise (`--bpf-pin-dir`).
pub const DEFAULT_PIN_ROOT: &str = "/sys/fs/bpf/vsw";

static PIN_ROOT: OnceLock<PathBuf> = OnceLock::new();

/// Sets where this process pins its fast paths (once, before any port is attached).
pub fn set_pin_root(root: PathBuf) {
    let _ = PIN_ROOT.set(root);
}

/// Where this process pins its fast paths.
pub fn pin_root() -> &'static Path {
    PIN_ROOT.get_or_init(|| PathBuf::from(DEFAULT_PIN_ROOT))
}

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
    /// Made with `offload-persist` (its fast path pinned).
    persist: bool,
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
    ifindexes: PortIfindexes,
    enabled: bool,
    persist: bool,
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
            persist: false,
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
        self.persist = switch.offload_persist;
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
        // A provider whose port went, changed provider or capacity, was opened again
        // or is to be pinned (or no longer) goes (its flows back to the PMDs) and is
        // set up anew.
        let persist = self.persist;
        self.ports.retain(|no, p| {
            wanted.get(no).is_some_and(|w| {
                w.options.offload == Some(p.kind)
                    && w.options.offload_capacity == p.capacity
                    && w.opened == p.opened
                    && p.persist == persist
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
                            persist,
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
        EbpfProvider::new(EbpfPort {
            ifname: p.name,
            port_no: p.no,
            socket,
            capacity,
            ifindexes: self.ifindexes.clone(),
            pins: Some(Pins {
                root: pin_root().to_path_buf(),
                persist: self.persist,
            }),
        })
        .map(|e| Box::new(e) as Box<dyn OffloadProvider>)
        .map_err(|e| e.to_string())
    }

    /// The interfaces whose fast path this switch pins (`offload-persist`): what
    /// [`vsw_netdev::ebpf::remove_pinned`] must leave.
    pub fn pinned_ports(&self) -> Vec<String> {
        self.ports
            .values()
            .filter(|p| p.persist && p.kind == OffloadKind::Ebpf)
            .map(|p| p.name.clone())
            .collect()
    }

    /// Whether an earlier run left entries in a fast path that no flow of this run
    /// holds yet.
    pub fn any_adopted(&self) -> bool {
        self.ports.values().any(|p| p.manager.adopted_count() > 0)
    }

    /// Hands the entries an earlier run left forwarding back to normal management,
    /// once the pipeline they must agree with is restored: each is translated by
    /// `translate` (as its first packet would be); one the pipeline gives exactly so
    /// (the same exact entry, the same action) is returned, for the datapath to
    /// cache its flow, which the next pass then puts over the entry in place; any
    /// other leaves the fast path at once. Returns the keys to cache.
    pub fn hand_back(
        &mut self,
        translate: impl Fn(&vsw_packet::FlowKey) -> Result<OffloadFlow, String>,
    ) -> Vec<vsw_packet::FlowKey> {
        let mut keep = Vec::new();
        for p in self.ports.values_mut() {
            for entry in p.manager.adopted() {
                match translate(&entry.key) {
                    Ok(now) if now == entry => keep.push(entry.key),
                    now => {
                        tracing::info!(
                            port = %p.name,
                            key = ?entry.key,
                            now = ?now.map(|f| f.action),
                            "an adopted fast-path entry the restored pipeline does not give: withdrawn"
                        );
                        p.manager.drop_adopted(&entry);
                    }
                }
            }
        }
        keep
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

    /// Lets go of every fast path: the kernel forwards nothing for vsw afterwards,
    /// unless `offload-persist` pinned it (the daemon stops for a planned restart:
    /// the next run adopts it).
    pub fn clear(&mut self, keep_pinned: bool) {
        for p in self.ports.values_mut() {
            if p.persist && keep_pinned {
                p.manager.keep_in_kernel();
            }
        }
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
