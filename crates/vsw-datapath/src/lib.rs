//! The datapath: PMD threads that poll receive queues, classify batches of packets
//! and send them through per-port output batches.
//!
//! Devices are known only through the [`RxQueue`]/[`TxQueue`] traits, so the whole
//! datapath runs on in-memory ports in tests.
// The one `unsafe` is the TSC read in `clock` (allowed there); nothing else may have any.
#![deny(unsafe_code)]

pub mod assign;
pub mod clock;
mod ct;
pub mod datapath;
pub mod dpaction;
pub mod dpflow;
mod egress;
pub mod emc;
mod error;
pub mod flow_table;
pub mod memory;
pub mod meter;
pub mod offload;
mod pmd;
pub mod port;
mod port_map;
pub mod punt;
pub mod revalidate;
pub mod ring;
mod rule_index;
mod shared;
pub mod stats;
pub mod tunnel_egress;
pub mod tunnel_pop;
pub mod tunnel_push;
pub mod txbatch;
pub mod upcall;

pub use assign::RxqAssign;
pub use datapath::{Datapath, DatapathError, PmdConfig, RevalidationKick, DEFAULT_FLOW_LIMIT};
pub use dpaction::{MAX_FORKS, MAX_RECIRC_DEPTH, MAX_SAVED};
pub use dpflow::{format_dp_actions, DpAction, DpFlow, DpFlowStats};
pub use port::{
    PacketMeta, PortQueues, RxBatch, RxDrops, RxPacket, RxQueue, StageError, TunnelKey, TxFactory,
    TxOffloads, TxQueue, BATCH_SIZE,
};
pub use punt::{Injected, Punted, Punts};
pub use revalidate::{RevalidateSummary, RevalidatorConfig};
pub use shared::PortHandle;
pub use stats::{PmdRxqView, PmdStatsView, PortStats, PortStatsView, RxqView};
pub use tunnel_egress::{NoWay, TunnelEgress, TunnelWay};
pub use tunnel_push::PushHeader;
pub use upcall::{Attribution, DropAll, NoAttribution, Translation, Upcall};
