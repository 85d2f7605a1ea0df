//! The PostgreSQL journal: one connection, one transaction per batch,
//! fenced by the leader lease; reconnects on its own.

use std::str::FromStr;
use std::time::Duration;

use emq_router_core::journal::{
    Batch, DeadLetterRecord, FinishedRecord, JobRecord, JournalStore, Restored, ResultRecord,
};
use postgres::types::ToSql;
use postgres::{Client, IsolationLevel, NoTls, Row, Statement};

use super::error::PgError;
use super::lease_row::{self, Fence};
use super::schema::{self, Migrated, Migration, MIGRATIONS};
use crate::plan::{
    attempts_column, now_unix_ms, route_column, unix_ms_column, unix_ms_from_column, DeadMove,
    FinishedColumns, JobColumns, Other, Plan, ResultColumns, RowWriter, Rows,
};

/// How to connect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgOptions {
    /// Give up connecting after this long (unless the URL says
    /// `connect_timeout`).
    pub connect_timeout: Duration,
    /// A connection whose sent data stays unacknowledged this long is
    /// dead (TCP_USER_TIMEOUT; a cut network is noticed instead of a
    /// statement hanging).
    pub tcp_user_timeout: Duration,
}

impl Default for PgOptions {
    fn default() -> Self {
        PgOptions {
            connect_timeout: Duration::from_secs(2),
            tcp_user_timeout: Duration::from_secs(3),
        }
    }
}

/// A batch whose commit may have happened (the connection broke on the
/// way; reported as an error that [`PgError::may_have_committed`], which
/// the router turns into `BatchResult::Uncertain`). The core answered its
/// jobs `journal-uncertain` (their clients send them again, same msgid)
/// and keeps its other records to write again; before the next write the
/// store asks the database (`emq_lease.last_batch`) and, if it did commit,
/// takes its jobs out again and its finished rows (written again with the
/// kept records), then re-reads which rows exist. If another router takes
/// over first, it loads those jobs and runs them: the resent REQUESTs are
/// acknowledged there as those jobs.
#[derive(Debug, Clone)]
struct Uncertain {
    batch: u64,
    fence: Fence,
    /// The `seq`s the batch gave new job rows and finished rows.
    jobs: (i64, i64),
    finished: (i64, i64),
    results: (i64, i64),
}

const UNDO_JOBS: &str = "DELETE FROM emq_jobs WHERE seq >= $1 AND seq < $2";
const UNDO_FINISHED: &str = "DELETE FROM emq_finished WHERE seq >= $1 AND seq < $2";
const UNDO_RESULTS: &str = "DELETE FROM emq_results WHERE seq >= $1 AND seq < $2";

/// The prepared statements of one connection.
pub(crate) struct Statements {
    pub(crate) fence: Statement,
    last_batch: Statement,
    one_statement: Statement,
    insert_jobs: Statement,
    replace_job: Statement,
    update_attempts: Statement,
    move_to_dead: Statement,
    delete_dead: Statement,
    delete_jobs: Statement,
    insert_finished: Statement,
    trim_finished: Statement,
    trim_dead: Statement,
    insert_results: Statement,
    delete_results: Statement,
    put_schedule: Statement,
    delete_schedule: Statement,
    put_state: Statement,
    delete_state: Statement,
    pause: Statement,
    resume: Statement,
    pub(crate) take_lease: Statement,
    pub(crate) read_lease: Statement,
    pub(crate) renew_lease: Statement,
    pub(crate) release_lease: Statement,
}

/// The lease row names this router at its epoch; taken first in every
/// batch, so a takeover and a commit are ordered by the row's lock.
/// It also records the batch's id: after a connection broke during the
/// commit, `LAST_BATCH` tells whether it happened.
const FENCE: &str = "UPDATE emq_lease SET last_batch = $3
    WHERE name = 'router' AND holder = $1 AND epoch = $2";
const LAST_BATCH: &str = "SELECT holder, epoch, last_batch FROM emq_lease WHERE name = 'router'";
const INSERT_JOBS: &str = "INSERT INTO emq_jobs
        (seq, msgid, client, queue, route, headers, message, attempts, accepted_at, run_at)
    SELECT * FROM unnest($1::BIGINT[], $2::TEXT[], $3::BYTEA[], $4::TEXT[], $5::TEXT[],
                         $6::BYTEA[], $7::BYTEA[], $8::INTEGER[], $9::BIGINT[], $10::BIGINT[])";
const REPLACE_JOB: &str = "UPDATE emq_jobs SET client = $2, queue = $3, route = $4, headers = $5,
    message = $6, attempts = $7, accepted_at = $8, run_at = $9 WHERE seq = $1";
