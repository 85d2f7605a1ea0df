//! Heartbeats, shared by every core: the HEARTBEAT body and the liveness
//! rule.
//!
//! A HEARTBEAT carries the sender's unix time as Python's
//! `str(time.time())` (EventMQ 0.3.13 reads it as a float; it always has a
//! fractional part). A peer is alive while it has sent anything — any
//! message counts — within `interval × liveness`; past that it is dead.

use std::time::Duration;

/// Unix time in microseconds as Python's `str(time.time())`:
/// `1796216977.4512658`, always with a fractional part.
pub fn timestamp_text(unix_micros: u64) -> String {
    let secs = unix_micros as f64 / 1e6;
    let mut s = format!("{secs}");
    if !s.contains('.') {
        s.push_str(".0");
    }
    s
}

/// The liveness rule: how often to send, and how long a silence means a
/// dead peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Liveness {
    /// Time between HEARTBEATs.
    pub interval: Duration,
    /// Missed intervals before the peer is dead (at least 1).
    pub liveness: u32,
}

impl Liveness {
    /// The silence after which a peer is dead: `interval × liveness`.
    pub fn silence_limit(&self) -> Duration {
        self.interval.saturating_mul(self.liveness.max(1))
    }

    /// Whether a peer last heard at `last_seen` is dead at `now`.
    pub fn is_dead(&self, last_seen: Duration, now: Duration) -> bool {
        now.saturating_sub(last_seen) > self.silence_limit()
    }

    /// When a peer last heard at `last_seen` will be dead (the first
    /// instant at which [`Liveness::is_dead`] holds, to the microsecond).
    pub fn deadline(&self, last_seen: Duration) -> Duration {
        last_seen
            .saturating_add(self.silence_limit())
            .saturating_add(Duration::from_micros(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_look_like_python_time_time() {
        assert_eq!(timestamp_text(1_796_216_977_451_266), "1796216977.451266");
        assert_eq!(timestamp_text(1_796_216_977_000_000), "1796216977.0");
    }

    #[test]
    fn a_peer_is_dead_after_interval_times_liveness() {
        let l = Liveness {
            interval: Duration::from_secs(3),
            liveness: 3,
        };
        let seen = Duration::from_secs(10);
        assert_eq!(l.silence_limit(), Duration::from_secs(9));
        assert!(!l.is_dead(seen, Duration::from_secs(19)));
        assert!(l.is_dead(seen, l.deadline(seen)));
        assert!(!l.is_dead(seen, l.deadline(seen) - Duration::from_micros(1)));
        let zero = Liveness {
            interval: Duration::from_secs(1),
            liveness: 0,
        };
        assert_eq!(zero.silence_limit(), Duration::from_secs(1));
    }
}
