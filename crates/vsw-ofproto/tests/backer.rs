//! The backer: several bridges on one datapath, their numbers, patch crossings and
//! recirculations, through the public API.

use std::sync::Arc;

use vsw_datapath::DpAction::{self, Controller, Meter, Output};
use vsw_datapath::Upcall;
use vsw_flow::parse_flow;
use vsw_flow::Pipeline;
use vsw_ofproto::{Backer, BackerError, BridgeSlot, Ofproto};
use vsw_packet::rewrite::{FieldWrite, NshField};
use vsw_packet::wire::nsh::{Nsh, NshBase};
use vsw_packet::FlowKey;

/// Select group 1 of every test pipeline: three buckets by weight 1, 2, 1;
/// the last one out of port 2 (a patch port, where there is one).
const SELECT: &str = "group_id=1,type=select,\
    bucket=weight:1,actions=output:1,\
    bucket=weight:2,actions=mod_tp_dst:7,output:1,\
    bucket=weight:1,actions=output:2";

fn pipeline(flows: &[&str]) -> Pipeline {
    let mut p = Pipeline::new();
    let select = vsw_flow::parse_group(SELECT, &|_: &str| None).unwrap();
    p.set_group(select, false, 1).unwrap();
    for f in flows {
        p.insert(parse_flow(f, &|_: &str| None).unwrap(), 1);
    }
    p
}

/// Bridge `name` of `backer` with these rules, its OpenFlow ports `(of, dp)`: each
/// with its datapath port.
fn bridge(
    backer: &Arc<Backer>,
    name: &str,
    flows: &[&str],
    ports: &[(u32, u32)],
) -> (BridgeSlot, Arc<Ofproto>) {
    let (slot, o) = Ofproto::join(backer, name, pipeline(flows)).unwrap();
    o.set_ports(ports.iter().map(|(of, _)| *of).collect());
    for (of, dp) in ports {
        backer.set_port(slot, *of, *dp).unwrap();
    }
    (slot, o)
}

fn key(in_port: u32) -> FlowKey {
    FlowKey {
        in_port,
        dl_type: 0x0800,
        ..FlowKey::default()
    }
}

fn udp_from(in_port: u32, src: u8, dst: u8) -> FlowKey {
    FlowKey {
        in_port,
        dl_src: vsw_packet::MacAddr([2, 0, 0, 0, 0, src]),
        dl_dst: vsw_packet::MacAddr([2, 0, 0, 0, 0, dst]),
        dl_type: 0x0800,
        nw_proto: 17,
        nw_src: 0xc612_0001,
        nw_dst: 0xc612_0002,
        nw_ttl: 64,
        tp_src: 1000,
        tp_dst: 53,
        ..FlowKey::default()
    }
}

/// Bridges a (ports 1, 2 = patch to b's 2) and b (ports 1, 2 = patch), in
/// datapath ports a1 = 1, apatch = 2, b1 = 3, bpatch = 4.
/// Also each bridge's slow path, `[a, b]`.
fn patched(
    a_flows: &[&str],
    b_flows: &[&str],
) -> (Arc<Backer>, BridgeSlot, BridgeSlot, [Arc<Ofproto>; 2]) {
    let backer = Backer::new();
    let (a, oa) = Ofproto::join(&backer, "bra", pipeline(a_flows)).unwrap();
    let (b, ob) = Ofproto::join(&backer, "brb", pipeline(b_flows)).unwrap();
    oa.set_ports(vec![1, 2]);
    ob.set_ports(vec![1, 2]);
    for (slot, of, dp) in [(a, 1, 1), (a, 2, 2), (b, 1, 3), (b, 2, 4)] {
        backer.set_port(slot, of, dp).unwrap();
    }
    backer.set_patch(a, 2, "pa", "pb");
    (backer, a, b, [oa, ob])
}

/// Snooping on two bridges joined by a patch: a query from b's router crosses
/// into a (which learns the patch as its router), a's member reports back across
/// it (b learns the patch as the member's way), and the group's data from the
/// router reaches the member, through both bridges' tables.
#[test]
fn membership_messages_crossing_a_patch_teach_both_bridges() {
    use vsw_packet::builder::{igmp, igmp_frame, multicast_mac, udp4_frame};
    use vsw_packet::mcast::igmp::{QUERY, V2_REPORT};
    let (backer, _a, b, [oa, ob]) = patched(&["actions=NORMAL"], &["actions=NORMAL"]);
    backer.set_patch(b, 2, "pb", "pa");
    for o in [&oa, &ob] {
        assert!(o.set_mcast_snooping(vsw_flow::McastConfig {
            enabled: true,
            ..Default::default()
        }));
    }
    let key_of = |frame: &[u8], port| {
        let mut k = FlowKey::default();
        vsw_packet::extract(frame, port, None, &mut k).unwrap();
        k
    };
    let group = [239, 1, 1, 1];
    let host = |n: u8| (vsw_packet::MacAddr([2, 0, 0, 0, 0, n]), [198, 18, 0, n]);
    // The router is on b's port 1 (datapath port 3); the member on a's port 1.
    let query = igmp_frame(host(9), [224, 0, 0, 1], &igmp(QUERY, [0; 4]));
    backer.translate_packet(&key_of(&query, 3), &query, 1);
    let report = igmp_frame(host(1), group, &igmp(V2_REPORT, group));
    let sent = backer.translate_packet(&key_of(&report, 1), &report, 1);
    // a sends it to its router, the patch; b to its own, port 1.
    assert_eq!(sent.actions, vec![Output(3)]);
    let member_of = |o: &Ofproto| {
        o.mcast_entries(1)
            .iter()
            .filter(|e| e.group.is_some())
            .map(|e| e.port)
            .collect::<Vec<_>>()
    };
    assert_eq!(member_of(&oa), vec![1]);
    assert_eq!(
        member_of(&ob),
        vec![2],
        "b learns the patch as the member's way"
    );
    let mut data = udp4_frame([198, 18, 0, 9], group, 5000, 5001, 20);
    data[..6].copy_from_slice(&multicast_mac(group.into()).0);
    assert_eq!(
        backer.translate(&key_of(&data, 3), 1, true).actions,
        vec![Output(1)]
    );
    // The host joins through b's LOCAL port: its report is read too.
    backer.set_port(b, vsw_flow::LOCAL_PORT, 9).unwrap();
    let from_host = igmp_frame(host(7), group, &igmp(V2_REPORT, group));
    backer
        .from_local("brb", &from_host, 1)
        .expect("brb has a LOCAL port");
    assert_eq!(
        member_of(&ob),
        vec![2, vsw_flow::LOCAL_PORT],
        "the host's report joins LOCAL"
    );
}

#[test]
fn a_patch_port_continues_the_translation_in_its_peers_bridge() {
    let (backer, _a, b, _o) = patched(
        &["in_port=1,actions=output:2"],
        &["in_port=2,udp,actions=mod_tp_dst:99,output:1"],
    );
    // One end alone joins nothing: the output goes to the patch's own datapath
    // port (which carries nothing).
    assert_eq!(
        backer.translate(&udp_from(1, 1, 2), 0, false).actions,
        vec![Output(2)]
    );
    backer.set_patch(b, 2, "pb", "pa");
    let t = backer.translate(&udp_from(1, 1, 2), 0, false);
    // b's rewrite: on the packet itself, as nothing of a's follows it.
    assert_eq!(t.actions, vec![DpAction::SetTpDst(99), Output(3)]);
    let (backer, _a, b, _o) = patched(
        &["in_port=1,actions=output:2,in_port"],
        &["in_port=2,udp,actions=mod_tp_dst:99,output:1"],
    );
    backer.set_patch(b, 2, "pb", "pa");
    // With a's output after it: on a copy.
    assert_eq!(
        backer.translate(&udp_from(1, 1, 2), 0, false).actions,
        vec![
            DpAction::Save,
            DpAction::SetTpDst(99),
            Output(3),
            DpAction::Restore,
            Output(1)
        ]
    );
    // b's tables looked at the packet's protocol: one megaflow for both.
    assert_eq!(t.mask.nw_proto, u8::MAX);
    assert_eq!(t.mask.in_port, u32::MAX);
    // The other way, and NORMAL across.
    let (backer, _, b, _o) = patched(&["actions=NORMAL"], &["actions=NORMAL"]);
    backer.set_patch(b, 2, "pb", "pa");
    // Unknown destination: a floods to its port 1 and across; b floods to its 1.
    let t = backer.translate(&udp_from(3, 7, 8), 0, true);
    assert_eq!(
        t.actions,
        vec![Output(1)],
        "from b's 1: b floods across to a's 1"
    );
    let t = backer.translate(&udp_from(1, 8, 7), 0, true);
    assert_eq!(
        t.actions,
        vec![Output(3)],
        "a learned 8 on its 1, b learned 7 on its 1"
    );
    // Gone with a port: the patch joins nothing any more.
    backer.remove_port(4);
    let t = backer.translate(&udp_from(1, 8, 9), 0, false);
    assert_eq!(
        t.actions,
        vec![Output(2)],
        "flooded to a's patch port alone"
    );
}

#[test]
fn a_patch_back_into_a_bridge_on_the_way_and_one_within_a_bridge_go_nowhere() {
    // a's 2 ↔ b's 2, and b sends everything back across.
    let (backer, _, b, _o) = patched(&["actions=output:2"], &["actions=IN_PORT"]);
    backer.set_patch(b, 2, "pb", "pa");
    let t = backer.translate(&udp_from(1, 1, 2), 0, false);
    assert!(t.actions.is_empty(), "{:?}", t.actions);
    let (backer, a, _, _o) = patched(&["in_port=1,actions=output:2"], &[]);
    backer.set_port(a, 3, 5).unwrap();
    backer.set_patch(a, 2, "pa", "pa3");
    backer.set_patch(a, 3, "pa3", "pa");
    assert!(backer
        .translate(&udp_from(1, 1, 2), 0, false)
        .actions
        .is_empty());
}

