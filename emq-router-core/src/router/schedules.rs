//! Schedules: SCHEDULE / UNSCHEDULE and the built-in book
//! (`emq_schedule::ScheduleBook`).
//!
//! A client's SCHEDULE is booked by the router itself — unless a 0.3.13
//! `emq-scheduler` peer is connected (frontend INFORM type `scheduler`):
//! then it goes verbatim to the most recently registered one, as in
//! 0.3.13, and is not booked. A booked SCHEDULE is acknowledged `REPLY
//! [msgid]` (emq extension) once journaled; bad timing / cron / run_count
//! gives `REJECT [msgid, malformed, reason]`; while the journal fails,
//! `REJECT journal-unavailable`. UNSCHEDULE goes to every scheduler peer
//! AND removes the built-in schedule; acknowledged when something took it
//! (a peer, or a matching built-in schedule), else `REJECT [msgid,
//! not-found, ...]`. When a schedule's time comes, its run becomes a job
//! on its queue through the same `accept` path as a REQUEST (journaled,
//! buffered, dispatched, retried, redelivered) with a generated msgid and
//! no client: its result goes nowhere. A run that finds its queue at
//! `hwm` is skipped (logged). Book changes are journaled (`PutSchedule` /
//! `DeleteSchedule`) in the same batch as the jobs; restored schedules
//! run a run missed while the router was down once. Schedule time is unix
//! time: `Config::epoch_unix_micros + now`. No runs while draining.

use std::time::Duration;

use emqp_proto::{Command, Headers, RejectReason};

use super::intake::NewJob;
use super::{frames_of, Router};
use crate::event::{Action, Frames, Socket};
use crate::journal::Record;
use crate::util::ident;

impl Router {
    pub(super) fn on_schedule(
        &mut self,
        client: Vec<u8>,
        msgid: String,
        cmd: Command,
        raw: Option<Frames>,
        now: Duration,
        out: &mut Vec<Action>,
    ) {
        let (sched, unschedule) = match cmd {
            Command::Schedule(s) => (s, false),
            Command::Unschedule(s) => (s, true),
            _ => return,
        };
        let peers = !self.schedulers.is_empty();
        if peers {
            let frames = match raw {
                Some(f) => f,
                None if unschedule => frames_of(msgid.clone(), Command::Unschedule(sched.clone())),
                None => frames_of(msgid.clone(), Command::Schedule(sched.clone())),
            };
            if unschedule {
                let ids: Vec<Vec<u8>> =
                    self.schedulers.iter().map(|s| s.identity.clone()).collect();
                for s in ids {
                    self.send(Socket::Frontend, s, frames.clone(), out);
                }
            } else if let Some(s) = self.schedulers.last() {
                let s = s.identity.clone();
                self.send(Socket::Frontend, s, frames, out);
                // Accepted by the router (handed to the scheduler peer).
                self.ack_client(client, &msgid, out);
                return;
            }
        }
        if unschedule {
            if self.book.unschedule(&sched) {
                self.journal_schedules();
                self.ack_client(client, &msgid, out);
            } else if peers {
                // Handed to the scheduler peers, which may hold it.
                self.ack_client(client, &msgid, out);
            } else {
                log::info!(
                    "UNSCHEDULE from {} for queue {}: no such schedule",
                    ident(&client),
                    sched.queue
                );
                self.reject(
                    client,
                    msgid,
                    RejectReason::NotFound,
                    format!(
                        "no schedule of this message on queue {} (schedules are identified by queue and message)",
                        sched.queue
                    ),
                    out,
                );
            }
            return;
        }
        let refusal = if self.is_draining() {
            Some((
                RejectReason::ShuttingDown,
                "the router is shutting down".to_string(),
            ))
        } else {
            self.journal
                .refusal()
                .map(|why| (RejectReason::JournalUnavailable, why))
        };
        if let Some((reason, text)) = refusal {
            if reason == RejectReason::JournalUnavailable {
                self.journal.count_refused();
                self.stats.rejected_journal += 1;
            }
            self.reject(client, msgid, reason, text, out);
            return;
        }
        match self.book.schedule(&sched, self.unix_ms_i64(now)) {
            Ok(id) => {
                log::debug!("SCHEDULE {msgid} from {} booked as {id}", ident(&client));
                self.journal_schedules();
                self.ack_client(client, &msgid, out);
            }
            Err(e) => {
                self.stats.rejected_malformed += 1;
                log::warn!("SCHEDULE {msgid} from {} refused: {e}", ident(&client));
                self.reject(client, msgid, RejectReason::Malformed, e.to_string(), out);
            }
        }
    }

