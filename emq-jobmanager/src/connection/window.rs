//! The credit window: how many READYs a job manager has outstanding, and
//! how many it may announce beyond its free slots.
//!
//! The rule: a job manager never *runs* more than `concurrency` jobs, but
//! it may *hold* more — credit (READYs the router has not answered yet) +
//! jobs received and not started + running jobs ≤ `concurrency` + the
//! window. Held jobs start, oldest first, as slots free up. The router
//! counts each READY as one job it may hand out (emq and 0.3.13 alike), so
//! the window needs nothing from the router.
//!
//! Why: a slot that finishes a job idles while its READY travels to the
//! router and the next job comes back. By Little's law the jobs that must
//! be in transit to keep `c` slots busy are throughput × round trip =
//! `c × rtt / s` (`s`: a job's service time). The window is
//! [`HEADROOM`] × `(c − 1) × rtt / s`, rounded down, capped by `cap`:
//! one slot is left out of the count, so that a job that turns out long
//! leaves at least one slot to the jobs held behind it (a job manager with
//! one slot therefore never gets an adaptive window):
//! - jobs short compared with the round trip get a window (no-op jobs: the
//!   cap);
//! - jobs longer than `HEADROOM × c` round trips get none, so a long job
//!   never has short ones waiting behind it here while another job manager
//!   idles;
//! - **the window never hoards**: it is at most [`HELD_PER_SLOT`] job per
//!   counted slot (so at most `c − 1`; a 2-slot job manager announces at
//!   most 3 READYs, whatever it measured). The round trip and the service
//!   time are the past; the jobs the credit brings are the future. When
//!   short jobs give way to long ones, the jobs already announced for are
//!   held here behind the long ones while another job manager may idle:
//!   with this bound each slot has at most one job waiting behind it, so
//!   a burst of long jobs after a run of short ones waits at most one job
//!   here (not `cap` of them, 128 by default, which a 2-slot job manager
//!   would take ~64 job durations to run). Only no-op jobs lose by it:
//!   with `c` slots `2c − 1` jobs are in transit per round trip, not 128;
//!   `--prefetch N` still announces N when a deployment wants that;
//! - a running job that has run [`LONG_FACTOR`] times the mean service
//!   time (and at least [`LONG_MIN`]) is long: its slot no longer counts,
//!   so with one long job running the window shrinks, and with all but
//!   one slot running long jobs it is 0. Credit already announced cannot
//!   be taken back (eMQP has no such command): only when *every* slot runs
//!   a long job can held jobs wait, at most the window's worth of them.
//!
//! Measured here, on the caller's clock (sans-IO, unit-tested on a fake
//! clock):
//! - service time: mean of each job's start → finish, exponentially
//!   weighted ([`EWMA_WEIGHT`]); one long job raises it at once, short
//!   ones bring it down over a few dozen jobs;
//! - round trip: READY sent → the REQUEST that used it (READYs are used in
//!   the order they were sent), the *smallest* sample of the last
//!   [`RTT_HORIZON`]: a READY that waits at a router with nothing queued
//!   measures idleness, not the round trip, and a minimum ignores it.
//!   When jobs are sparse every READY waits, so a sample counts as at most
//!   [`RTT_SAMPLE_MAX`] (a loopback or LAN round trip is well under it):
//!   long jobs trickling in never open a window.
//!
//! No measurement yet (a fresh job manager): no window.
//! [`Prefetch::Off`] (`--prefetch 0`): never a window, one READY per free
//! slot; [`Prefetch::Fixed`] (`--prefetch N`): always N.

