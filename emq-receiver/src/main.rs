//! emq-receiver: see `emq-receiver --help` and the library docs.
//!
//! The binary's shape, as every emq binary's: parse the flags, check them
//! with the environment into a plan, run it, exit with its code.

#![forbid(unsafe_code)]

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;
use emq_cli_support::MessageLines;
use emq_receiver::{run, Cli, Exit};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let env: std::collections::HashMap<String, String> = std::env::vars().collect();
    let (plan, warnings) = match cli.plan_from(&env) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("emq-receiver: error: {e}");
            return Exit::Usage.into();
        }
    };
    // Every stderr line through one sink (`--log-format json`: JSON lines).
    let mut err = MessageLines::new("emq-receiver", plan.log_format);
    for w in warnings {
        let _ = writeln!(err, "emq-receiver: warning: {w}");
    }
    let mut out = std::io::stdout().lock();
    run(&plan, &mut out, &mut err).into()
}
