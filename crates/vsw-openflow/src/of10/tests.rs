//! A 1.0 connection through a session: what `ovs-ofctl` without `-O` sends, and
//! what it reads back.

use super::*;
use crate::flow_mod::Action;
use crate::frame::next_message;
use crate::group_mod::{BadGroupMod, GroupDescEntry, GroupMod, GroupStatsEntry};
use crate::meter_mod::{BadMeterMod, MeterConfigEntry, MeterMod, MeterStatsEntry};
use crate::multipart::SwitchDesc;
use crate::oxm::OxmMatch;
use crate::packet::PacketIn;
use crate::session::{Bridge, FlowStatsIter, Session, SessionEvent};
use crate::test_support::field;

/// A switch that keeps the flow-mods it is sent and echoes them as flows.
#[derive(Default)]
struct Recorder {
    mods: Vec<FlowMod>,
    monitors: Vec<crate::flow_monitor::FlowMonitor>,
}

impl Bridge for Recorder {
    fn datapath_id(&self) -> u64 {
        0xabcd
    }
    fn ports(&self) -> Vec<PortInfo> {
        vec![PortInfo {
            port_no: 2,
            hw_addr: [2, 0, 0, 0, 0, 2],
            name: "tap2".into(),
            admin_down: false,
            link_up: false,
            curr_speed_kbps: 10_000_000,
            max_speed_kbps: 0,
        }]
    }
    fn desc(&self) -> SwitchDesc {
        SwitchDesc::default()
    }
    fn flow_mod(&mut self, fm: &FlowMod) -> Result<(), BadFlowMod> {
        self.mods.push(fm.clone());
        Ok(())
    }
    fn port_stats(&mut self) -> Vec<PortStats> {
        vec![PortStats {
            port_no: 2,
            rx_packets: 5,
            tx_packets: 6,
            rx_bytes: 7,
            tx_bytes: 8,
            rx_dropped: 0,
            tx_dropped: 0,
            rx_errors: 0,
            tx_errors: 0,
            duration_ms: 1500,
        }]
    }
    fn flow_stats(&mut self, _: &FlowStatsRequest) -> Result<FlowStatsIter, BadFlowMod> {
        let entries: Vec<FlowStatsEntry> = self
            .mods
            .iter()
            .map(|fm| FlowStatsEntry {
                table_id: if fm.table_id == OFPTT_ALL {
                    0
                } else {
                    fm.table_id
                },
                duration_ms: 2500,
                idle_ms: 0,
                priority: fm.priority,
                idle_timeout: fm.idle_timeout,
                hard_timeout: fm.hard_timeout,
                flags: fm.flags,
                importance: 0,
                cookie: fm.cookie,
                packet_count: 3,
                byte_count: 300,
                matcher: fm.matcher.clone(),
                instructions: fm.instructions.clone(),
            })
            .collect();
        Ok(Box::new(entries.into_iter()))
    }
    fn packet_out(&mut self, _: &PacketOut) -> Result<(), Refusal> {
        Ok(())
    }
    fn resume(&mut self, _: &crate::packet::Resume) -> Result<(), Refusal> {
        Ok(())
    }
    fn table_stats(&mut self, n: u8) -> Vec<TableStats> {
        (0..n.min(2))
            .map(|table_id| TableStats {
                table_id,
                active_count: 1,
                lookup_count: 10,
                matched_count: 9,
            })
            .collect()
    }
    fn group_mod(&mut self, _: &GroupMod) -> Result<(), BadGroupMod> {
        Ok(())
    }
    fn group_stats(&mut self, _: u32) -> Vec<GroupStatsEntry> {
        Vec::new()
    }
    fn group_desc(&mut self, _: u32) -> Vec<GroupDescEntry> {
        Vec::new()
    }
    fn meter_mod(&mut self, _: &MeterMod) -> Result<(), BadMeterMod> {
        Ok(())
    }
    fn meter_stats(&mut self, _: u32) -> Vec<MeterStatsEntry> {
        Vec::new()
    }
    fn meter_config(&mut self, _: u32) -> Vec<MeterConfigEntry> {
        Vec::new()
    }
    fn set_flow_monitors(&mut self, m: &[crate::flow_monitor::FlowMonitor]) {
        self.monitors = m.to_vec();
    }
}

