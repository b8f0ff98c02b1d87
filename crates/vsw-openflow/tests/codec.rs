//! Every message type through encode and decode, and hostile bytes into a session.
//! `cargo test` runs 2,000 cases of each; a long run:
//! `PROPTEST_CASES=1000000 cargo test --release -p vsw-openflow --test codec`.

use proptest::prelude::*;
use vsw_openflow::message::ErrorMsg;
use vsw_openflow::{
    next_message, Bridge, Features, Message, MultipartRequest, PortInfo, Session, SwitchConfig,
    SwitchDesc, Version, VersionSet,
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
                    })
                }
            ),
        Just(Message::GetConfigRequest),
        config().prop_map(Message::GetConfigReply),
        config().prop_map(Message::SetConfig),
        Just(Message::BarrierRequest),
        Just(Message::BarrierReply),
        Just(Message::MultipartRequest(MultipartRequest::Desc)),
        Just(Message::MultipartRequest(MultipartRequest::PortDesc)),
    ]
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
        // replies and set-config, taken silently); then garbage, split anywhere.
        prop_assert!(s.receive(&input, &NoPorts, &mut out).is_ok());
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
            | Message::MultipartRequest(_)
        )).count();
        prop_assert_eq!(answered, expected);
        for c in &chunks {
            if s.receive(c, &NoPorts, &mut out).is_err() {
                break;
            }
        }
    }
}