#[test]
fn each_bridge_translates_its_own_ports_in_its_own_numbers() {
    let b = Backer::new();
    let (a, oa) = Ofproto::join(&b, "br", pipeline(&["in_port=1,actions=output:2"])).unwrap();
    let (c, oc) = Ofproto::join(
        &b,
        "br",
        pipeline(&["in_port=1,actions=meter:3,output:65534"]),
    )
    .unwrap();
    assert_ne!(a, c);
    oa.set_ports(vec![1, 2]);
    oc.set_ports(vec![1, 65534]);
    // a: 1 → dp 1, 2 → dp 2; c: 1 → dp 3, LOCAL → dp 4.
    b.set_port(a, 1, 1).unwrap();
    b.set_port(a, 2, 2).unwrap();
    b.set_port(c, 1, 3).unwrap();
    b.set_port(c, 65534, 4).unwrap();
    assert_eq!(b.translate(&key(1), 0, false).actions, vec![Output(2)]);
    assert_eq!(
        b.translate(&key(3), 0, false).actions,
        vec![Meter(Backer::dp_meter(c, 3)), Output(4)]
    );
    assert_ne!(Backer::dp_meter(a, 3), Backer::dp_meter(c, 3));
    // Not a port of any bridge: dropped, its in_port in the mask.
    let t = b.translate(&key(9), 0, false);
    assert!(t.actions.is_empty());
    assert_eq!(t.mask.in_port, u32::MAX);
    assert_eq!(b.of_port(4), Some((c, 65534)));
    assert_eq!(b.dp_port(a, 2), Some(2));
    assert_eq!(b.set_port(c, 2, 1), Err(BackerError::PortInUse(1)));
}

#[test]
fn an_output_to_a_port_with_no_datapath_port_is_left_out() {
    let b = Backer::new();
    let (a, o) =
        Ofproto::join(&b, "br", pipeline(&["in_port=1,actions=output:2,output:3"])).unwrap();
    o.set_ports(vec![1, 2, 3]);
    b.set_port(a, 1, 7).unwrap();
    b.set_port(a, 3, 8).unwrap();
    assert_eq!(b.translate(&key(7), 0, false).actions, vec![Output(8)]);
    b.remove_port(8);
    assert!(b.translate(&key(7), 0, false).actions.is_empty());
}

#[test]
fn notes_name_their_bridge_and_every_change_moves_the_generation() {
    let b = Backer::new();
    let (_, _) = Ofproto::join(&b, "br", Pipeline::new()).unwrap();
    let (c, o) = Ofproto::join(&b, "br", pipeline(&["actions=controller"])).unwrap();
    o.set_ports(vec![1]);
    let g = b.generation();
    b.set_port(c, 1, 5).unwrap();
    assert!(b.generation() > g, "a port mapped");
    let g = b.generation();
    o.set_pipeline(pipeline(&["actions=controller:100"]));
    assert!(b.generation() > g, "a bridge's change is the backer's");
    let t = b.translate(&key(5), 0, false);
    let [Controller(n)] = t.actions[..] else {
        panic!("{:?}", t.actions)
    };
    let (slot, note) = Backer::punt_note(n);
    assert_eq!(slot, c);
    assert_eq!(o.punt_note(note).unwrap().max_len, 100);
    b.remove_bridge(c);
    assert!(b.translate(&key(5), 0, false).actions.is_empty());
    assert!(!b.has_bridge(c));
}

/// The next pass of `key` after `recirc(id)`, with hash `dp_hash`.
/// A backer with one bridge of `p` and `group`, its ports 1 and 2 datapath ports 1
/// and 2.
fn one_bridge(mut p: Pipeline, group: &str) -> Arc<Backer> {
    p.set_group(
        vsw_flow::parse_group(group, &|_: &str| None).unwrap(),
        false,
        1,
    )
    .unwrap();
    let backer = Backer::new();
    let (a, o) = Ofproto::join(&backer, "br", p).unwrap();
    o.set_ports(vec![1, 2]);
    backer.set_port(a, 1, 1).unwrap();
    backer.set_port(a, 2, 2).unwrap();
    backer
}

fn next_pass(key: &FlowKey, id: u32, dp_hash: u32) -> FlowKey {
    FlowKey {
        recirc_id: id,
        dp_hash,
        ..*key
    }
}

fn recirc_of(actions: &[DpAction]) -> Option<u32> {
    actions.iter().find_map(|a| match a {
        DpAction::Recirc(id) => Some(*id),
        _ => None,
    })
}

#[test]
fn a_select_group_is_decided_by_the_datapaths_hash_on_a_second_pass() {
    let (backer, a, _, _o) = patched(&["in_port=2,ip,actions=mod_nw_tos:8,group:1,output:1"], &[]);
    // From port 2 (only a's end of the patch is there: a plain port).
    let k = udp_from(2, 1, 2);
    let t = backer.translate(&k, 0, false);
    let Some(id) = recirc_of(&t.actions) else {
        panic!("{:?}", t.actions)
    };
    assert_eq!(
        t.actions,
        vec![
            DpAction::SetNwTos(8),
            DpAction::Save,
            DpAction::Hash,
            DpAction::Recirc(id),
            DpAction::Restore,
            Output(1)
        ],
        "the group on a copy; what follows it on the packet as it was"
    );
    // The first pass looks at no address or port for the group.
    assert_eq!((t.mask.nw_src, t.mask.tp_src, t.mask.tp_dst), (0, 0, 0));
    let state = backer.frozen_state(id).unwrap();
    assert_eq!((state.slot, state.in_port), (a, 2));
    // The same freeze point gets the same number.
    let again = backer.translate(&udp_from(2, 5, 6), 0, false);
    assert_eq!(recirc_of(&again.actions), Some(id));
    // The second pass: the bucket by the hash's low bits, in proportion to the
    // weights (1:2:1 over 256 slots: 64, 128, 64), each flow matching the largest
    // aligned run of its bucket's slots (4 flows: 0–63, 64–127, 128–191, 192–255).
    let slots = vsw_ofproto::xlate::hash_slots(3);
    assert_eq!(slots, 256);
    let mut chosen = [0; 3];
    let mut flows = std::collections::BTreeSet::new();
    for h in 0..slots {
        let p = backer.translate(&next_pass(&k, id, h | 0xabc0_0000), 0, false);
        let (dp_hash, nw_src) = (p.mask.dp_hash, p.mask.nw_src);
        assert_eq!(dp_hash & !(slots - 1), 0, "the hash's low bits only");
        flows.insert((dp_hash, h & dp_hash));
        assert_eq!(nw_src, 0);
        let bucket = match &p.actions[..] {
            [Output(1)] => 0,
            [DpAction::SetTpDst(7), Output(1)] => 1,
            // Out of the port it came in by: nowhere.
            [] => 2,
            other => panic!("{other:?}"),
        };
        chosen[bucket] += 1;
    }
    assert_eq!(chosen, [64, 128, 64]);
    assert_eq!(flows.len(), 4, "{flows:?}");
    // A number no state has (or a bridge's that went) drops, for itself alone.
    let gone = backer.translate(&next_pass(&k, id + 100, 0), 0, false);
    assert!(gone.actions.is_empty());
    assert_eq!(gone.mask.recirc_id, u32::MAX);
    backer.remove_bridge(a);
    assert!(backer.frozen_state(id).is_none());
    assert!(backer
        .translate(&next_pass(&k, id, 0), 0, false)
        .actions
        .is_empty());
}

/// A frozen state lives while a datapath flow's translation holds it (either pass),
/// and goes at the revalidator's first pass after its grace once none does.
#[test]
fn a_frozen_state_goes_once_no_flow_holds_it() {
    use vsw_ofproto::frozen::GRACE_MS;
    let (backer, _, _, _o) = patched(&["in_port=2,ip,actions=group:1"], &[]);
    let k = udp_from(2, 1, 2);
    let first = backer.translate(&k, 1_000, false);
    let id = recirc_of(&first.actions).unwrap();
    let second = backer.translate(&next_pass(&k, id, 3), 1_000, false);
    assert!(!second.actions.is_empty());
    drop(first);
    // The second pass's flow alone keeps it, past the grace.
    backer.revalidating(1_000 + GRACE_MS);
    assert!(backer.frozen_state(id).is_some());
    drop(second);
    backer.revalidating(1_000 + GRACE_MS - 1);
    assert!(backer.frozen_state(id).is_some(), "within its grace");
    backer.revalidating(1_000 + GRACE_MS);
    assert!(backer.frozen_state(id).is_none());
    assert_eq!(backer.frozen_count(), 0);
    // A packet there again freezes anew, under a number not given before.
    let again = recirc_of(&backer.translate(&k, 20_000, false).actions).unwrap();
    assert!(again > id);
}

