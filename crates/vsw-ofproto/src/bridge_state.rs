//! One bridge as translation sees it: its pipeline (swapped whole on a rule change),
//! its MAC table and its ports, and the generation that says when any of them
//! changed. Below the backer and translation, which both read it; `Ofproto` is this
//! and the bridge's place in a backer.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use arc_swap::ArcSwap;
use vsw_flow::{
    FlowSpec, LearnOutcome, MacTable, McastConfig, McastEntry, McastTable, Pipeline, Rule,
};
use vsw_packet::MacAddr;

use crate::attribution::TableCounters;
use crate::generation::{Changes, Generation};
use crate::punt_notes::{PuntNote, PuntNotes};

/// What a `learn` found or did ([`BridgeState::learn`]).
#[derive(Debug)]
pub(crate) enum Learning {
    /// The rule is in place as the learn would make it.
    InPlace(Arc<Rule>),
    /// The learn put it in place (new, or changed the rule of its match).
    Added(Arc<Rule>),
    /// Not in place, and nothing was done (no packet is passing).
    NotInPlace,
    /// The control side is changing the rules: nothing was done.
    Busy,
    /// The learn's limit kept it out.
    OverLimit,
}

/// A MAC table entry as `fdb/show` lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MacView {
    pub mac: MacAddr,
    pub vlan: u16,
    pub port: u32,
    pub age_s: u64,
}

/// What translation reads of one bridge, and what changes it: its pipeline
/// (swapped whole on a rule change), its MAC table, its ports and its switches, and
/// the generation that counts each change. No link to the backer: the backer holds
/// these (its `PortMap`), and translation reads a peer bridge's through it.
pub struct BridgeState {
    pub(crate) pipeline: ArcSwap<Pipeline>,
    /// Held by whoever changes the pipeline from the one in place: the control
    /// side for the whole of a change (read, copy, put in place), a `learn` for
    /// the rule it adds — tried only, so that no packet waits for a controller.
    rules_writer: Mutex<()>,
    /// Taken by translations (upcalls and revalidation, never per packet).
    pub(crate) macs: Arc<Mutex<MacTable>>,
    /// NORMAL's multicast snooping: its settings, the groups' members and the
    /// router ports. Taken by translations after `macs`, never per packet.
    pub(crate) mcast: Mutex<McastTable>,
    pub(crate) ports: ArcSwap<Vec<u32>>,
    /// Ports whose link is up (fast-failover groups' liveness).
    pub(crate) live_ports: ArcSwap<Vec<u32>>,
    /// Ports whose flows an offload provider may take: their IPv4 TCP/UDP datapath
    /// flows match an exact entry's fields, so that the provider can express them.
    pub(crate) offload_ports: ArcSwap<Vec<u32>>,
    /// This bridge's changes, counted in its datapath's generation.
    pub(crate) generation: Arc<Changes>,
    /// Translations that failed (resubmit loops): their packets were dropped.
    pub(crate) xlate_errors: AtomicU64,
    pub(crate) punt_notes: PuntNotes,
    pub(crate) table_counters: Arc<TableCounters>,
    /// Forwarding as a learning switch whatever the rules say (Open vSwitch's fail
    /// open: standalone, no controller reachable).
    pub(crate) fail_open: AtomicBool,
    /// `flow-restore-wait`: nothing is forwarded until the flows are restored.
    pub(crate) restore_wait: AtomicBool,
}

