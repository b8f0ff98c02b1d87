//! Multipart requests and replies (1.3 on): what a switch describes of itself and
//! of its ports. The port description is where 1.4 and 1.5 frame the same facts
//! differently from 1.3: a variable-length port with an Ethernet property instead of
//! a fixed 64-byte structure.

use crate::error::Refusal;
use crate::flow_stats::{FlowStatsEntry, FlowStatsRequest, OFPMP_FLOW};
use crate::frame::len16;
use crate::group_mod::{
    decode_group_request, group_features_body, GroupDescEntry, GroupStatsEntry, OFPG_ALL,
    OFPMP_GROUP, OFPMP_GROUP_DESC, OFPMP_GROUP_FEATURES,
};
use crate::meter_mod::{
    decode_meter_request, meter_features_body, MeterConfigEntry, MeterStatsEntry, OFPMP_METER,
    OFPMP_METER_CONFIG, OFPMP_METER_FEATURES,
};
use crate::port_stats::{PortStats, OFPMP_PORT_STATS};
use crate::reader::Reader;
use crate::table_stats::{
    AggregateStats, TableStats, OFPMP_AGGREGATE, OFPMP_QUEUE_STATS, OFPMP_TABLE,
};
use crate::version::Version;

pub const OFPT_MULTIPART_REQUEST: u8 = 18;
/// OpenFlow 1.0's numbers for them (statistics requests and replies).
pub const OFPT10_STATS_REQUEST: u8 = 16;
pub const OFPT10_STATS_REPLY: u8 = 17;
pub const OFPT_MULTIPART_REPLY: u8 = 19;
pub const OFPMP_DESC: u16 = 0;
pub const OFPMP_PORT_DESC: u16 = 13;
pub const OFPMP_TABLE_FEATURES: u16 = 12;
/// In a reply's flags: more replies to this request follow.
pub const OFPMPF_REPLY_MORE: u16 = 1;

/// A port as OpenFlow describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortInfo {
    pub port_no: u32,
    pub hw_addr: [u8; 6],
    /// At most 15 bytes go on the wire (16 with the terminating zero).
    pub name: String,
    /// OFPPC_PORT_DOWN: administratively down.
    pub admin_down: bool,
    /// OFPPS_LINK_DOWN when false; OFPPS_LIVE when true.
    pub link_up: bool,
    pub curr_speed_kbps: u32,
    pub max_speed_kbps: u32,
}

/// What `OFPMP_DESC` answers.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct SwitchDesc {
    pub manufacturer: String,
    pub hardware: String,
    pub software: String,
    pub serial: String,
    pub datapath: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MultipartRequest {
    Desc,
    PortDesc,
    /// Reading the tables' features (a request that sets them is refused).
    TableFeatures,
    Flow(FlowStatsRequest),
    /// One port's counters, or every port's (`OFPP_ANY`).
    PortStats(u32),
    /// Sums over the flows selected as for flow statistics.
    Aggregate(FlowStatsRequest),
    Table,
    /// A port's (or every port's) queue, one queue or all: vsw has none.
    QueueStats {
        port_no: u32,
        queue_id: u32,
    },
    /// One group's statistics, or every group's (OFPG_ALL).
    Group(u32),
    /// Groups as they are (1.5 may name one; OFPG_ALL: all).
    GroupDesc(u32),
    GroupFeatures,
    /// One meter's statistics, or every meter's (OFPM_ALL).
    Meter(u32),
    MeterConfig(u32),
    MeterFeatures,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MultipartReply {
    Desc(SwitchDesc),
    PortDesc(Vec<PortInfo>),
    /// Every table by number and name, with the most flows it takes and what it can
    /// match and do.
    TableFeatures(Vec<TableFeature>),
    /// Flow statistics, in the connection's version.
    Flow(Vec<FlowStatsEntry>),
    PortStats(Vec<PortStats>),
    Aggregate(AggregateStats),
    Table(Vec<TableStats>),
    QueueStats,
    Group(Vec<GroupStatsEntry>),
    GroupDesc(Vec<GroupDescEntry>),
    GroupFeatures,
    Meter(Vec<MeterStatsEntry>),
    MeterConfig(Vec<MeterConfigEntry>),
    MeterFeatures,
}

/// One table's features (`ofp_table_features`): properties as (type, contents),
/// each padded to 8 bytes on the wire.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableFeature {
    pub table_id: u8,
    pub name: String,
    pub max_entries: u32,
    pub properties: Vec<(u16, Vec<u8>)>,
}

