//! `emq-router`: binds the frontend, backend and admin ROUTER sockets and
//! drives the sans-IO core (`emq_router_core::Router`) with them and the
//! journal store, in the call order the core documents.
//!
//! One poll loop: every socket is drained (non-blocking reads until
//! EAGAIN, bounded per round; backend first) into the core; when the
//! core's `poll_timeout()` is reached, `handle_timeout(now)`; then the
//! actions are carried out in order — sends at once (a failure, such as
//! EHOSTUNREACH or EAGAIN at the peer's high-water mark, goes back as
//! `SendFailed`, and then `Flushed` says they all went), journal batches appended to the store in one transaction
//! each with the outcome fed back as `JournalDone` (the core holds
//! acknowledgements and dispatches until then, and handles a failed
//! batch). zmq_poll blocks only after a round that found nothing, and only
//! until the core's next deadline; with `--metrics` the Prometheus text is
//! re-rendered from the core's snapshot at most every 500 ms and served by
//! a separate HTTP thread.
//!
//! Start-up order: options, journal (default: the data dir; damaged or
//! locked → exit 2), ZAP handler (when any access rule is active — the
//! admin loopback default always is), the three sockets (ZAP domain /
//! PLAIN or CURVE server, a monitor logging failed handshakes, and
//! ZMQ_MAXMSGSIZE — twice `--max-message-size`: the core
//! refuses what is over the limit itself, with a REJECT and a log line —
//! set before bind), metrics endpoint,
//! then the journal's jobs, dead letters and schedules go into the core.
//!
//! The binary's shape, as every emq binary's: `flags` parses the command
//! line (`flags::Cli`) and checks it with the environment and the config
//! file into a `flags::Plan`; `driver.rs` serves the plan with its parts
//! (`sockets.rs`, `web.rs`, `journal_port.rs` with `ha.rs` and
//! `pg_writer.rs`) and the loop; this file maps failures to exit codes
//! (2: the journal cannot be used; 1: a bad option or any other start-up
//! error).

#![forbid(unsafe_code)]

mod driver;
mod flags;
mod ha;
mod journal_port;
mod outbox;
mod pg_writer;
mod sockets;
mod web;

use std::collections::HashMap;
use std::process::ExitCode;

use clap::Parser;
use emq_cli_support::{init_logging, say_fatal, set_log_format, Exit};

use driver::{run, Fail};
use flags::Cli;

// mimalloc: the poll loop allocates a few dozen small buffers per job
// (frames in and out, the stored job); glibc's malloc and free were about
// a seventh of the router's CPU under load. Measured with
// `scripts/bench.sh --concurrency 64`: router CPU per job 8.1 -> 7.7 us
// (medians of 5).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    init_logging();
    let cli = Cli::parse();
    let env: HashMap<String, String> = std::env::vars().collect();
    let served = cli.plan(&env).map_err(Fail::from).and_then(|plan| {
        set_log_format(plan.log_format);
        run(&plan)
    });
    match served {
        Ok(()) => Exit::Ok.into(),
        Err(Fail(exit, e)) => {
            say_fatal("emq-router", &e);
            exit.into()
        }
    }
}
