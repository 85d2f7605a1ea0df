//! The leader lease: which of several routers sharing one journal
//! database serves, as a sans-IO state machine.
//!
//! **Rule.** At most one router serves a journal: the one holding the
//! lease, a row in the database naming a holder, an epoch and an expiry.
//! The epoch grows by one at every takeover, and every journal commit
//! checks, inside its own transaction, that the row still names this
//! router at its epoch (fencing): a router that lost the lease — even one
//! that does not know it yet, stalled or cut off — can never commit, so
//! it can never acknowledge a job the new leader would not load.
//!
//! **Timing.** A standby tries to take the lease at once, then every
//! [`LeaseConfig::retry_every`], sooner when the database says when the
//! current lease expires. It takes it only when it has expired (or was
//! released). The leader renews it every [`LeaseConfig::renew_every`];
//! the database sets the expiry to its own clock plus
//! [`LeaseConfig::ttl`]. Locally the lease counts as held until the time
//! the last successful renewal (or the takeover) was *sent*, plus the TTL:
//! never later than the database's expiry, so the leader has stopped
//! serving before any standby can take over. A failed renewal is retried
//! every `retry_every` while the lease is still valid; when it runs out
//! the router steps down at once ([`LeaseAction::StepDown`]: KBYE to its
//! peers, sockets closed) and is a standby again. A commit or renewal that
//! finds the row taken ([`LeaseInput::Fenced`]) steps down at once too.
//!
//! **Failover time.** After a leader dies, a standby serves at most
//! `ttl` after the dead leader's last renewal, plus one try of the
//! standby (it is told when the lease expires and tries right after),
//! plus loading the journal. With the defaults (3 s TTL, renew every 1 s,
//! retry every 0.5 s) that is under 3.5 s plus the load.
//!
//! The driver (the `emq-router` binary) carries out [`LeaseAction`]s
//! against the database — take, renew, release — and reports each outcome
//! with [`Lease::handle`] before anything else; it calls
//! [`Lease::handle_timeout`] when [`Lease::poll_timeout`] is reached. Time
//! is a [`Duration`] since the driver's start, as in the router core.

use std::time::Duration;

/// Timers of the lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseConfig {
    /// How long a lease lasts after the last renewal (the database's
    /// expiry is its clock plus this).
    pub ttl: Duration,
    /// How often the leader renews.
    pub renew_every: Duration,
    /// How often a standby tries to take the lease, and a leader whose
    /// renewal failed tries again.
    pub retry_every: Duration,
}

/// The default lease TTL: 3 s.
pub const DEFAULT_TTL: Duration = Duration::from_secs(3);
/// The default renewal interval: 1 s.
pub const DEFAULT_RENEW_EVERY: Duration = Duration::from_secs(1);
/// The default retry interval: 0.5 s.
pub const DEFAULT_RETRY_EVERY: Duration = Duration::from_millis(500);
/// A standby told that the lease expires in `t` tries at `t` plus this
/// (the database's clock and ours tick apart by a little).
pub const EXPIRY_SLACK: Duration = Duration::from_millis(20);

impl Default for LeaseConfig {
    fn default() -> Self {
        LeaseConfig {
            ttl: DEFAULT_TTL,
            renew_every: DEFAULT_RENEW_EVERY,
            retry_every: DEFAULT_RETRY_EVERY,
        }
    }
}

impl LeaseConfig {
    /// Why these timers cannot work: renewals must come well before the
    /// lease runs out (at least two tries within a TTL).
    pub fn check(&self) -> Result<(), String> {
        if self.ttl.is_zero() || self.renew_every.is_zero() || self.retry_every.is_zero() {
            return Err("lease TTL, renew and retry intervals must be positive".into());
        }
        if self.renew_every.saturating_mul(2) > self.ttl {
            return Err(format!(
                "the lease renew interval ({:?}) must be at most half the lease TTL ({:?})",
                self.renew_every, self.ttl
            ));
        }
        Ok(())
    }
}

