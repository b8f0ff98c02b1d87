use std::fmt;
use std::net::Ipv4Addr;

use vsw_packet::MacAddr;

/// What a rule does with a matching packet. Actions run in order; a header rewrite
/// applies to the outputs that follow it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Send to one port (never back to the port it came from; see `InPort`).
    Output(u32),
    /// Send back out of the port the packet came in on.
    InPort,
    /// Behave as a MAC-learning switch.
    Normal,
    /// Send to every port but the one it came from.
    Flood,
    /// Discard; counted on the rule.
    Drop,
    SetDlSrc(MacAddr),
    SetDlDst(MacAddr),
    /// Push a new outermost 802.1Q tag (this TPID), VID 0 and PCP 0 unless set later.
    PushVlan(u16),
    /// Set the VID of the outermost tag, pushing a tag when there is none.
    SetVlanVid(u16),
    /// Set the PCP of the outermost tag, pushing a tag when there is none.
    SetVlanPcp(u8),
    /// Remove the outermost tag.
    StripVlan,
    /// IPv4 source and destination; checksums updated incrementally.
    SetNwSrc(Ipv4Addr),
    SetNwDst(Ipv4Addr),
    /// The DSCP bits of the IPv4 TOS / IPv6 traffic class (ECN kept), as a TOS value.
    SetNwTos(u8),
    /// TCP, UDP or SCTP ports.
    SetTpSrc(u16),
    SetTpDst(u16),
    /// Decrement the IPv4 TTL / IPv6 hop limit; a packet at 0 or 1 is dropped.
    DecTtl,
}

impl Action {
    /// True for the actions that change the packet rather than send it somewhere.
    pub fn rewrites(&self) -> bool {
        !matches!(
            self,
            Action::Output(_) | Action::InPort | Action::Normal | Action::Flood | Action::Drop
        )
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::Output(p) => write!(f, "output:{p}"),
            Action::InPort => f.write_str("IN_PORT"),
            Action::Normal => f.write_str("NORMAL"),
            Action::Flood => f.write_str("FLOOD"),
            Action::Drop => f.write_str("drop"),
            Action::SetDlSrc(m) => write!(f, "mod_dl_src:{m}"),
            Action::SetDlDst(m) => write!(f, "mod_dl_dst:{m}"),
            Action::PushVlan(t) => write!(f, "push_vlan:0x{t:04x}"),
            Action::SetVlanVid(v) => write!(f, "mod_vlan_vid:{v}"),
            Action::SetVlanPcp(p) => write!(f, "mod_vlan_pcp:{p}"),
            Action::StripVlan => f.write_str("strip_vlan"),
            Action::SetNwSrc(a) => write!(f, "mod_nw_src:{a}"),
            Action::SetNwDst(a) => write!(f, "mod_nw_dst:{a}"),
            Action::SetNwTos(t) => write!(f, "mod_nw_tos:{t}"),
            Action::SetTpSrc(p) => write!(f, "mod_tp_src:{p}"),
            Action::SetTpDst(p) => write!(f, "mod_tp_dst:{p}"),
            Action::DecTtl => f.write_str("dec_ttl"),
        }
    }
}
