//! NSH rewrites (RFC 8300): a new Ethernet header and NSH header put in front of
//! the whole frame (Open vSwitch's `encap(nsh)` then `encap(ethernet)`), both taken
//! off again (`decap()` twice), and the header's fields written in place.

use super::{PacketBuf, RewriteError};
use crate::wire::ethernet::EtherType;
#[cfg(test)]
use crate::wire::ethernet::ETH_HDR_LEN;
use crate::wire::nsh::{self, Nsh, NshBase, MD1_LEN, MD_TYPE1};

/// Which field of an NSH header a write sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NshField {
    /// The O and U bits.
    Flags,
    Ttl,
    /// The service path identifier (24 bits).
    Spi,
    /// The service index.
    Si,
    /// MD type 1 context word C1–C4 (0–3).
    Context(u8),
    /// Word N of another MD type's context (its TLVs, as a push writes them).
    Md2Word(u8),
}

impl PacketBuf {
    /// Puts an Ethernet header (addresses 0, ethertype NSH) and the NSH header
    /// `h` (an MD type 1 header with `h`'s context, or an MD type 2 header with no
    /// TLVs) in front of the frame, which becomes what the NSH header carries.
    pub fn push_nsh_ethernet(&mut self, h: &Nsh) -> Result<(), RewriteError> {
        let mut header = [0u8; MD1_LEN];
        let len = if h.md_type == MD_TYPE1 {
            MD1_LEN
        } else {
            nsh::BASE_LEN
        };
        header[..nsh::BASE_LEN].copy_from_slice(&h.base_bytes(len));
        if len == MD1_LEN {
            for (i, c) in h.context.iter().enumerate() {
                header[nsh::field::context(i)].copy_from_slice(&c.to_be_bytes());
            }
        }
        self.push_outer(EtherType::NSH, &header[..len])
    }

    /// Puts an Ethernet header and the NSH header of `b` with a zero context in
    /// front of the frame: MD type 1's 16 bytes, or `b.context_len` bytes for
    /// another MD type (its TLVs follow as [`NshField::Md2Word`] writes).
    pub fn push_nsh_base(&mut self, b: &NshBase) -> Result<(), RewriteError> {
        if b.md_type == MD_TYPE1 {
            return self.push_nsh_ethernet(&b.with_context([0; 4]));
        }
        let ctx = usize::from(b.context_len).min(nsh::MAX_CONTEXT) & !3;
        let mut header = [0u8; nsh::MAX_LEN];
        let len = nsh::BASE_LEN + ctx;
        header[..nsh::BASE_LEN].copy_from_slice(&b.with_context([0; 4]).base_bytes(len));
        self.push_outer(EtherType::NSH, &header[..len])
    }

    /// Takes off the Ethernet header (with its tags) and the NSH header behind it,
    /// leaving the frame the NSH header carries. A frame that is not NSH vsw
    /// switches by, or carries less than an Ethernet header, is refused unchanged.
    pub fn pop_nsh_ethernet(&mut self) -> Result<(), RewriteError> {
        let Some((EtherType::NSH, off)) = self.l3() else {
            return Err(RewriteError::NotDecapsulable);
        };
        let (_, len) = Nsh::parse(&self.data()[off..]).ok_or(RewriteError::NotDecapsulable)?;
        self.pop_outer(off + len)
    }

