//! Access control through ZAP, ZeroMQ's authentication protocol (RFC 27).
//!
//! libzmq asks a ZAP handler (a REP socket on `inproc://zeromq.zap.01` in the
//! same context) about every new connection to a socket that has a ZAP
//! domain set. We give each socket its own domain (`frontend`, `backend`,
//! `admin`) and decide per domain: the peer's IP must be in the allowlist,
//! and then the socket's mechanism decides — PLAIN: the username/password
//! must match; CURVE: the client's public key must be one of the socket's
//! authorised keys ([`crate::curve`]). A socket is NULL, PLAIN or CURVE,
//! never two of them: a CURVE socket refuses NULL and PLAIN peers (libzmq
//! fails their handshake before ZAP is asked), so an encrypted socket
//! cannot be talked to in clear text. A denied peer is disconnected by
//! libzmq before any message of it reaches the router, so it can neither
//! submit nor register nor send DISCONNECT on the admin socket.
//!
//! The decision is a pure function ([`AccessPolicy::decide`]) so that it is
//! unit-tested without sockets; [`spawn_zap_handler`] only moves frames.
//! The policy of a running handler can be replaced
//! ([`ZapHandler::set_policy`]: the router reloads its authorised keys on
//! SIGHUP); a socket's mechanism is fixed when it binds.
//!
//! An allowlist as a person writes it (`--allow-admin 127.0.0.0/8,::1`) is
//! read by [`parse_allowlist`]. "Any address" must be said (`any`): an empty
//! list, or one of only commas and spaces, is an error and not "no
//! restriction", so that `--allow-admin ""` or an unset-but-empty
//! environment variable cannot open the admin socket by accident.
//!
//! The router's policy comes from its flags and settings through
//! [`AccessPolicy::from_settings`] (`--allow-*`, `--plain-users`,
//! `--curve-*`, else `ALLOW_*`, `PLAIN_USERS`, `CURVE_*`, else any address
//! on the frontend and backend and loopback on the admin socket), which also
//! keeps where its files are ([`AccessFiles`]) to read them again on SIGHUP.

use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;
use std::sync::{Arc, RwLock};

use std::path::{Path, PathBuf};

use emq_cli_support::{AccessArgs, Settings};

use crate::curve::{self, AuthorisedKeys, KeyPair, PublicKey};
use crate::log_limit::LogLimit;

/// The inproc endpoint libzmq sends ZAP requests to.
pub const ZAP_ENDPOINT: &str = "inproc://zeromq.zap.01";

/// An address or CIDR block: `127.0.0.1`, `10.0.0.0/8`, `::1`, `fd00::/8`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IpBlock {
    addr: IpAddr,
    prefix: u8,
}

impl FromStr for IpBlock {
    type Err = String;

    fn from_str(s: &str) -> Result<IpBlock, String> {
        let s = s.trim();
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let addr: IpAddr = addr
            .parse()
            .map_err(|_| format!("{s:?} is not an IP address or CIDR block"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => match p.parse::<u8>() {
                Ok(n) if n <= max => n,
                _ => return Err(format!("{s:?}: prefix length must be 0..={max}")),
            },
        };
        Ok(IpBlock { addr, prefix })
    }
}

impl fmt::Display for IpBlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let full = if self.addr.is_ipv4() { 32 } else { 128 };
        if self.prefix == full {
            write!(f, "{}", self.addr)
        } else {
            write!(f, "{}/{}", self.addr, self.prefix)
        }
    }
}

impl IpBlock {
    /// Whether every address of the block is a loopback address
    /// (inside 127.0.0.0/8, or ::1, or 127.0.0.0/8 mapped into IPv6).
    pub fn is_loopback(&self) -> bool {
        let (v4, prefix) = match self.addr {
            IpAddr::V4(v4) => (v4, self.prefix),
            IpAddr::V6(v6) if v6.is_loopback() => return self.prefix == 128,
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) if self.prefix >= 96 => (v4, self.prefix - 96),
                _ => return false,
            },
        };
        v4.is_loopback() && prefix >= 8
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        // An IPv4 peer on a dual-stack socket shows up as ::ffff:a.b.c.d.
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
            v4 => v4,
        };
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

/// Who may connect to a socket, as given by an `--allow-*` list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Allowlist {
    /// Any address: the list said `any`.
    Any,
    /// Only these addresses (never empty).
    Only(Vec<IpBlock>),
}

/// Why an allowlist text was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AllowlistError {
    /// Nothing but whitespace and commas.
    Empty,
    /// `any` next to addresses.
    AnyAmongAddresses,
    /// An entry that is not an IP address or CIDR block.
    BadEntry(String),
}

impl fmt::Display for AllowlistError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AllowlistError::Empty => write!(
                f,
                "empty list (use \"any\" for any address, or addresses / CIDR blocks \
                 such as 127.0.0.0/8,::1)"
            ),
            AllowlistError::AnyAmongAddresses => {
                write!(f, "\"any\" stands alone, not in a list of addresses")
            }
            AllowlistError::BadEntry(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for AllowlistError {}

/// Parse an allowlist: `any` (any case) alone, or comma-separated IP
/// addresses and CIDR blocks (`10.0.0.0/8, ::1`; empty entries between
/// commas are skipped). Empty text, or only commas and whitespace, is
/// [`AllowlistError::Empty`]: "any address" is never implied.
pub fn parse_allowlist(text: &str) -> Result<Allowlist, AllowlistError> {
    let entries: Vec<&str> = text
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .collect();
    let is_any = |e: &&str| e.eq_ignore_ascii_case("any");
    match entries.as_slice() {
        [] => Err(AllowlistError::Empty),
        [only] if is_any(only) => Ok(Allowlist::Any),
        many if many.iter().any(is_any) => Err(AllowlistError::AnyAmongAddresses),
        many => many
            .iter()
            .map(|e| e.parse::<IpBlock>().map_err(AllowlistError::BadEntry))
            .collect::<Result<Vec<_>, _>>()
            .map(Allowlist::Only),
    }
}

impl Allowlist {
    /// Whether a peer outside the loopback range may connect.
    pub fn admits_non_loopback(&self) -> bool {
        match self {
            Allowlist::Any => true,
            Allowlist::Only(blocks) => !blocks.iter().all(IpBlock::is_loopback),
        }
    }

    /// The blocks in the form [`DomainPolicy::allow`] takes (empty: any).
    pub fn into_blocks(self) -> Vec<IpBlock> {
        match self {
            Allowlist::Any => Vec::new(),
            Allowlist::Only(blocks) => blocks,
        }
    }
}

impl fmt::Display for Allowlist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Allowlist::Any => write!(f, "any"),
            Allowlist::Only(blocks) => {
                for (i, b) in blocks.iter().enumerate() {
                    if i > 0 {
                        write!(f, ",")?;
                    }
                    write!(f, "{b}")?;
                }
                Ok(())
            }
        }
    }
}

