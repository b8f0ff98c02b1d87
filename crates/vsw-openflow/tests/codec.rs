//! Every message type through encode and decode, and hostile bytes into a session.
//! `cargo test` runs 2,000 cases of each; a long run:
//! `PROPTEST_CASES=1000000 cargo test --release -p vsw-openflow --test codec`.

use proptest::prelude::*;
use vsw_openflow::flow_mod::{Action, BadFlowMod, Command, FlowMod, Instruction};
use vsw_openflow::flow_stats::{FlowRemoved, FlowStatsEntry, FlowStatsRequest};
use vsw_openflow::message::ErrorMsg;
use vsw_openflow::nx_action::{nxm_header, FieldCopy, NxAction};
use vsw_openflow::nx_learn::{LearnAction, LearnDst, LearnSpecWire, LearnSrc};
use vsw_openflow::oxm::{field_def, OxmField, OxmMatch, OXM_FIELDS, REG0, TUN_METADATA0};
use vsw_openflow::oxs::FlowCounts;
use vsw_openflow::packet::NO_BUFFER;
use vsw_openflow::role::RoleMsg;
use vsw_openflow::tlv::{TlvCommand, TlvMap, TlvTableMod};
use vsw_openflow::{
    next_message, AsyncConfig, Bridge, Features, Message, MultipartRequest, PacketIn, PacketOut,
    PortInfo, Role, Session, SwitchConfig, SwitchDesc, Version, VersionSet,
};

struct NoPorts;

impl Bridge for NoPorts {
    fn datapath_id(&self) -> u64 {
        7
    }
    fn ports(&self) -> Vec<PortInfo> {
        Vec::new()
    }
    fn desc(&self) -> SwitchDesc {
        SwitchDesc::default()
    }
    fn flow_mod(&mut self, _: &FlowMod) -> Result<(), BadFlowMod> {
        Ok(())
    }
    fn flow_stats(
        &mut self,
        _: &FlowStatsRequest,
    ) -> Result<vsw_openflow::FlowStatsIter, BadFlowMod> {
        Ok(Box::new(std::iter::empty()))
    }
    fn packet_out(&mut self, _: &vsw_openflow::PacketOut) -> Result<(), vsw_openflow::Refusal> {
        Ok(())
    }
    fn resume(&mut self, _: &vsw_openflow::packet::Resume) -> Result<(), vsw_openflow::Refusal> {
        Ok(())
    }
    fn table_stats(&mut self, _: u8) -> Vec<vsw_openflow::table_stats::TableStats> {
        Vec::new()
    }
    fn group_mod(
        &mut self,
        _: &vsw_openflow::group_mod::GroupMod,
    ) -> Result<(), vsw_openflow::group_mod::BadGroupMod> {
        Ok(())
    }
    fn group_stats(&mut self, _: u32) -> Vec<vsw_openflow::group_mod::GroupStatsEntry> {
        Vec::new()
    }
    fn group_desc(&mut self, _: u32) -> Vec<vsw_openflow::group_mod::GroupDescEntry> {
        Vec::new()
    }
    fn meter_mod(
        &mut self,
        _: &vsw_openflow::meter_mod::MeterMod,
    ) -> Result<(), vsw_openflow::meter_mod::BadMeterMod> {
        Ok(())
    }
    fn meter_stats(&mut self, _: u32) -> Vec<vsw_openflow::meter_mod::MeterStatsEntry> {
        Vec::new()
    }
    fn meter_config(&mut self, _: u32) -> Vec<vsw_openflow::meter_mod::MeterConfigEntry> {
        Vec::new()
    }
    fn port_stats(&mut self) -> Vec<vsw_openflow::port_stats::PortStats> {
        Vec::new()
    }
}

fn config() -> impl Strategy<Value = SwitchConfig> {
    (0u16..4, any::<u16>()).prop_map(|(flags, miss_send_len)| SwitchConfig {
        flags,
        miss_send_len,
    })
}

