//! OpenFlow's flows, groups and meters as vsw-flow's values (the other way from
//! `from_vsw`): a flow-mod becomes a `FlowSpec` or a `Selection` and actions, a
//! group-mod a `GroupSpec`, a meter-mod a `MeterSpec` — checked by the same rules as
//! `vswctl`'s text (vsw-flow's `check_flow`, `GroupSpec::check`, `MeterSpec::check`),
//! with no text between.
//!
//! What vsw cannot do yet is refused with the error OpenFlow names for it, never
//! half-installed: matches on MPLS and other fields vsw does not keep (BAD_FIELD),
//! output to TABLE outside a packet-out (BAD_OUT_PORT), set-fields of fields vsw
//! does not keep (MPLS, PBB: BAD_SET_TYPE).

use std::net::Ipv4Addr;

use vsw_flow::subfield::{Field, Subfield};
use vsw_flow::{
    Action as VswAction, AsWritten, Band, BandType, Bucket, Encap, FlowSpec, FlowSyntaxError,
    GroupSpec, GroupType, Load, Match, MatchKey, MeterSpec, Selection,
};
use vsw_packet::rewrite::{FieldWrite, NshField};
use vsw_packet::{EtherType, MacAddr};

use crate::as_written::{written_buckets, written_instructions, written_match};
use crate::flow_mod::{
    to_vsw_port, Action, BadFlowMod, Command, FlowMod, Instruction, OFPFF_SEND_FLOW_REM, OFPG_ANY,
    OFPP_ALL, OFPP_ANY, OFPP_CONTROLLER, OFPP_FLOOD, OFPP_IN_PORT, OFPP_LOCAL, OFPP_MAX,
    OFPP_NORMAL, OFPP_TABLE, OFP_NO_BUFFER,
};
use crate::group_mod::{
    BadGroupMod, GroupMod, OFPGT_ALL, OFPGT_FF, OFPGT_INDIRECT, OFPGT_SELECT, OFPG_MAX,
};
use crate::meter_mod::{
    BadMeterMod, MeterMod, OFPMBT_DROP, OFPMBT_DSCP_REMARK, OFPMF_BURST, OFPMF_PKTPS, OFPMF_STATS,
};
use crate::nx_action::{
    nxm_header_parts, port_from_16, FieldCopy, NxAction, NX_TABLE_CURRENT, PT_ETH, PT_MPLS,
    PT_MPLS_MC, PT_NSH, PT_USE_NEXT_PROTO,
};
use crate::nx_learn::{
    LearnAction, LearnDst, LearnSrc, NX_LEARN_F_DELETE_LEARNED, NX_LEARN_F_SEND_FLOW_REM,
};
use crate::oxm::{
    BadMatch, OxmField, OxmMatch, CONJ_ID, IP_FRAG, IP_TTL, MPLS_TTL, NSH_C1, NSH_FLAGS,
    NSH_MDTYPE, NSH_NP, NSH_SI, NSH_SPI, NSH_TTL, NX_TCP_FLAGS, PACKET_TYPE, PKT_MARK, REG0,
    TCP_FLAGS, TUN_FLAGS, TUN_IPV4_DST, TUN_IPV4_SRC, TUN_METADATA0, XREG0, XXREG0,
};

fn num(b: &[u8]) -> u128 {
    b.iter().fold(0u128, |n, x| (n << 8) | u128::from(*x))
}

/// A field's value and mask as numbers (an unmasked field: every bit of its bytes).
fn value_mask(f: &OxmField) -> (u128, u128) {
    let full = if f.value.len() >= 16 {
        u128::MAX
    } else {
        (1u128 << (8 * f.value.len())) - 1
    };
    let mask = f.mask.as_deref().map_or(full, num);
    (num(&f.value) & mask, mask)
}

fn mac_of(b: &[u8]) -> MacAddr {
    let mut m = [0u8; 6];
    let n = b.len().min(6);
    m[..n].copy_from_slice(&b[..n]);
    MacAddr(m)
}

fn mac_pair(f: &OxmField) -> (MacAddr, MacAddr) {
    let mask = f.mask.as_deref().map_or(MacAddr([0xff; 6]), mac_of);
    let value = mac_of(&f.value);
    let mut v = [0u8; 6];
    for (i, b) in v.iter_mut().enumerate() {
        *b = value.0[i] & mask.0[i];
    }
    (MacAddr(v), mask)
}

/// One part of the outermost MPLS entry matched exactly (each is a field of its
/// own to vsw-flow, bits of the key's `label`).
fn mpls_part(v: &mut MatchKey, k: &mut MatchKey, val: u128, field: Field) {
    field.write(v, val);
    field.write(k, vsw_flow::subfield::ones(u32::from(field.info().bits)));
}

/// One of Open vSwitch's NSH fields, in the slots the key keeps NSH's fields in.
fn nsh_part(
    v: &mut MatchKey,
    k: &mut MatchKey,
    field: u8,
    val: u128,
    mask: u128,
) -> Result<(), BadMatch> {
    let (mut hv, mut hk) = (v.nsh(), k.nsh());
    let (val32, mask32) = (val as u32, mask as u32);
    match field {
        NSH_FLAGS => (hv.flags, hk.flags) = (val as u8, mask as u8),
        NSH_TTL => (hv.ttl, hk.ttl) = (val as u8, 0x3f),
        // Open vSwitch takes MD types 1 and 2 only, in a match too.
        NSH_MDTYPE if !matches!(val, 1 | 2) => return Err(BadMatch::BadValue),
        NSH_MDTYPE => (hv.md_type, hk.md_type) = (val as u8, 0xff),
        NSH_NP => (hv.next_proto, hk.next_proto) = (val as u8, 0xff),
        NSH_SPI => {
            hv.path = (hv.path & 0xff) | (val32 << 8);
            hk.path |= 0xffff_ff00;
        }
        NSH_SI => {
            hv.path = (hv.path & !0xff) | (val32 & 0xff);
            hk.path |= 0xff;
        }
        c => {
            let i = usize::from(c - NSH_C1);
            (hv.context[i], hk.context[i]) = (val32, mask32);
        }
    }
    v.set_nsh(&hv);
    k.set_nsh(&hk);
    Ok(())
}