pub(crate) fn fixed_string(out: &mut Vec<u8>, s: &str, len: usize) {
    // Always zero-terminated, cut at a character boundary.
    let mut end = s.len().min(len - 1);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    out.extend_from_slice(&s.as_bytes()[..end]);
    out.extend(std::iter::repeat_n(0u8, len - end));
}

fn read_fixed_string(r: &mut Reader, len: usize) -> Option<String> {
    let b = r.bytes(len)?;
    let end = b.iter().position(|&c| c == 0).unwrap_or(len);
    Some(String::from_utf8_lossy(&b[..end]).into_owned())
}

const OFPPC_PORT_DOWN: u32 = 1;
const OFPPS_LINK_DOWN: u32 = 1;
const OFPPS_LIVE: u32 = 4;
/// The Ethernet property of a 1.4/1.5 port.
const OFPPDPT_ETHERNET: u16 = 0;

impl PortInfo {
    fn config(&self) -> u32 {
        if self.admin_down {
            OFPPC_PORT_DOWN
        } else {
            0
        }
    }

    fn state(&self) -> u32 {
        if self.link_up {
            OFPPS_LIVE
        } else {
            OFPPS_LINK_DOWN
        }
    }

    /// `ofp_port` in `version`: 64 bytes in 1.3, 72 (with its Ethernet property) after.
    pub fn encode(&self, version: Version, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.port_no.to_be_bytes());
        if version >= Version::V1_4 {
            out.extend_from_slice(&72u16.to_be_bytes());
            out.extend_from_slice(&[0, 0]);
        } else {
            out.extend_from_slice(&[0; 4]);
        }
        out.extend_from_slice(&self.hw_addr);
        out.extend_from_slice(&[0, 0]);
        fixed_string(out, &self.name, 16);
        out.extend_from_slice(&self.config().to_be_bytes());
        out.extend_from_slice(&self.state().to_be_bytes());
        if version >= Version::V1_4 {
            out.extend_from_slice(&OFPPDPT_ETHERNET.to_be_bytes());
            out.extend_from_slice(&32u16.to_be_bytes());
            out.extend_from_slice(&[0; 4]);
        }
        // curr, advertised, supported, peer (feature bits: none claimed), speeds.
        out.extend_from_slice(&[0; 16]);
        out.extend_from_slice(&self.curr_speed_kbps.to_be_bytes());
        out.extend_from_slice(&self.max_speed_kbps.to_be_bytes());
    }

    pub(crate) fn decode(version: Version, r: &mut Reader) -> Option<PortInfo> {
        let port_no = r.u32()?;
        let length = if version >= Version::V1_4 {
            let l = r.u16()?;
            r.bytes(2)?;
            usize::from(l)
        } else {
            r.bytes(4)?;
            64
        };
        let hw_addr: [u8; 6] = r.bytes(6)?.try_into().ok()?;
        r.bytes(2)?;
        let name = read_fixed_string(r, 16)?;
        let config = r.u32()?;
        let state = r.u32()?;
        let (mut curr_speed_kbps, mut max_speed_kbps) = (0, 0);
        if version >= Version::V1_4 {
            // Properties to the port's length; the Ethernet one holds the speeds.
            let mut props = Reader::new(r.bytes(length.checked_sub(40)?)?);
            while let (Some(kind), Some(len)) = (props.u16(), props.u16()) {
                let body = props.bytes(usize::from(len).checked_sub(4)?)?;
                if kind == OFPPDPT_ETHERNET {
                    let mut e = Reader::new(body);
                    e.bytes(4 + 16)?;
                    curr_speed_kbps = e.u32()?;
                    max_speed_kbps = e.u32()?;
                }
            }
        } else {
            r.bytes(16)?;
            curr_speed_kbps = r.u32()?;
            max_speed_kbps = r.u32()?;
        }
        Some(PortInfo {
            port_no,
            hw_addr,
            name,
            admin_down: config & OFPPC_PORT_DOWN != 0,
            link_up: state & OFPPS_LINK_DOWN == 0,
            curr_speed_kbps,
            max_speed_kbps,
        })
    }
}

