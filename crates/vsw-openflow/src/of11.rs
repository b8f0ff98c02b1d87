//! OpenFlow 1.1: 1.2's messages (1.2 grew out of it) with a fixed 88-byte match
//! (`ofp11_match`: wildcard bits, masks whose set bits are "don't care") where
//! 1.2 has OXM, ten set actions of their own where 1.2 has set-field, a packet-in
//! that names its ports instead of carrying a match, and shorter tables of
//! statistics. A 1.1 request is rewritten into 1.2's layout and read by 1.2's
//! codec ([`to_1_2`]); what 1.1 lays out its own way is written here. What 1.2
//! on added — roles, group features, set-field and the later actions — is not
//! 1.1's: refused as a type, a statistic or an action it does not have.

use crate::error::Refusal;
use crate::flow_mod::{Action, BadFlowMod, Instruction};
use crate::flow_stats::{FlowRemoved, FlowStatsEntry};
use crate::frame::{len16, Header, HEADER_LEN};
use crate::message::Message;
use crate::multipart::{MultipartReply, OFPT_MULTIPART_REQUEST};
use crate::oxm::{BadMatch, OxmField, OxmMatch};
use crate::table_stats::TableStats;
use crate::version::Version;

/// `ofp11_match`'s type (OFPMT_STANDARD) and length.
const OFPMT_STANDARD: u16 = 0;
pub const MATCH_LEN: usize = 88;

/// Its wildcard bits: a field whose bit is set is not matched.
const FW_IN_PORT: u32 = 1 << 0;
const FW_DL_VLAN: u32 = 1 << 1;
const FW_DL_VLAN_PCP: u32 = 1 << 2;
const FW_DL_TYPE: u32 = 1 << 3;
const FW_NW_TOS: u32 = 1 << 4;
const FW_NW_PROTO: u32 = 1 << 5;
const FW_TP_SRC: u32 = 1 << 6;
const FW_TP_DST: u32 = 1 << 7;
const FW_MPLS_LABEL: u32 = 1 << 8;
const FW_MPLS_TC: u32 = 1 << 9;
const FW_ALL: u32 = (1 << 10) - 1;

/// `dl_vlan`: a tag of any VID; no tag.
const VID_ANY: u16 = 0xfffe;
const VID_NONE: u16 = 0xffff;

/// 1.1's message types end with QUEUE_GET_CONFIG_REPLY (23); its statistics with
/// the group description (7).
const LAST_TYPE: u8 = 23;
const LAST_STATS_TYPE: u16 = 7;

/// Message types whose bodies hold a match or actions.
const OFPT_PACKET_OUT: u8 = 13;
const OFPT_FLOW_MOD: u8 = 14;
const OFPT_GROUP_MOD: u8 = 15;
const OFPMP_FLOW: u16 = 1;
const OFPMP_AGGREGATE: u16 = 2;

/// 1.1's own set actions (OFPAT11_SET_*), 1.2's set-fields.
const SET_VLAN_VID: u16 = 1;
const SET_VLAN_PCP: u16 = 2;
const SET_DL_SRC: u16 = 3;
const SET_DL_DST: u16 = 4;
const SET_NW_SRC: u16 = 5;
const SET_NW_DST: u16 = 6;
const SET_NW_TOS: u16 = 7;
const SET_NW_ECN: u16 = 8;
const SET_TP_SRC: u16 = 9;
const SET_TP_DST: u16 = 10;

/// Instructions that hold actions.
const OFPIT_WRITE_ACTIONS: u16 = 3;
const OFPIT_APPLY_ACTIONS: u16 = 4;

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn bad_len() -> Refusal {
    Refusal::BadLen
}

/// A length the rewrite made, where a 16-bit length field must hold it: 1.2's
/// set-fields and OXM are longer than 1.1's own, so a 1.1 message near 64 KiB
/// may not fit one 1.2 message (BAD_LEN, as one that long would be).
fn length16(n: usize) -> Result<[u8; 2], Refusal> {
    u16::try_from(n)
        .map(u16::to_be_bytes)
        .map_err(|_| bad_len())
}

fn bad_match(e: BadMatch) -> Refusal {
    Refusal::FlowMod(BadFlowMod::Match(e))
}