const UPDATE_ATTEMPTS: &str = "UPDATE emq_jobs SET attempts = $2 WHERE seq = $1";
const MOVE_TO_DEAD: &str = "INSERT INTO emq_dead_letters
        (seq, msgid, client, queue, route, headers, message, attempts, accepted_at, error, dead_at,
         last_error)
    SELECT $2, msgid, client, queue, route, headers, message, attempts, accepted_at, $3, $4, $5
    FROM emq_jobs WHERE seq = $1";
const DELETE_DEAD: &str = "DELETE FROM emq_dead_letters WHERE msgid = $1";
const DELETE_JOBS: &str = "DELETE FROM emq_jobs WHERE seq = ANY($1)";
const INSERT_FINISHED: &str = "INSERT INTO emq_finished
        (seq, msgid, client, queue, route, headers, message, attempts, accepted_at, run_at,
         outcome, finished_at, result, result_truncated, started_at)
    SELECT * FROM unnest($1::BIGINT[], $2::TEXT[], $3::BYTEA[], $4::TEXT[], $5::TEXT[],
                         $6::BYTEA[], $7::BYTEA[], $8::INTEGER[], $9::BIGINT[], $10::BIGINT[],
                         $11::TEXT[], $12::BIGINT[], $13::BYTEA[], $14::BOOLEAN[],
                         $15::BIGINT[])";
/// Rows leave `emq_finished` only through this trim, oldest first, so the
/// newest `keep` are the `seq`s above (last seq − keep). Both conditions
/// go through an index (a plain `OR` of them is a scan of the table).
const TRIM_FINISHED: &str = "DELETE FROM emq_finished WHERE seq <= $1
    OR seq = ANY(ARRAY(SELECT seq FROM emq_finished WHERE finished_at < $2))";
const TRIM_DEAD: &str = "DELETE FROM emq_dead_letters WHERE seq <=
    (SELECT seq FROM emq_dead_letters ORDER BY seq DESC LIMIT 1 OFFSET $1)";
const INSERT_RESULTS: &str = "INSERT INTO emq_results
        (seq, msgid, client, status, payload, receipt, held_at)
    SELECT * FROM unnest($1::BIGINT[], $2::TEXT[], $3::BYTEA[], $4::TEXT[], $5::BYTEA[],
                         $6::BOOLEAN[], $7::BIGINT[])";
const DELETE_RESULTS: &str = "DELETE FROM emq_results WHERE seq = ANY($1)";
const PUT_SCHEDULE: &str = "INSERT INTO emq_schedules (id, blob) VALUES ($1, $2)
    ON CONFLICT (id) DO UPDATE SET blob = EXCLUDED.blob";
const DELETE_SCHEDULE: &str = "DELETE FROM emq_schedules WHERE id = $1";
const PUT_STATE: &str = "INSERT INTO emq_states (kind, id, blob) VALUES ($1, $2, $3)
    ON CONFLICT (kind, id) DO UPDATE SET blob = EXCLUDED.blob";
const DELETE_STATE: &str = "DELETE FROM emq_states WHERE kind = $1 AND id = $2";
const PAUSE: &str =
    "INSERT INTO emq_paused_queues (queue) VALUES ($1) ON CONFLICT (queue) DO NOTHING";
const RESUME: &str = "DELETE FROM emq_paused_queues WHERE queue = $1";

/// The common batch in one statement (`plan.rs`): the lease check, then
/// each part only if it matched. Returns the lease check's row count.
const ONE_STATEMENT: &str = "WITH fence AS (
    UPDATE emq_lease SET last_batch = $30
    WHERE name = 'router' AND holder = $1 AND epoch = $2
    RETURNING epoch
), ins AS (
    INSERT INTO emq_jobs
        (seq, msgid, client, queue, route, headers, message, attempts, accepted_at, run_at)
    SELECT * FROM unnest($3::BIGINT[], $4::TEXT[], $5::BYTEA[], $6::TEXT[], $7::TEXT[],
                         $8::BYTEA[], $9::BYTEA[], $10::INTEGER[], $11::BIGINT[], $12::BIGINT[])
    WHERE EXISTS (SELECT 1 FROM fence)
), del AS (
    DELETE FROM emq_jobs WHERE seq = ANY($13) AND EXISTS (SELECT 1 FROM fence)
), fin AS (
    INSERT INTO emq_finished
        (seq, msgid, client, queue, route, headers, message, attempts, accepted_at, run_at,
         outcome, finished_at, result, result_truncated, started_at)
    SELECT * FROM unnest($14::BIGINT[], $15::TEXT[], $16::BYTEA[], $17::TEXT[], $18::TEXT[],
                         $19::BYTEA[], $20::BYTEA[], $21::INTEGER[], $22::BIGINT[], $23::BIGINT[],
                         $24::TEXT[], $25::BIGINT[], $26::BYTEA[], $27::BOOLEAN[],
                         $39::BIGINT[])
    WHERE EXISTS (SELECT 1 FROM fence)
), trim AS (
    DELETE FROM emq_finished
    WHERE (seq <= $28 OR seq = ANY(ARRAY(SELECT seq FROM emq_finished WHERE finished_at < $29)))
      AND EXISTS (SELECT 1 FROM fence)
), rins AS (
    INSERT INTO emq_results (seq, msgid, client, status, payload, receipt, held_at)
    SELECT * FROM unnest($31::BIGINT[], $32::TEXT[], $33::BYTEA[], $34::TEXT[], $35::BYTEA[],
                         $36::BOOLEAN[], $37::BIGINT[])
    WHERE EXISTS (SELECT 1 FROM fence)
), rdel AS (
    DELETE FROM emq_results WHERE seq = ANY($38) AND EXISTS (SELECT 1 FROM fence)
)
SELECT count(*) FROM fence";