use std::collections::VecDeque;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// The window is this many times the jobs in transit over one round trip.
pub const HEADROOM: u32 = 2;
/// ... and at most this many jobs per counted slot (the window never
/// hoards: see the module docs).
pub const HELD_PER_SLOT: usize = 1;
/// A running job is long once it has run this many times the mean.
pub const LONG_FACTOR: u32 = 8;
/// ... and at least this long.
pub const LONG_MIN: Duration = Duration::from_millis(1);
/// The round trip is the smallest sample of this long a period.
pub const RTT_HORIZON: Duration = Duration::from_secs(2);
/// A READY → REQUEST delay counts as at most this.
pub const RTT_SAMPLE_MAX: Duration = Duration::from_millis(10);
/// Weight of a new service-time sample in the mean (1/8, as TCP's SRTT).
pub const EWMA_WEIGHT: f64 = 0.125;
/// The default cap of the adaptive window (`--prefetch-cap`).
pub const DEFAULT_CAP: usize = 128;
/// Service times below this count as this (a no-op job measures ~0).
const SERVICE_FLOOR: Duration = Duration::from_micros(1);

/// How the window is sized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prefetch {
    /// One READY per free slot, never more (`--prefetch 0`).
    Off,
    /// Always this many beyond the slots (`--prefetch N`).
    Fixed(usize),
    /// Sized from measurements, at most `cap` (`--prefetch auto`).
    Adaptive { cap: usize },
}

impl Prefetch {
    /// The adaptive window with the default cap.
    pub const fn adaptive() -> Prefetch {
        Prefetch::Adaptive { cap: DEFAULT_CAP }
    }

    /// The largest window this setting can give.
    pub fn max(&self) -> usize {
        match *self {
            Prefetch::Off => 0,
            Prefetch::Fixed(n) => n,
            Prefetch::Adaptive { cap } => cap,
        }
    }
}

impl fmt::Display for Prefetch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Prefetch::Off => write!(f, "off"),
            Prefetch::Fixed(n) => write!(f, "fixed {n}"),
            Prefetch::Adaptive { cap } => write!(f, "adaptive, at most {cap}"),
        }
    }
}

/// `auto` (with the default cap; see [`Prefetch::Adaptive`]), `0` (off)
/// or a number (fixed).
impl FromStr for Prefetch {
    type Err = String;

    fn from_str(s: &str) -> Result<Prefetch, String> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("auto") {
            return Ok(Prefetch::adaptive());
        }
        match s.parse::<usize>() {
            Ok(0) => Ok(Prefetch::Off),
            Ok(n) => Ok(Prefetch::Fixed(n)),
            Err(_) => Err(format!(
                "prefetch must be \"auto\", 0 (off) or a number of jobs, got {s:?}"
            )),
        }
    }
}

/// A minimum over a sliding period of time (a monotonic deque: O(1)
/// amortized per sample).
#[derive(Debug, Default, Clone)]
struct WindowedMin {
    /// `(when, sample)`, samples increasing from front to back.
    q: VecDeque<(Duration, Duration)>,
}

impl WindowedMin {
    fn push(&mut self, now: Duration, sample: Duration) {
        while self.q.back().is_some_and(|&(_, s)| s >= sample) {
            self.q.pop_back();
        }
        self.q.push_back((now, sample));
        self.expire(now);
    }

    fn expire(&mut self, now: Duration) {
        // The newest sample stays even when old: a round trip measured
        // once is better than none.
        while self.q.len() > 1 && self.q.front().is_some_and(|&(t, _)| t + RTT_HORIZON < now) {
            self.q.pop_front();
        }
    }

    fn get(&self) -> Option<Duration> {
        self.q.front().map(|&(_, s)| s)
    }
}

/// The credit ledger and the window's sizing. See the module docs.
#[derive(Debug, Clone)]
pub struct Window {
    prefetch: Prefetch,
    /// Send time of each READY not answered yet, oldest first: the credit.
    readies: VecDeque<Duration>,
    /// Mean service time in nanoseconds.
    service: Option<f64>,
    rtt: WindowedMin,
}

impl Window {
    pub fn new(prefetch: Prefetch) -> Window {
        Window {
            prefetch,
            readies: VecDeque::new(),
            service: None,
            rtt: WindowedMin::default(),
        }
    }

    pub fn prefetch(&self) -> Prefetch {
        self.prefetch
    }