/// Why a 1.1 connection's message is refused before it is read: a type or a
/// statistic 1.2 on added.
pub fn refused(kind: u8, body: &[u8]) -> Option<Refusal> {
    if kind > LAST_TYPE {
        return Some(Refusal::BadType);
    }
    if kind == OFPT_MULTIPART_REQUEST {
        let stat = body.get(..2).map(|b| u16_at(b, 0));
        if stat.is_some_and(|s| s > LAST_STATS_TYPE && s != 0xffff) {
            return Some(Refusal::BadMultipart);
        }
    }
    None
}

/// A 1.1 message in 1.2's layout (its header saying 1.2): matches as OXM, 1.1's
/// set actions as set-fields. What 1.1 and 1.2 lay out alike is copied.
pub fn to_1_2(message: &[u8]) -> Result<Vec<u8>, Refusal> {
    let h = Header::parse(message).ok_or_else(bad_len)?;
    let body = message
        .get(HEADER_LEN..usize::from(h.length))
        .ok_or_else(bad_len)?;
    let mut out = Vec::with_capacity(message.len() + 32);
    Header {
        version: Version::V1_2.wire(),
        ..h
    }
    .write(&mut out);
    match h.kind {
        OFPT_FLOW_MOD => {
            let fixed = body.get(..40).ok_or_else(bad_len)?;
            out.extend_from_slice(fixed);
            let rest = &body[40..];
            let m = rest.get(..MATCH_LEN).ok_or_else(bad_len)?;
            decode_match(m).map_err(bad_match)?.encode(&mut out);
            instructions_to_1_2(&rest[MATCH_LEN..], &mut out)?;
        }
        OFPT_MULTIPART_REQUEST
            if body.len() >= 8 && matches!(u16_at(body, 0), OFPMP_FLOW | OFPMP_AGGREGATE) =>
        {
            // The multipart header, the request's fixed 32 bytes, its match.
            let fixed = body.get(..8 + 32).ok_or_else(bad_len)?;
            out.extend_from_slice(fixed);
            let m = body.get(40..40 + MATCH_LEN).ok_or_else(bad_len)?;
            if body.len() != 40 + MATCH_LEN {
                return Err(bad_len());
            }
            decode_match(m).map_err(bad_match)?.encode(&mut out);
        }
        OFPT_PACKET_OUT => {
            let fixed = body.get(..16).ok_or_else(bad_len)?;
            let n = usize::from(u16_at(fixed, 8));
            let actions = body.get(16..16 + n).ok_or_else(bad_len)?;
            let mut rewritten = Vec::with_capacity(n + 16);
            actions_to_1_2(actions, &mut rewritten)?;
            out.extend_from_slice(&fixed[..8]);
            out.extend_from_slice(&length16(rewritten.len())?);
            out.extend_from_slice(&fixed[10..]);
            out.extend_from_slice(&rewritten);
            out.extend_from_slice(&body[16 + n..]);
        }
        OFPT_GROUP_MOD => {
            let fixed = body.get(..8).ok_or_else(bad_len)?;
            out.extend_from_slice(fixed);
            let mut rest = &body[8..];
            while !rest.is_empty() {
                let len = usize::from(u16_at(rest.get(..2).ok_or_else(bad_len)?, 0));
                if len < 16 || len > rest.len() {
                    return Err(bad_len());
                }
                let start = out.len();
                out.extend_from_slice(&rest[..16]);
                actions_to_1_2(&rest[16..len], &mut out)?;
                let n = length16(out.len() - start)?;
                out[start..start + 2].copy_from_slice(&n);
                rest = &rest[len..];
            }
        }
        _ => out.extend_from_slice(body),
    }
    length16(out.len())?;
    Ok(crate::message::finish(out))
}

