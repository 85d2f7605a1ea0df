//! Bulk mode: jobs from a reader (stdin), one JSON job per line, submitted
//! pipelined with a bounded window of outstanding jobs; one JSON line of
//! output per job. A `queue-full` refusal holds the feed back and the job
//! is sent again ([`crate::backoff`]); so is a `journal-uncertain` answer,
//! which is never reported as a refusal: past its time the job is
//! reported `uncertain` (it may run; exit code 1).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::{BufRead, Write};
use std::sync::mpsc::{self, Receiver, TryRecvError};
use std::time::{Duration, Instant};

use emqp_proto::{Headers, RejectReason, ResultStatus};
use serde_json::{json, Value};

use crate::backoff::Backoff;
use crate::client::{Client, ClientError, ErrorKind, Event};
use crate::exit::{Exit, SenderExit};

/// What to do with each line.
#[derive(Debug, Clone)]
pub struct BulkOptions {
    pub queue: String,
    pub headers: Headers,
    /// Wait for each job's RESULT, not just the ack.
    pub wait: bool,
    /// Do not wait for anything: send, then hand over (see `--no-ack`).
    pub no_ack: bool,
    /// `--publish TOPIC`: each line goes out as PUBLISH [TOPIC, line]
    /// (nothing answers: reported `sent`, as with `no_ack`).
    pub publish: Option<String>,
    /// Per job, from when it was sent.
    pub timeout: Duration,
    /// At most this many jobs outstanding.
    pub window: usize,
    /// Show a `\r`-updated progress line on the error stream.
    pub progress: bool,
    /// `queue-full` is final: no resend.
    pub fail_fast: bool,
}

/// Counts for the summary line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    pub lines: usize,
    pub sent: usize,
    pub accepted: usize,
    pub rejected: usize,
    pub ok: usize,
    pub failed: usize,
    pub timed_out: usize,
    pub invalid: usize,
    /// Still `journal-uncertain` when their time ran out.
    pub uncertain: usize,
    /// REQUESTs sent again after a `queue-full`.
    pub resent: usize,
    /// REQUESTs sent again after a `journal-uncertain`.
    pub resent_uncertain: usize,
    pub exit: Option<Exit>,
}

impl Summary {
    fn note(&mut self, e: Exit) {
        self.exit = Some(self.exit.unwrap_or(Exit::Ok).worst(e));
    }

    /// The exit code of the whole run: the most severe seen.
    pub fn exit_code(&self) -> Exit {
        self.exit.unwrap_or(Exit::Ok)
    }

    /// The summary printed on stderr at the end.
    pub fn describe(&self, wait: bool, elapsed: Duration) -> String {
        let secs = elapsed.as_secs_f64();
        let rate = if secs > 0.0 {
            self.sent as f64 / secs
        } else {
            0.0
        };
        let mut s = format!(
            "emq-sender: {} jobs sent, {} accepted, {} rejected",
            self.sent, self.accepted, self.rejected
        );
        if wait {
            s.push_str(&format!(", {} ok, {} failed", self.ok, self.failed));
        }
        s.push_str(&format!(
            ", {} timed out, {} invalid lines in {secs:.2} s ({rate:.0} jobs/s)",
            self.timed_out, self.invalid
        ));
        if self.uncertain > 0 {
            s.push_str(&format!(
                ", {} uncertain (the router could not tell whether it stored them: they may run)",
                self.uncertain
            ));
        }
        if self.resent > 0 {
            s.push_str(&format!("; {} sent again after queue-full", self.resent));
        }
        if self.resent_uncertain > 0 {
            s.push_str(&format!(
                "; {} sent again after journal-uncertain",
                self.resent_uncertain
            ));
        }
        s
    }
}

impl Summary {
    /// The summary of `--publish` from stdin.
    pub fn describe_published(&self, topic: &str, elapsed: Duration) -> String {
        let secs = elapsed.as_secs_f64();
        format!(
            "emq-sender: {} message(s) published to topic {topic:?}, {} invalid lines in \
             {secs:.2} s",
            self.sent, self.invalid
        )
    }
}

