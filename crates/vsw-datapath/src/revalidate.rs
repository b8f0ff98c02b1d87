//! The revalidator: dumps every PMD's datapath flows, pushes their counts to whatever
//! produced them, retires flows idle too long, and translates again each flow whose
//! inputs changed since it was made (the slow path may tell that what a flow read is
//! unchanged, though other inputs moved the generation: such a flow is kept without
//! a translation), retiring those whose answer differs. A pass ends
//! only when every PMD has swept what it retired out of its caches, so a rule change
//! that runs a pass before it is answered never leaves a packet forwarded by the old
//! result.
//!
//! A thread runs a pass every `revalidator-interval` and at once when a PMD saw the
//! slow path's inputs change (a host learned or moved); a change asks for one itself
//! ([`Datapath::revalidate`]). Passes never overlap.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::dpflow::DpFlow;
use crate::error::DatapathError;
use crate::shared::{lock, Shared};

/// How long a pass waits for a PMD to sweep before it reports the PMD stalled.
const SWEEP_TIMEOUT: Duration = Duration::from_secs(5);

/// What one pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RevalidateSummary {
    /// Flows looked at.
    pub flows: usize,
    /// Translated again (their inputs changed).
    pub translated: usize,
    /// Retired because the translation now differs.
    pub stale: usize,
    /// Retired because no packet used them for `max_idle_ms`.
    pub idle: usize,
}

/// The revalidator thread's settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RevalidatorConfig {
    pub interval_ms: u64,
    pub max_idle_ms: u64,
}

impl Default for RevalidatorConfig {
    fn default() -> Self {
        RevalidatorConfig {
            interval_ms: 500,
            max_idle_ms: 10_000,
        }
    }
}

pub(crate) fn dump(shared: &Shared) -> Vec<Arc<DpFlow>> {
    shared
        .pmds
        .load()
        .iter()
        .flat_map(|c| lock(&c.flows).clone())
        .collect()
}

/// Translates `f` again: confirmed (and indexed by its rules now) when the answer
/// is the same, else retired into `retired`.
fn recheck(
    shared: &Shared,
    upcall: &dyn crate::upcall::Upcall,
    f: &Arc<DpFlow>,
    now_ms: u64,
    sum: &mut RevalidateSummary,
    retired: &mut Vec<Arc<DpFlow>>,
) {
    sum.translated += 1;
    let t = upcall.translate(&f.key, now_ms, false);
    let same_headers = t.headers.len() == f.headers.len()
        && t.headers.iter().zip(f.headers.iter()).all(|(a, b)| a == b);
    if t.cacheable
        && DpFlow::mask_of(&t.mask) == *f.matcher.mask()
        && t.actions[..] == f.actions[..]
        && same_headers
    {
        let noted = crate::rule_index::rules_of(f);
        f.confirm(t.generation, t.attribution);
        shared.by_rule.note(f, &noted);
    } else {
        f.kill();
        sum.stale += 1;
        retired.push(f.clone());
    }
}

/// Every PMD drops its retired flows from its registry and sweeps them from its
/// caches; returns once each has (or the wait timed out: an error).
fn sweep(shared: &Shared, retired: &[Arc<DpFlow>]) -> Result<(), DatapathError> {
    if retired.is_empty() {
        return Ok(());
    }
    let pmds = shared.pmds.load_full();
    for control in pmds.iter() {
        lock(&control.flows).retain(|f| !f.is_dead());
    }
    shared
        .retired
        .fetch_add(retired.len() as u64, Ordering::AcqRel);
    for control in pmds.iter() {
        let request = control.sweep_requested.fetch_add(1, Ordering::AcqRel) + 1;
        control.wake();
        control.wait_for(SWEEP_TIMEOUT, |a| a.swept >= request)?;
    }
    // A batch that took a flow before it was retired counts on it after the push
    // above; once every PMD has swept, nothing counts on it any more: the last of
    // its packets go to the rules now.
    for f in retired {
        f.push_stats();
    }
    Ok(())
}