/// An instruction list with each action list's 1.1 set actions made set-fields.
fn instructions_to_1_2(mut rest: &[u8], out: &mut Vec<u8>) -> Result<(), Refusal> {
    let bad = || Refusal::FlowMod(BadFlowMod::BadInstructionLen);
    while !rest.is_empty() {
        let head = rest.get(..4).ok_or_else(bad)?;
        let (kind, len) = (u16_at(head, 0), usize::from(u16_at(head, 2)));
        if len < 8 || len % 8 != 0 || len > rest.len() {
            return Err(bad());
        }
        if matches!(kind, OFPIT_WRITE_ACTIONS | OFPIT_APPLY_ACTIONS) {
            let start = out.len();
            out.extend_from_slice(&rest[..8]);
            actions_to_1_2(&rest[8..len], out)?;
            let n = length16(out.len() - start)?;
            out[start + 2..start + 4].copy_from_slice(&n);
        } else {
            out.extend_from_slice(&rest[..len]);
        }
        rest = &rest[len..];
    }
    Ok(())
}

/// An action list with 1.1's set actions (types 1–10) made 1.2's set-fields; the
/// rest (output, the TTL, MPLS, VLAN push and pop, group, queue and Nicira's
/// actions) are numbered alike and copied.
fn actions_to_1_2(mut rest: &[u8], out: &mut Vec<u8>) -> Result<(), Refusal> {
    let bad = || Refusal::FlowMod(BadFlowMod::BadActionLen);
    while !rest.is_empty() {
        let head = rest.get(..4).ok_or_else(bad)?;
        let (kind, len) = (u16_at(head, 0), usize::from(u16_at(head, 2)));
        if len < 8 || len % 8 != 0 || len > rest.len() {
            return Err(bad());
        }
        let a = &rest[..len];
        let set = |field: u8, value: Vec<u8>| {
            Action::SetField(OxmField {
                field,
                value,
                mask: None,
            })
        };
        let want = |n: usize| if len == n { Ok(()) } else { Err(bad()) };
        // A value wider than its field: BAD_ARGUMENT, as Open vSwitch answers.
        let at_most = |v: u16, max: u16| {
            if v <= max {
                Ok(())
            } else {
                Err(Refusal::FlowMod(BadFlowMod::BadArgument))
            }
        };
        let action = match kind {
            SET_VLAN_VID => {
                want(8)?;
                let vid = u16_at(a, 4);
                at_most(vid, 0x0fff)?;
                Some(set(6, (0x1000 | vid).to_be_bytes().to_vec()))
            }
            SET_VLAN_PCP => {
                want(8)?;
                at_most(a[4].into(), 7)?;
                Some(set(7, vec![a[4]]))
            }
            SET_DL_SRC => want(16).map(|()| Some(set(4, a[4..10].to_vec())))?,
            SET_DL_DST => want(16).map(|()| Some(set(3, a[4..10].to_vec())))?,
            SET_NW_SRC => want(8).map(|()| Some(set(11, a[4..8].to_vec())))?,
            SET_NW_DST => want(8).map(|()| Some(set(12, a[4..8].to_vec())))?,
            // The TOS byte's DSCP bits; its ECN bits are SET_NW_ECN's.
            SET_NW_TOS => {
                want(8)?;
                at_most((a[4] & 3).into(), 0)?;
                Some(set(8, vec![a[4] >> 2]))
            }
            SET_NW_ECN => {
                want(8)?;
                at_most(a[4].into(), 3)?;
                Some(set(9, vec![a[4]]))
            }
            // A port whichever the transport: 1.2's TCP field, as vsw takes any.
            SET_TP_SRC => want(8).map(|()| Some(set(13, a[4..6].to_vec())))?,
            SET_TP_DST => want(8).map(|()| Some(set(14, a[4..6].to_vec())))?,
            // 1.1's others (output, TTLs, MPLS, VLAN push and pop, queue, group)
            // are numbered as 1.2's, and Nicira's are Nicira's; set-field and the
            // actions after it are not 1.1's.
            0 | 11..=24 | 0xffff => None,
            _ => return Err(Refusal::FlowMod(BadFlowMod::BadActionType)),
        };
        match action {
            Some(x) => x.encode(out),
            None => out.extend_from_slice(a),
        }
        rest = &rest[len..];
    }
    Ok(())
}

