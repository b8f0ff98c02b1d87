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
