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
    let plan = match cli.plan(&|k| std::env::var(k).ok()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("emq-receiver: error: {e}");
            return Exit::Usage.into();
        }
    };
    let mut out = std::io::stdout().lock();
    let mut err = std::io::stderr();
    run(&plan, &mut out, &mut err).into()
}
