//! Backpressure: a `REJECT queue-full` is not a failure but the router
//! saying "not now". Unless `--fail-fast`, the sender sends the same
//! REQUEST (same msgid: the router kept nothing of it) again after a delay
//! that starts at [`FIRST`] and doubles on every further refusal up to
//! [`MAX`], for as long as the job's `--timeout` allows; an acceptance
//! resets it. In bulk mode no new line is sent while refused jobs wait to
//! be sent again (they would be refused too), and those go again a few at
//! a time: one after a refusal, twice as many after each one accepted
//! (slow start), half as many after a refusal; so the sender follows the
//! rate the router drains its queue instead of flooding it with jobs it
//! must refuse. When the timeout runs out first the job is reported
//! rejected `queue-full` (exit 3), as with `--fail-fast`.
//!
//! A `REJECT journal-uncertain` (the router cannot tell whether its journal
//! stored the job) is never a refusal: the job may run. It goes again the
//! same way under the same msgid (`--fail-fast` or not: the router takes a
//! msgid it holds as the same job, and its `duplicate-msgid` then counts
//! as accepted); still uncertain when the timeout runs out, it is reported
//! `uncertain` with exit code 1, as a lost connection.

use std::time::{Duration, Instant};

/// The first wait after a `queue-full`.
pub const FIRST: Duration = Duration::from_millis(10);
/// The longest wait between two tries.
pub const MAX: Duration = Duration::from_secs(1);

/// Exponential backoff, [`FIRST`] doubling to [`MAX`].
#[derive(Debug, Clone)]
pub struct Backoff {
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff { next: FIRST }
    }
}

impl Backoff {
    /// The wait before the next try; the one after will be twice as long.
    pub fn next_delay(&mut self) -> Duration {
        let d = self.next;
        self.next = (self.next * 2).min(MAX);
        d
    }

    /// The router took a job: start again from [`FIRST`].
    pub fn reset(&mut self) {
        self.next = FIRST;
    }

    /// When to try again, or `None` when that would be past `deadline`.
    pub fn retry_at(&mut self, now: Instant, deadline: Instant) -> Option<Instant> {
        let at = now + self.next_delay();
        (at < deadline).then_some(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_from_first_to_max_and_resets() {
        let mut b = Backoff::default();
        let delays: Vec<u64> = (0..9).map(|_| b.next_delay().as_millis() as u64).collect();
        assert_eq!(delays, [10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
        b.reset();
        assert_eq!(b.next_delay(), FIRST);
    }

    #[test]
    fn no_retry_past_the_deadline() {
        let mut b = Backoff::default();
        let now = Instant::now();
        assert_eq!(
            b.retry_at(now, now + Duration::from_secs(1)),
            Some(now + FIRST)
        );
        assert_eq!(b.retry_at(now, now + Duration::from_millis(15)), None);
    }
}