/// A packet a resumed select bucket sends up names the rule that reached the group
/// (its cookie), as it would have without the recirculation.
#[test]
fn a_packet_in_from_a_resumed_bucket_carries_the_rules_cookie() {
    let backer = Backer::new();
    let mut p = pipeline(&["cookie=0x42,in_port=2,ip,actions=group:7"]);
    let group = "group_id=7,type=select,bucket=actions=controller:99";
    p.set_group(
        vsw_flow::parse_group(group, &|_: &str| None).unwrap(),
        false,
        1,
    )
    .unwrap();
    let (a, o) = Ofproto::join(&backer, "bra", p).unwrap();
    o.set_ports(vec![1, 2]);
    backer.set_port(a, 2, 2).unwrap();
    let k = udp_from(2, 1, 2);
    let first = backer.translate(&k, 0, false);
    let id = recirc_of(&first.actions).unwrap();
    let second = backer.translate(&next_pass(&k, id, 0), 0, false);
    let [Controller(n)] = second.actions[..] else {
        panic!("{:?}", second.actions)
    };
    let (slot, note) = Backer::punt_note(n);
    assert_eq!(slot, a);
    let note = o.punt_note(note).unwrap();
    assert_eq!((note.cookie, note.max_len), (0x42, 99));
}

#[test]
fn a_resumed_pass_sees_its_own_packets_tunnel() {
    // Group 2's one bucket looks at the tunnel ID (table 1): packets of two
    // tunnels share the first pass's flow and its number, not the second's.
    let p = pipeline(&[
        "table=0,in_port=2,actions=group:2",
        "table=1,tun_id=5,actions=output:1",
        "table=1,tun_id=6,actions=in_port",
    ]);
    let group = "group_id=2,type=select,bucket=resubmit(,1)";
    let backer = one_bridge(p, group);
    let tunnel = |id: u64| FlowKey {
        tun_id: id,
        ..udp_from(2, 1, 2)
    };
    let first = |k: &FlowKey| recirc_of(&backer.translate(k, 0, false).actions).unwrap();
    let id = first(&tunnel(5));
    assert_eq!(first(&tunnel(6)), id);
    let five = backer.translate(&next_pass(&tunnel(5), id, 0), 0, false);
    let six = backer.translate(&next_pass(&tunnel(6), id, 0), 0, false);
    assert_eq!(five.actions, vec![Output(1)]);
    assert_eq!(six.actions, vec![Output(2)]);
    let tun_id = five.mask.tun_id;
    assert_eq!(
        tun_id,
        u64::MAX,
        "the second pass's flow matches the tunnel"
    );
}

/// What the registers and the stack held when a select group froze the translation
/// is what its resumed bucket sees: two values of reg0 freeze under two numbers, and
/// the second pass's flows need not match anything for it.
#[test]
fn a_resumed_pass_sees_the_registers_and_the_stack_it_froze_with() {
    let p = pipeline(&[
        "table=0,in_port=2,udp,actions=move:NXM_OF_ETH_SRC[0..7]->NXM_NX_REG0[0..7],push:NXM_NX_REG0[],group:2",
        "table=1,reg0=1,reg1=1,actions=output:1",
        "table=1,reg0=3,reg1=3,actions=in_port",
    ]);
    let group = "group_id=2,type=select,bucket=pop:NXM_NX_REG1[],resubmit(,1)";
    let backer = one_bridge(p, group);
    let first = backer.translate(&udp_from(2, 1, 2), 0, false);
    let one = recirc_of(&first.actions).unwrap();
    let three = recirc_of(&backer.translate(&udp_from(2, 3, 2), 0, false).actions).unwrap();
    assert_ne!(one, three, "frozen with different registers");
    assert_eq!(
        first.mask.dl_src.0[5], 0xff,
        "the first pass matches what reg0 came from"
    );
    let resumed = backer.translate(&next_pass(&udp_from(2, 1, 2), one, 0), 0, false);
    assert_eq!(resumed.actions, vec![Output(1)]);
    let resumed = backer.translate(&next_pass(&udp_from(2, 3, 2), three, 0), 0, false);
    assert_eq!(resumed.actions, vec![Output(2)]);
}

#[test]
fn a_select_group_past_a_patch_resumes_in_that_bridge_and_a_packet_out_never_freezes() {
    let (backer, a, b, [_, o]) = patched(&["in_port=1,actions=output:2"], &["actions=group:1"]);
    backer.set_patch(b, 2, "pb", "pa");
    let k = udp_from(1, 1, 2);
    let t = backer.translate(&k, 0, false);
    let id = recirc_of(&t.actions).unwrap_or_else(|| panic!("{:?}", t.actions));
    let state = backer.frozen_state(id).unwrap();
    assert_eq!(
        (state.slot, state.in_port, state.path.clone()),
        (b, 2, vec![a])
    );
    // Every bucket resumes in b: its port 1 is datapath port 3; its bucket out
    // of its patch port back into a (which the packet came through) goes nowhere.
    let slots = vsw_ofproto::xlate::hash_slots(2);
    let outs: Vec<Vec<DpAction>> = (0..slots)
        .map(|h| backer.translate(&next_pass(&k, id, h), 0, false).actions)
        .collect();
    assert!(outs.contains(&vec![Output(3)]), "{outs:?}");
    assert!(outs.contains(&Vec::new()), "{outs:?}");
    // A packet-out runs its actions without lookups: the group decides at once.
    let x = o.translate_packet_out(
        &FlowKey { in_port: 1, ..k }.into(),
        &[vsw_flow::Action::Group(1)],
        0,
    );
    assert!(recirc_of(&x.actions).is_none(), "{:?}", x.actions);
}

mod megaflows {
    use super::*;
    use proptest::prelude::*;

    /// A rule of either bridge: a match on a few of the fields the keys vary,
    /// and actions among outputs (the patch port 2 included), rewrites and
    /// NORMAL.
    fn rule() -> impl Strategy<Value = String> {
        let matching = prop_oneof![
            Just(String::new()),
            (1u32..3).prop_map(|p| format!("in_port={p},")),
            (0u16..4).prop_map(|d| format!("udp,tp_dst={d},")),
            (0u8..4).prop_map(|s| format!("ip,nw_src=10.0.0.{s},")),
        ];
        let action = prop_oneof![
            (1u32..3).prop_map(|p| format!("output:{p}")),
            Just("NORMAL".to_string()),
            Just("mod_tp_dst:3".to_string()),
            Just("mod_nw_src:10.0.0.1".to_string()),
            Just("group:1".to_string()),
            Just("drop".to_string()),
        ];
        (matching, 1u16..4, proptest::collection::vec(action, 1..3)).prop_map(
            |(m, prio, mut acts)| {
                if acts.iter().any(|a| a == "drop") {
                    acts = vec!["drop".to_string()];
                }
                let m = if acts.iter().any(|a| a.starts_with("mod_tp")) && !m.contains("udp") {
                    format!("udp,{m}")
                } else if acts.iter().any(|a| a.starts_with("mod_nw")) && !m.contains("p,") {
                    format!("ip,{m}")
                } else {
                    m
                };
                format!("priority={prio},{m}actions={}", acts.join(","))
            },
        )
    }

    fn key() -> impl Strategy<Value = FlowKey> {
        (
            prop_oneof![Just(1u32), Just(3u32)],
            0u16..4,
            0u8..4,
            0u8..3,
            0u8..3,
        )
            .prop_map(|(in_port, tp_dst, src, smac, dmac)| FlowKey {
                in_port,
                tp_dst,
                nw_src: u128::from(0x0a00_0000 + u32::from(src)),
                dl_src: vsw_packet::MacAddr([2, 0, 0, 0, 0, smac]),
                dl_dst: vsw_packet::MacAddr([2, 0, 0, 0, 0, dmac]),
                ..udp_from(in_port, 0, 0)
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        /// The megaflow a translation across the patch gives holds for every
        /// key it covers: a key that agrees with it under its mask translates
        /// to the same actions (what a cached datapath flow does for it).
        #[test]
        fn a_megaflow_across_a_patch_holds_for_every_key_it_covers(
            a_rules in proptest::collection::vec(rule(), 0..5),
            b_rules in proptest::collection::vec(rule(), 0..5),
            keys in proptest::collection::vec(key(), 2..12),
            hashes in proptest::collection::vec(any::<u32>(), 3),
        ) {
            let a_rules: Vec<&str> = a_rules.iter().map(String::as_str).collect();
            let b_rules: Vec<&str> = b_rules.iter().map(String::as_str).collect();
            let (backer, _, b, _o) = patched(&a_rules, &b_rules);
            backer.set_patch(b, 2, "pb", "pa");
            // Every first pass, and every pass after a recirculation one made
            // (select groups: the same keys, each with the hashes).
            let mut passes: Vec<FlowKey> = keys.clone();
            for k in &keys {
                if let Some(id) = recirc_of(&backer.translate(k, 0, false).actions) {
                    passes.extend(hashes.iter().map(|h| next_pass(k, id, *h)));
                }
            }
            for k1 in &passes {
                let t1 = backer.translate(k1, 0, false);
                // As the datapath makes every flow: its pass exact.
                let mask = FlowKey { recirc_id: u32::MAX, ..t1.mask };
                for k2 in &passes {
                    if k2.masked(&mask) != k1.masked(&mask) {
                        continue;
                    }
                    let t2 = backer.translate(k2, 0, false);
                    prop_assert_eq!(&t2.actions, &t1.actions, "{:?} covers {:?}", k1, k2);
                }
            }
        }
    }
}

const VXLAN_POP: vsw_datapath::tunnel_pop::Pop = vsw_datapath::tunnel_pop::Pop {
    geneve: false,
    udp_port: 4789,
    option: None,
    other_option: None,
    receive: vsw_datapath::tunnel_pop::VXLAN_RECEIVE,
};

/// A tunnel side that knows one port's way out while `known` says so.
struct OneWay {
    known: std::sync::atomic::AtomicBool,
}

impl vsw_ofproto::TunnelEgress for OneWay {
    fn way_out(
        &self,
        port: &str,
        key: &FlowKey,
        _l3: Option<u16>,
        mask: &mut FlowKey,
        _passing: bool,
    ) -> Result<vsw_ofproto::TunnelWay, vsw_datapath::NoWay> {
        use std::net::{IpAddr, Ipv4Addr};
        if port != "vx0" || !self.known.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(vsw_datapath::NoWay::ByQueue);
        }
        // A `key=flow` port: the ID is the packet's.
        mask.tun_id = u64::MAX;
        Ok(vsw_ofproto::TunnelWay {
            spec: vsw_packet::tunnel::EncapSpec {
                kind: vsw_packet::tunnel::TunnelKind::Vxlan,
                eth_src: vsw_packet::MacAddr([2, 0, 0, 0, 0, 1]),
                eth_dst: vsw_packet::MacAddr([2, 0, 0, 0, 0, 2]),
                src: IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)),
                dst: IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2)),
                tos: 0,
                ttl: 64,
                df: true,
                udp_dst: 4789,
                udp_csum: false,
                vni: key.tun_id as u32,
                geneve_options: Vec::new(),
                gpe: None,
            },
            underlay: "phy".into(),
        })
    }

    fn terminates(
        &self,
        bridge: &str,
        key: &FlowKey,
        mask: &mut FlowKey,
    ) -> Option<vsw_datapath::tunnel_pop::Pop> {
        mask.nw_proto = u8::MAX;
        mask.tp_dst = u16::MAX;
        (bridge == "phy" && key.nw_proto == 17 && key.tp_dst == 4789).then_some(VXLAN_POP)
    }

    fn receiving_port(
        &self,
        point: vsw_datapath::tunnel_pop::ReceivePoint,
        key: &FlowKey,
        mask: &mut FlowKey,
        _passing: bool,
    ) -> Option<(String, vsw_packet::tunnel::PacketTypeMode)> {
        mask.tun_id = u64::MAX;
        (!point.geneve && !point.l3 && key.tun_id == 42)
            .then(|| ("vx0".to_string(), Default::default()))
    }
}

