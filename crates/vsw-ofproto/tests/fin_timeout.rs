//! `fin_timeout(…)` in translation: the flow looks at the FIN and RST bits of a
//! rule's TCP packets, a FIN or RST cuts the rule's timeouts when a packet passes
//! (not when a flow is only translated again) and each time the flow's counts are
//! pushed, and other packets cut nothing.

use std::sync::Arc;

use vsw_datapath::Upcall;
use vsw_flow::{parse_flow, Pipeline};
use vsw_ofproto::{Backer, Ofproto};
use vsw_packet::FlowKey;

const FIN: u16 = 0x001;
const SYN: u16 = 0x002;
const RST: u16 = 0x004;

/// One bridge with one rule: TCP to port 80 out of port 2, its idle timeout cut to
/// 5 s and its hard timeout to 30 s by a FIN or RST.
fn bridge() -> (Arc<Backer>, Arc<Ofproto>) {
    let mut p = Pipeline::new();
    let rule = "hard_timeout=60,tcp,tp_dst=80,actions=fin_timeout(idle_timeout=5,hard_timeout=30),output:2";
    p.insert(parse_flow(rule, &|_: &str| None).unwrap(), 1);
    let backer = Backer::new();
    let (slot, o) = Ofproto::join(&backer, "br", p).unwrap();
    o.set_ports(vec![1, 2]);
    for port in 1..=2 {
        backer.set_port(slot, port, port).unwrap();
    }
    (backer, o)
}

fn tcp(flags: u16) -> FlowKey {
    FlowKey {
        in_port: 1,
        dl_type: 0x0800,
        nw_proto: 6,
        tp_dst: 80,
        tcp_flags: flags,
        ..FlowKey::default()
    }
}

fn timeouts(o: &Ofproto) -> (u16, u16) {
    let p = o.pipeline();
    let r = &p.rules()[0];
    (r.idle_timeout(), r.hard_timeout())
}

#[test]
fn only_a_fin_or_rst_cuts_and_the_flow_tells_them_apart() {
    let (backer, o) = bridge();
    let syn = backer.translate(&tcp(SYN), 1_000, true);
    assert_eq!(
        syn.mask.tcp_flags,
        FIN | RST,
        "the flow looks at FIN and RST only"
    );
    assert_eq!(timeouts(&o), (0, 60), "a SYN cuts nothing");
    syn.attribution.credit(10, 600, 2_000);
    assert_eq!(timeouts(&o), (0, 60), "nor do the SYN flow's packets");
    // Translated again (a revalidation), a FIN flow cuts nothing yet ...
    let fin = backer.translate(&tcp(FIN), 1_000, false);
    assert_eq!(fin.mask.tcp_flags, FIN | RST);
    assert_eq!(timeouts(&o), (0, 60));
    // ... its packets do, when their counts are pushed.
    fin.attribution.credit(0, 0, 2_000);
    assert_eq!(timeouts(&o), (0, 60), "no packet, no cut");
    fin.attribution.credit(1, 60, 2_000);
    assert_eq!(timeouts(&o), (5, 30));
}

#[test]
fn a_reset_passing_cuts_at_once() {
    let (backer, o) = bridge();
    backer.translate(&tcp(RST | 0x010), 1_000, true);
    assert_eq!(timeouts(&o), (5, 30));
}