const JOB_COLUMNS: &str =
    "msgid, client, queue, route, headers, message, attempts, accepted_at, run_at";

/// A job from the first nine columns (`JOB_COLUMNS`) of a row.
fn job_from_row(r: &Row) -> Result<JobRecord, postgres::Error> {
    let queue: String = r.try_get(2)?;
    let route: String = r.try_get(3)?;
    Ok(JobRecord {
        msgid: r.try_get(0)?,
        client: r.try_get(1)?,
        route: if route.is_empty() {
            queue.clone()
        } else {
            route
        },
        queue,
        headers: r.try_get(4)?,
        payload: r.try_get(5)?,
        attempts: u32::try_from(r.try_get::<_, i32>(6)?).unwrap_or(0),
        accepted_at_unix_ms: unix_ms_from_column(r.try_get(7)?),
        run_at_unix_ms: r.try_get::<_, Option<i64>>(8)?.map(unix_ms_from_column),
    })
}

/// One live connection and its statements.
pub(crate) struct Conn {
    pub(crate) client: Client,
    pub(crate) stmts: Statements,
}

/// The durable job journal on PostgreSQL. Not `Sync`: one owner (the
/// router's poll loop).
pub struct PgJournal {
    config: postgres::Config,
    /// The URL without its password, for logs.
    db: String,
    steps: &'static [Migration],
    /// A batch whose connection broke during its commit: reported failed,
    /// settled before anything else is written.
    uncertain: Option<Uncertain>,
    pub(crate) conn: Option<Conn>,
    pub(crate) fence: Option<Fence>,
    /// `load` ran since the lease was taken: the index and counters are
    /// the database's.
    loaded: bool,
    /// Where the rows are and the next seqs (`plan.rs`).
    rows: Rows,
    /// The connection broke (logged once until it is back).
    lost: bool,
    batches: u64,
    records: u64,
}

impl std::fmt::Debug for PgJournal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgJournal")
            .field("db", &self.db)
            .field("fence", &self.fence)
            .field("batches", &self.batches)
            .finish()
    }
}

/// Whether `arg` names a PostgreSQL database (`postgresql://` or
/// `postgres://`).
pub fn is_postgres_url(arg: &str) -> bool {
    let a = arg.trim_start().to_ascii_lowercase();
    a.starts_with("postgresql://") || a.starts_with("postgres://")
}

/// `postgresql://user@host:port/db`: the parts of `config` that say where,
/// never the password.
pub(super) fn describe_config(config: &postgres::Config) -> String {
    use postgres::config::Host;
    let user = config
        .get_user()
        .map(|u| format!("{u}@"))
        .unwrap_or_default();
    let ports = config.get_ports();
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let host = match h {
                Host::Tcp(h) => h.clone(),
                Host::Unix(p) => p.display().to_string(),
            };
            match ports.get(i).or(ports.first()) {
                Some(p) => format!("{host}:{p}"),
                None => host,
            }
        })
        .collect();
    format!(
        "postgresql://{user}{}/{}",
        hosts.join(","),
        config.get_dbname().unwrap_or("")
    )
}

impl PgJournal {
    /// Connect to the database at `url`, create or migrate the schema. The
    /// journal can be read and written once it holds the lease
    /// ([`PgJournal::try_acquire`]) and has loaded ([`JournalStore::load`]).
    pub fn open(url: &str, options: &PgOptions) -> Result<PgJournal, PgError> {
        PgJournal::open_with_migrations(url, options, MIGRATIONS)
    }

