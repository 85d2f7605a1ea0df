//! The PostgreSQL journal store (`--journal postgresql://…`): the core's
//! records in a database that any number of routers share, one of them
//! leader.
//!
//! **Durability.** One transaction per batch, all or nothing, committed
//! with the server's `synchronous_commit` (on by default: a commit is on
//! the server's disk, and on its synchronous standbys if it has any,
//! before `append` returns). The core acknowledges nothing before the
//! commit returns, and a failed commit is never acknowledged — the rule of
//! every store. A batch is a handful of statements whatever its size
//! (the crate's `plan.rs`): multi-row `unnest` inserts and `= ANY` deletes, so group
//! commit costs a few round trips per batch, not per job.
//!
//! **Fencing.** Every batch's transaction first updates the lease row
//! where holder and epoch are this router's (`lease.rs`). A router that
//! lost the lease — expired while it was stalled, or taken over — writes
//! nothing, so nothing it acknowledges can be missing from what the next
//! leader loads. Reads (`load`) check the lease too.
//!
//! **Connection loss** fails the batch or the lease call in progress
//! (`PgError::Sql` / `Connect`); the core refuses new work and retries,
//! the next call connects again (and migrates and prepares again), with no
//! restart. TCP_USER_TIMEOUT and keepalives make a cut network an error
//! instead of a hang. A connection that breaks *during* a commit leaves
//! its outcome unknown: the batch is reported failed (its jobs refused,
//! its other records written again by the core), and before the next
//! write the store asks the lease row's `last_batch` whether it did commit
//! — if so it takes the refused jobs out again and re-reads its rows
//! (`store.rs`, `settle`).
//!
//! **Schema** (`schema.rs`): created and migrated by the router, versioned
//! in `emq_schema`; a newer schema is refused.
//!
//! Using the store: [`PgJournal::open`], then [`PgJournal::try_acquire`]
//! until it returns [`Acquire::Won`], then `load`, then `append`;
//! [`PgJournal::renew`] on time, [`PgJournal::release`] at shutdown. The
//! timing of the lease is `emq_router_core::lease`.

mod error;
mod lease;
mod lease_row;
pub mod outbox;
mod schema;
mod store;

pub use error::PgError;
pub use lease::Acquire;
pub use schema::{Migration, MIGRATIONS, SCHEMA_VERSION};
pub use store::{is_postgres_url, PgJournal, PgOptions};
