//! Test frames: UDP over IPv4 carrying a magic, a sequence number and a send time, so
//! the receiver can count, spot loss and reordering, and measure one-way latency
//! (sender and receiver share the machine's monotonic clock).

use vsw_packet::wire::ethernet::{self, EtherType, ETH_HDR_LEN};
use vsw_packet::wire::ip::IPPROTO_UDP;
use vsw_packet::wire::{ipv4, udp};
use vsw_packet::MacAddr;

pub const MAGIC: u16 = 0x5657; // "VW"
const ETH: usize = ETH_HDR_LEN;
const IP: usize = ipv4::MIN_HEADER_LEN;
const UDP: usize = udp::HEADER_LEN;
/// Offset of the stamp in the frame: after the headers, at the UDP payload's start.
const STAMP: usize = ETH + IP + UDP;
/// The stamp's fields, from its start.
mod stamp_field {
    use std::ops::Range;
    pub const MAGIC: Range<usize> = 0..2;
    pub const SEQ: Range<usize> = 2..10;
    pub const SENT_NS: Range<usize> = 10..18;
}
const STAMP_LEN: usize = stamp_field::SENT_NS.end;
/// The smallest frame that holds the stamp: 60 bytes, a 64-byte frame on the wire.
pub const MIN_FRAME: usize = STAMP + STAMP_LEN;
pub const MAX_FRAME: usize = 1514;

/// Frame sizes as RFC 2544 counts them: on the wire, with the 4-byte FCS.
pub fn frame_len_for_wire_size(wire: usize) -> Option<usize> {
    let len = wire.checked_sub(4)?;
    (MIN_FRAME..=MAX_FRAME).contains(&len).then_some(len)
}

/// The Simple IMIX mix of wire sizes (7 : 4 : 1 of 64, 594 and 1518 bytes).
pub const IMIX: [usize; 12] = [64, 64, 64, 64, 64, 64, 64, 594, 594, 594, 594, 1518];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Addresses {
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    pub src_ip: [u8; 4],
    pub dst_ip: [u8; 4],
}

/// Writes a complete frame of `len` bytes into `out` (which must hold it): headers for
/// flow number `flow` (it picks the UDP source port), stamp, zero padding.
pub fn build(out: &mut [u8], len: usize, addr: &Addresses, flow: u16, seq: u64, sent_ns: u64) {
    let f = &mut out[..len];
    f.fill(0);
    let mut eth = ethernet::Frame::new_checked(&mut *f).expect("a frame holds its header");
    eth.set_dst_addr(MacAddr(addr.dst_mac));
    eth.set_src_addr(MacAddr(addr.src_mac));
    f[ethernet::field::ETHERTYPE].copy_from_slice(&EtherType::IPV4.to_be_bytes());
    const DONT_FRAGMENT: u16 = 0x4000;
    ipv4::Repr {
        header_len: IP,
        tos: 0,
        total_len: (len - ETH) as u16,
        frag: DONT_FRAGMENT,
        ttl: 64,
        protocol: IPPROTO_UDP,
        src: addr.src_ip,
        dst: addr.dst_ip,
    }
    .emit(&mut f[ETH..]);
    udp::emit(&mut f[ETH + IP..], 0, 9, len - STAMP);
    set_flow(f, flow);
    stamp(f, seq, sent_ns);
}

/// Sets the flow of a frame built by [`build`]: its UDP source port. (The UDP checksum
/// is 0, "none", and the IP checksum does not cover it, so nothing else changes.)
pub fn set_flow(frame: &mut [u8], flow: u16) {
    if let Ok(mut u) = udp::Packet::new_checked(&mut frame[ETH + IP..]) {
        u.set_src_port(1024u16.wrapping_add(flow));
    }
}

/// Writes the stamp into a frame built by [`build`].
pub fn stamp(frame: &mut [u8], seq: u64, sent_ns: u64) {
    let s = &mut frame[STAMP..STAMP + STAMP_LEN];
    s[stamp_field::MAGIC].copy_from_slice(&MAGIC.to_be_bytes());
    s[stamp_field::SEQ].copy_from_slice(&seq.to_be_bytes());
    s[stamp_field::SENT_NS].copy_from_slice(&sent_ns.to_be_bytes());
}

/// The (sequence, send time) of a test frame; `None` for any other frame.
pub fn read_stamp(frame: &[u8]) -> Option<(u64, u64)> {
    let s = frame.get(STAMP..STAMP + STAMP_LEN)?;
    let ip = ipv4::Packet::new_checked(frame.get(ETH..)?).ok()?;
    if ethernet::Frame::new_checked(frame).ok()?.ethertype() != EtherType::IPV4
        || ip.protocol() != IPPROTO_UDP
        || s[stamp_field::MAGIC] != MAGIC.to_be_bytes()
    {
        return None;
    }
    let seq = u64::from_be_bytes(s[stamp_field::SEQ].try_into().ok()?);
    let t = u64::from_be_bytes(s[stamp_field::SENT_NS].try_into().ok()?);
    Some((seq, t))
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Addresses = Addresses {
        src_mac: [2, 0, 0xc6, 0x12, 0, 1],
        dst_mac: [2, 0, 0xc6, 0x12, 0, 2],
        src_ip: [198, 18, 0, 1],
        dst_ip: [198, 18, 0, 2],
    };

    #[test]
    fn stamp_round_trip_and_valid_ip_header() {
        let mut buf = [0u8; 1514];
        build(&mut buf, 60, &A, 3, 42, 123_456_789);
        assert_eq!(read_stamp(&buf[..60]), Some((42, 123_456_789)));
        assert_eq!(
            vsw_packet::checksum::checksum(&buf[14..34]),
            0,
            "a valid header sums to zero"
        );
        assert_eq!(u16::from_be_bytes([buf[34], buf[35]]), 1027);
        assert_eq!(u16::from_be_bytes([buf[16], buf[17]]), 46);
        stamp(&mut buf, 43, 5);
        assert_eq!(read_stamp(&buf[..60]), Some((43, 5)));
        let mut again = [0u8; 60];
        build(&mut again, 60, &A, 7, 43, 5);
        set_flow(&mut buf, 7);
        assert_eq!(
            &buf[..60],
            &again[..],
            "patching a template gives the same frame as building it"
        );
    }

    #[test]
    fn other_frames_are_not_test_frames() {
        assert_eq!(read_stamp(&[0u8; 60]), None);
        assert_eq!(read_stamp(&[0u8; 10]), None);
        let mut buf = [0u8; 100];
        build(&mut buf, 60, &A, 0, 1, 1);
        buf[42] ^= 0xff;
        assert_eq!(read_stamp(&buf[..60]), None);
    }

    #[test]
    fn wire_sizes() {
        assert_eq!(frame_len_for_wire_size(64), Some(60));
        assert_eq!(frame_len_for_wire_size(1518), Some(1514));
        assert_eq!(frame_len_for_wire_size(63), None);
        assert_eq!(frame_len_for_wire_size(1519), None);
        assert!(IMIX.iter().all(|w| frame_len_for_wire_size(*w).is_some()));
    }
}
