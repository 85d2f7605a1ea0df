//! The checked plan: [`Cli`] with the environment, turned into what
//! emq-sender will do ([`Plan`]), or a usage error (exit 2).

use std::collections::HashMap;
use std::time::Duration;

use emq_cli_support::{LogFormat, Settings};
use emqp_proto::{Command, Headers, Interval, Schedule};

use super::lowargs::{Cli, DEFAULT_ACK_TIMEOUT, DEFAULT_WAIT_TIMEOUT};
use crate::client::{default_broker, default_publisher};
use crate::payload::{self, PythonArgs, UsageError};

/// The config file section emq-sender reads (then `[global]`).
pub const SECTION: &str = "sender";

/// One job from the command line, or many from stdin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    Single(Vec<u8>),
    Bulk,
}

/// A SCHEDULE or UNSCHEDULE instead of a REQUEST.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleSpec {
    /// UNSCHEDULE rather than SCHEDULE.
    pub unschedule: bool,
    /// Time between runs, or [`Interval::Unset`] (`-1`) with a cron
    /// expression (or when an UNSCHEDULE gives neither).
    pub interval: Interval,
    /// The cron expression, or empty.
    pub cron: String,
}

/// Everything emq-sender will do, checked. `Debug` does not show the
/// password.
#[derive(Debug, Clone)]
pub struct Plan {
    pub broker: String,
    pub queue: String,
    pub headers: Headers,
    pub wait: bool,
    pub no_ack: bool,
    pub timeout: Duration,
    pub window: usize,
    /// `REJECT queue-full` is final (no resend with backoff).
    pub fail_fast: bool,
    /// The router's largest frame; `None`: no limit.
    pub max_message_size: Option<usize>,
    pub mode: Mode,
    /// Send SCHEDULE / UNSCHEDULE (the job is then always `Mode::Single`).
    pub schedule: Option<ScheduleSpec>,
    /// ZMQ PLAIN credentials `(username, password)`.
    pub plain: Option<emq_transport::PlainCredentials>,
    /// CURVE keys (wins over `plain`).
    pub curve: Option<emq_transport::curve::CurveClient>,
    /// `--publish TOPIC`: send PUBLISH [TOPIC, message] to a pub/sub
    /// process instead of REQUESTs (fire and forget, like `no_ack`).
    pub publish: Option<String>,
    /// What reading the config file found (unknown keys), printed as
    /// `emq-sender: warning: ...` at start.
    pub warnings: Vec<String>,
    /// How stderr lines are written (`--log-format`; json: one log object
    /// per line, `emq_cli_support::MessageLines`).
    pub log_format: LogFormat,
}

impl Plan {
    /// The SCHEDULE / UNSCHEDULE command to send, for a schedule plan.
    pub fn schedule_command(&self) -> Option<Command> {
        let spec = self.schedule.as_ref()?;
        let Mode::Single(message) = &self.mode else {
            return None;
        };
        let body = Schedule {
            queue: self.queue.clone(),
            headers: self.headers.clone(),
            interval: spec.interval,
            message: message.clone(),
            cron: spec.cron.clone(),
        };
        Some(if spec.unschedule {
            Command::Unschedule(body)
        } else {
            Command::Schedule(body)
        })
    }
}

impl Cli {
    /// [`Cli::plan`] with the settings every emq tool reads: `EVENTMQ_*`
    /// over the config file (`$EVENTMQ_CONFIG_FILE`, else
    /// /etc/eventmq.conf) section `[sender]`, then `[global]`; the router's
    /// `FRONTEND_ADDR` (and the pub/sub process's
    /// `PUBLISHER_INCOMING_ADDR`) also from its own section, as emq-cli
    /// finds the admin address. Other variables (`EMQ_*`) from `env`.
    pub fn plan_from(&self, env: &HashMap<String, String>) -> Result<Plan, UsageError> {
        let settings = Settings::load_client(
            SECTION,
            &[
                ("FRONTEND_ADDR", "router"),
                ("PUBLISHER_INCOMING_ADDR", "publisher"),
            ],
            env,
        )
        .map_err(|e| UsageError(e.to_string()))?;
        let lookup = |k: &str| match k.strip_prefix("EVENTMQ_") {
            Some(name) => settings.get(name).map(str::to_string),
            None => env.get(k).cloned(),
        };
        let mut plan = self.plan(&lookup)?;
        plan.warnings = settings.warnings().to_vec();
        plan.log_format = self
            .log
            .resolve(&settings)
            .map_err(|e| UsageError(e.to_string()))?;
        Ok(plan)
    }

