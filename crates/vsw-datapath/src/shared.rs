//! What the control side and the PMDs share: ports with their queues while no PMD
//! holds them (`PortHandle`), the snapshot every PMD runs with, each PMD's control
//! block (acknowledgements, stop, failure, the datapath flows it caches). `datapath`
//! publishes changes through these; `pmd` takes them up.

use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use arc_swap::ArcSwap;
use vsw_packet::FlowKey;

use crate::dpflow::DpFlow;
use crate::error::DatapathError;
use crate::port::{PacketMeta, PortQueues, RxQueue, StageError, TxFactory, TxOffloads, TxQueue};
use crate::stats::{PmdStats, PortStats, RxqStats};
use crate::upcall::Upcall;

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One receive queue of a port: the queue itself while no PMD holds it, and its load.
pub(crate) struct RxqSlot {
    pub queue: Mutex<Option<Box<dyn RxQueue>>>,
    pub stats: RxqStats,
}

/// Transmit queues not held by a PMD, and how to open more.
struct TxPool {
    spare: Vec<Box<dyn TxQueue>>,
    factory: Option<TxFactory>,
    /// A device with one transmit queue, shared by every PMD under a lock.
    shared: Option<Arc<Mutex<Box<dyn TxQueue>>>>,
    given: usize,
}

/// A port as the datapath knows it: its number, name, counters, and its queues while
/// no PMD holds them.
pub struct PortHandle {
    pub no: u32,
    pub name: String,
    pub stats: Arc<PortStats>,
    pub(crate) rxqs: Vec<RxqSlot>,
    tx: Mutex<TxPool>,
}

impl PortHandle {
    pub fn new(no: u32, name: &str, queues: PortQueues, stats: Arc<PortStats>) -> Arc<PortHandle> {
        let PortQueues { rx, tx, tx_factory } = queues;
        let pool = match tx_factory {
            Some(f) => TxPool {
                spare: vec![tx],
                factory: Some(f),
                shared: None,
                given: 0,
            },
            None => TxPool {
                spare: Vec::new(),
                factory: None,
                shared: Some(Arc::new(Mutex::new(tx))),
                given: 0,
            },
        };
        Arc::new(PortHandle {
            no,
            name: name.to_string(),
            stats,
            rxqs: rx
                .into_iter()
                .map(|q| RxqSlot {
                    queue: Mutex::new(Some(q)),
                    stats: RxqStats::default(),
                })
                .collect(),
            tx: Mutex::new(pool),
        })
    }

    pub fn rx_queues(&self) -> usize {
        self.rxqs.len()
    }

    /// Makes sure `pmds` PMDs can each have a transmit queue without opening one on
    /// the packet path.
    pub(crate) fn reserve_tx(&self, pmds: usize) -> Result<(), DatapathError> {
        let mut pool = lock(&self.tx);
        while pool.shared.is_none() && pool.given + pool.spare.len() < pmds {
            let Some(factory) = &pool.factory else { break };
            let q = factory().map_err(|source| DatapathError::TxQueue {
                port: self.name.clone(),
                source,
            })?;
            pool.spare.push(q);
        }
        Ok(())
    }

    /// Closes spare transmit queues beyond what `pmds` PMDs need (after PMDs went).
    pub(crate) fn trim_tx(&self, pmds: usize) {
        let mut pool = lock(&self.tx);
        while pool.given + pool.spare.len() > pmds.max(1) && pool.spare.pop().is_some() {}
    }

    /// A transmit queue for one PMD.
    pub(crate) fn take_tx(&self) -> Option<Box<dyn TxQueue>> {
        let mut pool = lock(&self.tx);
        if let Some(shared) = &pool.shared {
            return Some(Box::new(LockedTx(shared.clone())));
        }
        let q = match pool.spare.pop() {
            Some(q) => q,
            None => {
                tracing::warn!(port = %self.name, "opening a transmit queue on the PMD");
                pool.factory.as_ref()?().ok()?
            }
        };
        pool.given += 1;
        Some(q)
    }

