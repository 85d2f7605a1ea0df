//! The pub/sub rule, as a sans-IO state machine.
//!
//! # The rule
//!
//! EventMQ 0.3.13's `emq-pubsub`: a publisher sends `PUBLISH [topic,
//! message]` (an eMQP message on a DEALER) to the incoming ROUTER socket;
//! each one goes out on the outgoing PUB socket as `[topic, message]`
//! ([`Published`]), topic and message unchanged. Nothing is answered: a
//! PUBLISH is fire and forget in eMQP (0.3.13 sends no REPLY, and its
//! publisher client reads none). What else arrives on the incoming socket
//! is dropped with a log line — frames that do not decode (0.3.13's
//! emq-pubsub crashes on them), other commands (HEARTBEAT quietly, the rest
//! with a warning), a PUBLISH with a frame over `max_message_size` — and
//! counted.
//!
//! The outgoing socket is an XPUB (the same wire as PUB for subscribers),
//! so the core also sees subscriptions come and go ([`Pubsub::handle_subscription`]:
//! libzmq passes the first subscription to a prefix and the last
//! unsubscription from it). A message whose topic matches no subscribed
//! prefix is dropped by libzmq; the core counts those as `unheard`, so the
//! log says that nobody was listening instead of nothing. Every
//! `report_every` the core logs what happened since the last report (if
//! anything did).
//!
//! # Call order
//!
//! As the router core: [`Pubsub::handle_incoming`] and
//! [`Pubsub::handle_subscription`] take one input at time `now` (a
//! [`Duration`] since the driver started); the first returns the message to
//! send on the PUB socket, if any. [`Pubsub::poll_timeout`] says when
//! [`Pubsub::handle_timeout`] is due (the next report). [`Pubsub::stats`]
//! are the totals. No sockets, clock or threads here.

use std::collections::BTreeSet;
use std::time::Duration;

use emqp_proto::{Command, Message, Published};

/// Tunables of the core.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The biggest frame of a PUBLISH that is published; `None`: no limit.
    pub max_message_size: Option<usize>,
    /// How often to log what happened; `None`: never (totals still go to
    /// the log at shutdown, by the driver).
    pub report_every: Option<Duration>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            max_message_size: Some(16 * 1024 * 1024),
            report_every: Some(Duration::from_secs(60)),
        }
    }
}

/// Counts of what the core did, since start or since the last report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// PUBLISHes sent on to the PUB socket.
    pub published: u64,
    /// Of `published`, those whose topic matched no subscription (libzmq
    /// drops them).
    pub unheard: u64,
    /// Incoming messages that did not decode.
    pub malformed: u64,
    /// Incoming commands other than PUBLISH (HEARTBEAT included).
    pub ignored: u64,
    /// PUBLISHes with a frame over `max_message_size`.
    pub too_large: u64,
}

impl Stats {
    /// Everything dropped on the way in.
    pub fn dropped(&self) -> u64 {
        self.malformed + self.ignored + self.too_large
    }

    fn is_empty(&self) -> bool {
        *self == Stats::default()
    }
}

/// The pub/sub state machine.
#[derive(Debug)]
pub struct Pubsub {
    config: Config,
    /// Prefixes at least one subscriber holds (as libzmq's XPUB reports
    /// them: first subscription and last unsubscription per prefix).
    subscriptions: BTreeSet<Vec<u8>>,
    totals: Stats,
    /// Since the last report.
    window: Stats,
    next_report: Option<Duration>,
}

impl Pubsub {
    /// A core started at `now`.
    pub fn new(config: Config, now: Duration) -> Pubsub {
        let next_report = config.report_every.map(|every| now + every);
        Pubsub {
            config,
            subscriptions: BTreeSet::new(),
            totals: Stats::default(),
            window: Stats::default(),
            next_report,
        }
    }

