//! OpenFlow 1.0: what `ovs-ofctl` speaks when no `-O` is given, and what Open
//! vSwitch's own tooling still opens every connection with.
//!
//! A 1.0 connection's messages are read into the same [`Message`]s a 1.3 one's
//! are (an `ofp10_match` or an NXM match as OXM fields, 1.0 actions as 1.3's
//! inside one apply-actions instruction), so the session and the switch carry
//! them out unchanged; what vsw sends is written back in 1.0's layouts. Where
//! 1.0 and 1.3 differ only in numbers (statistics are types 16/17, barriers
//! 18/19) or layouts (16-bit ports, `ofp_phy_port`, errors), the differences
//! live here. Nicira's extensions give a 1.0 connection the rest: the NXM flow
//! format (NXT_SET_FLOW_FORMAT, NXT_FLOW_MOD, NXST_FLOW, NXST_AGGREGATE) and
//! table ids in flow-mods (NXT_FLOW_MOD_TABLE_ID).

pub mod actions;
pub mod matching;
pub mod nxm;

use crate::error::{Refusal, ERROR_DATA_LEN};
use crate::flow_mod::{BadFlowMod, Command, FlowMod, Instruction, OFPG_ANY};
use crate::flow_stats::{FlowRemoved, FlowStatsEntry, FlowStatsRequest, OFPTT_ALL};
use crate::frame::{len16, Header, HEADER_LEN};
use crate::message::{exact, ErrorMsg, Features, Message};
use crate::multipart::{MultipartReply, MultipartRequest, PortInfo};
use crate::packet::PacketOut;
use crate::port_stats::PortStats;
use crate::reader::Reader;
use crate::table_stats::TableStats;
use crate::tlv::NX_VENDOR_ID;
use crate::version::Version;

use matching::{port_from_16, port_to_16};

pub use crate::multipart::{OFPT10_STATS_REPLY, OFPT10_STATS_REQUEST};
pub const OFPT10_BARRIER_REQUEST: u8 = 18;
pub const OFPT10_BARRIER_REPLY: u8 = 19;

/// Statistics types (`ofp_stats_types`), and Open vSwitch's port description
/// (1.0 has none of its own: its ports are in the features reply).
const OFPST_DESC: u16 = 0;
const OFPST_FLOW: u16 = 1;
const OFPST_AGGREGATE: u16 = 2;
const OFPST_TABLE: u16 = 3;
const OFPST_PORT: u16 = 4;
const OFPST_QUEUE: u16 = 5;
const OFPST_PORT_DESC: u16 = 13;
const OFPST_VENDOR: u16 = 0xffff;
/// Nicira's statistics (after OFPST_VENDOR and the vendor id).
const NXST_FLOW: u32 = 0;
const NXST_AGGREGATE: u32 = 1;

/// Nicira's 1.0 messages.
pub use crate::message::{NXT_FLOW_MOD, NXT_FLOW_MOD_TABLE_ID, NXT_SET_FLOW_FORMAT};
/// Flow formats NXT_SET_FLOW_FORMAT names.
pub const NXFF_OPENFLOW10: u32 = 0;
pub const NXFF_NXM: u32 = 2;

/// Errors Open vSwitch has no 1.0 code for go as a Nicira vendor error.
const NXET_VENDOR: u16 = 0xb0c2;
const NXVC_VENDOR_ERROR: u16 = 0;
/// NXBRC_UNENCODABLE_ERROR: the error has no 1.0 form at all.
const UNENCODABLE: (u16, u16) = (1, 521);

/// `OFPFF_EMERG`: 1.0's emergency flow cache, which 1.0.1 made optional and vsw
/// does not have.
const OFPFF10_EMERG: u16 = 1 << 2;
/// 1.0's flags: SEND_FLOW_REM, CHECK_OVERLAP, EMERG.
const OFPFF10_ALL: u16 = 0b111;

/// What a 1.0 connection has asked for that changes how its messages read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Dialect {
    /// NXT_FLOW_MOD_TABLE_ID: a flow-mod's command carries its table in the
    /// high byte.
    pub table_in_command: bool,
}

