//! `learn(…)` on the wire: Nicira's NXAST_LEARN (subtype 16) and NXAST_LEARN2
//! (subtype 45, which adds `limit` and `result_dst`), as Open vSwitch lays them
//! out — fixed arguments, then specs packed without alignment, each a 16-bit header
//! (bits, where from, where to) and its fields named by NXM headers; the action
//! zero-padded to 8 bytes. Fields stay headers here (`to_vsw` names them).

use crate::nx_error::BadNxAction;
use crate::reader::Reader;

pub const NXAST_LEARN: u16 = 16;
pub const NXAST_LEARN2: u16 = 45;

pub const NX_LEARN_F_SEND_FLOW_REM: u16 = 1;
pub const NX_LEARN_F_DELETE_LEARNED: u16 = 2;
pub const NX_LEARN_F_WRITE_RESULT: u16 = 4;

const SRC_IMMEDIATE: u16 = 0x2000;
const DST_MASK: u16 = 0x1800;
const DST_MATCH: u16 = 0;
const DST_LOAD: u16 = 0x0800;
const DST_OUTPUT: u16 = 0x1000;
const N_BITS_MASK: u16 = 0x3ff;

/// The widest spec vsw takes (its widest field, an xxreg or an IPv6 address).
const MAX_SPEC_BITS: u16 = 128;

/// Where a spec's bits come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LearnSrc {
    Field { header: u32, ofs: u16 },
    Immediate(u128),
}

/// Where they go in the rule learned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LearnDst {
    Match { header: u32, ofs: u16 },
    Load { header: u32, ofs: u16 },
    Output,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LearnSpecWire {
    pub n_bits: u16,
    pub src: LearnSrc,
    pub dst: LearnDst,
}

/// One NXAST_LEARN or NXAST_LEARN2.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LearnAction {
    /// Sent (or to be sent) as NXAST_LEARN2.
    pub learn2: bool,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub priority: u16,
    pub cookie: u64,
    pub flags: u16,
    pub table: u8,
    pub fin_idle_timeout: u16,
    pub fin_hard_timeout: u16,
    pub limit: u32,
    /// The bit written with the result (WRITE_RESULT): header and offset.
    pub result_dst: Option<(u32, u16)>,
    pub specs: Vec<LearnSpecWire>,
}

impl LearnAction {
    pub fn subtype(&self) -> u16 {
        if self.learn2 {
            NXAST_LEARN2
        } else {
            NXAST_LEARN
        }
    }

    /// What follows the subtype (the caller pads to 8 bytes).
    pub(crate) fn encode_body(&self, out: &mut Vec<u8>) {
        let flags = self.flags
            | if self.result_dst.is_some() {
                NX_LEARN_F_WRITE_RESULT
            } else {
                0
            };
        for v in [self.idle_timeout, self.hard_timeout, self.priority] {
            out.extend_from_slice(&v.to_be_bytes());
        }
        out.extend_from_slice(&self.cookie.to_be_bytes());
        out.extend_from_slice(&flags.to_be_bytes());
        out.extend_from_slice(&[self.table, 0]);
        out.extend_from_slice(&self.fin_idle_timeout.to_be_bytes());
        out.extend_from_slice(&self.fin_hard_timeout.to_be_bytes());
        if self.learn2 {
            out.extend_from_slice(&self.limit.to_be_bytes());
            let ofs = self.result_dst.map_or(0, |(_, o)| o);
            out.extend_from_slice(&ofs.to_be_bytes());
            out.extend_from_slice(&[0, 0]);
            if let Some((h, _)) = self.result_dst {
                out.extend_from_slice(&h.to_be_bytes());
            }
        }
        for s in &self.specs {
            let (src_bit, dst_bits) = (
                match s.src {
                    LearnSrc::Field { .. } => 0,
                    LearnSrc::Immediate(_) => SRC_IMMEDIATE,
                },
                match s.dst {
                    LearnDst::Match { .. } => DST_MATCH,
                    LearnDst::Load { .. } => DST_LOAD,
                    LearnDst::Output => DST_OUTPUT,
                },
            );
            out.extend_from_slice(&(s.n_bits | src_bit | dst_bits).to_be_bytes());
            match s.src {
                LearnSrc::Field { header, ofs } => {
                    out.extend_from_slice(&header.to_be_bytes());
                    out.extend_from_slice(&ofs.to_be_bytes());
                }
                LearnSrc::Immediate(v) => {
                    // 16-bit units, big-endian, the value in the low bits.
                    let n = immediate_len(s.n_bits);
                    let bytes = v.to_be_bytes();
                    if n > 16 {
                        out.extend(std::iter::repeat_n(0, n - 16));
                        out.extend_from_slice(&bytes);
                    } else {
                        out.extend_from_slice(&bytes[16 - n..]);
                    }
                }
            }
            if let LearnDst::Match { header, ofs } | LearnDst::Load { header, ofs } = s.dst {
                out.extend_from_slice(&header.to_be_bytes());
                out.extend_from_slice(&ofs.to_be_bytes());
            }
        }
    }

