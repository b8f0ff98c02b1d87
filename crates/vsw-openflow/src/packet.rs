//! Packets between the switch and its controllers: packet-in (a packet the
//! pipeline sent to CONTROLLER) and packet-out (a packet a controller wants sent).
//!
//! A packet-in has one layout in 1.3, 1.4 and 1.5. A packet-out names its input
//! port in a field before its actions in 1.3 and 1.4, and in a match (OXM
//! `in_port`) in 1.5. vsw keeps no packet buffers (features say `n_buffers` 0):
//! a packet-in always carries the packet, as much as asked, with `buffer_id`
//! NO_BUFFER, and a packet-out naming a buffer is refused as BUFFER_UNKNOWN.

use crate::error::Refusal;
use crate::flow_mod::{Action, BadFlowMod, OFPP_ANY, OFPP_CONTROLLER, OFPP_MAX};
use crate::oxm::{OxmField, OxmMatch};
use crate::reader::Reader;
use crate::version::Version;

pub const OFPT_PACKET_IN: u8 = 10;
pub const OFPT_PACKET_OUT: u8 = 13;
/// OFP_NO_BUFFER.
pub const NO_BUFFER: u32 = 0xffff_ffff;

/// Why a packet went up (`ofp_packet_in_reason`; 1.4 renamed the first two
/// TABLE_MISS and APPLY_ACTION, same numbers).
pub const OFPR_NO_MATCH: u8 = 0;
pub const OFPR_ACTION: u8 = 1;
/// 1.4 on: a group bucket's output to CONTROLLER.
pub const OFPR_GROUP: u8 = 4;
/// 1.4 on: the packet-out's own output to CONTROLLER.
pub const OFPR_PACKET_OUT: u8 = 5;

/// OXM field number of `in_port`.
const OXM_IN_PORT: u8 = 0;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PacketIn {
    pub buffer_id: u32,
    /// The packet's whole length (`data` may hold less).
    pub total_len: u16,
    pub reason: u8,
    pub table_id: u8,
    pub cookie: u64,
    /// The pipeline fields: `in_port` at least.
    pub matcher: OxmMatch,
    pub data: Vec<u8>,
}

impl PacketIn {
    /// A packet-in of `frame`, which came in on `in_port`, cut to `max_len` bytes
    /// (0xffff, OFPCML_NO_BUFFER: all of it) — and always to what fits one message
    /// (65,535 bytes with its headers): `total_len` keeps the frame's length, so the
    /// controller knows it was cut.
    pub fn of_frame(
        frame: &[u8],
        in_port: u32,
        reason: u8,
        table_id: u8,
        cookie: u64,
        max_len: u16,
        metadata: Vec<OxmField>,
    ) -> PacketIn {
        let asked = if max_len == 0xffff {
            frame.len()
        } else {
            frame.len().min(usize::from(max_len))
        };
        let mut pi = PacketIn {
            buffer_id: NO_BUFFER,
            total_len: u16::try_from(frame.len()).unwrap_or(u16::MAX),
            reason,
            table_id,
            cookie,
            matcher: OxmMatch {
                fields: std::iter::once(OxmField {
                    field: OXM_IN_PORT,
                    value: in_port.to_be_bytes().to_vec(),
                    mask: None,
                })
                .chain(metadata)
                .collect(),
            },
            data: Vec::new(),
        };
        let mut headers = Vec::new();
        pi.encode_body(&mut headers);
        let room = usize::from(u16::MAX) - crate::frame::HEADER_LEN - headers.len();
        pi.data = frame[..asked.min(room)].to_vec();
        pi
    }

    /// The body after the header (every version the same).
    pub fn encode_body(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.buffer_id.to_be_bytes());
        out.extend_from_slice(&self.total_len.to_be_bytes());
        out.push(self.reason);
        out.push(self.table_id);
        out.extend_from_slice(&self.cookie.to_be_bytes());
        self.matcher.encode(out);
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&self.data);
    }

    pub fn decode_body(body: &[u8]) -> Result<PacketIn, Refusal> {
        let mut r = Reader::new(body);
        let buffer_id = r.u32().ok_or(Refusal::BadLen)?;
        let total_len = r.u16().ok_or(Refusal::BadLen)?;
        let reason = r.u8().ok_or(Refusal::BadLen)?;
        let table_id = r.u8().ok_or(Refusal::BadLen)?;
        let cookie = r.u64().ok_or(Refusal::BadLen)?;
        let matcher = OxmMatch::decode(&mut r).map_err(|e| Refusal::FlowMod(e.into()))?;
        r.bytes(2).ok_or(Refusal::BadLen)?;
        Ok(PacketIn {
            buffer_id,
            total_len,
            reason,
            table_id,
            cookie,
            matcher,
            data: r.rest().to_vec(),
        })
    }
}

