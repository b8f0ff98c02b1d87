use super::*;
use crate::test_support::{field, flow_mod};
use proptest::prelude::*;

fn oxm(fields: Vec<OxmField>) -> OxmMatch {
    OxmMatch { fields }
}

fn round_trip(m: &OxmMatch) -> OxmMatch {
    let mut b = Vec::new();
    encode_match(m, &mut b);
    assert_eq!(b.len(), MATCH_LEN);
    decode_match(&b).unwrap()
}

/// Every field 1.1's match has comes back as it went in, masks (inverted on the
/// wire) and VLAN's three forms included.
#[test]
fn each_1_1_field_round_trips_through_the_standard_match() {
    let ip = field(5, &[8, 0], None);
    for m in [
        oxm(vec![]),
        oxm(vec![field(0, &[0, 0, 0, 3], None)]),
        oxm(vec![field(
            2,
            &[0, 0, 0, 0, 0, 0, 1, 0],
            Some(&[0, 0, 0, 0, 0, 0, 0xff, 0]),
        )]),
        oxm(vec![
            field(3, &[2, 0, 0, 0, 0, 1], None),
            field(4, &[2, 0, 0, 0, 0, 0], Some(&[0xff, 0xff, 0xff, 0, 0, 0])),
        ]),
        oxm(vec![field(6, &[0x10, 10], None), field(7, &[3], None)]),
        oxm(vec![field(6, &[0, 0], None)]),
        oxm(vec![field(6, &[0x10, 0], Some(&[0x10, 0]))]),
        oxm(vec![
            ip.clone(),
            field(8, &[46], None),
            field(10, &[6], None),
            field(11, &[198, 18, 0, 1], None),
            field(12, &[198, 18, 0, 0], Some(&[255, 255, 0, 0])),
            field(13, &[0, 80], None),
            field(14, &[1, 0], None),
        ]),
        oxm(vec![
            ip.clone(),
            field(10, &[1], None),
            field(19, &[8], None),
            field(20, &[0], None),
        ]),
        oxm(vec![
            field(5, &[8, 6], None),
            field(21, &[0, 2], None),
            field(22, &[198, 18, 0, 1], None),
            field(23, &[198, 18, 0, 2], None),
        ]),
        oxm(vec![
            field(5, &[0x88, 0x47], None),
            field(34, &[0, 0, 0, 100], None),
            field(35, &[5], None),
        ]),
    ] {
        assert_eq!(round_trip(&m), m);
    }
}

/// What 1.1 cannot say is left out; what a 1.1 match says of fields that do not
/// apply (IP fields of an ARP-less, IP-less match) is not read.
#[test]
fn what_1_1_has_not_is_left_out_and_fields_without_their_type_are_not_read() {
    let v6 = oxm(vec![
        field(5, &[0x86, 0xdd], None),
        field(26, &[1; 16], None),
    ]);
    assert_eq!(round_trip(&v6), oxm(vec![field(5, &[0x86, 0xdd], None)]));
    let mut b = Vec::new();
    encode_match(&oxm(vec![]), &mut b);
    // nw_proto matched (its wildcard bit cleared), but no IP type.
    let wc = u32_at(&b, 8) & !FW_NW_PROTO;
    b[8..12].copy_from_slice(&wc.to_be_bytes());
    b[43] = 6;
    assert_eq!(decode_match(&b).unwrap(), oxm(vec![]));
    // Not the standard type, or not its length.
    let mut bad = b.clone();
    bad[1] = 1;
    assert_eq!(decode_match(&bad), Err(BadMatch::BadType));
    let mut bad = b.clone();
    bad[3] = 80;
    assert_eq!(decode_match(&bad), Err(BadMatch::BadLen));
    assert_eq!(decode_match(&b[..87]), Err(BadMatch::BadLen));
    // A VID past 12 bits, a priority past 3, ECN bits in the TOS: BAD_VALUE.
    let with = |at: usize, bytes: &[u8], clear: u32| {
        let mut m = Vec::new();
        encode_match(&oxm(vec![field(5, &[8, 0], None)]), &mut m);
        m[at..at + bytes.len()].copy_from_slice(bytes);
        let wc = u32_at(&m, 8) & !clear;
        m[8..12].copy_from_slice(&wc.to_be_bytes());
        decode_match(&m)
    };
    assert_eq!(with(36, &[0x10, 0], FW_DL_VLAN), Err(BadMatch::BadValue));
    assert_eq!(
        with(36, &[0, 5, 8], FW_DL_VLAN | FW_DL_VLAN_PCP),
        Err(BadMatch::BadValue)
    );
    assert_eq!(with(42, &[0x21], FW_NW_TOS), Err(BadMatch::BadValue));
    // A priority without a VID asked for is not read, as Open vSwitch reads it.
    assert_eq!(
        with(38, &[5], FW_DL_VLAN_PCP),
        Ok(oxm(vec![field(5, &[8, 0], None)]))
    );
}