    /// The action of `subtype` ([`NXAST_LEARN`] or [`NXAST_LEARN2`]) from its body
    /// (after the subtype); `len` is the whole action's.
    pub(crate) fn decode(
        subtype: u16,
        body: &[u8],
        len: usize,
    ) -> Result<LearnAction, BadNxAction> {
        if !len.is_multiple_of(8) {
            return Err(BadNxAction::Len);
        }
        let mut b = Reader::new(body);
        let short = BadNxAction::Len;
        let idle_timeout = b.u16().ok_or(short)?;
        let hard_timeout = b.u16().ok_or(short)?;
        let priority = b.u16().ok_or(short)?;
        let cookie = b.u64().ok_or(short)?;
        let flags = b.u16().ok_or(short)?;
        let table = b.u8().ok_or(short)?;
        let pad = b.u8().ok_or(short)?;
        let fin_idle_timeout = b.u16().ok_or(short)?;
        let fin_hard_timeout = b.u16().ok_or(short)?;
        let learn2 = subtype == NXAST_LEARN2;
        let allowed = if learn2 {
            NX_LEARN_F_SEND_FLOW_REM | NX_LEARN_F_DELETE_LEARNED | NX_LEARN_F_WRITE_RESULT
        } else {
            NX_LEARN_F_SEND_FLOW_REM | NX_LEARN_F_DELETE_LEARNED
        };
        if pad != 0 || table == 0xff || flags & !allowed != 0 {
            return Err(BadNxAction::Argument);
        }
        let (mut limit, mut result_dst) = (0, None);
        if learn2 {
            limit = b.u32().ok_or(short)?;
            let ofs = b.u16().ok_or(short)?;
            if b.u16().ok_or(short)? != 0 {
                return Err(BadNxAction::Argument);
            }
            if flags & NX_LEARN_F_WRITE_RESULT != 0 {
                result_dst = Some((b.u32().ok_or(short)?, ofs));
            } else if ofs != 0 {
                return Err(BadNxAction::Argument);
            }
        }
        let mut specs = Vec::new();
        loop {
            let rest = b.rest();
            // Under a header's worth left, or a header of 0: the end; the rest is
            // padding, all zero.
            if rest.len() < 2 || rest[..2] == [0, 0] {
                if rest.iter().any(|x| *x != 0) {
                    return Err(BadNxAction::Argument);
                }
                break;
            }
            b = Reader::new(rest);
            let h = b.u16().ok_or(short)?;
            let n_bits = h & N_BITS_MASK;
            if n_bits == 0 || n_bits > MAX_SPEC_BITS {
                return Err(BadNxAction::Argument);
            }
            let src = if h & SRC_IMMEDIATE != 0 {
                let bytes = b.bytes(immediate_len(n_bits)).ok_or(short)?;
                let keep = usize::from(n_bits).div_ceil(8);
                let v = bytes[bytes.len() - keep..]
                    .iter()
                    .fold(0u128, |v, x| (v << 8) | u128::from(*x));
                LearnSrc::Immediate(v)
            } else {
                let header = b.u32().ok_or(short)?;
                let ofs = b.u16().ok_or(short)?;
                LearnSrc::Field { header, ofs }
            };
            let dst = match h & DST_MASK {
                DST_MATCH | DST_LOAD => {
                    let header = b.u32().ok_or(short)?;
                    let ofs = b.u16().ok_or(short)?;
                    if h & DST_MASK == DST_MATCH {
                        LearnDst::Match { header, ofs }
                    } else {
                        LearnDst::Load { header, ofs }
                    }
                }
                DST_OUTPUT if matches!(src, LearnSrc::Field { .. }) => LearnDst::Output,
                _ => return Err(BadNxAction::Argument),
            };
            specs.push(LearnSpecWire { n_bits, src, dst });
        }
        Ok(LearnAction {
            learn2,
            idle_timeout,
            hard_timeout,
            priority,
            cookie,
            flags: flags & !NX_LEARN_F_WRITE_RESULT,
            table,
            fin_idle_timeout,
            fin_hard_timeout,
            limit,
            result_dst,
            specs,
        })
    }
}

