//! Flows come back as they were installed (issue 31, item 1): random flow-mods sent
//! over OpenFlow 1.3, 1.4 and 1.5 are read back through flow statistics — every match
//! field in its order, a mask exactly where one was given, every action with every
//! argument (an output's `max_len`), the kept flags and the importance — and through
//! the flow-removed message their deletion sends; and a group's buckets through
//! group descriptions. Registers are matched and loaded, moved, pushed and popped
//! as Open vSwitch sends them.

use std::cell::RefCell;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use vsw_e2e::openflow::OfPeer;
use vsw_e2e::{serial, Vswd};
use vsw_openflow::flow_mod::{
    Action, Command, FlowMod, Instruction, OFPFF_NO_BYT_COUNTS, OFPFF_NO_PKT_COUNTS,
    OFPFF_SEND_FLOW_REM, OFPG_ANY, OFPP_ANY, OFPP_CONTROLLER, OFPP_FLOOD, OFPP_IN_PORT,
    OFPP_NORMAL,
};
use vsw_openflow::flow_stats::{decode_entries, FlowStatsRequest, OFPMP_FLOW};
use vsw_openflow::group_mod::{GroupCommand, GroupMod, OfBucket, OFPG15_BUCKET_ALL, OFPGT_SELECT};
use vsw_openflow::multipart::OFPT_MULTIPART_REPLY;
use vsw_openflow::nx_action::{nxm_header, FieldCopy, NxAction};
use vsw_openflow::oxm::{OxmField, OxmMatch, REG0, XREG0};
use vsw_openflow::{Message, MultipartReply, MultipartRequest, SwitchConfig, Version};

fn field(field: u8, value: Vec<u8>, mask: Option<Vec<u8>>) -> OxmField {
    OxmField { field, value, mask }
}

/// A value of `n` bytes under a mask that is neither empty nor whole (a mask that
/// is either says nothing a plain field would not), or no mask.
fn maybe_masked(n: usize) -> impl Strategy<Value = (Vec<u8>, Option<Vec<u8>>)> {
    (
        prop::collection::vec(any::<u8>(), n),
        prop::option::of(prop::collection::vec(any::<u8>(), n)),
    )
        .prop_map(|(value, mask)| match mask {
            Some(m) if m.iter().any(|b| *b != 0) && m.iter().any(|b| *b != 0xff) => {
                let value = value.iter().zip(&m).map(|(v, m)| v & m).collect();
                (value, Some(m))
            }
            _ => (value, None),
        })
}

fn mac_field(kind: u8) -> impl Strategy<Value = OxmField> {
    maybe_masked(6).prop_map(move |(mut v, m)| {
        if m.is_none() {
            v[0] &= 0xfe; // a unicast address: a plain match is any address
        }
        field(kind, v, m)
    })
}

/// VLAN_VID: a tagged VID with no mask (as `vlan_vid=4196` is written), the same
/// with the whole 13-bit mask, or "any tag" (0x1000/0x1000).
fn vlan_field() -> impl Strategy<Value = OxmField> {
    (0u16..4096, 0..3).prop_map(|(vid, form)| {
        let v = (0x1000 | vid).to_be_bytes().to_vec();
        match form {
            0 => field(6, v, None),
            1 => field(6, v, Some(vec![0x1f, 0xff])),
            _ => field(6, vec![0x10, 0], Some(vec![0x10, 0])),
        }
    })
}

/// IPv4 fields in an order whose prerequisites come first: eth_type, the addresses
/// (either order), then ip_proto and a TCP port.
fn ipv4_fields() -> impl Strategy<Value = Vec<OxmField>> {
    (
        prop::option::of(maybe_masked(4)),
        prop::option::of(maybe_masked(4)),
        any::<bool>(),
        prop::option::of(any::<u16>()),
    )
        .prop_map(|(src, dst, dst_first, tcp)| {
            let mut out = vec![field(5, vec![0x08, 0x00], None)];
            let mut addrs: Vec<OxmField> = [(11, src), (12, dst)]
                .into_iter()
                .filter_map(|(k, a)| a.map(|(v, m)| field(k, v, m)))
                .collect();
            if dst_first {
                addrs.reverse();
            }
            out.extend(addrs);
            if let Some(port) = tcp {
                out.push(field(10, vec![6], None));
                out.push(field(14, port.to_be_bytes().to_vec(), None));
            }
            out
        })
}

