//! Nicira's extension actions (experimenter actions of vendor 0x2320) that vsw's
//! datapath already does, as Open vSwitch encodes them: `resubmit` (NXAST_RESUBMIT,
//! NXAST_RESUBMIT_TABLE), `note` (NXAST_NOTE: kept and echoed, does nothing),
//! `dec_ttl` (NXAST_DEC_TTL), `controller(…)` (NXAST_CONTROLLER), `load` and `move`
//! (NXAST_REG_LOAD, NXAST_REG_LOAD2, NXAST_REG_MOVE: fields named by their NXM
//! headers). Their ports are OpenFlow 1.0's 16-bit numbers.

use crate::frame::put_property;
use crate::oxm::OxmField;
use crate::reader::Reader;

pub use crate::nx_error::BadNxAction;

pub const NXAST_RESUBMIT: u16 = 1;
pub const NXAST_NOTE: u16 = 8;
pub const NXAST_RESUBMIT_TABLE: u16 = 14;
pub const NXAST_DEC_TTL: u16 = 18;
pub const NXAST_DEC_TTL_CNT_IDS: u16 = 21;
pub const NXAST_CHECK_PKT_LARGER: u16 = 49;
pub const NXAST_CONTROLLER: u16 = 20;
pub const NXAST_REG_MOVE: u16 = 6;
pub const NXAST_REG_LOAD: u16 = 7;
pub const NXAST_REG_LOAD2: u16 = 33;
pub const NXAST_STACK_PUSH: u16 = 27;
pub const NXAST_STACK_POP: u16 = 28;
pub const NXAST_CONJUNCTION: u16 = 34;
pub const NXAST_CONTROLLER2: u16 = 37;
pub const NXAST_POP_QUEUE: u16 = 5;
pub const NXAST_MULTIPATH: u16 = 10;
pub const NXAST_SAMPLE: u16 = 29;
pub const NXAST_SAMPLE2: u16 = 38;
pub const NXAST_SAMPLE3: u16 = 41;
pub const NXAST_BUNDLE: u16 = 12;
pub const NXAST_BUNDLE_LOAD: u16 = 13;
/// A bundle's member type: OpenFlow ports (NXM_OF_IN_PORT's header).
pub const NX_BUNDLE_OFPORT: u32 = 0x0000_0002;
pub const NXAST_OUTPUT_REG: u16 = 15;
pub const NXAST_EXIT: u16 = 17;
pub const NXAST_FIN_TIMEOUT: u16 = 19;
pub const NXAST_OUTPUT_TRUNC: u16 = 39;
pub const NXAST_OUTPUT_REG2: u16 = 32;
/// Nicira's MPLS actions (what OpenFlow 1.1 on has as its own).
pub const NXAST_PUSH_MPLS: u16 = 23;
pub const NXAST_POP_MPLS: u16 = 24;
pub const NXAST_SET_MPLS_TTL: u16 = 25;
pub const NXAST_DEC_MPLS_TTL: u16 = 26;
pub const NXAST_SET_MPLS_LABEL: u16 = 30;
pub const NXAST_SET_MPLS_TC: u16 = 31;
/// Open vSwitch's generic encapsulation: `encap(…)`, `decap(…)`, `dec_nsh_ttl`.
pub const NXAST_ENCAP: u16 = 46;
pub const NXAST_DECAP: u16 = 47;
pub const NXAST_DEC_NSH_TTL: u16 = 48;
/// Packet types (namespace << 16 | type): Ethernet, NSH, and `decap()`'s "what
/// the header's next protocol says".
pub const PT_ETH: u32 = 0;
pub const PT_NSH: u32 = 0x0001_894f;
pub const PT_MPLS: u32 = 0x0001_8847;
pub const PT_MPLS_MC: u32 = 0x0001_8848;
pub const PT_USE_NEXT_PROTO: u32 = 0x0000_fffe;
/// An encap property: class NSH (OFPPPC_NSH), types MD type and TLV.
const OFPPPC_NSH: u16 = 4;
const OFPPPT_PROP_NSH_MDTYPE: u8 = 1;
const OFPPPT_PROP_NSH_TLV: u8 = 2;

/// NXAST_CONTROLLER2's properties.
const NXAC2PT_MAX_LEN: u16 = 0;
const NXAC2PT_CONTROLLER_ID: u16 = 1;
const NXAC2PT_REASON: u16 = 2;
const NXAC2PT_USERDATA: u16 = 3;
const NXAC2PT_PAUSE: u16 = 4;
const NXAC2PT_METER_ID: u16 = 5;

/// `n_bits` bits copied from `src` at `src_ofs` to `dst` at `dst_ofs`, fields named
/// by NXM/OXM headers of 4 bytes (an experimenter OXM's 8 are not taken): Nicira's
/// NXAST_REG_MOVE and OpenFlow 1.5's copy-field say the same, the latter with two
/// bytes of padding after the offsets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldCopy {
    pub n_bits: u16,
    pub src_ofs: u16,
    pub dst_ofs: u16,
    pub src: u32,
    pub dst: u32,
}

impl FieldCopy {
    pub(crate) fn encode(&self, padded: bool, out: &mut Vec<u8>) {
        for n in [self.n_bits, self.src_ofs, self.dst_ofs] {
            out.extend_from_slice(&n.to_be_bytes());
        }
        if padded {
            out.extend_from_slice(&[0, 0]);
        }
        out.extend_from_slice(&self.src.to_be_bytes());
        out.extend_from_slice(&self.dst.to_be_bytes());
    }

    /// The copy at the front of `b`; `None` when it is short or a pad is not zero.
    pub(crate) fn decode(b: &mut Reader, padded: bool) -> Option<FieldCopy> {
        let n_bits = b.u16()?;
        let src_ofs = b.u16()?;
        let dst_ofs = b.u16()?;
        if padded && b.bytes(2)? != [0, 0] {
            return None;
        }
        let src = b.u32()?;
        let dst = b.u32()?;
        Some(FieldCopy {
            n_bits,
            src_ofs,
            dst_ofs,
            src,
            dst,
        })
    }
}