/// The message's type in 1.0, where it differs from 1.3's.
pub fn kind(m: &Message) -> u8 {
    match m {
        Message::BarrierRequest => OFPT10_BARRIER_REQUEST,
        Message::BarrierReply => OFPT10_BARRIER_REPLY,
        Message::MultipartRequest(_) => OFPT10_STATS_REQUEST,
        Message::SetFlowFormat(_) | Message::FlowModTableId(_) | Message::FlowMonitorCancel(_) => {
            crate::message::OFPT_EXPERIMENTER
        }
        Message::FlowMonitorRequest(_) => OFPT10_STATS_REQUEST,
        Message::PortMod(_) => crate::port_mod::OFPT10_PORT_MOD,
        other => other.kind(),
    }
}

fn refused_len() -> Refusal {
    Refusal::BadLen
}

/// A message of a 1.0 connection (all of it, header included).
pub fn decode(m: &[u8], dialect: Dialect) -> Result<Message, Refusal> {
    let h = Header::parse(m).ok_or_else(refused_len)?;
    let body = m
        .get(HEADER_LEN..usize::from(h.length))
        .ok_or_else(refused_len)?;
    if h.kind == crate::message::OFPT_HELLO {
        return Ok(Message::decode_hello(body));
    }
    if h.version != Version::V1_0.wire() && h.kind != crate::message::OFPT_ERROR {
        return Err(Refusal::BadVersion);
    }
    let mut r = Reader::new(body);
    match h.kind {
        // The same in 1.0 as in 1.3.
        crate::message::OFPT_ERROR
        | crate::message::OFPT_ECHO_REQUEST
        | crate::message::OFPT_ECHO_REPLY
        | crate::message::OFPT_FEATURES_REQUEST
        | crate::message::OFPT_GET_CONFIG_REQUEST
        | crate::message::OFPT_SET_CONFIG => Message::decode_common(h.kind, body),
        crate::message::OFPT_EXPERIMENTER => {
            let vendor = r.u32().ok_or_else(refused_len)?;
            let subtype = r.u32().ok_or_else(refused_len)?;
            if vendor != NX_VENDOR_ID {
                return Err(Refusal::BadExperimenter);
            }
            match subtype {
                NXT_SET_FLOW_FORMAT => {
                    let f = r.u32().ok_or_else(refused_len)?;
                    exact(&r, Message::SetFlowFormat(f))
                }
                NXT_FLOW_MOD_TABLE_ID => {
                    let on = r.u8().ok_or_else(refused_len)?;
                    r.bytes(7).ok_or_else(refused_len)?;
                    exact(&r, Message::FlowModTableId(on != 0))
                }
                NXT_FLOW_MOD => Ok(Message::FlowMod(nx_flow_mod(&mut r, dialect)?)),
                crate::flow_monitor::NXT_FLOW_MONITOR_CANCEL => {
                    let id = r.u32().ok_or_else(refused_len)?;
                    exact(&r, Message::FlowMonitorCancel(id))
                }
                _ => Message::decode_nicira(subtype, &mut r),
            }
        }
        crate::flow_mod::OFPT_FLOW_MOD => Ok(Message::FlowMod(flow_mod(&mut r, dialect)?)),
        crate::packet::OFPT_PACKET_OUT => Ok(Message::PacketOut(packet_out(&mut r)?)),
        OFPT10_STATS_REQUEST => stats_request(&mut r),
        OFPT10_BARRIER_REQUEST => exact(&r, Message::BarrierRequest),
        crate::port_mod::OFPT10_PORT_MOD => Ok(Message::PortMod(
            crate::port_mod::PortMod::decode_body(Version::V1_0, body).ok_or(Refusal::BadLen)?,
        )),
        _ => Err(Refusal::BadType),
    }
}

/// The command (and table) of a 1.0 flow-mod: without NXT_FLOW_MOD_TABLE_ID an
/// add goes to table 0 and the others look in every table, as in Open vSwitch.
fn command(raw: u16, dialect: Dialect) -> Result<(Command, u8), BadFlowMod> {
    if !dialect.table_in_command && raw > 0xff {
        return Err(BadFlowMod::BadCommand);
    }
    let command = Command::from_wire(raw as u8).ok_or(BadFlowMod::BadCommand)?;
    let table = match (dialect.table_in_command, command) {
        // 255 in an add's command is no table named: table 0, as without one.
        (true, Command::Add) if raw >> 8 == u16::from(OFPTT_ALL) => 0,
        (true, _) => (raw >> 8) as u8,
        (false, Command::Add) => 0,
        (false, _) => OFPTT_ALL,
    };
    Ok((command, table))
}

