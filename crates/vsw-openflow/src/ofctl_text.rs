//! OpenFlow flows in `ovs-ofctl`'s text syntax, which vsw-flow reads: how a flow-mod
//! reaches vsw's tables, through the same parser as `vswctl add-flow`, so both act
//! on the same tables with the same checks.
//!
//! What vsw cannot do yet is refused with the error OpenFlow names for it, never
//! half-installed: matches on MPLS and other fields vsw does not keep (BAD_FIELD),
//! output to TABLE outside a packet-out (BAD_OUT_PORT), set-fields of fields vsw
//! does not keep (MPLS, PBB: BAD_SET_TYPE).

use std::fmt::Write;
use std::net::{Ipv4Addr, Ipv6Addr};

use crate::flow_mod::{
    to_vsw_port, Action, BadFlowMod, FlowMod, Instruction, OFPP_ALL, OFPP_CONTROLLER, OFPP_FLOOD,
    OFPP_IN_PORT, OFPP_LOCAL, OFPP_MAX, OFPP_NORMAL, OFPP_TABLE,
};
use crate::group_mod::{
    BadGroupMod, GroupMod, OFPGT_ALL, OFPGT_FF, OFPGT_INDIRECT, OFPGT_SELECT, OFPG_ANY, OFPG_MAX,
};
use crate::meter_mod::{
    BadMeterMod, MeterMod, OFPMBT_DROP, OFPMBT_DSCP_REMARK, OFPMF_BURST, OFPMF_PKTPS, OFPMF_STATS,
};
use crate::oxm::{
    BadMatch, OxmField, OxmMatch, TUN_FLAGS, TUN_IPV4_DST, TUN_IPV4_SRC, TUN_METADATA0,
};

fn num(b: &[u8]) -> u128 {
    b.iter().fold(0u128, |n, x| (n << 8) | u128::from(*x))
}

