//! Checked against an independent parser (etherparse): every segment parses, every
//! checksum it computes matches, and the payloads put back together are the original.

use super::*;
use crate::builder::{self, Ipv4, Ipv6, DST_MAC, SRC_MAC};
use etherparse::{NetSlice, SlicedPacket, TransportSlice};
use proptest::prelude::*;

fn payload(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 + 3) as u8).collect()
}

/// A super-frame as a sender with TSO hands it over: one TCP header, a payload of
/// many segments, lengths for the whole.
fn super_frame(v6: bool, tags: &[(u16, u16)], data: &[u8], flags: u16) -> Vec<u8> {
    let tcp = builder::tcp(40000, 5201, flags, data);
    let (ethertype, l3) = if v6 {
        let ip = Ipv6 {
            next: IPPROTO_TCP,
            ..Ipv6::default()
        };
        (EtherType::IPV6, builder::ipv6(&ip, &tcp))
    } else {
        let ip = Ipv4 {
            proto: IPPROTO_TCP,
            ..Ipv4::default()
        };
        (EtherType::IPV4, builder::ipv4(&ip, &tcp))
    };
    builder::ethernet(DST_MAC, SRC_MAC, tags, ethertype, &l3)
}

struct Seen {
    data: Vec<u8>,
    seqs: Vec<u32>,
    ids: Vec<u16>,
    fin_psh: Vec<(bool, bool)>,
    cwr: Vec<bool>,
}

/// Parses every segment with etherparse and checks its checksums.
fn check(segments: &[Vec<u8>], v6: bool, mss: usize) -> Seen {
    let mut seen = Seen {
        data: Vec::new(),
        seqs: Vec::new(),
        ids: Vec::new(),
        fin_psh: Vec::new(),
        cwr: Vec::new(),
    };
    for seg in segments {
        let p = SlicedPacket::from_ethernet(seg).expect("etherparse reads the segment");
        let Some(TransportSlice::Tcp(tcp)) = &p.transport else {
            panic!("no TCP in segment")
        };
        let want = match &p.net {
            Some(NetSlice::Ipv4(ip)) => {
                assert!(!v6);
                let h = ip.header();
                assert_eq!(
                    h.to_header().calc_header_checksum(),
                    h.header_checksum(),
                    "IPv4 header checksum"
                );
                assert_eq!(
                    usize::from(h.total_len()),
                    h.slice().len() + ip.payload().payload.len(),
                    "total length"
                );
                seen.ids.push(h.identification());
                tcp.calc_checksum_ipv4(h.source(), h.destination()).unwrap()
            }
            Some(NetSlice::Ipv6(ip)) => {
                assert!(v6);
                let h = ip.header();
                tcp.calc_checksum_ipv6(h.source(), h.destination()).unwrap()
            }
            None => panic!("no IP"),
        };
        assert_eq!(tcp.checksum(), want, "TCP checksum");
        assert!(
            tcp.payload().len() <= mss,
            "segment payload {} > {mss}",
            tcp.payload().len()
        );
        seen.data.extend_from_slice(tcp.payload());
        seen.seqs.push(tcp.sequence_number());
        seen.fin_psh.push((tcp.fin(), tcp.psh()));
        seen.cwr.push(tcp.cwr());
    }
    seen
}

fn segments_of(frame: &[u8], mss: usize) -> Vec<Vec<u8>> {
    let mut buf = vec![0u8; 70_000];
    let mut out = Vec::new();
    let n = segment_tcp(frame, mss, &mut buf, |s| out.push(s.to_vec())).unwrap();
    assert_eq!(n, out.len());
    out
}

