//! Tunnel ports as Open vSwitch's userspace datapath makes them ("native
//! tunneling"): the outer headers are pushed and popped in the packet's own
//! datapath pass (vsw-datapath's `TunnelPush`, `TunnelPop`), through an underlay
//! bridge whose LOCAL port holds this host's address (as OVS users set it up:
//! `ovs-vsctl add-br br-phy`, `ip addr add … dev br-phy`). Nothing here is a queue
//! a packet waits in: this is configuration and the state translation asks.
//!
//! - The tunnels' state (`world.rs`): routes, neighbours, underlay bridges and
//!   tunnel ports, a snapshot swapped whole when the control side changes it, read
//!   by translation through vsw-datapath's `TunnelEgress`: a tunnel port's way out
//!   (route → underlay bridge and source address, neighbour → next hop's MAC, the
//!   port's options → the header), whether a LOCAL port's packet pops and for which
//!   port, and the neighbours ARP and neighbour discovery tell of.
//! - Tunnel ports (`port.rs`) and underlay bridges (`local.rs`) register in it when
//!   their devices open; a tunnel port's transmit queue only drops what no push
//!   could be made for.
//! - Next hops without a MAC (`neighbour_ask.rs`): asked for by ARP or neighbour
//!   solicitation through the underlay bridge, which vswd sends.

mod local;
mod neighbour_ask;
mod port;
mod world;

pub use local::{close_local, open_local};
pub use neighbour_ask::NeighbourAsk;
pub use port::{close_tunnel, inner_mtu, open_tunnel};
pub use world::{Registration, TunnelDrop, TunnelWorld, Watcher};
