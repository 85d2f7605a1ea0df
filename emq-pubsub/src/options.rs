//! Options of `emq-pubsub`: flags, `EVENTMQ_*` environment and the
//! `[publisher]` (or `[global]`) section of the config file, merged and
//! checked into [`Options`]. As in every emq binary, flags win over the
//! environment, which wins over the file; 0.3.13's own keys
//! (`PUBLISHER_INCOMING_ADDR`, `PUBLISHER_OUTGOING_ADDR`, section
//! `[publisher]`) mean the same here.

use std::time::Duration;

use clap::Parser;
use emqp_proto::settings::Settings;

use crate::core::Config;

/// 0.3.13's `PUBLISHER_INCOMING_ADDR`.
pub const DEFAULT_INCOMING: &str = "tcp://127.0.0.1:47298";
/// 0.3.13's `PUBLISHER_OUTGOING_ADDR`.
pub const DEFAULT_OUTGOING: &str = "tcp://127.0.0.1:47299";
/// The config file section 0.3.13's emq-pubsub reads.
pub const SECTION: &str = "publisher";

const DEFAULT_MAX_MESSAGE_SIZE: i64 = 16 * 1024 * 1024;
const DEFAULT_SUBSCRIBER_HWM: i32 = 100_000;
const DEFAULT_REPORT_INTERVAL: f64 = 60.0;

