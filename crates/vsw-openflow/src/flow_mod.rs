//! `OFPT_FLOW_MOD`: a controller adds, changes or deletes flows. Its instructions
//! and actions, as OpenFlow 1.3–1.5 put them on the wire (1.4 put `importance` where
//! 1.3 had padding; the rest is the same).

use crate::frame::len16;
use crate::nx_action::{BadNxAction, FieldCopy, NxAction};
use crate::oxm::{BadMatch, OxmField, OxmMatch};
use crate::reader::Reader;
use crate::version::Version;

pub const OFPT_FLOW_MOD: u8 = 14;

/// An experimenter action (its vendor and subtype follow).
pub const OFPAT_EXPERIMENTER: u16 = 0xffff;
/// Flow-mod flags.
pub const OFPFF_SEND_FLOW_REM: u16 = 1 << 0;
pub const OFPFF_CHECK_OVERLAP: u16 = 1 << 1;
pub const OFPFF_RESET_COUNTS: u16 = 1 << 2;
pub const OFPFF_NO_PKT_COUNTS: u16 = 1 << 3;
pub const OFPFF_NO_BYT_COUNTS: u16 = 1 << 4;
/// Special port numbers (`ofp_port_no`).
pub const OFPP_MAX: u32 = 0xffff_ff00;
pub const OFPP_IN_PORT: u32 = 0xffff_fff8;
pub const OFPP_TABLE: u32 = 0xffff_fff9;
pub const OFPP_NORMAL: u32 = 0xffff_fffa;
pub const OFPP_FLOOD: u32 = 0xffff_fffb;
pub const OFPP_ALL: u32 = 0xffff_fffc;
pub const OFPP_CONTROLLER: u32 = 0xffff_fffd;
pub const OFPP_LOCAL: u32 = 0xffff_fffe;
pub const OFPP_ANY: u32 = 0xffff_ffff;

/// vsw's number of a port OpenFlow names (LOCAL is vsw's [`vsw_flow::LOCAL_PORT`]).
pub fn to_vsw_port(of: u32) -> u32 {
    if of == OFPP_LOCAL {
        vsw_flow::LOCAL_PORT
    } else {
        of
    }
}

/// OpenFlow's number of a vsw port.
pub fn to_of_port(vsw: u32) -> u32 {
    if vsw == vsw_flow::LOCAL_PORT {
        OFPP_LOCAL
    } else {
        vsw
    }
}
pub const OFPG_ANY: u32 = 0xffff_ffff;
/// No buffered packet goes with the flow-mod.
pub const OFP_NO_BUFFER: u32 = 0xffff_ffff;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    Add = 0,
    Modify = 1,
    ModifyStrict = 2,
    Delete = 3,
    DeleteStrict = 4,
}

