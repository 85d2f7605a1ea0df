//! Exit codes: one type for every emq binary.
//!
//! Every binary exits 0 when it did its job, 1 on a connection, internal or
//! any other error, and 2 on a usage error (a bad flag, setting or config
//! file), except where its `--help` and the README document another
//! meaning; codes 3 and up mean different things in different binaries, so
//! each meaning is its own variant, named after what it says:
//!
//! | code | variant | binary |
//! |---|---|---|
//! | 0 | [`Exit::Ok`] | all |
//! | 1 | [`Exit::Internal`] | all (the router: also a bad option) |
//! | 2 | [`Exit::Usage`] | emq-cli, emq-sender, emq-receiver, emq-jobmanager, emq-pubsub |
//! | 2 | [`Exit::JournalUnusable`] | emq-router: the journal cannot be used |
//! | 3 | [`Exit::Refused`] | emq-cli: the router refused the admin request |
//! | 3 | [`Exit::Rejected`] | emq-sender: the router rejected the job |
//! | 4 | [`Exit::Unsupported`] | emq-cli: the router does not support the command |
//! | 4 | [`Exit::Failed`] | emq-sender: the job failed |
//! | 5 | [`Exit::Timeout`] | emq-sender, emq-receiver: nothing within `--timeout` |
//! | N | [`Exit::Status`] | emq-jobmanager: the status its connection core chose |
//! | 130 | [`Exit::Interrupted`] | emq-bench: stopped by SIGINT |

/// A process exit code of an emq binary (see the module table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Ok,
    Internal,
    Usage,
    JournalUnusable,
    Refused,
    Rejected,
    Unsupported,
    Failed,
    Timeout,
    /// A status decided at run time (clamped to 0..=255 by [`Exit::status`]).
    Status(u8),
    Interrupted,
}

impl Exit {
    /// The numeric process exit code.
    pub fn code(self) -> u8 {
        match self {
            Exit::Ok => 0,
            Exit::Internal => 1,
            Exit::Usage | Exit::JournalUnusable => 2,
            Exit::Refused | Exit::Rejected => 3,
            Exit::Unsupported | Exit::Failed => 4,
            Exit::Timeout => 5,
            Exit::Status(c) => c,
            Exit::Interrupted => 130,
        }
    }

    /// An exit status computed as an `i32` (clamped to 0..=255).
    pub fn status(code: i32) -> Exit {
        Exit::Status(code.clamp(0, 255) as u8)
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
    fn codes_match_the_documented_table() {
        for (e, c) in [
            (Exit::Ok, 0),
            (Exit::Internal, 1),
            (Exit::Usage, 2),
            (Exit::JournalUnusable, 2),
            (Exit::Refused, 3),
            (Exit::Rejected, 3),
            (Exit::Unsupported, 4),
            (Exit::Failed, 4),
            (Exit::Timeout, 5),
            (Exit::Status(7), 7),
            (Exit::Interrupted, 130),
        ] {
            assert_eq!(e.code(), c, "{e:?}");
        }
        assert_eq!(Exit::status(-1), Exit::Status(0));
        assert_eq!(Exit::status(300), Exit::Status(255));
        assert_eq!(Exit::status(0).code(), 0);
    }
}
