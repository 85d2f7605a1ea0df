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

#[cfg(test)]
mod tests {
    use super::*;

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