impl Command {
    /// The command a flow-mod's number names (every version numbers them alike).
    pub fn from_wire(n: u8) -> Option<Command> {
        [
            Command::Add,
            Command::Modify,
            Command::ModifyStrict,
            Command::Delete,
            Command::DeleteStrict,
        ]
        .get(usize::from(n))
        .copied()
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    Output {
        port: u32,
        max_len: u16,
    },
    CopyTtlOut,
    CopyTtlIn,
    SetNwTtl(u8),
    DecNwTtl,
    /// OFPAT_SET_MPLS_TTL, OFPAT_DEC_MPLS_TTL, OFPAT_PUSH_MPLS, OFPAT_POP_MPLS.
    SetMplsTtl(u8),
    DecMplsTtl,
    PushMpls(u16),
    PopMpls(u16),
    /// OFPAT_PUSH_PBB and OFPAT_POP_PBB (OpenFlow 1.3 on).
    PushPbb(u16),
    PopPbb,
    /// OpenFlow 1.1's OFPAT_SET_MPLS_LABEL and SET_MPLS_TC, which Open vSwitch
    /// still takes from 1.2 on (deprecated for set-field).
    SetMplsLabel(u32),
    SetMplsTc(u8),
    PushVlan(u16),
    PopVlan,
    SetQueue(u32),
    Group(u32),
    SetField(OxmField),
    /// 1.5's meter action.
    Meter(u32),
    /// A Nicira extension action.
    Nx(NxAction),
    /// Nicira's `clone(…)` (NXAST_CLONE): these actions on a copy of the packet.
    Clone(Vec<Action>),
    /// 1.5's copy-field (`move`).
    CopyField(FieldCopy),
    /// Nicira's `ct(…)` (NXAST_CT), its own actions nested.
    Ct(Box<crate::nx_ct::CtWire<Action>>),
    /// Nicira's `nat(…)` (NXAST_NAT): only within a `ct`.
    Nat(crate::nx_ct::NatWire),
}

/// OFPAT_COPY_FIELD (OpenFlow 1.5).
pub const OFPAT_COPY_FIELD: u16 = 28;

impl From<crate::nx_ct::BadCt> for BadFlowMod {
    fn from(e: crate::nx_ct::BadCt) -> BadFlowMod {
        match e {
            crate::nx_ct::BadCt::Len => BadFlowMod::BadActionLen,
            crate::nx_ct::BadCt::Argument => BadFlowMod::BadArgument,
        }
    }
}

/// NXAST_CLONE's subtype.
pub const NXAST_CLONE: u16 = 42;
/// How deep clones may nest in one action list (each level takes 16 bytes; a
/// bound keeps a hostile list from exhausting the stack).
const MAX_CLONE_DEPTH: usize = 16;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Instruction {
    GotoTable(u8),
    WriteMetadata { metadata: u64, mask: u64 },
    WriteActions(Vec<Action>),
    ApplyActions(Vec<Action>),
    ClearActions,
    Meter(u32),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowMod {
    pub cookie: u64,
    pub cookie_mask: u64,
    pub table_id: u8,
    pub command: Command,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub priority: u16,
    pub buffer_id: u32,
    pub out_port: u32,
    pub out_group: u32,
    pub flags: u16,
    /// 1.4 on (0 in 1.3).
    pub importance: u16,
    /// OpenFlow 1.0's modify: one that selects no flow adds it (1.1 on, a modify
    /// changes only the flows it selects). Its cookie is not given to the flows it
    /// changes, as Open vSwitch gives it.
    pub modify_like_1_0: bool,
    pub matcher: OxmMatch,
    pub instructions: Vec<Instruction>,
}

/// Why a flow-mod was refused: the error (type, code) it is answered with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadFlowMod {
    #[error(transparent)]
    Match(#[from] BadMatch),
    #[error("a flow-mod whose length does not fit (BAD_REQUEST/BAD_LEN)")]
    BadLen,
    #[error("an unknown flow-mod command (FLOW_MOD_FAILED/BAD_COMMAND)")]
    BadCommand,
    #[error("an instruction vsw does not know (BAD_INSTRUCTION/UNKNOWN_INST)")]
    UnknownInstruction,
    #[error("an instruction whose length does not fit (BAD_INSTRUCTION/BAD_LEN)")]
    BadInstructionLen,
    #[error("an instruction given twice (BAD_INSTRUCTION/DUP_INST)")]
    DupInstruction,
    #[error("an action vsw does not know (BAD_ACTION/BAD_TYPE)")]
    BadActionType,
    #[error("an action whose length does not fit (BAD_ACTION/BAD_LEN)")]
    BadActionLen,
    #[error("a set-field of a field that cannot be set or is malformed (BAD_ACTION/BAD_SET_TYPE)")]
    BadSetField,
    #[error("an instruction vsw does not carry out yet (BAD_INSTRUCTION/UNSUP_INST)")]
    UnsupportedInstruction,
    #[error("an output to a port vsw cannot send to (BAD_ACTION/BAD_OUT_PORT)")]
    BadOutPort,
    #[error("the switch refused the flow (FLOW_MOD_FAILED/UNKNOWN)")]
    Refused,
    #[error("the flow overlaps one of its priority (FLOW_MOD_FAILED/OVERLAP)")]
    Overlap,
    #[error("an action hands packets to a group that does not exist (BAD_ACTION/BAD_OUT_GROUP)")]
    BadOutGroup,
    #[error("the flow uses a meter that does not exist (METER_MOD_FAILED/UNKNOWN_METER)")]
    UnknownMeter,
    #[error("a flow-mod naming a buffered packet; vsw keeps none (BAD_REQUEST/BUFFER_UNKNOWN)")]
    BufferUnknown,
    #[error("an action on a header the match does not promise (BAD_ACTION/MATCH_INCONSISTENT)")]
    MatchInconsistent,
    #[error("an action argument vsw cannot take (BAD_ACTION/BAD_ARGUMENT)")]
    BadArgument,
    #[error("a set-field of a value the field cannot hold (BAD_ACTION/BAD_SET_ARGUMENT)")]
    BadSetArgument,
    #[error("a set-field with a mask of a field vsw sets only whole (BAD_ACTION/BAD_SET_MASK)")]
    BadSetMask,
    #[error("a goto-table to a table that is not a later one (BAD_INSTRUCTION/BAD_TABLE_ID)")]
    BadGotoTable,
    #[error("a flow-mod for a table vsw does not have (FLOW_MOD_FAILED/BAD_TABLE_ID)")]
    BadTableId,
    #[error("an experimenter action of a vendor vsw does not know (BAD_ACTION/BAD_EXPERIMENTER)")]
    BadExperimenter,
    #[error("a flow-mod with flags its version does not have (FLOW_MOD_FAILED/BAD_FLAGS)")]
    BadFlags,
    #[error("a Nicira action vsw does not carry out (BAD_ACTION/BAD_EXP_TYPE)")]
    BadExperimenterType,
}

impl From<BadNxAction> for BadFlowMod {
    fn from(e: BadNxAction) -> BadFlowMod {
        match e {
            BadNxAction::Len => BadFlowMod::BadActionLen,
            BadNxAction::Argument => BadFlowMod::BadArgument,
            BadNxAction::Subtype => BadFlowMod::BadExperimenterType,
        }
    }
}

impl BadFlowMod {
    /// The error type and code on the wire.
    pub fn type_code(self) -> (u16, u16) {
        match self {
            BadFlowMod::Match(m) => (4, m.code()),
            BadFlowMod::BadLen => (1, 6),
            BadFlowMod::BadCommand => (5, 6),
            BadFlowMod::UnknownInstruction => (3, 0),
            BadFlowMod::BadInstructionLen => (3, 7),
            BadFlowMod::DupInstruction => (3, 9),
            BadFlowMod::BadActionType => (2, 0),
            BadFlowMod::BadActionLen => (2, 1),
            BadFlowMod::BadSetField => (2, 13),
            BadFlowMod::UnsupportedInstruction => (3, 1),
            BadFlowMod::BadOutPort => (2, 4),
            BadFlowMod::Refused => (5, 0),
            BadFlowMod::Overlap => (5, 3),
            BadFlowMod::BadOutGroup => (2, 9),
            BadFlowMod::UnknownMeter => (12, 3),
            BadFlowMod::BufferUnknown => (1, 8),
            BadFlowMod::MatchInconsistent => (2, 10),
            BadFlowMod::BadArgument => (2, 5),
            BadFlowMod::BadSetArgument => (2, 15),
            BadFlowMod::BadSetMask => (2, 16),
            BadFlowMod::BadGotoTable => (3, 2),
            BadFlowMod::BadTableId => (5, 2),
            BadFlowMod::BadExperimenter => (2, 2),
            BadFlowMod::BadFlags => (5, 7),
            BadFlowMod::BadExperimenterType => (2, 3),
        }
    }
}

/// The action at the front of `r`: its type, its length (a multiple of 8, at
/// least 8) and its body after type and length — the layout of every version's.
pub(crate) fn next_action<'a>(r: &mut Reader<'a>) -> Result<(u16, usize, &'a [u8]), BadFlowMod> {
    let kind = r.u16().ok_or(BadFlowMod::BadActionLen)?;
    let len = usize::from(r.u16().ok_or(BadFlowMod::BadActionLen)?);
    if len < 8 || len % 8 != 0 {
        return Err(BadFlowMod::BadActionLen);
    }
    let body = r.bytes(len - 4).ok_or(BadFlowMod::BadActionLen)?;
    Ok((kind, len, body))
}

/// An action of a fixed length has that length (BAD_ACTION/BAD_LEN otherwise).
pub(crate) fn action_len_is(len: usize, want: usize) -> Result<(), BadFlowMod> {
    if len == want {
        Ok(())
    } else {
        Err(BadFlowMod::BadActionLen)
    }
}

fn pad8(out: &mut Vec<u8>, start: usize) {
    let len = out.len() - start;
    out.extend(std::iter::repeat_n(0u8, len.div_ceil(8) * 8 - len));
}

impl Action {
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        let kind: u16 = match self {
            Action::Output { .. } => 0,
            Action::CopyTtlOut => 11,
            Action::CopyTtlIn => 12,
            Action::SetNwTtl(_) => 23,
            Action::DecNwTtl => 24,
            Action::SetMplsTtl(_) => 15,
            Action::DecMplsTtl => 16,
            Action::PushMpls(_) => 19,
            Action::PopMpls(_) => 20,
            Action::PushPbb(_) => 26,
            Action::PopPbb => 27,
            Action::SetMplsLabel(_) => 13,
            Action::SetMplsTc(_) => 14,
            Action::PushVlan(_) => 17,
            Action::PopVlan => 18,
            Action::SetQueue(_) => 21,
            Action::Group(_) => 22,
            Action::SetField(_) => 25,
            Action::Meter(_) => 29,
            Action::CopyField(_) => OFPAT_COPY_FIELD,
            Action::Nx(_) | Action::Clone(_) | Action::Ct(_) | Action::Nat(_) => OFPAT_EXPERIMENTER,
        };
        out.extend_from_slice(&kind.to_be_bytes());
        out.extend_from_slice(&[0, 0]);
        match self {
            Action::Output { port, max_len } => {
                out.extend_from_slice(&port.to_be_bytes());
                out.extend_from_slice(&max_len.to_be_bytes());
                out.extend_from_slice(&[0; 6]);
            }
            Action::SetNwTtl(t) | Action::SetMplsTtl(t) | Action::SetMplsTc(t) => {
                out.extend_from_slice(&[*t, 0, 0, 0])
            }
            Action::SetMplsLabel(l) => out.extend_from_slice(&l.to_be_bytes()),
            Action::PushVlan(t) | Action::PushMpls(t) | Action::PopMpls(t) | Action::PushPbb(t) => {
                out.extend_from_slice(&t.to_be_bytes());
                out.extend_from_slice(&[0, 0]);
            }
            Action::SetQueue(n) | Action::Group(n) | Action::Meter(n) => {
                out.extend_from_slice(&n.to_be_bytes())
            }
            Action::CopyTtlOut
            | Action::CopyTtlIn
            | Action::DecNwTtl
            | Action::DecMplsTtl
            | Action::PopPbb
            | Action::PopVlan => out.extend_from_slice(&[0; 4]),
            Action::SetField(f) => {
                let mask = f.mask.as_deref().unwrap_or_default();
                crate::oxm::put_header(out, f.field, f.mask.is_some(), f.value.len() + mask.len());
                out.extend_from_slice(&f.value);
                out.extend_from_slice(mask);
            }
            Action::CopyField(copy) => copy.encode(true, out),
            Action::Nx(a) => {
                out.extend_from_slice(&crate::tlv::NX_VENDOR_ID.to_be_bytes());
                out.extend_from_slice(&a.subtype().to_be_bytes());
                a.encode_body(out);
            }
            Action::Clone(actions) => {
                out.extend_from_slice(&crate::tlv::NX_VENDOR_ID.to_be_bytes());
                out.extend_from_slice(&NXAST_CLONE.to_be_bytes());
                out.extend_from_slice(&[0; 6]);
                for a in actions {
                    a.encode(out);
                }
            }
            Action::Ct(ct) => {
                out.extend_from_slice(&crate::tlv::NX_VENDOR_ID.to_be_bytes());
                out.extend_from_slice(&crate::nx_ct::NXAST_CT.to_be_bytes());
                ct.encode_head(out);
                for a in &ct.actions {
                    a.encode(out);
                }
            }
            Action::Nat(nat) => {
                out.extend_from_slice(&crate::tlv::NX_VENDOR_ID.to_be_bytes());
                out.extend_from_slice(&crate::nx_ct::NXAST_NAT.to_be_bytes());
                nat.encode_body(out);
            }
        }
        pad8(out, start);
        let len = len16(out.len() - start);
        out[start + 2..start + 4].copy_from_slice(&len.to_be_bytes());
    }

