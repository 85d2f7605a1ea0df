//! The command line as clap parses it, as close to what was typed as
//! possible; [`super::hiargs`] checks it with the environment and the
//! config file into a [`super::Plan`].

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use emq_cli_support::{parse_duration, AccessArgs, LogArgs, OtlpArgs};

pub(crate) const DEFAULT_FRONTEND: &str = "tcp://127.0.0.1:47291";
pub(crate) const DEFAULT_BACKEND: &str = "tcp://127.0.0.1:47290";
pub(crate) const DEFAULT_ADMIN: &str = "tcp://127.0.0.1:47293";

const AFTER_HELP: &str = "\
Every option can also come from the environment (EVENTMQ_<KEY>) or from the
[router] (or [global]) section of the INI file named by EVENTMQ_CONFIG_FILE
(default /etc/eventmq.conf). Command-line flags win over the environment,
which wins over the file. Keys: FRONTEND_ADDR, BACKEND_ADDR,
ADMINISTRATIVE_ADDR, HWM, MAX_UNIQUE_KEYS, HEARTBEAT_INTERVAL, HEARTBEAT_LIVENESS,
MAX_ATTEMPTS, RETRY_BACKOFF, RETRY_BACKOFF_MAX, DRAIN_TIMEOUT, QUEUES,
RETAIN_FINISHED, RETAIN_FOR, RETAIN_RESULT_BYTES, DEAD_LETTER_KEEP,
WORKFLOWS_KEEP, WORKFLOWS_KEEP_FOR,
RESULTS_KEEP, RESULTS_KEEP_BYTES, RESULTS_KEEP_FOR (default queues of a worker whose INFORM names none), UNSERVED_QUEUES, JOURNAL, OUTBOX, LEASE_TTL, LEASE_RENEW,
METRICS_ADDR,
HTTP_ADDR, HTTP_TOKEN_FILE, HTTP_READ_ONLY (true or false), MAX_MESSAGE_SIZE,
ALLOW_FRONTEND, ALLOW_BACKEND, ALLOW_ADMIN, PLAIN_USERS,
CURVE_SECRET_KEY_FILE, CURVE_KEYS, CURVE_FRONTEND_KEYS, CURVE_BACKEND_KEYS,
CURVE_ADMIN_KEYS.

Access control uses ZAP: a peer outside an --allow-* list, or without valid
PLAIN credentials when --plain-users is set, or whose CURVE public key is not
authorised on a CURVE socket, is refused by libzmq before any of its messages
reaches the router (clients and job managers then need PLAIN credentials, or
--curve-server-key and their own key pair, too).

Encryption (CURVE): `emq-cli keygen NAME` makes a key pair (NAME.key,
NAME.key_secret). Start the router with --curve-secret-key-file
router.key_secret and the authorised client keys (--curve-keys DIR, a
directory of the clients' *.key files, or a file of keys; or per socket
--curve-frontend-keys, --curve-backend-keys, --curve-admin-keys). A socket
with authorised keys is CURVE only: peers in clear text (NULL or PLAIN, such
as EventMQ 0.3.13's Python router, job manager and clients) cannot use it.
SIGHUP reads the authorised keys (and --plain-users) again; connections
already open stay.

Protocol: eMQP/1.0, wire-compatible with EventMQ 0.3.13. Every accepted
REQUEST is acknowledged with REPLY [msgid]; results of reply-requested jobs
come back as RESULT [msgid, status, payload]; refused requests get
REJECT [msgid, reason, text].

Schedules: the router keeps SCHEDULE / UNSCHEDULE itself (interval or cron,
UTC; acked REPLY [msgid], bad timing REJECT malformed) and journals them, so
no emq-scheduler process is needed. If a 0.3.13 scheduler is connected
(INFORM type scheduler on the frontend), SCHEDULE is forwarded to it instead;
UNSCHEDULE goes to every scheduler and removes the built-in schedule too.

High availability: with --journal postgresql://USER@HOST/DB any number of
routers may share one database. One holds the leader lease and serves; the
others wait without binding any socket, and take over when the lease
expires (--lease-ttl after the leader's last renewal) or is released (the
leader stopped). Every commit checks the lease inside its transaction, so a
router that lost it can commit, and so acknowledge, nothing. A leader that
cannot renew stops serving at once (KBYE to its peers, sockets closed) and
waits as a standby. Give clients and job managers every router's address (a
comma-separated failover list).

