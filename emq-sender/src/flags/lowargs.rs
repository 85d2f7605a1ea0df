//! The command line as clap parses it, as close to what was typed as
//! possible; [`super::hiargs`] checks it with the environment into a
//! [`super::Plan`].

use std::time::Duration;

use clap::{ArgGroup, Parser};
use emq_cli_support::{parse_positive_duration, AuthArgs, CurveArgs, LogArgs};

/// Default `--timeout` without `--wait`: how long to wait for the ack.
pub const DEFAULT_ACK_TIMEOUT: Duration = Duration::from_secs(10);
/// Default `--timeout` with `--wait`: how long to wait for the result.
pub const DEFAULT_WAIT_TIMEOUT: Duration = Duration::from_secs(60);
/// Default `--window`: outstanding messages in bulk mode.
pub const DEFAULT_WINDOW: usize = 10_000;

const LONG_ABOUT: &str = "\
Submit jobs to an EventMQ (eMQP/1.0) router: one job from the command line, or
many from standard input, one JSON job per line.

The job is given as MESSAGE_JSON (any JSON text, sent unchanged as the REQUEST's
MSG frame) or built by one of the convenience forms --call, --python, --shell.
With no MESSAGE_JSON and no convenience form (or MESSAGE_JSON '-'), jobs are
read from standard input, one per line, and submitted pipelined.

The sender connects a DEALER (uuid4 identity) to the router frontend and sends
REQUEST [queue, headers, message]. An emq router answers REPLY [msgid] when it
accepts the job, REJECT [msgid, reason, text] when it does not, and, for jobs
with the reply-requested header, RESULT [msgid, status, payload] when the job
has run.

