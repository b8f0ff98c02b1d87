//! Controllers as OpenFlow sees them: vswd connects to two (this test plays both,
//! speaking OpenFlow 1.3 through vsw-openflow's codec), who take roles; both hear
//! of ports coming and going, the master of flows that went.

use std::io::Write;
use std::net::TcpListener;
use std::time::Duration;

use vsw_e2e::openflow::OfPeer;
use vsw_e2e::{serial, Vswd};
use vsw_openflow::flow_stats::{OFPRR_DELETE, OFPRR_HARD_TIMEOUT};
use vsw_openflow::message::{OFPPR_ADD, OFPPR_DELETE};
use vsw_openflow::{Message, Role, Version};

fn port_status(c: &mut OfPeer, reason: u8, name: &str) -> bool {
    c.next(|m| matches!(m, Message::PortStatus(r, p) if *r == reason && p.name == name))
        .is_some()
}

#[test]
fn two_controllers_take_roles_and_hear_of_ports_and_removed_flows() {
    let _g = serial();
    let d = Vswd::start();
    let (l1, l2) = (
        TcpListener::bind("127.0.0.1:0").unwrap(),
        TcpListener::bind("127.0.0.1:0").unwrap(),
    );
    let target = |l: &TcpListener| format!("tcp:{}", l.local_addr().unwrap());
    d.ctl_ok(&["set", "inactivity-probe=60000"]);
    d.ctl_ok(&["set-controller", &target(&l1), &target(&l2)]);
    let (mut c1, mut c2) = (
        OfPeer::accept(&l1, Version::V1_3),
        OfPeer::accept(&l2, Version::V1_3),
    );
    // Controllers flushed the tables (as Open vSwitch's): one rule for the slave to
    // try to delete.
    d.ctl_ok(&["add-flow", "priority=1,actions=NORMAL"]);

    // Roles: equal at first; one master; an older generation is stale; a newer
    // master makes the old one a slave, which may not change the switch.
    assert_eq!(c1.role(None, 0), Ok(Role::Equal));
    assert_eq!(c1.role(Some(Role::Master), 10), Ok(Role::Master));
    assert_eq!(c2.role(Some(Role::Master), 9), Err((11, 0)), "STALE");
    assert_eq!(c2.role(Some(Role::Master), 11), Ok(Role::Master));
    assert_eq!(c1.role(None, 0), Ok(Role::Slave));
    let flow_mod = {
        // A delete of everything, refused before it is looked at.
        let mut raw = vec![4u8, 14, 0, 56, 0, 0, 0, 7];
        raw.extend_from_slice(&[0; 16]); // cookie, cookie mask
        raw.extend_from_slice(&[0xff, 3, 0, 0, 0, 0, 0x80, 0]); // table all, delete
        raw.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]); // buffer, out_port
        raw.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]); // out_group, flags, pad
        raw.extend_from_slice(&[0, 1, 0, 4, 0, 0, 0, 0]); // an empty match
        raw
    };
    c1.conn.write_all(&flow_mod).unwrap();
    let refused = c1.next(|m| matches!(m, Message::Error(_)));
    assert!(
        matches!(refused, Some((7, Message::Error(ref e))) if (e.kind, e.code) == (1, 10)),
        "IS_SLAVE: {refused:?}"
    );
    assert_eq!(d.all_flows().len(), 1, "the slave changed nothing");

    // Port status, to the master and the slave alike.
    d.ctl_ok(&["add-port", "p1", "type=ring"]);
    assert!(
        port_status(&mut c1, OFPPR_ADD, "p1"),
        "the slave heard of no new port"
    );
    assert!(
        port_status(&mut c2, OFPPR_ADD, "p1"),
        "the master heard of no new port"
    );
    d.ctl_ok(&["del-port", "p1"]);
    assert!(port_status(&mut c2, OFPPR_DELETE, "p1"));

    // Flow removals, to the master: a hard timeout, a delete; not for a flow that
    // did not ask.
    d.ctl_ok(&[
        "add-flow",
        "send_flow_rem,hard_timeout=1,priority=7,tcp,actions=drop",
    ]);
    d.ctl_ok(&[
        "add-flow",
        "send_flow_rem,cookie=0x99,priority=8,udp,actions=drop",
    ]);
    d.ctl_ok(&["add-flow", "priority=9,arp,actions=drop"]);
    let timed_out = c2.next(|m| matches!(m, Message::FlowRemoved(_)));
    match timed_out {
        Some((_, Message::FlowRemoved(f))) => {
            assert_eq!(
                (f.reason, f.priority, f.hard_timeout),
                (OFPRR_HARD_TIMEOUT, 7, 1)
            );
            assert!(f.counts.duration_ms >= 1000, "{f:?}");
        }
        other => panic!("no flow removal for the timeout: {other:?}"),
    }
    d.ctl_ok(&["del-flows", "udp"]);
    d.ctl_ok(&["del-flows", "arp"]);
    let deleted = c2.next(|m| matches!(m, Message::FlowRemoved(_)));
    match deleted {
        Some((_, Message::FlowRemoved(f))) => {
            assert_eq!((f.reason, f.cookie, f.priority), (OFPRR_DELETE, 0x99, 8));
        }
        other => panic!("no flow removal for the delete: {other:?}"),
    }
    // Removals are handed on every 200 ms: a second is plenty to see none come.
    let none_within = Duration::from_secs(1);
    assert!(
        c2.next_within(none_within, |m| matches!(m, Message::FlowRemoved(_)))
            .is_none(),
        "a removal of a flow that did not ask for one"
    );
    assert!(
        c1.next_within(none_within, |m| matches!(m, Message::FlowRemoved(_)))
            .is_none(),
        "a slave is not told of removals by default"
    );
    d.ctl_ok(&["del-controller"]);
}
