//! `controller(pause)`: the translation stops, the packet goes up with what it had
//! left (its note's continuation), and a resume with the packet and the fields the
//! controller sends back continues it — through resubmits and the action set.

use std::sync::Arc;

use vsw_datapath::DpAction::{self, Controller, Output};
use vsw_datapath::Upcall;
use vsw_flow::{parse_flow, MatchKey, Pipeline};
use vsw_ofproto::{Backer, Ofproto};
use vsw_packet::FlowKey;

fn bridge(flows: &[&str]) -> (Arc<Backer>, Arc<Ofproto>) {
    let mut p = Pipeline::new();
    for f in flows {
        p.insert(parse_flow(f, &|_: &str| None).unwrap(), 1);
    }
    let backer = Backer::new();
    let (slot, o) = Ofproto::join(&backer, "br", p).unwrap();
    o.set_ports(vec![1, 2, 3]);
    for port in 1..=3 {
        backer.set_port(slot, port, port).unwrap();
    }
    (backer, o)
}

fn frame() -> FlowKey {
    FlowKey {
        in_port: 1,
        dl_type: 0x0800,
        ..FlowKey::default()
    }
}

/// The paused packet's note: its number in the bridge and its continuation's check.
fn paused(actions: &[DpAction], o: &Ofproto) -> (u32, u64) {
    let Some(&Controller(n)) = actions.last() else {
        panic!("sent up last: {actions:?}")
    };
    let (_, note) = Backer::punt_note(n);
    let check = o.punt_note(note).unwrap().continuation_check().unwrap();
    (note, check)
}

#[test]
fn a_resume_continues_after_the_pause_with_the_fields_the_controller_sends_back() {
    let (backer, o) = bridge(&[
        "table=0,in_port=1,actions=load:5->NXM_NX_REG0[],resubmit(,1),output:3",
        "table=1,actions=controller(userdata=01,pause),resubmit(,2)",
        "table=2,reg0=5,actions=output:2",
        "table=2,priority=0,actions=drop",
    ]);
    let t = backer.translate(&frame(), 1_000, true);
    // Nothing after the pause runs now: not table 2's output, not table 0's.
    assert_eq!(t.actions.len(), 1, "{:?}", t.actions);
    let (note, check) = paused(&t.actions, &o);
    // The controller sends the packet back with the registers it was sent.
    let mut key = MatchKey::from(frame());
    key.pipeline.regs[0] = 5;
    let x = o.translate_resume(&key, note, check, 1_001).unwrap();
    assert_eq!(
        x.actions,
        vec![Output(2), Output(3)],
        "table 2, then table 0's rest"
    );
    // Another reg0 from the controller: table 2 drops, table 0's rest still runs.
    key.pipeline.regs[0] = 0;
    let x = o.translate_resume(&key, note, check, 1_002).unwrap();
    assert_eq!(x.actions, vec![Output(3)]);
    // Another check is another continuation's: nothing is resumed.
    assert!(o.translate_resume(&key, note, check ^ 1, 1_003).is_none());
    assert!(o.translate_resume(&key, note + 1, check, 1_003).is_none());
}

#[test]
fn the_action_set_and_the_stack_wait_for_the_resume_and_a_second_pause_keeps_the_rest() {
    let (backer, o) = bridge(&[
        "table=0,in_port=1,actions=push:NXM_OF_IN_PORT[],write_actions(output:3),\
         controller(pause),pop:NXM_NX_REG1[0..15],resubmit(,1),output:2",
        "table=1,reg1=1,actions=controller(pause),goto_table:2",
        "table=2,actions=write_actions(output:2)",
    ]);
    let t = backer.translate(&frame(), 1_000, true);
    assert_eq!(
        t.actions.len(),
        1,
        "the action set waits too: {:?}",
        t.actions
    );
    let (note, check) = paused(&t.actions, &o);
    let key = MatchKey::from(frame());
    // Resumed: the stack's in_port pops into reg1, table 1 pauses again.
    let x = o.translate_resume(&key, note, check, 1_001).unwrap();
    assert_eq!(x.actions.len(), 1, "{:?}", x.actions);
    let (again, check2) = paused(&x.actions, &o);
    assert_ne!((again, check2), (note, check));
    // The second resume runs table 2 (its write-actions replaces the output in
    // the set), then table 0's rest (output:2), then the action set.
    let mut key = MatchKey::from(frame());
    key.pipeline.regs[1] = 1;
    let x = o.translate_resume(&key, again, check2, 1_002).unwrap();
    assert_eq!(x.actions, vec![Output(2), Output(2)]);
}

#[test]
fn a_pause_in_a_clone_or_a_bucket_drops_the_packet() {
    let (backer, _o) = bridge(&["table=0,actions=clone(controller(pause)),output:2"]);
    assert!(backer.translate(&frame(), 1_000, true).actions.is_empty());
}

#[test]
fn a_trace_shows_the_registers_the_pipeline_left() {
    let (_backer, o) = bridge(&["table=0,in_port=1,actions=load:0x5->NXM_NX_REG0[],output:2"]);
    let text = o.trace(&frame(), 1_000).render();
    let last = text
        .lines()
        .find(|l| l.starts_with("Final flow:"))
        .expect("a final flow");
    assert!(last.contains("reg0=0x5"), "{text}");
    assert!(!last.contains("reg1"), "{text}");
}
