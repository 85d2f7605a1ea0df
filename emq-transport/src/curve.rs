//! CURVE keys: making, writing and reading them, and the client side of a
//! CURVE connection.
//!
//! CurveZMQ encrypts and authenticates a connection with Curve25519 key
//! pairs. A key is 32 bytes, written as 40 characters of Z85 (the text
//! `zmq_curve_keypair` returns). The router holds a key pair; each client
//! or job manager holds its own key pair and the router's public key; the
//! router lets in only the public keys listed for the socket (see
//! [`crate::zap`], which decides, and [`AuthorisedKeys`]).
//!
//! Files use the certificate layout of czmq's `zcert` and pyzmq's
//! `zmq.auth` (so keys made by either work here, and ours work there):
//! `NAME.key` holds `public-key = "…"`, `NAME.key_secret` holds the
//! public and the secret key. [`write_key_pair`] creates both readable by
//! their owner only (0600) and never overwrites a file unless told to;
//! [`read_key_pair`] refuses a secret key file that its group or others
//! may read, as ssh does, so a secret key left open is noticed before it
//! is used.
//!
//! An authorised-keys source is a file or a directory. A file lists one
//! public key per line (`KEY` or `KEY name`, `#` comments), or is a
//! certificate; a directory is read as every `*.key` file in it (the
//! public certificates, as `zmq.auth.load_certificates` reads them).
//! `any` accepts every client key: the connection is encrypted, the client
//! is not authenticated.

use std::collections::HashMap;
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};

use emq_cli_support::CurveArgs;

/// Bytes in a CURVE key.
pub const KEY_LEN: usize = 32;
/// Characters in a Z85-encoded CURVE key.
pub const Z85_LEN: usize = 40;

/// Environment / config-file key of a client's `--curve-server-key`.
pub const SETTING_SERVER_KEY: &str = "CURVE_SERVER_KEY";
/// Environment / config-file key of `--curve-secret-key-file`.
pub const SETTING_SECRET_KEY_FILE: &str = "CURVE_SECRET_KEY_FILE";

/// Whether the linked libzmq has CURVE (it is built with libsodium).
pub fn curve_available() -> bool {
    zmq::has("curve") == Some(true)
}

/// A CURVE public key.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PublicKey(pub [u8; KEY_LEN]);

/// A CURVE secret key (`Debug` does not show it).
#[derive(Clone, PartialEq, Eq)]
pub struct SecretKey(pub [u8; KEY_LEN]);

/// A key pair.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyPair {
    pub public: PublicKey,
    pub secret: SecretKey,
}

impl fmt::Display for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&z85(&self.0))
    }
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublicKey({self})")
    }
}

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretKey(<redacted>)")
    }
}

impl SecretKey {
    /// The key as Z85 text (for a key file).
    pub fn to_z85(&self) -> String {
        z85(&self.0)
    }
}

fn z85(key: &[u8; KEY_LEN]) -> String {
    zmq::z85_encode(key).expect("32 bytes is a multiple of 4")
}

/// The 85 characters of Z85 (ZeroMQ RFC 32).
const Z85_ALPHABET: &[u8] =
    b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";

/// Decode 40 characters of Z85 into a key (libzmq's decoder does not look
/// at the characters; this does).
pub fn decode_z85(text: &str) -> Result<[u8; KEY_LEN], String> {
    if text.len() != Z85_LEN {
        return Err(format!(
            "a CURVE key is {Z85_LEN} characters of Z85, got {} characters",
            text.chars().count()
        ));
    }
    if let Some(c) = text
        .chars()
        .find(|c| !c.is_ascii() || !Z85_ALPHABET.contains(&(*c as u8)))
    {
        return Err(format!("{c:?} is not a Z85 character"));
    }
    let bytes = zmq::z85_decode(text).map_err(|_| "not valid Z85 text".to_string())?;
    bytes
        .try_into()
        .map_err(|_| "not valid Z85 text".to_string())
}

impl std::str::FromStr for PublicKey {
    type Err = String;
    fn from_str(s: &str) -> Result<PublicKey, String> {
        decode_z85(s.trim()).map(PublicKey)
    }
}

