#!/usr/bin/env bash
# Create the Python virtualenv the interop tests use: the real EventMQ 0.3.13
# (PyPI `eventmq`) router, job manager, scheduler, pub/sub and client library,
# and redis-py (0.3.13's emq-scheduler imports `redis.StrictRedis` and exits
# without it, though eventmq does not declare it); and, for the Python
# client's tests, pytest and emq_client (python/, installed editable), with
# pypa's wheel and setuptools, which scripts/build-wheel.sh packs the wheels
# with (python/tests/test_wheel.py builds and installs them).
#
#   scripts/setup-python.sh            # venv at $EMQ_PY_VENV, default <repo>/.venv
#
# eventmq 0.3.13 pins pyzmq==18.1.0, which does not build on Python 3.11, so
# its dependencies are installed first (current versions) and eventmq itself
# with --no-deps. emq_client is installed with `pip install -e ./python
# --no-build-isolation` (setuptools and wheel from the venv: no build
# environment to download), mypy (python/tests/test_typing.py runs it
# on the client's typed API), and Django and SQLAlchemy (the enqueue-on-commit
# tests, python/tests/test_on_commit.py). Idempotent: each part is skipped when the venv
# already has it (eventmq 0.3.13 with its console scripts; pytest and this
# checkout's emq_client), so a second run needs no network.
#
# Name clash: the venv's bin/ holds eventmq's own `emq-router` and
# `emq-jobmanager` scripts. Tests call those by absolute path
# ($EMQ_PY_VENV/bin/emq-router) and ours by absolute path under target/.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${EMQ_PY_VENV:-$repo/.venv}"
python="${EMQ_PYTHON:-}"
if [[ -z "$python" ]]; then
    for p in python3.11 python3; do
        if command -v "$p" >/dev/null 2>&1; then python="$p"; break; fi
    done
fi
if [[ -z "$python" ]]; then
    echo "setup-python: no python3 found (set EMQ_PYTHON)" >&2
    exit 1
fi

check() {
    [[ -x "$venv/bin/python" ]] &&
        [[ -x "$venv/bin/emq-router" ]] &&
        [[ -x "$venv/bin/emq-jobmanager" ]] &&
        "$venv/bin/python" - <<'PY' >/dev/null 2>&1
import importlib.metadata as md
import eventmq, eventmq.sender, eventmq.client.messages, eventmq.router, eventmq.jobmanager
import zmq, six, psutil, future, croniter, monotonic
assert md.version("eventmq") == "0.3.13", md.version("eventmq")
PY
}

# pytest, mypy, wheel, setuptools and this checkout's python/ package (an
# editable install of another checkout, with a shared EMQ_PY_VENV, does not
# count).
check_client() {
    "$venv/bin/python" - "$repo/python/src" <<'PY' >/dev/null 2>&1
import os, sys
import pytest, mypy, emq_client, wheel, setuptools, django, sqlalchemy
assert os.path.realpath(emq_client.__file__).startswith(os.path.realpath(sys.argv[1]) + os.sep)
PY
}

# redis-py for 0.3.13's emq-scheduler (interop_python_scheduler.rs).
install_redis_client() {
    if "$venv/bin/python" -c "import redis; redis.StrictRedis" >/dev/null 2>&1; then
        return
    fi
    "$venv/bin/python" -m pip --disable-pip-version-check --no-input install --quiet redis
    "$venv/bin/python" -c "import redis; redis.StrictRedis" || {
        echo "setup-python: venv at $venv does not import redis after install" >&2
        exit 1
    }
    echo "setup-python: redis-py installed (for 0.3.13's emq-scheduler)"
}

# OpenTelemetry for the traces test (integration-tests/tests/otel_traces.rs):
# the API and SDK (emq_client's optional `otel` extra; the job's own spans),
# the OTLP/HTTP exporter (the test job exports its spans) and
# opentelemetry-proto (the test's OTLP receiver decodes what it is sent).
install_otel() {
    if "$venv/bin/python" -c "import opentelemetry.sdk.trace, opentelemetry.exporter.otlp.proto.http.trace_exporter, opentelemetry.proto.collector.trace.v1.trace_service_pb2" >/dev/null 2>&1; then
        return
    fi
    "$venv/bin/python" -m pip --disable-pip-version-check --no-input install --quiet \
        opentelemetry-api opentelemetry-sdk opentelemetry-exporter-otlp-proto-http opentelemetry-proto
    echo "setup-python: opentelemetry installed (for the traces test)"
}

install_client() {
    if check_client; then
        echo "setup-python: $venv already has pytest, mypy and emq_client from $repo/python"
        return
    fi
    pip=("$venv/bin/python" -m pip --disable-pip-version-check --no-input)
    "${pip[@]}" install --quiet pytest "mypy>=1.7" wheel "setuptools>=64" "django>=4.2" "sqlalchemy>=2"
    "${pip[@]}" install --quiet --no-build-isolation -e "$repo/python"
    if ! check_client; then
        echo "setup-python: venv at $venv does not import pytest, mypy and emq_client from $repo/python" >&2
        "$venv/bin/python" -c "import pytest, mypy, emq_client; print(emq_client.__file__)" || true
        exit 1
    fi
    echo "setup-python: emq_client installed (editable) from $repo/python"
}

if check; then
    echo "setup-python: $venv already has eventmq 0.3.13"
    install_redis_client
    install_otel
    install_client
    exit 0
fi

echo "setup-python: creating venv at $venv with $("$python" --version 2>&1)"
if ! "$python" -m venv "$venv"; then
    echo "setup-python: '$python -m venv' failed (on Debian: apt-get install python3-venv)" >&2
    exit 1
fi
pip=("$venv/bin/python" -m pip --disable-pip-version-check --no-input)
"${pip[@]}" install --quiet pyzmq six psutil future croniter monotonic
"${pip[@]}" install --quiet --no-deps eventmq==0.3.13

if ! check; then
    echo "setup-python: venv at $venv does not import eventmq 0.3.13 after install" >&2
    "$venv/bin/python" -c "import eventmq" || true
    exit 1
fi
install_redis_client
install_otel
install_client
echo "setup-python: ok: $("$venv/bin/python" -c 'import zmq, sys; print("python", sys.version.split()[0], "pyzmq", zmq.__version__, "libzmq", zmq.zmq_version())')"
