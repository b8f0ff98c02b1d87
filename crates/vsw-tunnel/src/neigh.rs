//! The tunnel neighbour table (Open vSwitch's `tnl-neigh-cache`): the MAC address of
//! each underlay next hop, learned by snooping the ARP and neighbour-discovery
//! packets that reach an underlay bridge, so that a tunnel port's outer Ethernet
//! header can be built. A miss is the caller's to act on (send a request, drop the
//! packet and count it, as Open vSwitch does). Entries age out: a neighbour that
//! changed its MAC is learned again from its next ARP or advertisement.
//!
//! Entries are scoped by bridge: a tunnel looks its next hop up on the bridge its
//! route leaves by, and what another bridge's ports say (a tenant's gratuitous ARP
//! for the remote tunnel end, say) never reaches it. Only packets addressed to the
//! bridge's own addresses teach anything ([`neighbour_for`]): requests for them,
//! replies and advertisements to them — never gratuitous or unsolicited ones, nor
//! requests for others. The table is bounded ([`MAX_NEIGHBOURS`]): a new neighbour in
//! a full table takes the place of the one seen longest ago, but never of one set by
//! hand or one a tunnel needs now.
//!
//! The table is made of persistent maps (`imbl`): a copy for readers costs nothing,
//! and a change copies only the path to what changed.

use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use imbl::{OrdMap, OrdSet};
use vsw_packet::key::FlowKey;
use vsw_packet::wire::icmp::{ND_NEIGHBOR_ADVERT, ND_NEIGHBOR_SOLICIT};
use vsw_packet::wire::ip::IPPROTO_ICMPV6;
use vsw_packet::{EtherType, MacAddr};

/// How long an entry lives without being seen again (Open vSwitch: 15 minutes by
/// default, `tnl/neigh/aging`).
pub const NEIGH_AGE_MS: u64 = 15 * 60 * 1000;

/// The most entries the table holds, over all bridges.
pub const MAX_NEIGHBOURS: usize = 16_384;

/// ARP's opcodes (in a flow key's `nw_proto`).
const ARP_REQUEST: u8 = 1;
const ARP_REPLY: u8 = 2;

