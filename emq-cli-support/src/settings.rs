//! EventMQ-style settings: an INI file section overridden by `EVENTMQ_*`
//! environment variables, as 0.3.13's `import_settings` reads them.
//! Command-line flags (applied by each binary) win over both.
//!
//! The file is `$EVENTMQ_CONFIG_FILE`, else `/etc/eventmq.conf`; a missing
//! default file is not an error, a missing named file is.
//!
//! Layering, the one rule every binary follows: a flag wins, else the
//! `EVENTMQ_<KEY>` variable, else the key in the component's section, else
//! in `[global]`, else the default. [`Settings::pick`], [`Settings::value`]
//! and [`Settings::duration`] apply it; a blank setting counts as unset; a
//! bad one is a [`SettingError`] that names where it came from. Durations
//! use the grammar of [`crate::duration`], and each says what its zero
//! means ([`Zero`]).
//!
//! The environment is a parameter ([`Settings::load_from`]): a binary
//! passes its own (`std::env::vars()`, with `--config` over
//! `EVENTMQ_CONFIG_FILE` where it has that flag), tests pass a map.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::duration::{parse_duration, Zero};
use crate::known;

/// The default config file 0.3.13 reads.
pub const DEFAULT_CONFIG_FILE: &str = "/etc/eventmq.conf";

/// Settings of one section (`router`, `jobmanager`, ...), keys upper-cased.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    values: HashMap<String, String>,
    /// Where each value came from, for `--help`-style diagnostics and logs.
    sources: HashMap<String, String>,
    /// Unknown keys in the file ([`Settings::warnings`]).
    warnings: Vec<String>,
}

/// `key`'s setting name: an older name ([`known::Known::aliases`]) read as
/// the setting's one name, any other key as it is.
fn canonical(key: &str) -> String {
    known::lookup(key).map_or(key, |k| k.name).to_string()
}

#[derive(Debug)]
pub enum SettingsError {
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    Syntax {
        path: PathBuf,
        line: usize,
        text: String,
    },
}

impl fmt::Display for SettingsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SettingsError::Read { path, error } => {
                write!(f, "cannot read config file {}: {error}", path.display())
            }
            SettingsError::Syntax { path, line, text } => {
                write!(f, "{}:{line}: not an INI line: {text:?}", path.display())
            }
        }
    }
}

impl std::error::Error for SettingsError {}

/// A setting that does not parse, with where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct SettingError {
    pub key: String,
    pub value: String,
    /// e.g. `environment EVENTMQ_HWM` or `/etc/eventmq.conf [router]`.
    pub source: String,
    /// What was wrong, if more than "does not parse".
    pub reason: Option<String>,
}

impl fmt::Display for SettingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "bad value {:?} for {} (from {})",
            self.value, self.key, self.source
        )?;
        if let Some(r) = &self.reason {
            write!(f, ": {r}")?;
        }
        Ok(())
    }
}

impl std::error::Error for SettingError {}

impl From<SettingError> for String {
    fn from(e: SettingError) -> String {
        e.to_string()
    }
}

impl Settings {
    /// The setting `key` parsed with `parse`; `None` if unset or blank.
    pub fn value_with<T, E: fmt::Display>(
        &self,
        key: &str,
        parse: impl FnOnce(&str) -> Result<T, E>,
    ) -> Result<Option<T>, SettingError> {
        let Some(text) = self.get(key).filter(|t| !t.trim().is_empty()) else {
            return Ok(None);
        };
        parse(text.trim()).map(Some).map_err(|e| SettingError {
            key: key.to_string(),
            value: text.to_string(),
            source: self.source(key).unwrap_or("settings").to_string(),
            reason: Some(e.to_string()).filter(|r| !r.is_empty()),
        })
    }

    /// The setting `key` read by `T`'s `FromStr`; `None` if unset or blank.
    pub fn value<T: std::str::FromStr>(&self, key: &str) -> Result<Option<T>, SettingError> {
        self.value_with(key, |t| t.parse::<T>().map_err(|_| ""))
    }

    /// The flag, else the setting `key`, else `default`.
    pub fn pick<T: std::str::FromStr>(
        &self,
        flag: Option<T>,
        key: &str,
        default: T,
    ) -> Result<T, SettingError> {
        match flag {
            Some(v) => Ok(v),
            None => Ok(self.value(key)?.unwrap_or(default)),
        }
    }

    /// The duration setting `key` ([`crate::duration`]'s grammar); `None`
    /// if unset or blank.
    pub fn value_duration(&self, key: &str) -> Result<Option<Duration>, SettingError> {
        self.value_with(key, parse_duration)
    }

