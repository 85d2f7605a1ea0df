//! Logging of the long-running binaries (router, job manager, pub/sub): to
//! stderr, level `info` unless `RUST_LOG` says otherwise (env_logger's
//! filter syntax). A fatal error is said once ([`say_fatal`]).
//!
//! # Formats
//!
//! [`LogFormat::Text`], the default, is env_logger's line
//! (`[time LEVEL target] message`). [`LogFormat::Json`] (`--log-format
//! json`, `EVENTMQ_LOG_FORMAT`, `log_format` in the INI file: see
//! [`LogArgs`]) writes one JSON object per line, for a collector:
//!
//! ```text
//! {"time":"2026-12-06T14:00:57.123Z","level":"INFO","target":"emq_router::driver","message":"job done","msgid":"…","queue":"default","worker":"…"}
//! ```
//!
//! `time` (RFC 3339, UTC, milliseconds), `level`, `target` and `message`
//! are always there; the structured fields a log call carries (the `log`
//! crate's key-values: `log::info!(msgid = m, queue = q; "…")`) follow
//! as their own keys — job lines carry `msgid` and, where known, `queue`
//! and `worker`. A number stays a number; anything else is its text. In
//! the text format the fields are not printed (the message says what a
//! reader needs, as before).
//!
//! # Why a switch
//!
//! A binary starts the logger first thing ([`init_logging`]), before its
//! flags, environment and config file are checked into a plan (so that
//! what goes wrong while checking them is logged like the rest), and the
//! format is a setting of that plan. So the logger is installed once, in
//! text, and [`set_log_format`] switches it when the plan is known: both
//! formats are env_logger loggers built from the same `RUST_LOG` filter.
//!
//! Why `log`'s key-values rather than `tracing`: every emq crate logs
//! through `log` and env_logger; its `kv` feature (no extra dependency)
//! gives job lines their fields without rewriting every call, and the
//! JSON line is a format closure over env_logger (serde_json writes it).

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::{Args, ValueEnum};
use log::kv::{Key, Value, VisitSource};

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum LogFormat {
    /// `[time LEVEL target] message` (the default)
    #[default]
    Text,
    /// One JSON object per line: time, level, target, message and, where
    /// known, msgid, queue and worker
    Json,
}

impl std::str::FromStr for LogFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<LogFormat, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            other => Err(format!("{other:?} is not a log format: text or json")),
        }
    }
}

/// The settings key of the format (`EVENTMQ_LOG_FORMAT`, `log_format` in
/// the INI file).
pub const LOG_FORMAT_KEY: &str = "LOG_FORMAT";

/// The logging flag of every long-running binary, flattened into its
/// `Cli`.
#[derive(Args, Debug, Clone, Default, PartialEq, Eq)]
#[command(next_help_heading = "Logging")]
pub struct LogArgs {
    /// How log lines are written to stderr: `text`, or `json` (one object
    /// per line: time, level, target, message and, where known, msgid,
    /// queue and worker); the level is RUST_LOG's
    /// [env: EVENTMQ_LOG_FORMAT] [default: text]
    #[arg(long, value_name = "FORMAT", value_enum)]
    pub log_format: Option<LogFormat>,
}

impl LogArgs {
    /// The flag, else the setting [`LOG_FORMAT_KEY`], else text.
    pub fn resolve(
        &self,
        settings: &crate::Settings,
    ) -> Result<LogFormat, crate::settings::SettingError> {
        match self.log_format {
            Some(f) => Ok(f),
            None => Ok(settings
                .value_with(LOG_FORMAT_KEY, |t| t.parse::<LogFormat>())?
                .unwrap_or_default()),
        }
    }
}

static JSON: AtomicBool = AtomicBool::new(false);

/// Both formats behind one installed logger.
struct Switch {
    text: env_logger::Logger,
    json: env_logger::Logger,
}

impl log::Log for Switch {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        self.text.enabled(metadata)
    }

    fn log(&self, record: &log::Record<'_>) {
        if JSON.load(Ordering::Relaxed) {
            self.json.log(record)
        } else {
            self.text.log(record)
        }
    }

    fn flush(&self) {
        self.text.flush();
        self.json.flush();
    }
}

