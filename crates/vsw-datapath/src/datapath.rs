//! The control side of the datapath: what the daemon calls to change ports, rules and
//! options while PMDs run.
//!
//! Every change is published as a new immutable snapshot. Each PMD picks it up at the
//! top of its loop and acknowledges it; a change returns only after every PMD has, so
//! when `remove_port` returns, no PMD holds the port's queues any more. A PMD never
//! waits for the control side: the worst a change costs it is one snapshot swap.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use arc_swap::ArcSwap;
use vsw_packet::FlowKey;

use crate::assign::{place, QueueToPlace, RxqAssign};
use crate::dpflow::DpFlow;
use crate::emc::DEFAULT_INSERT_INV_PROB;
pub use crate::error::DatapathError;
use crate::meter::{MeterConfig, MeterCounts, Meters};
use crate::pmd::Pmd;
use crate::punt::{PuntQueues, Punts};
use crate::revalidate::{self, RevalidateSummary, RevalidatorConfig};
use crate::shared::{lock, Acked, PmdControl, PortHandle, RxqAssignment, Shared, Snapshot};
use crate::stats::{PmdRxqView, PmdStats, PmdStatsView, RxqView};
use crate::txbatch::{effective_interval, FlushSetting, IntervalSource};
use crate::upcall::{DropAll, Upcall};

/// The most datapath flows a PMD caches by default (`flow-limit`); beyond it,
/// translated packets are executed without being cached.
pub const DEFAULT_FLOW_LIMIT: usize = 200_000;

/// How long a change may wait for the PMDs to take it up before it is reported.
const ACK_TIMEOUT: Duration = Duration::from_secs(5);

struct PmdThread {
    control: Arc<PmdControl>,
    thread: Option<JoinHandle<()>>,
}

/// What the datapath's PMDs look like from outside.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PmdConfig {
    /// One PMD per core.
    pub cores: Vec<usize>,
    /// Pin each PMD to its core (off in tests, where the cores are nominal).
    pub pin: bool,
}

pub struct Datapath {
    shared: Arc<Shared>,
    pmds: Vec<PmdThread>,
    pin: bool,
    rxq_assign: RxqAssign,
    /// Per port: queue → core.
    affinity: HashMap<u32, Vec<(usize, usize)>>,
    isolated: Vec<usize>,
    warnings: Vec<String>,
    stats_base: HashMap<usize, PmdStatsView>,
    /// Switch-wide `tx-flush-interval` (µs) and the ports' own settings.
    tx_flush_us: u32,
    port_flush: HashMap<u32, FlushSetting>,
    pmd_sleep_max_us: u32,
    /// The revalidator thread, once started.
    revalidator: Option<revalidate::Revalidator>,
}

impl Datapath {
    /// Starts the datapath with one PMD per core of `config`.
    pub fn start(config: PmdConfig) -> Result<Datapath, DatapathError> {
        if config.cores.is_empty() {
            return Err(DatapathError::NoPmds);
        }
        let shared = Arc::new(Shared {
            snapshot: ArcSwap::from_pointee(Snapshot {
                generation: 1,
                upcall_epoch: 1,
                ports: Vec::new(),
                upcall: Arc::new(DropAll),
                flow_limit: DEFAULT_FLOW_LIMIT,
                assignment: Vec::new(),
                emc_insert_inv_prob: DEFAULT_INSERT_INV_PROB,
                tx_intervals: Vec::new(),
                tx_interval_default: 0,
                tx_auto: Vec::new(),
                pmd_sleep_max_us: 0,
            }),
            generation: AtomicU64::new(1),
            next_flow_id: AtomicU64::new(1),
            retired: AtomicU64::new(0),
            pmds: ArcSwap::from_pointee(Vec::new()),
            revalidating: Mutex::new(()),
            by_rule: Default::default(),
            kick: Mutex::new(false),
            kick_cv: Condvar::new(),
            punts: Arc::new(PuntQueues::new()),
            meters: Meters::default(),
            conntrack: Arc::new(vsw_conntrack::Conntrack::default()),
            decap_drops: Arc::default(),
        });
        // Measured before the PMDs start so that no PMD ever waits for it.
        crate::clock::cycles_per_second();
        let mut dp = Datapath {
            shared,
            pmds: Vec::new(),
            pin: config.pin,
            rxq_assign: RxqAssign::default(),
            affinity: HashMap::new(),
            isolated: Vec::new(),
            warnings: Vec::new(),
            stats_base: HashMap::new(),
            tx_flush_us: 0,
            port_flush: HashMap::new(),
            pmd_sleep_max_us: 0,
            revalidator: None,
        };
        dp.set_pmd_cores(config.cores)?;
        Ok(dp)
    }

