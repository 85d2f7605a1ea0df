//! The router's HTTP side: `--metrics` (the Prometheus text) and
//! `--http` (the dashboard, with `/metrics` too). Both are served on
//! threads of their own (`emq_http::metrics`,
//! `emq_dashboard`); the loop's part is the metrics text, re-rendered
//! from the core's snapshot at most every [`METRICS_EVERY`] — a deadline
//! of its own in the loop's one minimum. The dashboard is an admin client
//! of this router, on an extra inproc endpoint of the admin socket
//! (inproc has no ZAP; the HTTP side applies its own access rules).
//! Dropping the side stops the servers (and joins their threads); it must
//! drop before the zmq context ends.

use std::time::Duration;

use emq_http::metrics::MetricsText;
use emq_router_core::Router;

use crate::flags::Plan;
use crate::sockets::Sockets;

/// How often the metrics text is rendered (when --metrics or --http is on).
const METRICS_EVERY: Duration = Duration::from_millis(500);

pub(crate) struct Web {
    text: Option<MetricsText>,
    next_render: Duration,
    _metrics: Option<emq_http::HttpServer>,
    _dashboard: Option<emq_dashboard::Dashboard>,
}

impl Web {
    pub(crate) fn start(opts: &Plan, socks: &Sockets) -> Result<Web, String> {
        let text = (opts.metrics.is_some() || opts.http.is_some()).then(MetricsText::default);
        let metrics = match (&opts.metrics, &text) {
            (Some(addr), Some(text)) => {
                let server = emq_http::metrics::serve_metrics(addr, text.clone())
                    .map_err(|e| format!("--metrics {addr}: {e}"))?;
                log::info!(
                    "listening: metrics http://{}/metrics (Prometheus)",
                    server.local_addr()
                );
                Some(server)
            }
            _ => None,
        };
        let dashboard = match (&opts.http, &text) {
            (Some((addr, access)), Some(text)) => {
                let inproc = emq_dashboard::INPROC_ADMIN;
                socks
                    .get(emq_router_core::Socket::Admin)
                    .bind(inproc)
                    .map_err(|e| format!("admin: cannot bind {inproc}: {e}"))?;
                let d = emq_dashboard::Dashboard::start(
                    addr,
                    socks.context(),
                    inproc,
                    access.clone(),
                    emq_http::metrics::routes(text.clone()),
                )?;
                log::info!(
                    "listening: dashboard http://{}/ (API /api/, metrics /metrics{}{})",
                    d.local_addr(),
                    if access.token.is_some() {
                        "; token required"
                    } else {
                        ""
                    },
                    if access.read_only { "; read-only" } else { "" }
                );
                Some(d)
            }
            _ => None,
        };
        Ok(Web {
            text,
            next_render: Duration::ZERO,
            _metrics: metrics,
            _dashboard: dashboard,
        })
    }

    /// When the metrics text is next rendered.
    pub(crate) fn deadline(&self) -> Option<Duration> {
        self.text.as_ref().map(|_| self.next_render)
    }

    /// Render the metrics text if it is due.
    pub(crate) fn tick(&mut self, router: &Router, now: Duration) {
        if let Some(text) = &self.text {
            if now >= self.next_render {
                self.next_render = now + METRICS_EVERY;
                text.set(emq_router_core::metrics::render(&router.snapshot(now)));
            }
        }
    }
}