/// 1.1's set actions with values past their fields, and actions 1.1 has not
/// (set-field, 25), are refused; a message the rewrite would grow past 64 KiB is
/// BAD_LEN, not cut.
#[test]
fn bad_1_1_actions_and_overgrown_messages_are_refused() {
    let action = |kind: u16, body: &[u8]| {
        let mut a = kind.to_be_bytes().to_vec();
        a.extend_from_slice(&8u16.to_be_bytes());
        a.extend_from_slice(body);
        a.resize(8, 0);
        a
    };
    let argument = Err(Refusal::FlowMod(BadFlowMod::BadArgument));
    for (kind, body) in [
        (SET_VLAN_VID, vec![0x10, 0]),
        (SET_VLAN_PCP, vec![8]),
        (SET_NW_TOS, vec![0x21]),
        (SET_NW_ECN, vec![4]),
    ] {
        assert_eq!(
            actions_to_1_2(&action(kind, &body), &mut Vec::new()),
            argument
        );
    }
    assert_eq!(
        actions_to_1_2(&action(25, &[]), &mut Vec::new()),
        Err(Refusal::FlowMod(BadFlowMod::BadActionType))
    );
    assert!(actions_to_1_2(&action(SET_VLAN_VID, &[0, 9]), &mut Vec::new()).is_ok());
    // A packet-out of 8,000 SET_VLAN_VID actions (64,000 bytes) grows to 128,000
    // as set-fields.
    let mut m = Vec::new();
    Header {
        version: 2,
        kind: OFPT_PACKET_OUT,
        length: 0,
        xid: 1,
    }
    .write(&mut m);
    let actions: Vec<u8> = (0..8000)
        .flat_map(|_| action(SET_VLAN_VID, &[0, 9]))
        .collect();
    m.extend_from_slice(&0xffff_ffffu32.to_be_bytes());
    m.extend_from_slice(&0xffff_fffdu32.to_be_bytes());
    m.extend_from_slice(&(actions.len() as u16).to_be_bytes());
    m.extend_from_slice(&[0; 6]);
    m.extend_from_slice(&actions);
    let n = m.len() as u16;
    m[2..4].copy_from_slice(&n.to_be_bytes());
    assert_eq!(to_1_2(&m), Err(Refusal::BadLen));
}

/// A 1.1 flow-mod, its set actions 1.1's own, reads as the 1.2 flow-mod of
/// set-fields; written back in 1.1 it is the same bytes.
#[test]
fn a_1_1_flow_mod_reads_as_1_2_s_and_writes_back_the_same() {
    let set = |f: u8, v: &[u8]| Action::SetField(field(f, v, None));
    let fm = flow_mod(
        vec![field(5, &[8, 0], None), field(10, &[17], None)],
        vec![
            Instruction::ApplyActions(vec![
                set(6, &[0x10, 9]),
                set(7, &[5]),
                set(4, &[2, 0, 0, 0, 0, 8]),
                set(3, &[2, 0, 0, 0, 0, 9]),
                set(11, &[198, 18, 0, 1]),
                set(12, &[198, 18, 0, 2]),
                set(8, &[10]),
                set(9, &[1]),
                set(13, &[0, 53]),
                set(14, &[0, 54]),
                Action::DecNwTtl,
                Action::Output {
                    port: 2,
                    max_len: 0,
                },
            ]),
            Instruction::GotoTable(3),
        ],
    );
    let wire = Message::FlowMod(fm.clone()).encode(Version::V1_1.wire(), 7);
    assert_eq!(wire[0], 2);
    let Ok(Message::FlowMod(read)) = Message::decode(Version::V1_1, &wire) else {
        panic!("{wire:02x?}")
    };
    assert_eq!(read, fm);
    let again = Message::FlowMod(read).encode(Version::V1_1.wire(), 7);
    assert_eq!(again, wire);
    // The set actions are 1.1's own (the first, SET_VLAN_VID, is type 1), after
    // the fixed part, the 88-byte match and the apply-actions header.
    assert_eq!(u16_at(&wire, 8 + 40 + MATCH_LEN + 8), SET_VLAN_VID);
    assert_eq!(u16_at(&wire, 8 + 40), OFPMT_STANDARD);
}

