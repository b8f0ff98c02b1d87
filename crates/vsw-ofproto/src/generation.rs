//! The slow path's generation: what tells a datapath flow it may be stale.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counts every change to what translation reads: rules, ports, the MAC table.
#[derive(Debug, Default)]
pub(crate) struct Generation {
    value: AtomicU64,
}

impl Generation {
    pub fn bump(&self) {
        self.value.fetch_add(1, Ordering::SeqCst);
    }

    pub fn get(&self) -> u64 {
        self.value.load(Ordering::SeqCst)
    }
}
