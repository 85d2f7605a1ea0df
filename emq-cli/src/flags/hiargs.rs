//! The checked plan: [`Cli`] plus the environment and the config file,
//! turned into what emq-cli will do ([`Plan`]), or a usage error (exit 2).
//!
//! Where the admin address comes from, first match wins: `--admin`;
//! `EVENTMQ_ADMINISTRATIVE_ADDR`; `ADMINISTRATIVE_ADDR` in the config
//! file's `[cli]` section, then `[router]` (the router's own setting is
//! where its admin socket is), then `[global]`; the 0.3.13 default. The
//! file is read with [`Settings`], as the router and the job manager read
//! theirs, so the same `/etc/eventmq.conf` serves every binary.

use std::collections::HashMap;
use std::time::Duration;

use emq_cli_support::{LogFormat, Settings};

use super::lowargs::{
    Cli, CliCommand, DeadCommand, DeadTarget as DeadTargetArgs, LimitsCommand, DEFAULT_ADMIN,
    DEFAULT_TIMEOUT,
};
use crate::op::Op;
use emqp_proto::admin::{AdminOp, DeadQuery, DeadTarget, JobsQuery, LimitsSetArgs, Order};
use emqp_proto::flow::PolicyChange;
use std::num::NonZeroU64;

/// A usage error: printed as `emq-cli: error: ...`, exit 2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// What emq-cli does: talk to a router, or print something generated from
/// the command line definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    Admin(Op),
    Completions(clap_complete::Shell),
    Man,
    /// Print `emqp_proto::admin::vocabulary()`.
    Vocabulary,
    /// Write a CURVE key pair named `name` (`force`: over existing files).
    Keygen {
        name: std::path::PathBuf,
        force: bool,
    },
}

/// Everything emq-cli will do, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub mode: Mode,
    /// The router's admin endpoint.
    pub admin: String,
    /// Where `admin` came from (for error messages).
    pub admin_source: String,
    /// How long to wait for each answer.
    pub timeout: Duration,
    pub json: bool,
    /// What to confirm on the terminal before sending (purge, dead discard
    /// --all without --yes), e.g. "remove every waiting job ...".
    pub confirm: Option<String>,
    /// CURVE client keys for the admin socket.
    pub curve: Option<emq_transport::curve::CurveClient>,
    /// What reading the config file found (unknown keys): printed as
    /// `emq-cli: warning: ...` before anything else.
    pub warnings: Vec<String>,
    /// How stderr lines are written (`--log-format`; json: one log object
    /// per line, `emq_cli_support::MessageLines`).
    pub log_format: LogFormat,
}

impl Cli {
    /// Check the arguments. `env` is the process environment (injected for
    /// tests); `stdin_tty` whether a confirmation can be asked.
    pub fn plan(&self, env: &HashMap<String, String>, stdin_tty: bool) -> Result<Plan, UsageError> {
        let (mode, yes) = self.mode()?;
        // [cli] (and [global]), with the router's ADMINISTRATIVE_ADDR from
        // [router]: read when an address or a key may come from it.
        let settings = if self.admin.is_none() || matches!(mode, Mode::Admin(_)) {
            Some(
                Settings::load_client("cli", &[("ADMINISTRATIVE_ADDR", "router")], env)
                    .map_err(|e| UsageError(e.to_string()))?,
            )
        } else {
            None
        };
        let (admin, admin_source) = match (&self.admin, &settings) {
            (Some(a), _) => (a.trim().to_string(), "--admin".to_string()),
            (None, Some(s)) => admin_from_settings(s),
            (None, None) => unreachable!("settings are read without --admin"),
        };
        let admin = admin
            .split(',')
            .map(emq_transport::loopback_for_wildcard)
            .collect::<Vec<_>>()
            .join(",");
        let admin = if matches!(mode, Mode::Admin(_)) {
            emq_transport::parse_endpoints(&admin, &format!("admin address (from {admin_source})"))
                .map_err(|e| UsageError(e.to_string()))?
                .join(",")
        } else {
            admin
        };
        let confirm = match &mode {
            Mode::Admin(op) if !yes => op.confirmation(),
            _ => None,
        };
        if let (Some(what), false) = (&confirm, stdin_tty) {
            return Err(UsageError(format!(
                "refusing to {what} without a confirmation: stdin is not a terminal; add --yes"
            )));
        }
        let curve = match (&mode, &settings) {
            // [cli] (and [global]) only: the router's CURVE_SECRET_KEY_FILE
            // is the router's own key pair, not ours.
            (Mode::Admin(_), Some(cli)) => {
                emq_transport::curve::curve_client(&self.curve, &|k| cli.get(k).map(str::to_string))
                    .map_err(UsageError)?
            }
            _ => None,
        };
        Ok(Plan {
            mode,
            admin,
            admin_source,
            timeout: self.timeout.unwrap_or(DEFAULT_TIMEOUT),
            json: self.json,
            confirm,
            curve,
            log_format: match &settings {
                Some(s) => self.log.resolve(s).map_err(|e| UsageError(e.to_string()))?,
                None => self.log.log_format.unwrap_or_default(),
            },
            warnings: settings.map(|s| s.warnings().to_vec()).unwrap_or_default(),
        })
    }