#[test]
fn a_flow_stats_request_s_match_is_read_and_1_2_s_additions_are_refused() {
    let mut body = Vec::new();
    body.extend_from_slice(&OFPMP_FLOW.to_be_bytes());
    body.extend_from_slice(&[0; 6]);
    body.extend_from_slice(&[0xff, 0, 0, 0]);
    body.extend_from_slice(&0xffff_ffffu32.to_be_bytes());
    body.extend_from_slice(&0xffff_ffffu32.to_be_bytes());
    body.extend_from_slice(&[0; 20]);
    encode_match(&oxm(vec![field(0, &[0, 0, 0, 1], None)]), &mut body);
    let mut m = Vec::new();
    Header {
        version: 2,
        kind: OFPT_MULTIPART_REQUEST,
        length: 0,
        xid: 1,
    }
    .write(&mut m);
    m.extend_from_slice(&body);
    let m = crate::message::finish(m);
    let Ok(Message::MultipartRequest(crate::multipart::MultipartRequest::Flow(r))) =
        Message::decode(Version::V1_1, &m)
    else {
        panic!("not a flow-stats request")
    };
    assert_eq!(r.matcher, oxm(vec![field(0, &[0, 0, 0, 1], None)]));
    // A match cut short.
    let mut short = m[..m.len() - 8].to_vec();
    let n = short.len() as u16;
    short[2..4].copy_from_slice(&n.to_be_bytes());
    assert!(Message::decode(Version::V1_1, &short).is_err());
    assert_eq!(refused(24, &[]), Some(Refusal::BadType), "role request");
    assert_eq!(
        refused(18, &[0, 8]),
        Some(Refusal::BadMultipart),
        "group features"
    );
    assert_eq!(refused(18, &[0, 7]), None, "group description");
}

/// A packet-in names its ports (no match); a flow-stats entry and a table-stats
/// entry are 1.1's lengths; a set-field 1.1 has no action for goes as Nicira's
/// load.
#[test]
fn what_the_switch_sends_is_laid_out_as_1_1_s() {
    let pi = crate::packet::PacketIn::of_frame(&[1; 20], 3, 1, 2, 0x77, 0xffff, Vec::new());
    let m = Message::PacketIn(pi).encode(2, 0);
    assert_eq!(m.len(), 8 + 16 + 20);
    assert_eq!(&m[12..16], &3u32.to_be_bytes(), "in_port");
    assert_eq!(&m[16..20], &3u32.to_be_bytes(), "in_phy_port");
    let entry = FlowStatsEntry {
        table_id: 1,
        duration_ms: 1500,
        idle_ms: 0,
        priority: 7,
        idle_timeout: 0,
        hard_timeout: 0,
        flags: 1,
        importance: 0,
        cookie: 9,
        packet_count: 1,
        byte_count: 2,
        matcher: oxm(vec![]),
        instructions: vec![Instruction::ApplyActions(vec![Action::SetField(field(
            26, &[1; 16], None,
        ))])],
    };
    let e = reply_entries(&MultipartReply::Flow(vec![entry])).unwrap();
    assert_eq!(usize::from(u16_at(&e[0], 0)), e[0].len());
    assert_eq!(&e[0][48..48 + 4], &[0, 0, 0, 88], "the standard match");
    let action_kind = u16_at(&e[0], 48 + 88 + 8);
    assert_eq!(action_kind, 0xffff, "Nicira's load");
    let t = TableStats {
        table_id: 0,
        active_count: 1,
        lookup_count: 2,
        matched_count: 3,
    };
    assert_eq!(
        reply_entries(&MultipartReply::Table(vec![t])).unwrap()[0].len(),
        88
    );
}

proptest! {
    /// Hostile bytes in any message a 1.1 controller sends are refused or read,
    /// never a panic.
    #[test]
    fn hostile_1_1_messages_are_refused_not_panicked_on(
        kind in prop_oneof![Just(13u8), Just(14), Just(15), Just(18), any::<u8>()],
        body in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        let mut m = Vec::new();
        Header { version: 2, kind, length: 0, xid: 1 }.write(&mut m);
        m.extend_from_slice(&body);
        let m = crate::message::finish(m);
        let _ = Message::decode(Version::V1_1, &m);
        let _ = decode_match(&body);
    }

    /// The same for flow-mods whose match is well framed: the bytes past it
    /// (instructions and their actions) are what gets rewritten.
    #[test]
    fn hostile_1_1_instructions_are_refused_not_panicked_on(
        fixed in proptest::collection::vec(any::<u8>(), 40),
        wildcards in any::<[u8; 84]>(),
        kinds in proptest::collection::vec(
            (prop_oneof![Just(3u16), Just(4), any::<u16>()], 0u16..48,
             prop_oneof![Just(1u16), Just(3), Just(7), Just(8), Just(25), any::<u16>()], 0u16..24),
            0..6,
        ),
        tail in proptest::collection::vec(any::<u8>(), 0..40),
    ) {
        let mut body = fixed;
        body.extend_from_slice(&[0, 0, 0, 88]);
        body.extend_from_slice(&wildcards);
        for (ik, ilen, ak, alen) in kinds {
            body.extend_from_slice(&ik.to_be_bytes());
            body.extend_from_slice(&ilen.to_be_bytes());
            body.extend_from_slice(&[0; 4]);
            body.extend_from_slice(&ak.to_be_bytes());
            body.extend_from_slice(&alen.to_be_bytes());
            body.extend_from_slice(&[0x10, 1, 2, 3]);
        }
        body.extend_from_slice(&tail);
        let mut m = Vec::new();
        Header { version: 2, kind: OFPT_FLOW_MOD, length: 0, xid: 1 }.write(&mut m);
        m.extend_from_slice(&body);
        let m = crate::message::finish(m);
        let _ = Message::decode(Version::V1_1, &m);
    }
}