/// The fields of a flow-mod both 1.0 layouts share after their matches.
struct FlowModHead {
    cookie: u64,
    command: u16,
    idle_timeout: u16,
    hard_timeout: u16,
    priority: u16,
    buffer_id: u32,
    out_port: u16,
    flags: u16,
}

impl FlowModHead {
    fn read(r: &mut Reader) -> Option<FlowModHead> {
        Some(FlowModHead {
            cookie: r.u64()?,
            command: r.u16()?,
            idle_timeout: r.u16()?,
            hard_timeout: r.u16()?,
            priority: r.u16()?,
            buffer_id: r.u32()?,
            out_port: r.u16()?,
            flags: r.u16()?,
        })
    }

    fn into_flow_mod(
        self,
        dialect: Dialect,
        matcher: crate::oxm::OxmMatch,
        cookie_match: Option<(u64, u64)>,
        actions: &[u8],
    ) -> Result<FlowMod, BadFlowMod> {
        if self.flags & !OFPFF10_ALL != 0 {
            return Err(BadFlowMod::BadFlags);
        }
        if self.flags & OFPFF10_EMERG != 0 {
            return Err(BadFlowMod::Refused);
        }
        let (command, table_id) = command(self.command, dialect)?;
        let actions = actions::decode(actions)?;
        let (cookie, cookie_mask) = match (command, cookie_match) {
            // An add's cookie is the flow's own; a match on cookies selects flows.
            (Command::Add, _) => (self.cookie, 0),
            (_, Some((c, m))) => (c, m),
            (_, None) => (self.cookie, 0),
        };
        Ok(FlowMod {
            cookie,
            cookie_mask,
            table_id,
            command,
            idle_timeout: self.idle_timeout,
            hard_timeout: self.hard_timeout,
            priority: self.priority,
            buffer_id: self.buffer_id,
            out_port: port_from_16(self.out_port),
            out_group: OFPG_ANY,
            flags: self.flags,
            importance: 0,
            // As Open vSwitch: only a modify that selects by no cookie, and whose
            // cookie is one a flow can have, may add.
            modify_like_1_0: matches!(command, Command::Modify | Command::ModifyStrict)
                && cookie_mask == 0
                && self.cookie != u64::MAX,
            matcher,
            instructions: if actions.is_empty() {
                Vec::new()
            } else {
                vec![Instruction::ApplyActions(actions)]
            },
        })
    }
}

/// OFPT_FLOW_MOD: an `ofp10_match`, the fixed fields, 1.0 actions. A match with
/// nothing wildcarded outranks every other (priority 65535), as 1.0 says.
fn flow_mod(r: &mut Reader, dialect: Dialect) -> Result<FlowMod, Refusal> {
    let exact = matching::is_exact(r);
    let matcher = matching::decode(r).map_err(|e| Refusal::FlowMod(e.into()))?;
    let mut head = FlowModHead::read(r).ok_or_else(refused_len)?;
    if exact {
        head.priority = u16::MAX;
    }
    Ok(head.into_flow_mod(dialect, matcher, None, r.rest())?)
}

/// NXT_FLOW_MOD: the fixed fields, an NXM match padded to 8, 1.0 actions.
fn nx_flow_mod(r: &mut Reader, dialect: Dialect) -> Result<FlowMod, Refusal> {
    let head = FlowModHead::read(r).ok_or_else(refused_len)?;
    let match_len = usize::from(r.u16().ok_or_else(refused_len)?);
    r.bytes(6).ok_or_else(refused_len)?;
    let (matcher, cookie) = nxm_padded(r, match_len)?;
    Ok(head.into_flow_mod(dialect, matcher, cookie, r.rest())?)
}

/// An NXM match of `len` bytes and its padding to 8.
fn nxm_padded(
    r: &mut Reader,
    len: usize,
) -> Result<(crate::oxm::OxmMatch, Option<(u64, u64)>), Refusal> {
    let body = r.bytes(len).ok_or_else(refused_len)?;
    r.bytes(len.div_ceil(8) * 8 - len).ok_or_else(refused_len)?;
    nxm::decode_with_cookie(body).map_err(|e| Refusal::FlowMod(e.into()))
}

