//! `ofp10_match`: OpenFlow 1.0's fixed 40-byte match, a wildcard bit per field and
//! prefix lengths for the IPv4 addresses, read into the OXM fields the rest of vsw
//! speaks and written back from them.
//!
//! As Open vSwitch does, a field whose prerequisites the match does not hold (a
//! TCP port without `nw_proto=6`) is dropped rather than refused, and fields 1.0
//! cannot say (registers, IPv6, masks that are not prefixes) are left out of what
//! is written back: the NXM flow format is how a 1.0 connection sees them.

use crate::oxm::{BadMatch, OxmField, OxmMatch};
use crate::reader::Reader;

/// The match's length on the wire.
pub const MATCH_LEN: usize = 40;

const W_IN_PORT: u32 = 1 << 0;
const W_DL_VLAN: u32 = 1 << 1;
const W_DL_SRC: u32 = 1 << 2;
const W_DL_DST: u32 = 1 << 3;
const W_DL_TYPE: u32 = 1 << 4;
const W_NW_PROTO: u32 = 1 << 5;
const W_TP_SRC: u32 = 1 << 6;
const W_TP_DST: u32 = 1 << 7;
const NW_SRC_SHIFT: u32 = 8;
const NW_DST_SHIFT: u32 = 14;
const W_DL_VLAN_PCP: u32 = 1 << 20;
const W_NW_TOS: u32 = 1 << 21;
const W_ALL: u32 = (1 << 22) - 1;
/// `dl_vlan` of a packet without an 802.1Q tag.
const VLAN_NONE: u16 = 0xffff;

/// OXM field numbers used here.
const IN_PORT: u8 = 0;
const ETH_DST: u8 = 3;
const ETH_SRC: u8 = 4;
const ETH_TYPE: u8 = 5;
const VLAN_VID: u8 = 6;
const VLAN_PCP: u8 = 7;
const IP_DSCP: u8 = 8;
const IP_PROTO: u8 = 10;
const IPV4_SRC: u8 = 11;
const IPV4_DST: u8 = 12;
const TCP_SRC: u8 = 13;
const TCP_DST: u8 = 14;
const UDP_SRC: u8 = 15;
const UDP_DST: u8 = 16;
const ICMP_TYPE: u8 = 19;
const ICMP_CODE: u8 = 20;
const ARP_OP: u8 = 21;
const ARP_SPA: u8 = 22;
const ARP_TPA: u8 = 23;
const SCTP_SRC: u8 = 17;
const SCTP_DST: u8 = 18;
const ICMPV6_TYPE: u8 = 29;
const ICMPV6_CODE: u8 = 30;

/// OpenFlow 1.0's 16-bit port numbers as 1.1 on's 32-bit ones: the reserved ports
/// (0xff00 up) move to the top of the wider space.
pub fn port_from_16(p: u16) -> u32 {
    if p >= 0xff00 {
        0xffff_0000 | u32::from(p)
    } else {
        u32::from(p)
    }
}

/// A 32-bit port number in 1.0's 16 bits (`None`: one 1.0 cannot name).
pub fn port_to_16(p: u32) -> Option<u16> {
    if p >= 0xffff_ff00 {
        Some(p as u16)
    } else {
        u16::try_from(p).ok().filter(|p| *p < 0xff00)
    }
}

fn exact(field: u8, value: &[u8]) -> OxmField {
    OxmField {
        field,
        value: value.to_vec(),
        mask: None,
    }
}

/// An IPv4 address wildcarded by its low `wild` bits (32 or more: all).
fn prefix(field: u8, addr: u32, wild: u32) -> Option<OxmField> {
    match wild {
        0 => Some(exact(field, &addr.to_be_bytes())),
        1..=31 => {
            let mask = u32::MAX << wild;
            Some(OxmField {
                field,
                value: (addr & mask).to_be_bytes().to_vec(),
                mask: Some(mask.to_be_bytes().to_vec()),
            })
        }
        _ => None,
    }
}

/// Whether the `ofp10_match` at the front of `r` wildcards nothing (without
/// reading it).
pub(crate) fn is_exact(r: &Reader) -> bool {
    let mut peek = r.clone();
    peek.u32().is_some_and(|w| w & W_ALL == 0)
}