impl MultipartRequest {
    /// A request's body (after the header): type, flags, padding, and its own body.
    pub fn decode(body: &[u8]) -> Result<(MultipartRequest, u16), Refusal> {
        let mut r = Reader::new(body);
        let kind = r.u16().ok_or(Refusal::BadLen)?;
        let flags = r.u16().ok_or(Refusal::BadLen)?;
        r.bytes(4).ok_or(Refusal::BadLen)?;
        let req = match kind {
            OFPMP_DESC => MultipartRequest::Desc,
            // 1.5 adds a port number (and padding) to the request: any port is all.
            OFPMP_PORT_DESC => MultipartRequest::PortDesc,
            OFPMP_TABLE_FEATURES if r.is_empty() => MultipartRequest::TableFeatures,
            OFPMP_FLOW => MultipartRequest::Flow(FlowStatsRequest::decode(r.rest())?),
            OFPMP_PORT_STATS => {
                MultipartRequest::PortStats(crate::port_stats::decode_request(r.rest())?)
            }
            OFPMP_AGGREGATE => MultipartRequest::Aggregate(FlowStatsRequest::decode(r.rest())?),
            OFPMP_TABLE if r.is_empty() => MultipartRequest::Table,
            OFPMP_QUEUE_STATS => {
                let port_no = r.u32().ok_or(Refusal::BadLen)?;
                let queue_id = r.u32().ok_or(Refusal::BadLen)?;
                if !r.is_empty() {
                    return Err(Refusal::BadLen);
                }
                MultipartRequest::QueueStats { port_no, queue_id }
            }
            OFPMP_GROUP => {
                MultipartRequest::Group(decode_group_request(r.rest()).ok_or(Refusal::BadLen)?)
            }
            OFPMP_GROUP_DESC if r.is_empty() => MultipartRequest::GroupDesc(OFPG_ALL),
            OFPMP_GROUP_DESC => {
                MultipartRequest::GroupDesc(decode_group_request(r.rest()).ok_or(Refusal::BadLen)?)
            }
            OFPMP_GROUP_FEATURES if r.is_empty() => MultipartRequest::GroupFeatures,
            OFPMP_METER => {
                MultipartRequest::Meter(decode_meter_request(r.rest()).ok_or(Refusal::BadLen)?)
            }
            OFPMP_METER_CONFIG => MultipartRequest::MeterConfig(
                decode_meter_request(r.rest()).ok_or(Refusal::BadLen)?,
            ),
            OFPMP_METER_FEATURES if r.is_empty() => MultipartRequest::MeterFeatures,
            OFPMP_TABLE | OFPMP_TABLE_FEATURES | OFPMP_GROUP_FEATURES | OFPMP_METER_FEATURES => {
                return Err(Refusal::BadLen)
            }
            _ => return Err(Refusal::BadMultipart),
        };
        Ok((req, flags))
    }

