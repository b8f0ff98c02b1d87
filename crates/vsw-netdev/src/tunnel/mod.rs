//! Tunnel ports as Open vSwitch's userspace datapath makes them ("native
//! tunneling"): vsw builds and strips the outer headers itself and sends them
//! through an underlay bridge, whose LOCAL port holds this host's address (as OVS
//! users set it up: `ovs-vsctl add-br br-phy`, `ip addr add … dev br-phy`).
//!
//! - Out (`port.rs`): a frame a tunnel port is given is encapsulated with a header
//!   template for its remote (route → the underlay bridge and source address,
//!   neighbour → the next hop's MAC) and handed to the underlay bridge as if its
//!   LOCAL port had sent it; the bridge's own rules take it to the wire. A next hop
//!   whose MAC is not known yet gets an ARP request (at most one a second) and the
//!   frame is dropped and counted, as in Open vSwitch. Translation does the same in
//!   the packet's own pass (`world.rs`'s `TunnelEgress`), its asks sent by vswd
//!   (`neighbour_ask.rs`).
//! - In (`local.rs`): what the underlay bridge sends to its LOCAL port passes a
//!   check first: a packet to a tunnel port's UDP port is decapsulated and its inner
//!   frame handed to that tunnel port (bad ones are dropped by reason); ARP and
//!   neighbour advertisements teach the neighbour table; the rest goes to the host.
//!
//! The state both sides read (`world.rs`) is a snapshot swapped whole when the
//! control side changes it (routes, neighbours, ports and bridges coming and going):
//! PMDs read it without a lock. The neighbours PMDs learn go through a bounded queue
//! the control side drains.

mod local;
mod neighbour_ask;
mod port;
mod world;

pub use local::{close_local, open_local};
pub use neighbour_ask::NeighbourAsk;
pub use port::{close_tunnel, inner_mtu, open_tunnel};
pub use world::{Registration, TunnelDrop, TunnelWorld, Watcher};