    /// The mode, and whether `--yes` was given.
    fn mode(&self) -> Result<(Mode, bool), UsageError> {
        let nonempty = |what: &str, v: &str| {
            if v.trim().is_empty() {
                Err(UsageError(format!("{what}: must not be empty")))
            } else {
                Ok(v.to_string())
            }
        };
        let op = match &self.command {
            CliCommand::Completions { shell } => return Ok((Mode::Completions(*shell), false)),
            CliCommand::Man => return Ok((Mode::Man, false)),
            CliCommand::Vocabulary => return Ok((Mode::Vocabulary, false)),
            CliCommand::Keygen { name, force } => {
                if name.as_os_str().is_empty() || name.file_name().is_none() {
                    return Err(UsageError(format!(
                        "keygen: {:?} does not name a file (e.g. /etc/emq/router)",
                        name
                    )));
                }
                return Ok((
                    Mode::Keygen {
                        name: name.clone(),
                        force: *force,
                    },
                    false,
                ));
            }
            CliCommand::Status => AdminOp::Status.into(),
            CliCommand::Queues => AdminOp::Queues.into(),
            CliCommand::Workers => AdminOp::Workers.into(),
            CliCommand::Schedules => AdminOp::Schedules.into(),
            CliCommand::Shutdown => AdminOp::Shutdown.into(),
            CliCommand::Job { msgid } => AdminOp::Job {
                msgid: nonempty("MSGID", msgid)?,
            }
            .into(),
            CliCommand::Workflow { id } => AdminOp::Workflow {
                id: nonempty("ID", id)?,
            }
            .into(),
            CliCommand::Batch { id } => AdminOp::Batch {
                id: nonempty("ID", id)?,
            }
            .into(),
            CliCommand::Cancel { msgid } => AdminOp::Cancel {
                msgid: nonempty("MSGID", msgid)?,
            }
            .into(),
            CliCommand::Requeue { msgid } => AdminOp::Requeue {
                msgid: nonempty("MSGID", msgid)?,
            }
            .into(),
            CliCommand::Jobs(a) => Op {
                admin: AdminOp::Jobs(JobsQuery {
                    queue: a.queue.clone(),
                    state: a.state,
                    contains: a.contains.clone(),
                    order: a.oldest.then_some(Order::Oldest),
                    limit: a.limit.and_then(|n| NonZeroU64::new(n.into())),
                    cursor: None,
                }),
                all: a.all,
            },
            CliCommand::Dead(DeadCommand::List {
                queue,
                contains,
                limit,
                all,
            }) => Op {
                admin: AdminOp::Dead(DeadQuery {
                    queue: queue.clone(),
                    contains: contains.clone(),
                    limit: limit.and_then(|n| NonZeroU64::new(n.into())),
                    cursor: None,
                }),
                all: *all,
            },
            CliCommand::Dead(DeadCommand::Retry(t)) => AdminOp::DeadRetry(target(t)?).into(),
            CliCommand::Dead(DeadCommand::Discard { target: t, yes }) => {
                return Ok((Mode::Admin(AdminOp::DeadDiscard(target(t)?).into()), *yes))
            }
            CliCommand::Pause { queue } => AdminOp::Pause {
                queue: nonempty("QUEUE", queue)?,
            }
            .into(),
            CliCommand::Resume { queue } => AdminOp::Resume {
                queue: nonempty("QUEUE", queue)?,
            }
            .into(),
            CliCommand::Purge { queue, yes } => {
                return Ok((
                    Mode::Admin(
                        AdminOp::Purge {
                            queue: nonempty("QUEUE", queue)?,
                        }
                        .into(),
                    ),
                    *yes,
                ))
            }
            CliCommand::Drain { worker } => AdminOp::Drain {
                worker: nonempty("WORKER", worker)?,
            }
            .into(),
            CliCommand::Undrain { worker } => AdminOp::Undrain {
                worker: nonempty("WORKER", worker)?,
            }
            .into(),
            CliCommand::Unschedule { id } => AdminOp::Unschedule {
                id: nonempty("ID", id)?,
            }
            .into(),
            CliCommand::Limits(LimitsCommand::Set {
                queue,
                concurrency,
                concurrency_per_key,
                rate,
                rate_per_key,
                fair,
                no_fair,
            }) => AdminOp::LimitsSet(LimitsSetArgs {
                queue: nonempty("QUEUE", queue)?,
                change: PolicyChange {
                    concurrency: *concurrency,
                    concurrency_per_key: *concurrency_per_key,
                    rate: *rate,
                    rate_per_key: *rate_per_key,
                    fair: match (fair, no_fair) {
                        (true, _) => Some(true),
                        (_, true) => Some(false),
                        _ => None,
                    },
                },
            })
            .into(),
            CliCommand::Limits(LimitsCommand::Show { queue }) => AdminOp::LimitsShow {
                queue: match queue {
                    Some(q) => Some(nonempty("QUEUE", q)?),
                    None => None,
                },
            }
            .into(),
            CliCommand::Limits(LimitsCommand::Clear { queue }) => AdminOp::LimitsClear {
                queue: nonempty("QUEUE", queue)?,
            }
            .into(),
        };
        Ok((Mode::Admin(op), false))
    }
}

