//! The multicast snooping table behind NORMAL (Open vSwitch's `mcast_snooping`,
//! RFC 4541): which ports asked for each group (from the hosts' IGMP and MLD
//! reports), and behind which ports multicast routers are (from their queries).
//! Pure state: translation reads it and feeds it what the packets say.

use std::collections::{BTreeMap, HashMap};

use vsw_packet::mcast::Group;

/// Memberships not reported again for this long are forgotten (Open vSwitch's
/// `mcast-snooping-aging-time` default; a querier asks every 125 s).
pub const DEFAULT_AGING_MS: u64 = 300_000;
/// A router port not heard from for this long is forgotten (Open vSwitch's).
pub const MROUTER_AGING_MS: u64 = 180_000;
/// Groups the table holds at most (Open vSwitch's `mcast-snooping-table-size`).
pub const DEFAULT_CAPACITY: usize = 2048;

/// How a bridge snoops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct McastConfig {
    /// `mcast_snooping_enable`: off, NORMAL floods every multicast packet.
    pub enabled: bool,
    /// Traffic to a group no port asked for is flooded (true) or sent only to the
    /// router ports (`mcast-snooping-disable-flood-unregistered=true`).
    pub flood_unregistered: bool,
    pub aging_ms: u64,
    pub capacity: usize,
}

impl Default for McastConfig {
    fn default() -> Self {
        McastConfig {
            enabled: false,
            flood_unregistered: true,
            aging_ms: DEFAULT_AGING_MS,
            capacity: DEFAULT_CAPACITY,
        }
    }
}

/// One membership or router port, as `mdb/show` lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct McastEntry {
    pub port: u32,
    pub vlan: u16,
    /// `None`: a multicast router's port.
    pub group: Option<Group>,
    pub age_ms: u64,
}

/// Bounded like the MAC table: when it holds `capacity` groups, reports of new
/// ones are not taken (their traffic is handled as unregistered) until groups age
/// out, so a host reporting random groups cannot grow memory.
#[derive(Debug, Default)]
pub struct McastTable {
    config: McastConfig,
    /// (group, VLAN) → the ports that reported it, each with when it last did.
    groups: HashMap<(Group, u16), BTreeMap<u32, u64>>,
    /// (VLAN, port) → when a query last came in on it.
    mrouters: BTreeMap<(u16, u32), u64>,
}

impl McastTable {
    pub fn config(&self) -> McastConfig {
        self.config
    }

    /// Takes `config`; says whether forwarding may change by it. Switching
    /// snooping off forgets what was learned.
    pub fn set_config(&mut self, config: McastConfig) -> bool {
        let changed = config != self.config;
        if !config.enabled {
            self.clear();
        }
        self.config = config;
        changed
    }

    pub fn enabled(&self) -> bool {
        self.config.enabled
    }

    /// Port `port` on `vlan` reported `group`; says whether it is a new member.
    pub fn join(&mut self, group: Group, vlan: u16, port: u32, now_ms: u64) -> bool {
        let full = self.groups.len() >= self.config.capacity;
        let key = (group, vlan);
        if full && !self.groups.contains_key(&key) {
            return false;
        }
        let aging = self.config.aging_ms;
        let members = self.groups.entry(key).or_default();
        let fresh = |seen: &u64| now_ms.saturating_sub(*seen) < aging;
        let new = !members.get(&port).is_some_and(fresh);
        let seen = members.entry(port).or_insert(now_ms);
        *seen = (*seen).max(now_ms);
        new
    }

    /// Port `port` on `vlan` left `group`; says whether it was a member.
    pub fn leave(&mut self, group: Group, vlan: u16, port: u32) -> bool {
        let key = (group, vlan);
        let Some(members) = self.groups.get_mut(&key) else {
            return false;
        };
        let was = members.remove(&port).is_some();
        if members.is_empty() {
            self.groups.remove(&key);
        }
        was
    }

    /// A query came in on `port`: a router is behind it. Says whether it is new.
    pub fn add_mrouter(&mut self, vlan: u16, port: u32, now_ms: u64) -> bool {
        let seen = self.mrouters.insert((vlan, port), now_ms);
        seen.is_none_or(|s| now_ms.saturating_sub(s) >= MROUTER_AGING_MS)
    }

    /// The ports that asked for `group` on `vlan` and have not aged out; `None`
    /// when none did (the group is unregistered).
    pub fn members(&self, group: Group, vlan: u16, now_ms: u64) -> Option<Vec<u32>> {
        let aging = self.config.aging_ms;
        let ports: Vec<u32> = self
            .groups
            .get(&(group, vlan))?
            .iter()
            .filter(|(_, seen)| now_ms.saturating_sub(**seen) < aging)
            .map(|(p, _)| *p)
            .collect();
        (!ports.is_empty()).then_some(ports)
    }

