//! Logging of the long-running binaries: to stderr, level `info` unless
//! `RUST_LOG` says otherwise (env_logger's filter syntax). A fatal error
//! is said once ([`say_fatal`]).

/// Start the logger; call once, first thing in `main`.
pub fn init_logging() {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
}

/// Say the error that stops `program` once on stderr: through the logger
/// when it shows errors (a log line like the others), else as
/// `program: error` (`RUST_LOG=off` does not hide why it stopped).
pub fn say_fatal(program: &str, e: &dyn std::fmt::Display) {
    // The program's crate as the target, as its own log lines have it.
    let target = program.replace('-', "_");
    if log::log_enabled!(target: &target, log::Level::Error) {
        log::error!(target: &target, "{e}");
    } else {
        eprintln!("{program}: {e}");
    }
}