Output: the msgid on acceptance; with --wait the result payload ({\"value\": ...}
or {\"error\": {...}}) as one line of JSON. In bulk mode one JSON line per job:
  {\"line\": N, \"msgid\": \"...\", \"status\": \"accepted\", \"result\": null}
status is one of accepted, sent (--no-ack), ok, failed, rejected (with reason
and text), uncertain (journal-uncertain, see exit code 1), timeout (with
accepted true/false) or invalid (with error); result is
the result payload with --wait. Lines come in the order answers arrive. A
progress line is shown on stderr when both stdout and stderr are terminals, and
a summary is printed on stderr at the end. --timeout counts per job from when
it was sent.

Exit codes:
  0  accepted (with --wait: the job finished ok; for a schedule: REPLY)
  1  connection or internal error; or the router could not tell whether it
     stored the job (REJECT journal-uncertain, sent again with the queue-full
     backoff, even with --fail-fast, until --timeout): it may run
  2  usage error (bad flag, MESSAGE_JSON or a bulk line that is not JSON, or
     a message over --max-message-size: not sent)
  3  rejected by the router (malformed, shutting-down, ...; queue-full only
     when the queue stayed full for --timeout, or at once with --fail-fast;
     for a schedule: any REJECT, e.g. a bad cron expression)
  4  the job failed (RESULT failed, or REJECT dead-lettered)
  5  timed out: no ack within --timeout (default 10 s), or with --wait no
     ack within 10 s (or --timeout if shorter) or no result within
     --timeout (default 60 s)
In bulk mode the most severe code seen wins, in the order 1, 2, 5, 3, 4, 0.

EventMQ 0.3.13 routers never acknowledge a job they had to buffer (no free
worker) and never send results back: the ack wait then times out (exit 5) even
though the job was queued, and --wait always times out. Against such a router
use --no-ack: fire and forget, exit 0 once the connection to the router is up
and the message is handed over (exit 5 if the router cannot be reached within
--timeout).

Schedules: --schedule-interval SECS or --schedule-cron EXPR (5 fields, minute
hour day-of-month month day-of-week, UTC) turn the job (MESSAGE_JSON, --call,
--python or --shell) into SCHEDULE [queue, headers, interval or -1, job, cron or
\"\"], as EventMQ 0.3.13's schedule() sends it; --unschedule sends UNSCHEDULE
with the same frames (give the same queue and job: the router matches schedules
on queue + job bytes; interval and cron may be left out). Jobs built by --call,
--python and --shell are then written as Python's json.dumps writes them, byte
for byte what 0.3.13's schedule() sends, so schedules made by Python clients can
be removed from here and the other way round. --nohaste adds the nohaste header
(first run one interval later, not at once), --run-count N the 0.3.13 header
run_count:N (N runs, then the schedule is removed). With no --header,
--nohaste or --run-count the headers are `guarantee`, 0.3.13's default
(--header '' sends none). The emq router answers REPLY [msgid] (accepted: the
msgid is printed, exit 0) or REJECT [msgid, malformed, text] (bad cron
expression etc.: the reason goes to stderr, exit 3); no answer within --timeout
(default 10 s) is exit 5. An EventMQ 0.3.13 router never answers SCHEDULE:
use --no-ack. --wait and --reply cannot be combined with schedules, nor jobs
from stdin.

Pub/sub: --publish TOPIC sends MESSAGE_JSON (or each line of stdin) as
PUBLISH [topic, message] to an emq-pubsub (or EventMQ 0.3.13 emq-pubsub)
process, which passes it on to every subscriber of a prefix of TOPIC. --broker
then names the pub/sub process's incoming address (default
$EVENTMQ_PUBLISHER_INCOMING_ADDR, else tcp://127.0.0.1:47298). Nothing answers
a PUBLISH: the msgid is printed and the exit code is 0 once the message is
handed to the pub/sub process's connection (5 if it cannot be reached within
--timeout); a message published while nobody subscribes is dropped by the
pub/sub process, by design. --publish takes no job form, queue, header,
--wait or schedule.

Authentication: for a router started with --plain-users, give --username and
--password-file (or --password, or $EMQ_USERNAME / $EMQ_PASSWORD): the DEALER
connects as a ZMQ PLAIN client. For a router whose frontend is CURVE
(encrypted), give --curve-server-key (the router's router.key) and
--curve-secret-key-file (our key pair from `emq-cli keygen`; the router lists
its public key). Wrong credentials or an unknown key look like a router that
does not answer (exit 5 after --timeout); the router logs the refusal.";

const EXAMPLES: &str = "\
Examples:
  # a built-in Rust handler; print the msgid once the router accepts it
  emq-sender --call echo --args '{\"hello\": \"world\"}'

  # wait for the result (prints {\"value\":{\"hello\":\"world\"}})
  emq-sender --wait --call echo --args '{\"hello\": \"world\"}'

  # a Python function, and a method of a class (0.3.13 \"run\" jobs)
  emq-sender --wait --python emq_example_jobs.add --args '[1, 2]'
  emq-sender --wait --python emq_example_jobs:Greeter.greet \\
      --class-args '[\"Hello\"]' --kwargs '{\"name\": \"emq\"}'

  # a shell command with stdin, environment and working directory
  emq-sender --wait --env GREETING=hi --cwd /tmp --stdin 'data' \\
      --shell -- sh -c 'echo $GREETING; cat; pwd'

  # a raw job on another queue with retries and a job timeout
  emq-sender --queue email --header retry-count:3 --header timeout:30 \\
      '[\"run\", {\"path\": \"mail.tasks\", \"callable\": \"send\", \"args\": [42]}]'

  # bulk: one job per line from stdin, pipelined; results as JSON lines
  seq 1000 | sed 's/.*/[\"call\", {\"handler\": \"echo\", \"args\": &}]/' \\
      | emq-sender --wait > results.jsonl

  # against an EventMQ 0.3.13 router (no acks for buffered jobs)
  emq-sender --no-ack --python mytasks.cleanup

  # run a Python job every 60 s, and remove that schedule again
  emq-sender --schedule-interval 60 --python pyemq_jobs.noop
  emq-sender --unschedule --python pyemq_jobs.noop

  # every 5 minutes by cron, first run at the next cron time, 10 runs in all
  emq-sender --schedule-cron '*/5 * * * *' --nohaste --run-count 10 \\
      --queue reports --shell -- /usr/local/bin/report.sh

  # schedule on an EventMQ 0.3.13 router (it never answers SCHEDULE)
  emq-sender --no-ack --schedule-interval 3600 --python mytasks.hourly

  # publish an event to the subscribers of \"orders\" (emq-pubsub)
  emq-sender --publish orders.created '{\"order\": 42}'
  tail -F events.jsonl | emq-sender --publish audit

  # a router that requires PLAIN credentials
  EMQ_USERNAME=alice emq-sender --password-file ~/.emq-password --call noop

  # a CURVE (encrypted) router: its public key, and ours
  emq-sender --curve-server-key router.key --curve-secret-key-file me.key_secret \\
      --wait --call echo --args '[1]'

Failover: --broker A,B (or EMQ_BROKER_ADDR=A,B) connects to every router
of the list and talks to the one that serves (a standby binds nothing). After
a reconnect the sender sends again what was not acknowledged (same msgid) and
the router sends the results it holds for it; with --wait each job is still
printed once.

Environment:
  EMQ_BROKER_ADDR        default for --broker
  EVENTMQ_FRONTEND_ADDR  used when EMQ_BROKER_ADDR is unset (a wildcard host
                         such as tcp://*:47291 becomes 127.0.0.1)
  EVENTMQ_PUBLISHER_INCOMING_ADDR
                         default for --broker with --publish (the same
                         wildcard rule)
  EMQ_USERNAME           default for --username
  EMQ_PASSWORD           the password when neither --password nor
                         --password-file is given
  EVENTMQ_CURVE_SERVER_KEY, EVENTMQ_CURVE_SECRET_KEY_FILE
                         defaults for --curve-server-key and
                         --curve-secret-key-file

Config file: every EVENTMQ_* setting above (and MAX_MESSAGE_SIZE) may also
come from $EVENTMQ_CONFIG_FILE (default /etc/eventmq.conf), section [sender]
then [global]; FRONTEND_ADDR also from the router's own [router] section
(PUBLISHER_INCOMING_ADDR from [publisher]), so the file that configures the
router tells emq-sender where it is. The environment wins over the file; a
key no emq tool reads is reported (with the nearest known name).";

pub(crate) fn parse_interval(s: &str) -> Result<i64, String> {
    match s.trim().parse::<i64>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("{s:?}: must be a whole number of seconds >= 1")),
    }
}

pub(crate) fn parse_run_count(s: &str) -> Result<u64, String> {
    match s.trim().parse::<u64>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!(
            "{s:?}: must be a whole number >= 1 (leave --run-count out for no limit)"
        )),
    }
}

pub(crate) fn parse_window(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("{s:?}: must be a whole number >= 1")),
    }
}

