//! The rules of `connection/slots.rs`: REQUESTs onto slots, job timeouts,
//! CANCEL, slot accounting under random events.

use super::*;

/// A tiny deterministic generator for the accounting fuzz test.
struct Lcg(u64);
impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

fn timeout_header(n: u64) -> Headers {
    let mut hd = Headers::new();
    hd.push(Header::Timeout(n));
    hd
}

/// A REQUEST with `headers` and the `echo` call job with `extra` fields.
fn req_with(id: &str, headers: Headers, extra: serde_json::Value) -> Input {
    let mut fields = json!({"handler": "echo"});
    for (k, v) in extra.as_object().cloned().unwrap_or_default() {
        fields[k] = v;
    }
    let payload = serde_json::to_vec(&json!(["call", fields])).unwrap();
    Input::Frames(Message::with_msgid(id, request(headers, payload)).encode())
}

#[test]
fn request_runs_on_a_slot_and_finish_sends_reply_before_ready() {
    let mut h = registered(2);
    let a = h.at(ms(100), req_msg("job-1", Headers::new()));
    let s = starts(&a);
    assert_eq!(s.len(), 1);
    assert_eq!(s[0].msgid, "job-1");
    assert_eq!(
        s[0].timeout,
        Some(Duration::from_secs(300)),
        "0.3.13's GLOBAL_TIMEOUT by default"
    );
    assert!(matches!(&s[0].job, Job::Call(c) if c.handler == "echo"));
    assert_eq!(h.c.slot_counts().busy, 1);
    let a = h.at(ms(200), finished(&s[0], JobOutcome::Value(json!([1]))));
    assert_eq!(names(&a), ["REPLY", "READY"]);
    let r = &replies(&a)[0];
    assert_eq!(r.orig_msgid.as_deref(), Some("job-1"));
    assert_eq!(r.status, Some(ResultStatus::Ok));
    assert_eq!(r.payload, br#"{"value":[1]}"#);
    // The wire form is [payload, orig_msgid, status].
    let Action::Send(m) = &a[0] else { panic!() };
    let f = m.clone().encode();
    assert_eq!(&f[4..], [&br#"{"value":[1]}"#[..], b"job-1", b"ok"]);
}

#[test]
fn failed_job_replies_failed_then_ready() {
    let mut h = registered(1);
    let s = starts(&h.at(ms(100), req_msg("j", Headers::new())));
    let a = h.at(ms(200), finished(&s[0], failed(ErrorKind::Exception)));
    assert_eq!(names(&a), ["REPLY", "READY"]);
    let r = &replies(&a)[0];
    assert_eq!(r.status, Some(ResultStatus::Failed));
    let JobOutcome::Error(e) = outcome(r) else {
        panic!()
    };
    assert_eq!(e.kind, ErrorKind::Exception);
    assert_eq!(e.attempts, Some(1));
}

#[test]
fn retry_count_is_the_routers_a_failing_job_runs_once_and_replies_failed_once() {
    let mut h = registered(1);
    let mut hd = Headers::new();
    hd.push(Header::RetryCount(2));
    let s = starts(&h.at(ms(100), req_msg("r", hd)));
    assert_eq!(s.len(), 1);
    let a = h.at(ms(1000), finished(&s[0], failed(ErrorKind::Exception)));
    assert_eq!(names(&a), ["REPLY", "READY"], "no local retry");
    let r = &replies(&a)[0];
    assert_eq!(r.orig_msgid.as_deref(), Some("r"));
    assert_eq!(r.status, Some(ResultStatus::Failed));
    let JobOutcome::Error(e) = outcome(r) else {
        panic!()
    };
    assert_eq!((e.kind, e.attempts), (ErrorKind::Exception, Some(1)));
    // Time passes (the router stays alive): the job is never started again.
    let mut later = Vec::new();
    for t in (2000..=20_000).step_by(2000) {
        h.msg(ms(t), Command::Heartbeat { timestamp: None });
        later.extend(h.advance(ms(t + 1000)));
    }
    assert_eq!(count(&later, "start"), 0, "{:?}", names(&later));
    assert_eq!(count(&later, "REPLY"), 0);
    assert_eq!(h.c.slot_counts().offered, 1);
}

#[test]
fn request_without_free_slot_replies_failed_and_never_exceeds_concurrency() {
    let mut h = registered(1);
    let s = starts(&h.at(ms(100), req_msg("a", Headers::new())));
    assert_eq!(s.len(), 1);
    let a = h.at(ms(110), req_msg("b", Headers::new()));
    assert_eq!(names(&a), ["REPLY"], "no start, no READY");
    let r = &replies(&a)[0];
    assert_eq!(r.orig_msgid.as_deref(), Some("b"));
    assert_eq!(r.status, Some(ResultStatus::Failed));
    assert_eq!(h.c.slot_counts().busy, 1);
}

#[test]
fn bad_payload_replies_bad_job_and_gives_the_slot_back() {
    let mut h = registered(1);
    let a = h.at(
        ms(100),
        Input::Frames(
            Message::with_msgid("bad", request(Headers::new(), b"not json".to_vec())).encode(),
        ),
    );
    assert_eq!(names(&a), ["REPLY", "READY"]);
    let JobOutcome::Error(e) = outcome(&replies(&a)[0]) else {
        panic!()
    };
    assert_eq!(e.kind, ErrorKind::BadJob);
    assert_eq!(h.c.slot_counts().offered, 1);
}

#[test]
fn timeout_cancels_the_job_frees_the_slot_once_and_replies_timeout() {
    let mut h = registered(1);
    let mut hd = Headers::new();
    hd.push(Header::Timeout(2));
    let s = starts(&h.at(ms(100), req_msg("t", hd)));
    assert_eq!(s[0].timeout, Some(Duration::from_secs(2)));
    assert_eq!(h.c.poll_timeout(), Some(ms(2100)));
    h.at(
        ms(150),
        Input::JobStarted {
            slot: 0,
            run: s[0].run,
        },
    );
    h.msg(ms(1000), Command::Heartbeat { timestamp: None });
    // 2 s from the start at 150 ms, before the heartbeat at 3010 ms.
    assert!(h.advance(ms(2149)).is_empty());
    let a = h.fire_at(ms(2150));
    assert_eq!(
        a,
        vec![Action::CancelJob {
            slot: 0,
            run: s[0].run,
            reason: CancelReason::Timeout,
        }]
    );
    assert_eq!(h.c.poll_timeout(), Some(ms(3010)), "cancel once");
    assert_eq!(
        h.c.slot_counts().busy,
        1,
        "busy until the pool confirms the kill"
    );
    let a = h.at(ms(2300), finished(&s[0], failed(ErrorKind::Crash)));
    assert_eq!(names(&a), ["REPLY", "READY"]);
    let JobOutcome::Error(e) = outcome(&replies(&a)[0]) else {
        panic!()
    };
    assert_eq!(e.kind, ErrorKind::Timeout);
    // A second report of the same run frees nothing.
    assert!(h
        .at(ms(2400), finished(&s[0], failed(ErrorKind::Crash)))
        .is_empty());
    assert_eq!(h.c.slot_counts().offered, 1);
}

#[test]
fn a_timed_out_job_with_retry_count_is_not_run_again() {
    let mut h = registered(1);
    let mut hd = Headers::new();
    hd.push(Header::RetryCount(1));
    hd.push(Header::Timeout(1));
    let s = starts(&h.at(ms(100), req_msg("t", hd)));
    assert_eq!(names(&h.fire_at(ms(1100))), ["cancel"]);
    let a = h.at(ms(1150), finished(&s[0], failed(ErrorKind::Crash)));
    assert_eq!(names(&a), ["REPLY", "READY"]);
    let JobOutcome::Error(e) = outcome(&replies(&a)[0]) else {
        panic!()
    };
    assert_eq!((e.kind, e.attempts), (ErrorKind::Timeout, Some(1)));
    h.msg(ms(1500), Command::Heartbeat { timestamp: None });
    assert_eq!(count(&h.advance(ms(5000)), "start"), 0);
}

#[test]
fn a_jobs_timeout_is_its_header_else_its_payload_field_else_the_global_timeout() {
    let mut c = cfg(6);
    c.default_timeout = Some(Duration::from_secs(50));
    let (mut h, a) = Harness::with(c);
    h.ack(ms(10), &a);
    let secs = |n| Some(Duration::from_secs(n));
    let cases = [
        // The header wins over the payload's field.
        (timeout_header(2), json!({"timeout": 30}), secs(2)),
        (Headers::new(), json!({"timeout": 30}), secs(30)),
        (Headers::new(), json!({"timeout": 0.5}), Some(ms(500))),
        // timeout:0 and "timeout": 0 name no timeout: the next one counts.
        (timeout_header(0), json!({"timeout": 7}), secs(7)),
        (timeout_header(0), json!({"timeout": 0}), secs(50)),
        (Headers::new(), json!({}), secs(50)),
    ];
    for (i, (headers, extra, want)) in cases.into_iter().enumerate() {
        let id = format!("t{i}");
        let s = starts(&h.at(ms(100), req_with(&id, headers, extra.clone())));
        assert_eq!(s[0].timeout, want, "{extra}");
    }
    // The earliest deadline is the 0.5 s one, from its start.
    h.at(ms(200), Input::JobStarted { slot: 2, run: 3 });
    assert_eq!(h.c.poll_timeout(), Some(ms(700)));
    let a = h.advance(ms(700));
    assert_eq!(
        a,
        vec![Action::CancelJob {
            slot: 2,
            run: 3,
            reason: CancelReason::Timeout,
        }]
    );
    let a = h.at(
        ms(710),
        Input::JobFinished {
            slot: 2,
            run: 3,
            outcome: failed(ErrorKind::Crash),
        },
    );
    let JobOutcome::Error(e) = outcome(&replies(&a)[0]) else {
        panic!()
    };
    assert_eq!(
        (e.kind, e.message.as_str()),
        (
            ErrorKind::Timeout,
            "job ran past its timeout of 0.5 s and was killed"
        )
    );
    // Issue 32: killed at the job manager's default (t5 named none): said
    // so, with how to change it.
    h.at(ms(800), Input::JobStarted { slot: 5, run: 6 });
    let mut a = Vec::new();
    for t in 1..=50 {
        // The router stays alive (its heartbeats) while the time passes.
        let at = ms(800) + Duration::from_secs(t);
        a.extend(h.advance(at));
        h.msg(at, Command::Heartbeat { timestamp: None });
    }
    assert!(a.contains(&Action::CancelJob {
        slot: 5,
        run: 6,
        reason: CancelReason::Timeout,
    }));
    let a = h.at(
        ms(800) + Duration::from_secs(51),
        Input::JobFinished {
            slot: 5,
            run: 6,
            outcome: failed(ErrorKind::Crash),
        },
    );
    let JobOutcome::Error(e) = outcome(&replies(&a)[0]) else {
        panic!()
    };
    assert_eq!(
        e.message,
        "job ran past its timeout of 50 s and was killed (the job manager's default, \
         GLOBAL_TIMEOUT: change it with --global-timeout or EVENTMQ_GLOBAL_TIMEOUT, or give \
         the job a timeout:N header)"
    );
}

#[test]
fn no_global_timeout_lets_a_job_without_one_run_for_ever() {
    let mut c = cfg(1);
    c.default_timeout = None;
    let (mut h, a) = Harness::with(c);
    h.ack(ms(10), &a);
    let s = starts(&h.at(ms(100), req_msg("forever", Headers::new())));
    assert_eq!(s[0].timeout, None);
    h.at(
        ms(150),
        Input::JobStarted {
            slot: 0,
            run: s[0].run,
        },
    );
    // Only the heartbeat timers remain (the router keeps talking).
    for t in (1..=400).map(|k| ms(k * 1000)) {
        h.msg(t, Command::Heartbeat { timestamp: None });
        assert_eq!(count(&h.advance(t + ms(500)), "cancel"), 0);
    }
    assert_eq!(h.c.slot_counts().busy, 1);
}

#[test]
fn a_bad_payload_timeout_is_a_bad_job() {
    let mut h = registered(1);
    let a = h.at(
        ms(100),
        req_with("neg", Headers::new(), json!({"timeout": -3})),
    );
    assert_eq!(names(&a), ["REPLY", "READY"]);
    let JobOutcome::Error(e) = outcome(&replies(&a)[0]) else {
        panic!()
    };
    assert_eq!(e.kind, ErrorKind::BadJob);
    assert!(e.message.contains("timeout"), "{}", e.message);
}

#[test]
fn cancel_stops_the_job_and_once_it_ends_replies_cancelled_then_ready() {
    let mut h = registered(2);
    let s = starts(&h.at(ms(100), req_msg("c", Headers::new())));
    let other = starts(&h.at(ms(110), req_msg("other", Headers::new())));
    // The CANCEL frame as the router sends it.
    let frames = Message::with_msgid("x1", cancel("c")).encode();
    assert_eq!(&frames[2..], [&b"CANCEL"[..], b"x1", b"c"]);
    let a = h.at(ms(200), Input::Frames(frames));
    assert_eq!(a, vec![cancel_job(&s[0])], "only this job is stopped");
    assert_eq!(h.c.slot_counts().busy, 2, "busy until the pool reports it");
    // The pool reports the killed job (a shell job killed by SIGKILL).
    let a = h.at(ms(300), finished(&s[0], failed(ErrorKind::Exit)));
    assert_eq!(names(&a), ["REPLY", "READY"]);
    let Action::Send(m) = &a[0] else { panic!() };
    assert_eq!(
        &m.clone().encode()[4..],
        [CANCELLED_PAYLOAD, b"c", b"failed"]
    );
    // Exactly once: a second report, a late CANCEL, change nothing.
    assert!(h
        .at(ms(400), finished(&s[0], failed(ErrorKind::Exit)))
        .is_empty());
    assert!(h.msg(ms(500), cancel("c")).is_empty());
    // The other job is untouched and replies as usual.
    let a = h.at(ms(600), finished(&other[0], JobOutcome::Value(json!(2))));
    assert_eq!(names(&a), ["REPLY", "READY"]);
    assert_eq!(replies(&a)[0].status, Some(ResultStatus::Ok));
    assert_eq!(h.c.slot_counts().offered, 2);
}

#[test]
fn a_second_cancel_sends_no_second_kill_and_the_job_is_replied_once() {
    let mut h = registered(1);
    let s = starts(&h.at(ms(100), req_msg("c", Headers::new())));
    assert_eq!(h.msg(ms(200), cancel("c")), vec![cancel_job(&s[0])]);
    assert!(h.msg(ms(250), cancel("c")).is_empty());
    let a = h.at(ms(300), finished(&s[0], failed(ErrorKind::Crash)));
    assert_eq!(names(&a), ["REPLY", "READY"]);
    assert_eq!(replies(&a)[0].payload, CANCELLED_PAYLOAD);
    // A new job on the freed slot is not hit by the old CANCEL.
    let s2 = starts(&h.at(ms(400), req_msg("next", Headers::new())));
    assert_eq!(s2[0].slot, s[0].slot);
    let a = h.at(ms(500), finished(&s2[0], JobOutcome::Value(json!("n"))));
    assert_eq!(replies(&a)[0].status, Some(ResultStatus::Ok));
}

#[test]
fn a_job_that_succeeds_before_the_kill_reaches_it_is_replied_with_its_result() {
    let mut h = registered(1);
    let s = starts(&h.at(ms(100), req_msg("c", Headers::new())));
    assert_eq!(h.msg(ms(200), cancel("c")), vec![cancel_job(&s[0])]);
    // Its result was already on its way when the kill was ordered.
    let a = h.at(ms(210), finished(&s[0], JobOutcome::Value(json!("done"))));
    assert_eq!(names(&a), ["REPLY", "READY"]);
    let r = &replies(&a)[0];
    assert_eq!(
        (r.payload.as_slice(), r.status),
        (&br#"{"value":"done"}"#[..], Some(ResultStatus::Ok))
    );
}

#[test]
fn cancel_of_a_job_not_running_here_is_ignored() {
    let mut h = registered(2);
    let s = starts(&h.at(ms(100), req_msg("a", Headers::new())));
    assert!(h.msg(ms(200), cancel("never-delivered")).is_empty());
    // Finished, its REPLY sent: a CANCEL that crossed it is ignored.
    assert_eq!(
        names(&h.at(ms(300), finished(&s[0], JobOutcome::Value(json!(1))))),
        ["REPLY", "READY"]
    );
    assert!(h.msg(ms(400), cancel("a")).is_empty());
    assert_eq!(
        h.c.slot_counts(),
        SlotCounts {
            offered: 2,
            idle: 0,
            busy: 0,
            extra: 0,
            held: 0
        }
    );
    // A CANCEL counts as router life, like any message.
    assert_eq!(h.c.poll_timeout(), Some(ms(3300)));
}

#[test]
fn cancel_and_timeout_stop_a_job_once_and_the_reply_says_cancelled() {
    let mut hd = Headers::new();
    hd.push(Header::Timeout(1));
    // The timeout fires first; the CANCEL then sends no second kill.
    let mut h = registered(1);
    let s = starts(&h.at(ms(100), req_msg("t", hd.clone())));
    assert_eq!(names(&h.fire_at(ms(1100))), ["cancel"]);
    assert!(h.msg(ms(1150), cancel("t")).is_empty());
    let a = h.at(ms(1200), finished(&s[0], failed(ErrorKind::Timeout)));
    assert_eq!(names(&a), ["REPLY", "READY"]);
    assert_eq!(replies(&a)[0].payload, CANCELLED_PAYLOAD);
    // The CANCEL comes first; the timeout then fires no kill.
    let mut h = registered(1);
    let s = starts(&h.at(ms(100), req_msg("t", hd)));
    assert_eq!(h.msg(ms(500), cancel("t")), vec![cancel_job(&s[0])]);
    h.msg(ms(2000), Command::Heartbeat { timestamp: None });
    assert_eq!(count(&h.advance(ms(2500)), "cancel"), 0);
    let a = h.at(ms(2600), finished(&s[0], failed(ErrorKind::Cancelled)));
    assert_eq!(replies(&a)[0].payload, CANCELLED_PAYLOAD);
}

#[test]
fn slot_accounting_holds_under_random_events_and_send_failures() {
    for seed in 0..40u64 {
        let mut rng = Lcg(seed);
        let conc = 1 + rng.next(4) as usize;
        let (mut h, mut last) = Harness::new(conc);
        let mut t = 0u64;
        let mut running: Vec<JobStart> = Vec::new();
        // The router's view: credit = READYs received - REQUESTs sent, per connection.
        let mut credit: i64 = 0;
        let mut n = 0;
        // Per job, the msgids of the REPLY messages sent for it: one (a
        // copy sent again after a reconnect is the same message).
        let mut delivered_replies: std::collections::HashMap<String, Vec<String>> =
            std::collections::HashMap::new();
        // Jobs the router cancelled, and the kills ordered (one per run).
        let mut cancelled = std::collections::HashSet::new();
        let mut kills = std::collections::HashSet::new();
        for _ in 0..400 {
            t += 1 + rng.next(1500);
            let now = ms(t);
            let input = match rng.next(9) {
                0 => match inform_msgid(&last) {
                    Some(id) => Input::Frames(
                        Message::new(Command::Ack {
                            acked_msgid: id,
                            features: if rng.next(2) == 0 {
                                vec![]
                            } else {
                                vec![FEATURE_REPLY_RESEND.into()]
                            },
                        })
                        .encode(),
                    ),
                    None => Input::Frames(vec![b"junk".to_vec()]),
                },
                1 | 2 if credit > 0 || rng.next(10) == 0 => {
                    n += 1;
                    credit = (credit - 1).max(0);
                    let mut hd = Headers::new();
                    if rng.next(3) == 0 {
                        hd.push(Header::Timeout(1 + rng.next(3)));
                    }
                    if rng.next(3) == 0 {
                        hd.push(Header::RetryCount(rng.next(3) as u32));
                    }
                    req_msg(&format!("j{n}"), hd)
                }
                3 | 4 if !running.is_empty() => {
                    let j = running.remove(rng.next(running.len() as u64) as usize);
                    let o = if rng.next(2) == 0 {
                        JobOutcome::Value(json!(1))
                    } else {
                        failed(ErrorKind::Exception)
                    };
                    finished(&j, o)
                }
                5 if !running.is_empty() && rng.next(2) == 0 => {
                    // The job keeps running until the pool reports it.
                    let j = &running[rng.next(running.len() as u64) as usize];
                    let target = if rng.next(4) == 0 {
                        "unknown"
                    } else {
                        &j.msgid
                    };
                    if target == j.msgid {
                        cancelled.insert(j.msgid.clone());
                    }
                    Input::Frames(Message::new(cancel(target)).encode())
                }
                5 => Input::Frames(Message::new(Command::Heartbeat { timestamp: None }).encode()),
                6 if rng.next(20) == 0 => {
                    // The router that says KBYE forgets our READYs.
                    credit = 0;
                    Input::Frames(Message::new(Command::Kbye).encode())
                }
                7 if rng.next(10) == 0 => Input::LinkDown {
                    identity: h.c.identity().to_string(),
                },
                _ => Input::Frames(Message::new(Command::Heartbeat { timestamp: None }).encode()),
            };
            let mut a = h.at(now, input);
            a.extend(h.advance(now));
            // The driver: carry out the actions; some sends fail, and go
            // back in as input right after the batch.
            let mut failures = Vec::new();
            for act in &a {
                match act {
                    Action::Connect { .. } => credit = 0,
                    Action::Send(m) if rng.next(6) == 0 => failures.push(m.clone()),
                    Action::Send(m) if m.command == Command::Ready => credit += 1,
                    Action::Send(Message {
                        msgid: reply_msgid,
                        command: Command::Reply(r),
                    }) => {
                        let msgid = r.orig_msgid.clone().unwrap();
                        if cancelled.contains(&msgid) && r.status == Some(ResultStatus::Failed) {
                            assert_eq!(r.payload, CANCELLED_PAYLOAD, "seed {seed}: {msgid}");
                        }
                        let sent = delivered_replies.entry(msgid).or_default();
                        if !sent.contains(reply_msgid) {
                            sent.push(reply_msgid.clone());
                        }
                    }
                    Action::StartJob(j) => running.push(j.clone()),
                    Action::CancelJob { slot, run, .. } => {
                        assert!(
                            running.iter().any(|j| (j.slot, j.run) == (*slot, *run)),
                            "seed {seed}: a kill for a job not running"
                        );
                        assert!(kills.insert(*run), "seed {seed}: run {run} killed twice");
                    }
                    _ => {}
                }
            }
            for m in failures {
                assert!(h.send_failed(now, &m).is_empty());
            }
            if inform_msgid(&a).is_some() {
                last = a.clone();
            }
            let c = h.c.slot_counts();
            assert!(
                credit <= c.offered as i64,
                "seed {seed}: credit {credit} > {c:?}"
            );
            assert!(running.len() <= conc, "seed {seed}");
        }
        for (job, sent) in &delivered_replies {
            assert_eq!(
                sent.len(),
                1,
                "seed {seed}: job {job} replied twice: {sent:?}"
            );
        }
    }
}

#[test]
fn a_running_jobs_progress_goes_to_the_router_and_its_context_to_the_pool() {
    let mut h = registered(1);
    let mut hd = Headers::new();
    let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    hd.push(Header::Other(format!("traceparent:{tp}")));
    hd.push(Header::Other("attempt:3".into()));
    let a = h.at(ms(100), req_with("job-1", hd, json!({})));
    let s = starts(&a);
    assert_eq!(s.len(), 1);
    // The job's context: its queue, headers, delivery count and the trace
    // parent.
    assert_eq!(s[0].context.queue, "default");
    assert_eq!(s[0].context.headers, format!("traceparent:{tp},attempt:3"));
    assert_eq!(s[0].context.attempt, 3);
    assert_eq!(
        s[0].context.traceparent.map(|t| t.to_string()).as_deref(),
        Some(tp)
    );
    let progress = |slot: usize, run: u64| Input::JobProgress {
        slot,
        run,
        percent: 40,
        message: "loading".into(),
    };
    let a = h.at(ms(150), progress(s[0].slot, s[0].run));
    let sent = sent(&a, "PROGRESS");
    assert_eq!(sent.len(), 1, "{a:?}");
    let Command::Progress(p) = &sent[0].command else {
        panic!()
    };
    assert_eq!(
        (p.orig_msgid.as_str(), p.percent, p.message.as_str()),
        ("job-1", 40, "loading")
    );
    // Another run (an old one, or another slot's): nothing.
    assert!(h.at(ms(160), progress(s[0].slot, s[0].run + 1)).is_empty());
    h.at(ms(200), finished(&s[0], JobOutcome::Value(json!(1))));
    assert!(
        h.at(ms(210), progress(s[0].slot, s[0].run)).is_empty(),
        "a finished run reports nothing"
    );
}
