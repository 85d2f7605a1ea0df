//! The durable job journal of `emq-router`: the SQLite [`JournalStore`]
//! (this page), and the PostgreSQL one that several routers share, one of
//! them leader ([`postgres`]).
//!
//! The router core (`emq-router-core`) is sans-IO and owns the journal
//! model: the plain-data [`Record`]s (a job was accepted, completed,
//! dead-lettered, delivered again; a schedule was put or deleted; a
//! probe), the [`Batch`]es they travel in, and the [`Restored`] data it
//! takes back at start. This crate stores those types as they are; it has
//! no record types of its own.
//!
//! The core decides what goes into a batch and when a batch is due (group
//! commit) and emits it as `Action::Journal`. The router binary appends
//! each batch with [`JournalStore::append`] — one SQLite transaction per
//! batch, planned first (`plan.rs`: which rows, with explicit `seq`s, in
//! which order; the same plan for both stores) and then written — and
//! reports the outcome to the core (`Input::JournalDone`:
//! committed, or failed with the error's text). The core holds the
//! acknowledgements and dispatches of a batch's jobs until it hears that
//! the batch committed, refuses new work while batches fail, and writes
//! the failed records again (or a [`Record::Probe`]) until the store
//! recovers. At start the router calls [`JournalStore::load`]: every job
//! accepted but not finished, in acceptance order, the dead letters and
//! the schedules go back into the core. [`SqliteJournal::append`],
//! [`SqliteJournal::load_unfinished`], [`SqliteJournal::dead_letters`] and
//! [`SqliteJournal::schedules`] are the same operations without the trait.
//!
//! # Durability guarantee
//!
//! **A job whose ack the client received is in the journal**: the core
//! acks a job only after `append` returned `Ok` for the batch holding its
//! [`Record::Accepted`]. A batch is atomic: after a crash either all of
//! its records are in the journal or none is; after `Err`, none of them
//! was written and the journal is still usable.
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
//! `Completed` deletes the job's row, and `Finished` and `DeadLettered`
//! move it, so the `jobs` table holds only unfinished jobs. The `finished`
//! table keeps what each `Finished` record says (the newest `keep`, none
//! older than its cut-off), the `dead_letters` table the newest `keep` of
//! the last `DeadLettered` record; both are trimmed once per batch.
//! `paused_queues` holds the paused queue names. The `results` table holds
//! the results of `reply-requested` jobs until they are delivered
//! (`ResultHeld` inserts, `ResultReleased` deletes; the core bounds them
//! by count, bytes and age and releases what it drops, so the table is
//! bounded by the router's `--results-keep*`). [`SqliteJournal::trim_dead_letters`]
//! trims by hand.
//! [`SqliteJournal::compact`] truncates the WAL and returns free pages to the
//! file system; the WAL is also kept under 64 MiB after checkpoints
//! (`journal_size_limit`).
//!
//! # Damaged files
//!
//! [`SqliteJournal::open`] checks the header, runs `PRAGMA quick_check`, and
//! reports a torn, truncated or garbage-filled journal as
//! [`JournalError::Corrupt`], and a file that is not SQLite at all as
//! [`JournalError::NotADatabase`], each naming the file and what to do. No
//! function of this crate panics on a bad file. A second process opening the
//! same journal gets [`JournalError::Locked`] (the journal holds an
//! exclusive lock while open). A journal of schema version 1, 2 or 3 is
//! migrated on open; one written by a newer emq is refused
//! ([`JournalError::UnsupportedVersion`]).
//!
//! [`JournalStore`]: emq_router_core::journal::JournalStore
//! [`JournalStore::append`]: emq_router_core::journal::JournalStore::append
//! [`JournalStore::load`]: emq_router_core::journal::JournalStore::load
//! [`Record`]: emq_router_core::journal::Record
//! [`Record::Accepted`]: emq_router_core::journal::Record::Accepted
//! [`Record::Probe`]: emq_router_core::journal::Record::Probe
//! [`Batch`]: emq_router_core::journal::Batch
//! [`Restored`]: emq_router_core::journal::Restored

#![forbid(unsafe_code)]

mod error;
mod path;
mod plan;
pub mod postgres;
mod row_index;
mod sqlite;
mod sqlite_store;
mod states;

pub use error::JournalError;
pub use path::{
    default_journal_path, default_journal_path_from, resolve_journal_path, resolve_journal_target,
    JournalTarget, JOURNAL_FILE_NAME,
};
pub use sqlite::{JournalOptions, JournalStats, Result, SqliteJournal, SyncMode, SCHEMA_VERSION};
