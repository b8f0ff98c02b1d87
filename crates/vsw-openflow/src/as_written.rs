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

/// The buckets of a group-mod, to keep with its group.
pub fn written_buckets(gm: &GroupMod) -> Written {
    Written::new(gm.buckets.clone())
}

/// A group's description, its buckets as written; for a group not written over
/// OpenFlow, said from what it does.
pub fn echo_group_desc(spec: &GroupSpec) -> GroupDescEntry {
    let mut desc = group_desc_from_vsw(spec);
    if let Some(buckets) = spec.as_written.get::<Vec<OfBucket>>() {
        desc.buckets = buckets.clone();
    }
    desc
}
