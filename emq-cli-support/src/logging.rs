//! Logging of the long-running binaries: to stderr, level `info` unless
//! `RUST_LOG` says otherwise (env_logger's filter syntax).

/// Start the logger; call once, first thing in `main`.
pub fn init_logging() {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
}
