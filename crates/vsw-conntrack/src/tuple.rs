//! What a connection is known by: one direction's addresses, protocol and ports
//! (ICMP: its identifier, type and code), in a zone.

pub const IPPROTO_ICMP: u8 = 1;
pub const IPPROTO_TCP: u8 = 6;
pub const IPPROTO_UDP: u8 = 17;
pub const IPPROTO_ICMPV6: u8 = 58;
pub const IPPROTO_SCTP: u8 = 132;

/// One direction of a connection as its packets' headers say it. IPv4 addresses
/// are in the low 32 bits. ICMP queries carry their identifier as both ports, and
/// their type and code; every other protocol leaves type and code 0 (and ports 0
/// where it has none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tuple {
    pub src: u128,
    pub dst: u128,
    pub src_port: u16,
    pub dst_port: u16,
    pub proto: u8,
    pub v6: bool,
    pub icmp_type: u8,
    pub icmp_code: u8,
}

/// ICMP queries and their answers: (request, reply), IPv4 then IPv6 (echo,
/// timestamp, information, address mask; ICMPv6 echo).
const ICMP_PAIRS: [(u8, u8); 4] = [(8, 0), (13, 14), (15, 16), (17, 18)];
const ICMPV6_PAIRS: [(u8, u8); 1] = [(128, 129)];

impl Tuple {
    fn icmp_pairs(&self) -> &'static [(u8, u8)] {
        match (self.proto, self.v6) {
            (IPPROTO_ICMP, false) => &ICMP_PAIRS,
            (IPPROTO_ICMPV6, true) => &ICMPV6_PAIRS,
            _ => &[],
        }
    }

    /// Whether this is ICMP (or ICMPv6) at all.
    pub fn is_icmp(&self) -> bool {
        matches!(
            (self.proto, self.v6),
            (IPPROTO_ICMP, false) | (IPPROTO_ICMPV6, true)
        )
    }

    /// An ICMP query that may start a connection (Open vSwitch's
    /// `icmp4_valid_new`/`icmp6_valid_new`: echo, information and timestamp
    /// requests; ICMPv6 echo).
    pub fn is_icmp_query(&self) -> bool {
        match (self.proto, self.v6) {
            (IPPROTO_ICMP, false) => matches!(self.icmp_type, 8 | 13 | 15),
            (IPPROTO_ICMPV6, true) => self.icmp_type == 128,
            _ => false,
        }
    }

    /// The other direction's tuple: addresses and ports swapped, an ICMP query's
    /// type turned into its answer's (and back). `None` for ICMP that is no query
    /// or answer.
    pub fn reverse(&self) -> Option<Tuple> {
        let mut r = Tuple {
            src: self.dst,
            dst: self.src,
            src_port: self.dst_port,
            dst_port: self.src_port,
            ..*self
        };
        if self.is_icmp() {
            r.icmp_type = self.icmp_pairs().iter().find_map(|&(q, a)| {
                if q == self.icmp_type {
                    Some(a)
                } else if a == self.icmp_type {
                    Some(q)
                } else {
                    None
                }
            })?;
        }
        Some(r)
    }
}

/// A tuple in a zone: what the table looks connections up by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    pub zone: u16,
    pub tuple: Tuple,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reverse_swaps_ends_and_answers_queries() {
        let udp = Tuple {
            src: 1,
            dst: 2,
            src_port: 10,
            dst_port: 20,
            proto: IPPROTO_UDP,
            ..Tuple::default()
        };
        let r = udp.reverse().unwrap();
        assert_eq!((r.src, r.dst, r.src_port, r.dst_port), (2, 1, 20, 10));
        assert_eq!(r.reverse(), Some(udp));
        let echo = Tuple {
            proto: IPPROTO_ICMP,
            icmp_type: 8,
            src_port: 7,
            dst_port: 7,
            ..udp
        };
        assert_eq!(echo.reverse().unwrap().icmp_type, 0);
        assert_eq!(echo.reverse().unwrap().reverse(), Some(echo));
        assert!(echo.is_icmp_query());
        let unreachable = Tuple {
            icmp_type: 3,
            ..echo
        };
        assert_eq!(unreachable.reverse(), None);
        let v6 = Tuple {
            proto: IPPROTO_ICMPV6,
            v6: true,
            icmp_type: 128,
            ..echo
        };
        assert_eq!(v6.reverse().unwrap().icmp_type, 129);
        assert!(
            !Tuple { v6: true, ..echo }.is_icmp(),
            "ICMPv4 over IPv6 is none"
        );
    }
}
