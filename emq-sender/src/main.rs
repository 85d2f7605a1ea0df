//! emq-sender: see `emq-sender --help` and the library docs.

#![forbid(unsafe_code)]

use std::io::{BufReader, IsTerminal, Write};
use std::process::ExitCode;

use clap::Parser;
use emq_cli_support::MessageLines;
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
    // Every stderr line through one sink (`--log-format json`: JSON lines).
    let mut err = MessageLines::new("emq-sender", plan.log_format);
    for w in &plan.warnings {
        let _ = writeln!(err, "emq-sender: warning: {w}");
    }
    if plan.mode == emq_sender::Mode::Bulk && std::io::stdin().is_terminal() {
        let _ = writeln!(
            err,
            "emq-sender: reading jobs from stdin, one JSON job per line (Ctrl-D ends)"
        );
    }
    let mut out = std::io::stdout().lock();
    let io = Io {
        out: &mut out,
        err: &mut err,
        progress: progress_wanted(),
    };
    run(&plan, BufReader::new(std::io::stdin()), io).into()
}
