#!/usr/bin/env bash
# Set up what `scripts/bench.sh --peers` needs, and say what it installs:
#  - Debian's redis-server (apt-get, as root), for Celery, RQ, Dramatiq and
#    BullMQ;
#  - Debian's nodejs and npm (apt-get, as root) and the bullmq and ioredis npm packages
#    in a folder of its own (default target/bench/bullmq, or
#    $EMQ_PEERS_BULLMQ_DIR), for BullMQ;
#  - a virtualenv of its own for the bench (default target/bench/peers-venv,
#    or $EMQ_PEERS_VENV; never the test venv .venv) with Celery, RQ,
#    Dramatiq, redis, pyzmq from PyPI and this checkout's emq_client
#    (python/);
#  - EventMQ 0.3.13 comes from the test virtualenv that
#    scripts/setup-python.sh makes ($EMQ_PY_VENV, default .venv): it is run
#    from there, nothing is installed for it here.
# Idempotent: what is there already is kept (a second run needs no network).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${EMQ_PEERS_VENV:-$repo/target/bench/peers-venv}"
bullmq="${EMQ_PEERS_BULLMQ_DIR:-$repo/target/bench/bullmq}"

if ! command -v redis-server >/dev/null 2>&1; then
    if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
        echo "setup-bench-peers: installing Debian's redis-server (apt-get)" >&2
        apt-get install -y --no-install-recommends redis-server >&2
        # the bench starts its own redis-server on a free port: not the service
        systemctl disable --now redis-server >/dev/null 2>&1 || true
    else
        echo "setup-bench-peers: redis-server is missing and cannot be installed here (not root):" \
             "Celery and RQ will be skipped" >&2
    fi
else
    echo "setup-bench-peers: redis-server is there ($(command -v redis-server))" >&2
fi

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
        echo "setup-bench-peers: installing Debian's nodejs and npm (apt-get)" >&2
        apt-get install -y --no-install-recommends nodejs npm >&2
    else
        echo "setup-bench-peers: node/npm are missing and cannot be installed here (not root):" \
             "BullMQ will be skipped" >&2
    fi
fi
if command -v npm >/dev/null 2>&1; then
    # ioredis: the Redis client bullmq takes as a peer dependency.
    if [[ -d "$bullmq/node_modules/bullmq" && -d "$bullmq/node_modules/ioredis" ]]; then
        echo "setup-bench-peers: $bullmq already has bullmq and ioredis" >&2
    else
        echo "setup-bench-peers: installing bullmq and ioredis (npm) into $bullmq" >&2
        mkdir -p "$bullmq"
        (cd "$bullmq" && npm install --no-audit --no-fund --loglevel=error bullmq ioredis >&2)
    fi
fi

if [[ ! -x "$venv/bin/python" ]]; then
    echo "setup-bench-peers: creating the bench virtualenv $venv" >&2
    python3 -m venv "$venv"
fi
if "$venv/bin/python" -c "import celery, rq, dramatiq, redis, zmq, emq_client" >/dev/null 2>&1; then
    echo "setup-bench-peers: $venv already has celery, rq, dramatiq, redis, pyzmq and emq_client" >&2
else
    echo "setup-bench-peers: installing celery[redis], rq, dramatiq[redis], redis, pyzmq (PyPI) and ./python (emq_client) into $venv" >&2
    "$venv/bin/pip" install --quiet --disable-pip-version-check 'celery[redis]' rq 'dramatiq[redis]' redis pyzmq >&2
    "$venv/bin/pip" install --quiet --disable-pip-version-check "$repo/python" >&2
fi
echo "$venv"