/// A decoded OXM match (its fields checked by `OxmMatch::decode`) as vsw's match.
pub fn match_to_vsw(m: &OxmMatch) -> Result<Match, BadMatch> {
    let (mut v, mut k) = (MatchKey::default(), MatchKey::default());
    let eth_type = m.get(5).map(|f| num(&f.value) as u16);
    for f in &m.fields {
        let (val, mask) = value_mask(f);
        match f.field {
            0 => {
                v.in_port = to_vsw_port(val as u32);
                k.in_port = u32::MAX;
            }
            2 => (v.metadata, k.metadata) = (val as u64, mask as u64),
            38 => (v.tun_id, k.tun_id) = (val as u64, mask as u64),
            TUN_IPV4_SRC => (v.tun_src, k.tun_src) = (val as u32, mask as u32),
            TUN_IPV4_DST => (v.tun_dst, k.tun_dst) = (val as u32, mask as u32),
            TUN_METADATA0 => (v.tun_metadata0, k.tun_metadata0) = (val as u32, mask as u32),
            // The flags vsw knows (OAM): the decoder refused a value with others.
            TUN_FLAGS => {
                let known = u128::from(vsw_packet::key::TUN_FLAG_OAM);
                (v.tun_flags, k.tun_flags) = (val as u16, (mask & known) as u16);
            }
            3 => (v.dl_dst, k.dl_dst) = mac_pair(f),
            4 => (v.dl_src, k.dl_src) = mac_pair(f),
            5 => (v.dl_type, k.dl_type) = (val as u16, 0xffff),
            // vlan_vid and vlan_pcp are one field to vsw: the TCI (PCP above
            // OFPVID_PRESENT, which sits where the TCI's CFI bit does).
            6 => {
                v.vlan_tci |= val as u16 & 0x1fff;
                k.vlan_tci |= mask as u16 & 0x1fff;
            }
            7 => {
                v.vlan_tci |= (val as u16) << 13;
                k.vlan_tci |= 0xe000;
            }
            8 => {
                v.nw_tos |= (val as u8) << 2;
                k.nw_tos |= 0xfc;
            }
            9 => {
                v.nw_tos |= val as u8 & 3;
                k.nw_tos |= 3;
            }
            10 => (v.nw_proto, k.nw_proto) = (val as u8, 0xff),
            // IPv4 addresses (ARP's too) sit in the low bits of the key's 128.
            11 | 22 => (v.nw_src, k.nw_src) = (val, mask),
            12 | 23 => (v.nw_dst, k.nw_dst) = (val, mask),
            13 | 15 | 17 => (v.tp_src, k.tp_src) = (val as u16, mask as u16),
            14 | 16 | 18 => (v.tp_dst, k.tp_dst) = (val as u16, mask as u16),
            19 | 29 => (v.tp_src, k.tp_src) = (val as u16, 0xffff),
            20 | 30 => (v.tp_dst, k.tp_dst) = (val as u16, 0xffff),
            // An ARP opcode is the key's protocol number, as in Open vSwitch.
            21 if eth_type.is_some_and(EtherType::is_arp) => {
                (v.nw_proto, k.nw_proto) = (val as u8, 0xff)
            }
            24 | 32 => (v.arp_sha, k.arp_sha) = mac_pair(f),
            25 | 33 => (v.arp_tha, k.arp_tha) = mac_pair(f),
            26 => (v.nw_src, k.nw_src) = (val, mask),
            27 => (v.nw_dst, k.nw_dst) = (val, mask),
            // 20 bits of the 32 on the wire.
            28 => (v.label, k.label) = (val as u32, (mask & 0xfffff) as u32),
            // The I-SID: the low 24 bits of the I-TAG the key's `label` holds.
            37 => (v.label, k.label) = (val as u32, mask as u32),
            // 9 bits of the 16 on the wire.
            39 => {
                let bits = u128::from(vsw_packet::wire::ipv6::exthdr::ALL);
                (v.ipv6_exthdr, k.ipv6_exthdr) = ((val & bits) as u16, (mask & bits) as u16)
            }
            31 => (v.nd_target, k.nd_target) = (val, mask),
            // The parts of the outermost MPLS entry, in the key's `label`.
            34 => mpls_part(&mut v, &mut k, val, Field::MplsLabel),
            35 => mpls_part(&mut v, &mut k, val, Field::MplsTc),
            36 => mpls_part(&mut v, &mut k, val, Field::MplsBos),
            MPLS_TTL => mpls_part(&mut v, &mut k, val, Field::MplsTtl),
            IP_TTL => (v.nw_ttl, k.nw_ttl) = (val as u8, 0xff),
            IP_FRAG => (v.nw_frag, k.nw_frag) = (val as u8, mask as u8 & 3),
            TCP_FLAGS | NX_TCP_FLAGS => {
                (v.tcp_flags, k.tcp_flags) = (val as u16, mask as u16 & 0xfff)
            }
            PKT_MARK => (v.pipeline.pkt_mark, k.pipeline.pkt_mark) = (val as u32, mask as u32),
            CONJ_ID => (v.pipeline.conj_id, k.pipeline.conj_id) = (val as u32, u32::MAX),
            // ct_state's 8 bits of the 32 on the wire.
            // Bits past the 8 states are none (Open vSwitch refuses them too).
            crate::oxm::CT_STATE if (val | mask) >> 8 != 0 => return Err(BadMatch::BadValue),
            crate::oxm::CT_STATE => (v.ct_state, k.ct_state) = (val as u8, mask as u8),
            crate::oxm::CT_ZONE => (v.ct_zone, k.ct_zone) = (val as u16, u16::MAX),
            crate::oxm::CT_MARK => (v.ct_mark, k.ct_mark) = (val as u32, mask as u32),
            crate::oxm::CT_LABEL => (v.ct_label, k.ct_label) = (val, mask),
            crate::oxm::CT_NW_PROTO => (v.ct_nw_proto, k.ct_nw_proto) = (val as u8, u8::MAX),
            crate::oxm::CT_NW_SRC => (v.ct_nw_src, k.ct_nw_src) = (val as u32, mask as u32),
            crate::oxm::CT_NW_DST => (v.ct_nw_dst, k.ct_nw_dst) = (val as u32, mask as u32),
            crate::oxm::CT_IPV6_SRC => (v.ct_ipv6_src, k.ct_ipv6_src) = (val, mask),
            crate::oxm::CT_IPV6_DST => (v.ct_ipv6_dst, k.ct_ipv6_dst) = (val, mask),
            crate::oxm::CT_TP_SRC => (v.ct_tp_src, k.ct_tp_src) = (val as u16, mask as u16),
            crate::oxm::CT_TP_DST => (v.ct_tp_dst, k.ct_tp_dst) = (val as u16, mask as u16),
            r if (REG0..REG0 + 16).contains(&r) => {
                let n = usize::from(r - REG0);
                (v.pipeline.regs[n], k.pipeline.regs[n]) = (val as u32, mask as u32);
            }
            r if (XREG0..XREG0 + 8).contains(&r) => {
                let n = usize::from(r - XREG0);
                v.pipeline.set_xreg(n, val as u64);
                k.pipeline.set_xreg(n, mask as u64);
            }
            r if (XXREG0..XXREG0 + 4).contains(&r) => {
                let n = usize::from(r - XXREG0);
                v.pipeline.set_xxreg(n, val);
                k.pipeline.set_xxreg(n, mask);
            }
            n if (NSH_FLAGS..=NSH_TTL).contains(&n) => nsh_part(&mut v, &mut k, n, val, mask)?,
            PACKET_TYPE => {
                (v.pipeline.packet_type, k.pipeline.packet_type) = (val as u32, u32::MAX);
                if let Some(t) = vsw_flow::packet_type::ethertype(val as u32) {
                    (v.dl_type, k.dl_type) = (t, 0xffff);
                }
            }
            _ => return Err(BadMatch::BadField),
        }
    }
    let matcher = Match::new(v, k);
    // OXM's prerequisites were checked when decoding; vsw's own (a field's value
    // it cannot take) here.
    vsw_flow::fields::check_match(&matcher).map_err(|_| BadMatch::BadPrereq)?;
    Ok(matcher)
}

/// Where an action list is: a flow's, or a packet-out's (which may also send the
/// packet through the tables, output to TABLE).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    Flow,
    PacketOut,
}

fn ipv4_of(v: &[u8]) -> Ipv4Addr {
    Ipv4Addr::from(num(v) as u32)
}

fn bytes<const N: usize>(v: &[u8]) -> Result<[u8; N], BadFlowMod> {
    v.try_into().map_err(|_| BadFlowMod::BadSetField)
}

/// A set-field's value that does not fit the field's bits (BAD_SET_ARGUMENT).
fn at_most(v: u128, max: u128) -> Result<u128, BadFlowMod> {
    if v > max {
        Err(BadFlowMod::BadSetArgument)
    } else {
        Ok(v)
    }
}

/// The field `load` and `move` know by an OXM field's number, if any.
fn subfield_of_oxm(id: u8) -> Option<Field> {
    let (class, number) = crate::oxm::wire_id(id);
    Field::by_header(class, number)
}

fn set_field_to_vsw(f: &OxmField) -> Result<VswAction, BadFlowMod> {
    let v = &f.value;
    let n = num(v);
    let w = VswAction::SetField;
    // A masked set-field (OpenFlow 1.5), or one of a field only the pipeline has,
    // is a load of the bits it sets.
    // OXM_OF_IN_PORT names the input port for a learn's spec to read, but a
    // set-field of it is refused, as Open vSwitch refuses it.
    let field = subfield_of_oxm(f.field).filter(|_| f.field != 0);
    if let Some(field) = field.filter(|g| f.mask.is_some() || g.is_pipelines()) {
        if !field.is_writable() {
            return Err(BadFlowMod::BadSetArgument);
        }
        let (value, mask) = value_mask(f);
        if f.mask.is_some() && num(v) & !mask != 0 {
            return Err(BadFlowMod::BadSetArgument);
        }
        return Ok(VswAction::Load(Load {
            field,
            value,
            mask,
            as_set_field: true,
        }));
    }
    if f.mask.is_some() {
        return Err(BadFlowMod::BadSetMask);
    }
    Ok(match f.field {
        3 => VswAction::SetDlDst(mac_of(v)),
        4 => VswAction::SetDlSrc(mac_of(v)),
        6 => VswAction::SetVlanVid(n as u16 & 0xfff),
        7 => VswAction::SetVlanPcp(at_most(n, 7)? as u8),
        8 => VswAction::SetNwTos((at_most(n, 63)? as u8) << 2),
        11 => VswAction::SetNwSrc(ipv4_of(v)),
        12 => VswAction::SetNwDst(ipv4_of(v)),
        13 | 15 | 17 => VswAction::SetTpSrc(n as u16),
        14 | 16 | 18 => VswAction::SetTpDst(n as u16),
        9 => w(FieldWrite::IpEcn(at_most(n, 3)? as u8)),
        19 => w(FieldWrite::Icmpv4Type(n as u8)),
        20 => w(FieldWrite::Icmpv4Code(n as u8)),
        21 => w(FieldWrite::ArpOp(n as u16)),
        22 => w(FieldWrite::ArpSpa(bytes(v)?)),
        23 => w(FieldWrite::ArpTpa(bytes(v)?)),
        24 => w(FieldWrite::ArpSha(mac_of(v))),
        25 => w(FieldWrite::ArpTha(mac_of(v))),
        26 => w(FieldWrite::Ipv6Src(bytes(v)?)),
        27 => w(FieldWrite::Ipv6Dst(bytes(v)?)),
        28 => w(FieldWrite::Ipv6Label(at_most(n, 0xfffff)? as u32)),
        29 => w(FieldWrite::Icmpv6Type(n as u8)),
        30 => w(FieldWrite::Icmpv6Code(n as u8)),
        31 => w(FieldWrite::NdTarget(bytes(v)?)),
        32 => w(FieldWrite::NdSll(mac_of(v))),
        33 => w(FieldWrite::NdTll(mac_of(v))),
        34 => VswAction::SetMplsLabel(at_most(n, 0xfffff)? as u32),
        35 => VswAction::SetMplsTc(at_most(n, 7)? as u8),
        37 => w(FieldWrite::PbbIsid(at_most(n, 0xff_ffff)? as u32)),
        MPLS_TTL => VswAction::SetMplsTtl(n as u8),
        38 => VswAction::SetTunnel(n as u64),
        TUN_IPV4_DST => VswAction::SetTunnelDst(ipv4_of(v)),
        TUN_METADATA0 => VswAction::SetTunnelMetadata(n as u32),
        IP_TTL => w(FieldWrite::NwTtl(n as u8)),
        NSH_FLAGS => w(FieldWrite::Nsh(NshField::Flags, n as u32)),
        NSH_TTL => w(FieldWrite::Nsh(NshField::Ttl, at_most(n, 0x3f)? as u32)),
        NSH_SPI => w(FieldWrite::Nsh(
            NshField::Spi,
            at_most(n, 0xff_ffff)? as u32,
        )),
        NSH_SI => w(FieldWrite::Nsh(NshField::Si, n as u32)),
        c if (NSH_C1..NSH_C1 + 4).contains(&c) => {
            w(FieldWrite::Nsh(NshField::Context(c - NSH_C1), n as u32))
        }
        // Fields no switch writes (the input port, the Ethernet type, the IP
        // protocol, what the packet's bytes say of it, a conjunction's answer):
        // refused as Open vSwitch refuses them.
        0 | 1 | 5 | 10 | 36 | TCP_FLAGS | NX_TCP_FLAGS | IP_FRAG | CONJ_ID | NSH_MDTYPE
        | NSH_NP => return Err(BadFlowMod::BadSetArgument),
        _ => return Err(BadFlowMod::BadSetField),
    })
}

