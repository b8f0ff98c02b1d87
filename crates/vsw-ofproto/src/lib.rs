//! The slow path (Open vSwitch's ofproto-dpif): the pipeline of rule tables, the
//! MAC learning and multicast snooping tables, and the translation of a packet's key through them into
//! datapath actions plus the mask of every bit that decided them. The datapath calls
//! it on a cache miss through [`vsw_datapath::Upcall`] and never imports it.
#![forbid(unsafe_code)]

mod attribution;
pub mod backer;
pub mod bridge_state;
pub mod frozen;
mod generation;
pub mod ofproto;
pub mod punt_notes;
mod run;
mod slot;
mod snooping;
pub mod trace;
mod view;
pub mod xlate;

pub use backer::{Backer, BackerError, BridgeSlot};
pub use ofproto::Ofproto;
pub use punt_notes::{PuntNote, PuntReason};
pub use trace::Trace;
pub use vsw_datapath::{NoWay, TunnelEgress, TunnelWay};
pub use xlate::{TraceStep, XlateError, Xlated, MAX_RESUBMIT_DEPTH};