/// The JSON value of a result payload: parsed if JSON, else a string.
pub fn payload_value(payload: &[u8]) -> Value {
    match serde_json::from_slice(payload) {
        Ok(v) => v,
        Err(_) => Value::String(String::from_utf8_lossy(payload).into_owned()),
    }
}

/// The result object printed for a `dead-lettered` REJECT with `--wait`.
pub fn dead_letter_result(text: &str) -> Value {
    json!({"error": {"kind": "dead-lettered", "message": text}})
}

/// One output line: `{"line": N, "msgid": ..., "status": ..., "result": ...}`
/// plus `extra` keys.
pub fn output_line(
    line: usize,
    msgid: Option<&str>,
    status: &str,
    result: Option<Value>,
    extra: &[(&str, Value)],
) -> String {
    let mut obj = serde_json::Map::new();
    obj.insert("line".into(), Value::from(line));
    obj.insert("msgid".into(), msgid.map_or(Value::Null, Value::from));
    obj.insert("status".into(), Value::from(status));
    obj.insert("result".into(), result.unwrap_or(Value::Null));
    for (k, v) in extra {
        obj.insert((*k).into(), v.clone());
    }
    Value::Object(obj).to_string()
}

struct Pending {
    line: usize,
    seq: u64,
    deadline: Instant,
    accepted: bool,
    /// The MSG frame, kept to send it again after a `queue-full` or a
    /// `journal-uncertain`.
    message: Option<Vec<u8>>,
    /// Refused for now (`queue-full` or `journal-uncertain`, this text)
    /// and waiting to be sent again.
    refused: Option<(RejectReason, String)>,
    /// Sent again, no answer yet.
    probing: bool,
}

/// A line of input: its number (1-based) and bytes, or a read error.
type Input = std::io::Result<(usize, Vec<u8>)>;

fn spawn_reader<R: BufRead + Send + 'static>(mut input: R, cap: usize) -> Receiver<Input> {
    let (tx, rx) = mpsc::sync_channel(cap);
    std::thread::spawn(move || {
        let mut n = 0;
        loop {
            let mut buf = Vec::new();
            match input.read_until(b'\n', &mut buf) {
                Ok(0) => break,
                Ok(_) => {
                    n += 1;
                    if tx.send(Ok((n, buf))).is_err() {
                        break;
                    }
                }
                Err(e) => {
                    let _ = tx.send(Err(e));
                    break;
                }
            }
        }
    });
    rx
}

struct Run<'a> {
    client: &'a Client,
    opts: &'a BulkOptions,
    out: &'a mut dyn Write,
    err: &'a mut dyn Write,
    pending: HashMap<String, Pending>,
    by_seq: BTreeMap<u64, String>,
    next_seq: u64,
    sum: Summary,
    progress_shown: bool,
    /// Jobs refused `queue-full`, in the order to send them again.
    resend: VecDeque<String>,
    /// No sending before this (the queue was full).
    resume_at: Option<Instant>,
    backoff: Backoff,
    /// Refused jobs sent again per round: 1 after a refusal, doubling
    /// with every one accepted (the router's queue drains at its own
    /// pace: probing finds it without flooding it with refusals).
    probe: usize,
    /// Jobs sent again and not answered yet.
    probing: usize,
}

