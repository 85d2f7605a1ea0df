//! EventMQ-style settings: an INI file section overridden by `EVENTMQ_*`
//! environment variables, as 0.3.13's `import_settings` reads them.
//! Command-line flags (applied by each binary) win over both.
//!
//! The file is `$EVENTMQ_CONFIG_FILE`, else `/etc/eventmq.conf`; a missing
//! default file is not an error, a missing named file is.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// The default config file 0.3.13 reads.
pub const DEFAULT_CONFIG_FILE: &str = "/etc/eventmq.conf";

/// Settings of one section (`router`, `jobmanager`, ...), keys upper-cased.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    values: HashMap<String, String>,
    /// Where each value came from, for `--help`-style diagnostics and logs.
    sources: HashMap<String, String>,
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

impl Settings {
    /// Load `section` from the config file named by the environment, then
    /// apply `EVENTMQ_<KEY>` variables.
    pub fn load(section: &str) -> Result<Settings, SettingsError> {
        let env: HashMap<String, String> = std::env::vars().collect();
        Self::load_from(section, &env)
    }

    /// [`Settings::load`] with an explicit environment (for tests).
    pub fn load_from(
        section: &str,
        env: &HashMap<String, String>,
    ) -> Result<Settings, SettingsError> {
        let mut s = Settings::default();
        let (path, required) = match env.get("EVENTMQ_CONFIG_FILE") {
            Some(p) if !p.is_empty() => (PathBuf::from(p), true),
            _ => (PathBuf::from(DEFAULT_CONFIG_FILE), false),
        };
        match std::fs::read_to_string(&path) {
            Ok(text) => s.apply_ini(&path, &text, section)?,
            Err(e) if !required && e.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => return Err(SettingsError::Read { path, error }),
        }
        for (k, v) in env {
            if let Some(name) = k.strip_prefix("EVENTMQ_") {
                if name != "CONFIG_FILE" {
                    s.values.insert(name.to_string(), v.clone());
                    s.sources
                        .insert(name.to_string(), format!("environment {k}"));
                }
            }
        }
        Ok(s)
    }

    fn apply_ini(&mut self, path: &Path, text: &str, section: &str) -> Result<(), SettingsError> {
        let mut current: Option<String> = None;
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
            // 0.3.13 reads [global] first, then the component's section.
            let applies = matches!(current.as_deref(), Some(c) if c == section || c == "global");
            if applies {
                let key = k.trim().to_ascii_uppercase();
                let from_global = current.as_deref() == Some("global");
                if from_global
                    && self
                        .sources
                        .get(&key)
                        .is_some_and(|s| !s.contains("[global]"))
                {
                    continue; // the component's own section wins over [global]
                }
                self.values.insert(key.clone(), v.trim().to_string());
                self.sources.insert(
                    key,
                    format!("{} [{}]", path.display(), current.as_deref().unwrap_or("")),
                );
            }
        }
        Ok(())
    }

    /// The value of `key` (upper case, without the `EVENTMQ_` prefix).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.values.get(key).map(String::as_str)
    }

    /// Where `key` was set, e.g. `environment EVENTMQ_HWM`.
    pub fn source(&self, key: &str) -> Option<&str> {
        self.sources.get(key).map(String::as_str)
    }

    /// Set a value as if from the environment (used by binaries and tests).
    pub fn set(&mut self, key: &str, value: &str) {
        self.values.insert(key.to_string(), value.to_string());
        self.sources.insert(key.to_string(), "set".to_string());
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
