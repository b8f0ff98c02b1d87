//! vsw's rules as OpenFlow says them: a vsw-flow match as OXM fields, its actions as
//! instructions — what flow stats echo.
//!
//! IP TTL, fragments, TCP flags, registers and `pkt_mark` go as Open vSwitch's NXM
//! fields; the inner VLAN tag, which OpenFlow cannot match, is left out of what is
//! echoed (vsw-flow's text keeps it: `vswctl dump-flows`). `resubmit`, `load` and
//! `move` are Nicira's actions.

use vsw_flow::subfield::{ones, Field};
use vsw_flow::{Action as VswAction, Match};
use vsw_packet::key::{IPPROTO_ICMP, IPPROTO_ICMPV6, IPPROTO_SCTP, IPPROTO_TCP, IPPROTO_UDP};
use vsw_packet::rewrite::{FieldWrite, NshField};
use vsw_packet::wire::mpls;
use vsw_packet::{EtherType, MacAddr};

use crate::flow_mod::{
    to_of_port, Action, Instruction, OFPP_ANY, OFPP_CONTROLLER, OFPP_FLOOD, OFPP_IN_PORT,
    OFPP_NORMAL,
};
use crate::group_mod::{
    GroupDescEntry, OfBucket, OFPGT_ALL, OFPGT_FF, OFPGT_INDIRECT, OFPGT_SELECT, OFPG_ANY,
};
use crate::meter_mod::{
    MeterConfigEntry, OfBand, OFPMBT_DROP, OFPMBT_DSCP_REMARK, OFPMF_BURST, OFPMF_KBPS,
    OFPMF_PKTPS, OFPMF_STATS,
};
use crate::nx_action::{
    nxm_header, port_to_16, FieldCopy, NxAction, OFPP10_IN_PORT, PT_ETH, PT_NSH, PT_USE_NEXT_PROTO,
};
use crate::nx_learn::{
    LearnAction, LearnDst, LearnSpecWire, LearnSrc, NX_LEARN_F_DELETE_LEARNED,
    NX_LEARN_F_SEND_FLOW_REM,
};
use crate::oxm::{
    OxmField, OxmMatch, CONJ_ID, IP_FRAG, IP_TTL, MPLS_TTL, NSH_C1, NSH_FLAGS, NSH_MDTYPE, NSH_NP,
    NSH_SI, NSH_SPI, NSH_TTL, NX_TCP_FLAGS, PACKET_TYPE, PKT_MARK, REG0, TUN_FLAGS, TUN_IPV4_DST,
    TUN_IPV4_SRC, TUN_METADATA0,
};
use crate::version::Version;

fn be(v: u128, bytes: usize) -> Vec<u8> {
    v.to_be_bytes()[16 - bytes..].to_vec()
}

/// A field from a value and mask of `bytes` bytes: absent when the mask is zero,
/// unmasked when it is all ones.
fn field(id: u8, v: u128, m: u128, bytes: usize, maskable: bool) -> Option<OxmField> {
    let full = if bytes == 16 {
        u128::MAX
    } else {
        (1u128 << (8 * bytes)) - 1
    };
    let m = m & full;
    if m == 0 {
        return None;
    }
    Some(OxmField {
        field: id,
        value: be(v & m, bytes),
        mask: (m != full && maskable).then(|| be(m, bytes)),
    })
}

fn mac(id: u8, v: MacAddr, m: MacAddr) -> Option<OxmField> {
    let n = |a: MacAddr| a.0.iter().fold(0u128, |x, b| (x << 8) | u128::from(*b));
    field(id, n(v), n(m), 6, true)
}