const AFTER_HELP: &str = "\
Publishers send PUBLISH [topic, message] (eMQP/1.0, as EventMQ 0.3.13's
eventmq.client.messages.send_publish_request, or `emq-sender --publish TOPIC`)
to the incoming address; each one is sent on to every subscriber whose
subscription is a prefix of the topic, as two frames [topic, message].
Subscribers are plain ZeroMQ SUB sockets connected to the outgoing address
(or `emq-receiver --subscribe TOPIC`). Nothing is answered: PUBLISH is fire
and forget, and a message published while no subscriber matches its topic is
dropped (ZeroMQ PUB semantics; the log counts them as \"to no subscriber\").
A subscriber that connects only just before a message is published may miss
it (ZeroMQ's slow-joiner effect). Messages that are not PUBLISH are dropped
with a warning.

Every option can also come from the environment (EVENTMQ_<KEY>) or from the
[publisher] (or [global]) section of the INI file named by EVENTMQ_CONFIG_FILE
(default /etc/eventmq.conf), as with EventMQ 0.3.13. Flags win over the
environment, which wins over the file. Keys: PUBLISHER_INCOMING_ADDR,
PUBLISHER_OUTGOING_ADDR, MAX_MESSAGE_SIZE, PUBLISHER_SUBSCRIBER_HWM,
PUBLISHER_REPORT_INTERVAL, PUBLISHER_MAX_SUBSCRIPTIONS.

SIGTERM, SIGINT or SIGQUIT stop it: what is already queued for subscribers
gets up to a second to go out, the totals are logged, exit 0. Exit code 2:
a bad option or config file; 1: any other start-up error (an address in
use).

Logs go to stderr; RUST_LOG overrides the level (default info; debug logs
every PUBLISH).";

/// EventMQ (eMQP/1.0) pub/sub: PUBLISH [topic, message] in on a ROUTER
/// socket, [topic, message] out to subscribers on a PUB socket.
#[derive(Parser, Debug)]
#[command(name = "emq-pubsub", version, after_help = AFTER_HELP)]
pub struct Cli {
    /// Endpoint publishers send PUBLISH to (bound, ROUTER)
    /// [env: EVENTMQ_PUBLISHER_INCOMING_ADDR] [default: tcp://127.0.0.1:47298]
    #[arg(long, value_name = "ADDR")]
    pub incoming: Option<String>,

    /// Endpoint subscribers connect their SUB sockets to (bound, PUB)
    /// [env: EVENTMQ_PUBLISHER_OUTGOING_ADDR] [default: tcp://127.0.0.1:47299]
    #[arg(long, value_name = "ADDR")]
    pub outgoing: Option<String>,

    /// Largest frame of a PUBLISH that is published, in bytes; a bigger one
    /// is dropped with a warning (a frame over twice the limit is cut by
    /// libzmq, which disconnects its sender). 0 or -1: no limit
    /// [env: EVENTMQ_MAX_MESSAGE_SIZE] [default: 16777216 (16 MiB)]
    #[arg(long, value_name = "BYTES", allow_negative_numbers = true)]
    pub max_message_size: Option<i64>,

    /// Messages queued for one slow subscriber before ZeroMQ drops further
    /// ones for it [env: EVENTMQ_PUBLISHER_SUBSCRIBER_HWM] [default: 100000]
    #[arg(long, value_name = "N")]
    pub subscriber_hwm: Option<i32>,

    /// Log what happened (published, to no subscriber, dropped) every SECS
    /// seconds when anything did; 0: only at exit
    /// [env: EVENTMQ_PUBLISHER_REPORT_INTERVAL] [default: 60]
    #[arg(long, value_name = "SECS", value_parser = emqp_proto::duration::secs)]
    pub report_interval: Option<f64>,

    /// Topic prefixes the subscription table keeps at most (it only serves
    /// the "to no subscriber" count: past it, subscriptions still work,
    /// are logged as not kept, and messages to no kept prefix are not
    /// counted as to no subscriber) [env: EVENTMQ_PUBLISHER_MAX_SUBSCRIPTIONS]
    /// [default: 100000]
    #[arg(long, value_name = "N")]
    pub max_subscriptions: Option<usize>,
}

/// Options after flags, environment, file and defaults are merged.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    pub incoming: String,
    pub outgoing: String,
    /// `None`: no limit.
    pub max_message_size: Option<usize>,
    pub subscriber_hwm: i32,
    pub report_every: Option<Duration>,
    pub max_subscriptions: usize,
}

impl Options {
    /// Merge `cli` over `settings` (the `[publisher]` section and
    /// `EVENTMQ_*`) and check the result.
    pub fn resolve(cli: Cli, s: &Settings) -> Result<Options, String> {
        let incoming = s.pick(
            cli.incoming,
            "PUBLISHER_INCOMING_ADDR",
            DEFAULT_INCOMING.into(),
        )?;
        let outgoing = s.pick(
            cli.outgoing,
            "PUBLISHER_OUTGOING_ADDR",
            DEFAULT_OUTGOING.into(),
        )?;
        for (what, e) in [("incoming", &incoming), ("outgoing", &outgoing)] {
            emq_transport::check_endpoint(e).map_err(|e| format!("--{what}: {e}"))?;
        }
        if incoming == outgoing {
            return Err(format!(
                "--incoming and --outgoing are the same address ({incoming})"
            ));
        }
        let max = s.pick(
            cli.max_message_size,
            "MAX_MESSAGE_SIZE",
            DEFAULT_MAX_MESSAGE_SIZE,
        )?;
        let max_message_size = if max <= 0 {
            None
        } else {
            Some(usize::try_from(max).map_err(|_| format!("--max-message-size {max}: too big"))?)
        };
        let subscriber_hwm = s.pick(
            cli.subscriber_hwm,
            "PUBLISHER_SUBSCRIBER_HWM",
            DEFAULT_SUBSCRIBER_HWM,
        )?;
        if subscriber_hwm < 1 {
            return Err(format!(
                "--subscriber-hwm must be at least 1, got {subscriber_hwm}"
            ));
        }
        let secs = s.pick_secs(
            cli.report_interval,
            "PUBLISHER_REPORT_INTERVAL",
            DEFAULT_REPORT_INTERVAL,
        )?;
        if !secs.is_finite() || secs < 0.0 {
            return Err(format!(
                "--report-interval must be a number of seconds >= 0, got {secs}"
            ));
        }
        let report_every = if secs == 0.0 {
            None
        } else {
            Some(
                Duration::try_from_secs_f64(secs)
                    .map_err(|e| format!("--report-interval {secs}: {e}"))?,
            )
        };
        let max_subscriptions = s.pick(
            cli.max_subscriptions,
            "PUBLISHER_MAX_SUBSCRIPTIONS",
            crate::core::DEFAULT_MAX_SUBSCRIPTIONS,
        )?;
        Ok(Options {
            incoming,
            outgoing,
            max_message_size,
            subscriber_hwm,
            report_every,
            max_subscriptions,
        })
    }

    /// The core's configuration.
    pub fn core_config(&self) -> Config {
        Config {
            max_message_size: self.max_message_size,
            report_every: self.report_every,
            max_subscriptions: self.max_subscriptions,
        }
    }

    /// ZMQ_MAXMSGSIZE of the incoming socket: twice the limit the core
    /// checks, so a frame a little over it reaches the core and is logged;
    /// -1 when there is no limit.
    pub fn socket_max_message_size(&self) -> i64 {
        match self.max_message_size {
            None => -1,
            Some(n) => i64::try_from(n).unwrap_or(i64::MAX).saturating_mul(2),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use clap::CommandFactory;

    use super::*;

    fn resolve(args: &[&str], env: &[(&str, &str)]) -> Result<Options, String> {
        let cli = Cli::try_parse_from(std::iter::once("emq-pubsub").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        let mut env: HashMap<String, String> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        env.entry("EVENTMQ_CONFIG_FILE".into())
            .or_insert_with(|| "/dev/null".into());
        let s = Settings::load_from(SECTION, &env).map_err(|e| e.to_string())?;
        Options::resolve(cli, &s)
    }

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn defaults_are_0_3_13_s_loopback_ports() {
        let o = resolve(&[], &[]).unwrap();
        assert_eq!(
            o,
            Options {
                incoming: "tcp://127.0.0.1:47298".into(),
                outgoing: "tcp://127.0.0.1:47299".into(),
                max_message_size: Some(16 * 1024 * 1024),
                subscriber_hwm: 100_000,
                report_every: Some(Duration::from_secs(60)),
                max_subscriptions: 100_000,
            }
        );
        assert_eq!(o.socket_max_message_size(), 32 * 1024 * 1024);
    }

    #[test]
    fn flags_win_over_environment_which_wins_over_the_file() {
        let dir = std::env::temp_dir().join(format!("emq-pubsub-opts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("eventmq.conf");
        std::fs::write(
            &file,
            "[global]\nmax_message_size = 100\n[publisher]\n\
             publisher_incoming_addr = tcp://127.0.0.1:1\n\
             publisher_outgoing_addr = tcp://127.0.0.1:2\n\
             publisher_report_interval = 0\n\
             [router]\npublisher_subscriber_hwm = 5\n",
        )
        .unwrap();
        let f = file.to_str().unwrap();
        let o = resolve(&[], &[("EVENTMQ_CONFIG_FILE", f)]).unwrap();
        assert_eq!(o.incoming, "tcp://127.0.0.1:1");
        assert_eq!(o.outgoing, "tcp://127.0.0.1:2");
        assert_eq!(o.max_message_size, Some(100));
        assert_eq!(o.subscriber_hwm, 100_000, "[router] is not read");
        assert_eq!(o.report_every, None);
        let env = [
            ("EVENTMQ_CONFIG_FILE", f),
            ("EVENTMQ_PUBLISHER_INCOMING_ADDR", "tcp://127.0.0.1:3"),
            ("EVENTMQ_PUBLISHER_SUBSCRIBER_HWM", "7"),
        ];
        let o = resolve(&[], &env).unwrap();
        assert_eq!(o.incoming, "tcp://127.0.0.1:3");
        assert_eq!(o.subscriber_hwm, 7);
        let o = resolve(
            &[
                "--incoming",
                "tcp://127.0.0.1:4",
                "--max-message-size",
                "-1",
                "--report-interval",
                "0.5",
            ],
            &env,
        )
        .unwrap();
        assert_eq!(o.incoming, "tcp://127.0.0.1:4");
        assert_eq!(o.max_message_size, None);
        assert_eq!(o.socket_max_message_size(), -1);
        assert_eq!(o.report_every, Some(Duration::from_millis(500)));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bad_values_are_clear_errors() {
        let e = resolve(&["--incoming", "127.0.0.1:1"], &[]).unwrap_err();
        assert!(e.contains("--incoming") && e.contains("tcp://"), "{e}");
        let e = resolve(
            &[],
            &[("EVENTMQ_PUBLISHER_OUTGOING_ADDR", "tcp://127.0.0.1:47298")],
        )
        .unwrap_err();
        assert!(e.contains("same address"), "{e}");
        let e = resolve(&[], &[("EVENTMQ_PUBLISHER_SUBSCRIBER_HWM", "many")]).unwrap_err();
        assert!(
            e.contains("PUBLISHER_SUBSCRIBER_HWM") && e.contains("environment"),
            "{e}"
        );
        assert!(resolve(&["--subscriber-hwm", "0"], &[]).is_err());
        assert!(resolve(&["--report-interval", "-1"], &[]).is_err());
        assert!(resolve(&["--report-interval", "nan"], &[]).is_err());
        assert!(resolve(&["--bogus"], &[]).is_err());
    }

    #[test]
    fn help_says_what_it_does_and_where_settings_come_from() {
        let help = Cli::command().render_help().to_string();
        for needle in [
            "PUBLISH [topic, message]",
            "EVENTMQ_PUBLISHER_INCOMING_ADDR",
            "EVENTMQ_PUBLISHER_OUTGOING_ADDR",
            "[publisher]",
            "emq-sender --publish",
            "emq-receiver --subscribe",
            "slow-joiner",
            "tcp://127.0.0.1:47298",
        ] {
            assert!(help.contains(needle), "help lacks {needle}");
        }
    }
}