/// A session after `ovs-ofctl`'s hello: version 1.0, no bitmap.
fn connected(bridge: &mut Recorder) -> Session {
    let mut s = Session::new();
    let mut out = Vec::new();
    let events = s
        .receive(
            &Message::Hello { versions: None }.encode(1, 1),
            bridge,
            &mut out,
        )
        .unwrap();
    assert_eq!(events, vec![SessionEvent::Negotiated(Version::V1_0)]);
    s
}

/// Every message `input` is answered with: (type, xid, the whole message).
fn exchange(s: &mut Session, bridge: &mut Recorder, input: &[u8]) -> Vec<(u8, u32, Vec<u8>)> {
    let mut out = Vec::new();
    s.receive(input, bridge, &mut out).unwrap();
    while s.wants_more() {
        s.receive(&[], bridge, &mut out).unwrap();
    }
    let mut replies = Vec::new();
    let mut at = 0;
    while let Some((h, m)) = next_message(&out[at..]).unwrap() {
        assert_eq!(h.version, 1, "every answer in 1.0");
        replies.push((h.kind, h.xid, m.to_vec()));
        at += m.len();
    }
    replies
}

fn nicira(subtype: u32, body: &[u8], xid: u32) -> Vec<u8> {
    let mut m = vec![1, 4, 0, 0];
    m.extend_from_slice(&xid.to_be_bytes());
    m.extend_from_slice(&NX_VENDOR_ID.to_be_bytes());
    m.extend_from_slice(&subtype.to_be_bytes());
    m.extend_from_slice(body);
    let len = m.len() as u16;
    m[2..4].copy_from_slice(&len.to_be_bytes());
    m
}

fn add(fields: Vec<crate::oxm::OxmField>, actions: Vec<Action>) -> FlowMod {
    FlowMod {
        cookie: 0x77,
        priority: 100,
        instructions: vec![Instruction::ApplyActions(actions)],
        ..FlowMod::new(Command::Add, OxmMatch { fields })
    }
}

#[test]
fn show_reads_the_ports_in_the_features_reply_and_barriers_have_1_0s_numbers() {
    let mut b = Recorder::default();
    let mut s = connected(&mut b);
    let mut input = Message::FeaturesRequest.encode(1, 2);
    input.extend(Message::GetConfigRequest.encode(1, 3));
    input.extend(Message::BarrierRequest.encode(1, 4));
    assert_eq!(input[input.len() - 7], OFPT10_BARRIER_REQUEST);
    let replies = exchange(&mut s, &mut b, &input);
    let kinds: Vec<(u8, u32)> = replies.iter().map(|(k, x, _)| (*k, *x)).collect();
    assert_eq!(kinds, [(6, 2), (8, 3), (OFPT10_BARRIER_REPLY, 4)]);
    let features = &replies[0].2;
    // Header, 24 fixed bytes, one 48-byte ofp_phy_port.
    assert_eq!(features.len(), 8 + 24 + 48);
    assert_eq!(&features[8..16], &0xabcdu64.to_be_bytes());
    let port = &features[32..];
    assert_eq!(&port[..2], &[0, 2], "a 16-bit port number");
    assert_eq!(&port[8..12], b"tap2");
    assert_eq!(&port[28..32], &[0, 0, 0, 1], "OFPPS_LINK_DOWN");
}

