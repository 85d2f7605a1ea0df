//! Exit codes of emq-sender, and how outcomes map to them.
//!
//! | code | meaning |
//! |---|---|
//! | 0 | success (accepted, or with `--wait` the job finished ok) |
//! | 1 | connection or internal error; or the router could not tell whether it stored a job (`journal-uncertain` until `--timeout`: it may run) |
//! | 2 | usage error (bad flag, MESSAGE_JSON or a bulk line that is not JSON) |
//! | 3 | rejected by the router (`queue-full`, `malformed`, `shutting-down`, ...) |
//! | 4 | the job failed (RESULT `failed`, or REJECT `dead-lettered`) |
//! | 5 | timed out (no acknowledgement, or with `--wait` no result, within `--timeout`) |
//!
//! In bulk mode the process exits with the most severe code seen, from most
//! to least severe: 1, 2, 5, 3, 4, 0.

use emqp_proto::{RejectReason, ResultStatus};

/// A process exit code: every emq binary's one type; emq-sender uses
/// `Ok`, `Internal`, `Usage`, `Rejected`, `Failed` and `Timeout`.
pub use emq_cli_support::Exit;

/// How emq-sender ranks and picks its exit codes.
pub trait SenderExit: Sized {
    /// Rank used to pick the exit code of a bulk run (higher wins).
    fn severity(self) -> u8;
    /// The more severe of two codes.
    fn worst(self, other: Self) -> Self;
    /// The code for a RESULT status.
    fn for_status(status: ResultStatus) -> Self;
    /// The code for a REJECT: `dead-lettered` means the job was accepted
    /// and then failed for good (4); `journal-uncertain` (still, when the
    /// time ran out) that nobody can tell whether it was accepted (1, as a
    /// lost connection: the job may run); every other reason means "not
    /// accepted" (3).
    fn for_reject(reason: &RejectReason) -> Self;
}

impl SenderExit for Exit {
    fn severity(self) -> u8 {
        match self {
            Exit::Ok => 0,
            Exit::Failed => 1,
            Exit::Rejected => 2,
            Exit::Timeout => 3,
            Exit::Usage => 4,
            Exit::Internal => 5,
            // Not emq-sender's codes: ranked with what they are closest to.
            Exit::Refused => 2,
            Exit::JournalUnusable => 4,
            Exit::Unsupported | Exit::Status(_) | Exit::Interrupted => 5,
        }
    }

    fn worst(self, other: Exit) -> Exit {
        if other.severity() > self.severity() {
            other
        } else {
            self
        }
    }

    fn for_status(status: ResultStatus) -> Exit {
        match status {
            ResultStatus::Ok => Exit::Ok,
            ResultStatus::Failed => Exit::Failed,
        }
    }

    fn for_reject(reason: &RejectReason) -> Exit {
        match reason {
            RejectReason::DeadLettered => Exit::Failed,
            RejectReason::JournalUncertain => Exit::Internal,
            _ => Exit::Rejected,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_match_the_cli_contract() {
        let all = [
            (Exit::Ok, 0),
            (Exit::Internal, 1),
            (Exit::Usage, 2),
            (Exit::Rejected, 3),
            (Exit::Failed, 4),
            (Exit::Timeout, 5),
        ];
        for (e, c) in all {
            assert_eq!(e.code(), c, "{e:?}");
        }
    }

    #[test]
    fn worst_follows_the_documented_order() {
        let order = [
            Exit::Ok,
            Exit::Failed,
            Exit::Rejected,
            Exit::Timeout,
            Exit::Usage,
            Exit::Internal,
        ];
        for (i, a) in order.iter().enumerate() {
            for (j, b) in order.iter().enumerate() {
                let expect = if i >= j { *a } else { *b };
                assert_eq!(a.worst(*b), expect, "{a:?} vs {b:?}");
            }
        }
    }

    #[test]
    fn statuses_and_rejects_map_to_codes() {
        assert_eq!(Exit::for_status(ResultStatus::Ok), Exit::Ok);
        assert_eq!(Exit::for_status(ResultStatus::Failed), Exit::Failed);
        assert_eq!(Exit::for_reject(&RejectReason::QueueFull), Exit::Rejected);
        assert_eq!(Exit::for_reject(&RejectReason::Malformed), Exit::Rejected);
        assert_eq!(
            Exit::for_reject(&RejectReason::ShuttingDown),
            Exit::Rejected
        );
        assert_eq!(
            Exit::for_reject(&RejectReason::Other("x".into())),
            Exit::Rejected
        );
        assert_eq!(Exit::for_reject(&RejectReason::DeadLettered), Exit::Failed);
        assert_eq!(
            Exit::for_reject(&RejectReason::JournalUncertain),
            Exit::Internal
        );
    }
}
