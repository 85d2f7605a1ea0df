//! emq-sender: submit jobs to an EventMQ (eMQP/1.0) router from shells and
//! scripts.
//!
//! The binary is a thin wrapper over [`run`]: [`flags`] parses the command
//! line and checks it into a [`Plan`]. The pieces are reusable:
//! [`payload`] builds job payloads and headers (and, for SCHEDULE, the job
//! exactly as Python's `json.dumps` writes it), [`client::Client`] talks to
//! a router frontend (submit or schedule, wait for ack/result, optionally as
//! a ZMQ PLAIN client), [`bulk`] pipelines jobs from a reader,
//! [`exit::Exit`] maps outcomes to exit codes.

#![forbid(unsafe_code)]

pub mod backoff;
pub mod bulk;
pub mod client;
pub mod event;
pub mod exit;
pub mod flags;
pub mod payload;
pub mod track;

use std::io::{BufRead, IsTerminal, Write};
use std::time::{Duration, Instant};

pub use client::{Client, ClientError, ErrorKind, Event, Outcome};
pub use exit::{Exit, SenderExit};
use flags::DEFAULT_ACK_TIMEOUT;
pub use flags::{Cli, Mode, Plan, ScheduleSpec};
pub use payload::UsageError;

use bulk::{dead_letter_result, payload_value, BulkOptions};
use emqp_proto::{Command, RejectReason};
use serde_json::Value;

/// Where [`run`] reads and writes.
pub struct Io<'a> {
    pub out: &'a mut dyn Write,
    pub err: &'a mut dyn Write,
    /// Show bulk progress (the binary: stdout and stderr are terminals).
    pub progress: bool,
}

/// Whether the binary should show a progress line.
pub fn progress_wanted() -> bool {
    std::io::stdout().is_terminal() && std::io::stderr().is_terminal()
}

/// Carry out a plan; `input` is read in bulk mode only.
pub fn run<R: BufRead + Send + 'static>(plan: &Plan, input: R, io: Io) -> Exit {
    let opts = emq_transport::SocketOptions {
        plain: plan.plain.clone(),
        curve: plan.curve.clone(),
        ..emq_transport::SocketOptions::default()
    };
    let client = match Client::connect_with(&plan.broker, &opts) {
        Ok(c) => c,
        Err(e) => {
            let _ = writeln!(io.err, "emq-sender: {e}");
            return Exit::Internal;
        }
    };
    if let Err(e) = client.set_send_timeout(plan.timeout) {
        let _ = writeln!(io.err, "emq-sender: {e}");
        return Exit::Internal;
    }
    // Fire and forget: nothing is answered, nothing to send again.
    client.set_resend(!plan.no_ack);
    client.set_max_message_size(plan.max_message_size);
    let result = match &plan.mode {
        Mode::Single(message) if plan.publish.is_some() => {
            let topic = plan.publish.as_deref().unwrap_or_default();
            client.publish(topic, message.clone()).and_then(|msgid| {
                let exit = hand_over(client, plan, io.err);
                if exit == Exit::Ok {
                    print_line(io.out, &msgid)?;
                }
                Ok(exit)
            })
        }
        Mode::Single(_) if plan.schedule.is_some() => run_schedule(client, plan, io.out, io.err),
        Mode::Single(message) if plan.no_ack => client
            .submit(&plan.queue, &plan.headers, message.clone())
            .and_then(|msgid| {
                let exit = hand_over(client, plan, io.err);
                if exit == Exit::Ok {
                    print_line(io.out, &msgid)?;
                }
                Ok(exit)
            }),
        Mode::Single(message) => {
            run_single(&client, plan, message.clone(), io.out, io.err, io.progress)
        }
        Mode::Bulk => {
            let opts = BulkOptions {
                queue: plan.queue.clone(),
                headers: plan.headers.clone(),
                wait: plan.wait,
                no_ack: plan.no_ack,
                publish: plan.publish.clone(),
                timeout: plan.timeout,
                window: plan.window,
                fail_fast: plan.fail_fast,
                progress: io.progress,
            };
            bulk::run_bulk(&client, input, io.out, io.err, &opts).map(|s| {
                if plan.no_ack && s.sent > 0 {
                    hand_over(client, plan, io.err)
                } else {
                    s.exit_code()
                }
                .worst(s.exit_code())
            })
        }
    };
    match result {
        Ok(exit) => exit,
        Err(e) => {
            let _ = writeln!(io.err, "emq-sender: {e}");
            match e.kind {
                ErrorKind::SendTimeout => Exit::Timeout,
                ErrorKind::TooLarge => Exit::Usage,
                ErrorKind::Connection => Exit::Internal,
            }
        }
    }
}