/// A VXLAN-GPE port "gpe0" of packet type mode `mode` (VNI 42), whose way out is
/// always known; it records what each way out was asked for (`l3`).
struct GpeWay {
    mode: vsw_packet::tunnel::PacketTypeMode,
    asked: std::sync::Mutex<Vec<Option<u16>>>,
}

impl vsw_ofproto::TunnelEgress for GpeWay {
    fn way_out(
        &self,
        port: &str,
        _key: &FlowKey,
        l3: Option<u16>,
        _mask: &mut FlowKey,
        _passing: bool,
    ) -> Result<vsw_ofproto::TunnelWay, vsw_datapath::NoWay> {
        use vsw_packet::tunnel::PacketTypeMode;
        use vsw_packet::wire::vxlan;
        assert_eq!(port, "gpe0");
        self.asked.lock().unwrap().push(l3);
        let np = match (self.mode, l3) {
            (PacketTypeMode::LegacyL2, Some(_)) => return Err(vsw_datapath::NoWay::NotCarried),
            (_, Some(t)) => vxlan::next_protocol_of(t).unwrap(),
            (PacketTypeMode::LegacyL3, None) => vxlan::NP_IPV4,
            (_, None) => vxlan::NP_ETHERNET,
        };
        let mut way = OneWay { known: true.into() }
            .way_out(
                "vx0",
                &FlowKey::default(),
                None,
                &mut FlowKey::default(),
                false,
            )
            .unwrap();
        way.spec.gpe = Some(np);
        Ok(way)
    }

    fn receiving_port(
        &self,
        point: vsw_datapath::tunnel_pop::ReceivePoint,
        key: &FlowKey,
        mask: &mut FlowKey,
        _passing: bool,
    ) -> Option<(String, vsw_packet::tunnel::PacketTypeMode)> {
        use vsw_packet::tunnel::PacketTypeMode;
        mask.tun_id = u64::MAX;
        let takes = match self.mode {
            PacketTypeMode::Ptap => true,
            PacketTypeMode::LegacyL2 => !point.l3,
            PacketTypeMode::LegacyL3 => point.l3,
        };
        (takes && key.tun_id == 42).then(|| ("gpe0".to_string(), self.mode))
    }

    fn packet_type_mode(&self, port: &str) -> vsw_packet::tunnel::PacketTypeMode {
        if port == "gpe0" {
            self.mode
        } else {
            Default::default()
        }
    }
}

/// An overlay bridge ("ovl": ports 1 and 3 plain, dp 1 and 5; 2 the GPE port
/// gpe0, dp 2) over "phy" (port 1 dp 3, LOCAL dp 4), with `rules`, and the GPE
/// port's tunnel side.
fn gpe_bridges(
    mode: vsw_packet::tunnel::PacketTypeMode,
    rules: &[&str],
) -> (Arc<Backer>, Arc<GpeWay>, [Arc<Ofproto>; 2]) {
    let backer = Backer::new();
    let (ovl, o) = bridge(&backer, "ovl", rules, &[(1, 1), (2, 2), (3, 5)]);
    let (_phy, u) = bridge(
        &backer,
        "phy",
        &["in_port=65534,actions=output:1"],
        &[(1, 3), (65534, 4)],
    );
    backer.set_tunnel_port(ovl, 2, "gpe0");
    let way = Arc::new(GpeWay {
        mode,
        asked: Default::default(),
    });
    backer.set_tunnel_egress(way.clone());
    (backer, way, [o, u])
}

/// The inner packet of a VXLAN-GPE packet from VNI 42 as the datapath pops it:
/// IPv4 behind the placeholder Ethernet header on the L3 receive point, or an
/// Ethernet frame on VXLAN's.
fn gpe_popped(l3: bool) -> FlowKey {
    FlowKey {
        in_port: if l3 {
            vsw_datapath::tunnel_pop::VXLAN_L3_RECEIVE
        } else {
            vsw_datapath::tunnel_pop::VXLAN_RECEIVE
        },
        tun_id: 42,
        tun_src: 0xc612_0002,
        dl_src: if l3 {
            vsw_packet::MacAddr::ZERO
        } else {
            vsw_packet::MacAddr([2, 0, 0, 0, 0, 7])
        },
        dl_dst: if l3 {
            vsw_packet::MacAddr::ZERO
        } else {
            vsw_packet::MacAddr([2, 0, 0, 0, 0, 1])
        },
        ..udp_from(0, 0, 0)
    }
}

/// A packet-type-aware (ptap) VXLAN-GPE port: its IP packets reach the rules as
/// packet_type=(1,0x800), which a rule without packet_type does not match; an
/// Ethernet frame it receives is (0,0). Out of it, a decap()'d packet goes without
/// its Ethernet header (the header strips it), an Ethernet port skips it, and an
/// Ethernet frame goes as GPE's Ethernet.
#[test]
fn a_packet_type_aware_gpe_port_shows_the_rules_its_packets_types() {
    use vsw_packet::tunnel::PacketTypeMode;
    let (backer, way, _keep) = gpe_bridges(
        PacketTypeMode::Ptap,
        &[
            "priority=20,in_port=2,packet_type=(1,0x800),actions=encap(ethernet),mod_dl_dst:02:00:00:00:00:01,output:1",
            "priority=10,in_port=2,actions=output:3",
            "priority=10,in_port=1,ip,actions=decap(),output:2,output:3",
            "priority=10,in_port=3,actions=output:2",
            "priority=20,in_port=3,udp,actions=encap(nsh),output:2,output:1",
            "priority=20,in_port=3,tcp,tp_dst=9,actions=encap(nsh),clone(output:2),encap(ethernet),output:1",
        ],
    );
    let t = backer.translate(&gpe_popped(true), 0, false);
    assert_eq!(t.actions.last(), Some(&Output(1)), "{:?}", t.actions);
    assert!(t
        .actions
        .contains(&DpAction::SetDlDst(vsw_packet::MacAddr([2, 0, 0, 0, 0, 1]))));
    assert_eq!(
        { t.mask.in_port },
        u32::MAX,
        "the receive point says it is IP"
    );
    let t = backer.translate(&gpe_popped(false), 0, false);
    assert_eq!(t.actions, vec![Output(5)], "an Ethernet frame is (0,0)");
    // Out: without Ethernet to the GPE port, nothing to the Ethernet port.
    let t = backer.translate(&udp_from(1, 1, 2), 0, false);
    let [DpAction::TunnelPush(0), Output(3)] = t.actions[..] else {
        panic!("{:?}", t.actions)
    };
    assert!(t.headers[0].template.strips_ethernet());
    let t = backer.translate(
        &FlowKey {
            nw_proto: 6,
            ..udp_from(5, 1, 2)
        },
        0,
        false,
    );
    assert!(!t.headers[0].template.strips_ethernet(), "{:?}", t.actions);
    // An encap(nsh) goes out as NSH (pushed behind the placeholder header, which
    // the tunnel's push takes off); the Ethernet port skips it.
    let t = backer.translate(&udp_from(5, 1, 2), 0, false);
    assert!(
        matches!(t.actions[0], DpAction::PushNsh(_)),
        "{:?}",
        t.actions
    );
    assert!(
        t.actions.contains(&DpAction::TunnelPush(0)),
        "{:?}",
        t.actions
    );
    assert!(!t.actions.contains(&Output(1)), "{:?}", t.actions);
    assert!(t.headers[0].template.strips_ethernet());
    assert_eq!(
        *way.asked.lock().unwrap(),
        vec![Some(0x0800), None, Some(0x894f)]
    );
    // Pushed for the clone's output on the clone's copy: the packet after it
    // gets its own push at encap(ethernet), one NSH header each.
    let t = backer.translate(
        &FlowKey {
            nw_proto: 6,
            tp_dst: 9,
            ..udp_from(5, 1, 2)
        },
        0,
        false,
    );
    let pushes: Vec<usize> = (0..t.actions.len())
        .filter(|&i| matches!(t.actions[i], DpAction::PushNsh(_)))
        .collect();
    assert_eq!(pushes.len(), 2, "{:?}", t.actions);
    assert_eq!(t.actions[pushes[0] - 1], DpAction::Save, "{:?}", t.actions);
    assert_eq!(t.actions.last(), Some(&Output(1)), "{:?}", t.actions);
}