/// What a packet that reached a bridge whose own addresses are `own` says of a
/// neighbour, when it is addressed to one of them: an ARP request or reply whose
/// target is ours (its sender's addresses), a neighbour solicitation for one of
/// ours (its source and source link-layer option), or an advertisement sent to one
/// of ours (its target and target link-layer option). Gratuitous ARP, requests for
/// other hosts and unsolicited advertisements say nothing.
pub fn neighbour_for(key: &FlowKey, own: &[IpAddr]) -> Option<(IpAddr, MacAddr)> {
    let ours = |a: IpAddr| own.contains(&a);
    match key.dl_type {
        EtherType::ARP => {
            let op = key.nw_proto;
            let spa = IpAddr::V4(Ipv4Addr::from(key.nw_src as u32));
            let tpa = IpAddr::V4(Ipv4Addr::from(key.nw_dst as u32));
            let to_us = (op == ARP_REQUEST || op == ARP_REPLY) && ours(tpa) && spa != tpa;
            (to_us && !spa.is_unspecified()).then_some((spa, key.arp_sha))
        }
        EtherType::IPV6 if key.nw_proto == IPPROTO_ICMPV6 => {
            let v6 = |a: u128| IpAddr::V6(Ipv6Addr::from(a));
            let (ip, mac) = match key.tp_src as u8 {
                ND_NEIGHBOR_ADVERT if ours(v6(key.nw_dst)) => (v6(key.nd_target), key.arp_tha),
                ND_NEIGHBOR_SOLICIT if ours(v6(key.nd_target)) => (v6(key.nw_src), key.arp_sha),
                _ => return None,
            };
            (mac != MacAddr::ZERO && !ip.is_unspecified()).then_some((ip, mac))
        }
        _ => None,
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Neighbour {
    pub mac: MacAddr,
    pub seen_ms: u64,
    /// Set by hand (`tnl/neigh/set`): never ages, never evicted.
    pub fixed: bool,
}

/// What learning a neighbour did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Learned {
    /// A new entry, or a known one with a new MAC: readers must see the table anew.
    Changed,
    /// A known entry seen again: only its age changed (readers need not know).
    Refreshed,
    /// Nothing (not a neighbour's address, a fixed entry, a full table).
    Ignored,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NeighbourTable {
    /// Bridge → address → neighbour.
    entries: OrdMap<String, OrdMap<IpAddr, Neighbour>>,
    /// The learned entries by when they were last seen: (seen, bridge, address).
    by_age: OrdSet<(u64, String, IpAddr)>,
    len: usize,
}

impl NeighbourTable {
    /// The MAC of `ip` on `bridge`, if known (entries are aged by
    /// [`NeighbourTable::expire`], not here: a reader's copy need not follow every
    /// refresh).
    pub fn lookup(&self, bridge: &str, ip: IpAddr) -> Option<MacAddr> {
        self.entries.get(bridge)?.get(&ip).map(|n| n.mac)
    }

    fn get(&self, bridge: &str, ip: IpAddr) -> Option<&Neighbour> {
        self.entries.get(bridge)?.get(&ip)
    }

    fn put(&mut self, bridge: &str, ip: IpAddr, n: Neighbour) {
        if let Some(old) = self.get(bridge, ip).cloned() {
            if !old.fixed {
                self.by_age.remove(&(old.seen_ms, bridge.to_string(), ip));
            }
        } else {
            self.len += 1;
        }
        if !n.fixed {
            self.by_age.insert((n.seen_ms, bridge.to_string(), ip));
        }
        let mut of_bridge = self.entries.get(bridge).cloned().unwrap_or_default();
        of_bridge.insert(ip, n);
        self.entries.insert(bridge.to_string(), of_bridge);
    }

    fn remove(&mut self, bridge: &str, ip: IpAddr) {
        let Some(mut of_bridge) = self.entries.get(bridge).cloned() else {
            return;
        };
        if let Some(old) = of_bridge.remove(&ip) {
            self.len -= 1;
            if !old.fixed {
                self.by_age.remove(&(old.seen_ms, bridge.to_string(), ip));
            }
        }
        if of_bridge.is_empty() {
            self.entries.remove(bridge);
        } else {
            self.entries.insert(bridge.to_string(), of_bridge);
        }
    }

    /// Learns that `ip` on `bridge` is at `mac`. In a full table the entry seen
    /// longest ago makes room, unless `needed` says a tunnel uses it; when every
    /// entry is needed or fixed, the new one is not taken.
    pub fn learn(
        &mut self,
        bridge: &str,
        ip: IpAddr,
        mac: MacAddr,
        now_ms: u64,
        needed: impl Fn(&str, IpAddr) -> bool,
    ) -> Learned {
        if mac.is_multicast() || mac == MacAddr::ZERO || ip.is_unspecified() {
            return Learned::Ignored;
        }
        let fresh = Neighbour {
            mac,
            seen_ms: now_ms,
            fixed: false,
        };
        match self.get(bridge, ip) {
            Some(n) if n.fixed => return Learned::Ignored,
            Some(n) => {
                let moved = n.mac != mac;
                self.put(bridge, ip, fresh);
                return if moved {
                    Learned::Changed
                } else {
                    Learned::Refreshed
                };
            }
            None => {}
        }
        if self.len >= MAX_NEIGHBOURS && !self.evict_one(&needed) {
            return Learned::Ignored;
        }
        self.put(bridge, ip, fresh);
        Learned::Changed
    }

    /// Removes the learned entry seen longest ago that no tunnel needs; whether one
    /// went.
    fn evict_one(&mut self, needed: &impl Fn(&str, IpAddr) -> bool) -> bool {
        let victim = self
            .by_age
            .iter()
            .find(|(_, b, ip)| !needed(b, *ip))
            .map(|(_, b, ip)| (b.clone(), *ip));
        match victim {
            Some((b, ip)) => {
                self.remove(&b, ip);
                true
            }
            None => false,
        }
    }

    /// Sets an entry by hand (`tnl/neigh/set BRIDGE IP MAC`).
    pub fn set(&mut self, ip: IpAddr, mac: MacAddr, bridge: &str) {
        self.put(
            bridge,
            ip,
            Neighbour {
                mac,
                seen_ms: 0,
                fixed: true,
            },
        );
    }

    /// Forgets the entries of `bridge` (all when `None`), fixed ones too
    /// (`tnl/neigh/flush`).
    pub fn flush(&mut self, bridge: Option<&str>) {
        match bridge {
            None => *self = NeighbourTable::default(),
            Some(b) => {
                let ips: Vec<IpAddr> = self
                    .entries
                    .get(b)
                    .map(|m| m.keys().copied().collect())
                    .unwrap_or_default();
                for ip in ips {
                    self.remove(b, ip);
                }
            }
        }
    }

    /// Forgets entries not seen for [`NEIGH_AGE_MS`]; whether any went.
    pub fn expire(&mut self, now_ms: u64) -> bool {
        let old: Vec<(String, IpAddr)> = self
            .by_age
            .iter()
            .take_while(|(seen, _, _)| now_ms.saturating_sub(*seen) >= NEIGH_AGE_MS)
            .map(|(_, b, ip)| (b.clone(), *ip))
            .collect();
        for (b, ip) in &old {
            self.remove(b, *ip);
        }
        !old.is_empty()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The table as `ovs-appctl tnl/neigh/show` prints it.
    pub fn show(&self) -> String {
        let mut o = format!("{:<46}{:<20}Bridge\n", "IP", "MAC");
        o.push_str(&"=".repeat(90));
        o.push('\n');
        for (bridge, of_bridge) in &self.entries {
            for (ip, n) in of_bridge {
                let _ = writeln!(
                    o,
                    "{:<46}{:<20}{}",
                    ip.to_string(),
                    n.mac.to_string(),
                    bridge
                );
            }
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
    const US: [u8; 4] = [198, 18, 0, 1];

    fn ours() -> Vec<IpAddr> {
        vec![IpAddr::V4(US.into())]
    }

    fn arp(op: u16, sha: MacAddr, spa: [u8; 4], tpa: [u8; 4]) -> FlowKey {
        let payload = builder::arp(op, sha, spa, MacAddr::ZERO, tpa);
        key(&builder::ethernet(
            MacAddr::BROADCAST,
            sha,
            &[],
            EtherType::ARP,
            &payload,
        ))
    }

    fn nobody(_: &str, _: IpAddr) -> bool {
        false
    }

    #[test]
    fn only_what_is_addressed_to_the_bridge_teaches() {
        let them = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2));
        // A request for us, a reply to us: the sender.
        assert_eq!(
            neighbour_for(&arp(1, A, [198, 18, 0, 2], US), &ours()),
            Some((them, A))
        );
        assert_eq!(
            neighbour_for(&arp(2, B, [198, 18, 0, 2], US), &ours()),
            Some((them, B))
        );
        // Gratuitous (sender and target the same), a request for another host, a
        // probe (sender 0.0.0.0), anything on a bridge with no address: nothing.
        for (k, own) in [
            (arp(2, A, [198, 18, 0, 2], [198, 18, 0, 2]), ours()),
            (arp(1, A, [198, 18, 0, 2], [198, 18, 0, 2]), ours()),
            (arp(1, A, [198, 18, 0, 2], [198, 18, 0, 9]), ours()),
            (arp(1, A, [0, 0, 0, 0], US), ours()),
            (arp(2, A, [198, 18, 0, 2], US), vec![]),
        ] {
            assert_eq!(neighbour_for(&k, &own), None, "{k:?}");
        }
        // IPv6: an advertisement to us (its target and target link-layer address);
        // one to all nodes (unsolicited) says nothing.
        let us6: u128 = 0x2001_0db8_0000_0000_0000_0000_0000_0001;
        let target: u128 = 0x2001_0db8_0000_0000_0000_0000_0000_0002;
        let na = |dst: u128| {
            let icmp = builder::icmpv6_nd(ND_NEIGHBOR_ADVERT, target, Some(B));
            let ip = builder::ipv6(
                &builder::Ipv6 {
                    src: target,
                    dst,
                    next: IPPROTO_ICMPV6,
                    hop_limit: 255,
                    ..Default::default()
                },
                &icmp,
            );
            key(&builder::ethernet(A, B, &[], EtherType::IPV6, &ip))
        };
        let own6 = vec![IpAddr::V6(us6.into())];
        assert_eq!(
            neighbour_for(&na(us6), &own6),
            Some((IpAddr::V6(target.into()), B))
        );
        assert_eq!(neighbour_for(&na(0xff02 << 112 | 1), &own6), None);
    }

    #[test]
    fn entries_are_the_bridges_own_age_out_and_refresh_quietly() {
        let mut t = NeighbourTable::default();
        let ip = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2));
        assert_eq!(t.learn("br-phy", ip, A, 1000, nobody), Learned::Changed);
        assert_eq!(t.learn("br-phy", ip, A, 2000, nobody), Learned::Refreshed);
        // Another bridge's idea of the same address is its own.
        assert_eq!(t.learn("br-int", ip, B, 2000, nobody), Learned::Changed);
        assert_eq!(t.lookup("br-phy", ip), Some(A));
        assert_eq!(t.lookup("br-int", ip), Some(B));
        // The neighbour moved.
        assert_eq!(t.learn("br-phy", ip, B, 3000, nobody), Learned::Changed);
        assert_eq!(t.lookup("br-phy", ip), Some(B));
        assert_eq!(t.len(), 2);
        // Aged out from when each was last seen.
        assert!(!t.expire(2999 + NEIGH_AGE_MS - 1000));
        assert!(t.expire(2000 + NEIGH_AGE_MS));
        assert_eq!(t.lookup("br-int", ip), None);
        assert_eq!(t.lookup("br-phy", ip), Some(B));
        assert!(t.expire(3000 + NEIGH_AGE_MS));
        assert!(t.is_empty());
    }

    #[test]
    fn a_full_table_makes_room_from_its_oldest_but_keeps_what_tunnels_need() {
        let mut t = NeighbourTable::default();
        let ip = |n: u32| IpAddr::V4(Ipv4Addr::from(0xc612_0000 + n));
        let vtep = ip(0);
        t.learn("br-phy", vtep, A, 0, nobody);
        let needed = |b: &str, a: IpAddr| b == "br-phy" && a == vtep;
        for n in 1..(MAX_NEIGHBOURS as u32 * 3) {
            t.learn("br-phy", ip(n), B, u64::from(n), needed);
            assert!(t.len() <= MAX_NEIGHBOURS);
        }
        assert_eq!(t.len(), MAX_NEIGHBOURS);
        assert_eq!(t.lookup("br-phy", vtep), Some(A), "a needed entry stays");
        assert_eq!(t.lookup("br-phy", ip(1)), None, "the oldest went");
        assert!(t
            .lookup("br-phy", ip(MAX_NEIGHBOURS as u32 * 3 - 1))
            .is_some());
    }

    #[test]
    fn set_flush_and_show() {
        let mut t = NeighbourTable::default();
        let ip = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 9));
        t.set(ip, A, "br-phy");
        assert_eq!(t.learn("br-phy", ip, B, 5, nobody), Learned::Ignored);
        t.expire(NEIGH_AGE_MS * 10);
        assert_eq!(
            t.lookup("br-phy", ip),
            Some(A),
            "fixed: kept, not relearned"
        );
        t.learn(
            "br-other",
            IpAddr::V4(Ipv4Addr::new(198, 18, 0, 3)),
            B,
            5,
            nobody,
        );
        t.learn(
            "br-phy",
            IpAddr::V4(Ipv4Addr::new(198, 18, 0, 4)),
            MacAddr::BROADCAST,
            5,
            nobody,
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