    pub fn encode_body(&self, out: &mut Vec<u8>) {
        let kind = match self {
            MultipartRequest::Desc => OFPMP_DESC,
            MultipartRequest::PortDesc => OFPMP_PORT_DESC,
            MultipartRequest::TableFeatures => OFPMP_TABLE_FEATURES,
            MultipartRequest::Flow(_) => OFPMP_FLOW,
            MultipartRequest::PortStats(_) => OFPMP_PORT_STATS,
            MultipartRequest::Aggregate(_) => OFPMP_AGGREGATE,
            MultipartRequest::Table => OFPMP_TABLE,
            MultipartRequest::QueueStats { .. } => OFPMP_QUEUE_STATS,
            MultipartRequest::Group(_) => OFPMP_GROUP,
            MultipartRequest::GroupDesc(_) => OFPMP_GROUP_DESC,
            MultipartRequest::GroupFeatures => OFPMP_GROUP_FEATURES,
            MultipartRequest::Meter(_) => OFPMP_METER,
            MultipartRequest::MeterConfig(_) => OFPMP_METER_CONFIG,
            MultipartRequest::MeterFeatures => OFPMP_METER_FEATURES,
        };
        out.extend_from_slice(&kind.to_be_bytes());
        out.extend_from_slice(&[0; 6]);
        match self {
            MultipartRequest::Flow(f) | MultipartRequest::Aggregate(f) => f.encode_body(out),
            MultipartRequest::Meter(m) | MultipartRequest::MeterConfig(m) => {
                out.extend_from_slice(&m.to_be_bytes());
                out.extend_from_slice(&[0; 4]);
            }
            MultipartRequest::Group(g) => {
                out.extend_from_slice(&g.to_be_bytes());
                out.extend_from_slice(&[0; 4]);
            }
            // Encoded as 1.5 frames it (1.3 and 1.4 send none: all groups).
            MultipartRequest::GroupDesc(g) if *g != OFPG_ALL => {
                out.extend_from_slice(&g.to_be_bytes());
                out.extend_from_slice(&[0; 4]);
            }
            MultipartRequest::QueueStats { port_no, queue_id } => {
                out.extend_from_slice(&port_no.to_be_bytes());
                out.extend_from_slice(&queue_id.to_be_bytes());
            }
            MultipartRequest::PortStats(p) => crate::port_stats::encode_request(*p, out),
            _ => {}
        }
    }
}

/// Each item encoded on its own (a reply splits between items, never inside one).
/// The most entry bytes one reply message carries (64 KiB less the header and the
/// multipart header).
pub const MAX_BODY: usize = 65535 - 8 - 8;

/// A multipart reply's message bodies, made one at a time from its entries as the
/// caller asks for them, so a dump of 100,000 flows is never held encoded whole:
/// each body holds as many whole entries as fit, all but the last flagged
/// REPLY_MORE. An entry that cannot fit any message (over [`MAX_BODY`]) is left out
/// (the switch refuses rules and groups that would make one).
pub struct BodyStream {
    kind: u16,
    /// What follows the flags before the entries: 1.3's padding, nothing in 1.0,
    /// a vendor's id and subtype in Nicira's 1.0 statistics.
    after_flags: Vec<u8>,
    entries: Box<dyn Iterator<Item = Vec<u8>> + Send>,
    next: Option<Vec<u8>>,
    started: bool,
    done: bool,
}

impl BodyStream {
    pub fn new(kind: u16, entries: Box<dyn Iterator<Item = Vec<u8>> + Send>) -> BodyStream {
        BodyStream::with_head(kind, vec![0; 4], entries)
    }

    /// A stream whose bodies start with `kind`, the flags and `after_flags`.
    pub fn with_head(
        kind: u16,
        after_flags: Vec<u8>,
        entries: Box<dyn Iterator<Item = Vec<u8>> + Send>,
    ) -> BodyStream {
        BodyStream {
            kind,
            after_flags,
            entries,
            next: None,
            started: false,
            done: false,
        }
    }

    /// The most entry bytes one message holds after its header and this head.
    fn room(&self) -> usize {
        usize::from(u16::MAX) - crate::frame::HEADER_LEN - 4 - self.after_flags.len()
    }

    fn advance(&mut self) {
        let room = self.room();
        self.next = self.entries.by_ref().find(|e| e.len() <= room);
    }

    /// The next body (type, flags, padding, entries); `None` once the last was given.
    pub fn next_body(&mut self) -> Option<Vec<u8>> {
        if self.done {
            return None;
        }
        if !self.started {
            self.started = true;
            self.advance();
        }
        let mut b = Vec::with_capacity(16 + 1024);
        b.extend_from_slice(&self.kind.to_be_bytes());
        b.extend_from_slice(&[0; 2]);
        b.extend_from_slice(&self.after_flags);
        let head = b.len();
        while let Some(e) = self.next.take() {
            if b.len() > head && b.len() - head + e.len() > self.room() {
                self.next = Some(e);
                break;
            }
            b.extend(e);
            self.advance();
        }
        let more = self.next.is_some();
        if more {
            b[2..4].copy_from_slice(&OFPMPF_REPLY_MORE.to_be_bytes());
        } else {
            self.done = true;
        }
        Some(b)
    }
}

