//! One bridge's slow path: its pipeline (swapped whole on a rule change), its MAC
//! table and its ports, and the generation that says when any of them changed.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use arc_swap::ArcSwap;
use vsw_datapath::{Translation, Upcall};
use vsw_flow::{MacTable, Pipeline};
use vsw_packet::{FlowKey, MacAddr};

use crate::attribution::FlowCredit;
use crate::trace::Trace;
use crate::xlate::{translate, XlateEnv, Xlated};

/// Counts every change to what translation reads: rules, ports, the MAC table.
#[derive(Debug, Default)]
pub(crate) struct Generation {
    value: AtomicU64,
}

impl Generation {
    pub fn bump(&self) {
        self.value.fetch_add(1, Ordering::SeqCst);
    }

    fn get(&self) -> u64 {
        self.value.load(Ordering::SeqCst)
    }
}

/// A MAC table entry as `fdb/show` lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MacView {
    pub mac: MacAddr,
    pub vlan: u16,
    pub port: u32,
    pub age_s: u64,
}

pub struct Ofproto {
    pipeline: ArcSwap<Pipeline>,
    /// Taken by translations (upcalls and revalidation, never per packet).
    macs: Arc<Mutex<MacTable>>,
    ports: ArcSwap<Vec<u32>>,
    generation: Arc<Generation>,
    /// Translations that failed (resubmit loops): their packets were dropped.
    xlate_errors: AtomicU64,
}

impl std::fmt::Debug for Ofproto {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ofproto")
            .field("rules", &self.pipeline.load().len())
            .field("generation", &self.generation.get())
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Ofproto {
    pub fn new(pipeline: Pipeline) -> Arc<Ofproto> {
        Arc::new(Ofproto {
            pipeline: ArcSwap::from_pointee(pipeline),
            macs: Arc::new(Mutex::new(MacTable::default())),
            ports: ArcSwap::from_pointee(Vec::new()),
            generation: Arc::new(Generation::default()),
            xlate_errors: AtomicU64::new(0),
        })
    }

    pub fn pipeline(&self) -> Arc<Pipeline> {
        self.pipeline.load_full()
    }

    /// Puts new rules in place. Flows translated from the old ones are found by the
    /// next revalidator pass (the caller runs one before it answers).
    pub fn set_pipeline(&self, pipeline: Pipeline) {
        self.pipeline.store(Arc::new(pipeline));
        // After the store: a translation that read the old generation may have seen
        // the new rules, never the other way round.
        self.generation.bump();
    }

    /// The ports, in the order NORMAL and FLOOD send to them.
    pub fn set_ports(&self, mut ports: Vec<u32>) {
        ports.sort_unstable();
        self.ports.store(Arc::new(ports));
        self.generation.bump();
    }

    /// Forgets the hosts learned on `port` (it went away).
    pub fn flush_port(&self, port: u32) {
        lock(&self.macs).flush_port(port);
        self.generation.bump();
    }

    /// Ages out MAC entries; true when some went (flows must be revalidated).
    pub fn expire_macs(&self, now_ms: u64) -> bool {
        let gone = lock(&self.macs).expire(now_ms);
        if gone > 0 {
            self.generation.bump();
        }
        gone > 0
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

    fn run(&self, key: &FlowKey, now_ms: u64, learn: bool, trace: bool) -> (Xlated, u64) {
        let mut macs = lock(&self.macs);
        // Read under the MAC table's lock, before the rules: see `set_pipeline`.
        let generation = self.generation.get();
        let pipeline = self.pipeline.load();
        let ports = self.ports.load();
        let mut env = XlateEnv {
            pipeline: &pipeline,
            macs: &mut macs,
            ports: &ports,
            now_ms,
            learn,
            trace,
        };
        let x = translate(&mut env, key);
        let generation = if x.mac_changed {
            // This translation saw the table as it learned it; others made before
            // may have sent the host elsewhere.
            self.generation.bump();
            self.generation.get()
        } else {
            generation
        };
        if x.error.is_some() {
            self.xlate_errors.fetch_add(1, Ordering::Relaxed);
        }
        (x, generation)
    }

    /// Translates `key` as `vswctl trace` shows it (no learning).
    pub fn trace(&self, key: &FlowKey, now_ms: u64) -> Trace {
        let (x, _) = self.run(key, now_ms, false, true);
        Trace {
            key: *key,
            steps: x.steps,
            final_key: x.final_key,
            megaflow: vsw_flow::Match::new(*key, x.mask),
            actions: x.actions,
            error: x.error,
        }
    }

    /// A translation for tests and benchmarks (no learning, no tracing).
    pub fn translate_key(&self, key: &FlowKey, now_ms: u64) -> Xlated {
        self.run(key, now_ms, false, false).0
    }
}

impl Upcall for Ofproto {
    fn generation(&self) -> u64 {
        self.generation.get()
    }

    fn translate(&self, key: &FlowKey, now_ms: u64, learn: bool) -> Translation {
        let (x, generation) = self.run(key, now_ms, learn, false);
        Translation {
            mask: x.mask,
            actions: x.actions,
            attribution: Arc::new(FlowCredit {
                rules: x.rules,
                learned: x.learned,
                macs: self.macs.clone(),
                generation: self.generation.clone(),
            }),
            generation,
        }
    }

    fn revalidating(&self, now_ms: u64) {
        self.expire_macs(now_ms);
    }
}
