//! OVSDB, the Open vSwitch database protocol (RFC 7047), as vswd needs it to be
//! configured through the stock `ovsdb-server`: JSON-RPC framing over a stream
//! (`jsonrpc.rs`), OVSDB's datums (`datum.rs`), a replica of the monitored tables kept
//! by `update` notifications (`replica.rs`), and a blocking client with a reader
//! thread (`client.rs`).
//!
//! The crates on crates.io (`ovsdb`, `ovsdb-client`, 0.0.x) are young and built on
//! tokio; vsw's control side is threads. The protocol is small JSON-RPC, written here
//! on serde_json.
#![forbid(unsafe_code)]

pub mod client;
pub mod datum;
pub mod jsonrpc;
pub mod replica;
pub mod target;

pub use client::{Client, Event, OvsdbError};
pub use replica::{Replica, Row};
pub use target::Target;
