//! NXM: Nicira's type-length-value match, which OpenFlow 1.0 connections use once
//! they ask for it (NXT_SET_FLOW_FORMAT) to say what `ofp10_match` cannot —
//! registers, IPv6, masks, tunnels. OXM (1.2 on) grew out of it: the layout of a
//! field is the same, and most standard fields have an NXM name in classes 0 and 1
//! for the same bits. Those are read as their OXM twins and written back by their
//! NXM names, as Open vSwitch writes them to an NXM connection; two differ in
//! shape — `NXM_OF_VLAN_TCI` (the whole tag control word, one field for VID and
//! PCP) and `NXM_OF_IP_TOS` (the DSCP bits in place) — and are converted. Any
//! other field goes by its OXM name, which Open vSwitch accepts in NXM as well.

use crate::oxm::{checked_field, field_of_wire, BadMatch, OxmField, OxmMatch};
use crate::reader::Reader;

use super::matching::{port_from_16, port_to_16};

const NXM0: u16 = 0x0000;
const NXM1: u16 = 0x0001;

/// NXM_OF_IN_PORT, NXM_OF_VLAN_TCI, NXM_OF_IP_TOS (class 0).
const NXM_IN_PORT: u8 = 0;
const NXM_VLAN_TCI: u8 = 4;
const NXM_IP_TOS: u8 = 5;
/// OXM numbers of the fields converted by shape.
const OXM_IN_PORT: u8 = 0;
const OXM_VLAN_VID: u8 = 6;
const OXM_VLAN_PCP: u8 = 7;
const OXM_IP_DSCP: u8 = 8;

/// (NXM class, NXM number, OXM basic number) of the fields that are the same bits
/// under both names.
const TWINS: &[(u16, u8, u8)] = &[
    (NXM0, 1, 3),   // eth_dst
    (NXM0, 2, 4),   // eth_src
    (NXM0, 3, 5),   // eth_type
    (NXM0, 6, 10),  // ip_proto
    (NXM0, 7, 11),  // ipv4_src
    (NXM0, 8, 12),  // ipv4_dst
    (NXM0, 9, 13),  // tcp_src
    (NXM0, 10, 14), // tcp_dst
    (NXM0, 11, 15), // udp_src
    (NXM0, 12, 16), // udp_dst
    (NXM0, 13, 19), // icmp_type
    (NXM0, 14, 20), // icmp_code
    (NXM0, 15, 21), // arp_op
    (NXM0, 16, 22), // arp_spa
    (NXM0, 17, 23), // arp_tpa
    (NXM1, 17, 24), // arp_sha
    (NXM1, 18, 25), // arp_tha
    (NXM1, 19, 26), // ipv6_src
    (NXM1, 20, 27), // ipv6_dst
    (NXM1, 21, 29), // icmpv6_type
    (NXM1, 22, 30), // icmpv6_code
    (NXM1, 23, 31), // nd_target
    (NXM1, 24, 32), // nd_sll
    (NXM1, 25, 33), // nd_tll
    (NXM1, 27, 28), // ipv6_label
    (NXM1, 28, 9),  // ip_ecn
];

/// NXM_NX_COOKIE (class 1, field 30 — MPLS_TTL's number, told apart by its 8
/// bytes): a flow-mod's or a request's cookie and mask, in NXM's own match.
const NXM_COOKIE: u8 = 30;

/// The fields of an NXM match (`body`: `match_len` bytes, no padding), as OXM
/// fields, checked as any match.
pub fn decode(body: &[u8]) -> Result<OxmMatch, BadMatch> {
    match decode_with_cookie(body)? {
        (m, None) => Ok(m),
        // A packet's match has no cookie.
        (_, Some(_)) => Err(BadMatch::BadField),
    }
}