#[test]
fn ipv4_with_a_vlan_tag_is_cut_into_right_segments() {
    let data = payload(10_000);
    let frame = super_frame(false, &[(EtherType::VLAN, 7)], &data, 0x018 | 0x001 | 0x080);
    let segs = segments_of(&frame, 1448);
    assert_eq!(segs.len(), 7);
    let seen = check(&segs, false, 1448);
    assert_eq!(seen.data, data, "payloads put together are the original");
    for (i, s) in seen.seqs.iter().enumerate() {
        assert_eq!(*s, 1000 + (i * 1448) as u32);
    }
    for (i, id) in seen.ids.iter().enumerate() {
        assert_eq!(*id, i as u16, "IP ids count up");
    }
    let last = seen.fin_psh.len() - 1;
    assert!(seen.fin_psh[..last].iter().all(|f| *f == (false, false)));
    assert_eq!(
        seen.fin_psh[last],
        (true, true),
        "FIN and PSH on the last only"
    );
    assert!(
        seen.cwr[0] && seen.cwr[1..].iter().all(|c| !c),
        "CWR on the first only"
    );
    for s in &segs {
        assert_eq!(
            &s[12..16],
            &[0x81, 0x00, 0x00, 0x07],
            "the tag stays on every segment"
        );
    }
}

#[test]
fn ipv6_is_cut_into_right_segments() {
    let data = payload(5000);
    let frame = super_frame(true, &[], &data, 0x010);
    let segs = segments_of(&frame, 1000);
    assert_eq!(segs.len(), 5);
    let seen = check(&segs, true, 1000);
    assert_eq!(seen.data, data);
    for s in &segs {
        let plen = u16::from_be_bytes([s[18], s[19]]) as usize;
        assert_eq!(plen, s.len() - 54, "IPv6 payload length");
    }
}

#[test]
fn what_is_not_tcp_is_refused() {
    let frame = builder::udp4_frame([1, 1, 1, 1], [2, 2, 2, 2], 1, 2, 3000);
    let mut buf = vec![0u8; 4000];
    assert_eq!(
        segment_tcp(&frame, 1000, &mut buf, |_| {}),
        Err(GsoError::Unsupported)
    );
    assert_eq!(
        segment_tcp(&frame[..20], 1000, &mut buf, |_| {}),
        Err(GsoError::Malformed)
    );
    let tcp = super_frame(false, &[], &payload(100), 0x10);
    assert_eq!(
        segment_tcp(&tcp, 0, &mut buf, |_| {}),
        Err(GsoError::NoSegmentSize)
    );
    assert_eq!(
        segment_tcp(&tcp, 1000, &mut buf[..50], |_| {}),
        Err(GsoError::TooBig)
    );
}

#[test]
fn the_segment_size_follows_the_mtu() {
    let frame = super_frame(false, &[], &payload(100), 0x10);
    let vnet = VnetHdr {
        gso_size: 1448,
        ..VnetHdr::default()
    };
    assert_eq!(segment_size(&frame, &vnet, 1500), Ok(1448));
    assert_eq!(segment_size(&frame, &vnet, 1400), Ok(1360));
}

#[test]
fn a_checksum_left_to_the_device_is_completed() {
    let data = payload(333);
    let mut frame = super_frame(false, &[], &data, 0x18);
    let lay = layout(&frame).unwrap();
    let seed = fold(pseudo_header(&frame, &lay, frame.len() - lay.l4));
    frame[lay.l4 + 16..lay.l4 + 18].copy_from_slice(&seed.to_be_bytes());
    let vnet = VnetHdr {
        flags: VNET_F_NEEDS_CSUM,
        csum_start: lay.l4 as u16,
        csum_offset: 16,
        ..VnetHdr::default()
    };
    complete_checksum(&mut frame, &vnet).unwrap();
    check(&[frame.clone()], false, 10_000);
    let bad = VnetHdr {
        csum_start: 5000,
        ..vnet
    };
    assert_eq!(
        complete_checksum(&mut frame, &bad),
        Err(GsoError::BadOffsets)
    );
}

