//! What an IGMP (IPv4) or MLD (IPv6) message says about multicast group
//! membership: a multicast-snooping switch reads the hosts' reports and the
//! routers' queries to send each group's traffic only where it is wanted
//! (RFC 4541). Reports of every version are read: IGMPv1/v2 and MLDv1 name one
//! group, IGMPv3 and MLDv2 a record per group.
//!
//! A message whose checksum is wrong, or that is cut short, says nothing: a host
//! cannot make the switch take note of half a report.

use crate::checksum;
use crate::wire::ip::{IPPROTO_ICMPV6, IPPROTO_IGMP};
use crate::wire::ipv4;
use crate::wire::ipv6;
use crate::EtherType;

/// IGMP message types (RFC 1112, 2236, 3376).
pub mod igmp {
    pub const QUERY: u8 = 0x11;
    pub const V1_REPORT: u8 = 0x12;
    pub const V2_REPORT: u8 = 0x16;
    pub const V2_LEAVE: u8 = 0x17;
    pub const V3_REPORT: u8 = 0x22;
}

/// MLD message types, as ICMPv6 types (RFC 2710, 3810).
pub mod mld {
    pub const QUERY: u8 = 130;
    pub const V1_REPORT: u8 = 131;
    pub const V1_DONE: u8 = 132;
    pub const V2_REPORT: u8 = 143;
}

/// Group records of IGMPv3 and MLDv2 that, without sources, say "no longer
/// interested" (RFC 3376 4.2.12): MODE_IS_INCLUDE and CHANGE_TO_INCLUDE_MODE.
const RECORD_IS_INCLUDE: u8 = 1;
const RECORD_TO_INCLUDE: u8 = 3;

/// A multicast group: an IPv4 group as the flow key holds an IPv4 address (in the
/// low 32 bits), or an IPv6 group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Group {
    V4(u32),
    V6(u128),
}

impl Group {
    /// The group a packet to `nw_dst` (a flow key's) is for.
    pub fn of_key(dl_type: u16, nw_dst: u128) -> Option<Group> {
        match dl_type {
            EtherType::IPV4 => {
                let a = nw_dst as u32;
                is_ipv4_multicast(a).then_some(Group::V4(a))
            }
            EtherType::IPV6 => is_ipv6_multicast(nw_dst).then_some(Group::V6(nw_dst)),
            _ => None,
        }
    }
}

impl std::fmt::Display for Group {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Group::V4(a) => std::net::Ipv4Addr::from(a).fmt(f),
            Group::V6(a) => std::net::Ipv6Addr::from(a).fmt(f),
        }
    }
}

/// 224.0.0.0/4.
pub fn is_ipv4_multicast(a: u32) -> bool {
    a >> 28 == 0xe
}

/// 224.0.0.0/24: link-local control traffic (routing protocols, IGMP itself),
/// which a snooping switch sends everywhere (RFC 4541 2.1.2).
pub fn is_ipv4_link_local_multicast(a: u32) -> bool {
    a >> 8 == 0xe0_00_00
}

/// ff00::/8.
pub fn is_ipv6_multicast(a: u128) -> bool {
    a >> 120 == 0xff
}

/// ff02::1, every node on the link.
pub const IPV6_ALL_NODES: u128 = 0xff02_0000_0000_0000_0000_0000_0000_0001;

/// What one membership message says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Membership {
    /// A router's query: a multicast router is behind the port it came in on.
    Query,
    /// A host's report (or leave): each group it joins (`true`) or leaves.
    Report(Vec<(Group, bool)>),
}

/// The kind of membership message a flow key names (`nw_proto` and `tp_src`, the
/// IGMP or ICMPv6 type), without reading the packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MessageKind {
    Query,
    Report,
    /// IGMP or ICMPv6 of another type: not about membership.
    NotMembership,
}

/// What kind of membership message a packet of `dl_type`, `nw_proto` and type
/// `msg_type` (the key's `tp_src`) is; `None` for a packet that is neither IGMP nor
/// ICMPv6.
pub fn message_kind(dl_type: u16, nw_proto: u8, msg_type: u16) -> Option<MessageKind> {
    // A type past 8 bits is no IGMP's or ICMPv6's (the key holds 8).
    let t = u8::try_from(msg_type).unwrap_or(u8::MAX);
    match (dl_type, nw_proto) {
        (EtherType::IPV4, IPPROTO_IGMP) => Some(match t {
            igmp::QUERY => MessageKind::Query,
            igmp::V1_REPORT | igmp::V2_REPORT | igmp::V2_LEAVE | igmp::V3_REPORT => {
                MessageKind::Report
            }
            _ => MessageKind::NotMembership,
        }),
        (EtherType::IPV6, IPPROTO_ICMPV6) => Some(match t {
            mld::QUERY => MessageKind::Query,
            mld::V1_REPORT | mld::V1_DONE | mld::V2_REPORT => MessageKind::Report,
            _ => MessageKind::NotMembership,
        }),
        _ => None,
    }
}