/// An `ofp11_match` as the OXM fields it stands for, prerequisites first.
pub fn decode_match(m: &[u8]) -> Result<OxmMatch, BadMatch> {
    if m.len() < MATCH_LEN {
        return Err(BadMatch::BadLen);
    }
    if u16_at(m, 0) != OFPMT_STANDARD {
        return Err(BadMatch::BadType);
    }
    if usize::from(u16_at(m, 2)) != MATCH_LEN {
        return Err(BadMatch::BadLen);
    }
    let wc = u32_at(m, 8);
    let on = |bit: u32| wc & bit == 0;
    let mut fields = Vec::new();
    let exact = |field: u8, value: &[u8]| OxmField {
        field,
        value: value.to_vec(),
        mask: None,
    };
    // A mask whose set bits are ignored, as OXM's whose set bits are matched:
    // absent when nothing is matched, none when everything is.
    let masked = |field: u8, value: &[u8], ignored: &[u8]| -> Option<OxmField> {
        let mask: Vec<u8> = ignored.iter().map(|b| !b).collect();
        if mask.iter().all(|b| *b == 0) {
            return None;
        }
        let value = value.iter().zip(&mask).map(|(v, k)| v & k).collect();
        let full = mask.iter().all(|b| *b == 0xff);
        Some(OxmField {
            field,
            value,
            mask: (!full).then_some(mask),
        })
    };
    if on(FW_IN_PORT) {
        fields.push(exact(0, &m[4..8]));
    }
    fields.extend(masked(2, &m[72..80], &m[80..88]));
    fields.extend(masked(3, &m[24..30], &m[30..36]));
    fields.extend(masked(4, &m[12..18], &m[18..24]));
    let dl_type = on(FW_DL_TYPE).then(|| u16_at(m, 40));
    if let Some(t) = dl_type {
        fields.push(exact(5, &t.to_be_bytes()));
    }
    // As Open vSwitch reads 1.1: the priority only of a tag the match asks for
    // (any VID, or one); a VID or priority past its bits is BAD_VALUE.
    if on(FW_DL_VLAN) {
        let tagged = match u16_at(m, 36) {
            VID_NONE => {
                fields.push(exact(6, &[0, 0]));
                false
            }
            VID_ANY => {
                fields.push(OxmField {
                    field: 6,
                    value: vec![0x10, 0],
                    mask: Some(vec![0x10, 0]),
                });
                true
            }
            v if v < 0x1000 => {
                fields.push(exact(6, &(0x1000 | v).to_be_bytes()));
                true
            }
            _ => return Err(BadMatch::BadValue),
        };
        if tagged && on(FW_DL_VLAN_PCP) {
            if m[38] > 7 {
                return Err(BadMatch::BadValue);
            }
            fields.push(exact(7, &[m[38]]));
        }
    }
    let proto = on(FW_NW_PROTO).then_some(m[43]);
    match dl_type {
        Some(0x0800) => {
            if on(FW_NW_TOS) {
                // The DSCP bits of the TOS byte: ECN's are not 1.1's to match.
                if m[42] & 3 != 0 {
                    return Err(BadMatch::BadValue);
                }
                fields.push(exact(8, &[m[42] >> 2]));
            }
            if let Some(p) = proto {
                fields.push(exact(10, &[p]));
            }
            fields.extend(masked(11, &m[44..48], &m[48..52]));
            fields.extend(masked(12, &m[52..56], &m[56..60]));
            let ports = match proto {
                Some(6) => Some((13, 14, 2)),
                Some(17) => Some((15, 16, 2)),
                Some(132) => Some((17, 18, 2)),
                Some(1) => Some((19, 20, 1)),
                _ => None,
            };
            if let Some((src, dst, n)) = ports {
                // ICMP's type and code sit in the ports' low bytes.
                if on(FW_TP_SRC) {
                    fields.push(exact(src, &m[62 - n..62]));
                }
                if on(FW_TP_DST) {
                    fields.push(exact(dst, &m[64 - n..64]));
                }
            }
        }
        Some(0x0806) => {
            if let Some(p) = proto {
                fields.push(exact(21, &[0, p]));
            }
            fields.extend(masked(22, &m[44..48], &m[48..52]));
            fields.extend(masked(23, &m[52..56], &m[56..60]));
        }
        Some(0x8847 | 0x8848) => {
            if on(FW_MPLS_LABEL) {
                fields.push(exact(34, &(u32_at(m, 64) & 0xf_ffff).to_be_bytes()));
            }
            if on(FW_MPLS_TC) {
                fields.push(exact(35, &[m[68] & 7]));
            }
        }
        _ => {}
    }
    Ok(OxmMatch { fields })
}