/// An L3 VXLAN-GPE port (legacy_l3): its IP packets reach the rules as Ethernet
/// frames of zero addresses, and NORMAL learns no address from that port (as Open
/// vSwitch; here the rule even gives them a source); out of it,
/// Ethernet frames go without their Ethernet header. A legacy L2 GPE port takes
/// no IP packet (no port's: dropped) and sends none (skipped).
#[test]
fn an_l3_gpe_port_shows_its_packets_as_ethernet() {
    use vsw_packet::tunnel::PacketTypeMode;
    let (backer, way, _keep) = gpe_bridges(
        PacketTypeMode::LegacyL3,
        &[
            "priority=10,in_port=2,ip,dl_src=00:00:00:00:00:00,actions=mod_dl_src:02:00:00:00:00:09,mod_dl_dst:02:00:00:00:00:01,NORMAL",
            "priority=10,in_port=1,ip,actions=output:2",
        ],
    );
    let t = backer.translate(&gpe_popped(true), 0, false);
    assert!(t.actions.contains(&Output(1)), "{:?}", t.actions);
    let t = backer.translate(&udp_from(1, 1, 2), 0, false);
    assert!(t.headers[0].template.strips_ethernet(), "{:?}", t.actions);
    assert_eq!(*way.asked.lock().unwrap(), vec![None]);
    // NORMAL flooded (nothing learned from the L3 port): port 3 too.
    let t = backer.translate(&gpe_popped(true), 0, false);
    assert!(t.actions.contains(&Output(5)), "{:?}", t.actions);
    let (backer, _, _keep) = gpe_bridges(
        PacketTypeMode::LegacyL2,
        &[
            "in_port=1,ip,actions=decap(),output:2",
            "in_port=2,actions=output:1",
        ],
    );
    assert!(backer
        .translate(&gpe_popped(true), 0, false)
        .actions
        .is_empty());
    let t = backer.translate(&udp_from(1, 1, 2), 0, false);
    assert!(t.actions.is_empty(), "{:?}", t.actions);
}

/// `output(port=P,max_len=N)` to a tunnel port cuts the inner frame, on a copy,
/// before it is encapsulated; to a plain port the output itself is cut.
#[test]
fn a_truncated_output_to_a_tunnel_port_cuts_the_inner_frame() {
    let backer = Backer::new();
    let (ovl, _o) = bridge(
        &backer,
        "ovl",
        &["in_port=1,actions=output(port=2,max_len=100),output(port=3,max_len=64)"],
        &[(1, 1), (2, 2), (3, 5)],
    );
    let (_phy, _u) = bridge(
        &backer,
        "phy",
        &["in_port=65534,actions=output:1"],
        &[(1, 3), (65534, 4)],
    );
    backer.set_tunnel_port(ovl, 2, "vx0");
    backer.set_tunnel_egress(Arc::new(OneWay { known: true.into() }));
    let t = backer.translate(&udp_from(1, 1, 2), 0, false);
    assert_eq!(
        t.actions,
        vec![
            DpAction::Save,
            DpAction::Truncate(100),
            // (The tunnel's own copy.)
            DpAction::Save,
            DpAction::TunnelPush(0),
            Output(3),
            DpAction::Restore,
            DpAction::Restore,
            DpAction::OutputTrunc {
                port: 5,
                max_len: 64
            },
        ]
    );
}

/// Output to a tunnel port whose way out is known pushes its header and goes on in
/// the underlay bridge as from its LOCAL port, in one flow whose mask holds what
/// the way read, not the outer packet's fields; unknown, the port's queue takes
/// the packet, until the underlay changes. A tunnel packet the underlay sends to
/// its LOCAL port is popped, and its inner frame translated as its tunnel port's.
#[test]
fn tunnel_ports_push_and_pop_their_headers_in_translation() {
    let backer = Backer::new();
    let (ovl, _o) = bridge(
        &backer,
        "ovl",
        &["in_port=1,actions=output:2", "in_port=2,actions=output:1"],
        &[(1, 1), (2, 2)],
    );
    // The underlay sends what its host sends out of its uplink, and learns.
    let (_phy, u) = bridge(
        &backer,
        "phy",
        &[
            "in_port=65534,actions=output:1",
            "in_port=1,actions=output:65534",
        ],
        &[(1, 3), (65534, 4)],
    );
    backer.set_tunnel_port(ovl, 2, "vx0");
    let egress = Arc::new(OneWay {
        known: false.into(),
    });
    backer.set_tunnel_egress(egress.clone());
    let k = udp_from(1, 1, 2);
    let t = backer.translate(&k, 0, false);
    assert_eq!(t.actions, vec![Output(2)], "not known: the port's queue");
    let g = backer.generation();
    egress
        .known
        .store(true, std::sync::atomic::Ordering::SeqCst);
    backer.underlay_changed();
    assert!(
        backer.generation() > g,
        "the underlay's change is the backer's"
    );
    let t = backer.translate(&k, 0, false);
    let [DpAction::TunnelPush(n), Output(3)] = t.actions[..] else {
        panic!("{:?}", t.actions)
    };
    assert_eq!(n, 0, "the flow's first header");
    let h = t.headers[n as usize].clone();
    assert_eq!(h.tunnel_port, 2);
    assert_eq!(h.template.overhead(), 50);
    assert_eq!({ t.mask.tun_id }, u64::MAX, "what the way read");
    assert_eq!(
        (t.mask.nw_src, t.mask.tp_dst),
        (0, 0),
        "the outer packet's fields are not the flow's"
    );
    // Another tunnel ID: another header.
    let t2 = backer.translate(&FlowKey { tun_id: 7, ..k }, 0, false);
    assert_eq!(t2.actions, t.actions, "its own header 0");
    assert_ne!(t2.headers[0], t.headers[0]);
    // The same header twice in one flow is one entry of its list.
    let twice = Ofproto::join(
        &backer,
        "twice",
        pipeline(&["in_port=1,actions=output:2,mod_dl_dst:02:00:00:00:00:09,output:2"]),
    )
    .unwrap();
    twice.1.set_ports(vec![1, 2]);
    backer.set_port(twice.0, 1, 10).unwrap();
    backer.set_port(twice.0, 2, 11).unwrap();
    backer.set_tunnel_port(twice.0, 2, "vx0");
    let t3 = backer.translate(&udp_from(10, 1, 2), 0, false);
    assert_eq!(t3.headers.len(), 1, "{:?}", t3.actions);
    assert_eq!(
        t3.actions
            .iter()
            .filter(|a| matches!(a, DpAction::TunnelPush(0)))
            .count(),
        2
    );
    backer.remove_port(11);
    // From the uplink to the host's address: a tunnel packet a tunnel port takes
    // is popped (the host gets nothing), and looked up again.
    let from_wire = FlowKey {
        tp_dst: 4789,
        ..udp_from(3, 9, 2)
    };
    let p = backer.translate(&from_wire, 0, false);
    assert_eq!(p.actions, vec![DpAction::TunnelPop(VXLAN_POP)]);
    assert_eq!({ p.mask.tp_dst }, u16::MAX);
    // A packet-out's too (the PMD looks its next pass up as a received packet's).
    let out = u.translate_packet_out(
        &FlowKey {
            in_port: 1,
            ..from_wire
        }
        .into(),
        &[vsw_flow::Action::Output(65534)],
        0,
    );
    assert_eq!(out.actions, vec![DpAction::TunnelPop(VXLAN_POP)]);
    let other = backer.translate(&udp_from(3, 9, 2), 0, false);
    assert_eq!(other.actions, vec![Output(4)], "the host's own");
    // The inner frame, as vx0 received it: the overlay's rules, matched on the
    // tunnel fields that chose the port.
    let popped = FlowKey {
        in_port: vsw_datapath::tunnel_pop::VXLAN_RECEIVE,
        tun_id: 42,
        tun_src: 0xc612_0002,
        ..udp_from(0, 2, 1)
    };
    let t = backer.translate(&popped, 0, false);
    assert_eq!(t.actions, vec![Output(1)]);
    assert_eq!(
        ({ t.mask.in_port }, { t.mask.tun_id }),
        (u32::MAX, u64::MAX)
    );
    let g = backer.generation();
    backer.underlay_changed();
    assert!(backer.generation() > g);
    // A VNI no port has: dropped, for those tunnel fields alone.
    let none = backer.translate(
        &FlowKey {
            tun_id: 7,
            ..popped
        },
        0,
        false,
    );
    assert!(none.actions.is_empty());
    assert_eq!({ none.mask.tun_id }, u64::MAX);
}

/// A tunnel side with no way out for any packet, for this reason.
struct NoWayOut(vsw_ofproto::NoWay);

impl vsw_ofproto::TunnelEgress for NoWayOut {
    fn way_out(
        &self,
        _port: &str,
        _key: &FlowKey,
        _l3: Option<u16>,
        mask: &mut FlowKey,
        _passing: bool,
    ) -> Result<vsw_ofproto::TunnelWay, vsw_ofproto::NoWay> {
        // As a `remote_ip=flow` port's answer reads the destination.
        mask.tun_dst = u32::MAX;
        Err(self.0)
    }
}