    /// A PMD that stops gives its transmit queue back (flushed).
    pub(crate) fn give_back_tx(&self, q: Box<dyn TxQueue>) {
        let mut pool = lock(&self.tx);
        if pool.shared.is_none() {
            pool.given = pool.given.saturating_sub(1);
            pool.spare.push(q);
        }
    }
}

/// One transmit queue shared by several PMDs: the lock is taken per packet, which is
/// why devices that can open more queues get one per PMD instead.
struct LockedTx(Arc<Mutex<Box<dyn TxQueue>>>);

impl TxQueue for LockedTx {
    fn offloads(&self) -> TxOffloads {
        lock(&self.0).offloads()
    }

    fn learn_tunnel_tso(&mut self) {
        lock(&self.0).learn_tunnel_tso()
    }

    fn receiver_may_poll(&self) -> bool {
        lock(&self.0).receiver_may_poll()
    }

    fn receiver_polls(&self) -> bool {
        lock(&self.0).receiver_polls()
    }

    fn stage(&mut self, data: &[u8], meta: &PacketMeta) -> Result<(), StageError> {
        lock(&self.0).stage(data, meta)
    }

    fn pending(&self) -> usize {
        lock(&self.0).pending()
    }

    fn flush(&mut self) -> usize {
        lock(&self.0).flush()
    }
}

/// Which PMD polls which receive queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RxqAssignment {
    pub port: u32,
    pub queue: usize,
    pub core: usize,
}

/// What PMDs run with; replaced whole on every change.
pub(crate) struct Snapshot {
    pub generation: u64,
    /// Changes only when another slow path is attached: every PMD then forgets the
    /// flows it cached.
    pub upcall_epoch: u64,
    pub ports: Vec<Arc<PortHandle>>,
    /// What translates a packet no cached flow matches.
    pub upcall: Arc<dyn Upcall>,
    /// The most datapath flows one PMD caches.
    pub flow_limit: usize,
    pub assignment: Vec<RxqAssignment>,
    pub emc_insert_inv_prob: u32,
    /// `tx-flush-interval` in effect per port (µs); ports not listed use the default.
    pub tx_intervals: Vec<(u32, u32)>,
    pub tx_interval_default: u32,
    /// Ports whose setting is `auto`.
    pub tx_auto: Vec<u32>,
    /// `pmd-sleep-max` (µs).
    pub pmd_sleep_max_us: u32,
}

impl Snapshot {
    /// The transmit batching interval of port `no` (µs).
    pub fn tx_interval(&self, no: u32) -> u32 {
        self.tx_intervals
            .iter()
            .find(|(p, _)| *p == no)
            .map_or(self.tx_interval_default, |(_, us)| *us)
    }
}

/// One PMD as the control side sees it.
pub(crate) struct PmdControl {
    pub core: usize,
    pub pin: bool,
    /// The generation acknowledged, and why the PMD ended if it failed (its thread
    /// panicked): under one lock, so that a waiter sees either.
    pub acked: Mutex<Acked>,
    pub acked_cv: Condvar,
    /// A test asks the PMD to fail at its next reconfiguration.
    pub fail_on_reconfigure: AtomicBool,
    pub stop: AtomicBool,
    /// Set by a stats clear; the PMD restarts its longest-iteration figure.
    pub clear_max: AtomicBool,
    pub stats: PmdStats,
    /// The datapath flows the PMD caches, for the revalidator: the PMD adds to it
    /// (under the lock, on an upcall: never per packet), the revalidator dumps it
    /// and takes out what it retired.
    pub flows: Mutex<Vec<Arc<DpFlow>>>,
    /// Raised by the revalidator after it retired flows: the PMD sweeps them out of
    /// its caches and acknowledges (`Acked::swept`).
    pub sweep_requested: AtomicU64,
    /// Flows to cache without a packet (`Datapath::install_flows`): keys the PMD
    /// translates and caches as an upcall would; `installs_requested` counts the
    /// requests, so that the PMD looks at the list only when it grew.
    pub installs: Mutex<Vec<FlowKey>>,
    pub installs_requested: AtomicU64,
    /// The PMD's thread, to wake it when it parks with nothing to poll.
    pub thread: Mutex<Option<std::thread::Thread>>,
}