/// OFPT_PACKET_OUT: buffer, 16-bit input port, actions' length, actions, packet.
fn packet_out(r: &mut Reader) -> Result<PacketOut, Refusal> {
    let buffer_id = r.u32().ok_or_else(refused_len)?;
    let in_port = port_from_16(r.u16().ok_or_else(refused_len)?);
    let actions_len = usize::from(r.u16().ok_or_else(refused_len)?);
    let actions = r
        .bytes(actions_len)
        .ok_or(Refusal::FlowMod(BadFlowMod::BadActionLen))?;
    PacketOut::checked(
        buffer_id,
        in_port,
        actions::decode(actions)?,
        r.rest().to_vec(),
    )
}

/// A 1.0 statistics request: type, flags, body (no padding after the flags).
fn stats_request(r: &mut Reader) -> Result<Message, Refusal> {
    let kind = r.u16().ok_or_else(refused_len)?;
    r.u16().ok_or_else(refused_len)?;
    let req = match kind {
        OFPST_DESC => MultipartRequest::Desc,
        OFPST_TABLE => MultipartRequest::Table,
        OFPST_PORT_DESC => MultipartRequest::PortDesc,
        OFPST_PORT => {
            let port = port_from_16(r.u16().ok_or_else(refused_len)?);
            r.bytes(6).ok_or_else(refused_len)?;
            MultipartRequest::PortStats(port)
        }
        OFPST_QUEUE => {
            let port_no = port_from_16(r.u16().ok_or_else(refused_len)?);
            r.bytes(2).ok_or_else(refused_len)?;
            let queue_id = r.u32().ok_or_else(refused_len)?;
            MultipartRequest::QueueStats { port_no, queue_id }
        }
        OFPST_FLOW | OFPST_AGGREGATE => {
            let matcher = matching::decode(r).map_err(|e| Refusal::FlowMod(e.into()))?;
            let table_id = r.u8().ok_or_else(refused_len)?;
            r.u8().ok_or_else(refused_len)?;
            let out_port = port_from_16(r.u16().ok_or_else(refused_len)?);
            let f = FlowStatsRequest {
                table_id,
                out_port,
                out_group: OFPG_ANY,
                cookie: 0,
                cookie_mask: 0,
                matcher,
            };
            if kind == OFPST_FLOW {
                MultipartRequest::Flow(f)
            } else {
                MultipartRequest::Aggregate(f)
            }
        }
        OFPST_VENDOR => {
            if r.u32().ok_or_else(refused_len)? != NX_VENDOR_ID {
                return Err(Refusal::BadExperimenter);
            }
            let subtype = r.u32().ok_or_else(refused_len)?;
            r.bytes(4).ok_or_else(refused_len)?;
            if subtype == crate::flow_monitor::NXST_FLOW_MONITOR {
                let monitors = crate::flow_monitor::decode_nx_requests(r)?;
                return Ok(Message::FlowMonitorRequest(monitors));
            }
            if !matches!(subtype, NXST_FLOW | NXST_AGGREGATE) {
                return Err(Refusal::BadExperimenterType);
            }
            let out_port = port_from_16(r.u16().ok_or_else(refused_len)?);
            let match_len = usize::from(r.u16().ok_or_else(refused_len)?);
            let table_id = r.u8().ok_or_else(refused_len)?;
            r.bytes(3).ok_or_else(refused_len)?;
            let (matcher, cookie) = nxm_padded(r, match_len)?;
            let (cookie, cookie_mask) = cookie.unwrap_or((0, 0));
            let f = FlowStatsRequest {
                table_id,
                out_port,
                out_group: OFPG_ANY,
                cookie,
                cookie_mask,
                matcher,
            };
            if subtype == NXST_FLOW {
                MultipartRequest::Flow(f)
            } else {
                MultipartRequest::Aggregate(f)
            }
        }
        _ => return Err(Refusal::BadMultipart),
    };
    if !r.is_empty() {
        return Err(Refusal::BadLen);
    }
    Ok(Message::MultipartRequest(req))
}

/// Whether a 1.0 statistics request is one of Nicira's (its reply is too).
pub fn is_nicira_stats(request: &[u8]) -> bool {
    request.get(HEADER_LEN..HEADER_LEN + 2) == Some(&OFPST_VENDOR.to_be_bytes()[..])
}

