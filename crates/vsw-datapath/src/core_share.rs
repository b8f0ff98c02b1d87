//! How many PMD threads poll each core. Every bridge of a vswd runs PMDs of its own
//! on the same `pmd-cpu-mask`, so a core can carry several busy-polling threads; the
//! scheduler would let each spin through a whole time slice while packets for
//! another wait, which turns into milliseconds of delay per hop. A PMD that finds
//! nothing to do on a shared core therefore yields it at once.

use std::sync::atomic::{AtomicU16, Ordering};

/// Cores counted; PMDs on higher-numbered ones are treated as alone on theirs.
const MAX_CORES: usize = 1024;

static PMDS_ON_CORE: [AtomicU16; MAX_CORES] = [const { AtomicU16::new(0) }; MAX_CORES];

/// A PMD's place on its core, given back when dropped.
#[derive(Debug)]
pub(crate) struct CoreClaim {
    core: usize,
}

impl CoreClaim {
    pub(crate) fn new(core: usize) -> CoreClaim {
        if let Some(n) = PMDS_ON_CORE.get(core) {
            n.fetch_add(1, Ordering::Relaxed);
        }
        CoreClaim { core }
    }

    /// Whether another PMD polls this core too.
    #[inline]
    pub(crate) fn shared(&self) -> bool {
        PMDS_ON_CORE
            .get(self.core)
            .is_some_and(|n| n.load(Ordering::Relaxed) > 1)
    }
}

impl Drop for CoreClaim {
    fn drop(&mut self) {
        if let Some(n) = PMDS_ON_CORE.get(self.core) {
            n.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_core_is_shared_while_two_claims_hold_it() {
        // A core number no other test's PMD uses.
        let a = CoreClaim::new(MAX_CORES - 1);
        assert!(!a.shared());
        let b = CoreClaim::new(MAX_CORES - 1);
        assert!(a.shared() && b.shared());
        drop(b);
        assert!(!a.shared());
        // Out of range: counted nowhere, never shared.
        assert!(!CoreClaim::new(MAX_CORES + 5).shared());
    }
}