/// No way out now (no route, the next hop not known yet): the packet is dropped in
/// its own pass, and the flow depends on the underlay; what this pass cannot do
/// goes to the port's queue. A tunnel's neighbour request leaves through the
/// underlay bridge's rules as from its LOCAL port.
#[test]
fn a_tunnel_packet_with_no_way_out_is_dropped_in_its_own_pass() {
    let backer = Backer::new();
    let (ovl, _o) = bridge(
        &backer,
        "ovl",
        &["in_port=1,actions=output:2"],
        &[(1, 1), (2, 2)],
    );
    let (_phy, _u) = bridge(
        &backer,
        "phy",
        &["in_port=65534,actions=output:1"],
        &[(1, 3), (65534, 4)],
    );
    backer.set_tunnel_port(ovl, 2, "vx0");
    let k = udp_from(1, 1, 2);
    backer.set_tunnel_egress(Arc::new(NoWayOut(vsw_ofproto::NoWay::Dropped)));
    let t = backer.translate(&k, 0, true);
    assert!(t.actions.is_empty(), "{:?}", t.actions);
    assert_eq!({ t.mask.tun_dst }, u32::MAX, "what the answer read");
    let g = backer.generation();
    backer.underlay_changed();
    assert!(
        backer.generation() > g,
        "re-translated when the underlay changes"
    );
    backer.set_tunnel_egress(Arc::new(NoWayOut(vsw_ofproto::NoWay::ByQueue)));
    let t = backer.translate(&k, 0, true);
    assert_eq!(t.actions, vec![Output(2)], "the port's queue");
    // An ARP request from the underlay bridge's host side: its rules send it out.
    let arp = vsw_packet::builder::ethernet(
        vsw_packet::MacAddr::BROADCAST,
        vsw_packet::MacAddr([2, 0, 0, 0, 0, 4]),
        &[],
        vsw_packet::EtherType::ARP,
        &[0u8; 28],
    );
    let sent = backer
        .from_local("phy", &arp, 0)
        .expect("phy has a LOCAL port");
    assert_eq!((sent.in_port, sent.actions.clone()), (4, vec![Output(3)]));
    assert_eq!(sent.frame, arp);
    assert!(backer.from_local("ovl", &arp, 0).is_none(), "no LOCAL port");
    assert!(backer.from_local("gone", &arp, 0).is_none());
}

/// The note a translation's `Controller` action carries up.
fn note_of(
    bridges: &[(vsw_ofproto::BridgeSlot, &Arc<Ofproto>)],
    actions: &[DpAction],
) -> vsw_ofproto::PuntNote {
    let id = actions
        .iter()
        .find_map(|a| match a {
            DpAction::Controller(id) => Some(*id),
            _ => None,
        })
        .expect("sent to the controller");
    let (slot, note) = Backer::punt_note(id);
    let (_, bridge) = bridges
        .iter()
        .find(|(s, _)| *s == slot)
        .expect("a bridge's");
    bridge.punt_note(note).expect("the bridge's note")
}

/// A packet-in names the port the packet came in by in the bridge that sent it
/// up: the datapath's in_port where that is the bridge's own port; the patch port
/// a crossing led it in by; the tunnel port a popped packet is for (its datapath
/// in_port is the kind's receive point).
#[test]
fn a_packet_in_names_the_port_a_patch_or_a_tunnel_led_the_packet_in_by() {
    let backer = Backer::new();
    let (ovl, o) = bridge(
        &backer,
        "ovl",
        &[
            "in_port=1,udp,tp_dst=53,actions=output:9",
            "in_port=1,udp,tp_dst=54,actions=controller",
            "in_port=2,actions=controller",
        ],
        &[(1, 1), (2, 2), (9, 7)],
    );
    let (brb, b) = bridge(
        &backer,
        "brb",
        &["in_port=9,actions=controller"],
        &[(1, 5), (9, 8)],
    );
    let (phy, u) = bridge(
        &backer,
        "phy",
        &["in_port=1,actions=output:65534"],
        &[(1, 3), (65534, 4)],
    );
    backer.set_patch(ovl, 9, "pa", "pb");
    backer.set_patch(brb, 9, "pb", "pa");
    backer.set_tunnel_port(ovl, 2, "vx0");
    backer.set_tunnel_egress(Arc::new(OneWay { known: true.into() }));
    let bridges = [(ovl, &o), (brb, &b), (phy, &u)];
    // The bridge's own port: the datapath's in_port says it.
    let own = backer.translate(
        &FlowKey {
            tp_dst: 54,
            ..udp_from(1, 1, 2)
        },
        0,
        true,
    );
    assert_eq!(note_of(&bridges, &own.actions).in_port, None);
    // Across the patch: brb's patch port.
    let crossed = backer.translate(&udp_from(1, 1, 2), 0, true);
    assert_eq!(note_of(&bridges, &crossed.actions).in_port, Some(9));
    // A popped VXLAN packet's pass: the tunnel port it is for.
    let popped = FlowKey {
        in_port: vsw_datapath::tunnel_pop::VXLAN_RECEIVE,
        tun_id: 42,
        tun_src: 0xc612_0002,
        ..udp_from(0, 2, 1)
    };
    let t = backer.translate(&popped, 0, true);
    assert_eq!(note_of(&bridges, &t.actions).in_port, Some(2));
}

/// A tunnel side that notes what it was asked to snoop.
#[derive(Default)]
struct Snooping {
    seen: std::sync::Mutex<Vec<(String, bool)>>,
}

impl vsw_ofproto::TunnelEgress for Snooping {
    fn way_out(
        &self,
        _port: &str,
        _key: &FlowKey,
        _l3: Option<u16>,
        _mask: &mut FlowKey,
        _passing: bool,
    ) -> Result<vsw_ofproto::TunnelWay, vsw_ofproto::NoWay> {
        Err(vsw_ofproto::NoWay::ByQueue)
    }

    fn snoop(&self, bridge: &str, _key: &FlowKey, mask: &mut FlowKey, passing: bool) {
        mask.arp_sha = vsw_packet::MacAddr([0xff; 6]);
        self.seen
            .lock()
            .unwrap()
            .push((bridge.to_string(), passing));
    }
}

/// What a bridge sends to its LOCAL port is shown to the tunnel side to snoop
/// (a neighbour's ARP), passing or revalidated, and the flow matches what it read;
/// what goes elsewhere is not.
#[test]
fn what_goes_to_a_local_port_is_snooped_for_neighbours() {
    let backer = Backer::new();
    let (phy, u) = Ofproto::join(
        &backer,
        "phy",
        pipeline(&[
            "in_port=1,actions=output:65534",
            "in_port=65534,actions=output:1",
        ]),
    )
    .unwrap();
    u.set_ports(vec![1, 65534]);
    backer.set_port(phy, 1, 3).unwrap();
    backer.set_port(phy, 65534, 4).unwrap();
    let snooping = Arc::new(Snooping::default());
    backer.set_tunnel_egress(snooping.clone());
    let t = backer.translate(&udp_from(3, 9, 2), 0, true);
    assert_eq!(t.actions, vec![Output(4)]);
    assert_eq!(t.mask.arp_sha, vsw_packet::MacAddr([0xff; 6]));
    backer.translate(&udp_from(3, 9, 2), 0, false);
    backer.translate(&udp_from(4, 2, 9), 0, true);
    assert_eq!(
        *snooping.seen.lock().unwrap(),
        vec![("phy".to_string(), true), ("phy".to_string(), false)]
    );
}

/// A clone's actions run on a copy: a rewrite in it reaches its own outputs, not
/// the actions after it; a clone without a rewrite needs no copy.
#[test]
fn a_clone_changes_only_its_own_copy() {
    let backer = Backer::new();
    let flows = ["in_port=1,udp,actions=clone(mod_tp_dst:99,output:2),clone(output:3),output:2"];
    let (slot, ofproto) = Ofproto::join(&backer, "br", pipeline(&flows)).unwrap();
    ofproto.set_ports(vec![1, 2, 3]);
    for p in 1..=3 {
        backer.set_port(slot, p, p).unwrap();
    }
    let t = backer.translate(&udp_from(1, 1, 2), 0, false);
    assert_eq!(
        t.actions,
        vec![
            DpAction::Save,
            DpAction::SetTpDst(99),
            Output(2),
            DpAction::Restore,
            Output(3),
            Output(2),
        ]
    );
}

/// An MPLS packet of label `label`, bottom of stack, TTL 64, from `in_port`.
fn mpls_from(in_port: u32, label: u32) -> FlowKey {
    FlowKey {
        in_port,
        dl_type: 0x8847,
        label: vsw_packet::wire::mpls::entry(label, 0, true, 64),
        ..FlowKey::default()
    }
}

