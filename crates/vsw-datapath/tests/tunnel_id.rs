//! The tunnel ID through the datapath: a packet a tunnel port received carries its
//! VNI (`PacketMeta::tun_id`), rules match it as `tun_id`, and `set_field:…->tun_id`
//! hands the output port the ID to send with (a tunnel port with `key=flow`).

mod common;

use common::*;
use vsw_datapath::dpaction::DpAction;
use vsw_datapath::PacketMeta;

fn with_id(tun_id: u64) -> PacketMeta {
    PacketMeta {
        tun_id,
        ..PacketMeta::default()
    }
}

#[test]
fn rules_match_the_tunnel_id_a_packet_came_with() {
    let mut sw = switch(3);
    rules(
        &mut sw.dp,
        &[
            "in_port=1,tun_id=42,actions=output:2",
            "in_port=1,tun_id=43,actions=output:3",
            "priority=0,actions=drop",
        ],
    );
    let f = frame(1, mac(9), 80);
    for (id, port) in [(42u64, 1usize), (43, 2), (42, 1)] {
        sw.peers[0].send_with(&f, with_id(id));
        let (got, meta) = sw.peers[port].recv_with(WAIT).expect("forwarded by its ID");
        assert_eq!(got, f);
        // Forwarded as it came: the ID stays with the packet.
        assert_eq!(meta.tun_id, id);
    }
    // No rule for ID 44 (nor for none): dropped.
    sw.peers[0].send_with(&f, with_id(44));
    sw.peers[0].send_with(&f, with_id(0));
    assert!(sw.peers[1].recv_timeout(QUIET).is_none());
    assert!(sw.peers[2].recv_timeout(QUIET).is_none());
}

#[test]
fn a_rule_sets_the_id_the_output_port_sends_with() {
    let mut sw = switch(3);
    rules(
        &mut sw.dp,
        &["in_port=1,actions=set_field:0x1234->tun_id,output:2,set_field:7->tun_id,output:3"],
    );
    let f = frame(1, mac(9), 80);
    sw.peers[0].send(&f);
    let (_, to2) = sw.peers[1].recv_with(WAIT).expect("to port 2");
    let (_, to3) = sw.peers[2].recv_with(WAIT).expect("to port 3");
    assert_eq!((to2.tun_id, to3.tun_id), (0x1234, 7));
    assert!(sw
        .dp
        .dump_flows()
        .iter()
        .any(|f| f.actions.contains(&DpAction::SetTunnel(0x1234))));
}
