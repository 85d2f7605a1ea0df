//! The PostgreSQL outbox (`emq-router --outbox postgresql://…`; issue 28,
//! docs/UNIQUE_AND_ON_COMMIT.md): jobs written by the application **in
//! its own transaction**, with [`OUTBOX_SQL`]'s `emq_enqueue(queue,
//! payload, headers)`, into the `emq_outbox` table of its database; a
//! router drains them. The row commits or rolls back with the
//! application's rows, and `pg_notify` in that transaction wakes the
//! router only if it commits.
//!
//! This is the database side only: [`Outbox::open`] installs the table
//! and function (idempotent) and `LISTEN`s; [`Outbox::fetch`] reads rows
//! in id order; [`Outbox::delete`] removes rows the router has answered
//! for; [`Outbox::wait`] sleeps until a notification or a timeout. The
//! router feeds the rows to its core as REQUESTs under the row's msgid,
//! so a row read twice (the router died between its journal commit and
//! the delete) is acknowledged as the job it already is, not run again.

use std::str::FromStr;
use std::time::Duration;

use postgres::fallible_iterator::FallibleIterator;
use postgres::{Client, NoTls};

use super::PgError;

/// The channel `emq_enqueue` notifies.
pub const CHANNEL: &str = "emq_outbox";

/// The table and the function, in the application's database (run by
/// [`Outbox::open`]; applications may run it in their own migrations).
pub const OUTBOX_SQL: &str = r#"
CREATE TABLE IF NOT EXISTS emq_outbox (
    id         bigserial PRIMARY KEY,
    msgid      text NOT NULL UNIQUE DEFAULT gen_random_uuid()::text,
    queue      text NOT NULL DEFAULT 'default',
    headers    text NOT NULL DEFAULT '',
    payload    bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE OR REPLACE FUNCTION emq_enqueue(queue text, payload text, headers text DEFAULT '')
RETURNS text LANGUAGE sql AS $$
    SELECT pg_notify('emq_outbox', '');
    INSERT INTO emq_outbox (queue, headers, payload)
    VALUES (queue, headers, convert_to(payload, 'UTF8'))
    RETURNING msgid;
$$;
"#;

/// One job of the outbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxRow {
    pub id: i64,
    pub msgid: String,
    pub queue: String,
    pub headers: String,
    pub payload: Vec<u8>,
}

/// A connection to the application's database, listening on [`CHANNEL`].
pub struct Outbox {
    client: Client,
    db: String,
}

impl Outbox {
    /// Connect, install [`OUTBOX_SQL`], `LISTEN`.
    pub fn open(url: &str, connect_timeout: Duration) -> Result<Outbox, PgError> {
        let mut config = postgres::Config::from_str(url.trim()).map_err(|e| PgError::BadUrl {
            detail: e.to_string(),
        })?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(connect_timeout);
        }
        let db = super::store::describe_config(&config);
        let client = config.connect(NoTls).map_err(|e| PgError::Connect {
            db: db.clone(),
            detail: e.to_string(),
        })?;
        let mut o = Outbox { client, db };
        let sql = format!("{OUTBOX_SQL}\nLISTEN {CHANNEL};");
        o.client
            .batch_execute(&sql)
            .map_err(|e| o.sql("install", e))?;
        Ok(o)
    }

    /// Where the outbox lives, for logs (no password).
    pub fn describe(&self) -> &str {
        &self.db
    }

    fn sql(&self, context: &'static str, e: postgres::Error) -> PgError {
        PgError::Sql {
            db: self.db.clone(),
            context,
            broken: self.client.is_closed(),
            detail: e.to_string(),
        }
    }

    /// Up to `limit` rows in id order, leaving out the ids in `skip` (rows
    /// the router has in hand).
    pub fn fetch(&mut self, skip: &[i64], limit: usize) -> Result<Vec<OutboxRow>, PgError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self
            .client
            .query(
                "SELECT id, msgid, queue, headers, payload FROM emq_outbox \
                 WHERE NOT (id = ANY($1)) ORDER BY id LIMIT $2",
                &[&skip, &limit],
            )
            .map_err(|e| self.sql("fetch", e))?;
        Ok(rows
            .into_iter()
            .map(|r| OutboxRow {
                id: r.get(0),
                msgid: r.get(1),
                queue: r.get(2),
                headers: r.get(3),
                payload: r.get(4),
            })
            .collect())
    }

    /// Forget rows the router answered for.
    pub fn delete(&mut self, ids: &[i64]) -> Result<u64, PgError> {
        if ids.is_empty() {
            return Ok(0);
        }
        self.client
            .execute("DELETE FROM emq_outbox WHERE id = ANY($1)", &[&ids])
            .map_err(|e| self.sql("delete", e))
    }

    /// Wait up to `timeout` for a notification on [`CHANNEL`]; whether
    /// one came (all pending ones are taken).
    pub fn wait(&mut self, timeout: Duration) -> Result<bool, PgError> {
        let db = self.db.clone();
        let mut n = self.client.notifications();
        let first = n.timeout_iter(timeout).next().map_err(|e| PgError::Sql {
            db,
            context: "listen",
            broken: true,
            detail: e.to_string(),
        })?;
        if first.is_none() {
            return Ok(false);
        }
        let mut rest = n.iter();
        while let Ok(Some(_)) = rest.next() {}
        Ok(true)
    }
}
