//! Bundles (issue 31, item 4): flow-mods and group-mods committed together, all or
//! none — through the real `ovs-ofctl --bundle` in OpenFlow 1.3 (ONF's extension),
//! 1.4 and 1.5, and message by message for every refusal a bundle request can meet.

use std::time::Duration;

use vsw_e2e::openflow::OfPeer;
use vsw_e2e::{serial, Vswd};
use vsw_openflow::bundle::{
    BundleAdd, BundleCtrl, OFPBCT_CLOSE_REQUEST, OFPBCT_COMMIT_REPLY, OFPBCT_COMMIT_REQUEST,
    OFPBCT_DISCARD_REPLY, OFPBCT_DISCARD_REQUEST, OFPBCT_OPEN_REPLY, OFPBCT_OPEN_REQUEST,
    OFPBF_ATOMIC, OFPBF_ORDERED,
};
use vsw_openflow::flow_mod::{Action, Command as FlowCommand, FlowMod, Instruction};
use vsw_openflow::group_mod::{
    GroupCommand, GroupMod, OfBucket, OFPG15_BUCKET_ALL, OFPG15_BUCKET_LAST, OFPGT_INDIRECT,
    OFPGT_SELECT,
};
use vsw_openflow::meter_mod::{MeterCommand, MeterMod, OfBand, OFPMBT_DROP, OFPMF_KBPS};
use vsw_openflow::oxm::{OxmField, OxmMatch};
use vsw_openflow::{Message, Role, Version};

