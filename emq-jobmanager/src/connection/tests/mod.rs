//! Every rule of the connection core, driven with a fake clock: the
//! harness and frame helpers here, the tests in one file per module of
//! the core.

use super::*;
use emqp_proto::command::{FEATURE_ADOPT_RUNNING, FEATURE_REPLY_RESEND};
use emqp_proto::job::{CallJob, ErrorKind, JobError};
use emqp_proto::{Command, Header, Headers, Inform, Reply, Request, ResultStatus};
use serde_json::json;

mod leaving;
mod link;
mod replies;
mod resend;
mod slots;
mod window;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

const SEED: u64 = 7;

fn cfg(concurrency: usize) -> Config {
    let mut c = Config::new(
        vec!["tcp://127.0.0.1:1".into(), "tcp://127.0.0.1:2".into()],
        QueueSpec::parse_cli("10:default,15:email").unwrap(),
        concurrency,
    );
    c.unix_micros_at_start = 1_000_000_000_000;
    c.id_seed = SEED;
    c
}

/// A connection plus a fake clock.
struct Harness {
    c: Connection,
    now: Duration,
}

impl Harness {
    fn new(concurrency: usize) -> (Harness, Vec<Action>) {
        Self::with(cfg(concurrency))
    }

    fn with(cfg: Config) -> (Harness, Vec<Action>) {
        let mut c = Connection::new(cfg);
        let mut a = Vec::new();
        c.start(Duration::ZERO, &mut a);
        (
            Harness {
                c,
                now: Duration::ZERO,
            },
            a,
        )
    }

    fn at(&mut self, t: Duration, input: Input) -> Vec<Action> {
        assert!(t >= self.now, "the fake clock goes forward");
        self.now = t;
        let mut a = Vec::new();
        self.c.handle(input, t, &mut a);
        self.check_invariant();
        a
    }

    fn msg(&mut self, t: Duration, cmd: Command) -> Vec<Action> {
        self.at(t, Input::Frames(Message::new(cmd).encode()))
    }

    /// The driver's loop with no input until `t`: sleep until
    /// `poll_timeout`, `handle_timeout` at exactly that instant, repeat.
    fn advance(&mut self, t: Duration) -> Vec<Action> {
        let mut all = Vec::new();
        for _ in 0..10_000 {
            match self.c.poll_timeout() {
                Some(d) if d <= t => {
                    let d = d.max(self.now);
                    self.now = d;
                    self.c.handle_timeout(d, &mut all);
                    self.check_invariant();
                }
                _ => {
                    self.now = t;
                    return all;
                }
            }
        }
        panic!("timers keep firing before {t:?}: {:?}", names(&all));
    }

    /// `handle_timeout` at the next deadline, which must be `expected`.
    fn fire_at(&mut self, expected: Duration) -> Vec<Action> {
        assert_eq!(self.c.poll_timeout(), Some(expected));
        self.advance(expected)
    }

    fn send_failed(&mut self, t: Duration, m: &Message) -> Vec<Action> {
        self.at(t, Input::SendFailed { message: m.clone() })
    }

    fn check_invariant(&self) {
        let c = self.c.slot_counts();
        let n = self.c.cfg.concurrency;
        assert!(c.offered + c.busy <= n, "{c:?}");
        assert_eq!(c.offered + c.busy + c.idle, n);
        // Never more than `concurrency` run; what is held and promised
        // stays within the window; nothing is held while a slot is free.
        assert!(
            c.busy + c.held + c.offered + c.extra <= n + self.c.cfg.prefetch.max(),
            "{c:?}"
        );
        assert!(
            c.held == 0 || c.busy == n,
            "held while a slot is free: {c:?}"
        );
    }

    /// ACK the INFORM found in `actions`.
    fn ack(&mut self, t: Duration, actions: &[Action]) -> Vec<Action> {
        let id = inform_msgid(actions).expect("an INFORM to ACK");
        self.msg(
            t,
            Command::Ack {
                acked_msgid: id,
                features: vec![],
            },
        )
    }
}

fn inform_msgid(actions: &[Action]) -> Option<String> {
    actions.iter().find_map(|a| match a {
        Action::Send(m) if matches!(m.command, Command::Inform(_)) => Some(m.msgid.clone()),
        _ => None,
    })
}