    pub(crate) fn decode_list(buf: &[u8]) -> Result<Vec<Action>, BadFlowMod> {
        Action::decode_nested(buf, 0)
    }

    /// An action list inside `depth` clones.
    fn decode_nested(buf: &[u8], depth: usize) -> Result<Vec<Action>, BadFlowMod> {
        let mut r = Reader::new(buf);
        let mut out = Vec::new();
        while !r.is_empty() {
            let (kind, len, body) = next_action(&mut r)?;
            let mut b = Reader::new(body);
            let fixed = |want: usize| action_len_is(len, want);
            let a = match kind {
                0 => {
                    fixed(16)?;
                    Action::Output {
                        port: b.u32().ok_or(BadFlowMod::BadActionLen)?,
                        max_len: b.u16().ok_or(BadFlowMod::BadActionLen)?,
                    }
                }
                11 => fixed(8).map(|()| Action::CopyTtlOut)?,
                12 => fixed(8).map(|()| Action::CopyTtlIn)?,
                23 => {
                    fixed(8)?;
                    Action::SetNwTtl(b.u8().ok_or(BadFlowMod::BadActionLen)?)
                }
                24 => fixed(8).map(|()| Action::DecNwTtl)?,
                15 => {
                    fixed(8)?;
                    Action::SetMplsTtl(b.u8().ok_or(BadFlowMod::BadActionLen)?)
                }
                16 => fixed(8).map(|()| Action::DecMplsTtl)?,
                13 => {
                    fixed(8)?;
                    Action::SetMplsLabel(b.u32().ok_or(BadFlowMod::BadActionLen)?)
                }
                14 => {
                    fixed(8)?;
                    Action::SetMplsTc(b.u8().ok_or(BadFlowMod::BadActionLen)?)
                }
                19 => {
                    fixed(8)?;
                    Action::PushMpls(b.u16().ok_or(BadFlowMod::BadActionLen)?)
                }
                20 => {
                    fixed(8)?;
                    Action::PopMpls(b.u16().ok_or(BadFlowMod::BadActionLen)?)
                }
                17 => {
                    fixed(8)?;
                    Action::PushVlan(b.u16().ok_or(BadFlowMod::BadActionLen)?)
                }
                26 => {
                    fixed(8)?;
                    Action::PushPbb(b.u16().ok_or(BadFlowMod::BadActionLen)?)
                }
                27 => fixed(8).map(|()| Action::PopPbb)?,
                18 => fixed(8).map(|()| Action::PopVlan)?,
                21 => {
                    fixed(8)?;
                    Action::SetQueue(b.u32().ok_or(BadFlowMod::BadActionLen)?)
                }
                22 => {
                    fixed(8)?;
                    Action::Group(b.u32().ok_or(BadFlowMod::BadActionLen)?)
                }
                OFPAT_COPY_FIELD => {
                    fixed(24)?;
                    let copy = FieldCopy::decode(&mut b, true).ok_or(BadFlowMod::BadArgument)?;
                    if b.rest().iter().any(|x| *x != 0) {
                        return Err(BadFlowMod::BadArgument);
                    }
                    Action::CopyField(copy)
                }
                // 1.5's meter action (1.3 and 1.4 have an instruction).
                29 => {
                    fixed(8)?;
                    Action::Meter(b.u32().ok_or(BadFlowMod::BadActionLen)?)
                }
                25 => {
                    let f = crate::oxm::read_field(&mut b).ok_or(BadFlowMod::BadSetField)?;
                    let def = f
                        .field
                        .and_then(crate::oxm::field_def)
                        .ok_or(BadFlowMod::BadSetField)?;
                    // A value of the field's length (and a mask as long, which
                    // OpenFlow 1.5 allows), padding only after.
                    let (masked, payload) = (f.hasmask, f.payload);
                    let flen = payload.len();
                    let value_len = if masked { flen / 2 } else { flen };
                    if (masked && (flen % 2 != 0 || !def.maskable))
                        || !def.takes_len(value_len)
                        || len != (4 + f.wire_len).div_ceil(8) * 8
                    {
                        return Err(BadFlowMod::BadSetField);
                    }
                    let (value, mask) = payload.split_at(value_len);
                    Action::SetField(OxmField {
                        field: def.field,
                        value: value.to_vec(),
                        mask: masked.then(|| mask.to_vec()),
                    })
                }
                OFPAT_EXPERIMENTER => {
                    if b.u32().ok_or(BadFlowMod::BadActionLen)? != crate::tlv::NX_VENDOR_ID {
                        return Err(BadFlowMod::BadExperimenter);
                    }
                    let subtype = b.u16().ok_or(BadFlowMod::BadActionLen)?;
                    if subtype == NXAST_CLONE {
                        if depth >= MAX_CLONE_DEPTH {
                            return Err(BadFlowMod::BadArgument);
                        }
                        match b.bytes(6) {
                            Some(pad) if pad.iter().all(|x| *x == 0) => {}
                            Some(_) => return Err(BadFlowMod::BadArgument),
                            None => return Err(BadFlowMod::BadActionLen),
                        }
                        Action::Clone(Action::decode_nested(b.rest(), depth + 1)?)
                    } else if subtype == crate::nx_ct::NXAST_CT {
                        if depth >= MAX_CLONE_DEPTH {
                            return Err(BadFlowMod::BadArgument);
                        }
                        let mut ct = crate::nx_ct::CtWire::decode_head(&mut b)?;
                        ct.actions = Action::decode_nested(b.rest(), depth + 1)?;
                        Action::Ct(Box::new(ct))
                    } else if subtype == crate::nx_ct::NXAST_NAT {
                        Action::Nat(crate::nx_ct::NatWire::decode(&mut b)?)
                    } else {
                        Action::Nx(NxAction::decode(subtype, b.rest(), len)?)
                    }
                }
                _ => return Err(BadFlowMod::BadActionType),
            };
            out.push(a);
        }
        Ok(out)
    }
}