/// The OXM fields of a vsw-flow match, prerequisites first, as `ovs-ofctl` orders them.
pub fn oxm_from_match(m: &Match) -> OxmMatch {
    let (v, k) = (m.value(), m.mask());
    // A packet type (1,T) says the Ethernet type T: not said again.
    let by_type = vsw_flow::fields::packet_type_says_dl_type(v, m.mask());
    let mut f: Vec<Option<OxmField>> = vec![
        field(
            PACKET_TYPE,
            v.pipeline.packet_type.into(),
            k.pipeline.packet_type.into(),
            4,
            false,
        ),
        field(0, to_of_port(v.in_port).into(), k.in_port.into(), 4, false),
        field(2, v.metadata.into(), k.metadata.into(), 8, true),
        mac(3, v.dl_dst, k.dl_dst),
        mac(4, v.dl_src, k.dl_src),
        field(5, v.dl_type.into(), k.dl_type.into(), 2, false).filter(|_| !by_type),
        field(
            6,
            (v.vlan_tci & 0x1fff).into(),
            (k.vlan_tci & 0x1fff).into(),
            2,
            true,
        ),
    ];
    if k.vlan_tci & 0xe000 == 0xe000 {
        f.push(field(7, (v.vlan_tci >> 13).into(), 0x7, 1, false));
    }
    let dl = (k.dl_type == 0xffff).then_some(v.dl_type);
    let proto = (k.nw_proto == 0xff).then_some(v.nw_proto);
    match dl {
        Some(EtherType::IPV4) | Some(EtherType::IPV6) => {
            if k.nw_tos & 0xfc == 0xfc {
                f.push(field(8, (v.nw_tos >> 2).into(), 0x3f, 1, false));
            }
            if k.nw_tos & 0x03 == 0x03 {
                f.push(field(9, (v.nw_tos & 3).into(), 0x3, 1, false));
            }
            f.push(field(10, v.nw_proto.into(), k.nw_proto.into(), 1, false));
            if dl == Some(EtherType::IPV4) {
                f.push(field(11, v.nw_src, k.nw_src, 4, true));
                f.push(field(12, v.nw_dst, k.nw_dst, 4, true));
            } else {
                f.push(field(26, v.nw_src, k.nw_src, 16, true));
                f.push(field(27, v.nw_dst, k.nw_dst, 16, true));
                f.push(field(28, v.label.into(), k.label.into(), 4, true));
                f.push(field(
                    39,
                    v.ipv6_exthdr.into(),
                    k.ipv6_exthdr.into(),
                    2,
                    true,
                ));
            }
            let ports = |src: u8, dst: u8| {
                [
                    field(src, v.tp_src.into(), k.tp_src.into(), 2, true),
                    field(dst, v.tp_dst.into(), k.tp_dst.into(), 2, true),
                ]
            };
            match proto {
                Some(IPPROTO_TCP) => f.extend(ports(13, 14)),
                Some(IPPROTO_UDP) => f.extend(ports(15, 16)),
                Some(IPPROTO_SCTP) => f.extend(ports(17, 18)),
                Some(IPPROTO_ICMP) | Some(IPPROTO_ICMPV6) => {
                    let (t, c) = if proto == Some(IPPROTO_ICMP) {
                        (19, 20)
                    } else {
                        (29, 30)
                    };
                    f.push(field(
                        t,
                        (v.tp_src & 0xff).into(),
                        (k.tp_src & 0xff).into(),
                        1,
                        false,
                    ));
                    f.push(field(
                        c,
                        (v.tp_dst & 0xff).into(),
                        (k.tp_dst & 0xff).into(),
                        1,
                        false,
                    ));
                    if proto == Some(IPPROTO_ICMPV6) {
                        f.push(field(31, v.nd_target, k.nd_target, 16, false));
                        let (sll, tll) = match v.tp_src {
                            135 => (Some(mac(32, v.arp_sha, k.arp_sha)), None),
                            136 => (None, Some(mac(33, v.arp_tha, k.arp_tha))),
                            _ => (None, None),
                        };
                        f.extend(
                            sll.flatten()
                                .map(|x| OxmField { mask: None, ..x })
                                .into_iter()
                                .map(Some),
                        );
                        f.extend(
                            tll.flatten()
                                .map(|x| OxmField { mask: None, ..x })
                                .into_iter()
                                .map(Some),
                        );
                    }
                }
                _ => {}
            }
        }
        // As Open vSwitch puts them: TC, bottom of stack, TTL, label.
        Some(EtherType::MPLS | EtherType::MPLS_MULTICAST) => {
            for (id, bits, shift, len) in [
                (35, mpls::TC_MASK, mpls::TC_SHIFT, 1),
                (36, mpls::BOS_MASK, mpls::BOS_SHIFT, 1),
                (MPLS_TTL, mpls::TTL_MASK, 0, 1),
                (34, mpls::LABEL_MASK, mpls::LABEL_SHIFT, 4),
            ] {
                if k.label & bits == bits {
                    let part = (v.label & bits) >> shift;
                    f.push(field(id, part.into(), u128::MAX, len, false));
                }
            }
        }
        Some(EtherType::PBB) => {
            let isid = |l: u32| u128::from(l & vsw_packet::wire::pbb::ISID_MASK);
            f.push(field(37, isid(v.label), isid(k.label), 3, true));
        }
        // In the order Open vSwitch prints them.
        Some(EtherType::NSH) => {
            let (hv, hk) = (v.nsh(), k.nsh());
            let ttl_mask = if hk.ttl != 0 { 0xff } else { 0 };
            f.push(field(NSH_FLAGS, hv.flags.into(), hk.flags.into(), 1, true));
            f.push(field(NSH_TTL, hv.ttl.into(), ttl_mask, 1, false));
            f.push(field(
                NSH_MDTYPE,
                hv.md_type.into(),
                hk.md_type.into(),
                1,
                false,
            ));
            f.push(field(
                NSH_NP,
                hv.next_proto.into(),
                hk.next_proto.into(),
                1,
                false,
            ));
            f.push(field(
                NSH_SPI,
                (hv.path >> 8).into(),
                (hk.path >> 8).into(),
                4,
                false,
            ));
            f.push(field(
                NSH_SI,
                (hv.path & 0xff).into(),
                (hk.path & 0xff).into(),
                1,
                false,
            ));
            for i in 0..4 {
                let (cv, ck) = (hv.context[i].into(), hk.context[i].into());
                f.push(field(NSH_C1 + i as u8, cv, ck, 4, true));
            }
        }
        Some(EtherType::ARP | EtherType::RARP) => {
            f.push(field(21, v.nw_proto.into(), k.nw_proto.into(), 2, false));
            f.push(field(22, v.nw_src, k.nw_src, 4, true));
            f.push(field(23, v.nw_dst, k.nw_dst, 4, true));
            f.push(mac(24, v.arp_sha, k.arp_sha));
            f.push(mac(25, v.arp_tha, k.arp_tha));
        }
        _ => {}
    }
    f.push(field(38, v.tun_id.into(), k.tun_id.into(), 8, true));
    f.push(field(
        TUN_IPV4_SRC,
        v.tun_src.into(),
        k.tun_src.into(),
        4,
        true,
    ));
    f.push(field(
        TUN_IPV4_DST,
        v.tun_dst.into(),
        k.tun_dst.into(),
        4,
        true,
    ));
    f.push(field(
        TUN_METADATA0,
        v.tun_metadata0.into(),
        k.tun_metadata0.into(),
        4,
        true,
    ));
    f.push(field(
        TUN_FLAGS,
        v.tun_flags.into(),
        k.tun_flags.into(),
        2,
        true,
    ));
    if matches!(dl, Some(EtherType::IPV4 | EtherType::IPV6)) {
        f.push(field(IP_TTL, v.nw_ttl.into(), k.nw_ttl.into(), 1, false));
        f.push(field(IP_FRAG, v.nw_frag.into(), k.nw_frag.into(), 1, true));
        if proto == Some(IPPROTO_TCP) {
            f.push(field(
                NX_TCP_FLAGS,
                v.tcp_flags.into(),
                k.tcp_flags.into(),
                2,
                true,
            ));
        }
    }
    let (vp, kp) = (&v.pipeline, &k.pipeline);
    f.push(field(
        PKT_MARK,
        vp.pkt_mark.into(),
        kp.pkt_mark.into(),
        4,
        true,
    ));
    f.push(field(
        CONJ_ID,
        vp.conj_id.into(),
        kp.conj_id.into(),
        4,
        false,
    ));
    for (n, (rv, rk)) in vp.regs.iter().zip(&kp.regs).enumerate() {
        f.push(field(REG0 + n as u8, (*rv).into(), (*rk).into(), 4, true));
    }
    use crate::oxm::{
        CT_IPV6_DST, CT_IPV6_SRC, CT_LABEL, CT_MARK, CT_NW_DST, CT_NW_PROTO, CT_NW_SRC, CT_STATE,
        CT_TP_DST, CT_TP_SRC, CT_ZONE,
    };
    // ct_state: 8 bits in a 32-bit field, masked unless all 32 would be.
    f.push(field(
        CT_STATE,
        v.ct_state.into(),
        k.ct_state.into(),
        4,
        true,
    ));
    f.push(field(CT_ZONE, v.ct_zone.into(), k.ct_zone.into(), 2, false));
    f.push(field(CT_MARK, v.ct_mark.into(), k.ct_mark.into(), 4, true));
    f.push(field(CT_LABEL, v.ct_label, k.ct_label, 16, true));
    f.push(field(
        CT_NW_PROTO,
        v.ct_nw_proto.into(),
        k.ct_nw_proto.into(),
        1,
        false,
    ));
    f.push(field(
        CT_NW_SRC,
        v.ct_nw_src.into(),
        k.ct_nw_src.into(),
        4,
        true,
    ));
    f.push(field(
        CT_NW_DST,
        v.ct_nw_dst.into(),
        k.ct_nw_dst.into(),
        4,
        true,
    ));
    f.push(field(CT_IPV6_SRC, v.ct_ipv6_src, k.ct_ipv6_src, 16, true));
    f.push(field(CT_IPV6_DST, v.ct_ipv6_dst, k.ct_ipv6_dst, 16, true));
    f.push(field(
        CT_TP_SRC,
        v.ct_tp_src.into(),
        k.ct_tp_src.into(),
        2,
        true,
    ));
    f.push(field(
        CT_TP_DST,
        v.ct_tp_dst.into(),
        k.ct_tp_dst.into(),
        2,
        true,
    ));
    OxmMatch {
        fields: f.into_iter().flatten().collect(),
    }
}