    /// One message read off the incoming ROUTER socket (identity first).
    /// Returns what to send on the PUB socket.
    pub fn handle_incoming(&mut self, frames: Vec<Vec<u8>>, _now: Duration) -> Option<Published> {
        let sizes: Vec<usize> = frames.iter().skip(1).map(Vec::len).collect();
        let peer = frames.first().map(|id| show(id)).unwrap_or_default();
        let (_, msg) = match Message::decode_routed(frames) {
            Ok(m) => m,
            Err(e) => {
                log::warn!(
                    "dropped a message from {peer} that is not eMQP/1.0 ({} frame(s) of \
                     {sizes:?} bytes after the identity): {e}",
                    sizes.len()
                );
                self.count(|s| s.malformed += 1);
                return None;
            }
        };
        let (topic, message) = match msg.command {
            Command::Publish { topic, message } => (topic, message),
            Command::Heartbeat { .. } => {
                log::debug!("HEARTBEAT from {peer} ignored");
                self.count(|s| s.ignored += 1);
                return None;
            }
            other => {
                log::warn!(
                    "{} {} from {peer} ignored: emq-pubsub takes only PUBLISH \
                     (jobs and schedules go to the router)",
                    other.name(),
                    msg.msgid
                );
                self.count(|s| s.ignored += 1);
                return None;
            }
        };
        if let Some(limit) = self.config.max_message_size {
            let biggest = topic.len().max(message.len());
            if biggest > limit {
                log::warn!(
                    "PUBLISH {} from {peer} to topic {topic:?} dropped: a frame of {biggest} \
                     bytes is over the limit of {limit} bytes (--max-message-size)",
                    msg.msgid
                );
                self.count(|s| s.too_large += 1);
                return None;
            }
        }
        let published = Published::of_publish(topic, message);
        let heard = self
            .subscriptions
            .iter()
            .any(|prefix| published.matches(prefix));
        log::debug!(
            "PUBLISH {} from {peer}: topic {:?}, {} bytes{}",
            msg.msgid,
            String::from_utf8_lossy(&published.topic),
            published.message.len(),
            if heard { "" } else { ", no subscriber" }
        );
        self.count(|s| {
            s.published += 1;
            if !heard {
                s.unheard += 1;
            }
        });
        Some(published)
    }

    /// One message read off the XPUB socket: `1` + prefix when a prefix
    /// gains its first subscriber, `0` + prefix when it loses its last.
    /// Anything else (a subscriber cannot send anything else) is ignored.
    pub fn handle_subscription(&mut self, frame: &[u8], _now: Duration) {
        let Some((&kind, prefix)) = frame.split_first() else {
            return;
        };
        let shown = String::from_utf8_lossy(prefix);
        match kind {
            1 => {
                if self.subscriptions.insert(prefix.to_vec()) {
                    log::info!(
                        "subscription to topic prefix {shown:?} ({} prefix(es) subscribed)",
                        self.subscriptions.len()
                    );
                }
            }
            0 => {
                if self.subscriptions.remove(prefix) {
                    log::info!(
                        "no subscriber left for topic prefix {shown:?} ({} prefix(es) subscribed)",
                        self.subscriptions.len()
                    );
                }
            }
            _ => log::debug!("ignored a {}-byte message from a subscriber", frame.len()),
        }
    }

    /// When [`Pubsub::handle_timeout`] is next due.
    pub fn poll_timeout(&self) -> Option<Duration> {
        self.next_report
    }

    /// Log the report if it is due.
    pub fn handle_timeout(&mut self, now: Duration) {
        let (Some(due), Some(every)) = (self.next_report, self.config.report_every) else {
            return;
        };
        if now < due {
            return;
        }
        if !self.window.is_empty() {
            log::info!(
                "last {} s: {}",
                every.as_secs_f64(),
                describe(&self.window, self.subscriptions.len())
            );
        }
        self.window = Stats::default();
        // the next report one period after this one (no burst of reports
        // after a stall)
        self.next_report = Some(now.max(due) + every);
    }

    /// Totals since start.
    pub fn stats(&self) -> Stats {
        self.totals
    }

    /// The subscribed prefixes, in byte order.
    pub fn subscriptions(&self) -> impl Iterator<Item = &[u8]> {
        self.subscriptions.iter().map(Vec::as_slice)
    }

    /// A one-line summary of the totals, for the log at shutdown.
    pub fn summary(&self) -> String {
        describe(&self.totals, self.subscriptions.len())
    }

    fn count(&mut self, f: impl Fn(&mut Stats)) {
        f(&mut self.totals);
        f(&mut self.window);
    }
}

fn describe(s: &Stats, prefixes: usize) -> String {
    format!(
        "{} published ({} to no subscriber), {} dropped ({} malformed, {} not PUBLISH, {} too \
         large); {prefixes} topic prefix(es) subscribed",
        s.published,
        s.unheard,
        s.dropped(),
        s.malformed,
        s.ignored,
        s.too_large
    )
}

/// A peer identity for the log: text if it is (0.3.13 and emq use uuid4
/// text), else hex (libzmq's generated identities).
fn show(id: &[u8]) -> String {
    match std::str::from_utf8(id) {
        Ok(s) if !s.is_empty() && s.chars().all(|c| c.is_ascii_graphic()) => s.to_string(),
        _ => id.iter().map(|b| format!("{b:02x}")).collect(),
    }
}

#[cfg(test)]
mod tests;
