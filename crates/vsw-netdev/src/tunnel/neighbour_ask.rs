//! Asking the underlay for a next hop's MAC: an ARP request (over IPv6, a neighbour
//! solicitation) from an underlay bridge, as if its LOCAL port had sent it (Open
//! vSwitch's `tnl_send_arp_request`).
//!
//! A translation that meets a next hop it does not know drops the packet and notes
//! the next hop here ([`NeighbourAsks::want`]); vswd's asker thread takes the asks
//! that are due ([`NeighbourAsks::due`]) and sends each through the bridge's rules.
//! A next hop is asked at once, then every [`ASK_INTERVAL_MS`] up to [`TRIES`]
//! times while no answer comes; then it rests, and after [`REST_MS`] it is
//! forgotten and the flows that wanted it are translated again (the revalidator's
//! pass notes it again if they still do, which starts another round). An answer
//! (the neighbour table learns it) ends the asking.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use vsw_packet::wire::arp;
use vsw_packet::{EtherType, MacAddr};

/// How often a next hop whose MAC is unknown is asked for it.
pub(crate) const ASK_INTERVAL_MS: u64 = 1000;
/// How many times in a row (the kernel's `mcast_solicit`).
pub(crate) const TRIES: u8 = 3;
/// How long a next hop that did not answer rests before it is asked for again.
pub(crate) const REST_MS: u64 = 5000;
/// Next hops being asked for at most (beyond, a new one is not asked for until
/// another is answered or forgotten).
const MAX_ASKING: usize = 1024;

/// A request to send: `frame` through `bridge`, as from its LOCAL port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NeighbourAsk {
    pub bridge: String,
    pub frame: Vec<u8>,
}

struct Asking {
    /// The bridge's MAC and address the request is from.
    mac: MacAddr,
    src: IpAddr,
    /// When last asked, and how many times in this round.
    last_ms: Option<u64>,
    tries: u8,
}

/// The next hops being asked for, by (bridge, next hop).
#[derive(Default)]
pub(crate) struct NeighbourAsks {
    asking: HashMap<(Arc<str>, IpAddr), Asking>,
}

/// What [`NeighbourAsks::due`] found: the requests to send, and whether next hops
/// were forgotten (their flows are to be translated again).
#[derive(Debug, Default)]
pub(crate) struct Due {
    pub asks: Vec<NeighbourAsk>,
    pub forgot: bool,
}

impl NeighbourAsks {
    /// A translation needs `next_hop`'s MAC on `bridge` (whose MAC is `mac`, its
    /// address `src`). Whether an ask is due now (the asker is to be woken).
    pub(crate) fn want(
        &mut self,
        bridge: &str,
        mac: MacAddr,
        src: IpAddr,
        next_hop: IpAddr,
        now_ms: u64,
    ) -> bool {
        let key = (Arc::from(bridge), next_hop);
        if !self.asking.contains_key(&key) && self.asking.len() >= MAX_ASKING {
            return false;
        }
        let a = self.asking.entry(key).or_insert(Asking {
            mac,
            src,
            last_ms: None,
            tries: 0,
        });
        (a.mac, a.src) = (mac, src);
        a.tries < TRIES
            && a.last_ms
                .is_none_or(|then| now_ms.saturating_sub(then) >= ASK_INTERVAL_MS)
    }

    /// The requests due at `now_ms`, counted as sent; `known` says which next hops
    /// have been answered meanwhile (they are no longer asked for).
    pub(crate) fn due(&mut self, now_ms: u64, known: impl Fn(&str, IpAddr) -> bool) -> Due {
        let mut due = Due::default();
        self.asking.retain(|(bridge, next_hop), a| {
            if known(bridge, *next_hop) {
                return false;
            }
            let since = a.last_ms.map(|then| now_ms.saturating_sub(then));
            if a.tries >= TRIES {
                let rested = since.is_none_or(|s| s >= REST_MS);
                due.forgot |= rested;
                return !rested;
            }
            if since.is_some_and(|s| s < ASK_INTERVAL_MS) {
                return true;
            }
            let mut buf = [0u8; 128];
            let len = match (a.src, *next_hop) {
                (IpAddr::V4(spa), IpAddr::V4(tpa)) => arp_request(&mut buf, a.mac, spa, tpa),
                (IpAddr::V6(src), IpAddr::V6(target)) => {
                    neighbour_solicitation(&mut buf, a.mac, src, target)
                }
                // An address of the other family cannot be asked for from this one.
                _ => return false,
            };
            if let Some(len) = len {
                due.asks.push(NeighbourAsk {
                    bridge: bridge.to_string(),
                    frame: buf[..len].to_vec(),
                });
            }
            a.last_ms = Some(now_ms);
            a.tries += 1;
            true
        });
        due
    }

