//! emq-receiver: see `emq-receiver --help` and the library docs.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::Parser;
use emq_receiver::{run, Cli, EXIT_USAGE};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let plan = match cli.plan() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("emq-receiver: error: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let mut out = std::io::stdout().lock();
    let mut err = std::io::stderr();
    ExitCode::from(run(&plan, &mut out, &mut err))
}
