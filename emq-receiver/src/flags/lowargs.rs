//! The command line as clap parses it, as close to what was typed as
//! possible; [`super::hiargs`] checks it with the environment into a
//! [`super::Plan`].

use std::time::Duration;

use clap::{ArgGroup, Parser, ValueEnum};
use emq_cli_support::{parse_positive_duration, AuthArgs, CurveArgs, LogArgs};

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
    #[arg(long, short = 't', value_name = "S", value_parser = parse_positive_duration)]
    pub timeout: Option<Duration>,

    /// ROUTER only: answer every INFORM with ACK (so a job manager can be
    /// watched registering)
    #[arg(long)]
    pub ack_informs: bool,

    /// ROUTER only: send HEARTBEAT every S seconds to each peer that sent
    /// INFORM (an EventMQ 0.3.13 job manager sends READY only after the
    /// first router HEARTBEAT)
    #[arg(long, value_name = "S", value_parser = parse_positive_duration)]
    pub heartbeat: Option<Duration>,

    /// DEALER only: socket identity [default: a uuid4]
    #[arg(long, value_name = "ID")]
    pub identity: Option<String>,

    /// Subscribe to messages whose topic starts with PREFIX (a SUB socket;
    /// repeatable; '' for everything) [default with --socket sub:
    /// everything]
    #[arg(long, value_name = "PREFIX")]
    pub subscribe: Vec<String>,

    // With --connect only (checked by the plan).
    #[command(flatten)]
    pub auth: AuthArgs,

    // With --connect only (checked by the plan).
    #[command(flatten)]
    pub curve: CurveArgs,

    #[command(flatten)]
    pub log: LogArgs,
}