/// The `ofp11_match` of an OXM match: the fields 1.1 has; what it has not
/// (IPv6, tunnels, registers …) is left out, as Open vSwitch leaves it.
pub fn encode_match(m: &OxmMatch, out: &mut Vec<u8>) {
    let mut b = [0u8; MATCH_LEN];
    b[2..4].copy_from_slice(&(MATCH_LEN as u16).to_be_bytes());
    let mut wc = FW_ALL;
    // Every masked field starts all "don't care".
    for r in [18..24, 30..36, 48..52, 56..60, 80..88] {
        b[r].fill(0xff);
    }
    let put = |b: &mut [u8; MATCH_LEN], at: usize, mask_at: usize, f: &OxmField| {
        let n = f.value.len();
        b[at..at + n].copy_from_slice(&f.value);
        for i in 0..n {
            let care = f
                .mask
                .as_ref()
                .map_or(0xff, |k| k.get(i).copied().unwrap_or(0xff));
            b[mask_at + i] = !care;
        }
    };
    for f in &m.fields {
        let v = &f.value;
        match (f.field, v.len()) {
            (0, 4) => {
                b[4..8].copy_from_slice(v);
                wc &= !FW_IN_PORT;
            }
            (2, 8) => put(&mut b, 72, 80, f),
            (3, 6) => put(&mut b, 24, 30, f),
            (4, 6) => put(&mut b, 12, 18, f),
            (5, 2) => {
                b[40..42].copy_from_slice(v);
                wc &= !FW_DL_TYPE;
            }
            (6, 2) => {
                let value = u16::from_be_bytes([v[0], v[1]]);
                let vid = match f.mask.as_deref() {
                    None if value & 0x1000 == 0 => Some(VID_NONE),
                    None => Some(value & 0x0fff),
                    Some([0x10, 0]) if value & 0x1000 != 0 => Some(VID_ANY),
                    // A mask 1.1 cannot say: any VID.
                    Some(_) => None,
                };
                if let Some(vid) = vid {
                    b[36..38].copy_from_slice(&vid.to_be_bytes());
                    wc &= !FW_DL_VLAN;
                }
            }
            (7, 1) => {
                b[38] = v[0];
                wc &= !FW_DL_VLAN_PCP;
            }
            (8, 1) => {
                b[42] = v[0] << 2;
                wc &= !FW_NW_TOS;
            }
            (10, 1) => {
                b[43] = v[0];
                wc &= !FW_NW_PROTO;
            }
            (21, 2) => {
                b[43] = v[1];
                wc &= !FW_NW_PROTO;
            }
            (11 | 22, 4) => put(&mut b, 44, 48, f),
            (12 | 23, 4) => put(&mut b, 52, 56, f),
            (13 | 15 | 17, 2) => {
                b[60..62].copy_from_slice(v);
                wc &= !FW_TP_SRC;
            }
            (14 | 16 | 18, 2) => {
                b[62..64].copy_from_slice(v);
                wc &= !FW_TP_DST;
            }
            (19, 1) => {
                b[61] = v[0];
                wc &= !FW_TP_SRC;
            }
            (20, 1) => {
                b[63] = v[0];
                wc &= !FW_TP_DST;
            }
            (34, 4) => {
                b[64..68].copy_from_slice(v);
                wc &= !FW_MPLS_LABEL;
            }
            (35, 1) => {
                b[68] = v[0];
                wc &= !FW_MPLS_TC;
            }
            _ => {}
        }
    }
    b[8..12].copy_from_slice(&wc.to_be_bytes());
    out.extend_from_slice(&b);
}