fn action_to_vsw(a: &Action, place: Place) -> Result<VswAction, BadFlowMod> {
    Ok(match a {
        Action::Output { port, max_len } => match *port {
            p if p < OFPP_MAX => VswAction::Output(p),
            OFPP_IN_PORT => VswAction::InPort,
            OFPP_NORMAL => VswAction::Normal,
            OFPP_CONTROLLER => VswAction::Controller {
                max_len: *max_len,
                userdata: None,
                meter: None,
                pause: false,
            },
            OFPP_LOCAL => VswAction::Output(vsw_flow::LOCAL_PORT),
            OFPP_TABLE if place == Place::PacketOut => VswAction::Resubmit {
                port: None,
                table: Some(0),
            },
            // vsw's FLOOD is every port but the input, which is also what ALL
            // means without the input port; vsw does not flood back.
            OFPP_FLOOD | OFPP_ALL => VswAction::Flood,
            _ => return Err(BadFlowMod::BadOutPort),
        },
        Action::PopVlan => VswAction::StripVlan,
        Action::DecNwTtl => VswAction::DecTtl,
        Action::PushVlan(t @ (0x8100 | 0x88a8)) => VswAction::PushVlan(*t),
        Action::PushVlan(_) => return Err(BadFlowMod::BadArgument),
        Action::SetField(f) => set_field_to_vsw(f)?,
        Action::Group(g) if *g <= OFPG_MAX => VswAction::Group(*g),
        Action::Group(_) => return Err(BadFlowMod::BadOutGroup),
        Action::Meter(m) if (1..=vsw_flow::meter::MAX_METER_ID).contains(m) => VswAction::Meter(*m),
        Action::Meter(_) => return Err(BadFlowMod::UnknownMeter),
        // Accepted: vsw's ports have one queue each.
        Action::SetQueue(q) => VswAction::SetQueue(*q),
        Action::CopyTtlOut => VswAction::SetField(FieldWrite::CopyTtlOut),
        Action::CopyTtlIn => VswAction::SetField(FieldWrite::CopyTtlIn),
        Action::SetNwTtl(t) => VswAction::SetField(FieldWrite::NwTtl(*t)),
        Action::SetMplsTtl(t) => VswAction::SetMplsTtl(*t),
        Action::DecMplsTtl => VswAction::DecMplsTtl,
        Action::PushMpls(t @ (0x8847 | 0x8848)) => VswAction::PushMpls(*t),
        Action::PushMpls(_) => return Err(BadFlowMod::BadArgument),
        Action::PopMpls(t) => VswAction::PopMpls(*t),
        Action::PushPbb(t @ 0x88e7) => VswAction::PushPbb(*t),
        Action::PushPbb(_) => return Err(BadFlowMod::BadArgument),
        Action::PopPbb => VswAction::PopPbb,
        Action::SetMplsLabel(l) => VswAction::SetMplsLabel(at_most((*l).into(), 0xfffff)? as u32),
        Action::SetMplsTc(tc) => VswAction::SetMplsTc(at_most((*tc).into(), 7)? as u8),
        Action::Nx(nx) => nx_action_to_vsw(nx)?,
        // The same move as Nicira's.
        Action::CopyField(copy) => nx_action_to_vsw(&NxAction::RegMove(*copy))?,
        // A list of its own (`list_to_vsw`).
        Action::Clone(_) => return Err(BadFlowMod::BadArgument),
        Action::Ct(ct) => VswAction::Ct(Box::new(ct_to_vsw(ct)?)),
        // Only within a ct.
        Action::Nat(_) => return Err(BadFlowMod::BadArgument),
    })
}

/// [`ct_to_vsw`] of an `Action::Ct` (tests of the codec reach it so).
#[cfg(test)]
pub(crate) fn ct_to_vsw_for_tests(a: &Action) -> Result<vsw_flow::ct_action::CtAction, BadFlowMod> {
    match a {
        Action::Ct(ct) => ct_to_vsw(ct),
        _ => Err(BadFlowMod::BadArgument),
    }
}

/// A set-field within a ct (of `ct_mark` or `ct_label`, masked or not).
fn ct_exec_of(f: &OxmField) -> Result<vsw_flow::ct_action::CtExec, BadFlowMod> {
    use vsw_flow::ct_action::CtExec;
    let num = |b: &[u8]| b.iter().fold(0u128, |n, x| (n << 8) | u128::from(*x));
    let v = num(&f.value);
    match (f.field, f.value.len()) {
        (crate::oxm::CT_MARK, 4) => {
            let m = f.mask.as_deref().map_or(u128::from(u32::MAX), num);
            Ok(CtExec::Mark((v & m) as u32, m as u32))
        }
        (crate::oxm::CT_LABEL, 16) => {
            let m = f.mask.as_deref().map_or(u128::MAX, num);
            Ok(CtExec::Label(v & m, m))
        }
        _ => Err(BadFlowMod::BadArgument),
    }
}

/// NXAST_CT as vsw's `ct(…)`: its zone (a number, or an NXM subfield), its
/// table, its NAT and its `exec`'s set-fields of `ct_mark` and `ct_label`.
fn ct_to_vsw(
    w: &crate::nx_ct::CtWire<Action>,
) -> Result<vsw_flow::ct_action::CtAction, BadFlowMod> {
    use crate::nx_ct::{
        NX_CT_F_COMMIT, NX_CT_F_FORCE, NX_CT_RECIRC_NONE, NX_NAT_F_DST, NX_NAT_F_PERSISTENT,
        NX_NAT_F_PROTO_HASH, NX_NAT_F_PROTO_RANDOM, NX_NAT_F_SRC,
    };
    use vsw_flow::ct_action::{CtAction, CtExec, CtZone, NatAction, NatEnd};
    let zone = if w.zone_src == 0 {
        CtZone::Imm(w.zone)
    } else {
        let n_bits = u32::from(w.zone & 0x3f) + 1;
        CtZone::Field(nxm_subfield(w.zone_src, u32::from(w.zone >> 6), n_bits)?)
    };
    let mut ct = CtAction {
        commit: w.flags & NX_CT_F_COMMIT != 0,
        force: w.flags & NX_CT_F_FORCE != 0,
        table: (w.recirc_table != NX_CT_RECIRC_NONE).then_some(w.recirc_table),
        zone,
        nat: None,
        exec: Vec::new(),
        alg: w.alg,
    };
    for a in &w.actions {
        match a {
            Action::Nat(n) if ct.nat.is_none() => {
                // As Open vSwitch's parse_NAT and check_NAT refuse them.
                let both = NX_NAT_F_SRC | NX_NAT_F_DST;
                let ranged = |min: u128, max: Option<u128>| max.is_some_and(|m| m < min);
                if n.flags & both == both
                    || n.flags & (NX_NAT_F_PROTO_HASH | NX_NAT_F_PROTO_RANDOM)
                        == NX_NAT_F_PROTO_HASH | NX_NAT_F_PROTO_RANDOM
                    || n.ipv4.is_some_and(|(min, max)| {
                        min == 0 || ranged(min.into(), max.map(u128::from))
                    })
                    || n.ipv6.is_some_and(|(min, max)| ranged(min, max))
                    || n.ports
                        .is_some_and(|(min, max)| ranged(min.into(), max.map(u128::from)))
                    || (n.flags & both == 0
                        && (n.flags != 0 || n.ipv4.is_some() || n.ipv6.is_some()))
                {
                    return Err(BadFlowMod::BadArgument);
                }
                let end = if n.flags & NX_NAT_F_SRC != 0 {
                    Some(NatEnd::Src)
                } else if n.flags & NX_NAT_F_DST != 0 {
                    Some(NatEnd::Dst)
                } else {
                    None
                };
                let v4 = |a: u32| std::net::IpAddr::V4(a.into());
                let v6 = |a: u128| std::net::IpAddr::V6(a.into());
                let addrs = match (n.ipv4, n.ipv6) {
                    (Some((min, max)), None) => Some((v4(min), v4(max.unwrap_or(min)))),
                    (None, Some((min, max))) => Some((v6(min), v6(max.unwrap_or(min)))),
                    _ => None,
                };
                ct.nat = Some(NatAction {
                    end,
                    addrs,
                    ports: n.ports.map(|(lo, hi)| (lo, hi.unwrap_or(lo))),
                    persistent: n.flags & NX_NAT_F_PERSISTENT != 0,
                    hash: n.flags & NX_NAT_F_PROTO_HASH != 0,
                    random: n.flags & NX_NAT_F_PROTO_RANDOM != 0,
                });
            }
            Action::SetField(f) | Action::Nx(NxAction::RegLoad2(f)) => ct.exec.push(ct_exec_of(f)?),
            // 1.0's way (`load:V->NXM_NX_CT_MARK[…]`).
            Action::Nx(NxAction::RegLoad {
                ofs_nbits,
                dst,
                value,
            }) => {
                let (class, number, _, _) = crate::nx_action::nxm_header_parts(*dst);
                let (ofs, n_bits) = (u32::from(ofs_nbits >> 6), u32::from(ofs_nbits & 0x3f) + 1);
                let field = crate::oxm::field_of_wire(class, number);
                let width = match field {
                    Some(crate::oxm::CT_MARK) => 32,
                    Some(crate::oxm::CT_LABEL) => 128,
                    _ => return Err(BadFlowMod::BadArgument),
                };
                // Within the field before any shift (ofs + n_bits ≤ 128 keeps both
                // shifts below 128).
                if ofs + n_bits > width {
                    return Err(BadFlowMod::BadArgument);
                }
                let bits = if n_bits >= 128 {
                    u128::MAX
                } else {
                    (1u128 << n_bits) - 1
                };
                let (v, m) = ((u128::from(*value) & bits) << ofs, bits << ofs);
                ct.exec.push(if width == 32 {
                    CtExec::Mark(v as u32, m as u32)
                } else {
                    CtExec::Label(v, m)
                });
            }
            // Open vSwitch takes only these within a ct.
            _ => return Err(BadFlowMod::BadArgument),
        }
    }
    Ok(ct)
}