    pub(crate) fn current(&self) -> Arc<Snapshot> {
        self.shared.snapshot.load_full()
    }

    fn cores(&self) -> Vec<usize> {
        self.pmds.iter().map(|p| p.control.core).collect()
    }

    fn wait_acks(&self, generation: u64) -> Result<(), DatapathError> {
        for pmd in &self.pmds {
            pmd.control
                .wait_for(ACK_TIMEOUT, |a| a.generation >= generation)?;
        }
        Ok(())
    }

    /// Where every receive queue of `ports` goes, given the PMDs, pins and loads.
    fn placement(&mut self, ports: &[Arc<PortHandle>]) -> Vec<RxqAssignment> {
        let cores = self.cores();
        let mut queues = Vec::new();
        for p in ports {
            let pins = self.affinity.get(&p.no);
            for (q, slot) in p.rxqs.iter().enumerate() {
                queues.push(QueueToPlace {
                    port: p.no,
                    queue: q,
                    load: slot.stats.load_ppm(),
                    affinity: pins.and_then(|v| v.iter().find(|(qq, _)| *qq == q).map(|x| x.1)),
                });
            }
        }
        let placed = place(&queues, &cores, self.rxq_assign);
        for w in &placed.warnings {
            tracing::warn!("{w}");
        }
        self.isolated = placed.isolated;
        self.warnings = placed.warnings;
        queues
            .iter()
            .zip(placed.core_of)
            .map(|(q, core)| RxqAssignment {
                port: q.port,
                queue: q.queue,
                core,
            })
            .collect()
    }

    /// Publishes a change. `replace` recomputes which PMD polls which queue.
    fn publish(
        &mut self,
        ports: Vec<Arc<PortHandle>>,
        upcall: Option<Arc<dyn Upcall>>,
        replace: bool,
        emc_insert_inv_prob: Option<u32>,
    ) -> Result<(), DatapathError> {
        self.publish_with(ports, upcall, replace, emc_insert_inv_prob, None)
    }

    fn publish_with(
        &mut self,
        ports: Vec<Arc<PortHandle>>,
        upcall: Option<Arc<dyn Upcall>>,
        replace: bool,
        emc_insert_inv_prob: Option<u32>,
        flow_limit: Option<usize>,
    ) -> Result<(), DatapathError> {
        let cur = self.current();
        for p in &ports {
            p.reserve_tx(self.pmds.len())?;
        }
        let assignment = if replace {
            self.placement(&ports)
        } else {
            cur.assignment.clone()
        };
        let generation = cur.generation + 1;
        let (upcall, upcall_epoch) = match upcall {
            Some(u) => (u, generation),
            None => (cur.upcall.clone(), cur.upcall_epoch),
        };
        self.shared.snapshot.store(Arc::new(Snapshot {
            generation,
            upcall_epoch,
            ports,
            upcall,
            flow_limit: flow_limit.unwrap_or(cur.flow_limit),
            assignment,
            emc_insert_inv_prob: emc_insert_inv_prob.unwrap_or(cur.emc_insert_inv_prob),
            tx_intervals: self.tx_intervals(),
            tx_interval_default: self.tx_flush_us,
            tx_auto: self.tx_auto(),
            pmd_sleep_max_us: self.pmd_sleep_max_us,
        }));
        self.shared.generation.store(generation, Ordering::Release);
        for pmd in &self.pmds {
            if let Some(t) = &pmd.thread {
                t.thread().unpark();
            }
        }
        self.wait_acks(generation)
    }

