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
//! counted. A peer can send those as fast as it likes, so each kind writes
//! at most [`LOG_BURST`] lines per [`LOG_WINDOW`]; the rest are counted and
//! summed up in one line when the window is over ("N malformed message(s)
//! dropped in the last 10 s, not logged one by one";
//! [`emq_transport::log_limit`]).
//!
//! The outgoing socket is an XPUB (the same wire as PUB for subscribers),
//! so the core also sees subscriptions come and go ([`Pubsub::handle_subscription`]:
//! libzmq passes the first subscription to a prefix and the last
//! unsubscription from it; when a subscriber leaves, libzmq passes the
//! unsubscription of each prefix only it held, so a departed subscriber's
//! prefixes leave the table). A message whose topic matches no subscribed
//! prefix is dropped by libzmq; the core counts those as `unheard`, so the
//! log says that nobody was listening instead of nothing. Subscription
//! changes are logged under the same cap as the drops.
//!
//! The table is bounded: at most `max_subscriptions` prefixes are kept
//! (libzmq still delivers to all of them; the table only serves the
//! `unheard` count). A prefix past the bound is not kept but counted as
//! untracked, with one warning per window; while any untracked prefix is
//! still subscribed (an unsubscription of a prefix not in the table is one
//! of them leaving), a message that matches no kept prefix is not counted
//! as unheard, since it may have matched an untracked one. So a subscriber
//! with a million topics costs the core at most `max_subscriptions`
//! entries. Every `report_every` the core logs what happened since the
//! last report (if anything did).
//!
//! # Call order
//!
//! As the router core: [`Pubsub::handle_incoming`] and
//! [`Pubsub::handle_subscription`] take one input at time `now` (a
//! [`Duration`] since the driver started); the first pushes the message to
//! send on the PUB socket, if any, into the caller's buffer (as the other
//! cores push their actions). [`Pubsub::poll_timeout`] says when
//! [`Pubsub::handle_timeout`] is due (the next report). [`Pubsub::stats`]
//! are the totals. No sockets, clock or threads here.

use std::collections::BTreeSet;
use std::time::Duration;

use emq_transport::log_limit::LogLimit;
use emqp_proto::{Command, Message, Published};

/// The window of the cap on log lines of one kind.
pub const LOG_WINDOW: Duration = emq_transport::log_limit::DEFAULT_WINDOW;
/// Lines of one kind written per [`LOG_WINDOW`] before the rest are only
/// counted.
pub const LOG_BURST: u32 = 5;
/// The default bound of the subscription table (prefixes).
pub const DEFAULT_MAX_SUBSCRIPTIONS: usize = 100_000;

