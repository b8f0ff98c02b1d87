//! Provider backbone bridging (IEEE 802.1ah, "MAC-in-MAC"): a backbone Ethernet
//! header whose ethertype 0x88e7 is followed by a 4-byte I-TAG, and then the
//! customer's whole frame from its destination address on.
//!
//! The I-TAG's 32 bits: priority (3), drop eligible (1), use customer addresses
//! (1), reserved (3), and the service instance identifier, the I-SID (24).

/// Bytes of the I-TAG after the backbone header's ethertype.
pub const ITAG_LEN: usize = 4;

/// The bits of each part of an I-TAG.
pub const ISID_MASK: u32 = 0x00ff_ffff;
pub const UCA_MASK: u32 = 0x0800_0000;

/// The I-TAG `l3` (what follows ethertype 0x88e7) starts with, if it holds one.
#[inline]
pub fn itag(l3: &[u8]) -> Option<u32> {
    let b = l3.get(..ITAG_LEN)?;
    Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

#[inline]
pub fn isid(itag: u32) -> u32 {
    itag & ISID_MASK
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_itag_gives_its_service_identifier() {
        // Priority 5, UCA set, I-SID 0x123456.
        let t = itag(&[0xa8, 0x12, 0x34, 0x56, 0xff]).unwrap();
        assert_eq!(isid(t), 0x12_3456);
        assert_ne!(t & UCA_MASK, 0);
        assert_eq!(itag(&[0xa8, 0x12, 0x34]), None);
    }
}