/// `--no-ack` and `--publish`: close the client, keeping unsent messages
/// up to `timeout`.
/// Closing returns as soon as everything was handed to the router's
/// connection; taking the whole linger time means it never was.
fn hand_over(client: Client, plan: &Plan, err: &mut dyn Write) -> Exit {
    let timeout = plan.timeout;
    // whole milliseconds, as libzmq takes them
    let linger = Duration::from_millis(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX));
    if let Err(e) = client.set_linger(linger) {
        let _ = writeln!(err, "emq-sender: {e}");
        return Exit::Internal;
    }
    let endpoint = client.endpoint().to_string();
    let started = Instant::now();
    drop(client);
    // libzmq's millisecond clock is cached and can end the linger a
    // millisecond or so early; a real hand-over returns in far less.
    let slack = Duration::from_millis(10).min(linger / 2);
    if started.elapsed() + slack >= linger {
        let _ = writeln!(
            err,
            "emq-sender: could not hand the message(s) to the {} at {endpoint} within {} s{}",
            if plan.publish.is_some() {
                "pub/sub process"
            } else {
                "router"
            },
            timeout.as_secs_f64(),
            auth_hint(plan)
        );
        Exit::Timeout
    } else {
        Exit::Ok
    }
}

/// Added to "no answer" messages when PLAIN credentials were given: a
/// router that refuses them looks exactly like one that does not answer.
fn auth_hint(plan: &Plan) -> String {
    match (&plan.curve, &plan.plain) {
        (Some(c), _) => format!(
            " (or the router refused our CURVE key {}, or {} is not its key: its log says so)",
            c.own.public, c.server_key
        ),
        (None, Some(plain)) => format!(
            " (or the router refused the PLAIN credentials of user {:?}: its log says so)",
            plain.username
        ),
        (None, None) => String::new(),
    }
}

fn print_line(out: &mut dyn Write, text: &str) -> Result<(), ClientError> {
    writeln!(out, "{text}")
        .and_then(|_| out.flush())
        .map_err(|e| ClientError::new(format!("cannot write output: {e}")))
}

