//! ZMQ PLAIN credentials: where a binary finds them
//! ([`plain_credentials`]: flags, a file, the environment) and how they are
//! held ([`PlainCredentials`], whose password is a [`Secret`]). The one
//! rule of this module: **no `Debug` output shows a password** — every
//! plan and config that carries credentials derives `Debug` through
//! [`Secret`], which prints `<redacted>`, so a log line or a panic message
//! of a whole plan is safe to show.

use emq_cli_support::AuthArgs;

/// A password: compared and cloned like a string, never shown by `Debug`
/// (`<redacted>`); [`Secret::expose`] is the one way to read it.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Secret(String);

impl Secret {
    pub fn new(text: impl Into<String>) -> Secret {
        Secret(text.into())
    }

    /// The text itself (to hand to libzmq, never to a log).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// A PLAIN username and password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlainCredentials {
    pub username: String,
    pub password: Secret,
}

impl PlainCredentials {
    pub fn new(username: impl Into<String>, password: impl Into<String>) -> PlainCredentials {
        PlainCredentials {
            username: username.into(),
            password: Secret::new(password),
        }
    }
}

/// Environment variable with the PLAIN username (see [`plain_credentials`]).
pub const ENV_USERNAME: &str = "EMQ_USERNAME";
/// Environment variable with the PLAIN password (see [`plain_credentials`]).
pub const ENV_PASSWORD: &str = "EMQ_PASSWORD";

/// Resolve PLAIN credentials the same way in every binary: the username is
/// `--username`, else `$EMQ_USERNAME`; the password is `--password`, else
/// the contents of `--password-file` (without its trailing line break),
/// else `$EMQ_PASSWORD`. Empty environment variables count as unset.
/// `Ok(None)` when neither a username nor a password is given (the NULL
/// mechanism); a username without a password, or the other way round, is
/// an error. `env` looks up environment variables (injected for tests).
pub fn plain_credentials(
    args: &AuthArgs,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<PlainCredentials>, String> {
    let env = |k: &str| env(k).filter(|v| !v.is_empty());
    let username = match args.username.as_deref() {
        Some(u) => Some((u.to_string(), "--username")),
        None => env(ENV_USERNAME).map(|u| (u, ENV_USERNAME)),
    };
    let password = match (args.password.as_deref(), args.password_file.as_deref()) {
        (Some(_), Some(_)) => return Err("give only one of --password and --password-file".into()),
        (Some(p), None) => Some((p.to_string(), "--password")),
        (None, Some(path)) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("--password-file {}: {e}", path.display()))?;
            let p = text.trim_end_matches(['\r', '\n']);
            if p.is_empty() {
                return Err(format!(
                    "--password-file {}: the file is empty",
                    path.display()
                ));
            }
            Some((p.to_string(), "--password-file"))
        }
        (None, None) => env(ENV_PASSWORD).map(|p| (p, ENV_PASSWORD)),
    };
    match (username, password) {
        (None, None) => Ok(None),
        (Some((_, from)), None) => Err(format!(
            "a username ({from}) needs a password: --password-file F, --password P or \
             ${ENV_PASSWORD}"
        )),
        (None, Some((_, from))) => Err(format!(
            "a password ({from}) needs a username: --username U or ${ENV_USERNAME}"
        )),
        (Some((u, from)), Some((p, pfrom))) => {
            if u.is_empty() {
                return Err(format!("{from}: empty username"));
            }
            // libzmq's limit (ZMTP PLAIN carries one length byte each)
            if u.len() > 255 {
                return Err(format!("{from}: longer than 255 bytes"));
            }
            if p.len() > 255 {
                return Err(format!("{pfrom}: the password is longer than 255 bytes"));
            }
            Ok(Some(PlainCredentials {
                username: u,
                password: Secret(p),
            }))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_credentials_come_from_flags_file_or_environment() {
        let none = |_: &str| None;
        let env = |k: &str| match k {
            ENV_USERNAME => Some("env-user".to_string()),
            ENV_PASSWORD => Some("env-pw".to_string()),
            _ => None,
        };
        let args = |u: Option<&str>, p: Option<&str>| AuthArgs {
            username: u.map(str::to_string),
            password: p.map(str::to_string),
            password_file: None,
        };
        assert_eq!(plain_credentials(&AuthArgs::default(), &none), Ok(None));
        assert_eq!(
            plain_credentials(&AuthArgs::default(), &env),
            Ok(Some(PlainCredentials::new("env-user", "env-pw")))
        );
        assert_eq!(
            plain_credentials(&args(Some("u"), Some("p")), &env),
            Ok(Some(PlainCredentials::new("u", "p")))
        );
        assert_eq!(
            plain_credentials(&args(Some("u"), None), &env),
            Ok(Some(PlainCredentials::new("u", "env-pw")))
        );
        // empty environment variables count as unset
        let empty = |_: &str| Some(String::new());
        assert_eq!(plain_credentials(&AuthArgs::default(), &empty), Ok(None));

        let file = std::env::temp_dir().join(format!("emq-transport-pw-{}", std::process::id()));
        std::fs::write(&file, "from file\r\n").unwrap();
        let with_file = AuthArgs {
            username: Some("u".into()),
            password: None,
            password_file: Some(file.clone()),
        };
        assert_eq!(
            plain_credentials(&with_file, &env),
            Ok(Some(PlainCredentials::new("u", "from file")))
        );
        let both = AuthArgs {
            password: Some("p".into()),
            ..with_file.clone()
        };
        assert!(plain_credentials(&both, &none)
            .unwrap_err()
            .contains("only one"));
        std::fs::write(&file, "\n").unwrap();
        assert!(plain_credentials(&with_file, &none)
            .unwrap_err()
            .contains("empty"));
        std::fs::remove_file(&file).unwrap();
        assert!(plain_credentials(&with_file, &none)
            .unwrap_err()
            .contains("--password-file"));

        let e = plain_credentials(&args(Some("u"), None), &none).unwrap_err();
        assert!(e.contains("needs a password"), "{e}");
        let e = plain_credentials(&args(None, Some("p")), &none).unwrap_err();
        assert!(e.contains("needs a username"), "{e}");
        assert!(plain_credentials(&args(Some(""), Some("p")), &none).is_err());
        let long = "x".repeat(256);
        assert!(plain_credentials(&args(Some(&long), Some("p")), &none).is_err());
        assert!(plain_credentials(&args(Some("u"), Some(&long)), &none).is_err());
    }

    #[test]
    fn debug_never_shows_the_password() {
        let c = PlainCredentials::new("alice", "hunter2-s3cret");
        for text in [
            format!("{c:?}"),
            format!("{c:#?}"),
            format!("{:?}", Some(c.clone())),
            format!("{:?}", c.password),
        ] {
            assert!(!text.contains("hunter2"), "{text}");
            assert!(text.contains("<redacted>"), "{text}");
        }
        assert!(format!("{c:?}").contains("alice"));
        assert_eq!(c.password.expose(), "hunter2-s3cret");
    }
}
