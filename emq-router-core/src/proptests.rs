//! Property test: random input sequences never panic and keep the books.
//!
//! After every input `Router::check_invariants` must hold: slots never
//! exceed READYs received (and, being unsigned, never go negative — an
//! underflow panics in test builds), no job is both queued and in flight,
//! every in-flight entry belongs to a live worker, the free-slot index
//! matches the slots, no worker idles while its queue has jobs, and every
//! accepted job is queued, delayed, in flight, completed or dead-lettered
//! (conservation), no more RESULTs than finished jobs, the redelivery
//! index is current. Every REQUEST gets exactly one answer (ack or
//! REJECT). Built-in schedules (SCHEDULE / UNSCHEDULE with no scheduler
//! peer) add jobs on ticks. Results (`results.rs`): clients' sends fail,
//! they say hello and send receipts at random; the books of the held
//! results hold after every input, and once the store heals and every
//! client says hello and receipts what it got, no result is left held.

use std::time::Duration;

use proptest::prelude::*;

use emqp_proto::Message;

use crate::config::SECOND;
use crate::event::{Action, Input, SendFailure, Socket};
use crate::journal::{Batch, BatchResult};
use crate::testing::{Driver, Effects, Flush};
use crate::{Config, Router};

const WORKERS: [&str; 3] = ["w0", "w1", "w2"];
const CLIENTS: [&str; 2] = ["c0", "c1"];
const QUEUES: [&str; 4] = [
    "",
    r#"[[10, "default"]]"#,
    r#"[[20, "q1"], [10, "default"]]"#,
    "q1",
];
const REQ_QUEUES: [&str; 3] = ["default", "q1", "nope"];
const HEADERS: [&str; 11] = [
    "",
    "reply-requested",
    "reply-requested,retry-count:2",
    "retry-count:1",
    "retry-count:bad",
    "reply-requested,result-receipt",
    "reply-requested,result-receipt,retry-count:1",
    // Flow control (`router/flow.rs`).
    "key:a",
    "reply-requested,key:b,priority:3",
    "key:a,retry-count:1",
    "priority:9",
];

#[derive(Debug, Clone)]
enum Op {
    Inform {
        w: usize,
        q: usize,
        ack: bool,
        frontend: bool,
    },
    Ready(usize),
    Request {
        c: usize,
        id: u8,
        q: usize,
        h: usize,
    },
    Reply {
        w: usize,
        id: Option<u8>,
        status: u8,
        /// The REPLY's own msgid is `rep{rep}`: a repeat is a REPLY sent
        /// again (a job manager's resend after a reconnect).
        rep: u8,
    },
    Kbye(usize),
    Heartbeat(usize),
    Scheduler,
    Schedule,
    Unschedule,
    Garbage {
        socket: u8,
        frames: Vec<Vec<u8>>,
    },
    Advance(Duration),
    /// The journal store starts (true) or stops (false) failing.
    JournalFails(bool),
    SendFailed {
        socket: u8,
        who: usize,
        eagain: bool,
    },
    Admin(u8),
    Shutdown,
    /// A client's hello (HEARTBEAT on the frontend).
    Hello(usize),
    /// A client's receipt of job `m{id}`'s RESULT.
    Received {
        c: usize,
        id: u8,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..3usize, 0..4usize, any::<bool>(), prop::bool::weighted(0.05))
            .prop_map(|(w, q, ack, frontend)| Op::Inform { w, q, ack, frontend }),
        6 => (0..3usize).prop_map(Op::Ready),
        8 => (0..2usize, 0..8u8, 0..3usize, 0..7usize)
            .prop_map(|(c, id, q, h)| Op::Request { c, id, q, h }),
        2 => (0..2usize, 0..8u8, 0..3usize, 7..11usize)
            .prop_map(|(c, id, q, h)| Op::Request { c, id, q, h }),
        5 => (0..3usize, prop::option::weighted(0.9, 0..8u8), 0..3u8, 0..16u8)
            .prop_map(|(w, id, status, rep)| Op::Reply { w, id, status, rep }),
        1 => (0..3usize).prop_map(Op::Kbye),
        2 => (0..3usize).prop_map(Op::Heartbeat),
        1 => Just(Op::Scheduler),
        1 => Just(Op::Schedule),
        1 => Just(Op::Unschedule),
        2 => (0..3u8, prop::collection::vec(prop::collection::vec(any::<u8>(), 0..6), 0..8))
            .prop_map(|(socket, frames)| Op::Garbage { socket, frames }),
        4 => (0..4_000_000u64).prop_map(|us| Op::Advance(Duration::from_micros(us))),
        1 => any::<bool>().prop_map(Op::JournalFails),
        1 => (0..3u8, 0..6usize, any::<bool>())
            .prop_map(|(socket, who, eagain)| Op::SendFailed { socket, who, eagain }),
        2 => (0..12u8).prop_map(Op::Admin),
        1 => prop::bool::weighted(0.1).prop_filter_map("rare", |b| b.then_some(Op::Shutdown)),
        1 => (0..2usize).prop_map(Op::Hello),
        2 => (0..2usize, 0..8u8).prop_map(|(c, id)| Op::Received { c, id }),
    ]
}