#[derive(Default)]
pub(crate) struct Acked {
    pub generation: u64,
    pub failed: Option<String>,
    /// The last sweep request done.
    pub swept: u64,
}

impl PmdControl {
    pub fn ack(&self, generation: u64) {
        lock(&self.acked).generation = generation;
        self.acked_cv.notify_all();
    }

    /// Waits (at most `timeout`) until the PMD's acknowledgements make `done` true;
    /// a PMD that failed or does not answer is an error.
    pub fn wait_for(
        &self,
        timeout: std::time::Duration,
        done: impl Fn(&Acked) -> bool,
    ) -> Result<(), DatapathError> {
        let acked = lock(&self.acked);
        let (acked, _) = self
            .acked_cv
            .wait_timeout_while(acked, timeout, |a| !done(a) && a.failed.is_none())
            .unwrap_or_else(|e| e.into_inner());
        if let Some(why) = &acked.failed {
            return Err(DatapathError::PmdFailed {
                core: self.core,
                why: why.clone(),
            });
        }
        if !done(&acked) {
            return Err(DatapathError::PmdStalled {
                core: self.core,
                waited: timeout,
            });
        }
        Ok(())
    }

    pub fn ack_sweep(&self, request: u64) {
        lock(&self.acked).swept = request;
        self.acked_cv.notify_all();
    }

    pub fn wake(&self) {
        if let Some(t) = lock(&self.thread).as_ref() {
            t.unpark();
        }
    }

    /// The PMD's thread ended in a panic: whoever waits for it stops waiting.
    pub(crate) fn fail(&self, why: String) {
        lock(&self.acked).failed = Some(why);
        self.acked_cv.notify_all();
    }

    pub(crate) fn failed(&self) -> Option<String> {
        lock(&self.acked).failed.clone()
    }
}

pub(crate) struct Shared {
    pub snapshot: ArcSwap<Snapshot>,
    /// Generation of the newest snapshot; PMDs poll this instead of the snapshot.
    pub generation: AtomicU64,
    /// The next datapath flow's id.
    pub next_flow_id: AtomicU64,
    /// Datapath flows the revalidator has retired so far (what watches the flows, the
    /// offload side, looks again only when this moved).
    pub retired: AtomicU64,
    /// The running PMDs, for the revalidator thread.
    pub pmds: ArcSwap<Vec<Arc<PmdControl>>>,
    /// One revalidator pass at a time (the thread's, or one a change asks for).
    pub revalidating: Mutex<()>,
    /// The cached flows by the rules their translation matched (`rule_index.rs`).
    pub by_rule: crate::rule_index::RuleIndex,
    /// Wakes the revalidator thread early: set when the slow path's inputs changed.
    pub kick: Mutex<bool>,
    pub kick_cv: Condvar,
    /// Packets to and from the control side (`punt.rs`).
    pub punts: Arc<crate::punt::PuntQueues>,
    /// The meters flows measure packets against (`meter.rs`).
    pub meters: crate::meter::Meters,
    /// What `TunnelPop` refused, by reason (tunnel_pop.rs).
    pub decap_drops: Arc<crate::tunnel_pop::DecapDrops>,
    /// The connection tracker `Ct` actions ask (one per datapath: every zone).
    pub conntrack: Arc<vsw_conntrack::Conntrack>,
}

impl Shared {
    /// Asks the revalidator thread for a pass now.
    pub fn kick_revalidator(&self) {
        *lock(&self.kick) = true;
        self.kick_cv.notify_all();
    }
}
