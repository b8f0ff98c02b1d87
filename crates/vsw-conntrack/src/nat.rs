//! NAT as Open vSwitch's tracker does it (`ct(commit,nat(src|dst=ADDR[-ADDR]
//! [:PORT[-PORT]]))`): a new connection's translated tuple is chosen once, from the
//! range, so that its reply tuple is no other connection's; both directions live in
//! the one connection (its reply key is the translated tuple's reverse), and each
//! packet of it is rewritten one way or back.

use crate::tuple::Tuple;

/// Which end a NAT rewrites.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NatKind {
    /// The source (`nat(src=…)`: SNAT).
    Src,
    /// The destination (`nat(dst=…)`: DNAT).
    Dst,
}

/// `nat(src|dst=ADDR[-ADDR][:PORT[-PORT]])`: addresses (one family, as the packet's)
/// and ports; no ports: the packet's own port where it is free.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NatRange {
    pub kind: NatKind,
    pub addr_min: u128,
    pub addr_max: u128,
    /// `None`: keep the port (SNAT: unless taken, then one of 1024–65535, as Open
    /// vSwitch).
    pub ports: Option<(u16, u16)>,
}

/// What a packet's headers become: a new source, destination, or both (address
/// and port each; ICMP's identifier is kept, so its "port" is unchanged).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NatRewrite {
    pub src: Option<(u128, u16)>,
    pub dst: Option<(u128, u16)>,
}

impl NatRewrite {
    /// What becomes of the packet an ICMP error rewritten so quotes: that packet
    /// went the other way, so its source takes what the error's destination
    /// takes, and its destination the source's (Open vSwitch's reverse NAT of
    /// the inner header).
    pub fn of_quote(&self) -> NatRewrite {
        NatRewrite {
            src: self.dst,
            dst: self.src,
        }
    }
}

/// How many addresses, and ports per address, a search tries at most: a full
/// range is not walked for every new connection (Open vSwitch bounds its search
/// too); a range this search finds full refuses the connection.
pub const MAX_ADDRESSES_TRIED: u64 = 64;
pub const MAX_PORTS_TRIED: u64 = 256;
/// SNAT's ports when the packet's own is taken and the rule gave none.
const EPHEMERAL: (u16, u16) = (1024, 65535);

/// The translated tuples to try for `orig` under `range`, best first, from a
/// start `seed` picks (the connection's hash: the same client tends to the same
/// address, and collisions spread).
pub fn candidates(orig: &Tuple, range: &NatRange, seed: u64) -> impl Iterator<Item = Tuple> {
    let orig = *orig;
    let span = range.addr_max.saturating_sub(range.addr_min);
    let n_addrs = span.min(u128::from(u64::MAX - 1)) as u64 + 1;
    let addr_start = seed % n_addrs;
    let own_port = match range.kind {
        NatKind::Src => orig.src_port,
        NatKind::Dst => orig.dst_port,
    };
    // ICMP keeps its identifier (a datapath rewrites addresses and ports only),
    // and a protocol without ports has none to change.
    let has_ports = own_port != 0 && !orig.is_icmp();
    let port_ranges: Vec<(u16, u16)> = match (range.ports, has_ports) {
        (_, false) => vec![(own_port, own_port)],
        (Some(p), true) => vec![p],
        (None, true) if range.kind == NatKind::Src => vec![(own_port, own_port), EPHEMERAL],
        (None, true) => vec![(own_port, own_port)],
    };
    let kind = range.kind;
    let addr_min = range.addr_min;
    port_ranges.into_iter().flat_map(move |(lo, hi)| {
        let n_ports = u64::from(hi.saturating_sub(lo)) + 1;
        let port_start = (seed >> 16) % n_ports;
        (0..n_addrs.min(MAX_ADDRESSES_TRIED)).flat_map(move |a| {
            // (u128: a start and a step near 2^64 do not overflow.)
            let addr = addr_min + (u128::from(addr_start) + u128::from(a)) % u128::from(n_addrs);
            (0..n_ports.min(MAX_PORTS_TRIED)).map(move |p| {
                let port = lo + ((port_start + p) % n_ports) as u16;
                let mut t = orig;
                match kind {
                    NatKind::Src => {
                        t.src = addr;
                        t.src_port = port;
                    }
                    NatKind::Dst => {
                        t.dst = addr;
                        t.dst_port = port;
                    }
                }
                t
            })
        })
    })
}

/// The rewrite of a packet of a connection translated from `orig` to
/// `translated`: one of the original direction to the translated tuple, one of
/// the reply direction back.
pub fn rewrite(kind: NatKind, orig: &Tuple, translated: &Tuple, reply: bool) -> NatRewrite {
    match (kind, reply) {
        (NatKind::Src, false) => NatRewrite {
            src: Some((translated.src, translated.src_port)),
            dst: None,
        },
        (NatKind::Src, true) => NatRewrite {
            src: None,
            dst: Some((orig.src, orig.src_port)),
        },
        (NatKind::Dst, false) => NatRewrite {
            src: None,
            dst: Some((translated.dst, translated.dst_port)),
        },
        (NatKind::Dst, true) => NatRewrite {
            src: Some((orig.dst, orig.dst_port)),
            dst: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tuple::IPPROTO_UDP;

    fn udp() -> Tuple {
        Tuple {
            src: 10,
            dst: 20,
            src_port: 5000,
            dst_port: 53,
            proto: IPPROTO_UDP,
            ..Tuple::default()
        }
    }

    #[test]
    fn snat_keeps_the_port_first_then_takes_an_ephemeral_one() {
        let r = NatRange {
            kind: NatKind::Src,
            addr_min: 100,
            addr_max: 101,
            ports: None,
        };
        let c: Vec<Tuple> = candidates(&udp(), &r, 0).take(3).collect();
        assert_eq!((c[0].src, c[0].src_port), (100, 5000));
        assert_eq!((c[1].src, c[1].src_port), (101, 5000));
        assert!(c[2].src_port >= 1024);
        assert!(c.iter().all(|t| t.dst == 20 && t.dst_port == 53));
        let ranged = NatRange {
            ports: Some((7000, 7001)),
            ..r
        };
        let all: Vec<(u128, u16)> = candidates(&udp(), &ranged, 3)
            .map(|t| (t.src, t.src_port))
            .collect();
        assert_eq!(all.len(), 4, "two addresses × two ports");
        let mut sorted = all.clone();
        sorted.sort();
        assert_eq!(sorted, [(100, 7000), (100, 7001), (101, 7000), (101, 7001)]);
    }

    #[test]
    fn a_rewrite_goes_one_way_and_back() {
        let o = udp();
        let t = Tuple {
            dst: 30,
            dst_port: 8053,
            ..o
        };
        assert_eq!(
            rewrite(NatKind::Dst, &o, &t, false),
            NatRewrite {
                src: None,
                dst: Some((30, 8053))
            }
        );
        assert_eq!(
            rewrite(NatKind::Dst, &o, &t, true),
            NatRewrite {
                src: Some((20, 53)),
                dst: None
            }
        );
    }
}