/// What goes between a 1.0 statistics reply's flags and its entries, and its
/// type: nothing for OpenFlow's own, the vendor and subtype (and padding) for
/// Nicira's.
pub fn reply_head(request: &[u8], reply_kind: u16) -> (u16, Vec<u8>) {
    if !is_nicira_stats(request) {
        let kind = match reply_kind {
            crate::multipart::OFPMP_PORT_DESC => OFPST_PORT_DESC,
            k => k,
        };
        return (kind, Vec::new());
    }
    // The reply's subtype is the request's.
    let subtype = request
        .get(HEADER_LEN + 8..HEADER_LEN + 12)
        .and_then(|b| b.try_into().ok())
        .map_or(NXST_FLOW, u32::from_be_bytes);
    let mut tail = NX_VENDOR_ID.to_be_bytes().to_vec();
    tail.extend_from_slice(&subtype.to_be_bytes());
    tail.extend_from_slice(&[0; 4]);
    (OFPST_VENDOR, tail)
}

/// One flow as a 1.0 flow-stats reply says it: `ofp_flow_stats` with an
/// `ofp10_match`, or Nicira's `nx_flow_stats` with an NXM match.
pub fn encode_flow_entry(e: &FlowStatsEntry, nicira: bool, out: &mut Vec<u8>) {
    let start = out.len();
    let secs = (e.duration_ms / 1000) as u32;
    let nsecs = ((e.duration_ms % 1000) * 1_000_000) as u32;
    out.extend_from_slice(&[0, 0, e.table_id, 0]);
    if nicira {
        out.extend_from_slice(&secs.to_be_bytes());
        out.extend_from_slice(&nsecs.to_be_bytes());
        for v in [e.priority, e.idle_timeout, e.hard_timeout] {
            out.extend_from_slice(&v.to_be_bytes());
        }
        let match_len_at = out.len();
        out.extend_from_slice(&[0, 0]);
        // Ages in seconds plus one (0: not said), as Open vSwitch says them.
        let age = |ms: u64| u16::try_from(ms / 1000 + 1).unwrap_or(u16::MAX);
        out.extend_from_slice(&age(e.idle_ms).to_be_bytes());
        out.extend_from_slice(&age(e.duration_ms).to_be_bytes());
        for v in [e.cookie, e.packet_count, e.byte_count] {
            out.extend_from_slice(&v.to_be_bytes());
        }
        let n = nxm::encode(&e.matcher, out);
        out[match_len_at..match_len_at + 2].copy_from_slice(&len16(n).to_be_bytes());
        out.extend(std::iter::repeat_n(0u8, n.div_ceil(8) * 8 - n));
    } else {
        matching::encode(&e.matcher, out);
        out.extend_from_slice(&secs.to_be_bytes());
        out.extend_from_slice(&nsecs.to_be_bytes());
        for v in [e.priority, e.idle_timeout, e.hard_timeout] {
            out.extend_from_slice(&v.to_be_bytes());
        }
        out.extend_from_slice(&[0; 6]);
        for v in [e.cookie, e.packet_count, e.byte_count] {
            out.extend_from_slice(&v.to_be_bytes());
        }
    }
    actions::encode_instructions(&e.instructions, out);
    let len = len16(out.len() - start);
    out[start..start + 2].copy_from_slice(&len.to_be_bytes());
}

/// A reply's entries in 1.0's layouts (flow statistics are made by
/// [`encode_flow_entry`] as the reply streams).
pub fn reply_entries(reply: &MultipartReply, request: &[u8]) -> Vec<Vec<u8>> {
    use crate::multipart::each;
    match reply {
        MultipartReply::PortDesc(ports) => each(ports, phy_port),
        MultipartReply::PortStats(ports) => each(ports, port_stats),
        MultipartReply::Table(tables) => each(tables, table_stats),
        MultipartReply::Flow(entries) => {
            let nicira = is_nicira_stats(request);
            each(entries, |e, b| encode_flow_entry(e, nicira, b))
        }
        // Desc, aggregate and queue statistics are laid out as in 1.3.
        other => other.entries_in(Version::V1_3),
    }
}

