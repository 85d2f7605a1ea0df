//! Prometheus scrapes: the `GET /metrics` route, the shared text it serves,
//! and a builder for the text exposition format.
//!
//! The owner of the numbers (the router's poll loop) renders a fresh text
//! into a [`MetricsText`] from time to time; the HTTP thread
//! ([`crate::http`]) only serves the latest copy, so a slow scraper never
//! stalls routing.

use std::sync::{Arc, RwLock};

use axum::http::header::CONTENT_TYPE;
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;

use crate::http::{HttpLimits, HttpServer};

/// The content type of the text exposition format.
pub const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

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

/// The `/metrics` route (GET and HEAD; 405 for other methods), to merge
/// into the routes of a server.
pub fn routes(text: MetricsText) -> Router {
    Router::new().route(
        "/metrics",
        get(move || {
            let text = text.clone();
            async move { ([(CONTENT_TYPE, PROMETHEUS_TEXT)], text.get()) }
        }),
    )
}

/// Serve `text` on `addr` (`127.0.0.1:9090`; an `http://` prefix is
/// accepted) with the default limits; other paths get 404. The server runs
/// until the returned handle is dropped; its `local_addr` is the bound
/// address (useful with port 0).
pub fn serve_metrics(addr: &str, text: MetricsText) -> std::io::Result<HttpServer> {
    let app =
        routes(text).fallback(|| async { (StatusCode::NOT_FOUND, "not found; try /metrics\n") });
    HttpServer::start(addr, app, HttpLimits::default())
}

/// Builds Prometheus text exposition format.
#[derive(Default)]
pub struct PromText {
    out: String,
}

/// Escape a label value as the exposition format requires.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn labels(pairs: &[(&str, &str)]) -> String {
    if pairs.is_empty() {
        return String::new();
    }
    let inner: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
        .collect();
    format!("{{{}}}", inner.join(","))
}

impl PromText {
    pub fn new() -> PromText {
        PromText::default()
    }

    /// `# HELP` and `# TYPE` lines of a metric family.
    pub fn family(&mut self, name: &str, kind: &str, help: &str) -> &mut Self {
        self.out
            .push_str(&format!("# HELP {name} {help}\n# TYPE {name} {kind}\n"));
        self
    }

    /// One sample line.
    pub fn sample(&mut self, name: &str, label_pairs: &[(&str, &str)], value: f64) -> &mut Self {
        self.out.push_str(&format!(
            "{name}{} {}\n",
            labels(label_pairs),
            fmt_value(value)
        ));
        self
    }

    /// A histogram from cumulative-bucket counts: `buckets[i]` = observations
    /// ≤ `bounds[i]`; `count` and `sum` cover all observations.
    pub fn histogram(
        &mut self,
        name: &str,
        label_pairs: &[(&str, &str)],
        bounds: &[f64],
        cumulative: &[u64],
        count: u64,
        sum: f64,
    ) -> &mut Self {
        for (b, c) in bounds.iter().zip(cumulative) {
            let le = fmt_value(*b);
            let mut l: Vec<(&str, &str)> = label_pairs.to_vec();
            l.push(("le", &le));
            self.sample(&format!("{name}_bucket"), &l, *c as f64);
        }
        let mut l: Vec<(&str, &str)> = label_pairs.to_vec();
        l.push(("le", "+Inf"));
        self.sample(&format!("{name}_bucket"), &l, count as f64);
        self.sample(&format!("{name}_sum"), label_pairs, sum);
        self.sample(&format!("{name}_count"), label_pairs, count as f64);
        self
    }

    pub fn finish(self) -> String {
        self.out
    }
}

fn fmt_value(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_exposition_format() {
        let mut p = PromText::new();
        p.family("emq_queue_depth", "gauge", "Jobs waiting.")
            .sample("emq_queue_depth", &[("queue", "a\"b")], 3.0);
        p.family("emq_job_latency_seconds", "histogram", "Latency.")
            .histogram(
                "emq_job_latency_seconds",
                &[],
                &[0.001, 0.01],
                &[1, 2],
                3,
                0.5,
            );
        let t = p.finish();
        assert!(t.contains("# TYPE emq_queue_depth gauge\n"));
        assert!(t.contains("emq_queue_depth{queue=\"a\\\"b\"} 3\n"));
        assert!(t.contains("emq_job_latency_seconds_bucket{le=\"0.001\"} 1\n"));
        assert!(t.contains("emq_job_latency_seconds_bucket{le=\"+Inf\"} 3\n"));
        assert!(t.contains("emq_job_latency_seconds_sum 0.5\n"));
        assert!(t.contains("emq_job_latency_seconds_count 3\n"));
    }
}
