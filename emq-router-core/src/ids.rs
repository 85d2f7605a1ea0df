//! Identifiers of the core, as types: a job id, a worker id and a
//! dispatch sequence number cannot be mixed up.

use std::fmt;

/// A job: handed out in acceptance order, unique within one router run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct JobId(pub u64);

/// A registered worker (one backend identity's registration).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct WorkerId(pub u64);

/// One dispatch: orders a worker's in-flight jobs (oldest first) and
/// stamps least-recent use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct DispatchSeq(pub u64);

impl JobId {
    /// The id after this one.
    pub fn next(self) -> JobId {
        JobId(self.0 + 1)
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "job#{}", self.0)
    }
}

impl fmt::Display for WorkerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "worker#{}", self.0)
    }
}

impl fmt::Display for DispatchSeq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "dispatch#{}", self.0)
    }
}