SIGTERM, SIGINT or an admin DISCONNECT stop the router in order: KBYE to
every peer, wait for in-flight jobs (at most --drain-timeout), exit 0. Exit
code 2: the journal cannot be used (damaged, locked by another router, not
writable); 1: any other start-up error.

Logs go to stderr; RUST_LOG overrides the level (default info).";

/// EventMQ (eMQP/1.0) router: clients submit jobs on the frontend, workers
/// take them on the backend, admin tools ask for status on the admin
/// endpoint.
#[derive(Parser, Debug)]
#[command(name = "emq-router", version, after_help = AFTER_HELP)]
pub(crate) struct Cli {
    /// Endpoint for clients (senders) and schedulers
    /// [env: EVENTMQ_FRONTEND_ADDR] [default: tcp://127.0.0.1:47291]
    #[arg(long, value_name = "ADDR")]
    pub(crate) frontend: Option<String>,

    /// Endpoint for workers (job managers)
    /// [env: EVENTMQ_BACKEND_ADDR] [default: tcp://127.0.0.1:47290]
    #[arg(long, value_name = "ADDR")]
    pub(crate) backend: Option<String>,

    /// Endpoint for admin tools (STATUS, ROUTER_SHOW_WORKERS, DISCONNECT, ...)
    /// [env: EVENTMQ_ADMINISTRATIVE_ADDR] [default: tcp://127.0.0.1:47293]
    #[arg(long, value_name = "ADDR")]
    pub(crate) admin: Option<String>,

    /// Buffered jobs per queue before REQUESTs are rejected `queue-full`.
    /// A buffered job costs the router about 175 bytes plus its payload
    /// (about 275 with the journal): a million small jobs, about 190 MB
    /// [env: EVENTMQ_HWM] [default: 1000000]
    #[arg(long, value_name = "N")]
    pub(crate) hwm: Option<usize>,

    /// Unique keys (`unique-key` headers) the router holds at most; at the
    /// cap a REQUEST with a new key is refused `queue-full` (clients send
    /// it again later). A key costs under 1 KiB
    /// [env: EVENTMQ_MAX_UNIQUE_KEYS] [default: 100000]
    #[arg(long, value_name = "N")]
    pub(crate) max_unique_keys: Option<usize>,

    /// Seconds between HEARTBEATs to every worker and scheduler
    /// [env: EVENTMQ_HEARTBEAT_INTERVAL] [default: 3]
    #[arg(long, value_name = "SECS", value_parser = parse_duration)]
    pub(crate) heartbeat_interval: Option<Duration>,

    /// A peer silent for interval × liveness is removed and its jobs are
    /// redelivered [env: EVENTMQ_HEARTBEAT_LIVENESS] [default: 3]
    #[arg(long, value_name = "N")]
    pub(crate) heartbeat_liveness: Option<u32>,

    /// Deliveries of a job that may be lost to dying workers before it is
    /// dead-lettered [env: EVENTMQ_MAX_ATTEMPTS] [default: 5]
    #[arg(long, value_name = "N")]
    pub(crate) max_attempts: Option<u32>,

    /// First retry delay for a failed job with `retry-count:N`; doubles each
    /// retry [env: EVENTMQ_RETRY_BACKOFF] [default: 1]
    #[arg(long, value_name = "SECS", value_parser = parse_duration)]
    pub(crate) retry_backoff: Option<Duration>,

    /// Largest retry delay [env: EVENTMQ_RETRY_BACKOFF_MAX] [default: 60]
    #[arg(long, value_name = "SECS", value_parser = parse_duration)]
    pub(crate) retry_backoff_max: Option<Duration>,

    /// On shutdown, how long to wait for in-flight jobs before exiting
    /// [env: EVENTMQ_DRAIN_TIMEOUT] [default: 10]
    #[arg(long, value_name = "SECS", value_parser = parse_duration)]
    pub(crate) drain_timeout: Option<Duration>,