/// What the driver reports: the outcome of the last action, a commit's
/// fencing failure, or a shutdown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseInput {
    /// [`LeaseAction::TryAcquire`] took the lease at `epoch`.
    Acquired { epoch: u64 },
    /// [`LeaseAction::TryAcquire`] found the lease held by `holder` at
    /// `epoch`, expiring in `expires_in` (the database's clock; zero if
    /// already expired).
    HeldElsewhere {
        holder: String,
        epoch: u64,
        expires_in: Duration,
    },
    /// [`LeaseAction::Renew`] extended the lease.
    Renewed,
    /// A renewal or a journal commit found the lease row no longer naming
    /// this router at its epoch: another router took over.
    Fenced,
    /// The last action could not reach the database (the text says why).
    Failed { error: String },
    /// The router stops: release the lease if it holds it.
    Shutdown,
}

/// Why a leader stepped down.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepDownReason {
    /// No renewal succeeded within the TTL.
    Expired { last_error: Option<String> },
    /// Another router took the lease over.
    Fenced,
}

impl std::fmt::Display for StepDownReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StepDownReason::Expired { last_error: None } => {
                write!(f, "the lease could not be renewed in time")
            }
            StepDownReason::Expired {
                last_error: Some(e),
            } => write!(f, "the lease could not be renewed in time ({e})"),
            StepDownReason::Fenced => write!(f, "another router took the lease over"),
        }
    }
}

/// What the driver must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseAction {
    /// Take the lease if it has expired or was released; report
    /// `Acquired`, `HeldElsewhere` or `Failed`.
    TryAcquire,
    /// Extend the lease held at `epoch`; report `Renewed`, `Fenced` or
    /// `Failed`.
    Renew { epoch: u64 },
    /// Give the lease at `epoch` up (shutdown); nothing to report.
    Release { epoch: u64 },
    /// The lease is ours at `epoch`: fence every commit with it, load the
    /// journal, bind the sockets and serve.
    Serve { epoch: u64 },
    /// Stop serving at once: KBYE to every peer, close the sockets, stop
    /// committing; then wait as a standby.
    StepDown { epoch: u64, reason: StepDownReason },
}

/// Where the lease stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// Waiting for the lease; the next try is due at `next_try`.
    Standby { next_try: Duration },
    /// Holding the lease at `epoch` until `valid_until` unless renewed.
    Leader {
        epoch: u64,
        valid_until: Duration,
        next_renew: Duration,
    },
    /// Shut down: nothing more to do.
    Stopped,
}

/// The action whose outcome the driver has not reported yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Asked {
    Acquire { sent: Duration },
    Renew { sent: Duration },
}

/// The lease state machine. See the module documentation.
#[derive(Debug, Clone)]
pub struct Lease {
    cfg: LeaseConfig,
    role: Role,
    asked: Option<Asked>,
    /// The holder last reported by `HeldElsewhere` (logged when it changes).
    seen_holder: Option<(String, u64)>,
    last_error: Option<String>,
    /// Epochs this router has held, in order (for tests and logs).
    terms: u64,
}

impl Lease {
    /// A standby whose first try is due at `now`.
    pub fn new(cfg: LeaseConfig, now: Duration) -> Lease {
        Lease {
            cfg,
            role: Role::Standby { next_try: now },
            asked: None,
            seen_holder: None,
            last_error: None,
            terms: 0,
        }
    }

    // ---- getters ---------------------------------------------------------

    pub fn config(&self) -> &LeaseConfig {
        &self.cfg
    }

    pub fn role(&self) -> &Role {
        &self.role
    }

    /// The epoch of the lease held, if leader.
    pub fn epoch(&self) -> Option<u64> {
        match self.role {
            Role::Leader { epoch, .. } => Some(epoch),
            _ => None,
        }
    }

    pub fn is_leader(&self) -> bool {
        matches!(self.role, Role::Leader { .. })
    }

    /// How many times this router became leader.
    pub fn terms(&self) -> u64 {
        self.terms
    }

    /// The next instant [`Lease::handle_timeout`] has work; `None` once
    /// stopped, or while an action's outcome is awaited.
    pub fn poll_timeout(&self) -> Option<Duration> {
        match self.role {
            Role::Standby { next_try } => self.asked.is_none().then_some(next_try),
            Role::Leader {
                valid_until,
                next_renew,
                ..
            } => Some(if self.asked.is_none() {
                valid_until.min(next_renew)
            } else {
                valid_until
            }),
            Role::Stopped => None,
        }
    }

    // ---- input -----------------------------------------------------------