/// The rules of one socket (ZAP domain).
#[derive(Debug, Clone, Default)]
pub struct DomainPolicy {
    /// Peers allowed to connect; empty means any address (build it from an
    /// [`Allowlist`], where "any" is explicit).
    pub allow: Vec<IpBlock>,
    /// When set, the socket is a PLAIN server and these username → password
    /// pairs are accepted; peers using the NULL mechanism are refused.
    pub plain_users: Option<HashMap<String, String>>,
    /// When set, the socket is a CURVE server (with
    /// [`AccessPolicy::curve_server`]'s key pair) and lets in these client
    /// keys only. Not together with `plain_users`.
    pub curve_keys: Option<AuthorisedKeys>,
}

/// Access rules by ZAP domain.
#[derive(Debug, Clone, Default)]
pub struct AccessPolicy {
    pub domains: HashMap<String, DomainPolicy>,
    /// The server key pair of the CURVE sockets (those whose domain has
    /// `curve_keys`). `Debug` does not show the secret key.
    pub curve_server: Option<KeyPair>,
}

/// The rule of an admin socket no flag or setting opens: loopback only.
pub const DEFAULT_ALLOW_ADMIN: &str = "127.0.0.0/8,::1";

/// An [`AccessPolicy`] as the router's flags and settings make it
/// ([`AccessPolicy::from_settings`]), with what to say about it at start.
#[derive(Debug, Clone, Default)]
pub struct Access {
    pub policy: AccessPolicy,
    /// Where the policy's files are, to read them again on SIGHUP.
    pub files: AccessFiles,
    /// One line per guarded socket (and the CURVE server key), logged at start.
    pub log: Vec<String>,
    /// Risky settings (an admin socket open beyond loopback), logged as
    /// warnings at start.
    pub warnings: Vec<String>,
}

/// The files behind an access policy: `--plain-users` and each CURVE
/// socket's authorised-keys source, with the flag or setting it came from.
#[derive(Debug, Clone, Default)]
pub struct AccessFiles {
    plain_users: Option<PathBuf>,
    curve: Vec<(&'static str, String, String)>,
}

impl AccessFiles {
    /// `policy` with the files read again (on SIGHUP): the same sockets and
    /// mechanisms, the users and keys the files hold now. An error leaves
    /// the caller's policy as it was. Returns the new policy and one line
    /// per file for the log.
    pub fn reload(&self, policy: &AccessPolicy) -> Result<(AccessPolicy, Vec<String>), String> {
        let mut next = policy.clone();
        let mut log = Vec::new();
        if let Some(path) = &self.plain_users {
            let users = read_plain_users(path)?;
            log.push(format!(
                "--plain-users {}: {} user(s)",
                path.display(),
                users.len()
            ));
            for (domain, d) in next.domains.iter_mut() {
                if domain != "admin" && d.plain_users.is_some() {
                    d.plain_users = Some(users.clone());
                }
            }
        }
        for (domain, source, from) in &self.curve {
            let keys: AuthorisedKeys =
                curve::load_authorised_keys(source).map_err(|e| format!("{from}: {e}"))?;
            log.push(format!("{domain}: {keys} ({source})"));
            if let Some(d) = next.domains.get_mut(*domain) {
                d.curve_keys = Some(keys);
            }
        }
        Ok((next, log))
    }
}

/// The `user:password` lines of a `--plain-users` file (at least one).
fn read_plain_users(path: &Path) -> Result<HashMap<String, String>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("--plain-users {}: {e}", path.display()))?;
    let users =
        parse_plain_users(&text).map_err(|e| format!("--plain-users {}: {e}", path.display()))?;
    if users.is_empty() {
        return Err(format!("--plain-users {}: no users", path.display()));
    }
    Ok(users)
}

/// One `--allow-*` list (`what`): the flag, else the setting `key`, else
/// `default`, read by [`parse_allowlist`] (`any`, or IPs / CIDR blocks;
/// empty is an error). Errors name the flag, and where a setting came from.
fn allow_from_settings(
    flag: Option<&str>,
    s: &Settings,
    key: &str,
    default: &str,
    what: &str,
) -> Result<Allowlist, String> {
    let (text, from) = match (flag, s.get(key)) {
        (Some(t), _) => (t.to_string(), String::new()),
        (None, Some(t)) => (
            t.to_string(),
            format!(" (from {})", s.source(key).unwrap_or("settings")),
        ),
        (None, None) => (default.to_string(), String::new()),
    };
    parse_allowlist(&text).map_err(|e| format!("{what}{from}: {e}"))
}

/// Each CURVE socket's authorised-keys source `(domain, source, where it
/// was given)`: its own `--curve-DOMAIN-keys` (or setting), else
/// `--curve-keys` (or `CURVE_KEYS`); `none` keeps the socket in clear text.
fn curve_sources(args: &AccessArgs, s: &Settings) -> Vec<(&'static str, String, String)> {
    let given = |flag: Option<&String>, key: &str, name: &str| {
        flag.map(|v| (v.clone(), format!("--curve-{name}")))
            .or_else(|| {
                s.get(key).map(|v| {
                    (
                        v.to_string(),
                        format!("{key} (from {})", s.source(key).unwrap_or("settings")),
                    )
                })
            })
            .map(|(v, from)| (v.trim().to_string(), from))
            .filter(|(v, _)| !v.is_empty())
    };
    let all_keys = given(args.curve_keys.as_ref(), "CURVE_KEYS", "keys");
    let mut sources = Vec::new();
    for (domain, flag, key) in [
        ("frontend", &args.curve_frontend_keys, "CURVE_FRONTEND_KEYS"),
        ("backend", &args.curve_backend_keys, "CURVE_BACKEND_KEYS"),
        ("admin", &args.curve_admin_keys, "CURVE_ADMIN_KEYS"),
    ] {
        match given(flag.as_ref(), key, &format!("{domain}-keys")).or_else(|| all_keys.clone()) {
            Some((v, _)) if v.eq_ignore_ascii_case("none") => {}
            Some((v, from)) => sources.push((domain, v, from)),
            None => {}
        }
    }
    sources
}