/// After `pop_mpls`, the first action that may look behind the label (here the
/// goto) stops the translation: the packet is looked up again, and the next pass
/// runs the rest — the goto, the action after it in the rule, then the action set
/// — on the packet now parsed behind the popped label. The popping rule is
/// credited on the first pass only.
#[test]
fn a_pop_mpls_before_a_table_is_answered_on_a_second_pass() {
    let backer = Backer::new();
    let (a, o) = Ofproto::join(
        &backer,
        "br",
        pipeline(&[
            "table=0,mpls,mpls_label=100,actions=write_actions(output:2),pop_mpls:0x0800,\
             mod_dl_src:02:00:00:00:00:09,goto_table:1",
            "table=1,ip,nw_dst=198.18.0.2,actions=mod_nw_tos:8",
        ]),
    )
    .unwrap();
    o.set_ports(vec![1, 2]);
    backer.set_port(a, 1, 1).unwrap();
    backer.set_port(a, 2, 2).unwrap();
    let first = backer.translate(&mpls_from(1, 100), 0, false);
    let Some(id) = recirc_of(&first.actions) else {
        panic!("{:?}", first.actions)
    };
    assert_eq!(
        first.actions,
        vec![
            DpAction::PopMpls(0x0800),
            DpAction::SetDlSrc(vsw_packet::MacAddr([2, 0, 0, 0, 0, 9])),
            DpAction::Recirc(id),
        ],
        "what needs nothing behind the label runs on the first pass"
    );
    // The next pass: the packet as the datapath parses it after the pop.
    let again = next_pass(&udp_from(1, 1, 2), id, 0);
    let second = backer.translate(&again, 0, false);
    assert_eq!(
        second.actions,
        vec![DpAction::SetNwTos(8), Output(2)],
        "table 1 saw the IP header, then the action set ran"
    );
    assert_eq!({ second.mask.nw_dst }, 0xffff_ffff);
    // One packet through both passes: each rule counts it once.
    first.attribution.credit(1, 100, 10);
    second.attribution.credit(1, 100, 10);
    let counts: Vec<(u8, u64)> = o
        .pipeline()
        .rules()
        .iter()
        .map(|r| (r.spec.table, r.stats.packets()))
        .collect();
    assert!(
        counts.contains(&(0, 1)) && counts.contains(&(1, 1)),
        "{counts:?}"
    );
    // Another destination: table 1 misses, the action set still runs.
    let other = FlowKey {
        nw_dst: 0xc612_0009,
        ..again
    };
    assert_eq!(backer.translate(&other, 0, false).actions, vec![Output(2)]);
}

/// A PBB frame of I-SID `isid` from `in_port`.
fn pbb_from(in_port: u32, isid: u32) -> FlowKey {
    FlowKey {
        in_port,
        dl_type: 0x88e7,
        label: isid,
        ..FlowKey::default()
    }
}

/// After `pop_pbb` an output goes on in the same pass, but a table or NORMAL
/// waits for the next (the customer's addresses and tags are new to the key, not
/// only what is behind them); a push copies the outermost I-TAG, or starts at 0;
/// an I-SID is written only into a PBB frame.
#[test]
fn pbb_pushes_copy_the_itag_and_a_pop_is_answered_on_a_second_pass() {
    let backer = Backer::new();
    let (a, o) = Ofproto::join(
        &backer,
        "br",
        pipeline(&[
            "table=0,in_port=1,dl_type=0x88e7,pbb_isid=100,actions=pop_pbb,output:2,NORMAL",
            "table=0,in_port=1,dl_type=0x88e7,pbb_isid=101,actions=write_actions(pop_pbb,output:2)",
            "table=0,in_port=2,dl_type=0x88e7,actions=set_field:203->pbb_isid,push_pbb:0x88e7,output:1",
            "table=0,in_port=2,ip,actions=push_pbb:0x88e7,set_field:7->pbb_isid,output:1",
        ]),
    )
    .unwrap();
    o.set_ports(vec![1, 2]);
    backer.set_port(a, 1, 1).unwrap();
    backer.set_port(a, 2, 2).unwrap();
    let first = backer.translate(&pbb_from(1, 100), 0, false);
    let Some(id) = recirc_of(&first.actions) else {
        panic!("{:?}", first.actions)
    };
    assert_eq!(
        first.actions,
        vec![DpAction::PopPbb, Output(2), DpAction::Recirc(id)]
    );
    // The next pass: NORMAL on the customer's frame, as the datapath parses it.
    let second = backer.translate(&next_pass(&udp_from(1, 1, 2), id, 0), 0, false);
    assert!(recirc_of(&second.actions).is_none(), "{:?}", second.actions);
    // An action set's pop and output: one pass.
    assert_eq!(
        backer.translate(&pbb_from(1, 101), 0, false).actions,
        vec![DpAction::PopPbb, Output(2)]
    );
    // Another I-SID misses.
    assert!(backer
        .translate(&pbb_from(1, 102), 0, false)
        .actions
        .is_empty());
    // The push copies the I-TAG the set-field wrote.
    let pushed = backer.translate(&pbb_from(2, 100), 0, false);
    assert_eq!(
        pushed.actions,
        vec![
            DpAction::SetField(FieldWrite::PbbIsid(203)),
            DpAction::PushPbb {
                ethertype: 0x88e7,
                itag: 203
            },
            Output(1)
        ]
    );
    // Over an IP packet the I-TAG starts at 0; the I-SID is written after.
    let pushed = backer.translate(&udp_from(2, 1, 2), 0, false);
    assert_eq!(
        pushed.actions,
        vec![
            DpAction::PushPbb {
                ethertype: 0x88e7,
                itag: 0
            },
            DpAction::SetField(FieldWrite::PbbIsid(7)),
            Output(1)
        ]
    );
}

/// An NSH frame (MD type 1, next protocol Ethernet) from `in_port`.
fn nsh_from(in_port: u32, spi: u32, si: u8, ttl: u8) -> FlowKey {
    let mut k = FlowKey {
        in_port,
        dl_type: 0x894f,
        ..FlowKey::default()
    };
    k.set_nsh(&Nsh {
        flags: 0,
        ttl,
        md_type: 1,
        next_proto: 3,
        path: spi << 8 | u32::from(si),
        context: [0xabc, 0, 0, 0],
    });
    k
}

/// `encap(nsh)` … `encap(ethernet)` is one push carrying what the set-fields
/// between wrote; `decap()` twice is one pop and a second pass; a bare NSH packet
/// goes nowhere; `dec_nsh_ttl` stops at 1.
#[test]
fn nsh_encap_is_one_push_and_two_decaps_one_pop_and_a_second_pass() {
    let backer = Backer::new();
    let (a, o) = Ofproto::join(
        &backer,
        "br",
        pipeline(&[
            "table=0,priority=100,in_port=1,ip,actions=encap(nsh(md_type=1)),set_field:0x1234->nsh_spi,set_field:254->nsh_si,set_field:0x11223344->nsh_c2,dec_nsh_ttl,encap(ethernet),set_field:02:00:00:00:00:09->eth_dst,output:2",
            "table=0,priority=200,in_port=1,udp,actions=encap(nsh),output:2",
            "table=0,priority=300,in_port=1,udp,tp_dst=4789,actions=encap(nsh(md_type=2,tlv(0x1000,10,0x12345678))),encap(ethernet),output:2",
            "table=0,priority=300,in_port=1,udp,tp_dst=4790,actions=encap(nsh(md_type=2,tlv(0x1000,10,0x12345678))),check_pkt_larger(200)->NXM_NX_REG0[0],encap(ethernet),output:2",
            "table=0,in_port=2,dl_type=0x894f,nsh_spi=0x1234,nsh_si=254,nsh_c1=0xabc,actions=dec_nsh_ttl,decap(),decap(),output:1",
            "table=0,in_port=2,dl_type=0x894f,nsh_spi=0x1234,nsh_si=253,actions=decap(),output:1",
            "table=0,in_port=2,dl_type=0x894f,nsh_spi=0x1234,nsh_si=252,actions=decap(),decap(),goto_table:1",
            "table=1,in_port=2,udp,actions=output:1",
            "table=0,in_port=2,dl_type=0x894f,nsh_spi=0x1234,nsh_si=251,actions=decap(),goto_table:3",
            "table=3,priority=5,packet_type=(0,0),actions=output:2",
            "table=3,priority=10,packet_type=(1,0x894f),nsh_si=251,actions=decap(),output:1",
            "table=0,in_port=2,dl_type=0x894f,nsh_spi=0x1234,nsh_si=250,actions=resubmit(,4),output:1",
            "table=4,dl_type=0x894f,actions=dec_nsh_ttl,IN_PORT",
        ]),
    )
    .unwrap();
    o.set_ports(vec![1, 2]);
    backer.set_port(a, 1, 1).unwrap();
    backer.set_port(a, 2, 2).unwrap();
    let mut tcp = udp_from(1, 1, 2);
    tcp.nw_proto = 6;
    let pushed = backer.translate(&tcp, 0, false);
    assert_eq!(
        pushed.actions,
        vec![
            DpAction::PushNsh(NshBase {
                flags: 0,
                ttl: 62,
                md_type: 1,
                next_proto: 3,
                path: 0x1234 << 8 | 254,
                context_len: 0,
            }),
            DpAction::SetField(FieldWrite::Nsh(NshField::Context(1), 0x1122_3344)),
            DpAction::SetDlDst(vsw_packet::MacAddr([2, 0, 0, 0, 0, 9])),
            Output(2)
        ]
    );
    // MD type 2: its TLVs reserved by the push and written word by word.
    let mut vxlan = udp_from(1, 1, 2);
    vxlan.tp_dst = 4789;
    assert_eq!(
        backer.translate(&vxlan, 0, false).actions,
        vec![
            DpAction::PushNsh(NshBase {
                flags: 0,
                ttl: 63,
                md_type: 2,
                next_proto: 3,
                path: 0xff,
                context_len: 8,
            }),
            DpAction::SetField(FieldWrite::Nsh(NshField::Md2Word(0), 0x1000_0a04)),
            DpAction::SetField(FieldWrite::Nsh(NshField::Md2Word(1), 0x1234_5678)),
            Output(2)
        ]
    );
    // Both ways of a fork push the TLVs.
    vxlan.tp_dst = 4790;
    let forked = backer.translate(&vxlan, 0, false).actions;
    let words = forked
        .iter()
        .filter(|a| {
            matches!(
                a,
                DpAction::SetField(FieldWrite::Nsh(NshField::Md2Word(_), _))
            )
        })
        .count();
    assert_eq!(words, 4, "{forked:?}");
    // Without encap(ethernet) the NSH packet has no Ethernet header: not sent.
    assert!(backer
        .translate(&udp_from(1, 1, 2), 0, false)
        .actions
        .is_empty());
    // Both decaps: the TTL written, one pop; an output sends the frame as it is.
    assert_eq!(
        backer
            .translate(&nsh_from(2, 0x1234, 254, 10), 0, false)
            .actions,
        vec![
            DpAction::SetField(FieldWrite::Nsh(NshField::Ttl, 9)),
            DpAction::PopNsh,
            Output(1)
        ]
    );
    // A table after the decaps looks at the inner frame on the next pass.
    let first = backer.translate(&nsh_from(2, 0x1234, 252, 10), 0, false);
    let Some(id) = recirc_of(&first.actions) else {
        panic!("{:?}", first.actions)
    };
    assert_eq!(first.actions, vec![DpAction::PopNsh, DpAction::Recirc(id)]);
    let second = backer.translate(&next_pass(&udp_from(2, 2, 1), id, 0), 0, false);
    assert_eq!(second.actions, vec![Output(1)]);
    // TTL 1 runs out: nothing more is done.
    let ran_out = backer.translate(&nsh_from(2, 0x1234, 254, 1), 0, false);
    assert!(ran_out.actions.is_empty(), "{:?}", ran_out.actions);
    // After one decap the next table sees packet type (1,0x894f), not Ethernet's.
    assert_eq!(
        backer
            .translate(&nsh_from(2, 0x1234, 251, 10), 0, false)
            .actions,
        vec![DpAction::PopNsh, Output(1)]
    );
    // TTL 1 in a resubmitted table stops that table's list only: the caller
    // goes on.
    assert_eq!(
        backer
            .translate(&nsh_from(2, 0x1234, 250, 1), 0, false)
            .actions,
        vec![Output(1)]
    );
    assert_eq!(
        backer
            .translate(&nsh_from(2, 0x1234, 250, 9), 0, false)
            .actions,
        vec![
            DpAction::SetField(FieldWrite::Nsh(NshField::Ttl, 8)),
            Output(2),
            Output(1)
        ]
    );
    // One decap leaves NSH without Ethernet: not sent.
    assert!(backer
        .translate(&nsh_from(2, 0x1234, 253, 10), 0, false)
        .actions
        .is_empty());
}