    /// Whether any next hop is being asked for (the asker looks again soon).
    pub(crate) fn any(&self) -> bool {
        !self.asking.is_empty()
    }
}

/// Writes an ICMPv6 neighbour solicitation for `target` from `sha`/`src` into `buf`
/// (RFC 4861: to the target's solicited-node multicast group, hop limit 255, with
/// the source link-layer address option).
pub(crate) fn neighbour_solicitation(
    buf: &mut [u8],
    sha: MacAddr,
    src: Ipv6Addr,
    target: Ipv6Addr,
) -> Option<usize> {
    use vsw_packet::ethernet::{field, ETH_HDR_LEN};
    use vsw_packet::wire::icmp::{ND_NEIGHBOR_SOLICIT, ND_OPT_SOURCE_LLADDR};
    use vsw_packet::wire::ip::IPPROTO_ICMPV6;
    use vsw_packet::wire::ipv6;
    /// Type, code, checksum, reserved, target; then the option (type 1, 8 bytes).
    const NS_LEN: usize = 4 + 4 + 16 + 8;
    let t = target.octets();
    let group = u128::from_be_bytes([
        0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, t[13], t[14], t[15],
    ]);
    let len = ETH_HDR_LEN + ipv6::HEADER_LEN + NS_LEN;
    let f = buf.get_mut(..len)?;
    f.fill(0);
    f[field::DESTINATION].copy_from_slice(&[0x33, 0x33, 0xff, t[13], t[14], t[15]]);
    f[field::SOURCE].copy_from_slice(&sha.0);
    f[field::ETHERTYPE].copy_from_slice(&EtherType::IPV6.to_be_bytes());
    ipv6::Repr {
        traffic_class: 0,
        flow_label: 0,
        payload_len: NS_LEN as u16,
        next_header: IPPROTO_ICMPV6,
        hop_limit: 255,
        src: u128::from(src),
        dst: group,
    }
    .emit(&mut f[ETH_HDR_LEN..]);
    let ns = &mut f[ETH_HDR_LEN + ipv6::HEADER_LEN..];
    ns[0] = ND_NEIGHBOR_SOLICIT;
    ns[8..24].copy_from_slice(&t);
    ns[24] = ND_OPT_SOURCE_LLADDR;
    ns[25] = 1;
    ns[26..32].copy_from_slice(&sha.0);
    // Over the pseudo-header: addresses, length, next header.
    let pseudo = vsw_packet::checksum::sum(&src.octets(), 0)
        + vsw_packet::checksum::sum(&group.to_be_bytes(), 0)
        + NS_LEN as u64
        + u64::from(IPPROTO_ICMPV6);
    let c = !vsw_packet::checksum::fold(vsw_packet::checksum::sum(ns, pseudo));
    ns[2..4].copy_from_slice(&c.to_be_bytes());
    Some(len)
}