fn target(t: &DeadTargetArgs) -> Result<DeadTarget, UsageError> {
    // clap's group makes exactly one of MSGID and --all present; its
    // `requires = "all"` does not catch --queue with MSGID (a flag's
    // default `false` counts as present).
    if t.msgid.is_some() && (t.queue.is_some() || t.contains.is_some()) {
        return Err(UsageError(
            "--queue and --contains go with --all, not with a MSGID".into(),
        ));
    }
    match (&t.msgid, t.all) {
        (Some(m), false) if !m.trim().is_empty() => Ok(DeadTarget::One { msgid: m.clone() }),
        (Some(_), false) => Err(UsageError("MSGID: must not be empty".into())),
        (None, true) => Ok(DeadTarget::All {
            queue: t.queue.clone(),
            contains: t.contains.clone(),
        }),
        _ => Err(UsageError("give either a MSGID or --all".into())),
    }
}

/// The admin address from the settings (see the module docs), and where
/// it came from.
fn admin_from_settings(s: &Settings) -> (String, String) {
    const KEY: &str = "ADMINISTRATIVE_ADDR";
    match s.get(KEY).filter(|v| !v.trim().is_empty()) {
        Some(v) => (v.trim().to_string(), s.source(KEY).unwrap_or("").into()),
        None => (DEFAULT_ADMIN.to_string(), "the default".into()),
    }
}

