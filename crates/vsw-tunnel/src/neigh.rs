//! The tunnel neighbour table (Open vSwitch's `tnl-neigh-cache`): the MAC address of
//! each underlay next hop, learned by snooping the ARP and neighbour-discovery
//! packets that reach the underlay bridge, so that a tunnel port's outer Ethernet
//! header can be built. A miss is the caller's to act on (send a request, drop the
//! packet and count it, as Open vSwitch does). Entries age out: a neighbour that
//! changed its MAC is learned again from its next ARP or advertisement.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use vsw_packet::key::FlowKey;
use vsw_packet::wire::icmp::{ND_NEIGHBOR_ADVERT, ND_NEIGHBOR_SOLICIT};
use vsw_packet::wire::ip::IPPROTO_ICMPV6;
use vsw_packet::{EtherType, MacAddr};

/// How long an entry lives without being seen again (Open vSwitch: 15 minutes by
/// default, `tnl/neigh/aging`).
pub const NEIGH_AGE_MS: u64 = 15 * 60 * 1000;

/// What a packet says of its sender's addresses: an ARP request or reply (the
/// sender's), a neighbour solicitation (its source link-layer option) or an
/// advertisement (its target and target link-layer option).
pub fn neighbour_in(key: &FlowKey) -> Option<(IpAddr, MacAddr)> {
    match key.dl_type {
        EtherType::ARP => {
            let spa = Ipv4Addr::from(key.nw_src as u32);
            (!spa.is_unspecified()).then_some((IpAddr::V4(spa), key.arp_sha))
        }
        EtherType::IPV6 if key.nw_proto == IPPROTO_ICMPV6 => {
            let (ip, mac) = match key.tp_src as u8 {
                ND_NEIGHBOR_ADVERT => (key.nd_target, key.arp_tha),
                ND_NEIGHBOR_SOLICIT => (key.nw_src, key.arp_sha),
                _ => return None,
            };
            (mac != MacAddr::ZERO).then_some((IpAddr::V6(Ipv6Addr::from(ip)), mac))
        }
        _ => None,
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Neighbour {
    pub mac: MacAddr,
    /// The bridge it was seen on.
    pub bridge: String,
    pub seen_ms: u64,
    /// Set by hand (`tnl/neigh/set`): never ages.
    pub fixed: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NeighbourTable {
    entries: BTreeMap<IpAddr, Neighbour>,
}

impl NeighbourTable {
    /// The MAC of `ip`, if known and fresh at `now_ms`.
    pub fn lookup(&self, ip: IpAddr, now_ms: u64) -> Option<MacAddr> {
        self.entries
            .get(&ip)
            .filter(|n| n.fixed || now_ms.saturating_sub(n.seen_ms) < NEIGH_AGE_MS)
            .map(|n| n.mac)
    }

    pub fn learn(&mut self, ip: IpAddr, mac: MacAddr, bridge: &str, now_ms: u64) {
        if mac.is_multicast() || mac == MacAddr::ZERO || ip.is_unspecified() {
            return;
        }
        match self.entries.get_mut(&ip) {
            Some(n) if n.fixed => {}
            Some(n) => {
                n.mac = mac;
                n.seen_ms = now_ms;
                if n.bridge != bridge {
                    n.bridge = bridge.to_string();
                }
            }
            None => {
                self.entries.insert(
                    ip,
                    Neighbour {
                        mac,
                        bridge: bridge.to_string(),
                        seen_ms: now_ms,
                        fixed: false,
                    },
                );
            }
        }
    }

    /// Sets an entry by hand (`tnl/neigh/set BRIDGE IP MAC`).
    pub fn set(&mut self, ip: IpAddr, mac: MacAddr, bridge: &str) {
        self.entries.insert(
            ip,
            Neighbour {
                mac,
                bridge: bridge.to_string(),
                seen_ms: 0,
                fixed: true,
            },
        );
    }

    /// Learns what a packet seen on `bridge` says of its sender
    /// ([`neighbour_in`]). Whether it did.
    pub fn snoop(&mut self, key: &FlowKey, bridge: &str, now_ms: u64) -> bool {
        match neighbour_in(key) {
            Some((ip, mac)) => {
                self.learn(ip, mac, bridge, now_ms);
                true
            }
            None => false,
        }
    }

    /// Forgets the entries of `bridge` (all when `None`), fixed ones too
    /// (`tnl/neigh/flush`).
    pub fn flush(&mut self, bridge: Option<&str>) {
        self.entries
            .retain(|_, n| bridge.is_some_and(|b| n.bridge != b));
    }

    /// Forgets entries not seen for [`NEIGH_AGE_MS`].
    pub fn expire(&mut self, now_ms: u64) {
        self.entries
            .retain(|_, n| n.fixed || now_ms.saturating_sub(n.seen_ms) < NEIGH_AGE_MS);
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The table as `ovs-appctl tnl/neigh/show` prints it.
    pub fn show(&self) -> String {
        let mut o = format!("{:<46}{:<20}Bridge\n", "IP", "MAC");
        o.push_str(&"=".repeat(90));
        o.push('\n');
        for (ip, n) in &self.entries {
            let _ = writeln!(
                o,
                "{:<46}{:<20}{}",
                ip.to_string(),
                n.mac.to_string(),
                n.bridge
            );
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vsw_packet::builder;
    use vsw_packet::key::extract;

    fn key(frame: &[u8]) -> FlowKey {
        let mut k = FlowKey::default();
        extract(frame, 1, None, &mut k).unwrap();
        k
    }

    const A: MacAddr = MacAddr([2, 0, 0, 0, 0, 0xa]);
    const B: MacAddr = MacAddr([2, 0, 0, 0, 0, 0xb]);

    fn arp(op: u16, sha: MacAddr, spa: [u8; 4]) -> Vec<u8> {
        let payload = builder::arp(op, sha, spa, MacAddr::ZERO, [198, 18, 0, 1]);
        builder::ethernet(MacAddr::BROADCAST, sha, &[], EtherType::ARP, &payload)
    }

    #[test]
    fn arp_and_neighbour_discovery_are_learned_and_age_out() {
        let mut t = NeighbourTable::default();
        let ip = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2));
        assert!(t.snoop(&key(&arp(1, A, [198, 18, 0, 2])), "br-phy", 1000));
        assert_eq!(t.lookup(ip, 2000), Some(A));
        // A reply from the same address with another MAC: the neighbour moved.
        assert!(t.snoop(&key(&arp(2, B, [198, 18, 0, 2])), "br-phy", 3000));
        assert_eq!(t.lookup(ip, 4000), Some(B));
        // A probe (sender 0.0.0.0) teaches nothing.
        assert!(!t.snoop(&key(&arp(1, A, [0, 0, 0, 0])), "br-phy", 5000));
        assert_eq!(t.len(), 1);
        // Aged out.
        assert_eq!(t.lookup(ip, 3000 + NEIGH_AGE_MS), None);
        t.expire(3000 + NEIGH_AGE_MS);
        assert!(t.is_empty());
        // IPv6: an advertisement's target and target link-layer address.
        let target: u128 = 0x2001_0db8_0000_0000_0000_0000_0000_0002;
        let na = builder::icmpv6_nd(ND_NEIGHBOR_ADVERT, target, Some(B));
        let frame = builder::ipv6(
            &builder::Ipv6 {
                src: target,
                dst: 0x2001_0db8_0000_0000_0000_0000_0000_0001,
                next: IPPROTO_ICMPV6,
                hop_limit: 255,
                ..Default::default()
            },
            &na,
        );
        let frame = builder::ethernet(A, B, &[], EtherType::IPV6, &frame);
        assert!(t.snoop(&key(&frame), "br-phy", 10));
        assert_eq!(t.lookup(IpAddr::V6(Ipv6Addr::from(target)), 20), Some(B));
    }

    #[test]
    fn set_flush_and_show() {
        let mut t = NeighbourTable::default();
        let ip = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 9));
        t.set(ip, A, "br-phy");
        t.learn(ip, B, "br-phy", 5);
        assert_eq!(
            t.lookup(ip, NEIGH_AGE_MS * 10),
            Some(A),
            "fixed: kept, not relearned"
        );
        t.learn(IpAddr::V4(Ipv4Addr::new(198, 18, 0, 3)), B, "br-other", 5);
        t.learn(
            IpAddr::V4(Ipv4Addr::new(198, 18, 0, 4)),
            MacAddr::BROADCAST,
            "br-phy",
            5,
        );
        assert_eq!(t.len(), 2, "a broadcast MAC is no neighbour");
        let shown = t.show();
        assert!(shown.starts_with("IP "), "{shown}");
        // Columns apart, as ovs-appctl's users read them.
        let row = shown.lines().find(|l| l.starts_with("198.18.0.9")).unwrap();
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(
            cols,
            ["198.18.0.9", "02:00:00:00:00:0a", "br-phy"],
            "{shown}"
        );
        t.flush(Some("br-other"));
        assert_eq!(t.len(), 1);
        t.flush(None);
        assert!(t.is_empty());
    }
}