/// A register: a 32-bit one (NXM_NX_REGn, as OpenFlow 1.3 carries them) or a 64-bit
/// one (the packet-register class, as OpenFlow 1.5 does).
fn register_field() -> impl Strategy<Value = Vec<OxmField>> {
    prop_oneof![
        (0u8..16, maybe_masked(4)).prop_map(|(n, (v, m))| vec![field(REG0 + n, v, m)]),
        (0u8..8, maybe_masked(8)).prop_map(|(n, (v, m))| vec![field(XREG0 + n, v, m)]),
    ]
}

/// A match: groups of fields (a prerequisite chain stays in its order) shuffled.
fn matcher() -> impl Strategy<Value = OxmMatch> {
    (
        prop::option::of((1u32..=4).prop_map(|p| vec![field(0, p.to_be_bytes().to_vec(), None)])),
        prop::option::of(mac_field(3).prop_map(|f| vec![f])),
        prop::option::of(mac_field(4).prop_map(|f| vec![f])),
        prop::option::of(vlan_field().prop_map(|f| vec![f])),
        prop::option::of(maybe_masked(8).prop_map(|(v, m)| vec![field(2, v, m)])),
        prop::option::of(ipv4_fields()),
        prop::option::of(register_field()),
    )
        .prop_map(|(a, b, c, d, e, f, g)| {
            [a, b, c, d, e, f, g]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
        })
        .prop_shuffle()
        .prop_map(|groups| OxmMatch {
            fields: groups.into_iter().flatten().collect(),
        })
}

fn action() -> impl Strategy<Value = Vec<Action>> {
    prop_oneof![
        (
            prop_oneof![
                (1u32..=4),
                Just(OFPP_CONTROLLER),
                Just(OFPP_IN_PORT),
                Just(OFPP_NORMAL),
                Just(OFPP_FLOOD)
            ],
            any::<u16>()
        )
            .prop_map(|(port, max_len)| vec![Action::Output { port, max_len }]),
        (3u8..=4, any::<[u8; 6]>()).prop_map(|(k, mac)| vec![Action::SetField(field(
            k,
            mac.to_vec(),
            None
        ))]),
        (0u16..4096).prop_map(|vid| vec![
            Action::PushVlan(0x8100),
            Action::SetField(field(6, (0x1000 | vid).to_be_bytes().to_vec(), None)),
        ]),
        register_action(),
    ]
}

/// The bits `ofs..ofs + n_bits` of a 32-bit register.
fn reg_bits() -> impl Strategy<Value = (u8, u16, u16)> {
    (0u8..16, 0u16..32).prop_flat_map(|(n, ofs)| (Just(n), Just(ofs), 1..=32 - ofs))
}

/// What Open vSwitch sends for `load`, `move`, `push`, `pop` and `set_field` of a
/// register.
fn register_action() -> impl Strategy<Value = Vec<Action>> {
    let reg = |n: u8| nxm_header(1, n, 4);
    prop_oneof![
        (reg_bits(), any::<u64>()).prop_map(move |((n, ofs, bits), v)| {
            vec![Action::Nx(NxAction::RegLoad {
                ofs_nbits: (ofs << 6) | (bits - 1),
                dst: reg(n),
                value: v & ((1u64 << bits) - 1),
            })]
        }),
        (reg_bits(), 0u8..16, 0u16..32).prop_map(move |((n, ofs, bits), m, dst_ofs)| {
            let bits = bits.min(32 - dst_ofs);
            vec![Action::Nx(NxAction::RegMove(FieldCopy {
                n_bits: bits,
                src_ofs: ofs,
                dst_ofs,
                src: reg(n),
                dst: reg(m),
            }))]
        }),
        (reg_bits(), any::<bool>()).prop_map(move |((n, ofs, bits), push)| {
            vec![Action::Nx(NxAction::Stack {
                push,
                ofs,
                field: reg(n),
                n_bits: bits,
            })]
        }),
        (0u8..16, any::<[u8; 4]>()).prop_map(|(n, v)| vec![Action::SetField(field(
            REG0 + n,
            v.to_vec(),
            None
        ))]),
    ]
}

