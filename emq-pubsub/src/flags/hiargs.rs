//! The checked plan of `emq-pubsub`: flags, `EVENTMQ_*` environment and
//! the `[publisher]` (or `[global]`) section of the config file, merged and
//! checked into [`Plan`]. As in every emq binary
//! (`emq_cli_support::settings`), flags win over the environment, which
//! wins over the file; 0.3.13's own keys (`PUBLISHER_INCOMING_ADDR`,
//! `PUBLISHER_OUTGOING_ADDR`, section `[publisher]`) mean the same here.

use std::collections::HashMap;
use std::time::Duration;

use emq_cli_support::{LogFormat, Settings, Zero};

use super::lowargs::{
    Cli, DEFAULT_INCOMING, DEFAULT_MAX_MESSAGE_SIZE, DEFAULT_OUTGOING, DEFAULT_REPORT_INTERVAL,
    DEFAULT_SUBSCRIBER_HWM,
};
use crate::core::Config;

/// The config file section 0.3.13's emq-pubsub reads.
pub const SECTION: &str = "publisher";

impl Cli {
    /// Check the flags with the environment `env` (the process's, passed
    /// in) and the config file it names.
    pub fn plan(self, env: &HashMap<String, String>) -> Result<Plan, String> {
        let settings = Settings::load_from(SECTION, env).map_err(|e| e.to_string())?;
        settings.log_warnings();
        Plan::resolve(self, &settings)
    }
}

/// Flags, environment, file and defaults merged and checked: what the
/// pub/sub process will serve.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub incoming: String,
    pub outgoing: String,
    /// `None`: no limit.
    pub max_message_size: Option<usize>,
    pub subscriber_hwm: i32,
    pub report_every: Option<Duration>,
    pub max_subscriptions: usize,
    /// `--log-format`: text or one JSON object per line.
    pub log_format: LogFormat,
}

impl Plan {
    /// Merge `cli` over `settings` (the `[publisher]` section and
    /// `EVENTMQ_*`) and check the result.
    pub fn resolve(cli: Cli, s: &Settings) -> Result<Plan, String> {
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
        // Zero: only at exit.
        let report_every = s.duration(
            cli.report_interval,
            "PUBLISHER_REPORT_INTERVAL",
            DEFAULT_REPORT_INTERVAL,
            Zero::Allowed,
            "--report-interval",
        )?;
        let report_every = Some(report_every).filter(|d| !d.is_zero());
        let max_subscriptions = s.pick(
            cli.max_subscriptions,
            "PUBLISHER_MAX_SUBSCRIPTIONS",
            crate::core::DEFAULT_MAX_SUBSCRIPTIONS,
        )?;
        let log_format = cli.log.resolve(s)?;
        Ok(Plan {
            incoming,
            outgoing,
            max_message_size,
            subscriber_hwm,
            report_every,
            max_subscriptions,
            log_format,
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

    use clap::{CommandFactory, Parser};

    use super::*;

    fn resolve(args: &[&str], env: &[(&str, &str)]) -> Result<Plan, String> {
        let cli = Cli::try_parse_from(std::iter::once("emq-pubsub").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        let mut env: HashMap<String, String> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        env.entry("EVENTMQ_CONFIG_FILE".into())
            .or_insert_with(|| "/dev/null".into());
        let s = Settings::load_from(SECTION, &env).map_err(|e| e.to_string())?;
        Plan::resolve(cli, &s)
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
            Plan {
                incoming: "tcp://127.0.0.1:47298".into(),
                outgoing: "tcp://127.0.0.1:47299".into(),
                max_message_size: Some(16 * 1024 * 1024),
                subscriber_hwm: 100_000,
                report_every: Some(Duration::from_secs(60)),
                max_subscriptions: 100_000,
                log_format: LogFormat::Text,
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
