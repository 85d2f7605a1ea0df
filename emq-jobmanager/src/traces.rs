//! The job manager's spans: one per run of a job (`emq.run`), with its
//! kind (`run`, `shell`, `call`), outcome (`ok` or the error kind) and
//! duration, a child of the span in the REQUEST's `traceparent` (the
//! router's queue wait), or the root of a new trace when there is none.
//!
//! Only when an OTLP endpoint is configured (`--otlp-endpoint` or the
//! OTEL_EXPORTER_OTLP_* environment); otherwise the driver has no
//! [`RunSpans`] and the REQUEST's `traceparent` goes to the job as it came.
//! With traces on, the job gets the run span as its `traceparent`
//! ([`JobContext::traceparent`]), so the spans a Python job makes nest
//! under the run. The span is recorded when the pool reports the run
//! finished; a job manager that dies first loses it.

use std::collections::HashMap;
use std::time::{Instant, SystemTime};

use emq_otel::{attr, Kind, Span, Tracing};
use emqp_proto::job::{Job, JobOutcome};
use emqp_proto::TraceParent;

#[cfg(doc)]
use crate::connection::JobContext;
use crate::connection::JobStart;

/// A started run's span, until it ends.
struct Open {
    context: TraceParent,
    parent: Option<TraceParent>,
    msgid: String,
    queue: String,
    kind: &'static str,
    start: SystemTime,
    started: Instant,
}

/// The spans of the runs in progress.
pub(crate) struct RunSpans {
    tracing: Tracing,
    open: HashMap<u64, Open>,
}

impl RunSpans {
    pub(crate) fn new(tracing: Tracing) -> RunSpans {
        RunSpans {
            tracing,
            open: HashMap::new(),
        }
    }

    /// `js` starts: open its span and give the job the span as its
    /// `traceparent`.
    pub(crate) fn start(&mut self, js: &mut JobStart) {
        let parent = js.context.traceparent;
        let context = TraceParent {
            trace_id: parent.map_or_else(|| self.tracing.new_trace_id(), |p| p.trace_id),
            span_id: self.tracing.new_span_id(),
            flags: parent.map_or(1, |p| p.flags),
        };
        js.context.traceparent = Some(context);
        let kind = match js.job {
            Job::Run(_) => "run",
            Job::Shell(_) => "shell",
            Job::Call(_) => "call",
        };
        self.open.insert(
            js.run,
            Open {
                context,
                parent,
                msgid: js.msgid.clone(),
                queue: js.context.queue.clone(),
                kind,
                start: SystemTime::now(),
                started: Instant::now(),
            },
        );
    }

    /// Run `run` finished with `outcome`: record its span.
    pub(crate) fn finish(&mut self, run: u64, outcome: &JobOutcome) {
        let Some(o) = self.open.remove(&run) else {
            return;
        };
        let duration = o.started.elapsed();
        let (result, error) = match outcome {
            JobOutcome::Value(_) => ("ok".to_string(), None),
            JobOutcome::Error(e) => {
                let kind = serde_json::to_value(e.kind)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_else(|| "error".into());
                let message = format!("{kind}: {}", e.message);
                (kind, Some(message))
            }
        };
        self.tracing.record(Span {
            name: "emq.run",
            kind: Kind::Consumer,
            context: o.context,
            parent: o.parent,
            start: o.start,
            end: o.start + duration,
            attributes: vec![
                attr("emq.msgid", o.msgid),
                attr("emq.queue", o.queue),
                attr("emq.job.kind", o.kind),
                attr("emq.outcome", result),
                attr("emq.duration_ms", duration.as_secs_f64() * 1000.0),
            ],
            error,
        });
    }

    /// Export what is left (at exit).
    pub(crate) fn shutdown(&self) {
        self.tracing.shutdown();
    }
}