fn message() -> impl Strategy<Value = Message> {
    prop_oneof![
        prop::option::of(any::<u32>().prop_map(VersionSet))
            .prop_map(|versions| Message::Hello { versions }),
        (
            any::<u16>(),
            any::<u16>(),
            prop::collection::vec(any::<u8>(), 0..100)
        )
            .prop_map(|(kind, code, data)| Message::Error(ErrorMsg { kind, code, data })),
        prop::collection::vec(any::<u8>(), 0..200).prop_map(Message::EchoRequest),
        prop::collection::vec(any::<u8>(), 0..200).prop_map(Message::EchoReply),
        Just(Message::FeaturesRequest),
        Just(Message::TlvTableRequest),
        any::<u16>().prop_map(Message::SetControllerId),
        any::<u16>().prop_map(Message::CtFlushZone),
        (
            proptest::option::of(any::<u16>()),
            proptest::option::of(any::<[u8; 4]>().prop_filter("an address", |a| *a != [0; 4])),
            any::<(u16, u16)>(),
            any::<(u32, u32)>(),
            any::<(u128, u128)>(),
        )
            .prop_map(
                |(zone, dst, (sp, dp), (mark, mark_mask), (labels, labels_mask))| {
                    let mapped = dst.map(|a| {
                        let mut m = [0; 16];
                        m[10..12].copy_from_slice(&[0xff, 0xff]);
                        m[12..].copy_from_slice(&a);
                        m
                    });
                    Message::CtFlush(vsw_openflow::ct_flush::CtFlush {
                        zone,
                        ip_proto: 17,
                        orig: vsw_openflow::ct_flush::CtTupleFilter {
                            dst: mapped,
                            src_port: sp,
                            dst_port: dp,
                            ..Default::default()
                        },
                        reply: Default::default(),
                        // A value goes on the wire only under its mask.
                        mark: if mark_mask == 0 { 0 } else { mark },
                        mark_mask,
                        labels: if labels_mask == 0 { 0 } else { labels },
                        labels_mask,
                    })
                }
            ),
        any::<u32>().prop_map(Message::SetPacketInFormat),
        (
            prop::collection::vec(any::<u8>(), 1..200),
            any::<u32>(),
            any::<[u8; 16]>()
        )
            .prop_map(|(packet, port, continuation)| {
                Message::Resume(vsw_openflow::packet::Resume {
                    packet,
                    metadata: OxmMatch {
                        fields: vec![OxmField {
                            field: 0,
                            value: port.to_be_bytes().to_vec(),
                            mask: None,
                        }],
                    },
                    continuation,
                })
            }),
        (
            prop_oneof![
                Just(TlvCommand::Add),
                Just(TlvCommand::Delete),
                Just(TlvCommand::Clear)
            ],
            prop::collection::vec(
                (any::<u16>(), any::<u8>(), any::<u8>(), any::<u16>()).prop_map(
                    |(class, kind, len, index)| TlvMap {
                        class,
                        kind,
                        len,
                        index
                    }
                ),
                0..4
            )
        )
            .prop_map(|(command, maps)| Message::TlvTableMod(TlvTableMod { command, maps })),
        (
            any::<u64>(),
            any::<u32>(),
            any::<u8>(),
            any::<u8>(),
            any::<u32>()
        )
            .prop_map(
                |(datapath_id, n_buffers, n_tables, auxiliary_id, capabilities)| {
                    Message::FeaturesReply(Features {
                        datapath_id,
                        n_buffers,
                        n_tables,
                        auxiliary_id,
                        capabilities,
                        ports: Vec::new(),
                    })
                }
            ),
        Just(Message::GetConfigRequest),
        config().prop_map(Message::GetConfigReply),
        config().prop_map(Message::SetConfig),
        Just(Message::BarrierRequest),
        Just(Message::BarrierReply),
        Just(Message::MultipartRequest(MultipartRequest::Desc)),
        any::<u32>().prop_map(|p| Message::MultipartRequest(MultipartRequest::PortStats(p))),
        (
            any::<u8>(),
            any::<u32>(),
            any::<u32>(),
            any::<u64>(),
            any::<u64>(),
            tcp_match()
        )
            .prop_map(
                |(table_id, out_port, out_group, cookie, cookie_mask, matcher)| {
                    Message::MultipartRequest(MultipartRequest::Flow(FlowStatsRequest {
                        table_id,
                        out_port,
                        out_group,
                        cookie,
                        cookie_mask,
                        matcher,
                    }))
                }
            ),
        Just(Message::MultipartRequest(MultipartRequest::PortDesc)),
        Just(Message::MultipartRequest(MultipartRequest::Table)),
        (any::<u32>(), any::<u32>()).prop_map(|(port_no, queue_id)| {
            Message::MultipartRequest(MultipartRequest::QueueStats { port_no, queue_id })
        }),
        (
            any::<u16>(),
            0u8..6,
            any::<u8>(),
            any::<u64>(),
            any::<u32>(),
            any::<u16>(),
            prop::collection::vec(any::<u8>(), 0..200),
        )
            .prop_map(
                |(total_len, reason, table_id, cookie, in_port, max_len, data)| {
                    let mut p = PacketIn::of_frame(
                        &data,
                        in_port,
                        reason,
                        table_id,
                        cookie,
                        max_len,
                        Vec::new(),
                    );
                    p.total_len = total_len;
                    Message::PacketIn(p)
                }
            ),
        (
            0u32..0xffff_ff00,
            prop::collection::vec(action(), 0..4),
            prop::collection::vec(any::<u8>(), 0..200),
        )
            .prop_map(|(in_port, actions, data)| Message::PacketOut(PacketOut {
                buffer_id: NO_BUFFER,
                in_port,
                metadata: Vec::new(),
                actions,
                data,
            })),
        (
            prop::option::of(prop_oneof![
                Just(Role::Equal),
                Just(Role::Master),
                Just(Role::Slave)
            ]),
            any::<u64>(),
            any::<bool>(),
        )
            .prop_map(|(role, generation_id, request)| {
                let r = RoleMsg {
                    role,
                    generation_id,
                };
                if request {
                    Message::RoleRequest(r)
                } else {
                    Message::RoleReply(r)
                }
            }),
        Just(Message::GetAsyncRequest),
        prop::array::uniform6(any::<u32>()).prop_map(|m| Message::GetAsyncReply(AsyncConfig {
            packet_in: [m[0], m[1]],
            port_status: [m[2], m[3]],
            flow_removed: [m[4], m[5]],
        })),
        (
            flow_mod(),
            0u8..3,
            0u64..1 << 40,
            any::<u64>(),
            any::<u64>()
        )
            .prop_map(|(fm, reason, ms, packets, bytes)| {
                Message::FlowRemoved(FlowRemoved {
                    table_id: fm.table_id,
                    reason,
                    priority: fm.priority,
                    idle_timeout: fm.idle_timeout,
                    hard_timeout: fm.hard_timeout,
                    cookie: fm.cookie,
                    matcher: fm.matcher,
                    // Only 1.5 says the idle time.
                    counts: FlowCounts {
                        duration_ms: ms,
                        idle_ms: 0,
                        packets,
                        bytes,
                    },
                })
            }),
    ]
}

