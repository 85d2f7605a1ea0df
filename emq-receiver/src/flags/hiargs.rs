//! The checked plan: [`Cli`] with the environment, turned into what
//! emq-receiver will do ([`Plan`]), or a usage error (exit 2).

use std::collections::HashMap;
use std::time::Duration;

use emq_cli_support::{LogFormat, Settings};

use super::lowargs::{Cli, SocketKind};

/// A checked [`Cli`]. `Debug` does not show the password.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The bind address, or the address(es) to connect to (`A,B`).
    pub endpoint: String,
    pub bind: bool,
    pub kind: SocketKind,
    pub count: Option<u64>,
    pub timeout: Option<Duration>,
    pub ack_informs: bool,
    pub heartbeat: Option<Duration>,
    pub identity: Option<String>,
    /// SUB only: the prefixes subscribed to (`[""]`: everything).
    pub subscribe: Vec<String>,
    /// ZMQ PLAIN credentials `(username, password)` (`--connect` only).
    pub plain: Option<emq_transport::PlainCredentials>,
    /// CURVE client keys (`--connect` only; wins over `plain`).
    pub curve: Option<emq_transport::curve::CurveClient>,
    /// How stderr lines are written (`--log-format`; json: one log object
    /// per line, `emq_cli_support::MessageLines`).
    pub log_format: LogFormat,
}

/// The config file section emq-receiver reads (then `[global]`).
pub const SECTION: &str = "receiver";

impl Cli {
    /// [`Cli::plan`] with the settings every emq tool reads: `EVENTMQ_*`
    /// over the config file's `[receiver]` then `[global]` section, the
    /// pub/sub process's `PUBLISHER_OUTGOING_ADDR` also from
    /// `[publisher]`; other variables (`EMQ_*`) from `env`. Returns the
    /// plan and what reading the file found (unknown keys).
    pub fn plan_from(&self, env: &HashMap<String, String>) -> Result<(Plan, Vec<String>), String> {
        let settings =
            Settings::load_client(SECTION, &[("PUBLISHER_OUTGOING_ADDR", "publisher")], env)
                .map_err(|e| e.to_string())?;
        let lookup = |k: &str| match k.strip_prefix("EVENTMQ_") {
            Some(name) => settings.get(name).map(str::to_string),
            None => env.get(k).cloned(),
        };
        let mut plan = self.plan(&lookup)?;
        plan.log_format = self.log.resolve(&settings).map_err(|e| e.to_string())?;
        Ok((plan, settings.warnings().to_vec()))
    }

