//! NAT of the packet an ICMP or ICMPv6 error quotes. An error about a NATed
//! connection's packet quotes that packet as it was on the far side of the NAT;
//! once the error itself is NATed, its quote must be rewritten back too, or the
//! host it reaches cannot match it to its socket (Open vSwitch's reverse NAT of
//! the inner header).
//!
//! The error's own checksum is kept incrementally: by the difference of the
//! quote's sums before and after.

use super::{csum_adjust, PacketBuf};
use crate::checksum;
use crate::wire::ip::{IPPROTO_ICMP, IPPROTO_ICMPV6, IPPROTO_SCTP, IPPROTO_TCP, IPPROTO_UDP};

/// One end of the quoted packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuoteEnd {
    Src,
    Dst,
}

/// Where the ICMP header's checksum sits.
const ICMP_CSUM: usize = 2;
/// Where the quote starts behind the ICMP header (type, code, checksum and the
/// four bytes every error kind has before it).
const QUOTE_AT: usize = 8;

impl PacketBuf {
    /// Rewrites `end` of the packet the frame's ICMP or ICMPv6 error quotes: its
    /// address (4 or 16 bytes, the quote's family) and, when the quote is TCP,
    /// UDP or SCTP and holds its ports, its port. The quote's IPv4 header
    /// checksum and, where the quote holds it, its TCP or UDP checksum are kept
    /// right; the error's checksum is summed again. Returns whether it rewrote
    /// (not when the frame is no such error, or the quote is cut short).
    pub fn set_icmp_quote(&mut self, end: QuoteEnd, addr: &[u8], port: u16) -> bool {
        let Some((proto, l4, stop)) = self.l4_span() else {
            return false;
        };
        let v6 = match proto {
            IPPROTO_ICMP => false,
            IPPROTO_ICMPV6 => true,
            _ => return false,
        };
        let d = self.data_mut();
        let stop = stop.min(d.len());
        let Some(quote) = d.get_mut(l4 + QUOTE_AT..stop) else {
            return false;
        };
        // The error's checksum follows what changed in its quote (RFC 1624 over
        // the quote's sum): an error that came in with a wrong checksum leaves
        // with one as wrong, never mended by the switch. (ICMPv6's pseudo-header
        // follows the error's own addresses when NAT writes them.) The quote
        // starts at an even offset of the message, so its words are the
        // message's.
        let before = checksum::fold(checksum::sum(quote, 0));
        if !rewrite_quote(quote, v6, end, addr, port) {
            return false;
        }
        let after = checksum::fold(checksum::sum(quote, 0));
        let at = l4 + ICMP_CSUM;
        let old = u16::from_be_bytes([d[at], d[at + 1]]);
        let c = !checksum::fold(u64::from(!old) + u64::from(!before) + u64::from(after));
        d[at..at + 2].copy_from_slice(&c.to_be_bytes());
        true
    }
}