/// How a connection wants its packet-ins (NXT_SET_PACKET_IN_FORMAT): OpenFlow's
/// own message, or Nicira's NXT_PACKET_IN2, which also carries the controller
/// action's userdata (what OVN's ovn-controller asks for).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PacketInFormat {
    #[default]
    Standard,
    /// Nicira's older NXT_PACKET_IN: the packet-in's fields and an NXM match.
    NxtPacketIn,
    NxtPacketIn2,
}

/// NXT_PACKET_IN's subtype.
pub const NXT_PACKET_IN: u32 = 17;

impl PacketIn {
    /// Nicira's NXT_PACKET_IN body (after the vendor header): buffer, lengths,
    /// reason, table, cookie, the match in NXM padded to 8, two zero bytes, the
    /// packet.
    pub fn encode_nx_body(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.buffer_id.to_be_bytes());
        out.extend_from_slice(&self.total_len.to_be_bytes());
        out.extend_from_slice(&[self.reason, self.table_id]);
        out.extend_from_slice(&self.cookie.to_be_bytes());
        let match_len_at = out.len();
        out.extend_from_slice(&[0; 8]);
        let n = crate::of10::nxm::encode(&self.matcher, out);
        out[match_len_at..match_len_at + 2].copy_from_slice(&crate::frame::len16(n).to_be_bytes());
        out.extend(std::iter::repeat_n(0u8, n.div_ceil(8) * 8 - n));
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&self.data);
    }
}

/// NXT_SET_PACKET_IN_FORMAT's formats.
pub const NXPIF_STANDARD: u32 = 0;
pub const NXPIF_NXT_PACKET_IN: u32 = 1;
pub const NXPIF_NXT_PACKET_IN2: u32 = 2;

/// NXT_PACKET_IN2's subtype and properties.
pub const NXT_PACKET_IN2: u32 = 30;
const NXPINT_PACKET: u16 = 0;
const NXPINT_FULL_LEN: u16 = 1;
const NXPINT_TABLE_ID: u16 = 3;
const NXPINT_COOKIE: u16 = 4;
const NXPINT_REASON: u16 = 5;
const NXPINT_METADATA: u16 = 6;
const NXPINT_USERDATA: u16 = 7;
const NXPINT_BUFFER_ID: u16 = 2;
const NXPINT_CONTINUATION: u16 = 8;
/// Open vSwitch's first continuation property (a bridge's UUID): vsw's own
/// continuation is one such property, its 16 bytes vsw's token — opaque to a
/// controller, and read as a continuation by any that looks into one.
const NXCPT_BRIDGE: u16 = 0x8000;

/// NXT_RESUME's subtype.
pub const NXT_RESUME: u32 = 28;

/// What a paused packet's packet-in carries for the controller to give back
/// (NXT_RESUME): vsw's name of the paused translation.
pub type ContinuationToken = [u8; 16];

/// A packet-in as NXT_PACKET_IN2 says it: a packet-in's parts as properties, with
/// the controller action's userdata.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PacketIn2 {
    pub packet_in: PacketIn,
    /// The whole packet's length (its data may be cut).
    pub full_len: u32,
    pub userdata: Option<Vec<u8>>,
    /// A `controller(pause)`'s packet: what resumes it.
    pub continuation: Option<ContinuationToken>,
}

/// `token` as NXPINT_CONTINUATION's value: 4 bytes of padding (a nested property
/// list starts 8-aligned), then one property holding it.
fn continuation_value(token: &ContinuationToken) -> Vec<u8> {
    let mut v = vec![0; 4];
    crate::frame::put_property(&mut v, NXCPT_BRIDGE, token);
    v
}

