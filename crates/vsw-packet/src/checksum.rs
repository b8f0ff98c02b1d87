//! The Internet checksum (RFC 1071) in the pieces segmentation, coalescing and the
//! test frames need.

/// One's-complement sum of `data` (as 16-bit big-endian words, an odd byte padded)
/// added to `acc`; neither folded nor complemented.
pub fn sum(data: &[u8], mut acc: u64) -> u64 {
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_be_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        acc += (w >> 48) + ((w >> 32) & 0xffff) + ((w >> 16) & 0xffff) + (w & 0xffff);
    }
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
}