    /// READYs outstanding (jobs the router may still send).
    pub fn credit(&self) -> usize {
        self.readies.len()
    }

    /// A READY went out.
    pub fn ready_sent(&mut self, now: Duration) {
        self.readies.push_back(now);
    }

    /// A READY could not be sent after all (the newest one).
    pub fn ready_failed(&mut self) -> bool {
        self.readies.pop_back().is_some()
    }

    /// The router forgot every READY (reconnect, KBYE).
    pub fn withdraw(&mut self) {
        self.readies.clear();
    }

    /// A REQUEST arrived: it used the oldest READY (a sample of the round
    /// trip). False when no READY was outstanding.
    pub fn request_received(&mut self, now: Duration) -> bool {
        match self.readies.pop_front() {
            Some(sent) => {
                self.rtt
                    .push(now, now.saturating_sub(sent).min(RTT_SAMPLE_MAX));
                true
            }
            None => false,
        }
    }

    /// A job ran for `ran`.
    pub fn job_finished(&mut self, ran: Duration) {
        let x = ran.max(SERVICE_FLOOR).as_nanos() as f64;
        self.service = Some(match self.service {
            None => x,
            Some(m) => m + EWMA_WEIGHT * (x - m),
        });
    }

    /// Mean service time measured so far.
    pub fn service_time(&self) -> Option<Duration> {
        self.service.map(|n| Duration::from_nanos(n.round() as u64))
    }

    /// The round trip (smallest recent READY → REQUEST delay).
    pub fn round_trip(&self) -> Option<Duration> {
        self.rtt.get()
    }

    /// How long a running job must have run to count as long.
    pub fn long_after(&self) -> Option<Duration> {
        self.service_time().map(|s| (s * LONG_FACTOR).max(LONG_MIN))
    }

