//! Fuzzing the key extractor on stable Rust: proptest mutates well-formed frames of
//! every protocol (bit flips, overwritten bytes, cuts, insertions), which reaches far
//! deeper into the parser than random bytes do. `cargo test` runs a short pass; a
//! long one: `PROPTEST_CASES=1000000 cargo test --release -p vsw-packet --test fuzz`.

use proptest::prelude::*;
use vsw_packet::builder::samples;
use vsw_packet::{extract, EtherType, FlowKey, VlanTag};

#[derive(Clone, Debug)]
enum Mutation {
    FlipBit(usize, u8),
    SetByte(usize, u8),
    Cut(usize),
    Insert(usize, Vec<u8>),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 0u8..8).prop_map(|(at, bit)| Mutation::FlipBit(at, bit)),
        (any::<usize>(), any::<u8>()).prop_map(|(at, v)| Mutation::SetByte(at, v)),
        any::<usize>().prop_map(Mutation::Cut),
        (
            any::<usize>(),
            proptest::collection::vec(any::<u8>(), 1..16)
        )
            .prop_map(|(at, b)| Mutation::Insert(at, b)),
    ]
}

fn apply(frame: &mut Vec<u8>, m: &Mutation) {
    if frame.is_empty() {
        return;
    }
    let n = frame.len();
    match m {
        Mutation::FlipBit(at, bit) => frame[at % n] ^= 1 << bit,
        Mutation::SetByte(at, v) => frame[at % n] = *v,
        Mutation::Cut(at) => frame.truncate(at % n),
        Mutation::Insert(at, bytes) => {
            let at = at % n;
            frame.splice(at..at, bytes.iter().copied());
        }
    }
}

/// 2,000 cases in a normal test run, or PROPTEST_CASES.
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn mutated_frames_never_crash_the_extractor(
        seed in 0usize..64,
        mutations in proptest::collection::vec(mutation(), 1..6),
        tagged in any::<bool>(),
    ) {
        let all = samples();
        let mut frame = all[seed % all.len()].1.clone();
        for m in &mutations {
            apply(&mut frame, m);
        }
        let tag = tagged.then_some(VlanTag { tpid: EtherType::VLAN, tci: 3 });
        let mut key = FlowKey::default();
        let result = extract(&frame, 9, tag, &mut key);
        prop_assert_eq!(key.in_port, 9);
        if frame.len() < 14 {
            prop_assert!(result.is_err());
        }
    }
}

/// Every view's checked constructor on any bytes (the payload of a mutated frame, and
/// the same bytes at every offset): no accessor of a view it accepts reads past the
/// end, whatever the header claims.
fn read_every_view(b: &[u8]) {
    use vsw_packet::wire::{arp, ethernet, geneve, icmp, ipv4, ipv6, sctp, tcp, udp, vxlan};
    if let Ok(e) = ethernet::Frame::new_checked(b) {
        let _ = (e.dst_addr(), e.src_addr(), e.outer_tci());
        if let Ok(t) = e.tags(ethernet::MAX_TAGS) {
            assert!(t.payload <= b.len());
            let _ = t.tcis();
        }
    }
    let _ = ethernet::l3_len(b);
    if let Ok(p) = ipv4::Packet::new_checked(b) {
        assert!(p.header_len() <= b.len());
        let _ = (p.header(), p.addresses(), p.checksum_right(), p.total_len());
    }
    if let Ok(p) = ipv6::Packet::new_checked(b) {
        if let Ok(up) = p.upper_layer(8) {
            assert!(up.offset <= b.len());
        }
        let _ = (p.src_addr(), p.dst_addr(), p.flow_label(), p.payload_len());
    }
    if let Ok(t) = tcp::Packet::new_checked(b) {
        assert!(t.header().len() >= tcp::MIN_HEADER_LEN);
        let _ = (t.src_port(), t.flags(), t.seq_number());
    }
    if let Ok(u) = udp::Packet::new_checked(b) {
        let _ = (u.src_port(), u.dst_port(), u.len(), u.checksum());
    }
    if let Ok(s) = sctp::Packet::new_checked(b) {
        let _ = (s.src_port(), s.dst_port());
    }
    if let Ok(i) = icmp::Packet::new_checked(b) {
        let _ = (i.nd_target(), i.is_nd());
        for (_, option) in i.nd_options() {
            let _ = icmp::option_lladdr(option);
        }
    }
    if let Ok(a) = arp::Packet::new_checked(b) {
        let _ = (a.operation(), a.ethernet_ipv4());
    }
    if let Ok(v) = vxlan::Packet::new_checked(b) {
        let _ = (v.vni(), v.payload());
    }
    if let Ok(g) = geneve::Packet::new_checked(b) {
        let _ = (g.vni(), g.options(), g.payload(), g.protocol());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn header_views_never_read_past_the_end(
        seed in 0usize..64,
        mutations in proptest::collection::vec(mutation(), 0..8),
    ) {
        let samples = samples();
        let mut frame = samples[seed % samples.len()].1.clone();
        for m in &mutations {
            apply(&mut frame, m);
        }
        for at in 0..frame.len().min(80) {
            read_every_view(&frame[at..]);
        }
    }
}
