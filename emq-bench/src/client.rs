//! The benchmark client: a DEALER that sends eMQP REQUESTs with at most
//! `window` outstanding and matches what comes back (`REPLY [orig_msgid]`
//! acknowledgements, `RESULT [orig_msgid, status, payload]` results,
//! `REJECT [orig_msgid, reason, text]`). The same code drives the raw zmq
//! relay and the real router, so their figures compare like for like.
//!
//! Msgids are uuid4-shaped text carrying a run tag and the job index
//! (`TTTTTTTT-0000-4000-8000-IIIIIIIIIIII`), so matching a reply is a parse,
//! not a map lookup, and stale replies of an earlier phase are recognised.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use emqp_proto::headers::BATCHED_ACKS;
use emqp_proto::PROTOCOL_VERSION;

/// The frames of one job after the msgid: `QUEUE, HEADERS, MSG`.
#[derive(Debug, Clone)]
pub struct JobFrames {
    pub queue: Vec<u8>,
    pub headers: Vec<u8>,
    pub message: Vec<u8>,
}

impl JobFrames {
    /// `["call", {"handler": "noop", "args": null}]` on queue `default`.
    pub fn noop(reply_requested: bool) -> JobFrames {
        let job = emqp_proto::job::Job::Call(emqp_proto::job::CallJob {
            handler: "noop".into(),
            args: serde_json::Value::Null,
        });
        JobFrames {
            queue: emqp_proto::DEFAULT_QUEUE.as_bytes().to_vec(),
            // `batched-acks`: an emq router acknowledges the REQUESTs of one
            // read round in one ACKS (docs/PROTOCOL.md), as an emq client may
            // ask; a 0.3.13 router ignores it.
            headers: if reply_requested {
                format!("reply-requested,{BATCHED_ACKS}").into_bytes()
            } else {
                BATCHED_ACKS.as_bytes().to_vec()
            },
            message: job.to_message(),
        }
    }

    /// Bytes of a whole REQUEST as sent by the client (all frames).
    pub fn request_bytes(&self) -> usize {
        PROTOCOL_VERSION.len()
            + "REQUEST".len()
            + 36
            + self.queue.len()
            + self.headers.len()
            + self.message.len()
    }
}

/// When a job counts as finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Completion {
    /// Its RESULT (or a REJECT) arrived.
    Result,
    /// Its REPLY acknowledgement (or a REJECT) arrived (buffered jobs).
    Ack,
}

/// Limits of one client phase.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Give up when nothing arrives for this long.
    pub idle: Duration,
    /// Give up when the phase takes longer than this.
    pub total: Duration,
    /// After the last completion, how long to wait for missing acks.
    pub ack_grace: Duration,
}

/// What one client phase measured.
#[derive(Debug, Clone, Default)]
pub struct PhaseResult {
    pub jobs: usize,
    /// First send to last completion.
    pub elapsed: Duration,
    /// Submit → completion, per completed job, in nanoseconds.
    pub latencies_ns: Vec<u64>,
    pub acks: usize,
    /// Messages that carried acknowledgements (a `REPLY [msgid]` each, or
    /// an ACKS with one or more).
    pub ack_messages: usize,
    pub results_ok: usize,
    pub results_failed: usize,
    pub rejects: BTreeMap<String, usize>,
    /// Replies for a job already completed, or for a msgid we never sent.
    pub unexpected: usize,
}

impl PhaseResult {
    pub fn completed(&self) -> usize {
        self.latencies_ns.len()
    }

    pub fn rejected(&self) -> usize {
        self.rejects.values().sum()
    }

    /// Completed jobs per second.
    pub fn rate(&self) -> f64 {
        let s = self.elapsed.as_secs_f64();
        if s > 0.0 {
            self.completed() as f64 / s
        } else {
            0.0
        }
    }
}

/// The msgid of job `index` in the run tagged `tag`.
pub fn msgid(tag: u32, index: usize) -> String {
    format!(
        "{tag:08x}-0000-4000-8000-{:012x}",
        index as u64 & 0xffff_ffff_ffff
    )
}

/// The job index of a msgid made by [`msgid`] with the same tag.
pub fn parse_msgid(tag: u32, id: &[u8]) -> Option<usize> {
    if id.len() != 36 || &id[8..24] != b"-0000-4000-8000-" {
        return None;
    }
    let t = std::str::from_utf8(&id[..8]).ok()?;
    if u32::from_str_radix(t, 16).ok()? != tag {
        return None;
    }
    let i = std::str::from_utf8(&id[24..]).ok()?;
    usize::from_str_radix(i, 16).ok()
}

/// Frames of one received message, reusing their buffers.
pub struct Frames {
    parts: Vec<zmq::Message>,
    scratch: zmq::Message,
    len: usize,
}

impl Default for Frames {
    fn default() -> Self {
        Frames::new()
    }
}