impl Instruction {
    fn kind(&self) -> u16 {
        match self {
            Instruction::GotoTable(_) => 1,
            Instruction::WriteMetadata { .. } => 2,
            Instruction::WriteActions(_) => 3,
            Instruction::ApplyActions(_) => 4,
            Instruction::ClearActions => 5,
            Instruction::Meter(_) => 6,
        }
    }

    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&self.kind().to_be_bytes());
        out.extend_from_slice(&[0, 0]);
        match self {
            Instruction::GotoTable(t) => out.extend_from_slice(&[*t, 0, 0, 0]),
            Instruction::WriteMetadata { metadata, mask } => {
                out.extend_from_slice(&[0; 4]);
                out.extend_from_slice(&metadata.to_be_bytes());
                out.extend_from_slice(&mask.to_be_bytes());
            }
            Instruction::WriteActions(a) | Instruction::ApplyActions(a) => {
                out.extend_from_slice(&[0; 4]);
                for x in a {
                    x.encode(out);
                }
            }
            Instruction::ClearActions => out.extend_from_slice(&[0; 4]),
            Instruction::Meter(m) => out.extend_from_slice(&m.to_be_bytes()),
        }
        let len = len16(out.len() - start);
        out[start + 2..start + 4].copy_from_slice(&len.to_be_bytes());
    }

    pub(crate) fn decode_list(buf: &[u8]) -> Result<Vec<Instruction>, BadFlowMod> {
        let mut r = Reader::new(buf);
        let mut out: Vec<Instruction> = Vec::new();
        while !r.is_empty() {
            let kind = r.u16().ok_or(BadFlowMod::BadInstructionLen)?;
            let len = usize::from(r.u16().ok_or(BadFlowMod::BadInstructionLen)?);
            if len < 8 || len % 8 != 0 {
                return Err(BadFlowMod::BadInstructionLen);
            }
            let body = r.bytes(len - 4).ok_or(BadFlowMod::BadInstructionLen)?;
            let mut b = Reader::new(body);
            let i = match kind {
                1 if len == 8 => {
                    Instruction::GotoTable(b.u8().ok_or(BadFlowMod::BadInstructionLen)?)
                }
                2 if len == 24 => {
                    b.bytes(4);
                    Instruction::WriteMetadata {
                        metadata: b.u64().ok_or(BadFlowMod::BadInstructionLen)?,
                        mask: b.u64().ok_or(BadFlowMod::BadInstructionLen)?,
                    }
                }
                3 | 4 => {
                    let actions = Action::decode_list(&body[4..])?;
                    if kind == 3 {
                        Instruction::WriteActions(actions)
                    } else {
                        Instruction::ApplyActions(actions)
                    }
                }
                5 if len == 8 => Instruction::ClearActions,
                6 if len == 8 => Instruction::Meter(b.u32().ok_or(BadFlowMod::BadInstructionLen)?),
                1..=6 => return Err(BadFlowMod::BadInstructionLen),
                _ => return Err(BadFlowMod::UnknownInstruction),
            };
            if out.iter().any(|o| o.kind() == i.kind()) {
                return Err(BadFlowMod::DupInstruction);
            }
            out.push(i);
        }
        Ok(out)
    }
}