/// OFPR_ACTION: a packet-in an action asked for.
const OFPR_ACTION: u8 = 1;

/// A `learn` as vsw says it: its fields named, its table one vsw has.
fn learn_to_vsw(l: &LearnAction) -> Result<vsw_flow::Learn, BadFlowMod> {
    use vsw_flow::{LearnSource, LearnSpec};
    let writable = |s: Subfield| {
        if s.field.is_writable() {
            Ok(s)
        } else {
            Err(BadFlowMod::BadSetArgument)
        }
    };
    let mut specs = Vec::with_capacity(l.specs.len());
    for s in &l.specs {
        let n = u32::from(s.n_bits);
        let src = match s.src {
            LearnSrc::Field { header, ofs } => {
                LearnSource::Field(nxm_subfield(header, u32::from(ofs), n)?)
            }
            LearnSrc::Immediate(v) => LearnSource::Value(v & vsw_flow::subfield::ones(n)),
        };
        specs.push(match (s.dst, src) {
            (LearnDst::Match { header, ofs }, src) => LearnSpec::Match {
                dst: nxm_subfield(header, u32::from(ofs), n)?,
                src,
            },
            (LearnDst::Load { header, ofs }, src) => LearnSpec::Load {
                dst: writable(nxm_subfield(header, u32::from(ofs), n)?)?,
                src,
            },
            (LearnDst::Output, LearnSource::Field(src)) => LearnSpec::Output { src },
            (LearnDst::Output, LearnSource::Value(_)) => return Err(BadFlowMod::BadArgument),
        });
    }
    let result_dst = match l.result_dst {
        Some((header, ofs)) => Some(writable(nxm_subfield(header, u32::from(ofs), 1)?)?),
        None => None,
    };
    if l.table > vsw_flow::MAX_TABLE {
        return Err(BadFlowMod::BadArgument);
    }
    Ok(vsw_flow::Learn {
        table: l.table,
        priority: l.priority,
        idle_timeout: l.idle_timeout,
        hard_timeout: l.hard_timeout,
        fin_idle_timeout: l.fin_idle_timeout,
        fin_hard_timeout: l.fin_hard_timeout,
        cookie: l.cookie,
        send_flow_rem: l.flags & NX_LEARN_F_SEND_FLOW_REM != 0,
        delete_learned: l.flags & NX_LEARN_F_DELETE_LEARNED != 0,
        limit: l.limit,
        result_dst,
        specs,
        learn2: l.learn2,
    })
}