impl Frames {
    const KEEP: usize = 8;
    const MAX: usize = 1 << 16;

    pub fn new() -> Frames {
        Frames {
            parts: (0..Self::KEEP).map(|_| zmq::Message::new()).collect(),
            scratch: zmq::Message::new(),
            len: 0,
        }
    }

    /// Receive one multipart message; frames past the [`Self::MAX`]th are
    /// dropped (an ACKS holds one frame per acknowledged job).
    pub fn recv(&mut self, sock: &zmq::Socket, flags: i32) -> zmq::Result<()> {
        self.len = 0;
        loop {
            if self.len == self.parts.len() && self.len < Self::MAX {
                self.parts.push(zmq::Message::new());
            }
            let more = if self.len < self.parts.len() {
                let f = if self.len == 0 { flags } else { 0 };
                sock.recv(&mut self.parts[self.len], f)?;
                self.parts[self.len].get_more()
            } else {
                sock.recv(&mut self.scratch, 0)?;
                self.scratch.get_more()
            };
            self.len += 1;
            // after the first frame the rest of a multipart message is there
            if !more {
                return Ok(());
            }
        }
    }

    /// Frame `i`, empty when absent.
    pub fn get(&self, i: usize) -> &[u8] {
        if i < self.len.min(self.parts.len()) {
            &self.parts[i]
        } else {
            &[]
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Send a multipart message, waiting while the peer's pipe is full, but
/// never past `stop` or 10 s (bench threads must always be joinable).
pub fn send_parts(sock: &zmq::Socket, parts: &[&[u8]], stop: &AtomicBool) -> Result<(), String> {
    let Some((first, rest)) = parts.split_first() else {
        return Ok(());
    };
    let more = if rest.is_empty() { 0 } else { zmq::SNDMORE };
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match sock.send(*first, zmq::DONTWAIT | more) {
            Ok(()) => break,
            Err(zmq::Error::EAGAIN) => {
                if stop.load(Ordering::Relaxed) || Instant::now() > deadline {
                    return Err("send: peer not reading (pipe full)".into());
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => return Err(format!("send: {e}")),
        }
    }
    // the first frame is accepted: the rest of the message will be too
    for (i, p) in rest.iter().enumerate() {
        let flags = if i + 1 < rest.len() { zmq::SNDMORE } else { 0 };
        sock.send(*p, flags).map_err(|e| format!("send: {e}"))?;
    }
    Ok(())
}

/// Send one REQUEST without blocking. `Ok(false)` when the socket is at its
/// high-water mark (nothing was sent).
fn send_request(sock: &zmq::Socket, id: &str, job: &JobFrames) -> Result<bool, String> {
    match sock.send(&b""[..], zmq::DONTWAIT | zmq::SNDMORE) {
        Ok(()) => {}
        Err(zmq::Error::EAGAIN) => return Ok(false),
        Err(e) => return Err(format!("send: {e}")),
    }
    // the first frame is accepted: the rest of the message will be too
    let rest: [&[u8]; 6] = [
        PROTOCOL_VERSION.as_bytes(),
        b"REQUEST",
        id.as_bytes(),
        &job.queue,
        &job.headers,
        &job.message,
    ];
    for (i, f) in rest.iter().enumerate() {
        let flags = if i + 1 < rest.len() { zmq::SNDMORE } else { 0 };
        sock.send(*f, flags).map_err(|e| format!("send: {e}"))?;
    }
    Ok(true)
}

/// One client phase.
#[derive(Debug, Clone, Copy)]
pub struct Phase {
    /// Jobs to submit.
    pub n: usize,
    /// At most this many submitted and not finished.
    pub window: usize,
    /// Msgid tag, distinct per phase.
    pub tag: u32,
    pub completion: Completion,
    /// Also wait (up to `limits.ack_grace` after the last completion) for a
    /// REPLY acknowledgement per job.
    pub expect_acks: bool,
    pub limits: Limits,
}

/// Submit `phase.n` jobs with at most `phase.window` outstanding and wait
/// for every one to complete.
pub fn run_phase(
    sock: &zmq::Socket,
    job: &JobFrames,
    phase: Phase,
    stop: &AtomicBool,
) -> Result<PhaseResult, String> {
    let Phase {
        n,
        window,
        tag,
        completion,
        expect_acks,
        limits,
    } = phase;
    let window = window.max(1);
    let mut res = PhaseResult {
        jobs: n,
        latencies_ns: Vec::with_capacity(n),
        ..PhaseResult::default()
    };
    let mut sent_at: Vec<u64> = Vec::with_capacity(n);
    let mut done = vec![false; n];
    let mut acked = vec![false; n];
    let mut finished = 0usize; // completed or rejected
    let mut frames = Frames::new();
    let start = Instant::now();
    let mut last_progress = start;
    let mut last_completion = start;
    let mut sent = 0usize;
    let mut id = String::with_capacity(36);

    loop {
        if stop.load(Ordering::Relaxed) {
            return Err("interrupted".into());
        }
        let now = Instant::now();
        if now.duration_since(start) > limits.total {
            return Err(format!(
                "timed out after {:?}: sent {sent}/{n}, finished {finished}, acks {}",
                limits.total, res.acks
            ));
        }
        if now.duration_since(last_progress) > limits.idle {
            return Err(format!(
                "nothing received for {:?}: sent {sent}/{n}, finished {finished}, acks {}",
                limits.idle, res.acks
            ));
        }
        if finished == n {
            let acks_done = !expect_acks || res.acks + res.rejected() >= n;
            if acks_done || now.duration_since(last_completion) > limits.ack_grace {
                break;
            }
        }

        // send while the window has room
        let mut progressed = false;
        while sent < n && sent - finished < window {
            id.clear();
            id.push_str(&msgid(tag, sent));
            let t = start.elapsed().as_nanos() as u64;
            if !send_request(sock, &id, job)? {
                break;
            }
            sent_at.push(t);
            sent += 1;
            progressed = true;
        }

        // drain what has arrived
        loop {
            match frames.recv(sock, zmq::DONTWAIT) {
                Ok(()) => {}
                Err(zmq::Error::EAGAIN) | Err(zmq::Error::EINTR) => break,
                Err(e) => return Err(format!("recv: {e}")),
            }
            progressed = true;
            last_progress = Instant::now();
            // '' | eMQP/1.0 | CMD | MSGID | body...; an ACKS acknowledges
            // every msgid from frame 4 on
            let cmd = frames.get(2);
            let is_acks = cmd == b"ACKS";
            let ids = if is_acks { 4..frames.len() } else { 4..5 };
            if is_acks || (cmd == b"REPLY" && frames.len() == 5) {
                res.ack_messages += 1;
            }
            for k in ids {
                let orig = frames.get(k);
                let Some(i) = parse_msgid(tag, orig).filter(|i| *i < sent) else {
                    res.unexpected += 1;
                    continue;
                };
                let mut complete = false;
                match cmd {
                    _ if is_acks || (cmd == b"REPLY" && frames.len() == 5) => {
                        if acked[i] {
                            res.unexpected += 1;
                        } else {
                            acked[i] = true;
                            res.acks += 1;
                            complete = completion == Completion::Ack;
                        }
                    }
                    b"RESULT" => {
                        if frames.get(5) == b"ok" {
                            res.results_ok += 1;
                        } else {
                            res.results_failed += 1;
                        }
                        complete = completion == Completion::Result;
                    }
                    b"REJECT" => {
                        let reason = String::from_utf8_lossy(frames.get(5)).into_owned();
                        *res.rejects.entry(reason).or_insert(0) += 1;
                        if !done[i] {
                            done[i] = true;
                            finished += 1;
                            last_completion = last_progress;
                        }
                    }
                    _ => res.unexpected += 1,
                }
                if complete {
                    if done[i] {
                        res.unexpected += 1;
                    } else {
                        done[i] = true;
                        finished += 1;
                        let t = last_progress.duration_since(start).as_nanos() as u64;
                        res.latencies_ns.push(t.saturating_sub(sent_at[i]));
                        last_completion = last_progress;
                    }
                }
            }
        }

        if !progressed {
            // nothing to send and nothing arrived: wait for input
            match sock.poll(zmq::POLLIN, 50) {
                Ok(_) | Err(zmq::Error::EINTR) => {}
                Err(e) => return Err(format!("poll: {e}")),
            }
        }
    }
    res.elapsed = last_completion.duration_since(start);
    Ok(res)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn msgids_are_uuid_shaped_and_round_trip() {
        let id = msgid(0xdead_beef, 123_456);
        assert_eq!(id.len(), 36);
        assert_eq!(id, "deadbeef-0000-4000-8000-00000001e240");
        assert_eq!(parse_msgid(0xdead_beef, id.as_bytes()), Some(123_456));
        assert_eq!(parse_msgid(1, id.as_bytes()), None);
        assert_eq!(parse_msgid(0xdead_beef, b"nonsense"), None);
        let real = emqp_proto::new_msgid();
        assert_eq!(parse_msgid(0, real.as_bytes()), None);
    }

    #[test]
    fn noop_job_is_the_documented_call_payload() {
        let j = JobFrames::noop(true);
        let v: serde_json::Value = serde_json::from_slice(&j.message).unwrap();
        assert_eq!(
            v,
            serde_json::json!(["call", {"handler": "noop", "args": null}])
        );
        assert_eq!(j.headers, b"reply-requested,batched-acks");
        assert_eq!(JobFrames::noop(false).headers, b"batched-acks");
    }
}
