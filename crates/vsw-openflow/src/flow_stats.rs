//! `OFPMP_FLOW`: flow statistics, each flow echoed with its match and instructions
//! (OpenFlow 1.3 and 1.4 layouts with fixed counters, 1.5's with OXS statistics).
//! And `OFPT_FLOW_REMOVED`, which says the same of a flow that went.

use crate::error::Refusal;
use crate::flow_mod::Instruction;
use crate::frame::len16;
use crate::oxm::OxmMatch;
use crate::oxs::FlowCounts;
use crate::reader::Reader;
use crate::version::Version;

pub(crate) use crate::as_read::encode_instructions;
pub use crate::as_read::{copies_as_nicira, loads_as_set_fields, nicira_1_0_as_openflow};

pub const OFPMP_FLOW: u16 = 1;
/// All tables, in a request.
pub const OFPTT_ALL: u8 = 0xff;

/// What a flow-stats request asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowStatsRequest {
    pub table_id: u8,
    pub out_port: u32,
    pub out_group: u32,
    pub cookie: u64,
    pub cookie_mask: u64,
    pub matcher: OxmMatch,
}

/// One flow as flow stats echo it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowStatsEntry {
    pub table_id: u8,
    pub duration_ms: u64,
    /// Since the flow last matched a packet (1.5 says it).
    pub idle_ms: u64,
    pub priority: u16,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub flags: u16,
    pub importance: u16,
    pub cookie: u64,
    pub packet_count: u64,
    pub byte_count: u64,
    pub matcher: OxmMatch,
    pub instructions: Vec<Instruction>,
}

impl FlowStatsRequest {
    pub fn decode(body: &[u8]) -> Result<FlowStatsRequest, Refusal> {
        let mut r = Reader::new(body);
        let table_id = r.u8().ok_or(Refusal::BadLen)?;
        r.bytes(3).ok_or(Refusal::BadLen)?;
        let out_port = r.u32().ok_or(Refusal::BadLen)?;
        let out_group = r.u32().ok_or(Refusal::BadLen)?;
        r.bytes(4).ok_or(Refusal::BadLen)?;
        let cookie = r.u64().ok_or(Refusal::BadLen)?;
        let cookie_mask = r.u64().ok_or(Refusal::BadLen)?;
        let (matcher, rest) = OxmMatch::decode_from(r.rest())
            .map_err(|e| Refusal::FlowMod(crate::flow_mod::BadFlowMod::Match(e)))?;
        if !rest.is_empty() {
            return Err(Refusal::BadLen);
        }
        Ok(FlowStatsRequest {
            table_id,
            out_port,
            out_group,
            cookie,
            cookie_mask,
            matcher,
        })
    }

    pub fn encode_body(&self, out: &mut Vec<u8>) {
        out.push(self.table_id);
        out.extend_from_slice(&[0; 3]);
        out.extend_from_slice(&self.out_port.to_be_bytes());
        out.extend_from_slice(&self.out_group.to_be_bytes());
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&self.cookie.to_be_bytes());
        out.extend_from_slice(&self.cookie_mask.to_be_bytes());
        self.matcher.encode(out);
    }
}

impl FlowStatsEntry {
    fn counts(&self) -> FlowCounts {
        FlowCounts {
            duration_ms: self.duration_ms,
            idle_ms: self.idle_ms,
            packets: self.packet_count,
            bytes: self.byte_count,
        }
    }

    pub fn encode(&self, version: Version, out: &mut Vec<u8>) {
        let start = out.len();
        if version >= Version::V1_5 {
            out.extend_from_slice(&[0, 0, 0, 0]); // length (below), padding
            out.push(self.table_id);
            out.push(0); // reason: a request's reply
            for v in [
                self.priority,
                self.idle_timeout,
                self.hard_timeout,
                self.flags,
                self.importance,
            ] {
                out.extend_from_slice(&v.to_be_bytes());
            }
            out.extend_from_slice(&self.cookie.to_be_bytes());
            self.matcher.encode(out);
            self.counts().encode(out);
            encode_instructions(version, &self.instructions, out);
            let len = len16(out.len() - start);
            out[start..start + 2].copy_from_slice(&len.to_be_bytes());
            return;
        }
        self.encode_head(version, out);
        self.matcher.encode(out);
        encode_instructions(version, &self.instructions, out);
        let len = len16(out.len() - start);
        out[start..start + 2].copy_from_slice(&len.to_be_bytes());
    }

    /// The entry up to its match, before 1.5 (1.1 to 1.4 lay it out alike, but
    /// for what later versions put where earlier ones pad): its length left 0.
    pub(crate) fn encode_head(&self, version: Version, out: &mut Vec<u8>) {
        out.extend_from_slice(&[0, 0]); // length, below
        out.push(self.table_id);
        out.push(0);
        crate::frame::put_duration(self.duration_ms, out);
        // 1.2 has padding where 1.3 put the flags.
        let flags = if version >= Version::V1_3 {
            self.flags
        } else {
            0
        };
        for v in [self.priority, self.idle_timeout, self.hard_timeout, flags] {
            out.extend_from_slice(&v.to_be_bytes());
        }
        if version >= Version::V1_4 {
            out.extend_from_slice(&self.importance.to_be_bytes());
            out.extend_from_slice(&[0; 2]);
        } else {
            out.extend_from_slice(&[0; 4]);
        }
        for v in [self.cookie, self.packet_count, self.byte_count] {
            out.extend_from_slice(&v.to_be_bytes());
        }
    }
}