/// `ofp_phy_port`: 48 bytes, a 16-bit number, no speeds.
pub fn phy_port(p: &PortInfo, out: &mut Vec<u8>) {
    out.extend_from_slice(&port_to_16(p.port_no).unwrap_or(0).to_be_bytes());
    out.extend_from_slice(&p.hw_addr);
    crate::multipart::fixed_string(out, &p.name, 16);
    out.extend_from_slice(&u32::from(p.admin_down).to_be_bytes());
    // OFPPS_LINK_DOWN; 1.0 has no LIVE bit.
    out.extend_from_slice(&u32::from(!p.link_up).to_be_bytes());
    // curr: the speed as 1.0's full-duplex feature bit, when it is one of them;
    // advertised, supported, peer: none claimed.
    let curr: u32 = match p.curr_speed_kbps {
        10_000 => 1 << 1,
        100_000 => 1 << 3,
        1_000_000 => 1 << 5,
        10_000_000 => 1 << 6,
        _ => 0,
    };
    out.extend_from_slice(&curr.to_be_bytes());
    out.extend_from_slice(&[0; 12]);
}

fn port_stats(p: &PortStats, out: &mut Vec<u8>) {
    let mut v13 = Vec::with_capacity(112);
    p.encode(Version::V1_3, &mut v13);
    // 1.3's: port (4), pad (4), twelve counters, duration (8); 1.0's: port (2),
    // pad (6), the same counters.
    out.extend_from_slice(&port_to_16(p.port_no).unwrap_or(0).to_be_bytes());
    out.extend_from_slice(&[0; 6]);
    out.extend_from_slice(&v13[8..8 + 96]);
}

fn table_stats(t: &TableStats, out: &mut Vec<u8>) {
    out.extend_from_slice(&[t.table_id, 0, 0, 0]);
    crate::multipart::fixed_string(out, &format!("table{}", t.table_id), 32);
    // Every field can be wildcarded.
    out.extend_from_slice(&((1u32 << 22) - 1).to_be_bytes());
    out.extend_from_slice(&crate::tables::MAX_ENTRIES.to_be_bytes());
    out.extend_from_slice(&t.active_count.to_be_bytes());
    out.extend_from_slice(&t.lookup_count.to_be_bytes());
    out.extend_from_slice(&t.matched_count.to_be_bytes());
}

/// The actions 1.0 features say a switch has: all twelve of 1.0's.
const OFPAT10_ALL: u32 = (1 << 12) - 1;

/// Writes the body of `m` where 1.0 lays it out differently from 1.3; `false`:
/// the body is 1.3's.
pub fn encode_body(m: &Message, out: &mut Vec<u8>) -> bool {
    match m {
        Message::FeaturesReply(f) => features(f, out),
        Message::PacketIn(p) => {
            let in_port = p
                .matcher
                .get(0)
                .and_then(|f| f.value.as_slice().try_into().ok())
                .map_or(0, u32::from_be_bytes);
            out.extend_from_slice(&p.buffer_id.to_be_bytes());
            out.extend_from_slice(&p.total_len.to_be_bytes());
            out.extend_from_slice(&port_to_16(in_port).unwrap_or(0).to_be_bytes());
            out.extend_from_slice(&[p.reason, 0]);
            out.extend_from_slice(&p.data);
        }
        Message::FlowRemoved(f) => flow_removed(f, out),
        Message::PortStatus(reason, port) => {
            out.push(*reason);
            out.extend_from_slice(&[0; 7]);
            phy_port(port, out);
        }
        Message::FlowMod(fm) => {
            matching::encode(&fm.matcher, out);
            out.extend_from_slice(&fm.cookie.to_be_bytes());
            let table = if fm.table_id == OFPTT_ALL {
                0
            } else {
                fm.table_id
            };
            let command = (u16::from(table) << 8) | fm.command as u16;
            for v in [command, fm.idle_timeout, fm.hard_timeout, fm.priority] {
                out.extend_from_slice(&v.to_be_bytes());
            }
            out.extend_from_slice(&fm.buffer_id.to_be_bytes());
            out.extend_from_slice(&port_to_16(fm.out_port).unwrap_or(0xffff).to_be_bytes());
            out.extend_from_slice(&fm.flags.to_be_bytes());
            actions::encode_instructions(&fm.instructions, out);
        }
        Message::PacketOut(p) => {
            out.extend_from_slice(&p.buffer_id.to_be_bytes());
            out.extend_from_slice(&port_to_16(p.in_port).unwrap_or(0xfffd).to_be_bytes());
            let mut acts = Vec::new();
            actions::encode(&p.actions, &mut acts);
            out.extend_from_slice(&len16(acts.len()).to_be_bytes());
            out.extend_from_slice(&acts);
            out.extend_from_slice(&p.data);
        }
        Message::MultipartRequest(req) => stats_request_body(req, out),

        Message::FlowMonitorRequest(monitors) => {
            crate::flow_monitor::encode_request_body(Version::V1_0, monitors, out);
        }
        Message::FlowMonitorCancel(id) => {
            out.extend_from_slice(&NX_VENDOR_ID.to_be_bytes());
            out.extend_from_slice(&crate::flow_monitor::NXT_FLOW_MONITOR_CANCEL.to_be_bytes());
            out.extend_from_slice(&id.to_be_bytes());
        }
        _ => return false,
    }
    true
}

