//! A flow's (or a group bucket's) instructions and actions as each OpenFlow
//! version reads them, whichever version wrote them (`as_written` keeps what was
//! written): Open vSwitch's reader of each version refuses what that version does
//! not have, so each is sent what Open vSwitch itself writes there — the meter as
//! an instruction or an action, loads and moves as 1.5's set-field and copy-field
//! or as Nicira's, Nicira's 1.0-only actions as OpenFlow's own.

use crate::flow_mod::{Action, Instruction};
use crate::version::Version;

/// A flow's instructions as `version` says them: 1.5 has the meter as an action
/// and loads as set-fields; 1.3 and 1.4 the meter as an instruction.
pub(crate) fn encode_instructions(
    version: Version,
    instructions: &[Instruction],
    out: &mut Vec<u8>,
) {
    let mut instructions = instructions.to_vec();
    nicira_1_0_as_openflow(&mut instructions);
    let instructions = if version >= Version::V1_5 {
        let mut i = meter_as_action(&instructions);
        loads_as_set_fields(&mut i);
        i
    } else {
        let mut i = meter_as_instruction(&instructions);
        copies_as_nicira(&mut i);
        i
    };
    for i in &instructions {
        i.encode(out);
    }
}

/// Before 1.5 a meter is an instruction of its own: a flow a 1.5 controller wrote
/// with a meter action reads, in 1.3 and 1.4, with the meter instruction first (an
/// apply-actions left empty by it is left out).
pub(crate) fn meter_as_instruction(instructions: &[Instruction]) -> Vec<Instruction> {
    let mut meter = None;
    let mut out: Vec<Instruction> = instructions
        .iter()
        .filter_map(|i| match i {
            Instruction::ApplyActions(list)
                if meter.is_none() && list.iter().any(|a| matches!(a, Action::Meter(_))) =>
            {
                let mut rest = Vec::with_capacity(list.len());
                for a in list {
                    match a {
                        Action::Meter(m) if meter.is_none() => meter = Some(*m),
                        other => rest.push(other.clone()),
                    }
                }
                (!rest.is_empty()).then_some(Instruction::ApplyActions(rest))
            }
            other => Some(other.clone()),
        })
        .collect();
    if let Some(m) = meter {
        out.insert(0, Instruction::Meter(m));
    }
    out
}

/// A group bucket's actions as `version` reads them: the conversions a flow's
/// instructions get ([`encode_instructions`]), on one action list.
pub(crate) fn actions_as_version(version: Version, actions: &[Action]) -> Vec<Action> {
    let mut i = vec![Instruction::ApplyActions(actions.to_vec())];
    nicira_1_0_as_openflow(&mut i);
    if version >= Version::V1_5 {
        loads_as_set_fields(&mut i);
    } else {
        copies_as_nicira(&mut i);
    }
    match i.pop() {
        Some(Instruction::ApplyActions(list)) => list,
        _ => actions.to_vec(),
    }
}

/// Nicira's actions Open vSwitch takes in 1.0 only (`dec_ttl` and the MPLS ones;
/// 1.1 on has OpenFlow's own, and Open vSwitch's reader refuses Nicira's there):
/// a flow written with them (os-ken sends them in 1.3) is read as OpenFlow's.
pub fn nicira_1_0_as_openflow(instructions: &mut [Instruction]) {
    use crate::nx_action::NxAction;
    fn actions(list: &mut [Action]) {
        for a in list {
            let of = match a {
                Action::Nx(NxAction::DecTtl) => Action::DecNwTtl,
                Action::Nx(NxAction::PushMpls(t)) => Action::PushMpls(*t),
                Action::Nx(NxAction::PopMpls(t)) => Action::PopMpls(*t),
                Action::Nx(NxAction::SetMplsTtl(t)) => Action::SetMplsTtl(*t),
                Action::Nx(NxAction::DecMplsTtl) => Action::DecMplsTtl,
                Action::Nx(NxAction::SetMplsLabel(l)) => Action::SetMplsLabel(*l),
                Action::Nx(NxAction::SetMplsTc(t)) => Action::SetMplsTc(*t),
                Action::Clone(inner) => {
                    actions(inner);
                    continue;
                }
                _ => continue,
            };
            *a = of;
        }
    }
    for i in instructions {
        if let Instruction::ApplyActions(list) | Instruction::WriteActions(list) = i {
            actions(list);
        }
    }
}