/// `ovs-ofctl -O VERSION [--options] COMMAND <br0> ARGS…`: its exit status, stdout
/// and stderr.
fn ofctl(d: &Vswd, version: &str, args: &[&str]) -> (bool, String, String) {
    let mut all = vec!["-O", version];
    all.extend_from_slice(args);
    let out = vsw_e2e::openflow::ovs_ofctl(d, &all);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The flows as `ovs-ofctl dump-flows` prints them, without counters, sorted.
fn flows(d: &Vswd, version: &str) -> Vec<String> {
    let (ok, out, err) = ofctl(d, version, &["dump-flows", "--no-stats"]);
    assert!(ok, "dump-flows: {err}");
    let mut lines: Vec<String> = out
        .lines()
        .filter(|l| !l.starts_with("OFPST_FLOW") && !l.trim().is_empty())
        .map(|l| l.trim().to_string())
        .collect();
    lines.sort();
    lines
}

#[test]
fn ovs_ofctl_bundles_commit_all_or_nothing_in_every_version() {
    let _g = serial();
    let d = Vswd::start();
    let file = d.dir.join("flows.txt");
    let bad = d.dir.join("bad.txt");
    let one = d.dir.join("one.txt");
    std::fs::write(
        &file,
        "priority=5,in_port=1,actions=output:2\npriority=6,in_port=2,actions=output:1\ntable=1,priority=7,ip,actions=drop\n",
    )
    .unwrap();
    // The second flow goes back to its own table: refused, so the first is not
    // installed either.
    std::fs::write(
        &bad,
        "priority=9,in_port=3,actions=output:1\npriority=9,in_port=4,actions=goto_table:0\n",
    )
    .unwrap();
    std::fs::write(&one, "priority=5,in_port=1,actions=output:2\n").unwrap();
    for version in ["OpenFlow13", "OpenFlow14", "OpenFlow15"] {
        let (ok, _, err) = ofctl(&d, version, &["del-flows"]);
        assert!(ok, "{version} del-flows: {err}");
        let (ok, _, err) = ofctl(
            &d,
            version,
            &["--bundle", "add-flows", file.to_str().unwrap()],
        );
        assert!(ok, "{version} --bundle add-flows: {err}");
        let installed = flows(&d, version);
        assert_eq!(installed.len(), 3, "{version}: {installed:?}");

        let (ok, _, err) = ofctl(
            &d,
            version,
            &["--bundle", "add-flows", bad.to_str().unwrap()],
        );
        assert!(
            !ok,
            "{version}: a bundle with a refused flow-mod was committed"
        );
        assert!(
            err.contains("OFPBIC_BAD_TABLE_ID"),
            "{version}: the refused flow-mod's own error (when it is added): {err}"
        );
        assert_eq!(
            flows(&d, version),
            installed,
            "{version}: a failed commit changed the tables"
        );

        let (ok, _, err) = ofctl(
            &d,
            version,
            &["--bundle", "replace-flows", one.to_str().unwrap()],
        );
        assert!(ok, "{version} --bundle replace-flows: {err}");
        assert_eq!(flows(&d, version).len(), 1, "{version}");
        let (same, out, err) = ofctl(&d, version, &["diff-flows", one.to_str().unwrap()]);
        assert!(same, "{version} diff-flows after replace-flows: {out}{err}");
    }
}

fn field(field: u8, value: &[u8]) -> OxmField {
    OxmField {
        field,
        value: value.to_vec(),
        mask: None,
    }
}

/// An add to table 0 of `in_port=PORT`, applying `actions`.
fn flow(port: u32, actions: Vec<Action>) -> FlowMod {
    let matcher = OxmMatch {
        fields: vec![field(0, &port.to_be_bytes())],
    };
    FlowMod {
        cookie: u64::from(port),
        priority: 100,
        instructions: vec![Instruction::ApplyActions(actions)],
        ..FlowMod::new(FlowCommand::Add, matcher)
    }
}

struct Peer {
    p: OfPeer,
    version: Version,
    /// The xids of bundle-adds, apart from the peer's own.
    next_xid: u32,
}

impl Peer {
    fn connect(d: &Vswd, version: Version) -> Peer {
        let conn = std::os::unix::net::UnixStream::connect(d.dir.join("br0.mgmt")).unwrap();
        conn.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let mut p = OfPeer::over(Box::new(conn), version);
        p.greet();
        Peer {
            p,
            version,
            next_xid: 0x7000_0000,
        }
    }

    /// A bundle-control request; its reply's type, or the error's (type, code).
    fn control(&mut self, bundle_id: u32, kind: u16, flags: u16) -> Result<u16, (u16, u16)> {
        let xid = self.p.send(Message::BundleControl(BundleCtrl {
            bundle_id,
            kind,
            flags,
        }));
        match self
            .p
            .next(|m| matches!(m, Message::BundleControl(_) | Message::Error(_)))
        {
            Some((x, Message::BundleControl(c))) if x == xid => {
                // Replies carry no flags, as Open vSwitch's.
                assert_eq!((c.bundle_id, c.flags), (bundle_id, 0));
                Ok(c.kind)
            }
            Some((x, Message::Error(e))) if x == xid => Err((e.kind, e.code)),
            other => panic!("no answer to the bundle request {xid}: {other:?}"),
        }
    }

    /// Adds `m` to a bundle (its xid the add's, unless `inner_xid`); the error's
    /// (type, code) if one comes before a barrier's reply.
    fn add(
        &mut self,
        bundle_id: u32,
        flags: u16,
        m: Message,
        inner_xid: Option<u32>,
    ) -> Option<(u16, u16)> {
        use std::io::Write;
        self.next_xid += 1;
        let xid = self.next_xid;
        let inner = m.encode(self.version.wire(), inner_xid.unwrap_or(xid));
        let add = Message::BundleAdd(BundleAdd {
            bundle_id,
            flags,
            message: inner,
        })
        .encode(self.version.wire(), xid);
        self.p.conn.write_all(&add).unwrap();
        let barrier = self.p.send(Message::BarrierRequest);
        let mut refused = None;
        loop {
            match self
                .p
                .next(|m| matches!(m, Message::BarrierReply | Message::Error(_)))
            {
                Some((x, Message::Error(e))) if x == xid => refused = Some((e.kind, e.code)),
                Some((x, Message::BarrierReply)) if x == barrier => return refused,
                other => panic!("no answer to the bundle add {xid}: {other:?}"),
            }
        }
    }
}

/// OFPET_BUNDLE_FAILED's code in 1.4 on; ONF's experimenter error in 1.3.
fn bundle_failed(version: Version, code: u16) -> (u16, u16) {
    if version >= Version::V1_4 {
        (17, code)
    } else {
        (0xffff, 2300 + code)
    }
}

#[test]
fn bundle_requests_are_answered_and_refused_as_the_spec_says() {
    let _g = serial();
    let d = Vswd::start();
    for version in [Version::V1_3, Version::V1_4, Version::V1_5] {
        let mut p = Peer::connect(&d, version);
        let flags = OFPBF_ATOMIC | OFPBF_ORDERED;
        let failed = |code| Err(bundle_failed(version, code));
        // Open, add a group and a flow that hands packets to it (order matters: the
        // group comes first), close, commit.
        assert_eq!(
            p.control(1, OFPBCT_OPEN_REQUEST, flags),
            Ok(OFPBCT_OPEN_REPLY)
        );
        let group = GroupMod {
            command: GroupCommand::Add,
            kind: OFPGT_INDIRECT,
            group_id: 5,
            buckets: vec![OfBucket {
                bucket_id: 0,
                weight: 0,
                watch_port: u32::MAX,
                watch_group: u32::MAX,
                actions: vec![Action::Output {
                    port: 2,
                    max_len: 0,
                }],
            }],
            command_bucket_id: OFPG15_BUCKET_ALL,
            properties: Vec::new(),
        };
        assert_eq!(
            p.add(1, flags, Message::GroupMod(group.clone()), None),
            None
        );
        assert_eq!(
            p.add(
                1,
                flags,
                Message::FlowMod(flow(1, vec![Action::Group(5)])),
                None
            ),
            None
        );
        // Nothing is carried out before the commit.
        assert!(d.flows().iter().all(|f| !f.flow.contains("group:5")));
        assert_eq!(p.control(1, OFPBCT_CLOSE_REQUEST, flags), Ok(3));
        assert_eq!(
            p.control(1, OFPBCT_COMMIT_REQUEST, flags),
            Ok(OFPBCT_COMMIT_REPLY)
        );
        assert!(
            d.flows().iter().any(|f| f.flow.contains("group:5")),
            "the committed flow is installed: {:?}",
            d.flows()
        );
        assert_eq!(
            p.control(1, OFPBCT_COMMIT_REQUEST, flags),
            failed(2),
            "BAD_ID"
        );

        // A request inconsistent with its bundle is refused and, as Open vSwitch
        // does, the bundle is dropped: opened twice, added to with other flags,
        // added to once closed.
        assert_eq!(
            p.control(9, OFPBCT_OPEN_REQUEST, flags),
            Ok(OFPBCT_OPEN_REPLY)
        );
        assert_eq!(
            p.control(9, OFPBCT_OPEN_REQUEST, flags),
            failed(3),
            "BUNDLE_EXIST"
        );
        assert_eq!(p.control(9, OFPBCT_COMMIT_REQUEST, flags), failed(2));
        assert_eq!(
            p.add(10, flags, Message::FlowMod(flow(2, vec![])), None),
            None
        );
        assert_eq!(
            p.add(10, OFPBF_ATOMIC, Message::FlowMod(flow(2, vec![])), None),
            Some(bundle_failed(version, 7)),
            "BAD_FLAGS"
        );
        assert_eq!(p.control(10, OFPBCT_COMMIT_REQUEST, flags), failed(2));
        assert_eq!(
            p.control(11, OFPBCT_OPEN_REQUEST, flags),
            Ok(OFPBCT_OPEN_REPLY)
        );
        assert_eq!(p.control(11, OFPBCT_CLOSE_REQUEST, flags), Ok(3));
        assert_eq!(
            p.add(11, flags, Message::FlowMod(flow(2, vec![])), None),
            Some(bundle_failed(version, 4)),
            "BUNDLE_CLOSED"
        );
        assert_eq!(p.control(11, OFPBCT_COMMIT_REQUEST, flags), failed(2));
        assert!(
            d.flows().iter().all(|f| !f.flow.contains("in_port=2")),
            "a dropped bundle carried nothing out"
        );
        // What a flow-mod says alone is checked when it is added: a goto to its
        // own table is refused then, with its own error.
        let mut backwards = flow(3, vec![]);
        backwards.instructions.push(Instruction::GotoTable(0));
        assert_eq!(
            p.add(12, flags, Message::FlowMod(backwards), None),
            Some((3, 2)),
            "BAD_INSTRUCTION/BAD_TABLE_ID"
        );

        // Refused adds: a meter-mod (not bundled), an inner xid not the add's.
        let meter = MeterMod {
            command: MeterCommand::Add,
            flags: OFPMF_KBPS,
            meter_id: 1,
            bands: vec![OfBand {
                kind: OFPMBT_DROP,
                rate: 1000,
                burst_size: 0,
                prec_level: 0,
            }],
        };
        assert_eq!(
            p.add(2, flags, Message::MeterMod(meter), None),
            Some(bundle_failed(version, 10)),
            "MSG_UNSUP"
        );
        assert_eq!(
            p.add(2, flags, Message::FlowMod(flow(3, vec![])), Some(7)),
            Some(bundle_failed(version, 9)),
            "MSG_BAD_XID"
        );
        // An add opens the bundle; a discard drops it and what it held.
        assert_eq!(
            p.add(2, flags, Message::FlowMod(flow(3, vec![])), None),
            None
        );
        assert_eq!(
            p.control(2, OFPBCT_DISCARD_REQUEST, flags),
            Ok(OFPBCT_DISCARD_REPLY)
        );
        assert_eq!(p.control(2, OFPBCT_COMMIT_REQUEST, flags), failed(2));
        assert_eq!(p.control(3, 99, flags), failed(6), "BAD_TYPE");
        assert_eq!(
            p.control(3, OFPBCT_OPEN_REQUEST, 0x80),
            failed(7),
            "BAD_FLAGS"
        );

        // A commit whose second message is refused changes nothing: the first
        // message's group modification is undone with it.
        let modified = GroupMod {
            command: GroupCommand::Modify,
            buckets: vec![OfBucket {
                actions: vec![Action::Output {
                    port: 3,
                    max_len: 0,
                }],
                ..group.buckets[0].clone()
            }],
            ..group.clone()
        };
        assert_eq!(p.add(4, flags, Message::GroupMod(modified), None), None);
        assert_eq!(
            p.add(
                4,
                flags,
                Message::FlowMod(flow(4, vec![Action::Group(99)])),
                None
            ),
            None
        );
        let xid = p.p.send(Message::BundleControl(BundleCtrl {
            bundle_id: 4,
            kind: OFPBCT_COMMIT_REQUEST,
            flags,
        }));
        // The refused flow-mod's own error (BAD_ACTION/BAD_OUT_GROUP: group 99 is
        // none), then the commit's MSG_FAILED.
        let first = p.p.next(|m| matches!(m, Message::Error(_)));
        let Some((inner_xid, Message::Error(inner))) = first else {
            panic!("no error for the refused message: {first:?}")
        };
        assert_ne!(
            inner_xid, xid,
            "the refused message's error has its own xid"
        );
        assert_eq!((inner.kind, inner.code), (2, 9), "BAD_ACTION/BAD_OUT_GROUP");
        let second = p.p.next(|m| matches!(m, Message::Error(_)));
        let Some((x, Message::Error(e))) = second else {
            panic!("no MSG_FAILED: {second:?}")
        };
        assert_eq!(
            (x, e.kind, e.code),
            (
                xid,
                bundle_failed(version, 13).0,
                bundle_failed(version, 13).1
            )
        );
        let groups = d.ctl_ok(&["dump-groups"]);
        assert!(
            groups.contains("output:2") && !groups.contains("output:3"),
            "a failed commit left the group changed: {groups}"
        );
        // Clean for the next version.
        d.ctl_ok(&["del-groups"]);
        d.ctl_ok(&["del-flows"]);
    }
    // A slave changes nothing: every bundle request is refused (IS_SLAVE).
    let mut slave = Peer::connect(&d, Version::V1_4);
    assert_eq!(slave.p.role(Some(Role::Slave), 1), Ok(Role::Slave));
    let flags = OFPBF_ATOMIC | OFPBF_ORDERED;
    assert_eq!(slave.control(20, OFPBCT_OPEN_REQUEST, flags), Err((1, 10)));
    assert_eq!(
        slave.add(20, flags, Message::FlowMod(flow(4, vec![])), None),
        Some((1, 10))
    );
}

/// An insert of buckets works on the group as the messages before it in the
/// bundle left it: ovn-controller adds a large group and inserts the rest of its
/// buckets in the same bundle.
#[test]
fn a_bundle_inserts_buckets_into_the_group_it_added() {
    let _g = serial();
    let d = Vswd::start();
    let mut p = Peer::connect(&d, Version::V1_5);
    let flags = OFPBF_ATOMIC | OFPBF_ORDERED;
    let bucket = |bucket_id, port| OfBucket {
        bucket_id,
        weight: 1,
        watch_port: u32::MAX,
        watch_group: u32::MAX,
        actions: vec![Action::Output { port, max_len: 0 }],
    };
    let add = GroupMod {
        command: GroupCommand::Add,
        kind: OFPGT_SELECT,
        group_id: 6,
        buckets: vec![bucket(0, 1)],
        command_bucket_id: OFPG15_BUCKET_ALL,
        properties: Vec::new(),
    };
    let insert = GroupMod {
        command: GroupCommand::InsertBucket,
        buckets: vec![bucket(1, 2), bucket(2, 3)],
        command_bucket_id: OFPG15_BUCKET_LAST,
        ..add.clone()
    };
    assert_eq!(
        p.control(1, OFPBCT_OPEN_REQUEST, flags),
        Ok(OFPBCT_OPEN_REPLY)
    );
    assert_eq!(p.add(1, flags, Message::GroupMod(add), None), None);
    assert_eq!(
        p.add(1, flags, Message::GroupMod(insert.clone()), None),
        None
    );
    assert_eq!(
        p.control(1, OFPBCT_COMMIT_REQUEST, flags),
        Ok(OFPBCT_COMMIT_REPLY)
    );
    let group_line = || {
        let groups = d.ctl_ok(&["dump-groups"]);
        let line = groups.lines().find(|l| l.contains("group_id=6"));
        line.unwrap_or_default().to_string()
    };
    let groups = group_line();
    assert_eq!(groups.matches("bucket=").count(), 3, "{groups}");
    // The same insert again: its bucket ids are the group's already, and the
    // bundle changes nothing.
    assert_eq!(
        p.control(2, OFPBCT_OPEN_REQUEST, flags),
        Ok(OFPBCT_OPEN_REPLY)
    );
    assert_eq!(p.add(2, flags, Message::GroupMod(insert), None), None);
    p.p.send(Message::BundleControl(BundleCtrl {
        bundle_id: 2,
        kind: OFPBCT_COMMIT_REQUEST,
        flags,
    }));
    // The insert's own error (GROUP_MOD_FAILED/BUCKET_EXISTS), then MSG_FAILED.
    let first = p.p.next(|m| matches!(m, Message::Error(_)));
    let Some((_, Message::Error(inner))) = first else {
        panic!("no error for the refused insert: {first:?}")
    };
    assert_eq!((inner.kind, inner.code), (6, 16), "BUCKET_EXISTS");
    assert_eq!(group_line(), groups);
}

/// A refused flow-mod is logged at `info` with its message type, xid and the
/// OpenFlow error it was answered with; a storm of them is logged ten a second,
/// the rest counted — and every one is still answered.

#[test]
fn refused_requests_are_logged_with_their_error_and_rate_limited() {
    let _g = serial();
    let d = Vswd::start();
    let mut p = Peer::connect(&d, Version::V1_3);
    let mut xids = Vec::new();
    for port in 1..=50 {
        // Group 99 does not exist.
        xids.push(p.p.send(Message::FlowMod(flow(port, vec![Action::Group(99)]))));
    }
    let barrier = p.p.send(Message::BarrierRequest);
    let mut answered = Vec::new();
    loop {
        match p
            .p
            .next(|m| matches!(m, Message::BarrierReply | Message::Error(_)))
        {
            Some((x, Message::Error(e))) => {
                assert_eq!((e.kind, e.code), (2, 9), "BAD_ACTION/BAD_OUT_GROUP");
                answered.push(x);
            }
            Some((x, Message::BarrierReply)) if x == barrier => break,
            other => panic!("no barrier reply: {other:?}"),
        }
    }
    assert_eq!(answered, xids, "every refused flow-mod is answered");
    let log = d.log();
    let logged: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("OpenFlow request refused"))
        .collect();
    assert!(
        logged
            .iter()
            .any(|l| l.contains("BAD_OUT_GROUP") && l.contains("message_type=14")),
        "no refusal logged with its error and type:\n{log}"
    );
    assert!(
        (1..=20).contains(&logged.len()),
        "{} refusals logged for 50 refused flow-mods within a second or two",
        logged.len()
    );
}