impl PacketIn2 {
    /// `pi` (a packet-in of a frame of `full_len` bytes, [`PacketIn::of_frame`]) as
    /// NXT_PACKET_IN2 says it, its packet cut further to what one message holds
    /// with its properties; `None` when even its properties do not fit one message
    /// (userdata of nearly 64 KiB).
    pub fn of(
        pi: PacketIn,
        full_len: usize,
        userdata: Option<Vec<u8>>,
        continuation: Option<ContinuationToken>,
    ) -> Option<PacketIn2> {
        let mut p2 = PacketIn2 {
            full_len: u32::try_from(full_len).unwrap_or(u32::MAX),
            packet_in: pi,
            userdata,
            continuation,
        };
        let data = std::mem::take(&mut p2.packet_in.data);
        let mut bare = Vec::new();
        p2.encode_body(&mut bare);
        // The message's header and Nicira's, the properties without the packet,
        // the full length's property a cut adds, the packet's padding.
        let overhead = crate::frame::HEADER_LEN + 8 + bare.len() + 8 + 7;
        let room = usize::from(u16::MAX).checked_sub(overhead)?;
        p2.packet_in.data = data;
        p2.packet_in.data.truncate(room);
        Some(p2)
    }

    /// The body after Nicira's experimenter header: each property its type, its
    /// length (without padding), its value, zeros to 8 bytes (a 64-bit value after
    /// 4 of them, aligned), in Open vSwitch's order.
    pub fn encode_body(&self, out: &mut Vec<u8>) {
        let pi = &self.packet_in;
        let prop = crate::frame::put_property;
        prop(out, NXPINT_PACKET, &pi.data);
        if self.full_len as usize > pi.data.len() {
            prop(out, NXPINT_FULL_LEN, &self.full_len.to_be_bytes());
        }
        if pi.table_id != 0 {
            prop(out, NXPINT_TABLE_ID, &[pi.table_id]);
        }
        if pi.cookie != u64::MAX {
            let mut v = vec![0; 4];
            v.extend_from_slice(&pi.cookie.to_be_bytes());
            prop(out, NXPINT_COOKIE, &v);
        }
        prop(out, NXPINT_REASON, &[pi.reason]);
        let mut metadata = Vec::new();
        pi.matcher.encode_fields(&mut metadata);
        prop(out, NXPINT_METADATA, &metadata);
        if let Some(u) = &self.userdata {
            prop(out, NXPINT_USERDATA, u);
        }
        if let Some(c) = &self.continuation {
            prop(out, NXPINT_CONTINUATION, &continuation_value(c));
        }
    }
}

/// NXT_RESUME: a paused packet sent back, maybe changed, with the fields it is to
/// carry on with (its packet-in's metadata, maybe changed) and its continuation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resume {
    pub packet: Vec<u8>,
    /// `in_port`, metadata, registers, … as a packet-in's metadata says them.
    pub metadata: OxmMatch,
    pub continuation: ContinuationToken,
}

impl Resume {
    /// The body after Nicira's experimenter header: a packet-in's properties (as
    /// NXT_PACKET_IN2 has them), the continuation among them. Table, cookie,
    /// reason, userdata and lengths are read past: the continuation says where
    /// the packet was.
    pub fn decode_body(body: &[u8]) -> Result<Resume, Refusal> {
        let mut r = Reader::new(body);
        let (mut packet, mut metadata, mut continuation) = (None, None, None);
        while !r.is_empty() {
            let kind = r.u16().ok_or(Refusal::BadLen)?;
            let len = usize::from(r.u16().ok_or(Refusal::BadLen)?);
            let value = r
                .bytes(len.checked_sub(4).ok_or(Refusal::BadLen)?)
                .ok_or(Refusal::BadLen)?;
            // Padding to 8 (the last property's may be cut off).
            let pad = len.div_ceil(8) * 8 - len;
            let _ = r.bytes(pad.min(r.rest_len()));
            match kind {
                NXPINT_PACKET => packet = Some(value.to_vec()),
                NXPINT_METADATA => metadata = Some(oxm_fields(value)?),
                NXPINT_CONTINUATION => continuation = Some(token_of(value)?),
                NXPINT_FULL_LEN | NXPINT_BUFFER_ID | NXPINT_TABLE_ID | NXPINT_COOKIE
                | NXPINT_REASON | NXPINT_USERDATA => {}
                _ => return Err(Refusal::BadArgument),
            }
        }
        match (packet, continuation) {
            (Some(packet), Some(continuation)) if !packet.is_empty() => Ok(Resume {
                packet,
                metadata: metadata.unwrap_or_default(),
                continuation,
            }),
            _ => Err(Refusal::BadLen),
        }
    }