/// SCHEDULE / UNSCHEDULE: print the msgid once the router accepts it.
fn run_schedule(
    client: Client,
    plan: &Plan,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<Exit, ClientError> {
    let (Some(spec), Some(Command::Schedule(body) | Command::Unschedule(body))) =
        (&plan.schedule, plan.schedule_command())
    else {
        return Err(ClientError::new("internal error: not a schedule plan"));
    };
    let what = if spec.unschedule {
        "UNSCHEDULE"
    } else {
        "SCHEDULE"
    };
    let msgid = client.schedule(spec.unschedule, body)?;
    if plan.no_ack {
        let exit = hand_over(client, plan, err);
        if exit == Exit::Ok {
            print_line(out, &msgid)?;
        }
        return Ok(exit);
    }
    let secs = plan.timeout.as_secs_f64();
    Ok(match client.wait(&msgid, false, plan.timeout)? {
        // A RESULT is not expected for a schedule; it still means accepted.
        Outcome::Accepted | Outcome::Finished { .. } => {
            print_line(out, &msgid)?;
            Exit::Ok
        }
        Outcome::Rejected {
            reason: RejectReason::NotFound,
            text,
        } if spec.unschedule => {
            let _ = writeln!(
                err,
                "emq-sender: UNSCHEDULE {msgid}: no such schedule on the router at {} \
                 (not-found: {text}); a schedule is identified by its queue and job: give \
                 the same --queue and job as its SCHEDULE",
                plan.broker
            );
            Exit::for_reject(&RejectReason::NotFound)
        }
        Outcome::Rejected { reason, text } => {
            let _ = writeln!(
                err,
                "emq-sender: {what} {msgid} rejected by the router: {}: {text}",
                reason.as_str()
            );
            Exit::Rejected
        }
        Outcome::TimedOut { .. } | Outcome::Duplicate { .. } => {
            let _ = writeln!(
                err,
                "emq-sender: {} for {what} {msgid}{}",
                no_answer(&client, plan, secs, "answer SCHEDULE or UNSCHEDULE"),
                auth_hint(plan)
            );
            Exit::Timeout
        }
    })
}

/// How long `--wait` waits for the acknowledgement before the result:
/// the default acknowledgement timeout, within `--timeout`. No answer at
/// all (no router running) is so reported as soon as without `--wait`.
fn ack_timeout(timeout: Duration) -> Duration {
    timeout.min(DEFAULT_ACK_TIMEOUT)
}

/// [`Client::wait`], with the acknowledgement awaited first (within
/// [`ack_timeout`]) when the result is wanted.
fn wait_answer(
    client: &Client,
    msgid: &str,
    want_result: bool,
    left: Duration,
) -> Result<Outcome, ClientError> {
    let ack = if want_result { ack_timeout(left) } else { left };
    client.wait_acked_within(msgid, want_result, ack, left)
}

/// What to say when the router did not answer within `secs`: nothing
/// answered at the address at all (no router running there), or a
/// connection came up but the message went unanswered (where an EventMQ
/// 0.3.13 router, which does not `what`, is a likely cause).
fn no_answer(client: &Client, plan: &Plan, secs: f64, what: &str) -> String {
    if client.ever_connected() {
        format!(
            "the router at {} took the connection but did not answer within {secs} s \
             (EventMQ 0.3.13 routers do not {what}: use --no-ack with them)",
            plan.broker
        )
    } else {
        format!(
            "no router answered at {} within {secs} s: is emq-router running there?",
            plan.broker
        )
    }
}

/// The stderr line for a NOTICE from the router: `emq-sender: job MSGID:
/// TEXT` (the router's text names the queue and what happened), on one
/// line whatever the text holds. The exit code does not change.
pub(crate) fn notice_line(n: &emqp_proto::Notice) -> String {
    let text: String = n
        .text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    format!("emq-sender: job {}: {text}", n.orig_msgid)
}

fn run_single(
    client: &Client,
    plan: &Plan,
    message: Vec<u8>,
    out: &mut dyn Write,
    err: &mut dyn Write,
    person: bool,
) -> Result<Exit, ClientError> {
    let secs = plan.timeout.as_secs_f64();
    let deadline = Instant::now() + plan.timeout;
    let msgid = client.submit(&plan.queue, &plan.headers, message.clone())?;
    let print = print_line;
    let mut backoff = backoff::Backoff::default();
    let mut resent = 0u32;
    let mut why = "queue full";
    let outcome = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let outcome = wait_answer(client, &msgid, plan.wait, left)?;
        // queue-full is backpressure (final with --fail-fast), and
        // journal-uncertain never a refusal: the same REQUEST again, later.
        let again = match &outcome {
            Outcome::Rejected { reason, .. } => match reason {
                RejectReason::QueueFull => !plan.fail_fast,
                RejectReason::JournalUncertain => {
                    why = "the router could not tell whether it stored it";
                    true
                }
                _ => false,
            },
            _ => false,
        };
        if !again {
            break outcome;
        }
        let now = Instant::now();
        let Some(at) = backoff.retry_at(now, deadline) else {
            break outcome;
        };
        std::thread::sleep(at - now);
        resent += 1;
        client.submit_with_msgid(&msgid, &plan.queue, &plan.headers, message.clone())?;
    };
    if resent > 0 {
        let _ = writeln!(
            err,
            "emq-sender: job {msgid}: {why}, sent {resent} more time(s)"
        );
    }
    for n in client.take_notices() {
        let _ = writeln!(err, "{}", notice_line(&n));
    }
    Ok(match outcome {
        Outcome::Accepted => {
            print(out, &msgid)?;
            Exit::Ok
        }
        Outcome::Duplicate {
            existing,
            text,
            result,
        } => {
            let _ = writeln!(
                err,
                "emq-sender: job {msgid} is a duplicate of {existing} ({text}); not run again"
            );
            match result {
                Some((status, payload)) => {
                    print(out, &payload_value(&payload).to_string())?;
                    Exit::for_status(status)
                }
                None if plan.wait => {
                    let _ = writeln!(
                        err,
                        "emq-sender: job {existing} did not finish within {secs} s (--timeout)"
                    );
                    Exit::Timeout
                }
                None => {
                    print(out, &existing)?;
                    Exit::Ok
                }
            }
        }
        Outcome::Finished { status, payload } => {
            if plan.wait {
                let mut value = payload_value(&payload);
                if let Some(tb) = emqp_proto::job::traceback_text(&value) {
                    // The traceback as text on stderr; on a terminal (a
                    // person reads both) not again, escaped, in the JSON.
                    let _ = write!(err, "emq-sender: job {msgid} failed:\n{tb}");
                    if person {
                        if let Some(e) = value.get_mut("error").and_then(Value::as_object_mut) {
                            e.remove("traceback");
                        }
                    }
                }
                print(out, &value.to_string())?;
                Exit::for_status(status)
            } else {
                // A result before the ack still means it was accepted.
                print(out, &msgid)?;
                Exit::Ok
            }
        }
        Outcome::Rejected {
            reason: RejectReason::JournalUncertain,
            text,
        } => {
            let _ = writeln!(
                err,
                "emq-sender: job {msgid}: the router could not tell whether it stored the job \
                 (journal-uncertain: {text}), still after {secs} s of trying (--timeout); it \
                 may run: do not submit it again under a new msgid"
            );
            Exit::for_reject(&RejectReason::JournalUncertain)
        }
        Outcome::Rejected { reason, text } => {
            let still = if reason == RejectReason::QueueFull && !plan.fail_fast {
                format!(" (still full after {secs} s of trying: --timeout)")
            } else {
                String::new()
            };
            let _ = writeln!(
                err,
                "emq-sender: job {msgid} rejected by the router: {}: {text}{still}",
                reason.as_str()
            );
            if plan.wait && reason == RejectReason::DeadLettered {
                print(out, &dead_letter_result(&text).to_string())?;
            }
            Exit::for_reject(&reason)
        }
        Outcome::TimedOut { accepted: true } => {
            let _ = writeln!(
                err,
                "emq-sender: job {msgid} was accepted but no result arrived within {secs} s \
                 (--timeout; EventMQ 0.3.13 routers never send results back)"
            );
            Exit::Timeout
        }
        Outcome::TimedOut { accepted: false } => {
            let waited = if plan.wait {
                ack_timeout(plan.timeout)
            } else {
                plan.timeout
            }
            .as_secs_f64();
            let _ = writeln!(
                err,
                "emq-sender: {} for job {msgid}{}",
                no_answer(client, plan, waited, "acknowledge buffered jobs"),
                auth_hint(plan)
            );
            Exit::Timeout
        }
    })
}
