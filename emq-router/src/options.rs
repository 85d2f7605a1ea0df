//! Options: flags, `EVENTMQ_*` environment and the config file, merged and
//! checked into [`Options`] (the core's `Config` and the binary's own
//! settings). The same layering as every emq binary: flags win over the
//! environment, which wins over the file.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use emq_journal::JournalTarget;
use emq_router_core::lease::LeaseConfig;
use emq_router_core::Config;
use emq_transport::curve::{self, AuthorisedKeys};
use emq_transport::zap::{parse_allowlist, AccessPolicy, Allowlist, DomainPolicy};
use emqp_proto::settings::Settings;
use emqp_proto::QueueSpec;

const DEFAULT_FRONTEND: &str = "tcp://127.0.0.1:47291";
const DEFAULT_BACKEND: &str = "tcp://127.0.0.1:47290";
const DEFAULT_ADMIN: &str = "tcp://127.0.0.1:47293";

const AFTER_HELP: &str = "\
Every option can also come from the environment (EVENTMQ_<KEY>) or from the
[router] (or [global]) section of the INI file named by EVENTMQ_CONFIG_FILE
(default /etc/eventmq.conf). Command-line flags win over the environment,
which wins over the file. Keys: FRONTEND_ADDR, BACKEND_ADDR,
ADMINISTRATIVE_ADDR, HWM, HEARTBEAT_INTERVAL, HEARTBEAT_LIVENESS,
MAX_ATTEMPTS, RETRY_BACKOFF, RETRY_BACKOFF_MAX, DRAIN_TIMEOUT, QUEUES,
RETAIN_FINISHED, RETAIN_FOR, RETAIN_RESULT_BYTES, DEAD_LETTER_KEEP,
RESULTS_KEEP, RESULTS_KEEP_BYTES, RESULTS_KEEP_FOR (default queues of a worker whose INFORM names none), JOURNAL, LEASE_TTL, LEASE_RENEW,
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
    frontend: Option<String>,

    /// Endpoint for workers (job managers)
    /// [env: EVENTMQ_BACKEND_ADDR] [default: tcp://127.0.0.1:47290]
    #[arg(long, value_name = "ADDR")]
    backend: Option<String>,

    /// Endpoint for admin tools (STATUS, ROUTER_SHOW_WORKERS, DISCONNECT, ...)
    /// [env: EVENTMQ_ADMINISTRATIVE_ADDR] [default: tcp://127.0.0.1:47293]
    #[arg(long, value_name = "ADDR")]
    admin: Option<String>,

    /// Buffered jobs per queue before REQUESTs are rejected `queue-full`.
    /// A buffered job costs the router about 175 bytes plus its payload
    /// (about 275 with the journal): a million small jobs, about 190 MB
    /// [env: EVENTMQ_HWM] [default: 1000000]
    #[arg(long, value_name = "N")]
    hwm: Option<usize>,

    /// Seconds between HEARTBEATs to every worker and scheduler
    /// [env: EVENTMQ_HEARTBEAT_INTERVAL] [default: 3]
    #[arg(long, value_name = "SECS", value_parser = emqp_proto::duration::secs)]
    heartbeat_interval: Option<f64>,

    /// A peer silent for interval × liveness is removed and its jobs are
    /// redelivered [env: EVENTMQ_HEARTBEAT_LIVENESS] [default: 3]
    #[arg(long, value_name = "N")]
    heartbeat_liveness: Option<u32>,

    /// Deliveries of a job that may be lost to dying workers before it is
    /// dead-lettered [env: EVENTMQ_MAX_ATTEMPTS] [default: 5]
    #[arg(long, value_name = "N")]
    max_attempts: Option<u32>,

    /// First retry delay for a failed job with `retry-count:N`; doubles each
    /// retry [env: EVENTMQ_RETRY_BACKOFF] [default: 1]
    #[arg(long, value_name = "SECS", value_parser = emqp_proto::duration::secs)]
    retry_backoff: Option<f64>,

    /// Largest retry delay [env: EVENTMQ_RETRY_BACKOFF_MAX] [default: 60]
    #[arg(long, value_name = "SECS", value_parser = emqp_proto::duration::secs)]
    retry_backoff_max: Option<f64>,

    /// On shutdown, how long to wait for in-flight jobs before exiting
    /// [env: EVENTMQ_DRAIN_TIMEOUT] [default: 10]
    #[arg(long, value_name = "SECS", value_parser = emqp_proto::duration::secs)]
    drain_timeout: Option<f64>,

    /// Finished jobs kept for lookups (emq-cli job, the control plane);
    /// 0 keeps none [env: EVENTMQ_RETAIN_FINISHED] [default: 10000]
    #[arg(long, value_name = "N")]
    retain_finished: Option<usize>,

    /// The longest a finished job is kept for lookups
    /// [env: EVENTMQ_RETAIN_FOR] [default: 3600]
    #[arg(long, value_name = "SECS", value_parser = emqp_proto::duration::secs)]
    retain_for: Option<f64>,

    /// A finished job's result is kept when it is at most this big
    /// [env: EVENTMQ_RETAIN_RESULT_BYTES] [default: 8192]
    #[arg(long, value_name = "BYTES")]
    retain_result_bytes: Option<usize>,

    /// Results of reply-requested jobs held until their client has them
    /// (journaled; re-sent after a crash or to a client that comes back),
    /// at most; the oldest beyond are dropped undelivered
    /// [env: EVENTMQ_RESULTS_KEEP] [default: 100000]
    #[arg(long, value_name = "N")]
    results_keep: Option<usize>,

    /// Bytes (payloads and msgids) of the held results, at most; a single
    /// bigger result is sent once and not held
    /// [env: EVENTMQ_RESULTS_KEEP_BYTES] [default: 268435456 (256 MiB)]
    #[arg(long, value_name = "BYTES")]
    results_keep_bytes: Option<usize>,

    /// The longest a result is held for a client that does not take it
    /// [env: EVENTMQ_RESULTS_KEEP_FOR] [default: 3600]
    #[arg(long, value_name = "SECS")]
    results_keep_for: Option<f64>,

    /// Dead letters kept, in memory and in the journal (the oldest go)
    /// [env: EVENTMQ_DEAD_LETTER_KEEP] [default: 10000]
    #[arg(long, value_name = "N")]
    dead_letter_keep: Option<usize>,

    /// Queues of a worker whose INFORM names none, e.g. "10:default,15:email"
    /// or '[[10, "default"]]' [env: EVENTMQ_QUEUES] [default: 10:default]
    #[arg(long, value_name = "SPEC")]
    default_queues: Option<String>,

    /// Durable job journal: an SQLite file, or a PostgreSQL database
    /// (postgresql://USER[:PASSWORD]@HOST[:PORT]/DB, shared by several
    /// routers, one of them leader): accepted jobs, attempt counts, dead
    /// letters, finished jobs, paused queues and built-in schedules survive
    /// a router restart. `none` keeps everything in memory only. Default:
    /// journal.sqlite in the data dir ($EMQ_DATA_DIR, else
    /// $XDG_DATA_HOME/emq, else ~/.local/share/emq). A damaged or locked
    /// journal, or a database that cannot be reached at start, stops the
    /// router with exit code 2 [env: EVENTMQ_JOURNAL]
    #[arg(long, value_name = "PATH|URL|none")]
    journal: Option<String>,

    /// With a PostgreSQL journal: the leader lease lasts this long after
    /// its last renewal; a standby takes over about this long after the
    /// leader died [env: EVENTMQ_LEASE_TTL] [default: 3]
    #[arg(long, value_name = "SECS", value_parser = emqp_proto::duration::secs)]
    lease_ttl: Option<f64>,

    /// With a PostgreSQL journal: how often the leader renews its lease (at
    /// most half the TTL); standbys try to take it, and a failed renewal is
    /// retried, every half of this [env: EVENTMQ_LEASE_RENEW] [default: 1]
    #[arg(long, value_name = "SECS", value_parser = emqp_proto::duration::secs)]
    lease_renew: Option<f64>,

    /// Serve Prometheus metrics over HTTP (GET /metrics) on this address,
    /// e.g. 127.0.0.1:9464 (port 0: any free port, logged). Default: off
    /// [env: EVENTMQ_METRICS_ADDR]
    #[arg(long, value_name = "ADDR")]
    metrics: Option<String>,

    /// Serve the web dashboard, its JSON API (/api/OP, the control plane)
    /// and /metrics on this address, e.g. 127.0.0.1:9464. An address
    /// outside loopback needs --http-token-file. Default: off
    /// [env: EVENTMQ_HTTP_ADDR]
    #[arg(long, value_name = "ADDR")]
    http: Option<String>,

    /// File holding the token every --http request must carry
    /// (`Authorization: Bearer TOKEN`, or as the basic-auth password)
    /// [env: EVENTMQ_HTTP_TOKEN_FILE]
    #[arg(long, value_name = "FILE")]
    http_token_file: Option<PathBuf>,

    /// The dashboard and its API show everything and change nothing
    /// [env: EVENTMQ_HTTP_READ_ONLY]
    #[arg(long)]
    http_read_only: bool,

    /// Largest message (frame) accepted on any socket, in bytes. A bigger
    /// one is dropped with a warning, and a REQUEST or SCHEDULE is refused
    /// `malformed` (saying the size and the limit); a frame over twice the
    /// limit is cut by libzmq, which disconnects its sender without a word
    /// (ZMQ_MAXMSGSIZE). 0 or -1: no limit
    /// [env: EVENTMQ_MAX_MESSAGE_SIZE] [default: 16777216 (16 MiB)]
    #[arg(long, value_name = "BYTES", allow_negative_numbers = true)]
    max_message_size: Option<i64>,

    /// Addresses (IP or CIDR, comma-separated) allowed to connect to the
    /// frontend; `any` for no restriction. An empty list is an error
    /// [env: EVENTMQ_ALLOW_FRONTEND] [default: any]
    #[arg(long, value_name = "CIDR[,CIDR]|any")]
    allow_frontend: Option<String>,

    /// Addresses allowed to connect to the backend (workers), as for
    /// --allow-frontend [env: EVENTMQ_ALLOW_BACKEND] [default: any]
    #[arg(long, value_name = "CIDR[,CIDR]|any")]
    allow_backend: Option<String>,

    /// Addresses allowed to connect to the admin endpoint (where DISCONNECT
    /// stops the router). Opening it to every host takes `any` (or
    /// 0.0.0.0/0,::/0) and is warned about at start-up; an empty list is an
    /// error [env: EVENTMQ_ALLOW_ADMIN] [default: 127.0.0.0/8,::1]
    #[arg(long, value_name = "CIDR[,CIDR]|any")]
    allow_admin: Option<String>,

    /// File of `user:password` lines (# comments): the frontend and backend
    /// then require ZMQ PLAIN credentials from every peer
    /// [env: EVENTMQ_PLAIN_USERS]
    #[arg(long, value_name = "FILE")]
    plain_users: Option<PathBuf>,

    /// The router's CURVE key pair (NAME.key_secret from `emq-cli keygen`;
    /// refused if its group or others may read it). Sockets with
    /// authorised keys (--curve-keys, --curve-*-keys) are CURVE servers
    /// with it [env: EVENTMQ_CURVE_SECRET_KEY_FILE]
    #[arg(long, value_name = "FILE")]
    curve_secret_key_file: Option<PathBuf>,

    /// Client public keys let in on every socket that has no
    /// --curve-*-keys of its own: a directory of *.key certificates, a
    /// file of keys (one `KEY [name]` per line), or `any` (encrypted, any
    /// client key) [env: EVENTMQ_CURVE_KEYS]
    #[arg(long, value_name = "DIR|FILE|any")]
    curve_keys: Option<String>,

    /// Client keys of the frontend (clients); `none`: the frontend stays
    /// in clear text [env: EVENTMQ_CURVE_FRONTEND_KEYS]
    #[arg(long, value_name = "DIR|FILE|any|none")]
    curve_frontend_keys: Option<String>,

    /// Keys of the backend (job managers), as --curve-frontend-keys
    /// [env: EVENTMQ_CURVE_BACKEND_KEYS]
    #[arg(long, value_name = "DIR|FILE|any|none")]
    curve_backend_keys: Option<String>,

    /// Keys of the admin socket (emq-cli), as --curve-frontend-keys
    /// [env: EVENTMQ_CURVE_ADMIN_KEYS]
    #[arg(long, value_name = "DIR|FILE|any|none")]
    curve_admin_keys: Option<String>,
}

