"""OpenTelemetry context propagation (optional: the ``otel`` extra).

When the ``opentelemetry`` package is importable, a submitted job carries the
current span's W3C ``traceparent`` as the header item
``traceparent:<value>``: the router's span for the job (its queue wait) and
the job manager's span (the run) become children of the caller's span, and
a Python job's own spans nest under the run. Without the package, or with
no valid current span, nothing is added and nothing is imported again.
"""

from typing import Any, Dict, Iterable, List, Optional

TRACEPARENT = "traceparent"

# The opentelemetry modules, once looked for: None = not yet, False = absent.
_otel: Any = None


def _modules() -> Any:
    global _otel
    if _otel is None:
        try:
            from opentelemetry import trace
            from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

            _otel = (trace, TraceContextTextMapPropagator())
        except Exception:  # ImportError, or a broken install: no tracing
            _otel = False
    return _otel


def current_traceparent() -> Optional[str]:
    """The current OpenTelemetry span's ``traceparent``, or None (no
    ``opentelemetry``, or no valid current span)."""
    mods = _modules()
    if not mods:
        return None
    trace, propagator = mods
    if not trace.get_current_span().get_span_context().is_valid:
        return None
    carrier: Dict[str, str] = {}
    try:
        propagator.inject(carrier)
    except Exception:
        return None
    value = carrier.get(TRACEPARENT)
    return value if isinstance(value, str) and value else None


def with_traceparent(headers: Iterable[str]) -> List[str]:
    """``headers`` plus ``traceparent:<current>`` unless they already have a
    ``traceparent`` item or there is no current span."""
    out = list(headers)
    if any(h.startswith(TRACEPARENT + ":") for h in out):
        return out
    tp = current_traceparent()
    if tp is not None:
        out.append(f"{TRACEPARENT}:{tp}")
    return out