/// What went wrong with a key or a key file.
#[derive(Debug)]
#[non_exhaustive]
pub enum KeyError {
    /// This libzmq was built without CURVE.
    Unavailable,
    /// A file could not be read or written.
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    /// A key file to be written exists already.
    Exists(PathBuf),
    /// A secret key file that its group or others may read.
    OpenPermissions { path: PathBuf, mode: u32 },
    /// A key file whose contents are not what was expected.
    Bad { path: PathBuf, why: String },
    /// libzmq could not make a key pair.
    Generate(zmq::Error),
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyError::Unavailable => write!(
                f,
                "this build's libzmq has no CURVE support (built without libsodium)"
            ),
            KeyError::Io { path, error } => write!(f, "{}: {error}", path.display()),
            KeyError::Exists(path) => write!(
                f,
                "{} exists already (remove it, or pass --force to overwrite)",
                path.display()
            ),
            KeyError::OpenPermissions { path, mode } => write!(
                f,
                "secret key file {} can be read by {} (mode {:04o}); refusing to use it: \
                 run `chmod 600 {}`",
                path.display(),
                match (mode & 0o040 != 0, mode & 0o004 != 0) {
                    (true, true) => "its group and others",
                    (true, false) => "its group",
                    _ => "others",
                },
                mode & 0o7777,
                path.display()
            ),
            KeyError::Bad { path, why } => write!(f, "{}: {why}", path.display()),
            KeyError::Generate(e) => write!(f, "zmq_curve_keypair failed: {e}"),
        }
    }
}

impl std::error::Error for KeyError {}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> KeyError + '_ {
    move |error| KeyError::Io {
        path: path.to_path_buf(),
        error,
    }
}

/// A fresh key pair from libzmq (`zmq_curve_keypair`, libsodium's random
/// source).
pub fn generate() -> Result<KeyPair, KeyError> {
    if !curve_available() {
        return Err(KeyError::Unavailable);
    }
    let pair = zmq::CurveKeyPair::new().map_err(KeyError::Generate)?;
    Ok(KeyPair {
        public: PublicKey(pair.public_key),
        secret: SecretKey(pair.secret_key),
    })
}

/// The two files of a key pair named `base`: `base.key` (public) and
/// `base.key_secret` (public and secret).
pub fn key_pair_paths(base: &Path) -> (PathBuf, PathBuf) {
    let mut public = base.as_os_str().to_owned();
    public.push(".key");
    let mut secret = public.clone();
    secret.push("_secret");
    (PathBuf::from(public), PathBuf::from(secret))
}

/// The text of a public certificate.
pub fn public_certificate(public: &PublicKey) -> String {
    format!(
        "#   emq CURVE public key (czmq / pyzmq certificate layout)\n\
         #   Give it to the peers that must know this key: a router lists client\n\
         #   keys in its authorised keys; clients name the router's key with\n\
         #   --curve-server-key.\n\
         \n\
         metadata\n\
         curve\n    public-key = \"{public}\"\n"
    )
}

/// The text of a secret certificate.
pub fn secret_certificate(pair: &KeyPair) -> String {
    format!(
        "#   emq CURVE SECRET key pair (czmq / pyzmq certificate layout)\n\
         #   Keep it readable by its owner only (chmod 600); never copy it to\n\
         #   another host.\n\
         \n\
         metadata\n\
         curve\n    public-key = \"{}\"\n    secret-key = \"{}\"\n",
        pair.public,
        pair.secret.to_z85()
    )
}

/// Write `pair` as `base.key` and `base.key_secret`, both created with
/// mode 0600. An existing file is an error unless `overwrite` (then it is
/// replaced, and its mode set to 0600 too). Returns the two paths.
pub fn write_key_pair(
    base: &Path,
    pair: &KeyPair,
    overwrite: bool,
) -> Result<(PathBuf, PathBuf), KeyError> {
    let (public_path, secret_path) = key_pair_paths(base);
    if !overwrite {
        for p in [&public_path, &secret_path] {
            if p.symlink_metadata().is_ok() {
                return Err(KeyError::Exists(p.clone()));
            }
        }
    }
    write_private(&secret_path, &secret_certificate(pair), overwrite)?;
    write_private(&public_path, &public_certificate(&pair.public), overwrite)?;
    Ok((public_path, secret_path))
}

