//! `emq-jobmanager`: connect to an EventMQ router and run jobs.

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use emq_jobmanager::manager::{ManagerConfig, DEFAULT_BROKER};
use emq_jobmanager::JobManager;
use emqp_proto::settings::Settings;
use emqp_proto::QueueSpec;

const AFTER_HELP: &str = "\
Settings come from flags, then EVENTMQ_* environment variables, then the
[jobmanager] (and [global]) section of $EVENTMQ_CONFIG_FILE
(default /etc/eventmq.conf); flags win. Keys: WORKER_ADDR (and
WORKER_ADDR_FAILOVER), QUEUES, CONCURRENT_JOBS, HEARTBEAT_INTERVAL,
HEARTBEAT_LIVENESS, KILL_GRACE_PERIOD, PYTHON, MAX_MESSAGE_SIZE,
CURVE_SERVER_KEY, CURVE_SECRET_KEY_FILE.

Jobs (the REQUEST message frame):
  [\"run\", {\"path\": \"pkg.mod\" | \"pkg.mod:Class\", \"callable\": NAME, \"args\": [..],
           \"kwargs\": {..}, \"class_args\": [..], \"class_kwargs\": {..}}]   EventMQ Python job
  [\"shell\", {\"argv\": [..], \"stdin\": STR, \"env\": {..}, \"cwd\": DIR}]       a command
  [\"call\", {\"handler\": \"echo\" | \"noop\", \"args\": ANY}]                   a Rust handler (echo, noop: inline)
Every job gets REPLY [result, request msgid, ok|failed] before its slot's READY;
result is {\"value\": ..} or {\"error\": {\"kind\", \"message\", ..}}.
Headers honoured: timeout:N (kill after N s). retry-count:N is the router's:
each delivered job runs once here and gets one REPLY.
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
    /// killed [default: 30]
    #[arg(long, value_name = "SECS")]
    grace_period: Option<f64>,

    /// Seconds between heartbeats [default: 3]
    #[arg(long, value_name = "SECS")]
    heartbeat_interval: Option<f64>,

    /// Missed heartbeat intervals after which the router is considered gone
    /// and the job manager reconnects with a new identity [default: 3]
    #[arg(long, value_name = "N")]
    heartbeat_liveness: Option<u32>,

    /// Seconds to wait for the router's ACK of INFORM before trying a fresh
    /// connection [default: 5]
    #[arg(long, value_name = "SECS")]
    ack_timeout: Option<f64>,

    /// Seconds to wait before reconnecting after the router said KBYE
    /// [default: 1]
    #[arg(long, value_name = "SECS")]
    reconnect_delay: Option<f64>,

    /// The router's --max-message-size in bytes: a job whose result is
    /// bigger is answered with a failed result of kind result-too-large
    /// (the router would disconnect us for the frame). 0 or -1: no limit
    /// [env: EVENTMQ_MAX_MESSAGE_SIZE] [default: 16777216 (16 MiB)]
    #[arg(long, value_name = "BYTES", allow_negative_numbers = true)]
    max_message_size: Option<i64>,

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
    match s.get(key) {
        None => Ok(None),
        Some(v) if v.trim().is_empty() => Ok(None),
        Some(v) => v.trim().parse().map(Some).map_err(|_| {
            format!(
                "bad {key} {v:?} (from {})",
                s.source(key).unwrap_or("settings")
            )
        }),
    }
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
    c.brokers = brokers
        .split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(String::from)
        .collect();
    let queues = match cli.queues {
        Some(v) => Some(v.join(",")),
        None => s.get("QUEUES").map(String::from),
    };
    if let Some(q) = queues.filter(|q| !q.trim().is_empty()) {
        c.queues = QueueSpec::parse_cli(&q).map_err(|e| format!("bad queues {q:?}: {e}"))?;
        if c.queues.is_empty() {
            c.queues = QueueSpec::default();
        }
    }
    if let Some(n) = cli.concurrency.or(setting(s, "CONCURRENT_JOBS")?) {
        c.concurrency = n;
    }
    if let Some(p) = cli.python.or(s.get("PYTHON").map(String::from)) {
        c.python.interpreter = p;
    }
    if let Some(v) = cli.grace_period.or(setting(s, "KILL_GRACE_PERIOD")?) {
        c.grace_period = secs("grace period", v)?;
    }
    if let Some(v) = cli.heartbeat_interval.or(setting(s, "HEARTBEAT_INTERVAL")?) {
        c.heartbeat_interval = secs("heartbeat interval", v)?;
    }
    if let Some(v) = cli.heartbeat_liveness.or(setting(s, "HEARTBEAT_LIVENESS")?) {
        c.heartbeat_liveness = v;
    }
    if let Some(v) = cli.max_message_size.or(setting(s, "MAX_MESSAGE_SIZE")?) {
        c.max_message_size = usize::try_from(v).ok().filter(|&n| n > 0);
    }
    if let Some(v) = cli.ack_timeout {
        c.ack_timeout = secs("ack timeout", v)?;
    }
    if let Some(v) = cli.reconnect_delay {
        c.reconnect_delay = secs("reconnect delay", v)?;
    }
    Ok(c)
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
    let jm = match JobManager::builder().config(cfg).build() {
        Ok(jm) => jm,
        Err(e) => {
            log::error!("{e}");
            return ExitCode::from(2);
        }
    };
    match jm.run_until_signal() {
        Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
        Err(e) => {
            log::error!("{e}");
            ExitCode::from(1)
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
        assert_eq!(c.brokers, vec![DEFAULT_BROKER.to_string()]);
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
        assert_eq!(c.max_message_size, Some(16 * 1024 * 1024));
        let c = cfg(&["--max-message-size", "1000"], &no_env).unwrap();
        assert_eq!(c.max_message_size, Some(1000));
        for v in ["0", "-1"] {
            let c = cfg(&["--max-message-size", v], &no_env).unwrap();
            assert_eq!(c.max_message_size, None, "{v}");
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
        assert_eq!(c.max_message_size, Some(2048));
        let cli = Cli::try_parse_from(["emq-jobmanager", "--max-message-size", "-1"]).unwrap();
        assert_eq!(
            config(cli, &s, &no_env).unwrap().max_message_size,
            None,
            "the flag wins"
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