const DEFAULT_MAX_MESSAGE_SIZE: i64 = 16 * 1024 * 1024;
const DEFAULT_ALLOW_ADMIN: &str = "127.0.0.0/8,::1";

/// One `--allow-*` list (`what`): the flag, else the setting `key`, else
/// `default`, read by `zap::parse_allowlist` (`any`, or IPs / CIDR blocks;
/// empty is an error). Errors name the flag, and where a setting came from.
fn parse_allow(
    flag: Option<String>,
    s: &Settings,
    key: &str,
    default: &str,
    what: &str,
) -> Result<Allowlist, String> {
    let (text, from) = match (flag, s.get(key)) {
        (Some(t), _) => (t, String::new()),
        (None, Some(t)) => (
            t.to_string(),
            format!(" (from {})", s.source(key).unwrap_or("settings")),
        ),
        (None, None) => (default.to_string(), String::new()),
    };
    parse_allowlist(&text).map_err(|e| format!("{what}{from}: {e}"))
}

fn read_plain_users(
    path: &std::path::Path,
) -> Result<std::collections::HashMap<String, String>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("--plain-users {}: {e}", path.display()))?;
    let users = emq_transport::zap::parse_plain_users(&text)
        .map_err(|e| format!("--plain-users {}: {e}", path.display()))?;
    if users.is_empty() {
        return Err(format!("--plain-users {}: no users", path.display()));
    }
    Ok(users)
}

