"""The traces test's Python side (integration-tests/tests/otel_traces.rs).

`traced_job` is a job whose own code starts a span (`job-work`); the worker
makes the job manager's run span current, so it nests under the run. Run as
a script it is the client: it starts a span `client-request`, submits
`traced_job` with emq_client inside it (emq_client adds the traceparent) and
prints the trace id and msgid as JSON. Both export to the OTLP endpoint in
OTEL_EXPORTER_OTLP_ENDPOINT, one span at a time.
"""

import json
import os
import sys

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

_tracer = None


def _tracer_for(service):
    global _tracer
    if _tracer is None:
        provider = TracerProvider(resource=Resource.create({"service.name": service}))
        provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter()))
        trace.set_tracer_provider(provider)
        _tracer = trace.get_tracer("emq-test")
    return _tracer


def traced_job(value):
    import emq_job  # the job manager's worker provides it

    with _tracer_for("emq-test-job").start_as_current_span("job-work") as span:
        job = emq_job.current()
        span.set_attribute("emq.msgid", job["msgid"])
        return {"value": value, "job": job}


def main():
    frontend = sys.argv[1]
    from emq_client import Client

    tracer = _tracer_for("emq-test-client")
    with tracer.start_as_current_span("client-request") as span:
        trace_id = format(span.get_span_context().trace_id, "032x")
        with Client(frontend) as c:
            job = c.submit("emq_test_otel.traced_job", 7, queue="traced")
            result = job.result(timeout=30)
    print(json.dumps({"trace_id": trace_id, "msgid": job.msgid, "result": result}))


if __name__ == "__main__":
    main()
