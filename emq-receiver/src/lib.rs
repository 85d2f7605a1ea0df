//! emq-receiver: print every eMQP/1.0 message received on a ZeroMQ socket
//! as one JSON object per line. For debugging, watching peers register,
//! and tests. The binary is a thin wrapper over [`run`].

#![forbid(unsafe_code)]

pub mod format;

use std::io::Write;
use std::time::{Duration, Instant};

use clap::{ArgGroup, Parser, ValueEnum};
use emq_transport::SocketOptions;
use emqp_proto::{Command, Message};

/// Exit codes: 0 done (count reached or signal), 1 socket error, 2 usage,
/// 5 nothing received within `--timeout`.
pub const EXIT_OK: u8 = 0;
pub const EXIT_ERROR: u8 = 1;
pub const EXIT_USAGE: u8 = 2;
pub const EXIT_TIMEOUT: u8 = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SocketKind {
    /// Frames start with the peer's identity, as a router sees them (default
    /// with --bind)
    Router,
    /// Frames as a worker or client sees them (default with --connect)
    Dealer,
    /// Frames as pushed by a PUSH socket
    Pull,
    /// Subscribes to every topic (or to each --subscribe PREFIX); the
    /// default with --subscribe
    Sub,
}

impl SocketKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SocketKind::Router => "ROUTER",
            SocketKind::Dealer => "DEALER",
            SocketKind::Pull => "PULL",
            SocketKind::Sub => "SUB",
        }
    }
}