#[test]
fn a_1_0_flow_mod_is_carried_out_and_echoed_by_flow_stats() {
    let mut b = Recorder::default();
    let mut s = connected(&mut b);
    let fm = add(
        vec![
            field(0, &[0, 0, 0, 2], None),
            field(5, &[8, 0], None),
            field(11, &[198, 18, 0, 0], Some(&[255, 255, 255, 0])),
        ],
        vec![
            Action::SetField(field(6, &[0x10, 9], None)),
            Action::Output {
                port: 0xffff_fffd,
                max_len: 0xffff,
            },
        ],
    );
    let wire = Message::FlowMod(fm.clone()).encode(1, 5);
    assert_eq!(wire[1], crate::flow_mod::OFPT_FLOW_MOD);
    let mut input = wire.clone();
    input.extend(Message::BarrierRequest.encode(1, 6));
    assert_eq!(
        exchange(&mut s, &mut b, &input).len(),
        1,
        "only the barrier"
    );
    assert_eq!(b.mods, vec![fm], "read back as written, table 0");
    // OFPST_FLOW, all tables, any port.
    let req = MultipartRequest::Flow(FlowStatsRequest {
        table_id: OFPTT_ALL,
        out_port: crate::flow_mod::OFPP_ANY,
        out_group: OFPG_ANY,
        cookie: 0,
        cookie_mask: 0,
        matcher: OxmMatch::default(),
    });
    let replies = exchange(&mut s, &mut b, &Message::MultipartRequest(req).encode(1, 7));
    let (kind, xid, reply) = &replies[0];
    assert_eq!((*kind, *xid), (OFPT10_STATS_REPLY, 7));
    assert_eq!(&reply[8..12], &[0, 1, 0, 0], "OFPST_FLOW, no more");
    let entry = &reply[12..];
    assert_eq!(
        usize::from(u16::from_be_bytes([entry[0], entry[1]])),
        entry.len()
    );
    // The match and the actions as the flow-mod carried them.
    assert_eq!(&entry[4..44], &wire[8..48]);
    assert_eq!(&entry[88..], &wire[72..]);
    assert_eq!(&entry[44..48], &2u32.to_be_bytes(), "duration 2.5 s");
}