/// What a packet-in's match says besides the input port, as Open vSwitch says it:
/// metadata, `pkt_mark` and each register, where not zero.
pub fn packet_in_metadata(metadata: u64, pipeline: &vsw_flow::PipelineFields) -> Vec<OxmField> {
    let exact = |field: u8, value: Vec<u8>| OxmField {
        field,
        value,
        mask: None,
    };
    let mut out = Vec::new();
    if metadata != 0 {
        out.push(exact(2, metadata.to_be_bytes().to_vec()));
    }
    if pipeline.pkt_mark != 0 {
        out.push(exact(PKT_MARK, pipeline.pkt_mark.to_be_bytes().to_vec()));
    }
    for (n, r) in pipeline.regs.iter().enumerate() {
        if *r != 0 {
            out.push(exact(REG0 + n as u8, r.to_be_bytes().to_vec()));
        }
    }
    out
}

fn set(id: u8, value: Vec<u8>) -> Action {
    Action::SetField(OxmField {
        field: id,
        value,
        mask: None,
    })
}

/// A vsw rule's actions as instructions: apply-actions, then goto-table.
pub fn instructions_from_actions(actions: &[VswAction]) -> Vec<Instruction> {
    // write_actions(…) blocks are the write-actions instruction; the rest is applied.
    let mut applied = Vec::new();
    let mut written = Vec::new();
    let mut rest = actions;
    while let Some((a, after)) = rest.split_first() {
        if let VswAction::WriteActions(n) = *a {
            let (w, after) = after.split_at(usize::from(n).min(after.len()));
            written.extend_from_slice(w);
            rest = after;
            continue;
        }
        applied.push(a.clone());
        rest = after;
    }
    let (apply, goto) = actions_and_goto(&applied);
    let mut out = Vec::new();
    // The meter instruction runs first, whatever its place in the list.
    if let Some(m) = actions.iter().find_map(|a| match a {
        VswAction::Meter(m) => Some(*m),
        _ => None,
    }) {
        out.push(Instruction::Meter(m));
    }
    if !apply.is_empty() {
        out.push(Instruction::ApplyActions(apply));
    }
    if actions.contains(&VswAction::ClearActions) {
        out.push(Instruction::ClearActions);
    }
    if !written.is_empty() {
        out.push(Instruction::WriteActions(actions_and_goto(&written).0));
    }
    if let Some((metadata, mask)) = actions.iter().find_map(|a| match a {
        VswAction::WriteMetadata { value, mask } => Some((*value, *mask)),
        _ => None,
    }) {
        out.push(Instruction::WriteMetadata { metadata, mask });
    }
    if let Some(t) = goto {
        out.push(Instruction::GotoTable(t));
    }
    out
}

