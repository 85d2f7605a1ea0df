//! The command line as clap parses it, as close to what was typed as
//! possible; [`super::hiargs`] checks it with the environment and the
//! config file into a [`super::Plan`].

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use emq_cli_support::{parse_duration, AuthArgs, CurveArgs, LogArgs, OtlpArgs};

const AFTER_HELP: &str = "\
Settings come from flags, then EVENTMQ_* environment variables, then the
[jobmanager] (and [global]) section of $EVENTMQ_CONFIG_FILE
(default /etc/eventmq.conf); flags win. Keys: BACKEND_ADDR, the router's
own name for its worker socket (or 0.3.13's WORKER_ADDR; a wildcard host
such as tcp://*:47290 is reached at 127.0.0.1), BACKEND_ADDR_FAILOVER (or
WORKER_ADDR_FAILOVER), QUEUES, CONCURRENT_JOBS, HEARTBEAT_INTERVAL,
HEARTBEAT_LIVENESS, KILL_GRACE_PERIOD, PYTHON, MAX_MESSAGE_SIZE,
GLOBAL_TIMEOUT, SUBPROCESS_SETUP_FUNC (or the deprecated SETUP_PATH and
SETUP_CALLABLE), JOB_ENTRY_FUNC, JOB_EXIT_FUNC, MAX_JOB_COUNT, PREFETCH,
PREFETCH_CAP, CURVE_SERVER_KEY, CURVE_SECRET_KEY_FILE. A key in the file
that no emq tool reads is logged as a warning with the nearest known name.

Credit window (--prefetch): at most --concurrency jobs ever run, but the
job manager may hold more (READYs beyond its free slots, jobs received while
every slot is busy), so that slots do not idle while a READY travels to the
router and a job comes back. \"auto\" sizes it from the measured job time
and round trip (2 x (slots - 1) x round trip / job time, at most
--prefetch-cap and at most slots - 1, so that a burst of jobs that turn out
long never waits here more than one job deep while another job manager
idles): short jobs get credit ahead, jobs long compared with the round trip
get none. 0 turns it off (one READY per free slot, as EventMQ
0.3.13); N holds N more. Held jobs are the router's in-flight jobs:
redelivered if this job manager dies, run before it leaves (KBYE, SIGTERM
within --grace-period).

