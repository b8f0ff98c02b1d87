//! Nicira's NXT_CT_FLUSH (Open vSwitch 3.1 on): the connection tracker's entries a
//! filter names go — by protocol, by either direction's addresses and ports (or
//! ICMP id, type and code), by mark and labels under masks, in one zone or all.
//! ovn-controller sends one when a load balancer's backend goes.
//!
//! Body: `ip_proto`, 7 zero bytes, then properties (type and length, 16 bits
//! each, padded to 8 bytes): the original and reply tuples (nested properties),
//! the zone, the mark and its mask, the labels and their mask. Addresses are
//! IPv6, IPv4 ones mapped (`::ffff:a.b.c.d`); one message holds one family.

use crate::error::Refusal;

pub const NXT_CT_FLUSH: u32 = 32;

const ORIG_TUPLE: u16 = 0;
const REPLY_TUPLE: u16 = 1;
const ZONE_ID: u16 = 2;
const MARK: u16 = 3;
const MARK_MASK: u16 = 4;
const LABELS: u16 = 5;
const LABELS_MASK: u16 = 6;

const TUPLE_SRC: u16 = 0;
const TUPLE_DST: u16 = 1;
const TUPLE_SRC_PORT: u16 = 2;
const TUPLE_DST_PORT: u16 = 3;
const TUPLE_ICMP_ID: u16 = 4;
const TUPLE_ICMP_TYPE: u16 = 5;
const TUPLE_ICMP_CODE: u16 = 6;

/// One direction's part of the filter; 0 and `None` match anything, except
/// ICMP's id, type and code, which a filter of ICMP always names.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CtTupleFilter {
    /// As on the wire: IPv6, or IPv4 mapped.
    pub src: Option<[u8; 16]>,
    pub dst: Option<[u8; 16]>,
    pub src_port: u16,
    pub dst_port: u16,
    pub icmp_id: u16,
    pub icmp_type: u8,
    pub icmp_code: u8,
}

/// What NXT_CT_FLUSH (and NXT_CT_FLUSH_ZONE, a zone alone) asks to flush.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CtFlush {
    /// `None`: every zone (a filter of a whole original tuple: zone 0, as Open
    /// vSwitch flushes it).
    pub zone: Option<u16>,
    /// 0: any.
    pub ip_proto: u8,
    pub orig: CtTupleFilter,
    pub reply: CtTupleFilter,
    pub mark: u32,
    pub mark_mask: u32,
    pub labels: u128,
    pub labels_mask: u128,
}

/// OFPET_BAD_PROPERTY's codes (what Open vSwitch answers a bad one with).
pub const BAD_PROPERTY_TYPE: u16 = 0;
pub const BAD_PROPERTY_LEN: u16 = 1;
pub const BAD_PROPERTY_VALUE: u16 = 2;

/// Splits `b` into properties: (type, value).
fn properties(mut b: &[u8]) -> Result<Vec<(u16, &[u8])>, Refusal> {
    let mut out = Vec::new();
    while !b.is_empty() {
        if b.len() < 4 {
            return Err(Refusal::BadProperty(BAD_PROPERTY_LEN));
        }
        let kind = u16::from_be_bytes([b[0], b[1]]);
        let len = usize::from(u16::from_be_bytes([b[2], b[3]]));
        let padded = len.div_ceil(8) * 8;
        if len < 4 || padded > b.len() {
            return Err(Refusal::BadProperty(BAD_PROPERTY_LEN));
        }
        out.push((kind, &b[4..len]));
        b = &b[padded..];
    }
    Ok(out)
}

/// A 32- or 128-bit value: exactly its size.
fn exact<const N: usize>(v: &[u8]) -> Result<[u8; N], Refusal> {
    v.try_into()
        .map_err(|_| Refusal::BadProperty(BAD_PROPERTY_LEN))
}

/// A 16-bit value: OpenFlow pads it to 4 bytes, so (as Open vSwitch) any value
/// at least 2 bytes long.
fn be16(v: &[u8]) -> Result<u16, Refusal> {
    match v {
        [a, b, ..] => Ok(u16::from_be_bytes([*a, *b])),
        _ => Err(Refusal::BadProperty(BAD_PROPERTY_LEN)),
    }
}

/// An 8-bit value: its first byte.
fn u8_of(v: &[u8]) -> Result<u8, Refusal> {
    v.first()
        .copied()
        .ok_or(Refusal::BadProperty(BAD_PROPERTY_LEN))
}

/// A nested property's value: its properties start 8 bytes into it (4 past the
/// header's own).
fn nested(v: &[u8]) -> Result<&[u8], Refusal> {
    v.get(4..).ok_or(Refusal::BadProperty(BAD_PROPERTY_LEN))
}

