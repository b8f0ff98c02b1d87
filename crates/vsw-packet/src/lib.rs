//! Packet formats: what vsw reads from and writes into frames.
//!
//! Pure code: no I/O, no threads, no `unsafe`. Every reader takes a byte slice and
//! never looks past its end, so a truncated or garbage frame cannot crash the switch.
#![forbid(unsafe_code)]

pub mod builder;
pub mod checksum;
pub mod gro;
pub mod gso;
pub mod key;
pub mod mac;
pub mod mcast;
pub mod rewrite;
pub mod tunnel;
pub mod vnet;
pub mod wire;

pub use wire::ethernet;

pub use ethernet::{EtherType, VlanTag};
pub use key::{extract, FlowKey, Malformed, COMMON_WORDS, KEY_WORDS};
pub use mac::MacAddr;
pub use vnet::VnetHdr;
