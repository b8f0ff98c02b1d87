//! The datapath: PMD threads that poll receive queues, classify batches of packets
//! and send them through per-port output batches.
//!
//! Devices are known only through the [`RxQueue`]/[`TxQueue`] traits, so the whole
//! datapath runs on in-memory ports in tests.

pub mod clock;
pub mod datapath;
pub mod memory;
mod pmd;
pub mod port;
pub mod stats;

pub use datapath::{Datapath, DatapathError, PortHandle};
pub use port::{
    PacketMeta, PortQueues, RxBatch, RxDrops, RxPacket, RxQueue, StageError, TxQueue, BATCH_SIZE,
};
pub use stats::{PmdStatsView, PortStats, PortStatsView};
