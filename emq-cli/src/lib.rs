//! emq-cli: operate an EventMQ (eMQP/1.0) router through its admin socket.
//!
//! The binary is thin: [`flags`] parses the command line
//! ([`flags::Cli`], clap) and checks it into a [`flags::Plan`]; [`run`]
//! carries the plan out and returns the [`Exit`] code. The pieces:
//! [`op`] (each operation as an ADMIN request, and its 0.3.13 command if it
//! has one), [`client`] (STATUS-based detection of the router; the DEALER
//! is `emq_transport::admin`'s),
//! [`format`] (tables and views), [`exit`] (the exit codes).
//!
//! The flow of one admin command: STATUS → emq or 0.3.13? → for emq, the
//! confirmation when the op needs one, then `ADMIN` (page after page with
//! `--all`); for 0.3.13, its own command or exit 4.

#![forbid(unsafe_code)]

pub mod client;
pub mod exit;
pub mod flags;
pub mod format;
pub mod op;

use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

use clap::CommandFactory;
use serde_json::Value;

pub use client::Flavour;
pub use emq_transport::admin::{AdminClient, Answer, ClientError};
pub use exit::Exit;
pub use flags::{Cli, Mode, Plan, UsageError};
pub use op::Op;

/// Where [`run`] writes, and how it asks for a confirmation.
pub struct Io<'a> {
    pub out: &'a mut dyn Write,
    pub err: &'a mut dyn Write,
    /// Ask the question (`Plan::confirm`); true to go on.
    pub ask: &'a mut dyn FnMut(&str) -> bool,
}

/// Carry out a plan.
pub fn run(plan: &Plan, io: Io) -> Exit {
    let result = match &plan.mode {
        // Rendered first, then written: clap_complete panics on a write
        // error, and a closed stdout (`emq-cli man | head`) ends quietly.
        Mode::Completions(shell) => {
            let mut text = Vec::new();
            clap_complete::generate(*shell, &mut Cli::command(), "emq-cli", &mut text);
            return write_out(io.out, &text);
        }
        Mode::Man => {
            let mut text = Vec::new();
            match clap_mangen::Man::new(Cli::command()).render(&mut text) {
                Ok(()) => return write_out(io.out, &text),
                Err(e) => Err(e),
            }
        }
        Mode::Vocabulary => {
            // The admin vocabulary plus every setting's one name (for
            // clients in other languages to read the same settings).
            let mut v = emqp_proto::admin::vocabulary();
            v["settings"] = emq_cli_support::known::to_json();
            writeln!(io.out, "{v}").map(|_| Exit::Ok)
        }
        Mode::Keygen { name, force } => return keygen(name, *force, io.out, io.err),
        Mode::Admin(op) => {
            // Declared before the socket `admin` makes, so dropped after it.
            let ctx = zmq::Context::new();
            return admin(&ctx, plan, op, io.out, io.err, io.ask);
        }
    };
    result.unwrap_or_else(|e| {
        let _ = writeln!(io.err, "emq-cli: {e}");
        Exit::Internal
    })
}