Jobs (the REQUEST message frame):
  [\"run\", {\"path\": \"pkg.mod\" | \"pkg.mod:Class\", \"callable\": NAME, \"args\": [..],
           \"kwargs\": {..}, \"class_args\": [..], \"class_kwargs\": {..}}]   EventMQ Python job
  [\"shell\", {\"argv\": [..], \"stdin\": STR, \"env\": {..}, \"cwd\": DIR}]       a command
  [\"call\", {\"handler\": \"echo\" | \"noop\" | \"sleep\", \"args\": ANY}]       a Rust handler (echo, noop: inline; sleep: args seconds)
Every job gets REPLY [result, request msgid, ok|failed] before its slot's READY;
result is {\"value\": ..} or {\"error\": {\"kind\", \"message\", ..}}.
A job's timeout: its timeout:N header (N > 0), else a \"timeout\": SECS field
in its {fields}, else --global-timeout; past it the job is killed and replied
failed (timeout). retry-count:N is the router's: each delivered job runs once
here and gets one REPLY.
A result bigger than --max-message-size is replied failed (result-too-large).

Router authentication: for a router started with --plain-users, give
--username and --password-file (or --password; or $EMQ_USERNAME and
$EMQ_PASSWORD); the job manager then connects as a ZMQ PLAIN client. Wrong
credentials look like a router that never ACKs the INFORM (the router logs the
refusal). For a router whose backend is CURVE (encrypted), give
--curve-server-key (the router's router.key) and --curve-secret-key-file
(this job manager's key pair from `emq-cli keygen`, whose public key the
router lists); an unknown key looks the same as wrong PLAIN credentials.

Logs go to stderr (RUST_LOG overrides the default level, info).
SIGTERM/SIGINT: KBYE to the router, running jobs get --grace-period, exit 0.";

/// Run EventMQ jobs (Python `run`, `shell`, Rust `call`) for an eMQP/1.0 router.
#[derive(Parser, Debug)]
#[command(name = "emq-jobmanager", version, after_help = AFTER_HELP)]
pub struct Cli {
    /// Router backend endpoint; a comma-separated list is a failover list,
    /// tried in turn on each reconnect (WORKER_ADDR)
    /// [default: tcp://127.0.0.1:47290]
    #[arg(
        short = 'B',
        long,
        visible_alias = "broker-addr",
        value_name = "ADDR[,ADDR...]"
    )]
    pub broker: Option<String>,

    /// Queues to serve, highest weight first: "default", "10:default,15:email",
    /// or 0.3.13's JSON '[[10, "default"]]'; several values are joined
    /// [default: default]
    #[arg(short = 'Q', long, num_args = 1.., value_name = "SPEC")]
    pub queues: Option<Vec<String>>,

    /// Number of jobs run at once (execution slots) (CONCURRENT_JOBS)
    /// [default: 4]
    #[arg(short = 'J', long, visible_alias = "jobs", value_name = "N")]
    pub concurrency: Option<usize>,

    /// Python interpreter for `run` jobs (one long-lived worker per slot;
    /// PYTHONPATH is passed through) [default: python3]
    #[arg(long, value_name = "PY")]
    pub python: Option<String>,

    /// Seconds running jobs get to finish after SIGTERM before they are
    /// killed (KILL_GRACE_PERIOD) [default: 30]
    #[arg(long, value_name = "SECS", value_parser = parse_duration)]
    pub grace_period: Option<Duration>,

    /// Seconds a job may run when it names no timeout (no timeout:N
    /// header, no "timeout" field); 0: no limit (GLOBAL_TIMEOUT)
    /// [default: 300]
    #[arg(long, value_name = "SECS", value_parser = parse_duration)]
    pub global_timeout: Option<Duration>,

    /// A Python function, pkg.module.function, called with no arguments
    /// once in each Python worker process before its first job, e.g. one
    /// that calls django.setup() (SUBPROCESS_SETUP_FUNC). If it raises, the
    /// worker logs it and runs jobs anyway
    #[arg(long, value_name = "PATH")]
    pub subprocess_setup_func: Option<String>,

    /// A Python function called with no arguments in the worker before
    /// every `run` job (JOB_ENTRY_FUNC); if it raises, the job fails
    /// without running
    #[arg(long, value_name = "PATH")]
    pub job_entry_func: Option<String>,

    /// A Python function called with no arguments in the worker after
    /// every `run` job, even a failed one (JOB_EXIT_FUNC); if it raises,
    /// that is logged and the job's result stands
    #[arg(long, value_name = "PATH")]
    pub job_exit_func: Option<String>,

    /// Jobs a Python worker process runs before it is replaced by a fresh
    /// one (MAX_JOB_COUNT) [default: 1024]
    #[arg(long, value_name = "N")]
    pub max_job_count: Option<u64>,

    /// Development: restart the Python workers when a .py file changes
    /// under the watched directories (--reload-dir, else the working
    /// directory and every PYTHONPATH entry); the next job runs the new
    /// code, a running job finishes on the old. Without it an edited module
    /// runs only after a restart (docs/DEPLOY.md)
    #[arg(long)]
    pub reload: bool,

    /// A directory --reload watches, recursively (repeatable; implies
    /// --reload)
    #[arg(long, value_name = "DIR")]
    pub reload_dir: Vec<PathBuf>,

    /// Seconds between heartbeats [default: 3]
    #[arg(long, value_name = "SECS", value_parser = parse_duration)]
    pub heartbeat_interval: Option<Duration>,

    /// Missed heartbeat intervals after which the router is considered gone
    /// and the job manager reconnects with a new identity [default: 3]
    #[arg(long, value_name = "N")]
    pub heartbeat_liveness: Option<u32>,

    /// Seconds to wait for the router's ACK of INFORM before trying a fresh
    /// connection [default: 5]
    #[arg(long, value_name = "SECS", value_parser = parse_duration)]
    pub ack_timeout: Option<Duration>,

    /// Seconds to wait before reconnecting after the router said KBYE
    /// [default: 1]
    #[arg(long, value_name = "SECS", value_parser = parse_duration)]
    pub reconnect_delay: Option<Duration>,

    /// The router's --max-message-size in bytes: a job whose result is
    /// bigger is answered with a failed result of kind result-too-large
    /// (the router would disconnect us for the frame). 0 or -1: no limit
    /// [env: EVENTMQ_MAX_MESSAGE_SIZE] [default: 16777216 (16 MiB)]
    #[arg(long, value_name = "BYTES", allow_negative_numbers = true)]
    pub max_message_size: Option<i64>,

    /// Credit beyond the free slots: auto (sized from measured job time
    /// and round trip), 0 (off: one READY per free slot) or N (always N
    /// more) [default: auto]
    #[arg(long, value_name = "auto|0|N")]
    pub prefetch: Option<String>,

    /// Upper bound of the adaptive credit window, in jobs; the window is
    /// never more than --concurrency - 1 either [default: 128]
    #[arg(long, value_name = "N")]
    pub prefetch_cap: Option<usize>,

    /// Config file (sets EVENTMQ_CONFIG_FILE)
    #[arg(short = 'C', long, value_name = "FILE")]
    pub config: Option<String>,

    /// A name for this job manager [setting: NAME]: in its logs, and sent
    /// to the router with its host, pid, slots and version, so that `emq-cli
    /// workers` and the dashboard show NAME@HOST — the same across
    /// reconnects, while the wire identity is a fresh uuid4 per connection
    #[arg(short = 'n', long)]
    pub name: Option<String>,

    #[command(flatten)]
    pub auth: AuthArgs,

    #[command(flatten)]
    pub curve: CurveArgs,

    #[command(flatten)]
    pub log: LogArgs,

    #[command(flatten)]
    pub otlp: OtlpArgs,
}
