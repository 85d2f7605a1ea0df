//! Small helpers: fast hash maps, identity text for logs, and a log rate
//! limiter.

use std::borrow::Cow;

/// The core's hash maps: foldhash (per-process random seed) instead of
/// SipHash — several lookups per message are on the hot path.
pub type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
/// The set counterpart of [`FastMap`].
pub type FastSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;

use std::time::Duration;

use crate::config::SECOND;

/// Microseconds of a duration, saturating (histograms, unix times).
pub fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// A peer identity for logs and admin JSON keys (uuid4 text in practice).
pub fn ident(identity: &[u8]) -> Cow<'_, str> {
    String::from_utf8_lossy(identity)
}

/// At most `limit` log lines per second for one kind of event; the number
/// suppressed is logged when the next window opens.
#[derive(Debug)]
pub struct LogLimiter {
    what: &'static str,
    limit: u32,
    window: Duration,
    count: u32,
    suppressed: u64,
}

impl LogLimiter {
    pub fn new(what: &'static str, limit: u32) -> LogLimiter {
        LogLimiter {
            what,
            limit,
            window: Duration::ZERO,
            count: 0,
            suppressed: 0,
        }
    }

    pub fn allow(&mut self, now: Duration) -> bool {
        if now >= self.window.saturating_add(SECOND) || now < self.window {
            if self.suppressed > 0 {
                log::warn!("{} more {} not logged", self.suppressed, self.what);
            }
            self.window = now;
            self.count = 0;
            self.suppressed = 0;
        }
        self.count += 1;
        if self.count <= self.limit {
            true
        } else {
            self.suppressed += 1;
            false
        }
    }
}

/// Messages dropped because their client is gone (a send to it failed),
/// for the log.
///
/// The rule: the first drop for a client is logged (`dropped` says
/// `true`), once, until the client is seen again ([`GoneLog::seen`]);
/// every later drop is counted, and [`GoneLog::take_summary`] hands out
/// the count (and how many clients) once per [`GoneLog::WINDOW`], for one
/// summary line. A departed client's results are probed for hours: one
/// line per probe filled the log (issue 32: 1,012 of 1,095 lines). At
/// most [`GoneLog::REMEMBERED`] clients are remembered (then forgotten
/// all at once: they are logged once more).
#[derive(Debug, Default)]
pub struct GoneLog {
    logged: FastSet<Vec<u8>>,
    /// The start of the window the counted drops fell in.
    started: Option<Duration>,
    dropped: u64,
    clients: FastSet<Vec<u8>>,
}

impl GoneLog {
    /// How often the summary is given.
    pub const WINDOW: Duration = Duration::from_secs(60);
    /// How many gone clients are remembered.
    pub const REMEMBERED: usize = 10_000;

    /// A message to `client` was dropped at `now`: whether to log it
    /// (the first for this client), else it is counted.
    pub fn dropped(&mut self, client: &[u8], now: Duration) -> bool {
        if !self.logged.contains(client) {
            if self.logged.len() >= Self::REMEMBERED {
                self.logged.clear();
            }
            self.logged.insert(client.to_vec());
            return true;
        }
        self.started.get_or_insert(now);
        self.dropped += 1;
        if self.clients.len() < Self::REMEMBERED {
            self.clients.insert(client.to_vec());
        }
        false
    }

    /// `client` sent something: its next drop is logged again.
    pub fn seen(&mut self, client: &[u8]) {
        if !self.logged.is_empty() {
            self.logged.remove(client);
        }
    }

    /// `(messages dropped, clients)` not logged in a window that is over
    /// at `now`, once; `None` while the window lasts or nothing was
    /// counted.
    pub fn take_summary(&mut self, now: Duration) -> Option<(u64, usize)> {
        let start = self.started?;
        if now < start.saturating_add(Self::WINDOW) {
            return None;
        }
        self.started = None;
        let clients = self.clients.len();
        self.clients.clear();
        Some((std::mem::take(&mut self.dropped), clients))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 32: a gone client's first drop is logged, the rest are summed
    /// up once a minute; seen again, it is logged again.
    #[test]
    fn gone_clients_are_logged_once_then_summed_up_per_window() {
        let mut g = GoneLog::default();
        let s = Duration::from_secs;
        assert!(g.dropped(b"a", s(0)), "a's first");
        assert!(g.dropped(b"b", s(1)), "b's first");
        assert_eq!(g.take_summary(s(100)), None, "nothing counted yet");
        for t in 2..50 {
            assert!(!g.dropped(b"a", s(t)));
            assert!(!g.dropped(b"b", s(t)));
        }
        assert_eq!(g.take_summary(s(30)), None, "the window lasts");
        assert_eq!(g.take_summary(s(62)), Some((96, 2)));
        assert_eq!(g.take_summary(s(200)), None, "once");
        g.seen(b"a");
        assert!(g.dropped(b"a", s(201)), "seen again: logged again");
        assert!(!g.dropped(b"b", s(201)));
        assert_eq!(g.take_summary(s(261)), Some((1, 1)));
    }

    #[test]
    fn limiter_caps_lines_per_second() {
        let mut l = LogLimiter::new("test events", 2);
        let us = Duration::from_micros;
        assert!(l.allow(us(0)));
        assert!(l.allow(us(1)));
        assert!(!l.allow(us(2)));
        assert!(l.allow(SECOND + us(5)));
    }
}

/// Unix milliseconds as RFC 3339 UTC text with milliseconds
/// (`2026-12-06T14:05:09.123Z`), for messages people read.
pub fn rfc3339_ms(unix_ms: u64) -> String {
    let secs = unix_ms / 1000;
    let days = secs / 86_400;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        unix_ms % 1000
    )
}

#[cfg(test)]
mod rfc3339_tests {
    #[test]
    fn unix_ms_print_as_utc() {
        assert_eq!(super::rfc3339_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            super::rfc3339_ms(1_796_652_309_123),
            "2026-12-07T14:05:09.123Z"
        );
        assert_eq!(
            super::rfc3339_ms(951_782_400_000),
            "2000-02-29T00:00:00.000Z"
        );
    }
}