/// A group's bucket's actions (a bucket has no goto_table).
pub fn actions_from_vsw(actions: &[VswAction]) -> Vec<Action> {
    actions_and_goto(actions).0
}

/// A vsw group as OpenFlow describes it.
pub fn group_desc_from_vsw(g: &vsw_flow::GroupSpec) -> GroupDescEntry {
    use vsw_flow::GroupType;
    GroupDescEntry {
        kind: match g.kind {
            GroupType::All => OFPGT_ALL,
            GroupType::Select => OFPGT_SELECT,
            GroupType::Indirect => OFPGT_INDIRECT,
            GroupType::FastFailover => OFPGT_FF,
        },
        group_id: g.id,
        buckets: g
            .buckets
            .iter()
            .enumerate()
            .map(|(i, b)| OfBucket {
                bucket_id: i as u32,
                // Only a select group's buckets have weights on the wire.
                weight: if g.kind == GroupType::Select {
                    b.weight
                } else {
                    0
                },
                watch_port: b.watch_port.map_or(OFPP_ANY, to_of_port),
                watch_group: b.watch_group.unwrap_or(OFPG_ANY),
                actions: actions_from_vsw(&b.actions),
            })
            .collect(),
        properties: Vec::new(),
    }
}

/// A vsw meter as OpenFlow's meter configuration says it.
pub fn meter_config_from_vsw(m: &vsw_flow::MeterSpec) -> MeterConfigEntry {
    let mut flags = if m.pktps { OFPMF_PKTPS } else { OFPMF_KBPS };
    if m.burst {
        flags |= OFPMF_BURST;
    }
    if m.stats {
        flags |= OFPMF_STATS;
    }
    MeterConfigEntry {
        flags,
        meter_id: m.id,
        bands: m
            .bands
            .iter()
            .map(|b| {
                let (kind, prec_level) = match b.kind {
                    vsw_flow::BandType::Drop => (OFPMBT_DROP, 0),
                    vsw_flow::BandType::DscpRemark(p) => (OFPMBT_DSCP_REMARK, p),
                };
                OfBand {
                    kind,
                    rate: b.rate,
                    burst_size: b.burst_size,
                    prec_level,
                }
            })
            .collect(),
    }
}

/// A set-field write as OpenFlow says it: a set-field of the OXM field, or (TTLs,
/// which OpenFlow 1.3 has no field for) an action of its own.
fn field_write(w: &FieldWrite) -> Action {
    match *w {
        FieldWrite::Nsh(NshField::Flags, v) => set(NSH_FLAGS, vec![v as u8]),
        FieldWrite::Nsh(NshField::Ttl, v) => set(NSH_TTL, vec![v as u8]),
        FieldWrite::Nsh(NshField::Spi, v) => set(NSH_SPI, v.to_be_bytes().to_vec()),
        FieldWrite::Nsh(NshField::Si, v) => set(NSH_SI, vec![v as u8]),
        FieldWrite::Nsh(NshField::Context(i), v) => set(NSH_C1 + i, v.to_be_bytes().to_vec()),
        // Only translation writes these (an MD type 2 push's TLVs), never a rule:
        // no OpenFlow field names them.
        FieldWrite::Nsh(NshField::Md2Word(_), _) => {
            Action::Nx(NxAction::Note(w.to_string().into_bytes()))
        }
        FieldWrite::CopyTtlOut => Action::CopyTtlOut,
        FieldWrite::CopyTtlIn => Action::CopyTtlIn,
        FieldWrite::NwTtl(t) => Action::SetNwTtl(t),
        FieldWrite::IpEcn(e) => set(9, vec![e]),
        FieldWrite::Icmpv4Type(t) => set(19, vec![t]),
        FieldWrite::Icmpv4Code(c) => set(20, vec![c]),
        FieldWrite::ArpOp(o) => set(21, o.to_be_bytes().to_vec()),
        FieldWrite::ArpSpa(a) => set(22, a.to_vec()),
        FieldWrite::ArpTpa(a) => set(23, a.to_vec()),
        FieldWrite::ArpSha(m) => set(24, m.0.to_vec()),
        FieldWrite::ArpTha(m) => set(25, m.0.to_vec()),
        FieldWrite::Ipv6Src(a) => set(26, a.to_vec()),
        FieldWrite::Ipv6Dst(a) => set(27, a.to_vec()),
        FieldWrite::Ipv6Label(l) => set(28, l.to_be_bytes().to_vec()),
        FieldWrite::Icmpv6Type(t) => set(29, vec![t]),
        FieldWrite::Icmpv6Code(c) => set(30, vec![c]),
        FieldWrite::NdTarget(a) => set(31, a.to_vec()),
        FieldWrite::NdSll(m) => set(32, m.0.to_vec()),
        FieldWrite::NdTll(m) => set(33, m.0.to_vec()),
        FieldWrite::PbbIsid(i) => set(37, i.to_be_bytes()[1..].to_vec()),
    }
}

fn header_of(f: Field) -> u32 {
    let (class, number, len) = f.info().header;
    nxm_header(class, number, len)
}