fn builder() -> env_logger::Builder {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info"))
}

/// Start the logger, in text; call once, first thing in `main`. (A second
/// call does nothing.)
pub fn init_logging() {
    let text = builder().build();
    let json = builder().format(write_json).build();
    let max = text.filter();
    if log::set_boxed_logger(Box::new(Switch { text, json })).is_ok() {
        log::set_max_level(max);
    }
}

/// From now on write lines in `format`.
pub fn set_log_format(format: LogFormat) {
    JSON.store(format == LogFormat::Json, Ordering::Relaxed);
}

/// One JSON line (see the module documentation).
fn write_json(
    buf: &mut env_logger::fmt::Formatter,
    record: &log::Record<'_>,
) -> std::io::Result<()> {
    let line = json_line(&buf.timestamp_millis().to_string(), record);
    writeln!(buf, "{line}")
}

/// The JSON object of `record` logged at `time`.
fn json_line(time: &str, record: &log::Record<'_>) -> String {
    let mut obj = serde_json::Map::new();
    obj.insert("time".into(), time.into());
    obj.insert("level".into(), record.level().as_str().into());
    obj.insert("target".into(), record.target().into());
    obj.insert("message".into(), record.args().to_string().into());
    let mut fields = Fields(&mut obj);
    // A visitor that never fails.
    let _ = record.key_values().visit(&mut fields);
    serde_json::Value::Object(obj).to_string()
}

/// The key-values of a record as JSON members (the four fixed keys win
/// over a field of the same name).
struct Fields<'a>(&'a mut serde_json::Map<String, serde_json::Value>);

impl<'kvs> VisitSource<'kvs> for Fields<'_> {
    fn visit_pair(&mut self, key: Key<'kvs>, value: Value<'kvs>) -> Result<(), log::kv::Error> {
        let key = key.as_str();
        if matches!(key, "time" | "level" | "target" | "message") {
            return Ok(());
        }
        let v: serde_json::Value = if let Some(b) = value.to_bool() {
            b.into()
        } else if let Some(n) = value.to_u64() {
            n.into()
        } else if let Some(n) = value.to_i64() {
            n.into()
        } else {
            value.to_string().into()
        };
        self.0.insert(key.to_string(), v);
        Ok(())
    }
}

/// The stderr of a tool that talks to a person (emq-sender, emq-receiver,
/// emq-cli). In text, lines go to stderr as written. With
/// `--log-format json` every line becomes a log record of the program's
/// own target (level `ERROR` for a line saying `error:` after the
/// program's name, else `WARN`: these tools write to stderr only what a
/// person should see — failures, refusals, notices; the name and the word
/// are left out of the message), so each stderr line is one JSON object
/// like the other binaries' logs. A partial last line is written
/// when the sink is dropped.
pub struct MessageLines {
    program: String,
    target: String,
    json: bool,
    pending: Vec<u8>,
}

impl MessageLines {
    /// The sink for `program` in `format` (json installs the logger).
    pub fn new(program: &str, format: LogFormat) -> MessageLines {
        let json = format == LogFormat::Json;
        if json {
            init_logging();
            set_log_format(LogFormat::Json);
        }
        MessageLines {
            program: program.to_string(),
            target: program.replace('-', "_"),
            json,
            pending: Vec::new(),
        }
    }

    /// One message line as a log record.
    fn emit(&self, line: &[u8]) {
        let line = String::from_utf8_lossy(line);
        let (level, message) = message_level(&self.program, line.trim_end_matches('\r'));
        log::log!(target: &self.target, level, "{message}");
    }
}

/// A message line's level and text: `PROGRAM: error: …` is an error,
/// anything else (`PROGRAM: warning: …` among them) a warning.
fn message_level<'a>(program: &str, line: &'a str) -> (log::Level, &'a str) {
    let rest = line
        .strip_prefix(program)
        .and_then(|r| r.strip_prefix(": "))
        .unwrap_or(line);
    if let Some(m) = rest.strip_prefix("error: ") {
        (log::Level::Error, m)
    } else if let Some(m) = rest.strip_prefix("warning: ") {
        (log::Level::Warn, m)
    } else {
        (log::Level::Warn, rest)
    }
}