    /// Check the arguments with the environment `env` (the process's,
    /// passed in: `$EMQ_USERNAME`, `$EMQ_PASSWORD`, `EVENTMQ_CURVE_*`,
    /// `$EVENTMQ_PUBLISHER_OUTGOING_ADDR`).
    pub fn plan(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<Plan, String> {
        let subscribing = !self.subscribe.is_empty() || self.socket == Some(SocketKind::Sub);
        let (endpoint, bind) = match (&self.bind, &self.connect) {
            (Some(b), None) => {
                let b = b.trim().to_string();
                if b.contains(',') {
                    return Err(format!("--bind takes one address, got {b:?}"));
                }
                emq_transport::check_endpoint(&b).map_err(|e| e.to_string())?;
                (b, true)
            }
            (None, Some(c)) => (
                emq_transport::parse_endpoints(c, "--connect")
                    .map_err(|e| e.to_string())?
                    .join(","),
                false,
            ),
            (None, None) if subscribing => {
                let e =
                    default_subscribe_endpoint(env("EVENTMQ_PUBLISHER_OUTGOING_ADDR").as_deref());
                emq_transport::check_endpoint(&e).map_err(|e| e.to_string())?;
                (e, false)
            }
            (None, None) => {
                return Err(
                    "give --bind ADDR or --connect ADDR (or --subscribe TOPIC to watch a \
                     pub/sub process)"
                        .into(),
                )
            }
            _ => return Err("give exactly one of --bind and --connect".into()),
        };
        let kind = self.socket.unwrap_or(if !self.subscribe.is_empty() {
            SocketKind::Sub
        } else if bind {
            SocketKind::Router
        } else {
            SocketKind::Dealer
        });
        if self.ack_informs && kind != SocketKind::Router {
            return Err("--ack-informs needs a ROUTER socket (--socket router)".into());
        }
        if self.heartbeat.is_some() && kind != SocketKind::Router {
            return Err("--heartbeat needs a ROUTER socket (--socket router)".into());
        }
        if self.identity.is_some() && kind != SocketKind::Dealer {
            return Err("--identity needs a DEALER socket (--socket dealer)".into());
        }
        if !self.subscribe.is_empty() && kind != SocketKind::Sub {
            return Err(format!(
                "--subscribe needs a SUB socket, not --socket {}",
                kind.as_str().to_ascii_lowercase()
            ));
        }
        if self.count == Some(0) {
            return Err("--count must be at least 1".into());
        }
        if bind && self.auth.given() {
            return Err(
                "--username, --password and --password-file need --connect (they make the \
                 socket a PLAIN client)"
                    .into(),
            );
        }
        if bind && self.curve.given() {
            return Err(
                "--curve-server-key and --curve-secret-key-file need --connect (they make the \
                 socket a CURVE client)"
                    .into(),
            );
        }
        let curve = if bind {
            None
        } else {
            emq_transport::curve::curve_client(&self.curve, &|k| env(&format!("EVENTMQ_{k}")))?
        };
        let plain = if bind {
            None
        } else {
            emq_transport::plain_credentials(&self.auth, env)?
        };
        Ok(Plan {
            endpoint,
            bind,
            kind,
            count: self.count,
            timeout: self.timeout,
            ack_informs: self.ack_informs,
            heartbeat: self.heartbeat,
            identity: self.identity.clone(),
            subscribe: if kind == SocketKind::Sub && self.subscribe.is_empty() {
                vec![String::new()]
            } else {
                self.subscribe.clone()
            },
            plain,
            curve,
            log_format: self.log.log_format.unwrap_or_default(),
        })
    }
}

/// Where `--subscribe` connects without `--connect`:
/// `EVENTMQ_PUBLISHER_OUTGOING_ADDR` (the pub/sub process's bind address in
/// 0.3.13 settings; a wildcard host becomes 127.0.0.1), else 0.3.13's
/// default `tcp://127.0.0.1:47299`.
pub fn default_subscribe_endpoint(eventmq_publisher_outgoing_addr: Option<&str>) -> String {
    match eventmq_publisher_outgoing_addr
        .map(str::trim)
        .filter(|a| !a.is_empty())
    {
        None => DEFAULT_SUBSCRIBE_ENDPOINT.to_string(),
        Some(a) => ["tcp://*:", "tcp://0.0.0.0:"]
            .iter()
            .find_map(|w| a.strip_prefix(w))
            .map_or_else(|| a.to_string(), |port| format!("tcp://127.0.0.1:{port}")),
    }
}

/// 0.3.13's `PUBLISHER_OUTGOING_ADDR`.
pub const DEFAULT_SUBSCRIBE_ENDPOINT: &str = "tcp://127.0.0.1:47299";

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};
    use emq_transport::PlainCredentials;

    fn plan_env(args: &[&str], env: &dyn Fn(&str) -> Option<String>) -> Result<Plan, String> {
        Cli::try_parse_from(std::iter::once("emq-receiver").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?
            .plan(env)
    }

    fn plan(args: &[&str]) -> Result<Plan, String> {
        plan_env(args, &|_| None)
    }

    #[test]
    fn connect_takes_a_failover_list_bind_one_address() {
        let p = plan(&["--connect", "tcp://127.0.0.1:1, tcp://127.0.0.1:2"]).unwrap();
        assert_eq!(p.endpoint, "tcp://127.0.0.1:1,tcp://127.0.0.1:2");
        assert!(plan(&["--connect", "tcp://127.0.0.1:1,nope"])
            .unwrap_err()
            .contains("--connect: bad endpoint \"nope\""));
        assert!(plan(&["--bind", "tcp://127.0.0.1:1,tcp://127.0.0.1:2"]).is_err());
    }

    #[test]
    fn curve_keys_only_with_connect_from_flags_or_environment() {
        let c = "tcp://127.0.0.1:1";
        let server = emq_transport::curve::generate().unwrap().public.to_string();
        assert_eq!(plan(&["--connect", c]).unwrap().curve, None);
        let p = plan(&["--connect", c, "--curve-server-key", &server]).unwrap();
        assert_eq!(p.curve.unwrap().server_key.to_string(), server);
        let env = |k: &str| (k == "EVENTMQ_CURVE_SERVER_KEY").then(|| server.clone());
        let p = plan_env(&["--connect", c], &env).unwrap();
        assert_eq!(p.curve.unwrap().server_key.to_string(), server);
        let e = plan(&["--bind", c, "--curve-server-key", &server]).unwrap_err();
        assert!(e.contains("need --connect"), "{e}");
    }

    #[test]
    fn plain_credentials_only_with_connect() {
        let c = "tcp://127.0.0.1:1";
        assert_eq!(plan(&["--connect", c]).unwrap().plain, None);
        let p = plan(&["--connect", c, "--username", "u", "--password", "pw"]).unwrap();
        assert_eq!(p.plain, Some(PlainCredentials::new("u", "pw")));
        assert!(
            !format!("{p:?}").contains("\"pw\""),
            "Debug hides the password"
        );
        assert!(
            !format!("{p:?}").contains("\"pw\""),
            "Debug hides the password"
        );
        let env = |k: &str| match k {
            "EMQ_USERNAME" => Some("eu".to_string()),
            "EMQ_PASSWORD" => Some("ep".to_string()),
            _ => None,
        };
        let p = plan_env(&["--connect", c, "--socket", "sub"], &env).unwrap();
        assert_eq!(p.plain, Some(PlainCredentials::new("eu", "ep")));
        // a bound socket ignores the environment and refuses the flags
        assert_eq!(plan_env(&["--bind", c], &env).unwrap().plain, None);
        assert!(plan(&["--bind", c, "--username", "u", "--password", "p"])
            .unwrap_err()
            .contains("--connect"));
        assert!(plan(&["--connect", c, "--username", "u"])
            .unwrap_err()
            .contains("password"));
        assert!(plan(&["--connect", c, "--password", "p", "--password-file", "/x"]).is_err());
    }

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn socket_defaults_follow_bind_or_connect() {
        let p = plan(&["--bind", "tcp://127.0.0.1:*"]).unwrap();
        assert_eq!((p.kind, p.bind), (SocketKind::Router, true));
        let p = plan(&[
            "--connect",
            "tcp://127.0.0.1:1",
            "--count",
            "2",
            "--timeout",
            "1.5",
        ])
        .unwrap();
        assert_eq!((p.kind, p.bind), (SocketKind::Dealer, false));
        assert_eq!(p.count, Some(2));
        assert_eq!(p.timeout, Some(Duration::from_millis(1500)));
        let p = plan(&["--connect", "tcp://127.0.0.1:1", "--socket", "sub"]).unwrap();
        assert_eq!(p.kind, SocketKind::Sub);
        assert_eq!(p.subscribe, [""]);
    }

    #[test]
    fn subscribe_makes_a_sub_socket_on_the_pubsub_outgoing_address() {
        let p = plan(&["--subscribe", "news"]).unwrap();
        assert_eq!((p.kind, p.bind), (SocketKind::Sub, false));
        assert_eq!(p.endpoint, "tcp://127.0.0.1:47299");
        assert_eq!(p.subscribe, ["news"]);
        let p = plan(&[
            "--subscribe",
            "a",
            "--subscribe",
            "b",
            "--connect",
            "tcp://h:1",
        ])
        .unwrap();
        assert_eq!(p.subscribe, ["a", "b"]);
        assert_eq!(p.endpoint, "tcp://h:1");
        let p = plan(&["--subscribe", ""]).unwrap();
        assert_eq!(p.subscribe, [""], "'' subscribes to everything");
        let env =
            |k: &str| (k == "EVENTMQ_PUBLISHER_OUTGOING_ADDR").then(|| "tcp://*:5001".to_string());
        let p = plan_env(&["--subscribe", "x"], &env).unwrap();
        assert_eq!(p.endpoint, "tcp://127.0.0.1:5001");
        let p = plan_env(&["--socket", "sub"], &env).unwrap();
        assert_eq!(
            (p.endpoint.as_str(), p.kind),
            ("tcp://127.0.0.1:5001", SocketKind::Sub)
        );
        // binding a SUB is allowed (a PUB may connect to it)
        let p = plan(&["--subscribe", "x", "--bind", "tcp://127.0.0.1:*"]).unwrap();
        assert_eq!((p.kind, p.bind), (SocketKind::Sub, true));
        assert_eq!(
            default_subscribe_endpoint(Some("tcp://10.1.1.1:9")),
            "tcp://10.1.1.1:9"
        );
        let help = Cli::command().render_long_help().to_string();
        for needle in [
            "--subscribe <PREFIX>",
            "EVENTMQ_PUBLISHER_OUTGOING_ADDR",
            "emq-receiver --subscribe orders.",
        ] {
            assert!(help.contains(needle), "help lacks {needle}");
        }
    }

    #[test]
    fn usage_errors() {
        assert!(plan(&[]).is_err());
        assert!(plan(&[
            "--bind",
            "tcp://127.0.0.1:1",
            "--connect",
            "tcp://127.0.0.1:1"
        ])
        .is_err());
        assert!(plan(&["--bind", "127.0.0.1:1"]).is_err());
        assert!(plan(&["--bind", "tcp://127.0.0.1:1", "--socket", "pub"]).is_err());
        assert!(plan(&["--connect", "tcp://127.0.0.1:1", "--ack-informs"]).is_err());
        assert!(plan(&["--bind", "tcp://127.0.0.1:1", "--identity", "x"]).is_err());
        assert!(plan(&["--connect", "tcp://127.0.0.1:1", "--heartbeat", "1"]).is_err());
        assert!(plan(&["--bind", "tcp://127.0.0.1:1", "--heartbeat", "0"]).is_err());
        assert!(plan(&[
            "--bind",
            "tcp://127.0.0.1:1",
            "--subscribe",
            "x",
            "--socket",
            "router"
        ])
        .is_err());
        assert!(plan(&[
            "--connect",
            "tcp://127.0.0.1:1",
            "--subscribe",
            "x",
            "--socket",
            "dealer"
        ])
        .unwrap_err()
        .contains("--subscribe"));
        assert!(plan(&["--bind", "tcp://127.0.0.1:1", "--count", "0"]).is_err());
        assert!(plan(&["--bind", "tcp://127.0.0.1:1", "--timeout", "-1"]).is_err());
    }
}