fn write_private(path: &Path, text: &str, overwrite: bool) -> Result<(), KeyError> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let mut open = std::fs::OpenOptions::new();
    open.write(true).mode(0o600);
    if overwrite {
        open.create(true).truncate(true);
    } else {
        open.create_new(true);
    }
    let mut file = open.open(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::AlreadyExists => KeyError::Exists(path.to_path_buf()),
        _ => KeyError::Io {
            path: path.to_path_buf(),
            error: e,
        },
    })?;
    // `mode` applies to new files only (and goes through the umask).
    file.set_permissions(std::fs::Permissions::from_mode(0o600))
        .map_err(io_error(path))?;
    file.write_all(text.as_bytes()).map_err(io_error(path))?;
    file.sync_all().map_err(io_error(path))
}

/// The keys a key file's text holds: `public-key = "…"` and
/// `secret-key = "…"` lines of a certificate, or bare `KEY [name]` lines
/// (public keys). `#` starts a comment line.
#[derive(Debug, Default)]
struct KeyText {
    /// Public keys with their name (the rest of a bare line), if any.
    public: Vec<(PublicKey, Option<String>)>,
    secret: Option<SecretKey>,
}

fn parse_key_text(text: &str) -> Result<KeyText, String> {
    let mut out = KeyText::default();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line == "metadata" || line == "curve" {
            continue;
        }
        let at = |why: String| format!("line {}: {why}", i + 1);
        let (first, rest) = match line.split_once(char::is_whitespace) {
            Some((k, n)) => (k, Some(n.trim().to_string())),
            None => (line, None),
        };
        // A bare key line (Z85 has `=` in its alphabet: look at the key
        // first), else a certificate's `name = value` line.
        if first.len() == Z85_LEN && decode_z85(first).is_ok() {
            out.public.push((PublicKey(decode_z85(first)?), rest));
            continue;
        }
        if let Some((name, value)) = line.split_once('=') {
            let value = value.trim().trim_matches('"').trim_matches('\'');
            match name.trim() {
                "public-key" => {
                    let key = decode_z85(value).map_err(at)?;
                    out.public.push((PublicKey(key), None));
                }
                "secret-key" => {
                    let key = decode_z85(value).map_err(at)?;
                    if out.secret.replace(SecretKey(key)).is_some() {
                        return Err(at("a second secret-key".into()));
                    }
                }
                // Other certificate metadata (`name = "..."` and the like).
                _ => {}
            }
            continue;
        }
        let e = decode_z85(first).unwrap_err();
        return Err(at(format!("{e} (expected `KEY [name]`)")));
    }
    Ok(out)
}

fn read_text(path: &Path) -> Result<String, KeyError> {
    std::fs::read_to_string(path).map_err(io_error(path))
}

/// Read a key pair from a secret key file (`NAME.key_secret`, holding
/// `public-key` and `secret-key`). A file that its group or others may
/// read is refused ([`KeyError::OpenPermissions`]) before it is read.
pub fn read_key_pair(path: &Path) -> Result<KeyPair, KeyError> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path).map_err(io_error(path))?;
    let mode = meta.permissions().mode();
    if mode & 0o077 != 0 {
        return Err(KeyError::OpenPermissions {
            path: path.to_path_buf(),
            mode,
        });
    }
    let bad = |why: String| KeyError::Bad {
        path: path.to_path_buf(),
        why,
    };
    let keys = parse_key_text(&read_text(path)?).map_err(bad)?;
    let Some(secret) = keys.secret else {
        return Err(bad(
            "no secret-key in the file (a secret key file is the NAME.key_secret that \
             `emq-cli keygen NAME` writes)"
                .into(),
        ));
    };
    match keys.public.as_slice() {
        [(public, _)] => Ok(KeyPair {
            public: *public,
            secret,
        }),
        [] => Err(bad("no public-key next to the secret-key".into())),
        _ => Err(bad("more than one public key".into())),
    }
}

/// A public key given as Z85 text, or as a file holding exactly one (a
/// certificate such as `router.key`, or the bare key).
pub fn read_public_key(text_or_path: &str) -> Result<PublicKey, String> {
    let t = text_or_path.trim();
    if t.len() == Z85_LEN && !Path::new(t).exists() {
        return t.parse();
    }
    let path = Path::new(t);
    let text = read_text(path).map_err(|e| e.to_string())?;
    let keys = parse_key_text(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    match keys.public.as_slice() {
        [(k, _)] => Ok(*k),
        [] => Err(format!("{}: no public key in the file", path.display())),
        _ => Err(format!(
            "{}: more than one public key in the file",
            path.display()
        )),
    }
}

/// The client keys a CURVE socket lets in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthorisedKeys {
    /// Any client key: encrypted, but no client authentication.
    Any,
    /// These keys, each with a name for the logs (the file name of its
    /// certificate, the name on its line, or `FILE:LINE`).
    Only(HashMap<PublicKey, String>),
}

