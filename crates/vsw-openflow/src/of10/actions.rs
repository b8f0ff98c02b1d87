//! OpenFlow 1.0's actions: `output` with a 16-bit port, the `SET_*` actions that
//! 1.2 replaced by set-field, `STRIP_VLAN`, `ENQUEUE` — and Nicira's vendor
//! actions, which have the same layout in every version. They are read into the
//! actions of 1.3 on (what the rest of vsw takes) and written back from them;
//! 1.1+ instructions and actions without a 1.0 form are written as Open vSwitch
//! writes them to a 1.0 connection (`goto_table` as `resubmit(,T)`, a set-field
//! 1.0 has no action for as NXAST_REG_LOAD2, `move` as NXAST_REG_MOVE), and the
//! few with no form at all (`group`, `meter`, `write_actions`, `clear_actions`,
//! `copy_ttl_in/out`, `push_vlan`, whose tag 1.0's `mod_vlan_vid` pushes) are
//! left out of what a 1.0 connection reads.

use crate::flow_mod::{Action, BadFlowMod, Instruction, NXAST_CLONE, OFPAT_EXPERIMENTER};
use crate::frame::len16;
use crate::nx_action::NxAction;
use crate::oxm::OxmField;
use crate::reader::Reader;
use crate::tlv::NX_VENDOR_ID;

use super::matching::{port_from_16, port_to_16};

const OUTPUT: u16 = 0;
const SET_VLAN_VID: u16 = 1;
const SET_VLAN_PCP: u16 = 2;
const STRIP_VLAN: u16 = 3;
const SET_DL_SRC: u16 = 4;
const SET_DL_DST: u16 = 5;
const SET_NW_SRC: u16 = 6;
const SET_NW_DST: u16 = 7;
const SET_NW_TOS: u16 = 8;
const SET_TP_SRC: u16 = 9;
const SET_TP_DST: u16 = 10;
const ENQUEUE: u16 = 11;
/// Nicira's actions only 1.0 needs: NXAST_SET_QUEUE, NXAST_WRITE_METADATA.
const NXAST_SET_QUEUE: u16 = 4;
const NXAST_WRITE_METADATA: u16 = 22;
/// How deep clones may nest (as in 1.3's decoder).
const MAX_CLONE_DEPTH: usize = 16;

fn set(field: u8, value: &[u8]) -> Action {
    Action::SetField(OxmField {
        field,
        value: value.to_vec(),
        mask: None,
    })
}

/// A 1.0 action list.
pub fn decode(buf: &[u8]) -> Result<Vec<Action>, BadFlowMod> {
    decode_nested(buf, 0)
}