/// An NXM header's parts: class, field number, whether a mask follows, and the
/// length (of value and mask).
pub fn nxm_header_parts(h: u32) -> (u16, u8, bool, u8) {
    (
        (h >> 16) as u16,
        ((h >> 9) & 0x7f) as u8,
        h & 0x100 != 0,
        h as u8,
    )
}

/// A set-field as Open vSwitch writes it as Nicira's (a masked one before 1.5, any
/// 1.0 has no action for): NXAST_REG_LOAD when its mask is one run of bits within
/// the field's own width (MPLS label 20 bits, ECN 2, …) in a fixed-length field of
/// up to 64 bits, else NXAST_REG_LOAD2. `vlan_vid` (whose present bit is no bit of
/// the VID) and an experimenter's field always go as REG_LOAD2.
pub fn masked_set_field_as_load(f: &OxmField) -> NxAction {
    let num = |b: &[u8]| b.iter().fold(0u128, |n, x| (n << 8) | u128::from(*x));
    let len = f.value.len();
    let width = crate::oxm::value_bits(f.field).unwrap_or(8 * len as u32);
    let whole = vsw_flow::subfield::ones(width);
    let (value, mask) = (num(&f.value), f.mask.as_deref().map_or(whole, num));
    let fixed = crate::oxm::field_def(f.field).is_some_and(|d| !d.var_len);
    let vlan_vid = f.field == 6;
    // An experimenter's field (NSH's) has no 32-bit NXM header: REG_LOAD2's OXM
    // carries its experimenter ID, as Open vSwitch writes it.
    let experimenter = crate::oxm::experimenter_of(f.field).is_some();
    if fixed && !vlan_vid && !experimenter && len <= 8 && mask != 0 && mask & !whole == 0 {
        let ofs = mask.trailing_zeros();
        let n_bits = 128 - mask.leading_zeros() - ofs;
        if n_bits <= 64 && mask == vsw_flow::subfield::ones(n_bits) << ofs {
            let (class, number) = crate::oxm::wire_id(f.field);
            return NxAction::RegLoad {
                ofs_nbits: ((ofs as u16) << 6) | (n_bits as u16 - 1),
                dst: nxm_header(class, number, len as u8),
                value: (value >> ofs) as u64,
            };
        }
    }
    NxAction::RegLoad2(f.clone())
}

/// The NXM header of an unmasked field of `len` bytes.
pub fn nxm_header(class: u16, number: u8, len: u8) -> u32 {
    (u32::from(class) << 16) | (u32::from(number) << 9) | u32::from(len)
}

/// OpenFlow 1.0's IN_PORT (a resubmit to "the port it came in on").
pub const OFPP10_IN_PORT: u16 = 0xfff8;
/// A resubmit's table that means "this rule's table".
pub const NX_TABLE_CURRENT: u8 = 0xff;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NxAction {
    /// `resubmit:PORT` (NXAST_RESUBMIT: the current table).
    Resubmit {
        in_port: u16,
    },
    /// `resubmit(PORT,TABLE)` (NXAST_RESUBMIT_TABLE): [`OFPP10_IN_PORT`] and
    /// [`NX_TABLE_CURRENT`] leave either as it is.
    ResubmitTable {
        in_port: u16,
        table: u8,
    },
    /// Bytes for the controller's own use: kept with the flow, changes nothing.
    Note(Vec<u8>),
    DecTtl,
    /// `dec_ttl(ID,…)` (NXAST_DEC_TTL_CNT_IDS): the controllers' ids.
    DecTtlIds(Vec<u16>),
    /// `check_pkt_larger(LEN)->DST[OFS]` (NXAST_CHECK_PKT_LARGER): the one bit at
    /// `offset` of NXM field `dst`.
    CheckPktLarger {
        pkt_len: u16,
        offset: u16,
        dst: u32,
    },
    /// A packet-in of at most `max_len` bytes, to controller `controller_id`, with
    /// this reason.
    Controller {
        max_len: u16,
        controller_id: u16,
        reason: u8,
    },
    /// `load:V->DST[ofs..]`: `ofs_nbits` is `(ofs << 6) | (n_bits - 1)`, `dst` an
    /// NXM header.
    RegLoad {
        ofs_nbits: u16,
        dst: u32,
        value: u64,
    },
    /// A field's value under a mask, as an OXM/NXM entry (what a set-field holds).
    RegLoad2(OxmField),
    /// `move:SRC[src_ofs..]->DST[dst_ofs..]` (NXAST_REG_MOVE).
    RegMove(FieldCopy),
    /// `controller(…)` with what NXAST_CONTROLLER cannot say (NXAST_CONTROLLER2):
    /// its properties, each as given (`None`: absent).
    Controller2 {
        max_len: Option<u16>,
        controller_id: Option<u16>,
        reason: Option<u8>,
        userdata: Option<Vec<u8>>,
        pause: bool,
        meter_id: Option<u32>,
    },
    /// `conjunction(id,clause+1/n_clauses)`: `clause` counts from 0 on the wire.
    Conjunction {
        clause: u8,
        n_clauses: u8,
        id: u32,
    },
    /// `learn(…)` (NXAST_LEARN, NXAST_LEARN2).
    Learn(Box<crate::nx_learn::LearnAction>),
    /// `output:SRC[ofs..]` (NXAST_OUTPUT_REG; NXAST_OUTPUT_REG2 when `reg2`, as
    /// it came): `ofs_nbits` as a load's, `src` an NXM header.
    OutputReg {
        ofs_nbits: u16,
        src: u32,
        max_len: u16,
        reg2: bool,
    },
    Exit,
    PopQueue,
    /// `fin_timeout(…)` (NXAST_FIN_TIMEOUT): the idle and hard timeouts a TCP FIN
    /// or RST gives the rule, then 2 pad bytes; 16 bytes in all.
    FinTimeout {
        idle: u16,
        hard: u16,
    },
    /// `output(port=P,max_len=N)` (NXAST_OUTPUT_TRUNC): a 16-bit port, then the
    /// length (at least 14); 16 bytes in all.
    OutputTrunc {
        port: u16,
        max_len: u32,
    },
    /// `bundle(…)` (`bundle_load(…)` when `load`: its destination `dst` at
    /// `ofs_nbits`, else both 0): algorithm and fields by Open vSwitch's numbers,
    /// members as 16-bit ports.
    Bundle {
        load: bool,
        algorithm: u16,
        fields: u16,
        basis: u16,
        ofs_nbits: u16,
        dst: u32,
        members: Vec<u16>,
    },
    /// `sample(…)` as NXAST_SAMPLE, SAMPLE2 or SAMPLE3 (`subtype`, as it came):
    /// SAMPLE has neither port (0xffff here) nor direction (0).
    Sample {
        subtype: u16,
        probability: u16,
        collector_set_id: u32,
        obs_domain_id: u32,
        obs_point_id: u32,
        sampling_port: u16,
        direction: u8,
    },
    /// `multipath(…)`: fields and algorithm by Open vSwitch's numbers, `max_link`
    /// the links less one, the destination as a load's.
    Multipath {
        fields: u16,
        basis: u16,
        algorithm: u16,
        max_link: u16,
        arg: u32,
        ofs_nbits: u16,
        dst: u32,
    },
    /// The MPLS actions as Nicira's: each argument right after the subtype (a
    /// label aligned to 4), 16 bytes in all.
    PushMpls(u16),
    PopMpls(u16),
    SetMplsTtl(u8),
    DecMplsTtl,
    SetMplsLabel(u32),
    SetMplsTc(u8),
    /// `encap(ethernet)`, `encap(nsh)`, `encap(nsh(md_type=N,tlv(…)))`,
    /// `encap(mpls)` (NXAST_ENCAP): header size 0, the new packet type, the MD
    /// type property when given, and a TLV property for each of `tlvs` (MD type
    /// 2 metadata, kept as RFC 8300 lays it out in the header).
    Encap {
        packet_type: u32,
        md_type: Option<u8>,
        tlvs: Vec<u8>,
    },
    /// `decap()` ([`PT_USE_NEXT_PROTO`]) or `decap(packet_type(…))`
    /// (NXAST_DECAP): 2 pad bytes and the packet type, 16 bytes in all.
    Decap(u32),
    /// `dec_nsh_ttl` (NXAST_DEC_NSH_TTL): 6 pad bytes.
    DecNshTtl,
    /// `ct_clear` (NXAST_CT_CLEAR): 6 pad bytes.
    CtClear,
    /// `push:FIELD[ofs..]` (`pop` with `push: false`), `n_bits` wide; an NXM header.
    Stack {
        push: bool,
        ofs: u16,
        field: u32,
        n_bits: u16,
    },
}