/// `emq-cli keygen NAME`: a fresh CURVE key pair in NAME.key and
/// NAME.key_secret (0600, never over existing files without --force).
fn keygen(name: &std::path::Path, force: bool, out: &mut dyn Write, err: &mut dyn Write) -> Exit {
    use emq_transport::curve;
    let written = curve::generate().and_then(|pair| {
        curve::write_key_pair(name, &pair, force).map(|paths| (pair.public, paths))
    });
    match written {
        Ok((public, (public_path, secret_path))) => {
            let _ = writeln!(
                out,
                "public key: {public}\n\
                 wrote {} (the public key: give it to the peers that must know it)\n\
                 wrote {} (the key pair: keep it here, mode 0600)",
                public_path.display(),
                secret_path.display()
            );
            Exit::Ok
        }
        Err(e @ curve::KeyError::Exists(_)) => {
            let _ = writeln!(err, "emq-cli: keygen: {e}");
            Exit::Usage
        }
        Err(e) => {
            let _ = writeln!(err, "emq-cli: keygen: {e}");
            Exit::Internal
        }
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn admin(
    ctx: &zmq::Context,
    plan: &Plan,
    op: &Op,
    out: &mut dyn Write,
    err: &mut dyn Write,
    ask: &mut dyn FnMut(&str) -> bool,
) -> Exit {
    let name = op.command_name();
    let fail = |err: &mut dyn Write, e: ClientError, hint: &str| {
        let _ = writeln!(
            err,
            "emq-cli: {name}: {e} from {} (admin address from {}){hint}",
            plan.admin, plan.admin_source
        );
        Exit::Internal
    };
    let client = match AdminClient::connect(
        ctx,
        &plan.admin,
        "emq-cli",
        plan.timeout,
        plan.curve.clone(),
    ) {
        Ok(c) => c,
        Err(e) => return fail(err, e, ""),
    };
    let (flavour, status) = match client::detect(&client) {
        Ok(x) => x,
        Err(e @ ClientError::Timeout { .. }) => {
            return fail(err, e, ": is a router's admin socket there?")
        }
        Err(e) => return fail(err, e, ""),
    };
    let result = match flavour {
        Flavour::EventMq0313 => legacy(&client, plan, op, status, out, err),
        Flavour::Emq => {
            if let Some(what) = &plan.confirm {
                if !ask(&format!("emq-cli: {what}? [y/N] ")) {
                    let _ = writeln!(err, "emq-cli: {name}: not confirmed; nothing done");
                    return Exit::Usage;
                }
            }
            emq(&client, plan, op, out, err)
        }
    };
    match result {
        Ok(exit) => exit,
        Err(e @ ClientError::Timeout { .. }) if flavour == Flavour::Emq => fail(
            err,
            e,
            ": the router answered STATUS but not ADMIN (an emq router older than the \
             control plane?)",
        ),
        Err(e) => fail(err, e, ""),
    }
}

/// An EventMQ 0.3.13 router: its own commands for status, workers,
/// schedules and shutdown; nothing else.
fn legacy(
    client: &AdminClient,
    plan: &Plan,
    op: &Op,
    status: Answer,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<Exit, ClientError> {
    let Some(command) = op.legacy_command() else {
        let _ = writeln!(
            err,
            "emq-cli: {}: the router at {} is EventMQ 0.3.13, which does not support it \
             (it has no control plane; status, workers, schedules and shutdown work with it)",
            op.command_name(),
            plan.admin
        );
        return Ok(Exit::Unsupported);
    };
    let answer = match command {
        emqp_proto::Command::Status => status,
        emqp_proto::Command::Disconnect => {
            client.disconnect()?;
            let raw = br#"{"ok":true,"shutting_down":true}"#.to_vec();
            let json = serde_json::from_slice(&raw).unwrap_or(Value::Null);
            Answer { raw, json }
        }
        other => client.query(other)?,
    };
    Ok(print(plan, op, &answer, out))
}

/// An emq router: ADMIN, page after page for `--all`.
fn emq(
    client: &AdminClient,
    plan: &Plan,
    op: &Op,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<Exit, ClientError> {
    let Some(key) = op.paged() else {
        let answer = client.request(&op.request(None))?;
        if let Some(exit) = refused(plan, op, &answer, out, err) {
            return Ok(exit);
        }
        let exit = print(plan, op, &answer, out);
        if more(&answer.json) && !plan.json {
            let _ = writeln!(
                err,
                "(more on the next pages: --all follows them, --limit N sets the page size)"
            );
        }
        return Ok(exit);
    };
    let mut pages = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..op::MAX_PAGES {
        let answer = client.request(&op.request(cursor.as_deref()))?;
        if let Some(exit) = refused(plan, op, &answer, out, err) {
            return Ok(exit);
        }
        // An opaque token, passed back as it came (a string from a router).
        cursor = answer
            .json
            .get("next_cursor")
            .filter(|c| !c.is_null())
            .map(|c| c.as_str().map_or_else(|| c.to_string(), String::from));
        pages.push(answer.json);
        if cursor.is_none() {
            break;
        }
    }
    if cursor.is_some() {
        let _ = writeln!(
            err,
            "emq-cli: {}: stopped after {} pages; narrow the search (--queue, --state, \
             --contains)",
            op.command_name(),
            op::MAX_PAGES
        );
    }
    let json = op::merge_pages(key, pages);
    let raw = json.to_string().into_bytes();
    Ok(print(plan, op, &Answer { raw, json }, out))
}

/// Whether a listing answer says more pages follow.
fn more(answer: &Value) -> bool {
    answer.get("next_cursor").is_some_and(|c| !c.is_null())
}

/// A refusal or an answer that is not the control plane's: reported, and
/// its exit code; `None` for `ok: true`.
fn refused(
    plan: &Plan,
    op: &Op,
    answer: &Answer,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Option<Exit> {
    match exit::for_answer(&answer.json) {
        Exit::Ok => None,
        Exit::Refused => {
            if plan.json {
                let _ = out.write_all(&answer.raw);
                let _ = out.write_all(b"\n");
            }
            let _ = writeln!(
                err,
                "emq-cli: {}: the router refused: {}",
                op.command_name(),
                format::refusal(&answer.json)
            );
            Some(Exit::Refused)
        }
        other => {
            let _ = writeln!(
                err,
                "emq-cli: {}: not an answer of the control plane: {}",
                op.command_name(),
                format::one_line(&String::from_utf8_lossy(&answer.raw), 200)
            );
            Some(other)
        }
    }
}

/// Print a successful answer: as received with `--json`, else rendered.
fn print(plan: &Plan, op: &Op, answer: &Answer, out: &mut dyn Write) -> Exit {
    let text = if plan.json {
        let mut raw = answer.raw.clone();
        raw.push(b'\n');
        raw
    } else {
        format::render(&op.admin, &answer.json, now_ms()).into_bytes()
    };
    write_out(out, &text)
}

/// Write `text` to stdout: a closed stdout (`emq-cli jobs | head`) is
/// the reader's choice, not an error (exit 0, nothing said; ripgrep's
/// rule); any other write error is exit 1.
fn write_out(out: &mut dyn Write, text: &[u8]) -> Exit {
    match out.write_all(text).and_then(|_| out.flush()) {
        Ok(()) => Exit::Ok,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Exit::Ok,
        Err(_) => Exit::Internal,
    }
}