/// Each item encoded, an entry of a reply each.
pub(crate) fn each<T>(items: &[T], encode: impl Fn(&T, &mut Vec<u8>)) -> Vec<Vec<u8>> {
    items
        .iter()
        .map(|x| {
            let mut b = Vec::with_capacity(128);
            encode(x, &mut b);
            b
        })
        .collect()
}

impl MultipartReply {
    pub fn kind(&self) -> u16 {
        match self {
            MultipartReply::Desc(_) => OFPMP_DESC,
            MultipartReply::PortDesc(_) => OFPMP_PORT_DESC,
            MultipartReply::TableFeatures(_) => OFPMP_TABLE_FEATURES,
            MultipartReply::Flow(_) => OFPMP_FLOW,
            MultipartReply::PortStats(_) => OFPMP_PORT_STATS,
            MultipartReply::Aggregate(_) => OFPMP_AGGREGATE,
            MultipartReply::Table(_) => OFPMP_TABLE,
            MultipartReply::QueueStats => OFPMP_QUEUE_STATS,
            MultipartReply::Group(_) => OFPMP_GROUP,
            MultipartReply::GroupDesc(_) => OFPMP_GROUP_DESC,
            MultipartReply::GroupFeatures => OFPMP_GROUP_FEATURES,
            MultipartReply::Meter(_) => OFPMP_METER,
            MultipartReply::MeterConfig(_) => OFPMP_METER_CONFIG,
            MultipartReply::MeterFeatures => OFPMP_METER_FEATURES,
        }
    }

    /// The reply's body, as one or more message bodies (each under OpenFlow's 64 KiB
    /// message length, all but the last flagged REPLY_MORE).
    pub fn encode_bodies(&self, version: Version) -> Vec<Vec<u8>> {
        let mut stream =
            BodyStream::new(self.kind(), Box::new(self.entries_in(version).into_iter()));
        std::iter::from_fn(|| stream.next_body()).collect()
    }

    /// The reply as a stream of bodies made as they are asked for.
    pub fn into_stream(self, version: Version) -> BodyStream {
        BodyStream::new(self.kind(), Box::new(self.entries_in(version).into_iter()))
    }

    /// Each entry of the reply, encoded.
    pub(crate) fn entries_in(&self, version: Version) -> Vec<Vec<u8>> {
        match self {
            MultipartReply::Desc(d) => {
                let mut e = Vec::with_capacity(1056);
                fixed_string(&mut e, &d.manufacturer, 256);
                fixed_string(&mut e, &d.hardware, 256);
                fixed_string(&mut e, &d.software, 256);
                fixed_string(&mut e, &d.serial, 32);
                fixed_string(&mut e, &d.datapath, 256);
                vec![e]
            }
            MultipartReply::PortDesc(ports) => each(ports, |p, b| p.encode(version, b)),
            MultipartReply::PortStats(ports) => each(ports, |p, b| p.encode(version, b)),
            MultipartReply::Flow(entries) => each(entries, |e, b| e.encode(version, b)),
            MultipartReply::Aggregate(a) => {
                let mut e = Vec::with_capacity(24);
                a.encode(version, &mut e);
                vec![e]
            }
            MultipartReply::Table(tables) => each(tables, |t, b| t.encode(b)),
            MultipartReply::QueueStats => Vec::new(),
            MultipartReply::Group(groups) => each(groups, |g, b| g.encode(b)),
            MultipartReply::GroupDesc(groups) => each(groups, |g, b| g.encode(version, b)),
            MultipartReply::GroupFeatures => {
                let mut e = Vec::with_capacity(40);
                group_features_body(&mut e);
                vec![e]
            }
            MultipartReply::Meter(meters) => each(meters, |m, b| m.encode(b)),
            MultipartReply::MeterConfig(meters) => each(meters, |m, b| m.encode(b)),
            MultipartReply::MeterFeatures => {
                let mut e = Vec::with_capacity(24);
                meter_features_body(&mut e);
                vec![e]
            }
            MultipartReply::TableFeatures(tables) => tables
                .iter()
                .map(|t| {
                    let mut e = Vec::with_capacity(1024);
                    e.extend_from_slice(&[0, 0]); // length, below
                    e.push(t.table_id);
                    e.extend_from_slice(&[0; 5]);
                    fixed_string(&mut e, &t.name, 32);
                    // Every metadata bit can be matched and written.
                    e.extend_from_slice(&[0xff; 16]);
                    e.extend_from_slice(&0u32.to_be_bytes()); // capabilities
                    e.extend_from_slice(&t.max_entries.to_be_bytes());
                    for (kind, body) in &t.properties {
                        let start = e.len();
                        e.extend_from_slice(&kind.to_be_bytes());
                        e.extend_from_slice(&len16(4 + body.len()).to_be_bytes());
                        e.extend_from_slice(body);
                        let len = e.len() - start;
                        e.extend(std::iter::repeat_n(0u8, len.div_ceil(8) * 8 - len));
                    }
                    let len = len16(e.len());
                    e[..2].copy_from_slice(&len.to_be_bytes());
                    e
                })
                .collect(),
        }
    }