impl NxAction {
    pub fn subtype(&self) -> u16 {
        match self {
            NxAction::Resubmit { .. } => NXAST_RESUBMIT,
            NxAction::ResubmitTable { .. } => NXAST_RESUBMIT_TABLE,
            NxAction::Note(_) => NXAST_NOTE,
            NxAction::DecTtl => NXAST_DEC_TTL,
            NxAction::DecTtlIds(_) => NXAST_DEC_TTL_CNT_IDS,
            NxAction::CheckPktLarger { .. } => NXAST_CHECK_PKT_LARGER,
            NxAction::Controller { .. } => NXAST_CONTROLLER,
            NxAction::RegLoad { .. } => NXAST_REG_LOAD,
            NxAction::RegLoad2(_) => NXAST_REG_LOAD2,
            NxAction::RegMove(_) => NXAST_REG_MOVE,
            NxAction::Stack { push: true, .. } => NXAST_STACK_PUSH,
            NxAction::Stack { push: false, .. } => NXAST_STACK_POP,
            NxAction::Conjunction { .. } => NXAST_CONJUNCTION,
            NxAction::Controller2 { .. } => NXAST_CONTROLLER2,
            NxAction::Learn(l) => l.subtype(),
            NxAction::OutputReg { reg2: false, .. } => NXAST_OUTPUT_REG,
            NxAction::OutputReg { reg2: true, .. } => NXAST_OUTPUT_REG2,
            NxAction::Exit => NXAST_EXIT,
            NxAction::PopQueue => NXAST_POP_QUEUE,
            NxAction::FinTimeout { .. } => NXAST_FIN_TIMEOUT,
            NxAction::OutputTrunc { .. } => NXAST_OUTPUT_TRUNC,
            NxAction::PushMpls(_) => NXAST_PUSH_MPLS,
            NxAction::PopMpls(_) => NXAST_POP_MPLS,
            NxAction::SetMplsTtl(_) => NXAST_SET_MPLS_TTL,
            NxAction::DecMplsTtl => NXAST_DEC_MPLS_TTL,
            NxAction::Encap { .. } => NXAST_ENCAP,
            NxAction::Decap(_) => NXAST_DECAP,
            NxAction::DecNshTtl => NXAST_DEC_NSH_TTL,
            NxAction::CtClear => crate::nx_ct::NXAST_CT_CLEAR,
            NxAction::SetMplsLabel(_) => NXAST_SET_MPLS_LABEL,
            NxAction::SetMplsTc(_) => NXAST_SET_MPLS_TC,
            NxAction::Multipath { .. } => NXAST_MULTIPATH,
            NxAction::Sample { subtype, .. } => *subtype,
            NxAction::Bundle { load: false, .. } => NXAST_BUNDLE,
            NxAction::Bundle { load: true, .. } => NXAST_BUNDLE_LOAD,
        }
    }