/// `encap(mpls)` … `encap(ethernet)` is one push of Ethernet and a label in
/// front of the frame, carrying what the MPLS rewrites between wrote; `decap()`
/// then `decap(packet_type(ns=0,type=0))` one pop; other decaps are refused.
#[test]
fn ethernet_over_mpls_is_one_push_and_two_decaps_one_pop() {
    let backer = Backer::new();
    let (a, o) = Ofproto::join(
        &backer,
        "br",
        pipeline(&[
            "table=0,priority=100,in_port=1,ip,actions=encap(mpls),set_field:100->mpls_label,dec_mpls_ttl,encap(ethernet),output:2",
            "table=0,priority=200,in_port=1,ipv6,actions=encap(mpls_mc),encap(ethernet),output:2",
            "table=0,in_port=2,mpls,mpls_label=100,actions=decap(),decap(packet_type(ns=0,type=0)),output:1",
            "table=0,in_port=2,mpls,mpls_label=101,actions=decap(),decap(),output:1",
            "table=0,in_port=2,mpls,mpls_label=102,actions=decap(),mod_dl_dst:02:00:00:00:00:09,decap(packet_type(ns=0,type=0)),output:1",
            "table=0,priority=300,in_port=1,udp,tp_dst=5353,actions=encap(mpls),set_tunnel:5,encap(ethernet),output:2",
        ]),
    )
    .unwrap();
    o.set_ports(vec![1, 2]);
    backer.set_port(a, 1, 1).unwrap();
    backer.set_port(a, 2, 2).unwrap();
    let lse = |label: u32, ttl: u32| label << 12 | 1 << 8 | ttl;
    assert_eq!(
        backer.translate(&udp_from(1, 1, 2), 0, false).actions,
        vec![
            DpAction::PushMplsEthernet {
                ethertype: 0x8847,
                lse: lse(100, 63)
            },
            Output(2)
        ]
    );
    let v6 = FlowKey {
        dl_type: 0x86dd,
        ..udp_from(1, 1, 2)
    };
    assert_eq!(
        backer.translate(&v6, 0, false).actions,
        vec![
            DpAction::PushMplsEthernet {
                ethertype: 0x8848,
                lse: lse(2, 64)
            },
            Output(2)
        ]
    );
    let labelled = |label: u32| FlowKey {
        in_port: 2,
        dl_type: 0x8847,
        label: lse(label, 63),
        ..FlowKey::default()
    };
    assert_eq!(
        backer.translate(&labelled(100), 0, false).actions,
        vec![DpAction::PopMplsEthernet, Output(1)]
    );
    // decap() names no packet type: the label's payload is not known to be a frame.
    assert!(backer
        .translate(&labelled(101), 0, false)
        .actions
        .is_empty());
    // Nothing to rewrite an Ethernet address in between the decaps: refused.
    assert!(backer
        .translate(&labelled(102), 0, false)
        .actions
        .is_empty());
    // The tunnel's metadata is no header of the packet's: set as ever.
    let mut dns = udp_from(1, 1, 2);
    dns.tp_dst = 5353;
    assert_eq!(
        backer.translate(&dns, 0, false).actions,
        vec![
            DpAction::SetTunnel(5),
            DpAction::PushMplsEthernet {
                ethertype: 0x8847,
                lse: lse(0, 64)
            },
            Output(2)
        ]
    );
    // Not the bottom of its stack: refused.
    let mut stacked = labelled(100);
    stacked.label &= !(1 << 8);
    assert!(backer.translate(&stacked, 0, false).actions.is_empty());
}

/// A pop in a bridge a patch port led to, then its next table, and a pop in a
/// clone whose "popped" state stays in the clone.
#[test]
fn a_pop_mpls_across_a_patch_recirculates_in_the_peers_bridge() {
    let (backer, _a, b, _o) = patched(
        &["table=0,in_port=1,mpls,actions=clone(pop_mpls:0x0800,IN_PORT),output:2"],
        &[
            "table=0,in_port=2,mpls,actions=pop_mpls:0x0800,resubmit(,3)",
            "table=3,ip,actions=output:1",
        ],
    );
    backer.set_patch(b, 2, "pb", "pa");
    let first = backer.translate(&mpls_from(1, 7), 0, false);
    let Some(id) = recirc_of(&first.actions) else {
        panic!("{:?}", first.actions)
    };
    assert_eq!(backer.frozen_state(id).unwrap().slot, b);
    assert!(
        first.actions.starts_with(&[
            DpAction::Save,
            DpAction::PopMpls(0x0800),
            Output(1),
            DpAction::Restore,
        ]),
        "{:?}",
        first.actions
    );
    // The peer's next pass: resubmit to table 3, out of b's port 1 (datapath 3).
    let second = backer.translate(&next_pass(&udp_from(2, 1, 2), id, 0), 0, false);
    assert_eq!(second.actions, vec![Output(3)]);
    // Popped before the patch: the peer's first lookup is its next pass's.
    let (backer, _a, b, _o) = patched(
        &["table=0,in_port=1,mpls,actions=pop_mpls:0x0800,output:2"],
        &["table=0,in_port=2,ip,actions=output:1"],
    );
    backer.set_patch(b, 2, "pb", "pa");
    let first = backer.translate(&mpls_from(1, 7), 0, false);
    let Some(id) = recirc_of(&first.actions) else {
        panic!("{:?}", first.actions)
    };
    assert_eq!(backer.frozen_state(id).unwrap().slot, b);
    let second = backer.translate(&next_pass(&udp_from(2, 1, 2), id, 0), 0, false);
    assert_eq!(second.actions, vec![Output(3)]);
}

/// A select group's hash slots go to its buckets by the weight at each slot's
/// middle: weights 1:2 over 256 slots are 85 and 171 slots (the first bucket
/// within 0.4 % of its third), and no slot stands for the whole weight. A flow of
/// the next pass matches the largest aligned run of one bucket's slots: 9 flows
/// for those two buckets.
#[test]
fn hash_slots_go_to_buckets_by_the_weight_at_their_middle() {
    use vsw_ofproto::xlate::{bucket_block, hash_slots, slot_weight};
    let slots = hash_slots(2);
    assert_eq!(slots, 256);
    let first = (0..slots)
        .filter(|at| slot_weight(*at, slots, 3) < 1)
        .count();
    assert_eq!(first, 85);
    assert!((0..slots).all(|at| slot_weight(at, slots, 3) < 3));
    let runs: std::collections::BTreeSet<(u32, u32)> = (0..slots)
        .map(|at| {
            let (lo, hi) = if at < 85 { (0, 85) } else { (85, slots) };
            let mask = bucket_block(at, slots, lo, hi);
            (mask, at & mask)
        })
        .collect();
    assert_eq!(runs.len(), 9, "{runs:?}");
    // Every slot falls in exactly one run, and each run in one bucket.
    for at in 0..slots {
        let holding: Vec<_> = runs.iter().filter(|(m, v)| at & m == *v).collect();
        assert_eq!(holding.len(), 1, "slot {at}");
    }
    for total in 1..50 {
        assert!((0..64).all(|at| slot_weight(at, 64, total) < total));
    }
}
