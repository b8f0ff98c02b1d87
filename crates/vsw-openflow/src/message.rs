//! The messages of a connection before flows, and their codec.
//!
//! Types are numbered as in OpenFlow 1.3, which 1.4 and 1.5 keep for these
//! messages; hello, error and echo have the same numbers and layout in every
//! version, so a peer of any version can be told why it was refused.

use crate::async_config::{
    AsyncConfig, OFPT_GET_ASYNC_REPLY, OFPT_GET_ASYNC_REQUEST, OFPT_SET_ASYNC,
};
use crate::bundle::{
    BadBundle, BundleAdd, BundleCtrl, OFPET_BUNDLE_FAILED, OFPT_BUNDLE_ADD_MESSAGE,
    OFPT_BUNDLE_CONTROL, ONFT_BUNDLE_ADD_MESSAGE, ONFT_BUNDLE_CONTROL, ONF_BUNDLE_ERROR_BASE,
    ONF_VENDOR_ID,
};
use crate::error::{Refusal, ERROR_DATA_LEN};
use crate::flow_mod::{FlowMod, OFPT_FLOW_MOD};
use crate::flow_stats::FlowRemoved;
use crate::frame::{Header, HEADER_LEN};
use crate::group_mod::{GroupMod, OFPT_GROUP_MOD};
use crate::meter_mod::{MeterMod, OFPT_METER_MOD};
use crate::multipart::{MultipartRequest, PortInfo, OFPT_MULTIPART_REQUEST};
use crate::packet::{PacketIn, PacketOut, OFPT_PACKET_IN, OFPT_PACKET_OUT};
use crate::reader::Reader;
use crate::role::{RoleMsg, RoleStatus, OFPT_ROLE_REPLY, OFPT_ROLE_REQUEST, OFPT_ROLE_STATUS};
use crate::tlv::{TlvMap, TlvTableMod};
use crate::version::{Version, VersionSet};

pub const OFPT_HELLO: u8 = 0;
pub const OFPT_ERROR: u8 = 1;
pub const OFPT_ECHO_REQUEST: u8 = 2;
pub const OFPT_ECHO_REPLY: u8 = 3;
/// Vendor extensions (Nicira's among them): none is taken.
pub const OFPT_EXPERIMENTER: u8 = 4;
pub const OFPT_FEATURES_REQUEST: u8 = 5;
pub const OFPT_FEATURES_REPLY: u8 = 6;
pub const OFPT_GET_CONFIG_REQUEST: u8 = 7;
pub const OFPT_GET_CONFIG_REPLY: u8 = 8;
pub const OFPT_SET_CONFIG: u8 = 9;
pub const OFPT_FLOW_REMOVED: u8 = 11;
pub const OFPT_PORT_STATUS: u8 = 12;
/// Port-status reasons.
pub const OFPPR_ADD: u8 = 0;
pub const OFPPR_DELETE: u8 = 1;
pub const OFPPR_MODIFY: u8 = 2;
pub const OFPT_BARRIER_REQUEST: u8 = 20;
pub const OFPT_BARRIER_REPLY: u8 = 21;

/// A hello element: the versions bitmap.
const OFPHET_VERSIONBITMAP: u16 = 1;

/// What a switch says of itself (`ofp_switch_features`).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Features {
    pub datapath_id: u64,
    pub n_buffers: u32,
    pub n_tables: u8,
    pub auxiliary_id: u8,
    pub capabilities: u32,
    /// Every port: OpenFlow 1.0 lists them here; from 1.3 on they are in the
    /// port-desc multipart instead, and this is not sent.
    pub ports: Vec<PortInfo>,
}

/// `ofp_switch_config`: fragment handling flags and how much of a packet a
/// packet-in carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SwitchConfig {
    pub flags: u16,
    pub miss_send_len: u16,
}

impl SwitchConfig {
    /// OFPC_FRAG_NORMAL (0) is all vsw does with fragments: treated as any packet.
    pub const FRAG_MASK: u16 = 3;
}

