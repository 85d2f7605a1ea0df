//! `emq-pubsub`: binds the incoming ROUTER and the outgoing XPUB socket
//! and drives the sans-IO core ([`emq_pubsub::Pubsub`]) with them.
//!
//! The binary's shape, as every emq binary's: `flags` (in the library)
//! parses the command line and checks it with the environment and the
//! config file into a `Plan`; `driver.rs` serves it with the sockets and
//! the loop; this file maps failures to exit codes (2: bad options or
//! config file; 1: any other start-up error).

#![forbid(unsafe_code)]

mod driver;

use std::collections::HashMap;
use std::process::ExitCode;

use clap::Parser;
use emq_cli_support::{init_logging, set_log_format, Exit};
use emq_pubsub::Cli;

fn main() -> ExitCode {
    init_logging();
    let cli = Cli::parse();
    let env: HashMap<String, String> = std::env::vars().collect();
    let plan = match cli.plan(&env) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("emq-pubsub: error: {e}");
            return Exit::Usage.into();
        }
    };
    set_log_format(plan.log_format);
    match driver::run(&plan) {
        Ok(()) => Exit::Ok.into(),
        Err(e) => {
            log::error!("{e}");
            eprintln!("emq-pubsub: {e}");
            Exit::Internal.into()
        }
    }
}
