//! What every emq binary's command line shares, as ripgrep's `crates/cli`
//! does for its binaries. Each binary has the same shape: a thin `main.rs`
//! parses the low-level flags (`flags::Cli`, clap), checks them with the
//! environment and the config file into a `flags::Plan`, calls
//! `run(&plan, ...)` and exits with the [`Exit`] it returns. This crate holds
//! the parts of that path the binaries share:
//!
//! - [`settings`]: the layering every binary follows (flag, `EVENTMQ_*`
//!   environment, the INI file `EVENTMQ_CONFIG_FILE`), with the
//!   environment passed in, never read here;
//! - [`known`]: every setting's one name, its older names and the
//!   sections that read it (unknown keys in a file are reported);
//! - [`duration`]: the one duration grammar (`5`, `250ms`, `2m`, `1h`) and
//!   the [`duration::Zero`] rule each duration setting picks;
//! - [`args`]: the shared flags ([`AuthArgs`], [`CurveArgs`],
//!   [`AccessArgs`]), declared once and flattened;
//! - [`exit`]: one [`Exit`] with each binary's documented codes;
//! - [`logging`]: the logger, [`init_logging`], and its format
//!   ([`LogArgs`]: `--log-format text|json`);
//! - [`otlp`]: the traces endpoint ([`OtlpArgs`]: `--otlp-endpoint`, else
//!   the standard `OTEL_EXPORTER_OTLP_*` environment).
//! - [`service`]: telling systemd the process is ready or stopping
//!   (`Type=notify`), a no-op elsewhere.
//!
//! It does no I/O of its own beyond reading the config file a binary names
//! and the service manager's notifications.

#![forbid(unsafe_code)]

pub mod args;
pub mod duration;
pub mod exit;
pub mod known;
pub mod logging;
pub mod otlp;
pub mod service;
pub mod settings;

pub use args::{AccessArgs, AuthArgs, CurveArgs};
pub use duration::{parse_duration, parse_positive_duration, DurationError, Zero};
pub use exit::Exit;
pub use logging::{init_logging, say_fatal, set_log_format, LogArgs, LogFormat, MessageLines};
pub use otlp::OtlpArgs;
pub use settings::{SettingError, Settings, SettingsError};
