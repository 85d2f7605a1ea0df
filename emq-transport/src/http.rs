//! The HTTP side of a binary: one small server on its own thread, serving a
//! router of routes (`/metrics` today; a dashboard and `/api/` later, all
//! on one address).
//!
//! The work is done by axum on hyper, driven by a current-thread tokio
//! runtime that lives on the server's thread: the binaries stay
//! synchronous (their poll loops never see tokio), and a connection that
//! idles or trickles its request costs a task, not the whole server. The
//! limits a public-facing listener needs are set here once, for every
//! route ([`HttpLimits`]): the size of a request head, the time to send it
//! (which also closes idle keep-alive connections), the time a handler may
//! take, the size of a body an extractor accepts, and how many connections
//! are open at once.
//!
//! [`HttpServer::start`] binds before it returns (so a bad address is the
//! caller's error and port 0 gives the chosen port back); dropping the
//! [`HttpServer`], or [`HttpServer::shutdown`], stops accepting, lets
//! answers in progress finish for a moment, and joins the thread.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::sync::{oneshot, Semaphore};
use tower_http::timeout::TimeoutLayer;

/// axum, as this crate uses it: callers build their routes with it so that
/// the versions always match.
pub use axum;

/// How long answers in progress may take to finish once the server stops.
const GRACE: Duration = Duration::from_secs(1);

/// The limits every connection and request is held to.
#[derive(Debug, Clone)]
pub struct HttpLimits {
    /// Largest request head (request line and headers) in bytes; a bigger
    /// one is answered with 431 and the connection closed.
    pub max_header_bytes: usize,
    /// Most header fields in one request (431 beyond).
    pub max_headers: usize,
    /// A client must send a complete request head within this time after it
    /// connects or after the previous response, else the connection is
    /// closed: slow (slowloris) and idle connections do not stay.
    pub header_timeout: Duration,
    /// A handler must answer within this time (408 otherwise).
    pub request_timeout: Duration,
    /// Largest request body that axum's body extractors accept (413 beyond).
    pub max_body_bytes: usize,
    /// Most connections open at once; a connection beyond is closed at once.
    pub max_connections: usize,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            max_header_bytes: 16 * 1024,
            max_headers: 64,
            header_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(10),
            max_body_bytes: 64 * 1024,
            max_connections: 256,
        }
    }
}

/// A running server. Dropping it stops it (see [`HttpServer::shutdown`]).
pub struct HttpServer {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl HttpServer {
    /// Bind `addr` (`127.0.0.1:9464`; an `http://` prefix and a trailing `/`
    /// are accepted; port 0 picks a free port) and serve `routes` on a
    /// thread of its own. Paths that no route matches get axum's empty 404,
    /// unless `routes` has a fallback.
    pub fn start(addr: &str, routes: Router, limits: HttpLimits) -> io::Result<HttpServer> {
        let addr = addr.trim_start_matches("http://").trim_end_matches('/');
        let listener = std::net::TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let local = listener.local_addr()?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()?;
        let app = routes
            .layer(DefaultBodyLimit::max(limits.max_body_bytes))
            .layer(TimeoutLayer::with_status_code(
                StatusCode::REQUEST_TIMEOUT,
                limits.request_timeout,
            ));
        let (stop, stopped) = oneshot::channel();
        let thread = std::thread::Builder::new()
            .name("http".into())
            .spawn(move || runtime.block_on(serve(listener, app, limits, stopped)))?;
        Ok(HttpServer {
            addr: local,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The bound address (with the chosen port when 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stop accepting, give answers in progress up to a second, close every
    /// connection and join the thread. Returns once the port is closed.
    pub fn shutdown(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() {
                log::error!("the HTTP server thread panicked");
            }
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

/// The accept loop: one task per connection, until `stopped` fires (or its
/// sender is dropped). Connection tasks still running after the grace
/// period end with the runtime.
async fn serve(
    listener: std::net::TcpListener,
    app: Router,
    limits: HttpLimits,
    mut stopped: oneshot::Receiver<()>,
) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            log::error!("HTTP server cannot use its socket: {e}");
            return;
        }
    };
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_header_size(limits.max_header_bytes)
        .max_headers(limits.max_headers);
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let graceful = GracefulShutdown::new();
    loop {
        let (stream, peer) = tokio::select! {
            _ = &mut stopped => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: wait instead of
                    // spinning; the connections in progress go on.
                    log::warn!("HTTP accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            log::debug!(
                "HTTP: {} connections open, closing the one from {peer}",
                limits.max_connections
            );
            continue;
        };
        let conn =
            http.serve_connection(TokioIo::new(stream), TowerToHyperService::new(app.clone()));
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                log::debug!("HTTP connection from {peer}: {e}");
            }
            drop(slot);
        });
    }
    drop(listener);
    if tokio::time::timeout(GRACE, graceful.shutdown())
        .await
        .is_err()
    {
        log::debug!("HTTP: connections still open after {GRACE:?} are closed");
    }
}