/// An action list as 1.1 says it: 1.2's set-fields of the fields 1.1 sets as its
/// own set actions, every other write as Nicira's load (as Open vSwitch writes it
/// for 1.1), the meter left to its instruction (1.1 has none).
pub fn encode_actions(actions: &[Action], out: &mut Vec<u8>) {
    for a in crate::as_read::actions_as_version(Version::V1_2, actions) {
        match &a {
            Action::SetField(f) if f.mask.is_none() => encode_set(f, out),
            Action::SetField(f) => {
                Action::Nx(crate::nx_action::masked_set_field_as_load(f)).encode(out)
            }
            Action::Meter(_) => {}
            other => other.encode(out),
        }
    }
}

fn encode_set(f: &OxmField, out: &mut Vec<u8>) {
    let simple = |kind: u16, body: &[u8], out: &mut Vec<u8>| {
        let start = out.len();
        out.extend_from_slice(&kind.to_be_bytes());
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(body);
        let padded = (out.len() - start).div_ceil(8) * 8;
        out.resize(start + padded, 0);
        let len = len16(padded);
        out[start + 2..start + 4].copy_from_slice(&len.to_be_bytes());
    };
    let v = f.value.as_slice();
    match (f.field, v) {
        (6, [hi, lo]) => simple(SET_VLAN_VID, &[hi & 0x0f, *lo], out),
        (7, [pcp]) => simple(SET_VLAN_PCP, &[*pcp], out),
        (4, mac) if mac.len() == 6 => simple(SET_DL_SRC, mac, out),
        (3, mac) if mac.len() == 6 => simple(SET_DL_DST, mac, out),
        (11, a) if a.len() == 4 => simple(SET_NW_SRC, a, out),
        (12, a) if a.len() == 4 => simple(SET_NW_DST, a, out),
        (8, [dscp]) => simple(SET_NW_TOS, &[dscp << 2], out),
        (9, [ecn]) => simple(SET_NW_ECN, &[*ecn], out),
        (13 | 15 | 17, p) if p.len() == 2 => simple(SET_TP_SRC, p, out),
        (14 | 16 | 18, p) if p.len() == 2 => simple(SET_TP_DST, p, out),
        _ => Action::Nx(crate::nx_action::masked_set_field_as_load(f)).encode(out),
    }
}

/// A flow's instructions as 1.1 says them: its actions in 1.1's words, no meter.
pub fn encode_instructions(instructions: &[Instruction], out: &mut Vec<u8>) {
    let mut instructions = instructions.to_vec();
    crate::as_read::nicira_1_0_as_openflow(&mut instructions);
    for i in &instructions {
        match i {
            Instruction::ApplyActions(list) | Instruction::WriteActions(list) => {
                let start = out.len();
                let kind = if matches!(i, Instruction::ApplyActions(_)) {
                    OFPIT_APPLY_ACTIONS
                } else {
                    OFPIT_WRITE_ACTIONS
                };
                out.extend_from_slice(&kind.to_be_bytes());
                out.extend_from_slice(&[0; 6]);
                encode_actions(list, out);
                let len = len16(out.len() - start);
                out[start + 2..start + 4].copy_from_slice(&len.to_be_bytes());
            }
            Instruction::Meter(_) => {}
            other => other.encode(out),
        }
    }
}

/// Writes the body of `m` where 1.1 lays it out differently from 1.2; `false`:
/// the body is 1.2's.
pub fn encode_body(m: &Message, out: &mut Vec<u8>) -> bool {
    match m {
        // As 1.2: the ports in the features reply.
        Message::FeaturesReply(_) => return crate::of12::encode_body(m, out),
        Message::PacketIn(p) => {
            let in_port = p
                .matcher
                .get(0)
                .filter(|f| f.value.len() == 4)
                .map_or(0, |f| u32_at(&f.value, 0));
            out.extend_from_slice(&p.buffer_id.to_be_bytes());
            out.extend_from_slice(&in_port.to_be_bytes());
            // The physical port: the same, vsw's ports being all physical to 1.1.
            out.extend_from_slice(&in_port.to_be_bytes());
            out.extend_from_slice(&p.total_len.to_be_bytes());
            out.extend_from_slice(&[p.reason, p.table_id]);
            out.extend_from_slice(&p.data);
        }
        Message::FlowRemoved(f) => flow_removed(f, out),
        Message::FlowMod(f) => {
            f.encode_fixed(Version::V1_1, out);
            encode_match(&f.matcher, out);
            encode_instructions(&f.instructions, out);
        }
        _ => return false,
    }
    true
}