#[test]
fn the_nxm_format_carries_what_ofp10_match_cannot() {
    let mut b = Recorder::default();
    let mut s = connected(&mut b);
    // NXT_SET_FLOW_FORMAT(NXM) and NXT_FLOW_MOD_TABLE_ID(on): no answer.
    let mut input = nicira(NXT_SET_FLOW_FORMAT, &NXFF_NXM.to_be_bytes(), 2);
    input.extend(nicira(NXT_FLOW_MOD_TABLE_ID, &[1, 0, 0, 0, 0, 0, 0, 0], 3));
    // NXT_FLOW_MOD to table 4: reg3=9/0xff, ipv6 with the flow label.
    let m = OxmMatch {
        fields: vec![
            field(crate::oxm::REG0 + 3, &[0, 0, 0, 9], Some(&[0, 0, 0, 0xff])),
            field(5, &[0x86, 0xdd], None),
            field(28, &[0, 0, 0, 5], None),
        ],
    };
    let mut nxm_bytes = Vec::new();
    let n = nxm::encode(&m, &mut nxm_bytes);
    let mut body = Vec::new();
    body.extend_from_slice(&0x99u64.to_be_bytes());
    body.extend_from_slice(&((4u16 << 8) | Command::Add as u16).to_be_bytes());
    body.extend_from_slice(&[0, 10, 0, 0, 0, 200]);
    body.extend_from_slice(&u32::MAX.to_be_bytes());
    body.extend_from_slice(&[0xff, 0xff, 0, 0]);
    body.extend_from_slice(&(n as u16).to_be_bytes());
    body.extend_from_slice(&[0; 6]);
    body.extend_from_slice(&nxm_bytes);
    body.extend(std::iter::repeat_n(0u8, n.div_ceil(8) * 8 - n));
    let mut acts = Vec::new();
    actions::encode(
        &[Action::Output {
            port: 1,
            max_len: 0,
        }],
        &mut acts,
    );
    body.extend_from_slice(&acts);
    input.extend(nicira(NXT_FLOW_MOD, &body, 4));
    input.extend(Message::BarrierRequest.encode(1, 5));
    let replies = exchange(&mut s, &mut b, &input);
    assert_eq!(replies.len(), 1, "{replies:?}");
    let fm = &b.mods[0];
    assert_eq!(
        (fm.table_id, fm.priority, fm.idle_timeout, fm.cookie),
        (4, 200, 10, 0x99)
    );
    assert_eq!(fm.matcher, m);
    // NXST_FLOW: the reply is Nicira's too, with the NXM match as sent.
    let req = FlowStatsRequest {
        table_id: OFPTT_ALL,
        out_port: crate::flow_mod::OFPP_ANY,
        out_group: OFPG_ANY,
        cookie: 0,
        cookie_mask: 0,
        matcher: OxmMatch::default(),
    };
    let replies = exchange(
        &mut s,
        &mut b,
        &encode_nx_flow_stats_request(false, &req, 9),
    );
    let (kind, _, reply) = &replies[0];
    assert_eq!(*kind, OFPT10_STATS_REPLY);
    assert_eq!(&reply[8..10], &[0xff, 0xff]);
    assert_eq!(&reply[12..16], &NX_VENDOR_ID.to_be_bytes());
    assert_eq!(&reply[16..20], &NXST_FLOW.to_be_bytes());
    let entry = &reply[24..];
    assert_eq!(entry[2], 4, "table 4");
    let match_len = usize::from(u16::from_be_bytes([entry[18], entry[19]]));
    assert_eq!(&entry[48..48 + match_len], &nxm_bytes[..]);
    assert_eq!(&entry[48 + match_len.div_ceil(8) * 8..], &acts[..]);
    // NXST_AGGREGATE: one flow, its counters.
    let replies = exchange(
        &mut s,
        &mut b,
        &encode_nx_flow_stats_request(true, &req, 10),
    );
    let reply = &replies[0].2;
    assert_eq!(&reply[16..20], &NXST_AGGREGATE.to_be_bytes());
    assert_eq!(
        &reply[24..48],
        &[
            &3u64.to_be_bytes()[..],
            &300u64.to_be_bytes(),
            &[0, 0, 0, 1, 0, 0, 0, 0]
        ]
        .concat()
    );
}

#[test]
fn a_delete_by_cookie_in_nxm_selects_by_cookie() {
    let mut b = Recorder::default();
    let mut s = connected(&mut b);
    // NXM_NX_COOKIE_W: class 1, field 30, masked, 16 bytes.
    let mut cookie = vec![0, 1, (30 << 1) | 1, 16];
    cookie.extend_from_slice(&0x10u64.to_be_bytes());
    cookie.extend_from_slice(&0xf0u64.to_be_bytes());
    let mut body = vec![0; 8];
    body.extend_from_slice(&(Command::Delete as u16).to_be_bytes());
    body.extend_from_slice(&[0; 6]);
    body.extend_from_slice(&u32::MAX.to_be_bytes());
    body.extend_from_slice(&[0xff, 0xff, 0, 0]);
    body.extend_from_slice(&(cookie.len() as u16).to_be_bytes());
    body.extend_from_slice(&[0; 6]);
    body.extend_from_slice(&cookie);
    body.extend_from_slice(&[0; 4]);
    exchange(&mut s, &mut b, &nicira(NXT_FLOW_MOD, &body, 2));
    let fm = &b.mods[0];
    assert_eq!(
        (fm.command, fm.table_id, fm.cookie, fm.cookie_mask),
        (Command::Delete, OFPTT_ALL, 0x10, 0xf0),
        "a delete without a table id looks in every table"
    );
}