    /// [`PgJournal::open`] with other schema steps (for tests of the
    /// migration runner).
    #[doc(hidden)]
    pub fn open_with_migrations(
        url: &str,
        options: &PgOptions,
        steps: &'static [Migration],
    ) -> Result<PgJournal, PgError> {
        let mut config = postgres::Config::from_str(url.trim()).map_err(|e| PgError::BadUrl {
            detail: e.to_string(),
        })?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(options.connect_timeout);
        }
        if config.get_tcp_user_timeout().is_none() {
            config.tcp_user_timeout(options.tcp_user_timeout);
        }
        if config.get_application_name().is_none() {
            config.application_name("emq-router");
        }
        // The server's notices ("relation already exists, skipping" from
        // the idempotent schema statements) are not news.
        config.notice_callback(|n| log::debug!("postgresql notice: {}", n.message()));
        config.keepalives(true);
        config.keepalives_idle(Duration::from_secs(10));
        let db = describe_config(&config);
        let mut j = PgJournal {
            config,
            db,
            steps,
            uncertain: None,
            conn: None,
            fence: None,
            loaded: false,
            rows: Rows::default(),
            lost: false,
            batches: 0,
            records: 0,
        };
        j.connect()?;
        Ok(j)
    }

    /// The schema version after open.
    pub fn schema_version(&mut self) -> Result<i64, PgError> {
        let db = self.db.clone();
        let c = self.conn()?;
        let row = c
            .client
            .query_one(schema::READ_VERSION, &[])
            .map_err(|e| PgError::sql(&db, "read schema version", e))?;
        Ok(row.get(0))
    }

    /// Batches and records appended since open.
    pub fn counts(&self) -> (u64, u64) {
        (self.batches, self.records)
    }

    /// Connect, migrate, prepare.
    fn connect(&mut self) -> Result<(), PgError> {
        let mut client = self.config.connect(NoTls).map_err(|e| PgError::Connect {
            db: self.db.clone(),
            detail: match e.as_db_error() {
                Some(d) => d.message().to_string(),
                None => e.to_string(),
            },
        })?;
        match schema::migrate(&mut client, self.steps) {
            Ok(Migrated { from: 0, to }) => {
                log::info!("journal {}: schema version {to} created", self.db)
            }
            Ok(_) => {}
            Err(schema::MigrateError::TooNew { found, supported }) => {
                return Err(PgError::UnsupportedVersion {
                    db: self.db.clone(),
                    found,
                    supported,
                })
            }
            Err(schema::MigrateError::Sql(e)) => return Err(PgError::sql(&self.db, "migrate", e)),
        }
        let db = self.db.clone();
        let mut prep = |sql: &str| {
            client
                .prepare(sql)
                .map_err(|e| PgError::sql(&db, "prepare", e))
        };
        let stmts = Statements {
            fence: prep(FENCE)?,
            last_batch: prep(LAST_BATCH)?,
            one_statement: prep(ONE_STATEMENT)?,
            insert_jobs: prep(INSERT_JOBS)?,
            replace_job: prep(REPLACE_JOB)?,
            update_attempts: prep(UPDATE_ATTEMPTS)?,
            move_to_dead: prep(MOVE_TO_DEAD)?,
            delete_dead: prep(DELETE_DEAD)?,
            delete_jobs: prep(DELETE_JOBS)?,
            insert_finished: prep(INSERT_FINISHED)?,
            trim_finished: prep(TRIM_FINISHED)?,
            trim_dead: prep(TRIM_DEAD)?,
            insert_results: prep(INSERT_RESULTS)?,
            delete_results: prep(DELETE_RESULTS)?,
            put_schedule: prep(PUT_SCHEDULE)?,
            delete_schedule: prep(DELETE_SCHEDULE)?,
            put_state: prep(PUT_STATE)?,
            delete_state: prep(DELETE_STATE)?,
            pause: prep(PAUSE)?,
            resume: prep(RESUME)?,
            take_lease: prep(lease_row::TAKE)?,
            read_lease: prep(lease_row::READ)?,
            renew_lease: prep(lease_row::RENEW)?,
            release_lease: prep(lease_row::RELEASE)?,
        };
        if self.lost {
            log::info!("journal {}: connected again", self.db);
            self.lost = false;
        }
        self.conn = Some(Conn { client, stmts });
        Ok(())
    }

    /// The live connection, made again if it broke.
    pub(crate) fn conn(&mut self) -> Result<&mut Conn, PgError> {
        if self.conn.as_ref().is_some_and(|c| c.client.is_closed()) {
            self.conn = None;
        }
        if self.conn.is_none() {
            self.connect()?;
        }
        Ok(self.conn.as_mut().expect("connected"))
    }

    /// After a failed statement: forget a broken connection (the next
    /// call connects again).
    pub(crate) fn after_error(&mut self, e: &PgError) {
        if let Some(c) = &self.conn {
            if c.client.is_closed() {
                if !self.lost {
                    log::warn!("journal {}: connection lost ({e}); reconnecting", self.db);
                }
                self.lost = true;
                self.conn = None;
            }
        }
    }

    pub(crate) fn db(&self) -> &str {
        &self.db
    }

    /// The lease is ours at `fence` (taken, or given by a test): commits
    /// are fenced with it, and the journal must be loaded again.
    pub(crate) fn set_fence(&mut self, fence: Option<Fence>) {
        self.fence = fence;
        self.loaded = false;
    }

    fn append_batch(&mut self, batch: &Batch) -> Result<(), PgError> {
        let records = &batch.records;
        if records.is_empty() {
            return Ok(());
        }
        let db = self.db.clone();
        let Some(fence) = self.fence.clone().filter(|_| self.loaded) else {
            return Err(PgError::NoLease { db });
        };
        // A failure to connect, or to settle an earlier batch, writes
        // nothing: a plain failed batch (not one that may have committed).
        self.conn().map_err(PgError::before_the_batch)?;
        self.settle().map_err(PgError::before_the_batch)?;
        let plan = self.rows.plan(records);
        match self.write_plan(&plan, &fence, batch.id.0) {
            Ok(()) => {
                self.committed(plan, records.len());
                Ok(())
            }
            // Fenced, or the server refused a statement on a live
            // connection: the transaction was rolled back.
            Err(e) if !e.may_have_committed() => Err(e),
            // The connection broke while the batch was on its way: it is
            // reported failed (the core refuses its jobs and writes its
            // other records again), and settled before the next write.
            Err(e) => {
                if !self.lost {
                    log::warn!(
                        "journal {}: connection lost during a commit ({e}); reconnecting",
                        self.db
                    );
                    self.lost = true;
                }
                self.conn = None;
                self.uncertain = Some(Uncertain {
                    batch: batch.id.0,
                    fence,
                    jobs: (plan.first.job, plan.seqs.job),
                    finished: (plan.first.finished, plan.seqs.finished),
                    results: (plan.first.result, plan.seqs.result),
                });
                Err(e)
            }
        }
    }

    /// Settle the batch whose commit is uncertain, if any: did it happen
    /// (`last_batch`)? If so, undo what the core refused and re-read the
    /// rows. A journal loaded since (a new term) has nothing to settle.
    fn settle(&mut self) -> Result<(), PgError> {
        let Some(u) = self.uncertain.clone() else {
            return Ok(());
        };
        let db = self.db.clone();
        let err = |e| PgError::sql(&db, "settle an interrupted commit", e);
        let c = self.conn()?;
        let row = c.client.query_one(&c.stmts.last_batch, &[]).map_err(err)?;
        let (holder, epoch, last): (String, i64, i64) = (row.get(0), row.get(1), row.get(2));
        if holder != u.fence.holder || u64::try_from(epoch).ok() != Some(u.fence.epoch) {
            return Err(PgError::Fenced {
                db,
                epoch: u.fence.epoch,
            });
        }
        if u64::try_from(last).ok() == Some(u.batch) {
            let epoch = i64::try_from(u.fence.epoch).unwrap_or(i64::MAX);
            let mut tx = c.client.transaction().map_err(err)?;
            if tx
                .execute(&c.stmts.fence, &[&u.fence.holder, &epoch, &last])
                .map_err(err)?
                != 1
            {
                return Err(PgError::Fenced {
                    db,
                    epoch: u.fence.epoch,
                });
            }
            let undone = tx
                .execute(UNDO_JOBS, &[&u.jobs.0, &u.jobs.1])
                .map_err(err)?;
            tx.execute(UNDO_FINISHED, &[&u.finished.0, &u.finished.1])
                .map_err(err)?;
            // Held results are kept records: the core writes them again.
            tx.execute(UNDO_RESULTS, &[&u.results.0, &u.results.1])
                .map_err(err)?;
            tx.commit().map_err(err)?;
            log::warn!(
                "journal {}: batch {} had committed before the connection broke; its {undone} \
                 job(s), answered journal-uncertain meanwhile, were taken out again (their \
                 clients send them again)",
                self.db,
                u.batch
            );
            self.reread_rows()?;
        }
        self.uncertain = None;
        Ok(())
    }

    /// The msgid → seq index and the counters, from the tables.
    fn reread_rows(&mut self) -> Result<(), PgError> {
        let db = self.db.clone();
        let err = |e| PgError::sql(&db, "re-read the journal's rows", e);
        let c = self.conn()?;
        let mut rows = Rows::default();
        for r in c
            .client
            .query("SELECT msgid, seq FROM emq_jobs", &[])
            .map_err(err)?
        {
            rows.add_job(r.get(0), r.get(1));
        }
        for r in c
            .client
            .query("SELECT msgid, seq FROM emq_results", &[])
            .map_err(err)?
        {
            rows.add_result(r.get(0), r.get(1));
        }
        let r = c
            .client
            .query_one(
                "SELECT (SELECT max(seq) FROM emq_finished), (SELECT max(seq) FROM emq_dead_letters)",
                &[],
            )
            .map_err(err)?;
        rows.saw_ends(r.get(0), r.get(1));
        self.rows = rows;
        Ok(())
    }

    /// The batch's statements on the live connection.
    fn write_plan(&mut self, plan: &Plan<'_>, fence: &Fence, batch: u64) -> Result<(), PgError> {
        let db = self.db.clone();
        let err = |e| PgError::sql(&db, "append", e);
        let c = self.conn()?;
        let epoch = i64::try_from(fence.epoch).unwrap_or(i64::MAX);
        let batch = i64::try_from(batch).unwrap_or(i64::MAX);
        if plan.is_one_statement() {
            let (at_or_below, before) = plan.trim_finished.unwrap_or((i64::MIN, i64::MIN));
            let row = c
                .client
                .query_one(
                    &c.stmts.one_statement,
                    &one_statement_params(fence, &epoch, plan, &at_or_below, &before, &batch),
                )
                .map_err(err)?;
            if row.get::<_, i64>(0) != 1 {
                return Err(PgError::Fenced {
                    db,
                    epoch: fence.epoch,
                });
            }
            return Ok(());
        }
        let s = &c.stmts;
        let mut tx = c.client.transaction().map_err(err)?;
        if tx
            .execute(&s.fence, &[&fence.holder, &epoch, &batch])
            .map_err(err)?
            != 1
        {
            drop(tx);
            return Err(PgError::Fenced {
                db,
                epoch: fence.epoch,
            });
        }
        plan.write(&mut PgWriter { tx: &mut tx, s }, now_unix_ms())
            .map_err(err)?;
        tx.commit().map_err(err)?;
        Ok(())
    }

    /// Only now: a failed batch leaves the index and counters as the
    /// database is.
    fn committed(&mut self, plan: Plan<'_>, records: usize) {
        self.rows.commit(plan);
        self.batches += 1;
        self.records += records as u64;
    }

    fn load_all(&mut self) -> Result<Restored, PgError> {
        let db = self.db.clone();
        let Some(fence) = self.fence.clone() else {
            return Err(PgError::NoLease { db });
        };
        let err = |e| PgError::sql(&db, "load", e);
        let c = self.conn()?;
        // One snapshot of every table.
        let mut tx = c
            .client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .map_err(err)?;
        let lease = tx
            .query_opt(&c.stmts.read_lease, &[])
            .map_err(err)?
            .map(|r| (r.get::<_, String>(0), r.get::<_, i64>(1)));
        if lease
            != Some((
                fence.holder.clone(),
                i64::try_from(fence.epoch).unwrap_or(-1),
            ))
        {
            return Err(PgError::Fenced {
                db,
                epoch: fence.epoch,
            });
        }
        let mut restored = Restored::default();
        let mut rows = Rows::default();
        for r in tx
            .query(
                &format!("SELECT {JOB_COLUMNS}, seq FROM emq_jobs ORDER BY seq"),
                &[],
            )
            .map_err(err)?
        {
            let job = job_from_row(&r).map_err(err)?;
            rows.add_job(&job.msgid, r.get(9));
            restored.jobs.push(job);
        }
        for r in tx
            .query(
                &format!(
                    "SELECT {JOB_COLUMNS}, seq, outcome, finished_at, result, result_truncated,
                            started_at
                     FROM emq_finished ORDER BY seq"
                ),
                &[],
            )
            .map_err(err)?
        {
            rows.saw_ends(Some(r.get(9)), None);
            restored.finished.push(FinishedRecord {
                job: job_from_row(&r).map_err(err)?,
                outcome: r.try_get(10).map_err(err)?,
                started_at_unix_ms: r
                    .try_get::<_, Option<i64>>(14)
                    .map_err(err)?
                    .map(unix_ms_from_column),
                finished_at_unix_ms: unix_ms_from_column(r.try_get(11).map_err(err)?),
                result: r.try_get(12).map_err(err)?,
                result_truncated: r.try_get(13).map_err(err)?,
            });
        }
        for r in tx
            .query(
                "SELECT msgid, client, queue, route, headers, message, attempts, accepted_at,
                        NULL::BIGINT, seq, error, dead_at, last_error
                 FROM emq_dead_letters ORDER BY seq",
                &[],
            )
            .map_err(err)?
        {
            rows.saw_ends(None, Some(r.get(9)));
            restored.dead_letters.push(DeadLetterRecord {
                job: job_from_row(&r).map_err(err)?,
                reason: r.try_get(10).map_err(err)?,
                error: r.try_get(12).map_err(err)?,
                dead_at_unix_ms: unix_ms_from_column(r.try_get(11).map_err(err)?),
            });
        }
        for r in tx
            .query("SELECT id, blob FROM emq_schedules ORDER BY id", &[])
            .map_err(err)?
        {
            restored
                .schedules
                .push((r.try_get(0).map_err(err)?, r.try_get(1).map_err(err)?));
        }
        let mut states = Vec::new();
        for r in tx
            .query(
                "SELECT kind, id, blob FROM emq_states ORDER BY kind, id",
                &[],
            )
            .map_err(err)?
        {
            states.push((
                r.try_get(0).map_err(err)?,
                r.try_get(1).map_err(err)?,
                r.try_get(2).map_err(err)?,
            ));
        }
        restored.states = crate::states::known_states(states);
        for r in tx
            .query("SELECT queue FROM emq_paused_queues ORDER BY queue", &[])
            .map_err(err)?
        {
            restored.paused_queues.push(r.try_get(0).map_err(err)?);
        }
        for r in tx
            .query(
                "SELECT msgid, client, status, payload, receipt, held_at, seq
                 FROM emq_results ORDER BY seq",
                &[],
            )
            .map_err(err)?
        {
            let seq: i64 = r.try_get(6).map_err(err)?;
            let status: String = r.try_get(2).map_err(err)?;
            let held = ResultRecord {
                msgid: r.try_get(0).map_err(err)?,
                client: r.try_get(1).map_err(err)?,
                status: if status == "failed" {
                    emqp_proto::ResultStatus::Failed
                } else {
                    emqp_proto::ResultStatus::Ok
                },
                payload: r.try_get(3).map_err(err)?,
                receipt: r.try_get(4).map_err(err)?,
                held_at_unix_ms: unix_ms_from_column(r.try_get(5).map_err(err)?),
            };
            rows.add_result(&held.msgid, seq);
            restored.results.push(held);
        }
        tx.commit().map_err(err)?;
        self.rows = rows;
        self.loaded = true;
        // Whatever an interrupted commit did, the tables now say.
        self.uncertain = None;
        Ok(restored)
    }
}

