#!/usr/bin/env bash
# Start a local emq cluster on loopback: one emq-router and one
# emq-jobmanager, with their default endpoints (frontend tcp://127.0.0.1:47291,
# backend :47290, admin :47293). Ctrl-C (or SIGTERM) stops both cleanly.
#
#   scripts/local-cluster.sh            # release build (default)
#   scripts/local-cluster.sh --debug    # debug build
#   scripts/local-cluster.sh --no-build # use what is in target/ already
#
# Environment:
#   EMQ_LOG_DIR        where the logs go (default target/local-cluster)
#   ROUTER_ARGS        extra arguments for emq-router (word-split)
#   JOBMANAGER_ARGS    extra arguments for emq-jobmanager (word-split)
#   RUST_LOG           log level (default info)
#   EMQ_ROUTER_BIN     router binary to run instead of target/PROFILE/emq-router
#   EMQ_JOBMANAGER_BIN job manager binary instead of target/PROFILE/emq-jobmanager
#
# PYTHONPATH gets scripts/examples prepended, so that the job manager can run
# the example Python jobs (scripts/examples/emq_example_jobs.py) that
# scripts/submit-example.sh submits.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
profile=release
build=1
for arg in "$@"; do
    case "$arg" in
        --debug) profile=debug ;;
        --release) profile=release ;;
        --no-build) build=0 ;;
        -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        *) echo "local-cluster: unknown option $arg (try --help)" >&2; exit 2 ;;
    esac
done

cd "$repo"
if [[ $build == 1 ]]; then
    flags=()
    [[ $profile == release ]] && flags+=(--release)
    bash scripts/ensure-deps.sh
    echo "local-cluster: building emq-router, emq-jobmanager, emq-sender ($profile)"
    cargo build "${flags[@]}" -p emq-router -p emq-jobmanager -p emq-sender
fi
bin="${CARGO_TARGET_DIR:-$repo/target}/$profile"
router_bin="${EMQ_ROUTER_BIN:-$bin/emq-router}"
jm_bin="${EMQ_JOBMANAGER_BIN:-$bin/emq-jobmanager}"
for b in "$router_bin" "$jm_bin"; do
    if [[ ! -x "$b" ]]; then
        echo "local-cluster: $b not found (build it, or drop --no-build)" >&2
        exit 1
    fi
done

logs="${EMQ_LOG_DIR:-$repo/target/local-cluster}"
mkdir -p "$logs"
export PYTHONPATH="$repo/scripts/examples${PYTHONPATH:+:$PYTHONPATH}"
export RUST_LOG="${RUST_LOG:-info}"

router_pid=""
jm_pid=""
stopping=0
stop() {
    [[ $stopping == 1 ]] && return
    stopping=1
    echo "local-cluster: stopping"
    # job manager first, so it can finish its jobs and say KBYE to the router
    if [[ -n "$jm_pid" ]] && kill -0 "$jm_pid" 2>/dev/null; then
        kill -TERM "$jm_pid" 2>/dev/null || true
        wait "$jm_pid" 2>/dev/null || true
    fi
    if [[ -n "$router_pid" ]] && kill -0 "$router_pid" 2>/dev/null; then
        kill -TERM "$router_pid" 2>/dev/null || true
        wait "$router_pid" 2>/dev/null || true
    fi
    echo "local-cluster: stopped"
}
trap 'stop; exit 0' INT TERM
trap stop EXIT

# shellcheck disable=SC2086
"$router_bin" ${ROUTER_ARGS:-} >>"$logs/router.log" 2>&1 &
router_pid=$!
sleep 0.3
if ! kill -0 "$router_pid" 2>/dev/null; then
    echo "local-cluster: emq-router exited at once; see $logs/router.log:" >&2
    tail -n 20 "$logs/router.log" >&2 || true
    exit 1
fi
# shellcheck disable=SC2086
"$jm_bin" ${JOBMANAGER_ARGS:-} >>"$logs/jobmanager.log" 2>&1 &
jm_pid=$!

cat <<INFO
local-cluster: emq-router (pid $router_pid)     log: $logs/router.log
local-cluster: emq-jobmanager (pid $jm_pid) log: $logs/jobmanager.log
local-cluster: frontend tcp://127.0.0.1:47291, backend tcp://127.0.0.1:47290, admin tcp://127.0.0.1:47293
local-cluster: PYTHONPATH=$PYTHONPATH
local-cluster: try   scripts/submit-example.sh   (Ctrl-C here stops the cluster)
INFO

# Wait until either exits (or a signal arrives); then stop the other.
while kill -0 "$router_pid" 2>/dev/null && kill -0 "$jm_pid" 2>/dev/null; do
    wait -n "$router_pid" "$jm_pid" 2>/dev/null || true
done
if ! kill -0 "$router_pid" 2>/dev/null; then
    echo "local-cluster: emq-router exited; see $logs/router.log" >&2
else
    echo "local-cluster: emq-jobmanager exited; see $logs/jobmanager.log" >&2
fi
stop
exit 1
