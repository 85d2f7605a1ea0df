//! The durable job journal of `emq-router`.
//!
//! The router core is sans-IO: it emits [`JournalOp`]s (a job was accepted,
//! completed, dead-lettered, dispatched again; a schedule was put or
//! deleted). The router binary collects the ops of one poll iteration and
//! writes them with [`Journal::append`] — one SQLite transaction per batch
//! (group commit) — and only then sends the acknowledgements (`REPLY
//! [msgid]`) of the jobs accepted in that iteration. On restart,
//! [`Journal::load_unfinished`] returns every job accepted but not finished,
//! in acceptance order, to be queued again.
//!
//! # Durability guarantee
//!
//! **A job whose ack the client received is in the journal**, provided the
//! router acks only after `append` returned `Ok` for the batch holding the
//! job's [`JournalOp::Accepted`] (or, with [`JournalWriter`], from that
//! batch's `Ok` callback). A batch is atomic: after a crash either all of
//! its ops are in the journal or none is.
//!
//! The journal uses SQLite in WAL mode with `synchronous=NORMAL` by default
//! ([`SyncMode::Normal`]): a commit has been written to the WAL file with
//! `write(2)` when `append` returns, so it survives the router process
//! crashing or being SIGKILLed (the data is in the kernel's page cache, and
//! SQLite replays the WAL on the next open). It does not fsync on every
//! commit, so a power loss or kernel crash may lose the last commits (never
//! corrupt the journal). [`SyncMode::Full`] fsyncs every commit and also
//! survives power loss, at the cost of one fsync per batch.
//!
//! Completions may be lost in the same way only in the direction that is
//! safe: a job whose completion was not yet written runs again after a
//! restart (at-least-once).
//!
//! # Bounded size
//!
//! `Completed` deletes the job's row, so the database holds only unfinished
//! jobs, dead letters (trim them with [`Journal::trim_dead_letters`]) and
//! schedules. [`Journal::compact`] truncates the WAL and returns free pages.
//!
//! # Damaged files
//!
//! [`Journal::open`] checks the header, runs `PRAGMA quick_check`, and
//! reports a torn, truncated or garbage-filled journal as
//! [`JournalError::Corrupt`], and a file that is not SQLite at all as
//! [`JournalError::NotADatabase`], each naming the file and what to do. No
//! function of this crate panics on a bad file. A second process opening the
//! same journal gets [`JournalError::Locked`] (the journal holds an
//! exclusive lock while open).

mod error;
mod journal;
mod path;
mod row_index;
mod store;
mod writer;

pub use error::JournalError;
pub use journal::{
    DeadLetter, FinishedJob, Journal, JournalOp, JournalOptions, JournalStats, JournaledJob,
    Result, SyncMode, SCHEMA_VERSION,
};
pub use path::{
    default_journal_path, default_journal_path_from, resolve_journal_path, JOURNAL_FILE_NAME,
};
pub use writer::{JournalWriter, OnDurable};
