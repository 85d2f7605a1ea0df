//! emq-receiver: see `emq-receiver --help` and the library docs.
//!
//! The binary's shape, as every emq binary's: parse the flags, check them
//! with the environment into a plan, run it, exit with its code.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::Parser;
use emq_receiver::{run, Cli, Exit};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let env: std::collections::HashMap<String, String> = std::env::vars().collect();
    let plan = match cli.plan_from(&env) {
        Ok((p, warnings)) => {
            for w in warnings {
                eprintln!("emq-receiver: warning: {w}");
            }
            p
        }
        Err(e) => {
            eprintln!("emq-receiver: error: {e}");
            return Exit::Usage.into();
        }
    };
    let mut out = std::io::stdout().lock();
    let mut err = std::io::stderr();
    run(&plan, &mut out, &mut err).into()
}