    /// Writes `value` into the NSH header's `field` (no checksum covers it).
    /// Nothing on a frame that is not NSH, or a context word of an MD type 2
    /// header.
    pub fn set_nsh(&mut self, field: NshField, value: u32) {
        let Some((EtherType::NSH, off)) = self.l3() else {
            return;
        };
        let Some((h, len)) = Nsh::parse(&self.data()[off..]) else {
            return;
        };
        let d = self.data_mut();
        match field {
            NshField::Flags => d[off] = (d[off] & !0x30) | ((value as u8 & 0x3) << 4),
            NshField::Ttl => {
                let ttl = value as u8 & 0x3f;
                d[off] = (d[off] & !0x0f) | (ttl >> 2);
                d[off + 1] = (d[off + 1] & 0x3f) | (ttl << 6);
            }
            NshField::Spi => {
                let path = (value << 8) | u32::from(h.si());
                d[off + 4..off + 8].copy_from_slice(&path.to_be_bytes());
            }
            NshField::Si => d[off + nsh::field::SI] = value as u8,
            NshField::Context(i) if h.md_type == MD_TYPE1 && i < 4 => {
                let at = off + nsh::field::context(usize::from(i)).start;
                d[at..at + 4].copy_from_slice(&value.to_be_bytes());
            }
            NshField::Context(_) => {}
            NshField::Md2Word(i) if h.md_type != MD_TYPE1 => {
                let at = off + nsh::field::context(usize::from(i)).start;
                if let Some(w) = d.get_mut(at..(at + 4).min(off + len)) {
                    if w.len() == 4 {
                        w.copy_from_slice(&value.to_be_bytes());
                    }
                }
            }
            NshField::Md2Word(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::nsh::NP_ETHERNET;

    fn loaded(frame: &[u8]) -> PacketBuf {
        let mut b = PacketBuf::new(2048);
        b.load(frame, None, Default::default()).unwrap();
        b
    }

    fn inner() -> Vec<u8> {
        let mut f = vec![0u8; 14 + 46];
        f[..6].copy_from_slice(&[0x22; 6]);
        f[6..12].copy_from_slice(&[0x12; 6]);
        f[12..14].copy_from_slice(&EtherType::IPV4.to_be_bytes());
        f[14] = 0x45;
        f
    }

    fn md1() -> Nsh {
        Nsh {
            flags: 0,
            ttl: 63,
            md_type: MD_TYPE1,
            next_proto: NP_ETHERNET,
            path: 0x0001_23ff,
            context: [0, 0xabc, 0, 0],
        }
    }

    #[test]
    fn a_push_covers_the_frame_and_a_pop_gives_it_back() {
        let f = inner();
        let mut b = loaded(&f);
        b.push_nsh_ethernet(&md1()).unwrap();
        let d = b.data().to_vec();
        assert_eq!(d.len(), f.len() + ETH_HDR_LEN + MD1_LEN);
        assert_eq!(&d[..12], &[0; 12]);
        assert!(crate::rewrite::is_encapsulated(&d));
        assert_eq!(Nsh::parse(&d[14..]).unwrap(), (md1(), MD1_LEN));
        assert_eq!(&d[14 + MD1_LEN..], &f[..]);
        b.pop_nsh_ethernet().unwrap();
        assert_eq!(b.data(), &f[..]);
        // Not NSH: refused, left alone.
        assert_eq!(b.pop_nsh_ethernet(), Err(RewriteError::NotDecapsulable));
        assert_eq!(b.data(), &f[..]);
        // MD type 2 (no TLVs): 8 bytes of header.
        let mut b = loaded(&f);
        let md2 = Nsh {
            md_type: 2,
            context: [0; 4],
            ..md1()
        };
        b.push_nsh_ethernet(&md2).unwrap();
        assert_eq!(Nsh::parse(&b.data()[14..]).unwrap(), (md2, 8));
        b.pop_nsh_ethernet().unwrap();
        assert_eq!(b.data(), &f[..]);
    }

    #[test]
    fn an_md2_push_reserves_its_context_for_word_writes() {
        let f = inner();
        let mut b = loaded(&f);
        let base = NshBase {
            md_type: 2,
            context_len: 8,
            ..md1().base()
        };
        b.push_nsh_base(&base).unwrap();
        b.set_nsh(NshField::Md2Word(0), 0x1000_0a04);
        b.set_nsh(NshField::Md2Word(1), 0x1234_5678);
        // Past the context: nothing. A context word of MD type 1's: not MD 2's.
        b.set_nsh(NshField::Md2Word(2), 0xffff_ffff);
        b.set_nsh(NshField::Context(0), 0xffff_ffff);
        let d = b.data();
        let (h, len) = Nsh::parse(&d[14..]).unwrap();
        assert_eq!((h.md_type, len), (2, 16));
        assert_eq!(&d[22..30], &[0x10, 0, 0x0a, 0x04, 0x12, 0x34, 0x56, 0x78]);
        assert_eq!(&d[30..], &f[..]);
    }

    #[test]
    fn writes_set_one_field_each() {
        let mut b = loaded(&inner());
        b.push_nsh_ethernet(&md1()).unwrap();
        b.set_nsh(NshField::Si, 254);
        b.set_nsh(NshField::Spi, 0x456);
        b.set_nsh(NshField::Ttl, 7);
        b.set_nsh(NshField::Flags, 3);
        b.set_nsh(NshField::Context(3), 0xdead_beef);
        let (h, _) = Nsh::parse(&b.data()[14..]).unwrap();
        assert_eq!(
            h,
            Nsh {
                flags: 3,
                ttl: 7,
                path: 0x0004_56fe,
                context: [0, 0xabc, 0, 0xdead_beef],
                ..md1()
            }
        );
        // Not NSH: nothing written.
        let f = inner();
        let mut b = loaded(&f);
        b.set_nsh(NshField::Si, 1);
        assert_eq!(b.data(), &f[..]);
    }
}
