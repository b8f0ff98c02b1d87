//! Nicira's connection tracking actions as Open vSwitch encodes them: NXAST_CT
//! (its flags, zone, recirculation table and helper, then actions of its own:
//! NXAST_NAT and set-fields of `ct_mark` and `ct_label`), NXAST_NAT and
//! NXAST_CT_CLEAR (in nx_action.rs).

use crate::reader::Reader;

/// Why NXAST_CT or NXAST_NAT was refused: cut short, or an argument Open vSwitch
/// refuses (the caller says it as its own error).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BadCt {
    Len,
    Argument,
}

pub const NXAST_CT: u16 = 35;
pub const NXAST_NAT: u16 = 36;
pub const NXAST_CT_CLEAR: u16 = 43;

pub const NX_CT_F_COMMIT: u16 = 1;
pub const NX_CT_F_FORCE: u16 = 2;
/// NXAST_CT's table when the packet is not looked up again.
pub const NX_CT_RECIRC_NONE: u8 = 0xff;

pub const NX_NAT_F_SRC: u16 = 1;
pub const NX_NAT_F_DST: u16 = 2;
pub const NX_NAT_F_PERSISTENT: u16 = 4;
pub const NX_NAT_F_PROTO_HASH: u16 = 8;
pub const NX_NAT_F_PROTO_RANDOM: u16 = 16;
const NX_NAT_RANGE_IPV4_MIN: u16 = 1;
const NX_NAT_RANGE_IPV4_MAX: u16 = 2;
const NX_NAT_RANGE_IPV6_MIN: u16 = 4;
const NX_NAT_RANGE_IPV6_MAX: u16 = 8;
const NX_NAT_RANGE_PROTO_MIN: u16 = 16;
const NX_NAT_RANGE_PROTO_MAX: u16 = 32;

/// NXAST_CT as on the wire; its nested actions of type `A` (the codec's).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CtWire<A> {
    pub flags: u16,
    /// The NXM header of the zone's field; 0: `zone` is the zone itself.
    pub zone_src: u32,
    /// The zone, or the field's ofs_nbits.
    pub zone: u16,
    pub recirc_table: u8,
    pub alg: u16,
    pub actions: Vec<A>,
}

/// NXAST_NAT as on the wire: its flags and the range's parts present.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NatWire {
    pub flags: u16,
    pub ipv4: Option<(u32, Option<u32>)>,
    pub ipv6: Option<(u128, Option<u128>)>,
    pub ports: Option<(u16, Option<u16>)>,
}

impl<A> CtWire<A> {
    /// The body after the subtype (the nested actions the caller decodes).
    pub(crate) fn decode_head(b: &mut Reader<'_>) -> Result<CtWire<A>, BadCt> {
        let short = BadCt::Len;
        let flags = b.u16().ok_or(short)?;
        let zone_src = b.u32().ok_or(short)?;
        let zone = b.u16().ok_or(short)?;
        let recirc_table = b.u8().ok_or(short)?;
        b.bytes(3).ok_or(short)?;
        let alg = b.u16().ok_or(short)?;
        if flags & !(NX_CT_F_COMMIT | NX_CT_F_FORCE) != 0 {
            return Err(BadCt::Argument);
        }
        Ok(CtWire {
            flags,
            zone_src,
            zone,
            recirc_table,
            alg,
            actions: Vec::new(),
        })
    }

    /// The body after the subtype, before the nested actions (which each version
    /// encodes its own way).
    pub(crate) fn encode_head(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.flags.to_be_bytes());
        out.extend_from_slice(&self.zone_src.to_be_bytes());
        out.extend_from_slice(&self.zone.to_be_bytes());
        out.push(self.recirc_table);
        out.extend_from_slice(&[0; 3]);
        out.extend_from_slice(&self.alg.to_be_bytes());
    }
}

impl NatWire {
    pub(crate) fn decode(b: &mut Reader<'_>) -> Result<NatWire, BadCt> {
        let short = BadCt::Len;
        b.bytes(2).ok_or(short)?;
        let flags = b.u16().ok_or(short)?;
        let present = b.u16().ok_or(short)?;
        if present & !0x3f != 0 || flags & !0x1f != 0 {
            return Err(BadCt::Argument);
        }
        let has = |bit| present & bit != 0;
        let mut n = NatWire {
            flags,
            ..NatWire::default()
        };
        if has(NX_NAT_RANGE_IPV4_MIN) {
            let min = b.u32().ok_or(short)?;
            let max = if has(NX_NAT_RANGE_IPV4_MAX) {
                Some(b.u32().ok_or(short)?)
            } else {
                None
            };
            n.ipv4 = Some((min, max));
        } else if has(NX_NAT_RANGE_IPV4_MAX) {
            return Err(BadCt::Argument);
        }
        if has(NX_NAT_RANGE_IPV6_MIN) {
            let read = |b: &mut Reader<'_>| -> Result<u128, BadCt> {
                let bytes: [u8; 16] = b.bytes(16).ok_or(short)?.try_into().map_err(|_| short)?;
                Ok(u128::from_be_bytes(bytes))
            };
            let min = read(b)?;
            let max = if has(NX_NAT_RANGE_IPV6_MAX) {
                Some(read(b)?)
            } else {
                None
            };
            n.ipv6 = Some((min, max));
        } else if has(NX_NAT_RANGE_IPV6_MAX) {
            return Err(BadCt::Argument);
        }
        if has(NX_NAT_RANGE_PROTO_MIN) {
            let min = b.u16().ok_or(short)?;
            let max = if has(NX_NAT_RANGE_PROTO_MAX) {
                Some(b.u16().ok_or(short)?)
            } else {
                None
            };
            n.ports = Some((min, max));
        } else if has(NX_NAT_RANGE_PROTO_MAX) {
            return Err(BadCt::Argument);
        }
        if n.ipv4.is_some() && n.ipv6.is_some() {
            return Err(BadCt::Argument);
        }
        Ok(n)
    }

    pub(crate) fn encode_body(&self, out: &mut Vec<u8>) {
        let mut present = 0u16;
        let mut tail = Vec::new();
        if let Some((min, max)) = self.ipv4 {
            present |= NX_NAT_RANGE_IPV4_MIN;
            tail.extend_from_slice(&min.to_be_bytes());
            if let Some(max) = max {
                present |= NX_NAT_RANGE_IPV4_MAX;
                tail.extend_from_slice(&max.to_be_bytes());
            }
        }
        if let Some((min, max)) = self.ipv6 {
            present |= NX_NAT_RANGE_IPV6_MIN;
            tail.extend_from_slice(&min.to_be_bytes());
            if let Some(max) = max {
                present |= NX_NAT_RANGE_IPV6_MAX;
                tail.extend_from_slice(&max.to_be_bytes());
            }
        }
        if let Some((min, max)) = self.ports {
            present |= NX_NAT_RANGE_PROTO_MIN;
            tail.extend_from_slice(&min.to_be_bytes());
            if let Some(max) = max {
                present |= NX_NAT_RANGE_PROTO_MAX;
                tail.extend_from_slice(&max.to_be_bytes());
            }
        }
        out.extend_from_slice(&[0; 2]);
        out.extend_from_slice(&self.flags.to_be_bytes());
        out.extend_from_slice(&present.to_be_bytes());
        out.extend_from_slice(&tail);
    }
}