fn decode_nested(buf: &[u8], depth: usize) -> Result<Vec<Action>, BadFlowMod> {
    let mut r = Reader::new(buf);
    let mut out = Vec::new();
    while !r.is_empty() {
        let whole = r.rest_len();
        let (kind, len, body) = crate::flow_mod::next_action(&mut r)?;
        let mut b = Reader::new(body);
        let fixed = |want: usize| crate::flow_mod::action_len_is(len, want);
        let short = BadFlowMod::BadActionLen;
        match kind {
            OUTPUT => {
                fixed(8)?;
                let port = port_from_16(b.u16().ok_or(short)?);
                let max_len = b.u16().ok_or(short)?;
                out.push(Action::Output { port, max_len });
            }
            SET_VLAN_VID => {
                fixed(8)?;
                let vid = b.u16().ok_or(short)?;
                if vid > 0xfff {
                    return Err(BadFlowMod::BadArgument);
                }
                out.push(set(6, &(0x1000 | vid).to_be_bytes()));
            }
            SET_VLAN_PCP => {
                fixed(8)?;
                let pcp = b.u8().ok_or(short)?;
                if pcp > 7 {
                    return Err(BadFlowMod::BadArgument);
                }
                out.push(set(7, &[pcp]));
            }
            STRIP_VLAN => {
                fixed(8)?;
                out.push(Action::PopVlan);
            }
            SET_DL_SRC | SET_DL_DST => {
                fixed(16)?;
                let mac = b.bytes(6).ok_or(short)?;
                out.push(set(if kind == SET_DL_SRC { 4 } else { 3 }, mac));
            }
            SET_NW_SRC | SET_NW_DST => {
                fixed(8)?;
                let addr = b.bytes(4).ok_or(short)?;
                out.push(set(if kind == SET_NW_SRC { 11 } else { 12 }, addr));
            }
            SET_NW_TOS => {
                fixed(8)?;
                let tos = b.u8().ok_or(short)?;
                if tos & 3 != 0 {
                    return Err(BadFlowMod::BadArgument);
                }
                out.push(set(8, &[tos >> 2]));
            }
            // Whichever transport the packet has: vsw's port rewrite is the same.
            SET_TP_SRC | SET_TP_DST => {
                fixed(8)?;
                let port = b.bytes(2).ok_or(short)?;
                out.push(set(if kind == SET_TP_SRC { 13 } else { 14 }, port));
            }
            ENQUEUE => {
                fixed(16)?;
                let port = port_from_16(b.u16().ok_or(short)?);
                b.bytes(6).ok_or(short)?;
                let queue = b.u32().ok_or(short)?;
                out.push(Action::SetQueue(queue));
                out.push(Action::Output { port, max_len: 0 });
            }
            OFPAT_EXPERIMENTER => {
                if b.u32().ok_or(short)? != NX_VENDOR_ID {
                    return Err(BadFlowMod::BadExperimenter);
                }
                let subtype = b.u16().ok_or(short)?;
                match subtype {
                    NXAST_CLONE => {
                        if depth >= MAX_CLONE_DEPTH {
                            return Err(BadFlowMod::BadArgument);
                        }
                        if b.bytes(6).ok_or(short)?.iter().any(|x| *x != 0) {
                            return Err(BadFlowMod::BadArgument);
                        }
                        out.push(Action::Clone(decode_nested(b.rest(), depth + 1)?));
                    }
                    crate::nx_ct::NXAST_CT => {
                        if depth >= MAX_CLONE_DEPTH {
                            return Err(BadFlowMod::BadArgument);
                        }
                        let mut ct = crate::nx_ct::CtWire::decode_head(&mut b)?;
                        ct.actions = decode_nested(b.rest(), depth + 1)?;
                        out.push(Action::Ct(Box::new(ct)));
                    }
                    NXAST_SET_QUEUE => {
                        fixed(16)?;
                        b.bytes(2).ok_or(short)?;
                        out.push(Action::SetQueue(b.u32().ok_or(short)?));
                    }
                    // Every other Nicira action is read as 1.3 reads it.
                    _ => {
                        let start = buf.len() - whole;
                        out.extend(Action::decode_list(&buf[start..start + len])?);
                    }
                }
            }
            _ => return Err(BadFlowMod::BadActionType),
        }
    }
    Ok(out)
}

/// The 1.0 action list a flow's instructions are written as.
pub fn encode_instructions(instructions: &[Instruction], out: &mut Vec<u8>) {
    for i in instructions {
        match i {
            Instruction::ApplyActions(actions) => encode(actions, out),
            Instruction::GotoTable(table) => encode_one(
                &Action::Nx(NxAction::ResubmitTable {
                    in_port: 0xfff8,
                    table: *table,
                }),
                out,
            ),
            Instruction::WriteMetadata { metadata, mask } => {
                let start = nx_header(NXAST_WRITE_METADATA, out);
                out.extend_from_slice(&[0; 6]);
                out.extend_from_slice(&metadata.to_be_bytes());
                out.extend_from_slice(&mask.to_be_bytes());
                finish(start, out);
            }
            Instruction::WriteActions(_) | Instruction::ClearActions | Instruction::Meter(_) => {}
        }
    }
}

