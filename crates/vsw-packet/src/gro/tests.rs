use super::*;
use crate::builder::{self, Ipv4, Ipv6, DST_MAC, SRC_MAC};
use crate::gso::segment_tcp;
use proptest::prelude::*;

fn payload(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 13 + 5) as u8).collect()
}

fn super_frame(v6: bool, tags: &[(u16, u16)], data: &[u8], flags: u16) -> Vec<u8> {
    let tcp = builder::tcp(40000, 5201, flags, data);
    let (t, l3) = if v6 {
        (
            EtherType::IPV6,
            builder::ipv6(
                &Ipv6 {
                    next: IPPROTO_TCP,
                    ..Ipv6::default()
                },
                &tcp,
            ),
        )
    } else {
        (
            EtherType::IPV4,
            builder::ipv4(
                &Ipv4 {
                    proto: IPPROTO_TCP,
                    ..Ipv4::default()
                },
                &tcp,
            ),
        )
    };
    builder::ethernet(DST_MAC, SRC_MAC, tags, t, &l3)
}

/// The segments a sender without segmentation offload would send.
fn segments(frame: &[u8], mss: usize) -> Vec<Vec<u8>> {
    let mut buf = vec![0u8; 70_000];
    let mut out = Vec::new();
    segment_tcp(frame, mss, &mut buf, |s| out.push(s.to_vec())).unwrap();
    out
}

fn merge_all(gro: &mut Gro, segs: &[Vec<u8>]) -> (Vec<u8>, VnetHdr, usize) {
    for s in segs {
        assert_eq!(gro.offer(s, &VnetHdr::default()), Offer::Taken);
    }
    let (f, v, n) = gro.take().expect("a merge");
    (f.to_vec(), v, n)
}

#[test]
fn segments_merge_into_the_super_frame_they_came_from() {
    for (v6, tags) in [
        (false, vec![]),
        (true, vec![]),
        (false, vec![(EtherType::VLAN, 9)]),
    ] {
        let data = payload(10_000);
        let original = super_frame(v6, &tags, &data, 0x18);
        let segs = segments(&original, 1448);
        let mut gro = Gro::new();
        let (merged, vnet, n) = merge_all(&mut gro, &segs);
        assert_eq!(n, 7);
        assert_eq!(vnet.gso_size, 1448);
        assert_eq!(vnet.flags, VNET_F_NEEDS_CSUM);
        assert_eq!(
            vnet.gso_type,
            if v6 { VNET_GSO_TCPV6 } else { VNET_GSO_TCPV4 }
        );
        assert_eq!(merged.len(), original.len());
        // Cut again, the merge gives back exactly the segments it was made of.
        assert_eq!(segments(&merged, 1448), segs, "v6={v6} tags={tags:?}");
        assert!(gro.is_empty());
    }
}

#[test]
fn a_single_segment_goes_out_as_it_came() {
    let f = segments(&super_frame(false, &[], &payload(100), 0x10), 1448).remove(0);
    let mut gro = Gro::new();
    assert_eq!(gro.offer(&f, &VnetHdr::default()), Offer::Taken);
    let (out, vnet, n) = gro.take().unwrap();
    assert_eq!((out, vnet, n), (&f[..], VnetHdr::default(), 1));
}

#[test]
fn what_does_not_continue_the_merge_flushes_it() {
    let data = payload(3000);
    let segs = segments(&super_frame(false, &[], &data, 0x10), 1000);
    let mut gro = Gro::new();
    assert_eq!(gro.offer(&segs[0], &VnetHdr::default()), Offer::Taken);
    assert_eq!(
        gro.offer(&segs[2], &VnetHdr::default()),
        Offer::FlushFirst,
        "a gap in the sequence"
    );
    let other = segments(&super_frame(true, &[], &data, 0x10), 1000);
    assert_eq!(gro.offer(&other[1], &VnetHdr::default()), Offer::FlushFirst);
    let syn = segments(&super_frame(false, &[], &payload(10), 0x02), 1448).remove(0);
    assert_eq!(gro.offer(&syn, &VnetHdr::default()), Offer::FlushFirst);
    gro.take();
    assert_eq!(gro.offer(&syn, &VnetHdr::default()), Offer::Refused);
    let udp = builder::udp4_frame([1, 1, 1, 1], [2, 2, 2, 2], 1, 2, 100);
    assert_eq!(gro.offer(&udp, &VnetHdr::default()), Offer::Refused);
    // A short segment ends the merge.
    let short = segments(&super_frame(false, &[], &payload(1500), 0x10), 1000);
    let mut gro = Gro::new();
    for s in &short {
        assert_eq!(gro.offer(s, &VnetHdr::default()), Offer::Taken);
    }
    assert_eq!(gro.offer(&segs[0], &VnetHdr::default()), Offer::FlushFirst);
}

