//! Job progress (emq): `PROGRESS [ORIG_MSGID, PERCENT, MESSAGE]` from the
//! worker running the job.
//!
//! The router keeps the **last** progress of each running job — a whole
//! percent 0–100, a line of text (cut to [`PROGRESS_MESSAGE_MAX`] bytes)
//! and when it came — in memory only (not journaled: it describes one
//! delivery, and a redelivery starts from nothing, so a dispatch clears
//! it). The job lookup (`job MSGID`, docs/PROTOCOL.md "Control plane")
//! shows it as `progress`; it goes when the job ends.
//!
//! Only the worker the job is in flight on may report it: a PROGRESS for a
//! job that worker does not run (finished, redelivered elsewhere, never
//! sent there) is ignored.
//!
//! **Rate limit**: a report within [`PROGRESS_MIN_INTERVAL`] of the last
//! one kept for the job is dropped, unless it reaches 100 % (a job that
//! reports in a tight loop costs one comparison per message, and the final
//! state is never lost). The job manager forwards what the job reports
//! as it comes.

use std::time::Duration;

use emqp_proto::Progress;
use serde_json::{json, Value};

use super::Router;
use crate::jobs::JobProgress;
use crate::util::ident;
use crate::workers::WorkerId;

/// The shortest time between two kept reports of one job.
pub(crate) const PROGRESS_MIN_INTERVAL: Duration = Duration::from_millis(200);

/// The longest progress message kept, in bytes (cut at a char boundary).
pub(crate) const PROGRESS_MESSAGE_MAX: usize = 200;

impl Router {
    pub(super) fn on_progress(&mut self, id: WorkerId, p: Progress, now: Duration) {
        let Some(w) = self.pool.get(id) else { return };
        let job = w
            .by_msgid
            .get(&p.orig_msgid)
            .and_then(|seq| w.inflight.get(seq))
            .map(|i| i.job);
        let Some(jid) = job else {
            log::debug!(
                msgid:% = p.orig_msgid;
                "PROGRESS for {} ignored: not running on worker {}",
                p.orig_msgid,
                ident(&w.identity)
            );
            return;
        };
        let Some(job) = self.store.jobs.get_mut(&jid) else {
            return;
        };
        let extra = job.extra_mut();
        if let Some(last) = &extra.progress {
            if p.percent < 100 && now < last.at + PROGRESS_MIN_INTERVAL {
                return;
            }
        }
        let mut message = p.message;
        if message.len() > PROGRESS_MESSAGE_MAX {
            let mut cut = PROGRESS_MESSAGE_MAX;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
        }
        log::debug!(
            msgid:% = p.orig_msgid, percent = p.percent;
            "job {} at {} %: {message}",
            p.orig_msgid,
            p.percent
        );
        extra.progress = Some(JobProgress {
            percent: p.percent,
            message: message.into(),
            at: now,
        });
    }

    /// A progress in the job lookup's JSON.
    pub(super) fn progress_view(&self, p: &JobProgress) -> Value {
        json!({
            "percent": p.percent,
            "message": &*p.message,
            "at_ms": self.unix_ms(p.at),
        })
    }
}