/// An address property: `None` when all zero; its family kept in `family`
/// (`Some(true)`: IPv6), which every address of the message shares.
fn address(v: &[u8], family: &mut Option<bool>) -> Result<Option<[u8; 16]>, Refusal> {
    let a: [u8; 16] = v
        .get(..16)
        .and_then(|a| a.try_into().ok())
        .ok_or(Refusal::BadProperty(BAD_PROPERTY_LEN))?;
    if a == [0; 16] {
        return Ok(None);
    }
    let v6 = !is_v4_mapped(&a);
    match family {
        Some(f) if *f != v6 => return Err(Refusal::BadProperty(BAD_PROPERTY_VALUE)),
        _ => *family = Some(v6),
    }
    Ok(Some(a))
}

/// Whether `a` is an IPv4 address mapped into IPv6.
pub fn is_v4_mapped(a: &[u8; 16]) -> bool {
    a[..10] == [0; 10] && a[10..12] == [0xff, 0xff]
}

fn tuple(v: &[u8], family: &mut Option<bool>) -> Result<CtTupleFilter, Refusal> {
    let mut t = CtTupleFilter::default();
    for (kind, v) in properties(v)? {
        match kind {
            TUPLE_SRC => t.src = address(v, family)?,
            TUPLE_DST => t.dst = address(v, family)?,
            TUPLE_SRC_PORT => t.src_port = be16(v)?,
            TUPLE_DST_PORT => t.dst_port = be16(v)?,
            TUPLE_ICMP_ID => t.icmp_id = be16(v)?,
            TUPLE_ICMP_TYPE => t.icmp_type = u8_of(v)?,
            TUPLE_ICMP_CODE => t.icmp_code = u8_of(v)?,
            _ => return Err(Refusal::BadProperty(BAD_PROPERTY_TYPE)),
        }
    }
    Ok(t)
}

impl CtFlush {
    /// Reads the body behind the subtype.
    pub fn decode_body(b: &[u8]) -> Result<CtFlush, Refusal> {
        let head = b.get(..8).ok_or(Refusal::BadLen)?;
        if head[1..].iter().any(|x| *x != 0) {
            return Err(Refusal::BadArgument);
        }
        let mut f = CtFlush {
            ip_proto: head[0],
            ..CtFlush::default()
        };
        let mut family = None;
        // A mark or labels without its mask: all ones, as Open vSwitch reads it
        // (and writes it: an all-ones mask is left out).
        let (mut mark_masked, mut labels_masked) = (false, false);
        let (mut mark_given, mut labels_given) = (false, false);
        for (kind, v) in properties(&b[8..])? {
            match kind {
                ORIG_TUPLE => f.orig = tuple(nested(v)?, &mut family)?,
                REPLY_TUPLE => f.reply = tuple(nested(v)?, &mut family)?,
                ZONE_ID => f.zone = Some(be16(v)?),
                MARK => (f.mark, mark_given) = (u32::from_be_bytes(exact(v)?), true),
                MARK_MASK => (f.mark_mask, mark_masked) = (u32::from_be_bytes(exact(v)?), true),
                LABELS => (f.labels, labels_given) = (u128::from_be_bytes(exact(v)?), true),
                LABELS_MASK => {
                    (f.labels_mask, labels_masked) = (u128::from_be_bytes(exact(v)?), true)
                }
                _ => return Err(Refusal::BadProperty(BAD_PROPERTY_TYPE)),
            }
        }
        if mark_given && !mark_masked {
            f.mark_mask = u32::MAX;
        }
        if labels_given && !labels_masked {
            f.labels_mask = u128::MAX;
        }
        Ok(f)
    }

    /// Writes the body behind the subtype, as Open vSwitch writes it.
    pub fn encode_body(&self, out: &mut Vec<u8>) {
        out.push(self.ip_proto);
        out.extend_from_slice(&[0; 7]);
        let icmp = matches!(self.ip_proto, 1 | 58);
        for (kind, t) in [(ORIG_TUPLE, &self.orig), (REPLY_TUPLE, &self.reply)] {
            let mut nested = Vec::new();
            if let Some(a) = t.src {
                put(&mut nested, TUPLE_SRC, &a);
            }
            if let Some(a) = t.dst {
                put(&mut nested, TUPLE_DST, &a);
            }
            if icmp {
                put16(&mut nested, TUPLE_ICMP_ID, t.icmp_id);
                put(&mut nested, TUPLE_ICMP_TYPE, &[t.icmp_type]);
                put(&mut nested, TUPLE_ICMP_CODE, &[t.icmp_code]);
            } else {
                if t.src_port != 0 {
                    put16(&mut nested, TUPLE_SRC_PORT, t.src_port);
                }
                if t.dst_port != 0 {
                    put16(&mut nested, TUPLE_DST_PORT, t.dst_port);
                }
            }
            if !nested.is_empty() {
                // A nested property's value starts 8 bytes in (4 of padding).
                let mut v = vec![0; 4];
                v.extend_from_slice(&nested);
                put(out, kind, &v);
            }
        }
        if let Some(z) = self.zone {
            put16(out, ZONE_ID, z);
        }
        if self.mark_mask != 0 {
            put(out, MARK, &self.mark.to_be_bytes());
            if self.mark_mask != u32::MAX {
                put(out, MARK_MASK, &self.mark_mask.to_be_bytes());
            }
        }
        if self.labels_mask != 0 {
            put(out, LABELS, &self.labels.to_be_bytes());
            if self.labels_mask != u128::MAX {
                put(out, LABELS_MASK, &self.labels_mask.to_be_bytes());
            }
        }
    }
}

