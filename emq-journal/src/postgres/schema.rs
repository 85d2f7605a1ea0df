//! The PostgreSQL schema, versioned, and the migrations that build it.
//!
//! Every table is prefixed `emq_`, so the journal can share a database.
//! `emq_schema` holds one row with the version; a router brings the
//! schema up to [`SCHEMA_VERSION`] when it connects, applying each
//! missing step in one transaction (DDL is transactional in PostgreSQL),
//! and refuses a schema newer than it knows. Routers starting together
//! serialise on the version row (a plain `UPDATE` of it is the first
//! statement of the transaction), so each step runs once.
//!
//! The SQL is portable across PostgreSQL-compatible databases: no
//! advisory locks, no `LOCK TABLE`, no PostgreSQL-only types beyond
//! `BYTEA` and `TIMESTAMPTZ`.
//!
//! Layout choices:
//! - `emq_jobs.seq` is the router's own number for a row (acceptance
//!   order), found through the in-memory msgid → seq map
//!   (`crate::row_index`): inserts append to the right edge of one B-tree
//!   and no random-keyed msgid index is written per job.
//! - `route` is empty when it equals `queue`, as in the SQLite store.
//! - Times are unix milliseconds (`BIGINT`), as the core's records carry
//!   them; only the lease, compared with the database's clock, is a
//!   `TIMESTAMPTZ`.
//! - `emq_lease.last_batch` is the id of the last batch committed under the
//!   lease (set by the lease check every batch starts with): after a
//!   connection broke during a commit, it says whether that commit
//!   happened.

/// The schema version this emq writes.
pub const SCHEMA_VERSION: i64 = 4;

/// One step: from version `to - 1` to `to`.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    pub to: i64,
    pub sql: &'static str,
}

/// Version 1: the lease, the journal's tables (jobs, finished jobs, dead
/// letters, schedules, paused queues, results held until delivered).
const V1: &str = "
CREATE TABLE emq_lease (
    name        TEXT PRIMARY KEY,
    holder      TEXT NOT NULL,
    epoch       BIGINT NOT NULL,
    expires_at  TIMESTAMPTZ NOT NULL,
    acquired_at TIMESTAMPTZ,
    last_batch  BIGINT NOT NULL DEFAULT 0
);
INSERT INTO emq_lease (name, holder, epoch, expires_at)
    VALUES ('router', '', 0, TIMESTAMPTZ '1970-01-01 00:00:00+00');
CREATE TABLE emq_jobs (
    seq         BIGINT  PRIMARY KEY,
    msgid       TEXT    NOT NULL,
    client      BYTEA   NOT NULL,
    queue       TEXT    NOT NULL,
    route       TEXT    NOT NULL,
    headers     BYTEA   NOT NULL,
    message     BYTEA   NOT NULL,
    attempts    INTEGER NOT NULL,
    accepted_at BIGINT  NOT NULL,
    run_at      BIGINT
);
CREATE TABLE emq_finished (
    seq         BIGINT  PRIMARY KEY,
    msgid       TEXT    NOT NULL,
    client      BYTEA   NOT NULL,
    queue       TEXT    NOT NULL,
    route       TEXT    NOT NULL,
    headers     BYTEA   NOT NULL,
    message     BYTEA   NOT NULL,
    attempts    INTEGER NOT NULL,
    accepted_at BIGINT  NOT NULL,
    run_at      BIGINT,
    outcome     TEXT    NOT NULL,
    finished_at BIGINT  NOT NULL,
    result      BYTEA,
    result_truncated BOOLEAN NOT NULL
);
CREATE INDEX emq_finished_at ON emq_finished (finished_at);
CREATE TABLE emq_dead_letters (
    seq         BIGINT  PRIMARY KEY,
    msgid       TEXT    NOT NULL,
    client      BYTEA   NOT NULL,
    queue       TEXT    NOT NULL,
    route       TEXT    NOT NULL,
    headers     BYTEA   NOT NULL,
    message     BYTEA   NOT NULL,
    attempts    INTEGER NOT NULL,
    accepted_at BIGINT  NOT NULL,
    error       TEXT    NOT NULL,
    dead_at     BIGINT  NOT NULL
);
CREATE INDEX emq_dead_letters_msgid ON emq_dead_letters (msgid);
CREATE TABLE emq_schedules (
    id   TEXT  PRIMARY KEY,
    blob BYTEA NOT NULL
);
CREATE TABLE emq_paused_queues (
    queue TEXT PRIMARY KEY
);
CREATE TABLE emq_results (
    seq      BIGINT  PRIMARY KEY,
    msgid    TEXT    NOT NULL,
    client   BYTEA   NOT NULL,
    status   TEXT    NOT NULL,
    payload  BYTEA   NOT NULL,
    receipt  BOOLEAN NOT NULL,
    held_at  BIGINT  NOT NULL
);
";