fn features(f: &Features, out: &mut Vec<u8>) {
    out.extend_from_slice(&f.datapath_id.to_be_bytes());
    out.extend_from_slice(&f.n_buffers.to_be_bytes());
    out.extend_from_slice(&[f.n_tables, 0, 0, 0]);
    out.extend_from_slice(&f.capabilities.to_be_bytes());
    out.extend_from_slice(&OFPAT10_ALL.to_be_bytes());
    // Ports that would not fit one message are left out, all of them, as Open
    // vSwitch does: a reader asks for the port description then.
    if HEADER_LEN + 24 + 48 * f.ports.len() <= usize::from(u16::MAX) {
        for p in &f.ports {
            phy_port(p, out);
        }
    }
}

fn flow_removed(f: &FlowRemoved, out: &mut Vec<u8>) {
    let c = &f.counts;
    matching::encode(&f.matcher, out);
    out.extend_from_slice(&f.cookie.to_be_bytes());
    out.extend_from_slice(&f.priority.to_be_bytes());
    out.extend_from_slice(&[f.reason, 0]);
    out.extend_from_slice(&((c.duration_ms / 1000) as u32).to_be_bytes());
    out.extend_from_slice(&(((c.duration_ms % 1000) * 1_000_000) as u32).to_be_bytes());
    out.extend_from_slice(&f.idle_timeout.to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&c.packets.to_be_bytes());
    out.extend_from_slice(&c.bytes.to_be_bytes());
}

/// A 1.0 statistics request (what a controller sends; vsw's tests send it).
fn stats_request_body(req: &MultipartRequest, out: &mut Vec<u8>) {
    let flow = |kind: u16, f: &FlowStatsRequest, out: &mut Vec<u8>| {
        out.extend_from_slice(&kind.to_be_bytes());
        out.extend_from_slice(&[0, 0]);
        matching::encode(&f.matcher, out);
        out.extend_from_slice(&[f.table_id, 0]);
        out.extend_from_slice(&port_to_16(f.out_port).unwrap_or(0xffff).to_be_bytes());
    };
    match req {
        MultipartRequest::Flow(f) => flow(OFPST_FLOW, f, out),
        MultipartRequest::Aggregate(f) => flow(OFPST_AGGREGATE, f, out),
        MultipartRequest::PortStats(p) => {
            out.extend_from_slice(&OFPST_PORT.to_be_bytes());
            out.extend_from_slice(&[0, 0]);
            out.extend_from_slice(&port_to_16(*p).unwrap_or(0xffff).to_be_bytes());
            out.extend_from_slice(&[0; 6]);
        }
        other => {
            let kind = match other {
                MultipartRequest::Table => OFPST_TABLE,
                MultipartRequest::PortDesc => OFPST_PORT_DESC,
                _ => OFPST_DESC,
            };
            out.extend_from_slice(&kind.to_be_bytes());
            out.extend_from_slice(&[0, 0]);
        }
    }
}

