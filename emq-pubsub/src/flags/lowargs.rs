//! The command line as clap parses it, as close to what was typed as
//! possible; [`super::hiargs`] checks it with the environment and the
//! config file into a [`super::Plan`].

use std::time::Duration;

use clap::Parser;
use emq_cli_support::{parse_duration, LogArgs};

/// 0.3.13's `PUBLISHER_INCOMING_ADDR`.
pub const DEFAULT_INCOMING: &str = "tcp://127.0.0.1:47298";
/// 0.3.13's `PUBLISHER_OUTGOING_ADDR`.
pub const DEFAULT_OUTGOING: &str = "tcp://127.0.0.1:47299";

pub(crate) const DEFAULT_MAX_MESSAGE_SIZE: i64 = emqp_proto::DEFAULT_MAX_MESSAGE_SIZE as i64;
pub(crate) const DEFAULT_SUBSCRIBER_HWM: i32 = 100_000;
pub(crate) const DEFAULT_REPORT_INTERVAL: Duration = Duration::from_secs(60);

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
    #[arg(long, value_name = "SECS", value_parser = parse_duration)]
    pub report_interval: Option<Duration>,

    /// Topic prefixes the subscription table keeps at most (it only serves
    /// the "to no subscriber" count: past it, subscriptions still work,
    /// are logged as not kept, and messages to no kept prefix are not
    /// counted as to no subscriber) [env: EVENTMQ_PUBLISHER_MAX_SUBSCRIPTIONS]
    /// [default: 100000]
    #[arg(long, value_name = "N")]
    pub max_subscriptions: Option<usize>,

    #[command(flatten)]
    pub log: LogArgs,
}