impl FlowMod {
    /// A flow-mod of `command` selecting or adding `matcher` in table 0, with what a
    /// controller leaves unsaid: no buffer, any output port and group, priority 0,
    /// no cookie, timeouts, flags or instructions.
    pub fn new(command: Command, matcher: OxmMatch) -> FlowMod {
        FlowMod {
            cookie: 0,
            cookie_mask: 0,
            table_id: 0,
            command,
            idle_timeout: 0,
            hard_timeout: 0,
            priority: 0,
            buffer_id: OFP_NO_BUFFER,
            out_port: OFPP_ANY,
            out_group: OFPG_ANY,
            flags: 0,
            importance: 0,
            modify_like_1_0: false,
            matcher,
            instructions: Vec::new(),
        }
    }

    /// The body after the header, as `version` frames it.
    pub fn encode_body(&self, version: Version, out: &mut Vec<u8>) {
        self.encode_fixed(version, out);
        self.matcher.encode(out);
        for i in &self.instructions {
            i.encode(out);
        }
    }

    /// The 40 bytes before the match, laid out alike from 1.1 to 1.5 (1.4 put
    /// the importance where the others pad).
    pub(crate) fn encode_fixed(&self, version: Version, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.cookie.to_be_bytes());
        out.extend_from_slice(&self.cookie_mask.to_be_bytes());
        out.push(self.table_id);
        out.push(self.command as u8);
        for v in [self.idle_timeout, self.hard_timeout, self.priority] {
            out.extend_from_slice(&v.to_be_bytes());
        }
        for v in [self.buffer_id, self.out_port, self.out_group] {
            out.extend_from_slice(&v.to_be_bytes());
        }
        out.extend_from_slice(&self.flags.to_be_bytes());
        let importance = if version >= Version::V1_4 {
            self.importance
        } else {
            0
        };
        out.extend_from_slice(&importance.to_be_bytes());
    }

    pub fn decode_body(version: Version, body: &[u8]) -> Result<FlowMod, BadFlowMod> {
        let mut r = Reader::new(body);
        let mut fixed = || -> Option<_> {
            Some((
                r.u64()?,
                r.u64()?,
                r.u8()?,
                r.u8()?,
                r.u16()?,
                r.u16()?,
                r.u16()?,
                r.u32()?,
                r.u32()?,
                r.u32()?,
                r.u16()?,
                r.u16()?,
            ))
        };
        let (
            cookie,
            cookie_mask,
            table_id,
            command,
            idle,
            hard,
            priority,
            buffer_id,
            out_port,
            out_group,
            flags,
            importance,
        ) = fixed().ok_or(BadFlowMod::BadLen)?;
        let command = Command::from_wire(command).ok_or(BadFlowMod::BadCommand)?;
        let (matcher, rest) = OxmMatch::decode_from(r.rest())?;
        let instructions = Instruction::decode_list(rest)?;
        Ok(FlowMod {
            cookie,
            cookie_mask,
            table_id,
            command,
            idle_timeout: idle,
            hard_timeout: hard,
            priority,
            buffer_id,
            out_port,
            out_group,
            flags,
            importance: if version >= Version::V1_4 {
                importance
            } else {
                0
            },
            modify_like_1_0: false,
            matcher,
            instructions,
        })
    }
}