/// Tunables of the core.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The biggest frame of a PUBLISH that is published; `None`: no limit.
    pub max_message_size: Option<usize>,
    /// How often to log what happened; `None`: never (totals still go to
    /// the log at shutdown, by the driver).
    pub report_every: Option<Duration>,
    /// The most prefixes the subscription table keeps (see the module
    /// documentation for what happens past it).
    pub max_subscriptions: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            max_message_size: Some(emqp_proto::DEFAULT_MAX_MESSAGE_SIZE),
            report_every: Some(Duration::from_secs(60)),
            max_subscriptions: DEFAULT_MAX_SUBSCRIPTIONS,
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
    /// Subscriptions to a new prefix not kept in the table (it was full).
    pub untracked: u64,
    /// Prefixes that gained their first subscriber (kept or not).
    pub subscribed: u64,
    /// Prefixes that lost their last subscriber (one that left, too).
    pub unsubscribed: u64,
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
    /// Prefixes subscribed but not in the table (it was full), still
    /// subscribed.
    untracked_now: u64,
    /// One cap per kind of log line a peer can cause.
    quiet: Quiet,
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
            untracked_now: 0,
            quiet: Quiet::default(),
            totals: Stats::default(),
            window: Stats::default(),
            next_report,
        }
    }

    /// One message read off the incoming ROUTER socket (identity first).
    /// What to send on the PUB socket is pushed onto `out`, in order.
    pub fn handle_incoming(
        &mut self,
        frames: Vec<Vec<u8>>,
        now: Duration,
        out: &mut Vec<Published>,
    ) {
        out.extend(self.incoming(frames, now));
    }

    /// What [`Pubsub::handle_incoming`] publishes for `frames`.
    fn incoming(&mut self, frames: Vec<Vec<u8>>, now: Duration) -> Option<Published> {
        let sizes: Vec<usize> = frames.iter().skip(1).map(Vec::len).collect();
        let peer = frames.first().map(|id| show(id)).unwrap_or_default();
        let (_, msg) = match Message::decode_routed(frames) {
            Ok(m) => m,
            Err(e) => {
                self.count(|s| s.malformed += 1);
                if !self.quiet.malformed.allow(now) {
                    return None;
                }
                log::warn!(
                    "dropped a message from {peer} that is not eMQP/1.0 ({} frame(s) of \
                     {sizes:?} bytes after the identity): {e}",
                    sizes.len()
                );
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
                self.count(|s| s.ignored += 1);
                if !self.quiet.ignored.allow(now) {
                    return None;
                }
                log::warn!(
                    "{} {} from {peer} ignored: emq-pubsub takes only PUBLISH \
                     (jobs and schedules go to the router)",
                    other.name(),
                    msg.msgid
                );
                return None;
            }
        };
        if let Some(limit) = self.config.max_message_size {
            let biggest = topic.len().max(message.len());
            if biggest > limit {
                self.count(|s| s.too_large += 1);
                if !self.quiet.too_large.allow(now) {
                    return None;
                }
                log::warn!(
                    "PUBLISH {} from {peer} to topic {topic:?} dropped: a frame of {biggest} \
                     bytes is over the limit of {limit} bytes (--max-message-size)",
                    msg.msgid
                );
                return None;
            }
        }
        let published = Published::of_publish(topic, message);
        // with untracked prefixes subscribed, "no kept prefix matches" does
        // not mean nobody heard it
        let heard = self.untracked_now > 0
            || self
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
    /// gains its first subscriber, `0` + prefix when it loses its last
    /// (also when its subscriber left). Anything else (a subscriber cannot
    /// send anything else) is ignored.
    pub fn handle_subscription(&mut self, frame: &[u8], now: Duration) {
        let Some((&kind, prefix)) = frame.split_first() else {
            return;
        };
        let shown = String::from_utf8_lossy(prefix);
        match kind {
            1 => self.count(|s| s.subscribed += 1),
            0 => self.count(|s| s.unsubscribed += 1),
            _ => {}
        }
        match kind {
            1 if self.subscriptions.contains(prefix) => {}
            1 if self.subscriptions.len() >= self.config.max_subscriptions => {
                self.untracked_now += 1;
                self.count(|s| s.untracked += 1);
                if self.quiet.untracked.allow(now) {
                    log::warn!(
                        "subscription to topic prefix {shown:?} not kept: the table holds \
                         {} prefixes (--max-subscriptions); libzmq still delivers to it, but \
                         messages to no kept prefix are not counted as to no subscriber \
                         while it lasts",
                        self.subscriptions.len()
                    );
                }
            }
            1 => {
                self.subscriptions.insert(prefix.to_vec());
                if self.quiet.subscriptions.allow(now) {
                    log::info!(
                        "subscription to topic prefix {shown:?} ({} prefix(es) subscribed)",
                        self.subscriptions.len()
                    );
                }
            }
            0 => {
                if self.subscriptions.remove(prefix) {
                    if self.quiet.subscriptions.allow(now) {
                        log::info!(
                            "no subscriber left for topic prefix {shown:?} ({} prefix(es) \
                             subscribed)",
                            self.subscriptions.len()
                        );
                    }
                } else {
                    // libzmq unsubscribes only what it subscribed: one of
                    // the prefixes not kept
                    self.untracked_now = self.untracked_now.saturating_sub(1);
                }
            }
            _ => log::debug!("ignored a {}-byte message from a subscriber", frame.len()),
        }
    }

    /// The number of prefixes in the table, and of those subscribed but
    /// not kept (the table was full).
    pub fn subscription_count(&self) -> (usize, u64) {
        (self.subscriptions.len(), self.untracked_now)
    }

    /// When [`Pubsub::handle_timeout`] is next due.
    pub fn poll_timeout(&self) -> Option<Duration> {
        self.quiet.due().into_iter().chain(self.next_report).min()
    }

    /// Log the summaries of held-back lines and the report, if due.
    pub fn handle_timeout(&mut self, now: Duration) {
        let tracked = self.subscriptions.len();
        self.quiet.summarise(now, tracked);
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
                describe(&self.window, tracked, self.untracked_now)
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
        describe(&self.totals, self.subscriptions.len(), self.untracked_now)
    }

    fn count(&mut self, f: impl Fn(&mut Stats)) {
        f(&mut self.totals);
        f(&mut self.window);
    }
}

fn describe(s: &Stats, prefixes: usize, untracked: u64) -> String {
    format!(
        "{} published ({} to no subscriber), {} dropped ({} malformed, {} not PUBLISH, {} too \
         large); {prefixes} topic prefix(es) subscribed{}{}",
        s.published,
        s.unheard,
        s.dropped(),
        s.malformed,
        s.ignored,
        s.too_large,
        if untracked > 0 {
            format!(" and {untracked} more not kept (--max-subscriptions)")
        } else {
            String::new()
        },
        if s.subscribed + s.unsubscribed > 0 {
            format!(
                " after {} subscribe(s) and {} unsubscribe(s)",
                s.subscribed, s.unsubscribed
            )
        } else {
            String::new()
        }
    )
}

/// The caps on the log lines a peer can cause, one per kind.
#[derive(Debug, Clone)]
struct Quiet {
    malformed: LogLimit,
    ignored: LogLimit,
    too_large: LogLimit,
    untracked: LogLimit,
    subscriptions: LogLimit,
}

impl Default for Quiet {
    fn default() -> Quiet {
        let cap = || LogLimit::new(LOG_WINDOW, LOG_BURST);
        Quiet {
            malformed: cap(),
            ignored: cap(),
            too_large: cap(),
            untracked: cap(),
            subscriptions: cap(),
        }
    }
}

impl Quiet {
    fn due(&self) -> Option<Duration> {
        [
            &self.malformed,
            &self.ignored,
            &self.too_large,
            &self.untracked,
            &self.subscriptions,
        ]
        .into_iter()
        .filter_map(LogLimit::due)
        .min()
    }

    /// One line per kind whose window is over with lines held back.
    fn summarise(&mut self, now: Duration, prefixes: usize) {
        let secs = LOG_WINDOW.as_secs();
        for (limit, what) in [
            (&mut self.malformed, "malformed message(s) dropped"),
            (&mut self.ignored, "message(s) other than PUBLISH dropped"),
            (
                &mut self.too_large,
                "PUBLISH(es) over the size limit dropped",
            ),
            (&mut self.untracked, "subscription(s) not kept (table full)"),
        ] {
            if let Some(n) = limit.take_summary(now) {
                log::warn!("{n} more {what} in the last {secs} s, not logged one by one");
            }
        }
        if let Some(n) = self.subscriptions.take_summary(now) {
            log::info!(
                "{n} more subscription change(s) in the last {secs} s, not logged one by one \
                 ({prefixes} prefix(es) subscribed)"
            );
        }
    }
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