const LONG_ABOUT: &str = "\
Print every eMQP/1.0 (EventMQ) message received on a ZeroMQ socket as one JSON
object per line, flushed per line:

  {\"identity\": ..., \"command\": ..., \"msgid\": ..., \"fields\": {...}, \"frames\": N}

identity is the peer identity on a ROUTER socket, null otherwise. fields holds
the decoded body by name: INFORM queues as [[weight, name]], peer_type and
features; REQUEST queue, headers (a list) and message (parsed JSON if it is
JSON, else a string); REPLY payload, orig_msgid, status; RESULT and REJECT
their fields; and so on. Text that is not UTF-8 is shown as \"b64:<base64>\".
Frames that do not decode print {\"error\": \"...\", \"frames\": [...]} and the
receiver keeps going. On a SUB socket, EventMQ publisher frames [topic,
message] are shown as PUBLISH with a null msgid.

Subscribing: --subscribe PREFIX (repeatable; '' for everything) makes the
socket a SUB connected to the pub/sub process's outgoing address
(emq-pubsub, or EventMQ 0.3.13's emq-pubsub): --connect ADDR, else
$EVENTMQ_PUBLISHER_OUTGOING_ADDR, else tcp://127.0.0.1:47299. ZeroMQ matches
subscriptions as prefixes of the topic, and a subscriber gets only what is
published after its subscription has reached the publisher (a moment after
connecting).

Exit codes: 0 after --count messages or on SIGINT/SIGTERM, 1 socket error,
2 usage error, 5 when --timeout seconds pass without a message.";

const EXAMPLES: &str = "\
Examples:
  # play a router backend and watch a job manager register (ACK its INFORM)
  emq-receiver --bind tcp://127.0.0.1:47290 --ack-informs

  # see the REQUESTs a client sends, stop after 3
  emq-receiver --bind tcp://127.0.0.1:47291 --count 3

  # connect as a DEALER and print what a router sends
  emq-receiver --connect tcp://127.0.0.1:47291 --socket dealer --timeout 10

  # print what emq-pubsub publishes on topics starting with \"orders.\"
  emq-receiver --subscribe orders.

  # the same against a router that requires PLAIN credentials
  EMQ_USERNAME=alice emq-receiver --connect tcp://127.0.0.1:47291 \\
      --password-file ~/.emq-password";

/// emq-receiver's arguments.
#[derive(Parser, Debug, Clone)]
#[command(
    name = "emq-receiver",
    version,
    about = "Print every eMQP/1.0 message received on a ZeroMQ socket as one JSON line",
    long_about = LONG_ABOUT,
    after_long_help = EXAMPLES,
    group(ArgGroup::new("endpoint").args(["bind", "connect"])),
)]
pub struct Cli {
    /// Bind the socket to ADDR (e.g. tcp://127.0.0.1:47290)
    #[arg(long, value_name = "ADDR")]
    pub bind: Option<String>,

    /// Connect the socket to ADDR; a comma-separated list connects to
    /// every address (a failover list: a DEALER then talks to the router
    /// that serves) (with --subscribe: default
    /// $EVENTMQ_PUBLISHER_OUTGOING_ADDR, else tcp://127.0.0.1:47299)
    #[arg(long, value_name = "ADDR[,ADDR...]")]
    pub connect: Option<String>,

    /// Socket type [default: router with --bind, dealer with --connect]
    #[arg(long, value_enum, value_name = "TYPE")]
    pub socket: Option<SocketKind>,

    /// Exit 0 after N messages (error lines included)
    #[arg(long, short = 'n', value_name = "N")]
    pub count: Option<u64>,

    /// Exit 5 when S seconds pass without a message
    #[arg(long, short = 't', value_name = "S", value_parser = emqp_proto::duration::positive_secs)]
    pub timeout: Option<f64>,

    /// ROUTER only: answer every INFORM with ACK (so a job manager can be
    /// watched registering)
    #[arg(long)]
    pub ack_informs: bool,

    /// ROUTER only: send HEARTBEAT every S seconds to each peer that sent
    /// INFORM (an EventMQ 0.3.13 job manager sends READY only after the
    /// first router HEARTBEAT)
    #[arg(long, value_name = "S", value_parser = emqp_proto::duration::positive_secs)]
    pub heartbeat: Option<f64>,

    /// DEALER only: socket identity [default: a uuid4]
    #[arg(long, value_name = "ID")]
    pub identity: Option<String>,

    /// Subscribe to messages whose topic starts with PREFIX (a SUB socket;
    /// repeatable; '' for everything) [default with --socket sub:
    /// everything]
    #[arg(long, value_name = "PREFIX")]
    pub subscribe: Vec<String>,

    /// --connect only: ZMQ PLAIN username, for a router started with
    /// --plain-users [default: $EMQ_USERNAME]
    #[arg(long, value_name = "U")]
    pub username: Option<String>,

    /// --connect only: ZMQ PLAIN password (visible in the process list:
    /// prefer --password-file or $EMQ_PASSWORD) [default: $EMQ_PASSWORD]
    #[arg(long, value_name = "P")]
    pub password: Option<String>,

    /// --connect only: read the PLAIN password from file F (its trailing
    /// line break is dropped)
    #[arg(long, value_name = "F", conflicts_with = "password")]
    pub password_file: Option<std::path::PathBuf>,

    /// --connect only: the router's CURVE public key (Z85 text or a file
    /// holding it); the connection is then encrypted
    /// [env: EVENTMQ_CURVE_SERVER_KEY]
    #[arg(long, value_name = "KEY|FILE")]
    pub curve_server_key: Option<String>,

    /// --connect only: our CURVE key pair (NAME.key_secret from `emq-cli
    /// keygen`); without it a fresh pair is made
    /// [env: EVENTMQ_CURVE_SECRET_KEY_FILE]
    #[arg(long, value_name = "FILE")]
    pub curve_secret_key_file: Option<std::path::PathBuf>,
}

/// A checked [`Cli`].
#[derive(Clone, PartialEq)]
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
    pub plain: Option<(String, String)>,
    /// CURVE client keys (`--connect` only; wins over `plain`).
    pub curve: Option<emq_transport::curve::CurveClient>,
}

impl std::fmt::Debug for Plan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plan")
            .field("endpoint", &self.endpoint)
            .field("bind", &self.bind)
            .field("kind", &self.kind)
            .field("count", &self.count)
            .field("timeout", &self.timeout)
            .field("ack_informs", &self.ack_informs)
            .field("heartbeat", &self.heartbeat)
            .field("identity", &self.identity)
            .field("subscribe", &self.subscribe)
            .field(
                "plain",
                &self.plain.as_ref().map(|(user, _)| (user, "<redacted>")),
            )
            .field("curve", &self.curve)
            .finish()
    }
}

impl Cli {
    /// Check the arguments, reading `$EMQ_USERNAME` / `$EMQ_PASSWORD`.
    pub fn plan(&self) -> Result<Plan, String> {
        self.plan_with_env(&|k| std::env::var(k).ok())
    }