/// The pass after a change that only removed `rules`: the flows indexed under one
/// of them are translated again, no other.
pub(crate) fn pass_removed(
    shared: &Shared,
    rules: &[usize],
    now_ms: u64,
) -> Result<RevalidateSummary, DatapathError> {
    let _one_at_a_time = lock(&shared.revalidating);
    let upcall = shared.snapshot.load().upcall.clone();
    // Each PMD's registry lock taken once: a flow being cached meanwhile is in the
    // index by now, or was refused (the removal moved the generation first).
    for control in shared.pmds.load_full().iter() {
        drop(lock(&control.flows));
    }
    let flows = shared.by_rule.take(rules);
    let mut sum = RevalidateSummary::default();
    let mut retired = Vec::new();
    for f in &flows {
        sum.flows += 1;
        f.push_stats();
        recheck(shared, &*upcall, f, now_ms, &mut sum, &mut retired);
    }
    sweep(shared, &retired)?;
    Ok(sum)
}

/// One pass, in whichever thread asks.
pub(crate) fn pass(
    shared: &Shared,
    now_ms: u64,
    max_idle_ms: u64,
) -> Result<RevalidateSummary, DatapathError> {
    let _one_at_a_time = lock(&shared.revalidating);
    let upcall = shared.snapshot.load().upcall.clone();
    upcall.revalidating(now_ms);
    let pmds = shared.pmds.load_full();
    let mut sum = RevalidateSummary::default();
    let mut retired: Vec<Arc<DpFlow>> = Vec::new();
    for control in pmds.iter() {
        let flows = lock(&control.flows).clone();
        let before = retired.len();
        for f in &flows {
            sum.flows += 1;
            f.push_stats();
            let used = f.stats().used_ms.unwrap_or(f.created_ms);
            if now_ms.saturating_sub(used) >= max_idle_ms {
                f.kill();
                sum.idle += 1;
                retired.push(f.clone());
                continue;
            }
            let current = upcall.generation();
            if f.generation() == current || f.right_without_translation(current) {
                continue;
            }
            recheck(shared, &*upcall, f, now_ms, &mut sum, &mut retired);
        }
        if retired.len() > before {
            lock(&control.flows).retain(|f| !f.is_dead());
        }
    }
    shared.by_rule.prune();
    sweep(shared, &retired)?;
    Ok(sum)
}

/// The revalidator thread: runs until `Revalidator` is dropped.
pub(crate) struct Revalidator {
    shared: Arc<Shared>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Revalidator {
    pub fn start(shared: Arc<Shared>, config: RevalidatorConfig) -> std::io::Result<Revalidator> {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (s, halt) = (shared.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("revalidator".into())
            .spawn(move || run(&s, &halt, config))?;
        Ok(Revalidator {
            shared,
            stop,
            thread: Some(thread),
        })
    }
}

fn run(shared: &Shared, stop: &std::sync::atomic::AtomicBool, config: RevalidatorConfig) {
    let interval = Duration::from_millis(config.interval_ms.max(1));
    let mut next = Instant::now() + interval;
    while !stop.load(Ordering::Acquire) {
        let kicked = lock(&shared.kick);
        let wait = next.saturating_duration_since(Instant::now());
        let (mut kicked, _) = shared
            .kick_cv
            .wait_timeout_while(kicked, wait, |k| !*k && !stop.load(Ordering::Acquire))
            .unwrap_or_else(|e| e.into_inner());
        *kicked = false;
        drop(kicked);
        if stop.load(Ordering::Acquire) {
            break;
        }
        next = Instant::now() + interval;
        let now_ms = crate::clock::now_ms();
        if let Err(e) = pass(shared, now_ms, config.max_idle_ms) {
            tracing::warn!(error = %e, "revalidator pass failed");
        }
        // Connections no packet looked up since they expired (a lookup takes
        // an expired one out itself); the PMDs wait for nothing of this.
        shared.conntrack.sweep(now_ms);
    }
}

impl Drop for Revalidator {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        self.shared.kick_revalidator();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
