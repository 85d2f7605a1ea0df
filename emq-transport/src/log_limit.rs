//! A cap on how many lines of one kind go to the log, for what a peer can
//! make happen as often as it likes (malformed messages, refused
//! connections with keys that cost nothing to make).
//!
//! # The rule
//!
//! A [`LogLimit`] lets `burst` lines through in a window of `window` (the
//! window starts at the first line); what comes after them in the same
//! window is counted, not written. Once the window is over, the count is
//! handed out once ([`LogLimit::take_summary`]) for a single summary line
//! ("N … not logged in the last 10 s"), and the next line starts a new
//! window. So one kind costs at most `burst + 1` lines per window, whatever
//! the flood. [`LogLimit::due`] says when a summary is waiting, for loops
//! that sleep until their next timer.
//!
//! Pure: `now` is passed in (a [`Duration`] since the caller's start), so
//! the sans-IO cores use it on their fake clock.

use std::time::Duration;

/// How long a window lasts unless the caller says otherwise.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(10);

/// See the module documentation.
#[derive(Debug, Clone)]
pub struct LogLimit {
    window: Duration,
    burst: u32,
    /// When the current window started; `None`: no window open.
    started: Option<Duration>,
    written: u32,
    suppressed: u64,
}

impl LogLimit {
    /// At most `burst` lines (at least one) per `window`.
    pub fn new(window: Duration, burst: u32) -> LogLimit {
        LogLimit {
            window,
            burst: burst.max(1),
            started: None,
            written: 0,
            suppressed: 0,
        }
    }

    /// The window's length (for the summary's text).
    pub fn window(&self) -> Duration {
        self.window
    }

    /// Whether a line may be written at `now`; if not, it is counted. A
    /// caller that gets `true` should first write the summary of the
    /// window before, if [`LogLimit::take_summary`] has one.
    pub fn allow(&mut self, now: Duration) -> bool {
        match self.started {
            Some(start) if now < start + self.window => {}
            _ => {
                // a summary of an earlier window stays until taken
                self.started = Some(now);
                self.written = 0;
            }
        }
        if self.written < self.burst {
            self.written += 1;
            true
        } else {
            self.suppressed += 1;
            false
        }
    }

    /// The number of lines not written, once the window they fell in is
    /// over (then zero again); `None` if there is nothing to summarise yet.
    pub fn take_summary(&mut self, now: Duration) -> Option<u64> {
        let over = self.started.is_none_or(|start| now >= start + self.window);
        if self.suppressed == 0 || !over {
            return None;
        }
        Some(std::mem::take(&mut self.suppressed))
    }

    /// When [`LogLimit::take_summary`] will have something: the end of the
    /// window, if lines were held back in it.
    pub fn due(&self) -> Option<Duration> {
        if self.suppressed == 0 {
            return None;
        }
        self.started.map(|start| start + self.window)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: Duration = Duration::from_secs(10);

    fn at(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    #[test]
    fn a_flood_costs_burst_lines_and_one_summary_per_window() {
        let mut l = LogLimit::new(W, 3);
        let written = (0..20_000u64).filter(|i| l.allow(at(i / 4))).count();
        assert_eq!(written, 3, "all 20,000 fall in the first window");
        assert_eq!(l.take_summary(at(9_999)), None, "the window is not over");
        assert_eq!(l.due(), Some(at(10_000)));
        assert_eq!(l.take_summary(at(10_000)), Some(19_997));
        assert_eq!(l.take_summary(at(10_001)), None, "handed out once");
        assert_eq!(l.due(), None);
    }

    #[test]
    fn the_next_window_starts_with_the_next_line() {
        let mut l = LogLimit::new(W, 1);
        assert!(l.allow(at(0)));
        assert!(!l.allow(at(5_000)));
        assert!(l.allow(at(12_000)), "a new window");
        assert!(!l.allow(at(12_001)));
        // the first window's one line and the second's are both waiting
        assert_eq!(l.take_summary(at(21_999)), None);
        assert_eq!(l.take_summary(at(22_000)), Some(2));
    }

    #[test]
    fn quiet_kinds_are_never_summarised() {
        let mut l = LogLimit::new(W, 2);
        assert!(l.allow(at(0)));
        assert!(l.allow(at(1)));
        assert_eq!(l.due(), None);
        assert_eq!(l.take_summary(at(60_000)), None);
        assert!(LogLimit::new(W, 0).allow(at(0)), "burst is at least one");
    }
}