/// As [`decode`], for a flow-mod's or a statistics request's match, which may also
/// select flows by cookie (and mask).
pub fn decode_with_cookie(body: &[u8]) -> Result<(OxmMatch, Option<(u64, u64)>), BadMatch> {
    let mut r = Reader::new(body);
    let mut fields = Vec::new();
    let mut cookie = None;
    while !r.is_empty() {
        let class = r.u16().ok_or(BadMatch::BadLen)?;
        let fh = r.u8().ok_or(BadMatch::BadLen)?;
        let len = usize::from(r.u8().ok_or(BadMatch::BadLen)?);
        let payload = r.bytes(len).ok_or(BadMatch::BadLen)?;
        let (number, hasmask) = (fh >> 1, fh & 1 == 1);
        // An experimenter's field (Open vSwitch's NSH fields): its ID first.
        if class == crate::oxm::OFPXMC_EXPERIMENTER {
            let (exp, rest) = payload.split_first_chunk::<4>().ok_or(BadMatch::BadLen)?;
            let field = crate::oxm::field_of_experimenter(u32::from_be_bytes(*exp), number)
                .ok_or(BadMatch::BadField)?;
            fields.push(checked_field(field, hasmask, rest)?);
            continue;
        }
        if (class, number) == (NXM1, NXM_COOKIE) && matches!(len, 8 | 16) {
            let mut c = Reader::new(payload);
            let value = c.u64().ok_or(BadMatch::BadLen)?;
            let mask = if hasmask { c.u64() } else { Some(u64::MAX) };
            if cookie.is_some() || !c.is_empty() || mask.is_none() {
                return Err(BadMatch::BadLen);
            }
            cookie = Some((value, mask.unwrap_or(u64::MAX)));
            continue;
        }
        match (class, number) {
            (NXM0, NXM_IN_PORT) => {
                let p: [u8; 2] = payload.try_into().map_err(|_| BadMatch::BadLen)?;
                if hasmask {
                    return Err(BadMatch::BadMask);
                }
                let port = port_from_16(u16::from_be_bytes(p)).to_be_bytes();
                fields.push(checked_field(OXM_IN_PORT, false, &port)?);
            }
            (NXM0, NXM_VLAN_TCI) => fields.extend(vlan_from_tci(payload, hasmask)?),
            (NXM0, NXM_IP_TOS) => {
                let [tos] = payload.try_into().map_err(|_| BadMatch::BadLen)?;
                if hasmask {
                    return Err(BadMatch::BadMask);
                }
                if tos & 3 != 0 {
                    return Err(BadMatch::BadValue);
                }
                fields.push(checked_field(OXM_IP_DSCP, false, &[tos >> 2])?);
            }
            _ => {
                let field = TWINS
                    .iter()
                    .find(|(c, n, _)| *c == class && *n == number)
                    .map(|(_, _, oxm)| *oxm)
                    .or_else(|| field_of_wire(class, number))
                    .ok_or(BadMatch::BadField)?;
                fields.push(checked_field(field, hasmask, payload)?);
            }
        }
    }
    Ok((OxmMatch::checked(fields)?, cookie))
}

/// `NXM_OF_VLAN_TCI` (value and perhaps mask) as `vlan_vid` and `vlan_pcp`: a TCI
/// of 0 is "no tag"; the CFI bit stands for OFPVID_PRESENT.
fn vlan_from_tci(payload: &[u8], hasmask: bool) -> Result<Vec<OxmField>, BadMatch> {
    let mut r = Reader::new(payload);
    let value = r.u16().ok_or(BadMatch::BadLen)?;
    let mask = if hasmask {
        r.u16().ok_or(BadMatch::BadLen)?
    } else {
        0xffff
    };
    if !r.is_empty() {
        return Err(BadMatch::BadLen);
    }
    if value & !mask != 0 {
        return Err(BadMatch::BadValue);
    }
    if mask == 0 {
        return Ok(Vec::new());
    }
    // No CFI bit where the mask asks for it: untagged (0/0x1000, 0/0x1fff, 0).
    if mask & 0x1000 != 0 && value & 0x1000 == 0 {
        if value != 0 {
            return Err(BadMatch::BadValue);
        }
        return Ok(vec![OxmField {
            field: OXM_VLAN_VID,
            value: vec![0, 0],
            mask: None,
        }]);
    }
    // Anything else must ask for a tag and say the priority whole or not at all.
    if mask & value & 0x1000 == 0 || !matches!(mask >> 13, 0 | 7) {
        return Err(BadMatch::BadMask);
    }
    let vid_mask = 0x1000 | (mask & 0xfff);
    let vid = OxmField {
        field: OXM_VLAN_VID,
        value: (value & vid_mask).to_be_bytes().to_vec(),
        mask: (vid_mask != 0x1fff).then(|| vid_mask.to_be_bytes().to_vec()),
    };
    let mut out = vec![vid];
    if mask >> 13 == 7 {
        out.push(OxmField {
            field: OXM_VLAN_PCP,
            value: vec![(value >> 13) as u8],
            mask: None,
        });
    }
    Ok(out)
}

fn put(out: &mut Vec<u8>, class: u16, number: u8, value: &[u8], mask: Option<&[u8]>) {
    out.extend_from_slice(&class.to_be_bytes());
    out.push((number << 1) | u8::from(mask.is_some()));
    out.push((value.len() + mask.map_or(0, <[u8]>::len)) as u8);
    out.extend_from_slice(value);
    out.extend_from_slice(mask.unwrap_or_default());
}