impl JournalStore for PgJournal {
    type Error = PgError;

    /// One transaction: the lease check, then the batch's statements (see
    /// `plan.rs`). A lost connection fails the batch and is made again on
    /// the next call.
    fn append(&mut self, batch: &Batch) -> Result<(), PgError> {
        let r = self.append_batch(batch);
        if let Err(e) = &r {
            self.after_error(e);
        }
        r
    }

    /// Everything, from one snapshot, after checking that this router
    /// holds the lease.
    fn load(&mut self) -> Result<Restored, PgError> {
        let r = self.load_all();
        if let Err(e) = &r {
            self.after_error(e);
        }
        r
    }

    fn describe(&self) -> String {
        self.db.clone()
    }
}

/// The PostgreSQL side of a plan (`plan.rs`) on the general path: one
/// multi-row statement per group of rows (`unnest`, `= ANY`), one
/// statement per rare change.
struct PgWriter<'a, 't> {
    tx: &'a mut postgres::Transaction<'t>,
    s: &'a Statements,
}

impl RowWriter for PgWriter<'_, '_> {
    type Error = postgres::Error;

    fn insert_jobs(&mut self, jobs: &JobColumns<'_>) -> Result<(), postgres::Error> {
        self.tx.execute(&self.s.insert_jobs, &job_params(jobs))?;
        Ok(())
    }

