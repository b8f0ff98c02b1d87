//! Connection tracking as Open vSwitch's userspace datapath does it
//! (lib/conntrack.c): connections per zone, TCP followed end by end with its
//! sequence windows, UDP and ICMP by what was seen each way, ICMP errors related to
//! the connection they quote; `ct_state`, `ct_mark`, `ct_label` and the original
//! direction as Open vSwitch gives them to rules. Pure: no I/O, no clock of its own
//! (the caller says the time); the datapath calls it per packet.
//!
//! NAT (`nat(src|dst=…)`) chooses a new connection's translated tuple once; both
//! directions are one connection. IP fragments are put back together before they are
//! tracked (`ipf`). Not yet here: the FTP and TFTP helpers, SCTP's own
//! state.

#![forbid(unsafe_code)]

pub mod dump;
pub mod flush;
pub mod helper;
pub mod ipf;
pub mod nat;
pub mod state;
pub mod tcp;
pub mod timeouts;
mod tracker;
pub mod tuple;

pub use flush::{FlushFilter, TupleFilter};
pub use nat::{NatKind, NatRange, NatRewrite};
pub use state::{CtState, TcpState};
pub use tcp::TcpSegment;
pub use timeouts::{TimeoutKind, Timeouts};
pub use tracker::{Census, Commit, ConnView, Conntrack, Ct, CtOutcome, CtPacket, DEFAULT_LIMIT};
pub use tuple::{Key, Tuple};
