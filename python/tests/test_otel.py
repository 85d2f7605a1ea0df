"""emq_client.otel: a submit carries the current span's traceparent when
opentelemetry is installed (the `otel` extra)."""

import pytest

from emq_client import _core, otel

trace = pytest.importorskip("opentelemetry.trace")
sdk_trace = pytest.importorskip("opentelemetry.sdk.trace")


def test_no_current_span_adds_nothing() -> None:
    assert otel.current_traceparent() is None
    assert "traceparent" not in _core.submit_headers(False, 0, 0, None, ())


def test_the_current_span_goes_along_as_traceparent() -> None:
    tracer = sdk_trace.TracerProvider().get_tracer("t")
    with tracer.start_as_current_span("caller") as span:
        ctx = span.get_span_context()
        want = "traceparent:00-%032x-%016x-" % (ctx.trace_id, ctx.span_id)
        frame = _core.submit_headers(False, 2, 0, None, ("x-mine",))
        assert frame.split(",")[-1].startswith(want)
        assert "retry-count:2" in frame and "x-mine" in frame
        # A traceparent the caller gives wins.
        own = "traceparent:00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        assert otel.with_traceparent([own]) == [own]
