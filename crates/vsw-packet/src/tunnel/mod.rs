//! Tunnel headers as Open vSwitch's userspace datapath does them ("native
//! tunneling"): the switch builds the outer Ethernet, IP, UDP and VXLAN or Geneve
//! headers itself (`encap.rs`, the datapath's `tnl_push`) and strips them
//! (`decap.rs`, `tnl_pop`), sending and receiving through an underlay port it owns.
//! Pure: addresses, neighbours and routes are the caller's.

mod decap;
mod encap;
mod gso;

pub use decap::{decap, DecapError, Decapped, TunnelMeta, TunnelPorts};
pub use encap::{flow_hash, inner_tos_ttl, udp_source_port, EncapError, EncapSpec, EncapTemplate};
pub use gso::{segment_udp_tunnel, tunnel_segment_size, udp_tunnel_super_frame, TunnelSuperFrame};

/// The two tunnel kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TunnelKind {
    Vxlan,
    Geneve,
}

impl TunnelKind {
    /// The IANA UDP port.
    pub fn default_port(&self) -> u16 {
        match self {
            TunnelKind::Vxlan => crate::wire::vxlan::UDP_PORT,
            TunnelKind::Geneve => crate::wire::geneve::UDP_PORT,
        }
    }
}

/// How a tunnel port takes packets without an Ethernet header (Open vSwitch's
/// `options:packet_type`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum PacketTypeMode {
    /// Ethernet frames only, both ways (every port's default here).
    #[default]
    LegacyL2,
    /// IP and NSH only: what arrives gets an Ethernet header of zero addresses for
    /// the bridge's rules, and what leaves loses its Ethernet header.
    LegacyL3,
    /// Both, as they are: the bridge's rules see the packet's type.
    Ptap,
}

impl PacketTypeMode {
    /// Open vSwitch's name.
    pub fn name(&self) -> &'static str {
        match self {
            PacketTypeMode::LegacyL2 => "legacy_l2",
            PacketTypeMode::LegacyL3 => "legacy_l3",
            PacketTypeMode::Ptap => "ptap",
        }
    }
}

/// The UDP source ports tunnel packets are sent from (Linux's default ephemeral
/// range, which its vxlan and geneve devices use).
pub const UDP_SOURCE_PORTS: (u16, u16) = (32768, 61000);

#[cfg(test)]
mod tests;
