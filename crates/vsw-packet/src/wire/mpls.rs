//! MPLS label stack entries (RFC 3032): 32 bits each, after the Ethernet header and
//! its tags, outermost first — label (20 bits), traffic class (3), bottom of stack
//! (1), TTL (8).

/// Bytes of one label stack entry.
pub const LSE_LEN: usize = 4;

/// The bits of each part of an entry, and where they start.
pub const LABEL_MASK: u32 = 0xffff_f000;
pub const LABEL_SHIFT: u32 = 12;
pub const TC_MASK: u32 = 0x0000_0e00;
pub const TC_SHIFT: u32 = 9;
pub const BOS_MASK: u32 = 0x0000_0100;
pub const BOS_SHIFT: u32 = 8;
pub const TTL_MASK: u32 = 0x0000_00ff;

/// Labels RFC 3032 reserves: the explicit nulls a pushed entry starts with.
pub const IPV4_EXPLICIT_NULL: u32 = 0;
pub const IPV6_EXPLICIT_NULL: u32 = 2;

/// The outermost entry of the label stack `l3` starts with, if it holds one.
#[inline]
pub fn top_entry(l3: &[u8]) -> Option<u32> {
    let b = l3.get(..LSE_LEN)?;
    Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

/// An entry of these parts (each cut to its width).
#[inline]
pub fn entry(label: u32, tc: u8, bos: bool, ttl: u8) -> u32 {
    ((label << LABEL_SHIFT) & LABEL_MASK)
        | ((u32::from(tc) << TC_SHIFT) & TC_MASK)
        | (u32::from(bos) << BOS_SHIFT)
        | u32::from(ttl)
}

#[inline]
pub fn label(lse: u32) -> u32 {
    (lse & LABEL_MASK) >> LABEL_SHIFT
}

#[inline]
pub fn tc(lse: u32) -> u8 {
    ((lse & TC_MASK) >> TC_SHIFT) as u8
}

#[inline]
pub fn bos(lse: u32) -> bool {
    lse & BOS_MASK != 0
}

#[inline]
pub fn ttl(lse: u32) -> u8 {
    (lse & TTL_MASK) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_splits_into_the_parts_it_was_made_of() {
        let e = entry(0xabcde, 5, true, 63);
        assert_eq!(e, 0xabcd_eb3f);
        assert_eq!((label(e), tc(e), bos(e), ttl(e)), (0xabcde, 5, true, 63));
        // Parts too wide are cut, not carried into their neighbours.
        assert_eq!(entry(0x1f_ffff, 9, false, 0), entry(0xf_ffff, 1, false, 0));
        assert_eq!(top_entry(&[0xab, 0xcd, 0xeb, 0x3f, 0x45]), Some(e));
        assert_eq!(top_entry(&[0xab, 0xcd, 0xeb]), None);
    }
}