#[test]
fn statistics_have_1_0s_layouts() {
    let mut b = Recorder::default();
    let mut s = connected(&mut b);
    let mut input =
        Message::MultipartRequest(MultipartRequest::PortStats(0xffff_ffff)).encode(1, 2);
    input.extend(Message::MultipartRequest(MultipartRequest::Table).encode(1, 3));
    input.extend(Message::MultipartRequest(MultipartRequest::Desc).encode(1, 4));
    let replies = exchange(&mut s, &mut b, &input);
    let ports = &replies[0].2;
    assert_eq!(ports.len(), 8 + 4 + 104, "ofp10_port_stats");
    assert_eq!(&ports[12..14], &[0, 2]);
    assert_eq!(&ports[20..28], &5u64.to_be_bytes(), "rx_packets");
    let tables = &replies[1].2;
    assert_eq!(tables.len(), 8 + 4 + 2 * 64, "two ofp10_table_stats");
    assert_eq!(&tables[16..22], b"table0");
    assert_eq!(replies[2].2.len(), 8 + 4 + 1056, "the description");
}

#[test]
fn refusals_use_1_0s_codes_or_nicira_s_vendor_errors() {
    let mut b = Recorder::default();
    let mut s = connected(&mut b);
    // An unknown 1.0 action: BAD_ACTION/BAD_TYPE, an OpenFlow 1.0 code.
    let mut fm = Message::FlowMod(add(vec![], vec![])).encode(1, 2);
    fm.extend_from_slice(&[0, 12, 0, 8, 0, 0, 0, 0]);
    let len = fm.len() as u16;
    fm[2..4].copy_from_slice(&len.to_be_bytes());
    // An NXM field of an unknown class: BAD_FIELD, which 1.0 says as Nicira's
    // vendor error (0, 263).
    let mut body = vec![0; 8];
    body.extend_from_slice(&[0; 16]);
    body.extend_from_slice(&[0, 5, 0, 0, 0, 0, 0, 0]);
    body.extend_from_slice(&[0x12, 0x34, 0, 1, 0, 0, 0, 0]);
    let nx = nicira(NXT_FLOW_MOD, &body, 3);
    // A flow format that is none: EPERM.
    let ff = nicira(NXT_SET_FLOW_FORMAT, &7u32.to_be_bytes(), 4);
    let mut input = fm;
    input.extend(nx);
    input.extend(ff);
    let replies = exchange(&mut s, &mut b, &input);
    let errors: Vec<(u32, &[u8])> = replies
        .iter()
        .map(|(k, x, m)| {
            assert_eq!(*k, crate::message::OFPT_ERROR);
            (*x, &m[8..12])
        })
        .collect();
    assert_eq!(
        errors,
        [
            (2, &[0, 2, 0, 0][..]),
            (3, &[0xb0, 0xc2, 0, 0][..]),
            (4, &[0, 1, 0, 5][..])
        ]
    );
    assert_eq!(&replies[1].2[12..20], &[0, 0, 0x23, 0x20, 0, 0, 1, 7]);
    assert!(b.mods.is_empty(), "nothing refused was carried out");
}

#[test]
fn asynchronous_messages_have_1_0s_layouts() {
    let pi = PacketIn::of_frame(&[9; 60], 2, 1, 0, 0, 0xffff, Vec::new());
    let m = Message::PacketIn(pi).encode(1, 0);
    // buffer, total_len, in_port (16 bits), reason, pad, the frame.
    assert_eq!(m.len(), 8 + 10 + 60);
    assert_eq!(&m[12..18], &[0, 60, 0, 2, 1, 0]);
    let port = Recorder::default().ports().remove(0);
    let ps = Message::PortStatus(crate::message::OFPPR_ADD, port).encode(1, 0);
    assert_eq!(ps.len(), 8 + 8 + 48);
    let fr = Message::FlowRemoved(FlowRemoved {
        table_id: 0,
        reason: 1,
        priority: 5,
        idle_timeout: 0,
        hard_timeout: 9,
        cookie: 1,
        matcher: OxmMatch::default(),
        counts: crate::oxs::FlowCounts {
            duration_ms: 9000,
            idle_ms: 0,
            packets: 1,
            bytes: 2,
        },
    })
    .encode(1, 0);
    assert_eq!(fr.len(), 8 + 80, "ofp_flow_removed");
    assert_eq!(&fr[58..60], &[1, 0], "reason");
}