fn mac(b: &[u8]) -> String {
    b.iter()
        .map(|x| format!("{x:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

fn ipv4(b: &[u8]) -> String {
    Ipv4Addr::from(num(b) as u32).to_string()
}

fn ipv6(b: &[u8]) -> String {
    Ipv6Addr::from(num(b)).to_string()
}

/// `value` or `value/mask` in the field's own notation.
fn masked(f: &OxmField, show: fn(&[u8]) -> String) -> String {
    match &f.mask {
        Some(m) => format!("{}/{}", show(&f.value), show(m)),
        None => show(&f.value),
    }
}

fn hex(b: &[u8]) -> String {
    format!("{:#x}", num(b))
}

/// The match part of a flow text (no leading comma); empty for "all".
pub fn match_text(m: &OxmMatch) -> Result<String, BadMatch> {
    let mut parts: Vec<String> = Vec::new();
    // vlan_vid and vlan_pcp are one field to vsw: the TCI (PCP above OFPVID_PRESENT,
    // which sits where the TCI's CFI bit does).
    let (mut tci, mut tci_mask) = (0u16, 0u16);
    let eth_type = m
        .fields
        .iter()
        .find(|f| f.field == 5)
        .map(|f| num(&f.value) as u16);
    for f in &m.fields {
        let text = match f.field {
            0 => format!("in_port={}", to_vsw_port(num(&f.value) as u32)),
            2 => format!("metadata={}", masked(f, hex)),
            38 => format!("tun_id={}", masked(f, hex)),
            TUN_IPV4_SRC => format!("tun_src={}", masked(f, ipv4)),
            TUN_IPV4_DST => format!("tun_dst={}", masked(f, ipv4)),
            TUN_METADATA0 => format!("tun_metadata0={}", masked(f, hex)),
            TUN_FLAGS => format!("tun_flags={}", masked(f, hex)),
            3 => format!("dl_dst={}", masked(f, mac)),
            4 => format!("dl_src={}", masked(f, mac)),
            5 => format!("dl_type={:#06x}", num(&f.value)),
            6 => {
                tci |= num(&f.value) as u16;
                tci_mask |= f.mask.as_deref().map_or(0x1fff, |k| num(k) as u16);
                continue;
            }
            7 => {
                tci |= (num(&f.value) as u16) << 13;
                tci_mask |= 0xe000;
                continue;
            }
            8 => format!("ip_dscp={}", num(&f.value)),
            9 => format!("nw_ecn={}", num(&f.value)),
            10 => format!("nw_proto={}", num(&f.value)),
            11 | 22 => format!("nw_src={}", masked(f, ipv4)),
            12 | 23 => format!("nw_dst={}", masked(f, ipv4)),
            13 | 15 | 17 => format!("tp_src={}", masked(f, hex)),
            14 | 16 | 18 => format!("tp_dst={}", masked(f, hex)),
            19 | 29 => format!("icmp_type={}", num(&f.value)),
            20 | 30 => format!("icmp_code={}", num(&f.value)),
            // An ARP opcode is the key's protocol number, as in Open vSwitch.
            21 if eth_type == Some(0x0806) => format!("nw_proto={}", num(&f.value)),
            24 => format!("arp_sha={}", masked(f, mac)),
            25 => format!("arp_tha={}", masked(f, mac)),
            26 => format!("ipv6_src={}", masked(f, ipv6)),
            27 => format!("ipv6_dst={}", masked(f, ipv6)),
            28 => format!("ipv6_label={}", masked(f, hex)),
            31 => format!("nd_target={}", ipv6(&f.value)),
            32 => format!("nd_sll={}", mac(&f.value)),
            33 => format!("nd_tll={}", mac(&f.value)),
            _ => return Err(BadMatch::BadField),
        };
        parts.push(text);
    }
    if tci_mask != 0 {
        parts.push(format!("vlan_tci={tci:#06x}/{tci_mask:#06x}"));
    }
    Ok(parts.join(","))
}

/// Where an action list is: a flow's, or a packet-out's (which may also send the
/// packet through the tables, output to TABLE).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    Flow,
    PacketOut,
}

fn action_text(a: &Action, place: Place) -> Result<String, BadFlowMod> {
    Ok(match a {
        Action::Output { port, max_len } => match *port {
            p if p < OFPP_MAX => format!("output:{p}"),
            OFPP_IN_PORT => "IN_PORT".into(),
            OFPP_NORMAL => "NORMAL".into(),
            OFPP_CONTROLLER => format!("controller:{max_len}"),
            OFPP_LOCAL => format!("output:{}", vsw_flow::LOCAL_PORT),
            OFPP_TABLE if place == Place::PacketOut => "resubmit(,0)".into(),
            // vsw's FLOOD is every port but the input, which is also what ALL
            // means without the input port; vsw does not flood back.
            OFPP_FLOOD | OFPP_ALL => "FLOOD".into(),
            _ => return Err(BadFlowMod::BadOutPort),
        },
        Action::PopVlan => "strip_vlan".into(),
        Action::DecNwTtl => "dec_ttl".into(),
        Action::PushVlan(t) => format!("push_vlan:{t:#06x}"),
        Action::SetField(f) => {
            let v = &f.value;
            match f.field {
                3 => format!("mod_dl_dst:{}", mac(v)),
                4 => format!("mod_dl_src:{}", mac(v)),
                6 => format!("mod_vlan_vid:{}", num(v) & 0xfff),
                7 => format!("mod_vlan_pcp:{}", num(v)),
                8 => format!("mod_nw_tos:{}", num(v) << 2),
                11 => format!("mod_nw_src:{}", ipv4(v)),
                12 => format!("mod_nw_dst:{}", ipv4(v)),
                13 | 15 | 17 => format!("mod_tp_src:{}", num(v)),
                14 | 16 | 18 => format!("mod_tp_dst:{}", num(v)),
                9 => format!("mod_nw_ecn:{}", num(v)),
                19 => format!("set_field:{}->icmp_type", num(v)),
                20 => format!("set_field:{}->icmp_code", num(v)),
                21 => format!("set_field:{}->arp_op", num(v)),
                22 => format!("set_field:{}->arp_spa", ipv4(v)),
                23 => format!("set_field:{}->arp_tpa", ipv4(v)),
                24 => format!("set_field:{}->arp_sha", mac(v)),
                25 => format!("set_field:{}->arp_tha", mac(v)),
                26 => format!("set_field:{}->ipv6_src", ipv6(v)),
                27 => format!("set_field:{}->ipv6_dst", ipv6(v)),
                28 => format!("set_field:{}->ipv6_label", hex(v)),
                29 => format!("set_field:{}->icmpv6_type", num(v)),
                30 => format!("set_field:{}->icmpv6_code", num(v)),
                31 => format!("set_field:{}->nd_target", ipv6(v)),
                32 => format!("set_field:{}->nd_sll", mac(v)),
                33 => format!("set_field:{}->nd_tll", mac(v)),
                38 => format!("set_tunnel:{}", hex(v)),
                TUN_IPV4_DST => format!("set_field:{}->tun_dst", ipv4(v)),
                TUN_METADATA0 => format!("set_field:{}->tun_metadata0", hex(v)),
                _ => return Err(BadFlowMod::BadSetField),
            }
        }
        Action::Group(g) => format!("group:{g}"),
        Action::Meter(m) => format!("meter:{m}"),
        // Accepted: vsw's ports have one queue each.
        Action::SetQueue(q) => format!("set_queue:{q}"),
        Action::CopyTtlOut => "copy_ttl_out".into(),
        Action::CopyTtlIn => "copy_ttl_in".into(),
        Action::SetNwTtl(t) => format!("mod_nw_ttl:{t}"),
    })
}

/// A flow-mod that adds or modifies may name a packet the switch buffered, to run
/// through the new flow; vsw buffers none (a packet-in carries the whole packet),
/// so such a flow-mod is refused whole, before it changes anything.
pub fn unbuffered(fm: &FlowMod) -> Result<(), BadFlowMod> {
    match fm.command {
        crate::flow_mod::Command::Delete | crate::flow_mod::Command::DeleteStrict => Ok(()),
        _ if fm.buffer_id == crate::flow_mod::OFP_NO_BUFFER => Ok(()),
        _ => Err(BadFlowMod::BufferUnknown),
    }
}

/// The actions part: apply-actions, then goto-table; `drop` when there are none.
pub fn actions_text(instructions: &[Instruction]) -> Result<String, BadFlowMod> {
    let mut acts: Vec<String> = Vec::new();
    let mut goto = None;
    // The meter instruction runs before the actions.
    if let Some(m) = instructions.iter().find_map(|i| match i {
        Instruction::Meter(m) => Some(*m),
        _ => None,
    }) {
        acts.push(format!("meter:{m}"));
    }
    for i in instructions {
        match i {
            Instruction::Meter(_) | Instruction::WriteActions(_) | Instruction::ClearActions => {}
            Instruction::ApplyActions(list) => {
                for a in list {
                    acts.push(action_text(a, Place::Flow)?);
                }
            }
            Instruction::GotoTable(t) => goto = Some(*t),
            Instruction::WriteMetadata { .. } => {}
        }
    }
    // After the applied actions: clear-actions, then write-actions (the spec's order).
    if instructions.contains(&Instruction::ClearActions) {
        acts.push("clear_actions".into());
    }
    if let Some(w) = instructions.iter().find_map(|i| match i {
        Instruction::WriteActions(w) => Some(w),
        _ => None,
    }) {
        let w = w
            .iter()
            .map(|a| action_text(a, Place::Flow))
            .collect::<Result<Vec<_>, _>>()?;
        acts.push(format!("write_actions({})", w.join(",")));
    }
    if let Some((metadata, mask)) = instructions.iter().find_map(|i| match i {
        Instruction::WriteMetadata { metadata, mask } => Some((*metadata, *mask)),
        _ => None,
    }) {
        acts.push(format!("write_metadata:{metadata:#x}/{mask:#x}"));
    }
    if let Some(t) = goto {
        acts.push(format!("goto_table:{t}"));
    }
    if acts.is_empty() {
        acts.push("drop".into());
    }
    Ok(acts.join(","))
}

/// A group-mod's group as `vswctl add-group` takes it (weights only in select
/// groups, as OpenFlow has them; watches where there are).
pub fn group_text(gm: &GroupMod) -> Result<String, BadGroupMod> {
    let kind = match gm.kind {
        OFPGT_ALL => "all",
        OFPGT_SELECT => "select",
        OFPGT_INDIRECT => "indirect",
        OFPGT_FF => "fast_failover",
        _ => return Err(BadGroupMod::BadType),
    };
    let mut t = format!("group_id={},type={kind}", gm.group_id);
    for b in &gm.buckets {
        t.push_str(",bucket=");
        if gm.kind == OFPGT_SELECT {
            let _ = write!(t, "weight:{},", b.weight);
        } else if b.weight != 0 {
            return Err(BadGroupMod::BadBucket);
        }
        match b.watch_port {
            crate::flow_mod::OFPP_ANY => {}
            p if p < OFPP_MAX || p == OFPP_LOCAL => {
                let _ = write!(t, "watch_port:{},", to_vsw_port(p));
            }
            _ => return Err(BadGroupMod::BadWatch),
        }
        match b.watch_group {
            OFPG_ANY => {}
            g if g <= OFPG_MAX => {
                let _ = write!(t, "watch_group:{g},");
            }
            _ => return Err(BadGroupMod::BadWatch),
        }
        let acts = b
            .actions
            .iter()
            .map(|a| action_text(a, Place::Flow))
            .collect::<Result<Vec<_>, _>>()?;
        let _ = write!(t, "actions={}", acts.join(","));
    }
    Ok(t)
}

/// A meter-mod's meter as `vswctl add-meter` takes it.
pub fn meter_text(mm: &MeterMod) -> Result<String, BadMeterMod> {
    let unit = if mm.flags & OFPMF_PKTPS != 0 {
        "pktps"
    } else {
        "kbps"
    };
    let burst = mm.flags & OFPMF_BURST != 0;
    let mut t = format!("meter={},{unit}", mm.meter_id);
    if burst {
        t.push_str(",burst");
    }
    if mm.flags & OFPMF_STATS != 0 {
        t.push_str(",stats");
    }
    let mut bands = Vec::new();
    for b in &mm.bands {
        if b.rate == 0 {
            return Err(BadMeterMod::BadRate);
        }
        if !burst && b.burst_size != 0 {
            return Err(BadMeterMod::BadBurst);
        }
        let mut s = match b.kind {
            OFPMBT_DROP => format!("type=drop,rate={}", b.rate),
            OFPMBT_DSCP_REMARK if (1..=3).contains(&b.prec_level) => format!(
                "type=dscp_remark,rate={},prec_level={}",
                b.rate, b.prec_level
            ),
            OFPMBT_DSCP_REMARK => return Err(BadMeterMod::BadBandValue),
            _ => return Err(BadMeterMod::BadBand),
        };
        if burst {
            let _ = write!(s, ",burst_size={}", b.burst_size);
        }
        bands.push(s);
    }
    if bands.is_empty() {
        return Err(BadMeterMod::BadBand);
    }
    if bands.len() > vsw_flow::meter::MAX_BANDS {
        return Err(BadMeterMod::OutOfBands);
    }
    let _ = write!(t, ",bands={}", bands.join(","));
    Ok(t)
}

/// A packet-out's actions (`drop` when there are none).
pub fn packet_out_text(actions: &[Action]) -> Result<String, BadFlowMod> {
    let acts = actions
        .iter()
        .map(|a| action_text(a, Place::PacketOut))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(if acts.is_empty() {
        "drop".into()
    } else {
        acts.join(",")
    })
}

/// The flow an add installs, as `vswctl add-flow` takes it.
pub fn add_text(fm: &FlowMod) -> Result<String, BadFlowMod> {
    unbuffered(fm)?;
    let mut t = format!("table={},priority={}", fm.table_id, fm.priority);
    if fm.cookie != 0 {
        let _ = write!(t, ",cookie={:#x}", fm.cookie);
    }
    if fm.flags & crate::flow_mod::OFPFF_SEND_FLOW_REM != 0 {
        t.push_str(",send_flow_rem");
    }
    if fm.idle_timeout != 0 {
        let _ = write!(t, ",idle_timeout={}", fm.idle_timeout);
    }
    if fm.hard_timeout != 0 {
        let _ = write!(t, ",hard_timeout={}", fm.hard_timeout);
    }
    let m = match_text(&fm.matcher)?;
    if !m.is_empty() {
        t.push(',');
        t.push_str(&m);
    }
    let _ = write!(t, ",actions={}", actions_text(&fm.instructions)?);
    Ok(t)
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

/// The selection as `vswctl del-flows` takes it (empty: every flow). An out_port
/// that is a reserved port selects by nothing vsw can name: refused.
pub fn selection_text(sel: &SelectionParts) -> Result<String, BadFlowMod> {
    let mut parts = Vec::new();
    if sel.table_id != 0xff {
        parts.push(format!("table={}", sel.table_id));
    }
    if let Some(p) = sel.strict_priority {
        parts.push(format!("priority={p}"));
    }
    if sel.cookie_mask != 0 {
        parts.push(format!("cookie={:#x}/{:#x}", sel.cookie, sel.cookie_mask));
    }
    match sel.out_port {
        crate::flow_mod::OFPP_ANY => {}
        p if p < OFPP_MAX || p == OFPP_LOCAL => parts.push(format!("out_port={}", to_vsw_port(p))),
        _ => return Err(BadFlowMod::BadOutPort),
    }
    if sel.out_group != crate::flow_mod::OFPG_ANY {
        parts.push(format!("out_group={}", sel.out_group));
    }
    let m = match_text(sel.matcher)?;
    if !m.is_empty() {
        parts.push(m);
    }
    Ok(parts.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{field, flow_mod as fm};

    #[test]
    fn a_flow_mod_naming_a_buffer_is_refused_unless_it_deletes() {
        use crate::flow_mod::Command;
        let mut m = fm(vec![], vec![]);
        assert!(add_text(&m).is_ok());
        m.buffer_id = 7;
        assert_eq!(add_text(&m), Err(BadFlowMod::BufferUnknown));
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

    #[test]
    fn a_tcp_flow_reads_as_ovs_ofctl_would_write_it() {
        let f = fm(
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
        assert_eq!(
            add_text(&f).unwrap(),
            "table=1,priority=100,idle_timeout=30,in_port=3,dl_type=0x0800,nw_proto=6,\
             nw_dst=198.18.0.0/255.255.255.0,tp_dst=0x50,vlan_tci=0x100a/0x1fff,\
             actions=mod_dl_dst:02:00:00:00:00:09,output:2,goto_table:2"
        );
        assert_eq!(
            selection_text(&SelectionParts::of_flow_mod(&f, true)).unwrap(),
            "table=1,priority=100,in_port=3,dl_type=0x0800,nw_proto=6,nw_dst=198.18.0.0/255.255.255.0,tp_dst=0x50,vlan_tci=0x100a/0x1fff"
        );
    }

    #[test]
    fn what_vsw_cannot_do_is_refused_with_its_error() {
        // MPLS: vsw keeps no MPLS label.
        let mpls = fm(
            vec![
                field(5, &[0x88, 0x47], None),
                field(34, &[0, 0, 1, 0], None),
            ],
            vec![],
        );
        assert_eq!(add_text(&mpls), Err(BadFlowMod::Match(BadMatch::BadField)));
        let meta = fm(vec![field(2, &[0, 0, 0, 0, 0, 0, 0, 5], None)], vec![]);
        assert!(add_text(&meta).unwrap().contains("metadata=0x5"));
        let local = fm(
            vec![],
            vec![Instruction::ApplyActions(vec![Action::Output {
                port: crate::flow_mod::OFPP_LOCAL,
                max_len: 0,
            }])],
        );
        // LOCAL is vsw's port 65534 (the bridge's own).
        assert!(add_text(&local).unwrap().ends_with("actions=output:65534"));
        let table = Action::Output {
            port: OFPP_TABLE,
            max_len: 0,
        };
        let to_table = fm(vec![], vec![Instruction::ApplyActions(vec![table.clone()])]);
        assert_eq!(add_text(&to_table), Err(BadFlowMod::BadOutPort));
        assert_eq!(packet_out_text(&[table]).unwrap(), "resubmit(,0)");
        let metadata = fm(
            vec![],
            vec![Instruction::WriteMetadata {
                metadata: 1,
                mask: 1,
            }],
        );
        assert!(add_text(&metadata)
            .unwrap()
            .ends_with("actions=write_metadata:0x1/0x1"));
        // The action set's instructions: after the applied actions, in the spec's order.
        let set = fm(
            vec![],
            vec![
                Instruction::WriteActions(vec![Action::Output {
                    port: 2,
                    max_len: 0,
                }]),
                Instruction::ClearActions,
                Instruction::GotoTable(3),
            ],
        );
        assert!(
            add_text(&set)
                .unwrap()
                .ends_with("actions=clear_actions,write_actions(output:2),goto_table:3"),
            "{:?}",
            add_text(&set)
        );
        assert_eq!(
            add_text(&fm(vec![], vec![])).unwrap(),
            "table=1,priority=100,idle_timeout=30,actions=drop"
        );
    }
}