/// A `learn` as Open vSwitch sends it: NXAST_LEARN2 when it came so or says what
/// only that says (a limit, a result).
fn learn(l: &vsw_flow::Learn) -> LearnAction {
    use vsw_flow::{LearnSource, LearnSpec};
    let field = |s: vsw_flow::subfield::Subfield| (header_of(s.field), u16::from(s.ofs));
    let src = |s: LearnSource| match s {
        LearnSource::Field(f) => {
            let (header, ofs) = field(f);
            LearnSrc::Field { header, ofs }
        }
        LearnSource::Value(v) => LearnSrc::Immediate(v),
    };
    let specs = l
        .specs
        .iter()
        .map(|s| {
            let n_bits = u16::from(s.n_bits());
            match *s {
                LearnSpec::Match { dst, src: from } => {
                    let (header, ofs) = field(dst);
                    LearnSpecWire {
                        n_bits,
                        src: src(from),
                        dst: LearnDst::Match { header, ofs },
                    }
                }
                LearnSpec::Load { dst, src: from } => {
                    let (header, ofs) = field(dst);
                    LearnSpecWire {
                        n_bits,
                        src: src(from),
                        dst: LearnDst::Load { header, ofs },
                    }
                }
                LearnSpec::Output { src: from } => LearnSpecWire {
                    n_bits,
                    src: src(LearnSource::Field(from)),
                    dst: LearnDst::Output,
                },
            }
        })
        .collect();
    let flags = if l.send_flow_rem {
        NX_LEARN_F_SEND_FLOW_REM
    } else {
        0
    } | if l.delete_learned {
        NX_LEARN_F_DELETE_LEARNED
    } else {
        0
    };
    LearnAction {
        learn2: l.learn2 || l.limit != 0 || l.result_dst.is_some(),
        idle_timeout: l.idle_timeout,
        hard_timeout: l.hard_timeout,
        priority: l.priority,
        cookie: l.cookie,
        flags,
        table: l.table,
        fin_idle_timeout: l.fin_idle_timeout,
        fin_hard_timeout: l.fin_hard_timeout,
        limit: l.limit,
        result_dst: l.result_dst.map(field),
        specs,
    }
}

/// A load as Open vSwitch sends it: a set-field of a whole field, NXAST_REG_LOAD
/// of a subfield up to 64 bits, or else NXAST_REG_LOAD2 (a field and a mask);
/// `None` for a field OpenFlow's set-field cannot name.
fn load(l: &vsw_flow::Load) -> Option<Action> {
    let info = l.field.info();
    let oxm = crate::oxm::field_of_wire(info.header.0, info.header.1);
    // A set-field's value is the field's own length (NXM names tun_metadata0
    // with its longest, 124, which is no value's).
    let bytes = oxm
        .and_then(crate::oxm::field_def)
        .map_or(usize::from(info.header.2), |d| usize::from(d.len));
    let full = ones(u32::from(info.bits));
    if let (Some(id), true) = (oxm, l.as_set_field && l.mask == full) {
        return Some(set(id, be(l.value, bytes)));
    }
    if let Some(s) = l.subfield().filter(|s| s.n_bits <= 64) {
        return Some(Action::Nx(NxAction::RegLoad {
            ofs_nbits: (u16::from(s.ofs) << 6) | u16::from(s.n_bits - 1),
            dst: header_of(l.field),
            value: (l.value >> s.ofs) as u64,
        }));
    }
    // A mask set-field takes only from OpenFlow 1.5: NXAST_REG_LOAD2 in every
    // version.
    oxm.map(|id| {
        Action::Nx(NxAction::RegLoad2(OxmField {
            field: id,
            value: be(l.value, bytes),
            mask: (l.mask != full).then(|| be(l.mask, bytes)),
        }))
    })
}