/// A 16-bit property, its value padded to 4 bytes as OpenFlow's are.
fn put16(out: &mut Vec<u8>, kind: u16, v: u16) {
    let [a, b] = v.to_be_bytes();
    put(out, kind, &[a, b, 0, 0]);
}

/// One property, padded to 8 bytes.
fn put(out: &mut Vec<u8>, kind: u16, v: &[u8]) {
    out.extend_from_slice(&kind.to_be_bytes());
    out.extend_from_slice(&((v.len() + 4) as u16).to_be_bytes());
    out.extend_from_slice(v);
    let pad = (v.len() + 4).div_ceil(8) * 8 - (v.len() + 4);
    out.extend(std::iter::repeat_n(0, pad));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mapped(a: [u8; 4]) -> [u8; 16] {
        let mut m = [0; 16];
        m[10..12].copy_from_slice(&[0xff, 0xff]);
        m[12..].copy_from_slice(&a);
        m
    }

    #[test]
    fn reads_and_writes_open_vswitchs_layout() {
        let want = CtFlush {
            zone: Some(5),
            ip_proto: 17,
            orig: CtTupleFilter {
                src: Some(mapped([198, 18, 0, 1])),
                dst: Some(mapped([198, 18, 0, 2])),
                src_port: 5000,
                dst_port: 53,
                ..CtTupleFilter::default()
            },
            mark: 1,
            mark_mask: 0xf,
            ..CtFlush::default()
        };
        let mut body = Vec::new();
        want.encode_body(&mut body);
        assert_eq!(CtFlush::decode_body(&body), Ok(want));
        assert_eq!(body.len() % 8, 0);
    }

    #[test]
    fn a_mark_or_labels_without_a_mask_are_matched_whole() {
        // ip_proto 0, then NXT_CT_MARK (3) = 5 alone, then NXT_CT_LABELS (5) alone.
        let mut body = vec![0u8; 8];
        put(&mut body, MARK, &5u32.to_be_bytes());
        put(&mut body, LABELS, &7u128.to_be_bytes());
        let f = CtFlush::decode_body(&body).unwrap();
        assert_eq!((f.mark, f.mark_mask), (5, u32::MAX));
        assert_eq!((f.labels, f.labels_mask), (7, u128::MAX));
        // Written back as Open vSwitch writes it: no all-ones mask.
        let mut again = Vec::new();
        f.encode_body(&mut again);
        assert_eq!(again, body);
    }

    #[test]
    fn hostile_bodies_are_refused() {
        let mut body = Vec::new();
        CtFlush {
            ip_proto: 6,
            orig: CtTupleFilter {
                src: Some(mapped([198, 18, 0, 1])),
                ..CtTupleFilter::default()
            },
            reply: CtTupleFilter {
                // The other family.
                src: Some([0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]),
                ..CtTupleFilter::default()
            },
            ..CtFlush::default()
        }
        .encode_body(&mut body);
        assert_eq!(
            CtFlush::decode_body(&body),
            Err(Refusal::BadProperty(BAD_PROPERTY_VALUE))
        );
        assert_eq!(CtFlush::decode_body(&[6, 0, 0]), Err(Refusal::BadLen));
        assert_eq!(
            CtFlush::decode_body(&[6, 0, 0, 0, 0, 0, 0, 1]),
            Err(Refusal::BadArgument),
            "padding not zero"
        );
        // A property longer than the message, one of a type that is none, a
        // mark of 2 bytes.
        let tail = |p: &[u8]| [&[6u8, 0, 0, 0, 0, 0, 0, 0][..], p].concat();
        assert_eq!(
            CtFlush::decode_body(&tail(&[0, 2, 0, 40, 0, 5, 0, 0])),
            Err(Refusal::BadProperty(BAD_PROPERTY_LEN))
        );
        assert_eq!(
            CtFlush::decode_body(&tail(&[0, 9, 0, 8, 0, 5, 0, 0])),
            Err(Refusal::BadProperty(BAD_PROPERTY_TYPE))
        );
        assert_eq!(
            CtFlush::decode_body(&tail(&[0, 3, 0, 6, 0, 5, 0, 0])),
            Err(Refusal::BadProperty(BAD_PROPERTY_LEN))
        );
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_are_read_or_refused(b in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..160)) {
            let _ = CtFlush::decode_body(&b);
        }
    }
}
