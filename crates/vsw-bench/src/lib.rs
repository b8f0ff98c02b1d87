//! vsw-bench: measures a switch the way a network engineer would accept.
//!
//! The pure parts live here, each tested on its own: the RFC 2544 search (`search`),
//! send pacing (`pacing`), latency bookkeeping (`latency`) and the report (`report`).
#![forbid(unsafe_code)]

pub mod bundle_commit;
pub mod conformance;
pub mod conntrack_scale;
pub mod flow_mods;
pub mod frame;
pub mod inmemory;
pub mod latency;
pub mod ovsdb_framing;
pub mod ovsdb_ports;
pub mod pacing;
pub mod packet_ins;
pub mod plot;
pub mod progress;
pub mod search;
pub mod switches;
pub mod topology;
pub mod traffic;
pub mod tunnel_cost;
pub mod tunnel_datapath;
pub mod vhost;