    /// Timers due at `now`: the lease running out (step down), a renewal,
    /// a standby's next try.
    pub fn handle_timeout(&mut self, now: Duration, out: &mut Vec<LeaseAction>) {
        match self.role {
            Role::Leader {
                epoch,
                valid_until,
                next_renew,
            } => {
                if now >= valid_until {
                    let reason = StepDownReason::Expired {
                        last_error: self.last_error.take(),
                    };
                    self.step_down(epoch, reason, now, out);
                } else if now >= next_renew && self.asked.is_none() {
                    self.asked = Some(Asked::Renew { sent: now });
                    out.push(LeaseAction::Renew { epoch });
                }
            }
            Role::Standby { next_try } => {
                if now >= next_try && self.asked.is_none() {
                    self.asked = Some(Asked::Acquire { sent: now });
                    out.push(LeaseAction::TryAcquire);
                }
            }
            Role::Stopped => {}
        }
    }

    /// Feed one outcome; actions are appended to `out`.
    pub fn handle(&mut self, input: LeaseInput, now: Duration, out: &mut Vec<LeaseAction>) {
        if self.role == Role::Stopped {
            return;
        }
        let asked = self.asked.take();
        match input {
            LeaseInput::Shutdown => {
                if let Role::Leader { epoch, .. } = self.role {
                    out.push(LeaseAction::Release { epoch });
                }
                self.role = Role::Stopped;
            }
            LeaseInput::Acquired { epoch } => {
                let Some(Asked::Acquire { sent }) = asked else {
                    log::warn!("lease: unasked Acquired (epoch {epoch}) ignored");
                    self.asked = asked;
                    return;
                };
                self.role = Role::Leader {
                    epoch,
                    valid_until: sent + self.cfg.ttl,
                    next_renew: sent + self.cfg.renew_every,
                };
                self.seen_holder = None;
                self.last_error = None;
                self.terms += 1;
                out.push(LeaseAction::Serve { epoch });
            }
            LeaseInput::HeldElsewhere {
                holder,
                epoch,
                expires_in,
            } => {
                if !matches!(asked, Some(Asked::Acquire { .. })) {
                    self.asked = asked;
                    return;
                }
                let wait = (expires_in + EXPIRY_SLACK).min(self.cfg.retry_every);
                self.role = Role::Standby {
                    next_try: now + wait,
                };
                let seen = Some((holder, epoch));
                if self.seen_holder != seen {
                    if let Some((h, e)) = &seen {
                        log::info!(
                            "standby: the lease is held by {h} (epoch {e}), expiring in {expires_in:?} unless renewed"
                        );
                    }
                    self.seen_holder = seen;
                }
                self.last_error = None;
            }
            LeaseInput::Renewed => {
                let Some(Asked::Renew { sent }) = asked else {
                    self.asked = asked;
                    return;
                };
                if let Role::Leader {
                    valid_until,
                    next_renew,
                    ..
                } = &mut self.role
                {
                    *valid_until = (*valid_until).max(sent + self.cfg.ttl);
                    *next_renew = sent + self.cfg.renew_every;
                }
                if let Some(e) = self.last_error.take() {
                    log::info!("lease renewed again after a failure ({e})");
                }
            }
            LeaseInput::Fenced => {
                if let Role::Leader { epoch, .. } = self.role {
                    self.step_down(epoch, StepDownReason::Fenced, now, out);
                } else {
                    self.asked = asked;
                }
            }
            LeaseInput::Failed { error } => match &mut self.role {
                Role::Leader { next_renew, .. } => {
                    if self.last_error.is_none() {
                        log::warn!("lease renewal failed: {error}; retrying while the lease lasts");
                    }
                    *next_renew = now + self.cfg.retry_every;
                    self.last_error = Some(error);
                }
                Role::Standby { next_try } => {
                    if self.last_error.as_deref() != Some(error.as_str()) {
                        log::warn!("standby: cannot reach the lease: {error}");
                    }
                    *next_try = now + self.cfg.retry_every;
                    self.last_error = Some(error);
                }
                Role::Stopped => {}
            },
        }
    }

