//! The control side of the datapath: what the daemon calls to change ports, rules and
//! options while PMDs run.
//!
//! Every change is published as a new immutable snapshot. The PMD picks it up at the
//! top of its loop and acknowledges it; a change returns only after that, so when
//! `remove_port` returns, no PMD holds the port's queues any more.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use arc_swap::ArcSwap;
use vsw_flow::Classifier;

use crate::pmd::Pmd;
use crate::port::PortQueues;
use crate::stats::{PmdStats, PmdStatsView, PortStats};

/// How long a change may wait for the PMD to take it up before it is reported.
const ACK_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum DatapathError {
    #[error("port number {0} is already in use")]
    PortNumberInUse(u32),
    #[error("no port number {0}")]
    NoSuchPort(u32),
    #[error("the PMD thread did not take up the change within {0:?}")]
    PmdStalled(Duration),
    #[error("cannot start the PMD thread: {0}")]
    Spawn(#[source] std::io::Error),
}

/// A port as the datapath knows it: its number, name, counters, and its queues until a
/// PMD takes them.
pub struct PortHandle {
    pub no: u32,
    pub name: String,
    pub stats: Arc<PortStats>,
    queues: Mutex<Option<PortQueues>>,
}

impl PortHandle {
    pub fn new(no: u32, name: &str, queues: PortQueues, stats: Arc<PortStats>) -> Arc<PortHandle> {
        Arc::new(PortHandle {
            no,
            name: name.to_string(),
            stats,
            queues: Mutex::new(Some(queues)),
        })
    }

    /// Hands the queues to the PMD that will poll them (once).
    pub(crate) fn take_queues(&self) -> Option<PortQueues> {
        self.queues.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

/// What PMDs run with; replaced whole on every change.
pub(crate) struct Snapshot {
    pub generation: u64,
    pub ports: Vec<Arc<PortHandle>>,
    pub classifier: Arc<Classifier>,
    pub pmd_core: Option<usize>,
}

pub(crate) struct Shared {
    pub snapshot: ArcSwap<Snapshot>,
    /// Generation of the newest snapshot; PMDs poll this instead of the snapshot.
    pub generation: AtomicU64,
    pub acked: Mutex<u64>,
    pub acked_cv: Condvar,
    pub stop: AtomicBool,
    pub stats: PmdStats,
}

impl Shared {
    pub fn ack(&self, generation: u64) {
        *self.acked.lock().unwrap_or_else(|e| e.into_inner()) = generation;
        self.acked_cv.notify_all();
    }
}

pub struct Datapath {
    shared: Arc<Shared>,
    pmd: Option<JoinHandle<()>>,
    stats_base: PmdStatsView,
}

impl Datapath {
    /// Starts the datapath with one PMD thread, pinned to `pmd_core` when given.
    pub fn start(pmd_core: Option<usize>) -> Result<Datapath, DatapathError> {
        let snapshot = Snapshot {
            generation: 1,
            ports: Vec::new(),
            classifier: Arc::new(Classifier::new()),
            pmd_core,
        };
        let shared = Arc::new(Shared {
            snapshot: ArcSwap::from_pointee(snapshot),
            generation: AtomicU64::new(1),
            acked: Mutex::new(0),
            acked_cv: Condvar::new(),
            stop: AtomicBool::new(false),
            stats: PmdStats::default(),
        });
        // Measured before the PMD starts so that the PMD never waits for it.
        crate::clock::cycles_per_second();
        let for_pmd = shared.clone();
        let name = pmd_core.map_or_else(|| "pmd".to_string(), |c| format!("pmd-c{c:02}"));
        let pmd = std::thread::Builder::new()
            .name(name)
            .spawn(move || Pmd::new(for_pmd).run())
            .map_err(DatapathError::Spawn)?;
        let dp = Datapath {
            shared,
            pmd: Some(pmd),
            stats_base: PmdStatsView::default(),
        };
        dp.wait_ack(1)?;
        Ok(dp)
    }

    fn current(&self) -> Arc<Snapshot> {
        self.shared.snapshot.load_full()
    }

    fn wait_ack(&self, generation: u64) -> Result<(), DatapathError> {
        let acked = self.shared.acked.lock().unwrap_or_else(|e| e.into_inner());
        let (acked, timeout) = self
            .shared
            .acked_cv
            .wait_timeout_while(acked, ACK_TIMEOUT, |a| *a < generation)
            .unwrap_or_else(|e| e.into_inner());
        if timeout.timed_out() && *acked < generation {
            return Err(DatapathError::PmdStalled(ACK_TIMEOUT));
        }
        Ok(())
    }

    fn publish(
        &mut self,
        ports: Vec<Arc<PortHandle>>,
        classifier: Arc<Classifier>,
        pmd_core: Option<usize>,
    ) -> Result<(), DatapathError> {
        let generation = self.current().generation + 1;
        self.shared.snapshot.store(Arc::new(Snapshot {
            generation,
            ports,
            classifier,
            pmd_core,
        }));
        self.shared.generation.store(generation, Ordering::Release);
        if let Some(pmd) = &self.pmd {
            pmd.thread().unpark();
        }
        self.wait_ack(generation)
    }

    pub fn add_port(&mut self, port: Arc<PortHandle>) -> Result<(), DatapathError> {
        let cur = self.current();
        if cur.ports.iter().any(|p| p.no == port.no) {
            return Err(DatapathError::PortNumberInUse(port.no));
        }
        let mut ports = cur.ports.clone();
        ports.push(port);
        self.publish(ports, cur.classifier.clone(), cur.pmd_core)
    }

    /// Removes a port. When this returns, the PMD has sent what it had staged for the
    /// port and dropped its queues (closing the device).
    pub fn remove_port(&mut self, no: u32) -> Result<Arc<PortHandle>, DatapathError> {
        let cur = self.current();
        let handle = cur
            .ports
            .iter()
            .find(|p| p.no == no)
            .cloned()
            .ok_or(DatapathError::NoSuchPort(no))?;
        let ports = cur.ports.iter().filter(|p| p.no != no).cloned().collect();
        self.publish(ports, cur.classifier.clone(), cur.pmd_core)?;
        Ok(handle)
    }

    pub fn ports(&self) -> Vec<Arc<PortHandle>> {
        self.current().ports.clone()
    }

    pub fn classifier(&self) -> Arc<Classifier> {
        self.current().classifier.clone()
    }

    pub fn set_classifier(&mut self, classifier: Classifier) -> Result<(), DatapathError> {
        let cur = self.current();
        self.publish(cur.ports.clone(), Arc::new(classifier), cur.pmd_core)
    }

    pub fn pmd_core(&self) -> Option<usize> {
        self.current().pmd_core
    }

    /// Moves the PMD to another core (it re-pins itself when it takes the change).
    pub fn set_pmd_core(&mut self, core: Option<usize>) -> Result<(), DatapathError> {
        let cur = self.current();
        self.publish(cur.ports.clone(), cur.classifier.clone(), core)
    }

    /// PMD counters since the last [`Datapath::clear_pmd_stats`].
    pub fn pmd_stats(&self) -> PmdStatsView {
        self.raw_pmd_stats().since(&self.stats_base)
    }

    fn raw_pmd_stats(&self) -> PmdStatsView {
        self.shared
            .stats
            .view(self.pmd_core(), crate::clock::cycles_per_second())
    }

    pub fn clear_pmd_stats(&mut self) {
        self.stats_base = self.raw_pmd_stats();
    }
}

impl Drop for Datapath {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(pmd) = self.pmd.take() {
            pmd.thread().unpark();
            if pmd.join().is_err() {
                tracing::error!("PMD thread panicked");
            }
        }
    }
}