/// The router's CURVE key pair (`--curve-secret-key-file` or its setting):
/// needed exactly when some socket has authorised keys (`sources`).
fn curve_server(
    args: &AccessArgs,
    s: &Settings,
    sources: &[(&'static str, String, String)],
) -> Result<Option<KeyPair>, String> {
    let secret_file = args
        .curve_secret_key_file
        .clone()
        .or_else(|| s.get("CURVE_SECRET_KEY_FILE").map(PathBuf::from))
        .filter(|p| !p.as_os_str().is_empty());
    match (&secret_file, sources.first()) {
        (None, None) => Ok(None),
        (None, Some((_, _, from))) => Err(format!(
            "{from}: CURVE sockets need the router's key pair: --curve-secret-key-file \
             (make one with `emq-cli keygen NAME`)"
        )),
        (Some(path), None) => Err(format!(
            "--curve-secret-key-file {}: no socket has authorised client keys \
             (--curve-keys DIR|FILE|any, or --curve-frontend-keys, \
             --curve-backend-keys, --curve-admin-keys)",
            path.display()
        )),
        (Some(path), Some(_)) => {
            if !curve::curve_available() {
                return Err(format!(
                    "--curve-secret-key-file: {}",
                    curve::KeyError::Unavailable
                ));
            }
            curve::read_key_pair(path)
                .map(Some)
                .map_err(|e| format!("--curve-secret-key-file: {e}"))
        }
    }
}

/// The warning for an admin socket open beyond loopback, if it is.
fn admin_warning(allow: &Allowlist, admin: &str) -> Option<String> {
    allow.admits_non_loopback().then(|| {
        format!(
            "the admin socket accepts {} (--allow-admin {allow}): a host that \
             reaches {admin} can stop the router with DISCONNECT",
            match allow {
                Allowlist::Any => "any address",
                Allowlist::Only(_) => "addresses outside loopback",
            }
        )
    })
}

/// The start-up line of a guarded socket.
fn domain_log(domain: &str, allow_text: &str, d: &DomainPolicy) -> String {
    format!(
        "access control on {domain}: {}{}",
        if d.allow.is_empty() {
            "any address".to_string()
        } else {
            format!("allow {allow_text}")
        },
        match (&d.plain_users, &d.curve_keys) {
            (Some(u), _) => format!(", PLAIN credentials required ({} user(s))", u.len()),
            (None, Some(k)) => format!(", CURVE encryption, {k}"),
            (None, None) => String::new(),
        }
    )
}

impl AccessPolicy {
    /// The router's access policy from its flags (`args`), else the
    /// settings `ALLOW_FRONTEND`, `ALLOW_BACKEND`, `ALLOW_ADMIN`,
    /// `PLAIN_USERS`, `CURVE_SECRET_KEY_FILE`, `CURVE_KEYS` and
    /// `CURVE_{FRONTEND,BACKEND,ADMIN}_KEYS`, else the defaults: any
    /// address on the frontend and backend, loopback on the admin socket
    /// (`admin` is its endpoint, named in the warning when it is opened).
    /// PLAIN users guard the frontend and backend, never the admin socket;
    /// a socket is PLAIN or CURVE, never both. The files named are read
    /// here (and again by [`AccessFiles::reload`]).
    pub fn from_settings(args: &AccessArgs, s: &Settings, admin: &str) -> Result<Access, String> {
        let plain_users_file = args
            .plain_users
            .clone()
            .or_else(|| s.get("PLAIN_USERS").map(PathBuf::from));
        let plain_users = match &plain_users_file {
            None => None,
            Some(path) => Some(read_plain_users(path)?),
        };
        let curve_sources = curve_sources(args, s);
        let mut policy = AccessPolicy {
            curve_server: curve_server(args, s, &curve_sources)?,
            ..AccessPolicy::default()
        };
        let mut curve_by_domain = HashMap::new();
        for (domain, source, from) in &curve_sources {
            if plain_users.is_some() && *domain != "admin" {
                return Err(format!(
                    "{from} and --plain-users: a socket uses one mechanism, CURVE or PLAIN \
                     (the {domain} would need both)"
                ));
            }
            let keys = curve::load_authorised_keys(source).map_err(|e| format!("{from}: {e}"))?;
            curve_by_domain.insert(*domain, keys);
        }
        let mut log = Vec::new();
        let mut warnings = Vec::new();
        for (domain, flag, key, default) in [
            ("frontend", &args.allow_frontend, "ALLOW_FRONTEND", "any"),
            ("backend", &args.allow_backend, "ALLOW_BACKEND", "any"),
            (
                "admin",
                &args.allow_admin,
                "ALLOW_ADMIN",
                DEFAULT_ALLOW_ADMIN,
            ),
        ] {
            let what = format!("--allow-{domain}");
            let allow = allow_from_settings(flag.as_deref(), s, key, default, &what)?;
            if domain == "admin" {
                warnings.extend(admin_warning(&allow, admin));
            }
            let allow_text = allow.to_string();
            let d = DomainPolicy {
                allow: allow.into_blocks(),
                plain_users: plain_users.clone().filter(|_| domain != "admin"),
                curve_keys: curve_by_domain.remove(domain),
            };
            if !d.allow.is_empty() || d.plain_users.is_some() || d.curve_keys.is_some() {
                log.push(domain_log(domain, &allow_text, &d));
                policy.domains.insert(domain.to_string(), d);
            }
        }
        if let Some(pair) = &policy.curve_server {
            let clear: Vec<&str> = ["frontend", "backend", "admin"]
                .into_iter()
                .filter(|d| !policy.is_curve(d))
                .collect();
            log.push(format!(
                "CURVE server key {}{}",
                pair.public,
                if clear.is_empty() {
                    String::new()
                } else {
                    format!("; in clear text: {}", clear.join(", "))
                }
            ));
        }
        Ok(Access {
            policy,
            files: AccessFiles {
                plain_users: plain_users_file,
                curve: curve_sources,
            },
            log,
            warnings,
        })
    }
}

/// One ZAP request, as libzmq sends it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZapRequest {
    pub request_id: Vec<u8>,
    pub domain: String,
    pub address: String,
    pub mechanism: String,
    pub credentials: Vec<Vec<u8>>,
}

/// The verdict: status code (200 allowed, 400 denied, 500 internal error),
/// text, and the user id to attach to the connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZapVerdict {
    pub status: &'static str,
    pub text: String,
    pub user_id: String,
}