    fn replace_job(&mut self, seq: i64, job: &JobRecord) -> Result<(), postgres::Error> {
        self.tx.execute(
            &self.s.replace_job,
            &[
                &seq,
                &job.client,
                &job.queue,
                &route_column(job),
                &job.headers,
                &job.payload,
                &attempts_column(job.attempts),
                &unix_ms_column(job.accepted_at_unix_ms),
                &job.run_at_unix_ms.map(unix_ms_column),
            ],
        )?;
        Ok(())
    }

    fn set_attempts(&mut self, seq: i64, attempts: i32) -> Result<(), postgres::Error> {
        self.tx
            .execute(&self.s.update_attempts, &[&seq, &attempts])?;
        Ok(())
    }

    fn move_to_dead(&mut self, m: &DeadMove<'_>, dead_at: i64) -> Result<(), postgres::Error> {
        self.tx.execute(
            &self.s.move_to_dead,
            &[&m.job_seq, &m.seq, &m.reason, &dead_at, &m.error],
        )?;
        Ok(())
    }

    fn remove_dead(&mut self, msgid: &str) -> Result<(), postgres::Error> {
        self.tx.execute(&self.s.delete_dead, &[&msgid])?;
        Ok(())
    }

    fn delete_jobs(&mut self, seqs: &[i64]) -> Result<(), postgres::Error> {
        self.tx.execute(&self.s.delete_jobs, &[&seqs])?;
        Ok(())
    }

