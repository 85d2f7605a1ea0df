//! The checked plan: [`Cli`] with the `EVENTMQ_*` environment and the
//! config file, merged and checked into [`Plan`] (the core's `Config` and
//! the binary's own settings). The same layering as every emq binary
//! (`emq_cli_support::settings`): flags win over the environment, which
//! wins over the `[router]` (then `[global]`) section of the file. The
//! access rules are the transport's (`AccessPolicy::from_settings`).
//! Zero: the heartbeat and the lease timers must pass (an error, exit 1);
//! every other duration takes it (`--drain-timeout 0`: do not wait).

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use emq_cli_support::Zero::{Allowed, Refused};
use emq_cli_support::{LogFormat, Settings};
use emq_journal::JournalTarget;
use emq_router_core::lease::LeaseConfig;
use emq_router_core::Config;
use emq_transport::zap::{AccessFiles, AccessPolicy};
use emqp_proto::QueueSpec;

use super::lowargs::{Cli, DEFAULT_ADMIN, DEFAULT_BACKEND, DEFAULT_FRONTEND};

/// The config file section the router reads.
pub(crate) const SECTION: &str = "router";

impl Cli {
    /// Check the flags with the environment `env` (the process's, passed
    /// in) and the config file it names.
    pub(crate) fn plan(self, env: &HashMap<String, String>) -> Result<Plan, String> {
        let settings = Settings::load_from(SECTION, env).map_err(|e| e.to_string())?;
        settings.log_warnings();
        let traces_url = self.otlp.traces_url(env)?;
        let mut plan = Plan::resolve(self, &settings)?;
        plan.core.traces = traces_url.is_some();
        plan.traces_url = traces_url;
        Ok(plan)
    }
}

/// The router's default `--max-message-size`: the protocol's one figure.
const DEFAULT_MAX_MESSAGE_SIZE: i64 = emqp_proto::DEFAULT_MAX_MESSAGE_SIZE as i64;

/// Flags, environment, file and defaults merged and checked: what the
/// router will serve, and the interface between the flags and `serve`.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub(crate) frontend: String,
    pub(crate) backend: String,
    pub(crate) admin: String,
    pub(crate) journal: JournalTarget,
    /// No --journal / JOURNAL given: the data-dir default (or none if no
    /// data dir is known).
    pub(crate) journal_default: bool,
    /// `--outbox`: the application database whose outbox this router
    /// drains (`outbox.rs`).
    pub(crate) outbox: Option<String>,
    /// The leader lease's timers (used with a PostgreSQL journal).
    pub(crate) lease: LeaseConfig,
    pub(crate) metrics: Option<String>,
    /// `--max-message-size`; -1: no limit. The core checks it
    /// (`core.max_message_size`); the sockets get
    /// [`Plan::socket_max_message_size`].
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
    /// `--log-format`: text or one JSON object per line.
    pub(crate) log_format: LogFormat,
    /// `--otlp-endpoint` (or the OTEL_EXPORTER_OTLP_* environment): the
    /// full traces URL; `None`: no traces (`core.traces` off).
    pub(crate) traces_url: Option<String>,
}

impl Plan {
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