impl ZapVerdict {
    fn deny(text: String) -> ZapVerdict {
        ZapVerdict {
            status: "400",
            text,
            user_id: String::new(),
        }
    }

    pub fn allowed(&self) -> bool {
        self.status == "200"
    }
}

impl ZapRequest {
    /// Parse the frames of a ZAP request (version 1.0).
    pub fn parse(frames: Vec<Vec<u8>>) -> Result<ZapRequest, String> {
        if frames.len() < 6 {
            return Err(format!("ZAP request with {} frames", frames.len()));
        }
        if frames[0] != b"1.0" {
            return Err("ZAP request with an unknown version".into());
        }
        let text = |f: &[u8]| String::from_utf8_lossy(f).into_owned();
        let mut it = frames.into_iter();
        let _version = it.next();
        let request_id = it.next().unwrap_or_default();
        let domain = text(&it.next().unwrap_or_default());
        let address = text(&it.next().unwrap_or_default());
        let _identity = it.next();
        let mechanism = text(&it.next().unwrap_or_default());
        Ok(ZapRequest {
            request_id,
            domain,
            address,
            mechanism,
            credentials: it.collect(),
        })
    }
}

impl AccessPolicy {
    /// Decide on one connection attempt.
    pub fn decide(&self, req: &ZapRequest) -> ZapVerdict {
        let Some(domain) = self.domains.get(&req.domain) else {
            // A socket with a domain we have no rules for: allow, as with no ZAP.
            return ZapVerdict {
                status: "200",
                text: "OK".into(),
                user_id: String::new(),
            };
        };
        let ip: Option<IpAddr> = req.address.parse().ok();
        if !domain.allow.is_empty() {
            let inside = ip.is_some_and(|ip| domain.allow.iter().any(|b| b.contains(ip)));
            if !inside {
                return ZapVerdict::deny(format!(
                    "address {} is not allowed on {}",
                    req.address, req.domain
                ));
            }
        }
        if let Some(keys) = &domain.curve_keys {
            let key = match (req.mechanism.as_str(), req.credentials.as_slice()) {
                ("CURVE", [k]) => <[u8; 32]>::try_from(k.as_slice()).ok().map(PublicKey),
                _ => None,
            };
            let Some(key) = key else {
                return ZapVerdict::deny(format!(
                    "{} requires CURVE (got {} from {})",
                    req.domain, req.mechanism, req.address
                ));
            };
            return match keys.admits(&key) {
                Some(name) => ZapVerdict {
                    status: "200",
                    text: "OK".into(),
                    user_id: if name.is_empty() {
                        key.to_string()
                    } else {
                        name.to_string()
                    },
                },
                None => ZapVerdict::deny(format!(
                    "CURVE key {key} from {} is not authorised on {}",
                    req.address, req.domain
                )),
            };
        }
        match &domain.plain_users {
            None => ZapVerdict {
                status: "200",
                text: "OK".into(),
                user_id: String::new(),
            },
            Some(users) => {
                if req.mechanism != "PLAIN" || req.credentials.len() != 2 {
                    return ZapVerdict::deny(format!("{} requires PLAIN credentials", req.domain));
                }
                let user = String::from_utf8_lossy(&req.credentials[0]).into_owned();
                let pass = String::from_utf8_lossy(&req.credentials[1]);
                if users.get(&user).is_some_and(|p| *p == pass) {
                    ZapVerdict {
                        status: "200",
                        text: "OK".into(),
                        user_id: user,
                    }
                } else {
                    ZapVerdict::deny(format!("bad username or password for {user:?}"))
                }
            }
        }
    }

    /// Whether any rule needs the ZAP handler at all.
    pub fn is_active(&self) -> bool {
        self.domains
            .values()
            .any(|d| !d.allow.is_empty() || d.plain_users.is_some() || d.curve_keys.is_some())
    }

    /// Configure `sock` for `domain`: set the ZAP domain (so libzmq consults
    /// the handler) and make it a PLAIN server when credentials are
    /// required, or a CURVE server with [`AccessPolicy::curve_server`]'s
    /// key pair when client keys are (`EINVAL` when that key pair is
    /// missing, or both are asked for).
    pub fn apply(&self, sock: &zmq::Socket, domain: &str) -> zmq::Result<()> {
        if let Some(d) = self.domains.get(domain) {
            sock.set_zap_domain(domain)?;
            match (&d.plain_users, &d.curve_keys, &self.curve_server) {
                (Some(_), Some(_), _) | (None, Some(_), None) => return Err(zmq::Error::EINVAL),
                (Some(_), None, _) => sock.set_plain_server(true)?,
                (None, Some(_), Some(pair)) => {
                    sock.set_curve_server(true)?;
                    sock.set_curve_secretkey(&pair.secret.0)?;
                }
                (None, None, _) => {}
            }
        }
        Ok(())
    }

    /// Whether `domain`'s socket is a CURVE server.
    pub fn is_curve(&self, domain: &str) -> bool {
        self.domains
            .get(domain)
            .is_some_and(|d| d.curve_keys.is_some())
    }
}

/// Parse `user:password` pairs from a file (one per line, `#` comments).
pub fn parse_plain_users(text: &str) -> Result<HashMap<String, String>, String> {
    let mut users = HashMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((u, p)) = line.split_once(':') else {
            return Err(format!("line {}: expected user:password", i + 1));
        };
        users.insert(u.to_string(), p.to_string());
    }
    Ok(users)
}

/// The refusals a handler writes to the log. A refused client reconnects
/// every 100 ms or so: the same warning at most every 10 s, with the count
/// of those not written. And since a new key, name or address costs a
/// client nothing, at most [`REFUSALS_PER_WINDOW`] warnings of any text per
/// window ([`LogLimit`]); the rest are summed up in one line once the
/// window is over ("N more … not logged one by one"). The handler's thread
/// wakes every [`QUIET_TICK_MS`] for that summary.
struct Repeats {
    start: std::time::Instant,
    /// Per text: when it was last written, and how often not since.
    seen: HashMap<String, (std::time::Duration, u64)>,
    all: LogLimit,
    /// What a line is about, for the summary ("connection refusal(s)").
    what: &'static str,
}

/// Refusal warnings of any text written per 10 s.
pub const REFUSALS_PER_WINDOW: u32 = 10;
/// How often a handler's thread wakes to write a summary that is due.
const QUIET_TICK_MS: i32 = 1000;