/// emq-sender's arguments.
#[derive(Parser, Debug, Clone)]
#[command(
    name = "emq-sender",
    version,
    about = "Submit jobs to an EventMQ (eMQP/1.0) router, one-shot or in bulk from stdin",
    long_about = LONG_ABOUT,
    after_help = "Run with --help for exit codes, protocol notes and examples.",
    after_long_help = EXAMPLES,
    group(ArgGroup::new("form").multiple(false).args(["call", "python", "shell", "message"])),
)]
pub struct Cli {
    /// Router frontend to connect to; a comma-separated list is a failover
    /// list: the sender connects to every address and uses the router
    /// that serves [default: $EMQ_BROKER_ADDR, else
    /// $EVENTMQ_FRONTEND_ADDR, else tcp://127.0.0.1:47291]; with --publish
    /// the pub/sub process [default: $EVENTMQ_PUBLISHER_INCOMING_ADDR, else
    /// tcp://127.0.0.1:47298]
    #[arg(long, short = 'b', value_name = "ADDR[,ADDR...]")]
    pub broker: Option<String>,

    /// Queue to submit to (a queue no worker serves falls back to "default")
    #[arg(long, short = 'q', value_name = "Q", default_value = "default")]
    pub queue: String,

    /// A header for the HEADERS frame, e.g. guarantee, retry-count:3,
    /// timeout:30 (repeatable; a comma list is accepted too)
    #[arg(long = "header", short = 'H', value_name = "H")]
    pub headers: Vec<String>,

    /// Add the reply-requested header (without waiting for the result)
    #[arg(long)]
    pub reply: bool,

    /// Run the job no earlier than SECS after the router accepts it (the
    /// emq header delay:SECS; fractions allowed). The router acknowledges
    /// and journals it at once
    #[arg(long, value_name = "SECS", value_parser = parse_positive_duration)]
    pub delay: Option<Duration>,

    /// Submit at most one job with key K at a time (the emq header
    /// unique-key:K): while a job with K is unfinished (or within
    /// --unique-for of its acceptance), this one is its duplicate: the
    /// existing msgid is printed (exit 0), and with --wait its result
    #[arg(long, value_name = "K")]
    pub unique_key: Option<String>,

    /// With --unique-key: the key stays taken SECS from acceptance, also
    /// after the job finished (the emq header unique-for:SECS)
    #[arg(long, value_name = "SECS", requires = "unique_key")]
    pub unique_for: Option<u64>,

