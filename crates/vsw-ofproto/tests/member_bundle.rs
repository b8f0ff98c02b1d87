//! `bundle(…)` and `bundle_load(…)`: a live member chosen in translation; a link
//! going down moves the flows to another member.

use std::sync::Arc;

use vsw_datapath::DpAction::Output;
use vsw_datapath::Upcall;
use vsw_flow::{parse_flow, Pipeline};
use vsw_ofproto::{Backer, Ofproto};
use vsw_packet::{FlowKey, MacAddr};

fn bridge(flows: &[&str]) -> (Arc<Backer>, Arc<Ofproto>) {
    let mut p = Pipeline::new();
    for f in flows {
        p.insert(parse_flow(f, &|_: &str| None).unwrap(), 1);
    }
    let backer = Backer::new();
    let (slot, o) = Ofproto::join(&backer, "br", p).unwrap();
    o.set_ports(vec![1, 2, 3, 4]);
    for port in 1..=4 {
        backer.set_port(slot, port, port).unwrap();
    }
    (backer, o)
}

fn frame(src: u8) -> FlowKey {
    FlowKey {
        in_port: 1,
        dl_src: MacAddr([2, 0, 0, 0, 0, src]),
        dl_type: 0x0800,
        ..FlowKey::default()
    }
}

#[test]
fn active_backup_sends_to_the_first_live_member_and_moves_when_it_goes_down() {
    let (backer, o) = bridge(&["actions=bundle(eth_src,0,active_backup,ofport,members:3,2)"]);
    o.set_live_ports(vec![1, 2, 3, 4]);
    let t = backer.translate(&frame(1), 0, true);
    assert_eq!(t.actions, vec![Output(3)]);
    assert_eq!(
        t.mask.dl_src,
        MacAddr([0; 6]),
        "active_backup reads no field"
    );
    let made = backer.generation();
    o.set_live_ports(vec![1, 2, 4]);
    assert!(
        !t.attribution.unchanged_since(made),
        "a link change re-translates it"
    );
    assert_eq!(
        backer.translate(&frame(1), 0, true).actions,
        vec![Output(2)]
    );
    o.set_live_ports(vec![1]);
    assert!(backer.translate(&frame(1), 0, true).actions.is_empty());
}

#[test]
fn hrw_loads_a_live_member_by_the_hash_of_the_source() {
    let (backer, o) = bridge(&[
        "actions=bundle_load(eth_src,0,hrw,ofport,NXM_NX_REG0[],members:2,3,4),\
         output:NXM_NX_REG0[0..15]",
    ]);
    o.set_live_ports(vec![1, 2, 3, 4]);
    let mut seen = std::collections::BTreeSet::new();
    for src in 1..=60 {
        let t = backer.translate(&frame(src), 0, true);
        assert_eq!(
            t.mask.dl_src,
            MacAddr::BROADCAST,
            "the choice read the source"
        );
        let [Output(p)] = t.actions[..] else {
            panic!("{:?}", t.actions)
        };
        seen.insert(p);
    }
    assert_eq!(seen.into_iter().collect::<Vec<_>>(), vec![2, 3, 4]);
    o.set_live_ports(vec![1, 3]);
    for src in 1..=20 {
        assert_eq!(
            backer.translate(&frame(src), 0, true).actions,
            vec![Output(3)]
        );
    }
}
