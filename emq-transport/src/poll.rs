//! One way to sleep in `zmq::poll`: until one of the items is ready or a
//! deadline passes, whichever is first. Every loop of the binaries (the
//! router's, the job manager's, pub/sub's, a standby's) sleeps through
//! [`poll`], so the rules are in one place:
//!
//! - the timeout is a [`Duration`] (`None`: no deadline, sleep until an
//!   item is ready), rounded **up** to the millisecond — waking a little
//!   late is fine, a little early spins;
//! - a signal interrupting the sleep (EINTR) is no error: the caller's
//!   loop looks at its signal flags and polls again;
//! - the items say which are ready ([`zmq::PollItem::is_readable`]).

use std::time::Duration;

/// The nearest of several deadlines (`None`s are ignored; all `None`:
/// no deadline).
pub fn earliest(deadlines: impl IntoIterator<Item = Option<Duration>>) -> Option<Duration> {
    deadlines.into_iter().flatten().min()
}

/// Milliseconds for `zmq::poll`: rounded up, `-1` for no timeout.
pub fn timeout_ms(timeout: Option<Duration>) -> i64 {
    match timeout {
        Some(t) => i64::try_from(t.as_micros().div_ceil(1000)).unwrap_or(i64::MAX),
        None => -1,
    }
}

/// Sleep until an item is ready or `timeout` passes. Returns how many
/// items are ready (0 after a timeout or a signal).
pub fn poll(items: &mut [zmq::PollItem<'_>], timeout: Option<Duration>) -> zmq::Result<i32> {
    match zmq::poll(items, timeout_ms(timeout)) {
        Ok(n) => Ok(n),
        Err(zmq::Error::EINTR) => Ok(0),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn timeouts_round_up_and_none_waits_forever() {
        assert_eq!(timeout_ms(None), -1);
        assert_eq!(timeout_ms(Some(Duration::ZERO)), 0);
        assert_eq!(timeout_ms(Some(Duration::from_micros(1))), 1);
        assert_eq!(timeout_ms(Some(Duration::from_micros(1001))), 2);
        assert_eq!(timeout_ms(Some(Duration::MAX)), i64::MAX);
    }

    #[test]
    fn earliest_ignores_missing_deadlines() {
        let s = Duration::from_secs;
        assert_eq!(earliest([None, Some(s(3)), Some(s(2)), None]), Some(s(2)));
        assert_eq!(earliest([None, None]), None);
    }

    #[test]
    fn poll_wakes_on_a_readable_item_and_times_out_without_one() {
        use std::io::Write;
        let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
        let mut items = [zmq::PollItem::from_fd(a.as_raw_fd(), zmq::POLLIN)];
        assert_eq!(poll(&mut items, Some(Duration::from_millis(1))).unwrap(), 0);
        assert!(!items[0].is_readable());
        b.write_all(&[1]).unwrap();
        assert_eq!(poll(&mut items, None).unwrap(), 1);
        assert!(items[0].is_readable());
    }
}
