//! `emq-jobmanager`: connect to an EventMQ router and run jobs.

#![forbid(unsafe_code)]

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use emq_jobmanager::connection::Prefetch;
use emq_jobmanager::manager::{ManagerConfig, DEFAULT_BROKER};
use emq_jobmanager::{Error, JobManager};
use emqp_proto::settings::Settings;
use emqp_proto::QueueSpec;

const AFTER_HELP: &str = "\
Settings come from flags, then EVENTMQ_* environment variables, then the
[jobmanager] (and [global]) section of $EVENTMQ_CONFIG_FILE
(default /etc/eventmq.conf); flags win. Keys: WORKER_ADDR (and
WORKER_ADDR_FAILOVER), QUEUES, CONCURRENT_JOBS, HEARTBEAT_INTERVAL,
HEARTBEAT_LIVENESS, KILL_GRACE_PERIOD, PYTHON, MAX_MESSAGE_SIZE,
GLOBAL_TIMEOUT, SUBPROCESS_SETUP_FUNC (or the deprecated SETUP_PATH and
SETUP_CALLABLE), JOB_ENTRY_FUNC, JOB_EXIT_FUNC, MAX_JOB_COUNT, PREFETCH,
PREFETCH_CAP, CURVE_SERVER_KEY, CURVE_SECRET_KEY_FILE.

Credit window (--prefetch): at most --concurrency jobs ever run, but the
job manager may hold more (READYs beyond its free slots, jobs received while
every slot is busy), so that slots do not idle while a READY travels to the
router and a job comes back. \"auto\" sizes it from the measured job time
and round trip (2 x (slots - 1) x round trip / job time, at most
--prefetch-cap): short jobs get credit ahead, jobs long compared with the
round trip get none. 0 turns it off (one READY per free slot, as EventMQ
0.3.13); N holds N more. Held jobs are the router's in-flight jobs:
redelivered if this job manager dies, run before it leaves (KBYE, SIGTERM
within --grace-period).