    fn insert_finished(&mut self, f: &FinishedColumns<'_>) -> Result<(), postgres::Error> {
        self.tx.execute(&self.s.insert_finished, &{
            let mut p = finished_params(f);
            p.push(&f.started_at);
            p
        })?;
        Ok(())
    }

    fn trim_finished(&mut self, at_or_below: i64, before: i64) -> Result<(), postgres::Error> {
        self.tx
            .execute(&self.s.trim_finished, &[&at_or_below, &before])?;
        Ok(())
    }

    fn trim_dead(&mut self, keep: i64) -> Result<(), postgres::Error> {
        self.tx.execute(&self.s.trim_dead, &[&keep])?;
        Ok(())
    }

    fn other(&mut self, change: &Other<'_>) -> Result<(), postgres::Error> {
        let s = self.s;
        match change {
            Other::PutSchedule { id, blob } => self.tx.execute(&s.put_schedule, &[id, blob]),
            Other::DeleteSchedule { id } => self.tx.execute(&s.delete_schedule, &[id]),
            Other::PutState { kind, id, blob } => {
                self.tx.execute(&s.put_state, &[&kind.as_str(), id, blob])
            }
            Other::DeleteState { kind, id } => {
                self.tx.execute(&s.delete_state, &[&kind.as_str(), id])
            }
            Other::Pause { queue } => self.tx.execute(&s.pause, &[queue]),
            Other::Resume { queue } => self.tx.execute(&s.resume, &[queue]),
        }?;
        Ok(())
    }