    /// What follows the subtype (the caller pads the action to 8 bytes).
    pub(crate) fn encode_body(&self, out: &mut Vec<u8>) {
        match self {
            NxAction::Resubmit { in_port } => {
                out.extend_from_slice(&in_port.to_be_bytes());
                out.extend_from_slice(&[0; 4]);
            }
            NxAction::ResubmitTable { in_port, table } => {
                out.extend_from_slice(&in_port.to_be_bytes());
                out.extend_from_slice(&[*table, 0, 0, 0]);
            }
            NxAction::Note(bytes) => out.extend_from_slice(bytes),
            NxAction::DecTtl => out.extend_from_slice(&[0; 6]),
            NxAction::CheckPktLarger {
                pkt_len,
                offset,
                dst,
            } => {
                out.extend_from_slice(&pkt_len.to_be_bytes());
                out.extend_from_slice(&offset.to_be_bytes());
                out.extend_from_slice(&dst.to_be_bytes());
            }
            // The ids after the fixed part, padded by the caller.
            NxAction::DecTtlIds(ids) => {
                out.extend_from_slice(&(ids.len() as u16).to_be_bytes());
                out.extend_from_slice(&[0; 4]);
                for id in ids {
                    out.extend_from_slice(&id.to_be_bytes());
                }
            }
            NxAction::Controller {
                max_len,
                controller_id,
                reason,
            } => {
                out.extend_from_slice(&max_len.to_be_bytes());
                out.extend_from_slice(&controller_id.to_be_bytes());
                out.extend_from_slice(&[*reason, 0]);
            }
            NxAction::RegLoad {
                ofs_nbits,
                dst,
                value,
            } => {
                out.extend_from_slice(&ofs_nbits.to_be_bytes());
                out.extend_from_slice(&dst.to_be_bytes());
                out.extend_from_slice(&value.to_be_bytes());
            }
            NxAction::RegLoad2(f) => {
                let mask = f.mask.as_deref().unwrap_or_default();
                crate::oxm::put_header(out, f.field, f.mask.is_some(), f.value.len() + mask.len());
                out.extend_from_slice(&f.value);
                out.extend_from_slice(mask);
            }
            NxAction::RegMove(copy) => copy.encode(false, out),
            NxAction::Learn(l) => l.encode_body(out),
            NxAction::OutputReg {
                ofs_nbits,
                src,
                max_len,
                reg2: false,
            } => {
                out.extend_from_slice(&ofs_nbits.to_be_bytes());
                out.extend_from_slice(&src.to_be_bytes());
                out.extend_from_slice(&max_len.to_be_bytes());
                out.extend_from_slice(&[0; 6]);
            }
            NxAction::OutputReg {
                ofs_nbits,
                src,
                max_len,
                reg2: true,
            } => {
                out.extend_from_slice(&ofs_nbits.to_be_bytes());
                out.extend_from_slice(&max_len.to_be_bytes());
                out.extend_from_slice(&src.to_be_bytes());
            }
            NxAction::Exit
            | NxAction::PopQueue
            | NxAction::DecMplsTtl
            | NxAction::DecNshTtl
            | NxAction::CtClear => out.extend_from_slice(&[0; 6]),
            NxAction::Encap {
                packet_type,
                md_type,
                tlvs,
            } => {
                out.extend_from_slice(&0u16.to_be_bytes());
                out.extend_from_slice(&packet_type.to_be_bytes());
                if let Some(t) = md_type {
                    // Its length, 5, does not count the padding to 8.
                    out.extend_from_slice(&OFPPPC_NSH.to_be_bytes());
                    out.extend_from_slice(&[OFPPPT_PROP_NSH_MDTYPE, 5, *t, 0, 0, 0]);
                }
                // Each TLV's property: its length counts the padding to 8.
                let mut rest = &tlvs[..];
                while let [c0, c1, kind, len, tail @ ..] = rest {
                    let n = usize::from(*len & 0x7f).min(tail.len());
                    let padded = n.div_ceil(8) * 8;
                    out.extend_from_slice(&OFPPPC_NSH.to_be_bytes());
                    out.extend_from_slice(&[OFPPPT_PROP_NSH_TLV, (8 + padded) as u8]);
                    out.extend_from_slice(&[*c0, *c1, *kind, n as u8]);
                    out.extend_from_slice(&tail[..n]);
                    out.extend(std::iter::repeat_n(0, padded - n));
                    rest = tail.get(n.div_ceil(4) * 4..).unwrap_or_default();
                }
            }
            NxAction::Decap(packet_type) => {
                out.extend_from_slice(&[0, 0]);
                out.extend_from_slice(&packet_type.to_be_bytes());
            }
            NxAction::FinTimeout { idle, hard } => {
                out.extend_from_slice(&idle.to_be_bytes());
                out.extend_from_slice(&hard.to_be_bytes());
                out.extend_from_slice(&[0; 2]);
            }
            NxAction::OutputTrunc { port, max_len } => {
                out.extend_from_slice(&port.to_be_bytes());
                out.extend_from_slice(&max_len.to_be_bytes());
            }
            NxAction::PushMpls(t) | NxAction::PopMpls(t) => {
                out.extend_from_slice(&t.to_be_bytes());
                out.extend_from_slice(&[0; 4]);
            }
            NxAction::SetMplsTtl(n) | NxAction::SetMplsTc(n) => {
                out.push(*n);
                out.extend_from_slice(&[0; 5]);
            }
            NxAction::SetMplsLabel(l) => {
                out.extend_from_slice(&[0; 2]);
                out.extend_from_slice(&l.to_be_bytes());
            }
            NxAction::Sample {
                subtype,
                probability,
                collector_set_id,
                obs_domain_id,
                obs_point_id,
                sampling_port,
                direction,
            } => {
                out.extend_from_slice(&probability.to_be_bytes());
                for v in [*collector_set_id, *obs_domain_id, *obs_point_id] {
                    out.extend_from_slice(&v.to_be_bytes());
                }
                if *subtype != NXAST_SAMPLE {
                    out.extend_from_slice(&sampling_port.to_be_bytes());
                    out.push(if *subtype == NXAST_SAMPLE3 {
                        *direction
                    } else {
                        0
                    });
                    out.extend_from_slice(&[0; 5]);
                }
            }
            NxAction::Multipath {
                fields,
                basis,
                algorithm,
                max_link,
                arg,
                ofs_nbits,
                dst,
            } => {
                for v in [*fields, *basis, 0, *algorithm, *max_link] {
                    out.extend_from_slice(&v.to_be_bytes());
                }
                out.extend_from_slice(&arg.to_be_bytes());
                out.extend_from_slice(&[0, 0]);
                out.extend_from_slice(&ofs_nbits.to_be_bytes());
                out.extend_from_slice(&dst.to_be_bytes());
            }
            NxAction::Bundle {
                algorithm,
                fields,
                basis,
                ofs_nbits,
                dst,
                members,
                ..
            } => {
                for v in [*algorithm, *fields, *basis] {
                    out.extend_from_slice(&v.to_be_bytes());
                }
                out.extend_from_slice(&NX_BUNDLE_OFPORT.to_be_bytes());
                out.extend_from_slice(&(members.len() as u16).to_be_bytes());
                out.extend_from_slice(&ofs_nbits.to_be_bytes());
                out.extend_from_slice(&dst.to_be_bytes());
                out.extend_from_slice(&[0; 4]);
                for m in members {
                    out.extend_from_slice(&m.to_be_bytes());
                }
            }
            NxAction::Conjunction {
                clause,
                n_clauses,
                id,
            } => {
                out.extend_from_slice(&[*clause, *n_clauses]);
                out.extend_from_slice(&id.to_be_bytes());
            }
            NxAction::Controller2 {
                max_len,
                controller_id,
                reason,
                userdata,
                pause,
                meter_id,
            } => {
                out.extend_from_slice(&[0; 6]);
                let mut prop = |kind: u16, value: &[u8]| put_property(out, kind, value);
                if let Some(m) = max_len {
                    prop(NXAC2PT_MAX_LEN, &m.to_be_bytes());
                }
                if let Some(id) = controller_id {
                    prop(NXAC2PT_CONTROLLER_ID, &id.to_be_bytes());
                }
                if let Some(r) = reason {
                    prop(NXAC2PT_REASON, &[*r]);
                }
                if let Some(u) = userdata {
                    prop(NXAC2PT_USERDATA, u);
                }
                if *pause {
                    prop(NXAC2PT_PAUSE, &[]);
                }
                if let Some(m) = meter_id {
                    prop(NXAC2PT_METER_ID, &m.to_be_bytes());
                }
            }
            NxAction::Stack {
                ofs, field, n_bits, ..
            } => {
                out.extend_from_slice(&ofs.to_be_bytes());
                out.extend_from_slice(&field.to_be_bytes());
                out.extend_from_slice(&n_bits.to_be_bytes());
                out.extend_from_slice(&[0; 6]);
            }
        }
    }