#[test]
fn super_frames_are_not_merged() {
    let f = super_frame(false, &[], &payload(5000), 0x10);
    let gso = VnetHdr {
        gso_type: VNET_GSO_TCPV4,
        gso_size: 1448,
        ..VnetHdr::default()
    };
    assert_eq!(Gro::new().offer(&f, &gso), Offer::Refused);
}

proptest! {
    #[test]
    fn any_split_merges_back(len in 1usize..30_000, mss in 500usize..2000, v6 in any::<bool>()) {
        let original = super_frame(v6, &[], &payload(len), 0x18);
        let segs = segments(&original, mss);
        let mut gro = Gro::new();
        let (merged, vnet, n) = merge_all(&mut gro, &segs);
        prop_assert_eq!(n, segs.len());
        if n > 1 {
            prop_assert_eq!(usize::from(vnet.gso_size), mss);
            prop_assert_eq!(segments(&merged, mss), segs);
        } else {
            prop_assert_eq!(merged, segs[0].clone());
        }
    }
}

/// Flips one bit of the payload (after the headers at `payload_at`), leaving the
/// checksums as they were: a segment damaged on its way.
fn damaged(seg: &[u8], payload_at: usize) -> Vec<u8> {
    let mut d = seg.to_vec();
    d[payload_at + 5] ^= 0x40;
    d
}

#[test]
fn a_segment_with_a_wrong_checksum_is_never_merged() {
    for v6 in [false, true] {
        let segs = segments(&super_frame(v6, &[], &payload(5000), 0x10), 1000);
        let at = if v6 { 14 + 40 + 20 } else { 14 + 20 + 20 };
        let bad = damaged(&segs[2], at);
        let plain = VnetHdr::default();
        let mut gro = Gro::new();
        assert_eq!(gro.offer(&segs[0], &plain), Offer::Taken);
        assert_eq!(gro.offer(&segs[1], &plain), Offer::Taken);
        // Mid-merge: what is held goes first, and then, alone, it is refused.
        assert_eq!(gro.offer(&bad, &plain), Offer::FlushFirst, "v6={v6}");
        let (held, _, n) = gro.take().unwrap();
        assert_eq!(n, 2);
        assert!(!held.windows(16).any(|w| w == &bad[at..at + 16]));
        assert_eq!(gro.offer(&bad, &plain), Offer::Refused, "v6={v6}");
        assert!(gro.is_empty());
        // At the start of a merge too.
        assert_eq!(Gro::new().offer(&bad, &plain), Offer::Refused);
    }
    // A damaged IPv4 header (its checksum no longer fits) is not merged either.
    let segs = segments(&super_frame(false, &[], &payload(3000), 0x10), 1000);
    let mut bad = segs[0].clone();
    bad[14 + 8] ^= 0x01; // the TTL
    assert_eq!(Gro::new().offer(&bad, &VnetHdr::default()), Offer::Refused);
}

#[test]
fn segments_the_kernel_checked_or_left_to_the_device_are_merged_unchecked() {
    let segs = segments(&super_frame(false, &[], &payload(3000), 0x10), 1000);
    // DATA_VALID: the kernel checked them; not looked at again.
    let valid = VnetHdr {
        flags: VNET_F_DATA_VALID,
        ..VnetHdr::default()
    };
    let mut gro = Gro::new();
    for s in &segs {
        assert_eq!(gro.offer(s, &valid), Offer::Taken);
    }
    assert_eq!(gro.take().unwrap().2, 3);
    // NEEDS_CSUM: a local sender's, the checksum field holds only the pseudo-header
    // sum; there is nothing to check yet.
    let partial = VnetHdr {
        flags: VNET_F_NEEDS_CSUM,
        csum_start: 34,
        csum_offset: 16,
        ..VnetHdr::default()
    };
    let mut gro = Gro::new();
    for s in &segs {
        let mut p = s.clone();
        p[50..52].copy_from_slice(&[0x12, 0x34]);
        assert_eq!(gro.offer(&p, &partial), Offer::Taken);
    }
    assert_eq!(gro.take().unwrap().2, 3);
}
