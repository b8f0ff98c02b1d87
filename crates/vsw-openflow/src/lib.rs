//! OpenFlow for vsw: what controllers and `ovs-ofctl` speak.
//!
//! Here so far: the framing of messages on a stream (`frame`), versions and their
//! negotiation by hello bitmaps (`version`), the messages every connection needs
//! before flows — hello, error, echo, features, switch configuration, barrier —
//! with their codec (`message`), the switch and port descriptions (`multipart`,
//! where 1.4/1.5 frame ports differently from 1.3), the errors a refused request is answered with
//! (`error`), and a connection's protocol state without its I/O (`session`).
//!
//! Hand-written: no maintained Rust crate implements the switch side of OpenFlow
//! 1.3–1.5 (`rust_ofp` speaks 1.0 and is unmaintained; `rovs-openflow` is a
//! controller-side client for Open vSwitch, unfinished). The codec never trusts a
//! length: every field is read through a bounds-checked reader, and a message it
//! cannot take is an error to answer, not a panic.
#![forbid(unsafe_code)]

pub mod as_read;
pub mod as_written;
pub mod async_config;
pub mod bundle;
mod codec;
pub mod connection;
pub mod ct_flush;
pub mod error;
pub mod flow_mod;
pub mod flow_monitor;
pub mod flow_stats;
pub mod frame;
pub mod from_vsw;
pub mod group_mod;
pub mod message;
pub mod meter_mod;
pub mod multipart;
pub mod nx_action;
pub mod nx_ct;
mod nx_error;
pub mod nx_learn;
pub mod of10;
pub mod of11;
pub mod of12;
pub mod oxm;
pub mod oxs;
pub mod packet;
pub mod port_mod;
pub mod port_stats;
mod reader;
pub mod role;
pub mod session;
pub mod table_stats;
pub mod tables;
pub mod target;
#[cfg(test)]
mod test_support;
pub mod tlv;
pub mod to_vsw;
pub mod version;

pub use async_config::AsyncConfig;
pub use error::Refusal;
pub use frame::{next_message, FrameError, Header, HEADER_LEN};
pub use message::{Features, Message, SwitchConfig};
pub use multipart::{MultipartReply, MultipartRequest, PortInfo, SwitchDesc};
pub use packet::{PacketIn, PacketOut};
pub use role::Role;
pub use session::{Bridge, FlowStatsIter, Session, SessionEvent};
pub use target::Target;
pub use version::{negotiate, Version, VersionSet};