impl AuthorisedKeys {
    /// The name of `key` when it is let in (`Some("")` for `Any`).
    pub fn admits(&self, key: &PublicKey) -> Option<&str> {
        match self {
            AuthorisedKeys::Any => Some(""),
            AuthorisedKeys::Only(keys) => keys.get(key).map(String::as_str),
        }
    }

    /// How many keys are listed (`None` for `Any`).
    pub fn len(&self) -> Option<usize> {
        match self {
            AuthorisedKeys::Any => None,
            AuthorisedKeys::Only(k) => Some(k.len()),
        }
    }

    /// Whether no key is let in.
    pub fn is_empty(&self) -> bool {
        self.len() == Some(0)
    }
}

impl fmt::Display for AuthorisedKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AuthorisedKeys::Any => write!(f, "any client key"),
            AuthorisedKeys::Only(k) => write!(f, "{} authorised key(s)", k.len()),
        }
    }
}

/// Load an authorised-keys source: `any`, a file of keys, or a directory
/// of `*.key` certificates. An empty source is an error (no key could
/// connect; say so at start rather than refuse everyone in silence).
pub fn load_authorised_keys(source: &str) -> Result<AuthorisedKeys, KeyError> {
    if source.trim().eq_ignore_ascii_case("any") {
        return Ok(AuthorisedKeys::Any);
    }
    let path = Path::new(source);
    let meta = std::fs::metadata(path).map_err(io_error(path))?;
    let mut keys = HashMap::new();
    let mut add_file = |file: &Path, dir_entry: bool| -> Result<(), KeyError> {
        let parsed = parse_key_text(&read_text(file)?).map_err(|why| KeyError::Bad {
            path: file.to_path_buf(),
            why,
        })?;
        for (n, (key, name)) in parsed.public.into_iter().enumerate() {
            let name = match name {
                Some(n) if !n.is_empty() => n,
                _ if dir_entry => file
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                _ => format!("{}#{}", file.display(), n + 1),
            };
            keys.entry(key).or_insert(name);
        }
        Ok(())
    };
    if meta.is_dir() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(io_error(path))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "key") && p.is_file())
            .collect();
        files.sort();
        for f in &files {
            add_file(f, true)?;
        }
    } else {
        add_file(path, false)?;
    }
    if keys.is_empty() {
        return Err(KeyError::Bad {
            path: path.to_path_buf(),
            why: if meta.is_dir() {
                "no public key (*.key certificate) in the directory".into()
            } else {
                "no public key in the file".into()
            },
        });
    }
    Ok(AuthorisedKeys::Only(keys))
}

/// What a client needs for a CURVE connection: the server's public key
/// and its own key pair.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CurveClient {
    pub server_key: PublicKey,
    pub own: KeyPair,
}

