//! emq-bench: raw zmq limit, emq end to end (memory and durable), single-job
//! round trip, router memory with a million buffered jobs. Prints a table
//! and optionally writes JSON. Targets are reported, never asserted.

#![forbid(unsafe_code)]

mod flags;
mod run;

use std::process::ExitCode;

use clap::Parser;

use flags::Cli;

/// The binary's shape, as every emq binary's: parse the flags, check them
/// into a plan, run it, exit with its code.
fn main() -> ExitCode {
    let plan = Cli::parse().plan();
    run::run(&plan).into()
}
