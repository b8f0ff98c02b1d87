//! Nicira's connection tracking actions as Open vSwitch encodes them: NXAST_CT
//! (its flags, zone, recirculation table and helper, then actions of its own:
//! NXAST_NAT and set-fields of `ct_mark` and `ct_label`), NXAST_NAT and
//! NXAST_CT_CLEAR (in nx_action.rs).

use crate::flow_mod::{Action, BadFlowMod};
use crate::reader::Reader;

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

/// NXAST_CT as on the wire.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CtWire {
    pub flags: u16,
    /// The NXM header of the zone's field; 0: `zone` is the zone itself.
    pub zone_src: u32,
    /// The zone, or the field's ofs_nbits.
    pub zone: u16,
    pub recirc_table: u8,
    pub alg: u16,
    pub actions: Vec<Action>,
}

/// NXAST_NAT as on the wire: its flags and the range's parts present.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NatWire {
    pub flags: u16,
    pub ipv4: Option<(u32, Option<u32>)>,
    pub ipv6: Option<(u128, Option<u128>)>,
    pub ports: Option<(u16, Option<u16>)>,
}

impl CtWire {
    /// The body after the subtype (the nested actions the caller decodes).
    pub(crate) fn decode_head(b: &mut Reader<'_>) -> Result<CtWire, BadFlowMod> {
        let short = BadFlowMod::BadActionLen;
        let flags = b.u16().ok_or(short)?;
        let zone_src = b.u32().ok_or(short)?;
        let zone = b.u16().ok_or(short)?;
        let recirc_table = b.u8().ok_or(short)?;
        b.bytes(3).ok_or(short)?;
        let alg = b.u16().ok_or(short)?;
        if flags & !(NX_CT_F_COMMIT | NX_CT_F_FORCE) != 0 {
            return Err(BadFlowMod::BadArgument);
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
    pub(crate) fn decode(b: &mut Reader<'_>) -> Result<NatWire, BadFlowMod> {
        let short = BadFlowMod::BadActionLen;
        b.bytes(2).ok_or(short)?;
        let flags = b.u16().ok_or(short)?;
        let present = b.u16().ok_or(short)?;
        if present & !0x3f != 0 || flags & !0x1f != 0 {
            return Err(BadFlowMod::BadArgument);
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
            return Err(BadFlowMod::BadArgument);
        }
        if has(NX_NAT_RANGE_IPV6_MIN) {
            let read = |b: &mut Reader<'_>| -> Result<u128, BadFlowMod> {
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
            return Err(BadFlowMod::BadArgument);
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
            return Err(BadFlowMod::BadArgument);
        }
        if n.ipv4.is_some() && n.ipv6.is_some() {
            return Err(BadFlowMod::BadArgument);
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

#[cfg(test)]
mod tests {
    use super::*;
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