    /// [`Settings::pick`] for a duration: the flag (`what`, parsed by
    /// [`crate::duration::parse_duration`]), else the setting `key`, else
    /// `default`; a zero from the flag or the setting must pass `zero`.
    pub fn duration(
        &self,
        flag: Option<Duration>,
        key: &str,
        default: Duration,
        zero: Zero,
        what: &str,
    ) -> Result<Duration, SettingError> {
        let (d, source) = match flag {
            Some(d) => (d, "the command line".to_string()),
            None => match self.value_duration(key)? {
                Some(d) => (d, self.source(key).unwrap_or("settings").to_string()),
                None => (default, "the default".to_string()),
            },
        };
        if zero.admits(d) {
            return Ok(d);
        }
        Err(SettingError {
            key: what.to_string(),
            value: format!("{}", d.as_secs_f64()),
            source,
            reason: Some("must be a positive number of seconds".into()),
        })
    }

    /// [`Settings::load`] with an explicit environment (for tests).
    pub fn load_from(
        section: &str,
        env: &HashMap<String, String>,
    ) -> Result<Settings, SettingsError> {
        Settings::load_client(section, &[], env)
    }

    /// The settings of a tool that connects to another: its own `section`
    /// (and `[global]`, and the environment) as [`Settings::load_from`]
    /// reads them, and for each `(KEY, server_section)` in `addresses`
    /// that the environment and the tool's own section leave unset (or
    /// set only in `[global]`), the server's own setting — the router's
    /// `FRONTEND_ADDR` in `[router]` is where emq-sender connects, its
    /// `ADMINISTRATIVE_ADDR` where emq-cli does. Only those keys come from
    /// the server's section: its key files are not the client's.
    pub fn load_client(
        section: &str,
        addresses: &[(&str, &str)],
        env: &HashMap<String, String>,
    ) -> Result<Settings, SettingsError> {
        let mut s = Settings::default();
        let (path, required) = match env.get("EVENTMQ_CONFIG_FILE") {
            Some(p) if !p.is_empty() => (PathBuf::from(p), true),
            _ => (PathBuf::from(DEFAULT_CONFIG_FILE), false),
        };
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => Some(text),
            Err(e) if !required && e.kind() == std::io::ErrorKind::NotFound => None,
            Err(error) => return Err(SettingsError::Read { path, error }),
        };
        if let Some(text) = &text {
            s.apply_ini(&path, text, section, true)?;
        }
        s.apply_env(env);
        for (key, server) in addresses {
            let key = canonical(key);
            let own = s.source(&key).is_some_and(|w| !w.ends_with("[global]"));
            if own || server == &section {
                continue;
            }
            if let Some(text) = &text {
                let mut theirs = Settings::default();
                theirs.apply_ini(&path, text, server, false)?;
                let from_global = theirs.source(&key).is_none_or(|w| w.ends_with("[global]"));
                if let (Some(v), false) = (theirs.get(&key), from_global) {
                    let source = theirs.source(&key).unwrap_or("").to_string();
                    s.values.insert(key.clone(), v.to_string());
                    s.sources.insert(key, source);
                }
            }
        }
        Ok(s)
    }

    /// `EVENTMQ_<KEY>` variables over the file; an older name
    /// (`EVENTMQ_WORKER_ADDR`) counts as its setting's name unless that
    /// name is set too.
    fn apply_env(&mut self, env: &HashMap<String, String>) {
        let mut names: Vec<(&String, &String)> = env.iter().collect();
        // Older names first, so that the setting's own name wins.
        names.sort_by_key(|(k, _)| {
            let n = k.strip_prefix("EVENTMQ_").unwrap_or(k);
            known::lookup(n).is_some_and(|s| s.name == n)
        });
        for (k, v) in names {
            if let Some(name) = k.strip_prefix("EVENTMQ_") {
                if name != "CONFIG_FILE" {
                    let key = canonical(name);
                    self.values.insert(key.clone(), v.clone());
                    self.sources.insert(key, format!("environment {k}"));
                }
            }
        }
    }

    /// Read the INI `text` for `section` (and `[global]`); `report`: note
    /// each key [`known`] does not know, in any section, in
    /// [`Settings::warnings`].
    fn apply_ini(
        &mut self,
        path: &Path,
        text: &str,
        section: &str,
        report: bool,
    ) -> Result<(), SettingsError> {
        let mut current: Option<String> = None;
        // Keys set under their own name in each section: an older name
        // in the same section does not override them.
        let mut by_name: HashMap<(String, String), ()> = HashMap::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
                continue;
            }
            if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                current = Some(name.trim().to_string());
                continue;
            }
            let Some((k, v)) = line.split_once('=').or_else(|| line.split_once(':')) else {
                return Err(SettingsError::Syntax {
                    path: path.to_path_buf(),
                    line: i + 1,
                    text: raw.to_string(),
                });
            };
            let written = k.trim().to_ascii_uppercase();
            let here = current.as_deref().unwrap_or("");
            if report && known::lookup(&written).is_none() {
                let mut w = format!(
                    "{}:{}: unknown setting {written} in [{here}] (ignored)",
                    path.display(),
                    i + 1
                );
                if let Some(near) = known::nearest(&written) {
                    w.push_str(&format!("; did you mean {near}?"));
                }
                self.warnings.push(w);
            }
            // 0.3.13 reads [global] first, then the component's section.
            let applies = matches!(current.as_deref(), Some(c) if c == section || c == "global");
            if applies {
                let key = canonical(&written);
                let own_name = key == written;
                if !own_name && by_name.contains_key(&(here.to_string(), key.clone())) {
                    continue; // the setting's own name wins over an older one
                }
                if own_name {
                    by_name.insert((here.to_string(), key.clone()), ());
                }
                let from_global = here == "global";
                if from_global
                    && self
                        .sources
                        .get(&key)
                        .is_some_and(|s| !s.contains("[global]"))
                {
                    continue; // the component's own section wins over [global]
                }
                self.values.insert(key.clone(), v.trim().to_string());
                self.sources
                    .insert(key, format!("{} [{here}]", path.display()));
            }
        }
        Ok(())
    }

    /// What reading the file found worth saying: keys no emq tool reads,
    /// each with its file, line and the nearest known name. A binary logs
    /// them (or prints them) once at start.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// [`Settings::warnings`] as log warnings (for the binaries that log).
    pub fn log_warnings(&self) {
        for w in &self.warnings {
            log::warn!("{w}");
        }
    }

    /// The value of `key` (upper case, without the `EVENTMQ_` prefix).
    /// An older name reads its setting (`WORKER_ADDR` is `BACKEND_ADDR`).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.values.get(&canonical(key)).map(String::as_str)
    }

    /// Where `key` was set, e.g. `environment EVENTMQ_HWM`.
    pub fn source(&self, key: &str) -> Option<&str> {
        self.sources.get(&canonical(key)).map(String::as_str)
    }

    /// Set a value as if from the environment (used by binaries and tests).
    pub fn set(&mut self, key: &str, value: &str) {
        let key = canonical(key);
        self.values.insert(key.clone(), value.to_string());
        self.sources.insert(key, "set".to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn file_section_then_environment() {
        let dir = std::env::temp_dir().join(format!("emq-settings-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("eventmq.conf");
        std::fs::write(
            &path,
            "[global]\nhwm = 5\nfrontend_addr = tcp://g\n[router]\nfrontend_addr=tcp://127.0.0.1:1\n# c\nbackend_addr: tcp://127.0.0.1:2\n[jobmanager]\nqueues=x\n",
        )
        .unwrap();
        let p = path.to_str().unwrap();
        let s = Settings::load_from(
            "router",
            &env(&[
                ("EVENTMQ_CONFIG_FILE", p),
                ("EVENTMQ_BACKEND_ADDR", "tcp://127.0.0.1:3"),
            ]),
        )
        .unwrap();
        assert_eq!(s.get("FRONTEND_ADDR"), Some("tcp://127.0.0.1:1"));
        assert_eq!(s.get("BACKEND_ADDR"), Some("tcp://127.0.0.1:3"));
        assert_eq!(s.get("HWM"), Some("5"));
        assert_eq!(s.get("QUEUES"), None);
        assert_eq!(
            s.source("BACKEND_ADDR"),
            Some("environment EVENTMQ_BACKEND_ADDR")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn layering_flag_then_setting_then_default() {
        let mut s = Settings::default();
        s.set("HWM", "7");
        s.set("BLANK", "  ");
        s.set("BAD", "many");
        s.set("HB", "250ms");
        assert_eq!(s.pick(Some(3u32), "HWM", 1), Ok(3));
        assert_eq!(s.pick(None, "HWM", 1u32), Ok(7));
        assert_eq!(s.pick(None, "MISSING", 1u32), Ok(1));
        assert_eq!(s.pick(None, "BLANK", 1u32), Ok(1));
        assert_eq!(s.value::<u32>("BLANK"), Ok(None));
        let e = s.pick(None, "BAD", 1u32).unwrap_err();
        assert_eq!(e.to_string(), "bad value \"many\" for BAD (from set)");
    }

    #[test]
    fn durations_flag_then_setting_then_default_with_their_zero_rule() {
        let mut s = Settings::default();
        s.set("HB", "250ms");
        s.set("ZERO", "0");
        s.set("BAD", "soon");
        s.set("BLANK", " ");
        let secs = Duration::from_secs;
        let pick = |flag, key, zero| s.duration(flag, key, secs(3), zero, "--hb");
        assert_eq!(
            pick(None, "HB", Zero::Refused),
            Ok(Duration::from_millis(250))
        );
        assert_eq!(pick(Some(secs(1)), "HB", Zero::Refused), Ok(secs(1)));
        assert_eq!(pick(None, "NONE", Zero::Refused), Ok(secs(3)));
        assert_eq!(pick(None, "BLANK", Zero::Refused), Ok(secs(3)));
        // Zero: a value where allowed, an error naming the flag and the
        // source where refused, from a flag as from a setting.
        assert_eq!(pick(None, "ZERO", Zero::Allowed), Ok(Duration::ZERO));
        assert_eq!(
            pick(Some(Duration::ZERO), "HB", Zero::Allowed),
            Ok(Duration::ZERO)
        );
        let e = pick(None, "ZERO", Zero::Refused).unwrap_err().to_string();
        assert_eq!(
            e,
            "bad value \"0\" for --hb (from set): must be a positive number of seconds"
        );
        let e = pick(Some(Duration::ZERO), "HB", Zero::Refused).unwrap_err();
        assert_eq!(e.source, "the command line");
        // A setting that is not a duration names its key and source.
        let e = pick(None, "BAD", Zero::Allowed).unwrap_err().to_string();
        assert!(
            e.starts_with("bad value \"soon\" for BAD (from set): "),
            "{e}"
        );
        assert!(e.contains("not a duration"), "{e}");
        for (text, ms) in [
            ("2", 2000),
            ("1.5s", 1500),
            ("2m", 120_000),
            ("1h", 3_600_000),
        ] {
            let mut s = Settings::default();
            s.set("D", text);
            assert_eq!(
                s.value_duration("D"),
                Ok(Some(Duration::from_millis(ms))),
                "{text}"
            );
        }
    }

    #[test]
    fn environment_beats_section_beats_global_and_config_file_is_not_a_key() {
        let dir = std::env::temp_dir().join(format!("emq-settings-order-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("e.conf");
        // [router] before [global] in the file: the section still wins.
        std::fs::write(&path, "[router]\nhwm=2\n[global]\nhwm=1\nqueues=g\n").unwrap();
        let p = path.to_str().unwrap();
        let s = Settings::load_from("router", &env(&[("EVENTMQ_CONFIG_FILE", p)])).unwrap();
        assert_eq!(s.get("HWM"), Some("2"));
        assert_eq!(s.get("QUEUES"), Some("g"));
        assert!(s.source("QUEUES").unwrap().ends_with("[global]"));
        assert_eq!(s.get("CONFIG_FILE"), None);
        let s = Settings::load_from(
            "router",
            &env(&[
                ("EVENTMQ_CONFIG_FILE", p),
                ("EVENTMQ_HWM", "3"),
                ("HWM", "9"),
            ]),
        )
        .unwrap();
        assert_eq!(s.get("HWM"), Some("3"));
        // An unknown key is kept (a binary reads the keys it knows).
        let s = Settings::load_from(
            "router",
            &env(&[("EVENTMQ_CONFIG_FILE", p), ("EVENTMQ_NO_SUCH_KEY", "x")]),
        )
        .unwrap();
        assert_eq!(s.get("NO_SUCH_KEY"), Some("x"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn unknown_keys_are_reported_with_file_line_and_nearest_name() {
        let dir = std::env::temp_dir().join(format!("emq-settings-typo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("e.conf");
        std::fs::write(
            &path,
            "[router]\nHTTP_ADR=127.0.0.1:8080\nhwm=3\n[jobmanager]\ncolour=blue\nsuper_debug=1\n",
        )
        .unwrap();
        let p = path.to_str().unwrap();
        let s = Settings::load_from("router", &env(&[("EVENTMQ_CONFIG_FILE", p)])).unwrap();
        assert_eq!(
            s.warnings(),
            [
                format!("{p}:2: unknown setting HTTP_ADR in [router] (ignored); did you mean HTTP_ADDR?"),
                format!("{p}:5: unknown setting COLOUR in [jobmanager] (ignored)"),
            ]
        );
        assert_eq!(s.get("HTTP_ADDR"), None);
        assert_eq!(s.get("HWM"), Some("3"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_older_name_reads_as_the_setting_and_the_name_itself_wins() {
        let dir = std::env::temp_dir().join(format!("emq-settings-alias-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("e.conf");
        let p = path.to_str().unwrap();
        std::fs::write(&path, "[jobmanager]\nworker_addr=tcp://127.0.0.1:9\n").unwrap();
        let s = Settings::load_from("jobmanager", &env(&[("EVENTMQ_CONFIG_FILE", p)])).unwrap();
        assert_eq!(s.get("BACKEND_ADDR"), Some("tcp://127.0.0.1:9"));
        assert_eq!(s.get("WORKER_ADDR"), Some("tcp://127.0.0.1:9"));
        assert!(s.warnings().is_empty(), "{:?}", s.warnings());
        // Both in one section: the name wins, in either order.
        for text in [
            "[jobmanager]\nworker_addr=tcp://old:1\nbackend_addr=tcp://new:2\n",
            "[jobmanager]\nbackend_addr=tcp://new:2\nworker_addr=tcp://old:1\n",
        ] {
            std::fs::write(&path, text).unwrap();
            let s = Settings::load_from("jobmanager", &env(&[("EVENTMQ_CONFIG_FILE", p)])).unwrap();
            assert_eq!(s.get("BACKEND_ADDR"), Some("tcp://new:2"), "{text}");
        }
        // The environment, under either name, wins over the file.
        let s = Settings::load_from(
            "jobmanager",
            &env(&[
                ("EVENTMQ_CONFIG_FILE", p),
                ("EVENTMQ_WORKER_ADDR", "tcp://env-old:3"),
            ]),
        )
        .unwrap();
        assert_eq!(s.get("BACKEND_ADDR"), Some("tcp://env-old:3"));
        let s = Settings::load_from(
            "jobmanager",
            &env(&[
                ("EVENTMQ_CONFIG_FILE", p),
                ("EVENTMQ_WORKER_ADDR", "tcp://env-old:3"),
                ("EVENTMQ_BACKEND_ADDR", "tcp://env-new:4"),
            ]),
        )
        .unwrap();
        assert_eq!(s.get("BACKEND_ADDR"), Some("tcp://env-new:4"));
        assert_eq!(
            s.source("WORKER_ADDR"),
            Some("environment EVENTMQ_BACKEND_ADDR")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_client_takes_the_servers_address_from_its_section_and_nothing_else() {
        let dir = std::env::temp_dir().join(format!("emq-settings-client-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("e.conf");
        let p = path.to_str().unwrap();
        std::fs::write(
            &path,
            "[global]\nfrontend_addr=tcp://g:1\n[router]\nfrontend_addr=tcp://*:5\n\
             curve_secret_key_file=/router.key\n[sender]\nmax_message_size=9\n",
        )
        .unwrap();
        let load = |extra: &[(&str, &str)]| {
            let mut e = env(&[("EVENTMQ_CONFIG_FILE", p)]);
            e.extend(env(extra));
            Settings::load_client("sender", &[("FRONTEND_ADDR", "router")], &e).unwrap()
        };
        let s = load(&[]);
        assert_eq!(s.get("FRONTEND_ADDR"), Some("tcp://*:5"));
        assert!(s.source("FRONTEND_ADDR").unwrap().ends_with("[router]"));
        assert_eq!(s.get("MAX_MESSAGE_SIZE"), Some("9"));
        assert_eq!(s.get("CURVE_SECRET_KEY_FILE"), None);
        let s = load(&[("EVENTMQ_FRONTEND_ADDR", "tcp://e:2")]);
        assert_eq!(s.get("FRONTEND_ADDR"), Some("tcp://e:2"));
        std::fs::write(&path, "[global]\nfrontend_addr=tcp://g:1\n").unwrap();
        assert_eq!(load(&[]).get("FRONTEND_ADDR"), Some("tcp://g:1"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn missing_named_file_is_an_error_missing_default_is_not() {
        let e = Settings::load_from(
            "router",
            &env(&[("EVENTMQ_CONFIG_FILE", "/nonexistent/x.conf")]),
        );
        assert!(matches!(e, Err(SettingsError::Read { .. })));
    }

    #[test]
    fn syntax_errors_name_the_line() {
        let dir = std::env::temp_dir().join(format!("emq-settings-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bad.conf");
        std::fs::write(&path, "[router]\njust words\n").unwrap();
        let e = Settings::load_from(
            "router",
            &env(&[("EVENTMQ_CONFIG_FILE", path.to_str().unwrap())]),
        );
        assert!(matches!(e, Err(SettingsError::Syntax { line: 2, .. })));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
