//! The outer headers `DpAction::TunnelPush` puts in front of packets, numbered: a
//! datapath action stays a small copyable value, and a PMD finds the header by its
//! number without a lock.
//!
//! Translation interns each header it resolves (a tunnel port toward one remote
//! end, through one next hop): the same header gets its number back. The table is
//! bounded and numbers are never reused (a flow holding a number always finds its
//! header); once it is full, translation sends through the tunnel port's own queue
//! instead, as it does whenever the way out is not resolved.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock, PoisonError};

use vsw_packet::tunnel::EncapTemplate;

/// Headers one datapath numbers at most.
pub const MAX_PUSH_HEADERS: usize = 4096;

/// One header: the outer headers, and the tunnel port it is sent by (whose
/// counters count its packets, and whose queue takes a packet the header cannot).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PushHeader {
    pub template: EncapTemplate,
    pub tunnel_port: u32,
}

pub struct PushHeaders {
    slots: Box<[OnceLock<PushHeader>]>,
    numbers: Mutex<HashMap<PushHeader, u32>>,
}

impl Default for PushHeaders {
    fn default() -> Self {
        PushHeaders {
            slots: (0..MAX_PUSH_HEADERS).map(|_| OnceLock::new()).collect(),
            numbers: Mutex::new(HashMap::new()),
        }
    }
}

impl std::fmt::Debug for PushHeaders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushHeaders")
            .field("len", &self.len())
            .finish()
    }
}

impl PushHeaders {
    /// The number of `header`: the one it has, or a new one; `None` when the table
    /// is full.
    pub fn intern(&self, header: PushHeader) -> Option<u32> {
        let mut numbers = self.numbers.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = numbers.get(&header) {
            return Some(*n);
        }
        let n = numbers.len();
        let slot = self.slots.get(n)?;
        // Set under the lock, once: a reader that has the number finds it.
        let _ = slot.set(header.clone());
        numbers.insert(header, n as u32);
        Some(n as u32)
    }

    /// Header `n` (no lock).
    #[inline]
    pub fn get(&self, n: u32) -> Option<&PushHeader> {
        self.slots.get(n as usize)?.get()
    }

    pub fn len(&self) -> usize {
        self.numbers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{IpAddr, Ipv4Addr};
    use vsw_packet::tunnel::{EncapSpec, TunnelKind};
    use vsw_packet::MacAddr;

    fn header(vni: u32, port: u32) -> PushHeader {
        let spec = EncapSpec {
            kind: TunnelKind::Vxlan,
            eth_src: MacAddr([2, 0, 0, 0, 0, 1]),
            eth_dst: MacAddr([2, 0, 0, 0, 0, 2]),
            src: IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)),
            dst: IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2)),
            tos: 0,
            ttl: 64,
            df: true,
            udp_dst: 4789,
            udp_csum: false,
            vni,
            geneve_options: Vec::new(),
        };
        PushHeader {
            template: EncapTemplate::new(&spec).unwrap(),
            tunnel_port: port,
        }
    }

    #[test]
    fn a_header_keeps_its_number_and_a_full_table_numbers_no_more() {
        let t = PushHeaders::default();
        let a = t.intern(header(1, 5)).unwrap();
        let b = t.intern(header(2, 5)).unwrap();
        assert_ne!(a, b);
        assert_eq!(t.intern(header(1, 5)), Some(a));
        assert_ne!(t.intern(header(1, 6)), Some(a), "another port's");
        assert_eq!(t.get(b), Some(&header(2, 5)));
        assert_eq!(t.get(MAX_PUSH_HEADERS as u32), None);
        for vni in 3..=MAX_PUSH_HEADERS as u32 {
            let _ = t.intern(header(vni, 5));
        }
        assert_eq!(t.len(), MAX_PUSH_HEADERS);
        assert_eq!(t.intern(header(u32::MAX >> 8, 5)), None);
        assert_eq!(
            t.intern(header(2, 5)),
            Some(b),
            "a kept one still has its number"
        );
    }
}