/// The files behind the access policy: `--plain-users` and each CURVE
/// socket's authorised-keys source, with the flag or setting it came from.
#[derive(Debug, Clone, Default)]
pub(crate) struct AccessFiles {
    plain_users: Option<PathBuf>,
    curve: Vec<(&'static str, String, String)>,
}

impl AccessFiles {
    /// `policy` with the files read again (on SIGHUP): the same sockets and
    /// mechanisms, the users and keys the files hold now. An error leaves
    /// the caller's policy as it was. Returns the new policy and one line
    /// per file for the log.
    pub(crate) fn reload(
        &self,
        policy: &AccessPolicy,
    ) -> Result<(AccessPolicy, Vec<String>), String> {
        let mut next = policy.clone();
        let mut log = Vec::new();
        if let Some(path) = &self.plain_users {
            let users = read_plain_users(path)?;
            log.push(format!(
                "--plain-users {}: {} user(s)",
                path.display(),
                users.len()
            ));
            for (domain, d) in next.domains.iter_mut() {
                if domain != "admin" && d.plain_users.is_some() {
                    d.plain_users = Some(users.clone());
                }
            }
        }
        for (domain, source, from) in &self.curve {
            let keys: AuthorisedKeys =
                curve::load_authorised_keys(source).map_err(|e| format!("{from}: {e}"))?;
            log.push(format!("{domain}: {keys} ({source})"));
            if let Some(d) = next.domains.get_mut(*domain) {
                d.curve_keys = Some(keys);
            }
        }
        Ok((next, log))
    }
}

/// Options after flags, environment, file and defaults are merged.
#[derive(Debug)]
pub(crate) struct Options {
    pub(crate) frontend: String,
    pub(crate) backend: String,
    pub(crate) admin: String,
    pub(crate) journal: JournalTarget,
    /// No --journal / JOURNAL given: the data-dir default (or none if no
    /// data dir is known).
    pub(crate) journal_default: bool,
    /// The leader lease's timers (used with a PostgreSQL journal).
    pub(crate) lease: LeaseConfig,
    pub(crate) metrics: Option<String>,
    /// `--max-message-size`; -1: no limit. The core checks it
    /// (`core.max_message_size`); the sockets get
    /// [`Options::socket_max_message_size`].
    /// `--http`: the dashboard's address and access rules.
    pub(crate) http: Option<(String, emq_dashboard::Access)>,
    pub(crate) max_message_size: i64,
    pub(crate) access: AccessPolicy,
    /// Where the access policy's files are, to read them again on SIGHUP.
    pub(crate) access_files: AccessFiles,
    /// One line per guarded socket, logged at start.
    pub(crate) access_log: Vec<String>,
    /// Risky access settings (an admin socket open beyond loopback),
    /// logged as warnings at start.
    pub(crate) access_warnings: Vec<String>,
    pub(crate) core: Config,
}

fn secs_to_duration(secs: f64, what: &str, allow_zero: bool) -> Result<Duration, String> {
    if !secs.is_finite() || secs < 0.0 || (!allow_zero && secs == 0.0) {
        return Err(format!(
            "{what} must be a positive number of seconds, got {secs}"
        ));
    }
    Duration::try_from_secs_f64(secs).map_err(|e| format!("{what}: {secs} s: {e}"))
}

impl Options {
    /// ZMQ_MAXMSGSIZE of the router's sockets: twice the limit the core
    /// checks (so that a frame a little over it reaches the core and its
    /// sender gets a REJECT), -1 when there is no limit.
    pub(crate) fn socket_max_message_size(&self) -> i64 {
        if self.max_message_size < 0 {
            -1
        } else {
            self.max_message_size.saturating_mul(2)
        }
    }