    /// Merge `cli` over the settings `s` (`[router]`, `EVENTMQ_*`) and check.
    pub(crate) fn resolve(cli: Cli, s: &Settings) -> Result<Plan, String> {
        let text = |flag: &Option<String>, key: &str, default: &str| -> String {
            flag.clone()
                .or_else(|| s.get(key).map(str::to_string))
                .unwrap_or_else(|| default.to_string())
        };
        let frontend = text(&cli.frontend, "FRONTEND_ADDR", DEFAULT_FRONTEND);
        let backend = text(&cli.backend, "BACKEND_ADDR", DEFAULT_BACKEND);
        let admin = text(&cli.admin, "ADMINISTRATIVE_ADDR", DEFAULT_ADMIN);
        for e in [&frontend, &backend, &admin] {
            emq_transport::check_endpoint(e).map_err(|e| e.to_string())?;
        }
        let journal_arg = cli
            .journal
            .clone()
            .or_else(|| s.get("JOURNAL").map(str::to_string));
        let journal = emq_journal::resolve_journal_target(journal_arg.as_deref().map(str::trim));
        let lease = lease(&cli, s)?;
        let mut max_message_size = s.pick(
            cli.max_message_size,
            "MAX_MESSAGE_SIZE",
            DEFAULT_MAX_MESSAGE_SIZE,
        )?;
        if max_message_size <= 0 {
            max_message_size = -1;
        }
        let mut core = core_config(&cli, s, journal.is_some(), max_message_size)?;
        if matches!(journal, JournalTarget::Postgres(_)) {
            // PostgreSQL's commits cost per row, not per batch: a batch
            // held to grow only adds latency (docs/PERFORMANCE.md).
            core.commit_max_delay = emq_router_core::config::COMMIT_DELAY;
        }
        let metrics = address(&cli.metrics, s, "METRICS_ADDR");
        let outbox = address(&cli.outbox, s, "OUTBOX");
        if let Some(url) = &outbox {
            if !emq_journal::postgres::is_postgres_url(url) {
                return Err(format!(
                    "--outbox {url:?}: not a postgresql:// URL (the outbox is a table in the \
                     application's PostgreSQL database)"
                ));
            }
        }
        let http = http(&cli, s)?;
        let access = AccessPolicy::from_settings(&cli.access, s, &admin)?;
        let log_format = cli.log.resolve(s)?;
        Ok(Plan {
            frontend,
            backend,
            admin,
            journal,
            journal_default: journal_arg.is_none(),
            outbox,
            lease,
            metrics,
            http,
            max_message_size,
            access: access.policy,
            access_files: access.files,
            access_log: access.log,
            access_warnings: access.warnings,
            core,
            log_format,
            traces_url: None,
        })
    }
}

/// The leader lease's timers (used with a PostgreSQL journal); both must
/// pass, and fit together.
fn lease(cli: &Cli, s: &Settings) -> Result<LeaseConfig, String> {
    let secs = Duration::from_secs;
    let ttl = s.duration(cli.lease_ttl, "LEASE_TTL", secs(3), Refused, "--lease-ttl")?;
    let renew_every = s.duration(
        cli.lease_renew,
        "LEASE_RENEW",
        secs(1),
        Refused,
        "--lease-renew",
    )?;
    let lease = LeaseConfig {
        ttl,
        renew_every,
        retry_every: renew_every / 2,
    };
    lease.check()?;
    Ok(lease)
}

/// An HTTP address flag or setting; blank or `none`: off.
fn address(flag: &Option<String>, s: &Settings, key: &str) -> Option<String> {
    flag.clone()
        .or_else(|| s.get(key).map(str::to_string))
        .map(|a| a.trim().to_string())
        .filter(|a| !a.is_empty() && !a.eq_ignore_ascii_case("none"))
}

/// `--http`: the dashboard's address and access rules, if it is on.
fn http(cli: &Cli, s: &Settings) -> Result<Option<(String, emq_dashboard::Access)>, String> {
    let Some(addr) = address(&cli.http, s, "HTTP_ADDR") else {
        return Ok(None);
    };
    let token = match cli
        .http_token_file
        .clone()
        .or_else(|| s.get("HTTP_TOKEN_FILE").map(PathBuf::from))
    {
        Some(f) => Some(emq_dashboard::access::read_token_file(&f)?),
        None => None,
    };
    // Checked here, before any socket is bound (the dashboard binds last).
    emq_dashboard::check_address(&addr, token.as_deref())?;
    let read_only = cli.http_read_only || s.pick(None, "HTTP_READ_ONLY", false)?;
    Ok(Some((addr, emq_dashboard::Access { token, read_only })))
}

