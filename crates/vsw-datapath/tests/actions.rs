//! Rewriting actions through the whole datapath.

mod common;

use common::*;
use vsw_packet::builder::checksum;

fn ipv4_header_ok(f: &[u8], ip: usize) -> bool {
    checksum(&f[ip..ip + 20]) == 0
}

#[test]
fn rewrites_apply_to_the_outputs_after_them() {
    let mut sw = switch(3);
    rules(
        &mut sw.dp,
        &["in_port=1,udp,actions=output:2,mod_dl_src:02:00:00:00:00:aa,mod_nw_dst:198.19.0.9,mod_tp_dst:4789,output:3"],
    );
    let f = frame(1, mac(2), 53);
    sw.peers[0].send(&f);
    let plain = sw.peers[1]
        .recv_timeout(WAIT)
        .expect("port 2 gets the frame");
    assert_eq!(plain, f, "the output before the rewrites sees the original");
    let changed = sw.peers[2]
        .recv_timeout(WAIT)
        .expect("port 3 gets the frame");
    assert_eq!(&changed[6..12], &[2, 0, 0, 0, 0, 0xaa]);
    assert_eq!(&changed[30..34], &[198, 19, 0, 9]);
    assert_eq!(u16::from_be_bytes([changed[36], changed[37]]), 4789);
    assert!(ipv4_header_ok(&changed, 14));
    assert_eq!(changed.len(), f.len());
}

#[test]
fn vlan_push_set_and_strip() {
    let mut sw = switch(3);
    rules(
        &mut sw.dp,
        &[
            "in_port=1,actions=mod_vlan_vid:10,mod_vlan_pcp:5,output:2",
            "in_port=2,dl_vlan=10,actions=strip_vlan,output:3",
        ],
    );
    let f = frame(1, mac(2), 7);
    sw.peers[0].send(&f);
    let tagged = sw.peers[1].recv_timeout(WAIT).expect("tagged frame");
    assert_eq!(&tagged[12..16], &[0x81, 0x00, 0xa0, 0x0a]);
    assert_eq!(&tagged[16..], &f[12..]);
    sw.peers[1].send(&tagged);
    let untagged = sw.peers[2].recv_timeout(WAIT).expect("untagged frame");
    assert_eq!(untagged, f);
}

#[test]
fn dec_ttl_drops_at_the_end_of_life_and_in_port_reflects() {
    let mut sw = switch(2);
    let ofproto = rules(
        &mut sw.dp,
        &["in_port=1,ip,actions=dec_ttl,in_port,output:2"],
    );
    let mut f = frame(1, mac(2), 7);
    sw.peers[0].send(&f);
    let back = sw.peers[0]
        .recv_timeout(WAIT)
        .expect("in_port sends it back");
    assert_eq!(back[22], 63, "TTL 64 → 63");
    assert!(ipv4_header_ok(&back, 14));
    assert_eq!(sw.peers[1].recv_timeout(WAIT), Some(back));
    // TTL 1: the packet goes nowhere, the rule still counts it.
    f[22] = 1;
    let c = checksum(&{
        let mut h = f[14..34].to_vec();
        h[10..12].fill(0);
        h
    });
    f[24..26].copy_from_slice(&c.to_be_bytes());
    sw.peers[0].send(&f);
    assert!(sw.peers[0].recv_timeout(QUIET).is_none());
    assert!(sw.peers[1].try_recv().is_none());
    eventually("both packets counted on the rule", || {
        sw.dp.push_flow_stats();
        ofproto.pipeline().rules()[0].stats.packets() == 2
    });
}

#[test]
fn output_to_the_input_port_is_skipped_but_in_port_is_not() {
    let mut sw = switch(2);
    rules(&mut sw.dp, &["in_port=1,actions=output:1,output:2"]);
    sw.peers[0].send(&frame(1, mac(2), 7));
    assert!(sw.peers[1].recv_timeout(WAIT).is_some());
    assert!(sw.peers[0].recv_timeout(QUIET).is_none());
}

#[test]
fn a_packet_sent_to_the_controller_comes_up_as_rewritten_with_its_note() {
    let mut sw = switch(2);
    let ofproto = rules(
        &mut sw.dp,
        &["cookie=0x77,in_port=1,actions=mod_vlan_vid:10,controller:64,output:2"],
    );
    let punts = sw.dp.punts();
    let f = frame(1, mac(2), 9);
    for _ in 0..2 {
        // The first packet is an upcall's, the second a cached flow's.
        sw.peers[0].send(&f);
        let up = punts.recv_timeout(WAIT).expect("a punted packet");
        assert_eq!(up.in_port, 1);
        assert_eq!(
            &up.frame[12..16],
            &[0x81, 0x00, 0x00, 0x0a],
            "tag pushed before"
        );
        assert_eq!(
            up.frame.len(),
            f.len() + 4,
            "the whole frame; cutting is OpenFlow's"
        );
        let note = ofproto.punt_note(up.userdata).expect("its note");
        assert_eq!((note.cookie, note.table, note.max_len), (0x77, 0, 64));
        assert_eq!(note.reason, vsw_ofproto::PuntReason::Action);
        assert!(sw.peers[1].recv_timeout(WAIT).is_some(), "and it goes on");
    }
    assert_eq!(punts.lost(), 0);
}

#[test]
fn an_injected_packet_is_sent_by_its_own_actions() {
    let mut sw = switch(3);
    rules(&mut sw.dp, &["actions=drop"]);
    let f = frame(1, mac(2), 9);
    let injected = vsw_datapath::Injected {
        in_port: u32::MAX,
        headers: Vec::new(),
        actions: vec![
            vsw_datapath::DpAction::Output(2),
            vsw_datapath::DpAction::SetTpDst(80),
            vsw_datapath::DpAction::Output(3),
        ],
        frame: f.clone(),
    };
    sw.dp.punts().inject(injected).expect("room in the queue");
    assert_eq!(sw.peers[1].recv_timeout(WAIT), Some(f.clone()));
    let changed = sw.peers[2].recv_timeout(WAIT).expect("port 3 gets it");
    assert_eq!(u16::from_be_bytes([changed[36], changed[37]]), 80);
    assert!(sw.peers[0].try_recv().is_none());
}
