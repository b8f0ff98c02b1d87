//! Test frames: UDP over IPv4 carrying a magic, a sequence number and a send time, so
//! the receiver can count, spot loss and reordering, and measure one-way latency
//! (sender and receiver share the machine's monotonic clock).

pub const MAGIC: u16 = 0x5657; // "VW"
const ETH: usize = 14;
const IP: usize = 20;
const UDP: usize = 8;
/// Offset of the stamp (magic, sequence, time) in the frame.
const STAMP: usize = ETH + IP + UDP;
const STAMP_LEN: usize = 2 + 8 + 8;
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
    f[0..6].copy_from_slice(&addr.dst_mac);
    f[6..12].copy_from_slice(&addr.src_mac);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip = &mut f[ETH..ETH + IP];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&((len - ETH) as u16).to_be_bytes());
    ip[6] = 0x40; // don't fragment
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&addr.src_ip);
    ip[16..20].copy_from_slice(&addr.dst_ip);
    let csum = vsw_packet::checksum::checksum(ip);
    ip[10..12].copy_from_slice(&csum.to_be_bytes());
    let udp = &mut f[ETH + IP..STAMP];
    udp[2..4].copy_from_slice(&9u16.to_be_bytes());
    udp[4..6].copy_from_slice(&((len - ETH - IP) as u16).to_be_bytes());
    set_flow(f, flow);
    stamp(f, seq, sent_ns);
}

/// Sets the flow of a frame built by [`build`]: its UDP source port. (The UDP checksum
/// is 0, "none", and the IP checksum does not cover it, so nothing else changes.)
pub fn set_flow(frame: &mut [u8], flow: u16) {
    frame[ETH + IP..ETH + IP + 2].copy_from_slice(&1024u16.wrapping_add(flow).to_be_bytes());
}

/// Writes the stamp into a frame built by [`build`].
pub fn stamp(frame: &mut [u8], seq: u64, sent_ns: u64) {
    frame[STAMP..STAMP + 2].copy_from_slice(&MAGIC.to_be_bytes());
    frame[STAMP + 2..STAMP + 10].copy_from_slice(&seq.to_be_bytes());
    frame[STAMP + 10..STAMP + 18].copy_from_slice(&sent_ns.to_be_bytes());
}

/// The (sequence, send time) of a test frame; `None` for any other frame.
pub fn read_stamp(frame: &[u8]) -> Option<(u64, u64)> {
    let s = frame.get(STAMP..STAMP + STAMP_LEN)?;
    if frame.get(12..14)? != [0x08, 0x00]
        || frame.get(ETH + 9) != Some(&17)
        || s[0..2] != MAGIC.to_be_bytes()
    {
        return None;
    }
    let seq = u64::from_be_bytes(s[2..10].try_into().ok()?);
    let t = u64::from_be_bytes(s[10..18].try_into().ok()?);
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