proptest! {
    #[test]
    fn any_size_and_split_reassembles(len in 1usize..20_000, mss in 1usize..3000, v6 in any::<bool>(), tagged in any::<bool>()) {
        // Within the cap on segments (tested on its own below).
        let mss = mss.max(len.div_ceil(MAX_SEGMENTS));
        let data = payload(len);
        let tags: &[(u16, u16)] = if tagged { &[(EtherType::QINQ, 1), (EtherType::VLAN, 2)] } else { &[] };
        let frame = super_frame(v6, tags, &data, 0x18);
        let segs = segments_of(&frame, mss);
        prop_assert_eq!(segs.len(), len.div_ceil(mss));
        let seen = check(&segs, v6, mss);
        prop_assert_eq!(seen.data, data);
    }
}

#[test]
fn a_segment_size_that_would_make_too_many_segments_is_refused() {
    let f = super_frame(false, &[], &payload(60_000), 0x10);
    let mut buf = vec![0u8; 70_000];
    let tiny = VnetHdr {
        gso_type: crate::vnet::VNET_GSO_TCPV4,
        gso_size: 1,
        ..VnetHdr::default()
    };
    assert_eq!(
        segment_size(&f, &tiny, 1500),
        Err(GsoError::TooManySegments)
    );
    let mut emitted = 0;
    assert_eq!(
        segment_tcp(&f, 1, &mut buf, |_| emitted += 1),
        Err(GsoError::TooManySegments)
    );
    assert_eq!(emitted, 0, "nothing is cut before the refusal");
    // The smallest segment size that stays within the cap still works.
    let mss = 60_000usize.div_ceil(MAX_SEGMENTS);
    assert_eq!(
        segment_tcp(&f, mss, &mut buf, |_| {}),
        Ok(60_000usize.div_ceil(mss))
    );
}

#[test]
fn a_super_frame_splits_into_smaller_super_frames_of_whole_segments() {
    for v6 in [false, true] {
        let data = payload(60_000);
        let frame = super_frame(v6, &[], &data, 0x18);
        let mut buf = vec![0u8; 65_600];
        let mut parts = Vec::new();
        let n =
            split_super_frame(&frame, 1398, 20_000, &mut buf, |p| parts.push(p.to_vec())).unwrap();
        assert_eq!(n, parts.len());
        assert_eq!(n, 4, "60,000 bytes in parts of 14 segments (19,572 bytes)");
        let mut joined = Vec::new();
        for (i, p) in parts.iter().enumerate() {
            let lay = layout(p).unwrap();
            assert!(p.len() - lay.l3 <= 20_000);
            let body = &p[lay.payload..];
            if i + 1 < n {
                assert_eq!(body.len() % 1398, 0, "whole segments");
            }
            // The checksum field holds the pseudo-header sum, for whoever cuts it.
            let t = tcp::Packet::new_checked(&p[lay.l4..]).unwrap();
            let want = fold(pseudo_header(p, &lay, p.len() - lay.l4));
            assert_eq!(t.checksum(), want);
            joined.extend_from_slice(body);
        }
        assert_eq!(joined, data);
    }
}

/// The layout the segment size was decided with cuts the frame as a fresh parse
/// does, over IPv4 with a tag and over IPv6; one that does not fit the frame is
/// refused, not followed.
#[test]
fn a_cut_with_the_decisions_layout_is_the_same_cut() {
    for (v6, tags) in [(false, &[(0x8100u16, 5u16)][..]), (true, &[][..])] {
        let f = super_frame(v6, tags, &payload(10_000), 0x18);
        let vnet = VnetHdr {
            gso_size: 1448,
            ..VnetHdr::default()
        };
        let (mss, lay) = segment_size_and_layout(&f, &vnet, 1500).unwrap();
        let mut buf = vec![0u8; 70_000];
        let mut laid_out = Vec::new();
        let n =
            segment_tcp_laid_out(&f, &lay, mss, &mut buf, |s| laid_out.push(s.to_vec())).unwrap();
        assert_eq!(n, laid_out.len());
        assert_eq!(laid_out, segments_of(&f, mss));
        assert_eq!(
            segment_tcp_laid_out(&f[..40], &lay, mss, &mut buf, |_| {}),
            Err(GsoError::Malformed)
        );
    }
}
