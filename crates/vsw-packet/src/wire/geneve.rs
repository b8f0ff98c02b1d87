//! The Geneve header (RFC 8926), carried in UDP to port 6081.

use super::{check_len, get_u16, get_u32, set_u16, set_u32, Field, Truncated};

pub mod field {
    use super::Field;
    /// Version (upper 2 bits) and the options' length in 4-byte units.
    pub const VER_OPT_LEN: usize = 0;
    /// O (control packet) and C (critical options) flags.
    pub const FLAGS: usize = 1;
    pub const PROTOCOL: Field = 2..4;
    /// The VNI in the upper 24 bits, reserved below.
    pub const VNI: Field = 4..8;
    pub const OPTIONS: usize = 8;
    /// An option's fields, from where the option starts: its class, its type (the
    /// top bit: critical), and its data's length in 4-byte units (low 5 bits).
    pub const OPT_CLASS: Field = 0..2;
    pub const OPT_TYPE: usize = 2;
    pub const OPT_LEN: usize = 3;
    pub const OPT_HEADER_LEN: usize = 4;
}

pub const MIN_HEADER_LEN: usize = 8;
pub const UDP_PORT: u16 = 6081;

const FLAG_CONTROL: u8 = 0x80;
const FLAG_CRITICAL: u8 = 0x40;

/// A Geneve header, checked: version 0, its options all there.
#[derive(Clone, Copy, Debug)]
pub struct Packet<T> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub fn new_checked(buffer: T) -> Result<Packet<T>, Truncated> {
        check_len(&buffer, MIN_HEADER_LEN)?;
        let p = Packet { buffer };
        if p.buffer.as_ref()[field::VER_OPT_LEN] >> 6 != 0 {
            return Err(Truncated);
        }
        check_len(&p.buffer, p.header_len())?;
        Ok(p)
    }

    /// The header's length, options included.
    pub fn header_len(&self) -> usize {
        MIN_HEADER_LEN + usize::from(self.buffer.as_ref()[field::VER_OPT_LEN] & 0x3f) * 4
    }

    pub fn is_control(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & FLAG_CONTROL != 0
    }

    pub fn has_critical_options(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & FLAG_CRITICAL != 0
    }

    /// The payload's ethertype (0x6558 for an Ethernet frame).
    pub fn protocol(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::PROTOCOL)
    }

    pub fn vni(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::VNI) >> 8
    }

    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[field::OPTIONS..self.header_len()]
    }

    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

/// An option's type bit that says a receiver that does not know the option must drop
/// the packet.
pub const OPT_TYPE_CRITICAL: u8 = 0x80;
/// The most option bytes a header holds (its length field counts 6 bits of words).
pub const MAX_OPTIONS_LEN: usize = 63 * 4;

/// One Geneve option (TLV).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GeneveOption<'a> {
    pub class: u16,
    pub kind: u8,
    pub data: &'a [u8],
}

impl GeneveOption<'_> {
    pub fn is_critical(&self) -> bool {
        self.kind & OPT_TYPE_CRITICAL != 0
    }
}

/// Walks the options of a header's option bytes; an option whose length runs past
/// them is [`Truncated`].
pub fn options(mut bytes: &[u8]) -> impl Iterator<Item = Result<GeneveOption<'_>, Truncated>> {
    core::iter::from_fn(move || {
        if bytes.is_empty() {
            return None;
        }
        let Some(head) = bytes.get(..field::OPT_HEADER_LEN) else {
            bytes = &[];
            return Some(Err(Truncated));
        };
        let len = field::OPT_HEADER_LEN + usize::from(head[field::OPT_LEN] & 0x1f) * 4;
        let Some(whole) = bytes.get(..len) else {
            bytes = &[];
            return Some(Err(Truncated));
        };
        let opt = GeneveOption {
            class: get_u16(head, field::OPT_CLASS),
            kind: head[field::OPT_TYPE],
            data: &whole[field::OPT_HEADER_LEN..],
        };
        bytes = &bytes[len..];
        Some(Ok(opt))
    })
}

/// Writes option TLVs (each's data a multiple of 4 bytes, at most 124) into `b`;
/// their length.
pub fn emit_option(b: &mut [u8], class: u16, kind: u8, data: &[u8]) -> usize {
    let len = field::OPT_HEADER_LEN + data.len();
    set_u16(b, field::OPT_CLASS, class);
    b[field::OPT_TYPE] = kind;
    b[field::OPT_LEN] = (data.len() / 4) as u8 & 0x1f;
    b[field::OPT_HEADER_LEN..len].copy_from_slice(data);
    len
}

/// Writes a header without options at the start of `b`.
pub fn emit(b: &mut [u8], protocol: u16, vni: u32) {
    emit_with_options(b, protocol, vni, &[]);
}

/// Writes a header with these option bytes (whole TLVs, a multiple of 4 bytes, at
/// most [`MAX_OPTIONS_LEN`]) at the start of `b`; the C flag is set when one of them
/// is critical.
pub fn emit_with_options(b: &mut [u8], protocol: u16, vni: u32, opts: &[u8]) {
    b[field::VER_OPT_LEN] = (opts.len() / 4) as u8 & 0x3f;
    let critical = options(opts).any(|o| o.is_ok_and(|o| o.is_critical()));
    b[field::FLAGS] = if critical { FLAG_CRITICAL } else { 0 };
    set_u16(b, field::PROTOCOL, protocol);
    set_u32(b, field::VNI, (vni & 0x00ff_ffff) << 8);
    b[field::OPTIONS..field::OPTIONS + opts.len()].copy_from_slice(opts);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::ethernet::EtherType;

    #[test]
    fn options_are_checked_and_skipped() {
        let mut b = [0u8; 20];
        emit(&mut b, EtherType::TEB, 77);
        b[field::VER_OPT_LEN] = 2; // 8 bytes of options
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(
            (p.vni(), p.protocol(), p.header_len()),
            (77, EtherType::TEB, 16)
        );
        assert_eq!(p.options().len(), 8);
        assert_eq!(p.payload().len(), 4);
        assert!(Packet::new_checked(&b[..15]).is_err(), "options cut off");
        b[field::VER_OPT_LEN] = 0x40;
        assert!(Packet::new_checked(&b[..]).is_err(), "version 1");
    }

    #[test]
    fn option_tlvs_are_written_and_walked() {
        let mut opts = [0u8; 16];
        let n = emit_option(&mut opts, 0x0102, 0x80 | 3, &[1, 2, 3, 4]);
        let m = emit_option(&mut opts[n..], 0xffff, 7, &[9, 9, 9, 9]);
        assert_eq!(n + m, 16);
        let mut b = [0u8; 8 + 16 + 14];
        emit_with_options(&mut b, EtherType::TEB, 5, &opts);
        let p = Packet::new_checked(&b[..]).unwrap();
        assert!(p.has_critical_options());
        let all: Vec<_> = options(p.options()).collect::<Result<_, _>>().unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(
            (all[0].class, all[0].kind, all[0].data),
            (0x0102, 0x83, &[1, 2, 3, 4][..])
        );
        assert!(all[0].is_critical() && !all[1].is_critical());
        // An option longer than the bytes left.
        let mut bad = opts;
        bad[3] = 5;
        assert_eq!(options(&bad).next(), Some(Err(Truncated)));
        assert_eq!(options(&[1, 2]).next(), Some(Err(Truncated)));
    }
}
