//! Fragment reassembly (`ipf`): datagrams put back together from fragments in any
//! order, fragments refused as Open vSwitch refuses them, each counted; a model
//! (which fragments are taken, when the datagram is whole, what it holds) checked
//! against random splits, overlaps and orders; hostile frames never panic.

use proptest::prelude::*;
use vsw_conntrack::ipf::{Defrag, FragPlace, Ipf, IpfSetError, Reassembled};

const L3: usize = 14;

fn ipv4_sum(h: &[u8]) -> u16 {
    let mut s: u32 = h
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

fn eth(ethertype: u16) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
    f.extend_from_slice(&ethertype.to_be_bytes());
    f
}

/// An IPv4 frame (UDP, 198.18.0.1 → 198.18.0.2, id 77) carrying `payload`
/// at byte `offset` of its datagram, `more` fragments behind it.
fn v4_frame(offset: usize, more: bool, payload: &[u8]) -> Vec<u8> {
    let mut f = eth(0x0800);
    let total = (20 + payload.len()) as u16;
    let off_m = (offset / 8) as u16 | if more { 0x2000 } else { 0 };
    let mut h = vec![0x45, 0];
    h.extend_from_slice(&total.to_be_bytes());
    h.extend_from_slice(&77u16.to_be_bytes());
    h.extend_from_slice(&off_m.to_be_bytes());
    h.extend_from_slice(&[64, 17, 0, 0, 198, 18, 0, 1, 198, 18, 0, 2]);
    let sum = !ipv4_sum(&h);
    h[10..12].copy_from_slice(&sum.to_be_bytes());
    f.extend_from_slice(&h);
    f.extend_from_slice(payload);
    f
}