/// A match that meets every prerequisite: an IPv4 TCP base, then any of the fields
/// whose prerequisites that base meets, masked where they take a mask.
fn tcp_match() -> impl Strategy<Value = OxmMatch> {
    let optional: Vec<u8> = vec![0, 2, 3, 4, 8, 9, 11, 12, 13, 14, 38];
    (
        prop::sample::subsequence(optional.clone(), 0..=optional.len()),
        prop::collection::vec(any::<u8>(), 16),
        prop::collection::vec(any::<u8>(), 16),
        any::<bool>(),
    )
        .prop_map(|(chosen, v, m, masked)| {
            let mut fields = vec![
                OxmField {
                    field: 5,
                    value: vec![0x08, 0x00],
                    mask: None,
                },
                OxmField {
                    field: 10,
                    value: vec![6],
                    mask: None,
                },
            ];
            for f in chosen {
                let def = field_def(f).unwrap();
                let n = usize::from(def.len);
                let mask = (masked && def.maskable).then(|| m[..n].to_vec());
                // The value keeps only bits inside its mask, as the spec asks.
                let value: Vec<u8> = match &mask {
                    Some(k) => v[..n].iter().zip(k).map(|(a, b)| a & b).collect(),
                    None => v[..n].to_vec(),
                };
                // DSCP and ECN are 6 and 2 bits wide.
                let value = match f {
                    8 => vec![value[0] & 0x3f],
                    9 => vec![value[0] & 0x3],
                    _ => value,
                };
                fields.push(OxmField {
                    field: f,
                    value,
                    mask,
                });
            }
            OxmMatch { fields }
        })
}

/// An action, or a clone of up to three (nested two deep at most).
fn action() -> impl Strategy<Value = Action> {
    plain_action().prop_recursive(2, 8, 3, |inner| {
        prop::collection::vec(inner, 0..3).prop_map(Action::Clone)
    })
}

