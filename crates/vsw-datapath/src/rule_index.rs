//! The cached datapath flows by the rules (by address) their translation matched:
//! a change that only removes rules revalidates just their flows
//! (`revalidate::pass_removed`). Filled when a flow is cached or confirmed, under
//! its PMD's registry lock; pruned by full passes, a few rules at a time.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use crate::dpflow::DpFlow;

/// Rules whose entries one turn of [`RuleIndex::prune`] looks at under the lock (a
/// PMD caching a flow waits for it no longer than that).
const PRUNE_CHUNK: usize = 256;

#[derive(Default)]
pub(crate) struct RuleIndex {
    by_rule: Mutex<HashMap<usize, Vec<Weak<DpFlow>>>>,
}

/// The addresses of the rules `flow`'s translation matched.
pub(crate) fn rules_of(flow: &DpFlow) -> Vec<usize> {
    flow.rules()
        .iter()
        .map(|r| Arc::as_ptr(r) as usize)
        .collect()
}

impl RuleIndex {
    fn lock(&self) -> MutexGuard<'_, HashMap<usize, Vec<Weak<DpFlow>>>> {
        self.by_rule.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Notes `flow` under each rule its translation matched but those of `already`
    /// (where it is noted: each flow once under a rule).
    pub fn note(&self, flow: &Arc<DpFlow>, already: &[usize]) {
        let rules = rules_of(flow);
        if rules.is_empty() {
            return;
        }
        let mut by_rule = self.lock();
        for at in rules {
            if !already.contains(&at) {
                by_rule.entry(at).or_default().push(Arc::downgrade(flow));
            }
        }
    }

    /// The live flows noted under any of `rules`, each once; the rules forgotten.
    pub fn take(&self, rules: &[usize]) -> Vec<Arc<DpFlow>> {
        let mut flows: Vec<Arc<DpFlow>> = {
            let mut by_rule = self.lock();
            rules
                .iter()
                .filter_map(|r| by_rule.remove(r))
                .flatten()
                .filter_map(|w| w.upgrade())
                .filter(|f| !f.is_dead())
                .collect()
        };
        flows.sort_by_key(|f| Arc::as_ptr(f) as usize);
        flows.dedup_by(|a, b| Arc::ptr_eq(a, b));
        flows
    }

    /// Forgets the flows that are gone or no longer match a rule they are noted
    /// under, and the rules no flow is noted under any more — a few rules at a
    /// time, the lock released between.
    pub fn prune(&self) {
        let rules: Vec<usize> = self.lock().keys().copied().collect();
        for chunk in rules.chunks(PRUNE_CHUNK) {
            let mut by_rule = self.lock();
            for r in chunk {
                if let Some(flows) = by_rule.get_mut(r) {
                    // Gone, or confirmed since by a translation of other rules.
                    flows.retain(|w| {
                        w.upgrade()
                            .is_some_and(|f| !f.is_dead() && rules_of(&f).contains(r))
                    });
                    if flows.is_empty() {
                        by_rule.remove(r);
                    }
                }
            }
        }
    }
}
