//! The metrics HTTP server against the clients that stalled the old one:
//! idle connections, a slowloris trickling its request head, a huge
//! header; and what a scraper sees. Plain TCP clients on loopback, every
//! wait bounded; each test stops its server (dropping it joins the thread).

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use emq_http::metrics::{routes, serve_metrics, MetricsText, PROMETHEUS_TEXT};
use emq_http::{HttpLimits, HttpServer};

/// What a scrape must take at most while other clients misbehave (the old
/// server took 5 s per idle connection).
const QUICK: Duration = Duration::from_secs(1);

fn metrics_server(body: &str) -> (HttpServer, MetricsText) {
    let text = MetricsText::default();
    text.set(body.into());
    let server = serve_metrics("127.0.0.1:0", text.clone()).unwrap();
    (server, text)
}

/// One request with `Connection: close`; the whole response, or the error
/// that ended the read.
fn request(addr: SocketAddr, method: &str, path: &str, timeout: Duration) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(timeout)).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut r = String::new();
    match s.read_to_string(&mut r) {
        Ok(_) => r,
        Err(e) => format!("{r}<read error: {e}>"),
    }
}

fn header<'a>(response: &'a str, name: &str) -> Option<&'a str> {
    let head = response.split("\r\n\r\n").next()?;
    head.lines().skip(1).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// A scrape of `/metrics` answered 200 with `want` as its body within QUICK.
fn assert_quick_scrape(addr: SocketAddr, want: &str) {
    let t = Instant::now();
    let r = request(addr, "GET", "/metrics", QUICK);
    let took = t.elapsed();
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    assert!(r.ends_with(want), "{r}");
    assert!(took < QUICK, "scrape took {took:?}");
}

#[test]
fn get_metrics_serves_the_latest_text_as_prometheus_text() {
    let (server, text) = metrics_server("emq_up 1\n");
    let addr = server.local_addr();
    assert_ne!(addr.port(), 0, "port 0 gives the chosen port back");
    let r = request(addr, "GET", "/metrics", QUICK);
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    assert_eq!(header(&r, "content-type"), Some(PROMETHEUS_TEXT), "{r}");
    assert!(r.ends_with("\r\n\r\nemq_up 1\n"), "{r}");
    text.set("emq_up 2\n".into());
    assert!(request(addr, "GET", "/metrics", QUICK).ends_with("\r\n\r\nemq_up 2\n"));
    assert!(request(addr, "GET", "/metrics?x=1", QUICK).ends_with("emq_up 2\n"));
    // HEAD is GET without the body.
    let r = request(addr, "HEAD", "/metrics", QUICK);
    assert!(
        r.starts_with("HTTP/1.1 200") && r.ends_with("\r\n\r\n"),
        "{r}"
    );
    server.shutdown();
}

#[test]
fn other_paths_are_404_and_other_methods_405() {
    let (server, _text) = metrics_server("emq_up 1\n");
    let addr = server.local_addr();
    for path in ["/", "/nope", "/metrics/x", "/api/status"] {
        let r = request(addr, "GET", path, QUICK);
        assert!(r.starts_with("HTTP/1.1 404"), "{path}: {r}");
    }
    for method in ["POST", "PUT", "DELETE"] {
        let r = request(addr, method, "/metrics", QUICK);
        assert!(r.starts_with("HTTP/1.1 405"), "{method}: {r}");
        assert!(!r.contains("emq_up"), "{r}");
    }
}

#[test]
fn a_hundred_idle_connections_do_not_delay_a_scrape() {
    let (server, _text) = metrics_server("emq_up 1\n");
    let addr = server.local_addr();
    let idle: Vec<TcpStream> = (0..100)
        .map(|_| TcpStream::connect(addr).unwrap())
        .collect();
    assert_quick_scrape(addr, "emq_up 1\n");
    // And they are still open (not closed to make room): below the cap.
    let mut first = &idle[0];
    first.set_nonblocking(true).unwrap();
    let mut b = [0u8; 1];
    let e = first.read(&mut b).unwrap_err();
    assert_eq!(
        e.kind(),
        ErrorKind::WouldBlock,
        "idle connection closed early"
    );
    drop(idle);
    server.shutdown();
}

