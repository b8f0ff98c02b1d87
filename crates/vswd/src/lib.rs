//! The vsw daemon's parts: the control protocol (shared with `vswctl`), the persisted
//! configuration, the switch that applies commands to the datapath, and the control
//! server.
#![forbid(unsafe_code)]

pub mod bridges;
pub mod conntrack_ctl;
pub mod dpif;
pub mod http;
pub mod journal;
pub mod latency;
pub mod metrics;
pub mod offload;
pub mod openflow;
pub mod options;
pub mod ovsdb;
pub mod protocol;
pub mod server;
pub mod service;
pub mod state;
pub mod switch;
pub mod underlay;
pub mod unixctl;