fn plain_action() -> impl Strategy<Value = Action> {
    prop_oneof![
        (any::<u32>(), any::<u16>()).prop_map(|(port, max_len)| Action::Output { port, max_len }),
        Just(Action::PopVlan),
        Just(Action::DecNwTtl),
        Just(Action::CopyTtlOut),
        any::<u8>().prop_map(Action::SetNwTtl),
        any::<u8>().prop_map(Action::SetMplsTtl),
        Just(Action::DecMplsTtl),
        any::<u16>().prop_map(Action::PushMpls),
        any::<u16>().prop_map(Action::PopMpls),
        any::<u16>().prop_map(Action::PushPbb),
        Just(Action::PopPbb),
        any::<u16>().prop_map(Action::PushVlan),
        any::<u32>().prop_map(Action::Group),
        any::<u32>().prop_map(Action::SetQueue),
        prop::collection::vec(any::<u8>(), 6).prop_map(|v| Action::SetField(OxmField {
            field: 3,
            value: v,
            mask: None
        })),
        prop::collection::vec(any::<u8>(), 4).prop_map(|v| Action::SetField(OxmField {
            field: 11,
            value: v,
            mask: None
        })),
        any::<u16>().prop_map(|in_port| Action::Nx(NxAction::Resubmit { in_port })),
        (any::<u16>(), any::<u8>())
            .prop_map(|(in_port, table)| Action::Nx(NxAction::ResubmitTable { in_port, table })),
        Just(Action::Nx(NxAction::DecTtl)),
        (any::<u16>(), any::<u16>(), any::<u8>()).prop_map(|(max_len, controller_id, reason)| {
            Action::Nx(NxAction::Controller {
                max_len,
                controller_id,
                reason,
            })
        }),
        // A note's bytes fill the action to a multiple of 8: 6, 14, 22 …
        (0usize..3)
            .prop_flat_map(|k| prop::collection::vec(any::<u8>(), 6 + 8 * k))
            .prop_map(|v| Action::Nx(NxAction::Note(v))),
        // Registers: load, load2 (a masked entry), move, copy-field, push/pop, and
        // a conjunction's clause.
        (any::<u16>(), 0u8..16, any::<u64>()).prop_map(|(ofs_nbits, n, value)| {
            Action::Nx(NxAction::RegLoad {
                ofs_nbits,
                dst: nxm_header(1, n, 4),
                value,
            })
        }),
        (0u8..16, any::<[u8; 4]>(), any::<[u8; 4]>()).prop_map(|(n, v, m)| {
            Action::Nx(NxAction::RegLoad2(OxmField {
                field: REG0 + n,
                value: v.to_vec(),
                mask: Some(m.to_vec()),
            }))
        }),
        any::<(u16, u16, u16, u32, u32)>().prop_map(|(n_bits, src_ofs, dst_ofs, src, dst)| {
            let copy = FieldCopy {
                n_bits,
                src_ofs,
                dst_ofs,
                src,
                dst,
            };
            Action::Nx(NxAction::RegMove(copy))
        }),
        any::<(u16, u16, u16, u32, u32)>().prop_map(|(n_bits, src_ofs, dst_ofs, src, dst)| {
            Action::CopyField(FieldCopy {
                n_bits,
                src_ofs,
                dst_ofs,
                src,
                dst,
            })
        }),
        any::<(bool, u16, u32, u16)>().prop_map(|(push, ofs, field, n_bits)| {
            Action::Nx(NxAction::Stack {
                push,
                ofs,
                field,
                n_bits,
            })
        }),
        learn().prop_map(|l| Action::Nx(NxAction::Learn(Box::new(l)))),
        (any::<u16>(), any::<u32>(), any::<u16>(), any::<bool>()).prop_map(
            |(ofs_nbits, src, max_len, reg2)| Action::Nx(NxAction::OutputReg {
                ofs_nbits,
                src,
                max_len,
                reg2
            })
        ),
        Just(Action::Nx(NxAction::Exit)),
        any::<u16>().prop_map(|t| Action::Nx(NxAction::PushMpls(t))),
        any::<u16>().prop_map(|t| Action::Nx(NxAction::PopMpls(t))),
        any::<u8>().prop_map(|t| Action::Nx(NxAction::SetMplsTtl(t))),
        Just(Action::Nx(NxAction::DecMplsTtl)),
        (any::<u16>(), 0u16..32, 0u32..16).prop_map(|(pkt_len, offset, reg)| {
            Action::Nx(NxAction::CheckPktLarger {
                pkt_len,
                offset,
                dst: nxm_header(1, reg as u8, 4),
            })
        }),
        prop::collection::vec(any::<u16>(), 0..6)
            .prop_map(|ids| Action::Nx(NxAction::DecTtlIds(ids))),
        any::<u32>().prop_map(|l| Action::Nx(NxAction::SetMplsLabel(l))),
        any::<u8>().prop_map(|t| Action::Nx(NxAction::SetMplsTc(t))),
        any::<u32>().prop_map(Action::SetMplsLabel),
        any::<u8>().prop_map(Action::SetMplsTc),
        (
            prop_oneof![Just(29u16), Just(38), Just(41)],
            1u16..,
            any::<(u32, u32, u32)>(),
            any::<u16>(),
            0u8..=2
        )
            .prop_map(|(subtype, probability, (c, d, p), port, dir)| {
                Action::Nx(NxAction::Sample {
                    subtype,
                    probability,
                    collector_set_id: c,
                    obs_domain_id: d,
                    obs_point_id: p,
                    sampling_port: if subtype == 29 { 0xffff } else { port },
                    direction: if subtype == 41 { dir } else { 0 },
                })
            }),
        (
            0u16..=6,
            any::<u16>(),
            0u16..=3,
            any::<u16>(),
            any::<u32>(),
            any::<(u16, u32)>()
        )
            .prop_map(
                |(fields, basis, algorithm, max_link, arg, (ofs_nbits, dst))| {
                    Action::Nx(NxAction::Multipath {
                        fields,
                        basis,
                        algorithm,
                        max_link,
                        arg,
                        ofs_nbits,
                        dst,
                    })
                }
            ),
        (
            any::<bool>(),
            0u16..=1,
            0u16..=6,
            any::<u16>(),
            any::<(u16, u32)>(),
            // Any port but CONTROLLER, which no bundle may name.
            prop::collection::vec(
                any::<u16>().prop_filter("not CONTROLLER", |p| *p != 0xfffd),
                0..6
            )
        )
            .prop_map(
                |(load, algorithm, fields, basis, (ofs_nbits, dst), members)| {
                    Action::Nx(NxAction::Bundle {
                        load,
                        algorithm,
                        fields,
                        basis,
                        ofs_nbits: if load { ofs_nbits } else { 0 },
                        dst: if load { dst } else { 0 },
                        members,
                    })
                }
            ),
        Just(Action::Nx(NxAction::PopQueue)),
        (any::<u16>(), any::<u16>())
            .prop_map(|(idle, hard)| Action::Nx(NxAction::FinTimeout { idle, hard })),
        (any::<u16>(), 14u32..)
            .prop_map(|(port, max_len)| Action::Nx(NxAction::OutputTrunc { port, max_len })),
        (2u8..=64, any::<u8>(), any::<u32>()).prop_map(|(n_clauses, c, id)| {
            Action::Nx(NxAction::Conjunction {
                clause: c % n_clauses,
                n_clauses,
                id,
            })
        }),
        (0u8..16, any::<[u8; 4]>()).prop_map(|(n, v)| Action::SetField(OxmField {
            field: REG0 + n,
            value: v.to_vec(),
            mask: None
        })),
        (
            any::<(Option<u16>, Option<u16>, Option<u8>, bool, Option<u32>)>(),
            prop::option::of(prop::collection::vec(any::<u8>(), 0..20)),
        )
            .prop_map(
                |((max_len, controller_id, reason, pause, meter_id), userdata)| {
                    Action::Nx(NxAction::Controller2 {
                        max_len,
                        controller_id,
                        reason,
                        userdata,
                        pause,
                        meter_id,
                    })
                }
            ),
    ]
}

