//! The MAC-learning table behind the `normal` action.

use std::collections::HashMap;

use vsw_packet::MacAddr;

/// Entries not refreshed for this long are forgotten (as in Open vSwitch and the Linux bridge).
pub const DEFAULT_AGING_MS: u64 = 300_000;
pub const DEFAULT_CAPACITY: usize = 8192;

/// What [`MacTable::learn`] changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Learned {
    /// A group address, or the table is full.
    Ignored,
    New,
    /// Seen before on another port.
    Moved,
    /// Seen before on this port, last at `previous_ms`.
    Refreshed {
        previous_ms: u64,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MacEntry {
    pub port: u32,
    pub last_seen_ms: u64,
}

/// Where each (MAC, VLAN) was last seen. Bounded: when full, new addresses are not
/// learned (their frames are flooded) until entries age out, so a flood of random
/// source addresses cannot grow memory or evict the busy addresses.
#[derive(Debug)]
pub struct MacTable {
    entries: HashMap<(MacAddr, u16), MacEntry>,
    capacity: usize,
    aging_ms: u64,
}

impl Default for MacTable {
    fn default() -> Self {
        MacTable::new(DEFAULT_CAPACITY, DEFAULT_AGING_MS)
    }
}

impl MacTable {
    pub fn new(capacity: usize, aging_ms: u64) -> MacTable {
        MacTable {
            // Reserved up front so that learning never allocates on the packet path.
            entries: HashMap::with_capacity(capacity),
            capacity,
            aging_ms,
        }
    }

    /// Records that `mac` on `vlan` was seen on `port`. Group addresses are not learned.
    pub fn learn(&mut self, mac: MacAddr, vlan: u16, port: u32, now_ms: u64) -> Learned {
        if mac.is_multicast() {
            return Learned::Ignored;
        }
        let full = self.entries.len() >= self.capacity;
        match self.entries.get_mut(&(mac, vlan)) {
            Some(e) => {
                let moved = e.port != port;
                let previous_ms = e.last_seen_ms;
                e.port = port;
                e.last_seen_ms = e.last_seen_ms.max(now_ms);
                if moved {
                    Learned::Moved
                } else {
                    Learned::Refreshed { previous_ms }
                }
            }
            None if !full => {
                self.entries.insert(
                    (mac, vlan),
                    MacEntry {
                        port,
                        last_seen_ms: now_ms,
                    },
                );
                Learned::New
            }
            None => Learned::Ignored,
        }
    }

    /// The port `mac` was last seen on, unless it has aged out.
    pub fn lookup(&self, mac: MacAddr, vlan: u16, now_ms: u64) -> Option<u32> {
        let e = self.entries.get(&(mac, vlan))?;
        (now_ms.saturating_sub(e.last_seen_ms) < self.aging_ms).then_some(e.port)
    }

    /// Forgets entries older than the aging time; returns how many.
    pub fn expire(&mut self, now_ms: u64) -> usize {
        let before = self.entries.len();
        let aging = self.aging_ms;
        self.entries
            .retain(|_, e| now_ms.saturating_sub(e.last_seen_ms) < aging);
        before - self.entries.len()
    }

    /// Forgets every address learned on `port` (it was removed or went down).
    pub fn flush_port(&mut self, port: u32) {
        self.entries.retain(|_, e| e.port != port);
    }

    /// Forgets every address.
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn entries(&self) -> impl Iterator<Item = (MacAddr, u16, MacEntry)> + '_ {
        self.entries.iter().map(|((m, v), e)| (*m, *v, *e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mac(last: u8) -> MacAddr {
        MacAddr([2, 0, 0, 0, 0, last])
    }

    #[test]
    fn learns_moves_and_ages() {
        let mut t = MacTable::new(16, 300_000);
        assert_eq!(t.learn(mac(1), 0, 1, 1_000), Learned::New);
        assert_eq!(t.lookup(mac(1), 0, 1_000), Some(1));
        assert_eq!(t.lookup(mac(1), 5, 1_000), None, "VLANs are separate");
        assert_eq!(
            t.learn(mac(1), 0, 1, 1_500),
            Learned::Refreshed { previous_ms: 1_000 }
        );
        assert_eq!(t.learn(mac(1), 0, 2, 2_000), Learned::Moved);
        assert_eq!(
            t.lookup(mac(1), 0, 2_000),
            Some(2),
            "a station that moves is followed"
        );
        assert_eq!(t.lookup(mac(1), 0, 301_999), Some(2));
        assert_eq!(t.lookup(mac(1), 0, 302_000), None, "aged out after 300 s");
        assert_eq!(t.expire(302_000), 1);
        assert!(t.is_empty());
    }

    #[test]
    fn refresh_keeps_entry_alive() {
        let mut t = MacTable::default();
        t.learn(mac(1), 0, 1, 0);
        t.learn(mac(1), 0, 1, 200_000);
        assert_eq!(t.expire(400_000), 0);
        assert_eq!(t.lookup(mac(1), 0, 400_000), Some(1));
    }

    #[test]
    fn multicast_is_never_learned_and_capacity_holds() {
        let mut t = MacTable::new(2, 300_000);
        t.learn(MacAddr::BROADCAST, 0, 1, 0);
        assert!(t.is_empty());
        t.learn(mac(1), 0, 1, 0);
        t.learn(mac(2), 0, 1, 0);
        t.learn(mac(3), 0, 1, 0);
        assert_eq!(t.len(), 2);
        assert_eq!(t.lookup(mac(3), 0, 0), None);
        t.learn(mac(1), 0, 3, 1);
        assert_eq!(
            t.lookup(mac(1), 0, 1),
            Some(3),
            "known entries still update when full"
        );
        t.flush_port(3);
        assert_eq!(t.lookup(mac(1), 0, 1), None);
    }
}
