//! The checked plan: [`Cli`] with the environment and the config file,
//! turned into what the job manager will run ([`Plan`]), or an error
//! (exit 2).
//!
//! Layering, as in every emq binary (`emq_cli_support::settings`): a flag
//! wins, else `EVENTMQ_<KEY>`, else the key in the config file's
//! `[jobmanager]` section, else `[global]`, else the default. The config
//! file is `--config`, else `$EVENTMQ_CONFIG_FILE`, else
//! `/etc/eventmq.conf`; `--config` is handed to the settings as the
//! environment they read, never written into the process's own.
//! Durations take zero everywhere: `--global-timeout 0` is "no limit",
//! `--grace-period 0` kills at once.

use std::collections::HashMap;
use std::path::PathBuf;

use emq_cli_support::{Settings, Zero};
use emq_jobmanager::connection::{Config, Prefetch};
use emq_jobmanager::manager::{ManagerConfig, DEFAULT_BROKER};
use emq_jobmanager::python::PythonConfig;
use emqp_proto::QueueSpec;

use super::lowargs::Cli;

/// The config file section the job manager reads.
pub const SECTION: &str = "jobmanager";

/// The router's worker socket, also read from the router's own section
/// (`[router] BACKEND_ADDR`) when `[jobmanager]` and the environment do
/// not set it: one file tells the job manager where the router is.
const ROUTER_ADDRESS: &[(&str, &str)] = &[("BACKEND_ADDR", "router")];

/// What the job manager will run, checked.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The library's configuration.
    pub manager: ManagerConfig,
    /// `--name`, for the logs.
    pub name: Option<String>,
    /// `--log-format`: text or one JSON object per line.
    pub log_format: emq_cli_support::LogFormat,
}

impl Cli {
    /// Check the flags with the environment `env` (the process's, passed
    /// in) and the config file it, or `--config`, names.
    pub fn plan(self, env: &HashMap<String, String>) -> Result<Plan, String> {
        let settings = match &self.config {
            Some(path) => {
                let mut env = env.clone();
                env.insert("EVENTMQ_CONFIG_FILE".into(), path.clone());
                Settings::load_client(SECTION, ROUTER_ADDRESS, &env)
            }
            None => Settings::load_client(SECTION, ROUTER_ADDRESS, env),
        }
        .map_err(|e| e.to_string())?;
        settings.log_warnings();
        let name = self
            .name
            .clone()
            .or_else(|| settings.get("NAME").map(str::to_string));
        let log_format = self.log.resolve(&settings)?;
        let traces_url = self.otlp.traces_url(env)?;
        let mut manager = config(self, &settings, &|k| env.get(k).cloned())?;
        manager.traces_url = traces_url;
        Ok(Plan {
            manager,
            name,
            log_format,
        })
    }
}

fn setting<T: std::str::FromStr>(s: &Settings, key: &str) -> Result<Option<T>, String> {
    Ok(s.value(key)?)
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
    let mut c = ManagerConfig {
        plain: emq_transport::plain_credentials(&cli.auth, env)?,
        curve: emq_transport::curve::curve_client(&cli.curve, &|k| s.get(k).map(str::to_string))?,
        ..ManagerConfig::default()
    };
    connection(&cli, s, &mut c.connection)?;
    // --name, else NAME: shown by `emq-cli workers` as NAME@HOST.
    c.connection.about.name = cli
        .name
        .clone()
        .or_else(|| s.get("NAME").map(str::to_string))
        .map(|n| n.trim().to_string())
        .filter(|n| !n.is_empty());
    python(&cli, s, &mut c.python)?;
    c.python.reload_dirs = reload_dirs(&cli, env);
    Ok(c)
}

/// What `--reload` watches: the `--reload-dir`s (which imply it), else the
/// working directory and every `PYTHONPATH` entry that is a directory
/// (the places a worker imports job modules from; a working directory of
/// `/`, as under a service manager, is left out). Nothing without either
/// flag.
fn reload_dirs(cli: &Cli, env: &dyn Fn(&str) -> Option<String>) -> Vec<PathBuf> {
    if !cli.reload_dir.is_empty() {
        return cli.reload_dir.clone();
    }
    if !cli.reload {
        return Vec::new();
    }
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Ok(cwd) = std::env::current_dir() {
        if cwd.parent().is_some() {
            dirs.push(cwd);
        }
    }
    if let Some(pp) = env("PYTHONPATH") {
        for d in std::env::split_paths(&pp) {
            if d.is_dir() && !dirs.contains(&d) {
                dirs.push(d);
            }
        }
    }
    dirs
}