/// Writes `m`'s fields in NXM (no padding); returns how many bytes (`match_len`).
pub fn encode(m: &OxmMatch, out: &mut Vec<u8>) -> usize {
    let start = out.len();
    let pcp = m.get(OXM_VLAN_PCP).and_then(|f| f.value.first().copied());
    for f in &m.fields {
        let mask = f.mask.as_deref();
        match f.field {
            OXM_IN_PORT => {
                let p = u32::from_be_bytes(f.value.as_slice().try_into().unwrap_or_default());
                // A port 1.0 cannot name goes as OXM's in_port.
                match port_to_16(p) {
                    Some(p) => put(out, NXM0, NXM_IN_PORT, &p.to_be_bytes(), None),
                    None => put(out, 0x8000, 0, &f.value, None),
                }
            }
            OXM_VLAN_VID => {
                let vid = u16::from_be_bytes(f.value.as_slice().try_into().unwrap_or_default());
                let vid_mask = mask
                    .and_then(|m| m.try_into().ok())
                    .map_or(0x1fff, u16::from_be_bytes);
                let (mut tci, mut tci_mask) = (vid, vid_mask);
                if let Some(p) = pcp {
                    tci |= u16::from(p) << 13;
                    tci_mask |= 0xe000;
                }
                if vid == 0 && mask.is_none() {
                    (tci, tci_mask) = (0, 0xffff);
                }
                let mask = (tci_mask != 0xffff).then(|| tci_mask.to_be_bytes());
                put(
                    out,
                    NXM0,
                    NXM_VLAN_TCI,
                    &tci.to_be_bytes(),
                    mask.as_ref().map(|m| &m[..]),
                );
            }
            // Said with the VID, in the TCI.
            OXM_VLAN_PCP => {}
            OXM_IP_DSCP => {
                let dscp = f.value.first().copied().unwrap_or(0);
                put(out, NXM0, NXM_IP_TOS, &[dscp << 2], None);
            }
            field if crate::oxm::experimenter_of(field).is_some() => {
                let len = f.value.len() + mask.map_or(0, <[u8]>::len);
                crate::oxm::put_header(out, field, mask.is_some(), len);
                out.extend_from_slice(&f.value);
                out.extend_from_slice(mask.unwrap_or_default());
            }
            field => {
                let (class, number) = TWINS
                    .iter()
                    .find(|(_, _, oxm)| *oxm == field)
                    .map_or_else(|| crate::oxm::wire_id(field), |(c, n, _)| (*c, *n));
                put(out, class, number, &f.value, mask);
            }
        }
    }
    out.len() - start
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::field;

    fn round_trip(m: &OxmMatch) -> OxmMatch {
        let mut wire = Vec::new();
        let n = encode(m, &mut wire);
        assert_eq!(n, wire.len());
        decode(&wire).expect("a match it wrote")
    }

    #[test]
    fn standard_fields_go_by_their_nxm_names_and_come_back() {
        let m = OxmMatch {
            fields: vec![
                field(OXM_IN_PORT, &[0, 0, 0, 7], None),
                field(3, &[2, 0, 0, 0, 0, 0], Some(&[0xff, 0xff, 0xff, 0, 0, 0])),
                field(OXM_VLAN_VID, &[0x10, 5], None),
                field(OXM_VLAN_PCP, &[3], None),
                field(5, &[0x86, 0xdd], None),
                field(OXM_IP_DSCP, &[10], None),
                field(26, &[0xfd; 16], None),
                field(10, &[17], None),
                field(16, &[0, 53], None),
                field(crate::oxm::REG0 + 3, &[0, 0, 0, 9], Some(&[0, 0, 0, 0xff])),
                field(2, &[0; 8], Some(&[0xff; 8])),
            ],
        };
        let mut wire = Vec::new();
        encode(&m, &mut wire);
        // NXM_OF_IN_PORT: class 0, field 0, 2 bytes.
        assert_eq!(&wire[..6], &[0, 0, 0, 2, 0, 7]);
        // NXM_OF_VLAN_TCI: CFI | PCP 3 | VID 5, exact.
        assert!(wire.windows(6).any(|w| w == [0, 0, 8, 2, 0x70, 5]));
        assert_eq!(round_trip(&m), m);
    }

    #[test]
    fn vlan_tci_masks_that_oxm_can_say_are_taken_others_refused() {
        let tci = |v: u16, m: Option<u16>| {
            let mut b = v.to_be_bytes().to_vec();
            b.extend(m.map(u16::to_be_bytes).iter().flatten());
            vlan_from_tci(&b, m.is_some())
        };
        assert_eq!(
            tci(0, None).unwrap(),
            vec![field(OXM_VLAN_VID, &[0, 0], None)]
        );
        assert_eq!(
            tci(0x1000, Some(0x1000)).unwrap(),
            vec![field(OXM_VLAN_VID, &[0x10, 0], Some(&[0x10, 0]))]
        );
        assert_eq!(tci(0, Some(0)).unwrap(), vec![]);
        assert_eq!(
            tci(0, Some(0x1000)).unwrap(),
            vec![field(OXM_VLAN_VID, &[0, 0], None)],
            "no CFI: untagged"
        );
        assert_eq!(tci(0x2000, Some(0x2000)), Err(BadMatch::BadMask));
        assert_eq!(tci(0x1001, Some(0x1000)), Err(BadMatch::BadValue));
    }

    #[test]
    fn bad_nxm_is_refused_with_the_reason() {
        // A field class vsw does not know.
        assert_eq!(decode(&[0x12, 0x34, 0, 1, 0]), Err(BadMatch::BadField));
        // Cut short.
        assert_eq!(decode(&[0, 0, 0, 2, 0]), Err(BadMatch::BadLen));
        // ip_proto without eth_type: a prerequisite missing.
        assert_eq!(decode(&[0, 0, 12, 1, 6]), Err(BadMatch::BadPrereq));
        // TOS with ECN bits.
        assert_eq!(
            decode(&[0, 0, 6, 2, 8, 0, 0, 0, 10, 1, 1]),
            Err(BadMatch::BadValue)
        );
    }
}
