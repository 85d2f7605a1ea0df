//! The flags several binaries share, declared once with one help text and
//! flattened into each binary's `Cli` (`#[command(flatten)]`): PLAIN
//! credentials ([`AuthArgs`]) and CURVE client keys ([`CurveArgs`]) of the
//! clients and the job manager, and the router's access rules
//! ([`AccessArgs`]). They are what was typed, nothing more: the transport
//! resolves them with the environment and the settings
//! (`emq_transport::plain_credentials`, `emq_transport::curve::curve_client`,
//! `emq_transport::zap::AccessPolicy::from_settings`).

use std::path::PathBuf;

use clap::Args;

/// ZMQ PLAIN credentials, for a router started with `--plain-users`.
#[derive(Args, Debug, Clone, Default, PartialEq, Eq)]
#[command(next_help_heading = "Authentication")]
pub struct AuthArgs {
    /// ZMQ PLAIN username, for a router started with --plain-users
    /// [default: $EMQ_USERNAME]
    #[arg(long, value_name = "U")]
    pub username: Option<String>,

    /// ZMQ PLAIN password (visible to other local users in the process
    /// list: prefer --password-file or $EMQ_PASSWORD) [default:
    /// $EMQ_PASSWORD]
    #[arg(long, value_name = "P")]
    pub password: Option<String>,

    /// Read the PLAIN password from file F (its trailing line break is
    /// dropped)
    #[arg(long, value_name = "F", conflicts_with = "password")]
    pub password_file: Option<PathBuf>,
}

impl AuthArgs {
    /// Whether any of the three flags was given.
    pub fn given(&self) -> bool {
        self.username.is_some() || self.password.is_some() || self.password_file.is_some()
    }
}

/// CURVE client keys, for a router socket that is CURVE (encrypted). The
/// flags are global: with subcommands they go before or after them.
#[derive(Args, Debug, Clone, Default, PartialEq, Eq)]
#[command(next_help_heading = "Authentication")]
pub struct CurveArgs {
    /// The router's CURVE public key: Z85 text or a file holding it (the
    /// router's NAME.key); the connection is then encrypted
    /// [env: EVENTMQ_CURVE_SERVER_KEY]
    // A Z85 key may start with '-' (one in 85 does).
    #[arg(
        long,
        value_name = "KEY|FILE",
        global = true,
        allow_hyphen_values = true
    )]
    pub curve_server_key: Option<String>,

    /// Our CURVE key pair (NAME.key_secret from `emq-cli keygen`, mode
    /// 0600) whose public key the router lists; without it a fresh pair is
    /// made, which only a router accepting any key lets in
    /// [env: EVENTMQ_CURVE_SECRET_KEY_FILE]
    #[arg(long, value_name = "FILE", global = true)]
    pub curve_secret_key_file: Option<PathBuf>,
}

impl CurveArgs {
    /// Whether either flag was given.
    pub fn given(&self) -> bool {
        self.curve_server_key.is_some() || self.curve_secret_key_file.is_some()
    }
}

/// The router's access rules: who may connect to which socket, with which
/// mechanism (emq-router only).
#[derive(Args, Debug, Clone, Default, PartialEq, Eq)]
pub struct AccessArgs {
    /// Addresses (IP or CIDR, comma-separated) allowed to connect to the
    /// frontend; `any` for no restriction. An empty list is an error
    /// [env: EVENTMQ_ALLOW_FRONTEND] [default: any]
    #[arg(long, value_name = "CIDR[,CIDR]|any")]
    pub allow_frontend: Option<String>,

    /// Addresses allowed to connect to the backend (workers), as for
    /// --allow-frontend [env: EVENTMQ_ALLOW_BACKEND] [default: any]
    #[arg(long, value_name = "CIDR[,CIDR]|any")]
    pub allow_backend: Option<String>,