fn actions(max: usize) -> impl Strategy<Value = Vec<Action>> {
    prop::collection::vec(action(), 0..=max).prop_map(|l| l.into_iter().flatten().collect())
}

/// Instructions in the order Open vSwitch keeps them: apply, clear, write,
/// metadata, goto.
fn instructions(table: u8) -> impl Strategy<Value = Vec<Instruction>> {
    (
        prop::option::of(actions(4)),
        any::<bool>(),
        prop::option::of(
            (
                prop::option::of((1u32..=4).prop_map(|port| Action::Output { port, max_len: 0 })),
                prop::option::of(any::<[u8; 6]>()),
            )
                .prop_map(|(out, mac)| {
                    let mut l = Vec::new();
                    if let Some(m) = mac {
                        l.push(Action::SetField(field(3, m.to_vec(), None)));
                    }
                    l.extend(out);
                    l
                }),
        ),
        prop::option::of((any::<u64>(), any::<u64>())),
        prop::option::of(1u8..=3),
    )
        .prop_map(move |(apply, clear, write, metadata, goto)| {
            let mut out = Vec::new();
            if let Some(a) = apply {
                out.push(Instruction::ApplyActions(a));
            }
            if clear {
                out.push(Instruction::ClearActions);
            }
            if let Some(w) = write {
                out.push(Instruction::WriteActions(w));
            }
            if let Some((metadata, mask)) = metadata {
                out.push(Instruction::WriteMetadata {
                    metadata: metadata & mask,
                    mask,
                });
            }
            if let Some(step) = goto {
                if table + step <= 200 {
                    out.push(Instruction::GotoTable(table + step));
                }
            }
            out
        })
}

fn flow_mod(with_importance: bool) -> impl Strategy<Value = FlowMod> {
    (0u8..=3)
        .prop_flat_map(move |table| {
            (
                Just(table),
                matcher(),
                instructions(table),
                any::<u16>(),
                prop::sample::subsequence(
                    vec![
                        OFPFF_SEND_FLOW_REM,
                        OFPFF_NO_PKT_COUNTS,
                        OFPFF_NO_BYT_COUNTS,
                    ],
                    0..=3,
                ),
                any::<u16>(),
                (0u16..2, 0u16..2),
            )
        })
        .prop_map(
            move |(table, matcher, instructions, priority, flags, importance, (idle, hard))| {
                FlowMod {
                    cookie: 0,
                    cookie_mask: 0,
                    table_id: table,
                    command: Command::Add,
                    // Timeouts long enough not to run out during the test.
                    idle_timeout: idle * 3600,
                    hard_timeout: hard * 3600,
                    priority,
                    buffer_id: u32::MAX,
                    out_port: OFPP_ANY,
                    out_group: OFPG_ANY,
                    flags: flags.into_iter().fold(0, |a, f| a | f),
                    importance: if with_importance { importance } else { 0 },
                    modify_like_1_0: false,
                    matcher,
                    instructions,
                }
            },
        )
}

/// Waits for the barrier after `xid`; an error before it is the test's failure.
fn barrier(p: &mut OfPeer) -> Result<(), TestCaseError> {
    let xid = p.send(Message::BarrierRequest);
    match p.next(|m| matches!(m, Message::BarrierReply | Message::Error(_))) {
        Some((x, Message::BarrierReply)) if x == xid => Ok(()),
        other => Err(TestCaseError::fail(format!("refused: {other:?}"))),
    }
}