/// Reads an `ofp10_match` from the front of `r` as OXM fields, checked as any match.
pub(crate) fn decode(r: &mut Reader) -> Result<OxmMatch, BadMatch> {
    let raw = r.bytes(MATCH_LEN).ok_or(BadMatch::BadLen)?;
    let mut m = Reader::new(raw);
    let short = BadMatch::BadLen;
    let wildcards = m.u32().ok_or(short)? & W_ALL;
    let in_port = m.u16().ok_or(short)?;
    let dl_src = m.bytes(6).ok_or(short)?;
    let dl_dst = m.bytes(6).ok_or(short)?;
    let dl_vlan = m.u16().ok_or(short)?;
    let dl_vlan_pcp = m.u8().ok_or(short)?;
    m.u8().ok_or(short)?;
    let dl_type = m.u16().ok_or(short)?;
    let nw_tos = m.u8().ok_or(short)?;
    let nw_proto = m.u8().ok_or(short)?;
    m.u16().ok_or(short)?;
    let nw_src = m.u32().ok_or(short)?;
    let nw_dst = m.u32().ok_or(short)?;
    let tp_src = m.u16().ok_or(short)?;
    let tp_dst = m.u16().ok_or(short)?;
    let given = |bit: u32| wildcards & bit == 0;

    let mut fields = Vec::new();
    if given(W_IN_PORT) {
        fields.push(exact(IN_PORT, &port_from_16(in_port).to_be_bytes()));
    }
    if given(W_DL_SRC) {
        fields.push(exact(ETH_SRC, dl_src));
    }
    if given(W_DL_DST) {
        fields.push(exact(ETH_DST, dl_dst));
    }
    let tagged = if given(W_DL_VLAN) {
        if dl_vlan == VLAN_NONE {
            fields.push(exact(VLAN_VID, &[0, 0]));
            false
        } else {
            let vid = 0x1000 | (dl_vlan & 0xfff);
            fields.push(exact(VLAN_VID, &vid.to_be_bytes()));
            true
        }
    } else if given(W_DL_VLAN_PCP) {
        // A priority without a VID: any tagged packet of that priority.
        fields.push(OxmField {
            field: VLAN_VID,
            value: vec![0x10, 0],
            mask: Some(vec![0x10, 0]),
        });
        true
    } else {
        false
    };
    if tagged && given(W_DL_VLAN_PCP) {
        fields.push(exact(VLAN_PCP, &[dl_vlan_pcp & 7]));
    }
    if given(W_DL_TYPE) {
        fields.push(exact(ETH_TYPE, &dl_type.to_be_bytes()));
        let nw_src_wild = (wildcards >> NW_SRC_SHIFT) & 0x3f;
        let nw_dst_wild = (wildcards >> NW_DST_SHIFT) & 0x3f;
        // As Open vSwitch normalizes a 1.0 match: addresses for IPv4 and ARP
        // (RARP too), TOS and protocol for IPv4 and IPv6 (ARP's opcode), ports for
        // TCP, UDP and SCTP, type and code for ICMP and ICMPv6.
        let ip = matches!(dl_type, 0x0800 | 0x86dd);
        if ip {
            if given(W_NW_TOS) {
                fields.push(exact(IP_DSCP, &[nw_tos >> 2]));
            }
            if dl_type == 0x0800 {
                fields.extend(prefix(IPV4_SRC, nw_src, nw_src_wild));
                fields.extend(prefix(IPV4_DST, nw_dst, nw_dst_wild));
            }
            if given(W_NW_PROTO) {
                fields.push(exact(IP_PROTO, &[nw_proto]));
                let icmp = match dl_type {
                    0x0800 => 1,
                    _ => 58,
                };
                let fields_of = match nw_proto {
                    6 => Some((TCP_SRC, TCP_DST, false)),
                    17 => Some((UDP_SRC, UDP_DST, false)),
                    132 => Some((SCTP_SRC, SCTP_DST, false)),
                    p if p == icmp && dl_type == 0x0800 => Some((ICMP_TYPE, ICMP_CODE, true)),
                    p if p == icmp => Some((ICMPV6_TYPE, ICMPV6_CODE, true)),
                    _ => None,
                };
                if let Some((src, dst, one_byte)) = fields_of {
                    let put = |f: u8, v: u16| {
                        if one_byte {
                            exact(f, &[v as u8])
                        } else {
                            exact(f, &v.to_be_bytes())
                        }
                    };
                    if given(W_TP_SRC) {
                        fields.push(put(src, tp_src));
                    }
                    if given(W_TP_DST) {
                        fields.push(put(dst, tp_dst));
                    }
                }
            }
        } else if matches!(dl_type, 0x0806 | 0x8035) {
            if given(W_NW_PROTO) {
                fields.push(exact(ARP_OP, &u16::from(nw_proto).to_be_bytes()));
            }
            fields.extend(prefix(ARP_SPA, nw_src, nw_src_wild));
            fields.extend(prefix(ARP_TPA, nw_dst, nw_dst_wild));
        }
    }
    // The fields were made to fit; their values are still checked as any match's.
    let fields = fields
        .into_iter()
        .map(|f| {
            let mut payload = f.value.clone();
            payload.extend(f.mask.iter().flatten());
            crate::oxm::checked_field(f.field, f.mask.is_some(), &payload)
        })
        .collect::<Result<Vec<_>, _>>()?;
    OxmMatch::checked(fields)
}

