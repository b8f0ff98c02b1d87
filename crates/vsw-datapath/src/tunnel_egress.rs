//! The seam between translation (vsw-ofproto) and the tunnels' state (vsw-netdev's
//! `TunnelWorld` implements it), owned here as the datapath owns its other seams.
//!
//! Native tunnels. Output (Open vSwitch's `native_tunnel_output`): a packet a bridge
//! sends to a tunnel port gets its outer headers in the same datapath pass
//! (`DpAction::TunnelPush`), and translation goes on in the underlay bridge as if
//! that bridge's LOCAL port had sent the outer packet — one datapath flow from the
//! workload's port to the wire, no copy and no second lookup.
//!
//! What the outer headers are (route, source address, next hop's MAC, the port's
//! options) is the tunnel side's to say, through [`TunnelEgress`]. Where there is no
//! way now (no route, no source address, the next hop's MAC not known yet: the tunnel
//! side asks for it, as Open vSwitch's `tnl_send_arp_request`), the packet is dropped
//! in its own pass and counted by the tunnel side; the flow depends on the underlay
//! (vsw-ofproto's `Backer::underlay_changed`), so that the revalidator makes it
//! native once the way is known.
//!
//! Input (`terminate_native_tunnel`): a tunnel packet a bridge sends to its LOCAL
//! port (the host's address) has its outer headers taken off in the same pass
//! (`DpAction::TunnelPop`) and is looked up again as received on the kind's
//! receive point with its tunnel in the key; that lookup's translation asks which
//! tunnel port it is for ([`TunnelEgress::receiving_port`]) and goes on in that
//! port's bridge.

use vsw_packet::tunnel::EncapSpec;
use vsw_packet::FlowKey;

/// The tunnel side, as translation asks it.
pub trait TunnelEgress: Send + Sync {
    /// The outer headers of a packet (`key`, as the actions so far left it)
    /// leaving by tunnel port `port`, and the underlay bridge they enter; the key's
    /// fields the answer read are set in `mask` (`tun_dst` of a `remote_ip=flow`
    /// port, `tun_id` of `key=flow`, …). `l3`: the packet has no Ethernet header of
    /// its own, and this is its Ethernet type (the frame's header is a
    /// placeholder). A packet is really passing when `passing` (not a
    /// revalidation): only then is a drop counted.
    fn way_out(
        &self,
        port: &str,
        key: &FlowKey,
        l3: Option<u16>,
        mask: &mut FlowKey,
        passing: bool,
    ) -> Result<TunnelWay, NoWay>;

    /// A packet (`key`) bridge `bridge` sends to its LOCAL port may tell of a
    /// neighbour (ARP, neighbour discovery addressed to the bridge's own
    /// addresses): learned when a packet is `passing` (Open vSwitch's
    /// `tnl_neigh_snoop`). The fields it reads are set in `mask`, so that each
    /// neighbour's message is a flow of its own and is seen.
    fn snoop(&self, _bridge: &str, _key: &FlowKey, _mask: &mut FlowKey, _passing: bool) {}

    /// Whether a packet (`key`) bridge `bridge` sends to its LOCAL port is one a
    /// tunnel port takes (Open vSwitch's `terminate_native_tunnel`): then what the
    /// datapath takes off (the kind, the UDP port, the Geneve option that is
    /// `tun_metadata0`).
    /// The key's fields read are set in `mask`. `None`: the host's packet (or one
    /// the LOCAL port's own check is better placed for).
    fn terminates(
        &self,
        _bridge: &str,
        _key: &FlowKey,
        _mask: &mut FlowKey,
    ) -> Option<crate::tunnel_pop::Pop> {
        None
    }

    /// The tunnel port a popped packet that came in on receive point `point` is
    /// for (`key` holds its tunnel: VNI, outer addresses), and how that port takes
    /// packets without Ethernet; the fields read are set in `mask`. `None`: no
    /// port's (its VNI is none's, or no port takes what it carries), dropped —
    /// counted when a packet is `passing` (not a revalidation).
    fn receiving_port(
        &self,
        _point: crate::tunnel_pop::ReceivePoint,
        _key: &FlowKey,
        _mask: &mut FlowKey,
        _passing: bool,
    ) -> Option<(String, vsw_packet::tunnel::PacketTypeMode)> {
        None
    }

    /// How tunnel port `port` takes packets without Ethernet (`LegacyL2`, the
    /// default, for a port the tunnels' state does not have).
    fn packet_type_mode(&self, _port: &str) -> vsw_packet::tunnel::PacketTypeMode {
        vsw_packet::tunnel::PacketTypeMode::LegacyL2
    }
}

/// Why a tunnel packet gets no outer headers in its own pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoWay {
    /// There is none now (no route, no source address, no neighbour yet; the tunnel
    /// side counted it and asks for what it can): the packet is dropped.
    Dropped,
    /// None known for this port (not in the tunnels' state yet): the packet goes
    /// to the tunnel port, whose queue drops it (counted).
    ByQueue,
    /// The port does not carry packets of this type (one without an Ethernet
    /// header to an Ethernet-only port, ARP to an L3 port): not sent, as Open
    /// vSwitch's output skips it.
    NotCarried,
}

/// Where a tunnel packet goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TunnelWay {
    pub spec: EncapSpec,
    /// The bridge whose LOCAL port the outer packet leaves by.
    pub underlay: String,
}