/// The flow-stats entries of `cookie`, and each entry's bytes after its fixed part
/// (1.3 and 1.4: the match and the instructions, as a flow-mod ends).
fn stats_of(
    p: &mut OfPeer,
    version: Version,
    table: u8,
    cookie: u64,
) -> Vec<(vsw_openflow::flow_stats::FlowStatsEntry, Vec<u8>)> {
    p.send(Message::MultipartRequest(MultipartRequest::Flow(
        FlowStatsRequest {
            table_id: table,
            out_port: OFPP_ANY,
            out_group: OFPG_ANY,
            cookie,
            cookie_mask: u64::MAX,
            matcher: OxmMatch::default(),
        },
    )));
    let raw = p
        .next_raw_within(Duration::from_secs(10), OFPT_MULTIPART_REPLY)
        .expect("a flow-stats reply");
    assert_eq!(u16::from_be_bytes([raw[8], raw[9]]), OFPMP_FLOW);
    let body = &raw[16..];
    let entries = decode_entries(version, body).expect("a flow-stats reply that decodes");
    let mut tails = Vec::new();
    let mut at = 0;
    while at < body.len() {
        let len = usize::from(u16::from_be_bytes([body[at], body[at + 1]]));
        tails.push(body[at + 48.min(len)..at + len].to_vec());
        at += len;
    }
    entries.into_iter().zip(tails).collect()
}