/// A connection that has sent the first byte of a request head; `trickle`
/// sends the rest. Connected (and so queued for accept) before anything
/// else the test does.
fn slow_client(addr: SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(b"G").unwrap();
    s
}

/// Sends the rest of a request head one byte every 20 ms, never finishing
/// it, until `stop` or a write fails (the server closed it: the time since
/// the start is returned); bounded to 10 s.
fn trickle(mut s: TcpStream, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Option<Duration>> {
    std::thread::spawn(move || {
        let start = Instant::now();
        let head = b"ET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ";
        let filler = std::iter::repeat(b'a');
        for byte in head.iter().copied().chain(filler) {
            if stop.load(Ordering::Relaxed) || start.elapsed() > Duration::from_secs(10) {
                return None;
            }
            if s.write_all(&[byte]).is_err() {
                return Some(start.elapsed());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    })
}

#[test]
fn a_slowloris_connection_does_not_block_others() {
    let (server, _text) = metrics_server("emq_up 1\n");
    let addr = server.local_addr();
    let stop = Arc::new(AtomicBool::new(false));
    let slow = trickle(slow_client(addr), stop.clone());
    assert_quick_scrape(addr, "emq_up 1\n");
    assert_quick_scrape(addr, "emq_up 1\n");
    stop.store(true, Ordering::Relaxed);
    assert_eq!(
        slow.join().unwrap(),
        None,
        "closed before the default header timeout (5 s)"
    );
    server.shutdown();
}

#[test]
fn a_slowloris_connection_is_closed_at_the_header_timeout() {
    let limits = HttpLimits {
        header_timeout: Duration::from_millis(300),
        ..HttpLimits::default()
    };
    let server = HttpServer::start("127.0.0.1:0", routes(MetricsText::default()), limits).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let closed_after = trickle(slow_client(server.local_addr()), stop)
        .join()
        .unwrap()
        .expect("the server closed the trickling connection");
    // Writes fail only once the close reached the client: allow for that.
    assert!(closed_after < Duration::from_secs(3), "{closed_after:?}");
    server.shutdown();
}

#[test]
fn a_huge_request_header_is_refused() {
    let (server, _text) = metrics_server("emq_up 1\n");
    let addr = server.local_addr();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(QUICK)).unwrap();
    let big = "a".repeat(64 * 1024);
    // The server may close before it has read everything: a failed write
    // is a refusal too.
    let _ = write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: {big}\r\nConnection: close\r\n\r\n"
    );
    let mut r = Vec::new();
    let _ = s.read_to_end(&mut r);
    let r = String::from_utf8_lossy(&r);
    // 431, or the connection closed or reset without an answer; never the
    // metrics.
    assert!(
        r.is_empty() || r.starts_with("HTTP/1.1 431"),
        "not refused: {r}"
    );
    assert!(!r.contains("emq_up"), "{r}");
    // The server still serves well-formed requests.
    assert_quick_scrape(addr, "emq_up 1\n");
    server.shutdown();
}

#[test]
fn shutdown_closes_the_port_and_the_open_connections() {
    let (server, _text) = metrics_server("emq_up 1\n");
    let addr = server.local_addr();
    let mut idle = TcpStream::connect(addr).unwrap();
    assert_quick_scrape(addr, "emq_up 1\n");
    let t = Instant::now();
    server.shutdown();
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    let refused = TcpStream::connect(addr).unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::ConnectionRefused);
    idle.set_read_timeout(Some(QUICK)).unwrap();
    let mut b = [0u8; 1];
    match idle.read(&mut b) {
        Ok(0) => {}
        Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
        other => panic!("idle connection still open: {other:?}"),
    }
}
