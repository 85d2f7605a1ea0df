#!/usr/bin/env bash
# Build the release binaries and run the emq benchmark: raw zmq limit, emq
# end to end (memory mode, memory mode with CURVE encryption on every socket,
# durable SQLite journal, journal on PostgreSQL), single-job round trip,
# router memory with 1,000,000 buffered jobs, ratios to the raw limit
# (--skip-curve leaves CURVE out).
#
# The PostgreSQL phase runs against a throwaway local server that emq-bench
# starts (initdb in a temporary directory, as the postgres user when run as
# root; synchronous_commit on) and stops at the end, when Debian's
# postgresql package is installed; EMQ_BENCH_POSTGRES=postgresql://... (or
# --postgres URL) names an existing database instead, --skip-postgres skips
# it.
#
#   scripts/bench.sh                 # defaults: 100,000 jobs, medians of 3 runs
#   scripts/bench.sh --quick         # smoke run: 2000 jobs, 1 run
#   scripts/bench.sh --skip-durable --runs 5 ...   # any emq-bench option
#   scripts/bench.sh --skip-raw --skip-raw-credit --skip-memory-mode \
#       --skip-durable --skip-ideal-worker --skip-buffered   # PostgreSQL only
#
# Prints the table on stdout (progress on stderr) and writes the JSON to
# target/bench/latest.json (override with BENCH_JSON=path). Targets are
# reported, never asserted; the exit status is non-zero only when the build
# fails or a phase could not run. Every wait in emq-bench has a timeout and
# the router / job manager it starts are stopped on exit, Ctrl-C included.
#
#   scripts/bench.sh --noisy         # flow control (issue 27) alone: key A
#       floods 100,000 jobs while key B submits one every 10 ms; B's submit ->
#       start p50/p99 with `fair` and without; dispatch throughput with
#       limits on and off (--quick: 5,000 jobs)
#
#   scripts/bench.sh --peers [--jobs N --rounds R --only emq,celery ...]
#       the same Python workload through emq, EventMQ 0.3.13 (the test venv)
#       and, when installed, Celery+Redis and RQ, alternating systems in
#       rounds; jobs/s, submit -> done p50/p99, emq / peer. Not part of the
#       tests. scripts/setup-bench-peers.sh (run first, idempotent) installs
#       Debian's redis-server and a separate venv with Celery, RQ and
#       emq_client, and says what it installs; EMQ_PEERS_NO_SETUP=1 skips it.
#       Options are scripts/bench-peers/driver.py's (--help).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
target="${CARGO_TARGET_DIR:-$repo/target}"
json="${BENCH_JSON:-$target/bench/latest.json}"

bash scripts/ensure-deps.sh

if [[ "${1:-}" == "--peers" ]]; then
    shift
    cargo build --release -p emq-router -p emq-jobmanager >&2
    if [[ "${EMQ_PEERS_NO_SETUP:-}" == 1 ]]; then
        venv="${EMQ_PEERS_VENV:-$target/bench/peers-venv}"
    else
        venv="$(scripts/setup-bench-peers.sh | tail -1)"
    fi
    mkdir -p "$target/bench"
    exec "$venv/bin/python" scripts/bench-peers/driver.py --bin-dir "$target/release" \
        --eventmq-venv "${EMQ_PY_VENV:-$repo/.venv}" --json "$target/bench/peers.json" "$@"
fi

cargo build --release -p emq-router -p emq-jobmanager -p emq-bench >&2
mkdir -p "$(dirname "$json")"
exec "$target/release/emq-bench" --bin-dir "$target/release" --json "$json" "$@"
