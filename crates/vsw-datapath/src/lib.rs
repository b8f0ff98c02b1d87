//! The datapath: PMD threads that poll receive queues, classify batches of packets
//! and send them through per-port output batches.
//!
//! Devices are known only through the [`RxQueue`]/[`TxQueue`] traits, so the whole
//! datapath runs on in-memory ports in tests.
// The one `unsafe` is the TSC read in `clock` (allowed there); nothing else may have any.
#![deny(unsafe_code)]

pub mod assign;
pub mod clock;
pub mod datapath;
pub mod emc;
mod error;
pub mod memory;
pub mod offload;
mod pmd;
pub mod port;
pub mod ring;
mod shared;
pub mod stats;
pub mod txbatch;

pub use assign::RxqAssign;
pub use datapath::{Datapath, DatapathError, PmdConfig};
pub use port::{
    PacketMeta, PortQueues, RxBatch, RxDrops, RxPacket, RxQueue, StageError, TxFactory, TxOffloads,
    TxQueue, BATCH_SIZE,
};
pub use shared::PortHandle;
pub use stats::{PmdRxqView, PmdStatsView, PortStats, PortStatsView, RxqView};