#[cfg(test)]
mod ct_tests {
    use super::*;
    use crate::nx_ct::*;
    use crate::oxm::OxmField;

    fn sample() -> Action {
        Action::Ct(Box::new(CtWire {
            flags: NX_CT_F_COMMIT,
            zone_src: 0,
            zone: 7,
            recirc_table: 3,
            alg: 0,
            actions: vec![
                Action::Nat(NatWire {
                    flags: NX_NAT_F_SRC | NX_NAT_F_PROTO_RANDOM,
                    ipv4: Some((0x0a00_0001, Some(0x0a00_0003))),
                    ipv6: None,
                    ports: Some((1000, Some(2000))),
                }),
                Action::SetField(OxmField {
                    field: crate::oxm::CT_MARK,
                    value: 0x2a_u32.to_be_bytes().to_vec(),
                    mask: None,
                }),
            ],
        }))
    }

    /// NXAST_CT with NAT and a set-field inside round-trips in 1.3's encoding and
    /// 1.0's; cut anywhere, it is refused, never a panic; and vsw's `ct(…)` comes
    /// back the same through both conversions.
    #[test]
    fn ct_round_trips_and_cut_short_is_refused() {
        let a = sample();
        let mut out = Vec::new();
        a.encode(&mut out);
        assert_eq!(out.len() % 8, 0);
        assert_eq!(Action::decode_list(&out).unwrap(), vec![a.clone()]);
        let mut old = Vec::new();
        crate::of10::actions::encode(std::slice::from_ref(&a), &mut old);
        let back = crate::of10::actions::decode(&old).unwrap();
        assert!(matches!(&back[..], [Action::Ct(_)]), "{back:?}");
        for cut in 0..out.len() {
            let _ = Action::decode_list(&out[..cut]);
            let _ = crate::of10::actions::decode(&old[..cut.min(old.len())]);
        }
        let vsw = crate::to_vsw::ct_to_vsw_for_tests(&a).unwrap();
        assert_eq!(
            vsw.format_args(),
            "commit,table=3,zone=7,nat(src=10.0.0.1-10.0.0.3:1000-2000,random),exec(set_field:0x2a->ct_mark)"
        );
        let again = crate::from_vsw::ct_from_vsw(&vsw);
        assert_eq!(Action::Ct(Box::new(again)), a);
    }