    /// The action of `subtype` from its body (after the subtype); `len` is the
    /// whole action's length. Pads must be zero, as Open vSwitch checks.
    pub(crate) fn decode(subtype: u16, body: &[u8], len: usize) -> Result<NxAction, BadNxAction> {
        let mut b = Reader::new(body);
        let fixed = |want: usize| {
            if len == want {
                Ok(())
            } else {
                Err(BadNxAction::Len)
            }
        };
        let zero = |bytes: Option<&[u8]>| match bytes {
            Some(z) if z.iter().all(|x| *x == 0) => Ok(()),
            Some(_) => Err(BadNxAction::Argument),
            None => Err(BadNxAction::Len),
        };
        Ok(match subtype {
            NXAST_RESUBMIT => {
                fixed(16)?;
                let in_port = b.u16().ok_or(BadNxAction::Len)?;
                zero(b.bytes(4))?;
                NxAction::Resubmit { in_port }
            }
            NXAST_RESUBMIT_TABLE => {
                fixed(16)?;
                let in_port = b.u16().ok_or(BadNxAction::Len)?;
                let table = b.u8().ok_or(BadNxAction::Len)?;
                zero(b.bytes(3))?;
                NxAction::ResubmitTable { in_port, table }
            }
            // All of it, padding included, as Open vSwitch keeps it.
            NXAST_NOTE if len >= 16 => NxAction::Note(b.rest().to_vec()),
            NXAST_NOTE => return Err(BadNxAction::Len),
            NXAST_DEC_TTL => {
                fixed(16)?;
                zero(b.bytes(6))?;
                NxAction::DecTtl
            }
            NXAST_CHECK_PKT_LARGER => {
                fixed(24)?;
                let pkt_len = b.u16().ok_or(BadNxAction::Len)?;
                let offset = b.u16().ok_or(BadNxAction::Len)?;
                let dst = b.u32().ok_or(BadNxAction::Len)?;
                zero(Some(b.rest()))?;
                NxAction::CheckPktLarger {
                    pkt_len,
                    offset,
                    dst,
                }
            }
            NXAST_DEC_TTL_CNT_IDS => {
                let n = usize::from(b.u16().ok_or(BadNxAction::Len)?);
                zero(b.bytes(4))?;
                let room = b.rest_len() / 2;
                // None is allowed: OVN writes `dec_ttl()` so (no controller is
                // told of an expired packet).
                if n > room {
                    return Err(BadNxAction::Len);
                }
                let ids = (0..n)
                    .map(|_| b.u16().ok_or(BadNxAction::Len))
                    .collect::<Result<_, _>>()?;
                zero(Some(b.rest()))?;
                NxAction::DecTtlIds(ids)
            }
            NXAST_CONTROLLER => {
                fixed(16)?;
                let max_len = b.u16().ok_or(BadNxAction::Len)?;
                let controller_id = b.u16().ok_or(BadNxAction::Len)?;
                let reason = b.u8().ok_or(BadNxAction::Len)?;
                zero(b.bytes(1))?;
                NxAction::Controller {
                    max_len,
                    controller_id,
                    reason,
                }
            }
            NXAST_REG_LOAD => {
                fixed(24)?;
                let ofs_nbits = b.u16().ok_or(BadNxAction::Len)?;
                let dst = b.u32().ok_or(BadNxAction::Len)?;
                let value = b.u64().ok_or(BadNxAction::Len)?;
                NxAction::RegLoad {
                    ofs_nbits,
                    dst,
                    value,
                }
            }
            NXAST_REG_MOVE => {
                fixed(24)?;
                NxAction::RegMove(FieldCopy::decode(&mut b, false).ok_or(BadNxAction::Len)?)
            }
            NXAST_CONTROLLER2 => {
                zero(b.bytes(6))?;
                let mut a = NxAction::Controller2 {
                    max_len: None,
                    controller_id: None,
                    reason: None,
                    userdata: None,
                    pause: false,
                    meter_id: None,
                };
                let NxAction::Controller2 {
                    max_len,
                    controller_id,
                    reason,
                    userdata,
                    pause,
                    meter_id,
                } = &mut a
                else {
                    unreachable!("made just above")
                };
                while !b.is_empty() {
                    let kind = b.u16().ok_or(BadNxAction::Len)?;
                    let len = usize::from(b.u16().ok_or(BadNxAction::Len)?);
                    let value = b
                        .bytes(len.checked_sub(4).ok_or(BadNxAction::Len)?)
                        .ok_or(BadNxAction::Len)?;
                    zero(b.bytes(len.div_ceil(8) * 8 - len))?;
                    let n = |k: usize| (value.len() == k).then_some(value).ok_or(BadNxAction::Len);
                    match kind {
                        NXAC2PT_MAX_LEN => {
                            *max_len = Some(u16::from_be_bytes([n(2)?[0], value[1]]))
                        }
                        NXAC2PT_CONTROLLER_ID => {
                            *controller_id = Some(u16::from_be_bytes([n(2)?[0], value[1]]))
                        }
                        NXAC2PT_REASON => *reason = Some(n(1)?[0]),
                        NXAC2PT_USERDATA => *userdata = Some(value.to_vec()),
                        NXAC2PT_PAUSE => {
                            n(0)?;
                            *pause = true;
                        }
                        NXAC2PT_METER_ID => {
                            let v = n(4)?;
                            *meter_id = Some(u32::from_be_bytes([v[0], v[1], v[2], v[3]]));
                        }
                        _ => return Err(BadNxAction::Argument),
                    }
                }
                a
            }
            NXAST_CONJUNCTION => {
                fixed(16)?;
                let clause = b.u8().ok_or(BadNxAction::Len)?;
                let n_clauses = b.u8().ok_or(BadNxAction::Len)?;
                let id = b.u32().ok_or(BadNxAction::Len)?;
                if !(2..=64).contains(&n_clauses) || clause >= n_clauses {
                    return Err(BadNxAction::Argument);
                }
                NxAction::Conjunction {
                    clause,
                    n_clauses,
                    id,
                }
            }
            NXAST_STACK_PUSH | NXAST_STACK_POP => {
                fixed(24)?;
                let ofs = b.u16().ok_or(BadNxAction::Len)?;
                let field = b.u32().ok_or(BadNxAction::Len)?;
                let n_bits = b.u16().ok_or(BadNxAction::Len)?;
                zero(b.bytes(6))?;
                NxAction::Stack {
                    push: subtype == NXAST_STACK_PUSH,
                    ofs,
                    field,
                    n_bits,
                }
            }
            NXAST_REG_LOAD2 => {
                let f = crate::oxm::read_field(&mut b).ok_or(BadNxAction::Len)?;
                // Padding to 8 bytes, zero, and no more.
                if len != (10 + f.wire_len).div_ceil(8) * 8 {
                    return Err(BadNxAction::Len);
                }
                zero(Some(b.rest()))?;
                let def = f
                    .field
                    .and_then(crate::oxm::field_def)
                    .ok_or(BadNxAction::Argument)?;
                let (masked, payload) = (f.hasmask, f.payload);
                let flen = payload.len();
                let value_len = if masked { flen / 2 } else { flen };
                if (masked && flen % 2 != 0) || !def.takes_len(value_len) {
                    return Err(BadNxAction::Argument);
                }
                let (value, mask) = payload.split_at(value_len);
                NxAction::RegLoad2(OxmField {
                    field: def.field,
                    value: value.to_vec(),
                    mask: masked.then(|| mask.to_vec()),
                })
            }
            NXAST_OUTPUT_REG => {
                fixed(24)?;
                let ofs_nbits = b.u16().ok_or(BadNxAction::Len)?;
                let src = b.u32().ok_or(BadNxAction::Len)?;
                let max_len = b.u16().ok_or(BadNxAction::Len)?;
                zero(b.bytes(6))?;
                NxAction::OutputReg {
                    ofs_nbits,
                    src,
                    max_len,
                    reg2: false,
                }
            }
            NXAST_OUTPUT_REG2 => {
                fixed(24)?;
                let ofs_nbits = b.u16().ok_or(BadNxAction::Len)?;
                let max_len = b.u16().ok_or(BadNxAction::Len)?;
                let src = b.u32().ok_or(BadNxAction::Len)?;
                zero(b.bytes(4))?;
                NxAction::OutputReg {
                    ofs_nbits,
                    src,
                    max_len,
                    reg2: true,
                }
            }
            NXAST_SAMPLE | NXAST_SAMPLE2 | NXAST_SAMPLE3 => {
                fixed(if subtype == NXAST_SAMPLE { 24 } else { 32 })?;
                let probability = b.u16().ok_or(BadNxAction::Len)?;
                let collector_set_id = b.u32().ok_or(BadNxAction::Len)?;
                let obs_domain_id = b.u32().ok_or(BadNxAction::Len)?;
                let obs_point_id = b.u32().ok_or(BadNxAction::Len)?;
                let (mut sampling_port, mut direction) = (0xffff, 0);
                if subtype != NXAST_SAMPLE {
                    sampling_port = b.u16().ok_or(BadNxAction::Len)?;
                    let d = b.u8().ok_or(BadNxAction::Len)?;
                    if subtype == NXAST_SAMPLE3 {
                        direction = d;
                        zero(b.bytes(5))?;
                    }
                }
                if probability == 0 || direction > 2 {
                    return Err(BadNxAction::Argument);
                }
                NxAction::Sample {
                    subtype,
                    probability,
                    collector_set_id,
                    obs_domain_id,
                    obs_point_id,
                    sampling_port,
                    direction,
                }
            }
            NXAST_MULTIPATH => {
                fixed(32)?;
                let fields = b.u16().ok_or(BadNxAction::Len)?;
                let basis = b.u16().ok_or(BadNxAction::Len)?;
                zero(b.bytes(2))?;
                let algorithm = b.u16().ok_or(BadNxAction::Len)?;
                let max_link = b.u16().ok_or(BadNxAction::Len)?;
                let arg = b.u32().ok_or(BadNxAction::Len)?;
                zero(b.bytes(2))?;
                let ofs_nbits = b.u16().ok_or(BadNxAction::Len)?;
                let dst = b.u32().ok_or(BadNxAction::Len)?;
                if fields > 6 || algorithm > 3 {
                    return Err(BadNxAction::Argument);
                }
                NxAction::Multipath {
                    fields,
                    basis,
                    algorithm,
                    max_link,
                    arg,
                    ofs_nbits,
                    dst,
                }
            }
            NXAST_BUNDLE | NXAST_BUNDLE_LOAD => {
                let load = subtype == NXAST_BUNDLE_LOAD;
                let algorithm = b.u16().ok_or(BadNxAction::Len)?;
                let fields = b.u16().ok_or(BadNxAction::Len)?;
                let basis = b.u16().ok_or(BadNxAction::Len)?;
                let member_type = b.u32().ok_or(BadNxAction::Len)?;
                let n = usize::from(b.u16().ok_or(BadNxAction::Len)?);
                let ofs_nbits = b.u16().ok_or(BadNxAction::Len)?;
                let dst = b.u32().ok_or(BadNxAction::Len)?;
                zero(b.bytes(4))?;
                if len < 32 + 2 * n {
                    return Err(BadNxAction::Len);
                }
                let members = (0..n)
                    .map(|_| b.u16().ok_or(BadNxAction::Len))
                    .collect::<Result<Vec<u16>, _>>()?;
                // The rest is padding to 8 bytes, zero.
                zero(Some(b.rest()))?;
                // At most Open vSwitch's 2,048 members, none CONTROLLER.
                if algorithm > 1
                    || fields > 6
                    || member_type != NX_BUNDLE_OFPORT
                    || n > 2048
                    || members.contains(&0xfffd)
                    || (!load && (ofs_nbits != 0 || dst != 0))
                {
                    return Err(BadNxAction::Argument);
                }
                NxAction::Bundle {
                    load,
                    algorithm,
                    fields,
                    basis,
                    ofs_nbits,
                    dst,
                    members,
                }
            }
            NXAST_OUTPUT_TRUNC => {
                fixed(16)?;
                let port = b.u16().ok_or(BadNxAction::Len)?;
                let max_len = b.u32().ok_or(BadNxAction::Len)?;
                // Shorter than an Ethernet header: BAD_ARGUMENT, as Open vSwitch.
                if max_len < 14 {
                    return Err(BadNxAction::Argument);
                }
                NxAction::OutputTrunc { port, max_len }
            }
            // The pad is not looked at (Open vSwitch's is not).
            NXAST_FIN_TIMEOUT => {
                fixed(16)?;
                let idle = b.u16().ok_or(BadNxAction::Len)?;
                let hard = b.u16().ok_or(BadNxAction::Len)?;
                NxAction::FinTimeout { idle, hard }
            }
            NXAST_EXIT | NXAST_POP_QUEUE => {
                fixed(16)?;
                zero(b.bytes(6))?;
                if subtype == NXAST_EXIT {
                    NxAction::Exit
                } else {
                    NxAction::PopQueue
                }
            }
            NXAST_PUSH_MPLS | NXAST_POP_MPLS => {
                fixed(16)?;
                let t = b.u16().ok_or(BadNxAction::Len)?;
                zero(b.bytes(4))?;
                if subtype == NXAST_PUSH_MPLS {
                    NxAction::PushMpls(t)
                } else {
                    NxAction::PopMpls(t)
                }
            }
            NXAST_SET_MPLS_TTL | NXAST_SET_MPLS_TC => {
                fixed(16)?;
                let n = b.u8().ok_or(BadNxAction::Len)?;
                zero(b.bytes(5))?;
                if subtype == NXAST_SET_MPLS_TTL {
                    NxAction::SetMplsTtl(n)
                } else {
                    NxAction::SetMplsTc(n)
                }
            }
            NXAST_DEC_MPLS_TTL | NXAST_DEC_NSH_TTL | crate::nx_ct::NXAST_CT_CLEAR => {
                fixed(16)?;
                zero(b.bytes(6))?;
                match subtype {
                    NXAST_DEC_MPLS_TTL => NxAction::DecMplsTtl,
                    NXAST_DEC_NSH_TTL => NxAction::DecNshTtl,
                    _ => NxAction::CtClear,
                }
            }
            NXAST_DECAP => {
                fixed(16)?;
                b.bytes(2).ok_or(BadNxAction::Len)?;
                NxAction::Decap(b.u32().ok_or(BadNxAction::Len)?)
            }
            NXAST_ENCAP => {
                if len < 16 || !len.is_multiple_of(8) {
                    return Err(BadNxAction::Len);
                }
                b.u16().ok_or(BadNxAction::Len)?;
                let packet_type = b.u32().ok_or(BadNxAction::Len)?;
                // What Open vSwitch pushes (its decoder takes these four).
                if !matches!(packet_type, PT_ETH | PT_NSH | PT_MPLS | PT_MPLS_MC) {
                    return Err(BadNxAction::Argument);
                }
                let (mut md_type, mut tlvs) = (None, Vec::new());
                while !b.is_empty() {
                    let class = b.u16().ok_or(BadNxAction::Len)?;
                    let kind = b.u8().ok_or(BadNxAction::Len)?;
                    let plen = usize::from(b.u8().ok_or(BadNxAction::Len)?);
                    let body = b
                        .bytes((plen.max(4).div_ceil(8) * 8).saturating_sub(4))
                        .ok_or(BadNxAction::Len)?;
                    match (class, kind) {
                        (OFPPPC_NSH, OFPPPT_PROP_NSH_MDTYPE)
                            if packet_type == PT_NSH && (5..=8).contains(&plen) =>
                        {
                            md_type = Some(body[0]);
                        }
                        // An MD type 2 TLV: its length counts the padding to 8.
                        (OFPPPC_NSH, OFPPPT_PROP_NSH_TLV) if packet_type == PT_NSH => {
                            let [c0, c1, kind, n, value @ ..] = body else {
                                return Err(BadNxAction::Len);
                            };
                            let n = usize::from(*n);
                            if plen != 8 + n.div_ceil(8) * 8 || n > 127 {
                                return Err(BadNxAction::Len);
                            }
                            tlvs.extend_from_slice(&[*c0, *c1, *kind, n as u8]);
                            tlvs.extend_from_slice(&value[..n]);
                            tlvs.resize(tlvs.len().div_ceil(4) * 4, 0);
                        }
                        _ => return Err(BadNxAction::Argument),
                    }
                }
                if tlvs.len() > vsw_packet::wire::nsh::MAX_CONTEXT {
                    return Err(BadNxAction::Argument);
                }
                NxAction::Encap {
                    packet_type,
                    md_type,
                    tlvs,
                }
            }
            NXAST_SET_MPLS_LABEL => {
                fixed(16)?;
                zero(b.bytes(2))?;
                NxAction::SetMplsLabel(b.u32().ok_or(BadNxAction::Len)?)
            }
            crate::nx_learn::NXAST_LEARN | crate::nx_learn::NXAST_LEARN2 => NxAction::Learn(
                Box::new(crate::nx_learn::LearnAction::decode(subtype, body, len)?),
            ),
            _ => return Err(BadNxAction::Subtype),
        })
    }
}