impl Run<'_> {
    fn emit(&mut self, text: String) -> Result<(), ClientError> {
        if self.progress_shown {
            let _ = write!(self.err, "\r\x1b[K");
            self.progress_shown = false;
        }
        writeln!(self.out, "{text}")
            .and_then(|_| self.out.flush())
            .map_err(|e| ClientError::new(format!("cannot write output: {e}")))
    }

    fn finish(&mut self, msgid: &str) -> Option<Pending> {
        let p = self.pending.remove(msgid)?;
        self.by_seq.remove(&p.seq);
        if p.probing {
            self.probing -= 1;
        }
        Some(p)
    }

    fn submit_line(&mut self, line: usize, bytes: Vec<u8>) -> Result<(), ClientError> {
        self.sum.lines += 1;
        let text = match String::from_utf8(bytes) {
            Ok(t) => t,
            Err(_) => return self.invalid(line, "line is not UTF-8".into()),
        };
        let t = text.trim();
        if t.is_empty() {
            return Ok(());
        }
        if let Err(e) = serde_json::from_str::<Value>(t) {
            return self.invalid(line, format!("not valid JSON: {e}"));
        }
        let message = t.as_bytes().to_vec();
        // Kept to send it again after a queue-full or a journal-uncertain
        // (PUBLISH is never refused).
        let keep = (!self.opts.no_ack && self.opts.publish.is_none()).then(|| message.clone());
        let sent = match &self.opts.publish {
            Some(topic) => self.client.publish(topic, message),
            None => self
                .client
                .submit(&self.opts.queue, &self.opts.headers, message),
        };
        let msgid = match sent {
            Ok(m) => m,
            // Over the router's size limit: this line is not sent.
            Err(e) if e.kind == ErrorKind::TooLarge => return self.invalid(line, e.message),
            Err(e) => return Err(e),
        };
        self.sum.sent += 1;
        if self.opts.no_ack || self.opts.publish.is_some() {
            return self.emit(output_line(line, Some(&msgid), "sent", None, &[]));
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.by_seq.insert(seq, msgid.clone());
        self.pending.insert(
            msgid,
            Pending {
                line,
                seq,
                deadline: Instant::now() + self.opts.timeout,
                accepted: false,
                message: keep,
                refused: None,
                probing: false,
            },
        );
        Ok(())
    }

    /// A `queue-full` or `journal-uncertain` for a job that may be sent
    /// again: queue it for the resend and hold the feed back. False when
    /// its timeout leaves no time for another try (then the answer is
    /// final).
    fn refused(&mut self, msgid: &str, reason: &RejectReason, text: &str) -> bool {
        let now = Instant::now();
        let Some(p) = self.pending.get_mut(msgid) else {
            return false;
        };
        if p.message.is_none() || p.refused.is_some() {
            return false;
        }
        if std::mem::take(&mut p.probing) {
            self.probing -= 1;
            self.probe = (self.probe / 2).max(1);
        }
        // One pause per round of refusals (a burst is refused many times
        // over at once): the backoff grows once.
        let at = match self.resume_at {
            Some(r) if r > now => r,
            _ => now + self.backoff.next_delay(),
        };
        if at >= p.deadline {
            return false;
        }
        p.refused = Some((reason.clone(), text.to_string()));
        self.resend.push_back(msgid.to_string());
        self.resume_at = Some(at);
        true
    }

    /// Send refused jobs again once the backoff is over, `probe` at a
    /// time. Whether the feed of new lines may go on (nothing refused
    /// left, nothing sent again unanswered).
    fn resend_due(&mut self, now: Instant) -> Result<bool, ClientError> {
        if self.resume_at.is_some_and(|r| now < r) || self.probing > 0 {
            return Ok(false);
        }
        self.resume_at = None;
        while self.probing < self.probe {
            let Some(msgid) = self.resend.pop_front() else {
                break;
            };
            let Some(p) = self.pending.get_mut(&msgid) else {
                continue;
            };
            let Some((reason, _)) = p.refused.take() else {
                continue;
            };
            let Some(message) = p.message.clone() else {
                continue;
            };
            p.probing = true;
            self.probing += 1;
            self.client
                .submit_with_msgid(&msgid, &self.opts.queue, &self.opts.headers, message)?;
            if reason == RejectReason::JournalUncertain {
                self.sum.resent_uncertain += 1;
            } else {
                self.sum.resent += 1;
            }
        }
        Ok(self.resend.is_empty() && self.probing == 0)
    }

    /// The router answered a job other than `queue-full`.
    fn answered(&mut self, msgid: &str) {
        self.backoff.reset();
        if let Some(p) = self.pending.get_mut(msgid) {
            if std::mem::take(&mut p.probing) {
                self.probing -= 1;
                self.probe = (self.probe * 2).min(self.opts.window.max(1));
            }
        }
    }

    /// Still `journal-uncertain` when its time ran out: not a refusal (the
    /// job may run), reported `uncertain` with the connection-error code.
    fn uncertain(&mut self, line: usize, msgid: &str, text: &str) -> Result<(), ClientError> {
        self.sum.uncertain += 1;
        self.sum
            .note(Exit::for_reject(&RejectReason::JournalUncertain));
        self.emit(output_line(
            line,
            Some(msgid),
            "uncertain",
            None,
            &[
                (
                    "reason",
                    Value::from(RejectReason::JournalUncertain.as_str()),
                ),
                ("text", Value::from(text)),
            ],
        ))
    }

    fn invalid(&mut self, line: usize, error: String) -> Result<(), ClientError> {
        self.sum.invalid += 1;
        self.sum.note(Exit::Usage);
        self.emit(output_line(
            line,
            None,
            "invalid",
            None,
            &[("error", Value::from(error))],
        ))
    }

    fn handle(&mut self, ev: Event) -> Result<(), ClientError> {
        match ev {
            Event::Accepted { msgid } => {
                self.answered(&msgid);
                if self.opts.wait {
                    if let Some(p) = self.pending.get_mut(&msgid) {
                        if !p.accepted {
                            p.accepted = true;
                            self.sum.accepted += 1;
                        }
                    }
                    return Ok(());
                }
                if let Some(p) = self.finish(&msgid) {
                    self.sum.accepted += 1;
                    self.sum.note(Exit::Ok);
                    self.emit(output_line(p.line, Some(&msgid), "accepted", None, &[]))?;
                }
            }
            Event::Rejected {
                msgid,
                reason,
                text,
            } => {
                // queue-full: not now (final with --fail-fast);
                // journal-uncertain: never a refusal, always sent again.
                let again = match reason {
                    RejectReason::QueueFull => !self.opts.fail_fast,
                    RejectReason::JournalUncertain => true,
                    _ => false,
                };
                if again && self.refused(&msgid, &reason, &text) {
                    return Ok(());
                }
                self.answered(&msgid);
                let Some(p) = self.finish(&msgid) else {
                    return Ok(());
                };
                if reason == RejectReason::JournalUncertain {
                    return self.uncertain(p.line, &msgid, &text);
                }
                let extra = [
                    ("reason", Value::from(reason.as_str())),
                    ("text", Value::from(text.as_str())),
                ];
                let exit = Exit::for_reject(&reason);
                self.sum.note(exit);
                if reason == RejectReason::DeadLettered {
                    self.sum.failed += 1;
                    let result = self.opts.wait.then(|| dead_letter_result(&text));
                    self.emit(output_line(p.line, Some(&msgid), "failed", result, &extra))?;
                } else {
                    self.sum.rejected += 1;
                    self.emit(output_line(p.line, Some(&msgid), "rejected", None, &extra))?;
                }
            }
            Event::Result {
                msgid,
                status,
                payload,
            } => {
                self.answered(&msgid);
                let Some(p) = self.finish(&msgid) else {
                    return Ok(());
                };
                if !p.accepted {
                    // A result implies acceptance (the ack may be lost or
                    // arrive later; it is ignored then).
                    self.sum.accepted += 1;
                }
                if !self.opts.wait {
                    self.sum.note(Exit::Ok);
                    return self.emit(output_line(p.line, Some(&msgid), "accepted", None, &[]));
                }
                match status {
                    ResultStatus::Ok => self.sum.ok += 1,
                    ResultStatus::Failed => self.sum.failed += 1,
                }
                self.sum.note(Exit::for_status(status));
                self.emit(output_line(
                    p.line,
                    Some(&msgid),
                    status.as_str(),
                    Some(payload_value(&payload)),
                    &[],
                ))?;
            }
            Event::Duplicate {
                msgid,
                existing,
                text,
            } => {
                // The existing job's result is not waited for in bulk
                // mode: the line names it (`emq-cli job EXISTING`).
                self.answered(&msgid);
                if let Some(p) = self.finish(&msgid) {
                    if !p.accepted {
                        self.sum.accepted += 1;
                    }
                    self.sum.note(Exit::Ok);
                    let extra = [
                        ("duplicate_of", Value::from(existing)),
                        ("text", Value::from(text)),
                    ];
                    self.emit(output_line(p.line, Some(&msgid), "duplicate", None, &extra))?;
                }
            }
            Event::Notice(n) => {
                if self.progress_shown {
                    let _ = write!(self.err, "\r\x1b[K");
                    self.progress_shown = false;
                }
                let _ = writeln!(self.err, "{}", crate::notice_line(&n));
            }
            Event::Reconnected { endpoint, resent } => {
                if self.progress_shown {
                    let _ = write!(self.err, "\r\x1b[K");
                    self.progress_shown = false;
                }
                let _ = writeln!(
                    self.err,
                    "emq-sender: connected to {endpoint} again; {resent} unacknowledged job(s) \
                     sent again"
                );
            }
            Event::Other(_) => {}
        }
        Ok(())
    }

    fn expire(&mut self, now: Instant) -> Result<(), ClientError> {
        while let Some((_, msgid)) = self.by_seq.first_key_value() {
            let msgid = msgid.clone();
            let due = match self.pending.get(&msgid) {
                Some(p) => p.deadline <= now,
                None => true,
            };
            if !due {
                break;
            }
            if let Some(p) = self.finish(&msgid) {
                if let Some((reason, text)) = p.refused {
                    if reason == RejectReason::JournalUncertain {
                        self.uncertain(p.line, &msgid, &text)?;
                        continue;
                    }
                    // Still refused when its time ran out: the refusal is
                    // the answer.
                    self.sum.rejected += 1;
                    self.sum.note(Exit::Rejected);
                    self.emit(output_line(
                        p.line,
                        Some(&msgid),
                        "rejected",
                        None,
                        &[
                            ("reason", Value::from(reason.as_str())),
                            ("text", Value::from(text)),
                        ],
                    ))?;
                    continue;
                }
                self.sum.timed_out += 1;
                self.sum.note(Exit::Timeout);
                self.emit(output_line(
                    p.line,
                    Some(&msgid),
                    "timeout",
                    None,
                    &[("accepted", Value::from(p.accepted))],
                ))?;
            } else {
                self.by_seq.pop_first();
            }
        }
        Ok(())
    }

    fn next_deadline(&self) -> Option<Instant> {
        let (_, msgid) = self.by_seq.first_key_value()?;
        self.pending.get(msgid).map(|p| p.deadline)
    }

    fn show_progress(&mut self) {
        let s = &self.sum;
        let _ = write!(
            self.err,
            "\r\x1b[Ksent {}, accepted {}, rejected {}{}, timed out {}, outstanding {}",
            s.sent,
            s.accepted,
            s.rejected,
            if self.opts.wait {
                format!(", ok {}, failed {}", s.ok, s.failed)
            } else {
                String::new()
            },
            s.timed_out,
            self.pending.len()
        );
        let _ = self.err.flush();
        self.progress_shown = true;
    }
}