/// The core's configuration. Zero: the heartbeat must pass; every other
/// duration takes it.
fn core_config(
    cli: &Cli,
    s: &Settings,
    journal: bool,
    max_message_size: i64,
) -> Result<Config, String> {
    let default_queues = match cli
        .default_queues
        .clone()
        .or_else(|| s.get("QUEUES").map(str::to_string))
    {
        None => QueueSpec::default(),
        Some(t) => {
            let q =
                QueueSpec::parse_cli(&t).map_err(|e| format!("bad default queues {t:?}: {e}"))?;
            if q.is_empty() {
                QueueSpec::default()
            } else {
                q
            }
        }
    };
    let max_attempts = s.pick(cli.max_attempts, "MAX_ATTEMPTS", 5)?;
    if max_attempts == 0 {
        return Err("--max-attempts must be at least 1".into());
    }
    let liveness = s.pick(cli.heartbeat_liveness, "HEARTBEAT_LIVENESS", 3)?;
    if liveness == 0 {
        return Err("--heartbeat-liveness must be at least 1".into());
    }
    let secs = Duration::from_secs;
    let hour = secs(3600);
    Ok(Config {
        hwm: s.pick(cli.hwm, "HWM", emq_router_core::config::DEFAULT_HWM)?,
        max_unique_keys: s.pick(
            cli.max_unique_keys,
            "MAX_UNIQUE_KEYS",
            emq_router_core::config::DEFAULT_MAX_UNIQUE_KEYS,
        )?,
        heartbeat_interval: s.duration(
            cli.heartbeat_interval,
            "HEARTBEAT_INTERVAL",
            secs(3),
            Refused,
            "--heartbeat-interval",
        )?,
        heartbeat_liveness: liveness,
        max_attempts,
        retry_backoff_base: s.duration(
            cli.retry_backoff,
            "RETRY_BACKOFF",
            secs(1),
            Allowed,
            "--retry-backoff",
        )?,
        retry_backoff_max: s.duration(
            cli.retry_backoff_max,
            "RETRY_BACKOFF_MAX",
            secs(60),
            Allowed,
            "--retry-backoff-max",
        )?,
        drain_timeout: s.duration(
            cli.drain_timeout,
            "DRAIN_TIMEOUT",
            secs(10),
            Allowed,
            "--drain-timeout",
        )?,
        retain_finished: s.pick(cli.retain_finished, "RETAIN_FINISHED", 10_000)?,
        retain_for: s.duration(cli.retain_for, "RETAIN_FOR", hour, Allowed, "--retain-for")?,
        retain_result_bytes: s.pick(cli.retain_result_bytes, "RETAIN_RESULT_BYTES", 8192)?,
        dead_letter_keep: s.pick(cli.dead_letter_keep, "DEAD_LETTER_KEEP", 10_000)?,
        results_keep: s.pick(cli.results_keep, "RESULTS_KEEP", 100_000)?,
        results_keep_bytes: s.pick(
            cli.results_keep_bytes,
            "RESULTS_KEEP_BYTES",
            256 * 1024 * 1024,
        )?,
        results_keep_for: s.duration(
            cli.results_keep_for,
            "RESULTS_KEEP_FOR",
            hour,
            Allowed,
            "--results-keep-for",
        )?,
        workflows_keep: s.pick(
            cli.workflows_keep,
            "WORKFLOWS_KEEP",
            emq_router_core::config::DEFAULT_WORKFLOWS_KEEP,
        )?,
        workflows_keep_for: s.duration(
            cli.workflows_keep_for,
            "WORKFLOWS_KEEP_FOR",
            emq_router_core::config::DEFAULT_WORKFLOWS_KEEP_FOR,
            Allowed,
            "--workflows-keep-for",
        )?,
        default_queues,
        unserved: s.pick(
            cli.unserved_queues,
            "UNSERVED_QUEUES",
            emq_router_core::config::Unserved::Default,
        )?,
        journal,
        max_message_size: usize::try_from(max_message_size).ok(),
        limits: limits(cli, s)?,
        ..Config::default()
    })
}