/// A 1.0 action list.
pub fn encode(actions: &[Action], out: &mut Vec<u8>) {
    for a in actions {
        encode_one(a, out);
    }
}

fn nx_header(subtype: u16, out: &mut Vec<u8>) -> usize {
    let start = out.len();
    out.extend_from_slice(&OFPAT_EXPERIMENTER.to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&NX_VENDOR_ID.to_be_bytes());
    out.extend_from_slice(&subtype.to_be_bytes());
    start
}

/// Pads the action started at `start` to 8 bytes and writes its length.
fn finish(start: usize, out: &mut Vec<u8>) {
    let len = out.len() - start;
    out.extend(std::iter::repeat_n(0u8, len.div_ceil(8) * 8 - len));
    let len = len16(out.len() - start);
    out[start + 2..start + 4].copy_from_slice(&len.to_be_bytes());
}

fn simple(kind: u16, body: &[u8], out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&kind.to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(body);
    finish(start, out);
}

fn encode_one(a: &Action, out: &mut Vec<u8>) {
    match a {
        Action::Output { port, max_len } => {
            // vsw's ports are numbered below 1.0's reserved range; a port that is
            // not (none is made) goes as port 0, which no packet leaves by.
            let p = port_to_16(*port).unwrap_or(0);
            let mut body = p.to_be_bytes().to_vec();
            body.extend_from_slice(&max_len.to_be_bytes());
            simple(OUTPUT, &body, out);
        }
        Action::SetField(f) if f.mask.is_none() => match (f.field, f.value.as_slice()) {
            (6, [hi, lo]) if hi & 0x10 != 0 => {
                simple(SET_VLAN_VID, &[hi & 0x0f, *lo, 0, 0], out);
            }
            (7, [pcp]) => simple(SET_VLAN_PCP, &[*pcp, 0, 0, 0], out),
            (3 | 4, mac) => {
                let kind = if f.field == 4 { SET_DL_SRC } else { SET_DL_DST };
                let mut body = mac.to_vec();
                body.extend_from_slice(&[0; 6]);
                simple(kind, &body, out);
            }
            (11, addr) => simple(SET_NW_SRC, addr, out),
            (12, addr) => simple(SET_NW_DST, addr, out),
            (8, [dscp]) => simple(SET_NW_TOS, &[dscp << 2, 0, 0, 0], out),
            (13 | 15 | 17, [hi, lo]) => simple(SET_TP_SRC, &[*hi, *lo, 0, 0], out),
            (14 | 16 | 18, [hi, lo]) => simple(SET_TP_DST, &[*hi, *lo, 0, 0], out),
            _ => encode_one(
                &Action::Nx(crate::nx_action::masked_set_field_as_load(f)),
                out,
            ),
        },
        Action::SetField(f) => encode_one(
            &Action::Nx(crate::nx_action::masked_set_field_as_load(f)),
            out,
        ),
        Action::PopVlan => simple(STRIP_VLAN, &[0; 4], out),
        Action::SetQueue(q) => {
            let start = nx_header(NXAST_SET_QUEUE, out);
            out.extend_from_slice(&[0, 0]);
            out.extend_from_slice(&q.to_be_bytes());
            finish(start, out);
        }
        Action::DecNwTtl => encode_one(&Action::Nx(NxAction::DecTtl), out),
        Action::SetNwTtl(ttl) => encode_one(&set(crate::oxm::IP_TTL, &[*ttl]), out),
        Action::PushMpls(t) => encode_one(&Action::Nx(NxAction::PushMpls(*t)), out),
        Action::PopMpls(t) => encode_one(&Action::Nx(NxAction::PopMpls(*t)), out),
        Action::SetMplsTtl(t) => encode_one(&Action::Nx(NxAction::SetMplsTtl(*t)), out),
        Action::DecMplsTtl => encode_one(&Action::Nx(NxAction::DecMplsTtl), out),
        Action::SetMplsLabel(l) => encode_one(&Action::Nx(NxAction::SetMplsLabel(*l)), out),
        Action::SetMplsTc(t) => encode_one(&Action::Nx(NxAction::SetMplsTc(*t)), out),
        Action::CopyField(c) => encode_one(&Action::Nx(NxAction::RegMove(*c)), out),
        Action::Clone(inner) => {
            let start = nx_header(NXAST_CLONE, out);
            out.extend_from_slice(&[0; 6]);
            encode(inner, out);
            finish(start, out);
        }
        Action::Ct(ct) => {
            let start = nx_header(crate::nx_ct::NXAST_CT, out);
            ct.encode_head(out);
            encode(&ct.actions, out);
            finish(start, out);
        }
        Action::Nx(_) | Action::Nat(_) => a.encode(out),
        Action::PushVlan(_)
        | Action::PushPbb(_)
        | Action::PopPbb
        | Action::CopyTtlOut
        | Action::CopyTtlIn
        | Action::Group(_)
        | Action::Meter(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_1_0_action_round_trips() {
        let actions = vec![
            Action::Output {
                port: 0xffff_fffd,
                max_len: 128,
            },
            set(6, &[0x10, 0x2a]),
            set(7, &[3]),
            Action::PopVlan,
            set(4, &[2, 0, 0, 0, 0, 1]),
            set(3, &[2, 0, 0, 0, 0, 2]),
            set(11, &[198, 18, 0, 1]),
            set(12, &[198, 18, 0, 2]),
            set(8, &[46]),
            set(13, &[0, 80]),
            set(14, &[1, 0]),
            Action::SetQueue(7),
            Action::Nx(NxAction::ResubmitTable {
                in_port: 0xfff8,
                table: 3,
            }),
            Action::Clone(vec![
                Action::PopVlan,
                Action::Output {
                    port: 2,
                    max_len: 0,
                },
            ]),
        ];
        let mut wire = Vec::new();
        encode(&actions, &mut wire);
        // OFPAT10_OUTPUT: 8 bytes, CONTROLLER in 16 bits.
        assert_eq!(&wire[..8], &[0, 0, 0, 8, 0xff, 0xfd, 0, 128]);
        assert_eq!(decode(&wire), Ok(actions));
    }

    #[test]
    fn instructions_go_as_open_vswitch_writes_them_to_1_0() {
        let mut wire = Vec::new();
        encode_instructions(
            &[
                Instruction::ApplyActions(vec![Action::Output {
                    port: 1,
                    max_len: 0,
                }]),
                Instruction::ClearActions,
                Instruction::GotoTable(2),
            ],
            &mut wire,
        );
        assert_eq!(
            decode(&wire),
            Ok(vec![
                Action::Output {
                    port: 1,
                    max_len: 0
                },
                Action::Nx(NxAction::ResubmitTable {
                    in_port: 0xfff8,
                    table: 2
                })
            ])
        );
    }

    #[test]
    fn bad_1_0_actions_are_refused_with_the_reason() {
        assert_eq!(decode(&[0, 0, 0, 8, 0, 1]), Err(BadFlowMod::BadActionLen));
        assert_eq!(
            decode(&[0, 0, 0, 16, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
            Err(BadFlowMod::BadActionLen),
            "an output of the wrong length"
        );
        assert_eq!(
            decode(&[0, 1, 0, 8, 0x10, 0, 0, 0]),
            Err(BadFlowMod::BadArgument),
            "a VID over 4095"
        );
        assert_eq!(
            decode(&[0, 12, 0, 8, 0, 0, 0, 0]),
            Err(BadFlowMod::BadActionType)
        );
        assert_eq!(
            decode(&[0xff, 0xff, 0, 16, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0]),
            Err(BadFlowMod::BadExperimenter)
        );
    }
}
