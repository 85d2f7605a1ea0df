//! Small helpers: cheap unique msgids, Python-style timestamps, identity
//! text for logs, and a log rate limiter.

use std::borrow::Cow;

/// The core's hash maps: foldhash (per-process random seed) instead of
/// SipHash — several lookups per message are on the hot path.
pub type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

use crate::config::SECOND;

/// uuid4-shaped msgids from one random base plus a counter: unique within
/// a router run and across runs (random base), without a syscall per id.
#[derive(Debug)]
pub struct MsgIds {
    base: u128,
    n: u64,
}

/// Low 62 bits of a uuid: below the variant bits, so they stay valid.
const LOW_MASK: u128 = (1u128 << 62) - 1;

impl MsgIds {
    pub fn new() -> MsgIds {
        MsgIds {
            base: uuid::Uuid::new_v4().as_u128(),
            n: 0,
        }
    }

    pub fn next_id(&mut self) -> String {
        self.n = self.n.wrapping_add(1);
        let low = self.base.wrapping_add(u128::from(self.n)) & LOW_MASK;
        let v = (self.base & !LOW_MASK) | low;
        uuid::Uuid::from_u128(v).hyphenated().to_string()
    }
}

impl Default for MsgIds {
    fn default() -> Self {
        MsgIds::new()
    }
}

/// Unix time in micros as Python's `str(time.time())`: `1796216977.4512658`
/// (always with a fractional part).
pub fn unix_ts_text(unix_micros: u64) -> String {
    let secs = unix_micros as f64 / 1e6;
    let mut s = format!("{secs}");
    if !s.contains('.') {
        s.push_str(".0");
    }
    s
}

/// Seconds as f64 (admin `hb` fields).
pub fn secs_f64(micros: u64) -> f64 {
    micros as f64 / 1e6
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
    window: u64,
    count: u32,
    suppressed: u64,
}

impl LogLimiter {
    pub fn new(what: &'static str, limit: u32) -> LogLimiter {
        LogLimiter {
            what,
            limit,
            window: 0,
            count: 0,
            suppressed: 0,
        }
    }

    pub fn allow(&mut self, now: u64) -> bool {
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
    fn timestamps_look_like_python_time_time() {
        assert_eq!(unix_ts_text(1_796_216_977_451_266), "1796216977.451266");
        assert_eq!(unix_ts_text(1_796_216_977_000_000), "1796216977.0");
    }

    #[test]
    fn msgids_are_unique_uuid4_text() {
        let mut ids = MsgIds::new();
        let a = ids.next_id();
        let b = ids.next_id();
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        let u = uuid::Uuid::parse_str(&b).unwrap();
        assert_eq!(u.get_version_num(), 4);
    }

    #[test]
    fn limiter_caps_lines_per_second() {
        let mut l = LogLimiter::new("test events", 2);
        assert!(l.allow(0));
        assert!(l.allow(1));
        assert!(!l.allow(2));
        assert!(l.allow(SECOND + 5));
    }
}