fn actions_and_goto(actions: &[VswAction]) -> (Vec<Action>, Option<u8>) {
    let mut apply = Vec::new();
    let mut goto = None;
    let mut rest = actions;
    while let Some((a, after)) = rest.split_first() {
        rest = after;
        if let VswAction::Clone(n) = *a {
            let (block, after) = rest.split_at(usize::from(n).min(rest.len()));
            rest = after;
            apply.push(Action::Clone(actions_and_goto(block).0));
            continue;
        }
        let out = |port| Action::Output { port, max_len: 0 };
        match a {
            VswAction::Output(p) => apply.push(out(to_of_port(*p))),
            VswAction::InPort => apply.push(out(OFPP_IN_PORT)),
            VswAction::Normal => apply.push(out(OFPP_NORMAL)),
            VswAction::Flood => apply.push(out(OFPP_FLOOD)),
            VswAction::Drop => {}
            VswAction::Group(g) => apply.push(Action::Group(*g)),
            // Instructions of their own (above), and a clone's block (before).
            VswAction::Meter(_)
            | VswAction::Clone(_)
            | VswAction::WriteActions(_)
            | VswAction::ClearActions
            | VswAction::WriteMetadata { .. } => {}
            VswAction::SetQueue(q) => apply.push(Action::SetQueue(*q)),
            VswAction::Controller {
                max_len,
                userdata: None,
                meter: None,
                pause: false,
            } => apply.push(Action::Output {
                port: OFPP_CONTROLLER,
                max_len: *max_len,
            }),
            VswAction::Controller {
                max_len,
                userdata,
                meter,
                pause,
            } => apply.push(Action::Nx(NxAction::Controller2 {
                max_len: (*max_len != vsw_flow::action::CONTROLLER_NO_BUFFER).then_some(*max_len),
                controller_id: None,
                reason: None,
                userdata: userdata.as_deref().map(<[u8]>::to_vec),
                pause: *pause,
                meter_id: *meter,
            })),
            VswAction::SetDlSrc(m) => apply.push(set(4, m.0.to_vec())),
            VswAction::SetDlDst(m) => apply.push(set(3, m.0.to_vec())),
            VswAction::PushVlan(t) => apply.push(Action::PushVlan(*t)),
            VswAction::SetVlanVid(vid) => apply.push(set(6, (0x1000 | vid).to_be_bytes().to_vec())),
            VswAction::SetVlanPcp(p) => apply.push(set(7, vec![*p])),
            VswAction::StripVlan => apply.push(Action::PopVlan),
            VswAction::SetNwSrc(a) => apply.push(set(11, a.octets().to_vec())),
            VswAction::SetNwDst(a) => apply.push(set(12, a.octets().to_vec())),
            VswAction::SetNwTos(t) => apply.push(set(8, vec![t >> 2])),
            VswAction::SetTpSrc(p) => apply.push(set(13, p.to_be_bytes().to_vec())),
            VswAction::SetTpDst(p) => apply.push(set(14, p.to_be_bytes().to_vec())),
            VswAction::DecTtl => apply.push(Action::DecNwTtl),
            VswAction::DecTtlIds(ids) => apply.push(Action::Nx(NxAction::DecTtlIds(ids.to_vec()))),
            VswAction::PushMpls(t) => apply.push(Action::PushMpls(*t)),
            VswAction::PopMpls(t) => apply.push(Action::PopMpls(*t)),
            VswAction::PushPbb(t) => apply.push(Action::PushPbb(*t)),
            VswAction::PopPbb => apply.push(Action::PopPbb),
            VswAction::SetMplsLabel(l) => apply.push(set(34, l.to_be_bytes().to_vec())),
            VswAction::SetMplsTc(tc) => apply.push(set(35, vec![*tc])),
            VswAction::SetMplsTtl(t) => apply.push(Action::SetMplsTtl(*t)),
            VswAction::DecMplsTtl => apply.push(Action::DecMplsTtl),
            VswAction::SetField(w) => apply.push(field_write(w)),
            VswAction::SetTunnel(id) => apply.push(set(38, id.to_be_bytes().to_vec())),
            VswAction::SetTunnelDst(a) => apply.push(set(TUN_IPV4_DST, a.octets().to_vec())),
            VswAction::SetTunnelMetadata(v) => {
                apply.push(set(TUN_METADATA0, v.to_be_bytes().to_vec()))
            }
            VswAction::Load(l) => apply.extend(load(l)),
            VswAction::Conjunction {
                id,
                clause,
                n_clauses,
            } => apply.push(Action::Nx(NxAction::Conjunction {
                clause: clause.saturating_sub(1),
                n_clauses: *n_clauses,
                id: *id,
            })),
            VswAction::CheckPktLarger { len, dst } => {
                apply.push(Action::Nx(NxAction::CheckPktLarger {
                    pkt_len: *len,
                    offset: u16::from(dst.ofs),
                    dst: header_of(dst.field),
                }))
            }
            VswAction::StackPush(s) | VswAction::StackPop(s) => {
                apply.push(Action::Nx(NxAction::Stack {
                    push: matches!(a, VswAction::StackPush(_)),
                    ofs: u16::from(s.ofs),
                    field: header_of(s.field),
                    n_bits: u16::from(s.n_bits),
                }))
            }
            VswAction::Learn(l) => apply.push(Action::Nx(NxAction::Learn(Box::new(learn(l))))),
            VswAction::OutputReg { src, max_len } => apply.push(Action::Nx(NxAction::OutputReg {
                ofs_nbits: (u16::from(src.ofs) << 6) | u16::from(src.n_bits - 1),
                src: header_of(src.field),
                max_len: *max_len,
                reg2: false,
            })),
            VswAction::Exit => apply.push(Action::Nx(NxAction::Exit)),
            VswAction::Encap(e) => apply.push(Action::Nx(match e {
                vsw_flow::Encap::Ethernet => NxAction::Encap {
                    packet_type: PT_ETH,
                    md_type: None,
                    tlvs: Vec::new(),
                },
                vsw_flow::Encap::Nsh { md_type, tlvs } => NxAction::Encap {
                    packet_type: PT_NSH,
                    md_type: *md_type,
                    tlvs: tlvs.as_deref().unwrap_or_default().to_vec(),
                },
                vsw_flow::Encap::Mpls { ethertype } => NxAction::Encap {
                    packet_type: vsw_flow::packet_type::of_ethertype(*ethertype),
                    md_type: None,
                    tlvs: Vec::new(),
                },
            })),
            VswAction::Decap(t) => apply.push(Action::Nx(NxAction::Decap(
                t.map_or(PT_USE_NEXT_PROTO, |(ns, t)| {
                    vsw_flow::packet_type::new(ns, t)
                }),
            ))),
            VswAction::DecNshTtl => apply.push(Action::Nx(NxAction::DecNshTtl)),
            VswAction::Ct(ct) => apply.push(Action::Ct(Box::new(ct_from_vsw(ct)))),
            VswAction::CtClear => apply.push(Action::Nx(NxAction::CtClear)),
            VswAction::Sample(sa) => apply.push(Action::Nx(NxAction::Sample {
                // As Open vSwitch: the oldest form that says it all.
                subtype: match (sa.sampling_port, sa.direction) {
                    (_, 1 | 2) => crate::nx_action::NXAST_SAMPLE3,
                    (Some(_), _) => crate::nx_action::NXAST_SAMPLE2,
                    (None, _) => crate::nx_action::NXAST_SAMPLE,
                },
                probability: sa.probability,
                collector_set_id: sa.collector_set_id,
                obs_domain_id: sa.obs_domain_id,
                obs_point_id: sa.obs_point_id,
                sampling_port: sa
                    .sampling_port
                    .and_then(|p| port_to_16(to_of_port(p)))
                    .unwrap_or(0xffff),
                direction: sa.direction,
            })),
            VswAction::Multipath(m) => apply.push(Action::Nx(NxAction::Multipath {
                fields: m.fields as u16,
                basis: m.basis,
                algorithm: m.algorithm as u16,
                max_link: (m.n_links - 1) as u16,
                arg: m.arg,
                ofs_nbits: (u16::from(m.dst.ofs) << 6) | u16::from(m.dst.n_bits.min(64) - 1),
                dst: header_of(m.dst.field),
            })),
            VswAction::Bundle(b) => apply.push(Action::Nx(NxAction::Bundle {
                load: b.dst.is_some(),
                algorithm: b.algorithm as u16,
                fields: b.fields as u16,
                basis: b.basis,
                ofs_nbits: b.dst.map_or(0, |d| {
                    (u16::from(d.ofs) << 6) | u16::from(d.n_bits.min(64) - 1)
                }),
                dst: b.dst.map_or(0, |d| header_of(d.field)),
                members: b
                    .members
                    .iter()
                    .map(|p| port_to_16(to_of_port(*p)).unwrap_or(0xffff))
                    .collect(),
            })),
            VswAction::PopQueue => apply.push(Action::Nx(NxAction::PopQueue)),
            // vsw's port numbers are OpenFlow 1.0's (LOCAL 0xfffe).
            &VswAction::OutputTrunc { port, max_len } => {
                apply.push(Action::Nx(NxAction::OutputTrunc {
                    port: port as u16,
                    max_len,
                }))
            }
            &VswAction::FinTimeout { idle, hard } => {
                apply.push(Action::Nx(NxAction::FinTimeout { idle, hard }))
            }
            VswAction::Move { src, dst } => apply.push(Action::Nx(NxAction::RegMove(FieldCopy {
                n_bits: u16::from(src.n_bits),
                src_ofs: u16::from(src.ofs),
                dst_ofs: u16::from(dst.ofs),
                src: header_of(src.field),
                dst: header_of(dst.field),
            }))),
            VswAction::GotoTable(t) => goto = Some(*t),
            VswAction::Resubmit { port, table } => {
                // Nicira's resubmit names a 16-bit port: one without (vsw's port
                // 0xff00) is left out, as other things OpenFlow cannot say.
                let in_port = port.map_or(Some(OFPP10_IN_PORT), |p| port_to_16(to_of_port(p)));
                if let Some(in_port) = in_port {
                    apply.push(Action::Nx(match table {
                        None => NxAction::Resubmit { in_port },
                        Some(t) => NxAction::ResubmitTable { in_port, table: *t },
                    }));
                }
            }
        }
    }
    (apply, goto)
}

