//! The slow path's generation: what tells a datapath flow it may be stale.
//!
//! One count for everything a datapath's translations read (every bridge of a
//! backer, and its map of ports): a flow made under an older count may be stale. Each
//! part also remembers the count of its own last change (`Changes`), so that a flow
//! whose translation read only parts that did not change since it was made is known
//! right without being translated again: a rule changed in one bridge costs the
//! revalidator only the flows that went through that bridge.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;

/// Recent changes that only removed rules, kept per part: a flow older than the
/// oldest kept is translated again after any change.
const REMOVALS_KEPT: usize = 64;

/// Counts every change to what translation reads: rules, ports, the MAC tables.
#[derive(Debug, Default)]
pub(crate) struct Generation {
    value: AtomicU64,
}

impl Generation {
    fn bump(&self) -> u64 {
        self.value.fetch_add(1, Ordering::SeqCst) + 1
    }

    pub fn get(&self) -> u64 {
        self.value.load(Ordering::SeqCst)
    }
}

/// A change that only removed rules: its generation, and the rules (by address).
type Removal = (u64, Arc<[usize]>);

/// One part of the slow path (a bridge, a backer's map): its changes are counted in
/// the shared generation, and the count of the last one is kept — and, for the
/// changes that only removed rules, which rules they removed: a flow whose
/// translation matched none of them is right still (removing a rule that was not a
/// lookup's answer changes no answer, for any key the flow covers).
#[derive(Debug)]
pub(crate) struct Changes {
    generation: Arc<Generation>,
    /// The generation its last change made.
    last: AtomicU64,
    /// The generation of its last change that was not only rules removed (or of a
    /// removal no longer kept in `removals`).
    last_other: AtomicU64,
    /// Its last [`REMOVALS_KEPT`] removals, oldest first.
    removals: ArcSwap<Vec<Removal>>,
    /// Changes under way: their generation may not be in `last` yet.
    changing: AtomicUsize,
}

impl Changes {
    pub fn new(generation: Arc<Generation>) -> Arc<Changes> {
        Arc::new(Changes {
            generation,
            last: AtomicU64::new(0),
            last_other: AtomicU64::new(0),
            removals: ArcSwap::from_pointee(Vec::new()),
            changing: AtomicUsize::new(0),
        })
    }

    /// Something of this part changed (after the change is in place: a translation
    /// that read the old generation may have seen the new state, never the other
    /// way round).
    pub fn bump(&self) {
        self.changing.fetch_add(1, Ordering::SeqCst);
        let g = self.generation.bump();
        self.last_other.fetch_max(g, Ordering::SeqCst);
        self.last.fetch_max(g, Ordering::SeqCst);
        self.changing.fetch_sub(1, Ordering::SeqCst);
    }

    /// This part's change removed `rules` (by address) and did nothing else (after
    /// the change is in place, as `bump`).
    pub fn bump_removing(&self, rules: &[usize]) {
        self.changing.fetch_add(1, Ordering::SeqCst);
        let g = self.generation.bump();
        // Sorted: a flow's few rules are looked up in it, whatever its size.
        let mut sorted = rules.to_vec();
        sorted.sort_unstable();
        let rules: Arc<[usize]> = sorted.into();
        self.removals.rcu(|kept| {
            let mut next = Vec::with_capacity(REMOVALS_KEPT);
            let skip = (kept.len() + 1).saturating_sub(REMOVALS_KEPT);
            for (at, _) in &kept[..skip] {
                // Forgotten: from now on it counts as a change of any kind.
                self.last_other.fetch_max(*at, Ordering::SeqCst);
            }
            next.extend(kept[skip..].iter().cloned());
            next.push((g, rules.clone()));
            next
        });
        self.last.fetch_max(g, Ordering::SeqCst);
        self.changing.fetch_sub(1, Ordering::SeqCst);
    }

    /// The shared generation now.
    pub fn get(&self) -> u64 {
        self.generation.get()
    }

    /// Whether every change of this part after generation `g` (none at all, or
    /// only removals of rules none of which the flow's translation `matched`: given
    /// removed rules' addresses, sorted, whether one is the flow's) leaves a flow
    /// made at `g` right (a change
    /// under way counts as one of any kind). A caller reads the shared generation
    /// before asking: a change it did not see then either shows here or moves the
    /// generation past what it read.
    pub fn right_since(&self, g: u64, matched: &dyn Fn(&[usize]) -> bool) -> bool {
        if self.changing.load(Ordering::SeqCst) != 0 {
            return false;
        }
        if self.last.load(Ordering::SeqCst) <= g {
            return true;
        }
        // The removals first, then whether anything else happened: a removal
        // forgotten meanwhile raised `last_other` before it left the list.
        let removals = self.removals.load();
        if self.last_other.load(Ordering::SeqCst) > g {
            return false;
        }
        removals
            .iter()
            .filter(|(at, _)| *at > g)
            .all(|(_, removed)| !matched(removed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_part_is_unchanged_since_a_generation_until_it_changes() {
        let g = Arc::new(Generation::default());
        let (a, b) = (Changes::new(g.clone()), Changes::new(g.clone()));
        a.bump();
        let made = g.get();
        b.bump();
        assert!(a.right_since(made, &|_: &[usize]| false), "only b changed");
        assert!(!b.right_since(made, &|_: &[usize]| false));
        assert!(b.right_since(g.get(), &|_: &[usize]| false));
        a.changing.fetch_add(1, Ordering::SeqCst);
        assert!(
            !a.right_since(g.get(), &|_: &[usize]| false),
            "a change under way"
        );
    }

    #[test]
    fn a_flow_outlives_removals_of_rules_it_did_not_match_and_nothing_else() {
        let g = Arc::new(Generation::default());
        let a = Changes::new(g.clone());
        a.bump();
        let made = g.get();
        let matched = |removed: &[usize]| removed.binary_search(&7).is_ok();
        a.bump_removing(&[1, 2]);
        assert!(
            !a.right_since(made, &|_: &[usize]| true),
            "a removal is a change"
        );
        assert!(a.right_since(made, &matched), "rules it did not match");
        a.bump_removing(&[7]);
        assert!(!a.right_since(made, &matched), "a rule it matched");
        let later = g.get();
        assert!(a.right_since(later, &matched));
        a.bump();
        assert!(!a.right_since(later, &matched), "any other change");
        // Removals no longer kept count as changes of any kind.
        let made = g.get();
        for i in 0..REMOVALS_KEPT {
            a.bump_removing(&[100 + i]);
        }
        assert!(a.right_since(made, &matched));
        a.bump_removing(&[1000]);
        assert!(
            !a.right_since(made, &matched),
            "the oldest one after it forgotten"
        );
        assert!(a.right_since(made + 1, &matched));
    }
}