impl Repeats {
    const QUIET: std::time::Duration = crate::log_limit::DEFAULT_WINDOW;

    fn new(what: &'static str) -> Repeats {
        Repeats {
            start: std::time::Instant::now(),
            seen: HashMap::new(),
            all: LogLimit::new(Self::QUIET, REFUSALS_PER_WINDOW),
            what,
        }
    }

    fn warn(&mut self, text: String) {
        let now = self.start.elapsed();
        self.flush();
        if self.seen.len() > 10_000 {
            self.seen.retain(|_, (at, _)| now - *at < Self::QUIET);
        }
        match self.seen.get_mut(&text) {
            Some((at, quiet)) if now - *at < Self::QUIET => *quiet += 1,
            entry => {
                let more = match entry {
                    Some((_, n)) if *n > 0 => format!(" ({n} more like it not logged)"),
                    _ => String::new(),
                };
                if self.all.allow(now) {
                    log::warn!("{text}{more}");
                }
                self.seen.insert(text, (now, 0));
            }
        }
    }

    /// Write the summary of a window that is over, if lines were held
    /// back in it.
    fn flush(&mut self) {
        if let Some(n) = self.all.take_summary(self.start.elapsed()) {
            log::warn!(
                "{n} more {} in the last {} s, not logged one by one",
                self.what,
                self.all.window().as_secs()
            );
        }
    }
}

/// A running ZAP handler (see [`spawn_zap_handler`]).
pub struct ZapHandler {
    policy: Arc<RwLock<AccessPolicy>>,
    thread: std::thread::JoinHandle<()>,
}

impl ZapHandler {
    /// Decide on connections from now on with `policy` (a reload:
    /// connections already let in stay; the mechanism each socket was
    /// bound with does not change).
    pub fn set_policy(&self, policy: AccessPolicy) {
        *self.policy.write().unwrap_or_else(|e| e.into_inner()) = policy;
    }

    /// Wait for the handler's thread, which ends with the context.
    pub fn join(self) -> std::thread::Result<()> {
        self.thread.join()
    }
}

/// Bind the ZAP handler in `ctx` and answer requests on a thread until the
/// context is terminated. Must run before the sockets it guards bind.
pub fn spawn_zap_handler(ctx: &zmq::Context, policy: AccessPolicy) -> zmq::Result<ZapHandler> {
    let sock = ctx.socket(zmq::REP)?;
    sock.set_linger(0)?;
    sock.set_rcvtimeo(QUIET_TICK_MS)?;
    sock.bind(ZAP_ENDPOINT)?;
    let policy = Arc::new(RwLock::new(policy));
    let shared = Arc::clone(&policy);
    let mut refused = Repeats::new("connection refusal(s)");
    let thread = std::thread::Builder::new()
        .name("zap".into())
        .spawn(move || loop {
            let frames = match sock.recv_multipart(0) {
                Ok(f) => f,
                Err(zmq::Error::ETERM) => return,
                Err(zmq::Error::EAGAIN) => {
                    refused.flush();
                    continue;
                }
                Err(e) => {
                    log::error!("ZAP handler receive failed: {e}");
                    return;
                }
            };
            let reply = match ZapRequest::parse(frames) {
                Ok(req) => {
                    let v = shared
                        .read()
                        .unwrap_or_else(|e| e.into_inner())
                        .decide(&req);
                    if v.allowed() {
                        log::debug!(
                            "ZAP: {} on {} allowed ({}{})",
                            req.address,
                            req.domain,
                            req.mechanism,
                            if v.user_id.is_empty() {
                                String::new()
                            } else {
                                format!(" {}", v.user_id)
                            }
                        );
                    } else {
                        refused.warn(format!("ZAP: connection refused: {}", v.text));
                    }
                    vec![
                        b"1.0".to_vec(),
                        req.request_id,
                        v.status.as_bytes().to_vec(),
                        v.text.into_bytes(),
                        v.user_id.into_bytes(),
                        Vec::new(),
                    ]
                }
                Err(e) => {
                    log::error!("malformed ZAP request: {e}");
                    vec![
                        b"1.0".to_vec(),
                        Vec::new(),
                        b"500".to_vec(),
                        e.into_bytes(),
                        Vec::new(),
                        Vec::new(),
                    ]
                }
            };
            if let Err(e) = sock.send_multipart(reply, 0) {
                if e == zmq::Error::ETERM {
                    return;
                }
                log::error!("ZAP handler send failed: {e}");
            }
        })
        .expect("spawning a thread");
    Ok(ZapHandler { policy, thread })
}

/// Why a handshake failed, in words, from a `ZMQ_EVENT_HANDSHAKE_FAILED_*`
/// event and its value (libzmq's `ZMQ_PROTOCOL_ERROR_*`); `None` for
/// events that are not handshake failures or that the ZAP handler
/// reports itself (refused credentials or keys).
pub fn handshake_failure_text(event: u16, value: u32, mechanism: &str) -> Option<String> {
    const FAILED_NO_DETAIL: u16 = 0x0800;
    const FAILED_PROTOCOL: u16 = 0x2000;
    match event {
        FAILED_NO_DETAIL => Some(format!(
            "a peer's handshake did not complete (it left, or did not speak {mechanism})"
        )),
        FAILED_PROTOCOL => Some(match value {
            0x1100_0002 => format!(
                "a peer was refused: it did not use {mechanism} (mechanism mismatch; \
                 a client in clear text, or with other credentials)"
            ),
            0x1100_0001 => format!(
                "a peer's {mechanism} handshake failed (cryptographic error: a client with \
                 the wrong server key?)"
            ),
            v => format!("a peer's handshake failed (ZMTP protocol error 0x{v:08x})"),
        }),
        _ => None,
    }
}