/// An immediate's bytes: whole 16-bit units.
fn immediate_len(n_bits: u16) -> usize {
    usize::from(n_bits).div_ceil(16) * 2
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// Open vSwitch's own encoding (tests/ofp-actions.at) of
    /// `learn(table=2,idle_timeout=10,hard_timeout=20,fin_idle_timeout=2,
    /// fin_hard_timeout=4,priority=80,cookie=0x123456789abcdef0,
    /// NXM_OF_VLAN_TCI[0..11],NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],output:NXM_OF_IN_PORT[])`.
    const OVS_LEARN: &str = "ffff 0048 00002320 0010 000a 0014 0050 123456789abcdef0 0000 02 00 \
                             0002 0004 000c 00000802 0000 00000802 0000 0030 00000406 0000 \
                             00000206 0000 1010 00000002 0000 00000000";

    #[test]
    fn open_vswitchs_learn_comes_back_byte_for_byte() {
        let bytes = hex(OVS_LEARN);
        assert_eq!(bytes.len(), 0x48);
        let subtype = u16::from_be_bytes([bytes[8], bytes[9]]);
        let l = LearnAction::decode(subtype, &bytes[10..], bytes.len()).unwrap();
        assert_eq!((l.table, l.priority, l.idle_timeout), (2, 80, 10));
        assert_eq!(l.specs.len(), 3);
        assert_eq!(
            l.specs[0],
            LearnSpecWire {
                n_bits: 12,
                src: LearnSrc::Field {
                    header: 0x0000_0802,
                    ofs: 0
                },
                dst: LearnDst::Match {
                    header: 0x0000_0802,
                    ofs: 0
                },
            }
        );
        assert_eq!(l.specs[2].dst, LearnDst::Output);
        let mut out = bytes[..10].to_vec();
        l.encode_body(&mut out);
        while !out.len().is_multiple_of(8) {
            out.push(0);
        }
        assert_eq!(out, bytes);
    }

    #[test]
    fn learn2_carries_its_limit_and_result() {
        let l = LearnAction {
            learn2: true,
            idle_timeout: 0,
            hard_timeout: 0,
            priority: 1,
            cookie: 7,
            flags: NX_LEARN_F_DELETE_LEARNED,
            table: 3,
            fin_idle_timeout: 0,
            fin_hard_timeout: 0,
            limit: 10,
            result_dst: Some((0x0001_0004, 8)),
            specs: vec![LearnSpecWire {
                n_bits: 20,
                src: LearnSrc::Immediate(0x10011),
                dst: LearnDst::Load {
                    header: 0x0001_0004,
                    ofs: 3,
                },
            }],
        };
        let mut out = Vec::new();
        l.encode_body(&mut out);
        // 40 bytes of fixed part (30 after the subtype), the result's header, a
        // spec of 2 + 4 (an immediate of 20 bits: two units) + 6 bytes.
        assert_eq!(out.len(), 30 + 4 + 12);
        let len = (10 + out.len()).div_ceil(8) * 8;
        out.resize(len - 10, 0);
        assert_eq!(LearnAction::decode(NXAST_LEARN2, &out, len), Ok(l));
    }

    #[test]
    fn malformed_learns_are_refused() {
        let bytes = hex(OVS_LEARN);
        let body = &bytes[10..];
        let decode = |b: &[u8], len| LearnAction::decode(NXAST_LEARN, b, len);
        assert!(decode(body, bytes.len()).is_ok());
        let mut table_255 = body.to_vec();
        table_255[16] = 0xff;
        assert_eq!(decode(&table_255, bytes.len()), Err(BadNxAction::Argument));
        let mut flag = body.to_vec();
        flag[15] = NX_LEARN_F_WRITE_RESULT as u8;
        assert_eq!(decode(&flag, bytes.len()), Err(BadNxAction::Argument));
        // A spec cut short, and junk after the end.
        assert_eq!(decode(&body[..30], 40), Err(BadNxAction::Len));
        let mut junk = body.to_vec();
        let last = junk.len() - 1;
        junk[last] = 1;
        assert_eq!(decode(&junk, bytes.len()), Err(BadNxAction::Argument));
        assert_eq!(decode(body, bytes.len() - 4), Err(BadNxAction::Len));
    }
}