    fn step_down(
        &mut self,
        epoch: u64,
        reason: StepDownReason,
        now: Duration,
        out: &mut Vec<LeaseAction>,
    ) {
        self.asked = None;
        // Fenced: someone else serves; try again after a pause. Expired:
        // the database may be back any moment; whoever comes first serves.
        self.role = Role::Standby {
            next_try: now + self.cfg.retry_every,
        };
        out.push(LeaseAction::StepDown { epoch, reason });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn cfg() -> LeaseConfig {
        LeaseConfig::default()
    }

    /// Run timers at `now` and return the actions.
    fn tick(l: &mut Lease, now: Duration) -> Vec<LeaseAction> {
        let mut out = Vec::new();
        if l.poll_timeout().is_some_and(|t| t <= now) {
            l.handle_timeout(now, &mut out);
        }
        out
    }

    fn feed(l: &mut Lease, input: LeaseInput, now: Duration) -> Vec<LeaseAction> {
        let mut out = Vec::new();
        l.handle(input, now, &mut out);
        out
    }

    /// A standby that took the lease at `epoch` at time `at`.
    fn leader_at(at: Duration, epoch: u64) -> Lease {
        let mut l = Lease::new(cfg(), at);
        assert_eq!(tick(&mut l, at), [LeaseAction::TryAcquire]);
        assert_eq!(
            feed(&mut l, LeaseInput::Acquired { epoch }, at + 2 * MS),
            [LeaseAction::Serve { epoch }]
        );
        l
    }

    #[test]
    fn a_standby_tries_at_once_and_serves_when_it_takes_the_lease() {
        let mut l = Lease::new(cfg(), Duration::ZERO);
        assert_eq!(l.poll_timeout(), Some(Duration::ZERO));
        assert_eq!(tick(&mut l, Duration::ZERO), [LeaseAction::TryAcquire]);
        // Waiting for the answer: no timer, no second try.
        assert_eq!(l.poll_timeout(), None);
        assert!(tick(&mut l, 10 * MS).is_empty());
        let out = feed(&mut l, LeaseInput::Acquired { epoch: 7 }, 5 * MS);
        assert_eq!(out, [LeaseAction::Serve { epoch: 7 }]);
        assert_eq!(l.epoch(), Some(7));
        assert_eq!(l.terms(), 1);
        // Valid from the moment the try was sent, not answered.
        assert_eq!(
            l.role(),
            &Role::Leader {
                epoch: 7,
                valid_until: DEFAULT_TTL,
                next_renew: DEFAULT_RENEW_EVERY
            }
        );
    }

    #[test]
    fn the_leader_renews_on_time_and_the_ttl_counts_from_the_renewal_sent() {
        let mut l = leader_at(Duration::ZERO, 1);
        assert_eq!(l.poll_timeout(), Some(DEFAULT_RENEW_EVERY));
        assert!(tick(&mut l, DEFAULT_RENEW_EVERY - MS).is_empty());
        let t = DEFAULT_RENEW_EVERY;
        assert_eq!(tick(&mut l, t), [LeaseAction::Renew { epoch: 1 }]);
        // While the renewal is out only the expiry is timed.
        assert_eq!(l.poll_timeout(), Some(DEFAULT_TTL));
        assert!(feed(&mut l, LeaseInput::Renewed, t + 300 * MS).is_empty());
        assert_eq!(
            l.role(),
            &Role::Leader {
                epoch: 1,
                valid_until: t + DEFAULT_TTL,
                next_renew: t + DEFAULT_RENEW_EVERY
            }
        );
        // Many rounds: always leader, one Renew per interval.
        let mut renews = 0;
        let mut now = t;
        for _ in 0..100 {
            now += 100 * MS;
            for a in tick(&mut l, now) {
                assert_eq!(a, LeaseAction::Renew { epoch: 1 });
                renews += 1;
                feed(&mut l, LeaseInput::Renewed, now + MS);
            }
        }
        assert!(l.is_leader());
        assert_eq!(renews, 10);
    }

    #[test]
    fn failed_renewals_are_retried_and_the_leader_steps_down_when_the_ttl_runs_out() {
        let mut l = leader_at(Duration::ZERO, 3);
        let mut now = DEFAULT_RENEW_EVERY;
        let mut tries = 0;
        let mut stepped = None;
        while now < DEFAULT_TTL + DEFAULT_RETRY_EVERY {
            for a in tick(&mut l, now) {
                match a {
                    LeaseAction::Renew { epoch: 3 } => {
                        tries += 1;
                        let out = feed(
                            &mut l,
                            LeaseInput::Failed {
                                error: "connection refused".into(),
                            },
                            now,
                        );
                        assert!(out.is_empty());
                    }
                    LeaseAction::StepDown { epoch: 3, reason } => stepped = Some((now, reason)),
                    other => panic!("unexpected {other:?}"),
                }
            }
            now += 10 * MS;
        }
        let (at, reason) = stepped.expect("stepped down");
        // At the TTL after the takeover was sent (time 0), not later.
        assert_eq!(at, DEFAULT_TTL);
        assert_eq!(
            reason,
            StepDownReason::Expired {
                last_error: Some("connection refused".into())
            }
        );
        // Retried every retry interval from the first renewal: 1.0, 1.5, 2.0, 2.5.
        assert_eq!(tries, 4);
        assert!(matches!(l.role(), Role::Standby { .. }));
        // And tries to take it again as a standby.
        let next = l.poll_timeout().unwrap();
        assert_eq!(next, DEFAULT_TTL + DEFAULT_RETRY_EVERY);
        assert_eq!(tick(&mut l, next), [LeaseAction::TryAcquire]);
    }

    #[test]
    fn a_late_renewal_answer_after_the_expiry_does_not_revive_the_lease() {
        let mut l = leader_at(Duration::ZERO, 1);
        assert_eq!(
            tick(&mut l, DEFAULT_RENEW_EVERY),
            [LeaseAction::Renew { epoch: 1 }]
        );
        // The renewal hangs past the TTL (a slow database): the driver
        // checks timers when it returns, and the expiry wins.
        let late = DEFAULT_TTL + 100 * MS;
        let out = tick(&mut l, late);
        assert!(
            matches!(&out[..], [LeaseAction::StepDown { epoch: 1, .. }]),
            "{out:?}"
        );
        // Its answer, arriving now, is ignored: we are a standby.
        assert!(feed(&mut l, LeaseInput::Renewed, late).is_empty());
        assert!(!l.is_leader());
    }

    #[test]
    fn a_fenced_commit_or_renewal_steps_down_at_once() {
        let mut l = leader_at(Duration::ZERO, 4);
        let out = feed(&mut l, LeaseInput::Fenced, 500 * MS);
        assert_eq!(
            out,
            [LeaseAction::StepDown {
                epoch: 4,
                reason: StepDownReason::Fenced
            }]
        );
        assert!(!l.is_leader());
        // A fenced renewal the same way.
        let mut l = leader_at(Duration::ZERO, 5);
        tick(&mut l, DEFAULT_RENEW_EVERY);
        let out = feed(&mut l, LeaseInput::Fenced, DEFAULT_RENEW_EVERY + MS);
        assert!(matches!(
            &out[..],
            [LeaseAction::StepDown {
                reason: StepDownReason::Fenced,
                ..
            }]
        ));
        // Fenced as a standby means nothing.
        assert!(feed(&mut l, LeaseInput::Fenced, DEFAULT_TTL).is_empty());
    }

    #[test]
    fn a_standby_retries_right_after_the_reported_expiry_capped_by_the_retry_interval() {
        let mut l = Lease::new(cfg(), Duration::ZERO);
        tick(&mut l, Duration::ZERO);
        let held = |ms| LeaseInput::HeldElsewhere {
            holder: "other".into(),
            epoch: 9,
            expires_in: Duration::from_millis(ms),
        };
        assert!(feed(&mut l, held(120), 2 * MS).is_empty());
        assert_eq!(l.poll_timeout(), Some(2 * MS + 120 * MS + EXPIRY_SLACK));
        let t = l.poll_timeout().unwrap();
        assert_eq!(tick(&mut l, t), [LeaseAction::TryAcquire]);
        // Far from expiry: the retry interval.
        feed(&mut l, held(2500), t);
        assert_eq!(l.poll_timeout(), Some(t + DEFAULT_RETRY_EVERY));
        // Unreachable database: the retry interval.
        let t2 = t + DEFAULT_RETRY_EVERY;
        tick(&mut l, t2);
        feed(
            &mut l,
            LeaseInput::Failed {
                error: "down".into(),
            },
            t2,
        );
        assert_eq!(l.poll_timeout(), Some(t2 + DEFAULT_RETRY_EVERY));
        assert!(!l.is_leader());
    }

    /// Two routers, one lease row with the database's rules (take only
    /// when expired, epoch + 1; renew only when holder and epoch match),
    /// on one virtual clock: the leader dies; the standby serves within
    /// TTL + retry of the last renewal, at a higher epoch; the old leader,
    /// back, stays standby; at no instant do both count themselves
    /// leader.
    #[test]
    fn takeover_after_a_leader_dies_with_a_fake_database_never_two_leaders() {
        #[derive(Debug)]
        struct Row {
            holder: usize,
            epoch: u64,
            expires: Duration,
        }
        let ttl = DEFAULT_TTL;
        let mut row = Row {
            holder: usize::MAX,
            epoch: 0,
            expires: Duration::ZERO,
        };
        let mut nodes = [Lease::new(cfg(), MS), Lease::new(cfg(), 7 * MS)];
        let mut alive = [true, true];
        let mut served_at: Vec<(usize, u64, Duration)> = Vec::new();
        let mut now = MS;
        let kill_at = Duration::from_millis(4_321);
        let revive_at = Duration::from_secs(12);
        let mut last_renew_of_dead = Duration::ZERO;
        while now < Duration::from_secs(20) {
            if now == kill_at {
                alive[0] = false;
            }
            if now == revive_at {
                // Restarted: a new process, a new state machine.
                alive[0] = true;
                nodes[0] = Lease::new(cfg(), now);
            }
            for (i, node) in nodes.iter_mut().enumerate() {
                if !alive[i] {
                    continue;
                }
                let mut todo = tick(node, now);
                while let Some(a) = todo.pop() {
                    let input = match a {
                        LeaseAction::TryAcquire => {
                            if row.expires < now {
                                row.holder = i;
                                row.epoch += 1;
                                row.expires = now + ttl;
                                LeaseInput::Acquired { epoch: row.epoch }
                            } else {
                                LeaseInput::HeldElsewhere {
                                    holder: format!("node{}", row.holder),
                                    epoch: row.epoch,
                                    expires_in: row.expires - now,
                                }
                            }
                        }
                        LeaseAction::Renew { epoch } => {
                            if row.holder == i && row.epoch == epoch {
                                row.expires = now + ttl;
                                if i == 0 {
                                    last_renew_of_dead = now;
                                }
                                LeaseInput::Renewed
                            } else {
                                LeaseInput::Fenced
                            }
                        }
                        LeaseAction::Serve { epoch } => {
                            served_at.push((i, epoch, now));
                            continue;
                        }
                        other => panic!("unexpected {other:?}"),
                    };
                    todo.extend(feed(node, input, now));
                }
            }
            let leaders = nodes
                .iter()
                .enumerate()
                .filter(|(i, n)| alive[*i] && n.is_leader())
                .count();
            assert!(leaders <= 1, "two leaders at {now:?}");
            now += MS;
        }
        assert_eq!(served_at[0].0, 0, "node 0 started first and leads");
        assert_eq!(served_at.len(), 2, "{served_at:?}");
        let (who, epoch, at) = served_at[1];
        assert_eq!((who, epoch), (1, 2));
        let failover = at - kill_at;
        assert!(
            at <= last_renew_of_dead + ttl + DEFAULT_RETRY_EVERY,
            "took over at {at:?}, last renewal {last_renew_of_dead:?}"
        );
        assert!(failover < Duration::from_secs(5), "{failover:?}");
        // The old leader came back at 12 s and stayed standby.
        assert!(!nodes[0].is_leader());
        assert!(nodes[1].is_leader());
        assert_eq!(nodes[0].terms(), 0);
    }

    #[test]
    fn shutdown_releases_a_held_lease_and_stops() {
        let mut l = leader_at(Duration::ZERO, 2);
        assert_eq!(
            feed(&mut l, LeaseInput::Shutdown, 10 * MS),
            [LeaseAction::Release { epoch: 2 }]
        );
        assert_eq!(l.poll_timeout(), None);
        assert!(tick(&mut l, DEFAULT_TTL * 2).is_empty());
        let mut s = Lease::new(cfg(), Duration::ZERO);
        assert!(feed(&mut s, LeaseInput::Shutdown, MS).is_empty());
        assert_eq!(s.role(), &Role::Stopped);
    }

    #[test]
    fn timers_that_cannot_work_are_refused() {
        assert!(LeaseConfig::default().check().is_ok());
        let bad = LeaseConfig {
            renew_every: Duration::from_secs(2),
            ..LeaseConfig::default()
        };
        assert!(bad.check().unwrap_err().contains("half"));
        let zero = LeaseConfig {
            ttl: Duration::ZERO,
            ..LeaseConfig::default()
        };
        assert!(zero.check().is_err());
    }
}
