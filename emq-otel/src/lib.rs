//! emq-otel: OpenTelemetry traces of the router and the job manager.
//!
//! The cores say what happened (the router core's `Action::JobSpan`, the
//! job manager's job start and finish); a driver that was given an OTLP
//! endpoint turns each into one finished span here ([`Span`]) and hands it
//! to the SDK's batch span processor, whose exporter sends OTLP over
//! HTTP/protobuf. Without an endpoint a driver makes no [`Tracing`] at all:
//! no thread, no exporter, nothing recorded.
//!
//! Why spans are built as finished `SpanData` rather than through a
//! `Tracer`: the router core chooses its span ids itself (it forwards its
//! span as the worker's `traceparent` in the same step, and stays free of
//! randomness), and the SDK's span builder cannot take a given span id. The
//! processor, the exporter and the wire format are the SDK's own; only the
//! record is filled in here.
//!
//! The standard environment applies: `OTEL_SERVICE_NAME` (default: the
//! binary's name, [`Tracing::start`]), `OTEL_RESOURCE_ATTRIBUTES`, the
//! batch processor's `OTEL_BSP_*` (schedule delay, queue size, batch
//! size, export timeout), and the exporter's `OTEL_EXPORTER_OTLP_HEADERS`
//! and `…_TIMEOUT`. The endpoint is resolved by the binary's flags
//! (`emq_cli_support::OtlpArgs`) and given here as the full traces URL.
//! Only `http://` is built in (no TLS stack is linked); put a local
//! collector in front of a TLS one.

#![forbid(unsafe_code)]

use std::borrow::Cow;
use std::time::{Duration, SystemTime};

use emqp_proto::TraceParent;
use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue, Value};
use opentelemetry_otlp::{SpanExporter, WithExportConfig};
use opentelemetry_sdk::trace::{
    BatchSpanProcessor, IdGenerator, RandomIdGenerator, SpanData, SpanEvents, SpanLinks,
    SpanProcessor,
};
use opentelemetry_sdk::Resource;

/// One finished span.
#[derive(Debug, Clone)]
pub struct Span {
    /// `emq.queue_wait` (router), `emq.run` (job manager).
    pub name: &'static str,
    pub kind: SpanKind,
    /// This span's trace id and span id (and flags).
    pub context: TraceParent,
    /// The parent span, if any (a remote one: another process's).
    pub parent: Option<TraceParent>,
    pub start: SystemTime,
    pub end: SystemTime,
    pub attributes: Vec<KeyValue>,
    /// `Some(description)`: the span's status is error.
    pub error: Option<String>,
}

/// A running exporter: spans go to its batch processor's queue (never
/// blocking the caller) and out from the processor's own thread.
pub struct Tracing {
    processor: BatchSpanProcessor,
    scope: InstrumentationScope,
    ids: RandomIdGenerator,
    endpoint: String,
}

impl std::fmt::Debug for Tracing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracing")
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

impl Tracing {
    /// Start the OTLP/HTTP exporter for `traces_url` (the full URL, for
    /// example `http://127.0.0.1:4318/v1/traces`); the service is named
    /// `OTEL_SERVICE_NAME` when set, else `default_service`.
    pub fn start(traces_url: &str, default_service: &'static str) -> Result<Tracing, String> {
        let exporter = SpanExporter::builder()
            .with_http()
            .with_endpoint(traces_url)
            .build()
            .map_err(|e| format!("OTLP exporter for {traces_url}: {e}"))?;
        let named = std::env::var("OTEL_SERVICE_NAME").is_ok_and(|s| !s.trim().is_empty());
        let resource = if named {
            Resource::builder().build()
        } else {
            Resource::builder()
                .with_service_name(default_service)
                .build()
        };
        let mut processor = BatchSpanProcessor::builder(exporter).build();
        processor.set_resource(&resource);
        let scope = InstrumentationScope::builder(default_service)
            .with_version(env!("CARGO_PKG_VERSION"))
            .build();
        log::info!("traces: exporting spans to {traces_url} (OTLP over HTTP/protobuf)");
        Ok(Tracing {
            processor,
            scope,
            ids: RandomIdGenerator::default(),
            endpoint: traces_url.to_string(),
        })
    }

    /// A fresh span id for a span this process starts.
    pub fn new_span_id(&self) -> [u8; 8] {
        self.ids.new_span_id().to_bytes()
    }

    /// A fresh trace id for a trace this process starts.
    pub fn new_trace_id(&self) -> [u8; 16] {
        self.ids.new_trace_id().to_bytes()
    }

    /// Queue `span` for export; a span whose trace is not sampled (the
    /// caller's flags say so) is dropped, as the SDK's parent-based
    /// sampler would.
    pub fn record(&self, span: Span) {
        if !span.context.sampled() {
            return;
        }
        let context = span_context(&span.context, false);
        let status = match span.error {
            Some(description) => Status::Error {
                description: Cow::Owned(description),
            },
            None => Status::Ok,
        };
        self.processor.on_end(SpanData {
            span_context: context,
            parent_span_id: span
                .parent
                .map_or(SpanId::INVALID, |p| SpanId::from_bytes(p.span_id)),
            parent_span_is_remote: span.parent.is_some(),
            span_kind: span.kind,
            name: Cow::Borrowed(span.name),
            start_time: span.start,
            end_time: span.end.max(span.start),
            attributes: span.attributes,
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: SpanLinks::default(),
            status,
            instrumentation_scope: self.scope.clone(),
        });
    }

    /// Export what is queued and stop the processor's thread (at exit;
    /// waits at most the export timeout).
    pub fn shutdown(&self) {
        if let Err(e) = self.processor.shutdown_with_timeout(Duration::from_secs(5)) {
            log::warn!("traces: flushing spans to {} at exit: {e}", self.endpoint);
        }
    }
}

fn span_context(tp: &TraceParent, remote: bool) -> SpanContext {
    SpanContext::new(
        TraceId::from_bytes(tp.trace_id),
        SpanId::from_bytes(tp.span_id),
        TraceFlags::new(tp.flags),
        remote,
        TraceState::NONE,
    )
}

/// An attribute.
pub fn attr(key: &'static str, value: impl Into<Value>) -> KeyValue {
    KeyValue::new(key, value)
}

/// Unix microseconds as a [`SystemTime`].
pub fn unix_micros(us: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_micros(us)
}

pub use opentelemetry::trace::SpanKind as Kind;
