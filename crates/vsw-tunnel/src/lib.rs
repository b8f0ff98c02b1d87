//! What tunnel ports decide by, as Open vSwitch's userspace datapath keeps it: a
//! port's options (`config.rs`), the underlay route table (`route.rs`, OVS's
//! `ovs-router`; the kernel's routes through gateways read by `kernel_routes.rs`) and the neighbour table (`neigh.rs`, `tnl-neigh-cache`). Pure: the
//! devices (vsw-netdev's `tunnel`) and vswd fill and read them.
#![forbid(unsafe_code)]

pub mod config;
pub mod kernel_routes;
pub mod metadata;
pub mod neigh;
pub mod route;