    /// Finished jobs kept for lookups (emq-cli job, the control plane);
    /// 0 keeps none [env: EVENTMQ_RETAIN_FINISHED] [default: 10000]
    #[arg(long, value_name = "N")]
    pub(crate) retain_finished: Option<usize>,

    /// The longest a finished job is kept for lookups
    /// [env: EVENTMQ_RETAIN_FOR] [default: 3600]
    #[arg(long, value_name = "SECS", value_parser = parse_duration)]
    pub(crate) retain_for: Option<Duration>,

    /// A finished job's result is kept when it is at most this big
    /// [env: EVENTMQ_RETAIN_RESULT_BYTES] [default: 8192]
    #[arg(long, value_name = "BYTES")]
    pub(crate) retain_result_bytes: Option<usize>,

    /// Results of reply-requested jobs held until their client has them
    /// (journaled; re-sent after a crash or to a client that comes back),
    /// at most; the oldest beyond are dropped undelivered
    /// [env: EVENTMQ_RESULTS_KEEP] [default: 100000]
    #[arg(long, value_name = "N")]
    pub(crate) results_keep: Option<usize>,

    /// Bytes (payloads and msgids) of the held results, at most; a single
    /// bigger result is sent once and not held
    /// [env: EVENTMQ_RESULTS_KEEP_BYTES] [default: 268435456 (256 MiB)]
    #[arg(long, value_name = "BYTES")]
    pub(crate) results_keep_bytes: Option<usize>,

    /// The longest a result is held for a client that does not take it
    /// [env: EVENTMQ_RESULTS_KEEP_FOR] [default: 3600]
    #[arg(long, value_name = "SECS", value_parser = parse_duration)]
    pub(crate) results_keep_for: Option<Duration>,

    /// Finished workflows kept for `emq-cli workflow` and the dashboard,
    /// in memory and in the journal (the oldest go; 0: none)
    /// [env: EVENTMQ_WORKFLOWS_KEEP] [default: 1000]
    #[arg(long, value_name = "N")]
    pub(crate) workflows_keep: Option<usize>,

    /// The longest a finished workflow is kept
    /// [env: EVENTMQ_WORKFLOWS_KEEP_FOR] [default: 86400]
    #[arg(long, value_name = "SECS", value_parser = parse_duration)]
    pub(crate) workflows_keep_for: Option<Duration>,

    /// Dead letters kept, in memory and in the journal (the oldest go)
    /// [env: EVENTMQ_DEAD_LETTER_KEEP] [default: 10000]
    #[arg(long, value_name = "N")]
    pub(crate) dead_letter_keep: Option<usize>,

    /// Queues of a worker whose INFORM names none, e.g. "10:default,15:email"
    /// or '[[10, "default"]]' [env: EVENTMQ_QUEUES] [default: 10:default]
    #[arg(long, value_name = "SPEC")]
    pub(crate) default_queues: Option<String>,

    /// A flow-control policy for a queue at start, QUEUE:LIMITS with LIMITS
    /// a comma-separated list of concurrency=N, concurrency-per-key=N,
    /// rate=N/SECS, rate-per-key=N/SECS and fair (repeatable, one per
    /// queue), e.g. --limit email:concurrency-per-key=2,rate=100/1,fair. It
    /// replaces the journal's policy of that queue (and is journaled);
    /// `emq-cli limits` changes policies at run time [env: EVENTMQ_LIMITS,
    /// entries separated by `;`]
    #[arg(long = "limit", value_name = "QUEUE:LIMITS")]
    pub(crate) limits: Vec<String>,

    /// Where a job goes whose queue no connected job manager serves:
    /// `default` sends it to the default queue (EventMQ 0.3.13's rule; each
    /// such job is logged, rate-limited, and counted per queue in
    /// `emq-cli queues`), `hold` keeps it in its own queue until a job
    /// manager for that queue connects [env: EVENTMQ_UNSERVED_QUEUES]
    /// [default: default]
    #[arg(long, value_name = "hold|default")]
    pub(crate) unserved_queues: Option<emq_router_core::config::Unserved>,

