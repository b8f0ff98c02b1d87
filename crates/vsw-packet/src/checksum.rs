//! The Internet checksum (RFC 1071) in the pieces segmentation, coalescing and the
//! test frames need.

/// One's-complement sum of `data` (as 16-bit big-endian words, an odd byte padded)
/// added to `acc`; neither folded nor complemented.
///
/// The bulk is summed as native 32-bit words into a 64-bit accumulator (no carries
/// lost for any frame size; the compiler vectorises it) and turned into big-endian
/// order at the end: the one's-complement sum commutes with byte swapping (RFC 1071,
/// 2.B). The per-segment checks of software GRO pay this for every byte they merge.
pub fn sum(data: &[u8], acc: u64) -> u64 {
    let mut chunks = data.chunks_exact(4);
    let mut native = 0u64;
    for c in &mut chunks {
        native += u64::from(u32::from_ne_bytes([c[0], c[1], c[2], c[3]]));
    }
    let folded = fold(native);
    let mut acc = acc
        + u64::from(if cfg!(target_endian = "little") {
            folded.swap_bytes()
        } else {
            folded
        });
    for p in chunks.remainder().chunks(2) {
        acc += u64::from(u16::from_be_bytes([p[0], *p.get(1).unwrap_or(&0)]));
    }
    acc
}

/// A sum folded into 16 bits (not complemented).
pub fn fold(mut acc: u64) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// The checksum of `data`: the complement of its folded sum.
pub fn checksum(data: &[u8]) -> u16 {
    !fold(sum(data, 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example_and_odd_lengths() {
        // RFC 1071 section 3: 0001 f203 f4f5 f6f7 sums to ddf2.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(sum(&data, 0)), 0xddf2);
        assert_eq!(checksum(&data), !0xddf2);
        assert_eq!(fold(sum(&[0x12], 0)), 0x1200);
        // Eight-byte chunks and the tail agree with plain pairs.
        let long: Vec<u8> = (0..=250u8).collect();
        let pairs: u64 = long
            .chunks(2)
            .map(|p| u64::from(u16::from_be_bytes([p[0], *p.get(1).unwrap_or(&0)])))
            .sum();
        assert_eq!(fold(sum(&long, 0)), fold(pairs));
    }

    /// The plain RFC 1071 loop over big-endian pairs.
    fn pairs(data: &[u8], acc: u64) -> u64 {
        acc + data
            .chunks(2)
            .map(|p| u64::from(u16::from_be_bytes([p[0], *p.get(1).unwrap_or(&0)])))
            .sum::<u64>()
    }

    proptest::proptest! {
        #[test]
        fn the_word_sum_agrees_with_plain_pairs(
            data in proptest::collection::vec(proptest::num::u8::ANY, 0..3000),
            acc in 0u64..1 << 40,
        ) {
            proptest::prop_assert_eq!(fold(sum(&data, acc)), fold(pairs(&data, acc)));
        }
    }
}