/// `--limit` (repeatable), else `LIMITS` (`;`-separated): one policy per
/// queue.
fn limits(cli: &Cli, s: &Settings) -> Result<Vec<(String, emqp_proto::Policy)>, String> {
    let entries: Vec<String> = if cli.limits.is_empty() {
        s.get("LIMITS")
            .map(|v| {
                v.split(';')
                    .map(str::trim)
                    .filter(|e| !e.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    } else {
        cli.limits.clone()
    };
    let mut out: Vec<(String, emqp_proto::Policy)> = Vec::new();
    for e in entries {
        let (q, p) = emqp_proto::flow::parse_queue_limit(&e).map_err(|e| e.to_string())?;
        if out.iter().any(|(o, _)| *o == q) {
            return Err(format!("--limit: queue {q} given twice"));
        }
        out.push((q, p));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
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
    fn limits_are_repeatable_flags_or_a_setting() {
        let o = Plan::resolve(
            cli(&[
                "--limit",
                "email:concurrency-per-key=2,fair",
                "--limit",
                "sms:rate=10/1",
            ]),
            &settings(&[]),
        )
        .unwrap();
        let got: Vec<String> = o
            .core
            .limits
            .iter()
            .map(|(q, p)| format!("{q}:{p}"))
            .collect();
        assert_eq!(got, ["email:concurrency-per-key=2,fair", "sms:rate=10/1"]);
        let s = settings(&[("EVENTMQ_LIMITS", "a:concurrency=1; b:rate=1/2")]);
        assert_eq!(Plan::resolve(cli(&[]), &s).unwrap().core.limits.len(), 2);
        for bad in [
            &["--limit", "email"][..],
            &["--limit", "q:x=1"],
            &["--limit", "q:concurrency=1", "--limit", "q:fair"],
        ] {
            assert!(Plan::resolve(cli(bad), &settings(&[])).is_err(), "{bad:?}");
        }
        assert!(Plan::resolve(cli(&[]), &settings(&[]))
            .unwrap()
            .core
            .limits
            .is_empty());
    }

    #[test]
    fn defaults_match_the_cli_contract() {
        let o = Plan::resolve(cli(&[]), &settings(&[])).unwrap();
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
        let o = Plan::resolve(cli(&["--frontend", "tcp://127.0.0.1:9", "--hwm", "8"]), &s).unwrap();
        assert_eq!(o.frontend, "tcp://127.0.0.1:9");
        assert_eq!(o.backend, "tcp://127.0.0.1:2");
        assert_eq!(o.admin, "tcp://127.0.0.1:3");
        assert_eq!(o.core.hwm, 8);
        let o = Plan::resolve(cli(&["--max-unique-keys", "9"]), &s).unwrap();
        assert_eq!(o.core.max_unique_keys, 9);
        assert_eq!(o.core.heartbeat_interval, Duration::from_millis(1500));
        assert_eq!(o.core.default_queues.0[0], (20, "high".to_string()));
    }

    #[test]
    fn unserved_queues_default_to_0313s_rule_and_hold_is_a_flag_or_setting() {
        use emq_router_core::config::Unserved;
        let o = Plan::resolve(cli(&[]), &settings(&[])).unwrap();
        assert_eq!(o.core.unserved, Unserved::Default);
        let o = Plan::resolve(cli(&["--unserved-queues", "hold"]), &settings(&[])).unwrap();
        assert_eq!(o.core.unserved, Unserved::Hold);
        let s = settings(&[("EVENTMQ_UNSERVED_QUEUES", "hold")]);
        assert_eq!(
            Plan::resolve(cli(&[]), &s).unwrap().core.unserved,
            Unserved::Hold
        );
        let o = Plan::resolve(cli(&["--unserved-queues", "default"]), &s).unwrap();
        assert_eq!(o.core.unserved, Unserved::Default, "the flag wins");
        assert!(Cli::try_parse_from(["emq-router", "--unserved-queues", "drop"]).is_err());
        let bad = settings(&[("EVENTMQ_UNSERVED_QUEUES", "keep")]);
        let e = Plan::resolve(cli(&[]), &bad).unwrap_err();
        assert!(e.contains("UNSERVED_QUEUES"), "{e}");
    }

    #[test]
    fn durations_take_units_from_flags_and_settings() {
        let s = settings(&[
            ("EVENTMQ_HEARTBEAT_INTERVAL", "500ms"),
            ("EVENTMQ_RETAIN_FOR", "2h"),
        ]);
        let o = Plan::resolve(cli(&["--drain-timeout", "1m"]), &s).unwrap();
        assert_eq!(o.core.drain_timeout, Duration::from_secs(60));
        assert_eq!(o.core.heartbeat_interval, Duration::from_millis(500));
        assert_eq!(o.core.retain_for, Duration::from_secs(7200));
        assert!(Cli::try_parse_from(["emq-router", "--drain-timeout", "soon"]).is_err());
        let e = Plan::resolve(cli(&[]), &settings(&[("EVENTMQ_RETAIN_FOR", "-1")])).unwrap_err();
        assert!(e.contains("EVENTMQ_RETAIN_FOR"), "{e}");
    }

    #[test]
    fn bad_values_are_clear_errors() {
        let e = Plan::resolve(cli(&[]), &settings(&[("EVENTMQ_HWM", "lots")])).unwrap_err();
        assert!(e.contains("HWM") && e.contains("lots"), "{e}");
        let e = Plan::resolve(cli(&["--backend", "localhost:1"]), &settings(&[])).unwrap_err();
        assert!(e.contains("tcp://"), "{e}");
        assert!(Plan::resolve(cli(&["--heartbeat-interval", "0"]), &settings(&[])).is_err());
        assert!(Plan::resolve(cli(&["--max-attempts", "0"]), &settings(&[])).is_err());
        assert!(Cli::try_parse_from(["emq-router", "--hwm", "-1"]).is_err());
    }

    #[test]
    fn journal_flag_selects_a_file_or_none() {
        let o = Plan::resolve(cli(&["--journal", "/tmp/x/j.sqlite"]), &settings(&[])).unwrap();
        assert_eq!(o.journal, JournalTarget::Sqlite("/tmp/x/j.sqlite".into()));
        assert!(o.core.journal);
        // SQLite shares a commit's fixed cost among a batch grown under
        // load; PostgreSQL pays per row: its batches keep a 1 ms cadence.
        use emq_router_core::config::{COMMIT_DELAY, DEFAULT_COMMIT_MAX_DELAY};
        assert_eq!(o.core.commit_max_delay, DEFAULT_COMMIT_MAX_DELAY);
        let url = "postgresql://emq@127.0.0.1:5432/emq";
        let o = Plan::resolve(cli(&[]), &settings(&[("EVENTMQ_JOURNAL", url)])).unwrap();
        assert_eq!(o.journal, JournalTarget::Postgres(url.into()));
        assert!(o.core.journal);
        assert_eq!(o.core.commit_max_delay, COMMIT_DELAY);
        let o = Plan::resolve(
            cli(&["--journal", "none"]),
            &settings(&[("EVENTMQ_JOURNAL", "/tmp/y")]),
        )
        .unwrap();
        assert!(!o.journal.is_some());
    }

    #[test]
    fn lease_timers_come_from_flags_or_settings_and_must_fit() {
        let o = Plan::resolve(
            cli(&["--lease-ttl", "2"]),
            &settings(&[("EVENTMQ_LEASE_RENEW", "0.5")]),
        )
        .unwrap();
        assert_eq!(o.lease.ttl, Duration::from_secs(2));
        assert_eq!(o.lease.renew_every, Duration::from_millis(500));
        assert_eq!(o.lease.retry_every, Duration::from_millis(250));
        let e = Plan::resolve(
            cli(&["--lease-ttl", "1", "--lease-renew", "1"]),
            &settings(&[]),
        )
        .unwrap_err();
        assert!(e.contains("half"), "{e}");
        assert!(Plan::resolve(cli(&["--lease-ttl", "0"]), &settings(&[])).is_err());
    }

    #[test]
    fn access_metrics_and_size_defaults_and_flags() {
        let o = Plan::resolve(cli(&[]), &settings(&[])).unwrap();
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
        let o = Plan::resolve(
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
            Plan::resolve(cli(&["--allow-backend", "10.0.0.0/99"]), &settings(&[])).unwrap_err();
        assert!(e.contains("--allow-backend"), "{e}");
        let e = Plan::resolve(
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
                let e = Plan::resolve(cli(&[flag, empty]), &settings(&[])).unwrap_err();
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
            let e = Plan::resolve(cli(&[]), &settings(&[(key, "")])).unwrap_err();
            assert!(
                e.starts_with(flag) && e.contains(key) && e.contains("empty list"),
                "{e}"
            );
        }
    }

    #[test]
    fn an_admin_socket_open_to_any_address_is_said_and_warned_about() {
        let o = Plan::resolve(cli(&[]), &settings(&[])).unwrap();
        assert!(o.access_warnings.is_empty(), "{:?}", o.access_warnings);
        assert_eq!(
            o.access_log,
            ["access control on admin: allow 127.0.0.0/8,::1"]
        );

        let o = Plan::resolve(cli(&["--allow-admin", "any"]), &settings(&[])).unwrap();
        assert!(!o.access.domains.contains_key("admin"));
        assert_eq!(o.access_warnings.len(), 1);
        assert!(
            o.access_warnings[0].contains("any address")
                && o.access_warnings[0].contains("--allow-admin any"),
            "{:?}",
            o.access_warnings
        );

        let o = Plan::resolve(
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
        let o = Plan::resolve(
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
            Plan::resolve(cli(&["--plain-users", f.to_str().unwrap()]), &settings(&[])).unwrap();
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
        let o = Plan::resolve(
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
        let o = Plan::resolve(
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
        let e = Plan::resolve(cli(&["--curve-keys", clients]), &settings(&[])).unwrap_err();
        assert!(e.contains("--curve-secret-key-file"), "{e}");
        let e =
            Plan::resolve(cli(&["--curve-secret-key-file", secret]), &settings(&[])).unwrap_err();
        assert!(e.contains("no socket has authorised client keys"), "{e}");
        let users = dir.join("users");
        std::fs::write(&users, "u:p\n").unwrap();
        let e = Plan::resolve(
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
        let e = Plan::resolve(
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
        let e = Plan::resolve(
            cli(&["--curve-secret-key-file", secret, "--curve-keys", "any"]),
            &settings(&[]),
        )
        .unwrap_err();
        assert!(e.contains("chmod 600"), "{e}");
        std::fs::set_permissions(secret, std::fs::Permissions::from_mode(0o600)).unwrap();

        // SIGHUP's reload sees a key added to the directory
        let o = Plan::resolve(
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
        let o = Plan::resolve(cli(&[]), &settings(&[])).unwrap();
        assert!(o.http.is_none());
        let f = std::env::temp_dir().join(format!("emq-router-token-{}", std::process::id()));
        std::fs::write(&f, "  tok\n").unwrap();
        let o = Plan::resolve(
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
        let e = Plan::resolve(
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
            Plan::resolve(cli(&[]), &settings(&[("EVENTMQ_HTTP_ADDR", "127.0.0.1:9")])).unwrap();
        assert!(!o.http.unwrap().1.read_only);
    }

    #[test]
    fn journal_default_is_the_data_dir_and_none_turns_it_off() {
        let o = Plan::resolve(cli(&["--journal", "none"]), &settings(&[])).unwrap();
        assert!(!o.journal.is_some() && !o.core.journal && !o.journal_default);
        let o = Plan::resolve(cli(&[]), &settings(&[("EVENTMQ_JOURNAL", "NONE")])).unwrap();
        assert!(!o.journal.is_some() && !o.journal_default);
    }
}