/// A Nicira action vsw carries out (a note has none: `list_to_vsw` leaves it out).
fn nx_action_to_vsw(a: &NxAction) -> Result<VswAction, BadFlowMod> {
    let port = |p: u16| -> Result<Option<u32>, BadFlowMod> {
        match port_from_16(p) {
            OFPP_IN_PORT => Ok(None),
            OFPP_LOCAL => Ok(Some(vsw_flow::LOCAL_PORT)),
            p if p < OFPP_MAX => Ok(Some(p)),
            _ => Err(BadFlowMod::BadOutPort),
        }
    };
    let table = |t: u8| -> Result<Option<u8>, BadFlowMod> {
        match t {
            NX_TABLE_CURRENT => Ok(None),
            t if t <= vsw_flow::MAX_TABLE => Ok(Some(t)),
            _ => Err(BadFlowMod::BadArgument),
        }
    };
    Ok(match *a {
        NxAction::Learn(ref l) => VswAction::Learn(std::sync::Arc::new(learn_to_vsw(l)?)),
        NxAction::OutputReg {
            ofs_nbits,
            src,
            max_len,
            ..
        } => VswAction::OutputReg {
            src: nxm_subfield(
                src,
                u32::from(ofs_nbits >> 6),
                u32::from(ofs_nbits & 0x3f) + 1,
            )?,
            max_len,
        },
        NxAction::Exit => VswAction::Exit,
        NxAction::PushMpls(t @ (0x8847 | 0x8848)) => VswAction::PushMpls(t),
        NxAction::PushMpls(_) => return Err(BadFlowMod::BadArgument),
        NxAction::PopMpls(t) => VswAction::PopMpls(t),
        NxAction::SetMplsTtl(t) => VswAction::SetMplsTtl(t),
        NxAction::DecMplsTtl => VswAction::DecMplsTtl,
        NxAction::Encap {
            packet_type: PT_ETH,
            md_type: None,
            ref tlvs,
        } if tlvs.is_empty() => VswAction::Encap(Encap::Ethernet),
        NxAction::Encap {
            packet_type: PT_NSH,
            md_type,
            ref tlvs,
        } if md_type.is_none_or(|t| matches!(t, 1 | 2)) => VswAction::Encap(Encap::Nsh {
            md_type,
            tlvs: (!tlvs.is_empty()).then(|| tlvs.as_slice().into()),
        }),
        NxAction::Encap {
            packet_type: pt @ (PT_MPLS | PT_MPLS_MC),
            md_type: None,
            ref tlvs,
        } if tlvs.is_empty() => VswAction::Encap(Encap::Mpls {
            ethertype: pt as u16,
        }),
        NxAction::Encap { .. } => return Err(BadFlowMod::BadArgument),
        NxAction::Decap(PT_USE_NEXT_PROTO) => VswAction::Decap(None),
        NxAction::Decap(t) if t >> 16 < 5 => {
            VswAction::Decap(Some(vsw_flow::packet_type::parts(t)))
        }
        NxAction::Decap(_) => return Err(BadFlowMod::BadArgument),
        NxAction::DecNshTtl => VswAction::DecNshTtl,
        NxAction::CtClear => VswAction::CtClear,
        NxAction::SetMplsLabel(l) => VswAction::SetMplsLabel(at_most(l.into(), 0xfffff)? as u32),
        NxAction::SetMplsTc(tc) => VswAction::SetMplsTc(at_most(tc.into(), 7)? as u8),
        NxAction::Sample {
            probability,
            collector_set_id,
            obs_domain_id,
            obs_point_id,
            sampling_port,
            direction,
            ..
        } => VswAction::Sample(vsw_flow::action::Sample {
            probability,
            collector_set_id,
            obs_domain_id,
            obs_point_id,
            // OpenFlow 1.0's OFPP_NONE: no port; otherwise a port packets come in
            // on (the same as written in text: no other reserved port).
            sampling_port: match sampling_port {
                0xffff => None,
                p => Some(match port_from_16(p) {
                    OFPP_LOCAL => vsw_flow::LOCAL_PORT,
                    p if p >= 0xffff_ff00 => return Err(BadFlowMod::BadArgument),
                    p => p,
                }),
            },
            direction,
        }),
        NxAction::Multipath {
            fields,
            basis,
            algorithm,
            max_link,
            arg,
            ofs_nbits,
            dst,
        } => {
            use vsw_flow::member_bundle::HashFields;
            use vsw_flow::multipath::{Multipath, MultipathAlgorithm};
            let n_bits = u32::from(ofs_nbits & 0x3f) + 1;
            let mp = Multipath {
                fields: HashFields::from_wire(fields).ok_or(BadFlowMod::BadArgument)?,
                basis,
                algorithm: MultipathAlgorithm::from_wire(algorithm)
                    .ok_or(BadFlowMod::BadArgument)?,
                n_links: u32::from(max_link) + 1,
                arg,
                dst: nxm_subfield(dst, u32::from(ofs_nbits >> 6), n_bits)?,
            };
            mp.check().map_err(|_| BadFlowMod::BadArgument)?;
            VswAction::Multipath(std::sync::Arc::new(mp))
        }
        NxAction::Bundle {
            load,
            algorithm,
            fields,
            basis,
            ofs_nbits,
            dst,
            ref members,
        } => {
            use vsw_flow::member_bundle::{BundleAlgorithm, HashFields, MemberBundle};
            let dst = if load {
                let n_bits = u32::from(ofs_nbits & 0x3f) + 1;
                let d = nxm_subfield(dst, u32::from(ofs_nbits >> 6), n_bits)?;
                if d.n_bits < 16 || !d.field.is_writable() {
                    return Err(BadFlowMod::BadArgument);
                }
                Some(d)
            } else {
                None
            };
            VswAction::Bundle(std::sync::Arc::new(MemberBundle {
                fields: HashFields::from_wire(fields).ok_or(BadFlowMod::BadArgument)?,
                basis,
                algorithm: match algorithm {
                    0 => BundleAlgorithm::ActiveBackup,
                    1 => BundleAlgorithm::Hrw,
                    _ => return Err(BadFlowMod::BadArgument),
                },
                dst,
                // As Open vSwitch checks an output port: one below OFPP_MAX or a
                // reserved one (CONTROLLER refused when decoding).
                members: members
                    .iter()
                    .map(|p| match port_from_16(*p) {
                        OFPP_LOCAL => Ok(vsw_flow::LOCAL_PORT),
                        p if (0xffff_ff00..0xffff_fff8).contains(&p) => Err(BadFlowMod::BadOutPort),
                        p => Ok(p),
                    })
                    .collect::<Result<_, _>>()?,
            }))
        }
        NxAction::PopQueue => VswAction::PopQueue,
        NxAction::FinTimeout { idle, hard } => VswAction::FinTimeout { idle, hard },
        // The input port is not one a cut packet goes to (Open vSwitch's sends
        // none there either).
        NxAction::OutputTrunc { port: p, max_len } => VswAction::OutputTrunc {
            port: port(p)?.ok_or(BadFlowMod::BadOutPort)?,
            max_len,
        },
        NxAction::Resubmit { in_port } => VswAction::Resubmit {
            port: port(in_port)?,
            table: None,
        },
        NxAction::ResubmitTable { in_port, table: t } => VswAction::Resubmit {
            port: port(in_port)?,
            table: table(t)?,
        },
        NxAction::DecTtl => VswAction::DecTtl,
        // No ids (OVN's `dec_ttl()`): plain `dec_ttl`, as vsw-flow reads it too.
        NxAction::DecTtlIds(ref ids) if ids.is_empty() => VswAction::DecTtl,
        NxAction::DecTtlIds(ref ids) => VswAction::DecTtlIds(ids.as_slice().into()),
        NxAction::CheckPktLarger {
            pkt_len,
            offset,
            dst,
        } => {
            let dst = nxm_subfield(dst, u32::from(offset), 1)?;
            if !dst.field.is_writable() {
                return Err(BadFlowMod::BadSetArgument);
            }
            VswAction::CheckPktLarger { len: pkt_len, dst }
        }
        // vsw's packet-ins are for every controller that asks for them, with the
        // reason "action": another reason or one controller's id is refused rather
        // than kept in the echo and not done.
        NxAction::Controller {
            max_len,
            controller_id: 0,
            reason: OFPR_ACTION,
        } => VswAction::Controller {
            max_len,
            userdata: None,
            meter: None,
            pause: false,
        },
        NxAction::Controller { .. } => return Err(BadFlowMod::BadArgument),
        // Only what vsw carries out: for every controller, with the reason
        // "action", paused or not; a meter of the packet-ins (NX_CTLR_NO_METER:
        // none).
        NxAction::Controller2 {
            max_len,
            controller_id: None | Some(0),
            reason: None | Some(OFPR_ACTION),
            ref userdata,
            pause,
            meter_id,
        } => VswAction::Controller {
            pause,
            max_len: max_len.unwrap_or(vsw_flow::action::CONTROLLER_NO_BUFFER),
            userdata: userdata.as_deref().map(std::sync::Arc::from),
            meter: match meter_id {
                None | Some(u32::MAX) => None,
                Some(m) if (1..=vsw_flow::meter::MAX_METER_ID).contains(&m) => Some(m),
                Some(_) => return Err(BadFlowMod::UnknownMeter),
            },
        },
        NxAction::Controller2 { .. } => return Err(BadFlowMod::BadArgument),
        NxAction::Note(_) => return Err(BadFlowMod::BadExperimenterType),
        NxAction::RegLoad {
            ofs_nbits,
            dst,
            value,
        } => {
            let n_bits = u32::from(ofs_nbits & 0x3f) + 1;
            let dst = nxm_subfield(dst, u32::from(ofs_nbits >> 6), n_bits)?;
            if !dst.field.is_writable() || (n_bits < 64 && value >> n_bits != 0) {
                return Err(BadFlowMod::BadArgument);
            }
            VswAction::Load(Load {
                field: dst.field,
                value: u128::from(value) << dst.ofs,
                mask: dst.mask(),
                as_set_field: false,
            })
        }
        NxAction::RegLoad2(ref f) => set_field_to_vsw(f)?,
        NxAction::RegMove(FieldCopy {
            n_bits,
            src_ofs,
            dst_ofs,
            src,
            dst,
        }) => {
            let n = u32::from(n_bits);
            let src = nxm_subfield(src, u32::from(src_ofs), n)?;
            let dst = nxm_subfield(dst, u32::from(dst_ofs), n)?;
            if !dst.field.is_writable() {
                return Err(BadFlowMod::BadArgument);
            }
            VswAction::Move { src, dst }
        }
        // The decoder checked 2 <= n <= 64 and clause < n.
        NxAction::Conjunction {
            clause,
            n_clauses,
            id,
        } => VswAction::Conjunction {
            id,
            clause: clause + 1,
            n_clauses,
        },
        NxAction::Stack {
            push,
            ofs,
            field,
            n_bits,
        } => {
            let s = nxm_subfield(field, u32::from(ofs), u32::from(n_bits))?;
            if push {
                VswAction::StackPush(s)
            } else if s.field.is_writable() {
                VswAction::StackPop(s)
            } else {
                return Err(BadFlowMod::BadArgument);
            }
        }
    })
}

/// The bits an NXM header (unmasked, of its field's length) and a range name. An
/// OXM header (os-ken names fields so) has the OXM field's own length:
/// OXM_OF_IN_PORT's 32 bits are NXM_OF_IN_PORT's 16 and more.
fn nxm_subfield(header: u32, ofs: u32, n_bits: u32) -> Result<Subfield, BadFlowMod> {
    let (class, number, masked, len) = nxm_header_parts(header);
    let oxm_len = (class == crate::oxm::OFPXMC_OPENFLOW_BASIC)
        .then(|| crate::oxm::field_of_wire(class, number).and_then(crate::oxm::field_def))
        .flatten()
        .map(|d| d.len);
    let field = Field::by_header(class, number)
        .filter(|f| !masked && oxm_len.map_or(f.info().header.2 == len, |l| l == len))
        .ok_or(BadFlowMod::BadArgument)?;
    Subfield::new(field, ofs, n_bits).ok_or(BadFlowMod::BadArgument)
}

fn list_to_vsw(actions: &[Action], place: Place) -> Result<Vec<VswAction>, BadFlowMod> {
    let mut out = Vec::with_capacity(actions.len());
    for a in actions {
        match a {
            // A note is the controller's own: kept with the flow (as written),
            // nothing to carry out.
            Action::Nx(NxAction::Note(_)) => {}
            // vsw's clone counts the actions after it that it holds.
            Action::Clone(inner) => {
                let inner = list_to_vsw(inner, place)?;
                let n = u8::try_from(inner.len()).map_err(|_| BadFlowMod::BadArgument)?;
                out.push(VswAction::Clone(n));
                out.extend(inner);
            }
            a => out.push(action_to_vsw(a, place)?),
        }
    }
    Ok(out)
}

/// A flow-mod that adds or modifies may name a packet the switch buffered, to run
/// through the new flow; vsw buffers none (a packet-in carries the whole packet),
/// so such a flow-mod is refused whole, before it changes anything.
pub fn unbuffered(fm: &FlowMod) -> Result<(), BadFlowMod> {
    match fm.command {
        Command::Delete | Command::DeleteStrict => Ok(()),
        _ if fm.buffer_id == OFP_NO_BUFFER => Ok(()),
        _ => Err(BadFlowMod::BufferUnknown),
    }
}

/// The instructions as vsw's action list: the meter first, the applied actions,
/// clear-actions, the written ones as a `write_actions` block, write-metadata, then
/// goto-table (the spec's order); `drop` when there are none.
pub fn instructions_to_vsw(instructions: &[Instruction]) -> Result<Vec<VswAction>, BadFlowMod> {
    let mut out = Vec::new();
    if let Some(m) = instructions.iter().find_map(|i| match i {
        Instruction::Meter(m) => Some(*m),
        _ => None,
    }) {
        out.push(action_to_vsw(&Action::Meter(m), Place::Flow)?);
    }
    for i in instructions {
        if let Instruction::ApplyActions(list) = i {
            out.extend(list_to_vsw(list, Place::Flow)?);
        }
    }
    if instructions.contains(&Instruction::ClearActions) {
        out.push(VswAction::ClearActions);
    }
    if let Some(w) = instructions.iter().find_map(|i| match i {
        Instruction::WriteActions(w) => Some(w),
        _ => None,
    }) {
        let written = list_to_vsw(w, Place::Flow)?;
        // An action set holds at most one action of each kind: never 256.
        let n = u8::try_from(written.len()).map_err(|_| BadFlowMod::BadActionLen)?;
        out.push(VswAction::WriteActions(n));
        out.extend(written);
    }
    if let Some((value, mask)) = instructions.iter().find_map(|i| match i {
        Instruction::WriteMetadata { metadata, mask } => Some((*metadata, *mask)),
        _ => None,
    }) {
        out.push(VswAction::WriteMetadata {
            value: value & mask,
            mask,
        });
    }
    if let Some(t) = instructions.iter().find_map(|i| match i {
        Instruction::GotoTable(t) => Some(*t),
        _ => None,
    }) {
        if t > vsw_flow::MAX_TABLE {
            return Err(BadFlowMod::BadGotoTable);
        }
        out.push(VswAction::GotoTable(t));
    }
    if out.is_empty() {
        out.push(VswAction::Drop);
    }
    Ok(out)
}