fn echoes_in(version: Version) {
    let _g = serial();
    let d = Vswd::start();
    let conn = std::os::unix::net::UnixStream::connect(d.dir.join("br0.mgmt")).unwrap();
    conn.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut p = OfPeer::over(Box::new(conn), version);
    p.greet();
    // Asynchronous messages on (a service connection starts without them).
    p.send(Message::SetConfig(SwitchConfig {
        flags: 0,
        miss_send_len: 0xffff,
    }));
    let peer = RefCell::new(p);
    let next_cookie = RefCell::new(1u64);
    let mut runner = TestRunner::new(Config {
        cases: 48,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&flow_mod(version >= Version::V1_4), |mut fm| {
            let p = &mut *peer.borrow_mut();
            let cookie = {
                let mut c = next_cookie.borrow_mut();
                *c += 1;
                *c
            };
            fm.cookie = cookie;
            p.send(Message::FlowMod(fm.clone()));
            barrier(p)?;
            let got = stats_of(p, version, fm.table_id, cookie);
            prop_assert_eq!(got.len(), 1, "one flow of cookie {}", cookie);
            let (entry, tail) = &got[0];
            prop_assert_eq!(&entry.matcher, &fm.matcher);
            // As installed — but a 1.5 reader is sent a load as the masked
            // set-field it is (1.5 has no NXAST_REG_LOAD, as Open vSwitch says).
            let mut want = fm.instructions.clone();
            if version >= Version::V1_5 {
                vsw_openflow::flow_stats::loads_as_set_fields(&mut want);
            }
            prop_assert_eq!(&entry.instructions, &want);
            prop_assert_eq!(
                entry.flags,
                fm.flags & (OFPFF_SEND_FLOW_REM | OFPFF_NO_PKT_COUNTS | OFPFF_NO_BYT_COUNTS)
            );
            prop_assert_eq!(entry.importance, fm.importance);
            prop_assert_eq!(
                (
                    entry.priority,
                    entry.idle_timeout,
                    entry.hard_timeout,
                    entry.cookie
                ),
                (fm.priority, fm.idle_timeout, fm.hard_timeout, cookie)
            );
            if version < Version::V1_5 {
                // Byte for byte: the entry ends as the flow-mod ends.
                let sent = Message::FlowMod(fm.clone()).encode(version.wire(), 1);
                prop_assert_eq!(tail, &sent[48..].to_vec());
            }
            // Deleted: a flow asked to say so says so, with its match as written.
            p.send(Message::FlowMod(FlowMod {
                command: Command::DeleteStrict,
                cookie_mask: u64::MAX,
                instructions: Vec::new(),
                ..fm.clone()
            }));
            barrier(p)?;
            if fm.flags & OFPFF_SEND_FLOW_REM != 0 {
                match p.next(|m| matches!(m, Message::FlowRemoved(_))) {
                    Some((_, Message::FlowRemoved(r))) => {
                        prop_assert_eq!(r.cookie, cookie);
                        prop_assert_eq!(&r.matcher, &fm.matcher);
                    }
                    other => prop_assert!(false, "no flow-removed: {:?}", other),
                }
            }
            prop_assert!(stats_of(p, version, fm.table_id, cookie).is_empty());
            Ok(())
        })
        .unwrap();
}

#[test]
fn flows_come_back_as_installed_in_openflow13() {
    echoes_in(Version::V1_3);
}

#[test]
fn flows_come_back_as_installed_in_openflow14() {
    echoes_in(Version::V1_4);
}

#[test]
fn flows_come_back_as_installed_in_openflow15() {
    echoes_in(Version::V1_5);
}

/// A select group's buckets, each with a weight, a watched port or none, and
/// actions whose arguments vsw does not act on (an output's `max_len`).
fn group_mod(group_id: u32) -> impl Strategy<Value = GroupMod> {
    prop::collection::vec(
        (
            1u16..=100,
            prop_oneof![Just(OFPP_ANY), (1u32..=4)],
            prop::collection::vec(
                ((1u32..=4), any::<u16>())
                    .prop_map(|(port, max_len)| Action::Output { port, max_len }),
                1..=2,
            ),
        )
            .prop_map(|(weight, watch_port, actions)| OfBucket {
                bucket_id: 0,
                weight,
                watch_port,
                watch_group: OFPG_ANY,
                actions,
            }),
        1..=4,
    )
    .prop_map(move |mut buckets| {
        // Ids as 1.3 and 1.4 give them back (their places).
        for (i, b) in buckets.iter_mut().enumerate() {
            b.bucket_id = i as u32;
        }
        GroupMod {
            command: GroupCommand::Add,
            kind: OFPGT_SELECT,
            group_id,
            buckets,
            command_bucket_id: OFPG15_BUCKET_ALL,
            properties: Vec::new(),
        }
    })
}

#[test]
fn group_buckets_come_back_as_installed() {
    let _g = serial();
    let d = Vswd::start();
    for version in [Version::V1_3, Version::V1_4, Version::V1_5] {
        let conn = std::os::unix::net::UnixStream::connect(d.dir.join("br0.mgmt")).unwrap();
        conn.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let mut p = OfPeer::over(Box::new(conn), version);
        p.greet();
        let peer = RefCell::new(p);
        let mut runner = TestRunner::new(Config {
            cases: 16,
            failure_persistence: None,
            ..Config::default()
        });
        runner
            .run(&group_mod(7), |gm| {
                let p = &mut *peer.borrow_mut();
                p.send(Message::GroupMod(gm.clone()));
                barrier(p)?;
                p.send(Message::MultipartRequest(MultipartRequest::GroupDesc(7)));
                let raw = p
                    .next_raw_within(Duration::from_secs(10), OFPT_MULTIPART_REPLY)
                    .expect("a group-description reply");
                let (reply, _) = MultipartReply::decode_body(version, &raw[8..])
                    .expect("a group-description reply that decodes");
                match reply {
                    MultipartReply::GroupDesc(groups) => {
                        let g = groups.iter().find(|g| g.group_id == 7);
                        prop_assert_eq!(g.map(|g| &g.buckets), Some(&gm.buckets));
                    }
                    other => prop_assert!(false, "not a group description: {:?}", other),
                }
                p.send(Message::GroupMod(GroupMod {
                    command: GroupCommand::Delete,
                    buckets: Vec::new(),
                    ..gm
                }));
                barrier(p)
            })
            .unwrap();
    }
}