/// A router binds `tcp://*:P` or `tcp://0.0.0.0:P`; a client reaches it at
/// 127.0.0.1.
#[cfg(test)]
mod tests {
    use super::*;
    use clap::error::ErrorKind;
    use clap::Parser;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("emq-cli").chain(args.iter().copied()))
    }

    fn plan_env(args: &[&str], env: &[(&str, &str)], tty: bool) -> Result<Plan, UsageError> {
        let env: HashMap<String, String> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<HashMap<_, _>>();
        // No config file unless the test names one.
        let mut env = env;
        env.entry("EVENTMQ_CONFIG_FILE".into())
            .or_insert_with(|| "/dev/null".into());
        parse(args).expect("parses").plan(&env, tty)
    }

    fn plan(args: &[&str]) -> Plan {
        plan_env(args, &[], false).expect("a plan")
    }

    fn op(args: &[&str]) -> Op {
        match plan(args).mode {
            Mode::Admin(op) => op,
            other => panic!("not an admin op: {other:?}"),
        }
    }

    #[test]
    fn keygen_and_curve_flags() {
        assert_eq!(
            plan(&["keygen", "/tmp/x/router"]).mode,
            Mode::Keygen {
                name: "/tmp/x/router".into(),
                force: false,
            }
        );
        assert!(parse(&["keygen", ""]).is_err());
        let server = emq_transport::curve::generate().unwrap().public.to_string();
        assert_eq!(plan(&["status"]).curve, None);
        let p = plan(&["--curve-server-key", &server, "status"]);
        assert_eq!(p.curve.unwrap().server_key.to_string(), server);
        let p = plan_env(&["status"], &[("EVENTMQ_CURVE_SERVER_KEY", &server)], false).unwrap();
        assert_eq!(p.curve.unwrap().server_key.to_string(), server);
        // keygen needs no keys, and a bad key is a usage error elsewhere
        assert!(plan_env(&["--curve-server-key", "bad", "status"], &[], false).is_err());
        assert_eq!(
            plan(&["--curve-server-key", "bad", "keygen", "k"]).curve,
            None
        );
    }

    #[test]
    fn subcommands_map_to_ops() {
        let one = |a: AdminOp| Op::from(a);
        assert_eq!(op(&["status"]), one(AdminOp::Status));
        assert_eq!(op(&["queues"]), one(AdminOp::Queues));
        assert_eq!(op(&["workers"]), one(AdminOp::Workers));
        assert_eq!(op(&["schedules"]), one(AdminOp::Schedules));
        assert_eq!(op(&["shutdown"]), one(AdminOp::Shutdown));
        assert_eq!(op(&["job", "m1"]), one(AdminOp::Job { msgid: "m1".into() }));
        assert_eq!(
            op(&["workflow", "w1"]),
            one(AdminOp::Workflow { id: "w1".into() })
        );
        assert_eq!(
            op(&["batch", "b1"]),
            one(AdminOp::Batch { id: "b1".into() })
        );
        assert_eq!(
            op(&["cancel", "m1"]),
            one(AdminOp::Cancel { msgid: "m1".into() })
        );
        assert_eq!(
            op(&[
                "jobs",
                "-q",
                "email",
                "--state",
                "in-flight",
                "--contains",
                "x",
                "--oldest",
                "-n",
                "10",
                "--all"
            ]),
            Op {
                admin: AdminOp::Jobs(JobsQuery {
                    queue: Some("email".into()),
                    state: Some(emqp_proto::admin::ViewState::InFlight),
                    contains: Some("x".into()),
                    order: Some(Order::Oldest),
                    limit: NonZeroU64::new(10),
                    cursor: None,
                }),
                all: true,
            }
        );
        assert_eq!(
            op(&["dead", "list", "--queue", "q"]),
            one(AdminOp::Dead(DeadQuery {
                queue: Some("q".into()),
                ..DeadQuery::default()
            }))
        );
        assert_eq!(
            op(&["dead", "retry", "m1"]),
            one(AdminOp::DeadRetry(DeadTarget::One { msgid: "m1".into() }))
        );
        assert_eq!(
            op(&["dead", "retry", "--all", "--contains", "t"]),
            one(AdminOp::DeadRetry(DeadTarget::All {
                queue: None,
                contains: Some("t".into())
            }))
        );
        assert_eq!(
            op(&["dead", "discard", "m1"]),
            one(AdminOp::DeadDiscard(DeadTarget::One { msgid: "m1".into() }))
        );
        assert_eq!(
            op(&["pause", "q"]),
            one(AdminOp::Pause { queue: "q".into() })
        );
        assert_eq!(
            op(&["resume", "q"]),
            one(AdminOp::Resume { queue: "q".into() })
        );
        assert_eq!(
            op(&["purge", "q", "--yes"]),
            one(AdminOp::Purge { queue: "q".into() })
        );
        assert_eq!(
            op(&["drain", "w"]),
            one(AdminOp::Drain { worker: "w".into() })
        );
        assert_eq!(
            op(&["undrain", "w"]),
            one(AdminOp::Undrain { worker: "w".into() })
        );
        assert_eq!(
            op(&["unschedule", "s"]),
            one(AdminOp::Unschedule { id: "s".into() })
        );
        assert_eq!(plan(&["man"]).mode, Mode::Man);
        assert_eq!(plan(&["vocabulary"]).mode, Mode::Vocabulary);
        assert_eq!(
            plan(&["completions", "zsh"]).mode,
            Mode::Completions(clap_complete::Shell::Zsh)
        );
    }

    #[test]
    fn limits_set_show_and_clear() {
        use emqp_proto::flow::{Rate, RateChange};
        let set = op(&[
            "limits",
            "set",
            "email",
            "--concurrency-per-key",
            "2",
            "--rate",
            "10/1",
            "--rate-per-key",
            "none",
            "--fair",
        ]);
        assert_eq!(
            set.admin,
            AdminOp::LimitsSet(LimitsSetArgs {
                queue: "email".into(),
                change: PolicyChange {
                    concurrency: None,
                    concurrency_per_key: Some(2),
                    rate: Some(RateChange::Set(Rate {
                        n: 10,
                        per: Duration::from_secs(1)
                    })),
                    rate_per_key: Some(RateChange::Remove),
                    fair: Some(true),
                },
            })
        );
        let AdminOp::LimitsSet(a) = op(&["limits", "set", "q", "--no-fair"]).admin else {
            panic!()
        };
        assert_eq!(a.change.fair, Some(false));
        assert_eq!(
            op(&["limits", "show"]).admin,
            AdminOp::LimitsShow { queue: None }
        );
        assert_eq!(
            op(&["limits", "clear", "q"]).admin,
            AdminOp::LimitsClear { queue: "q".into() }
        );
        for bad in [
            &["limits", "set", "q"][..],
            &["limits", "set", "q", "--fair", "--no-fair"],
            &["limits", "set", "q", "--rate", "10"],
            &["limits", "set", "q", "--rate", "0/1"],
            &["limits", "set", "q", "--concurrency", "-1"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn global_options_go_before_or_after_the_subcommand() {
        let a = plan(&[
            "--json",
            "--timeout",
            "0.5",
            "--admin",
            "tcp://10.0.0.1:9",
            "queues",
        ]);
        let b = plan(&["queues", "--json", "-t", "0.5", "-a", "tcp://10.0.0.1:9"]);
        assert_eq!(a, b);
        assert!(a.json);
        assert_eq!(a.timeout, Duration::from_millis(500));
        assert_eq!(a.admin, "tcp://10.0.0.1:9");
        assert_eq!(plan(&["status"]).timeout, Duration::from_secs(5));
    }

    #[test]
    fn conflicting_and_missing_arguments_are_usage_errors() {
        let usage = |args: &[&str]| {
            let e = parse(args).expect_err(&format!("{args:?} must not parse"));
            assert_eq!(e.exit_code(), 2, "{args:?}: {e}");
            e.kind()
        };
        assert_eq!(
            usage(&[]),
            ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
        );
        assert_eq!(usage(&["job"]), ErrorKind::MissingRequiredArgument);
        assert_eq!(usage(&["cancel"]), ErrorKind::MissingRequiredArgument);
        assert_eq!(usage(&["pause"]), ErrorKind::MissingRequiredArgument);
        assert_eq!(
            usage(&["dead", "retry"]),
            ErrorKind::MissingRequiredArgument
        );
        assert_eq!(
            usage(&["dead", "discard", "--queue", "q"]),
            ErrorKind::MissingRequiredArgument
        );
        assert_eq!(
            usage(&["dead", "retry", "m", "--all"]),
            ErrorKind::ArgumentConflict
        );
        assert_eq!(
            usage(&["jobs", "--state", "sleeping"]),
            ErrorKind::InvalidValue
        );
        assert_eq!(usage(&["jobs", "--limit", "0"]), ErrorKind::ValueValidation);
        assert_eq!(
            usage(&["jobs", "--limit", "1001"]),
            ErrorKind::ValueValidation
        );
        assert_eq!(
            usage(&["status", "--timeout=-1"]),
            ErrorKind::ValueValidation
        );
        assert_eq!(
            usage(&["status", "--timeout", "soon"]),
            ErrorKind::ValueValidation
        );
        assert_eq!(usage(&["completions", "tcsh"]), ErrorKind::InvalidValue);
        assert_eq!(usage(&["frobnicate"]), ErrorKind::InvalidSubcommand);
        assert_eq!(usage(&["pause", "a", "b"]), ErrorKind::UnknownArgument);
        assert_eq!(usage(&["status", "--yes"]), ErrorKind::UnknownArgument);
        // Caught after clap, still usage errors (exit 2).
        for args in [
            &["dead", "retry", "m", "--queue", "q"][..],
            &["dead", "discard", "m", "--contains", "t"],
            &["job", ""],
            &["pause", " "],
            &["status", "--admin", "localhost:47293"],
        ] {
            assert!(plan_env(args, &[], true).is_err(), "{args:?}");
        }
    }

    #[test]
    fn destructive_ops_need_a_tty_or_yes() {
        // No terminal, no --yes: refused before anything is sent.
        for args in [&["purge", "q"][..], &["dead", "discard", "--all"]] {
            let e = plan_env(args, &[], false).expect_err("refused");
            assert!(e.0.contains("--yes"), "{e}");
        }
        // A terminal: the plan carries what to confirm.
        let p = plan_env(&["purge", "q"], &[], true).unwrap();
        assert!(p.confirm.as_deref().unwrap().contains("queue \"q\""));
        let p = plan_env(
            &["dead", "discard", "--all", "-q", "e", "-c", "x"],
            &[],
            true,
        )
        .unwrap();
        let what = p.confirm.unwrap();
        assert!(
            what.contains("of queue \"e\"") && what.contains("containing \"x\""),
            "{what}"
        );
        // --yes: nothing to confirm, no terminal needed.
        assert_eq!(plan(&["purge", "q", "-y"]).confirm, None);
        assert_eq!(plan(&["dead", "discard", "--all", "--yes"]).confirm, None);
        // One dead letter by msgid, and retries, need no confirmation.
        assert_eq!(plan(&["dead", "discard", "m"]).confirm, None);
        assert_eq!(plan(&["dead", "retry", "--all"]).confirm, None);
    }

    #[test]
    fn admin_address_precedence() {
        let dir = std::env::temp_dir().join(format!("emq-cli-conf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let write = |name: &str, text: &str| {
            let p = dir.join(name);
            std::fs::write(&p, text).unwrap();
            p.display().to_string()
        };
        let all = write(
            "all.conf",
            "[global]\nadministrative_addr=tcp://127.0.0.1:1\n\
             [router]\nadministrative_addr=tcp://127.0.0.1:2\n\
             [cli]\nadministrative_addr=tcp://127.0.0.1:3\n",
        );
        let router = write(
            "router.conf",
            "[global]\nadministrative_addr=tcp://127.0.0.1:1\n\
             [router]\nadministrative_addr=tcp://*:2\n",
        );
        let global = write(
            "global.conf",
            "[global]\nadministrative_addr=tcp://127.0.0.1:1\n",
        );
        let addr = |args: &[&str], env: &[(&str, &str)]| {
            let p = plan_env(args, env, false).unwrap();
            (p.admin, p.admin_source)
        };
        const CONF: &str = "EVENTMQ_CONFIG_FILE";
        // [cli] beats [router] beats [global]; a wildcard bind is reached on loopback.
        assert_eq!(addr(&["status"], &[(CONF, &all)]).0, "tcp://127.0.0.1:3");
        assert_eq!(addr(&["status"], &[(CONF, &router)]).0, "tcp://127.0.0.1:2");
        let (a, src) = addr(&["status"], &[(CONF, &global)]);
        assert_eq!(a, "tcp://127.0.0.1:1");
        assert!(src.ends_with("[global]"), "{src}");
        // The environment beats the file; --admin beats both.
        let env = [
            (CONF, all.as_str()),
            ("EVENTMQ_ADMINISTRATIVE_ADDR", "tcp://127.0.0.1:4"),
        ];
        let (a, src) = addr(&["status"], &env);
        assert_eq!(a, "tcp://127.0.0.1:4");
        assert_eq!(src, "environment EVENTMQ_ADMINISTRATIVE_ADDR");
        assert_eq!(
            addr(&["status", "--admin", "tcp://127.0.0.1:5"], &env),
            ("tcp://127.0.0.1:5".to_string(), "--admin".to_string())
        );
        // Nothing set: 0.3.13's default.
        assert_eq!(addr(&["status"], &[]).0, DEFAULT_ADMIN);
        // A named config file that is missing is a usage error.
        assert!(plan_env(
            &["status"],
            &[("EVENTMQ_CONFIG_FILE", "/nonexistent/e.conf")],
            false
        )
        .is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