/// The OpenFlow error for a flow vsw-flow's checks refused.
fn refusal(e: FlowSyntaxError) -> BadFlowMod {
    match e {
        FlowSyntaxError::ActionPrerequisite { .. } => BadFlowMod::MatchInconsistent,
        FlowSyntaxError::Prerequisite { .. } => BadFlowMod::Match(BadMatch::BadPrereq),
        FlowSyntaxError::GotoBackwards { .. } => BadFlowMod::BadGotoTable,
        // What OpenFlow's instructions can still say that vsw cannot carry out (a
        // meter in an action set, say).
        _ => BadFlowMod::UnsupportedInstruction,
    }
}

/// The flow an add installs.
pub fn flow_spec(fm: &FlowMod) -> Result<FlowSpec, BadFlowMod> {
    unbuffered(fm)?;
    if usize::from(fm.table_id) > usize::from(vsw_flow::MAX_TABLE) {
        return Err(BadFlowMod::BadTableId);
    }
    let spec = FlowSpec {
        table: fm.table_id,
        priority: fm.priority,
        matcher: match_to_vsw(&fm.matcher)?,
        actions: instructions_to_vsw(&fm.instructions)?,
        idle_timeout: fm.idle_timeout,
        hard_timeout: fm.hard_timeout,
        send_flow_rem: fm.flags & OFPFF_SEND_FLOW_REM != 0,
        cookie: fm.cookie,
        as_written: AsWritten {
            matcher: written_match(fm),
            actions: written_instructions(fm),
        },
    };
    vsw_flow::check_flow(&spec).map_err(refusal)?;
    Ok(spec)
}

/// A modify's new actions, checked as a flow's without a match (each selected
/// rule's match checks them again when they replace its actions).
pub fn modify_actions(fm: &FlowMod) -> Result<Vec<VswAction>, BadFlowMod> {
    unbuffered(fm)?;
    let actions = instructions_to_vsw(&fm.instructions)?;
    vsw_flow::check_actions(&actions, None).map_err(refusal)?;
    Ok(actions)
}

/// What a delete, a modify or a statistics request selects by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SelectionParts<'a> {
    /// 255 (OFPTT_ALL): every table.
    pub table_id: u8,
    /// Strict: this priority and exactly the match.
    pub strict_priority: Option<u16>,
    pub cookie: u64,
    pub cookie_mask: u64,
    /// OFPP_ANY: any.
    pub out_port: u32,
    /// OFPG_ANY: any.
    pub out_group: u32,
    pub matcher: &'a OxmMatch,
}

impl SelectionParts<'_> {
    /// A flow-mod's (delete, modify).
    pub fn of_flow_mod(fm: &FlowMod, strict: bool) -> SelectionParts<'_> {
        SelectionParts {
            table_id: fm.table_id,
            strict_priority: strict.then_some(fm.priority),
            cookie: fm.cookie,
            cookie_mask: fm.cookie_mask,
            out_port: fm.out_port,
            out_group: fm.out_group,
            matcher: &fm.matcher,
        }
    }
}

/// The rules a request selects. An out_port that is a reserved port selects by
/// nothing vsw can name: refused.
pub fn selection(sel: &SelectionParts) -> Result<Selection, BadFlowMod> {
    Ok(Selection {
        table: (sel.table_id != 0xff).then_some(sel.table_id),
        priority: sel.strict_priority,
        matcher: match_to_vsw(sel.matcher)?,
        cookie: (sel.cookie_mask != 0).then_some((sel.cookie, sel.cookie_mask)),
        out_port: match sel.out_port {
            OFPP_ANY => None,
            p if p < OFPP_MAX || p == OFPP_LOCAL => Some(to_vsw_port(p)),
            _ => return Err(BadFlowMod::BadOutPort),
        },
        out_group: (sel.out_group != OFPG_ANY).then_some(sel.out_group),
    })
}

/// A group-mod's group (weights only in select groups, as OpenFlow has them;
/// watches where there are).
pub fn group_spec(gm: &GroupMod) -> Result<GroupSpec, BadGroupMod> {
    let kind = match gm.kind {
        OFPGT_ALL => GroupType::All,
        OFPGT_SELECT => GroupType::Select,
        OFPGT_INDIRECT => GroupType::Indirect,
        OFPGT_FF => GroupType::FastFailover,
        _ => return Err(BadGroupMod::BadType),
    };
    if gm.group_id > OFPG_MAX {
        return Err(BadGroupMod::Invalid);
    }
    let mut buckets = Vec::with_capacity(gm.buckets.len());
    for b in &gm.buckets {
        let weight = match kind {
            GroupType::Select => b.weight,
            _ if b.weight != 0 => return Err(BadGroupMod::BadBucket),
            // vsw's other groups give every bucket the weight 1.
            _ => 1,
        };
        let watch_port = match b.watch_port {
            OFPP_ANY => None,
            p if p < OFPP_MAX || p == OFPP_LOCAL => Some(to_vsw_port(p)),
            _ => return Err(BadGroupMod::BadWatch),
        };
        let watch_group = match b.watch_group {
            OFPG_ANY => None,
            g if g <= OFPG_MAX => Some(g),
            _ => return Err(BadGroupMod::BadWatch),
        };
        let mut actions = list_to_vsw(&b.actions, Place::Flow)?;
        if actions.is_empty() {
            actions.push(VswAction::Drop);
        }
        buckets.push(Bucket {
            weight,
            watch_port,
            watch_group,
            actions,
        });
    }
    let spec = GroupSpec {
        id: gm.group_id,
        kind,
        buckets,
        as_written: written_buckets(gm),
    };
    spec.check().map_err(|_| match kind {
        GroupType::FastFailover => BadGroupMod::BadWatch,
        _ => BadGroupMod::BadBucket,
    })?;
    Ok(spec)
}

/// A meter-mod's meter.
pub fn meter_spec(mm: &MeterMod) -> Result<MeterSpec, BadMeterMod> {
    if !(1..=vsw_flow::meter::MAX_METER_ID).contains(&mm.meter_id) {
        return Err(BadMeterMod::Invalid);
    }
    let burst = mm.flags & OFPMF_BURST != 0;
    let mut bands = Vec::with_capacity(mm.bands.len());
    for b in &mm.bands {
        if b.rate == 0 {
            return Err(BadMeterMod::BadRate);
        }
        if !burst && b.burst_size != 0 {
            return Err(BadMeterMod::BadBurst);
        }
        let kind = match b.kind {
            OFPMBT_DROP => BandType::Drop,
            OFPMBT_DSCP_REMARK if (1..=3).contains(&b.prec_level) => {
                BandType::DscpRemark(b.prec_level)
            }
            OFPMBT_DSCP_REMARK => return Err(BadMeterMod::BadBandValue),
            _ => return Err(BadMeterMod::BadBand),
        };
        bands.push(Band {
            kind,
            rate: b.rate,
            burst_size: b.burst_size,
        });
    }
    if bands.is_empty() {
        return Err(BadMeterMod::BadBand);
    }
    if bands.len() > vsw_flow::meter::MAX_BANDS {
        return Err(BadMeterMod::OutOfBands);
    }
    let spec = MeterSpec {
        id: mm.meter_id,
        pktps: mm.flags & OFPMF_PKTPS != 0,
        burst,
        stats: mm.flags & OFPMF_STATS != 0,
        bands,
    };
    spec.check().map_err(|_| BadMeterMod::BadBand)?;
    Ok(spec)
}