/// A 16-bit (OpenFlow 1.0) port number as a 32-bit one: the reserved ports
/// (0xff00 on) move to the top of the 32-bit space.
pub fn port_from_16(p: u16) -> u32 {
    if p >= 0xff00 {
        u32::from(p) | 0xffff_0000
    } else {
        u32::from(p)
    }
}

/// A 32-bit port number as a 16-bit one, where it has one.
pub fn port_to_16(p: u32) -> Option<u16> {
    match p {
        p if p < 0xff00 => u16::try_from(p).ok(),
        p if p >= 0xffff_ff00 => u16::try_from(p & 0xffff).ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use crate::flow_mod::Action;
    use crate::nx_action::{NxAction, PT_ETH, PT_MPLS, PT_NSH, PT_USE_NEXT_PROTO};

    fn wire(a: NxAction) -> Vec<u8> {
        let mut out = Vec::new();
        Action::Nx(a).encode(&mut out);
        out
    }

    /// The bytes Open vSwitch's own tests give for each (tests/ofp-actions.at).
    #[test]
    fn encap_decap_and_dec_nsh_ttl_are_open_vswitchs_bytes() {
        let hex = |s: &str| {
            (0..s.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
                .collect::<Vec<u8>>()
        };
        for (a, bytes) in [
            (
                NxAction::Encap {
                    packet_type: PT_NSH,
                    md_type: Some(1),
                    tlvs: Vec::new(),
                },
                "ffff001800002320002e00000001894f0004010501000000",
            ),
            (
                NxAction::Encap {
                    packet_type: PT_ETH,
                    md_type: None,
                    tlvs: Vec::new(),
                },
                "ffff001000002320002e000000000000",
            ),
            (
                NxAction::Decap(PT_USE_NEXT_PROTO),
                "ffff001000002320002f00000000fffe",
            ),
            (NxAction::DecNshTtl, "ffff0010000023200030000000000000"),
            (NxAction::CtClear, "ffff001000002320002b000000000000"),
        ] {
            let w = wire(a.clone());
            assert_eq!(w, hex(bytes), "{a:?}");
            assert_eq!(Action::decode_list(&w).unwrap(), vec![Action::Nx(a)]);
        }
        let mpls = hex("ffff001000002320002e000000018847");
        let a = NxAction::Encap {
            packet_type: PT_MPLS,
            md_type: None,
            tlvs: Vec::new(),
        };
        assert_eq!(wire(a.clone()), mpls);
        assert_eq!(Action::decode_list(&mpls).unwrap(), vec![Action::Nx(a)]);
        // MD type 2 with two TLVs, laid out as Open vSwitch's encoder lays them
        // out (the e2e NSH test has ovs-ofctl read them back),
        // `encap(nsh(md_type=2,tlv(0x1000,10,0x12345678),tlv(0x2000,20,0xfedcba9876543210)))`.
        let md2 = hex(concat!(
            "ffff003800002320002e00000001894f",
            "0004010502000000",
            "00040210",
            "10000a04",
            "1234567800000000",
            "00040210",
            "20001408",
            "fedcba9876543210",
        ));
        let a = NxAction::Encap {
            packet_type: PT_NSH,
            md_type: Some(2),
            tlvs: hex("10000a041234567820001408fedcba9876543210"),
        };
        assert_eq!(wire(a.clone()), md2);
        assert_eq!(Action::decode_list(&md2).unwrap(), vec![Action::Nx(a)]);
        // A TLV property whose length does not count its padding; IPv4's packet
        // type: refused.
        let mut short = md2.clone();
        short[27] = 0x0c;
        assert!(Action::decode_list(&short).is_err());
        let ipv4 = hex("ffff001000002320002e000000010800");
        assert!(Action::decode_list(&ipv4).is_err());
        // An NSH set-field where the version has no set-field action (1.0) goes
        // as REG_LOAD2, whose OXM carries the experimenter: no 32-bit NXM header
        // names an experimenter's field.
        let spi = crate::oxm::OxmField {
            field: crate::oxm::NSH_SPI,
            value: vec![0, 0, 1, 0x23],
            mask: None,
        };
        assert_eq!(
            crate::nx_action::masked_set_field_as_load(&spi),
            NxAction::RegLoad2(spi)
        );
    }
}
