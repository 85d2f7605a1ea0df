//! The command line as clap parses it: as close to what was typed as
//! possible. [`super::hiargs`] checks it and turns it into a [`super::Plan`].

use std::time::Duration;

use clap::builder::TypedValueParser;
use clap::{ArgGroup, Args, Parser, Subcommand};
use emq_cli_support::{parse_positive_duration, CurveArgs, LogArgs};
use emqp_proto::admin::{IntoEnumIterator, ViewState};
use emqp_proto::flow::RateChange;

/// The admin address 0.3.13 and emq routers bind by default.
pub const DEFAULT_ADMIN: &str = "tcp://127.0.0.1:47293";
/// Default `--timeout`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);
/// The router's largest page.
pub const MAX_PAGE: u32 = 1000;

const LONG_ABOUT: &str = "\
Operate an EventMQ (eMQP/1.0) router through its admin socket: look at its
status, queues, workers, schedules, jobs and dead letters, cancel jobs, retry
or discard dead letters, pause, resume or purge queues, set flow-control
limits, drain workers, remove
schedules and shut it down.

emq-cli connects a DEALER to the router's administrative socket and asks
STATUS first. An emq router (its STATUS has a \"counters\" object) is then sent
ADMIN [{\"op\": ...}] and answers REPLY [answer, msgid]; the answer is
{\"ok\": true, ...} or {\"ok\": false, \"error\": {\"kind\", \"message\"}}. An
EventMQ 0.3.13 router has no ADMIN: status, workers, schedules and shutdown use
its own STATUS, ROUTER_SHOW_WORKERS, ROUTER_SHOW_SCHEDULERS and DISCONNECT,
every other command exits 4.

Output: tables and `key: value` lines for people (times as ages, e.g. 3m12s
ago, or in 40s); with --json the router's answer object, unchanged, on one
line (jobs --all and dead list --all: the pages merged into one object, the
lists concatenated; 0.3.13 shutdown: {\"ok\":true,\"shutting_down\":true}).

The admin address: --admin, else $EVENTMQ_ADMINISTRATIVE_ADDR, else
ADMINISTRATIVE_ADDR from the INI file named by $EVENTMQ_CONFIG_FILE (default
/etc/eventmq.conf), section [cli], then [router], then [global], else
tcp://127.0.0.1:47293. A wildcard host (tcp://*:P, tcp://0.0.0.0:P) is
reached at 127.0.0.1. A comma-separated list (ADDR,ADDR) is a failover list:
emq-cli connects to every address and the router that serves answers (a
standby router binds nothing). The admin socket takes no PLAIN credentials (the router
guards it with --allow-admin, loopback by default).

Encryption: for a router whose admin socket is CURVE, give --curve-server-key
(the router's NAME.key, or the key as Z85 text) and --curve-secret-key-file
(our key pair, whose public key the router lists); or
$EVENTMQ_CURVE_SERVER_KEY and $EVENTMQ_CURVE_SECRET_KEY_FILE, or
CURVE_SERVER_KEY and CURVE_SECRET_KEY_FILE in the config file's [cli]
section. `emq-cli keygen NAME` makes a key pair: NAME.key (the public key, to
hand out) and NAME.key_secret (both keys), each readable by its owner only; a
secret key file its group or others may read is refused everywhere.

Exit codes:
  0  ok
  1  no answer within --timeout, connection or internal error
  2  usage error (bad or conflicting arguments, bad config file, a purge or
     dead discard --all not confirmed)
  3  the router refused the request (not-found, conflict, unsupported,
     bad-request, journal-unavailable, shutting-down); its message is printed
  4  the router does not support the command (EventMQ 0.3.13)";

const EXAMPLES: &str = "\
Examples:
  emq-cli status
  emq-cli queues
  emq-cli jobs --queue email --state failed --limit 20
  emq-cli jobs --contains customer-42 --all --json | jq '.jobs[].msgid'
  emq-cli job 4f0c…-…                   # one job, with its result or error
  emq-cli cancel 4f0c…-…
  emq-cli dead list --queue email
  emq-cli dead retry --all --queue email
  emq-cli dead discard --all --contains test --yes
  emq-cli pause email; emq-cli resume email
  emq-cli limits set email --concurrency-per-key 2 --rate 100/1 --fair
  emq-cli limits show email             # keys: running, waiting, why held
  emq-cli limits clear email
  emq-cli drain 0b6e…-…                 # a worker identity from `emq-cli workers`
  emq-cli --admin tcp://10.0.0.5:47293 shutdown
  emq-cli keygen /etc/emq/router        # router.key, router.key_secret (0600)
  emq-cli --curve-server-key /etc/emq/router.key \\
      --curve-secret-key-file ~/.emq/me.key_secret status
  emq-cli completions bash > /etc/bash_completion.d/emq-cli
  emq-cli man > emq-cli.1";

/// emq-cli's arguments.
#[derive(Parser, Debug, Clone)]
#[command(
    name = "emq-cli",
    version,
    about = "Operate an EventMQ (eMQP/1.0) router: status, queues, workers, jobs, dead letters, schedules",
    long_about = LONG_ABOUT,
    after_help = "Exit codes: 0 ok, 1 no answer/connection error, 2 usage, 3 refused by the \
                  router, 4 not supported by this router (0.3.13). --help shows more.",
    after_long_help = EXAMPLES,
    propagate_version = true,
)]
pub struct Cli {
    /// The router's administrative socket; a comma-separated list is a
    /// failover list (the router that serves answers)
    /// [default: $EVENTMQ_ADMINISTRATIVE_ADDR, else the config file, else
    /// tcp://127.0.0.1:47293]
    #[arg(long, short = 'a', value_name = "ADDR[,ADDR...]", global = true)]
    pub admin: Option<String>,

    /// Seconds to wait for each answer from the router
    #[arg(long, short = 't', value_name = "SECS", global = true, value_parser = parse_positive_duration)]
    pub timeout: Option<Duration>,

    /// Print the router's answer as JSON instead of tables
    #[arg(long, global = true)]
    pub json: bool,

    // CURVE keys, for a router whose admin socket is CURVE.
    #[command(flatten)]
    pub curve: CurveArgs,

    #[command(flatten)]
    pub log: LogArgs,

    #[command(subcommand)]
    pub command: CliCommand,
}

/// What each count of `status` and `queues` (and the dashboard) means:
/// one definition everywhere.
pub const COUNTS_LEGEND: &str = "\
What the counts mean (the same in `status`, `queues` and the dashboard):
  WAITING/DEPTH  buffered, waiting for a free worker slot
  IN-FLIGHT      on a job manager now (RUNNING in status)
  UNFINISHED     accepted, not finished: waiting + in flight + retrying + delayed
  RETRYING       failed, waiting for their next try (retry-count)
  DELAYED        accepted with a delay, not due yet
  FINISHED       DONE + FAILED + DEAD (status: per queue; since the router started)
  DONE           finished ok
  FAILED         finished failed with no retry to try (retry-count 0)
  DEAD           dead-lettered: retries or deliveries exhausted (see `dead list`)
Cancelled jobs are in none of the finished counts. The counters block of
`status` counts the same events for the whole router: completed = DONE +
FAILED, failed = FAILED, dead lettered = DEAD.";

/// The subcommands.
#[derive(Subcommand, Debug, Clone)]
pub enum CliCommand {
    /// The router's status: version, journal, counters, and per queue the
    /// waiting, unfinished and finished jobs (0.3.13: STATUS)
    #[command(after_help = COUNTS_LEGEND)]
    Status,
    /// Every queue: depth, in flight, retrying, delayed, oldest job, paused,
    /// finished (done, failed, dead-lettered), workers
    #[command(after_help = COUNTS_LEGEND)]
    Queues,
    /// Connected workers: queues, credit (jobs the router may hand it now:
    /// its READYs not used, i.e. free slots plus its job manager's credit
    /// window), jobs in flight (running or held), draining (0.3.13:
    /// ROUTER_SHOW_WORKERS)
    Workers,
    /// The router's schedules and their next run (0.3.13:
    /// ROUTER_SHOW_SCHEDULERS, the connected scheduler peers)
    Schedules,
    /// One job: state, attempts, times, worker, last error, result, payload
    Job {
        /// The job's msgid (as emq-sender printed it), or its unique
        /// beginning (at least 4 characters, as git takes a commit's)
        msgid: String,
    },
    /// List jobs, newest first: one page, or every page with --all
    Jobs(JobsArgs),
    /// One workflow (WORKFLOW, e.g. a Python chain/group/chord) as a tree:
    /// each node's state, times, result or error (`cancel ID` cancels it)
    Workflow {
        /// The workflow's id (the msgid its client submitted it under)
        id: String,
    },
    /// One batch (BATCH, e.g. a Python `client.batch(...)`): its counts
    /// (pending, succeeded, failed, total), state and callbacks
    Batch {
        /// The batch's id (the msgid its client opened it under)
        id: String,
    },
    /// Cancel a job (a running job is stopped by its job manager), a
    /// workflow or a batch (each of its unfinished jobs)
    Cancel {
        /// The job's msgid, or its unique beginning (4 characters or more);
        /// or a workflow's or batch's id
        msgid: String,
    },
    /// Dead letters: jobs that failed for good
    ///
    /// A job is dead-lettered when it fails with its `retry-count:N`
    /// retries spent (only jobs with N > 0; its last error is kept, across
    /// restarts), or when its deliveries were lost to dying workers the
    /// router's --max-attempts times (default 5). A job without
    /// `retry-count` (or with `retry-count:0`) that fails is finished
    /// `failed`, not dead-lettered: `emq-cli jobs --state failed` lists it.
    #[command(subcommand)]
    Dead(DeadCommand),
    /// Pause a queue: it still accepts and buffers jobs, and dispatches none
    Pause {
        /// The queue
        queue: String,
    },
    /// Resume a paused queue
    Resume {
        /// The queue
        queue: String,
    },
    /// Remove every waiting job (queued, delayed, retrying) of a queue; jobs
    /// in flight are not touched. Asks for confirmation unless --yes
    Purge {
        /// The queue
        queue: String,
        /// Do not ask for confirmation (needed when stdin is not a terminal)
        #[arg(long, short = 'y')]
        yes: bool,
    },
    /// Run a failed or cancelled job again, same msgid (RQ's requeue,
    /// Sidekiq's "Retry now"): a retained finished job is accepted again,
    /// a dead letter retried (as `dead retry MSGID`)
    Requeue {
        /// The job's msgid, or its unique beginning (4 characters or more)
        msgid: String,
    },
    /// Drain a worker: it finishes what it runs and gets nothing new
    Drain {
        /// The worker's identity, or its NAME@HOST or NAME when only one
        /// worker has it (see `emq-cli workers`)
        worker: String,
    },
    /// Undrain a worker: it gets jobs again
    Undrain {
        /// The worker's identity, NAME@HOST or NAME
        worker: String,
    },
    /// Remove a schedule by id (see `emq-cli schedules`)
    Unschedule {
        /// The schedule's id
        id: String,
    },
    /// Shut the router down in order: it finishes its jobs in flight and
    /// exits (0.3.13: DISCONNECT)
    Shutdown,
    /// Flow control: a queue's concurrency and rate limits, global and per
    /// `key:K`, and fairness across keys (docs/PROTOCOL.md, "Flow control")
    #[command(subcommand)]
    Limits(LimitsCommand),
    /// Print a shell completion script for SHELL to stdout
    Completions {
        /// The shell
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print emq-cli's man page (roff) to stdout
    Man,
    /// Print the control plane's vocabulary as JSON: each op with its
    /// arguments and whether it changes state, the error kinds, and every
    /// setting's name, older names and sections (for clients in other
    /// languages to check theirs against; docs/PROTOCOL.md)
    #[command(hide = true)]
    Vocabulary,
    /// Make a CURVE key pair (as zmq_curve_keypair, Z85): NAME.key holds
    /// the public key, NAME.key_secret both keys; both are created
    /// readable by their owner only (0600). Prints the public key
    Keygen {
        /// Path and name of the pair, e.g. /etc/emq/router
        name: std::path::PathBuf,
        /// Replace existing files
        #[arg(long)]
        force: bool,
    },
}

/// `jobs` arguments.
#[derive(Args, Debug, Clone)]
pub struct JobsArgs {
    /// Only jobs of this queue
    #[arg(long, short = 'q', value_name = "Q")]
    pub queue: Option<String>,
    /// Only jobs in this state
    #[arg(long, short = 's', value_name = "S", value_parser = view_state())]
    pub state: Option<ViewState>,
    /// Only jobs whose payload (MSG frame) contains TEXT
    #[arg(long, short = 'c', value_name = "TEXT")]
    pub contains: Option<String>,
    /// Oldest first (default: newest first)
    #[arg(long)]
    pub oldest: bool,
    /// Jobs per page, at most 1000 [default: 50]
    #[arg(long, short = 'n', value_name = "N", value_parser = parse_limit)]
    pub limit: Option<u32>,
    /// Follow the router's cursor through every page (at most 1,000 pages)
    #[arg(long)]
    pub all: bool,
}

/// `limits` subcommands.
#[derive(Subcommand, Debug, Clone)]
pub enum LimitsCommand {
    /// Set a queue's policy: each option given replaces that limit, the
    /// others are kept (0 or `none` removes a limit). Journaled
    #[command(group(ArgGroup::new("change").required(true).multiple(true).args([
        "concurrency", "concurrency_per_key", "rate", "rate_per_key", "fair", "no_fair"
    ])))]
    Set {
        /// The queue
        queue: String,
        /// Jobs of the queue running at once (0: no limit)
        #[arg(long, value_name = "N")]
        concurrency: Option<u32>,
        /// Jobs of one key running at once (0: no limit)
        #[arg(long, value_name = "N")]
        concurrency_per_key: Option<u32>,
        /// Dispatches of the queue: N per SECS seconds, bursts of up to N
        /// (`none`: no limit)
        #[arg(long, value_name = "N/SECS", value_parser = parse_rate)]
        rate: Option<RateChange>,
        /// Dispatches of one key: N per SECS seconds (`none`: no limit)
        #[arg(long, value_name = "N/SECS", value_parser = parse_rate)]
        rate_per_key: Option<RateChange>,
        /// Keys take turns within a priority (round robin)
        #[arg(long, conflicts_with = "no_fair")]
        fair: bool,
        /// The oldest job goes first, whatever its key (the default)
        #[arg(long)]
        no_fair: bool,
    },
    /// The policies (one queue's, or every one) with their keys: running,
    /// waiting, and why a key is held
    Show {
        /// Only this queue
        queue: Option<String>,
    },
    /// Remove a queue's policy: its held jobs go as slots allow. Journaled
    Clear {
        /// The queue
        queue: String,
    },
}

fn parse_rate(s: &str) -> Result<RateChange, String> {
    RateChange::parse(s).map_err(|e| e.to_string())
}

/// `dead` subcommands.
#[derive(Subcommand, Debug, Clone)]
pub enum DeadCommand {
    /// List dead letters, newest first
    List {
        /// Only dead letters of this queue
        #[arg(long, short = 'q', value_name = "Q")]
        queue: Option<String>,
        /// Only dead letters whose payload contains TEXT
        #[arg(long, short = 'c', value_name = "TEXT")]
        contains: Option<String>,
        /// Dead letters per page, at most 1000 [default: 50]
        #[arg(long, short = 'n', value_name = "N", value_parser = parse_limit)]
        limit: Option<u32>,
        /// Follow the router's cursor through every page (at most 1,000 pages)
        #[arg(long)]
        all: bool,
    },
    /// Put dead letters back on their queue (same msgid, attempts reset)
    Retry(DeadTarget),
    /// Drop dead letters for good (with --all: asks for confirmation
    /// unless --yes)
    Discard {
        #[command(flatten)]
        target: DeadTarget,
        /// Do not ask for confirmation (needed with --all when stdin is not
        /// a terminal)
        #[arg(long, short = 'y')]
        yes: bool,
    },
}

/// One dead letter by msgid, or every one matching the filters.
#[derive(Args, Debug, Clone)]
#[command(group(ArgGroup::new("which").required(true).args(["msgid", "all"])))]
pub struct DeadTarget {
    /// The dead letter's msgid, or its unique beginning (4 characters or
    /// more)
    pub msgid: Option<String>,
    /// Every dead letter (narrowed by --queue and --contains)
    #[arg(long)]
    pub all: bool,
    /// With --all: only dead letters of this queue
    #[arg(long, short = 'q', value_name = "Q")]
    pub queue: Option<String>,
    /// With --all: only dead letters whose payload contains TEXT
    #[arg(long, short = 'c', value_name = "TEXT")]
    pub contains: Option<String>,
}

/// `--state`: a job state as the router names it (the possible values
/// come from the vocabulary).
fn view_state() -> impl TypedValueParser<Value = ViewState> {
    clap::builder::PossibleValuesParser::new(ViewState::iter().map(ViewState::as_str))
        .try_map(|s| s.parse::<ViewState>())
}

fn parse_limit(s: &str) -> Result<u32, String> {
    match s.trim().parse::<u32>() {
        Ok(n) if (1..=MAX_PAGE).contains(&n) => Ok(n),
        _ => Err(format!(
            "{s:?}: must be a whole number from 1 to {MAX_PAGE}"
        )),
    }
}