/// Before 1.5 there is no copy-field and no masked set-field: a flow written in
/// 1.5 is read in 1.2–1.4 as Open vSwitch writes it there, NXAST_REG_MOVE and
/// NXAST_REG_LOAD2.
pub fn copies_as_nicira(instructions: &mut [Instruction]) {
    fn actions(list: &mut [Action]) {
        for a in list {
            match a {
                Action::CopyField(c) => *a = Action::Nx(crate::nx_action::NxAction::RegMove(*c)),
                Action::SetField(f) if f.mask.is_some() => {
                    *a = Action::Nx(crate::nx_action::masked_set_field_as_load(f));
                }
                Action::Clone(inner) => actions(inner),
                _ => {}
            }
        }
    }
    for i in instructions {
        if let Instruction::ApplyActions(list) | Instruction::WriteActions(list) = i {
            actions(list);
        }
    }
}

/// 1.5 has no meter instruction: the meter is the first action applied.
/// OpenFlow 1.5 has no NXAST_REG_LOAD, REG_LOAD2 or REG_MOVE (Open vSwitch's 1.5
/// reader refuses them): a load is the masked set-field it is, a move the
/// copy-field, as Open vSwitch sends them to a 1.5 reader, wherever they stand.
pub fn loads_as_set_fields(instructions: &mut [Instruction]) {
    fn actions(list: &mut [Action]) {
        for a in list {
            match a {
                Action::Nx(crate::nx_action::NxAction::RegLoad {
                    ofs_nbits,
                    dst,
                    value,
                }) => {
                    if let Some(set) = reg_load_as_set_field(*ofs_nbits, *dst, *value) {
                        *a = set;
                    }
                }
                // 1.5 has no NXAST_REG_LOAD2 either: its masked set-field is it;
                // nor NXAST_REG_MOVE: its copy-field is it.
                Action::Nx(crate::nx_action::NxAction::RegLoad2(f)) => {
                    *a = Action::SetField(f.clone());
                }
                Action::Nx(crate::nx_action::NxAction::RegMove(c)) => {
                    *a = Action::CopyField(*c);
                }
                Action::Clone(inner) => actions(inner),
                _ => {}
            }
        }
    }
    for i in instructions {
        if let Instruction::ApplyActions(list) | Instruction::WriteActions(list) = i {
            actions(list);
        }
    }
}

/// NXAST_REG_LOAD's bits as a masked set-field of its field, if OXM names it.
fn reg_load_as_set_field(ofs_nbits: u16, dst: u32, value: u64) -> Option<Action> {
    let (class, number, _, len) = crate::nx_action::nxm_header_parts(dst);
    let id = crate::oxm::field_of_wire(class, number)?;
    let (ofs, n_bits) = (u32::from(ofs_nbits >> 6), u32::from(ofs_nbits & 0x3f) + 1);
    // The field's own value length where the OXM table has it (NXM names
    // tun_metadata0 with its longest, 124, where vsw's value is 4 bytes), else the
    // header's.
    let bytes = crate::oxm::field_def(id).map_or(usize::from(len), |d| usize::from(d.len));
    if bytes == 0 || bytes > 16 || ofs + n_bits > 8 * bytes as u32 {
        return None;
    }
    let mask = vsw_flow::subfield::ones(n_bits) << ofs;
    let be = |v: u128| v.to_be_bytes()[16 - bytes..].to_vec();
    Some(Action::SetField(crate::oxm::OxmField {
        field: id,
        value: be((u128::from(value) << ofs) & mask),
        mask: (mask != vsw_flow::subfield::ones(8 * bytes as u32)).then(|| be(mask)),
    }))
}

fn meter_as_action(instructions: &[Instruction]) -> Vec<Instruction> {
    let Some(m) = instructions.iter().find_map(|i| match i {
        Instruction::Meter(m) => Some(*m),
        _ => None,
    }) else {
        return instructions.to_vec();
    };
    let mut out: Vec<Instruction> = instructions
        .iter()
        .filter(|i| !matches!(i, Instruction::Meter(_)))
        .cloned()
        .collect();
    match out
        .iter_mut()
        .find(|i| matches!(i, Instruction::ApplyActions(_)))
    {
        Some(Instruction::ApplyActions(list)) => list.insert(0, Action::Meter(m)),
        _ => out.insert(0, Instruction::ApplyActions(vec![Action::Meter(m)])),
    }
    out
}