    /// What Open vSwitch refuses is refused, never a panic: a load past its field
    /// (any offset), both NAT ends, hash with random, a range backwards.
    #[test]
    fn hostile_ct_contents_are_refused() {
        let with = |inner: Action| {
            let Action::Ct(mut ct) = sample() else {
                unreachable!()
            };
            ct.actions = vec![inner];
            crate::to_vsw::ct_to_vsw_for_tests(&Action::Ct(ct))
        };
        let (class, number) = crate::oxm::wire_id(crate::oxm::CT_MARK);
        let mark = crate::nx_action::nxm_header(class, number, 4);
        for ofs in [0u16, 31, 32, 127, 128, 1000] {
            let load = crate::nx_action::NxAction::RegLoad {
                ofs_nbits: (ofs << 6) | 3,
                dst: mark,
                value: 0xf,
            };
            let r = with(Action::Nx(load));
            assert_eq!(r.is_ok(), ofs + 4 <= 32, "ofs {ofs}: {r:?}");
        }
        for n in [
            NatWire {
                flags: NX_NAT_F_SRC | NX_NAT_F_DST,
                ..NatWire::default()
            },
            NatWire {
                flags: NX_NAT_F_SRC | NX_NAT_F_PROTO_HASH | NX_NAT_F_PROTO_RANDOM,
                ipv4: Some((1, None)),
                ..NatWire::default()
            },
            NatWire {
                flags: NX_NAT_F_DST,
                ipv4: Some((5, Some(4))),
                ..NatWire::default()
            },
            NatWire {
                flags: NX_NAT_F_DST,
                ipv4: Some((5, None)),
                ports: Some((80, Some(79))),
                ..NatWire::default()
            },
        ] {
            assert!(with(Action::Nat(n.clone())).is_err(), "{n:?}");
        }
    }
}