/// An IPv6 frame (2001:db8::1 → 2001:db8::2, id 0x10203) whose fragment header
/// puts `payload` at byte `offset`, `more` behind it; `frag_header` false: a whole
/// packet with no fragment header.
fn v6_frame(offset: usize, more: bool, payload: &[u8]) -> Vec<u8> {
    let mut f = eth(0x86dd);
    let plen = (8 + payload.len()) as u16;
    f.extend_from_slice(&[0x60, 0, 0, 0]);
    f.extend_from_slice(&plen.to_be_bytes());
    f.extend_from_slice(&[44, 64]);
    let mut a = [0u8; 16];
    a[0..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
    a[15] = 1;
    f.extend_from_slice(&a);
    a[15] = 2;
    f.extend_from_slice(&a);
    let off_m = offset as u16 | u16::from(more);
    f.extend_from_slice(&[17, 0]);
    f.extend_from_slice(&off_m.to_be_bytes());
    f.extend_from_slice(&0x10203u32.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

fn payload(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
}

fn place() -> FragPlace {
    FragPlace {
        zone: 1,
        in_port: 3,
        recirc_id: 0,
    }
}

fn gather(ipf: &Ipf, frame: &[u8], v6: bool, now: u64) -> Defrag {
    ipf.gather(frame, L3, v6, place(), now)
}

fn complete(d: Defrag) -> Box<Reassembled> {
    match d {
        Defrag::Complete(r) => r,
        other => panic!("not complete: {other:?}"),
    }
}

fn held(d: &Defrag) -> bool {
    matches!(d, Defrag::Held)
}

fn status_line(ipf: &Ipf, what: &str) -> u64 {
    ipf.format_status(false)
        .lines()
        .find_map(|l| l.trim().strip_prefix(&format!("{what}: ")))
        .unwrap_or_else(|| panic!("no {what}"))
        .parse()
        .expect("a number")
}

#[test]
fn fragments_in_any_order_make_their_datagram_whole() {
    let p = payload(3000);
    let frags = [
        v4_frame(0, true, &p[..1480]),
        v4_frame(1480, true, &p[1480..2960]),
        v4_frame(2960, false, &p[2960..]),
    ];
    for order in [[0, 1, 2], [2, 1, 0], [1, 2, 0], [2, 0, 1]] {
        let ipf = Ipf::default();
        assert!(held(&gather(&ipf, &frags[order[0]], false, 0)));
        assert!(held(&gather(&ipf, &frags[order[1]], false, 1)));
        assert_eq!(ipf.nfrag(), 2);
        let r = complete(gather(&ipf, &frags[order[2]], false, 2));
        // The whole packet: the first fragment's header, lengths and flags of one.
        assert_eq!(r.datagram, v4_frame(0, false, &p), "order {order:?}");
        assert_eq!(ipv4_sum(&r.datagram[L3..L3 + 20]), 0xffff);
        // The fragments go on in the datagram's order, as they came.
        let got: Vec<&[u8]> = r.fragments.iter().map(|f| &f.frame[..]).collect();
        assert_eq!(got, frags.iter().map(|f| &f[..]).collect::<Vec<_>>());
        assert_eq!(ipf.nfrag(), 0);
        assert_eq!(status_line(&ipf, "v4 frags accepted"), 3);
        assert_eq!(status_line(&ipf, "v4 frags completed"), 3);
    }
}

#[test]
fn ipv6_fragments_make_a_datagram_with_an_atomic_fragment_header() {
    let p = payload(2000);
    let ipf = Ipf::default();
    assert!(held(&gather(
        &ipf,
        &v6_frame(1456, false, &p[1456..]),
        true,
        0
    )));
    let r = complete(gather(&ipf, &v6_frame(0, true, &p[..1456]), true, 0));
    assert_eq!(r.datagram, v6_frame(0, false, &p));
    assert_eq!(status_line(&ipf, "v6 frags completed"), 2);
}

#[test]
fn whole_packets_and_atomic_fragments_are_not_gathered() {
    let ipf = Ipf::default();
    assert!(matches!(
        gather(&ipf, &v4_frame(0, false, &[1, 2, 3]), false, 0),
        Defrag::Whole
    ));
    assert!(matches!(
        gather(&ipf, &v6_frame(0, false, &[1, 2, 3]), true, 0),
        Defrag::Whole
    ));
    assert_eq!(status_line(&ipf, "v4 frags accepted"), 0);
}

#[test]
fn overlapping_fragments_are_refused_and_counted() {
    let p = payload(3000);
    let ipf = Ipf::default();
    assert!(held(&gather(
        &ipf,
        &v4_frame(0, true, &p[..1480]),
        false,
        0
    )));
    // The same again, and one starting inside it.
    assert!(matches!(
        gather(&ipf, &v4_frame(0, true, &p[..1480]), false, 0),
        Defrag::Invalid
    ));
    assert!(matches!(
        gather(&ipf, &v4_frame(1472, true, &p[1472..2952]), false, 0),
        Defrag::Invalid
    ));
    assert_eq!(status_line(&ipf, "v4 frags overlapped"), 2);
    assert_eq!(ipf.nfrag(), 1);
}

#[test]
fn small_fragments_but_the_last_are_refused_and_counted() {
    let p = payload(1000);
    let ipf = Ipf::default();
    assert!(matches!(
        gather(&ipf, &v4_frame(0, true, &p[..600]), false, 0),
        Defrag::Invalid
    ));
    assert!(held(&gather(
        &ipf,
        &v4_frame(600, false, &p[600..]),
        false,
        0
    )));
    assert_eq!(status_line(&ipf, "v4 frags too small"), 1);
    // Lower the bar, and the same fragment is taken.
    ipf.set_min_frag(false, 400).unwrap();
    assert!(matches!(
        gather(&ipf, &v4_frame(0, true, &p[..600]), false, 0),
        Defrag::Complete(_)
    ));
    assert_eq!(
        ipf.set_min_frag(true, 399),
        Err(IpfSetError::MinFragTooSmall)
    );
}

#[test]
fn fragments_no_datagram_could_hold_are_refused() {
    let p = payload(3000);
    let ipf = Ipf::default();
    // Not the last, and ending off a multiple of 8: nothing could follow it.
    assert!(matches!(
        gather(&ipf, &v4_frame(0, true, &p[..1481]), false, 0),
        Defrag::Invalid
    ));
    assert!(held(&gather(
        &ipf,
        &v4_frame(1480, false, &p[1480..2000]),
        false,
        0
    )));
    // Past the last fragment, and a second last one ending elsewhere.
    assert!(matches!(
        gather(&ipf, &v4_frame(2000, true, &p[2000..]), false, 0),
        Defrag::Invalid
    ));
    assert!(matches!(
        gather(&ipf, &v4_frame(2000, false, &p[2000..]), false, 0),
        Defrag::Invalid
    ));
    assert!(matches!(
        gather(&ipf, &v4_frame(0, true, &p[..1480]), false, 0),
        Defrag::Complete(_)
    ));
}

#[test]
fn datagrams_not_whole_in_time_are_dropped_and_counted() {
    let p = payload(3000);
    let ipf = Ipf::default();
    assert!(held(&gather(
        &ipf,
        &v4_frame(0, true, &p[..1480]),
        false,
        1000
    )));
    assert_eq!(ipf.expire(1000 + 14_999), 0);
    assert_eq!(ipf.expire(1000 + 15_000), 1);
    assert_eq!(ipf.nfrag(), 0);
    assert_eq!(status_line(&ipf, "v4 frags expired"), 1);
    // The rest, late: a datagram begun again, not completed by the old part.
    assert!(held(&gather(
        &ipf,
        &v4_frame(1480, false, &p[1480..]),
        false,
        16_001
    )));
}

#[test]
fn no_more_fragments_are_kept_than_the_limit() {
    let p = payload(3000);
    let ipf = Ipf::default();
    ipf.set_max_nfrags(1).unwrap();
    assert!(held(&gather(
        &ipf,
        &v4_frame(0, true, &p[..1480]),
        false,
        0
    )));
    assert!(matches!(
        gather(&ipf, &v4_frame(2960, false, &p[2960..]), false, 0),
        Defrag::Invalid
    ));
    assert_eq!(ipf.set_max_nfrags(5001), Err(IpfSetError::TooManyFrags));
    assert_eq!(ipf.max_nfrags(), 1);
}

#[test]
fn reassembly_off_leaves_fragments_invalid() {
    let p = payload(3000);
    let ipf = Ipf::default();
    ipf.set_enabled(false, false);
    assert!(matches!(
        gather(&ipf, &v4_frame(0, true, &p[..1480]), false, 0),
        Defrag::Invalid
    ));
    assert!(held(&gather(&ipf, &v6_frame(0, true, &p[..1456]), true, 0)));
}

#[test]
fn fragments_of_other_zones_or_ports_are_other_datagrams() {
    let p = payload(3000);
    let ipf = Ipf::default();
    assert!(held(&gather(
        &ipf,
        &v4_frame(0, true, &p[..1480]),
        false,
        0
    )));
    let elsewhere = FragPlace { zone: 2, ..place() };
    assert!(held(&ipf.gather(
        &v4_frame(1480, false, &p[1480..]),
        L3,
        false,
        elsewhere,
        0
    )));
}

#[test]
fn what_nat_wrote_into_the_datagram_goes_into_each_fragment() {
    let p = payload(3000);
    let ipf = Ipf::default();
    gather(&ipf, &v4_frame(0, true, &p[..1480]), false, 0);
    gather(&ipf, &v4_frame(1480, true, &p[1480..2960]), false, 0);
    let mut r = complete(gather(&ipf, &v4_frame(2960, false, &p[2960..]), false, 0));
    // NAT: a new source address and source port (the UDP header's first bytes).
    r.datagram[L3 + 12..L3 + 16].copy_from_slice(&[198, 19, 0, 9]);
    r.datagram[L3 + 20..L3 + 22].copy_from_slice(&[0x99, 0x99]);
    let mut frags = std::mem::take(&mut r.fragments);
    for f in &mut frags {
        r.carry_into(f);
        assert_eq!(&f.frame[L3 + 12..L3 + 16], &[198, 19, 0, 9]);
        assert_eq!(
            ipv4_sum(&f.frame[L3..L3 + 20]),
            0xffff,
            "header checksum kept"
        );
    }
    assert_eq!(&frags[0].frame[L3 + 20..L3 + 22], &[0x99, 0x99]);
    // The later fragments' payload is theirs still.
    assert_eq!(&frags[1].frame[L3 + 20..], &p[1480..2960]);
}

#[test]
fn the_status_reads_as_open_vswitch_s() {
    let ipf = Ipf::default();
    let expected = "        Fragmentation Module Status
        ---------------------------
        v4 enabled: 1
        v6 enabled: 1
        max num frags (v4/v6): 1000
        num frag: 0
        min v4 frag size: 1200
        v4 frags accepted: 0
        v4 frags completed: 0
        v4 frags expired: 0
        v4 frags too small: 0
        v4 frags overlapped: 0
        v4 frags purged: 0
        min v6 frag size: 1280
        v6 frags accepted: 0
        v6 frags completed: 0
        v6 frags expired: 0
        v6 frags too small: 0
        v6 frags overlapped: 0
        v6 frags purged: 0
";
    assert_eq!(ipf.format_status(false), expected);
    let p = payload(3000);
    gather(&ipf, &v4_frame(0, true, &p[..1480]), false, 0);
    assert_eq!(
        ipf.format_status(true),
        format!(
            "{}\n        Fragment Lists:\n\n(src=198.18.0.1,dst=198.18.0.2,recirc_id=0,ip_id=77,dl_type=0x800,zone=1,nw_proto=17,num_fragments=1,state=first frag)\n",
            expected.replace("num frag: 0", "num frag: 1").replace("v4 frags accepted: 0", "v4 frags accepted: 1")
        )
    );
}

/// The model: a fragment is refused when it overlaps one taken, or is not the
/// last and under the smallest size or ending off a multiple of 8; the datagram is whole at the first fragment
/// after which those taken cover it from 0 to a last fragment with no gap.
fn model(
    total: usize,
    frags: &[(usize, usize, bool)],
    (min, header): (usize, usize),
) -> (Vec<bool>, Option<usize>) {
    let mut taken: Vec<(usize, usize, bool)> = Vec::new();
    let mut verdicts = Vec::new();
    for (i, &(start, len, last)) in frags.iter().enumerate() {
        let end = start + len - 1;
        let fits = last || (header + len >= min && (end + 1).is_multiple_of(8));
        let ok = fits && !taken.iter().any(|&(s, e, _)| start <= e && end >= s);
        verdicts.push(ok);
        if ok {
            taken.push((start, end, last));
            let mut t = taken.clone();
            t.sort();
            let whole = t[0].0 == 0
                && t.windows(2).all(|w| w[0].1 + 1 == w[1].0)
                && t.last().is_some_and(|f| f.2 && f.1 + 1 == total);
            if whole {
                return (verdicts, Some(i));
            }
        }
    }
    (verdicts, None)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn gathering_agrees_with_the_model(
        total in 1usize..6000,
        cuts in proptest::collection::vec(1usize..6000, 0..6),
        extra in proptest::collection::vec((0usize..6000, 1usize..3000), 0..3),
        order in proptest::collection::vec(any::<u32>(), 12),
        v6 in any::<bool>(),
    ) {
        // Cut the datagram at multiples of 8; add overlapping pieces; shuffle.
        let mut at: Vec<usize> = cuts.iter().map(|c| (c % total) / 8 * 8).filter(|&c| c > 0).collect();
        at.push(0);
        at.push(total);
        at.sort();
        at.dedup();
        let mut frags: Vec<(usize, usize, bool)> =
            at.windows(2).map(|w| (w[0], w[1] - w[0], w[1] == total)).collect();
        for (s, l) in extra {
            let s = (s % total) / 8 * 8;
            let l = l.min(total - s);
            frags.push((s, l, s + l == total));
        }
        let mut keyed: Vec<(u32, (usize, usize, bool))> =
            frags.iter().enumerate().map(|(i, f)| (order[i % order.len()].wrapping_add(i as u32), *f)).collect();
        keyed.sort_by_key(|k| k.0);
        let frags: Vec<_> = keyed.into_iter().map(|k| k.1).collect();
        // A single whole piece is no fragment: skip it.
        prop_assume!(!frags.iter().any(|&(s, l, _)| s == 0 && l == total));

        let ipf = Ipf::default();
        ipf.set_min_frag(v6, 400).unwrap();
        let header = if v6 { 48 } else { 20 };
        let (verdicts, done) = model(total, &frags, (400, header));
        let p = payload(total);
        for (i, &(s, l, last)) in frags.iter().enumerate() {
            let frame = if v6 { v6_frame(s, !last, &p[s..s + l]) } else { v4_frame(s, !last, &p[s..s + l]) };
            let d = gather(&ipf, &frame, v6, 0);
            if done == Some(i) {
                let r = complete(d);
                let whole = if v6 { v6_frame(0, false, &p) } else { v4_frame(0, false, &p) };
                prop_assert_eq!(&r.datagram, &whole);
                break;
            }
            prop_assert_eq!(matches!(d, Defrag::Held), verdicts[i], "fragment {} {:?} of {:?}", i, (s, l, last), frags);
        }
        if done.is_none() {
            prop_assert_eq!(ipf.nfrag() as usize, verdicts.iter().filter(|v| **v).count());
        } else {
            prop_assert_eq!(ipf.nfrag(), 0);
        }
    }

    #[test]
    fn hostile_frames_never_panic_nor_pass_the_limit(
        frames in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..200), 1..40),
        v6 in any::<bool>(),
    ) {
        let ipf = Ipf::default();
        ipf.set_max_nfrags(8).unwrap();
        for (i, mut f) in frames.into_iter().enumerate() {
            // Half of them look like IP fragments at least in their first bytes.
            if i % 2 == 0 && f.len() > L3 + 8 {
                f[L3] = if v6 { 0x60 } else { 0x45 };
                if v6 { f[L3 + 6] = 44 } else { f[L3 + 6] |= 0x20 }
            }
            let _ = gather(&ipf, &f, v6, i as u64);
            prop_assert!(ipf.nfrag() <= 8);
        }
        let _ = ipf.format_status(true);
    }
}