fn flow_mod() -> impl Strategy<Value = FlowMod> {
    (
        (
            any::<u64>(),
            any::<u64>(),
            any::<u8>(),
            0u8..5,
            any::<u16>(),
            any::<u16>(),
            any::<u16>(),
        ),
        (any::<u32>(), any::<u32>(), any::<u16>(), any::<u16>()),
        tcp_match(),
        prop::collection::vec(action(), 0..5),
        prop::option::of(any::<u8>()),
        prop::option::of((any::<u64>(), any::<u64>())),
    )
        .prop_map(
            |(
                (cookie, cookie_mask, table_id, cmd, idle, hard, prio),
                (out_port, out_group, flags, importance),
                matcher,
                acts,
                goto,
                meta,
            )| {
                let mut instructions = vec![Instruction::ApplyActions(acts)];
                if let Some(t) = goto {
                    instructions.push(Instruction::GotoTable(t));
                }
                if let Some((metadata, mask)) = meta {
                    instructions.push(Instruction::WriteMetadata { metadata, mask });
                }
                FlowMod {
                    cookie,
                    cookie_mask,
                    table_id,
                    command: [
                        Command::Add,
                        Command::Modify,
                        Command::ModifyStrict,
                        Command::Delete,
                        Command::DeleteStrict,
                    ][usize::from(cmd)],
                    idle_timeout: idle,
                    hard_timeout: hard,
                    priority: prio,
                    buffer_id: u32::MAX,
                    out_port,
                    out_group,
                    flags,
                    importance,
                    modify_like_1_0: false,
                    matcher,
                    instructions,
                }
            },
        )
}

