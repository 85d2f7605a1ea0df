//! Exit codes of emq-cli, and how outcomes map to them.
//!
//! | code | meaning |
//! |---|---|
//! | 0 | ok |
//! | 1 | no answer within `--timeout`, connection or internal error (an answer that is not JSON) |
//! | 2 | usage error (bad or conflicting arguments, bad config file, a confirmation not given) |
//! | 3 | the router refused: `{"ok": false, "error": {"kind", "message"}}` |
//! | 4 | the router does not support the command (EventMQ 0.3.13) |

/// A process exit code: every emq binary's one type; emq-cli uses
/// `Ok`, `Internal`, `Usage`, `Refused` and `Unsupported`.
pub use emq_cli_support::Exit;

/// The error kinds the control plane documents (docs/PROTOCOL.md).
pub const ERROR_KINDS: [&str; 6] = [
    "bad-request",
    "not-found",
    "unsupported",
    "conflict",
    "journal-unavailable",
    "shutting-down",
];

/// The code for an ADMIN answer: `ok: true` is 0; a refusal is 3
/// whatever its kind (a kind this emq-cli does not know yet is still
/// the router saying no); an answer without a boolean `ok` is not an
/// answer of the control plane (1).
pub fn for_answer(answer: &serde_json::Value) -> Exit {
    match answer.get("ok").and_then(serde_json::Value::as_bool) {
        Some(true) => Exit::Ok,
        Some(false) => Exit::Refused,
        None => Exit::Internal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn codes_match_the_help_text() {
        for (e, c) in [
            (Exit::Ok, 0),
            (Exit::Internal, 1),
            (Exit::Usage, 2),
            (Exit::Refused, 3),
            (Exit::Unsupported, 4),
        ] {
            assert_eq!(e.code(), c, "{e:?}");
        }
    }

    #[test]
    fn every_documented_refusal_is_exit_3() {
        for kind in ERROR_KINDS.iter().chain(&["a-future-kind"]) {
            let a = json!({"ok": false, "error": {"kind": kind, "message": "m"}});
            assert_eq!(for_answer(&a), Exit::Refused, "{kind}");
        }
        assert_eq!(for_answer(&json!({"ok": true, "jobs": []})), Exit::Ok);
        assert_eq!(for_answer(&json!({"jobs": []})), Exit::Internal);
        assert_eq!(for_answer(&json!([1])), Exit::Internal);
    }
}