/// Resolve the CURVE client settings the same way in every binary: a flag
/// wins over the setting `CURVE_SERVER_KEY` / `CURVE_SECRET_KEY_FILE`
/// (`setting` looks them up: `EVENTMQ_*` environment, config file).
/// `Ok(None)` when no server key is given (no CURVE). A server key without
/// an own key pair makes a fresh pair for this process (it gets in only
/// where the router accepts any client key); an own key pair without a
/// server key is an error.
pub fn curve_client(
    args: &CurveArgs,
    setting: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<CurveClient>, String> {
    let setting = |k: &str| setting(k).filter(|v| !v.trim().is_empty());
    let server = args
        .curve_server_key
        .as_deref()
        .map(|s| (s.to_string(), "--curve-server-key".to_string()))
        .or_else(|| setting(SETTING_SERVER_KEY).map(|s| (s, SETTING_SERVER_KEY.to_string())));
    let secret_file = args
        .curve_secret_key_file
        .clone()
        .or_else(|| setting(SETTING_SECRET_KEY_FILE).map(|s| PathBuf::from(s.trim())));
    let Some((server, from)) = server else {
        return match secret_file {
            None => Ok(None),
            Some(_) => Err(
                "--curve-secret-key-file needs --curve-server-key (the router's public key)".into(),
            ),
        };
    };
    if !curve_available() {
        return Err(format!("{from}: {}", KeyError::Unavailable));
    }
    let server_key = read_public_key(&server).map_err(|e| format!("{from}: {e}"))?;
    let own = match secret_file {
        Some(path) => read_key_pair(&path).map_err(|e| format!("--curve-secret-key-file: {e}"))?,
        None => generate().map_err(|e| e.to_string())?,
    };
    Ok(Some(CurveClient { server_key, own }))
}

impl CurveClient {
    /// Make `sock` a CURVE client with these keys (before it connects).
    pub fn apply(&self, sock: &zmq::Socket) -> zmq::Result<()> {
        sock.set_curve_serverkey(&self.server_key.0)?;
        sock.set_curve_publickey(&self.own.public.0)?;
        sock.set_curve_secretkey(&self.own.secret.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("emq-curve-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn this_build_has_curve() {
        assert!(
            curve_available(),
            "libzmq without CURVE: see .cargo/config.toml"
        );
    }

    #[test]
    fn z85_keys_round_trip_and_bad_text_is_refused() {
        let zero = PublicKey([0; KEY_LEN]);
        assert_eq!(zero.to_string(), "0".repeat(Z85_LEN));
        let pair = generate().unwrap();
        let text = pair.public.to_string();
        assert_eq!(text.len(), Z85_LEN);
        assert_eq!(text.parse::<PublicKey>().unwrap(), pair.public);
        assert!("short".parse::<PublicKey>().unwrap_err().contains("40"));
        // `~` is not in the Z85 alphabet
        let bad = format!("{}~", &text[..Z85_LEN - 1]);
        assert!(bad.parse::<PublicKey>().is_err());
        assert_ne!(pair.public.0, pair.secret.0);
        assert!(!format!("{pair:?}").contains(&pair.secret.to_z85()));
    }

    #[test]
    fn key_pairs_are_written_owner_only_and_read_back() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tmp("write");
        let base = dir.join("router");
        let pair = generate().unwrap();
        let (public, secret) = write_key_pair(&base, &pair, false).unwrap();
        assert_eq!(public, dir.join("router.key"));
        assert_eq!(secret, dir.join("router.key_secret"));
        for p in [&public, &secret] {
            let mode = std::fs::metadata(p).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600, "{}", p.display());
        }
        assert_eq!(read_key_pair(&secret).unwrap(), pair);
        assert_eq!(
            read_public_key(public.to_str().unwrap()).unwrap(),
            pair.public
        );
        assert_eq!(
            read_public_key(&pair.public.to_string()).unwrap(),
            pair.public
        );
        // the public file holds no secret
        assert!(!std::fs::read_to_string(&public)
            .unwrap()
            .contains(&pair.secret.to_z85()));

        // never overwritten by accident
        let other = generate().unwrap();
        assert!(matches!(
            write_key_pair(&base, &other, false),
            Err(KeyError::Exists(p)) if p == secret || p == public
        ));
        assert_eq!(read_key_pair(&secret).unwrap(), pair);
        write_key_pair(&base, &other, true).unwrap();
        assert_eq!(read_key_pair(&secret).unwrap(), other);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_secret_key_file_others_can_read_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tmp("perms");
        let pair = generate().unwrap();
        let (_, secret) = write_key_pair(&dir.join("c"), &pair, false).unwrap();
        for (mode, who) in [
            (0o644, "its group and others"),
            (0o640, "its group"),
            (0o604, "others"),
        ] {
            std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(mode)).unwrap();
            let e = read_key_pair(&secret).unwrap_err();
            let text = e.to_string();
            assert!(
                matches!(e, KeyError::OpenPermissions { .. })
                    && text.contains(who)
                    && text.contains("chmod 600")
                    && text.contains(&format!("{mode:04o}")),
                "{text}"
            );
        }
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o400)).unwrap();
        assert_eq!(read_key_pair(&secret).unwrap(), pair);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn certificates_from_pyzmq_and_bare_key_lists_are_read() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tmp("formats");
        // the layout pyzmq's zmq.auth.create_certificates writes
        let made = generate().unwrap();
        let cert = format!(
            "#   ****  Generated by pyzmq  ****\n\
             #   ZeroMQ CURVE **Secret** Certificate\n\n\
             metadata\n    name = \"x\"\ncurve\n\
             \x20   public-key = \"{}\"\n\
             \x20   secret-key = \"{}\"\n",
            made.public,
            made.secret.to_z85()
        );
        let f = dir.join("x.key_secret");
        std::fs::write(&f, cert).unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(read_key_pair(&f).unwrap(), made);

        let a = generate().unwrap().public;
        let b = generate().unwrap().public;
        let list = dir.join("clients.txt");
        std::fs::write(&list, format!("# clients\n{a} alice\n\n{b}\n")).unwrap();
        let AuthorisedKeys::Only(keys) = load_authorised_keys(list.to_str().unwrap()).unwrap()
        else {
            panic!("a list")
        };
        assert_eq!(keys[&a], "alice");
        assert!(keys[&b].ends_with("clients.txt#2"), "{}", keys[&b]);

        std::fs::write(&list, format!("{a}\nnot-a-key\n")).unwrap();
        let e = load_authorised_keys(list.to_str().unwrap()).unwrap_err();
        assert!(e.to_string().contains("line 2"), "{e}");
        std::fs::write(&list, "# nobody\n").unwrap();
        let e = load_authorised_keys(list.to_str().unwrap()).unwrap_err();
        assert!(e.to_string().contains("no public key"), "{e}");
        assert_eq!(load_authorised_keys("ANY").unwrap(), AuthorisedKeys::Any);
        assert!(load_authorised_keys("/nonexistent/keys").is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_directory_holds_public_certificates_named_by_file() {
        let dir = tmp("dir");
        let alice = generate().unwrap();
        let bob = generate().unwrap();
        write_key_pair(&dir.join("alice"), &alice, false).unwrap();
        write_key_pair(&dir.join("bob"), &bob, false).unwrap();
        std::fs::write(dir.join("README"), "not a key").unwrap();
        let keys = load_authorised_keys(dir.to_str().unwrap()).unwrap();
        assert_eq!(keys.len(), Some(2));
        assert_eq!(keys.admits(&alice.public), Some("alice"));
        assert_eq!(keys.admits(&bob.public), Some("bob"));
        assert_eq!(keys.admits(&generate().unwrap().public), None);
        let empty = tmp("empty");
        assert!(load_authorised_keys(empty.to_str().unwrap()).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::remove_dir_all(&empty).unwrap();
    }

    #[test]
    fn client_settings_come_from_flags_or_settings() {
        let dir = tmp("client");
        let server = generate().unwrap();
        let own = generate().unwrap();
        let (server_pub, _) = write_key_pair(&dir.join("router"), &server, false).unwrap();
        let (_, own_secret) = write_key_pair(&dir.join("me"), &own, false).unwrap();
        let none = |_: &str| None;
        assert_eq!(curve_client(&CurveArgs::default(), &none), Ok(None));

        let args = CurveArgs {
            curve_server_key: Some(server_pub.to_str().unwrap().into()),
            curve_secret_key_file: Some(own_secret.clone()),
        };
        let c = curve_client(&args, &none).unwrap().unwrap();
        assert_eq!(c.server_key, server.public);
        assert_eq!(c.own, own);

        let env_key = server.public.to_string();
        let own_path = own_secret.to_str().unwrap().to_string();
        let settings = |k: &str| match k {
            SETTING_SERVER_KEY => Some(env_key.clone()),
            SETTING_SECRET_KEY_FILE => Some(own_path.clone()),
            _ => None,
        };
        let c = curve_client(&CurveArgs::default(), &settings)
            .unwrap()
            .unwrap();
        assert_eq!((c.server_key, c.own), (server.public, own.clone()));

        // a server key alone: a fresh key pair of this process
        let only_server = CurveArgs {
            curve_server_key: Some(env_key.clone()),
            curve_secret_key_file: None,
        };
        let c = curve_client(&only_server, &none).unwrap().unwrap();
        assert_ne!(c.own, own);

        let e = curve_client(
            &CurveArgs {
                curve_server_key: None,
                curve_secret_key_file: Some(own_secret.clone()),
            },
            &none,
        )
        .unwrap_err();
        assert!(e.contains("--curve-server-key"), "{e}");
        let e = curve_client(
            &CurveArgs {
                curve_server_key: Some("not a key".into()),
                curve_secret_key_file: None,
            },
            &none,
        )
        .unwrap_err();
        assert!(e.starts_with("--curve-server-key"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
