//! Who may use the dashboard, and how a state change must be asked for.
//!
//! - **Where it listens.** Loopback needs nothing more. Any other address
//!   (`0.0.0.0` included) needs a token (`--http-token-file`): the server
//!   refuses to start without one ([`check_bind`]).
//! - **Token.** When set, every request — page, API, `/metrics` — carries
//!   it, as `Authorization: Bearer TOKEN` (scripts, Prometheus) or as the
//!   password of HTTP basic auth with any user name (a browser asks for it
//!   after the 401's `WWW-Authenticate: Basic`). Compared in constant time.
//! - **DNS rebinding.** Without a token the server only answers requests
//!   whose `Host` is an IP literal or `localhost`: a page on another site
//!   whose name was made to resolve to 127.0.0.1 cannot read the API.
//! - **State changes** (every op but the reads:
//!   `emqp_proto::admin::OpName::is_change`, and any unknown op) need POST —
//!   GET is refused, so no link or `<img>` can act — and the header
//!   `X-EMQ-Request: 1`, which a cross-site form cannot send and a
//!   cross-site `fetch` cannot send without a CORS preflight, which this
//!   server never grants. A request whose `Origin` names another host is
//!   refused too.
//! - **Read-only** (`--http-read-only`): state changes are refused (403),
//!   reads are served.

use std::net::{IpAddr, SocketAddr};

use base64::Engine;
use emq_http::axum::http::{header, HeaderMap};

/// The header a state-changing request must carry (value `1`).
pub const ACTION_HEADER: &str = "x-emq-request";

/// The access settings of one server.
#[derive(Clone, Default)]
pub struct Access {
    /// Required on every request when set.
    pub token: Option<String>,
    /// Refuse state changes.
    pub read_only: bool,
}

impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Access")
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .field("read_only", &self.read_only)
            .finish()
    }
}

/// Why a request is refused: HTTP status, error kind, message.
pub type Refusal = (u16, &'static str, String);

impl Access {
    /// Whether the request's headers pass: the token when one is set, else
    /// a loopback-style `Host`.
    pub fn admit(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        match &self.token {
            Some(token) => {
                let given = headers
                    .get(header::AUTHORIZATION)
                    .and_then(|v| v.to_str().ok())
                    .and_then(credential);
                match given {
                    Some(g) if same(g.as_bytes(), token.as_bytes()) => Ok(()),
                    Some(_) => Err((401, "unauthorized", "wrong token".into())),
                    None => Err((
                        401,
                        "unauthorized",
                        "a token is required (Authorization: Bearer TOKEN, or basic auth \
                         with the token as password)"
                            .into(),
                    )),
                }
            }
            None => {
                let host = headers
                    .get(header::HOST)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("");
                if host_is_local_literal(host) {
                    Ok(())
                } else {
                    Err((
                        403,
                        "forbidden",
                        format!(
                            "Host {host:?} refused: without --http-token-file the dashboard \
                             answers only to an IP address or localhost"
                        ),
                    ))
                }
            }
        }
    }

    /// Whether a state-changing request may go on (after [`Access::admit`]).
    pub fn admit_change(&self, method_is_post: bool, headers: &HeaderMap) -> Result<(), Refusal> {
        if !method_is_post {
            return Err((405, "method-not-allowed", "state changes need POST".into()));
        }
        if self.read_only {
            return Err((
                403,
                "read-only",
                "the dashboard is read-only (--http-read-only)".into(),
            ));
        }
        if headers.get(ACTION_HEADER).and_then(|v| v.to_str().ok()) != Some("1") {
            return Err((
                403,
                "forbidden",
                format!("state changes need the header {ACTION_HEADER}: 1"),
            ));
        }
        if let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) {
            let host = headers
                .get(header::HOST)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            let origin_host = origin.split_once("://").map_or(origin, |(_, h)| h);
            if origin != "null" && !origin_host.eq_ignore_ascii_case(host) {
                return Err((
                    403,
                    "forbidden",
                    format!("cross-origin request from {origin} refused"),
                ));
            }
        }
        Ok(())
    }
}