/// The connection core's settings, over its defaults in `conn`. Zero:
/// every duration takes it (`--global-timeout 0`: no limit).
fn connection(cli: &Cli, s: &Settings, conn: &mut Config) -> Result<(), String> {
    // BACKEND_ADDR, or 0.3.13's WORKER_ADDR (the same setting to
    // `Settings`): the router's bind address, a wildcard host reached at
    // 127.0.0.1, so one `[global]` serves the router and the job manager.
    let brokers = match (cli.broker.clone(), s.get("BACKEND_ADDR")) {
        (Some(b), _) => b,
        (None, Some(b)) if !b.trim().is_empty() => {
            let mut b = b
                .split(',')
                .map(emq_transport::loopback_for_wildcard)
                .collect::<Vec<_>>()
                .join(",");
            if let Some(f) = s.get("BACKEND_ADDR_FAILOVER") {
                let f = emq_transport::loopback_for_wildcard(f);
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
    let queues = match cli.queues.clone() {
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
    conn.grace_period = s.duration(
        cli.grace_period,
        "KILL_GRACE_PERIOD",
        conn.grace_period,
        Zero::Allowed,
        "--grace-period",
    )?;
    // Zero: no limit.
    let timeout = s.duration(
        cli.global_timeout,
        "GLOBAL_TIMEOUT",
        conn.default_timeout.unwrap_or_default(),
        Zero::Allowed,
        "--global-timeout",
    )?;
    conn.default_timeout = Some(timeout).filter(|d| !d.is_zero());
    conn.heartbeat_interval = s.duration(
        cli.heartbeat_interval,
        "HEARTBEAT_INTERVAL",
        conn.heartbeat_interval,
        Zero::Allowed,
        "--heartbeat-interval",
    )?;
    if let Some(v) = cli.heartbeat_liveness.or(setting(s, "HEARTBEAT_LIVENESS")?) {
        conn.heartbeat_liveness = v;
    }
    if let Some(v) = cli.max_message_size.or(setting(s, "MAX_MESSAGE_SIZE")?) {
        conn.max_message_size = usize::try_from(v).ok().filter(|&n| n > 0);
    }
    let prefetch = match cli.prefetch.clone().or(s.get("PREFETCH").map(String::from)) {
        Some(p) if !p.trim().is_empty() => p.parse::<Prefetch>()?,
        _ => Prefetch::adaptive(),
    };
    conn.prefetch = match (prefetch, cli.prefetch_cap.or(setting(s, "PREFETCH_CAP")?)) {
        (Prefetch::Adaptive { .. }, Some(cap)) => Prefetch::Adaptive { cap },
        (p, _) => p,
    };
    // Flags only, no setting.
    if let Some(d) = cli.ack_timeout {
        conn.ack_timeout = d;
    }
    if let Some(d) = cli.reconnect_delay {
        conn.reconnect_delay = d;
    }
    Ok(())
}

/// The Python workers' settings, over their defaults in `py`.
fn python(cli: &Cli, s: &Settings, py: &mut PythonConfig) -> Result<(), String> {
    if let Some(p) = cli.python.clone().or(s.get("PYTHON").map(String::from)) {
        py.interpreter = p;
    }
    py.setup_func = python_func(
        cli.subprocess_setup_func.clone(),
        s,
        "SUBPROCESS_SETUP_FUNC",
    )?;
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
    py.job_entry_func = python_func(cli.job_entry_func.clone(), s, "JOB_ENTRY_FUNC")?;
    py.job_exit_func = python_func(cli.job_exit_func.clone(), s, "JOB_EXIT_FUNC")?;
    if let Some(n) = cli.max_job_count.or(setting(s, "MAX_JOB_COUNT")?) {
        if n == 0 {
            return Err("MAX_JOB_COUNT (--max-job-count) must be at least 1".into());
        }
        py.max_job_count = n;
    }
    Ok(())
}

/// The exit code for a job manager that could not start or run: usage (2)
/// for a configuration that cannot work (as for bad flags), 1 otherwise.
pub fn exit_for(e: &emq_jobmanager::Error) -> emq_cli_support::Exit {
    match e {
        emq_jobmanager::Error::Config(_) => emq_cli_support::Exit::Usage,
        _ => emq_cli_support::Exit::Internal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};
    use emq_jobmanager::{Error, JobManager};
    use emq_transport::PlainCredentials;
    use std::time::Duration;

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
        assert_eq!(c.plain, Some(PlainCredentials::new("w", "pw")));
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
            Some(PlainCredentials::new("env-user", "env-pw"))
        );
        assert_eq!(
            cfg(&["--username", "w"], &env).unwrap().plain,
            Some(PlainCredentials::new("w", "env-pw"))
        );

        let file = std::env::temp_dir().join(format!("emq-jobmanager-pw-{}", std::process::id()));
        std::fs::write(&file, "filepw\n").unwrap();
        let f = file.to_str().unwrap();
        assert_eq!(
            cfg(&["--password-file", f], &env).unwrap().plain,
            Some(PlainCredentials::new("env-user", "filepw"))
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
        assert_eq!(exit_for(&e).code(), 2);
        let e = JobManager::builder()
            .broker("localhost:1")
            .build()
            .err()
            .expect("a bad endpoint is refused");
        assert_eq!(exit_for(&e).code(), 2);
        let io = Error::Io {
            context: "starting the slot threads",
            source: std::io::Error::other("no threads"),
        };
        assert_eq!(exit_for(&io).code(), 1);
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

    #[test]
    fn reload_watches_the_named_dirs_else_the_working_directory_and_pythonpath() {
        let dirs = |args: &[&str], env: &dyn Fn(&str) -> Option<String>| {
            cfg(args, env).unwrap().python.reload_dirs
        };
        assert!(dirs(&[], &no_env).is_empty());
        assert_eq!(
            dirs(&["--reload-dir", "/a", "--reload-dir", "/b"], &no_env),
            vec![PathBuf::from("/a"), PathBuf::from("/b")]
        );
        let tmp = std::env::temp_dir();
        let pp = format!("{}:/nonexistent/emq-reload", tmp.display());
        let env = |k: &str| (k == "PYTHONPATH").then(|| pp.clone());
        let got = dirs(&["--reload"], &env);
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(got.first(), Some(&cwd));
        assert!(got.contains(&tmp), "{got:?}");
        assert!(!got.contains(&PathBuf::from("/nonexistent/emq-reload")));
    }
}

#[cfg(test)]
mod config_flag {
    use super::*;
    use clap::Parser;

    #[test]
    fn config_names_the_file_without_touching_the_process_environment() {
        let path =
            std::env::temp_dir().join(format!("emq-jobmanager-cflag-{}", std::process::id()));
        std::fs::write(&path, "[jobmanager]\nCONCURRENT_JOBS=9\n").unwrap();
        let p = path.to_str().unwrap();
        let cli = Cli::try_parse_from(["emq-jobmanager", "--config", p, "-n", "w1"]).unwrap();
        // The environment names another file: --config wins.
        let env: HashMap<String, String> = [(
            "EVENTMQ_CONFIG_FILE".to_string(),
            "/nonexistent/e.conf".to_string(),
        )]
        .into();
        let plan = cli.plan(&env).unwrap();
        assert_eq!(plan.manager.connection.concurrency, 9);
        assert_eq!(plan.name.as_deref(), Some("w1"));
        assert_eq!(std::env::var_os("EVENTMQ_CONFIG_FILE"), None);
        // Without --config the environment's file is read (here: missing).
        let cli = Cli::try_parse_from(["emq-jobmanager"]).unwrap();
        assert!(cli.plan(&env).unwrap_err().contains("/nonexistent/e.conf"));
        std::fs::remove_file(&path).unwrap();
    }
}