fn number(f: &OxmField) -> u64 {
    f.value.iter().fold(0, |n, b| (n << 8) | u64::from(*b))
}

/// How many low bits a mask leaves out, when it is a prefix.
fn wild_bits(mask: Option<&[u8]>) -> Option<u32> {
    let Some(mask) = mask else { return Some(0) };
    let m = u32::from_be_bytes(mask.try_into().ok()?);
    let wild = m.trailing_zeros();
    (wild == 32 || m == u32::MAX << wild).then_some(wild)
}

/// Writes `m` as an `ofp10_match`: what 1.0 can say of it, every other field
/// wildcarded.
pub fn encode(m: &OxmMatch, out: &mut Vec<u8>) {
    let mut wildcards = W_ALL;
    let (mut in_port, mut dl_vlan, mut dl_type, mut tp_src, mut tp_dst) = (0u16, 0u16, 0, 0, 0);
    let (mut dl_src, mut dl_dst) = ([0u8; 6], [0u8; 6]);
    let (mut pcp, mut nw_tos, mut nw_proto) = (0u8, 0u8, 0u8);
    let (mut nw_src, mut nw_dst) = (0u32, 0u32);
    for f in &m.fields {
        let n = number(f);
        let unmasked = f.mask.is_none();
        match f.field {
            IN_PORT => {
                if let Some(p) = port_to_16(n as u32) {
                    in_port = p;
                    wildcards &= !W_IN_PORT;
                }
            }
            ETH_SRC | ETH_DST if unmasked => {
                let mac: [u8; 6] = f.value.as_slice().try_into().unwrap_or_default();
                if f.field == ETH_SRC {
                    dl_src = mac;
                    wildcards &= !W_DL_SRC;
                } else {
                    dl_dst = mac;
                    wildcards &= !W_DL_DST;
                }
            }
            ETH_TYPE => {
                dl_type = n as u16;
                wildcards &= !W_DL_TYPE;
            }
            VLAN_VID if unmasked => {
                dl_vlan = if n == 0 { VLAN_NONE } else { n as u16 & 0xfff };
                wildcards &= !W_DL_VLAN;
            }
            VLAN_PCP => {
                pcp = n as u8;
                wildcards &= !W_DL_VLAN_PCP;
            }
            IP_DSCP => {
                nw_tos = (n as u8) << 2;
                wildcards &= !W_NW_TOS;
            }
            IP_PROTO | ARP_OP => {
                nw_proto = n as u8;
                wildcards &= !W_NW_PROTO;
            }
            IPV4_SRC | ARP_SPA | IPV4_DST | ARP_TPA => {
                if let Some(wild) = wild_bits(f.mask.as_deref()) {
                    let src = matches!(f.field, IPV4_SRC | ARP_SPA);
                    let shift = if src { NW_SRC_SHIFT } else { NW_DST_SHIFT };
                    wildcards = (wildcards & !(0x3f << shift)) | (wild << shift);
                    if src {
                        nw_src = n as u32;
                    } else {
                        nw_dst = n as u32;
                    }
                }
            }
            TCP_SRC | UDP_SRC | SCTP_SRC | ICMP_TYPE | ICMPV6_TYPE if unmasked => {
                tp_src = n as u16;
                wildcards &= !W_TP_SRC;
            }
            TCP_DST | UDP_DST | SCTP_DST | ICMP_CODE | ICMPV6_CODE if unmasked => {
                tp_dst = n as u16;
                wildcards &= !W_TP_DST;
            }
            _ => {}
        }
    }
    out.extend_from_slice(&wildcards.to_be_bytes());
    out.extend_from_slice(&in_port.to_be_bytes());
    out.extend_from_slice(&dl_src);
    out.extend_from_slice(&dl_dst);
    out.extend_from_slice(&dl_vlan.to_be_bytes());
    out.extend_from_slice(&[pcp, 0]);
    out.extend_from_slice(&dl_type.to_be_bytes());
    out.extend_from_slice(&[nw_tos, nw_proto, 0, 0]);
    out.extend_from_slice(&nw_src.to_be_bytes());
    out.extend_from_slice(&nw_dst.to_be_bytes());
    out.extend_from_slice(&tp_src.to_be_bytes());
    out.extend_from_slice(&tp_dst.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::field;

    fn round_trip(m: &OxmMatch) -> OxmMatch {
        let mut wire = Vec::new();
        encode(m, &mut wire);
        assert_eq!(wire.len(), MATCH_LEN);
        decode(&mut Reader::new(&wire)).expect("a match it wrote")
    }

    #[test]
    fn a_tcp_match_with_prefixes_round_trips() {
        let m = OxmMatch {
            fields: vec![
                field(IN_PORT, &[0, 0, 0, 3], None),
                field(ETH_SRC, &[2, 0, 0, 0, 0, 1], None),
                field(VLAN_VID, &[0x10, 10], None),
                field(VLAN_PCP, &[5], None),
                field(ETH_TYPE, &[8, 0], None),
                field(IP_DSCP, &[46], None),
                field(IPV4_SRC, &[198, 18, 0, 0], Some(&[255, 255, 0, 0])),
                field(IPV4_DST, &[198, 19, 0, 1], None),
                field(IP_PROTO, &[6], None),
                field(TCP_DST, &[0, 80], None),
            ],
        };
        assert_eq!(round_trip(&m), m);
    }

    #[test]
    fn reserved_ports_and_untagged_packets_keep_their_meaning() {
        let m = OxmMatch {
            fields: vec![
                field(IN_PORT, &0xffff_fffeu32.to_be_bytes(), None),
                field(VLAN_VID, &[0, 0], None),
                field(ETH_TYPE, &[8, 6], None),
                field(ARP_OP, &[0, 1], None),
                field(ARP_TPA, &[198, 18, 0, 9], None),
            ],
        };
        let mut wire = Vec::new();
        encode(&m, &mut wire);
        assert_eq!(&wire[4..6], &[0xff, 0xfe], "LOCAL in 16 bits");
        assert_eq!(&wire[18..20], &[0xff, 0xff], "OFP_VLAN_NONE");
        assert_eq!(round_trip(&m), m);
    }

    #[test]
    fn fields_without_their_prerequisites_are_dropped_as_open_vswitch_drops_them() {
        // Everything given but dl_type: only the layer-2 fields mean anything.
        let mut wire = vec![0u8; MATCH_LEN];
        wire[..4].copy_from_slice(&W_DL_TYPE.to_be_bytes());
        wire[4..6].copy_from_slice(&[0, 1]);
        wire[18..20].copy_from_slice(&VLAN_NONE.to_be_bytes());
        let m = decode(&mut Reader::new(&wire)).unwrap();
        let names: Vec<u8> = m.fields.iter().map(|f| f.field).collect();
        assert_eq!(names, [IN_PORT, ETH_SRC, ETH_DST, VLAN_VID]);
        // All wildcarded: an empty match.
        let mut all = vec![0u8; MATCH_LEN];
        all[..4].copy_from_slice(&W_ALL.to_be_bytes());
        assert_eq!(decode(&mut Reader::new(&all)).unwrap(), OxmMatch::default());
        assert_eq!(decode(&mut Reader::new(&all[..39])), Err(BadMatch::BadLen));
    }

    #[test]
    fn ipv6_sctp_and_icmpv6_keep_what_1_0_can_say_of_them() {
        // As Open vSwitch reads a 1.0 match: IPv6 keeps its protocol and ports.
        for (dl_type, proto, src, dst) in [
            ([0x86, 0xdd], 6, TCP_SRC, TCP_DST),
            ([0x08, 0x00], 132, SCTP_SRC, SCTP_DST),
        ] {
            let m = OxmMatch {
                fields: vec![
                    field(ETH_TYPE, &dl_type, None),
                    field(IP_PROTO, &[proto], None),
                    field(src, &[0, 9], None),
                    field(dst, &[0, 80], None),
                ],
            };
            assert_eq!(round_trip(&m), m);
        }
        let icmpv6 = OxmMatch {
            fields: vec![
                field(ETH_TYPE, &[0x86, 0xdd], None),
                field(IP_PROTO, &[58], None),
                field(ICMPV6_TYPE, &[135], None),
            ],
        };
        assert_eq!(round_trip(&icmpv6), icmpv6);
    }

    #[test]
    fn what_1_0_cannot_say_is_left_wildcarded() {
        let m = OxmMatch {
            fields: vec![
                field(crate::oxm::REG0, &[0, 0, 0, 1], None),
                field(ETH_TYPE, &[8, 0], None),
                field(IPV4_SRC, &[198, 18, 0, 1], Some(&[255, 0, 255, 0])),
            ],
        };
        let back = round_trip(&m);
        assert_eq!(back.fields, vec![field(ETH_TYPE, &[8, 0], None)]);
    }
}
