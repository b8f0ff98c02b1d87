//! The bundle messages' codec: OpenFlow 1.4's and 1.5's, and ONF's extension in
//! 1.3; their errors in each; hostile bytes refused, never panicked on.

use proptest::prelude::*;
use vsw_openflow::bundle::*;
use vsw_openflow::{Message, Version};

fn add_bytes(version: Version, inner: &[u8]) -> Vec<u8> {
    Message::BundleAdd(BundleAdd {
        bundle_id: 9,
        flags: OFPBF_ATOMIC,
        message: inner.to_vec(),
    })
    .encode(version.wire(), 5)
}

#[test]
fn control_and_add_round_trip_in_every_version_that_has_them() {
    for v in [Version::V1_3, Version::V1_4, Version::V1_5] {
        let ctrl = Message::BundleControl(BundleCtrl {
            bundle_id: 0x0102_0304,
            kind: OFPBCT_COMMIT_REQUEST,
            flags: OFPBF_ATOMIC | OFPBF_ORDERED,
        });
        let b = ctrl.encode(v.wire(), 3);
        if v == Version::V1_3 {
            // ONF's experimenter message: type 4, then the vendor and 2300.
            assert_eq!(b[1], vsw_openflow::message::OFPT_EXPERIMENTER);
            assert_eq!(&b[8..16], &[0x4f, 0x4e, 0x46, 0, 0, 0, 0x08, 0xfc]);
        } else {
            assert_eq!(b[1], OFPT_BUNDLE_CONTROL);
        }
        assert_eq!(Message::decode(v, &b), Ok(ctrl));
        let inner = Message::BarrierRequest.encode(v.wire(), 5);
        let add = add_bytes(v, &inner);
        assert_eq!(
            Message::decode(v, &add),
            Ok(Message::BundleAdd(BundleAdd {
                bundle_id: 9,
                flags: OFPBF_ATOMIC,
                message: inner,
            }))
        );
    }
}

#[test]
fn an_inner_message_that_overruns_or_is_of_another_version_is_refused() {
    let v = Version::V1_4;
    let mut inner = Message::BarrierRequest.encode(v.wire(), 5);
    inner[3] = 200; // longer than what follows
    let add = add_bytes(v, &inner);
    assert!(Message::decode(v, &add).is_err());
    let other = Message::BarrierRequest.encode(Version::V1_3.wire(), 5);
    assert!(Message::decode(v, &add_bytes(v, &other)).is_err());
}

#[test]
fn errors_are_bundle_failed_from_1_4_and_onf_experimenter_errors_in_1_3() {
    let req = [4u8; 20];
    let Message::Error(e) = BadBundle::MsgFailed.answer(Version::V1_4, &req) else {
        panic!()
    };
    assert_eq!((e.kind, e.code), (17, 13));
    let Message::Error(e) = BadBundle::MsgFailed.answer(Version::V1_3, &req) else {
        panic!()
    };
    assert_eq!((e.kind, e.code), (0xffff, 2313));
    assert_eq!(&e.data[..4], &ONF_VENDOR_ID.to_be_bytes());
}

proptest! {
    /// Hostile bundle messages are refused, never panicked on.
    #[test]
    fn hostile_bundle_messages_never_panic(
        v in prop::sample::select(vec![Version::V1_3, Version::V1_4, Version::V1_5]),
        kind in prop::sample::select(vec![OFPT_BUNDLE_CONTROL, OFPT_BUNDLE_ADD_MESSAGE, 4u8]),
        body in prop::collection::vec(any::<u8>(), 0..96),
    ) {
        let mut m = vec![v.wire(), kind, 0, 0, 0, 0, 0, 1];
        if kind == 4 {
            m.extend_from_slice(&ONF_VENDOR_ID.to_be_bytes());
            m.extend_from_slice(&(2300 + u32::from(body.first().copied().unwrap_or(0) & 1)).to_be_bytes());
        }
        m.extend_from_slice(&body);
        let len = m.len() as u16;
        m[2..4].copy_from_slice(&len.to_be_bytes());
        let _ = Message::decode(v, &m);
    }
}