/// The token in an `Authorization` value: `Bearer T`, or `Basic
/// base64(user:T)`.
fn credential(value: &str) -> Option<String> {
    let (scheme, rest) = value.trim().split_once(' ')?;
    let rest = rest.trim();
    if scheme.eq_ignore_ascii_case("bearer") {
        return Some(rest.to_string());
    }
    if scheme.eq_ignore_ascii_case("basic") {
        let raw = base64::engine::general_purpose::STANDARD
            .decode(rest)
            .ok()?;
        let text = String::from_utf8(raw).ok()?;
        return text.split_once(':').map(|(_, p)| p.to_string());
    }
    None
}

/// Constant-time equality (the length is not secret).
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// `Host` is an IP address or `localhost` (with or without a port).
fn host_is_local_literal(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or("")
    } else {
        host.rsplit_once(':').map_or(host, |(h, _)| h)
    };
    name.eq_ignore_ascii_case("localhost") || name.parse::<IpAddr>().is_ok()
}

/// Start-up check: a non-loopback address needs a token.
pub fn check_bind(addr: SocketAddr, token: Option<&str>) -> Result<(), String> {
    if addr.ip().is_loopback() || token.is_some() {
        Ok(())
    } else {
        Err(format!(
            "--http {addr} is not a loopback address: give --http-token-file FILE \
             (the dashboard can act on the router)"
        ))
    }
}

/// The token in `path`: its text without surrounding whitespace; empty is
/// an error.
pub fn read_token_file(path: &std::path::Path) -> Result<String, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("--http-token-file {}: {e}", path.display()))?;
    let token = text.trim();
    if token.is_empty() {
        return Err(format!("--http-token-file {}: empty", path.display()));
    }
    Ok(token.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use emq_http::axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn without_a_token_only_local_hosts_are_answered() {
        let a = Access::default();
        for ok in [
            "127.0.0.1:8080",
            "localhost:1",
            "LOCALHOST",
            "[::1]:9",
            "10.1.2.3",
        ] {
            assert!(a.admit(&headers(&[("host", ok)])).is_ok(), "{ok}");
        }
        for bad in ["evil.example:8080", "example.com", ""] {
            assert_eq!(a.admit(&headers(&[("host", bad)])).unwrap_err().0, 403);
        }
    }

    #[test]
    fn the_token_is_accepted_as_bearer_or_basic_password() {
        let a = Access {
            token: Some("s3cret".into()),
            read_only: false,
        };
        assert!(a
            .admit(&headers(&[("authorization", "Bearer s3cret")]))
            .is_ok());
        let basic = base64::engine::general_purpose::STANDARD.encode("admin:s3cret");
        assert!(a
            .admit(&headers(&[("authorization", &format!("Basic {basic}"))]))
            .is_ok());
        assert_eq!(
            a.admit(&headers(&[("authorization", "Bearer nope")]))
                .unwrap_err()
                .0,
            401
        );
        assert_eq!(a.admit(&headers(&[("host", "x")])).unwrap_err().0, 401);
    }

    #[test]
    fn changes_need_post_the_header_the_same_origin_and_write_access() {
        let a = Access::default();
        let good = headers(&[("x-emq-request", "1"), ("host", "127.0.0.1:9")]);
        assert!(a.admit_change(true, &good).is_ok());
        assert_eq!(a.admit_change(false, &good).unwrap_err().0, 405);
        assert_eq!(
            a.admit_change(true, &headers(&[("host", "127.0.0.1:9")]))
                .unwrap_err()
                .0,
            403
        );
        let cross = headers(&[
            ("x-emq-request", "1"),
            ("host", "127.0.0.1:9"),
            ("origin", "http://evil.example"),
        ]);
        assert_eq!(a.admit_change(true, &cross).unwrap_err().0, 403);
        let same_origin = headers(&[
            ("x-emq-request", "1"),
            ("host", "127.0.0.1:9"),
            ("origin", "http://127.0.0.1:9"),
        ]);
        assert!(a.admit_change(true, &same_origin).is_ok());
        let ro = Access {
            token: None,
            read_only: true,
        };
        assert_eq!(ro.admit_change(true, &good).unwrap_err().1, "read-only");
    }

    #[test]
    fn a_public_address_needs_a_token() {
        assert!(check_bind("127.0.0.1:1".parse().unwrap(), None).is_ok());
        assert!(check_bind("[::1]:1".parse().unwrap(), None).is_ok());
        assert!(check_bind("0.0.0.0:1".parse().unwrap(), None).is_err());
        assert!(check_bind("0.0.0.0:1".parse().unwrap(), Some("t")).is_ok());
    }
}