    pub fn encode_body(&self, out: &mut Vec<u8>) {
        let prop = crate::frame::put_property;
        prop(out, NXPINT_PACKET, &self.packet);
        let mut fields = Vec::new();
        self.metadata.encode_fields(&mut fields);
        prop(out, NXPINT_METADATA, &fields);
        prop(
            out,
            NXPINT_CONTINUATION,
            &continuation_value(&self.continuation),
        );
    }
}

/// A packet-in's metadata (OXM fields, no match header) as a match.
fn oxm_fields(fields: &[u8]) -> Result<OxmMatch, Refusal> {
    let len = u16::try_from(4 + fields.len()).map_err(|_| Refusal::BadLen)?;
    let mut m = Vec::with_capacity(fields.len() + 8);
    m.extend_from_slice(&1u16.to_be_bytes());
    m.extend_from_slice(&len.to_be_bytes());
    m.extend_from_slice(fields);
    m.resize(m.len().div_ceil(8) * 8, 0);
    OxmMatch::decode_from(&m)
        .map(|(m, _)| m)
        .map_err(|e| Refusal::FlowMod(BadFlowMod::Match(e)))
}

/// vsw's token out of a continuation (its padding, then one NXCPT_BRIDGE
/// property); anything else is no continuation of vsw's.
fn token_of(value: &[u8]) -> Result<ContinuationToken, Refusal> {
    let mut r = Reader::new(value);
    if r.bytes(4) != Some(&[0, 0, 0, 0][..]) {
        return Err(Refusal::BadArgument);
    }
    let kind = r.u16().ok_or(Refusal::BadLen)?;
    let len = r.u16().ok_or(Refusal::BadLen)?;
    if kind != NXCPT_BRIDGE || len != 20 {
        return Err(Refusal::BadArgument);
    }
    let token = r.bytes(16).ok_or(Refusal::BadLen)?;
    Ok(token.try_into().expect("16 bytes"))
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PacketOut {
    pub buffer_id: u32,
    /// The port the packet counts as coming in on (OFPP_CONTROLLER: none).
    pub in_port: u32,
    /// What else the packet carries into translation (OpenFlow 1.5's match):
    /// metadata, registers, `pkt_mark`, the tunnel it came from — as OVN's
    /// pinctrl sends them.
    pub metadata: Vec<OxmField>,
    pub actions: Vec<Action>,
    pub data: Vec<u8>,
}

/// The fields a 1.5 packet-out's match may carry besides `in_port`: what only the
/// pipeline or a tunnel gives a packet, never its own headers.
fn is_packet_out_metadata(field: u8) -> bool {
    use crate::oxm::{PKT_MARK, REG0, TUN_IPV4_DST, TUN_IPV4_SRC, XREG0, XXREG0};
    matches!(field, 2 | 38 | TUN_IPV4_SRC | TUN_IPV4_DST | PKT_MARK)
        || (REG0..REG0 + 16).contains(&field)
        || (XREG0..XREG0 + 8).contains(&field)
        || (XXREG0..XXREG0 + 4).contains(&field)
}

impl PacketOut {
    pub fn encode_body(&self, version: Version, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.buffer_id.to_be_bytes());
        let mut actions = Vec::new();
        for a in &self.actions {
            a.encode(&mut actions);
        }
        let actions_len = u16::try_from(actions.len()).unwrap_or(u16::MAX);
        if version >= Version::V1_5 {
            out.extend_from_slice(&actions_len.to_be_bytes());
            out.extend_from_slice(&[0, 0]);
            let in_port = OxmField {
                field: OXM_IN_PORT,
                value: self.in_port.to_be_bytes().to_vec(),
                mask: None,
            };
            OxmMatch {
                fields: std::iter::once(in_port)
                    .chain(self.metadata.iter().cloned())
                    .collect(),
            }
            .encode(out);
        } else {
            out.extend_from_slice(&self.in_port.to_be_bytes());
            out.extend_from_slice(&actions_len.to_be_bytes());
            out.extend_from_slice(&[0; 6]);
        }
        out.extend_from_slice(&actions);
        out.extend_from_slice(&self.data);
    }

    /// A packet-out as `version` frames it. Refused: lengths that do not fit, a
    /// buffer (vsw has none), an input port that is no port, bad actions.
    pub fn decode_body(version: Version, body: &[u8]) -> Result<PacketOut, Refusal> {
        let mut r = Reader::new(body);
        let buffer_id = r.u32().ok_or(Refusal::BadLen)?;
        let (in_port, actions_len, metadata) = if version >= Version::V1_5 {
            let actions_len = r.u16().ok_or(Refusal::BadLen)?;
            r.bytes(2).ok_or(Refusal::BadLen)?;
            let m = OxmMatch::decode(&mut r).map_err(|e| Refusal::FlowMod(e.into()))?;
            let in_port = match m.get(OXM_IN_PORT) {
                Some(f) => {
                    let b: [u8; 4] = f.value.as_slice().try_into().map_err(|_| Refusal::BadLen)?;
                    u32::from_be_bytes(b)
                }
                None => OFPP_CONTROLLER,
            };
            let (rest, other): (Vec<OxmField>, Vec<OxmField>) = m
                .fields
                .into_iter()
                .filter(|f| f.field != OXM_IN_PORT)
                .partition(|f| is_packet_out_metadata(f.field));
            if !other.is_empty() {
                // A packet's own headers are in its bytes.
                return Err(Refusal::FlowMod(BadFlowMod::Match(
                    crate::oxm::BadMatch::BadField,
                )));
            }
            (in_port, actions_len, rest)
        } else {
            let in_port = r.u32().ok_or(Refusal::BadLen)?;
            let actions_len = r.u16().ok_or(Refusal::BadLen)?;
            r.bytes(6).ok_or(Refusal::BadLen)?;
            (in_port, actions_len, Vec::new())
        };
        let actions = r
            .bytes(usize::from(actions_len))
            .ok_or(Refusal::FlowMod(BadFlowMod::BadActionLen))?;
        let actions = Action::decode_list(actions)?;
        let mut po = PacketOut::checked(buffer_id, in_port, actions, r.rest().to_vec())?;
        po.metadata = metadata;
        Ok(po)
    }

    /// A packet-out of these parts, or why not: a buffer (vsw keeps none), an
    /// input port that is no port.
    pub(crate) fn checked(
        buffer_id: u32,
        in_port: u32,
        actions: Vec<Action>,
        data: Vec<u8>,
    ) -> Result<PacketOut, Refusal> {
        if buffer_id != NO_BUFFER {
            return Err(Refusal::BufferUnknown);
        }
        // A real port, or CONTROLLER (1.3 also allows ANY in practice; Open vSwitch
        // reads it as none, so does vsw).
        if in_port >= OFPP_MAX && in_port != OFPP_CONTROLLER && in_port != OFPP_ANY {
            return Err(Refusal::BadPort);
        }
        Ok(PacketOut {
            buffer_id,
            in_port: if in_port == OFPP_ANY {
                OFPP_CONTROLLER
            } else {
                in_port
            },
            metadata: Vec::new(),
            actions,
            data,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow_mod::OFPP_FLOOD;

    #[test]
    fn a_packet_in_carries_as_much_as_asked() {
        let frame = [7u8; 100];
        let all = PacketIn::of_frame(&frame, 3, OFPR_NO_MATCH, 0, 9, 0xffff, Vec::new());
        assert_eq!((all.data.len(), all.total_len), (100, 100));
        let cut = PacketIn::of_frame(&frame, 3, OFPR_ACTION, 2, 9, 64, Vec::new());
        assert_eq!((cut.data.len(), cut.total_len), (64, 100));
        let mut body = Vec::new();
        cut.encode_body(&mut body);
        // 16 fixed bytes, the match (4 + 8 of in_port, padded to 16), 2 of padding.
        assert_eq!(body.len(), 16 + 16 + 2 + 64);
        assert_eq!(PacketIn::decode_body(&body), Ok(cut));
        // Never more than one message holds, whatever is asked.
        let huge = vec![7u8; 65_495];
        let pi = PacketIn::of_frame(&huge, 3, OFPR_ACTION, 0, 0, 0xffff, Vec::new());
        assert_eq!(pi.total_len, 65_495);
        let msg = crate::Message::PacketIn(pi).encode(0x04, 0);
        assert_eq!(msg.len(), 65_535);
        assert_eq!(u16::from_be_bytes([msg[2], msg[3]]), 65_535);
    }

    #[test]
    fn a_packet_in2_of_a_huge_frame_fits_one_message_and_says_its_whole_length() {
        let huge = vec![7u8; 70_000];
        let pi = || PacketIn::of_frame(&huge, 3, OFPR_ACTION, 2, 9, 0xffff, Vec::new());
        let p2 = PacketIn2::of(pi(), huge.len(), Some(vec![1; 1000]), Some([9; 16])).unwrap();
        assert_eq!(p2.full_len, 70_000);
        let msg = crate::Message::PacketIn2(p2).encode(0x04, 0);
        assert!(msg.len() <= 65_535, "{}", msg.len());
        assert_eq!(usize::from(u16::from_be_bytes([msg[2], msg[3]])), msg.len());
        // No room left for a packet beside 65,000 bytes of userdata: not sent.
        let none = PacketIn2::of(pi(), huge.len(), Some(vec![1; 65_500]), None);
        assert!(none.is_none());
    }

    #[test]
    fn a_packet_out_round_trips_in_each_framing() {
        let po = PacketOut {
            buffer_id: NO_BUFFER,
            in_port: 2,
            metadata: Vec::new(),
            actions: vec![Action::Output {
                port: OFPP_FLOOD,
                max_len: 0,
            }],
            data: vec![1, 2, 3],
        };
        for v in [Version::V1_3, Version::V1_4, Version::V1_5] {
            let mut body = Vec::new();
            po.encode_body(v, &mut body);
            assert_eq!(PacketOut::decode_body(v, &body), Ok(po.clone()), "{v:?}");
        }
        // 1.5's match carries the registers and metadata as OVN's pinctrl sends
        // them; a header field is the packet's own, and refused.
        let reg = |field: u8| OxmField {
            field,
            value: vec![0, 0, 0, 7],
            mask: None,
        };
        let carried = PacketOut {
            metadata: vec![reg(crate::oxm::REG0 + 14), reg(crate::oxm::PKT_MARK)],
            ..po.clone()
        };
        let mut body = Vec::new();
        carried.encode_body(Version::V1_5, &mut body);
        assert_eq!(PacketOut::decode_body(Version::V1_5, &body), Ok(carried));
        let header = PacketOut {
            metadata: vec![OxmField {
                field: 3,
                value: vec![2, 0, 0, 0, 0, 1],
                mask: None,
            }],
            ..po
        };
        let mut body = Vec::new();
        header.encode_body(Version::V1_5, &mut body);
        assert_eq!(
            PacketOut::decode_body(Version::V1_5, &body),
            Err(Refusal::FlowMod(BadFlowMod::Match(
                crate::oxm::BadMatch::BadField
            )))
        );
    }

    #[test]
    fn what_vsw_cannot_send_is_refused() {
        let mut po = PacketOut {
            buffer_id: 5,
            in_port: 2,
            metadata: Vec::new(),
            actions: vec![],
            data: vec![],
        };
        let enc = |po: &PacketOut| {
            let mut b = Vec::new();
            po.encode_body(Version::V1_3, &mut b);
            b
        };
        assert_eq!(
            PacketOut::decode_body(Version::V1_3, &enc(&po)),
            Err(Refusal::BufferUnknown)
        );
        po.buffer_id = NO_BUFFER;
        po.in_port = 0xffff_fff0;
        assert_eq!(
            PacketOut::decode_body(Version::V1_3, &enc(&po)),
            Err(Refusal::BadPort)
        );
        let mut body = enc(&PacketOut {
            in_port: 1,
            ..po.clone()
        });
        // Actions said to be longer than the message.
        body[8..10].copy_from_slice(&64u16.to_be_bytes());
        assert_eq!(
            PacketOut::decode_body(Version::V1_3, &body),
            Err(Refusal::FlowMod(BadFlowMod::BadActionLen))
        );
    }
}