/// Any NXAST_LEARN or NXAST_LEARN2 the codec can carry: specs of every kind,
/// immediates as wide as their bits.
fn learn() -> impl Strategy<Value = LearnAction> {
    let header = (0u16..4, 0u8..32, 1u8..=16).prop_map(|(c, n, l)| nxm_header(c, n, l));
    let spec = (
        1u16..=128,
        any::<bool>(),
        any::<u128>(),
        header.clone(),
        any::<u16>(),
        0u8..3,
        header,
        any::<u16>(),
    )
        .prop_map(|(n_bits, imm, v, sh, so, dst, dh, dofs)| {
            let src = if imm && dst != 2 {
                LearnSrc::Immediate(
                    v & if n_bits == 128 {
                        u128::MAX
                    } else {
                        (1 << n_bits) - 1
                    },
                )
            } else {
                LearnSrc::Field {
                    header: sh,
                    ofs: so,
                }
            };
            let dst = match dst {
                0 => LearnDst::Match {
                    header: dh,
                    ofs: dofs,
                },
                1 => LearnDst::Load {
                    header: dh,
                    ofs: dofs,
                },
                _ => LearnDst::Output,
            };
            LearnSpecWire { n_bits, src, dst }
        });
    (
        any::<(bool, u16, u16, u16, u64, u16, u16)>(),
        (
            0u8..0xff,
            0u16..4,
            any::<u32>(),
            proptest::option::of((any::<u32>(), any::<u16>())),
        ),
        prop::collection::vec(spec, 0..6),
    )
        .prop_map(
            |(
                (learn2, idle, hard, prio, cookie, fin_idle, fin_hard),
                (table, flags, limit, result),
                specs,
            )| {
                LearnAction {
                    learn2,
                    idle_timeout: idle,
                    hard_timeout: hard,
                    priority: prio,
                    cookie,
                    flags,
                    table,
                    fin_idle_timeout: fin_idle,
                    fin_hard_timeout: fin_hard,
                    limit: if learn2 { limit } else { 0 },
                    result_dst: if learn2 { result } else { None },
                    specs,
                }
            },
        )
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(2000)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn every_message_round_trips(m in message(), xid in any::<u32>(), v in 4u8..=6) {
        let version = Version::from_wire(v).unwrap();
        let wire = m.encode(v, xid);
        let (h, whole) = next_message(&wire).unwrap().unwrap();
        prop_assert_eq!(whole.len(), wire.len());
        prop_assert_eq!((h.version, h.kind, h.xid), (v, m.kind(), xid));
        prop_assert_eq!(Message::decode(version, whole).unwrap(), m);
    }

    #[test]
    fn every_flow_mod_round_trips_in_each_version(mut fm in flow_mod(), v in 4u8..=6) {
        let version = Version::from_wire(v).unwrap();
        if version == Version::V1_3 {
            fm.importance = 0; // 1.3 has padding there
        }
        let wire = Message::FlowMod(fm.clone()).encode(v, 5);
        prop_assert_eq!(Message::decode(version, &wire).unwrap(), Message::FlowMod(fm));
    }

    #[test]
    fn flow_stats_replies_round_trip(
        entries in prop::collection::vec((flow_mod(), any::<u64>(), any::<u64>(), 0u64..1u64 << 40), 0..40),
        v in 4u8..=6,
    ) {
        let version = Version::from_wire(v).unwrap();
        let entries: Vec<FlowStatsEntry> = entries
            .into_iter()
            .map(|(fm, packets, bytes, ms)| FlowStatsEntry {
                table_id: fm.table_id,
                duration_ms: ms,
                // 1.5 says it; the others do not.
                idle_ms: if version >= Version::V1_5 { ms / 3 } else { 0 },
                priority: fm.priority,
                idle_timeout: fm.idle_timeout,
                hard_timeout: fm.hard_timeout,
                flags: fm.flags,
                importance: if version >= Version::V1_4 { fm.importance } else { 0 },
                cookie: fm.cookie,
                packet_count: packets,
                byte_count: bytes,
                matcher: fm.matcher,
                instructions: fm.instructions,
            })
            .collect();
        let reply = vsw_openflow::MultipartReply::Flow(entries.clone());
        let mut back = Vec::new();
        for body in reply.encode_bodies(version) {
            prop_assert!(body.len() <= 65535 - 8);
            match vsw_openflow::MultipartReply::decode_body(version, &body).unwrap().0 {
                vsw_openflow::MultipartReply::Flow(e) => back.extend(e),
                other => prop_assert!(false, "{other:?}"),
            }
        }
        // A 1.5 reader is sent a load as the masked set-field it is; an earlier
        // one a copy-field or masked set-field as Nicira's move and load.
        let mut entries = entries;
        for e in &mut entries {
            // Nicira's 1.0-only actions are read as OpenFlow's own from 1.1 on.
            vsw_openflow::flow_stats::nicira_1_0_as_openflow(&mut e.instructions);
            if version >= Version::V1_5 {
                vsw_openflow::flow_stats::loads_as_set_fields(&mut e.instructions);
            } else {
                vsw_openflow::flow_stats::copies_as_nicira(&mut e.instructions);
            }
        }
        prop_assert_eq!(back, entries);
    }

    /// Every flow-mod becomes vsw-flow's values or an OpenFlow error, never a panic;
    /// a flow vsw takes reads back as it went in, both as OpenFlow (what flow stats
    /// echo, decoded again) and as vsw's text (`vswctl dump-flows`, added again).
    #[test]
    fn every_flow_mod_becomes_vsw_values_or_an_error(fm in flow_mod()) {
        use vsw_openflow::from_vsw::{instructions_from_actions, oxm_from_match};
        use vsw_openflow::to_vsw::{self, SelectionParts};
        let _ = to_vsw::selection(&SelectionParts::of_flow_mod(&fm, false));
        let _ = to_vsw::modify_actions(&fm);
        let _ = to_vsw::packet_out_actions(
            &fm.instructions
                .iter()
                .flat_map(|i| match i {
                    Instruction::ApplyActions(a) => a.clone(),
                    _ => Vec::new(),
                })
                .collect::<Vec<_>>(),
        );
        if let Ok(spec) = to_vsw::flow_spec(&fm) {
            prop_assert_eq!(to_vsw::match_to_vsw(&oxm_from_match(&spec.matcher)), Ok(spec.matcher));
            prop_assert_eq!(
                to_vsw::instructions_to_vsw(&instructions_from_actions(&spec.actions)),
                Ok(spec.actions.clone())
            );
            let text = vsw_flow::syntax::format_flow(&spec);
            prop_assert_eq!(vsw_flow::parse_flow(&text, &|_: &str| None), Ok(spec));
        }
    }

    #[test]
    fn every_valid_match_round_trips(m in tcp_match()) {
        let mut wire = Vec::new();
        m.encode(&mut wire);
        prop_assert_eq!(wire.len() % 8, 0);
        let (back, rest) = OxmMatch::decode_from(&wire).unwrap();
        prop_assert_eq!(back, m);
        prop_assert!(rest.is_empty());
    }

    #[test]
    fn hostile_matches_are_refused_not_panicked_on(
        m in tcp_match(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
        cut in any::<prop::sample::Index>(),
        garbage in prop::collection::vec(any::<u8>(), 0..80),
    ) {
        let mut wire = Vec::new();
        m.encode(&mut wire);
        for (at, b) in &flips {
            let i = at.index(wire.len());
            wire[i] = *b;
        }
        let cut = cut.index(wire.len() + 1);
        let _ = OxmMatch::decode_from(&wire[..cut]);
        if let Ok((m, _)) = OxmMatch::decode_from(&wire) {
            // Whatever is taken becomes vsw's match or a refusal, never a panic.
            let _ = vsw_openflow::to_vsw::match_to_vsw(&m);
            // Whatever is taken is well formed: known fields of the right length.
            for f in &m.fields {
                let def = OXM_FIELDS.iter().find(|d| d.field == f.field).unwrap();
                if f.field == TUN_METADATA0 {
                    prop_assert!((1..=usize::from(def.len)).contains(&f.value.len()));
                } else {
                    prop_assert_eq!(f.value.len(), usize::from(def.len));
                }
            }
        }
        let _ = OxmMatch::decode_from(&garbage);
    }

    #[test]
    fn hostile_flow_mods_are_refused_not_panicked_on(
        fm in flow_mod(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        v in 4u8..=6,
    ) {
        // Bytes of a well-formed flow-mod (its actions Nicira's too) changed here
        // and there: decoded or refused, and what is decoded becomes vsw's rule or
        // a refusal, never a panic.
        let version = Version::from_wire(v).unwrap();
        let mut wire = Vec::new();
        fm.encode_body(version, &mut wire);
        for (at, b) in &flips {
            let i = at.index(wire.len());
            wire[i] = *b;
        }
        if let Ok(fm) = FlowMod::decode_body(version, &wire) {
            let _ = vsw_openflow::to_vsw::flow_spec(&fm);
        }
    }

    #[test]
    fn every_valid_match_round_trips_through_nxm(m in tcp_match()) {
        // OpenFlow 1.0's NXM flow format: the same fields, by their NXM names.
        let mut wire = Vec::new();
        let n = vsw_openflow::of10::nxm::encode(&m, &mut wire);
        prop_assert_eq!(n, wire.len());
        prop_assert_eq!(vsw_openflow::of10::nxm::decode(&wire), Ok(m));
    }

    #[test]
    fn hostile_1_0_messages_are_refused_not_panicked_on(
        fm in flow_mod(),
        kind in prop_oneof![Just(4u8), Just(13), Just(14), Just(16), any::<u8>()],
        body in prop::collection::vec(any::<u8>(), 0..200),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        table_in_command in any::<bool>(),
    ) {
        let dialect = vsw_openflow::of10::Dialect { table_in_command };
        // Garbage of any 1.0 type, and a 1.0 flow-mod changed here and there:
        // decoded or refused, and what a flow-mod decodes to becomes vsw's rule
        // or a refusal, never a panic.
        let mut garbage = vec![1, kind, 0, 0, 0, 0, 0, 9];
        garbage.extend_from_slice(&body);
        let len = garbage.len() as u16;
        garbage[2..4].copy_from_slice(&len.to_be_bytes());
        let _ = vsw_openflow::of10::decode(&garbage, dialect);
        let mut wire = Message::FlowMod(fm).encode(1, 3);
        for (at, b) in &flips {
            let i = 8 + at.index(wire.len() - 8);
            wire[i] = *b;
        }
        if let Ok(Message::FlowMod(fm)) = vsw_openflow::of10::decode(&wire, dialect) {
            let _ = vsw_openflow::to_vsw::flow_spec(&fm);
        }
    }

    #[test]
    fn flow_monitor_requests_round_trip_and_hostile_ones_are_refused(
        ids in prop::collection::vec(any::<u32>(), 1..4),
        flags in 1u16..64,
        table_id in any::<u8>(),
        m in tcp_match(),
        v in prop_oneof![Just(1u8), Just(4), Just(5), Just(6)],
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
    ) {
        use vsw_openflow::flow_monitor::{encode_request, FlowMonitor, MonitorCommand};
        let version = Version::from_wire(v).unwrap();
        let monitors: Vec<FlowMonitor> = ids.iter().map(|&id| FlowMonitor {
            id,
            command: MonitorCommand::Add,
            // OWN goes as 1.4's ONLY_OWN and comes back as OWN.
            flags,
            out_port: 0xffff_ffff,
            table_id,
            matcher: m.clone(),
        }).collect();
        let wire = encode_request(version, &monitors, 7);
        prop_assert_eq!(Message::decode(version, &wire), Ok(Message::FlowMonitorRequest(monitors)));
        let mut bad = wire.clone();
        for (at, b) in &flips {
            let i = 8 + at.index(bad.len() - 8);
            bad[i] = *b;
        }
        let _ = Message::decode(version, &bad);
    }

    #[test]
    fn hostile_bytes_never_panic_and_every_request_is_answered_or_ends_the_session(
        chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..64), 0..20),
        requests in prop::collection::vec(message(), 0..10),
    ) {
        let mut s = Session::new();
        let mut out = Vec::new();
        let mut input = Message::Hello { versions: Some(VersionSet(0x10)) }.encode(4, 1);
        for m in &requests {
            input.extend(m.encode(4, 9));
        }
        // The well-formed requests first: each request type is answered (or, for
        // replies, set-config and packet-outs, taken silently); then garbage, split
        // anywhere.
        prop_assert!(s.receive(&input, &mut NoPorts, &mut out).is_ok());
        let answered = {
            let mut n = 0;
            let mut at = 0;
            while let Some((_, m)) = next_message(&out[at..]).unwrap() {
                at += m.len();
                n += 1;
            }
            n
        };
        let expected = requests.iter().filter(|m| matches!(m,
            Message::EchoRequest(_) | Message::FeaturesRequest | Message::GetConfigRequest | Message::BarrierRequest
            | Message::MultipartRequest(_) | Message::GetAsyncRequest | Message::RoleRequest(_)
            // A switch without Geneve metadata refuses every TLV table change.
            | Message::TlvTableRequest | Message::TlvTableMod(_)
        ) || matches!(m,
            // A packet-in format but OpenFlow's, NXT_PACKET_IN and
            // NXT_PACKET_IN2 is refused.
            Message::SetPacketInFormat(f) if *f > 2
        )).count();
        prop_assert_eq!(answered, expected);
        for c in &chunks {
            if s.receive(c, &mut NoPorts, &mut out).is_err() {
                break;
            }
        }
    }
}

