//! Property tests: decoding never panics on any frame list, and what decodes
//! re-encodes to a fixpoint.

use emqp_proto::command::NAMES;
use emqp_proto::{Interval, Message};
use proptest::prelude::*;

/// Frames that are sometimes valid envelope parts and sometimes junk, so the
/// search reaches the command decoders and not only the envelope checks.
fn frame_list() -> impl Strategy<Value = Vec<Vec<u8>>> {
    let junk = prop::collection::vec(any::<u8>(), 0..24);
    let text = prop_oneof![
        Just(b"".to_vec()),
        Just(b"worker".to_vec()),
        Just(b"scheduler".to_vec()),
        Just(b"reply-requested,retry-count:3,timeout:x".to_vec()),
        Just(b"[[10, \"default\"], [5, \"b\"]]".to_vec()),
        Just(b"[[10, \"default\"".to_vec()),
        Just(b"-1".to_vec()),
        Just(b"60".to_vec()),
        Just(b"1.5".to_vec()),
        Just(b"nan".to_vec()),
        Just(b"1e+20".to_vec()),
        "[-+]?[0-9]{0,21}(\\.[0-9]{0,5})?(e[-+]?[0-9]{1,3})?".prop_map(String::into_bytes),
        Just(b"ok".to_vec()),
        Just(b"failed".to_vec()),
        Just(b"reply-resend,job-ack".to_vec()),
        "[a-z0-9:,\\-]{0,12}".prop_map(String::into_bytes),
    ];
    let body = prop::collection::vec(prop_oneof![junk.clone(), text], 0..8);
    let command = prop_oneof![
        prop::sample::select(NAMES.to_vec()).prop_map(|n| n.as_bytes().to_vec()),
        junk.clone(),
    ];
    let structured = (any::<bool>(), command, "[a-f0-9\\-]{0,36}", body).prop_map(
        |(good_version, cmd, msgid, body)| {
            let mut v = vec![
                Vec::new(),
                if good_version {
                    b"eMQP/1.0".to_vec()
                } else {
                    b"eMQP/0.9".to_vec()
                },
                cmd,
                msgid.into_bytes(),
            ];
            v.extend(body);
            v
        },
    );
    prop_oneof![prop::collection::vec(junk, 0..10), structured,]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 20_000, ..ProptestConfig::default() })]

    #[test]
    fn decode_never_panics_and_encoding_is_a_fixpoint(frames in frame_list()) {
        if let Ok(msg) = Message::decode(frames.clone()) {
            let once = msg.encode();
            let again = Message::decode(once.clone()).expect("what we encode decodes");
            prop_assert_eq!(again.encode(), once);
        }
        let mut routed = frames;
        routed.insert(0, b"identity".to_vec());
        let _ = Message::decode_routed(routed);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 5_000, ..ProptestConfig::default() })]

    /// Any text: no panic; what decodes re-encodes to the same interval.
    #[test]
    fn interval_text_never_panics_and_round_trips(
        text in prop_oneof![
            any::<String>(),
            "[-+]?[0-9]{0,21}(\\.[0-9]{0,5})?(e[-+]?[0-9]{1,3})?",
        ]
    ) {
        if let Ok(i) = Interval::parse(&text) {
            prop_assert_eq!(Interval::parse(&i.to_string()), Ok(i));
        }
    }

    /// Every millisecond count is written exactly (`-1000` is `-1`).
    #[test]
    fn every_millisecond_count_round_trips(ms in any::<i64>()) {
        let i = Interval::Every { ms };
        let want = if ms == -1000 { Interval::Unset } else { i };
        prop_assert_eq!(Interval::parse(&i.to_string()), Ok(want));
    }
}