    /// Addresses allowed to connect to the admin endpoint (where DISCONNECT
    /// stops the router). Opening it to every host takes `any` (or
    /// 0.0.0.0/0,::/0) and is warned about at start-up; an empty list is an
    /// error [env: EVENTMQ_ALLOW_ADMIN] [default: 127.0.0.0/8,::1]
    #[arg(long, value_name = "CIDR[,CIDR]|any")]
    pub allow_admin: Option<String>,

    /// File of `user:password` lines (# comments): the frontend and backend
    /// then require ZMQ PLAIN credentials from every peer
    /// [env: EVENTMQ_PLAIN_USERS]
    #[arg(long, value_name = "FILE")]
    pub plain_users: Option<std::path::PathBuf>,

    /// The router's CURVE key pair (NAME.key_secret from `emq-cli keygen`;
    /// refused if its group or others may read it). Sockets with
    /// authorised keys (--curve-keys, --curve-*-keys) are CURVE servers
    /// with it [env: EVENTMQ_CURVE_SECRET_KEY_FILE]
    #[arg(long, value_name = "FILE")]
    pub curve_secret_key_file: Option<std::path::PathBuf>,

    /// Client public keys let in on every socket that has no
    /// --curve-*-keys of its own: a directory of *.key certificates, a
    /// file of keys (one `KEY [name]` per line), or `any` (encrypted, any
    /// client key) [env: EVENTMQ_CURVE_KEYS]
    #[arg(long, value_name = "DIR|FILE|any")]
    pub curve_keys: Option<String>,

    /// Client keys of the frontend (clients); `none`: the frontend stays
    /// in clear text [env: EVENTMQ_CURVE_FRONTEND_KEYS]
    #[arg(long, value_name = "DIR|FILE|any|none")]
    pub curve_frontend_keys: Option<String>,

    /// Keys of the backend (job managers), as --curve-frontend-keys
    /// [env: EVENTMQ_CURVE_BACKEND_KEYS]
    #[arg(long, value_name = "DIR|FILE|any|none")]
    pub curve_backend_keys: Option<String>,

    /// Keys of the admin socket (emq-cli), as --curve-frontend-keys
    /// [env: EVENTMQ_CURVE_ADMIN_KEYS]
    #[arg(long, value_name = "DIR|FILE|any|none")]
    pub curve_admin_keys: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Client {
        /// A short flag, as the binaries have.
        #[arg(short = 'n')]
        _name: Option<String>,
        #[command(flatten)]
        auth: AuthArgs,
        #[command(flatten)]
        curve: CurveArgs,
    }

    #[derive(Parser, Debug)]
    struct Router {
        #[command(flatten)]
        access: AccessArgs,
    }

    #[test]
    fn flattened_flags_parse_and_conflict() {
        let c = Client::try_parse_from([
            "c",
            "--username",
            "u",
            "--password-file",
            "/f",
            "--curve-server-key",
            "k",
        ])
        .unwrap();
        assert!(c.auth.given() && c.curve.given());
        assert_eq!(c.auth.username.as_deref(), Some("u"));
        assert_eq!(c.auth.password_file, Some(PathBuf::from("/f")));
        assert_eq!(c.curve.curve_secret_key_file, None);
        // A Z85 key may start with '-'.
        let c =
            Client::try_parse_from(["c", "--curve-server-key", "-)x", "--username", "u"]).unwrap();
        assert_eq!(c.curve.curve_server_key.as_deref(), Some("-)x"));
        assert_eq!(c.auth.username.as_deref(), Some("u"));
        let none = Client::try_parse_from(["c"]).unwrap();
        assert!(!none.auth.given() && !none.curve.given());
        let e = Client::try_parse_from(["c", "--password", "p", "--password-file", "/f"]);
        assert_eq!(
            e.unwrap_err().kind(),
            clap::error::ErrorKind::ArgumentConflict
        );
        let r = Router::try_parse_from(["r", "--allow-admin", "any", "--curve-keys", "d"]).unwrap();
        assert_eq!(r.access.allow_admin.as_deref(), Some("any"));
        assert_eq!(r.access.curve_keys.as_deref(), Some("d"));
        assert_eq!(r.access.plain_users, None);
    }
}
