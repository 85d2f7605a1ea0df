"""A minimal OTLP/HTTP (protobuf) trace receiver for the traces test
(integration-tests/tests/otel_traces.rs).

    python otlp_receiver.py SPANS_FILE

Listens on 127.0.0.1 (a free port), says `listening on PORT` on stderr,
and for every POST /v1/traces decodes the ExportTraceServiceRequest with
the `opentelemetry-proto` package and appends one JSON line per span to
SPANS_FILE: service, name, trace_id, span_id, parent_span_id (hex, "" for a
root), kind, status code, start/end (unix ns) and attributes. Answers an
empty ExportTraceServiceResponse. Stops on SIGTERM.
"""

import json
import signal
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


def _value(v):
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


class Handler(BaseHTTPRequestHandler):
    spans_file = None

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path != "/v1/traces":
            self.send_response(404)
            self.end_headers()
            return
        req = ExportTraceServiceRequest()
        req.ParseFromString(body)
        lines = []
        for rs in req.resource_spans:
            res = {a.key: _value(a.value) for a in rs.resource.attributes}
            for ss in rs.scope_spans:
                for s in ss.spans:
                    lines.append(json.dumps({
                        "service": res.get("service.name"),
                        "name": s.name,
                        "trace_id": s.trace_id.hex(),
                        "span_id": s.span_id.hex(),
                        "parent_span_id": s.parent_span_id.hex(),
                        "kind": s.kind,
                        "status": s.status.code,
                        "start": s.start_time_unix_nano,
                        "end": s.end_time_unix_nano,
                        "attributes": {a.key: _value(a.value) for a in s.attributes},
                    }))
        with open(self.spans_file, "a") as f:
            for line in lines:
                f.write(line + "\n")
        out = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, fmt, *args):
        pass


def main():
    Handler.spans_file = sys.argv[1]
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    sys.stderr.write("listening on %d\n" % server.server_address[1])
    sys.stderr.flush()
    server.serve_forever()


if __name__ == "__main__":
    main()