/// Clones nested past the bound are refused with an error, not followed down the
/// stack; within it they round-trip.
#[test]
fn deeply_nested_clones_are_refused() {
    let nested = |depth: usize| {
        let mut a = Action::Output {
            port: 1,
            max_len: 0,
        };
        for _ in 0..depth {
            a = Action::Clone(vec![a]);
        }
        let fm = FlowMod {
            priority: 1,
            instructions: vec![Instruction::ApplyActions(vec![a])],
            ..FlowMod::new(Command::Add, OxmMatch::default())
        };
        let bytes = Message::FlowMod(fm.clone()).encode(4, 1);
        (fm, FlowMod::decode_body(Version::V1_3, &bytes[8..]))
    };
    let (fm, back) = nested(16);
    assert_eq!(back, Ok(fm));
    let (_, back) = nested(17);
    assert!(back.is_err());
    let (_, back) = nested(1000);
    assert!(back.is_err());
}

/// OVN writes `dec_ttl()` as NXAST_DEC_TTL_CNT_IDS with no controller ids (every
/// router route has one): taken, and written back the same.
#[test]
fn a_dec_ttl_with_no_controller_ids_is_taken_as_ovn_writes_it() {
    let ovn = [
        0xff, 0xff, 0, 0x10, 0, 0, 0x23, 0x20, 0, 0x15, 0, 0, 0, 0, 0, 0,
    ];
    let matcher = OxmMatch {
        fields: vec![OxmField {
            field: 5,
            value: vec![8, 0],
            mask: None,
        }],
    };
    let fm = FlowMod {
        table_id: 21,
        priority: 74,
        instructions: vec![Instruction::ApplyActions(vec![Action::Nx(
            NxAction::DecTtlIds(vec![]),
        )])],
        ..FlowMod::new(Command::Add, matcher)
    };
    let wire = Message::FlowMod(fm.clone()).encode(6, 1);
    assert!(
        wire.windows(ovn.len()).any(|w| w == ovn),
        "as OVN writes it"
    );
    assert_eq!(
        Message::decode(Version::V1_5, &wire),
        Ok(Message::FlowMod(fm.clone()))
    );
    assert!(vsw_openflow::to_vsw::flow_spec(&fm).is_ok());
}
