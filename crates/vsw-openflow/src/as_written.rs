//! Flows as the controller wrote them: what a flow-mod's match and instructions were,
//! kept with the rule (vsw-flow's `AsWritten`) and given back by flow statistics and
//! flow removals exactly — every field in its order, a mask exactly where one was
//! given, every action with every argument (`max_len`, a set-field's own field) —
//! as Open vSwitch gives back what it was given; a group-mod's buckets likewise
//! through group descriptions. A rule or group written some other way (`vswctl
//! add-flow`/`add-group`, its actions changed by `vswctl mod-flows`, or restored
//! from the state file) is said from what it does (`from_vsw`).

use vsw_flow::{FlowSpec, GroupSpec, Written};

use crate::flow_mod::{
    FlowMod, Instruction, OFPFF_NO_BYT_COUNTS, OFPFF_NO_PKT_COUNTS, OFPFF_SEND_FLOW_REM,
};
use crate::flow_stats::FlowStatsEntry;
use crate::from_vsw::{group_desc_from_vsw, instructions_from_actions, oxm_from_match};
use crate::group_mod::{GroupDescEntry, GroupMod, OfBucket};
use crate::oxm::OxmMatch;

/// The flags a flow keeps (Open vSwitch's `OFPUTIL_FF_STATE`): those that say how it
/// lives, not how one flow-mod was to be carried out (CHECK_OVERLAP, RESET_COUNTS).
const KEPT_FLAGS: u16 = OFPFF_SEND_FLOW_REM | OFPFF_NO_PKT_COUNTS | OFPFF_NO_BYT_COUNTS;

/// The match half: the match as it came on the wire (`ofp_match`, its OXM fields
/// and padding), and what the add said besides that a modify does not change. Kept
/// encoded — one allocation a rule, where the decoded fields take one per field and
/// mask — and decoded only when a controller asks.
struct WrittenMatch {
    wire: Box<[u8]>,
    flags: u16,
    importance: u16,
}

/// The instructions half, encoded as they came.
struct WrittenInstructions(Box<[u8]>);

/// The match half of an add, to keep with its rule.
pub fn written_match(fm: &FlowMod) -> Written {
    let mut wire = Vec::new();
    fm.matcher.encode(&mut wire);
    Written::new(WrittenMatch {
        wire: wire.into_boxed_slice(),
        flags: fm.flags & KEPT_FLAGS,
        importance: fm.importance,
    })
}

/// The instructions of an add or a modify, to keep with its rule.
pub fn written_instructions(fm: &FlowMod) -> Written {
    let mut wire = Vec::new();
    for i in &fm.instructions {
        i.encode(&mut wire);
    }
    Written::new(WrittenInstructions(wire.into_boxed_slice()))
}

/// A rule's match as written, its kept flags and its importance; for a rule not
/// written over OpenFlow, its match said from what it matches, and SEND_FLOW_REM.
pub fn echo_match(spec: &FlowSpec) -> (OxmMatch, u16, u16) {
    let written = spec.as_written.matcher.get::<WrittenMatch>().and_then(|w| {
        let (matcher, _) = OxmMatch::decode_from(&w.wire).ok()?;
        Some((matcher, w.flags, w.importance))
    });
    written.unwrap_or_else(|| {
        (
            oxm_from_match(&spec.matcher),
            if spec.send_flow_rem {
                OFPFF_SEND_FLOW_REM
            } else {
                0
            },
            0,
        )
    })
}

/// A rule's instructions as written; for one not written over OpenFlow, said from
/// its actions.
pub fn echo_instructions(spec: &FlowSpec) -> Vec<Instruction> {
    spec.as_written
        .actions
        .get::<WrittenInstructions>()
        .and_then(|w| Instruction::decode_list(&w.0).ok())
        .unwrap_or_else(|| instructions_from_actions(&spec.actions))
}

/// A group-mod's buckets (with their ids) and its properties.
struct WrittenGroup {
    buckets: Vec<OfBucket>,
    properties: Vec<u8>,
}

/// The buckets and properties of a group-mod, to keep with its group.
pub fn written_buckets(gm: &GroupMod) -> Written {
    Written::new(WrittenGroup {
        buckets: gm.buckets.clone(),
        properties: gm.properties.clone(),
    })
}

/// A group's description, its buckets as written; for a group not written over
/// OpenFlow, said from what it does.
pub fn echo_group_desc(spec: &GroupSpec) -> GroupDescEntry {
    let mut desc = group_desc_from_vsw(spec);
    if let Some(w) = spec.as_written.get::<WrittenGroup>() {
        desc.buckets = w.buckets.clone();
        desc.properties = w.properties.clone();
    }
    desc
}

/// At most what a flow-stats entry takes besides its match and instructions, in any
/// version (1.5's counters included).
const ENTRY_FIXED_BOUND: usize = 256;

/// Whether a rule can be said in one flow-stats reply, as it is echoed: a rule
/// kept as written is measured as written (its note, its masks), another as
/// `from_vsw` says it.
pub fn rule_fits_openflow(spec: &FlowSpec) -> bool {
    let matcher = spec.as_written.matcher.get::<WrittenMatch>();
    let actions = spec.as_written.actions.get::<WrittenInstructions>();
    if matcher.is_none() && actions.is_none() {
        return crate::from_vsw::rule_fits_openflow(spec);
    }
    // Cheap when it surely fits: the written bytes are what is echoed.
    if let (Some(m), Some(a)) = (matcher, actions) {
        if ENTRY_FIXED_BOUND + m.wire.len() + a.0.len() <= crate::multipart::MAX_BODY {
            return true;
        }
    }
    let (matcher, flags, importance) = echo_match(spec);
    crate::from_vsw::entry_fits(&FlowStatsEntry::of_rule(
        spec,
        matcher,
        flags,
        importance,
        echo_instructions(spec),
    ))
}

/// Whether a group can be described in one OpenFlow message, as it is echoed.
pub fn group_fits_openflow(spec: &GroupSpec) -> bool {
    crate::from_vsw::group_fits(&echo_group_desc(spec))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow_mod::{Action, Instruction};
    use crate::nx_action::NxAction;
    use crate::test_support::{field, flow_mod};

    /// A flow-mod that fits one message but whose echo would not (a note of
    /// nearly 64 KiB, which vsw's own actions leave out) is found too large, so
    /// that the switch refuses it rather than keep a flow no dump can show.
    #[test]
    fn a_rule_is_measured_as_it_is_echoed() {
        let small = flow_mod(
            vec![field(0, &[0, 0, 0, 1], None)],
            vec![Instruction::ApplyActions(vec![Action::Output {
                port: 2,
                max_len: 0,
            }])],
        );
        let spec = crate::to_vsw::flow_spec(&small).unwrap();
        assert!(rule_fits_openflow(&spec));
        // The flow-mod: 48 bytes, a 16-byte match, the instruction 65,464: 65,528
        // in all. Its 1.3 entry: 48 + 16 + 65,464, past the 65,519 a reply holds.
        let note = vec![0u8; 65_446];
        let big = flow_mod(
            vec![field(0, &[0, 0, 0, 1], None)],
            vec![Instruction::ApplyActions(vec![Action::Nx(NxAction::Note(
                note,
            ))])],
        );
        let spec = crate::to_vsw::flow_spec(&big).unwrap();
        assert!(
            crate::from_vsw::rule_fits_openflow(&spec),
            "vsw's own form is small"
        );
        assert!(!rule_fits_openflow(&spec), "the echo is not");
    }
}