    /// [`Cli::plan`] with the environment injected (for tests).
    pub fn plan_with_env(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<Plan, String> {
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
        let plain_flags =
            self.username.is_some() || self.password.is_some() || self.password_file.is_some();
        if bind && plain_flags {
            return Err(
                "--username, --password and --password-file need --connect (they make the \
                 socket a PLAIN client)"
                    .into(),
            );
        }
        let curve_flags = self.curve_server_key.is_some() || self.curve_secret_key_file.is_some();
        if bind && curve_flags {
            return Err(
                "--curve-server-key and --curve-secret-key-file need --connect (they make the \
                 socket a CURVE client)"
                    .into(),
            );
        }
        let curve = if bind {
            None
        } else {
            emq_transport::curve::curve_client(
                &emq_transport::curve::CurveArgs {
                    server_key: self.curve_server_key.as_deref(),
                    secret_key_file: self.curve_secret_key_file.as_deref(),
                },
                &|k| env(&format!("EVENTMQ_{k}")),
            )?
        };
        let plain = if bind {
            None
        } else {
            emq_transport::plain_credentials(
                &emq_transport::PlainArgs {
                    username: self.username.as_deref(),
                    password: self.password.as_deref(),
                    password_file: self.password_file.as_deref(),
                },
                env,
            )?
        };
        Ok(Plan {
            endpoint,
            bind,
            kind,
            count: self.count,
            timeout: self.timeout.map(Duration::from_secs_f64),
            ack_informs: self.ack_informs,
            heartbeat: self.heartbeat.map(Duration::from_secs_f64),
            identity: self.identity.clone(),
            subscribe: if kind == SocketKind::Sub && self.subscribe.is_empty() {
                vec![String::new()]
            } else {
                self.subscribe.clone()
            },
            plain,
            curve,
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

fn open_socket(ctx: &zmq::Context, plan: &Plan) -> Result<zmq::Socket, String> {
    let opts = SocketOptions {
        linger_ms: 0,
        plain: plan.plain.clone(),
        curve: plan.curve.clone(),
        ..SocketOptions::default()
    };
    let err = |e: zmq::Error| format!("zmq: {e}");
    if plan.kind == SocketKind::Router && plan.bind {
        return emq_transport::bind_router(ctx, &plan.endpoint, &opts).map_err(|e| e.to_string());
    }
    let endpoints: Vec<String> = plan.endpoint.split(',').map(String::from).collect();
    if plan.kind == SocketKind::Dealer && !plan.bind {
        let id = plan.identity.clone().unwrap_or_else(emqp_proto::new_msgid);
        return emq_transport::connect_dealer_to(ctx, &endpoints, id.as_bytes(), &opts)
            .map_err(|e| e.to_string());
    }
    let ty = match plan.kind {
        SocketKind::Router => zmq::ROUTER,
        SocketKind::Dealer => zmq::DEALER,
        SocketKind::Pull => zmq::PULL,
        SocketKind::Sub => zmq::SUB,
    };
    let sock = ctx.socket(ty).map_err(err)?;
    sock.set_linger(0).map_err(err)?;
    sock.set_rcvhwm(opts.hwm).map_err(err)?;
    match plan.kind {
        SocketKind::Dealer => {
            let id = plan.identity.clone().unwrap_or_else(emqp_proto::new_msgid);
            sock.set_identity(id.as_bytes()).map_err(err)?;
        }
        SocketKind::Sub => {
            for prefix in &plan.subscribe {
                sock.set_subscribe(prefix.as_bytes()).map_err(err)?;
            }
        }
        _ => {}
    }
    if let (Some(curve), false) = (&plan.curve, plan.bind) {
        curve.apply(&sock).map_err(err)?;
    } else if let (Some((username, password)), false) = (&plan.plain, plan.bind) {
        sock.set_plain_username(Some(username)).map_err(err)?;
        sock.set_plain_password(Some(password)).map_err(err)?;
    }
    if plan.bind {
        sock.bind(&plan.endpoint)
            .map_err(|e| format!("cannot bind {}: {e}", plan.endpoint))?;
    } else {
        emq_transport::connect_all(&sock, &endpoints).map_err(|e| e.to_string())?;
    }
    Ok(sock)
}

/// What one received multipart message means for the receiver.
#[derive(Debug, Clone, PartialEq)]
pub struct Handled {
    /// The JSON line to print.
    pub line: String,
    /// The ACK to send back (`--ack-informs` and an INFORM).
    pub ack: Option<Vec<Vec<u8>>>,
    /// A peer that registered (INFORM, `true`) or left (KBYE, `false`), on a
    /// ROUTER.
    pub peer: Option<(Vec<u8>, bool)>,
}

/// Format one received multipart message and decide the answer.
pub fn handle_frames(frames: Vec<Vec<u8>>, kind: SocketKind, ack_informs: bool) -> Handled {
    if kind == SocketKind::Sub {
        if let Some(v) = format::format_published(&frames) {
            return Handled {
                line: v.to_string(),
                ack: None,
                peer: None,
            };
        }
    }
    let f = format::format_frames(frames, kind == SocketKind::Router);
    let mut ack = None;
    let mut peer = None;
    if let Some((Some(identity), msg)) = f.message {
        match msg.command {
            Command::Inform(_) => {
                if ack_informs {
                    let reply = Message::new(Command::Ack {
                        acked_msgid: msg.msgid,
                        features: vec![],
                    });
                    ack = Some(reply.encode_routed(identity.clone()));
                }
                peer = Some((identity, true));
            }
            Command::Kbye => peer = Some((identity, false)),
            _ => {}
        }
    }
    Handled {
        line: f.json.to_string(),
        ack,
        peer,
    }
}

fn unix_time() -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    format!("{:.6}", t.as_secs_f64())
}

/// Receive and print until done; returns the exit code. `out` gets the JSON
/// lines, `err` diagnostics. Stops on a shutdown signal too.
pub fn run(plan: &Plan, out: &mut dyn Write, err: &mut dyn Write) -> u8 {
    let shutdown = match emq_transport::shutdown_flag() {
        Ok(f) => f,
        Err(e) => {
            let _ = writeln!(err, "emq-receiver: cannot install signal handlers: {e}");
            return EXIT_ERROR;
        }
    };
    let ctx = zmq::Context::new();
    let sock = match open_socket(&ctx, plan) {
        Ok(s) => s,
        Err(e) => {
            let _ = writeln!(err, "emq-receiver: {e}");
            return EXIT_ERROR;
        }
    };
    let shown = sock
        .get_last_endpoint()
        .ok()
        .and_then(|e| e.ok())
        .filter(|e| !e.is_empty())
        .unwrap_or_else(|| plan.endpoint.clone());
    let _ = writeln!(
        err,
        "emq-receiver: {} socket {} {shown}",
        plan.kind.as_str(),
        if plan.bind {
            "bound to"
        } else {
            "connected to"
        }
    );
    let mut received = 0u64;
    let mut last = Instant::now();
    let mut peers: Vec<Vec<u8>> = Vec::new();
    let mut next_beat = Instant::now();
    loop {
        if emq_transport::shutdown_requested(&shutdown) {
            return EXIT_OK;
        }
        if let Some(every) = plan.heartbeat {
            if Instant::now() >= next_beat {
                next_beat = Instant::now() + every;
                // a peer that is gone fails with EHOSTUNREACH: forget it
                peers.retain(|id| {
                    let hb = Message::new(Command::Heartbeat {
                        timestamp: Some(unix_time()),
                    });
                    emq_transport::send_routed(&sock, id.clone(), hb).is_ok()
                });
            }
        }
        if let Some(t) = plan.timeout {
            if last.elapsed() >= t {
                let _ = writeln!(
                    err,
                    "emq-receiver: nothing received within {} s",
                    t.as_secs_f64()
                );
                return EXIT_TIMEOUT;
            }
        }
        let mut wait = Duration::from_millis(100);
        if let Some(t) = plan.timeout {
            wait = wait.min(t.saturating_sub(last.elapsed()));
        }
        if plan.heartbeat.is_some() {
            wait = wait.min(next_beat.saturating_duration_since(Instant::now()));
        }
        match sock.poll(zmq::POLLIN, wait.as_millis() as i64) {
            Ok(0) => continue,
            Ok(_) => {}
            Err(zmq::Error::EINTR) => continue,
            Err(e) => {
                let _ = writeln!(err, "emq-receiver: zmq poll: {e}");
                return EXIT_ERROR;
            }
        }
        let frames = match sock.recv_multipart(zmq::DONTWAIT) {
            Ok(f) => f,
            Err(zmq::Error::EAGAIN) | Err(zmq::Error::EINTR) => continue,
            Err(e) => {
                let _ = writeln!(err, "emq-receiver: zmq recv: {e}");
                return EXIT_ERROR;
            }
        };
        last = Instant::now();
        let Handled { line, ack, peer } = handle_frames(frames, plan.kind, plan.ack_informs);
        match peer {
            Some((id, true)) if !peers.contains(&id) => peers.push(id),
            Some((id, false)) => peers.retain(|p| *p != id),
            _ => {}
        }
        if writeln!(out, "{line}").and_then(|_| out.flush()).is_err() {
            // stdout closed (e.g. piped into `head`): nothing more to do.
            return EXIT_OK;
        }
        if let Some(frames) = ack {
            if let Err(e) = sock.send_multipart(frames, zmq::DONTWAIT) {
                let _ = writeln!(err, "emq-receiver: cannot send ACK: {e}");
            }
        }
        received += 1;
        if plan.count.is_some_and(|n| received >= n) {
            return EXIT_OK;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn plan_env(args: &[&str], env: &dyn Fn(&str) -> Option<String>) -> Result<Plan, String> {
        Cli::try_parse_from(std::iter::once("emq-receiver").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?
            .plan_with_env(env)
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
        assert_eq!(p.plain, Some(("u".into(), "pw".into())));
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
        assert_eq!(p.plain, Some(("eu".into(), "ep".into())));
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

    #[test]
    fn informs_are_acked_only_when_asked_and_on_a_router() {
        let inform = Message::with_msgid(
            "inf-1",
            Command::Inform(emqp_proto::Inform {
                queues: Default::default(),
                peer_type: Some(emqp_proto::PeerType::Worker),
                features: vec![],
            }),
        )
        .encode_routed(b"w-1".to_vec());
        let h = handle_frames(inform.clone(), SocketKind::Router, true);
        assert!(h.line.contains("\"INFORM\""), "{}", h.line);
        assert_eq!(h.peer, Some((b"w-1".to_vec(), true)));
        let ack = h.ack.expect("an ACK");
        let (id, msg) = Message::decode_routed(ack).unwrap();
        assert_eq!(id, b"w-1");
        assert_eq!(
            msg.command,
            Command::Ack {
                acked_msgid: "inf-1".into(),
                features: vec![],
            }
        );
        assert!(handle_frames(inform, SocketKind::Router, false)
            .ack
            .is_none());
        let ready = Message::with_msgid("r", Command::Ready).encode_routed(b"w-1".to_vec());
        let h = handle_frames(ready, SocketKind::Router, true);
        assert!(h.ack.is_none() && h.peer.is_none());
        let kbye = Message::with_msgid("k", Command::Kbye).encode_routed(b"w-1".to_vec());
        let h = handle_frames(kbye, SocketKind::Router, true);
        assert_eq!(h.peer, Some((b"w-1".to_vec(), false)));
    }

    #[test]
    fn lines_are_single_line_json() {
        let frames = Message::with_msgid(
            "m",
            Command::Request(emqp_proto::Request {
                queue: "q".into(),
                headers: Default::default(),
                message: b"[\"a\\nb\"]".to_vec(),
            }),
        )
        .encode();
        let line = handle_frames(frames, SocketKind::Dealer, false).line;
        assert!(!line.contains('\n'));
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["fields"]["message"][0], "a\nb");
        // not JSON (raw newline in a string): kept as text, still one line
        let frames = Message::with_msgid(
            "m",
            Command::Request(emqp_proto::Request {
                queue: "q".into(),
                headers: Default::default(),
                message: b"line1\nline2".to_vec(),
            }),
        )
        .encode();
        let line = handle_frames(frames, SocketKind::Dealer, false).line;
        assert!(!line.contains('\n'));
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["fields"]["message"], "line1\nline2");
    }
}