impl FlowStatsEntry {
    /// A rule's entry before any packet: its table, priority, timeouts and cookie,
    /// with the match, flags, importance and instructions it is said with.
    pub fn of_rule(
        spec: &vsw_flow::FlowSpec,
        matcher: OxmMatch,
        flags: u16,
        importance: u16,
        instructions: Vec<Instruction>,
    ) -> FlowStatsEntry {
        FlowStatsEntry {
            table_id: spec.table,
            duration_ms: 0,
            idle_ms: 0,
            priority: spec.priority,
            idle_timeout: spec.idle_timeout,
            hard_timeout: spec.hard_timeout,
            flags,
            importance,
            cookie: spec.cookie,
            packet_count: 0,
            byte_count: 0,
            matcher,
            instructions,
        }
    }
}

/// The entries of one flow-stats reply body (after the multipart header).
pub fn decode_entries(version: Version, body: &[u8]) -> Option<Vec<FlowStatsEntry>> {
    let mut r = Reader::new(body);
    let mut out = Vec::new();
    while !r.is_empty() {
        let len = usize::from(r.u16()?);
        let mut e = Reader::new(r.bytes(len.checked_sub(2)?)?);
        if version >= Version::V1_5 {
            e.bytes(2)?;
            let table_id = e.u8()?;
            e.u8()?;
            let (priority, idle_timeout, hard_timeout, flags, importance) =
                (e.u16()?, e.u16()?, e.u16()?, e.u16()?, e.u16()?);
            let cookie = e.u64()?;
            let matcher = OxmMatch::decode(&mut e).ok()?;
            let c = FlowCounts::decode(&mut e)?;
            let instructions = Instruction::decode_list(e.rest()).ok()?;
            out.push(FlowStatsEntry {
                table_id,
                duration_ms: c.duration_ms,
                idle_ms: c.idle_ms,
                priority,
                idle_timeout,
                hard_timeout,
                flags,
                importance,
                cookie,
                packet_count: c.packets,
                byte_count: c.bytes,
                matcher,
                instructions,
            });
            continue;
        }
        let table_id = e.u8()?;
        e.u8()?;
        let sec = u64::from(e.u32()?);
        let nsec = u64::from(e.u32()?);
        let (priority, idle_timeout, hard_timeout, flags) =
            (e.u16()?, e.u16()?, e.u16()?, e.u16()?);
        let importance = e.u16()?;
        e.bytes(2)?;
        let (cookie, packet_count, byte_count) = (e.u64()?, e.u64()?, e.u64()?);
        let (matcher, rest) = OxmMatch::decode_from(e.rest()).ok()?;
        let instructions = Instruction::decode_list(rest).ok()?;
        out.push(FlowStatsEntry {
            table_id,
            duration_ms: sec * 1000 + nsec / 1_000_000,
            // 1.3 and 1.4 do not say it.
            idle_ms: 0,
            priority,
            idle_timeout,
            hard_timeout,
            flags,
            importance: if version >= Version::V1_4 {
                importance
            } else {
                0
            },
            cookie,
            packet_count,
            byte_count,
            matcher,
            instructions,
        });
    }
    Some(out)
}

/// Why a flow went (`ofp_flow_removed_reason`).
pub const OFPRR_IDLE_TIMEOUT: u8 = 0;
pub const OFPRR_HARD_TIMEOUT: u8 = 1;
pub const OFPRR_DELETE: u8 = 2;
pub const OFPRR_GROUP_DELETE: u8 = 3;
/// 1.4 on (1.3 peers are told DELETE).
pub const OFPRR_METER_DELETE: u8 = 4;

/// A flow that went, for the controllers that asked (its SEND_FLOW_REM flag).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowRemoved {
    pub table_id: u8,
    pub reason: u8,
    pub priority: u16,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub cookie: u64,
    pub matcher: OxmMatch,
    pub counts: FlowCounts,
}

impl FlowRemoved {
    pub fn encode_body(&self, version: Version, out: &mut Vec<u8>) {
        if version >= Version::V1_5 {
            out.push(self.table_id);
            out.push(self.reason);
            for v in [self.priority, self.idle_timeout, self.hard_timeout] {
                out.extend_from_slice(&v.to_be_bytes());
            }
            out.extend_from_slice(&self.cookie.to_be_bytes());
            self.matcher.encode(out);
            self.counts.encode(out);
            return;
        }
        let c = &self.counts;
        out.extend_from_slice(&self.cookie.to_be_bytes());
        out.extend_from_slice(&self.priority.to_be_bytes());
        out.push(self.reason);
        out.push(self.table_id);
        crate::frame::put_duration(c.duration_ms, out);
        out.extend_from_slice(&self.idle_timeout.to_be_bytes());
        out.extend_from_slice(&self.hard_timeout.to_be_bytes());
        out.extend_from_slice(&c.packets.to_be_bytes());
        out.extend_from_slice(&c.bytes.to_be_bytes());
        self.matcher.encode(out);
    }