    /// One reply message's body (type, flags, padding, entries); the flags tell
    /// whether more follow.
    pub fn decode_body(version: Version, body: &[u8]) -> Result<(MultipartReply, u16), Refusal> {
        let mut r = Reader::new(body);
        let kind = r.u16().ok_or(Refusal::BadLen)?;
        let flags = r.u16().ok_or(Refusal::BadLen)?;
        r.bytes(4).ok_or(Refusal::BadLen)?;
        let reply = match kind {
            OFPMP_DESC => {
                let d = (|| {
                    Some(SwitchDesc {
                        manufacturer: read_fixed_string(&mut r, 256)?,
                        hardware: read_fixed_string(&mut r, 256)?,
                        software: read_fixed_string(&mut r, 256)?,
                        serial: read_fixed_string(&mut r, 32)?,
                        datapath: read_fixed_string(&mut r, 256)?,
                    })
                })()
                .ok_or(Refusal::BadLen)?;
                MultipartReply::Desc(d)
            }
            OFPMP_PORT_DESC => {
                let mut ports = Vec::new();
                while !r.is_empty() {
                    ports.push(PortInfo::decode(version, &mut r).ok_or(Refusal::BadLen)?);
                }
                MultipartReply::PortDesc(ports)
            }
            OFPMP_PORT_STATS => MultipartReply::PortStats(
                PortStats::decode_entries(version, r.rest()).ok_or(Refusal::BadLen)?,
            ),
            OFPMP_FLOW => {
                let entries =
                    crate::flow_stats::decode_entries(version, r.rest()).ok_or(Refusal::BadLen)?;
                MultipartReply::Flow(entries)
            }
            OFPMP_AGGREGATE => MultipartReply::Aggregate(
                AggregateStats::decode(version, &mut r).ok_or(Refusal::BadLen)?,
            ),
            OFPMP_TABLE => {
                let mut tables = Vec::new();
                while !r.is_empty() {
                    tables.push(TableStats::decode(&mut r).ok_or(Refusal::BadLen)?);
                }
                MultipartReply::Table(tables)
            }
            OFPMP_QUEUE_STATS if r.is_empty() => MultipartReply::QueueStats,
            OFPMP_GROUP => {
                let mut groups = Vec::new();
                while !r.is_empty() {
                    groups.push(GroupStatsEntry::decode(&mut r).ok_or(Refusal::BadLen)?);
                }
                MultipartReply::Group(groups)
            }
            OFPMP_GROUP_DESC => {
                let mut groups = Vec::new();
                while !r.is_empty() {
                    groups.push(GroupDescEntry::decode(version, &mut r).ok_or(Refusal::BadLen)?);
                }
                MultipartReply::GroupDesc(groups)
            }
            OFPMP_GROUP_FEATURES => {
                r.bytes(40).ok_or(Refusal::BadLen)?;
                MultipartReply::GroupFeatures
            }
            OFPMP_METER => {
                let mut meters = Vec::new();
                while !r.is_empty() {
                    meters.push(MeterStatsEntry::decode(&mut r).ok_or(Refusal::BadLen)?);
                }
                MultipartReply::Meter(meters)
            }
            OFPMP_METER_CONFIG => {
                let mut meters = Vec::new();
                while !r.is_empty() {
                    meters.push(MeterConfigEntry::decode(&mut r).ok_or(Refusal::BadLen)?);
                }
                MultipartReply::MeterConfig(meters)
            }
            OFPMP_METER_FEATURES => {
                r.bytes(16).ok_or(Refusal::BadLen)?;
                MultipartReply::MeterFeatures
            }
            OFPMP_TABLE_FEATURES => {
                let mut tables = Vec::new();
                while !r.is_empty() {
                    let t = (|| {
                        let len = usize::from(r.u16()?);
                        let table_id = r.u8()?;
                        r.bytes(5)?;
                        let name = read_fixed_string(&mut r, 32)?;
                        r.bytes(16 + 4)?;
                        let max_entries = r.u32()?;
                        let mut props = Reader::new(r.bytes(len.checked_sub(64)?)?);
                        let mut properties = Vec::new();
                        while !props.is_empty() {
                            let kind = props.u16()?;
                            let plen = usize::from(props.u16()?);
                            let body = props.bytes(plen.checked_sub(4)?)?;
                            props.bytes(plen.div_ceil(8) * 8 - plen)?;
                            properties.push((kind, body.to_vec()));
                        }
                        Some(TableFeature {
                            table_id,
                            name,
                            max_entries,
                            properties,
                        })
                    })()
                    .ok_or(Refusal::BadLen)?;
                    tables.push(t);
                }
                MultipartReply::TableFeatures(tables)
            }
            _ => return Err(Refusal::BadMultipart),
        };
        if !r.is_empty() {
            return Err(Refusal::BadLen);
        }
        Ok((reply, flags))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port(n: u32) -> PortInfo {
        PortInfo {
            port_no: n,
            hw_addr: [2, 0, 0, 0, 0, n as u8],
            name: format!("vm{n}"),
            admin_down: false,
            link_up: n.is_multiple_of(2),
            curr_speed_kbps: 10_000_000,
            max_speed_kbps: 0,
        }
    }

    #[test]
    fn ports_are_64_bytes_in_1_3_and_72_with_their_property_after() {
        for (v, len) in [
            (Version::V1_3, 64),
            (Version::V1_4, 72),
            (Version::V1_5, 72),
        ] {
            let mut b = Vec::new();
            port(1).encode(v, &mut b);
            assert_eq!(b.len(), len, "{v}");
            let bodies = MultipartReply::PortDesc(vec![port(1), port(2)]).encode_bodies(v);
            assert_eq!(bodies.len(), 1);
            let (back, flags) = MultipartReply::decode_body(v, &bodies[0]).unwrap();
            assert_eq!(
                (back, flags),
                (MultipartReply::PortDesc(vec![port(1), port(2)]), 0)
            );
        }
    }

    #[test]
    fn many_ports_take_several_replies_and_long_names_are_cut() {
        let ports: Vec<PortInfo> = (0..2000).map(port).collect();
        let bodies = MultipartReply::PortDesc(ports.clone()).encode_bodies(Version::V1_3);
        assert!(bodies.len() > 1 && bodies.iter().all(|b| b.len() <= 65535 - 8));
        let mut all = Vec::new();
        for (i, b) in bodies.iter().enumerate() {
            let (MultipartReply::PortDesc(p), flags) =
                MultipartReply::decode_body(Version::V1_3, b).unwrap()
            else {
                panic!("port desc");
            };
            assert_eq!(flags == OFPMPF_REPLY_MORE, i + 1 < bodies.len());
            all.extend(p);
        }
        assert_eq!(all, ports);
        let mut long = port(1);
        long.name = "a-very-long-port-name".into();
        let mut b = Vec::new();
        long.encode(Version::V1_3, &mut b);
        assert_eq!(&b[16..32], b"a-very-long-por\0");
    }
}
