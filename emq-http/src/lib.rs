//! The HTTP side of the binaries that serve it: one small server on its own
//! thread, serving a router of routes (the router's `/metrics`, see
//! [`metrics`], and its dashboard and `/api/`, all on one address). Only
//! those binaries link this crate: the sender, receiver, CLI and job
//! manager carry no async runtime.
//!
//! The work is done by axum on hyper, driven by a current-thread tokio
//! runtime that lives on the server's thread: the binaries stay
//! synchronous (their poll loops never see tokio), and a connection that
//! idles or trickles its request costs a task, not the whole server. The
//! limits a public-facing listener needs are set here once, for every
//! route ([`HttpLimits`]): the size of a request head, the time to send it
//! (which also closes idle keep-alive connections), the time a handler may
//! take, the size of a body an extractor accepts, and how many connections
//! are open at once, in all and from one peer address.
//!
//! Idle connections cannot lock an operator out: when a new connection
//! would go over a cap (all connections, or its peer address's), the
//! oldest connection that is idle (no request in progress: waiting for a
//! request head, or kept alive after a response) is closed to make room —
//! among that peer's own when its cap is hit. Only when every connection
//! is busy answering is the new one closed at once. A flood of idle or
//! trickling connections thus costs the flooder its oldest ones, and a
//! request that arrives is answered.
//!
//! [`HttpServer::start`] binds before it returns (so a bad address is the
//! caller's error and port 0 gives the chosen port back); dropping the
//! [`HttpServer`], or [`HttpServer::shutdown`], stops accepting, lets
//! answers in progress finish for a moment, and joins the thread.

use std::collections::BTreeMap;
use std::io;
use std::net::IpAddr;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::sync::oneshot;
use tower_http::timeout::TimeoutLayer;

pub mod metrics;

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
    /// Most connections open at once; beyond, the oldest idle one is
    /// closed to make room (the new one if none is idle).
    pub max_connections: usize,
    /// Most connections open at once from one peer address; beyond, that
    /// peer's oldest idle one is closed (the new one if none is idle).
    pub max_connections_per_peer: usize,
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
            max_connections_per_peer: 128,
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
    let open: Arc<Mutex<Open>> = Arc::default();
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
        let Some((id, busy, close)) = open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .admit(peer, &limits)
        else {
            log::debug!("HTTP: every connection is busy, closing the one from {peer}");
            continue;
        };
        // a request in progress makes the connection busy (not evictable)
        let counted = busy.clone();
        let app = app.clone().layer(axum::middleware::from_fn(
            move |req: axum::extract::Request, next: axum::middleware::Next| {
                let busy = counted.clone();
                async move {
                    busy.fetch_add(1, Ordering::SeqCst);
                    let response = next.run(req).await;
                    busy.fetch_sub(1, Ordering::SeqCst);
                    response
                }
            },
        ));
        let conn = http.serve_connection(TokioIo::new(stream), TowerToHyperService::new(app));
        let conn = graceful.watch(conn);
        let open = Arc::clone(&open);
        tokio::spawn(async move {
            tokio::select! {
                done = conn => if let Err(e) = done {
                    log::debug!("HTTP connection from {peer}: {e}");
                },
                _ = close => log::debug!("HTTP: idle connection from {peer} closed to make room"),
            }
            open.lock().unwrap_or_else(|e| e.into_inner()).remove(id);
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

/// One open connection, as the accept loop sees it.
struct Conn {
    peer: IpAddr,
    /// Requests in progress on it.
    busy: Arc<AtomicUsize>,
    /// Closes it (its task drops the connection).
    close: oneshot::Sender<()>,
}

/// The open connections, oldest first (ids grow).
#[derive(Default)]
struct Open {
    next: u64,
    conns: BTreeMap<u64, Conn>,
}

impl Open {
    /// Make room for a connection from `peer` (closing the oldest idle one
    /// over a cap, see the module documentation) and register it: its id,
    /// busy count and close signal; `None`: no room (all busy).
    fn admit(
        &mut self,
        peer: SocketAddr,
        limits: &HttpLimits,
    ) -> Option<(u64, Arc<AtomicUsize>, oneshot::Receiver<()>)> {
        let ip = peer.ip();
        let from_peer = self.conns.values().filter(|c| c.peer == ip).count();
        if from_peer >= limits.max_connections_per_peer.max(1) && !self.evict(Some(ip)) {
            return None;
        }
        if self.conns.len() >= limits.max_connections.max(1) && !self.evict(None) {
            return None;
        }
        self.next += 1;
        let busy = Arc::new(AtomicUsize::new(0));
        let (close, closed) = oneshot::channel();
        self.conns.insert(
            self.next,
            Conn {
                peer: ip,
                busy: Arc::clone(&busy),
                close,
            },
        );
        Some((self.next, busy, closed))
    }

    /// Close the oldest idle connection (of `peer`, if given); whether
    /// there was one.
    fn evict(&mut self, peer: Option<IpAddr>) -> bool {
        let victim = self
            .conns
            .iter()
            .find(|(_, c)| peer.is_none_or(|p| c.peer == p) && c.busy.load(Ordering::SeqCst) == 0)
            .map(|(id, _)| *id);
        match victim.and_then(|id| self.conns.remove(&id)) {
            Some(c) => {
                let _ = c.close.send(());
                true
            }
            None => false,
        }
    }

    fn remove(&mut self, id: u64) {
        self.conns.remove(&id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(all: usize, per_peer: usize) -> HttpLimits {
        HttpLimits {
            max_connections: all,
            max_connections_per_peer: per_peer,
            ..HttpLimits::default()
        }
    }

    fn at(ip: [u8; 4], port: u16) -> SocketAddr {
        SocketAddr::from((ip, port))
    }

    #[test]
    fn over_a_cap_the_oldest_idle_connection_makes_room() {
        let l = limits(3, 2);
        let mut open = Open::default();
        let a = open.admit(at([10, 0, 0, 1], 1), &l).unwrap();
        let mut b = open.admit(at([10, 0, 0, 1], 2), &l).unwrap();
        // the peer's cap: its oldest idle one (a) goes
        a.1.fetch_add(1, Ordering::SeqCst); // a is busy answering
        let mut c = open.admit(at([10, 0, 0, 1], 3), &l).unwrap();
        assert!(b.2.try_recv().is_ok(), "b (idle) was closed, not a (busy)");
        assert_eq!(open.conns.len(), 2);
        // the global cap, from another peer: the oldest idle overall (c)
        let _d = open.admit(at([10, 0, 0, 2], 1), &l).unwrap();
        let _e = open.admit(at([10, 0, 0, 2], 2), &l).unwrap();
        assert!(c.2.try_recv().is_ok(), "c was closed");
        assert_eq!(open.conns.len(), 3);
        // all busy: the new one is refused
        for conn in open.conns.values() {
            conn.busy.fetch_add(1, Ordering::SeqCst);
        }
        assert!(open.admit(at([10, 0, 0, 3], 1), &l).is_none());
        open.remove(a.0);
        assert!(open.admit(at([10, 0, 0, 3], 1), &l).is_some());
    }
}
