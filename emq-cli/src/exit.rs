//! Exit codes of emq-cli, and how outcomes map to them.
//!
//! | code | meaning |
//! |---|---|
//! | 0 | ok |
//! | 1 | no answer within `--timeout`, connection or internal error (an answer that is not JSON) |
//! | 2 | usage error (bad or conflicting arguments, bad config file, a confirmation not given) |
//! | 3 | the router refused: `{"ok": false, "error": {"kind", "message"}}`, whatever its kind ([`for_kind`]) |
//! | 4 | the router does not support the command (EventMQ 0.3.13) |

/// A process exit code: every emq binary's one type; emq-cli uses
/// `Ok`, `Internal`, `Usage`, `Refused` and `Unsupported`.
pub use emq_cli_support::Exit;

use emqp_proto::admin::{decode_answer, ErrorKind};

/// The code of a refusal of `kind`: 3 whatever the kind (a kind this
/// emq-cli does not know yet, [`ErrorKind::Other`], is still the router
/// saying no). Not 4: `unsupported` is the router refusing one op (a
/// job on a 0.3.13 job manager), 4 a router without the control plane.
pub fn for_kind(kind: ErrorKind) -> Exit {
    match kind {
        ErrorKind::BadRequest
        | ErrorKind::NotFound
        | ErrorKind::Unsupported
        | ErrorKind::Conflict
        | ErrorKind::JournalUnavailable
        | ErrorKind::ShuttingDown
        | ErrorKind::Other => Exit::Refused,
    }
}

/// The code for an ADMIN answer: `ok: true` is 0; a refusal is
/// [`for_kind`]; an answer without a boolean `ok` is not an answer of the
/// control plane (1).
pub fn for_answer(answer: &serde_json::Value) -> Exit {
    match decode_answer(answer) {
        Some(Ok(_)) => Exit::Ok,
        Some(Err(e)) => for_kind(e.kind),
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
    fn every_error_kind_is_exit_3() {
        for kind in ErrorKind::on_the_wire().chain([ErrorKind::Other]) {
            assert_eq!(for_kind(kind).code(), 3, "{kind:?}");
        }
    }

    #[test]
    fn every_documented_refusal_is_exit_3() {
        let kinds: Vec<&str> = ErrorKind::on_the_wire().map(ErrorKind::as_str).collect();
        assert_eq!(kinds.len(), 6);
        for kind in kinds.iter().chain(&["a-future-kind"]) {
            let a = json!({"ok": false, "error": {"kind": kind, "message": "m"}});
            assert_eq!(for_answer(&a), Exit::Refused, "{kind}");
        }
        assert_eq!(for_answer(&json!({"ok": true, "jobs": []})), Exit::Ok);
        assert_eq!(for_answer(&json!({"jobs": []})), Exit::Internal);
        assert_eq!(for_answer(&json!([1])), Exit::Internal);
    }
}