/// At most what a flow-stats entry takes besides its actions: its fixed part, a
/// match of every field with a mask, the instructions' headers (checked by
/// `size_bounds_hold`).
const ENTRY_BOUND: usize = 4096;
/// At most what one action takes in a flow-stats entry, its instruction's share
/// included (checked by `size_bounds_hold`).
const ACTION_BOUND: usize = 64;

/// Whether a rule can be described in one OpenFlow message (its flow-stats entry,
/// in the largest layout, within [`crate::multipart::MAX_BODY`]): a switch that
/// installed one that cannot would have a rule no controller could read back.
pub fn rule_fits_openflow(spec: &vsw_flow::FlowSpec) -> bool {
    // Nearly every rule is far below the limit: a bound on its size settles it
    // without encoding it (which a flow-mod would pay for every time).
    if ENTRY_BOUND + spec.actions.len() * ACTION_BOUND <= crate::multipart::MAX_BODY {
        return true;
    }
    entry_fits(&crate::flow_stats::FlowStatsEntry::of_rule(
        spec,
        oxm_from_match(&spec.matcher),
        0,
        0,
        instructions_from_actions(&spec.actions),
    ))
}

/// Whether a group can be described in one OpenFlow message (its group
/// description entry).
pub fn group_fits_openflow(spec: &vsw_flow::GroupSpec) -> bool {
    group_fits(&group_desc_from_vsw(spec))
}

/// Whether a flow-stats entry fits one reply in every layout (1.3's and 1.4's, and
/// 1.5's with its counters inline).
pub(crate) fn entry_fits(entry: &crate::flow_stats::FlowStatsEntry) -> bool {
    [Version::V1_3, Version::V1_5].iter().all(|v| {
        let mut b = Vec::new();
        entry.encode(*v, &mut b);
        b.len() <= crate::multipart::MAX_BODY
    })
}

/// Whether a group description fits one reply in every layout.
pub(crate) fn group_fits(entry: &GroupDescEntry) -> bool {
    [Version::V1_3, Version::V1_5].iter().all(|v| {
        let mut b = Vec::new();
        entry.encode(*v, &mut b);
        b.len() <= crate::multipart::MAX_BODY
    })
}