impl Default for SwitchConfig {
    /// OFPCML_DEFAULT: 128 bytes of a packet in a packet-in.
    fn default() -> Self {
        SwitchConfig {
            flags: 0,
            miss_send_len: 128,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorMsg {
    pub kind: u16,
    pub code: u16,
    pub data: Vec<u8>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// `versions`: the bitmap, when the hello carried one (other elements are
    /// skipped, as the spec asks).
    Hello {
        versions: Option<VersionSet>,
    },
    Error(ErrorMsg),
    EchoRequest(Vec<u8>),
    EchoReply(Vec<u8>),
    FeaturesRequest,
    FeaturesReply(Features),
    GetConfigRequest,
    GetConfigReply(SwitchConfig),
    SetConfig(SwitchConfig),
    BarrierRequest,
    BarrierReply,
    /// Replies are encoded by [`crate::multipart::MultipartReply`]: one request may
    /// take several messages.
    MultipartRequest(MultipartRequest),
    FlowMod(FlowMod),
    PacketIn(PacketIn),
    PacketOut(PacketOut),
    GetAsyncRequest,
    GetAsyncReply(AsyncConfig),
    /// The body as sent, checked: 1.4+ properties change only what they name, so
    /// it is applied to the connection's configuration by the session.
    SetAsync(Vec<u8>),
    RoleRequest(RoleMsg),
    RoleReply(RoleMsg),
    /// 1.4+: the connection's role was changed (a new master made it a slave).
    RoleStatus(RoleStatus),
    /// A port was added (0), deleted (1) or changed (2): reason and port.
    PortStatus(u8, PortInfo),
    FlowRemoved(FlowRemoved),
    GroupMod(GroupMod),
    MeterMod(MeterMod),
    /// Nicira's TLV table messages (experimenter messages: `tlv.rs`).
    TlvTableMod(TlvTableMod),
    TlvTableRequest,
    TlvTableReply(Vec<TlvMap>),
    /// Nicira's NXT_SET_PACKET_IN_FORMAT: which packet-in message the connection
    /// wants (`NXPIF_*`).
    SetPacketInFormat(u32),
    /// Nicira's NXT_SET_CONTROLLER_ID: the number `controller(id=…)` actions name
    /// this connection by.
    SetControllerId(u16),
    /// Nicira's NXT_PACKET_IN2 (sent only).
    PacketIn2(crate::packet::PacketIn2),
    /// Nicira's older NXT_PACKET_IN (sent only).
    NxPacketIn(PacketIn),
    /// Nicira's NXT_FLOW_REMOVED (sent only, to a connection in the NXM flow
    /// format).
    NxFlowRemoved(FlowRemoved),
    /// Nicira's NXT_RESUME: a paused translation continued.
    Resume(crate::packet::Resume),
    /// OFPT_BUNDLE_CONTROL (1.4 on; ONF's experimenter message in 1.3).
    BundleControl(BundleCtrl),
    /// OFPT_BUNDLE_ADD_MESSAGE (likewise).
    BundleAdd(BundleAdd),
    /// Nicira's NXT_SET_FLOW_FORMAT (OpenFlow 1.0): `ofp10_match` or NXM in
    /// flow-mods and flow statistics (`NXFF_*`).
    SetFlowFormat(u32),
    /// Nicira's NXT_FLOW_MOD_TABLE_ID (OpenFlow 1.0): whether a flow-mod's command
    /// carries its table id in its high byte.
    FlowModTableId(bool),
    /// Nicira's NXT_CT_FLUSH_ZONE: the connection tracker's entries of a zone go.
    CtFlushZone(u16),
    /// Nicira's NXT_CT_FLUSH: the connection tracker's entries a filter names go.
    CtFlush(crate::ct_flush::CtFlush),
    /// OFPT_PORT_MOD: a port's configuration bits changed.
    PortMod(crate::port_mod::PortMod),
    /// Nicira's NXST_FLOW_MONITOR request (OpenFlow 1.0): monitors to start.
    FlowMonitorRequest(Vec<crate::flow_monitor::FlowMonitor>),
    /// Nicira's NXT_FLOW_MONITOR_CANCEL: a monitor to end.
    FlowMonitorCancel(u32),
}

impl Message {
    pub fn kind(&self) -> u8 {
        match self {
            Message::Hello { .. } => OFPT_HELLO,
            Message::Error(_) => OFPT_ERROR,
            Message::EchoRequest(_) => OFPT_ECHO_REQUEST,
            Message::EchoReply(_) => OFPT_ECHO_REPLY,
            Message::FeaturesRequest => OFPT_FEATURES_REQUEST,
            Message::FeaturesReply(_) => OFPT_FEATURES_REPLY,
            Message::GetConfigRequest => OFPT_GET_CONFIG_REQUEST,
            Message::GetConfigReply(_) => OFPT_GET_CONFIG_REPLY,
            Message::SetConfig(_) => OFPT_SET_CONFIG,
            Message::BarrierRequest => OFPT_BARRIER_REQUEST,
            Message::BarrierReply => OFPT_BARRIER_REPLY,
            Message::MultipartRequest(_) => OFPT_MULTIPART_REQUEST,
            Message::FlowMod(_) => OFPT_FLOW_MOD,
            Message::PacketIn(_) => OFPT_PACKET_IN,
            Message::PacketOut(_) => OFPT_PACKET_OUT,
            Message::GetAsyncRequest => OFPT_GET_ASYNC_REQUEST,
            Message::GetAsyncReply(_) => OFPT_GET_ASYNC_REPLY,
            Message::SetAsync(_) => OFPT_SET_ASYNC,
            Message::RoleRequest(_) => OFPT_ROLE_REQUEST,
            Message::RoleReply(_) => OFPT_ROLE_REPLY,
            Message::RoleStatus(_) => OFPT_ROLE_STATUS,
            Message::PortStatus(..) => OFPT_PORT_STATUS,
            Message::FlowRemoved(_) => OFPT_FLOW_REMOVED,
            Message::GroupMod(_) => OFPT_GROUP_MOD,
            Message::MeterMod(_) => OFPT_METER_MOD,
            Message::TlvTableMod(_)
            | Message::TlvTableRequest
            | Message::TlvTableReply(_)
            | Message::SetPacketInFormat(_)
            | Message::SetControllerId(_)
            | Message::PacketIn2(_)
            | Message::NxPacketIn(_)
            | Message::NxFlowRemoved(_)
            | Message::CtFlushZone(_)
            | Message::CtFlush(_)
            | Message::Resume(_)
            | Message::SetFlowFormat(_)
            | Message::FlowModTableId(_)
            | Message::FlowMonitorCancel(_) => OFPT_EXPERIMENTER,
            Message::FlowMonitorRequest(_) => OFPT_MULTIPART_REQUEST,
            Message::PortMod(_) => crate::port_mod::OFPT_PORT_MOD,
            Message::BundleControl(_) => OFPT_BUNDLE_CONTROL,
            Message::BundleAdd(_) => OFPT_BUNDLE_ADD_MESSAGE,
        }
    }

    /// Its type on the wire in `version` from 1.2 on: 1.3's bundle messages are
    /// ONF's experimenter messages.
    pub(crate) fn kind_from_1_2(&self, version: u8) -> u8 {
        match self {
            Message::BundleControl(_) | Message::BundleAdd(_) if version < Version::V1_4.wire() => {
                OFPT_EXPERIMENTER
            }
            _ => self.kind(),
        }
    }

    /// The body after the header `out` holds, as 1.2 on (and, for the messages
    /// 1.0 lays out as they do, 1.0) write it; then the length in the header.
    pub(crate) fn encode_common(&self, version: u8, mut out: Vec<u8>) -> Vec<u8> {
        match self {
            Message::Hello { versions } => {
                if let Some(set) = versions {
                    // One bitmap word covers versions 0..31; element padded to 8.
                    out.extend_from_slice(&OFPHET_VERSIONBITMAP.to_be_bytes());
                    out.extend_from_slice(&8u16.to_be_bytes());
                    out.extend_from_slice(&set.0.to_be_bytes());
                }
            }
            Message::Error(e) => {
                out.extend_from_slice(&e.kind.to_be_bytes());
                out.extend_from_slice(&e.code.to_be_bytes());
                out.extend_from_slice(&e.data);
            }
            Message::EchoRequest(d) | Message::EchoReply(d) => out.extend_from_slice(d),
            Message::FeaturesRequest
            | Message::GetConfigRequest
            | Message::BarrierRequest
            | Message::BarrierReply => {}
            Message::FeaturesReply(f) => {
                out.extend_from_slice(&f.datapath_id.to_be_bytes());
                out.extend_from_slice(&f.n_buffers.to_be_bytes());
                out.push(f.n_tables);
                out.push(f.auxiliary_id);
                out.extend_from_slice(&[0, 0]);
                out.extend_from_slice(&f.capabilities.to_be_bytes());
                out.extend_from_slice(&0u32.to_be_bytes());
            }
            Message::GetConfigReply(c) | Message::SetConfig(c) => {
                out.extend_from_slice(&c.flags.to_be_bytes());
                out.extend_from_slice(&c.miss_send_len.to_be_bytes());
            }
            Message::MultipartRequest(m) => m.encode_body(&mut out),
            Message::FlowMod(f) => {
                let v = Version::from_wire(version).unwrap_or(Version::V1_3);
                f.encode_body(v, &mut out)
            }
            Message::PacketIn(p) => p.encode_body(&mut out),
            Message::GetAsyncRequest => {}
            Message::GetAsyncReply(c) => {
                let v = Version::from_wire(version).unwrap_or(Version::V1_3);
                c.encode_body(v, &mut out)
            }
            Message::SetAsync(body) => out.extend_from_slice(body),
            Message::RoleRequest(r) | Message::RoleReply(r) => r.encode_body(&mut out),
            Message::RoleStatus(r) => r.encode_body(&mut out),
            Message::MeterMod(m) => m.encode_body(&mut out),
            Message::TlvTableMod(m) => {
                experimenter(&mut out, crate::tlv::NXT_TLV_TABLE_MOD);
                m.encode_body(&mut out);
            }
            Message::TlvTableRequest => experimenter(&mut out, crate::tlv::NXT_TLV_TABLE_REQUEST),
            Message::TlvTableReply(maps) => {
                experimenter(&mut out, crate::tlv::NXT_TLV_TABLE_REPLY);
                crate::tlv::encode_reply_body(maps, &mut out);
            }
            Message::SetPacketInFormat(f) => {
                experimenter(&mut out, NXT_SET_PACKET_IN_FORMAT);
                out.extend_from_slice(&f.to_be_bytes());
            }
            Message::SetControllerId(id) => {
                experimenter(&mut out, NXT_SET_CONTROLLER_ID);
                out.extend_from_slice(&[0; 6]);
                out.extend_from_slice(&id.to_be_bytes());
            }
            Message::Resume(r) => {
                experimenter(&mut out, crate::packet::NXT_RESUME);
                r.encode_body(&mut out);
            }
            Message::PacketIn2(pi) => {
                experimenter(&mut out, crate::packet::NXT_PACKET_IN2);
                pi.encode_body(&mut out);
            }
            Message::NxPacketIn(pi) => {
                experimenter(&mut out, crate::packet::NXT_PACKET_IN);
                pi.encode_nx_body(&mut out);
            }
            Message::NxFlowRemoved(f) => {
                experimenter(&mut out, NXT_FLOW_REMOVED);
                f.encode_nx_body(&mut out);
            }
            Message::CtFlushZone(zone) => {
                experimenter(&mut out, NXT_CT_FLUSH_ZONE);
                out.extend_from_slice(&[0; 6]);
                out.extend_from_slice(&zone.to_be_bytes());
            }
            Message::CtFlush(f) => {
                experimenter(&mut out, crate::ct_flush::NXT_CT_FLUSH);
                f.encode_body(&mut out);
            }
            Message::GroupMod(g) => g.encode_body(
                Version::from_wire(version).unwrap_or(Version::V1_3),
                &mut out,
            ),
            Message::FlowRemoved(f) => f.encode_body(
                Version::from_wire(version).unwrap_or(Version::V1_3),
                &mut out,
            ),
            Message::PortStatus(reason, port) => {
                out.push(*reason);
                out.extend_from_slice(&[0; 7]);
                port.encode(
                    Version::from_wire(version).unwrap_or(Version::V1_3),
                    &mut out,
                );
            }
            Message::PacketOut(p) => {
                let v = Version::from_wire(version).unwrap_or(Version::V1_3);
                p.encode_body(v, &mut out)
            }
            Message::BundleControl(c) => {
                if version < Version::V1_4.wire() {
                    onf_experimenter(&mut out, ONFT_BUNDLE_CONTROL);
                }
                c.encode_body(&mut out)
            }
            Message::BundleAdd(a) => {
                if version < Version::V1_4.wire() {
                    onf_experimenter(&mut out, ONFT_BUNDLE_ADD_MESSAGE);
                }
                a.encode_body(&mut out)
            }
            // 1.0's messages: a 1.3+ connection is never sent them.
            Message::SetFlowFormat(f) => {
                experimenter(&mut out, NXT_SET_FLOW_FORMAT);
                out.extend_from_slice(&f.to_be_bytes());
            }
            Message::FlowModTableId(on) => {
                experimenter(&mut out, NXT_FLOW_MOD_TABLE_ID);
                out.extend_from_slice(&[u8::from(*on), 0, 0, 0, 0, 0, 0, 0]);
            }
            Message::FlowMonitorRequest(monitors) => {
                let v = Version::from_wire(version).unwrap_or(Version::V1_3);
                crate::flow_monitor::encode_request_body(v, monitors, &mut out);
            }
            Message::PortMod(pm) => {
                let v = Version::from_wire(version).unwrap_or(Version::V1_3);
                pm.encode_body(v, &mut out);
            }
            // ONF's (1.3; 1.4 deletes a monitor by a request's command instead).
            Message::FlowMonitorCancel(id) => {
                onf_experimenter(&mut out, crate::flow_monitor::ONF_FLOW_MONITOR);
                out.extend_from_slice(&id.to_be_bytes());
            }
        }
        finish(out)
    }

    /// A hello, whatever its version (it comes before one is agreed).
    pub fn decode_hello(body: &[u8]) -> Message {
        let mut r = Reader::new(body);
        let mut versions = None;
        // Elements: type, length (with the 4-byte element header, without padding).
        while let (Some(kind), Some(len)) = (r.u16(), r.u16()) {
            let len = usize::from(len);
            if len < 4 {
                break;
            }
            let Some(payload) = r.bytes(len - 4) else {
                break;
            };
            if kind == OFPHET_VERSIONBITMAP {
                let mut bits = Reader::new(payload);
                // Versions above 31 (a second word) are none vsw speaks.
                versions = bits.u32().map(VersionSet);
            }
            let pad = len.div_ceil(8) * 8 - len;
            if r.bytes(pad).is_none() {
                break;
            }
        }
        Message::Hello { versions }
    }

    /// A message of a connection that speaks `version` (1.2 on); `message` is all
    /// of it, header included.
    pub(crate) fn decode_from_1_2(version: Version, message: &[u8]) -> Result<Message, Refusal> {
        let h = Header::parse(message).ok_or(Refusal::BadLen)?;
        let body = message
            .get(HEADER_LEN..usize::from(h.length))
            .ok_or(Refusal::BadLen)?;
        if h.kind == OFPT_HELLO {
            return Ok(Message::decode_hello(body));
        }
        if h.version != version.wire() && h.kind != OFPT_ERROR {
            return Err(Refusal::BadVersion);
        }
        let mut r = Reader::new(body);
        match h.kind {
            OFPT_ERROR
            | OFPT_ECHO_REQUEST
            | OFPT_ECHO_REPLY
            | OFPT_FEATURES_REQUEST
            | OFPT_GET_CONFIG_REQUEST
            | OFPT_SET_CONFIG => Message::decode_common(h.kind, body),
            OFPT_BARRIER_REQUEST => exact(&r, Message::BarrierRequest),
            OFPT_BARRIER_REPLY => exact(&r, Message::BarrierReply),
            OFPT_FEATURES_REPLY => {
                let f = (|| {
                    let datapath_id = r.u64()?;
                    let n_buffers = r.u32()?;
                    let n_tables = r.u8()?;
                    let auxiliary_id = r.u8()?;
                    r.bytes(2)?;
                    let capabilities = r.u32()?;
                    r.u32()?;
                    Some(Features {
                        datapath_id,
                        n_buffers,
                        n_tables,
                        auxiliary_id,
                        capabilities,
                        ports: Vec::new(),
                    })
                })()
                .ok_or(Refusal::BadLen)?;
                exact(&r, Message::FeaturesReply(f))
            }
            OFPT_GET_CONFIG_REPLY => {
                let c = SwitchConfig {
                    flags: r.u16().ok_or(Refusal::BadLen)?,
                    miss_send_len: r.u16().ok_or(Refusal::BadLen)?,
                };
                exact(&r, Message::GetConfigReply(c))
            }
            OFPT_FLOW_MOD => Ok(Message::FlowMod(FlowMod::decode_body(version, body)?)),
            OFPT_GET_ASYNC_REQUEST => exact(&r, Message::GetAsyncRequest),
            OFPT_ROLE_REQUEST => Ok(Message::RoleRequest(RoleMsg::decode_body(body)?)),
            OFPT_ROLE_REPLY => Ok(Message::RoleReply(RoleMsg::decode_body(body)?)),
            OFPT_ROLE_STATUS if version >= Version::V1_4 => {
                Ok(Message::RoleStatus(RoleStatus::decode_body(body)?))
            }
            OFPT_METER_MOD => Ok(Message::MeterMod(MeterMod::decode_body(body)?)),
            crate::port_mod::OFPT_PORT_MOD => Ok(Message::PortMod(
                crate::port_mod::PortMod::decode_body(version, body).ok_or(Refusal::BadLen)?,
            )),
            OFPT_GROUP_MOD => Ok(Message::GroupMod(GroupMod::decode_body(version, body)?)),
            OFPT_FLOW_REMOVED => Ok(Message::FlowRemoved(
                FlowRemoved::decode_body(version, body).ok_or(Refusal::BadLen)?,
            )),
            OFPT_PORT_STATUS => {
                let reason = r.u8().ok_or(Refusal::BadLen)?;
                r.bytes(7).ok_or(Refusal::BadLen)?;
                let port = PortInfo::decode(version, &mut r).ok_or(Refusal::BadLen)?;
                exact(&r, Message::PortStatus(reason, port))
            }
            OFPT_GET_ASYNC_REPLY => Ok(Message::GetAsyncReply(
                AsyncConfig::NONE.decode_body(version, body)?,
            )),
            OFPT_SET_ASYNC => {
                AsyncConfig::NONE.decode_body(version, body)?;
                Ok(Message::SetAsync(body.to_vec()))
            }
            OFPT_PACKET_IN => Ok(Message::PacketIn(PacketIn::decode_body(body)?)),
            OFPT_PACKET_OUT => Ok(Message::PacketOut(PacketOut::decode_body(version, body)?)),
            OFPT_MULTIPART_REQUEST if is_flow_monitor_request(version, body) => {
                // The multipart header (and 1.3's experimenter header) first.
                let head = if version == Version::V1_3 { 16 } else { 8 };
                let mut r = Reader::new(body.get(head..).ok_or(Refusal::BadLen)?);
                let monitors = if version == Version::V1_3 {
                    crate::flow_monitor::decode_onf_requests(&mut r)?
                } else {
                    crate::flow_monitor::decode_of14_requests(&mut r)?
                };
                Ok(Message::FlowMonitorRequest(monitors))
            }
            OFPT_MULTIPART_REQUEST => {
                let (req, _flags) = MultipartRequest::decode(body)?;
                Ok(Message::MultipartRequest(req))
            }
            OFPT_BUNDLE_CONTROL if version >= Version::V1_4 => {
                Ok(Message::BundleControl(BundleCtrl::decode_body(&mut r)?))
            }
            OFPT_BUNDLE_ADD_MESSAGE if version >= Version::V1_4 => bundle_add(version, &mut r),
            OFPT_EXPERIMENTER => {
                let vendor = r.u32().ok_or(Refusal::BadLen)?;
                let subtype = r.u32().ok_or(Refusal::BadLen)?;
                if vendor == ONF_VENDOR_ID && version == Version::V1_3 {
                    return match subtype {
                        ONFT_BUNDLE_CONTROL => {
                            Ok(Message::BundleControl(BundleCtrl::decode_body(&mut r)?))
                        }
                        ONFT_BUNDLE_ADD_MESSAGE => bundle_add(version, &mut r),
                        crate::flow_monitor::ONF_FLOW_MONITOR => {
                            let id = r.u32().ok_or(Refusal::BadLen)?;
                            exact(&r, Message::FlowMonitorCancel(id))
                        }
                        _ => Err(Refusal::BadExperimenterType),
                    };
                }
                if vendor != crate::tlv::NX_VENDOR_ID {
                    return Err(Refusal::BadExperimenter);
                }
                Message::decode_nicira(subtype, &mut r)
            }
            _ => Err(Refusal::BadType),
        }
    }

    /// The messages whose layout every version shares, by type: error, echo,
    /// features request, get-config request, set-config.
    pub(crate) fn decode_common(kind: u8, body: &[u8]) -> Result<Message, Refusal> {
        let mut r = Reader::new(body);
        match kind {
            OFPT_ERROR => {
                let kind = r.u16().ok_or(Refusal::BadLen)?;
                let code = r.u16().ok_or(Refusal::BadLen)?;
                Ok(Message::Error(ErrorMsg {
                    kind,
                    code,
                    data: r.rest().to_vec(),
                }))
            }
            OFPT_ECHO_REQUEST => Ok(Message::EchoRequest(body.to_vec())),
            OFPT_ECHO_REPLY => Ok(Message::EchoReply(body.to_vec())),
            OFPT_FEATURES_REQUEST => exact(&r, Message::FeaturesRequest),
            OFPT_GET_CONFIG_REQUEST => exact(&r, Message::GetConfigRequest),
            OFPT_SET_CONFIG => {
                let c = SwitchConfig {
                    flags: r.u16().ok_or(Refusal::BadLen)?,
                    miss_send_len: r.u16().ok_or(Refusal::BadLen)?,
                };
                if c.flags & !SwitchConfig::FRAG_MASK != 0 {
                    return Err(Refusal::BadConfigFlags);
                }
                exact(&r, Message::SetConfig(c))
            }
            _ => Err(Refusal::BadType),
        }
    }

    /// A Nicira message every version shares (after its vendor id and subtype).
    pub(crate) fn decode_nicira(subtype: u32, r: &mut Reader) -> Result<Message, Refusal> {
        match subtype {
            crate::tlv::NXT_TLV_TABLE_MOD => match TlvTableMod::decode_body(r.rest()) {
                Some(Ok(m)) => Ok(Message::TlvTableMod(m)),
                Some(Err(e)) => Err(Refusal::Tlv(e)),
                None => Err(Refusal::BadLen),
            },
            crate::tlv::NXT_TLV_TABLE_REQUEST => exact(r, Message::TlvTableRequest),
            NXT_SET_PACKET_IN_FORMAT => {
                let f = r.u32().ok_or(Refusal::BadLen)?;
                exact(r, Message::SetPacketInFormat(f))
            }
            NXT_SET_CONTROLLER_ID => {
                r.bytes(6).ok_or(Refusal::BadLen)?;
                let id = r.u16().ok_or(Refusal::BadLen)?;
                exact(r, Message::SetControllerId(id))
            }
            NXT_CT_FLUSH_ZONE => {
                if r.bytes(6).ok_or(Refusal::BadLen)?.iter().any(|b| *b != 0) {
                    return Err(Refusal::BadArgument);
                }
                let zone = r.u16().ok_or(Refusal::BadLen)?;
                exact(r, Message::CtFlushZone(zone))
            }
            crate::ct_flush::NXT_CT_FLUSH => Ok(Message::CtFlush(
                crate::ct_flush::CtFlush::decode_body(r.rest())?,
            )),
            crate::packet::NXT_RESUME => Ok(Message::Resume(crate::packet::Resume::decode_body(
                r.rest(),
            )?)),
            _ => Err(Refusal::BadExperimenterType),
        }
    }
}

/// `m`, if its body was all read: bytes left over are a length that does not fit.
pub(crate) fn exact(r: &Reader, m: Message) -> Result<Message, Refusal> {
    if r.is_empty() {
        Ok(m)
    } else {
        Err(Refusal::BadLen)
    }
}

/// Whether a multipart request's body is a flow monitor request: 1.4's own type,
/// or ONF's experimenter multipart in 1.3.
fn is_flow_monitor_request(version: Version, body: &[u8]) -> bool {
    let kind = body.get(..2).map(|k| u16::from_be_bytes([k[0], k[1]]));
    if version >= Version::V1_4 {
        return kind == Some(crate::flow_monitor::OFPMP_FLOW_MONITOR);
    }
    let mut onf = ONF_VENDOR_ID.to_be_bytes().to_vec();
    onf.extend_from_slice(&crate::flow_monitor::ONF_FLOW_MONITOR.to_be_bytes());
    version == Version::V1_3 && kind == Some(0xffff) && body.get(8..16) == Some(&onf[..])
}

/// A bundle-add whose message is of the connection's version (another is refused
/// as Open vSwitch refuses it: BAD_VERSION).
fn bundle_add(version: Version, r: &mut Reader) -> Result<Message, Refusal> {
    let add = BundleAdd::decode_body(r)?;
    if add.message.first() != Some(&version.wire()) {
        return Err(Refusal::BadVersion);
    }
    Ok(Message::BundleAdd(add))
}

/// ONF's experimenter header (OpenFlow 1.3's bundle messages).
fn onf_experimenter(out: &mut Vec<u8>, subtype: u32) {
    out.extend_from_slice(&ONF_VENDOR_ID.to_be_bytes());
    out.extend_from_slice(&subtype.to_be_bytes());
}

/// A message's length written into its header, once its body is.
pub(crate) fn finish(mut out: Vec<u8>) -> Vec<u8> {
    // Nothing vsw sends is longer (packet-ins are cut to fit, replies are
    // split, oversized rules refused); a length is never wrapped short.
    debug_assert!(out.len() <= usize::from(u16::MAX), "a message over 64 KiB");
    let len = crate::frame::len16(out.len());
    out[2..4].copy_from_slice(&len.to_be_bytes());
    out
}

/// An experimenter message's header after OpenFlow's: Nicira's vendor ID and the
/// message's subtype.
/// Nicira's NXT_SET_PACKET_IN_FORMAT subtype.
pub const NXT_SET_PACKET_IN_FORMAT: u32 = 16;
/// Nicira's 1.0 messages: NXT_SET_FLOW_FORMAT, NXT_FLOW_MOD, NXT_FLOW_MOD_TABLE_ID.
pub const NXT_SET_FLOW_FORMAT: u32 = 12;
pub const NXT_FLOW_MOD: u32 = 13;
pub const NXT_FLOW_MOD_TABLE_ID: u32 = 15;
/// Nicira's NXT_CT_FLUSH_ZONE subtype.
pub const NXT_CT_FLUSH_ZONE: u32 = 29;
/// Nicira's NXT_FLOW_REMOVED subtype.
pub const NXT_FLOW_REMOVED: u32 = 14;
/// Nicira's NXT_SET_CONTROLLER_ID subtype.
pub const NXT_SET_CONTROLLER_ID: u32 = 20;

fn experimenter(out: &mut Vec<u8>, subtype: u32) {
    out.extend_from_slice(&crate::tlv::NX_VENDOR_ID.to_be_bytes());
    out.extend_from_slice(&subtype.to_be_bytes());
}

impl BadBundle {
    /// The error answering `request` in `version`: OFPET_BUNDLE_FAILED from 1.4,
    /// ONF's experimenter error in 1.3.
    pub fn answer(self, version: Version, request: &[u8]) -> Message {
        let code = self as u16;
        let mut data = Vec::new();
        let (kind, code) = if version >= Version::V1_4 {
            (OFPET_BUNDLE_FAILED, code)
        } else {
            data.extend_from_slice(&ONF_VENDOR_ID.to_be_bytes());
            (
                crate::error::OFPET_EXPERIMENTER,
                ONF_BUNDLE_ERROR_BASE + code,
            )
        };
        data.extend_from_slice(&request[..request.len().min(ERROR_DATA_LEN)]);
        Message::Error(ErrorMsg { kind, code, data })
    }
}

impl Refusal {
    /// The error message answering `request` in `version` from 1.2 on: as
    /// [`Refusal::answer`], but a bundle's refusal in 1.3 is ONF's experimenter
    /// error, and before 1.4 a flow monitor's is Nicira's.
    pub(crate) fn answer_from_1_2(self, version: Version, request: &[u8]) -> Message {
        match self {
            Refusal::Bundle(b) => b.answer(version, request),
            _ if version < Version::V1_4 => error_message(self.type_code_before_1_4(), request),
            other => other.answer(request),
        }
    }

    /// The error message answering `request` (the whole message as received).
    pub fn answer(self, request: &[u8]) -> Message {
        error_message(self.type_code(), request)
    }
}

/// An error message of `(kind, code)` carrying the start of `request`.
fn error_message((kind, code): (u16, u16), request: &[u8]) -> Message {
    let mut data = Vec::new();
    if kind == crate::error::OFPET_EXPERIMENTER {
        // An experimenter error names its experimenter before the data.
        data.extend_from_slice(&crate::tlv::NX_VENDOR_ID.to_be_bytes());
    }
    data.extend_from_slice(&request[..request.len().min(ERROR_DATA_LEN)]);
    Message::Error(ErrorMsg { kind, code, data })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flow_monitor_error_is_nicira_s_before_1_4_and_its_own_from_then() {
        let request = [0u8; 16];
        for (version, want) in [
            (Version::V1_2, (crate::error::OFPET_EXPERIMENTER, 6)),
            (Version::V1_3, (crate::error::OFPET_EXPERIMENTER, 6)),
            (Version::V1_4, Refusal::MonitorExists.type_code()),
        ] {
            let Message::Error(e) = Refusal::MonitorExists.answer_from_1_2(version, &request)
            else {
                panic!("not an error")
            };
            assert_eq!((e.kind, e.code), want, "{version:?}");
            let vendor = e.kind == crate::error::OFPET_EXPERIMENTER;
            assert_eq!(
                e.data.starts_with(&crate::tlv::NX_VENDOR_ID.to_be_bytes()),
                vendor,
                "{version:?}"
            );
        }
    }

    #[test]
    fn a_role_status_is_a_message_of_1_4_on() {
        let m = Message::RoleStatus(RoleStatus {
            role: crate::role::Role::Slave,
            reason: crate::role::OFPCRR_MASTER_REQUEST,
            generation_id: 42,
        });
        let wire = m.encode(0x05, 9);
        assert_eq!((wire[1], wire.len()), (OFPT_ROLE_STATUS, 8 + 16));
        assert_eq!(Message::decode(Version::V1_4, &wire), Ok(m));
        let mut v13 = wire.clone();
        v13[0] = 0x04;
        assert!(Message::decode(Version::V1_3, &v13).is_err());
    }

    #[test]
    fn a_hello_with_a_bitmap_is_what_ovs_sends() {
        // ovs-ofctl -O OpenFlow13,OpenFlow14: header 0x05, bitmap 0x30.
        let m = Message::Hello {
            versions: Some(VersionSet(0x30)),
        }
        .encode(0x05, 1);
        assert_eq!(
            m,
            [5, 0, 0, 16, 0, 0, 0, 1, 0, 1, 0, 8, 0, 0, 0, 0x30],
            "type 1 element of 8 bytes"
        );
        assert_eq!(
            Message::decode(Version::V1_4, &m),
            Ok(Message::Hello {
                versions: Some(VersionSet(0x30))
            })
        );
        // An element of an unknown type before the bitmap is skipped, padding too.
        let mut body = vec![0, 9, 0, 5, 0xee, 0, 0, 0];
        body.extend_from_slice(&[0, 1, 0, 8, 0, 0, 0, 0x10]);
        assert_eq!(
            Message::decode_hello(&body),
            Message::Hello {
                versions: Some(VersionSet(0x10))
            }
        );
    }

    #[test]
    fn refusals_name_the_problem() {
        let req = Message::FeaturesRequest.encode(0x04, 9);
        assert_eq!(
            Message::decode(Version::V1_5, &req),
            Err(Refusal::BadVersion)
        );
        let mut long = req.clone();
        long.extend_from_slice(&[0; 4]);
        long[3] = 12;
        assert_eq!(Message::decode(Version::V1_3, &long), Err(Refusal::BadLen));
        let mut unknown = req.clone();
        unknown[1] = 99;
        assert_eq!(
            Message::decode(Version::V1_3, &unknown),
            Err(Refusal::BadType)
        );
        let bad_flags = Message::SetConfig(SwitchConfig {
            flags: 0x80,
            miss_send_len: 0,
        })
        .encode(0x04, 3);
        assert_eq!(
            Message::decode(Version::V1_3, &bad_flags),
            Err(Refusal::BadConfigFlags)
        );
        let Message::Error(e) = Refusal::BadType.answer(&unknown) else {
            panic!("an error message");
        };
        assert_eq!((e.kind, e.code, e.data.as_slice()), (1, 1, &unknown[..]));
    }
}