    pub(crate) fn resolve(cli: Cli, s: &Settings) -> Result<Options, String> {
        let text = |flag: Option<String>, key: &str, default: &str| -> String {
            flag.or_else(|| s.get(key).map(str::to_string))
                .unwrap_or_else(|| default.to_string())
        };
        let frontend = text(cli.frontend, "FRONTEND_ADDR", DEFAULT_FRONTEND);
        let backend = text(cli.backend, "BACKEND_ADDR", DEFAULT_BACKEND);
        let admin = text(cli.admin, "ADMINISTRATIVE_ADDR", DEFAULT_ADMIN);
        for e in [&frontend, &backend, &admin] {
            emq_transport::check_endpoint(e).map_err(|e| e.to_string())?;
        }
        let journal_arg = cli.journal.or_else(|| s.get("JOURNAL").map(str::to_string));
        let journal = emq_journal::resolve_journal_target(journal_arg.as_deref().map(str::trim));
        let journal_default = journal_arg.is_none();
        let ttl = s.pick_secs(cli.lease_ttl, "LEASE_TTL", 3.0)?;
        let renew = s.pick_secs(cli.lease_renew, "LEASE_RENEW", 1.0)?;
        let renew_every = secs_to_duration(renew, "--lease-renew", false)?;
        let lease = LeaseConfig {
            ttl: secs_to_duration(ttl, "--lease-ttl", false)?,
            renew_every,
            retry_every: renew_every / 2,
        };
        lease.check()?;
        let default_queues = match cli
            .default_queues
            .or_else(|| s.get("QUEUES").map(str::to_string))
        {
            None => QueueSpec::default(),
            Some(t) => {
                let q = QueueSpec::parse_cli(&t)
                    .map_err(|e| format!("bad default queues {t:?}: {e}"))?;
                if q.is_empty() {
                    QueueSpec::default()
                } else {
                    q
                }
            }
        };
        let hb = s.pick_secs(cli.heartbeat_interval, "HEARTBEAT_INTERVAL", 3.0)?;
        let backoff = s.pick_secs(cli.retry_backoff, "RETRY_BACKOFF", 1.0)?;
        let backoff_max = s.pick_secs(cli.retry_backoff_max, "RETRY_BACKOFF_MAX", 60.0)?;
        let drain = s.pick_secs(cli.drain_timeout, "DRAIN_TIMEOUT", 10.0)?;
        let retain_for = s.pick_secs(cli.retain_for, "RETAIN_FOR", 3600.0)?;
        let results_keep_for = s.pick_secs(cli.results_keep_for, "RESULTS_KEEP_FOR", 3600.0)?;
        let max_attempts = s.pick(cli.max_attempts, "MAX_ATTEMPTS", 5)?;
        if max_attempts == 0 {
            return Err("--max-attempts must be at least 1".into());
        }
        let liveness = s.pick(cli.heartbeat_liveness, "HEARTBEAT_LIVENESS", 3)?;
        if liveness == 0 {
            return Err("--heartbeat-liveness must be at least 1".into());
        }
        let metrics = cli
            .metrics
            .or_else(|| s.get("METRICS_ADDR").map(str::to_string))
            .map(|a| a.trim().to_string())
            .filter(|a| !a.is_empty() && !a.eq_ignore_ascii_case("none"));
        let http = match cli
            .http
            .or_else(|| s.get("HTTP_ADDR").map(str::to_string))
            .map(|a| a.trim().to_string())
            .filter(|a| !a.is_empty() && !a.eq_ignore_ascii_case("none"))
        {
            None => None,
            Some(addr) => {
                let token = match cli
                    .http_token_file
                    .or_else(|| s.get("HTTP_TOKEN_FILE").map(PathBuf::from))
                {
                    Some(f) => Some(emq_dashboard::access::read_token_file(&f)?),
                    None => None,
                };
                let read_only = cli.http_read_only || s.pick(None, "HTTP_READ_ONLY", false)?;
                Some((addr, emq_dashboard::Access { token, read_only }))
            }
        };
        let mut max_message_size = s.pick(
            cli.max_message_size,
            "MAX_MESSAGE_SIZE",
            DEFAULT_MAX_MESSAGE_SIZE,
        )?;
        if max_message_size <= 0 {
            max_message_size = -1;
        }
        let plain_users_file = cli
            .plain_users
            .or_else(|| s.get("PLAIN_USERS").map(PathBuf::from));
        let plain_users = match &plain_users_file {
            None => None,
            Some(path) => Some(read_plain_users(path)?),
        };
        let curve_keys = |flag: Option<String>, key: &str, name: &str| {
            flag.map(|v| (v, format!("--curve-{name}")))
                .or_else(|| {
                    s.get(key).map(|v| {
                        (
                            v.to_string(),
                            format!("{key} (from {})", s.source(key).unwrap_or("settings")),
                        )
                    })
                })
                .map(|(v, from)| (v.trim().to_string(), from))
                .filter(|(v, _)| !v.is_empty())
        };
        let all_keys = curve_keys(cli.curve_keys, "CURVE_KEYS", "keys");
        let mut curve_sources: Vec<(&'static str, String, String)> = Vec::new();
        for (domain, flag, key) in [
            ("frontend", cli.curve_frontend_keys, "CURVE_FRONTEND_KEYS"),
            ("backend", cli.curve_backend_keys, "CURVE_BACKEND_KEYS"),
            ("admin", cli.curve_admin_keys, "CURVE_ADMIN_KEYS"),
        ] {
            match curve_keys(flag, key, &format!("{domain}-keys")).or_else(|| all_keys.clone()) {
                Some((v, _)) if v.eq_ignore_ascii_case("none") => {}
                Some((v, from)) => curve_sources.push((domain, v, from)),
                None => {}
            }
        }
        let curve_secret_file = cli
            .curve_secret_key_file
            .or_else(|| s.get("CURVE_SECRET_KEY_FILE").map(PathBuf::from))
            .filter(|p| !p.as_os_str().is_empty());
        let curve_server = match (&curve_secret_file, curve_sources.is_empty()) {
            (None, true) => None,
            (None, false) => {
                return Err(format!(
                    "{}: CURVE sockets need the router's key pair: --curve-secret-key-file                      (make one with `emq-cli keygen NAME`)",
                    curve_sources[0].2
                ))
            }
            (Some(path), true) => {
                return Err(format!(
                    "--curve-secret-key-file {}: no socket has authorised client keys                      (--curve-keys DIR|FILE|any, or --curve-frontend-keys,                      --curve-backend-keys, --curve-admin-keys)",
                    path.display()
                ))
            }
            (Some(path), false) => {
                if !curve::curve_available() {
                    return Err(format!(
                        "--curve-secret-key-file: {}",
                        curve::KeyError::Unavailable
                    ));
                }
                Some(
                    curve::read_key_pair(path)
                        .map_err(|e| format!("--curve-secret-key-file: {e}"))?,
                )
            }
        };
        let mut curve_by_domain = std::collections::HashMap::new();
        for (domain, source, from) in &curve_sources {
            if plain_users.is_some() && *domain != "admin" {
                return Err(format!(
                    "{from} and --plain-users: a socket uses one mechanism, CURVE or PLAIN                      (the {domain} would need both)"
                ));
            }
            let keys = curve::load_authorised_keys(source).map_err(|e| format!("{from}: {e}"))?;
            curve_by_domain.insert(*domain, keys);
        }
        let mut access = AccessPolicy {
            curve_server,
            ..AccessPolicy::default()
        };
        let mut access_log = Vec::new();
        let mut access_warnings = Vec::new();
        for (domain, flag, key, default) in [
            ("frontend", cli.allow_frontend, "ALLOW_FRONTEND", "any"),
            ("backend", cli.allow_backend, "ALLOW_BACKEND", "any"),
            ("admin", cli.allow_admin, "ALLOW_ADMIN", DEFAULT_ALLOW_ADMIN),
        ] {
            let allow = parse_allow(flag, s, key, default, &format!("--allow-{domain}"))?;
            if domain == "admin" && allow.admits_non_loopback() {
                access_warnings.push(format!(
                    "the admin socket accepts {} (--allow-admin {allow}): a host that \
                     reaches {admin} can stop the router with DISCONNECT",
                    match allow {
                        Allowlist::Any => "any address",
                        Allowlist::Only(_) => "addresses outside loopback",
                    }
                ));
            }
            let allow_text = allow.to_string();
            let allow = allow.into_blocks();
            let plain = if domain == "admin" {
                None
            } else {
                plain_users.clone()
            };
            let curve_keys = curve_by_domain.remove(domain);
            if !allow.is_empty() || plain.is_some() || curve_keys.is_some() {
                access_log.push(format!(
                    "access control on {domain}: {}{}",
                    if allow.is_empty() {
                        "any address".to_string()
                    } else {
                        format!("allow {allow_text}")
                    },
                    match (&plain, &curve_keys) {
                        (Some(u), _) =>
                            format!(", PLAIN credentials required ({} user(s))", u.len()),
                        (None, Some(k)) => format!(", CURVE encryption, {k}"),
                        (None, None) => String::new(),
                    }
                ));
                access.domains.insert(
                    domain.to_string(),
                    DomainPolicy {
                        allow,
                        plain_users: plain,
                        curve_keys,
                    },
                );
            }
        }
        if let Some(pair) = &access.curve_server {
            let clear: Vec<&str> = ["frontend", "backend", "admin"]
                .into_iter()
                .filter(|d| !access.is_curve(d))
                .collect();
            access_log.push(format!(
                "CURVE server key {}{}",
                pair.public,
                if clear.is_empty() {
                    String::new()
                } else {
                    format!("; in clear text: {}", clear.join(", "))
                }
            ));
        }
        let core = Config {
            hwm: s.pick(cli.hwm, "HWM", emq_router_core::config::DEFAULT_HWM)?,
            heartbeat_interval: secs_to_duration(hb, "--heartbeat-interval", false)?,
            heartbeat_liveness: liveness,
            max_attempts,
            retry_backoff_base: secs_to_duration(backoff, "--retry-backoff", true)?,
            retry_backoff_max: secs_to_duration(backoff_max, "--retry-backoff-max", true)?,
            drain_timeout: secs_to_duration(drain, "--drain-timeout", true)?,
            retain_finished: s.pick(cli.retain_finished, "RETAIN_FINISHED", 10_000)?,
            retain_for: secs_to_duration(retain_for, "--retain-for", true)?,
            retain_result_bytes: s.pick(cli.retain_result_bytes, "RETAIN_RESULT_BYTES", 8192)?,
            dead_letter_keep: s.pick(cli.dead_letter_keep, "DEAD_LETTER_KEEP", 10_000)?,
            results_keep: s.pick(cli.results_keep, "RESULTS_KEEP", 100_000)?,
            results_keep_bytes: s.pick(
                cli.results_keep_bytes,
                "RESULTS_KEEP_BYTES",
                256 * 1024 * 1024,
            )?,
            results_keep_for: secs_to_duration(results_keep_for, "--results-keep-for", true)?,
            default_queues,
            journal: journal.is_some(),
            max_message_size: usize::try_from(max_message_size).ok(),
            ..Config::default()
        };
        Ok(Options {
            frontend,
            backend,
            admin,
            journal,
            journal_default,
            lease,
            metrics,
            http,
            max_message_size,
            access,
            access_files: AccessFiles {
                plain_users: plain_users_file,
                curve: curve_sources,
            },
            access_log,
            access_warnings,
            core,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn settings(pairs: &[(&str, &str)]) -> Settings {
        let env: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        // No EVENTMQ_CONFIG_FILE: the default file is optional; a section
        // name no file uses keeps the host's /etc/eventmq.conf out of it.
        Settings::load_from("emq-router-test-no-section", &env).unwrap()
    }

    fn cli(args: &[&str]) -> Cli {
        Cli::try_parse_from(std::iter::once("emq-router").chain(args.iter().copied())).unwrap()
    }

    #[test]
    fn defaults_match_the_cli_contract() {
        let o = Options::resolve(cli(&[]), &settings(&[])).unwrap();
        assert_eq!(o.frontend, DEFAULT_FRONTEND);
        assert_eq!(o.backend, DEFAULT_BACKEND);
        assert_eq!(o.admin, DEFAULT_ADMIN);
        assert_eq!(o.core.hwm, 1_000_000);
        assert_eq!(o.core.heartbeat_interval, Duration::from_secs(3));
        assert_eq!(o.core.heartbeat_liveness, 3);
        assert_eq!(o.core.max_attempts, 5);
        assert_eq!(
            o.journal,
            emq_journal::resolve_journal_target(None),
            "the data-dir default"
        );
        assert_eq!(o.lease, LeaseConfig::default());
        assert!(o.journal_default);
        assert_eq!(o.core.journal, o.journal.is_some());
        assert_eq!(o.core.default_queues, QueueSpec::default());
    }

    #[test]
    fn environment_applies_and_flags_win() {
        let s = settings(&[
            ("EVENTMQ_FRONTEND_ADDR", "tcp://127.0.0.1:1"),
            ("EVENTMQ_BACKEND_ADDR", "tcp://127.0.0.1:2"),
            ("EVENTMQ_ADMINISTRATIVE_ADDR", "tcp://127.0.0.1:3"),
            ("EVENTMQ_HWM", "7"),
            ("EVENTMQ_HEARTBEAT_INTERVAL", "1.5"),
            ("EVENTMQ_QUEUES", r#"[[20, "high"], [10, "default"]]"#),
        ]);
        let o =
            Options::resolve(cli(&["--frontend", "tcp://127.0.0.1:9", "--hwm", "8"]), &s).unwrap();
        assert_eq!(o.frontend, "tcp://127.0.0.1:9");
        assert_eq!(o.backend, "tcp://127.0.0.1:2");
        assert_eq!(o.admin, "tcp://127.0.0.1:3");
        assert_eq!(o.core.hwm, 8);
        assert_eq!(o.core.heartbeat_interval, Duration::from_millis(1500));
        assert_eq!(o.core.default_queues.0[0], (20, "high".to_string()));
    }

    #[test]
    fn durations_take_units_from_flags_and_settings() {
        let s = settings(&[
            ("EVENTMQ_HEARTBEAT_INTERVAL", "500ms"),
            ("EVENTMQ_RETAIN_FOR", "2h"),
        ]);
        let o = Options::resolve(cli(&["--drain-timeout", "1m"]), &s).unwrap();
        assert_eq!(o.core.drain_timeout, Duration::from_secs(60));
        assert_eq!(o.core.heartbeat_interval, Duration::from_millis(500));
        assert_eq!(o.core.retain_for, Duration::from_secs(7200));
        assert!(Cli::try_parse_from(["emq-router", "--drain-timeout", "soon"]).is_err());
        let e = Options::resolve(cli(&[]), &settings(&[("EVENTMQ_RETAIN_FOR", "-1")])).unwrap_err();
        assert!(e.contains("EVENTMQ_RETAIN_FOR"), "{e}");
    }

    #[test]
    fn bad_values_are_clear_errors() {
        let e = Options::resolve(cli(&[]), &settings(&[("EVENTMQ_HWM", "lots")])).unwrap_err();
        assert!(e.contains("HWM") && e.contains("lots"), "{e}");
        let e = Options::resolve(cli(&["--backend", "localhost:1"]), &settings(&[])).unwrap_err();
        assert!(e.contains("tcp://"), "{e}");
        assert!(Options::resolve(cli(&["--heartbeat-interval", "0"]), &settings(&[])).is_err());
        assert!(Options::resolve(cli(&["--max-attempts", "0"]), &settings(&[])).is_err());
        assert!(Cli::try_parse_from(["emq-router", "--hwm", "-1"]).is_err());
    }

    #[test]
    fn journal_flag_selects_a_file_or_none() {
        let o = Options::resolve(cli(&["--journal", "/tmp/x/j.sqlite"]), &settings(&[])).unwrap();
        assert_eq!(o.journal, JournalTarget::Sqlite("/tmp/x/j.sqlite".into()));
        assert!(o.core.journal);
        let url = "postgresql://emq@127.0.0.1:5432/emq";
        let o = Options::resolve(cli(&[]), &settings(&[("EVENTMQ_JOURNAL", url)])).unwrap();
        assert_eq!(o.journal, JournalTarget::Postgres(url.into()));
        assert!(o.core.journal);
        let o = Options::resolve(
            cli(&["--journal", "none"]),
            &settings(&[("EVENTMQ_JOURNAL", "/tmp/y")]),
        )
        .unwrap();
        assert!(!o.journal.is_some());
    }

    #[test]
    fn lease_timers_come_from_flags_or_settings_and_must_fit() {
        let o = Options::resolve(
            cli(&["--lease-ttl", "2"]),
            &settings(&[("EVENTMQ_LEASE_RENEW", "0.5")]),
        )
        .unwrap();
        assert_eq!(o.lease.ttl, Duration::from_secs(2));
        assert_eq!(o.lease.renew_every, Duration::from_millis(500));
        assert_eq!(o.lease.retry_every, Duration::from_millis(250));
        let e = Options::resolve(
            cli(&["--lease-ttl", "1", "--lease-renew", "1"]),
            &settings(&[]),
        )
        .unwrap_err();
        assert!(e.contains("half"), "{e}");
        assert!(Options::resolve(cli(&["--lease-ttl", "0"]), &settings(&[])).is_err());
    }

    #[test]
    fn access_metrics_and_size_defaults_and_flags() {
        let o = Options::resolve(cli(&[]), &settings(&[])).unwrap();
        assert_eq!(o.max_message_size, 16 * 1024 * 1024);
        assert_eq!(o.core.max_message_size, Some(16 * 1024 * 1024));
        assert_eq!(o.socket_max_message_size(), 32 * 1024 * 1024);
        assert!(o.metrics.is_none());
        // Only the admin socket is guarded by default (loopback).
        assert_eq!(o.access.domains.len(), 1);
        let admin = &o.access.domains["admin"];
        assert!(admin
            .allow
            .iter()
            .any(|b| b.contains("127.0.0.1".parse().unwrap())));
        assert!(admin
            .allow
            .iter()
            .any(|b| b.contains("::1".parse().unwrap())));
        assert!(!admin
            .allow
            .iter()
            .any(|b| b.contains("10.0.0.1".parse().unwrap())));
        let o = Options::resolve(
            cli(&[
                "--allow-frontend",
                "10.0.0.0/8, 127.0.0.1",
                "--allow-admin",
                "any",
                "--max-message-size",
                "0",
            ]),
            &settings(&[
                ("EVENTMQ_METRICS_ADDR", "127.0.0.1:9464"),
                ("EVENTMQ_ALLOW_BACKEND", "192.168.1.0/24"),
            ]),
        )
        .unwrap();
        assert_eq!(o.metrics.as_deref(), Some("127.0.0.1:9464"));
        assert_eq!(o.max_message_size, -1);
        assert_eq!(o.core.max_message_size, None);
        assert_eq!(o.socket_max_message_size(), -1);
        assert!(!o.access.domains.contains_key("admin"));
        assert_eq!(o.access.domains["frontend"].allow.len(), 2);
        assert!(o.access.domains["backend"].allow[0].contains("192.168.1.7".parse().unwrap()));
        let e =
            Options::resolve(cli(&["--allow-backend", "10.0.0.0/99"]), &settings(&[])).unwrap_err();
        assert!(e.contains("--allow-backend"), "{e}");
        let e = Options::resolve(
            cli(&["--plain-users", "/nonexistent/users"]),
            &settings(&[]),
        )
        .unwrap_err();
        assert!(e.contains("/nonexistent/users"), "{e}");
    }

    #[test]
    fn an_empty_allow_list_is_an_error_naming_the_flag() {
        for empty in ["", ",", " , "] {
            for flag in ["--allow-admin", "--allow-frontend", "--allow-backend"] {
                let e = Options::resolve(cli(&[flag, empty]), &settings(&[])).unwrap_err();
                assert!(
                    e.starts_with(&format!("{flag}: empty list")) && e.contains("\"any\""),
                    "{flag} {empty:?}: {e}"
                );
            }
        }
        for (key, flag) in [
            ("EVENTMQ_ALLOW_ADMIN", "--allow-admin"),
            ("EVENTMQ_ALLOW_BACKEND", "--allow-backend"),
        ] {
            let e = Options::resolve(cli(&[]), &settings(&[(key, "")])).unwrap_err();
            assert!(
                e.starts_with(flag) && e.contains(key) && e.contains("empty list"),
                "{e}"
            );
        }
    }

    #[test]
    fn an_admin_socket_open_to_any_address_is_said_and_warned_about() {
        let o = Options::resolve(cli(&[]), &settings(&[])).unwrap();
        assert!(o.access_warnings.is_empty(), "{:?}", o.access_warnings);
        assert_eq!(
            o.access_log,
            ["access control on admin: allow 127.0.0.0/8,::1"]
        );

        let o = Options::resolve(cli(&["--allow-admin", "any"]), &settings(&[])).unwrap();
        assert!(!o.access.domains.contains_key("admin"));
        assert_eq!(o.access_warnings.len(), 1);
        assert!(
            o.access_warnings[0].contains("any address")
                && o.access_warnings[0].contains("--allow-admin any"),
            "{:?}",
            o.access_warnings
        );

        let o = Options::resolve(
            cli(&[]),
            &settings(&[("EVENTMQ_ALLOW_ADMIN", "0.0.0.0/0,::/0")]),
        )
        .unwrap();
        let admin = &o.access.domains["admin"].allow;
        assert!(admin
            .iter()
            .any(|b| b.contains("10.0.0.1".parse().unwrap())));
        assert!(admin
            .iter()
            .any(|b| b.contains("2001:db8::1".parse().unwrap())));
        assert_eq!(o.access_warnings.len(), 1);
        assert!(
            o.access_warnings[0].contains("outside loopback"),
            "{:?}",
            o.access_warnings
        );

        // Loopback-only admin lists, and open frontends, are no warning.
        let o = Options::resolve(
            cli(&["--allow-admin", "127.0.0.1", "--allow-frontend", "any"]),
            &settings(&[]),
        )
        .unwrap();
        assert!(o.access_warnings.is_empty(), "{:?}", o.access_warnings);
    }

    #[test]
    fn plain_users_guard_frontend_and_backend_not_admin() {
        let f = std::env::temp_dir().join(format!("emq-router-users-{}", std::process::id()));
        std::fs::write(&f, "u:p\n").unwrap();
        let o =
            Options::resolve(cli(&["--plain-users", f.to_str().unwrap()]), &settings(&[])).unwrap();
        std::fs::remove_file(&f).unwrap();
        for d in ["frontend", "backend"] {
            let users = o.access.domains[d].plain_users.as_ref().unwrap();
            assert_eq!(users.get("u").map(String::as_str), Some("p"));
        }
        assert!(o.access.domains["admin"].plain_users.is_none());
    }

    #[test]
    fn curve_keys_make_curve_sockets_with_the_router_key_pair() {
        use emq_transport::curve::{generate, write_key_pair};
        let dir = std::env::temp_dir().join(format!("emq-router-curve-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let clients = dir.join("clients");
        std::fs::create_dir_all(&clients).unwrap();
        let server = generate().unwrap();
        let (_, secret) = write_key_pair(&dir.join("router"), &server, false).unwrap();
        let alice = generate().unwrap();
        write_key_pair(&clients.join("alice"), &alice, false).unwrap();
        let secret = secret.to_str().unwrap();
        let clients = clients.to_str().unwrap();

        // --curve-keys: every socket is CURVE, with the admin allowlist kept
        let o = Options::resolve(
            cli(&["--curve-secret-key-file", secret, "--curve-keys", clients]),
            &settings(&[]),
        )
        .unwrap();
        assert_eq!(o.access.curve_server.as_ref(), Some(&server));
        for d in ["frontend", "backend", "admin"] {
            assert!(o.access.is_curve(d), "{d}");
            let keys = o.access.domains[d].curve_keys.as_ref().unwrap();
            assert_eq!(keys.admits(&alice.public), Some("alice"));
        }
        assert!(!o.access.domains["admin"].allow.is_empty());
        assert!(o
            .access_log
            .iter()
            .any(|l| l.contains(&server.public.to_string())));

        // per socket, from the environment; `none` keeps one in clear text
        let o = Options::resolve(
            cli(&["--curve-admin-keys", "none"]),
            &settings(&[
                ("EVENTMQ_CURVE_SECRET_KEY_FILE", secret),
                ("EVENTMQ_CURVE_KEYS", clients),
                ("EVENTMQ_CURVE_BACKEND_KEYS", "any"),
            ]),
        )
        .unwrap();
        assert!(o.access.is_curve("frontend") && !o.access.is_curve("admin"));
        assert_eq!(
            o.access.domains["backend"].curve_keys,
            Some(emq_transport::curve::AuthorisedKeys::Any)
        );
        assert!(o
            .access_log
            .iter()
            .any(|l| l.contains("in clear text: admin")));

        // what does not go together
        let e = Options::resolve(cli(&["--curve-keys", clients]), &settings(&[])).unwrap_err();
        assert!(e.contains("--curve-secret-key-file"), "{e}");
        let e = Options::resolve(cli(&["--curve-secret-key-file", secret]), &settings(&[]))
            .unwrap_err();
        assert!(e.contains("no socket has authorised client keys"), "{e}");
        let users = dir.join("users");
        std::fs::write(&users, "u:p\n").unwrap();
        let e = Options::resolve(
            cli(&[
                "--curve-secret-key-file",
                secret,
                "--curve-frontend-keys",
                clients,
                "--plain-users",
                users.to_str().unwrap(),
            ]),
            &settings(&[]),
        )
        .unwrap_err();
        assert!(e.contains("one mechanism"), "{e}");
        let e = Options::resolve(
            cli(&[
                "--curve-secret-key-file",
                secret,
                "--curve-keys",
                "/nonexistent",
            ]),
            &settings(&[]),
        )
        .unwrap_err();
        assert!(
            e.starts_with("--curve-keys") && e.contains("/nonexistent"),
            "{e}"
        );
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(secret, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = Options::resolve(
            cli(&["--curve-secret-key-file", secret, "--curve-keys", "any"]),
            &settings(&[]),
        )
        .unwrap_err();
        assert!(e.contains("chmod 600"), "{e}");
        std::fs::set_permissions(secret, std::fs::Permissions::from_mode(0o600)).unwrap();

        // SIGHUP's reload sees a key added to the directory
        let o = Options::resolve(
            cli(&[
                "--curve-secret-key-file",
                secret,
                "--curve-frontend-keys",
                clients,
            ]),
            &settings(&[]),
        )
        .unwrap();
        let bob = generate().unwrap();
        write_key_pair(&std::path::Path::new(clients).join("bob"), &bob, false).unwrap();
        let (next, log) = o.access_files.reload(&o.access).unwrap();
        assert_eq!(
            next.domains["frontend"]
                .curve_keys
                .as_ref()
                .unwrap()
                .admits(&bob.public),
            Some("bob")
        );
        assert!(log[0].contains("2 authorised key(s)"), "{log:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn http_takes_a_token_file_and_read_only_from_flags_or_settings() {
        let o = Options::resolve(cli(&[]), &settings(&[])).unwrap();
        assert!(o.http.is_none());
        let f = std::env::temp_dir().join(format!("emq-router-token-{}", std::process::id()));
        std::fs::write(&f, "  tok\n").unwrap();
        let o = Options::resolve(
            cli(&[
                "--http",
                "127.0.0.1:0",
                "--http-token-file",
                f.to_str().unwrap(),
            ]),
            &settings(&[("EVENTMQ_HTTP_READ_ONLY", "true")]),
        )
        .unwrap();
        let (addr, access) = o.http.unwrap();
        assert_eq!(addr, "127.0.0.1:0");
        assert_eq!(access.token.as_deref(), Some("tok"));
        assert!(access.read_only);
        std::fs::write(&f, "\n").unwrap();
        let e = Options::resolve(
            cli(&[
                "--http",
                "127.0.0.1:0",
                "--http-token-file",
                f.to_str().unwrap(),
            ]),
            &settings(&[]),
        )
        .unwrap_err();
        std::fs::remove_file(&f).unwrap();
        assert!(e.contains("empty"), "{e}");
        let o =
            Options::resolve(cli(&[]), &settings(&[("EVENTMQ_HTTP_ADDR", "127.0.0.1:9")])).unwrap();
        assert!(!o.http.unwrap().1.read_only);
    }

    #[test]
    fn journal_default_is_the_data_dir_and_none_turns_it_off() {
        let o = Options::resolve(cli(&["--journal", "none"]), &settings(&[])).unwrap();
        assert!(!o.journal.is_some() && !o.core.journal && !o.journal_default);
        let o = Options::resolve(cli(&[]), &settings(&[("EVENTMQ_JOURNAL", "NONE")])).unwrap();
        assert!(!o.journal.is_some() && !o.journal_default);
    }
}