fn names(actions: &[Action]) -> Vec<String> {
    actions
        .iter()
        .map(|a| match a {
            Action::Connect { .. } => "connect".to_string(),
            Action::Send(m) => m.command.name().to_string(),
            Action::StartJob(_) => "start".to_string(),
            Action::CancelJob { .. } => "cancel".to_string(),
            Action::KillAll => "kill-all".to_string(),
            Action::Exit(c) => format!("exit {c}"),
        })
        .collect()
}

fn count(actions: &[Action], name: &str) -> usize {
    names(actions).iter().filter(|n| *n == name).count()
}

fn starts(actions: &[Action]) -> Vec<JobStart> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::StartJob(j) => Some(j.clone()),
            _ => None,
        })
        .collect()
}

fn sent(actions: &[Action], name: &str) -> Vec<Message> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Send(m) if m.command.name() == name => Some(m.clone()),
            _ => None,
        })
        .collect()
}

fn replies(actions: &[Action]) -> Vec<Reply> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Send(Message {
                command: Command::Reply(r),
                ..
            }) => Some(r.clone()),
            _ => None,
        })
        .collect()
}

fn outcome(r: &Reply) -> JobOutcome {
    JobOutcome::from_payload(&r.payload).unwrap()
}

fn call_job(handler: &str) -> Vec<u8> {
    Job::Call(CallJob {
        handler: handler.into(),
        args: json!([1]),
    })
    .to_message()
}

fn request(headers: Headers, message: Vec<u8>) -> Command {
    Command::Request(Request {
        queue: "default".into(),
        headers,
        message,
    })
}

fn req_msg(id: &str, headers: Headers) -> Input {
    Input::Frames(Message::with_msgid(id, request(headers, call_job("echo"))).encode())
}

fn finished(j: &JobStart, outcome: JobOutcome) -> Input {
    Input::JobFinished {
        slot: j.slot,
        run: j.run,
        outcome,
    }
}

fn failed(kind: ErrorKind) -> JobOutcome {
    JobOutcome::Error(JobError::new(kind, "boom"))
}

/// Started and registered (ACK at 10 ms), with `n` READYs sent.
fn registered(concurrency: usize) -> Harness {
    let (mut h, a) = Harness::new(concurrency);
    let a = h.ack(ms(10), &a);
    assert_eq!(count(&a, "READY"), concurrency);
    h
}

fn cancel(msgid: &str) -> Command {
    Command::Cancel {
        orig_msgid: msgid.into(),
    }
}

fn cancel_job(j: &JobStart) -> Action {
    Action::CancelJob {
        slot: j.slot,
        run: j.run,
        reason: CancelReason::Router,
    }
}

/// The exact payload of the REPLY to a cancelled job.
const CANCELLED_PAYLOAD: &[u8] =
    br#"{"error":{"kind":"cancelled","message":"cancelled by the router","attempts":1}}"#;

impl Harness {
    /// ACK the INFORM in `actions` as an emq router does: listing
    /// `reply-resend`.
    fn ack_resend(&mut self, t: Duration, actions: &[Action]) -> Vec<Action> {
        let id = inform_msgid(actions).expect("an INFORM to ACK");
        self.msg(
            t,
            Command::Ack {
                acked_msgid: id,
                features: vec![FEATURE_REPLY_RESEND.into()],
            },
        )
    }

    /// The driver's socket monitor: the current connection went down.
    fn link_down(&mut self, t: Duration) -> Vec<Action> {
        let identity = self.c.identity().to_string();
        self.at(t, Input::LinkDown { identity })
    }
}

/// Started and registered with an emq router (ACK with `reply-resend` at
/// 10 ms), `n` READYs sent.
fn registered_resend(concurrency: usize) -> Harness {
    let (mut h, a) = Harness::new(concurrency);
    let a = h.ack_resend(ms(10), &a);
    assert_eq!(count(&a, "READY"), concurrency);
    h
}

/// The REPLYs sent in `actions`, as messages (msgid included).
fn reply_msgs(actions: &[Action]) -> Vec<Message> {
    sent(actions, "REPLY")
}