#[test]
fn a_1_0_packet_out_is_read_with_its_16_bit_port() {
    let po = PacketOut {
        buffer_id: u32::MAX,
        in_port: 0xffff_fffd,
        metadata: Vec::new(),
        actions: vec![Action::Output {
            port: 0xffff_fffb,
            max_len: 0,
        }],
        data: vec![1; 14],
    };
    let wire = Message::PacketOut(po.clone()).encode(1, 3);
    assert_eq!(&wire[12..14], &[0xff, 0xfd]);
    assert_eq!(
        decode(&wire, Dialect::default()),
        Ok(Message::PacketOut(po))
    );
    let mut buffered = wire.clone();
    buffered[8..12].copy_from_slice(&[0, 0, 0, 1]);
    assert_eq!(
        decode(&buffered, Dialect::default()),
        Err(Refusal::BufferUnknown)
    );
}

#[test]
fn a_flow_monitor_starts_with_the_flows_there_and_is_cancelled_by_id() {
    use crate::flow_monitor::{
        encode_request, FlowMonitor, MonitorCommand, NXFMF_ACTIONS, NXFMF_ADD, NXFMF_INITIAL,
    };
    let encode_nx_request = |m: &[FlowMonitor], xid| encode_request(Version::V1_0, m, xid);
    let mut b = Recorder::default();
    b.mods.push(add(
        vec![field(5, &[8, 0], None)],
        vec![Action::Output {
            port: 2,
            max_len: 0,
        }],
    ));
    let mut s = connected(&mut b);
    let watch = FlowMonitor {
        id: 7,
        command: MonitorCommand::Add,
        flags: NXFMF_INITIAL | NXFMF_ADD | NXFMF_ACTIONS,
        out_port: crate::flow_mod::OFPP_ANY,
        table_id: OFPTT_ALL,
        matcher: OxmMatch::default(),
    };
    let mut out = Vec::new();
    let events = s
        .receive(
            &encode_nx_request(std::slice::from_ref(&watch), 4),
            &mut b,
            &mut out,
        )
        .unwrap();
    assert!(events.is_empty());
    assert_eq!(b.monitors, vec![watch.clone()], "the switch was told");
    while s.wants_more() {
        s.receive(&[], &mut b, &mut out).unwrap();
    }
    let (h, reply) = next_message(&out).unwrap().unwrap();
    assert_eq!((h.kind, h.xid), (OFPT10_STATS_REPLY, 4));
    assert_eq!(
        &reply[16..20],
        &crate::flow_monitor::NXST_FLOW_MONITOR.to_be_bytes()
    );
    let update = &reply[24..];
    // ADDED, priority 100, eth_type in NXM, then the output action.
    assert_eq!(&update[2..4], &[0, 0]);
    assert_eq!(&update[6..8], &[0, 100]);
    assert_eq!(&update[update.len() - 8..][..4], &[0, 0, 0, 8], "an output");
    // The same id again, and a cancel of an id that is none: Nicira's errors.
    let mut input = encode_nx_request(&[watch], 5);
    input.extend(Message::FlowMonitorCancel(8).encode(1, 6));
    input.extend(Message::FlowMonitorCancel(7).encode(1, 7));
    let mut out = Vec::new();
    let events = s.receive(&input, &mut b, &mut out).unwrap();
    assert!(events.is_empty());
    assert_eq!(b.monitors, vec![], "the cancel was told");
    let mut errors = Vec::new();
    let mut at = 0;
    while let Some((h, m)) = next_message(&out[at..]).unwrap() {
        errors.push((h.xid, m[8..12].to_vec(), m[16..20].to_vec()));
        at += m.len();
    }
    assert_eq!(
        errors,
        [
            (5, vec![0xb0, 0xc2, 0, 0], vec![0, 1, 2, 5]),
            (6, vec![0xb0, 0xc2, 0, 0], vec![0, 1, 2, 7]),
        ],
        "MONITOR_EXISTS (1,517), UNKNOWN_MONITOR (1,519)"
    );
}

