//! The error type of the PostgreSQL store. Every message names the
//! database (its URL without the password), so a log line alone tells the
//! operator where to look.

use std::fmt;

/// Why the PostgreSQL journal could not be reached, read or written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PgError {
    /// The `postgresql://` URL does not parse.
    BadUrl { detail: String },
    /// No connection: refused, timed out, authentication failed, ...
    Connect { db: String, detail: String },
    /// The schema was written by a newer emq.
    UnsupportedVersion {
        db: String,
        found: i64,
        supported: i64,
    },
    /// The lease row no longer names this router at its epoch: another
    /// router took over. Nothing of the batch was written.
    Fenced { db: String, epoch: u64 },
    /// A write was attempted without holding the lease.
    NoLease { db: String },
    /// Any other failure of a statement; the connection is dropped if it
    /// broke, and made again on the next call.
    Sql {
        db: String,
        /// What the store was doing, e.g. "append", "load".
        context: &'static str,
        detail: String,
        /// Not a plain refusal by the server on a live connection (an
        /// `ERROR`, after which the transaction is rolled back) but a
        /// broken connection, a timeout, or the session ended (`FATAL`):
        /// a commit in flight may have happened.
        broken: bool,
    },
}

impl PgError {
    /// Another router holds the lease: step down.
    pub fn is_fenced(&self) -> bool {
        matches!(self, PgError::Fenced { .. })
    }

    /// A failure that waiting does not cure (the operator must act).
    pub fn is_permanent(&self) -> bool {
        matches!(
            self,
            PgError::BadUrl { .. } | PgError::UnsupportedVersion { .. }
        )
    }

    /// Whether a commit in flight when this happened may have been made
    /// (the connection broke), as opposed to certainly not.
    pub fn may_have_committed(&self) -> bool {
        matches!(self, PgError::Sql { broken: true, .. })
    }

    /// The same error, from a step before any of the batch's statements
    /// was sent (connecting, settling an earlier batch): no commit of the
    /// batch can have happened, however the connection broke.
    pub(crate) fn before_the_batch(self) -> PgError {
        match self {
            PgError::Sql {
                db,
                context,
                detail,
                ..
            } => PgError::Sql {
                db,
                context,
                detail,
                broken: false,
            },
            other => other,
        }
    }

    pub(crate) fn sql(db: &str, context: &'static str, e: postgres::Error) -> PgError {
        // The server's message (with its SQLSTATE) says more than the
        // client's summary ("db error").
        let (detail, broken) = match e.as_db_error() {
            Some(d) => (
                format!("{} ({})", d.message(), d.code().code()),
                d.parsed_severity() != Some(postgres::error::Severity::Error),
            ),
            None => (e.to_string(), true),
        };
        PgError::Sql {
            db: db.to_string(),
            context,
            detail,
            broken,
        }
    }
}

impl fmt::Display for PgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PgError::BadUrl { detail } => write!(
                f,
                "bad PostgreSQL URL ({detail}); expected postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE"
            ),
            PgError::Connect { db, detail } => {
                write!(f, "journal {db}: cannot connect: {detail}")
            }
            PgError::UnsupportedVersion {
                db,
                found,
                supported,
            } => write!(
                f,
                "journal {db} has schema version {found}, this emq supports up to {supported}; \
                 it was written by a newer emq (upgrade every router on this database)"
            ),
            PgError::Fenced { db, epoch } => write!(
                f,
                "journal {db}: the leader lease (epoch {epoch}) was taken over by another router; \
                 nothing was written"
            ),
            PgError::NoLease { db } => {
                write!(f, "journal {db}: this router does not hold the leader lease")
            }
            PgError::Sql {
                db,
                context,
                detail,
                ..
            } => write!(f, "journal {db}: {context} failed: {detail}"),
        }
    }
}

impl std::error::Error for PgError {}