/// Log the handshakes that fail on `sock` (named `name` in the log) for
/// reasons the ZAP handler never sees: a peer in clear text on a CURVE or
/// PLAIN socket, a CURVE client with the wrong server key. A socket
/// monitor (failed handshakes only, so nothing per message) read by a
/// thread of its own until the context ends. `mechanism` is what the
/// socket requires, for the text.
pub fn spawn_handshake_monitor(
    ctx: &zmq::Context,
    sock: &zmq::Socket,
    name: &str,
    mechanism: &str,
) -> zmq::Result<std::thread::JoinHandle<()>> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let endpoint = format!(
        "inproc://emq-handshake-monitor-{}-{}",
        name,
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let events = zmq::SocketEvent::HANDSHAKE_FAILED_NO_DETAIL as i32
        | zmq::SocketEvent::HANDSHAKE_FAILED_PROTOCOL as i32;
    sock.monitor(&endpoint, events)?;
    let pair = ctx.socket(zmq::PAIR)?;
    pair.set_linger(0)?;
    pair.set_rcvtimeo(QUIET_TICK_MS)?;
    pair.connect(&endpoint)?;
    let (name, mechanism) = (name.to_string(), mechanism.to_string());
    let mut said = Repeats::new("failed handshake(s)");
    Ok(std::thread::Builder::new()
        .name(format!("monitor-{name}"))
        .spawn(move || loop {
            let frames = match pair.recv_multipart(0) {
                Ok(f) => f,
                Err(zmq::Error::ETERM) => return,
                Err(zmq::Error::EAGAIN) => {
                    said.flush();
                    continue;
                }
                Err(e) => {
                    log::error!("{name}: handshake monitor receive failed: {e}");
                    return;
                }
            };
            let Some(head) = frames.first().filter(|f| f.len() >= 6) else {
                continue;
            };
            let event = u16::from_ne_bytes([head[0], head[1]]);
            let value = u32::from_ne_bytes([head[2], head[3], head[4], head[5]]);
            if let Some(text) = handshake_failure_text(event, value, &mechanism) {
                said.warn(format!("{name}: {text}"));
            }
        })
        .expect("spawning a thread"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from_settings(args: &AccessArgs, env: &[(&str, &str)]) -> Result<Access, String> {
        let mut s = Settings::default();
        for (k, v) in env {
            s.set(k, v);
        }
        AccessPolicy::from_settings(args, &s, "tcp://127.0.0.1:47293")
    }

    #[test]
    fn from_settings_defaults_to_a_loopback_admin_socket_and_flags_win() {
        let a = from_settings(&AccessArgs::default(), &[]).unwrap();
        assert_eq!(a.policy.domains.len(), 1);
        let admin = &a.policy.domains["admin"].allow;
        assert!(admin
            .iter()
            .any(|b| b.contains("127.0.0.1".parse().unwrap())));
        assert!(!admin
            .iter()
            .any(|b| b.contains("10.0.0.1".parse().unwrap())));
        assert!(a.warnings.is_empty());
        assert_eq!(a.log, ["access control on admin: allow 127.0.0.0/8,::1"]);
        // The flag wins over the setting; the setting over the default.
        let args = AccessArgs {
            allow_frontend: Some("10.0.0.0/8".into()),
            ..AccessArgs::default()
        };
        let a = from_settings(&args, &[("ALLOW_FRONTEND", "any"), ("ALLOW_ADMIN", "any")]).unwrap();
        assert_eq!(a.policy.domains["frontend"].allow.len(), 1);
        assert!(!a.policy.domains.contains_key("admin"));
        assert!(
            a.warnings[0].contains("tcp://127.0.0.1:47293"),
            "{:?}",
            a.warnings
        );
        // A bad setting names the flag and where it came from.
        let e =
            from_settings(&AccessArgs::default(), &[("ALLOW_BACKEND", "10.0.0.0/99")]).unwrap_err();
        assert!(e.starts_with("--allow-backend (from set)"), "{e}");
    }

    #[test]
    fn from_settings_messages_read_as_one_line() {
        let dir = std::env::temp_dir().join(format!("emq-zap-settings-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (_, secret) =
            curve::write_key_pair(&dir.join("router"), &curve::generate().unwrap(), false).unwrap();
        let users = dir.join("users");
        std::fs::write(&users, "u:p\n").unwrap();
        let keys_only = AccessArgs {
            curve_keys: Some("any".into()),
            ..AccessArgs::default()
        };
        let secret_only = AccessArgs {
            curve_secret_key_file: Some(secret.clone()),
            ..AccessArgs::default()
        };
        let both = AccessArgs {
            curve_secret_key_file: Some(secret),
            curve_frontend_keys: Some("any".into()),
            plain_users: Some(users),
            ..AccessArgs::default()
        };
        for (args, says) in [
            (
                keys_only,
                "need the router's key pair: --curve-secret-key-file (make one",
            ),
            (
                secret_only,
                "no socket has authorised client keys (--curve-keys",
            ),
            (both, "CURVE or PLAIN (the frontend would need both)"),
        ] {
            let e = from_settings(&args, &[]).unwrap_err();
            assert!(e.contains(says), "{e}");
            assert!(!e.contains("  "), "a run of spaces in {e:?}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn req(domain: &str, address: &str, mechanism: &str, creds: &[&str]) -> ZapRequest {
        ZapRequest {
            request_id: b"1".to_vec(),
            domain: domain.into(),
            address: address.into(),
            mechanism: mechanism.into(),
            credentials: creds.iter().map(|c| c.as_bytes().to_vec()).collect(),
        }
    }

    fn policy() -> AccessPolicy {
        let mut p = AccessPolicy::default();
        p.domains.insert(
            "admin".into(),
            DomainPolicy {
                allow: vec!["127.0.0.1".parse().unwrap()],
                plain_users: None,
                curve_keys: None,
            },
        );
        p.domains.insert(
            "backend".into(),
            DomainPolicy {
                allow: vec!["10.0.0.0/8".parse().unwrap(), "::1".parse().unwrap()],
                plain_users: Some(parse_plain_users("w:secret\n# c\n").unwrap()),
                curve_keys: None,
            },
        );
        p
    }

    #[test]
    fn cidr_blocks_match() {
        let b: IpBlock = "10.1.0.0/16".parse().unwrap();
        assert!(b.contains("10.1.200.3".parse().unwrap()));
        assert!(!b.contains("10.2.0.1".parse().unwrap()));
        assert!(b.contains("::ffff:10.1.0.9".parse().unwrap()));
        let all: IpBlock = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains("8.8.8.8".parse().unwrap()));
        assert!(!all.contains("::2".parse().unwrap()));
        assert!("10.0.0.0/33".parse::<IpBlock>().is_err());
        assert!("host".parse::<IpBlock>().is_err());
    }

    #[test]
    fn an_empty_allowlist_is_an_error_and_any_must_be_said() {
        for empty in ["", ",", " , ", " ", ",,\t,"] {
            assert_eq!(
                parse_allowlist(empty),
                Err(AllowlistError::Empty),
                "{empty:?}"
            );
        }
        assert!(AllowlistError::Empty.to_string().contains("\"any\""));
        assert_eq!(parse_allowlist("any"), Ok(Allowlist::Any));
        assert_eq!(parse_allowlist(" ANY "), Ok(Allowlist::Any));
        assert_eq!(
            parse_allowlist("any,10.0.0.1"),
            Err(AllowlistError::AnyAmongAddresses)
        );
        let Ok(Allowlist::Only(all)) = parse_allowlist("0.0.0.0/0,::/0") else {
            panic!("0.0.0.0/0,::/0 is a list of two blocks");
        };
        assert_eq!(all.len(), 2);
        assert!(all.iter().any(|b| b.contains("8.8.8.8".parse().unwrap())));
        assert!(all
            .iter()
            .any(|b| b.contains("2001:db8::1".parse().unwrap())));
        let l = parse_allowlist("10.0.0.0/8, 127.0.0.1,").unwrap();
        assert_eq!(l.to_string(), "10.0.0.0/8,127.0.0.1");
        assert!(matches!(
            parse_allowlist("10.0.0.1,host"),
            Err(AllowlistError::BadEntry(e)) if e.contains("host")
        ));
        assert!(parse_allowlist("10.0.0.0/40").is_err());
    }

    #[test]
    fn only_loopback_lists_keep_other_hosts_out() {
        let admits = |t: &str| parse_allowlist(t).unwrap().admits_non_loopback();
        assert!(!admits("127.0.0.0/8,::1"));
        assert!(!admits("127.0.0.1, 127.1.0.0/16, ::ffff:127.0.0.1"));
        assert!(admits("any"));
        assert!(admits("0.0.0.0/0,::/0"));
        assert!(admits("127.0.0.1,10.0.0.1"));
        assert!(admits("64.0.0.0/2"), "contains 127/8 but more");
        assert!(admits("::/0"));
        assert!(admits("::ffff:0.0.0.0/96"));
        assert_eq!(parse_allowlist("any").unwrap().into_blocks(), vec![]);
    }

    #[test]
    fn allowlist_and_credentials_decide() {
        let p = policy();
        assert!(p.decide(&req("admin", "127.0.0.1", "NULL", &[])).allowed());
        assert!(!p.decide(&req("admin", "127.0.0.2", "NULL", &[])).allowed());
        assert!(p.decide(&req("frontend", "1.2.3.4", "NULL", &[])).allowed());
        assert!(p
            .decide(&req("backend", "10.9.9.9", "PLAIN", &["w", "secret"]))
            .allowed());
        assert_eq!(
            p.decide(&req("backend", "10.9.9.9", "PLAIN", &["w", "secret"]))
                .user_id,
            "w"
        );
        assert!(!p
            .decide(&req("backend", "10.9.9.9", "PLAIN", &["w", "guess"]))
            .allowed());
        assert!(!p.decide(&req("backend", "10.9.9.9", "NULL", &[])).allowed());
        assert!(!p
            .decide(&req("backend", "11.0.0.1", "PLAIN", &["w", "secret"]))
            .allowed());
        assert!(!p.decide(&req("admin", "not-an-ip", "NULL", &[])).allowed());
    }

    #[test]
    fn parses_zap_frames() {
        let frames: Vec<Vec<u8>> = ["1.0", "7", "admin", "127.0.0.1", "", "PLAIN", "u", "p"]
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .collect();
        let r = ZapRequest::parse(frames).unwrap();
        assert_eq!(r.domain, "admin");
        assert_eq!(r.credentials.len(), 2);
        assert!(ZapRequest::parse(vec![b"1.0".to_vec()]).is_err());
    }

    #[test]
    fn real_sockets_outside_the_allowlist_get_nothing_through() {
        let ctx = zmq::Context::new();
        let mut p = AccessPolicy::default();
        p.domains.insert(
            "frontend".into(),
            DomainPolicy {
                allow: vec!["127.0.0.2".parse().unwrap()],
                plain_users: None,
                curve_keys: None,
            },
        );
        p.domains.insert(
            "backend".into(),
            DomainPolicy {
                allow: vec!["127.0.0.1".parse().unwrap()],
                plain_users: Some(parse_plain_users("w:pw").unwrap()),
                curve_keys: None,
            },
        );
        let _zap = spawn_zap_handler(&ctx, p.clone()).unwrap();
        let opts = crate::SocketOptions::default();
        let bind = |domain: &str| {
            let s = ctx.socket(zmq::ROUTER).unwrap();
            p.apply(&s, domain).unwrap();
            s.bind("tcp://127.0.0.1:*").unwrap();
            let ep = s.get_last_endpoint().unwrap().unwrap();
            (s, ep)
        };
        let (front, front_ep) = bind("frontend");
        let (back, back_ep) = bind("backend");

        // Outside the frontend allowlist (peer is 127.0.0.1): nothing arrives.
        let d = crate::connect_dealer(&ctx, &front_ep, b"c", &opts).unwrap();
        d.send_multipart([b"".to_vec(), b"x".to_vec()], 0).unwrap();
        assert_eq!(front.poll(zmq::POLLIN, 500).unwrap(), 0);

        // Wrong password on the backend: nothing arrives.
        let bad = ctx.socket(zmq::DEALER).unwrap();
        bad.set_plain_username(Some("w")).unwrap();
        bad.set_plain_password(Some("nope")).unwrap();
        bad.connect(&back_ep).unwrap();
        bad.send_multipart([b"".to_vec(), b"bad".to_vec()], 0)
            .unwrap();
        assert_eq!(back.poll(zmq::POLLIN, 500).unwrap(), 0);

        // Right password from an allowed address: the message arrives.
        let good = ctx.socket(zmq::DEALER).unwrap();
        good.set_plain_username(Some("w")).unwrap();
        good.set_plain_password(Some("pw")).unwrap();
        good.connect(&back_ep).unwrap();
        good.send_multipart([b"".to_vec(), b"good".to_vec()], 0)
            .unwrap();
        assert!(back.poll(zmq::POLLIN, 5000).unwrap() > 0);
        let frames = back.recv_multipart(0).unwrap();
        assert_eq!(frames.last().unwrap(), b"good");
        assert_eq!(
            back.poll(zmq::POLLIN, 200).unwrap(),
            0,
            "the bad peer never got through"
        );
        for s in [d, bad, good, front, back] {
            s.set_linger(0).unwrap();
        }
    }

    fn curve_req(domain: &str, address: &str, key: &PublicKey) -> ZapRequest {
        ZapRequest {
            request_id: b"1".to_vec(),
            domain: domain.into(),
            address: address.into(),
            mechanism: "CURVE".into(),
            credentials: vec![key.0.to_vec()],
        }
    }

    #[test]
    fn curve_domains_let_in_authorised_keys_only_and_keep_the_allowlist() {
        use crate::curve::generate;
        let alice = generate().unwrap().public;
        let mallory = generate().unwrap().public;
        let mut p = AccessPolicy {
            curve_server: Some(generate().unwrap()),
            ..AccessPolicy::default()
        };
        p.domains.insert(
            "frontend".into(),
            DomainPolicy {
                allow: vec!["127.0.0.0/8".parse().unwrap()],
                plain_users: None,
                curve_keys: Some(AuthorisedKeys::Only(
                    [(alice, "alice".to_string())].into_iter().collect(),
                )),
            },
        );
        p.domains.insert(
            "backend".into(),
            DomainPolicy {
                curve_keys: Some(AuthorisedKeys::Any),
                ..DomainPolicy::default()
            },
        );
        assert!(p.is_active() && p.is_curve("frontend") && !p.is_curve("admin"));
        let v = p.decide(&curve_req("frontend", "127.0.0.1", &alice));
        assert!(v.allowed());
        assert_eq!(v.user_id, "alice");
        let v = p.decide(&curve_req("frontend", "127.0.0.1", &mallory));
        assert!(!v.allowed());
        assert!(v.text.contains(&mallory.to_string()), "{}", v.text);
        // the allowlist still applies to a good key
        assert!(!p
            .decide(&curve_req("frontend", "10.0.0.1", &alice))
            .allowed());
        // other mechanisms are refused on a CURVE domain
        assert!(!p
            .decide(&req("frontend", "127.0.0.1", "NULL", &[]))
            .allowed());
        assert!(!p
            .decide(&req("frontend", "127.0.0.1", "PLAIN", &["a", "b"]))
            .allowed());
        let short = ZapRequest {
            credentials: vec![vec![1; 5]],
            ..curve_req("frontend", "127.0.0.1", &alice)
        };
        assert!(!p.decide(&short).allowed());
        // `any`: every key, named by itself
        let v = p.decide(&curve_req("backend", "192.0.2.1", &mallory));
        assert!(v.allowed());
        assert_eq!(v.user_id, mallory.to_string());
    }

    #[test]
    fn a_curve_socket_refuses_unknown_null_and_plain_peers_and_reloads_its_keys() {
        use crate::curve::{generate, CurveClient};
        let ctx = zmq::Context::new();
        let server = generate().unwrap();
        let alice = generate().unwrap();
        let bob = generate().unwrap();
        let only = |pairs: &[(&KeyPair, &str)]| {
            let mut p = AccessPolicy {
                curve_server: Some(server.clone()),
                ..AccessPolicy::default()
            };
            p.domains.insert(
                "frontend".into(),
                DomainPolicy {
                    curve_keys: Some(AuthorisedKeys::Only(
                        pairs
                            .iter()
                            .map(|(k, n)| (k.public, n.to_string()))
                            .collect(),
                    )),
                    ..DomainPolicy::default()
                },
            );
            p
        };
        let policy = only(&[(&alice, "alice")]);
        let zap = spawn_zap_handler(&ctx, policy.clone()).unwrap();
        let router = ctx.socket(zmq::ROUTER).unwrap();
        router.set_linger(0).unwrap();
        policy.apply(&router, "frontend").unwrap();
        router.bind("tcp://127.0.0.1:*").unwrap();
        let endpoint = router.get_last_endpoint().unwrap().unwrap();
        let opts = crate::SocketOptions {
            linger_ms: 0,
            ..crate::SocketOptions::default()
        };
        let client = |id: &[u8], own: Option<&KeyPair>, plain: bool| {
            let opts = crate::SocketOptions {
                curve: own.map(|own| CurveClient {
                    server_key: server.public,
                    own: own.clone(),
                }),
                plain: plain.then(|| crate::PlainCredentials::new("u", "p")),
                ..opts.clone()
            };
            let d = crate::connect_dealer(&ctx, &endpoint, id, &opts).unwrap();
            d.send_multipart([id.to_vec()], 0).unwrap();
            d
        };
        let unknown = client(b"bob", Some(&bob), false);
        let null = client(b"null", None, false);
        let plain = client(b"plain", None, true);
        let good = client(b"alice", Some(&alice), false);
        assert!(router.poll(zmq::POLLIN, 5000).unwrap() > 0);
        let frames = router.recv_multipart(0).unwrap();
        assert_eq!(frames, [b"alice".to_vec(), b"alice".to_vec()]);
        assert_eq!(
            router.poll(zmq::POLLIN, 300).unwrap(),
            0,
            "only the authorised key gets through"
        );
        // and back, encrypted both ways
        router
            .send_multipart([b"alice".to_vec(), b"hi".to_vec()], 0)
            .unwrap();
        assert!(good.poll(zmq::POLLIN, 5000).unwrap() > 0);
        assert_eq!(good.recv_bytes(0).unwrap(), b"hi");

        // Reload: bob is authorised now; a new connection of his gets in
        // (libzmq retries the handshake of the refused one, too).
        zap.set_policy(only(&[(&alice, "alice"), (&bob, "bob")]));
        let bob2 = client(b"bob2", Some(&bob), false);
        let mut got = Vec::new();
        while router.poll(zmq::POLLIN, 5000).unwrap() > 0 {
            got.push(router.recv_multipart(0).unwrap()[0].clone());
            if got.contains(&b"bob2".to_vec()) {
                break;
            }
        }
        assert!(got.contains(&b"bob2".to_vec()), "{got:?}");
        assert!(!got.contains(&b"null".to_vec()) && !got.contains(&b"plain".to_vec()));
        for s in [unknown, null, plain, good, bob2, router] {
            s.set_linger(0).unwrap();
        }
    }

    #[test]
    fn handshake_failures_are_said_in_words() {
        let t = handshake_failure_text(0x2000, 0x1100_0002, "CURVE").unwrap();
        assert!(t.contains("did not use CURVE"), "{t}");
        assert!(handshake_failure_text(0x2000, 0x1100_0001, "CURVE")
            .unwrap()
            .contains("server key"));
        assert!(handshake_failure_text(0x0800, 0, "PLAIN").is_some());
        assert_eq!(handshake_failure_text(0x4000, 400, "CURVE"), None);
        assert_eq!(handshake_failure_text(0x1000, 0, "CURVE"), None);
    }
}