/// Writes a broadcast ARP request for `tpa` from `sha`/`spa` into `buf`.
pub(crate) fn arp_request(
    buf: &mut [u8],
    sha: MacAddr,
    spa: Ipv4Addr,
    tpa: Ipv4Addr,
) -> Option<usize> {
    use vsw_packet::ethernet::{field, ETH_HDR_LEN};
    /// ARP's opcode for a request.
    const REQUEST: u16 = 1;
    // Padded to Ethernet's minimum frame.
    let len = (ETH_HDR_LEN + arp::ETHERNET_IPV4_LEN).max(60);
    let f = buf.get_mut(..len)?;
    f.fill(0);
    f[field::DESTINATION].copy_from_slice(&MacAddr::BROADCAST.0);
    f[field::SOURCE].copy_from_slice(&sha.0);
    f[field::ETHERTYPE].copy_from_slice(&EtherType::ARP.to_be_bytes());
    arp::emit_ethernet_ipv4(
        &mut f[ETH_HDR_LEN..],
        REQUEST,
        sha.0,
        spa.octets(),
        MacAddr::ZERO.0,
        tpa.octets(),
    );
    Some(len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use vsw_packet::key::{extract, FlowKey};

    const MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);
    const SRC: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1));
    const HOP: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2));

    fn unknown(_: &str, _: IpAddr) -> bool {
        false
    }

    #[test]
    fn a_next_hop_is_asked_for_at_once_then_each_second_three_times_then_rests() {
        let mut n = NeighbourAsks::default();
        assert!(n.want("br-phy", MAC, SRC, HOP, 10_000), "due at once");
        let first = n.due(10_000, unknown);
        assert_eq!(first.asks.len(), 1);
        assert_eq!(first.asks[0].bridge, "br-phy");
        // A broadcast ARP request from the bridge for the next hop.
        let f = &first.asks[0].frame;
        assert_eq!(&f[..6], &MacAddr::BROADCAST.0);
        assert_eq!(&f[6..12], &MAC.0);
        assert_eq!(&f[12..14], &EtherType::ARP.to_be_bytes());
        assert_eq!(&f[28..32], &[198, 18, 0, 1]);
        assert_eq!(&f[38..42], &[198, 18, 0, 2]);
        // Wanted again within the second: nothing more.
        assert!(!n.want("br-phy", MAC, SRC, HOP, 10_500));
        assert!(n.due(10_500, unknown).asks.is_empty());
        assert_eq!(n.due(11_000, unknown).asks.len(), 1);
        assert_eq!(n.due(12_000, unknown).asks.len(), 1);
        // Three tries: it rests, then is forgotten (its flows translated again).
        let resting = n.due(13_000, unknown);
        assert!(resting.asks.is_empty() && !resting.forgot);
        assert!(!n.want("br-phy", MAC, SRC, HOP, 14_000), "resting");
        let forgot = n.due(12_000 + REST_MS, unknown);
        assert!(forgot.asks.is_empty() && forgot.forgot);
        assert!(!n.any());
        // Wanted again afterwards: a new round.
        assert!(n.want("br-phy", MAC, SRC, HOP, 20_000));
    }

    #[test]
    fn an_answer_ends_the_asking() {
        let mut n = NeighbourAsks::default();
        n.want("br-phy", MAC, SRC, HOP, 0);
        assert_eq!(n.due(0, unknown).asks.len(), 1);
        let due = n.due(1000, |b, ip| b == "br-phy" && ip == HOP);
        assert!(due.asks.is_empty());
        assert!(!n.any());
    }

    #[test]
    fn an_ipv6_next_hop_gets_a_neighbour_solicitation() {
        let mut n = NeighbourAsks::default();
        let (src, hop): (IpAddr, IpAddr) =
            ("fd00::1".parse().unwrap(), "fd00::2:3".parse().unwrap());
        n.want("br-phy", MAC, src, hop, 0);
        let f = &n.due(0, unknown).asks[0].frame;
        // To the solicited-node group's MAC, ICMPv6 type 135.
        assert_eq!(&f[..6], &[0x33, 0x33, 0xff, 0x02, 0, 0x03]);
        assert_eq!(f[14 + 40], 135);
    }

    #[test]
    fn next_hops_asked_for_are_bounded() {
        let mut n = NeighbourAsks::default();
        for i in 0..MAX_ASKING as u32 {
            let hop = IpAddr::V4(Ipv4Addr::from(0xc612_0000 + i));
            assert!(n.want("br-phy", MAC, SRC, hop, 0));
        }
        let beyond = IpAddr::V4(Ipv4Addr::new(198, 19, 0, 9));
        assert!(!n.want("br-phy", MAC, SRC, beyond, 0), "one too many");
        assert_eq!(n.asking.len(), MAX_ASKING);
    }

    #[test]
    fn a_neighbour_solicitation_reads_as_one() {
        let mut buf = [0u8; 128];
        let (src, target): (Ipv6Addr, Ipv6Addr) = (
            "2001:db8::1".parse().unwrap(),
            "2001:db8::2:3".parse().unwrap(),
        );
        let n = neighbour_solicitation(&mut buf, MacAddr([2, 0, 0, 0, 0, 1]), src, target).unwrap();
        let f = &buf[..n];
        let mut key = FlowKey::default();
        extract(f, 1, None, &mut key).unwrap();
        assert_eq!(key.dl_dst, MacAddr([0x33, 0x33, 0xff, 0x02, 0x00, 0x03]));
        assert_eq!(
            { key.nw_dst },
            u128::from("ff02::1:ff02:3".parse::<Ipv6Addr>().unwrap())
        );
        assert_eq!((key.nw_proto, key.tp_src, key.nw_ttl), (58, 135, 255));
        assert_eq!({ key.nd_target }, u128::from(target));
        assert_eq!(key.arp_sha, MacAddr([2, 0, 0, 0, 0, 1]));
        // The ICMPv6 checksum verifies over the pseudo-header.
        let icmp = &f[54..];
        let pseudo = vsw_packet::checksum::sum(&f[22..54], 0) + icmp.len() as u64 + 58;
        assert_eq!(
            vsw_packet::checksum::fold(vsw_packet::checksum::sum(icmp, pseudo)),
            0xffff
        );
        // Too small a buffer: nothing written.
        assert_eq!(
            neighbour_solicitation(&mut buf[..60], MacAddr::ZERO, src, target),
            None
        );
    }
}
