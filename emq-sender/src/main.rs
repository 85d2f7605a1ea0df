//! emq-sender: see `emq-sender --help` and the library docs.

#![forbid(unsafe_code)]

use std::io::{BufReader, IsTerminal};
use std::process::ExitCode;

use clap::Parser;
use emq_sender::{progress_wanted, run, Cli, Exit, Io};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let env: std::collections::HashMap<String, String> = std::env::vars().collect();
    let plan = match cli.plan_from(&env) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("emq-sender: error: {e}");
            return Exit::Usage.into();
        }
    };
    for w in &plan.warnings {
        eprintln!("emq-sender: warning: {w}");
    }
    if plan.mode == emq_sender::Mode::Bulk && std::io::stdin().is_terminal() {
        eprintln!("emq-sender: reading jobs from stdin, one JSON job per line (Ctrl-D ends)");
    }
    let mut out = std::io::stdout().lock();
    let mut err = std::io::stderr();
    let io = Io {
        out: &mut out,
        err: &mut err,
        progress: progress_wanted(),
    };
    run(&plan, BufReader::new(std::io::stdin()), io).into()
}