    fn unix_ms_i64(&self, now: Duration) -> i64 {
        i64::try_from(self.unix_ms(now)).unwrap_or(i64::MAX)
    }

    /// When the next built-in schedule run is due (core time).
    pub(super) fn next_schedule_run(&self) -> Option<Duration> {
        let t = self.book.next_wakeup()?;
        let unix_micros = u64::try_from(t).unwrap_or(0).saturating_mul(1000);
        Some(Duration::from_micros(
            unix_micros.saturating_sub(self.cfg.epoch_unix_micros),
        ))
    }

    /// Journal what the schedule book changed.
    pub(super) fn journal_schedules(&mut self) {
        if !self.book.has_changes() {
            return;
        }
        for c in self.book.take_changes() {
            self.journal.record(
                match c {
                    emq_schedule::ScheduleChange::Put { id, blob } => Record::PutSchedule {
                        id: id.as_str().to_string(),
                        blob,
                    },
                    emq_schedule::ScheduleChange::Delete { id } => Record::DeleteSchedule {
                        id: id.as_str().to_string(),
                    },
                },
                None,
            );
        }
    }

    /// Built-in schedules whose time has come become jobs.
    pub(super) fn run_schedules(&mut self, now: Duration, out: &mut Vec<Action>) {
        let now_ms = self.unix_ms_i64(now);
        match self.book.next_wakeup() {
            Some(t) if t <= now_ms => {}
            _ => return,
        }
        let mut routes: Vec<String> = Vec::new();
        for run in self.book.due(now_ms) {
            let route = self.route_of(&run.queue).to_string();
            if !self.pool.has_free(&route) && self.store.queue_len(&route) >= self.cfg.hwm {
                self.stats.scheduled_runs_skipped += 1;
                log::warn!(
                    "schedule {} run {} skipped: queue {route} has {} buffered jobs (hwm)",
                    run.id,
                    run.run_number,
                    self.store.queue_len(&route)
                );
                continue;
            }
            if self.journal.refusal().is_some() {
                self.stats.scheduled_runs_skipped += 1;
                log::warn!(
                    "schedule {} run {} skipped: the journal cannot store jobs",
                    run.id,
                    run.run_number
                );
                continue;
            }
            if let Some((key, holder)) = self.unique_held(&run.headers) {
                // The previous run (or another job with the key) is not
                // done: a run with a unique key is skipped, not doubled.
                self.stats.scheduled_runs_skipped += 1;
                log::warn!(
                    "schedule {} run {} skipped: job {holder} holds its unique key {key:?}",
                    run.id,
                    run.run_number
                );
                continue;
            }
            let msgid = self.ids.next_id();
            log::info!(
                "schedule {} run {}: job {msgid} on queue {}",
                run.id,
                run.run_number,
                run.queue
            );
            let headers = run.headers.encode().into_bytes();
            let h: &Headers = &run.headers;
            let parse = || (h.reply_requested(), h.retry_count().unwrap_or(0));
            self.accept(
                NewJob {
                    msgid: &msgid,
                    client: b"",
                    queue: &run.queue,
                    route: &route,
                    headers: &headers,
                    payload: &run.message,
                    parse: &parse,
                    run_at: None,
                    journaled: None,
                },
                now,
            );
            self.stats.scheduled_runs += 1;
            if !routes.contains(&route) {
                routes.push(route);
            }
        }
        self.journal_schedules();
        for r in routes {
            self.pump(&r, now, out);
        }
    }

    /// Put schedules recovered from a journal (`(id, blob)` records) into
    /// the built-in book. A run that fell due while the router was down
    /// runs once, at the next timeout. An unusable record is logged and its
    /// deletion journaled. Returns how many were restored.
    pub(super) fn restore_schedules(
        &mut self,
        records: Vec<(String, Vec<u8>)>,
        now: Duration,
        out: &mut Vec<Action>,
    ) -> usize {
        let _ = out;
        let now_ms = self.unix_ms_i64(now);
        let mut n = 0;
        for (id, blob) in records {
            match self.book.restore(&blob, now_ms) {
                Ok(_) => n += 1,
                Err(e) => {
                    log::error!("journal schedule {id} cannot be restored, deleting it: {e}");
                    self.journal.record(Record::DeleteSchedule { id }, None);
                }
            }
        }
        self.journal_schedules();
        n
    }
}