    /// Nicira's NXT_FLOW_REMOVED body (after the vendor header), for a 1.0
    /// connection that chose the NXM flow format: the fixed fields (the table
    /// plus one), then the match in NXM padded to 8.
    pub fn encode_nx_body(&self, out: &mut Vec<u8>) {
        let c = &self.counts;
        out.extend_from_slice(&self.cookie.to_be_bytes());
        out.extend_from_slice(&self.priority.to_be_bytes());
        out.extend_from_slice(&[self.reason, self.table_id.wrapping_add(1)]);
        crate::frame::put_duration(c.duration_ms, out);
        out.extend_from_slice(&self.idle_timeout.to_be_bytes());
        let match_len_at = out.len();
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&c.packets.to_be_bytes());
        out.extend_from_slice(&c.bytes.to_be_bytes());
        let n = crate::of10::nxm::encode(&self.matcher, out);
        out[match_len_at..match_len_at + 2].copy_from_slice(&len16(n).to_be_bytes());
        out.extend(std::iter::repeat_n(0u8, n.div_ceil(8) * 8 - n));
    }

    pub fn decode_body(version: Version, body: &[u8]) -> Option<FlowRemoved> {
        let mut r = Reader::new(body);
        let m = if version >= Version::V1_5 {
            let (table_id, reason) = (r.u8()?, r.u8()?);
            let (priority, idle_timeout, hard_timeout) = (r.u16()?, r.u16()?, r.u16()?);
            let cookie = r.u64()?;
            let matcher = OxmMatch::decode(&mut r).ok()?;
            let counts = FlowCounts::decode(&mut r)?;
            FlowRemoved {
                table_id,
                reason,
                priority,
                idle_timeout,
                hard_timeout,
                cookie,
                matcher,
                counts,
            }
        } else {
            let cookie = r.u64()?;
            let priority = r.u16()?;
            let (reason, table_id) = (r.u8()?, r.u8()?);
            let (sec, nsec) = (u64::from(r.u32()?), u64::from(r.u32()?));
            let (idle_timeout, hard_timeout) = (r.u16()?, r.u16()?);
            let (packets, bytes) = (r.u64()?, r.u64()?);
            let matcher = OxmMatch::decode(&mut r).ok()?;
            FlowRemoved {
                table_id,
                reason,
                priority,
                idle_timeout,
                hard_timeout,
                cookie,
                matcher,
                counts: FlowCounts {
                    duration_ms: sec * 1000 + nsec / 1_000_000,
                    idle_ms: 0,
                    packets,
                    bytes,
                },
            }
        };
        r.is_empty().then_some(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow_mod::Action;
    use crate::test_support::field;

    fn entry(instructions: Vec<Instruction>) -> FlowStatsEntry {
        FlowStatsEntry {
            table_id: 0,
            duration_ms: 0,
            idle_ms: 0,
            priority: 1,
            idle_timeout: 0,
            hard_timeout: 0,
            flags: 0,
            importance: 0,
            cookie: 0,
            packet_count: 0,
            byte_count: 0,
            matcher: OxmMatch {
                fields: vec![field(0, &[0, 0, 0, 1], None)],
            },
            instructions,
        }
    }

    /// A flow written with 1.5's meter action reads in 1.3 and 1.4 with the meter
    /// instruction (an action type those versions do not have would fail a whole
    /// dump), and one written with the instruction reads in 1.5 as the action.
    #[test]
    fn a_meter_is_said_in_the_readers_version() {
        let out = Action::Output {
            port: 2,
            max_len: 0,
        };
        let as_action = vec![Instruction::ApplyActions(vec![
            Action::Meter(7),
            out.clone(),
        ])];
        let as_instruction = vec![
            Instruction::Meter(7),
            Instruction::ApplyActions(vec![out.clone()]),
        ];
        for (written, v, read) in [
            (&as_action, Version::V1_3, &as_instruction),
            (&as_action, Version::V1_4, &as_instruction),
            (&as_instruction, Version::V1_5, &as_action),
            (&as_action, Version::V1_5, &as_action),
        ] {
            let mut b = Vec::new();
            entry(written.clone()).encode(v, &mut b);
            let back = decode_entries(v, &b).expect("decodes");
            assert_eq!(&back[0].instructions, read, "{v:?}");
        }
        // A meter alone in its apply-actions leaves none behind.
        let alone = vec![Instruction::ApplyActions(vec![Action::Meter(7)])];
        assert_eq!(
            crate::as_read::meter_as_instruction(&alone),
            vec![Instruction::Meter(7)]
        );
    }
}
