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

/// A process exit code of emq-sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Ok,
    Internal,
    Usage,
    Rejected,
    Failed,
    Timeout,
}

impl Exit {
    /// The numeric process exit code.
    pub fn code(self) -> u8 {
        match self {
            Exit::Ok => 0,
            Exit::Internal => 1,
            Exit::Usage => 2,
            Exit::Rejected => 3,
            Exit::Failed => 4,
            Exit::Timeout => 5,
        }
    }

    /// Rank used to pick the exit code of a bulk run (higher wins).
    pub fn severity(self) -> u8 {
        match self {
            Exit::Ok => 0,
            Exit::Failed => 1,
            Exit::Rejected => 2,
            Exit::Timeout => 3,
            Exit::Usage => 4,
            Exit::Internal => 5,
        }
    }

    /// The more severe of two codes.
    pub fn worst(self, other: Exit) -> Exit {
        if other.severity() > self.severity() {
            other
        } else {
            self
        }
    }

    /// The code for a RESULT status.
    pub fn for_status(status: ResultStatus) -> Exit {
        match status {
            ResultStatus::Ok => Exit::Ok,
            ResultStatus::Failed => Exit::Failed,
        }
    }

    /// The code for a REJECT: `dead-lettered` means the job was accepted and
    /// then failed for good (4); `journal-uncertain` (still, when the time
    /// ran out) that nobody can tell whether it was accepted (1, as a lost
    /// connection: the job may run); every other reason means "not
    /// accepted" (3).
    pub fn for_reject(reason: &RejectReason) -> Exit {
        match reason {
            RejectReason::DeadLettered => Exit::Failed,
            RejectReason::JournalUncertain => Exit::Internal,
            _ => Exit::Rejected,
        }
    }
}

impl From<Exit> for std::process::ExitCode {
    fn from(e: Exit) -> Self {
        std::process::ExitCode::from(e.code())
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