/// vsw's `ct(…)` as NXAST_CT: NAT first within it, then the `exec` set-fields.
pub(crate) fn ct_from_vsw(ct: &vsw_flow::ct_action::CtAction) -> crate::nx_ct::CtWire<Action> {
    use crate::nx_ct::{
        CtWire, NatWire, NX_CT_F_COMMIT, NX_CT_F_FORCE, NX_CT_RECIRC_NONE, NX_NAT_F_DST,
        NX_NAT_F_PERSISTENT, NX_NAT_F_PROTO_HASH, NX_NAT_F_PROTO_RANDOM, NX_NAT_F_SRC,
    };
    use vsw_flow::ct_action::{CtExec, CtZone, NatEnd};
    let (zone_src, zone) = match ct.zone {
        CtZone::Imm(z) => (0, z),
        CtZone::Field(sf) => (
            header_of(sf.field),
            (u16::from(sf.ofs) << 6) | u16::from(sf.n_bits - 1),
        ),
    };
    let mut actions = Vec::new();
    if let Some(n) = &ct.nat {
        let mut flags = match n.end {
            Some(NatEnd::Src) => NX_NAT_F_SRC,
            Some(NatEnd::Dst) => NX_NAT_F_DST,
            None => 0,
        };
        for (on, bit) in [
            (n.persistent, NX_NAT_F_PERSISTENT),
            (n.hash, NX_NAT_F_PROTO_HASH),
            (n.random, NX_NAT_F_PROTO_RANDOM),
        ] {
            if on {
                flags |= bit;
            }
        }
        let mut w = NatWire {
            flags,
            ..NatWire::default()
        };
        match n.addrs {
            Some((std::net::IpAddr::V4(a), std::net::IpAddr::V4(b))) => {
                w.ipv4 = Some((a.into(), (a != b).then_some(b.into())));
            }
            Some((std::net::IpAddr::V6(a), std::net::IpAddr::V6(b))) => {
                w.ipv6 = Some((a.into(), (a != b).then_some(b.into())));
            }
            _ => {}
        }
        w.ports = n.ports.map(|(lo, hi)| (lo, (hi != lo).then_some(hi)));
        actions.push(Action::Nat(w));
    }
    for e in &ct.exec {
        let (field, value, mask) = match *e {
            CtExec::Mark(v, m) => (
                crate::oxm::CT_MARK,
                v.to_be_bytes().to_vec(),
                (m != u32::MAX).then(|| m.to_be_bytes().to_vec()),
            ),
            CtExec::Label(v, m) => (
                crate::oxm::CT_LABEL,
                v.to_be_bytes().to_vec(),
                (m != u128::MAX).then(|| m.to_be_bytes().to_vec()),
            ),
        };
        actions.push(Action::SetField(OxmField { field, value, mask }));
    }
    let mut flags = 0;
    if ct.commit {
        flags |= NX_CT_F_COMMIT;
    }
    if ct.force {
        flags |= NX_CT_F_FORCE;
    }
    CtWire {
        flags,
        zone_src,
        zone,
        recirc_table: ct.table.unwrap_or(NX_CT_RECIRC_NONE),
        alg: ct.alg,
        actions,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bounds `rule_fits_openflow` trusts without encoding: a match of every
    /// field masked, and each action at its largest, stay within them in every
    /// layout; at the bound's count of the largest action a rule still fits.
    #[test]
    fn size_bounds_hold() {
        let encoded = |spec: &vsw_flow::FlowSpec, v: Version| {
            let entry = crate::flow_stats::FlowStatsEntry::of_rule(
                spec,
                oxm_from_match(&spec.matcher),
                0,
                0,
                instructions_from_actions(&spec.actions),
            );
            let mut b = Vec::new();
            entry.encode(v, &mut b);
            b.len()
        };
        let mut all = vsw_packet::FlowKey::default();
        all.words_mut().iter_mut().for_each(|w| *w = u64::MAX);
        // Actions parsed under the match their prerequisites ask for, then put
        // under a match of every field masked.
        let widest = |groups: &[(&str, &str)]| {
            let mut spec = vsw_flow::parse_flow("actions=drop", &|_: &str| None).unwrap();
            spec.actions.clear();
            for (prefix, actions) in groups {
                let text = format!("{prefix}actions={actions}");
                spec.actions.extend(
                    vsw_flow::parse_flow(&text, &|_: &str| None)
                        .unwrap()
                        .actions,
                );
            }
            spec.matcher = vsw_flow::Match::new(vsw_packet::FlowKey::default(), all);
            spec
        };
        // Every action, the set-fields of the widest fields among them, and every
        // instruction the actions make.
        let groups: &[(&str, &str)] = &[
            (
                "",
                "write_metadata:0xffffffffffffffff/0xffffffffffffffff,meter:4096,\
                 set_field:0xffffffff->tun_metadata0,set_tunnel:0xffffffffffffffff,\
                 mod_dl_src:ff:ff:ff:ff:ff:ff,push_vlan:0x88a8,mod_vlan_vid:4095,\
                 mod_vlan_pcp:7,strip_vlan,resubmit(65279,254),group:4294967040,\
                 controller:65535,set_queue:4294967295,output:65279,IN_PORT,NORMAL,FLOOD,\
                 clear_actions,write_actions(output:65279),goto_table:254",
            ),
            (
                "ipv6,icmp6,icmp_type=135,",
                "set_field:ffff::ffff->ipv6_src,set_field:ffff::ffff->nd_target,\
                 set_field:0xfffff->ipv6_label,dec_ttl",
            ),
            (
                "tcp,",
                "mod_nw_src:255.255.255.255,mod_nw_tos:252,mod_tp_src:65535",
            ),
        ];
        for v in [Version::V1_3, Version::V1_5] {
            let bare = encoded(&widest(&[("", "drop")]), v);
            assert!(bare <= ENTRY_BOUND, "{v:?}: {bare}");
            let full = widest(groups);
            let size = encoded(&full, v);
            assert!(
                size <= ENTRY_BOUND + full.actions.len() * ACTION_BOUND,
                "{v:?}: {size} for {} actions",
                full.actions.len()
            );
            for (prefix, actions) in groups {
                for a in actions.split(',').filter(|a| !a.contains(['(', ')'])) {
                    let one = encoded(&widest(&[(prefix, a)]), v).saturating_sub(bare);
                    assert!(one <= ACTION_BOUND, "{a}: {one} bytes");
                }
            }
        }
        let most = (crate::multipart::MAX_BODY - ENTRY_BOUND) / ACTION_BOUND;
        let widest_set = vec!["set_field:ffff::ffff->ipv6_src"; most].join(",");
        let spec = widest(&[("ipv6,", &widest_set)]);
        assert!(rule_fits_openflow(&spec));
        for v in [Version::V1_3, Version::V1_5] {
            assert!(encoded(&spec, v) <= crate::multipart::MAX_BODY);
        }
    }
}