    /// The ports routers are behind on `vlan`.
    pub fn mrouters(&self, vlan: u16, now_ms: u64) -> impl Iterator<Item = u32> + '_ {
        self.mrouters
            .range((vlan, 0)..=(vlan, u32::MAX))
            .filter(move |(_, seen)| now_ms.saturating_sub(**seen) < MROUTER_AGING_MS)
            .map(|((_, p), _)| *p)
    }

    /// Forgets what aged out; says whether anything did.
    pub fn expire(&mut self, now_ms: u64) -> bool {
        let aging = self.config.aging_ms;
        let mut gone = false;
        self.groups.retain(|_, members| {
            let before = members.len();
            members.retain(|_, seen| now_ms.saturating_sub(*seen) < aging);
            gone |= members.len() != before;
            !members.is_empty()
        });
        let before = self.mrouters.len();
        self.mrouters
            .retain(|_, seen| now_ms.saturating_sub(*seen) < MROUTER_AGING_MS);
        gone || self.mrouters.len() != before
    }

    /// Forgets port `port` (removed, or down); says whether it was in the table.
    pub fn flush_port(&mut self, port: u32) -> bool {
        let mut gone = false;
        self.groups.retain(|_, members| {
            gone |= members.remove(&port).is_some();
            !members.is_empty()
        });
        let before = self.mrouters.len();
        self.mrouters.retain(|(_, p), _| *p != port);
        gone || self.mrouters.len() != before
    }

    /// Forgets everything (`mdb/flush`).
    pub fn clear(&mut self) {
        self.groups.clear();
        self.mrouters.clear();
    }

    /// Groups held.
    pub fn len(&self) -> usize {
        self.groups.len()
    }

    pub fn is_empty(&self) -> bool {
        self.groups.is_empty() && self.mrouters.is_empty()
    }

    /// Every membership, then every router port, with their ages.
    pub fn entries(&self, now_ms: u64) -> Vec<McastEntry> {
        let mut out: Vec<McastEntry> = self
            .groups
            .iter()
            .flat_map(|((g, vlan), members)| {
                members.iter().map(|(port, seen)| McastEntry {
                    port: *port,
                    vlan: *vlan,
                    group: Some(*g),
                    age_ms: now_ms.saturating_sub(*seen),
                })
            })
            .collect();
        out.sort_by_key(|e| (e.group, e.vlan, e.port));
        out.extend(self.mrouters.iter().map(|((vlan, port), seen)| McastEntry {
            port: *port,
            vlan: *vlan,
            group: None,
            age_ms: now_ms.saturating_sub(*seen),
        }));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: Group = Group::V4(0xef01_0101);
    const H: Group = Group::V6(0xff15_0000_0000_0000_0000_0000_0000_0001);

    fn table(capacity: usize) -> McastTable {
        let mut t = McastTable::default();
        t.set_config(McastConfig {
            enabled: true,
            capacity,
            ..McastConfig::default()
        });
        t
    }

    #[test]
    fn members_join_refresh_leave_and_age() {
        let mut t = table(16);
        assert_eq!(t.members(G, 0, 0), None, "unregistered");
        assert!(t.join(G, 0, 2, 1_000));
        assert!(!t.join(G, 0, 2, 2_000), "a refresh changes no forwarding");
        assert!(t.join(G, 0, 3, 2_000));
        assert!(t.join(H, 0, 3, 2_000));
        assert_eq!(t.members(G, 0, 2_000), Some(vec![2, 3]));
        assert_eq!(t.members(G, 5, 2_000), None, "VLANs are separate");
        assert!(t.leave(G, 0, 2));
        assert!(!t.leave(G, 0, 2));
        assert_eq!(t.members(G, 0, 2_000), Some(vec![3]));
        // Aged: not a member for lookups at once, gone once expired.
        let later = 2_000 + DEFAULT_AGING_MS;
        assert_eq!(t.members(G, 0, later), None);
        assert!(
            t.join(G, 0, 3, later),
            "an aged member reporting is new again"
        );
        assert!(t.expire(later + 1));
        assert_eq!(t.members(H, 0, later + 1), None);
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn router_ports_are_learned_from_queries_and_age() {
        let mut t = table(16);
        assert!(t.add_mrouter(0, 4, 0));
        assert!(!t.add_mrouter(0, 4, 10));
        assert!(t.add_mrouter(7, 5, 10));
        assert_eq!(t.mrouters(0, 10).collect::<Vec<_>>(), vec![4]);
        assert_eq!(t.mrouters(0, 10 + MROUTER_AGING_MS).count(), 0);
        assert!(t.expire(10 + MROUTER_AGING_MS));
        assert!(t.is_empty());
    }

    #[test]
    fn bounded_flushed_by_port_and_cleared_when_switched_off() {
        let mut t = table(2);
        assert!(t.join(G, 0, 1, 0));
        assert!(t.join(H, 0, 1, 0));
        assert!(!t.join(Group::V4(0xef01_0102), 0, 1, 0), "full");
        assert!(t.join(G, 0, 2, 0), "a known group still takes members");
        t.add_mrouter(0, 2, 0);
        assert!(t.flush_port(2));
        assert_eq!(t.members(G, 0, 0), Some(vec![1]));
        assert_eq!(t.mrouters(0, 0).count(), 0);
        assert_eq!(t.entries(0).len(), 2);
        let off = McastConfig::default();
        assert!(t.set_config(off));
        assert!(t.is_empty());
    }
}
