//! The tunnel's key through the datapath: a packet a tunnel port received carries its
//! VNI and outer addresses (`PacketMeta::tunnel`), rules match them as `tun_id`,
//! `tun_src` and `tun_dst`, and `set_field:…->tun_id` / `->tun_dst` hand the output
//! port the ID to send with and the remote to send to (a tunnel port with `key=flow`
//! or `remote_ip=flow`).

mod common;

use common::*;
use vsw_datapath::dpaction::DpAction;
use vsw_datapath::{PacketMeta, TunnelKey};

fn with_id(id: u64) -> PacketMeta {
    with_tunnel(TunnelKey {
        id,
        ..TunnelKey::default()
    })
}

fn with_tunnel(tunnel: TunnelKey) -> PacketMeta {
    PacketMeta {
        tunnel,
        ..PacketMeta::default()
    }
}

fn ipv4(a: [u8; 4]) -> u32 {
    u32::from_be_bytes(a)
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
        assert_eq!(meta.tunnel.id, id);
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
    assert_eq!((to2.tunnel.id, to3.tunnel.id), (0x1234, 7));
    assert!(sw
        .dp
        .dump_flows()
        .iter()
        .any(|f| f.actions.contains(&DpAction::SetTunnel(0x1234))));
}

#[test]
fn rules_match_the_tunnel_endpoints_a_packet_came_through() {
    let mut sw = switch(3);
    rules(
        &mut sw.dp,
        &[
            "in_port=1,tun_src=198.18.5.1,tun_dst=198.18.5.2,actions=output:2",
            "in_port=1,tun_src=198.18.6.0/24,actions=output:3",
            "priority=0,actions=drop",
        ],
    );
    let f = frame(1, mac(9), 80);
    let from = |src: [u8; 4], dst: [u8; 4]| {
        with_tunnel(TunnelKey {
            id: 42,
            src: ipv4(src),
            dst: ipv4(dst),
            metadata0: 0,
            flags: 0,
        })
    };
    for (meta, port) in [
        (from([198, 18, 5, 1], [198, 18, 5, 2]), 1usize),
        (from([198, 18, 6, 77], [198, 18, 5, 2]), 2),
        (from([198, 18, 5, 1], [198, 18, 5, 2]), 1),
    ] {
        sw.peers[0].send_with(&f, meta);
        let (_, got) = sw.peers[port]
            .recv_with(WAIT)
            .expect("forwarded by its endpoints");
        assert_eq!(got.tunnel, meta.tunnel);
    }
    // Another local end, or no tunnel at all: no rule but the drop.
    sw.peers[0].send_with(&f, from([198, 18, 5, 1], [198, 18, 5, 3]));
    sw.peers[0].send_with(&f, PacketMeta::default());
    assert!(sw.peers[1].recv_timeout(QUIET).is_none());
    assert!(sw.peers[2].recv_timeout(QUIET).is_none());
    // The megaflows match the endpoints (the tunnel flows stay in userspace).
    assert!(sw
        .dp
        .dump_flows()
        .iter()
        .any(|f| f.matcher.mask().tun_src == u32::MAX && f.matcher.mask().tun_dst == u32::MAX));
}

#[test]
fn a_rule_sets_the_remote_the_output_port_sends_to() {
    let mut sw = switch(3);
    rules(
        &mut sw.dp,
        &["in_port=1,actions=set_field:198.18.5.7->tun_dst,output:2,\
           set_field:198.18.5.8->tun_dst,set_field:9->tun_id,output:3"],
    );
    let f = frame(1, mac(9), 80);
    sw.peers[0].send(&f);
    let (_, to2) = sw.peers[1].recv_with(WAIT).expect("to port 2");
    let (_, to3) = sw.peers[2].recv_with(WAIT).expect("to port 3");
    assert_eq!(to2.tunnel.dst, ipv4([198, 18, 5, 7]));
    assert_eq!((to3.tunnel.dst, to3.tunnel.id), (ipv4([198, 18, 5, 8]), 9));
    assert!(sw.dp.dump_flows().iter().any(|f| f
        .actions
        .contains(&DpAction::SetTunnelDst("198.18.5.7".parse().unwrap()))));
}

#[test]
fn rules_match_and_set_tun_metadata0() {
    let mut sw = switch(3);
    rules(
        &mut sw.dp,
        &[
            "in_port=1,tun_metadata0=0x1234,actions=set_field:0xabcd->tun_metadata0,output:2",
            "in_port=1,tun_metadata0=0x5678,actions=output:3",
            "priority=0,actions=drop",
        ],
    );
    let f = frame(1, mac(9), 80);
    let with = |metadata0| {
        with_tunnel(TunnelKey {
            id: 7,
            metadata0,
            ..TunnelKey::default()
        })
    };
    sw.peers[0].send_with(&f, with(0x1234));
    let (_, rewritten) = sw.peers[1].recv_with(WAIT).expect("to port 2");
    assert_eq!(rewritten.tunnel.metadata0, 0xabcd);
    sw.peers[0].send_with(&f, with(0x5678));
    let (_, kept) = sw.peers[2].recv_with(WAIT).expect("to port 3");
    assert_eq!(kept.tunnel.metadata0, 0x5678);
    // No option (0), or another value: the drop.
    sw.peers[0].send_with(&f, with(0));
    sw.peers[0].send_with(&f, with(0x9999));
    assert!(sw.peers[1].recv_timeout(QUIET).is_none());
    assert!(sw.peers[2].recv_timeout(QUIET).is_none());
}

#[test]
fn rules_match_the_oam_flag_as_tun_flags() {
    let mut sw = switch(3);
    rules(
        &mut sw.dp,
        &[
            "in_port=1,tun_flags=+oam,actions=output:2",
            "in_port=1,tun_flags=-oam,actions=output:3",
        ],
    );
    let f = frame(1, mac(9), 80);
    let with = |flags| {
        with_tunnel(TunnelKey {
            id: 7,
            flags,
            ..TunnelKey::default()
        })
    };
    sw.peers[0].send_with(&f, with(vsw_packet::key::TUN_FLAG_OAM));
    assert!(sw.peers[1].recv_with(WAIT).is_some(), "an OAM packet");
    sw.peers[0].send_with(&f, with(0));
    assert!(sw.peers[2].recv_with(WAIT).is_some(), "any other");
    assert!(sw.peers[1].recv_timeout(QUIET).is_none());
}