/// Rewrites `end` of the quoted packet `q` (its IP header first).
fn rewrite_quote(q: &mut [u8], v6: bool, end: QuoteEnd, addr: &[u8], port: u16) -> bool {
    let (header_len, proto, addr_at) = if v6 {
        if q.len() < 40 || q[0] >> 4 != 6 || addr.len() != 16 {
            return false;
        }
        (40, q[6], if end == QuoteEnd::Src { 8 } else { 24 })
    } else {
        let ihl = usize::from(q.first().map_or(0, |b| b & 0xf)) * 4;
        if ihl < 20 || q.len() < ihl || q[0] >> 4 != 4 || addr.len() != 4 {
            return false;
        }
        (ihl, q[9], if end == QuoteEnd::Src { 12 } else { 16 })
    };
    let mut old_addr = [0u8; 16];
    let old_addr = &mut old_addr[..addr.len()];
    old_addr.copy_from_slice(&q[addr_at..addr_at + addr.len()]);
    q[addr_at..addr_at + addr.len()].copy_from_slice(addr);
    if !v6 {
        let check = u16::from_be_bytes([q[10], q[11]]);
        let check = csum_adjust(check, old_addr, addr, false, false);
        q[10..12].copy_from_slice(&check.to_be_bytes());
    }
    let l4 = &mut q[header_len..];
    let port_at = if end == QuoteEnd::Src { 0 } else { 2 };
    let has_ports = matches!(proto, IPPROTO_TCP | IPPROTO_UDP | IPPROTO_SCTP) && l4.len() >= 4;
    let old_port = if has_ports {
        let old = [l4[port_at], l4[port_at + 1]];
        l4[port_at..port_at + 2].copy_from_slice(&port.to_be_bytes());
        old
    } else {
        [0; 2]
    };
    // The quote's own transport checksum, when the quote reaches it: its
    // pseudo-header holds the address. (SCTP's CRC has no incremental form, and
    // a quote rarely holds the whole packet it would need.)
    let csum_at = match proto {
        IPPROTO_TCP => Some(16),
        IPPROTO_UDP => Some(6),
        _ => None,
    };
    if let Some(at) = csum_at.filter(|at| l4.len() >= at + 2) {
        let old = u16::from_be_bytes([l4[at], l4[at + 1]]);
        if proto == IPPROTO_UDP && old == 0 {
            return true; // UDP over IPv4 without a checksum.
        }
        let mut check = csum_adjust(old, old_addr, addr, false, false);
        if has_ports {
            check = csum_adjust(check, &old_port, &port.to_be_bytes(), false, false);
        }
        if proto == IPPROTO_UDP && check == 0 {
            check = 0xffff;
        }
        l4[at..at + 2].copy_from_slice(&check.to_be_bytes());
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder;
    use crate::vnet::VnetHdr;

    use crate::wire::ethernet::EtherType;

    fn frame(ethertype: u16, ip: &[u8]) -> Vec<u8> {
        builder::ethernet(builder::DST_MAC, builder::SRC_MAC, &[], ethertype, ip)
    }

    /// A UDP datagram over IPv4, its checksum right.
    fn udp4(src: [u8; 4], dst: [u8; 4], sp: u16, dp: u16, payload: &[u8]) -> Vec<u8> {
        let mut udp = builder::udp(sp, dp, payload);
        let pseudo = [
            &src[..],
            &dst[..],
            &[0, IPPROTO_UDP],
            &(udp.len() as u16).to_be_bytes(),
        ];
        let acc = pseudo.iter().fold(0, |acc, p| checksum::sum(p, acc));
        let c = !checksum::fold(checksum::sum(&udp, acc));
        udp[6..8].copy_from_slice(&c.to_be_bytes());
        let h = builder::Ipv4 {
            src,
            dst,
            ..Default::default()
        };
        frame(EtherType::IPV4, &builder::ipv4(&h, &udp))
    }

    /// An ICMP error from `src` to `dst` quoting `quote`, its checksum right.
    fn icmp4_error(src: [u8; 4], dst: [u8; 4], t: u8, code: u8, quote: &[u8]) -> Vec<u8> {
        let mut msg = vec![t, code, 0, 0, 0, 0, 0, 0];
        msg.extend_from_slice(quote);
        let c = checksum::checksum(&msg);
        msg[2..4].copy_from_slice(&c.to_be_bytes());
        let h = builder::Ipv4 {
            src,
            dst,
            proto: IPPROTO_ICMP,
            ..Default::default()
        };
        frame(EtherType::IPV4, &builder::ipv4(&h, &msg))
    }

    /// The IPv6 pseudo-header's sum for `len` bytes of `next`.
    fn pseudo6(src: u128, dst: u128, next: u8, len: usize) -> u64 {
        let acc = checksum::sum(&src.to_be_bytes(), 0);
        checksum::sum(&dst.to_be_bytes(), acc) + len as u64 + u64::from(next)
    }

    fn udp6(src: u128, dst: u128, sp: u16, dp: u16, payload: &[u8]) -> Vec<u8> {
        let mut udp = builder::udp(sp, dp, payload);
        let acc = pseudo6(src, dst, IPPROTO_UDP, udp.len());
        let c = !checksum::fold(checksum::sum(&udp, acc));
        udp[6..8].copy_from_slice(&c.to_be_bytes());
        let h = builder::Ipv6 {
            src,
            dst,
            ..Default::default()
        };
        frame(EtherType::IPV6, &builder::ipv6(&h, &udp))
    }

    fn icmp6_error(src: u128, dst: u128, t: u8, code: u8, quote: &[u8]) -> Vec<u8> {
        let mut msg = vec![t, code, 0, 0, 0, 0, 0, 0];
        msg.extend_from_slice(quote);
        let acc = pseudo6(src, dst, IPPROTO_ICMPV6, msg.len());
        let c = !checksum::fold(checksum::sum(&msg, acc));
        msg[2..4].copy_from_slice(&c.to_be_bytes());
        let h = builder::Ipv6 {
            src,
            dst,
            next: IPPROTO_ICMPV6,
            ..Default::default()
        };
        frame(EtherType::IPV6, &builder::ipv6(&h, &msg))
    }

    fn buf(frame: &[u8]) -> PacketBuf {
        let mut b = PacketBuf::new(2048);
        b.load(frame, None, VnetHdr::default()).unwrap();
        b
    }

    /// The ICMP message of a frame, and the quote inside it.
    fn icmp(frame: &[u8], v6: bool) -> (&[u8], &[u8]) {
        let l4 = 14 + if v6 { 40 } else { 20 };
        (&frame[l4..], &frame[l4 + 8..])
    }

    #[test]
    fn an_ipv4_quote_takes_the_address_and_port_with_every_checksum_right() {
        // A UDP packet 10.0.0.1:4000 -> 198.18.0.2:53, then its error from the
        // server, quoting it as translated to 198.18.0.100:7000.
        let original = udp4([10, 0, 0, 1], [198, 18, 0, 2], 4000, 53, b"query");
        let translated = udp4([198, 18, 0, 100], [198, 18, 0, 2], 7000, 53, b"query");
        let error =
            |quoted: &[u8]| icmp4_error([198, 18, 0, 2], [10, 0, 0, 1], 3, 3, &quoted[14..]);
        let mut b = buf(&error(&translated));
        assert!(b.set_icmp_quote(QuoteEnd::Src, &[10, 0, 0, 1], 4000));
        assert_eq!(
            b.data(),
            &error(&original)[..],
            "as if the client's own packet were quoted"
        );
        let (msg, quote) = icmp(b.data(), false);
        assert_eq!(checksum::checksum(msg), 0, "the error's checksum");
        assert_eq!(
            checksum::checksum(&quote[..20]),
            0,
            "the quote's IPv4 header"
        );
    }

    #[test]
    fn an_ipv6_quote_is_rewritten_under_the_pseudo_header() {
        let a: u128 = 0xfd00_0000_0000_0000_0000_0000_0000_0001;
        let nat: u128 = 0x2001_0db8_0000_0000_0000_0000_0000_0100;
        let server: u128 = 0x2001_0db8_0000_0000_0000_0000_0000_0002;
        let original = udp6(a, server, 4000, 53, b"query");
        let translated = udp6(nat, server, 7000, 53, b"query");
        let error = |to, quoted: &[u8]| icmp6_error(server, to, 1, 4, &quoted[14..]);
        let mut b = buf(&error(nat, &translated));
        // The error's own destination first (as the datapath does), then the quote.
        b.write_field(super::super::FieldWrite::Ipv6Dst(a.to_be_bytes()));
        assert!(b.set_icmp_quote(QuoteEnd::Src, &a.to_be_bytes(), 4000));
        assert_eq!(b.data(), &error(a, &original)[..]);
    }

    #[test]
    fn an_error_with_a_wrong_checksum_stays_wrong() {
        let translated = udp4([198, 18, 0, 100], [198, 18, 0, 2], 7000, 53, b"query");
        let mut bad = icmp4_error([198, 18, 0, 2], [10, 0, 0, 1], 3, 3, &translated[14..]);
        bad[14 + 20 + 2] ^= 0x40;
        let mut b = buf(&bad);
        assert!(b.set_icmp_quote(QuoteEnd::Src, &[10, 0, 0, 1], 4000));
        let (msg, _) = icmp(b.data(), false);
        assert_ne!(checksum::checksum(msg), 0, "not mended by the rewrite");
    }

    #[test]
    fn a_quote_cut_short_or_a_frame_of_no_error_is_left_alone() {
        let translated = udp4([198, 18, 0, 100], [198, 18, 0, 2], 7000, 53, b"");
        // Only 12 bytes of the quoted IP header.
        let cut = icmp4_error([198, 18, 0, 2], [10, 0, 0, 1], 3, 3, &translated[14..26]);
        let mut b = buf(&cut);
        assert!(!b.set_icmp_quote(QuoteEnd::Src, &[10, 0, 0, 1], 4000));
        assert_eq!(b.data(), &cut[..]);
        let mut plain = buf(&translated);
        assert!(!plain.set_icmp_quote(QuoteEnd::Src, &[10, 0, 0, 1], 4000));
        assert_eq!(plain.data(), &translated[..]);
        // The quote's port only where the quote reaches it: 20 bytes of IP and
        // 2 of UDP take the address alone.
        let two = icmp4_error([198, 18, 0, 2], [10, 0, 0, 1], 3, 3, &translated[14..36]);
        let mut b = buf(&two);
        assert!(b.set_icmp_quote(QuoteEnd::Src, &[10, 0, 0, 1], 4000));
        let (_, quote) = icmp(b.data(), false);
        assert_eq!(
            (&quote[12..16], &quote[20..22]),
            (&[10, 0, 0, 1][..], &7000u16.to_be_bytes()[..])
        );
    }

    proptest::proptest! {
        /// Hostile errors (any byte overwritten, any cut, a quote claiming any
        /// header length or family): the rewrite never reaches past the frame.
        #[test]
        fn hostile_errors_never_panic(
            v6 in proptest::prelude::any::<bool>(),
            writes in proptest::collection::vec((0usize..200, proptest::prelude::any::<u8>()), 0..6),
            cut in 0usize..200,
            src in proptest::prelude::any::<bool>(),
        ) {
            let mut f = if v6 {
                let q = udp6(1, 2, 3, 4, b"payload");
                icmp6_error(2, 1, 1, 4, &q[14..])
            } else {
                let q = udp4([1, 1, 1, 1], [2, 2, 2, 2], 3, 4, b"payload");
                icmp4_error([2, 2, 2, 2], [1, 1, 1, 1], 3, 3, &q[14..])
            };
            for (at, v) in writes {
                let n = f.len();
                f[at % n] = v;
            }
            f.truncate(cut.max(14));
            let mut b = buf(&f);
            let end = if src { QuoteEnd::Src } else { QuoteEnd::Dst };
            b.set_icmp_quote(end, &[9; 16], 7);
            b.set_icmp_quote(end, &[9; 4], 7);
            proptest::prop_assert_eq!(b.data().len(), f.len());
        }
    }
}