    fn insert_results(&mut self, r: &ResultColumns<'_>) -> Result<(), postgres::Error> {
        self.tx.execute(&self.s.insert_results, &result_params(r))?;
        Ok(())
    }

    fn delete_results(&mut self, seqs: &[i64]) -> Result<(), postgres::Error> {
        self.tx.execute(&self.s.delete_results, &[&seqs])?;
        Ok(())
    }

    /// Nothing more: the lease check every batch starts with is a real
    /// write.
    fn probe(&mut self) -> Result<(), postgres::Error> {
        Ok(())
    }
}

/// A statement parameter.
type Param<'p> = &'p (dyn ToSql + Sync);

/// The parameters of INSERT_JOBS, in its column order; also the job part
/// of INSERT_FINISHED and of the one-statement batch.
fn job_params<'p>(j: &'p JobColumns<'_>) -> [Param<'p>; 10] {
    [
        &j.seq,
        &j.msgid,
        &j.client,
        &j.queue,
        &j.route,
        &j.headers,
        &j.message,
        &j.attempts,
        &j.accepted_at,
        &j.run_at,
    ]
}

/// The parameters of INSERT_FINISHED: the job's columns, then the end's.
fn finished_params<'p>(f: &'p FinishedColumns<'_>) -> Vec<Param<'p>> {
    let mut p = job_params(&f.job).to_vec();
    p.extend_from_slice(&[
        &f.outcome as Param<'p>,
        &f.finished_at,
        &f.result,
        &f.result_truncated,
    ]);
    p
}

/// The parameters of INSERT_RESULTS.
fn result_params<'p>(r: &'p ResultColumns<'_>) -> [Param<'p>; 7] {
    [
        &r.seq, &r.msgid, &r.client, &r.status, &r.payload, &r.receipt, &r.held_at,
    ]
}

/// The parameters of the one-statement batch (`ONE_STATEMENT`): the
/// fence, the new jobs, the jobs deleted, the finished jobs, the trim of
/// finished jobs, the batch number, the results and the results deleted.
fn one_statement_params<'p>(
    fence: &'p Fence,
    epoch: &'p i64,
    plan: &'p Plan<'_>,
    at_or_below: &'p i64,
    before: &'p i64,
    batch: &'p i64,
) -> Vec<Param<'p>> {
    let mut p: Vec<Param<'p>> = vec![&fence.holder, epoch];
    p.extend_from_slice(&job_params(&plan.inserts));
    p.push(&plan.deletes);
    p.extend(finished_params(&plan.finished));
    p.extend_from_slice(&[at_or_below as Param<'p>, before, batch]);
    p.extend_from_slice(&result_params(&plan.results));
    p.push(&plan.result_deletes);
    // $39: the finished jobs' start times (added with schema version 4).
    p.push(&plan.finished.started_at);
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_recognised_and_described_without_the_password() {
        assert!(is_postgres_url("postgresql://u@h/db"));
        assert!(is_postgres_url("  POSTGRES://h/db"));
        assert!(!is_postgres_url("/var/lib/emq/journal.sqlite"));
        assert!(!is_postgres_url("none"));
        let c = postgres::Config::from_str("postgresql://emq:secret@db.example:5433/jobs").unwrap();
        let d = describe_config(&c);
        assert_eq!(d, "postgresql://emq@db.example:5433/jobs");
        assert!(!d.contains("secret"));
    }

    #[test]
    fn a_bad_url_is_a_clear_permanent_error() {
        let e = PgJournal::open("postgresql://h:notaport/db", &PgOptions::default()).unwrap_err();
        assert!(e.is_permanent(), "{e:?}");
        assert!(e.to_string().contains("postgresql://USER"), "{e}");
    }
}
