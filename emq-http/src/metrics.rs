//! Prometheus scrapes: the `GET /metrics` route and the shared text it
//! serves (the text is rendered by `emq_router_core::metrics`).
//!
//! The owner of the numbers (the router's poll loop) renders a fresh text
//! into a [`MetricsText`] from time to time; the HTTP thread
//! ([`crate::HttpServer`]) only serves the latest copy, so a slow scraper never
//! stalls routing.

use std::sync::{Arc, RwLock};

use axum::http::header::CONTENT_TYPE;
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;

use crate::{HttpLimits, HttpServer};

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