fn sock(n: u8) -> Socket {
    match n % 3 {
        0 => Socket::Frontend,
        1 => Socket::Backend,
        _ => Socket::Admin,
    }
}

fn frames(id: &str, parts: &[&[u8]]) -> Vec<Vec<u8>> {
    crate::testing::frames(id.as_bytes(), parts)
}

fn to_input(op: &Op) -> Option<Input> {
    let fr = |socket, f| Input::Frames { socket, frames: f };
    Some(match op {
        Op::Inform {
            w,
            q,
            ack,
            frontend,
        } => {
            let feats: &[u8] = if *ack { b"job-ack" } else { b"" };
            let socket = if *frontend {
                Socket::Frontend
            } else {
                Socket::Backend
            };
            fr(
                socket,
                frames(
                    WORKERS[*w],
                    &[b"INFORM", b"inf", QUEUES[*q].as_bytes(), b"worker", feats],
                ),
            )
        }
        Op::Ready(w) => fr(Socket::Backend, frames(WORKERS[*w], &[b"READY", b"r"])),
        Op::Request { c, id, q, h } => fr(
            Socket::Frontend,
            frames(
                CLIENTS[*c],
                &[
                    b"REQUEST",
                    format!("m{id}").as_bytes(),
                    REQ_QUEUES[*q].as_bytes(),
                    HEADERS[*h].as_bytes(),
                    b"[\"x\"]",
                ],
            ),
        ),
        Op::Reply { w, id, status, rep } => {
            let mid = id.map(|i| format!("m{i}"));
            let rep = format!("rep{rep}");
            let mut parts: Vec<&[u8]> = vec![b"REPLY", rep.as_bytes(), b"{}"];
            if let Some(m) = &mid {
                parts.push(m.as_bytes());
                match status {
                    1 => parts.push(b"ok"),
                    2 => parts.push(b"failed"),
                    _ => {}
                }
            }
            fr(Socket::Backend, frames(WORKERS[*w], &parts))
        }
        Op::Kbye(w) => fr(Socket::Backend, frames(WORKERS[*w], &[b"KBYE", b"k"])),
        Op::Heartbeat(w) => fr(
            Socket::Backend,
            frames(WORKERS[*w], &[b"HEARTBEAT", b"h", b"1.5"]),
        ),
        Op::Scheduler => fr(
            Socket::Frontend,
            frames("s0", &[b"INFORM", b"i", b"", b"scheduler"]),
        ),
        Op::Schedule => fr(
            Socket::Frontend,
            frames(
                "c0",
                &[b"SCHEDULE", b"s", b"default", b"", b"1", b"[]", b""],
            ),
        ),
        Op::Unschedule => fr(
            Socket::Frontend,
            frames(
                "c0",
                &[b"UNSCHEDULE", b"u", b"default", b"", b"60", b"[]", b""],
            ),
        ),
        Op::Garbage { socket, frames } => fr(sock(*socket), frames.clone()),
        Op::Advance(_) | Op::JournalFails(_) => return None,
        Op::SendFailed {
            socket,
            who,
            eagain,
        } => {
            let ids = ["w0", "w1", "w2", "c0", "c1", "s0"];
            Input::SendFailed {
                socket: sock(*socket),
                identity: ids[*who].as_bytes().to_vec(),
                reason: if *eagain {
                    SendFailure::WouldBlock
                } else {
                    SendFailure::HostUnreachable
                },
            }
        }
        Op::Admin(n) => {
            // The control plane too: state changes under random traffic.
            let control: Option<&str> = match n {
                4 => Some(r#"{"op": "pause", "queue": "default"}"#),
                5 => Some(r#"{"op": "resume", "queue": "default"}"#),
                6 => Some(r#"{"op": "cancel", "msgid": "m1"}"#),
                7 => Some(r#"{"op": "purge", "queue": "q1"}"#),
                8 => Some(r#"{"op": "drain", "worker": "w0"}"#),
                9 => Some(r#"{"op": "undrain", "worker": "w0"}"#),
                10 => Some(r#"{"op": "dead-retry", "all": true}"#),
                11 => Some(r#"{"op": "jobs", "state": "queued", "limit": 2}"#),
                _ => None,
            };
            if let Some(req) = control {
                return Some(fr(
                    Socket::Admin,
                    frames("adm", &[b"ADMIN", b"a", req.as_bytes()]),
                ));
            }
            let cmd: &[u8] = match n {
                0 => b"STATUS",
                1 => b"ROUTER_SHOW_WORKERS",
                2 => b"ROUTER_SHOW_SCHEDULERS",
                _ => b"DISCONNECT",
            };
            fr(Socket::Admin, frames("adm", &[cmd, b"a"]))
        }
        Op::Shutdown => Input::Shutdown,
        Op::Hello(c) => fr(
            Socket::Frontend,
            frames(CLIENTS[*c], &[b"HEARTBEAT", b"h", b"1.5"]),
        ),
        Op::Received { c, id } => fr(
            Socket::Frontend,
            frames(
                CLIENTS[*c],
                &[b"RECEIVED", b"r", format!("m{id}").as_bytes()],
            ),
        ),
    })
}

/// The msgids of the RESULTs sent to `client` in `out`.
fn results_to(out: &[Action], client: &str) -> Vec<String> {
    out.iter()
        .filter_map(|a| match a.message() {
            Some((Socket::Frontend, id, m)) if id == client.as_bytes() => match m.command {
                emqp_proto::Command::Result(r) => Some(r.orig_msgid),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// A store that commits every batch, or fails it while `fails` holds.
struct Store {
    fails: bool,
}

impl Effects for Store {
    fn journal(&mut self, _now: Duration, _batch: &Batch) -> Option<BatchResult> {
        Some(if self.fails {
            BatchResult::Failed("disk full".into())
        } else {
            BatchResult::Committed
        })
    }
}

/// Timer rounds at one instant before a run is declared stuck.
const MAX_TIMER_ROUNDS: usize = 16;

/// Feed `input` (if any) through the driver, then the timers due at `now`.
fn drive(
    d: &mut Driver,
    r: &mut Router,
    input: Option<Input>,
    now: Duration,
    store: &mut Store,
    out: &mut Vec<Action>,
) -> Result<(), TestCaseError> {
    if let Some(input) = input {
        d.input(r, input, now, store, out)
            .map_err(TestCaseError::fail)?;
    }
    for _ in 0..MAX_TIMER_ROUNDS {
        if !Driver::due(r, now) {
            return Ok(());
        }
        d.timeout(r, now, store, out).map_err(TestCaseError::fail)?;
    }
    Err(TestCaseError::fail(format!("a timer stays due at {now:?}")))
}

/// Answers (ack or REJECT) to REQUEST `msgid` from `client` in `out`.
fn answers(out: &[Action], client: &str, msgid: &str) -> usize {
    out.iter()
        .filter(|a| matches!(a, Action::Send { socket: Socket::Frontend, identity, frames }
            if identity == client.as_bytes()
            && matches!(Message::decode(frames.clone()), Ok(m) if matches!(&m.command,
                emqp_proto::Command::Reply(rp) if rp.payload == msgid.as_bytes() && rp.orig_msgid.is_none())
                || matches!(&m.command, emqp_proto::Command::Reject(rj) if rj.orig_msgid == msgid))))
        .count()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn random_inputs_keep_invariants(
        ops in prop::collection::vec(op(), 1..80),
        hwm in 1usize..6,
        limit in prop::option::weighted(0.3, 0..4usize),
    ) {
        // Flow-control policies on `default` (and `q1`), sometimes.
        let limits: Vec<(String, emqp_proto::Policy)> = limit
            .map(|i| {
                let spec = [
                    "default:concurrency-per-key=1",
                    "default:concurrency=2,rate-per-key=2/1,fair",
                    "default:rate=3/1",
                    "q1:concurrency-per-key=1,fair",
                ][i];
                vec![emqp_proto::flow::parse_queue_limit(spec).expect("a good limit")]
            })
            .unwrap_or_default();
        let mut r = Router::new(Config { hwm, max_attempts: 2, journal: true, limits, ..Config::default() });
        let mut d = Driver::new(Flush::AfterActions);
        let mut store = Store { fails: false };
        let mut now = Duration::ZERO;
        let mut exits = 0;
        let mut all: Vec<Action> = Vec::new();
        let mut asked: std::collections::BTreeMap<(usize, u8), usize> = Default::default();
        for op in &ops {
            match op {
                Op::Advance(d) => now += *d,
                Op::JournalFails(f) => store.fails = *f,
                _ => {}
            }
            let mut out = Vec::new();
            drive(&mut d, &mut r, to_input(op), now, &mut store, &mut out)
                .map_err(|e| TestCaseError::fail(format!("{e} ({op:?})")))?;
            if let Err(e) = r.check_invariants() {
                return Err(TestCaseError::fail(format!("{e} after timers following {op:?}")));
            }
            exits += out.iter().filter(|a| **a == Action::Exit).count();
            if let Op::Request { c, id, .. } = op {
                *asked.entry((*c, *id)).or_default() += 1;
            }
            all.extend(out);
        }
        // Let every held answer out: the store heals, time passes.
        store.fails = false;
        for _ in 0..5 {
            now += 2 * SECOND;
            let mut out = Vec::new();
            drive(&mut d, &mut r, None, now, &mut store, &mut out)?;
            all.extend(out);
        }
        // Every client says hello and receipts every RESULT it got: no
        // result is left held (none is lost on the way).
        if !r.has_exited() {
            for _ in 0..2 {
                for (i, c) in CLIENTS.iter().enumerate() {
                    let mut out = Vec::new();
                    drive(&mut d, &mut r, to_input(&Op::Hello(i)), now, &mut store, &mut out)?;
                    let got = results_to(&out, c);
                    all.extend(out);
                    if got.is_empty() {
                        continue;
                    }
                    let mut f = frames(c, &[b"RECEIVED", b"r"]);
                    f.extend(got.into_iter().map(String::into_bytes));
                    let mut out = Vec::new();
                    let received = Input::Frames { socket: Socket::Frontend, frames: f };
                    drive(&mut d, &mut r, Some(received), now, &mut store, &mut out)?;
                    all.extend(out);
                    if let Err(e) = r.check_invariants() {
                        return Err(TestCaseError::fail(format!("{e} after the final receipts")));
                    }
                }
            }
            prop_assert_eq!(r.held_results().0, 0, "results left held");
        }
        for ((c, id), n) in asked {
            let got = answers(&all, CLIENTS[c], &format!("m{id}"));
            if r.has_exited() {
                prop_assert!(got <= n, "m{} answered {} times for {} requests", id, got, n);
            } else {
                prop_assert_eq!(got, n, "m{} answered {} times for {} requests", id, got, n);
            }
        }
        prop_assert!(exits <= 1);
    }
}