    /// Check the arguments and build the payload. `env` looks up
    /// environment variables (injected for tests).
    pub fn plan(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<Plan, UsageError> {
        self.check_combinations()?;
        let schedule = self.schedule()?;
        let mode = self.mode(schedule.is_some())?;
        let broker = self.broker(env)?;
        if self.queue.trim().is_empty() {
            return Err(UsageError("--queue: empty queue name".into()));
        }
        if self.delay.is_some() && schedule.is_some() {
            return Err(UsageError(
                "--delay: a schedule has its own timing (--schedule-*)".into(),
            ));
        }
        if self.unique_key.is_some() && schedule.is_some() {
            return Err(UsageError(
                "--unique-key: for jobs, not schedules (give the schedule's job the header)".into(),
            ));
        }
        let headers = self.headers(schedule.is_some())?;
        let plain = emq_transport::plain_credentials(&self.auth, env).map_err(UsageError)?;
        let curve =
            emq_transport::curve::curve_client(&self.curve, &|k| env(&format!("EVENTMQ_{k}")))
                .map_err(UsageError)?;
        let max_message_size = self.max_message_size(env)?;
        let default_timeout = if self.wait {
            DEFAULT_WAIT_TIMEOUT
        } else {
            DEFAULT_ACK_TIMEOUT
        };
        Ok(Plan {
            broker,
            queue: self.queue.clone(),
            headers,
            wait: self.wait,
            no_ack: self.no_ack || self.publish.is_some(),
            timeout: self.timeout.unwrap_or(default_timeout),
            window: self.window,
            fail_fast: self.fail_fast,
            max_message_size,
            mode,
            schedule,
            plain,
            curve,
            publish: self.publish.clone(),
            warnings: Vec::new(),
            log_format: self.log.log_format.unwrap_or_default(),
        })
    }

    /// The router's largest frame: `--max-message-size`, else
    /// `EVENTMQ_MAX_MESSAGE_SIZE`, else the router's default; 0 or
    /// negative: no limit.
    fn max_message_size(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<usize>, UsageError> {
        let bytes = match self.max_message_size {
            Some(n) => n,
            None => match env("EVENTMQ_MAX_MESSAGE_SIZE") {
                Some(v) if !v.trim().is_empty() => v.trim().parse::<i64>().map_err(|_| {
                    UsageError(format!(
                        "EVENTMQ_MAX_MESSAGE_SIZE: {v:?} is not a whole number of bytes"
                    ))
                })?,
                _ => return Ok(Some(emqp_proto::DEFAULT_MAX_MESSAGE_SIZE)),
            },
        };
        Ok(usize::try_from(bytes).ok().filter(|&n| n > 0))
    }

    /// Flags that only go with other flags.
    fn check_combinations(&self) -> Result<(), UsageError> {
        let err = |m: &str| Err(UsageError(m.to_string()));
        if !self.command.is_empty() && !self.shell {
            return err("a command after `--` needs --shell (e.g. --shell -- ls -l)");
        }
        if self.args.is_some() && self.call.is_none() && self.python.is_none() {
            return err("--args needs --call or --python");
        }
        if self.python.is_none()
            && (self.kwargs.is_some() || self.class_args.is_some() || self.class_kwargs.is_some())
        {
            return err("--kwargs, --class-args and --class-kwargs need --python");
        }
        if !self.shell && (self.stdin.is_some() || !self.env.is_empty() || self.cwd.is_some()) {
            return err("--stdin, --env and --cwd need --shell");
        }
        if self.publish.is_some() {
            if self.call.is_some() || self.python.is_some() || self.shell {
                return err(
                    "--publish sends MESSAGE_JSON (or stdin lines) as it is: --call, --python \
                     and --shell build jobs for a router",
                );
            }
            if self.queue != "default" || !self.headers.is_empty() {
                return err("--queue and --header have no meaning with --publish (a PUBLISH has a topic only)");
            }
        }
        Ok(())
    }

    /// The SCHEDULE or UNSCHEDULE to send instead of a REQUEST, if any.
    fn schedule(&self) -> Result<Option<ScheduleSpec>, UsageError> {
        let err = |m: &str| Err(UsageError(m.to_string()));
        let scheduling = self.schedule_interval.is_some() || self.schedule_cron.is_some();
        if scheduling || self.unschedule {
            if self.reply {
                return err(
                    "--reply cannot be used with --schedule-interval, --schedule-cron or \
                 --unschedule: the results of scheduled runs go to no client",
                );
            }
            let cron = match &self.schedule_cron {
                Some(c) if c.trim().is_empty() => return err("--schedule-cron: empty expression"),
                Some(c) => c.clone(),
                None => String::new(),
            };
            Ok(Some(ScheduleSpec {
                unschedule: self.unschedule,
                interval: match self.schedule_interval.map(Interval::from_secs) {
                    None => Interval::Unset,
                    Some(Ok(i)) => i,
                    Some(Err(e)) => return err(&format!("--schedule-interval: {e}")),
                },
                cron,
            }))
        } else {
            if self.nohaste || self.run_count.is_some() {
                return err(
                    "--nohaste and --run-count need --schedule-interval or --schedule-cron",
                );
            }
            Ok(None)
        }
    }

    /// One job from the flags or MESSAGE_JSON, or jobs from stdin.
    fn mode(&self, scheduled: bool) -> Result<Mode, UsageError> {
        let err = |m: &str| Err(UsageError(m.to_string()));
        // Jobs built for a schedule are written as Python's json.dumps does,
        // byte for byte what 0.3.13's schedule() sends (see
        // payload::schedule_message).
        let built = |job: emqp_proto::job::Job| {
            if scheduled {
                payload::schedule_message(&job)
            } else {
                job.to_message()
            }
        };
        let mode = if let Some(handler) = &self.call {
            Mode::Single(built(payload::call_job(handler, self.args.as_deref())?))
        } else if let Some(spec) = &self.python {
            let a = PythonArgs {
                args: self.args.as_deref(),
                kwargs: self.kwargs.as_deref(),
                class_args: self.class_args.as_deref(),
                class_kwargs: self.class_kwargs.as_deref(),
            };
            Mode::Single(built(payload::python_job(spec, &a)?))
        } else if self.shell {
            Mode::Single(built(payload::shell_job(
                &self.command,
                self.stdin.as_deref(),
                &self.env,
                self.cwd.as_deref(),
            )?))
        } else {
            match self.message.as_deref() {
                None | Some("-") => Mode::Bulk,
                Some(text) => Mode::Single(payload::validate_message(text)?),
            }
        };
        if scheduled && mode == Mode::Bulk {
            return err(
                "--schedule-interval, --schedule-cron and --unschedule need one job: \
             MESSAGE_JSON or --call, --python, --shell (not jobs from stdin)",
            );
        }
        Ok(mode)
    }

    /// The router (or pub/sub) address(es): the flag, else the environment.
    fn broker(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<String, UsageError> {
        let broker = match &self.broker {
            Some(b) => b.trim().to_string(),
            None if self.publish.is_some() => {
                default_publisher(env("EVENTMQ_PUBLISHER_INCOMING_ADDR").as_deref())
            }
            None => default_broker(
                env("EMQ_BROKER_ADDR").as_deref(),
                env("EVENTMQ_FRONTEND_ADDR").as_deref(),
            ),
        };
        Ok(emq_transport::parse_endpoints(&broker, "--broker")
            .map_err(|e| UsageError(e.to_string()))?
            .join(","))
    }

    /// The HEADERS frame.
    fn headers(&self, scheduled: bool) -> Result<Headers, UsageError> {
        Ok(if scheduled {
            payload::build_schedule_headers(&self.headers, self.nohaste, self.run_count)?
        } else {
            let mut h = payload::build_headers(&self.headers, self.reply || self.wait)?;
            if let Some(d) = self.delay {
                let d = d.as_secs_f64();
                h.push(emqp_proto::Header::Other(format!("delay:{d}")));
            }
            if let Some(k) = &self.unique_key {
                if k.contains(',') {
                    return Err(UsageError(format!(
                        "--unique-key {k:?}: a key cannot hold a comma (headers are a csv)"
                    )));
                }
                h.push(emqp_proto::Header::Other(format!(
                    "unique-key:{}",
                    k.trim()
                )));
                if let Some(secs) = self.unique_for {
                    h.push(emqp_proto::Header::Other(format!("unique-for:{secs}")));
                }
                if let Some(rule) = &self.on_conflict {
                    h.push(emqp_proto::Header::Other(format!("on-conflict:{rule}")));
                }
            }
            // The router refuses bad unique headers; say so before sending.
            h.unique()
                .map_err(|e| UsageError(format!("--unique-key: {e}")))?;
            h
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flags::DEFAULT_WINDOW;
    use clap::{CommandFactory, Parser};
    use emq_transport::PlainCredentials;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("emq-sender").chain(args.iter().copied()))
    }

    fn plan(args: &[&str]) -> Result<Plan, String> {
        parse(args)
            .map_err(|e| e.to_string())?
            .plan(&no_env)
            .map_err(|e| e.0)
    }

    fn single_text(p: &Plan) -> String {
        match &p.mode {
            Mode::Single(m) => String::from_utf8(m.clone()).unwrap(),
            Mode::Bulk => panic!("bulk"),
        }
    }

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn defaults() {
        let p = plan(&["[1]"]).unwrap();
        assert_eq!(p.broker, "tcp://127.0.0.1:47291");
        assert_eq!(p.queue, "default");
        assert_eq!(p.headers.encode(), "");
        assert!(!p.wait && !p.no_ack);
        assert_eq!(p.timeout, Duration::from_secs(10));
        assert_eq!(p.window, DEFAULT_WINDOW);
        assert_eq!(single_text(&p), "[1]");
    }

    #[test]
    fn unique_flags_add_the_unique_headers() {
        let p = plan(&[
            "--unique-key",
            "order-7",
            "--unique-for",
            "60",
            "--on-conflict",
            "reject",
            "[1]",
        ])
        .unwrap();
        assert_eq!(
            p.headers.encode(),
            "unique-key:order-7,unique-for:60,on-conflict:reject"
        );
        assert!(plan(&["--unique-key", "a,b", "[1]"]).is_err());
        assert!(plan(&["--unique-key", "", "[1]"]).is_err());
        assert!(plan(&["--unique-for", "5", "[1]"]).is_err());
        assert!(plan(&["--unique-key", "k", "--on-conflict", "merge", "[1]"]).is_err());
    }

    #[test]
    fn delay_adds_the_delay_header() {
        let p = plan(&["--delay", "2.5", "--wait", "[1]"]).unwrap();
        assert_eq!(p.headers.encode(), "reply-requested,delay:2.5");
        assert_eq!(p.headers.delay(), Ok(Some(Duration::from_millis(2500))));
        assert!(plan(&["--delay", "soon", "[1]"]).is_err());
        assert!(plan(&["--delay", "5", "--schedule-interval", "60", "[1]"]).is_err());
    }

    #[test]
    fn wait_implies_reply_requested_and_a_longer_timeout() {
        let p = plan(&["--wait", "-H", "guarantee", "[1]"]).unwrap();
        assert!(p.wait);
        assert_eq!(p.headers.encode(), "reply-requested,guarantee");
        assert_eq!(p.timeout, Duration::from_secs(60));
        let p = plan(&["--wait", "--timeout", "2.5", "[1]"]).unwrap();
        assert_eq!(p.timeout, Duration::from_millis(2500));
        let p = plan(&["--reply", "[1]"]).unwrap();
        assert!(!p.wait);
        assert_eq!(p.headers.encode(), "reply-requested");
    }

    #[test]
    fn broker_from_flag_or_environment() {
        let env = |k: &str| match k {
            "EMQ_BROKER_ADDR" => Some("tcp://127.0.0.1:1".to_string()),
            "EVENTMQ_FRONTEND_ADDR" => Some("tcp://127.0.0.1:2".to_string()),
            _ => None,
        };
        let cli = parse(&["[1]"]).unwrap();
        assert_eq!(cli.plan(&env).unwrap().broker, "tcp://127.0.0.1:1");
        let cli = parse(&["--broker", "tcp://127.0.0.1:3", "[1]"]).unwrap();
        assert_eq!(cli.plan(&env).unwrap().broker, "tcp://127.0.0.1:3");
        let env2 = |k: &str| (k == "EVENTMQ_FRONTEND_ADDR").then(|| "tcp://*:47291".to_string());
        let cli = parse(&["[1]"]).unwrap();
        assert_eq!(cli.plan(&env2).unwrap().broker, "tcp://127.0.0.1:47291");
        assert!(plan(&["--broker", "127.0.0.1:1", "[1]"])
            .unwrap_err()
            .contains("--broker"));
    }

    #[test]
    fn bulk_mode_when_no_job_is_given() {
        assert_eq!(plan(&[]).unwrap().mode, Mode::Bulk);
        assert_eq!(plan(&["-"]).unwrap().mode, Mode::Bulk);
        assert_eq!(plan(&["--wait", "--window", "5"]).unwrap().window, 5);
    }

    #[test]
    fn convenience_forms() {
        let p = plan(&["--call", "echo", "--args", "[1]"]).unwrap();
        assert_eq!(single_text(&p), r#"["call",{"handler":"echo","args":[1]}]"#);
        let p = plan(&[
            "--python",
            "m:C.f",
            "--args",
            "[1]",
            "--kwargs",
            r#"{"a":2}"#,
            "--class-args",
            "[3]",
            "--class-kwargs",
            r#"{"b":4}"#,
        ])
        .unwrap();
        assert_eq!(
            single_text(&p),
            r#"["run",{"callable":"f","path":"m:C","args":[1],"kwargs":{"a":2},"class_args":[3],"class_kwargs":{"b":4}}]"#
        );
        let p = plan(&[
            "--shell", "--stdin", "x", "--env", "A=1", "--cwd", "/", "--", "ls", "-l",
        ])
        .unwrap();
        assert_eq!(
            single_text(&p),
            r#"["shell",{"argv":["ls","-l"],"stdin":"x","env":{"A":"1"},"cwd":"/"}]"#
        );
    }

    #[test]
    fn usage_errors() {
        // clap-level errors (exit 2 via clap)
        for args in [
            &["--call", "echo", "--python", "m.f"][..],
            &["--call", "echo", "[1]"],
            &["--wait", "--no-ack", "[1]"],
            &["--timeout", "0", "[1]"],
            &["--timeout", "abc", "[1]"],
            &["--window", "0"],
        ] {
            assert!(parse(args).is_err(), "{args:?} accepted");
        }
        // plan-level errors
        assert!(plan(&["not json"]).unwrap_err().contains("not valid JSON"));
        assert!(plan(&["--args", "[1]", "[1]"])
            .unwrap_err()
            .contains("--args"));
        assert!(plan(&["--", "ls"]).unwrap_err().contains("--shell"));
        assert!(plan(&["--kwargs", "{}", "[1]"])
            .unwrap_err()
            .contains("--python"));
        assert!(plan(&["--class-args", "[]", "--call", "x"])
            .unwrap_err()
            .contains("--python"));
        assert!(plan(&["--stdin", "x", "[1]"])
            .unwrap_err()
            .contains("--shell"));
        assert!(plan(&["--env", "A=1", "--call", "x"])
            .unwrap_err()
            .contains("--shell"));
        assert!(plan(&["--cwd", "/", "[1]"])
            .unwrap_err()
            .contains("--shell"));
        assert!(plan(&["--shell"]).unwrap_err().contains("--shell"));
        assert!(plan(&["--python", "nomodule"]).is_err());
        assert!(plan(&["--call", "echo", "--args", "{"]).is_err());
        assert!(plan(&["--queue", " ", "[1]"]).is_err());
        assert!(plan(&["-H", "timeout:x", "[1]"]).is_err());
    }

    #[test]
    fn help_mentions_every_form_and_exit_code() {
        let help = Cli::command().render_long_help().to_string();
        for needle in [
            "--call",
            "--python",
            "--shell",
            "--no-ack",
            "--wait",
            "Exit codes",
            "0.3.13",
            "Examples",
            "EMQ_BROKER_ADDR",
        ] {
            assert!(help.contains(needle), "help lacks {needle}");
        }
    }

    fn schedule_of(p: &Plan) -> (String, String, i64, String, String) {
        match p.schedule_command() {
            Some(Command::Schedule(s)) | Some(Command::Unschedule(s)) => (
                s.queue,
                s.headers.encode(),
                s.interval.millis().map_or(-1, |ms| ms / 1000),
                String::from_utf8(s.message).unwrap(),
                s.cron,
            ),
            other => panic!("not a schedule: {other:?}"),
        }
    }

    /// The SCHEDULE / UNSCHEDULE messages EventMQ 0.3.13's client sent,
    /// as captured (identity first), with the note naming the call.
    fn captured_schedules() -> Vec<(String, Vec<Vec<u8>>)> {
        let path = format!(
            "{}/../emqp-proto/tests/vectors/client_to_router.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        doc["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| {
                let cmd = m["frames"][3].as_str().unwrap_or("");
                cmd == "SCHEDULE" || cmd == "UNSCHEDULE"
            })
            .map(|m| {
                let frames = m["frames"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|f| f.as_str().unwrap().as_bytes().to_vec())
                    .collect();
                (m["note"].as_str().unwrap().to_string(), frames)
            })
            .collect()
    }

    #[test]
    fn schedule_frames_are_byte_for_byte_what_0_3_13_sends() {
        let captured = captured_schedules();
        assert_eq!(captured.len(), 3, "the vectors hold 3 schedule messages");
        for (note, frames) in captured {
            // the same call, spelled as emq-sender flags
            let args: &[&str] = if note.contains("unschedule=True") {
                &["--unschedule", "--schedule-interval", "60"]
            } else if note.contains("cron=") {
                &["--schedule-cron", "*/5 * * * *", "--nohaste"]
            } else {
                assert!(note.contains("interval_secs=60"), "{note}");
                &["--schedule-interval", "60"]
            };
            let mut all = args.to_vec();
            all.extend(["--python", "pyemq_jobs.noop"]);
            let p = plan(&all).unwrap();
            let identity = frames[0].clone();
            let msgid = String::from_utf8(frames[4].clone()).unwrap();
            let cmd = p.schedule_command().unwrap();
            let ours = emqp_proto::Message::with_msgid(&msgid, cmd).encode_routed(identity);
            assert_eq!(
                ours.iter()
                    .map(|f| String::from_utf8_lossy(f).into_owned())
                    .collect::<Vec<_>>(),
                frames
                    .iter()
                    .map(|f| String::from_utf8_lossy(f).into_owned())
                    .collect::<Vec<_>>(),
                "{note} ({all:?})"
            );
            // MESSAGE_JSON is sent unchanged: the captured job text gives
            // the same frames too
            let job = String::from_utf8(frames[8].clone()).unwrap();
            let mut raw = args.to_vec();
            raw.push(&job);
            let p = plan(&raw).unwrap();
            let ours = emqp_proto::Message::with_msgid(&msgid, p.schedule_command().unwrap())
                .encode_routed(frames[0].clone());
            assert_eq!(ours, frames, "{note} as MESSAGE_JSON");
        }
    }

    #[test]
    fn schedule_forms_for_every_job_form() {
        let p = plan(&[
            "--schedule-interval",
            "30",
            "--call",
            "echo",
            "--args",
            "[1]",
        ])
        .unwrap();
        assert_eq!(
            schedule_of(&p),
            (
                "default".into(),
                "guarantee".into(),
                30,
                r#"["call", {"handler": "echo", "args": [1]}]"#.into(),
                "".into()
            )
        );
        assert!(!p.schedule.as_ref().unwrap().unschedule);
        assert!(matches!(p.schedule_command(), Some(Command::Schedule(_))));
        assert_eq!(p.timeout, Duration::from_secs(10));

        let p = plan(&[
            "--schedule-cron",
            "0 3 * * 1",
            "-q",
            "nightly",
            "--shell",
            "--env",
            "A=é",
            "--",
            "backup.sh",
            "--full",
        ])
        .unwrap();
        assert_eq!(
            schedule_of(&p),
            (
                "nightly".into(),
                "guarantee".into(),
                -1,
                r#"["shell", {"argv": ["backup.sh", "--full"], "env": {"A": "\u00e9"}}]"#.into(),
                "0 3 * * 1".into()
            )
        );

        // MESSAGE_JSON: sent as given
        let p = plan(&[
            "--schedule-interval",
            "5",
            r#"[ "call",{"handler":"noop"} ]"#,
        ])
        .unwrap();
        assert_eq!(schedule_of(&p).3, r#"[ "call",{"handler":"noop"} ]"#);

        // UNSCHEDULE without interval or cron: -1 and ""
        let p = plan(&["--unschedule", "-q", "q2", "--python", "m.f"]).unwrap();
        assert!(matches!(p.schedule_command(), Some(Command::Unschedule(_))));
        assert_eq!(
            schedule_of(&p),
            (
                "q2".into(),
                "guarantee".into(),
                -1,
                r#"["run", {"callable": "f", "path": "m", "args": [], "kwargs": {}, "class_args": [], "class_kwargs": {}}]"#.into(),
                "".into()
            )
        );

        // a plain REQUEST plan has no schedule command
        assert!(plan(&["[1]"]).unwrap().schedule_command().is_none());
    }

    #[test]
    fn schedule_headers() {
        let headers = |args: &[&str]| {
            let mut all = args.to_vec();
            all.extend(["--schedule-interval", "60", "[1]"]);
            plan(&all).unwrap().headers.encode()
        };
        assert_eq!(headers(&[]), "guarantee");
        assert_eq!(headers(&["--nohaste"]), "nohaste");
        assert_eq!(headers(&["--run-count", "3"]), "run_count:3");
        assert_eq!(
            headers(&["-H", "guarantee", "--nohaste", "--run-count", "2"]),
            "guarantee,nohaste,run_count:2"
        );
        assert_eq!(headers(&["-H", "nohaste", "--nohaste"]), "nohaste");
        assert_eq!(headers(&["-H", "timeout:30"]), "timeout:30");
        assert_eq!(
            headers(&["-H", ""]),
            "",
            "--header '' opts out of guarantee"
        );
        // --no-ack is allowed (for 0.3.13 routers)
        assert!(
            plan(&["--no-ack", "--schedule-interval", "1", "[1]"])
                .unwrap()
                .no_ack
        );
    }

    #[test]
    fn curve_keys_from_flags_or_environment() {
        let server = emq_transport::curve::generate().unwrap().public.to_string();
        assert_eq!(plan(&["[1]"]).unwrap().curve, None);
        let p = plan(&["--curve-server-key", &server, "[1]"]).unwrap();
        assert_eq!(p.curve.unwrap().server_key.to_string(), server);
        let env = |k: &str| (k == "EVENTMQ_CURVE_SERVER_KEY").then(|| server.clone());
        let p = parse(&["[1]"]).unwrap().plan(&env).unwrap();
        assert_eq!(p.curve.unwrap().server_key.to_string(), server);
        let e = plan(&["--curve-server-key", "nope", "[1]"]).unwrap_err();
        assert!(e.starts_with("--curve-server-key"), "{e}");
    }

    #[test]
    fn schedule_usage_errors() {
        for args in [
            &[
                "--schedule-interval",
                "60",
                "--schedule-cron",
                "* * * * *",
                "[1]",
            ][..],
            &["--schedule-interval", "0", "[1]"],
            &["--schedule-interval", "-5", "[1]"],
            &["--schedule-interval", "1.5", "[1]"],
            &["--schedule-interval", "x", "[1]"],
            &["--wait", "--schedule-interval", "60", "[1]"],
            &["--wait", "--schedule-cron", "* * * * *", "[1]"],
            &["--wait", "--unschedule", "[1]"],
            &["--run-count", "0", "--schedule-interval", "1", "[1]"],
            &["--run-count", "x", "--schedule-interval", "1", "[1]"],
        ] {
            assert!(parse(args).is_err(), "{args:?} accepted");
        }
        assert!(plan(&["--schedule-cron", " ", "[1]"])
            .unwrap_err()
            .contains("empty"));
        assert!(plan(&["--schedule-interval", "60"])
            .unwrap_err()
            .contains("stdin"));
        assert!(plan(&["--unschedule", "-"]).unwrap_err().contains("stdin"));
        assert!(plan(&["--reply", "--schedule-interval", "60", "[1]"])
            .unwrap_err()
            .contains("--reply"));
        assert!(plan(&["--nohaste", "[1]"])
            .unwrap_err()
            .contains("--nohaste"));
        assert!(plan(&["--run-count", "2", "[1]"])
            .unwrap_err()
            .contains("--run-count"));
        assert!(plan(&["--schedule-interval", "60", "{"]).is_err());
    }

    #[test]
    fn publish_sends_the_message_as_is_to_the_pubsub_address() {
        let p = plan(&["--publish", "news", r#"{"a": 1}"#]).unwrap();
        assert_eq!(p.publish.as_deref(), Some("news"));
        assert_eq!(single_text(&p), r#"{"a": 1}"#);
        assert_eq!(p.broker, "tcp://127.0.0.1:47298");
        assert!(p.no_ack, "nothing answers a PUBLISH");
        assert!(p.schedule.is_none());
        assert_eq!(plan(&["--publish", ""]).unwrap().mode, Mode::Bulk);
        assert_eq!(
            plan(&["--publish", "", "[1]"]).unwrap().publish.as_deref(),
            Some("")
        );
        let env = |k: &str| match k {
            "EVENTMQ_PUBLISHER_INCOMING_ADDR" => Some("tcp://*:5000".to_string()),
            "EMQ_BROKER_ADDR" => Some("tcp://127.0.0.1:1".to_string()),
            _ => None,
        };
        let cli = parse(&["--publish", "t", "[1]"]).unwrap();
        assert_eq!(cli.plan(&env).unwrap().broker, "tcp://127.0.0.1:5000");
        let cli = parse(&["--publish", "t", "-b", "tcp://127.0.0.1:7", "[1]"]).unwrap();
        assert_eq!(cli.plan(&env).unwrap().broker, "tcp://127.0.0.1:7");
        let cli = parse(&["[1]"]).unwrap();
        assert_eq!(cli.plan(&env).unwrap().broker, "tcp://127.0.0.1:1");
        // no job form, queue, header, wait or schedule
        for args in [
            &["--publish", "t", "--wait", "[1]"][..],
            &["--publish", "t", "--reply", "[1]"],
            &["--publish", "t", "--delay", "1", "[1]"],
            &["--publish", "t", "--schedule-interval", "5", "[1]"],
            &["--publish", "t", "--unschedule", "[1]"],
        ] {
            assert!(parse(args).is_err(), "{args:?} accepted");
        }
        for args in [
            &["--publish", "t", "--call", "echo"][..],
            &["--publish", "t", "--python", "m.f"],
            &["--publish", "t", "--shell", "--", "ls"],
            &["--publish", "t", "-q", "email", "[1]"],
            &["--publish", "t", "-H", "guarantee", "[1]"],
        ] {
            assert!(plan(args).unwrap_err().contains("--publish"), "{args:?}");
        }
        assert!(plan(&["--publish", "t", "not json"]).is_err());
        let help = Cli::command().render_long_help().to_string();
        for needle in [
            "--publish <TOPIC>",
            "PUBLISH [topic, message]",
            "EVENTMQ_PUBLISHER_INCOMING_ADDR",
            "emq-sender --publish orders.created",
        ] {
            assert!(help.contains(needle), "help lacks {needle}");
        }
    }

    #[test]
    fn plain_credentials_from_flags_environment_or_file() {
        assert_eq!(plan(&["[1]"]).unwrap().plain, None);
        let p = plan(&["--username", "alice", "--password", "pw", "[1]"]).unwrap();
        assert_eq!(p.plain, Some(PlainCredentials::new("alice", "pw")));
        assert!(
            !format!("{p:?}").contains("\"pw\""),
            "Debug hides the password"
        );
        assert!(
            !format!("{p:?}").contains("\"pw\""),
            "Debug hides the password"
        );

        let env = |k: &str| match k {
            "EMQ_USERNAME" => Some("env-user".to_string()),
            "EMQ_PASSWORD" => Some("env-pw".to_string()),
            _ => None,
        };
        let cli = parse(&["[1]"]).unwrap();
        assert_eq!(
            cli.plan(&env).unwrap().plain,
            Some(PlainCredentials::new("env-user", "env-pw"))
        );
        let cli = parse(&["--username", "bob", "[1]"]).unwrap();
        assert_eq!(
            cli.plan(&env).unwrap().plain,
            Some(PlainCredentials::new("bob", "env-pw"))
        );

        let file = std::env::temp_dir().join(format!("emq-sender-cli-pw-{}", std::process::id()));
        std::fs::write(&file, "from-file\n").unwrap();
        let f = file.to_str().unwrap();
        let cli = parse(&["--username", "carol", "--password-file", f, "[1]"]).unwrap();
        assert_eq!(
            cli.plan(&env).unwrap().plain,
            Some(PlainCredentials::new("carol", "from-file")),
            "--password-file wins over $EMQ_PASSWORD"
        );
        std::fs::remove_file(&file).unwrap();
        assert!(plan(&["--username", "carol", "--password-file", f, "[1]"])
            .unwrap_err()
            .contains("--password-file"));

        assert!(parse(&["--password", "a", "--password-file", "/x", "[1]"]).is_err());
        assert!(plan(&["--username", "alice", "[1]"])
            .unwrap_err()
            .contains("password"));
        assert!(plan(&["--password", "pw", "[1]"])
            .unwrap_err()
            .contains("username"));
    }

    #[test]
    fn help_documents_schedules_and_credentials() {
        let help = Cli::command().render_long_help().to_string();
        for needle in [
            "--schedule-interval",
            "--schedule-cron",
            "--unschedule",
            "--nohaste",
            "--run-count",
            "run_count:N",
            "REJECT [msgid, malformed, text]",
            "--username",
            "--password-file",
            "EMQ_PASSWORD",
            "emq-sender --schedule-interval 60 --python pyemq_jobs.noop",
            "emq-sender --unschedule --python pyemq_jobs.noop",
        ] {
            assert!(help.contains(needle), "help lacks {needle}");
        }
    }
}