    /// Durable job journal: an SQLite file, or a PostgreSQL database
    /// (postgresql://USER[:PASSWORD]@HOST[:PORT]/DB, shared by several
    /// routers, one of them leader): accepted jobs, attempt counts, dead
    /// letters, finished jobs, paused queues, built-in schedules and
    /// flow-control policies survive
    /// a router restart. `none` keeps everything in memory only. Default:
    /// journal.sqlite in the data dir ($EMQ_DATA_DIR, else
    /// $XDG_DATA_HOME/emq, else ~/.local/share/emq). A damaged or locked
    /// journal, or a database that cannot be reached at start, stops the
    /// router with exit code 2 [env: EVENTMQ_JOURNAL]
    #[arg(long, value_name = "PATH|URL|none")]
    pub(crate) journal: Option<String>,

    /// Drain the job outbox of the application's PostgreSQL database at
    /// URL (postgresql://...): the router installs the emq_outbox table and
    /// the emq_enqueue(queue, payload, headers) function there, LISTENs,
    /// and takes each committed row as a REQUEST under its msgid, deleting
    /// it once answered. Only while serving (a standby drains nothing)
    /// [env: EVENTMQ_OUTBOX]
    #[arg(long, value_name = "URL")]
    pub(crate) outbox: Option<String>,

    /// With a PostgreSQL journal: the leader lease lasts this long after
    /// its last renewal; a standby takes over about this long after the
    /// leader died [env: EVENTMQ_LEASE_TTL] [default: 3]
    #[arg(long, value_name = "SECS", value_parser = parse_duration)]
    pub(crate) lease_ttl: Option<Duration>,

    /// With a PostgreSQL journal: how often the leader renews its lease (at
    /// most half the TTL); standbys try to take it, and a failed renewal is
    /// retried, every half of this [env: EVENTMQ_LEASE_RENEW] [default: 1]
    #[arg(long, value_name = "SECS", value_parser = parse_duration)]
    pub(crate) lease_renew: Option<Duration>,

    /// Serve Prometheus metrics over HTTP (GET /metrics) on this address,
    /// e.g. 127.0.0.1:9464 (port 0: any free port, logged). Default: off
    /// [env: EVENTMQ_METRICS_ADDR]
    #[arg(long, value_name = "ADDR")]
    pub(crate) metrics: Option<String>,

    /// Serve the web dashboard, its JSON API (/api/OP, the control plane)
    /// and /metrics on this address, e.g. 127.0.0.1:9464. An address
    /// outside loopback needs --http-token-file. Default: off
    /// [env: EVENTMQ_HTTP_ADDR]
    #[arg(long, value_name = "ADDR")]
    pub(crate) http: Option<String>,

    /// File holding the token every --http request must carry
    /// (`Authorization: Bearer TOKEN`, or as the basic-auth password)
    /// [env: EVENTMQ_HTTP_TOKEN_FILE]
    #[arg(long, value_name = "FILE")]
    pub(crate) http_token_file: Option<PathBuf>,

    /// The dashboard and its API show everything and change nothing
    /// [env: EVENTMQ_HTTP_READ_ONLY]
    #[arg(long)]
    pub(crate) http_read_only: bool,

    /// Largest message (frame) accepted on any socket, in bytes. A bigger
    /// one is dropped with a warning, and a REQUEST or SCHEDULE is refused
    /// `malformed` (saying the size and the limit); a frame over twice the
    /// limit is cut by libzmq, which disconnects its sender without a word
    /// (ZMQ_MAXMSGSIZE). 0 or -1: no limit
    /// [env: EVENTMQ_MAX_MESSAGE_SIZE] [default: 16777216 (16 MiB)]
    #[arg(long, value_name = "BYTES", allow_negative_numbers = true)]
    pub(crate) max_message_size: Option<i64>,

    #[command(flatten)]
    pub(crate) access: AccessArgs,

    #[command(flatten)]
    pub(crate) log: LogArgs,

    #[command(flatten)]
    pub(crate) otlp: OtlpArgs,
}