Jobs (the REQUEST message frame):
  [\"run\", {\"path\": \"pkg.mod\" | \"pkg.mod:Class\", \"callable\": NAME, \"args\": [..],
           \"kwargs\": {..}, \"class_args\": [..], \"class_kwargs\": {..}}]   EventMQ Python job
  [\"shell\", {\"argv\": [..], \"stdin\": STR, \"env\": {..}, \"cwd\": DIR}]       a command
  [\"call\", {\"handler\": \"echo\" | \"noop\", \"args\": ANY}]                   a Rust handler (echo, noop: inline)
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
struct Cli {
    /// Router backend endpoint; a comma-separated list is a failover list,
    /// tried in turn on each reconnect [default: tcp://127.0.0.1:47290]
    #[arg(
        short = 'B',
        long,
        visible_alias = "broker-addr",
        value_name = "ADDR[,ADDR...]"
    )]
    broker: Option<String>,

    /// Queues to serve, highest weight first: "default", "10:default,15:email",
    /// or 0.3.13's JSON '[[10, "default"]]'; several values are joined
    /// [default: default]
    #[arg(short = 'Q', long, num_args = 1.., value_name = "SPEC")]
    queues: Option<Vec<String>>,

    /// Number of jobs run at once (execution slots) [default: 4]
    #[arg(short = 'J', long, visible_alias = "jobs", value_name = "N")]
    concurrency: Option<usize>,

    /// Python interpreter for `run` jobs (one long-lived worker per slot;
    /// PYTHONPATH is passed through) [default: python3]
    #[arg(long, value_name = "PY")]
    python: Option<String>,

    /// Seconds running jobs get to finish after SIGTERM before they are
    /// killed (KILL_GRACE_PERIOD) [default: 30]
    #[arg(long, value_name = "SECS", value_parser = emqp_proto::duration::secs)]
    grace_period: Option<f64>,

    /// Seconds a job may run when it names no timeout (no timeout:N
    /// header, no "timeout" field); 0: no limit (GLOBAL_TIMEOUT)
    /// [default: 300]
    #[arg(long, value_name = "SECS", value_parser = emqp_proto::duration::secs)]
    global_timeout: Option<f64>,

    /// A Python function, pkg.module.function, called with no arguments
    /// once in each Python worker process before its first job, e.g. one
    /// that calls django.setup() (SUBPROCESS_SETUP_FUNC). If it raises, the
    /// worker logs it and runs jobs anyway
    #[arg(long, value_name = "PATH")]
    subprocess_setup_func: Option<String>,

    /// A Python function called with no arguments in the worker before
    /// every `run` job (JOB_ENTRY_FUNC); if it raises, the job fails
    /// without running
    #[arg(long, value_name = "PATH")]
    job_entry_func: Option<String>,

    /// A Python function called with no arguments in the worker after
    /// every `run` job, even a failed one (JOB_EXIT_FUNC); if it raises,
    /// that is logged and the job's result stands
    #[arg(long, value_name = "PATH")]
    job_exit_func: Option<String>,

    /// Jobs a Python worker process runs before it is replaced by a fresh
    /// one (MAX_JOB_COUNT) [default: 1024]
    #[arg(long, value_name = "N")]
    max_job_count: Option<u64>,

    /// Seconds between heartbeats [default: 3]
    #[arg(long, value_name = "SECS", value_parser = emqp_proto::duration::secs)]
    heartbeat_interval: Option<f64>,

    /// Missed heartbeat intervals after which the router is considered gone
    /// and the job manager reconnects with a new identity [default: 3]
    #[arg(long, value_name = "N")]
    heartbeat_liveness: Option<u32>,

    /// Seconds to wait for the router's ACK of INFORM before trying a fresh
    /// connection [default: 5]
    #[arg(long, value_name = "SECS", value_parser = emqp_proto::duration::secs)]
    ack_timeout: Option<f64>,

    /// Seconds to wait before reconnecting after the router said KBYE
    /// [default: 1]
    #[arg(long, value_name = "SECS", value_parser = emqp_proto::duration::secs)]
    reconnect_delay: Option<f64>,

    /// The router's --max-message-size in bytes: a job whose result is
    /// bigger is answered with a failed result of kind result-too-large
    /// (the router would disconnect us for the frame). 0 or -1: no limit
    /// [env: EVENTMQ_MAX_MESSAGE_SIZE] [default: 16777216 (16 MiB)]
    #[arg(long, value_name = "BYTES", allow_negative_numbers = true)]
    max_message_size: Option<i64>,

    /// Credit beyond the free slots: auto (sized from measured job time
    /// and round trip), 0 (off: one READY per free slot) or N (always N
    /// more) [default: auto]
    #[arg(long, value_name = "auto|0|N")]
    prefetch: Option<String>,

    /// Upper bound of the adaptive credit window, in jobs [default: 128]
    #[arg(long, value_name = "N")]
    prefetch_cap: Option<usize>,

    /// Config file (sets EVENTMQ_CONFIG_FILE)
    #[arg(short = 'C', long, value_name = "FILE")]
    config: Option<String>,

    /// A name for this job manager, used in logs only (the wire identity is
    /// a fresh uuid4 per connection)
    #[arg(short = 'n', long)]
    name: Option<String>,

    /// ZMQ PLAIN username, for a router started with --plain-users
    /// [default: $EMQ_USERNAME]
    #[arg(long, value_name = "U")]
    username: Option<String>,

    /// ZMQ PLAIN password (visible in the process list: prefer
    /// --password-file or $EMQ_PASSWORD) [default: $EMQ_PASSWORD]
    #[arg(long, value_name = "P")]
    password: Option<String>,

    /// Read the PLAIN password from file F (its trailing line break is
    /// dropped)
    #[arg(long, value_name = "F", conflicts_with = "password")]
    password_file: Option<std::path::PathBuf>,

    /// The router's CURVE public key: Z85 text or a file holding it (the
    /// router's NAME.key); the connection is then encrypted
    /// [env: EVENTMQ_CURVE_SERVER_KEY]
    #[arg(long, value_name = "KEY|FILE")]
    curve_server_key: Option<String>,

    /// This job manager's CURVE key pair (NAME.key_secret from `emq-cli
    /// keygen`, mode 0600); without it a fresh key pair is made, which
    /// only a router accepting any key lets in
    /// [env: EVENTMQ_CURVE_SECRET_KEY_FILE]
    #[arg(long, value_name = "FILE")]
    curve_secret_key_file: Option<std::path::PathBuf>,
}

fn secs(what: &str, v: f64) -> Result<Duration, String> {
    if v.is_finite() && v >= 0.0 {
        Ok(Duration::from_secs_f64(v))
    } else {
        Err(format!(
            "{what} must be a non-negative number of seconds, got {v}"
        ))
    }
}

fn setting<T: std::str::FromStr>(s: &Settings, key: &str) -> Result<Option<T>, String> {
    Ok(s.value(key)?)
}

/// A duration setting, in seconds, read by [`emqp_proto::duration`]'s grammar.
fn setting_secs(s: &Settings, key: &str) -> Result<Option<f64>, String> {
    Ok(s.value_with(key, emqp_proto::duration::parse_duration)?
        .map(|d| d.as_secs_f64()))
}

/// A Python function setting: the flag, else the setting; empty is unset.
/// It must be a dotted path, as 0.3.13's `callable_from_name` reads it.
fn python_func(flag: Option<String>, s: &Settings, key: &str) -> Result<Option<String>, String> {
    let (value, from) = match flag {
        Some(v) => (v, "the command line".to_string()),
        None => match s.get(key) {
            Some(v) => (
                v.to_string(),
                s.source(key).unwrap_or("settings").to_string(),
            ),
            None => return Ok(None),
        },
    };
    dotted_path(&value, key, &from)
}

/// `value` checked as a dotted path (`None` if empty).
fn dotted_path(value: &str, key: &str, from: &str) -> Result<Option<String>, String> {
    let value = value.trim();
    if value.is_empty() {
        return Ok(None);
    }
    let (path, name) = value.rsplit_once('.').unwrap_or(("", ""));
    if path.is_empty() || name.is_empty() || value.contains(char::is_whitespace) {
        return Err(format!(
            "bad {key} {value:?} (from {from}): expected a dotted path such as \
             myproject.setup.run"
        ));
    }
    Ok(Some(value.to_string()))
}

fn config(
    cli: Cli,
    s: &Settings,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ManagerConfig, String> {
    let plain = emq_transport::plain_credentials(
        &emq_transport::PlainArgs {
            username: cli.username.as_deref(),
            password: cli.password.as_deref(),
            password_file: cli.password_file.as_deref(),
        },
        env,
    )?;
    let curve = emq_transport::curve::curve_client(
        &emq_transport::curve::CurveArgs {
            server_key: cli.curve_server_key.as_deref(),
            secret_key_file: cli.curve_secret_key_file.as_deref(),
        },
        &|k| s.get(k).map(str::to_string),
    )?;
    let mut c = ManagerConfig {
        plain,
        curve,
        ..ManagerConfig::default()
    };
    let conn = &mut c.connection;
    let brokers = match (cli.broker, s.get("WORKER_ADDR")) {
        (Some(b), _) => b,
        (None, Some(b)) if !b.trim().is_empty() => {
            let mut b = b.to_string();
            if let Some(f) = s.get("WORKER_ADDR_FAILOVER") {
                if !f.trim().is_empty() && !b.split(',').any(|x| x.trim() == f.trim()) {
                    b = format!("{b},{f}");
                }
            }
            b
        }
        _ => DEFAULT_BROKER.to_string(),
    };
    conn.brokers =
        emq_transport::parse_endpoints(&brokers, "--broker").map_err(|e| e.to_string())?;
    let queues = match cli.queues {
        Some(v) => Some(v.join(",")),
        None => s.get("QUEUES").map(String::from),
    };
    if let Some(q) = queues.filter(|q| !q.trim().is_empty()) {
        conn.queues = QueueSpec::parse_cli(&q).map_err(|e| format!("bad queues {q:?}: {e}"))?;
        if conn.queues.is_empty() {
            conn.queues = QueueSpec::default();
        }
    }
    if let Some(n) = cli.concurrency.or(setting(s, "CONCURRENT_JOBS")?) {
        conn.concurrency = n;
    }
    if let Some(v) = cli.grace_period.or(setting_secs(s, "KILL_GRACE_PERIOD")?) {
        conn.grace_period = secs("grace period", v)?;
    }
    if let Some(v) = cli.global_timeout.or(setting_secs(s, "GLOBAL_TIMEOUT")?) {
        conn.default_timeout = Some(secs("global timeout", v)?).filter(|d| !d.is_zero());
    }
    if let Some(v) = cli
        .heartbeat_interval
        .or(setting_secs(s, "HEARTBEAT_INTERVAL")?)
    {
        conn.heartbeat_interval = secs("heartbeat interval", v)?;
    }
    if let Some(v) = cli.heartbeat_liveness.or(setting(s, "HEARTBEAT_LIVENESS")?) {
        conn.heartbeat_liveness = v;
    }
    if let Some(v) = cli.max_message_size.or(setting(s, "MAX_MESSAGE_SIZE")?) {
        conn.max_message_size = usize::try_from(v).ok().filter(|&n| n > 0);
    }
    let prefetch = match cli.prefetch.or(s.get("PREFETCH").map(String::from)) {
        Some(p) if !p.trim().is_empty() => p.parse::<Prefetch>()?,
        _ => Prefetch::adaptive(),
    };
    conn.prefetch = match (prefetch, cli.prefetch_cap.or(setting(s, "PREFETCH_CAP")?)) {
        (Prefetch::Adaptive { .. }, Some(cap)) => Prefetch::Adaptive { cap },
        (p, _) => p,
    };
    if let Some(v) = cli.ack_timeout {
        conn.ack_timeout = secs("ack timeout", v)?;
    }
    if let Some(v) = cli.reconnect_delay {
        conn.reconnect_delay = secs("reconnect delay", v)?;
    }

    let py = &mut c.python;
    if let Some(p) = cli.python.or(s.get("PYTHON").map(String::from)) {
        py.interpreter = p;
    }
    py.setup_func = python_func(cli.subprocess_setup_func, s, "SUBPROCESS_SETUP_FUNC")?;
    if py.setup_func.is_none() {
        // 0.3.13's deprecated pair, used when SUBPROCESS_SETUP_FUNC is not.
        let pair = (s.get("SETUP_PATH"), s.get("SETUP_CALLABLE"));
        if let (Some(path), Some(name)) = pair {
            let module = path.split(':').next().unwrap_or("").trim();
            if !module.is_empty() && !name.trim().is_empty() {
                log::warn!(
                    "SETUP_PATH and SETUP_CALLABLE are deprecated (as in EventMQ); use \
                     SUBPROCESS_SETUP_FUNC={module}.{}",
                    name.trim()
                );
                let joined = format!("{module}.{}", name.trim());
                py.setup_func =
                    dotted_path(&joined, "SETUP_PATH", "SETUP_PATH and SETUP_CALLABLE")?;
            }
        }
    }
    py.job_entry_func = python_func(cli.job_entry_func, s, "JOB_ENTRY_FUNC")?;
    py.job_exit_func = python_func(cli.job_exit_func, s, "JOB_EXIT_FUNC")?;
    if let Some(n) = cli.max_job_count.or(setting(s, "MAX_JOB_COUNT")?) {
        if n == 0 {
            return Err("MAX_JOB_COUNT (--max-job-count) must be at least 1".into());
        }
        py.max_job_count = n;
    }
    Ok(c)
}

/// Exit status for a job manager that could not start or run: 2 for a
/// configuration that cannot work (as for bad flags), 1 otherwise.
fn exit_code(e: &Error) -> u8 {
    match e {
        Error::Config(_) => 2,
        _ => 1,
    }
}

// mimalloc: the socket loop allocates a handful of small buffers per job
// (frames, the parsed job, the reply); glibc's malloc was about a tenth
// of the job manager's CPU under load.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    let cli = Cli::parse();
    if let Some(path) = &cli.config {
        std::env::set_var("EVENTMQ_CONFIG_FILE", path);
    }
    let settings = match Settings::load("jobmanager") {
        Ok(s) => s,
        Err(e) => {
            log::error!("{e}");
            return ExitCode::from(2);
        }
    };
    if let Some(name) = &cli.name {
        log::info!("job manager name: {name}");
    }
    let cfg = match config(cli, &settings, &|k| std::env::var(k).ok()) {
        Ok(c) => c,
        Err(e) => {
            log::error!("{e}");
            return ExitCode::from(2);
        }
    };
    match JobManager::builder()
        .config(cfg)
        .build()
        .and_then(JobManager::run_until_signal)
    {
        Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
        Err(e) => {
            log::error!("{e}");
            ExitCode::from(exit_code(&e))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn cfg(args: &[&str], env: &dyn Fn(&str) -> Option<String>) -> Result<ManagerConfig, String> {
        let cli =
            Cli::try_parse_from(std::iter::once("emq-jobmanager").chain(args.iter().copied()))
                .map_err(|e| e.to_string())?;
        config(cli, &Settings::default(), env)
    }

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn curve_keys_from_flags_or_settings() {
        let server = emq_transport::curve::generate().unwrap().public.to_string();
        let c = cfg(&["--curve-server-key", &server], &no_env).unwrap();
        assert_eq!(c.curve.unwrap().server_key.to_string(), server);
        let cli = Cli::try_parse_from(["emq-jobmanager"]).unwrap();
        let mut s = Settings::default();
        s.set("CURVE_SERVER_KEY", &server);
        let c = config(cli, &s, &no_env).unwrap();
        assert_eq!(c.curve.unwrap().server_key.to_string(), server);
        let e = cfg(&["--curve-secret-key-file", "/nonexistent"], &no_env).unwrap_err();
        assert!(e.contains("--curve-server-key"), "{e}");
        let e = cfg(
            &[
                "--curve-server-key",
                &server,
                "--curve-secret-key-file",
                "/nonexistent",
            ],
            &no_env,
        )
        .unwrap_err();
        assert!(e.contains("/nonexistent"), "{e}");
    }

    #[test]
    fn no_credentials_by_default() {
        let c = cfg(&[], &no_env).unwrap();
        assert_eq!(c.plain, None);
        assert_eq!(c.curve, None);
        assert_eq!(c.connection.brokers, vec![DEFAULT_BROKER.to_string()]);
    }

    #[test]
    fn plain_credentials_from_flags_environment_or_file() {
        let c = cfg(&["--username", "w", "--password", "pw"], &no_env).unwrap();
        assert_eq!(c.plain, Some(("w".into(), "pw".into())));
        assert!(
            !format!("{c:?}").contains("\"pw\""),
            "Debug hides the password"
        );

        let env = |k: &str| match k {
            "EMQ_USERNAME" => Some("env-user".to_string()),
            "EMQ_PASSWORD" => Some("env-pw".to_string()),
            _ => None,
        };
        assert_eq!(
            cfg(&[], &env).unwrap().plain,
            Some(("env-user".into(), "env-pw".into()))
        );
        assert_eq!(
            cfg(&["--username", "w"], &env).unwrap().plain,
            Some(("w".into(), "env-pw".into()))
        );

        let file = std::env::temp_dir().join(format!("emq-jobmanager-pw-{}", std::process::id()));
        std::fs::write(&file, "filepw\n").unwrap();
        let f = file.to_str().unwrap();
        assert_eq!(
            cfg(&["--password-file", f], &env).unwrap().plain,
            Some(("env-user".into(), "filepw".into()))
        );
        std::fs::remove_file(&file).unwrap();
        assert!(cfg(&["--username", "w", "--password-file", f], &no_env)
            .unwrap_err()
            .contains("--password-file"));

        assert!(cfg(&["--password", "a", "--password-file", "/x"], &no_env).is_err());
        assert!(cfg(&["--username", "w"], &no_env)
            .unwrap_err()
            .contains("password"));
        assert!(cfg(&["--password", "pw"], &no_env)
            .unwrap_err()
            .contains("username"));
    }

    #[test]
    fn max_message_size_from_flag_or_environment_and_0_or_negative_is_unlimited() {
        let c = cfg(&[], &no_env).unwrap();
        assert_eq!(c.connection.max_message_size, Some(16 * 1024 * 1024));
        let c = cfg(&["--max-message-size", "1000"], &no_env).unwrap();
        assert_eq!(c.connection.max_message_size, Some(1000));
        for v in ["0", "-1"] {
            let c = cfg(&["--max-message-size", v], &no_env).unwrap();
            assert_eq!(c.connection.max_message_size, None, "{v}");
        }
        let env: std::collections::HashMap<String, String> = [
            ("EVENTMQ_CONFIG_FILE", "/dev/null"),
            ("EVENTMQ_MAX_MESSAGE_SIZE", "2048"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let s = Settings::load_from("jobmanager", &env).unwrap();
        let cli = Cli::try_parse_from(["emq-jobmanager"]).unwrap();
        let c = config(cli, &s, &no_env).unwrap();
        assert_eq!(c.connection.max_message_size, Some(2048));
        let cli = Cli::try_parse_from(["emq-jobmanager", "--max-message-size", "-1"]).unwrap();
        assert_eq!(
            config(cli, &s, &no_env)
                .unwrap()
                .connection
                .max_message_size,
            None,
            "the flag wins"
        );
    }

    /// Settings from `EVENTMQ_*` variables and a config file (written to a
    /// temporary file), then `args` on top.
    fn cfg_from(args: &[&str], env: &[(&str, &str)], file: &str) -> Result<ManagerConfig, String> {
        let path = std::env::temp_dir().join(format!(
            "emq-jobmanager-conf-{}-{}",
            std::process::id(),
            std::thread::current()
                .name()
                .unwrap_or("t")
                .replace("::", "-")
        ));
        std::fs::write(&path, file).unwrap();
        let mut vars: std::collections::HashMap<String, String> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        vars.insert("EVENTMQ_CONFIG_FILE".into(), path.display().to_string());
        let s = Settings::load_from("jobmanager", &vars);
        std::fs::remove_file(&path).unwrap();
        let cli =
            Cli::try_parse_from(std::iter::once("emq-jobmanager").chain(args.iter().copied()))
                .map_err(|e| e.to_string())?;
        config(cli, &s.unwrap(), &no_env)
    }

    #[test]
    fn kill_grace_period_is_the_grace_period_from_environment_or_file() {
        let d = |c: ManagerConfig| c.connection.grace_period;
        assert_eq!(d(cfg(&[], &no_env).unwrap()), Duration::from_secs(30));
        let file = "[jobmanager]\nKILL_GRACE_PERIOD=12\n";
        assert_eq!(
            d(cfg_from(&[], &[], file).unwrap()),
            Duration::from_secs(12)
        );
        let env = [("EVENTMQ_KILL_GRACE_PERIOD", "2.5")];
        assert_eq!(
            d(cfg_from(&[], &env, file).unwrap()),
            Duration::from_millis(2500)
        );
        assert_eq!(
            d(cfg_from(&["--grace-period", "1"], &env, file).unwrap()),
            Duration::from_secs(1)
        );
    }

    #[test]
    fn global_timeout_defaults_to_300_s_and_0_is_none() {
        let t = |c: ManagerConfig| c.connection.default_timeout;
        assert_eq!(
            t(cfg(&[], &no_env).unwrap()),
            Some(Duration::from_secs(300))
        );
        let file = "[jobmanager]\nGLOBAL_TIMEOUT=60\n";
        assert_eq!(
            t(cfg_from(&[], &[], file).unwrap()),
            Some(Duration::from_secs(60))
        );
        let env = [("EVENTMQ_GLOBAL_TIMEOUT", "0")];
        assert_eq!(t(cfg_from(&[], &env, file).unwrap()), None);
        assert_eq!(
            t(cfg_from(&["--global-timeout", "0.5"], &env, file).unwrap()),
            Some(Duration::from_millis(500))
        );
        assert!(cfg(&["--global-timeout=-1"], &no_env)
            .unwrap_err()
            .contains("cannot be negative"));
        assert_eq!(
            t(cfg(&["--global-timeout", "2m"], &no_env).unwrap()),
            Some(Duration::from_secs(120))
        );
        let env = [("EVENTMQ_GLOBAL_TIMEOUT", "1500ms")];
        assert_eq!(
            t(cfg_from(&[], &env, "").unwrap()),
            Some(Duration::from_millis(1500))
        );
    }

    #[test]
    fn python_hooks_and_max_job_count_from_flags_environment_or_file() {
        let c = cfg(&[], &no_env).unwrap();
        assert_eq!(
            (
                c.python.setup_func,
                c.python.job_entry_func,
                c.python.job_exit_func,
                c.python.max_job_count
            ),
            (None, None, None, 1024)
        );
        let file = "[jobmanager]\n\
                    SUBPROCESS_SETUP_FUNC=proj.boot.setup\n\
                    JOB_ENTRY_FUNC=proj.hooks.entry\n\
                    JOB_EXIT_FUNC=proj.hooks:Hooks.exit\n\
                    MAX_JOB_COUNT=50\n";
        let c = cfg_from(&[], &[], file).unwrap().python;
        assert_eq!(c.setup_func.as_deref(), Some("proj.boot.setup"));
        assert_eq!(c.job_entry_func.as_deref(), Some("proj.hooks.entry"));
        assert_eq!(c.job_exit_func.as_deref(), Some("proj.hooks:Hooks.exit"));
        assert_eq!(c.max_job_count, 50);
        let env = [
            ("EVENTMQ_JOB_ENTRY_FUNC", "env.entry"),
            ("EVENTMQ_MAX_JOB_COUNT", "7"),
        ];
        let c = cfg_from(&["--job-exit-func", ""], &env, file)
            .unwrap()
            .python;
        assert_eq!(c.job_entry_func.as_deref(), Some("env.entry"));
        assert_eq!(c.job_exit_func, None, "an empty flag unsets it");
        assert_eq!(c.max_job_count, 7);
        let c = cfg_from(
            &["--subprocess-setup-func", "x.y", "--max-job-count", "2"],
            &env,
            file,
        )
        .unwrap()
        .python;
        assert_eq!((c.setup_func.as_deref(), c.max_job_count), (Some("x.y"), 2));
        // Clear errors for what cannot be a function or a count.
        let e = cfg_from(&[], &[("EVENTMQ_SUBPROCESS_SETUP_FUNC", "setup")], "").unwrap_err();
        assert!(
            e.contains("SUBPROCESS_SETUP_FUNC") && e.contains("EVENTMQ_"),
            "{e}"
        );
        assert!(cfg(&["--max-job-count", "0"], &no_env).is_err());
        assert!(cfg_from(&[], &[("EVENTMQ_MAX_JOB_COUNT", "many")], "").is_err());
    }

    #[test]
    fn deprecated_setup_path_and_callable_name_the_setup_function() {
        let file = "[jobmanager]\nSETUP_PATH=proj.boot:Ignored\nSETUP_CALLABLE=setup\n";
        let c = cfg_from(&[], &[], file).unwrap().python;
        assert_eq!(c.setup_func.as_deref(), Some("proj.boot.setup"));
        let c = cfg_from(&[], &[("EVENTMQ_SUBPROCESS_SETUP_FUNC", "new.setup")], file)
            .unwrap()
            .python;
        assert_eq!(
            c.setup_func.as_deref(),
            Some("new.setup"),
            "the new one wins"
        );
    }

    #[test]
    fn configuration_errors_exit_2_and_others_1() {
        let e = JobManager::builder()
            .concurrency(0)
            .build()
            .err()
            .expect("zero concurrency is refused");
        assert!(matches!(
            e,
            Error::Config(emq_jobmanager::ConfigError::ZeroConcurrency)
        ));
        assert_eq!(exit_code(&e), 2);
        let e = JobManager::builder()
            .broker("localhost:1")
            .build()
            .err()
            .expect("a bad endpoint is refused");
        assert_eq!(exit_code(&e), 2);
        let io = Error::Io {
            context: "starting the slot threads",
            source: std::io::Error::other("no threads"),
        };
        assert_eq!(exit_code(&io), 1);
        assert_eq!(io.to_string(), "starting the slot threads: no threads");
    }

    #[test]
    fn prefetch_is_adaptive_by_default_off_with_0_fixed_with_n_and_capped_by_its_flag() {
        use emq_jobmanager::connection::window::DEFAULT_CAP;
        let p = |args: &[&str]| cfg(args, &no_env).map(|c| c.connection.prefetch);
        assert_eq!(p(&[]), Ok(Prefetch::Adaptive { cap: DEFAULT_CAP }));
        assert_eq!(p(&["--prefetch", "auto"]), Ok(Prefetch::adaptive()));
        assert_eq!(p(&["--prefetch", "0"]), Ok(Prefetch::Off));
        assert_eq!(p(&["--prefetch", "12"]), Ok(Prefetch::Fixed(12)));
        assert_eq!(
            p(&["--prefetch-cap", "16"]),
            Ok(Prefetch::Adaptive { cap: 16 })
        );
        assert_eq!(
            p(&["--prefetch", "3", "--prefetch-cap", "16"]),
            Ok(Prefetch::Fixed(3)),
            "the cap bounds the adaptive window only"
        );
        assert!(p(&["--prefetch", "many"]).unwrap_err().contains("auto"));
        let env: std::collections::HashMap<String, String> = [
            ("EVENTMQ_CONFIG_FILE", "/dev/null"),
            ("EVENTMQ_PREFETCH", "0"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let s = Settings::load_from("jobmanager", &env).unwrap();
        let cli = Cli::try_parse_from(["emq-jobmanager"]).unwrap();
        assert_eq!(
            config(cli, &s, &no_env).unwrap().connection.prefetch,
            Prefetch::Off
        );
    }

    #[test]
    fn help_mentions_the_credentials() {
        let help = Cli::command().render_long_help().to_string();
        for needle in [
            "--username",
            "--password-file",
            "EMQ_PASSWORD",
            "--plain-users",
        ] {
            assert!(help.contains(needle), "help lacks {needle}");
        }
    }
}