    /// The window now: how many jobs beyond `concurrency` this job manager
    /// may hold (credit + held + running). `running_since`: when each
    /// running job started.
    pub fn extra(
        &mut self,
        concurrency: usize,
        running_since: impl Iterator<Item = Duration>,
        now: Duration,
    ) -> usize {
        let cap = match self.prefetch {
            Prefetch::Off => return 0,
            Prefetch::Fixed(n) => return n,
            Prefetch::Adaptive { cap } => cap,
        };
        self.rtt.expire(now);
        let (Some(s), Some(rtt), Some(long)) =
            (self.service_time(), self.round_trip(), self.long_after())
        else {
            return 0;
        };
        let long_running = running_since
            .filter(|&t| now.saturating_sub(t) >= long)
            .count();
        let short_slots = concurrency.saturating_sub(long_running).saturating_sub(1);
        let s = s.max(SERVICE_FLOOR).as_nanos();
        let w = u128::from(HEADROOM) * short_slots as u128 * rtt.as_nanos() / s;
        let never_hoards = short_slots.saturating_mul(HELD_PER_SLOT);
        w.min(cap.min(never_hoards) as u128) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// A window that saw `n` jobs of `service` each, whose READYs came
    /// back after `rtt`.
    fn measured(prefetch: Prefetch, rtt: Duration, service: Duration, n: usize) -> Window {
        let mut w = Window::new(prefetch);
        let mut now = ms(1);
        for _ in 0..n {
            w.ready_sent(now);
            now += rtt;
            assert!(w.request_received(now));
            now += service;
            w.job_finished(service);
        }
        w
    }

    #[test]
    fn parse_auto_off_and_fixed() {
        assert_eq!("auto".parse::<Prefetch>(), Ok(Prefetch::adaptive()));
        assert_eq!(" AUTO ".parse::<Prefetch>(), Ok(Prefetch::adaptive()));
        assert_eq!("0".parse::<Prefetch>(), Ok(Prefetch::Off));
        assert_eq!("16".parse::<Prefetch>(), Ok(Prefetch::Fixed(16)));
        let e = "-1".parse::<Prefetch>().unwrap_err();
        assert!(e.contains("auto"), "{e}");
        assert!("lots".parse::<Prefetch>().is_err());
        assert_eq!(Prefetch::adaptive().max(), DEFAULT_CAP);
    }

    #[test]
    fn nothing_measured_no_window() {
        let mut w = Window::new(Prefetch::adaptive());
        assert_eq!(w.extra(8, std::iter::empty(), ms(5)), 0);
        // A round trip but no finished job yet.
        w.ready_sent(ms(1));
        w.request_received(ms(2));
        assert_eq!(w.extra(8, std::iter::empty(), ms(5)), 0);
    }

    #[test]
    fn off_is_zero_and_fixed_is_fixed_whatever_was_measured() {
        let mut off = measured(Prefetch::Off, us(100), us(1), 50);
        assert_eq!(off.extra(8, std::iter::empty(), ms(100)), 0);
        let mut fixed = measured(Prefetch::Fixed(5), us(100), ms(500), 50);
        assert_eq!(fixed.extra(8, std::iter::empty(), ms(100)), 5);
    }

    #[test]
    fn littles_law_headroom_times_slots_times_rtt_over_service() {
        // 8 slots (7 counted), 100 µs round trip, 280 µs jobs: 2.5 in
        // transit, window 2 × 7 × 100 / 280 = 5.
        let mut w = measured(Prefetch::Adaptive { cap: 1000 }, us(100), us(280), 20);
        assert_eq!(w.round_trip(), Some(us(100)));
        let s = w.service_time().unwrap();
        assert!(s.abs_diff(us(280)) < us(1), "{s:?}");
        let now = ms(100);
        assert_eq!(w.extra(8, std::iter::empty(), now), 5);
        // Half the round trip, half the window (2.5, rounded down).
        let mut w = measured(Prefetch::Adaptive { cap: 1000 }, us(50), us(280), 20);
        assert_eq!(w.extra(8, std::iter::empty(), now), 2);
        // One slot: never a window.
        let mut w = measured(Prefetch::Adaptive { cap: 1000 }, us(100), us(1), 20);
        assert_eq!(w.extra(1, std::iter::empty(), now), 0);
    }

    #[test]
    fn no_op_jobs_get_one_job_per_counted_slot_or_the_cap() {
        // Little's law asks for thousands: the window stays at one job
        // per counted slot (8 slots, 7 counted).
        let mut w = measured(Prefetch::adaptive(), us(80), Duration::ZERO, 10);
        assert_eq!(w.extra(8, std::iter::empty(), ms(10)), 7);
        let mut w = measured(Prefetch::Adaptive { cap: 3 }, us(80), Duration::ZERO, 10);
        assert_eq!(w.extra(8, std::iter::empty(), ms(10)), 3);
        // The bound is the default whatever the slots: 200 slots, 128.
        let mut w = measured(Prefetch::adaptive(), us(80), Duration::ZERO, 10);
        assert_eq!(w.extra(200, std::iter::empty(), ms(10)), DEFAULT_CAP);
    }

    #[test]
    fn the_window_never_hoards_after_twenty_short_jobs_two_slots_announce_three() {
        // The case: 20 short jobs on 2 slots used to open the
        // window to the cap (130 READYs outstanding); one job beyond the
        // one counted slot now.
        for (rtt, service) in [(us(100), us(1)), (us(100), us(20)), (ms(1), us(5))] {
            let mut w = measured(Prefetch::adaptive(), rtt, service, 20);
            let x = w.extra(2, std::iter::empty(), ms(100));
            assert_eq!(x, 1, "rtt {rtt:?}, service {service:?}");
            assert!(x * HELD_PER_SLOT <= 1);
        }
    }

    #[test]
    fn long_jobs_get_no_window() {
        // 2 ms jobs, 100 µs round trip, 8 slots: 2 × 8 × 0.1 / 2 = 0.8 → 0.
        let mut w = measured(Prefetch::adaptive(), us(100), ms(2), 20);
        assert_eq!(w.extra(8, std::iter::empty(), ms(100)), 0);
        // Seconds-long jobs: none either.
        let mut w = measured(Prefetch::adaptive(), us(100), ms(3000), 3);
        assert_eq!(w.extra(8, std::iter::empty(), ms(100)), 0);
    }

    #[test]
    fn one_long_job_closes_the_window_and_short_ones_reopen_it() {
        let mut w = measured(Prefetch::Adaptive { cap: 1000 }, us(100), us(10), 50);
        let now = ms(100);
        let open = w.extra(4, std::iter::empty(), now);
        assert_eq!(open, 3, "one job per counted slot");
        w.job_finished(ms(3000));
        assert_eq!(w.extra(4, std::iter::empty(), now), 0);
        // Short jobs bring the mean back down within a bounded number.
        let mut n = 0;
        while w.extra(4, std::iter::empty(), now) == 0 {
            w.job_finished(us(10));
            n += 1;
            assert!(n < 200, "the window never reopened");
        }
        assert!(
            n > 10,
            "one long job counts for more than a few short ones: {n}"
        );
    }

    #[test]
    fn a_running_job_past_long_factor_times_the_mean_takes_its_slot_out() {
        let mut w = measured(Prefetch::Adaptive { cap: 1000 }, us(100), us(100), 50);
        // mean 100 µs → long after max(800 µs, 1 ms) = 1 ms.
        assert_eq!(w.long_after(), Some(LONG_MIN));
        let now = ms(1000);
        let all = w.extra(3, std::iter::empty(), now);
        assert_eq!(all, 2, "2 × (3 − 1) × 100 / 100 = 4, one per counted slot");
        // One of three slots runs a job started 5 ms ago: half the window.
        let half = w.extra(3, [now - ms(5), now - us(50)].into_iter(), now);
        assert_eq!(half, 1);
        // Two long: one slot left, kept for held jobs: no window.
        let none = w.extra(3, [now - ms(5), now - ms(2)].into_iter(), now);
        assert_eq!(none, 0);
        // Just under the limit still counts as short.
        let short = w.extra(3, [now - us(999)].into_iter(), now);
        assert_eq!(short, 2);
    }

    #[test]
    fn round_trip_is_the_recent_minimum_so_an_idle_router_does_not_inflate_it() {
        let mut w = Window::new(Prefetch::adaptive());
        // READY at 0, the router idles 5 s before a job arrives.
        w.ready_sent(ms(0));
        w.request_received(ms(5000));
        assert_eq!(w.round_trip(), Some(RTT_SAMPLE_MAX), "capped");
        w.ready_sent(ms(5000));
        w.request_received(ms(5000) + us(120));
        assert_eq!(w.round_trip(), Some(us(120)));
        // Another idle wait does not raise it ...
        w.ready_sent(ms(5001));
        w.request_received(ms(6000));
        assert_eq!(w.round_trip(), Some(us(120)));
        // ... until the short sample is older than the horizon.
        w.ready_sent(ms(6900));
        w.request_received(ms(6900) + us(300));
        assert_eq!(w.round_trip(), Some(us(120)));
        w.ready_sent(ms(8000));
        w.request_received(ms(8000) + us(400));
        assert_eq!(
            w.round_trip(),
            Some(us(300)),
            "120 µs was at 5.0 s, horizon 2 s"
        );
    }

    #[test]
    fn readies_are_answered_oldest_first_and_credit_counts_them() {
        let mut w = Window::new(Prefetch::adaptive());
        w.ready_sent(ms(1));
        w.ready_sent(ms(2));
        w.ready_sent(ms(3));
        assert_eq!(w.credit(), 3);
        assert!(w.ready_failed(), "the newest READY was not sent");
        assert_eq!(w.credit(), 2);
        assert!(w.request_received(ms(4)));
        assert_eq!(w.round_trip(), Some(ms(3)), "the READY of 1 ms answered");
        w.withdraw();
        assert_eq!(w.credit(), 0);
        assert!(!w.request_received(ms(5)), "no READY outstanding");
        assert!(!w.ready_failed());
    }
}