impl std::fmt::Debug for BridgeState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BridgeState")
            .field("rules", &self.pipeline.load().len())
            .field("generation", &self.generation.get())
            .finish()
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl BridgeState {
    /// A bridge's state, counting its changes in `generation` (its datapath's).
    pub(crate) fn new(pipeline: Pipeline, generation: Arc<Generation>) -> BridgeState {
        BridgeState {
            pipeline: ArcSwap::from_pointee(pipeline),
            rules_writer: Mutex::new(()),
            macs: Arc::new(Mutex::new(MacTable::default())),
            mcast: Mutex::new(McastTable::default()),
            ports: ArcSwap::from_pointee(Vec::new()),
            live_ports: ArcSwap::from_pointee(Vec::new()),
            offload_ports: ArcSwap::from_pointee(Vec::new()),
            generation: Changes::new(generation),
            xlate_errors: AtomicU64::new(0),
            punt_notes: PuntNotes::default(),
            table_counters: Arc::new(TableCounters::default()),
            fail_open: AtomicBool::new(false),
            restore_wait: AtomicBool::new(false),
        }
    }

    /// This bridge's changes (what a flow that went through it depends on).
    pub(crate) fn changes(&self) -> Arc<Changes> {
        self.generation.clone()
    }

    pub(crate) fn macs(&self) -> &Arc<Mutex<MacTable>> {
        &self.macs
    }

    pub(crate) fn punt_notes(&self) -> &PuntNotes {
        &self.punt_notes
    }

    pub(crate) fn ports(&self) -> Arc<Vec<u32>> {
        self.ports.load_full()
    }

    pub(crate) fn live_ports(&self) -> Arc<Vec<u32>> {
        self.live_ports.load_full()
    }

    pub fn pipeline(&self) -> Arc<Pipeline> {
        self.pipeline.load_full()
    }

    /// Held while the control side changes the rules from the ones in place
    /// (read them, change a copy, put it in place): no `learn` adds a rule
    /// meanwhile that the copy would not have.
    pub fn writing_rules(&self) -> MutexGuard<'_, ()> {
        lock(&self.rules_writer)
    }

    /// What a `learn` makes, `spec` (at most `limit` rules of its table with its
    /// cookie, 0: no limit): put in place when a packet is passing (`doing`),
    /// only looked for otherwise (a revalidation, a trace).
    pub(crate) fn learn(&self, spec: FlowSpec, limit: u32, now_ms: u64, doing: bool) -> Learning {
        if let Some(r) = self.pipeline.load().learned_in_place(&spec) {
            if doing {
                r.refresh(now_ms);
            }
            return Learning::InPlace(r.clone());
        }
        if !doing {
            // What a packet would get: kept out by the limit, or learned.
            let full = limit != 0
                && self
                    .pipeline
                    .load()
                    .table(spec.table)
                    .is_some_and(|t| t.count_cookie(spec.cookie) >= limit as usize);
            return if full {
                Learning::OverLimit
            } else {
                Learning::NotInPlace
            };
        }
        let _writing = match self.rules_writer.try_lock() {
            Ok(w) => w,
            // A panic while it was held (a PMD's, caught and restarted) leaves
            // nothing half-done: the pipeline is swapped whole.
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return Learning::Busy,
        };
        let mut next = (**self.pipeline.load()).clone();
        match next.learn(spec, limit, now_ms) {
            LearnOutcome::InPlace(r) => Learning::InPlace(r),
            LearnOutcome::OverLimit => Learning::OverLimit,
            LearnOutcome::Added(r) => {
                self.pipeline.store(Arc::new(next));
                // After the store, as `set_pipeline`.
                self.generation.bump();
                Learning::Added(r)
            }
        }
    }

    /// Puts new rules in place. Flows translated from the old ones are found by the
    /// next revalidator pass (the caller runs one before it answers).
    pub fn set_pipeline(&self, pipeline: Pipeline) {
        self.pipeline.store(Arc::new(pipeline));
        // After the store: a translation that read the old generation may have seen
        // the new rules, never the other way round.
        self.generation.bump();
    }

    /// [`BridgeState::set_pipeline`] for a change that only removed `removed` (taken
    /// from the running pipeline): the datapath flows whose translation matched
    /// none of them stay right without being translated again.
    pub fn set_pipeline_removing(&self, pipeline: Pipeline, removed: &[Arc<vsw_flow::Rule>]) {
        self.pipeline.store(Arc::new(pipeline));
        let at: Vec<usize> = removed.iter().map(|r| Arc::as_ptr(r) as usize).collect();
        self.generation.bump_removing(&at);
    }

    /// Fail open (every packet to NORMAL) or not; true when that changed (flows
    /// must be revalidated).
    pub fn set_fail_open(&self, open: bool) -> bool {
        let changed = self.fail_open.swap(open, Ordering::AcqRel) != open;
        if changed {
            self.generation.bump();
        }
        changed
    }

    pub fn fail_open(&self) -> bool {
        self.fail_open.load(Ordering::Acquire)
    }

    /// Waits for the flows to be restored (every packet dropped, nothing learned) or
    /// not; true when that changed (flows must be revalidated).
    pub fn set_restore_wait(&self, wait: bool) -> bool {
        let changed = self.restore_wait.swap(wait, Ordering::AcqRel) != wait;
        if changed {
            self.generation.bump();
        }
        changed
    }

    pub fn restore_wait(&self) -> bool {
        self.restore_wait.load(Ordering::Acquire)
    }

    /// The ports, in the order NORMAL and FLOOD send to them.
    pub fn set_ports(&self, mut ports: Vec<u32>) {
        ports.sort_unstable();
        self.ports.store(Arc::new(ports));
        self.generation.bump();
    }

    /// The ports whose link is up; true when that changed (flows must be
    /// revalidated: a fast-failover group may choose another bucket).
    pub fn set_live_ports(&self, mut ports: Vec<u32>) -> bool {
        ports.sort_unstable();
        if **self.live_ports.load() == ports {
            return false;
        }
        self.live_ports.store(Arc::new(ports));
        self.generation.bump();
        true
    }

    /// The ports with an offload provider; true when that changed (flows must be
    /// revalidated).
    pub fn set_offload_ports(&self, mut ports: Vec<u32>) -> bool {
        ports.sort_unstable();
        if **self.offload_ports.load() == ports {
            return false;
        }
        self.offload_ports.store(Arc::new(ports));
        self.generation.bump();
        true
    }

    /// Forgets the hosts, memberships and router learned on `port` (it went away).
    pub fn flush_port(&self, port: u32) {
        lock(&self.macs).flush_port(port);
        lock(&self.mcast).flush_port(port);
        self.generation.bump();
    }

    /// Multicast snooping on or off, and how; true when that changed (flows must
    /// be revalidated). Switched off, what it learned is forgotten.
    pub fn set_mcast_snooping(&self, config: McastConfig) -> bool {
        let changed = lock(&self.mcast).set_config(config);
        if changed {
            self.generation.bump();
        }
        changed
    }

    pub fn mcast_snooping(&self) -> McastConfig {
        lock(&self.mcast).config()
    }

    /// Forgets every membership and router port (`mdb/flush`).
    pub fn flush_mcast(&self) {
        lock(&self.mcast).clear();
        self.generation.bump();
    }

    /// The memberships, then the router ports, as `mdb/show` lists them.
    pub fn mcast_entries(&self, now_ms: u64) -> Vec<McastEntry> {
        lock(&self.mcast).entries(now_ms)
    }

    /// Forgets every host learned (`fdb/flush`).
    pub fn flush_macs(&self) {
        lock(&self.macs).clear();
        self.generation.bump();
    }

    /// Ages out MAC entries, multicast memberships and router ports; true when
    /// some went (flows must be revalidated).
    pub fn expire_learned(&self, now_ms: u64) -> bool {
        let gone = lock(&self.macs).expire(now_ms) > 0;
        let gone = lock(&self.mcast).expire(now_ms) || gone;
        if gone {
            self.generation.bump();
        }
        gone
    }

    pub fn mac_entries(&self, now_ms: u64) -> Vec<MacView> {
        let mut v: Vec<MacView> = lock(&self.macs)
            .entries()
            .map(|(mac, vlan, e)| MacView {
                mac,
                vlan,
                port: e.port,
                age_s: now_ms.saturating_sub(e.last_seen_ms) / 1000,
            })
            .collect();
        v.sort_by_key(|e| (e.port, e.vlan, e.mac.0));
        v
    }

    pub fn xlate_errors(&self) -> u64 {
        self.xlate_errors.load(Ordering::Relaxed)
    }

    /// (lookups, matches) of a table so far (counts the revalidator has pushed).
    pub fn table_counts(&self, table: u8) -> (u64, u64) {
        self.table_counters.get(table)
    }

    /// What the translation that sent a packet up noted of it
    /// ([`vsw_datapath::DpAction::Controller`]'s number).
    pub fn punt_note(&self, id: u32) -> Option<PuntNote> {
        self.punt_notes.get(id)
    }
}
