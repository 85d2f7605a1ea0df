//! `emq-jobmanager`: connect to an EventMQ router and run jobs.
//!
//! The binary's shape, as every emq binary's: [`flags`] parses the command
//! line ([`flags::Cli`]) and checks it with the environment and the config
//! file into a [`flags::Plan`]; [`run`] carries it out and returns the
//! [`Exit`] (2: a configuration that cannot work; 1: any other failure;
//! else the status the job manager leaves with).

#![forbid(unsafe_code)]

mod flags;

use std::collections::HashMap;
use std::process::ExitCode;

use clap::Parser;
use emq_cli_support::{init_logging, say_fatal, set_log_format, Exit};
use emq_jobmanager::JobManager;

use flags::{exit_for, Cli, Plan};

// mimalloc: the socket loop allocates a handful of small buffers per job
// (frames, the parsed job, the reply); glibc's malloc was about a tenth
// of the job manager's CPU under load.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    init_logging();
    let cli = Cli::parse();
    let env: HashMap<String, String> = std::env::vars().collect();
    let plan = match cli.plan(&env) {
        Ok(p) => p,
        Err(e) => {
            say_fatal("emq-jobmanager", &e);
            return Exit::Usage.into();
        }
    };
    run(&plan).into()
}

/// Run the job manager of `plan` until a signal or a fatal error.
fn run(plan: &Plan) -> Exit {
    set_log_format(plan.log_format);
    if let Some(name) = &plan.name {
        log::info!("job manager name: {name}");
    }
    match JobManager::builder()
        .config(plan.manager.clone())
        .build()
        .and_then(JobManager::run_until_signal)
    {
        Ok(code) => Exit::status(code),
        Err(e) => {
            say_fatal("emq-jobmanager", &e);
            exit_for(&e)
        }
    }
}