    pub fn add_port(&mut self, port: Arc<PortHandle>) -> Result<(), DatapathError> {
        self.add_ports(vec![port])
    }

    /// Adds ports together: the PMDs take them up in one change. None is added if
    /// one's number is in use.
    pub fn add_ports(&mut self, new: Vec<Arc<PortHandle>>) -> Result<(), DatapathError> {
        let cur = self.current();
        let mut ports = cur.ports.clone();
        for port in new {
            if ports.iter().any(|p| p.no == port.no) {
                return Err(DatapathError::PortNumberInUse(port.no));
            }
            ports.push(port);
        }
        self.publish(ports, None, true, None)
    }

    /// Removes a port. When this returns, every PMD has sent what it had staged for
    /// the port and let go of its queues.
    pub fn remove_port(&mut self, no: u32) -> Result<Arc<PortHandle>, DatapathError> {
        self.remove_ports(&[no])
            .map(|mut h| h.pop().expect("one port removed"))
    }

    /// Removes ports together: the PMDs let go of them in one change. None is
    /// removed if one is not there. Their handles come back, in the order asked.
    pub fn remove_ports(&mut self, nos: &[u32]) -> Result<Vec<Arc<PortHandle>>, DatapathError> {
        let cur = self.current();
        let handles = nos
            .iter()
            .map(|no| {
                cur.ports
                    .iter()
                    .find(|p| p.no == *no)
                    .cloned()
                    .ok_or(DatapathError::NoSuchPort(*no))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let ports = cur
            .ports
            .iter()
            .filter(|p| !nos.contains(&p.no))
            .cloned()
            .collect();
        for no in nos {
            self.affinity.remove(no);
            self.port_flush.remove(no);
        }
        self.publish(ports, None, true, None)?;
        Ok(handles)
    }

    pub fn ports(&self) -> Vec<Arc<PortHandle>> {
        self.current().ports.clone()
    }

    /// Attaches the slow path that translates misses. Every PMD forgets the flows the
    /// previous one made.
    pub fn set_upcall(&mut self, upcall: Arc<dyn Upcall>) -> Result<(), DatapathError> {
        let cur = self.current();
        self.publish(cur.ports.clone(), Some(upcall), false, None)
    }

    /// A handle that asks this datapath's revalidator for a pass now (for what
    /// changes the slow path's inputs from outside a request: the tunnels' state).
    pub fn revalidation_kick(&self) -> RevalidationKick {
        RevalidationKick(Arc::downgrade(&self.shared))
    }

    /// The connection tracker of this datapath's `Ct` actions.
    pub fn conntrack(&self) -> Arc<vsw_conntrack::Conntrack> {
        self.shared.conntrack.clone()
    }

    /// What this datapath's `TunnelPop` actions refused, by reason.
    pub fn decap_drops(&self) -> Arc<crate::tunnel_pop::DecapDrops> {
        self.shared.decap_drops.clone()
    }

    pub fn upcall(&self) -> Arc<dyn Upcall> {
        self.current().upcall.clone()
    }

    /// `flow-limit`: the most datapath flows each PMD caches.
    pub fn set_flow_limit(&mut self, limit: usize) -> Result<(), DatapathError> {
        let cur = self.current();
        self.publish_with(cur.ports.clone(), None, false, None, Some(limit))
    }

    pub fn flow_limit(&self) -> usize {
        self.current().flow_limit
    }

    pub fn pmd_cores(&self) -> Vec<usize> {
        self.cores()
    }

    /// Runs one PMD per core of `cores`: PMDs on cores no longer listed stop (and hand
    /// their queues back), PMDs on new cores start, and the queues are placed again.
    pub fn set_pmd_cores(&mut self, mut cores: Vec<usize>) -> Result<(), DatapathError> {
        cores.sort_unstable();
        cores.dedup();
        if cores.is_empty() {
            return Err(DatapathError::NoPmds);
        }
        if cores == self.cores() {
            return Ok(());
        }
        // Leaving PMDs stop first; their queues wait in the ports for new owners.
        let (leaving, staying): (Vec<_>, Vec<_>) = std::mem::take(&mut self.pmds)
            .into_iter()
            .partition(|p| !cores.contains(&p.control.core));
        self.pmds = staying;
        self.shared.pmds.store(Arc::new(
            self.pmds.iter().map(|p| p.control.clone()).collect(),
        ));
        for mut p in leaving {
            stop_pmd(&mut p);
            self.stats_base.remove(&p.control.core);
        }
        let cur = self.current();
        let new: Vec<usize> = cores
            .iter()
            .copied()
            .filter(|c| !self.pmds.iter().any(|p| p.control.core == *c))
            .collect();
        // The new PMDs exist before the placement so that queues can go to them; they
        // start with the snapshot that includes them.
        let mut controls = Vec::new();
        for &core in &new {
            let control = Arc::new(PmdControl {
                core,
                pin: self.pin,
                acked: Mutex::new(Acked::default()),
                acked_cv: Condvar::new(),
                fail_on_reconfigure: AtomicBool::new(false),
                stop: AtomicBool::new(false),
                clear_max: AtomicBool::new(false),
                stats: PmdStats::default(),
                flows: Mutex::new(Vec::new()),
                sweep_requested: AtomicU64::new(0),
                installs: Mutex::new(Vec::new()),
                installs_requested: AtomicU64::new(0),
                thread: Mutex::new(None),
            });
            controls.push(control.clone());
            self.pmds.push(PmdThread {
                control,
                thread: None,
            });
        }
        self.pmds.sort_by_key(|p| p.control.core);
        let ports = cur.ports.clone();
        for p in &ports {
            p.reserve_tx(self.pmds.len())?;
        }
        let assignment = self.placement(&ports);
        let generation = cur.generation + 1;
        self.shared.snapshot.store(Arc::new(Snapshot {
            generation,
            upcall_epoch: cur.upcall_epoch,
            ports,
            upcall: cur.upcall.clone(),
            flow_limit: cur.flow_limit,
            assignment,
            emc_insert_inv_prob: cur.emc_insert_inv_prob,
            tx_intervals: self.tx_intervals(),
            tx_interval_default: self.tx_flush_us,
            tx_auto: self.tx_auto(),
            pmd_sleep_max_us: self.pmd_sleep_max_us,
        }));
        self.shared.generation.store(generation, Ordering::Release);
        for control in controls {
            let shared = self.shared.clone();
            let name = format!("pmd-c{:02}", control.core);
            let c = control.clone();
            let thread = std::thread::Builder::new()
                .name(name)
                .spawn(move || {
                    // A panic ends this PMD; it is recorded, so that the control side
                    // never waits on it, and the daemon decides what follows.
                    let pmd = Pmd::new(shared, c.clone());
                    if let Err(e) = std::panic::catch_unwind(AssertUnwindSafe(|| pmd.run())) {
                        let why = e
                            .downcast_ref::<&str>()
                            .map(|s| s.to_string())
                            .or_else(|| e.downcast_ref::<String>().cloned())
                            .unwrap_or_else(|| "panicked".into());
                        tracing::error!(core = c.core, why, "PMD failed");
                        c.fail(why);
                    }
                })
                .map_err(DatapathError::Spawn)?;
            if let Some(p) = self
                .pmds
                .iter_mut()
                .find(|p| Arc::ptr_eq(&p.control, &control))
            {
                *lock(&p.control.thread) = Some(thread.thread().clone());
                p.thread = Some(thread);
            }
        }
        for pmd in &self.pmds {
            if let Some(t) = &pmd.thread {
                t.thread().unpark();
            }
        }
        self.shared.pmds.store(Arc::new(
            self.pmds.iter().map(|p| p.control.clone()).collect(),
        ));
        self.shared.punts.set_pmd_threads(
            self.pmds
                .iter()
                .filter_map(|p| p.thread.as_ref().map(|t| t.thread().clone()))
                .collect(),
        );
        self.wait_acks(generation)?;
        // Fewer PMDs: the transmit queues the leaving ones gave back are closed.
        for p in &cur.ports {
            p.trim_tx(self.pmds.len());
        }
        Ok(())
    }

    /// A PMD that failed (its thread panicked), and why: the datapath cannot be
    /// changed any more, and the daemon should stop so that it can be started afresh.
    pub fn failed_pmd(&self) -> Option<(usize, String)> {
        self.pmds
            .iter()
            .find_map(|p| Some((p.control.core, p.control.failed()?)))
    }

    /// Makes the PMD on `core` panic at its next reconfiguration (which this starts):
    /// how tests see what a failing PMD does to the rest.
    #[doc(hidden)]
    pub fn inject_pmd_failure(&mut self, core: usize) -> Result<(), DatapathError> {
        let pmd = self
            .pmds
            .iter()
            .find(|p| p.control.core == core)
            .ok_or(DatapathError::NoPmds)?;
        pmd.control
            .fail_on_reconfigure
            .store(true, Ordering::Release);
        self.republish()
    }

    pub fn rxq_assign(&self) -> RxqAssign {
        self.rxq_assign
    }

    /// Changes how queues are placed, and places them again.
    pub fn set_rxq_assign(&mut self, mode: RxqAssign) -> Result<(), DatapathError> {
        self.rxq_assign = mode;
        self.rebalance()
    }

    /// Pins a port's queues to cores (`pmd-rxq-affinity`); an empty list unpins.
    pub fn set_rxq_affinity(
        &mut self,
        port: u32,
        pins: Vec<(usize, usize)>,
    ) -> Result<(), DatapathError> {
        let cur = self.current();
        let handle = cur
            .ports
            .iter()
            .find(|p| p.no == port)
            .ok_or(DatapathError::NoSuchPort(port))?;
        if let Some((q, _)) = pins.iter().find(|(q, _)| *q >= handle.rx_queues()) {
            return Err(DatapathError::NoSuchQueue {
                port: handle.name.clone(),
                queues: handle.rx_queues(),
                queue: *q,
            });
        }
        if pins.is_empty() {
            self.affinity.remove(&port);
        } else {
            self.affinity.insert(port, pins);
        }
        self.rebalance()
    }

    /// Places every queue again by the current mode and measured loads.
    pub fn rebalance(&mut self) -> Result<(), DatapathError> {
        let cur = self.current();
        self.publish(cur.ports.clone(), None, true, None)
    }

    /// Problems the last placement found (pins to cores without a PMD).
    pub fn placement_warnings(&self) -> &[String] {
        &self.warnings
    }

    fn tx_auto(&self) -> Vec<u32> {
        self.port_flush
            .iter()
            .filter(|(_, s)| **s == FlushSetting::Auto)
            .map(|(no, _)| *no)
            .collect()
    }

    fn tx_intervals(&self) -> Vec<(u32, u32)> {
        self.port_flush
            .iter()
            .map(|(no, s)| (*no, effective_interval(*s, self.tx_flush_us).0))
            .collect()
    }

    pub(crate) fn republish(&mut self) -> Result<(), DatapathError> {
        let cur = self.current();
        self.publish(cur.ports.clone(), None, false, None)
    }

    /// The switch-wide `tx-flush-interval` (µs); takes effect while traffic flows.
    pub fn set_tx_flush_interval(&mut self, us: u32) -> Result<(), DatapathError> {
        self.tx_flush_us = us;
        self.republish()
    }

    pub fn tx_flush_interval(&self) -> u32 {
        self.tx_flush_us
    }

    /// A port's own `tx-flush-interval` (or `Switch` to follow the switch-wide one).
    pub fn set_port_tx_flush(&mut self, port: u32, s: FlushSetting) -> Result<(), DatapathError> {
        if s == FlushSetting::Switch {
            self.port_flush.remove(&port);
        } else {
            self.port_flush.insert(port, s);
        }
        self.republish()
    }

    /// The interval in effect for `port` and where it comes from.
    pub fn tx_flush_of(&self, port: u32) -> (u32, IntervalSource) {
        effective_interval(
            self.port_flush.get(&port).copied().unwrap_or_default(),
            self.tx_flush_us,
        )
    }

    /// `pmd-sleep-max`: the longest an idle PMD sleeps (µs), 0 = never.
    pub fn set_pmd_sleep_max(&mut self, us: u32) -> Result<(), DatapathError> {
        self.pmd_sleep_max_us = us;
        self.republish()
    }

    pub fn pmd_sleep_max(&self) -> u32 {
        self.pmd_sleep_max_us
    }

    /// Insert one exact-match-cache miss in `n` (0: never).
    pub fn set_emc_insert_inv_prob(&mut self, n: u32) -> Result<(), DatapathError> {
        let cur = self.current();
        self.publish(cur.ports.clone(), None, false, Some(n))
    }

    pub fn emc_insert_inv_prob(&self) -> u32 {
        self.current().emc_insert_inv_prob
    }

    /// Every PMD's datapath flows (dead ones included until their PMD sweeps them).
    /// Sets meter `id` up (its counters start again), or takes it away (`None`).
    pub fn set_meter(&self, id: u32, config: Option<&MeterConfig>) {
        self.shared.meters.set(id, config);
    }

    /// Meter `id`'s counters, if it is set up.
    pub fn meter_counts(&self, id: u32) -> Option<MeterCounts> {
        self.shared.meters.counts(id)
    }

    /// The control side's end of the queues of punted and injected packets.
    pub fn punts(&self) -> Punts {
        Punts(self.shared.punts.clone())
    }

    pub fn dump_flows(&self) -> Vec<Arc<DpFlow>> {
        revalidate::dump(&self.shared)
    }

    /// Has the PMD that polls each key's input port translate the key and cache its
    /// flow, as an upcall would, without a packet: for entries a kernel fast path kept
    /// forwarding across a restart, whose packets userspace never sees. A key with no
    /// PMD polling its port is left out; returns how many were handed on.
    pub fn install_flows(&self, keys: Vec<FlowKey>) -> usize {
        let cur = self.current();
        let mut handed = 0;
        for key in keys {
            let Some(core) = cur
                .assignment
                .iter()
                .find(|a| a.port == key.in_port)
                .map(|a| a.core)
            else {
                continue;
            };
            let Some(pmd) = self.pmds.iter().find(|p| p.control.core == core) else {
                continue;
            };
            lock(&pmd.control.installs).push(key);
            pmd.control
                .installs_requested
                .fetch_add(1, Ordering::AcqRel);
            handed += 1;
        }
        handed
    }

    /// How many datapath flows the revalidator has retired so far.
    pub fn retired_flows(&self) -> u64 {
        self.shared.retired.load(Ordering::Acquire)
    }

    /// Datapath flows cached, over all PMDs.
    pub fn flow_count(&self) -> usize {
        self.shared
            .pmds
            .load()
            .iter()
            .map(|c| lock(&c.flows).len())
            .sum()
    }

    /// Pushes every flow's new counts to its attribution (the rules it went through):
    /// afterwards the rules' counters include every packet counted so far.
    pub fn push_flow_stats(&self) {
        for f in revalidate::dump(&self.shared) {
            f.push_stats();
        }
    }

    /// One revalidator pass now, at `now_ms` (the datapath's clock,
    /// `clock::now_ms`): when it returns, no PMD forwards by a flow it retired.
    pub fn revalidate(
        &self,
        now_ms: u64,
        max_idle_ms: u64,
    ) -> Result<RevalidateSummary, DatapathError> {
        revalidate::pass(&self.shared, now_ms, max_idle_ms)
    }

    /// A revalidation after a change that only removed `rules` (by address, as
    /// [`crate::upcall::Attribution::rules`] gives them): only the flows whose
    /// translation matched one of them are translated again; when it returns, no
    /// PMD forwards by one the rules no longer give. The other flows are right as
    /// they are (the slow path tells later passes so).
    pub fn revalidate_removed(
        &self,
        rules: &[usize],
        now_ms: u64,
    ) -> Result<RevalidateSummary, DatapathError> {
        revalidate::pass_removed(&self.shared, rules, now_ms)
    }

    /// Runs the revalidator thread with `config` (restarted with a new one).
    pub fn start_revalidator(&mut self, config: RevalidatorConfig) -> Result<(), DatapathError> {
        self.revalidator = None;
        self.revalidator = Some(
            revalidate::Revalidator::start(self.shared.clone(), config)
                .map_err(DatapathError::Spawn)?,
        );
        Ok(())
    }

    /// Counters of every PMD since the last [`Datapath::clear_pmd_stats`].
    pub fn pmd_stats(&self) -> Vec<PmdStatsView> {
        let hz = crate::clock::cycles_per_second();
        self.pmds
            .iter()
            .map(|p| {
                let v = p.control.stats.view(p.control.core, hz);
                match self.stats_base.get(&p.control.core) {
                    Some(base) => v.since(base),
                    None => v,
                }
            })
            .collect()
    }

    /// Each PMD's counters since it started (`pmd-stats-clear` does not touch
    /// these): what `/metrics` exports as counters.
    pub fn pmd_stats_total(&self) -> Vec<PmdStatsView> {
        let hz = crate::clock::cycles_per_second();
        self.pmds
            .iter()
            .map(|p| p.control.stats.view(p.control.core, hz))
            .collect()
    }

    pub fn clear_pmd_stats(&mut self) {
        let hz = crate::clock::cycles_per_second();
        for p in &self.pmds {
            let mut base = p.control.stats.view(p.control.core, hz);
            base.max_iteration_cycles = 0;
            base.max_reconfigure_cycles = 0;
            self.stats_base.insert(p.control.core, base);
            p.control.clear_max.store(true, Ordering::Relaxed);
            p.control
                .stats
                .max_iteration_cycles
                .store(0, Ordering::Relaxed);
        }
    }

    /// Which PMD polls which queue, and how much of its time each queue takes.
    pub fn rxq_show(&self) -> Vec<PmdRxqView> {
        let cur = self.current();
        self.pmds
            .iter()
            .map(|p| {
                let core = p.control.core;
                let queues = cur
                    .assignment
                    .iter()
                    .filter(|a| a.core == core)
                    .filter_map(|a| {
                        let port = cur.ports.iter().find(|h| h.no == a.port)?;
                        Some(RxqView {
                            port: port.name.clone(),
                            port_no: port.no,
                            queue: a.queue,
                            usage_percent: port.rxqs.get(a.queue)?.stats.usage_percent(),
                            pinned: self
                                .affinity
                                .get(&a.port)
                                .is_some_and(|v| v.iter().any(|(q, _)| *q == a.queue)),
                        })
                    })
                    .collect();
                PmdRxqView {
                    core,
                    isolated: self.isolated.contains(&core),
                    queues,
                }
            })
            .collect()
    }
}

fn stop_pmd(p: &mut PmdThread) {
    p.control.stop.store(true, Ordering::Release);
    if let Some(t) = p.thread.take() {
        t.thread().unpark();
        if t.join().is_err() {
            tracing::error!(core = p.control.core, "PMD thread panicked");
        }
    }
}

impl Drop for Datapath {
    fn drop(&mut self) {
        self.revalidator = None;
        for p in &mut self.pmds {
            p.control.stop.store(true, Ordering::Release);
        }
        for p in &mut self.pmds {
            stop_pmd(p);
        }
    }
}

/// Asks a datapath's revalidator for a pass now, while the datapath runs.
#[derive(Clone)]
pub struct RevalidationKick(std::sync::Weak<Shared>);

impl RevalidationKick {
    /// Wakes the revalidator; false once the datapath is gone.
    pub fn kick(&self) -> bool {
        match self.0.upgrade() {
            Some(shared) => {
                shared.kick_revalidator();
                true
            }
            None => false,
        }
    }
}
