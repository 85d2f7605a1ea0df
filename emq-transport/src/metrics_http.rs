//! A minimal HTTP endpoint for Prometheus scrapes (`GET /metrics`).
//!
//! The owner of the numbers (the router's poll loop) renders a fresh text
//! into a [`MetricsText`] from time to time; the server thread only serves
//! the latest copy, so a slow scraper never stalls routing.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// The latest rendered exposition text, shared with the server thread.
#[derive(Clone, Default)]
pub struct MetricsText(Arc<RwLock<String>>);

impl MetricsText {
    pub fn set(&self, text: String) {
        if let Ok(mut t) = self.0.write() {
            *t = text;
        }
    }

    pub fn get(&self) -> String {
        self.0.read().map(|t| t.clone()).unwrap_or_default()
    }
}

/// Serve `text` on `addr` (`127.0.0.1:9090`; an `http://` prefix is
/// accepted). Returns the bound address (useful with port 0).
pub fn serve_metrics(addr: &str, text: MetricsText) -> std::io::Result<std::net::SocketAddr> {
    let addr = addr.trim_start_matches("http://").trim_end_matches('/');
    let listener = TcpListener::bind(addr)?;
    let local = listener.local_addr()?;
    std::thread::Builder::new()
        .name("metrics-http".into())
        .spawn(move || {
            for conn in listener.incoming() {
                match conn {
                    Ok(stream) => {
                        if let Err(e) = answer(stream, &text) {
                            log::debug!("metrics request failed: {e}");
                        }
                    }
                    Err(e) => log::warn!("metrics accept failed: {e}"),
                }
            }
        })?;
    Ok(local)
}

fn answer(stream: TcpStream, text: &MetricsText) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    stream.set_write_timeout(Some(Duration::from_secs(5)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    // Drain the headers (bounded) so the client sees a clean response.
    let mut line = String::new();
    for _ in 0..100 {
        line.clear();
        if reader.read_line(&mut line)? == 0 || line == "\r\n" || line == "\n" {
            break;
        }
    }
    let mut parts = request_line.split_whitespace();
    let method = parts.next().unwrap_or("");
    let path = parts.next().unwrap_or("");
    let (status, ctype, body) = match (method, path.split('?').next().unwrap_or("")) {
        ("GET", "/metrics") | ("GET", "/") => (
            "200 OK",
            "text/plain; version=0.0.4; charset=utf-8",
            text.get(),
        ),
        ("GET", _) => (
            "404 Not Found",
            "text/plain",
            "not found; try /metrics\n".into(),
        ),
        _ => ("405 Method Not Allowed", "text/plain", "GET only\n".into()),
    };
    let mut out = stream;
    write!(
        out,
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn serves_the_latest_text_over_http() {
        let text = MetricsText::default();
        text.set("emq_up 1\n".into());
        let addr = serve_metrics("127.0.0.1:0", text.clone()).unwrap();
        let get = |path: &str| {
            let mut s = TcpStream::connect(addr).unwrap();
            write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
            let mut r = String::new();
            s.read_to_string(&mut r).unwrap();
            r
        };
        let r = get("/metrics");
        assert!(r.starts_with("HTTP/1.1 200 OK"), "{r}");
        assert!(r.ends_with("emq_up 1\n"));
        text.set("emq_up 2\n".into());
        assert!(get("/metrics").ends_with("emq_up 2\n"));
        assert!(get("/nope").starts_with("HTTP/1.1 404"));
    }
}