/// Submit every line of `input`; write one JSON line per job to `out`, the
/// progress line and summary to `err`. Returns the counts (with the exit
/// code) or a connection/internal error.
pub fn run_bulk<R: BufRead + Send + 'static>(
    client: &Client,
    input: R,
    out: &mut dyn Write,
    err: &mut dyn Write,
    opts: &BulkOptions,
) -> Result<Summary, ClientError> {
    let started = Instant::now();
    let window = opts.window.max(1);
    let rx = spawn_reader(input, window.min(1024));
    let mut run = Run {
        client,
        opts,
        out,
        err,
        pending: HashMap::new(),
        by_seq: BTreeMap::new(),
        next_seq: 0,
        sum: Summary::default(),
        progress_shown: false,
        resend: VecDeque::new(),
        resume_at: None,
        backoff: Backoff::default(),
        probe: 1,
        probing: 0,
    };
    let mut eof = false;
    let mut last_progress = Instant::now();
    loop {
        // Jobs refused queue-full go again first; no new line meanwhile.
        let may_feed = run.resend_due(Instant::now())?;
        // Feed: as many lines as the window allows, without blocking.
        let mut fed = 0usize;
        while may_feed && !eof && run.pending.len() < window && fed < 1024 {
            match rx.try_recv() {
                Ok(Ok((n, bytes))) => {
                    run.submit_line(n, bytes)?;
                    fed += 1;
                }
                Ok(Err(e)) => return Err(ClientError::new(format!("cannot read stdin: {e}"))),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => eof = true,
            }
        }
        if eof && run.pending.is_empty() {
            break;
        }
        // Receive: everything that is there, waiting a little when idle.
        let can_feed = may_feed && !eof && run.pending.len() < window;
        let wait_ms: i64 = if fed > 0 {
            0
        } else if can_feed {
            5
        } else {
            let now = Instant::now();
            let next = match (run.next_deadline(), run.resume_at) {
                (Some(d), Some(r)) => Some(d.min(r)),
                (d, r) => d.or(r),
            };
            next.map(|d| d.saturating_duration_since(now).as_millis() as i64 + 1)
                .unwrap_or(100)
                .min(100)
        };
        if let Some(ev) = client.recv_event(Duration::from_millis(wait_ms as u64))? {
            run.handle(ev)?;
            while let Some(ev) = client.try_recv_event()? {
                run.handle(ev)?;
            }
        }
        run.expire(Instant::now())?;
        if opts.progress && last_progress.elapsed() >= Duration::from_millis(200) {
            run.show_progress();
            last_progress = Instant::now();
        }
    }
    if run.progress_shown {
        let _ = write!(run.err, "\r\x1b[K");
    }
    if (opts.no_ack || opts.publish.is_some()) && run.sum.sent > 0 {
        // Exit code is decided by the caller after the hand-over.
        run.sum.note(Exit::Ok);
    }
    let summary = run.sum.clone();
    let described = match &opts.publish {
        Some(topic) => summary.describe_published(topic, started.elapsed()),
        None => summary.describe(opts.wait, started.elapsed()),
    };
    let _ = writeln!(run.err, "{described}");
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_lines_have_a_fixed_form() {
        assert_eq!(
            output_line(3, Some("m"), "accepted", None, &[]),
            r#"{"line":3,"msgid":"m","status":"accepted","result":null}"#
        );
        assert_eq!(
            output_line(
                1,
                Some("m"),
                "ok",
                Some(payload_value(br#"{"value": [1]}"#)),
                &[]
            ),
            r#"{"line":1,"msgid":"m","status":"ok","result":{"value":[1]}}"#
        );
        assert_eq!(
            output_line(
                2,
                None,
                "invalid",
                None,
                &[("error", Value::from("not valid JSON"))]
            ),
            r#"{"line":2,"msgid":null,"status":"invalid","result":null,"error":"not valid JSON"}"#
        );
        assert_eq!(
            output_line(
                4,
                Some("m"),
                "rejected",
                None,
                &[("reason", "queue-full".into()), ("text", "full".into())]
            ),
            r#"{"line":4,"msgid":"m","status":"rejected","result":null,"reason":"queue-full","text":"full"}"#
        );
    }

    #[test]
    fn payloads_that_are_not_json_become_strings() {
        assert_eq!(payload_value(b"oops"), Value::from("oops"));
        assert_eq!(payload_value(&[0xff]), Value::from("\u{fffd}"));
        assert_eq!(
            dead_letter_result("gave up").to_string(),
            r#"{"error":{"kind":"dead-lettered","message":"gave up"}}"#
        );
    }

    #[test]
    fn summary_exit_is_the_worst_seen() {
        let mut s = Summary::default();
        assert_eq!(s.exit_code(), Exit::Ok);
        s.note(Exit::Failed);
        s.note(Exit::Ok);
        assert_eq!(s.exit_code(), Exit::Failed);
        s.note(Exit::Timeout);
        s.note(Exit::Rejected);
        assert_eq!(s.exit_code(), Exit::Timeout);
        let d = s.describe(true, Duration::from_secs(1));
        assert!(d.contains("0 ok, 0 failed"), "{d}");
    }
}
