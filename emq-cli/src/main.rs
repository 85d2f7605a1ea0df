//! emq-cli: see `emq-cli --help` and the library docs.

#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;

use clap::Parser;
use emq_cli::{run, Cli, Exit, Io};
use emq_cli_support::MessageLines;

fn main() -> ExitCode {
    // clap exits 2 on a usage error, 0 for --help and --version.
    let cli = Cli::parse();
    let env: HashMap<String, String> = std::env::vars().collect();
    let plan = match cli.plan(&env, std::io::stdin().is_terminal()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("emq-cli: error: {e}");
            return Exit::Usage.into();
        }
    };
    // Every stderr line through one sink (`--log-format json`: JSON lines;
    // the confirmation question stays text: it is asked of a person).
    let mut err = MessageLines::new("emq-cli", plan.log_format);
    for w in &plan.warnings {
        let _ = writeln!(err, "emq-cli: warning: {w}");
    }
    let mut out = std::io::stdout().lock();
    let mut ask = |question: &str| {
        eprint!("{question}");
        let _ = std::io::stderr().flush();
        let mut line = String::new();
        match std::io::stdin().lock().read_line(&mut line) {
            Ok(_) => matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes"),
            Err(_) => false,
        }
    };
    run(
        &plan,
        Io {
            out: &mut out,
            err: &mut err,
            ask: &mut ask,
        },
    )
    .into()
}