#[test]
fn nicira_s_older_packet_in_carries_an_nxm_match() {
    let md = vec![field(crate::oxm::REG0 + 3, &[0, 0, 0, 0x2a], None)];
    let pi = PacketIn::of_frame(&[1; 20], 2, 1, 4, 9, 0xffff, md);
    let m = Message::NxPacketIn(pi).encode(1, 0);
    // Vendor header, then buffer, total_len, reason, table, cookie.
    assert_eq!(&m[12..16], &crate::packet::NXT_PACKET_IN.to_be_bytes());
    assert_eq!(&m[20..24], &[0, 20, 1, 4]);
    assert_eq!(&m[24..32], &9u64.to_be_bytes());
    // match_len 14: NXM_OF_IN_PORT (6) and NXM_NX_REG3 (8), padded to 16.
    assert_eq!(&m[32..34], &[0, 14]);
    assert_eq!(&m[40..46], &[0, 0, 0, 2, 0, 2]);
    assert_eq!(&m[56..58], &[0, 0], "two zero bytes before the packet");
    assert_eq!(&m[58..], &[1; 20]);
}

#[test]
fn a_1_0_exact_match_outranks_all_and_bad_flags_or_commands_are_refused() {
    let fm = add(
        vec![],
        vec![Action::Output {
            port: 1,
            max_len: 0,
        }],
    );
    let mut wire = Message::FlowMod(fm).encode(1, 2);
    // Nothing wildcarded: 1.0 gives the flow the highest priority.
    wire[8..12].copy_from_slice(&[0; 4]);
    let Ok(Message::FlowMod(exact)) = decode(&wire, Dialect::default()) else {
        panic!("an exact 1.0 flow-mod");
    };
    assert_eq!(exact.priority, u16::MAX);
    // A flag 1.0 does not have (8 is 1.3's NO_PKT_COUNTS).
    let mut flags = wire.clone();
    flags[70..72].copy_from_slice(&8u16.to_be_bytes());
    assert_eq!(
        decode(&flags, Dialect::default()),
        Err(Refusal::FlowMod(BadFlowMod::BadFlags))
    );
    // A table in the command without NXT_FLOW_MOD_TABLE_ID.
    let mut command = wire.clone();
    command[56..58].copy_from_slice(&0x0100u16.to_be_bytes());
    assert_eq!(
        decode(&command, Dialect::default()),
        Err(Refusal::FlowMod(BadFlowMod::BadCommand))
    );
}

#[test]
fn a_set_field_as_nicira_s_load_has_the_field_s_own_width() {
    use crate::nx_action::{masked_set_field_as_load, NxAction};
    // mpls_label: 20 bits, not the value's 32; ip_ecn: 2 bits, not 8.
    for (f, bytes, n_bits, want) in [(34u8, vec![0, 0, 0, 5], 20u16, 5u64), (9, vec![1], 2, 1)] {
        match masked_set_field_as_load(&field(f, &bytes, None)) {
            NxAction::RegLoad {
                ofs_nbits, value, ..
            } => assert_eq!((ofs_nbits, value), (n_bits - 1, want), "field {f}"),
            other => panic!("field {f}: {other:?}"),
        }
    }
    // A VID's present bit is no bit of the VID: as REG_LOAD2, whole.
    let vid = field(6, &[0x10, 5], None);
    assert_eq!(masked_set_field_as_load(&vid), NxAction::RegLoad2(vid));
    // A mask past the field's width: REG_LOAD2 too.
    let wide = field(9, &[1], Some(&[0xff]));
    assert_eq!(masked_set_field_as_load(&wide), NxAction::RegLoad2(wide));
}