/// A bundle's adds are put in whole when their tables have no rules of their
/// masks (into empty tables, after a delete of everything in the same bundle), and
/// one by one when they do or when one add replaces another of the bundle: the
/// flows and the traffic are those of the adds carried out in order either way.
#[test]
fn a_bundles_adds_put_in_whole_or_one_by_one_forward_as_the_adds_say() {
    let _g = serial();
    let d = Vswd::start();
    let (h1, h2) = (vsw_e2e::Host::new(1), vsw_e2e::Host::new(2));
    d.ctl_ok(&["add-port", &h1.port]);
    d.ctl_ok(&["add-port", &h2.port]);
    let bundle = |name: &str, lines: &str| {
        let file = d.dir.join(name);
        std::fs::write(&file, lines).unwrap();
        ofctl(
            &d,
            "OpenFlow14",
            &["--bundle", "add-flows", file.to_str().unwrap()],
        )
    };
    let forwarding = "priority=10,arp,actions=NORMAL\npriority=10,ip,nw_dst=198.18.0.2,actions=output:2\npriority=10,ip,nw_dst=198.18.0.1,actions=output:1\n";
    // Into the empty table: whole.
    let (ok, _, err) = bundle("a.txt", &format!("priority=0,actions=drop\n{forwarding}"));
    assert!(ok, "{err}");
    assert_eq!(flows(&d, "OpenFlow14").len(), 4);
    assert!(h1.ping(&h2, 1), "the adds put in whole forward");

    // A mask the table has rules of: one by one.
    let (ok, _, err) = bundle("b.txt", "priority=20,ip,nw_dst=198.18.0.2,actions=drop\n");
    assert!(ok, "{err}");
    assert!(
        !h1.ping(&h2, 1),
        "the drop put in one by one is carried out"
    );

    // One add replaces another of the bundle: one by one, the later stays.
    let (ok, _, err) = bundle(
        "c.txt",
        "priority=30,ip,nw_src=198.18.0.1,actions=drop\npriority=30,ip,nw_src=198.18.0.1,actions=output:2\n",
    );
    assert!(ok, "{err}");
    let now = flows(&d, "OpenFlow14");
    let thirty: Vec<&String> = now.iter().filter(|f| f.contains("priority=30")).collect();
    assert_eq!(thirty.len(), 1, "{now:?}");
    assert!(thirty[0].ends_with("actions=output:2"), "{now:?}");
    assert!(
        h1.ping(&h2, 1),
        "the later of the two adds is the one carried out"
    );

    // A staged add whose group is not there: refused with its own error, nothing
    // changed.
    let (ok, _, err) = bundle("d.txt", "priority=40,tcp,actions=group:9\n");
    assert!(!ok);
    assert!(err.contains("OFPBAC_BAD_OUT_GROUP"), "{err}");
    assert_eq!(
        flows(&d, "OpenFlow14"),
        now,
        "a failed commit changed the tables"
    );

    // A delete of everything, then adds of the masks it took away: whole, after
    // the delete.
    let (ok, _, err) = bundle("e.txt", &format!("delete\n{forwarding}"));
    assert!(ok, "{err}");
    let after = flows(&d, "OpenFlow14");
    assert_eq!(after.len(), 3, "{after:?}");
    assert!(after.iter().all(|f| f.contains("priority=10")), "{after:?}");
    assert!(h1.ping(&h2, 2), "the adds after the delete forward");
    let (ok, out, _) = ofctl(&d, "OpenFlow14", &["dump-flows", "ip,nw_dst=198.18.0.2"]);
    assert!(ok);
    assert!(
        out.contains("n_packets=2") || out.contains("n_packets=3"),
        "the rule put in whole counts the pings it passed: {out}"
    );
}
