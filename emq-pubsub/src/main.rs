//! `emq-pubsub`: binds the incoming ROUTER and the outgoing XPUB socket
//! and drives the sans-IO core ([`emq_pubsub::Pubsub`]) with them.
//!
//! `options.rs` (in the library) turns flags, environment and config file
//! into checked options; `driver.rs` holds the sockets and the loop; this
//! file maps failures to exit codes (2: bad options or config file; 1: any
//! other start-up error).

#![forbid(unsafe_code)]

mod driver;

use std::process::ExitCode;

use clap::Parser;
use emq_pubsub::options::{Cli, Options, SECTION};
use emqp_proto::settings::Settings;

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    let cli = Cli::parse();
    let opts = match Settings::load(SECTION)
        .map_err(|e| e.to_string())
        .and_then(|s| Options::resolve(cli, &s))
    {
        Ok(o) => o,
        Err(e) => {
            eprintln!("emq-pubsub: error: {e}");
            return ExitCode::from(2);
        }
    };
    match driver::run(&opts) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            log::error!("{e}");
            eprintln!("emq-pubsub: {e}");
            ExitCode::from(1)
        }
    }
}