    /// With --unique-key: what a duplicate gets: existing (answered as
    /// the existing job, the default), reject (refused `duplicate`, exit
    /// 2), or replace (a still-waiting existing job is cancelled and this
    /// one takes the key)
    #[arg(long, value_name = "RULE", requires = "unique_key",
          value_parser = ["existing", "reject", "replace"])]
    pub on_conflict: Option<String>,

    /// Wait for the job's result and print it (implies --reply)
    #[arg(long, short = 'w')]
    pub wait: bool,

    /// Seconds to wait for the ack (default 10), or with --wait for the
    /// result (default 60); per job in bulk mode
    #[arg(long, short = 't', value_name = "S", value_parser = parse_positive_duration)]
    pub timeout: Option<Duration>,

    /// Fire and forget: do not wait for an ack (for EventMQ 0.3.13 routers,
    /// which do not ack buffered jobs); exit 0 once the message is handed to
    /// the router
    #[arg(long, conflicts_with = "wait")]
    pub no_ack: bool,

    /// Take REJECT queue-full as final (exit 3). Without it a full queue
    /// is backpressure: the job is sent again after 10 ms, 20 ms, ... up to
    /// 1 s between tries, within --timeout
    #[arg(long)]
    pub fail_fast: bool,

    /// Bulk mode: at most N jobs outstanding (sent, not yet answered)
    #[arg(long, value_name = "N", default_value_t = DEFAULT_WINDOW, value_parser = parse_window)]
    pub window: usize,

    /// The router's --max-message-size in bytes: a message with a bigger
    /// frame is not sent (exit 2; in bulk mode the line is reported
    /// invalid). 0 or -1: no limit
    /// [env: EVENTMQ_MAX_MESSAGE_SIZE] [default: 16777216 (16 MiB)]
    #[arg(long, value_name = "BYTES", allow_negative_numbers = true)]
    pub max_message_size: Option<i64>,

    /// Job form: call the job manager's Rust handler HANDLER (built in: echo,
    /// noop) with --args JSON
    #[arg(long, value_name = "HANDLER", help_heading = "Job forms")]
    pub call: Option<String>,

    /// Job form: a Python callable, pkg.module.func or pkg.module:Class.method
    /// (an EventMQ 0.3.13 "run" job)
    #[arg(long, value_name = "SPEC", help_heading = "Job forms")]
    pub python: Option<String>,

    /// Job form: run the command given after `--` (e.g. --shell -- ls -l)
    #[arg(long, help_heading = "Job forms")]
    pub shell: bool,

    /// --call: handler arguments (any JSON); --python: positional arguments
    /// (a JSON list)
    #[arg(long, value_name = "JSON", help_heading = "Job forms")]
    pub args: Option<String>,

    /// --python: keyword arguments (a JSON object)
    #[arg(long, value_name = "JSON", help_heading = "Job forms")]
    pub kwargs: Option<String>,

    /// --python with Class.method: constructor arguments (a JSON list)
    #[arg(long, value_name = "JSON", help_heading = "Job forms")]
    pub class_args: Option<String>,

    /// --python with Class.method: constructor keyword arguments (a JSON
    /// object)
    #[arg(long, value_name = "JSON", help_heading = "Job forms")]
    pub class_kwargs: Option<String>,

    /// --shell: text to feed to the command's standard input
    #[arg(long, value_name = "TEXT", help_heading = "Job forms")]
    pub stdin: Option<String>,

    /// --shell: an environment variable for the command (repeatable)
    #[arg(long = "env", value_name = "K=V", help_heading = "Job forms")]
    pub env: Vec<String>,

    /// --shell: working directory of the command
    #[arg(long, value_name = "DIR", help_heading = "Job forms")]
    pub cwd: Option<String>,

    /// Schedule the job instead of running it once: every SECS seconds
    /// (sends SCHEDULE; the router answers REPLY or REJECT)
    #[arg(
        long,
        value_name = "SECS",
        value_parser = parse_interval,
        conflicts_with_all = ["schedule_cron", "wait"],
        help_heading = "Schedules"
    )]
    pub schedule_interval: Option<i64>,

    /// Schedule the job on a 5-field cron expression, e.g. "*/5 * * * *"
    /// (minute hour day-of-month month day-of-week, UTC)
    #[arg(
        long,
        value_name = "EXPR",
        conflicts_with = "wait",
        help_heading = "Schedules"
    )]
    pub schedule_cron: Option<String>,

    /// Remove the schedule of this job on this queue (sends UNSCHEDULE with
    /// the same frames as SCHEDULE; the router matches queue + job)
    #[arg(long, conflicts_with = "wait", help_heading = "Schedules")]
    pub unschedule: bool,

    /// Schedules: first run after one interval (or at the next cron time),
    /// not at once (the nohaste header)
    #[arg(long, help_heading = "Schedules")]
    pub nohaste: bool,

    /// Schedules: N runs in all, then the schedule is removed (the
    /// run_count:N header)
    #[arg(long, value_name = "N", value_parser = parse_run_count, help_heading = "Schedules")]
    pub run_count: Option<u64>,

    /// Publish MESSAGE_JSON (or each stdin line) to the subscribers of TOPIC
    /// through emq-pubsub (sends PUBLISH [TOPIC, message]; nothing answers)
    #[arg(
        long,
        value_name = "TOPIC",
        conflicts_with_all = ["wait", "reply", "delay", "unique_key", "schedule_interval", "schedule_cron", "unschedule", "nohaste", "run_count"],
        help_heading = "Pub/sub"
    )]
    pub publish: Option<String>,

    #[command(flatten)]
    pub auth: AuthArgs,

    #[command(flatten)]
    pub curve: CurveArgs,

    #[command(flatten)]
    pub log: LogArgs,

    /// The job as JSON text, sent as is; '-' or nothing (without a job form)
    /// reads jobs from stdin, one per line
    #[arg(value_name = "MESSAGE_JSON")]
    pub message: Option<String>,

    /// --shell: the command and its arguments, after `--`
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}