/// A Nicira statistics request for flows or their aggregate with an NXM match
/// (what `ovs-ofctl dump-flows` sends a 1.0 switch that took the NXM format).
pub fn encode_nx_flow_stats_request(aggregate: bool, f: &FlowStatsRequest, xid: u32) -> Vec<u8> {
    let mut out = Vec::new();
    Header {
        version: Version::V1_0.wire(),
        kind: OFPT10_STATS_REQUEST,
        length: 0,
        xid,
    }
    .write(&mut out);
    out.extend_from_slice(&OFPST_VENDOR.to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&NX_VENDOR_ID.to_be_bytes());
    let subtype = if aggregate { NXST_AGGREGATE } else { NXST_FLOW };
    out.extend_from_slice(&subtype.to_be_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&port_to_16(f.out_port).unwrap_or(0xffff).to_be_bytes());
    let match_len_at = out.len();
    out.extend_from_slice(&[0, 0, f.table_id, 0, 0, 0]);
    let n = nxm::encode(&f.matcher, &mut out);
    out[match_len_at..match_len_at + 2].copy_from_slice(&len16(n).to_be_bytes());
    out.extend(std::iter::repeat_n(0u8, n.div_ceil(8) * 8 - n));
    let len = len16(out.len());
    out[2..4].copy_from_slice(&len.to_be_bytes());
    out
}

/// Where an error 1.3 numbers (type, code) goes in 1.0: OpenFlow's own code, or
/// Nicira's vendor error (type, code) Open vSwitch gives it there.
fn code_in_1_0(kind: u16, code: u16) -> Result<(u16, u16), (u16, u16)> {
    let nx = Err;
    match (kind, code) {
        (0, c) => Ok((0, c)),
        (1, 0..=8) => Ok((kind, code)),
        (1, 9) => nx((1, 512)),
        (1, 10) => Ok((1, 5)),
        (1, 11) => nx((1, 514)),
        (2, 0..=8) => Ok((kind, code)),
        (2, 9) => nx((2, 9)),
        (2, 10) => nx((1, 522)),
        (2, 13) => nx((1, 523)),
        (2, 14) => nx((1, 524)),
        (2, 15) => nx((1, 525)),
        (3, 1) => nx((2, 257)),
        (4, 0) => nx((1, 256)),
        (4, 1) => Ok((1, 6)),
        (4, 5) => nx((1, 262)),
        (4, 6) => nx((0, 263)),
        (4, 7) => nx((1, 258)),
        (4, 8) => nx((1, 259)),
        (4, 9) => nx((1, 260)),
        (4, 10) => nx((1, 261)),
        (5, 1) => Ok((3, 0)),
        (5, 2) => nx((5, 257)),
        (5, 3) => Ok((3, 1)),
        (5, 4) => Ok((3, 2)),
        (5, 6) => Ok((3, 4)),
        (5, 7) => nx((3, 258)),
        (6, c) => nx((6, c)),
        (7, c @ 0..=1) => Ok((4, c)),
        (9, c @ 0..=2) => Ok((5, c)),
        (11, 2) => nx((1, 513)),
        (16, 1) => nx((1, 517)),
        (16, 3) => nx((1, 519)),
        (16, 5) => nx((1, 518)),
        (crate::error::OFPET_EXPERIMENTER, c) => nx(match c {
            2 => (1, 256),
            3 => (1, 257),
            4 => (1, 515),
            5 => (1, 516),
            9 => (1, 520),
            11 => (2, 256),
            12 => (5, 256),
            13 => (5, 257),
            15 => (2, 526),
            16..=21 => (1, 527 + c - 16),
            34..=36 => (1, 533 + c - 34),
            37 => (1, 536),
            38 => (1, 537),
            42 => (1, 265),
            43 => (1, 264),
            _ => UNENCODABLE,
        }),
        _ => nx(UNENCODABLE),
    }
}

/// The error answering `request` on a 1.0 connection.
pub fn answer(refusal: Refusal, request: &[u8]) -> Message {
    let (kind, code) = refusal.type_code();
    let mut data = Vec::new();
    let (kind, code) = match code_in_1_0(kind, code) {
        Ok(std) => std,
        Err((nx_type, nx_code)) => {
            data.extend_from_slice(&NX_VENDOR_ID.to_be_bytes());
            data.extend_from_slice(&nx_type.to_be_bytes());
            data.extend_from_slice(&nx_code.to_be_bytes());
            (NXET_VENDOR, NXVC_VENDOR_ERROR)
        }
    };
    data.extend_from_slice(&request[..request.len().min(ERROR_DATA_LEN)]);
    Message::Error(ErrorMsg { kind, code, data })
}

#[cfg(test)]
mod tests;