/// A packet-out's actions (`drop` when there are none), checked as a flow's are
/// against the packet's own headers by the switch.
pub fn packet_out_actions(actions: &[Action]) -> Result<Vec<VswAction>, BadFlowMod> {
    let mut out = list_to_vsw(actions, Place::PacketOut)?;
    if out.is_empty() {
        out.push(VswAction::Drop);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::from_vsw::{instructions_from_actions, oxm_from_match};
    use crate::test_support::{field, flow_mod};

    fn matches() -> Vec<Vec<OxmField>> {
        let ip = field(5, &[8, 0], None);
        let ip6 = field(5, &[0x86, 0xdd], None);
        let arp = field(5, &[8, 6], None);
        let p = |n: u8| field(10, &[n], None);
        let v6: Vec<u8> = (1..=16).collect();
        vec![
            vec![],
            vec![field(0, &[0, 0, 0, 3], None)],
            vec![field(0, &[0xff, 0xff, 0xff, 0xfe], None)],
            vec![field(
                2,
                &[0, 0, 0, 0, 0, 0, 1, 2],
                Some(&[0, 0, 0, 0, 0, 0, 0xff, 0]),
            )],
            vec![
                field(3, &[2, 0, 0, 0, 0, 1], None),
                field(4, &[2, 0, 0, 0, 0, 2], Some(&[0xff, 0xff, 0xff, 0, 0, 0])),
            ],
            vec![field(6, &[0x10, 10], None)],
            vec![
                field(6, &[0x10, 10], Some(&[0x1f, 0xff])),
                field(7, &[3], None),
            ],
            vec![field(6, &[0, 0], None)],
            vec![ip.clone(), field(8, &[46], None), field(9, &[2], None)],
            vec![
                ip.clone(),
                p(6),
                field(11, &[198, 18, 0, 1], None),
                field(12, &[198, 18, 0, 0], Some(&[255, 255, 0, 0])),
                field(13, &[0, 80], None),
                field(14, &[1, 0], Some(&[0xff, 0])),
            ],
            vec![
                ip.clone(),
                p(17),
                field(15, &[0, 53], None),
                field(16, &[0, 54], None),
            ],
            vec![
                ip.clone(),
                p(132),
                field(17, &[0, 1], None),
                field(18, &[0, 2], None),
            ],
            vec![
                ip.clone(),
                p(1),
                field(19, &[8], None),
                field(20, &[0], None),
            ],
            vec![
                arp.clone(),
                field(21, &[0, 2], None),
                field(22, &[198, 18, 0, 1], None),
                field(23, &[198, 18, 0, 2], Some(&[255, 255, 255, 0])),
                field(24, &[2, 0, 0, 0, 0, 3], None),
                field(25, &[2, 0, 0, 0, 0, 4], None),
            ],
            vec![
                ip6.clone(),
                field(26, &v6, None),
                field(27, &v6, Some(&[0xff; 16])),
                field(28, &[0, 1, 2, 3], None),
            ],
            vec![
                ip6.clone(),
                p(58),
                field(29, &[135], None),
                field(30, &[0], None),
                field(31, &v6, None),
                field(32, &[2, 0, 0, 0, 0, 5], None),
            ],
            vec![
                ip6.clone(),
                p(58),
                field(29, &[136], None),
                field(33, &[2, 0, 0, 0, 0, 6], None),
            ],
            vec![ip6.clone(), field(39, &[0, 0x44], None)],
            vec![ip6.clone(), field(39, &[0, 0x40], Some(&[1, 0xf0]))],
            vec![
                field(5, &[0x88, 0xe7], None),
                field(37, &[0, 0, 0x60], Some(&[0, 0, 0xf0])),
            ],
            vec![
                field(38, &[0, 0, 0, 0, 0, 0, 0x12, 0x34], None),
                field(TUN_IPV4_SRC, &[198, 18, 0, 1], None),
                field(TUN_IPV4_DST, &[198, 18, 0, 2], Some(&[255, 255, 255, 0])),
                field(TUN_METADATA0, &[0, 0, 0, 7], None),
                field(TUN_FLAGS, &[0, 1], None),
            ],
        ]
    }

    fn actions() -> Vec<Vec<Instruction>> {
        let out = |port| Action::Output { port, max_len: 0 };
        let set = |f: u8, v: &[u8]| Action::SetField(field(f, v, None));
        vec![
            vec![],
            vec![Instruction::ApplyActions(vec![
                out(2),
                out(OFPP_IN_PORT),
                out(OFPP_NORMAL),
                out(OFPP_FLOOD),
                out(OFPP_ALL),
                out(OFPP_LOCAL),
                Action::Output {
                    port: OFPP_CONTROLLER,
                    max_len: 128,
                },
            ])],
            vec![
                Instruction::Meter(3),
                Instruction::ApplyActions(vec![
                    Action::Group(4),
                    Action::SetQueue(1),
                    Action::PushVlan(0x8100),
                    set(6, &[0x10, 5]),
                    set(7, &[3]),
                    Action::PopVlan,
                ]),
                Instruction::GotoTable(5),
            ],
            vec![Instruction::ApplyActions(vec![
                Action::PushPbb(0x88e7),
                Action::PushPbb(0x88e7),
                out(2),
            ])],
            vec![Instruction::ApplyActions(vec![
                set(3, &[2, 0, 0, 0, 0, 9]),
                set(4, &[2, 0, 0, 0, 0, 8]),
                set(38, &[0, 0, 0, 0, 0, 0, 0, 9]),
                set(TUN_IPV4_DST, &[198, 18, 1, 1]),
                set(TUN_METADATA0, &[0, 0, 1, 2]),
            ])],
            vec![
                Instruction::ClearActions,
                Instruction::WriteActions(vec![out(3), Action::Group(2)]),
                Instruction::WriteMetadata {
                    metadata: 0xff0f,
                    mask: 0xff00,
                },
            ],
        ]
    }

    /// Every match and action vsw takes from OpenFlow reads back as it went in: as
    /// OpenFlow (decoded again from what flow stats echo), and as vsw's text (what
    /// `vswctl dump-flows` prints, added again).
    #[test]
    fn every_flow_comes_back_as_it_went_in() {
        let ports = |_: &str| None;
        let mut n = 0;
        for m in matches() {
            for i in actions() {
                let fm = flow_mod(m.clone(), i.clone());
                let spec = flow_spec(&fm).unwrap_or_else(|e| panic!("{fm:?}: {e}"));
                let echoed = OxmMatch {
                    fields: oxm_from_match(&spec.matcher).fields,
                };
                assert_eq!(match_to_vsw(&echoed), Ok(spec.matcher), "{fm:?}");
                let again = instructions_to_vsw(&instructions_from_actions(&spec.actions));
                assert_eq!(again, Ok(spec.actions.clone()), "{fm:?}");
                let text = vsw_flow::syntax::format_flow(&spec);
                assert_eq!(
                    vsw_flow::parse_flow(&text, &ports),
                    Ok(spec.clone()),
                    "{text}"
                );
                let parts = SelectionParts::of_flow_mod(&fm, true);
                let sel = selection(&parts).unwrap();
                assert_eq!(
                    (sel.table, sel.priority, sel.matcher),
                    (Some(1), Some(100), spec.matcher)
                );
                n += 1;
            }
        }
        assert_eq!(n, matches().len() * actions().len());
    }

    /// Every set-field vsw writes, and the TTL actions, come back as they went in.
    #[test]
    fn every_writable_field_comes_back_as_it_went_in() {
        let v6: Vec<u8> = (1..=16).collect();
        let mac = vec![2, 0, 0, 0, 0, 7];
        let set = |f: u8, v: Vec<u8>| Action::SetField(field(f, &v, None));
        let cases: Vec<(Vec<OxmField>, Vec<Action>)> = vec![
            (
                vec![field(5, &[0x86, 0xdd], None)],
                vec![
                    set(26, v6.clone()),
                    set(27, v6.clone()),
                    set(28, vec![0, 1, 0x23, 0x45]),
                    set(9, vec![2]),
                    Action::SetNwTtl(9),
                    Action::CopyTtlOut,
                    Action::CopyTtlIn,
                    Action::DecNwTtl,
                    set(8, vec![10]),
                ],
            ),
            (
                vec![field(5, &[8, 6], None)],
                vec![
                    set(21, vec![0, 2]),
                    set(22, vec![198, 18, 0, 1]),
                    set(23, vec![198, 18, 0, 2]),
                    set(24, mac.clone()),
                    set(25, mac.clone()),
                ],
            ),
            (
                vec![field(5, &[8, 0], None), field(10, &[1], None)],
                vec![
                    set(19, vec![0]),
                    set(20, vec![3]),
                    set(11, vec![1, 2, 3, 4]),
                    set(12, vec![5, 6, 7, 8]),
                ],
            ),
            (
                vec![field(5, &[8, 0], None), field(10, &[6], None)],
                vec![set(13, vec![0, 1]), set(14, vec![0, 2]), set(8, vec![63])],
            ),
            (
                vec![
                    field(5, &[0x86, 0xdd], None),
                    field(10, &[58], None),
                    field(29, &[135], None),
                ],
                vec![
                    set(29, vec![136]),
                    set(30, vec![0]),
                    set(31, v6.clone()),
                    set(32, mac.clone()),
                    set(33, mac.clone()),
                ],
            ),
        ];
        for (fields, mut actions) in cases {
            actions.push(Action::Output {
                port: 2,
                max_len: 0,
            });
            let instructions = vec![Instruction::ApplyActions(actions)];
            let spec = flow_spec(&flow_mod(fields, instructions.clone())).unwrap();
            assert_eq!(instructions_from_actions(&spec.actions), instructions);
        }
    }

    #[test]
    fn a_tcp_flow_is_what_ovs_ofctl_would_write() {
        let fm = flow_mod(
            vec![
                field(0, &[0, 0, 0, 3], None),
                field(5, &[8, 0], None),
                field(10, &[6], None),
                field(12, &[198, 18, 0, 0], Some(&[255, 255, 255, 0])),
                field(14, &[0, 80], None),
                field(6, &[0x10, 10], None),
            ],
            vec![
                Instruction::ApplyActions(vec![
                    Action::SetField(field(3, &[2, 0, 0, 0, 0, 9], None)),
                    Action::Output {
                        port: 2,
                        max_len: 0,
                    },
                ]),
                Instruction::GotoTable(2),
            ],
        );
        let want = vsw_flow::parse_flow(
            "table=1,priority=100,idle_timeout=30,tcp,in_port=3,dl_vlan=10,\
             nw_dst=198.18.0.0/24,tp_dst=80,actions=mod_dl_dst:02:00:00:00:00:09,output:2,\
             goto_table:2",
            &|_: &str| None,
        )
        .unwrap();
        assert_eq!(flow_spec(&fm), Ok(want));
    }

    #[test]
    fn a_flow_mod_naming_a_buffer_is_refused_unless_it_deletes() {
        let mut m = flow_mod(vec![], vec![]);
        assert!(flow_spec(&m).is_ok());
        m.buffer_id = 7;
        assert_eq!(flow_spec(&m), Err(BadFlowMod::BufferUnknown));
        assert_eq!(BadFlowMod::BufferUnknown.type_code(), (1, 8));
        for (command, refused) in [
            (Command::Modify, true),
            (Command::ModifyStrict, true),
            (Command::Delete, false),
            (Command::DeleteStrict, false),
        ] {
            m.command = command;
            assert_eq!(unbuffered(&m).is_err(), refused, "{command:?}");
        }
    }

    /// What vsw cannot do is refused with the error Open vSwitch gives for it, and
    /// the reserved ports and instructions read as vsw's own.
    #[test]
    fn each_refusal_is_openflows_own_error() {
        let apply = |a: Action| vec![Instruction::ApplyActions(vec![a])];
        let refused = |fields: Vec<OxmField>, instructions: Vec<Instruction>| {
            flow_spec(&flow_mod(fields, instructions)).map_err(BadFlowMod::type_code)
        };
        // MPLS's bottom-of-stack bit is the packet's to say (BAD_SET_ARGUMENT),
        // and a pop needs an MPLS packet (BAD_ACTION MATCH_INCONSISTENT).
        let mpls = vec![
            field(5, &[0x88, 0x47], None),
            field(34, &[0, 0, 1, 0], None),
        ];
        let set_bos = apply(Action::SetField(field(36, &[1], None)));
        assert_eq!(refused(mpls.clone(), set_bos), Err((2, 15)));
        assert!(refused(mpls.clone(), apply(Action::PopMpls(0x0800))).is_ok());
        // Nicira's MPLS actions and OpenFlow 1.1's numbers for two of them are the
        // same actions; a push of an ethertype other than MPLS's is refused.
        for (a, want) in [
            (
                Action::Nx(NxAction::SetMplsLabel(100)),
                VswAction::SetMplsLabel(100),
            ),
            (Action::Nx(NxAction::SetMplsTc(5)), VswAction::SetMplsTc(5)),
            (Action::Nx(NxAction::DecMplsTtl), VswAction::DecMplsTtl),
            (Action::SetMplsLabel(7), VswAction::SetMplsLabel(7)),
            (Action::SetMplsTc(2), VswAction::SetMplsTc(2)),
        ] {
            assert_eq!(action_to_vsw(&a, Place::Flow), Ok(want));
        }
        assert_eq!(
            refused(mpls, apply(Action::Nx(NxAction::PushMpls(0x0800)))),
            Err((2, 5))
        );
        // PBB: a pop and an I-SID written need a PBB packet; a push takes
        // 0x88e7 alone; an I-SID is 24 bits.
        let pbb = vec![field(5, &[0x88, 0xe7], None)];
        let pop_set = apply(Action::PopPbb);
        assert!(refused(pbb.clone(), pop_set.clone()).is_ok());
        assert_eq!(
            refused(vec![field(5, &[8, 0], None)], pop_set),
            Err((2, 10))
        );
        let set_isid = |v: &[u8]| apply(Action::SetField(field(37, v, None)));
        assert!(refused(pbb.clone(), set_isid(&[0, 0, 203])).is_ok());
        assert_eq!(refused(vec![], set_isid(&[0, 0, 203])), Err((2, 10)));
        assert_eq!(refused(pbb, apply(Action::PushPbb(0x8100))), Err((2, 5)));
        let pop_ip = apply(Action::PopMpls(0x0800));
        assert_eq!(refused(vec![field(5, &[8, 0], None)], pop_ip), Err((2, 10)));
        // An IPv6 address written in a flow that matches IPv4.
        let set_v6 = apply(Action::SetField(field(26, &[0xfe; 16], None)));
        assert_eq!(refused(vec![field(5, &[8, 0], None)], set_v6), Err((2, 10)));
        // A TPID that is not 802.1Q's or 802.1ad's.
        assert_eq!(
            refused(vec![], apply(Action::PushVlan(0x1234))),
            Err((2, 5))
        );
        // A PCP of 9.
        let pcp = apply(Action::SetField(field(7, &[9], None)));
        assert_eq!(refused(vec![], pcp), Err((2, 15)));
        // A field no switch writes: BAD_SET_ARGUMENT, as Open vSwitch answers.
        for (id, value) in [(5u8, &[8u8, 0][..]), (10, &[6][..]), (0, &[0, 0, 0, 1][..])] {
            let set = apply(Action::SetField(field(id, value, None)));
            assert_eq!(refused(vec![], set), Err((2, 15)), "field {id}");
        }
        // A masked set-field of a field vsw sets only whole.
        let masked = apply(Action::SetField(field(6, &[0x10, 1], Some(&[0x10, 0xff]))));
        assert_eq!(refused(vec![], masked), Err((2, 16)));
        // Back to table 0 from table 1, or on to a table vsw does not have.
        assert_eq!(
            refused(vec![], vec![Instruction::GotoTable(255)]),
            Err((3, 2))
        );
        assert_eq!(
            refused(vec![], vec![Instruction::GotoTable(0)]),
            Err((3, 2))
        );
        // A group number above OFPG_MAX, a meter that cannot exist.
        assert_eq!(
            refused(vec![], apply(Action::Group(OFPG_MAX + 1))),
            Err((2, 9))
        );
        assert_eq!(refused(vec![], vec![Instruction::Meter(0)]), Err((12, 3)));
        // A table vsw does not have.
        let mut all_tables = flow_mod(vec![], vec![]);
        all_tables.table_id = 255;
        assert_eq!(flow_spec(&all_tables), Err(BadFlowMod::BadTableId));
        assert_eq!(BadFlowMod::BadTableId.type_code(), (5, 2));
        // TABLE only from a packet-out.
        let table = Action::Output {
            port: OFPP_TABLE,
            max_len: 0,
        };
        assert_eq!(refused(vec![], apply(table.clone())), Err((2, 4)));
        assert_eq!(
            packet_out_actions(&[table]),
            Ok(vec![VswAction::Resubmit {
                port: None,
                table: Some(0),
            }])
        );
        // LOCAL is vsw's port 65534 (the bridge's own).
        let local = flow_spec(&flow_mod(
            vec![],
            apply(Action::Output {
                port: OFPP_LOCAL,
                max_len: 0,
            }),
        ))
        .unwrap();
        assert_eq!(local.actions, [VswAction::Output(vsw_flow::LOCAL_PORT)]);
        // The action set's instructions: after the applied actions, in the spec's
        // order; no instruction at all is a drop.
        let set = flow_spec(&flow_mod(
            vec![],
            vec![
                Instruction::WriteActions(vec![Action::Output {
                    port: 2,
                    max_len: 0,
                }]),
                Instruction::ClearActions,
                Instruction::GotoTable(3),
            ],
        ))
        .unwrap();
        assert_eq!(
            vsw_flow::syntax::format_actions(&set.actions),
            "clear_actions,write_actions(output:2),goto_table:3"
        );
        assert_eq!(
            flow_spec(&flow_mod(vec![], vec![])).unwrap().actions,
            [VswAction::Drop]
        );
    }

    #[test]
    fn groups_and_meters_read_as_vswctl_writes_them() {
        use crate::group_mod::{GroupCommand, OfBucket};
        use crate::meter_mod::{MeterCommand, OfBand};
        let cases = [
            (
                OFPGT_SELECT,
                5,
                OFPP_ANY,
                "group_id=7,type=select,bucket=weight:5,actions=output:2",
            ),
            (
                OFPGT_ALL,
                0,
                OFPP_ANY,
                "group_id=7,type=all,bucket=actions=output:2",
            ),
            (
                OFPGT_FF,
                0,
                3,
                "group_id=7,type=fast_failover,bucket=watch_port:3,actions=output:2",
            ),
            (
                OFPGT_INDIRECT,
                0,
                OFPP_ANY,
                "group_id=7,type=indirect,bucket=actions=output:2",
            ),
        ];
        for (kind, weight, watch, text) in cases {
            let gm = GroupMod {
                command: GroupCommand::Add,
                kind,
                group_id: 7,
                buckets: vec![OfBucket {
                    bucket_id: 0,
                    weight,
                    watch_port: watch,
                    watch_group: OFPG_ANY,
                    actions: vec![Action::Output {
                        port: 2,
                        max_len: 0,
                    }],
                }],
                command_bucket_id: crate::group_mod::OFPG15_BUCKET_ALL,
                properties: Vec::new(),
            };
            let want = vsw_flow::parse_group(text, &|_: &str| None).unwrap();
            assert_eq!(group_spec(&gm), Ok(want), "{text}");
        }
        let meter = |flags, burst_size| MeterMod {
            command: MeterCommand::Add,
            flags,
            meter_id: 9,
            bands: vec![
                OfBand {
                    kind: OFPMBT_DROP,
                    rate: 100,
                    burst_size,
                    prec_level: 0,
                },
                OfBand {
                    kind: OFPMBT_DSCP_REMARK,
                    rate: 50,
                    burst_size: 0,
                    prec_level: 2,
                },
            ],
        };
        let want = vsw_flow::parse_meter(
            "meter=9,pktps,burst,stats,bands=type=drop,rate=100,burst_size=10,\
             type=dscp_remark,rate=50,prec_level=2",
        )
        .unwrap();
        assert_eq!(
            meter_spec(&meter(OFPMF_PKTPS | OFPMF_BURST | OFPMF_STATS, 10)),
            Ok(want)
        );
        assert_eq!(
            meter_spec(&meter(OFPMF_PKTPS, 10)),
            Err(BadMeterMod::BadBurst)
        );
        let mut zero = meter(OFPMF_PKTPS, 0);
        zero.meter_id = 0;
        assert_eq!(meter_spec(&zero), Err(BadMeterMod::Invalid));
    }
}
