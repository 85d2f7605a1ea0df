//! The router's web dashboard: a page for operators and a JSON API for the
//! page and for scripts, served with `/metrics` by one HTTP server
//! (`emq-router --http 127.0.0.1:9464`).
//!
//! How it fits together:
//! - [`admin`]: the dashboard is an admin client of its own router. The
//!   router binds its admin socket also on [`INPROC_ADMIN`]; every API
//!   call becomes one control-plane request (`ADMIN [json]`), so the API
//!   can do exactly what the control plane does, with the same answers,
//!   and the router core stays the only owner of its state.
//! - [`api`]: `/api/<op>`, the HTTP form of the control plane.
//! - [`history`]: a thread samples STATUS every two seconds for the
//!   overview's chart of the last ten minutes, and `queues` for each
//!   queue's charts ([`queue_history`]).
//! - [`access`]: loopback by default; a token elsewhere; POST plus a
//!   custom header for state changes; a read-only mode.
//! - The page (`assets/`: one HTML file, one stylesheet, one script, plain
//!   JS with no build step) is compiled into the binary. It polls the API
//!   every two seconds.
//!
//! Cost: the page asks only for bounded answers — `queues`, `workers`,
//! `schedules`, `dead` and `jobs` pages (the router looks at no more than
//! 100,000 jobs per `jobs` call), a `job` by msgid — and the sampled
//! STATUS, so no page or call is O(all jobs).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod access;
pub mod admin;
mod api;
pub mod history;
pub mod queue_history;

use std::net::ToSocketAddrs;
use std::sync::Arc;
use std::time::Duration;

use emq_http::axum::extract::{Request, State};
use emq_http::axum::http::{header, HeaderValue};
use emq_http::axum::middleware::{self, Next};
use emq_http::axum::response::{IntoResponse, Response};
use emq_http::axum::routing::get;
use emq_http::axum::Router;
use emq_http::{HttpLimits, HttpServer};

pub use access::Access;
pub use admin::AdminPool;

/// The extra endpoint of the router's admin socket that the dashboard
/// talks to (one per process: zmq contexts do not share inproc names).
pub const INPROC_ADMIN: &str = "inproc://emq-router-admin-http";

/// How long an API call waits for the router's answer.
pub const ADMIN_TIMEOUT: Duration = Duration::from_secs(5);

const INDEX_HTML: &str = include_str!("../assets/index.html");
const APP_JS: &str = include_str!("../assets/app.js");
const APP_CSS: &str = include_str!("../assets/app.css");
const FAVICON: &str = include_str!("../assets/favicon.svg");

/// What every answer carries: no framing, no sniffing, no referrer, and a
/// policy that lets the page load only its own script and style.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
                   img-src 'self' data:; connect-src 'self'; base-uri 'none'; \
                   form-action 'self'; frame-ancestors 'none'";

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

/// The access check in front of every route, and the security headers on
/// every answer.
async fn guard(State(access): State<Access>, req: Request, next: Next) -> Response {
    let mut res = match access.admit(req.headers()) {
        Ok(()) => next.run(req).await,
        Err((status, kind, message)) => {
            let mut r = api::error_response(status, kind, &message);
            if status == 401 {
                r.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Basic realm=\"emq dashboard\", charset=\"UTF-8\""),
                );
            }
            r
        }
    };
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    res
}

/// The dashboard's routes — the page, its assets, `/api/{op}` — plus
/// `extra` (e.g. `/metrics`), all behind the access rules.
pub fn routes(
    admin: Arc<AdminPool>,
    history: history::History,
    access: Access,
    extra: Router,
) -> Router {
    let api = Arc::new(api::Api {
        admin,
        history,
        access: access.clone(),
        slots: tokio::sync::Semaphore::new(api::CONCURRENT),
    });
    Router::new()
        .route(
            "/",
            get(|| async { asset("text/html; charset=utf-8", INDEX_HTML) }),
        )
        .route(
            "/assets/app.js",
            get(|| async { asset("text/javascript; charset=utf-8", APP_JS) }),
        )
        .route(
            "/assets/app.css",
            get(|| async { asset("text/css; charset=utf-8", APP_CSS) }),
        )
        .route(
            "/favicon.svg",
            get(|| async { asset("image/svg+xml", FAVICON) }),
        )
        .route("/api/{op}", get(api::op).post(api::op))
        .with_state(api)
        .merge(extra)
        .fallback(|| async {
            api::refusal_response(emqp_proto::admin::AdminError::not_found("no such page"))
        })
        .layer(middleware::from_fn_with_state(access, guard))
}

/// A running dashboard: the HTTP server and the sampling thread. Dropping
/// it stops both (the server first), and closes its admin sockets — do
/// that before terminating the zmq context.
pub struct Dashboard {
    server: Option<HttpServer>,
    sampler: Option<history::Sampler>,
}

/// Check `--http ADDR` (with or without `http://`) without binding: it
/// resolves, and an address that is not loopback has a token
/// ([`access::check_bind`]). The address to bind. Binaries call it while
/// checking their flags, before they bind anything.
pub fn check_address<'a>(addr: &'a str, token: Option<&str>) -> Result<&'a str, String> {
    let bare = addr.trim_start_matches("http://").trim_end_matches('/');
    let resolved = bare
        .to_socket_addrs()
        .map_err(|e| format!("--http {addr}: {e}"))?;
    for a in resolved {
        access::check_bind(a, token)?;
    }
    Ok(bare)
}

impl Dashboard {
    /// Serve the dashboard and `extra` routes on `addr`, talking to the
    /// router's admin socket at `admin_endpoint` in `ctx`. Fails when the
    /// address is not loopback and `access` has no token, or cannot be
    /// bound.
    pub fn start(
        addr: &str,
        ctx: &zmq::Context,
        admin_endpoint: &str,
        access: Access,
        extra: Router,
    ) -> Result<Dashboard, String> {
        let bare = check_address(addr, access.token.as_deref())?;
        let admin = Arc::new(AdminPool::new(ctx, admin_endpoint, ADMIN_TIMEOUT));
        let history = history::History::default();
        let app = routes(admin.clone(), history.clone(), access, extra);
        let server = HttpServer::start(bare, app, HttpLimits::default())
            .map_err(|e| format!("--http {addr}: {e}"))?;
        let sampler = history::Sampler::start(admin, history)
            .map_err(|e| format!("cannot start the dashboard's sampler: {e}"))?;
        Ok(Dashboard {
            server: Some(server),
            sampler: Some(sampler),
        })
    }

    /// The bound address (with the chosen port when 0 was asked for).
    pub fn local_addr(&self) -> std::net::SocketAddr {
        self.server
            .as_ref()
            .map(HttpServer::local_addr)
            .expect("running until dropped")
    }
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        drop(self.server.take());
        drop(self.sampler.take());
    }
}