/// Version 2: a dead letter's last error payload (the worker's failed
/// REPLY; `error` holds the reason).
const V2: &str = "
ALTER TABLE emq_dead_letters ADD COLUMN last_error BYTEA;
";

/// Version 3: router state other than jobs (`Record::PutState`:
/// flow-control policies, unique keys held for a window).
const V3: &str = "
CREATE TABLE emq_states (
    kind TEXT  NOT NULL,
    id   TEXT  NOT NULL,
    blob BYTEA NOT NULL,
    PRIMARY KEY (kind, id)
);
";

/// Version 4: when a finished job's last delivery started (NULL: it
/// never ran, or it finished before version 4).
const V4: &str = "
ALTER TABLE emq_finished ADD COLUMN started_at BIGINT;
";

/// Every step, in order.
pub const MIGRATIONS: &[Migration] = &[
    Migration { to: 1, sql: V1 },
    Migration { to: 2, sql: V2 },
    Migration { to: 3, sql: V3 },
    Migration { to: 4, sql: V4 },
];

/// The version table, made if missing (outside the migration transaction:
/// it must exist before anything can lock its row).
pub(crate) const CREATE_VERSION_TABLE: &str = "
CREATE TABLE IF NOT EXISTS emq_schema (
    id      INTEGER PRIMARY KEY,
    version BIGINT  NOT NULL
);
INSERT INTO emq_schema (id, version) VALUES (1, 0) ON CONFLICT (id) DO NOTHING;
";

/// Taken first in the migration transaction: routers migrating at once
/// wait for each other here.
pub(crate) const LOCK_VERSION: &str = "UPDATE emq_schema SET version = version WHERE id = 1";
pub(crate) const READ_VERSION: &str = "SELECT version FROM emq_schema WHERE id = 1";
pub(crate) const SET_VERSION: &str = "UPDATE emq_schema SET version = $1 WHERE id = 1";

/// What [`migrate`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Migrated {
    pub from: i64,
    pub to: i64,
}

/// Bring the schema of `client`'s database up to the last step of
/// `steps` (normally [`MIGRATIONS`]), each missing step once, all in one
/// transaction. A version above the last step is refused
/// ([`MigrateError::TooNew`]).
pub(crate) fn migrate(
    client: &mut postgres::Client,
    steps: &[Migration],
) -> Result<Migrated, MigrateError> {
    let target = steps.last().map_or(0, |m| m.to);
    // Two routers making the version table at the same instant may both
    // pass IF NOT EXISTS; the loser's error goes away on a second try.
    let mut tries = 0;
    loop {
        match client.batch_execute(CREATE_VERSION_TABLE) {
            Ok(()) => break,
            Err(_) if tries < 3 => tries += 1,
            Err(e) => return Err(MigrateError::Sql(e)),
        }
    }
    let mut tx = client.transaction().map_err(MigrateError::Sql)?;
    tx.execute(LOCK_VERSION, &[]).map_err(MigrateError::Sql)?;
    let from: i64 = tx
        .query_one(READ_VERSION, &[])
        .map_err(MigrateError::Sql)?
        .get(0);
    if from > target {
        return Err(MigrateError::TooNew {
            found: from,
            supported: target,
        });
    }
    for step in steps.iter().filter(|m| m.to > from) {
        tx.batch_execute(step.sql).map_err(MigrateError::Sql)?;
        tx.execute(SET_VERSION, &[&step.to])
            .map_err(MigrateError::Sql)?;
        if from > 0 || step.to > 1 {
            log::info!("journal schema migrated to version {}", step.to);
        }
    }
    tx.commit().map_err(MigrateError::Sql)?;
    Ok(Migrated { from, to: target })
}

/// Why [`migrate`] failed.
#[derive(Debug)]
pub(crate) enum MigrateError {
    TooNew { found: i64, supported: i64 },
    Sql(postgres::Error),
}