/// What `frame` (an Ethernet frame, tagged or not) says about membership; `None`
/// when it is no membership message, or a malformed one.
pub fn membership(frame: &[u8]) -> Option<Membership> {
    let (ethertype, at) = crate::wire::ethernet::l3(frame)?;
    let l3 = &frame[at..];
    match ethertype {
        EtherType::IPV4 => igmp_membership(l3),
        EtherType::IPV6 => mld_membership(l3),
        _ => None,
    }
}

fn igmp_membership(l3: &[u8]) -> Option<Membership> {
    let ip = ipv4::Packet::new_checked(l3).ok()?;
    if ip.protocol() != IPPROTO_IGMP || ip.is_fragment() {
        return None;
    }
    let end = ip.total_len().min(l3.len());
    let msg = l3.get(ip.header_len()..end)?;
    if msg.len() < 8 || checksum::checksum(msg) != 0 {
        return None;
    }
    let group = |at: usize| group_v4(msg.get(at..at + 4)?);
    match msg[0] {
        igmp::QUERY => Some(Membership::Query),
        igmp::V1_REPORT | igmp::V2_REPORT => Some(Membership::Report(
            group(4).map(|g| (g, true)).into_iter().collect(),
        )),
        igmp::V2_LEAVE => Some(Membership::Report(
            group(4).map(|g| (g, false)).into_iter().collect(),
        )),
        igmp::V3_REPORT => {
            let records = usize::from(u16::from_be_bytes([msg[6], msg[7]]));
            read_records(&msg[8..], records, 4).map(|r| {
                Membership::Report(
                    r.into_iter()
                        .filter_map(|(a, join)| group_v4(a).map(|g| (g, join)))
                        .collect(),
                )
            })
        }
        _ => None,
    }
}

fn group_v4(a: &[u8]) -> Option<Group> {
    let a = u32::from_be_bytes(a.try_into().ok()?);
    is_ipv4_multicast(a).then_some(Group::V4(a))
}

fn group_v6(a: &[u8]) -> Option<Group> {
    let a = u128::from_be_bytes(a.try_into().ok()?);
    (is_ipv6_multicast(a) && a != IPV6_ALL_NODES).then_some(Group::V6(a))
}

/// IGMPv3's and MLDv2's group records (`count` of them, addresses of `addr_len`
/// bytes): each group's address and whether the host joins it. A record cut short
/// spoils the whole report.
fn read_records(mut b: &[u8], count: usize, addr_len: usize) -> Option<Vec<(&[u8], bool)>> {
    let mut out = Vec::with_capacity(count.min(64));
    for _ in 0..count {
        let head = b.get(..4 + addr_len)?;
        let (kind, aux_words) = (head[0], usize::from(head[1]));
        let sources = usize::from(u16::from_be_bytes([head[2], head[3]]));
        let len = 4 + addr_len + sources * addr_len + aux_words * 4;
        if b.len() < len {
            return None;
        }
        let leaves = matches!(kind, RECORD_IS_INCLUDE | RECORD_TO_INCLUDE) && sources == 0;
        out.push((&head[4..4 + addr_len], !leaves));
        b = &b[len..];
    }
    Some(out)
}

fn mld_membership(l3: &[u8]) -> Option<Membership> {
    let ip = ipv6::Packet::new_checked(l3).ok()?;
    let up = ip.upper_layer(8).ok()?;
    if up.protocol != IPPROTO_ICMPV6 || up.fragment.is_some() {
        return None;
    }
    let end = (ipv6::HEADER_LEN + ip.payload_len()).min(l3.len());
    let msg = l3.get(up.offset..end)?;
    if msg.len() < 8 || !icmpv6_checksum_ok(&ip, msg) {
        return None;
    }
    let group = |join: bool| -> Option<Membership> {
        let g = group_v6(msg.get(8..24)?);
        Some(Membership::Report(
            g.map(|g| (g, join)).into_iter().collect(),
        ))
    };
    match msg[0] {
        mld::QUERY => Some(Membership::Query),
        mld::V1_REPORT => group(true),
        mld::V1_DONE => group(false),
        mld::V2_REPORT => {
            let records = usize::from(u16::from_be_bytes([msg[6], msg[7]]));
            read_records(&msg[8..], records, 16).map(|r| {
                Membership::Report(
                    r.into_iter()
                        .filter_map(|(a, join)| group_v6(a).map(|g| (g, join)))
                        .collect(),
                )
            })
        }
        _ => None,
    }
}

/// ICMPv6's checksum covers a pseudo-header: the addresses, the length and the
/// next header (RFC 8200 8.1).
fn icmpv6_checksum_ok(ip: &ipv6::Packet<&[u8]>, msg: &[u8]) -> bool {
    let Ok(len) = u32::try_from(msg.len()) else {
        return false;
    };
    let mut acc = checksum::sum(ip.addresses(), 0);
    acc = checksum::sum(&len.to_be_bytes(), acc);
    acc = checksum::sum(&[0, 0, 0, IPPROTO_ICMPV6], acc);
    acc = checksum::sum(msg, acc);
    checksum::fold(acc) == 0xffff
}

#[cfg(test)]
mod tests;
