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

/// One part of the slow path (a bridge, a backer's map): its changes are counted in
/// the shared generation, and the count of the last one is kept.
#[derive(Debug)]
pub(crate) struct Changes {
    generation: Arc<Generation>,
    /// The generation its last change made.
    last: AtomicU64,
    /// Changes under way: their generation may not be in `last` yet.
    changing: AtomicUsize,
}

impl Changes {
    pub fn new(generation: Arc<Generation>) -> Arc<Changes> {
        Arc::new(Changes {
            generation,
            last: AtomicU64::new(0),
            changing: AtomicUsize::new(0),
        })
    }

    /// Something of this part changed (after the change is in place: a translation
    /// that read the old generation may have seen the new state, never the other
    /// way round).
    pub fn bump(&self) {
        self.changing.fetch_add(1, Ordering::SeqCst);
        let g = self.generation.bump();
        self.last.fetch_max(g, Ordering::SeqCst);
        self.changing.fetch_sub(1, Ordering::SeqCst);
    }

    /// The shared generation now.
    pub fn get(&self) -> u64 {
        self.generation.get()
    }

    /// Whether nothing of this part changed after generation `g` (a change under
    /// way counts as changed). A caller reads the shared generation before asking:
    /// a change it did not see then either shows here or moves the generation past
    /// what it read.
    pub fn unchanged_since(&self, g: u64) -> bool {
        self.changing.load(Ordering::SeqCst) == 0 && self.last.load(Ordering::SeqCst) <= g
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
        assert!(a.unchanged_since(made), "only b changed");
        assert!(!b.unchanged_since(made));
        assert!(b.unchanged_since(g.get()));
        a.changing.fetch_add(1, Ordering::SeqCst);
        assert!(!a.unchanged_since(g.get()), "a change under way");
    }
}