impl Write for MessageLines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if !self.json {
            return std::io::stderr().write(buf);
        }
        self.pending.extend_from_slice(buf);
        while let Some(at) = self.pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=at).collect();
            self.emit(&line[..line.len() - 1]);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.json {
            log::logger().flush();
            Ok(())
        } else {
            std::io::stderr().flush()
        }
    }
}

impl Drop for MessageLines {
    fn drop(&mut self) {
        if self.json && !self.pending.is_empty() {
            let line = std::mem::take(&mut self.pending);
            self.emit(&line);
        }
    }
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

#[cfg(test)]
mod tests {
    #[test]
    fn a_message_line_is_an_error_when_it_says_so_else_a_warning() {
        assert_eq!(
            message_level("emq-cli", "emq-cli: error: bad flag"),
            (log::Level::Error, "bad flag")
        );
        assert_eq!(
            message_level("emq-cli", "emq-cli: warning: unknown key"),
            (log::Level::Warn, "unknown key")
        );
        assert_eq!(
            message_level("emq-sender", "emq-sender: job m is a duplicate"),
            (log::Level::Warn, "job m is a duplicate")
        );
        assert_eq!(
            message_level("emq-cli", "other text"),
            (log::Level::Warn, "other text")
        );
    }

    use super::*;
    use std::collections::HashMap;

    fn line(record: &log::Record<'_>) -> serde_json::Value {
        serde_json::from_str(&json_line("2026-12-06T14:00:57.123Z", record)).unwrap()
    }

    #[test]
    fn a_json_line_has_the_four_keys_and_the_records_fields() {
        let kvs: [(&str, Value<'_>); 4] = [
            ("msgid", Value::from("4f1c")),
            ("queue", Value::from("default")),
            ("attempt", Value::from(2u64)),
            ("level", Value::from("not this one")),
        ];
        let args = format_args!("job \"done\"\n in {} ms", 12);
        let r = log::Record::builder()
            .level(log::Level::Warn)
            .target("emq_router::driver")
            .args(args)
            .key_values(&kvs)
            .build();
        let v = line(&r);
        assert_eq!(
            v,
            serde_json::json!({
                "time": "2026-12-06T14:00:57.123Z",
                "level": "WARN",
                "target": "emq_router::driver",
                "message": "job \"done\"\n in 12 ms",
                "msgid": "4f1c",
                "queue": "default",
                "attempt": 2,
            })
        );
        // One line: the newline in the message is escaped.
        assert!(!json_line("t", &r).contains('\n'));
    }

    #[test]
    fn a_record_without_fields_has_the_four_keys_only() {
        let r = log::Record::builder()
            .level(log::Level::Info)
            .target("emq_jobmanager")
            .args(format_args!("started"))
            .build();
        let v = line(&r);
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, ["time", "level", "target", "message"]);
    }

    #[test]
    fn the_format_is_the_flag_else_the_setting_else_text() {
        let settings = |v: Option<&str>| {
            let mut env: HashMap<String, String> = HashMap::new();
            if let Some(v) = v {
                env.insert("EVENTMQ_LOG_FORMAT".into(), v.into());
            }
            crate::Settings::load_from("emq-cli-support-test-no-section", &env).unwrap()
        };
        let none = LogArgs::default();
        let json = LogArgs {
            log_format: Some(LogFormat::Json),
        };
        assert_eq!(none.resolve(&settings(None)), Ok(LogFormat::Text));
        assert_eq!(none.resolve(&settings(Some("JSON"))), Ok(LogFormat::Json));
        assert_eq!(
            LogArgs {
                log_format: Some(LogFormat::Text)
            }
            .resolve(&settings(Some("json"))),
            Ok(LogFormat::Text),
            "the flag wins"
        );
        assert_eq!(json.resolve(&settings(None)), Ok(LogFormat::Json));
        let e = none.resolve(&settings(Some("xml"))).unwrap_err();
        assert!(e.to_string().contains("EVENTMQ_LOG_FORMAT"), "{e}");
        assert!(e.to_string().contains("text or json"), "{e}");
    }
}