fn flow_removed(f: &FlowRemoved, out: &mut Vec<u8>) {
    let c = &f.counts;
    out.extend_from_slice(&f.cookie.to_be_bytes());
    out.extend_from_slice(&f.priority.to_be_bytes());
    out.extend_from_slice(&[f.reason, f.table_id]);
    crate::frame::put_duration(c.duration_ms, out);
    out.extend_from_slice(&f.idle_timeout.to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&c.packets.to_be_bytes());
    out.extend_from_slice(&c.bytes.to_be_bytes());
    encode_match(&f.matcher, out);
}

/// One flow-stats entry as 1.1 has it: 1.3's fixed part (padding where 1.3 put
/// the flags), the `ofp11_match`, the instructions in 1.1's words.
pub fn flow_entry(e: &FlowStatsEntry, out: &mut Vec<u8>) {
    let start = out.len();
    e.encode_head(Version::V1_1, out);
    encode_match(&e.matcher, out);
    encode_instructions(&e.instructions, out);
    let len = len16(out.len() - start);
    out[start..start + 2].copy_from_slice(&len.to_be_bytes());
}

/// `ofp11_table_stats`: 88 bytes — every field wildcardable and matched, every
/// instruction and action, a miss dropped, then the counts.
fn table_entry(t: &TableStats, out: &mut Vec<u8>) {
    out.extend_from_slice(&[t.table_id, 0, 0, 0, 0, 0, 0, 0]);
    crate::multipart::fixed_string(out, &format!("table{}", t.table_id), 32);
    out.extend_from_slice(&FW_ALL.to_be_bytes());
    // match: OFPFMF11_* (the wildcard bits, the type, the four addresses, metadata).
    out.extend_from_slice(&0xffffu32.to_be_bytes());
    // instructions: goto, write-metadata, write/apply/clear actions (1–5).
    out.extend_from_slice(&0b11_1110u32.to_be_bytes());
    // write_actions, apply_actions: every 1.1 action (0–24).
    let actions: u32 = (1 << 25) - 1;
    out.extend_from_slice(&actions.to_be_bytes());
    out.extend_from_slice(&actions.to_be_bytes());
    // config: a miss drops (OFPTC11_TABLE_MISS_DROP).
    out.extend_from_slice(&2u32.to_be_bytes());
    out.extend_from_slice(&crate::tables::MAX_ENTRIES.to_be_bytes());
    out.extend_from_slice(&t.active_count.to_be_bytes());
    out.extend_from_slice(&t.lookup_count.to_be_bytes());
    out.extend_from_slice(&t.matched_count.to_be_bytes());
}

/// A reply's entries where 1.1's differ from 1.3's (`None`: 1.3's).
pub fn reply_entries(reply: &MultipartReply) -> Option<Vec<Vec<u8>>> {
    use crate::multipart::each;
    Some(match reply {
        MultipartReply::Flow(entries) => each(entries, flow_entry),
        MultipartReply::Table(tables) => each(tables, table_entry),
        MultipartReply::GroupDesc(groups) => each(groups, |g, b| {
            // 1.2's entry, each bucket's actions in 1.1's words.
            let start = b.len();
            b.extend_from_slice(&[0, 0, g.kind, 0]);
            b.extend_from_slice(&g.group_id.to_be_bytes());
            for bucket in &g.buckets {
                let at = b.len();
                b.extend_from_slice(&[0, 0]);
                b.extend_from_slice(&bucket.weight.to_be_bytes());
                b.extend_from_slice(&bucket.watch_port.to_be_bytes());
                b.extend_from_slice(&bucket.watch_group.to_be_bytes());
                b.extend_from_slice(&[0; 4]);
                encode_actions(&bucket.actions, b);
                let len = len16(b.len() - at);
                b[at..at + 2].copy_from_slice(&len.to_be_bytes());
            }
            let len = len16(b.len() - start);
            b[start..start + 2].copy_from_slice(&len.to_be_bytes());
        }),
        // Port and group statistics as 1.2's (no durations).
        other => return crate::of12::reply_entries(other),
    })
}

#[cfg(test)]
mod tests;
