#!/usr/bin/env bash
# Build the release binaries and run the emq benchmark: raw zmq limit, emq
# end to end (memory mode, memory mode with CURVE encryption on every socket,
# and durable journal), single-job round trip, router memory with 1,000,000
# buffered jobs, ratios to the raw limit (--skip-curve leaves CURVE out).
#
#   scripts/bench.sh                 # defaults: 100,000 jobs, medians of 3 runs
#   scripts/bench.sh --quick         # smoke run: 2000 jobs, 1 run
#   scripts/bench.sh --skip-durable --runs 5 ...   # any emq-bench option
#
# Prints the table on stdout (progress on stderr) and writes the JSON to
# target/bench/latest.json (override with BENCH_JSON=path). Targets are
# reported, never asserted; the exit status is non-zero only when the build
# fails or a phase could not run. Every wait in emq-bench has a timeout and
# the router / job manager it starts are stopped on exit, Ctrl-C included.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
target="${CARGO_TARGET_DIR:-$repo/target}"
json="${BENCH_JSON:-$target/bench/latest.json}"

bash scripts/ensure-deps.sh
cargo build --release -p emq-router -p emq-jobmanager -p emq-bench >&2
mkdir -p "$(dirname "$json")"
exec "$target/release/emq-bench" --bin-dir "$target/release" --json "$json" "$@"
