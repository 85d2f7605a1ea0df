#!/usr/bin/env bash
# The main job, end to end on loopback with default settings: build emq,
# start a router and a job manager (scripts/local-cluster.sh), submit Rust
# handler, shell and Python jobs with `emq-sender --wait` and print their
# results (scripts/submit-example.sh), then stop everything.
#
#   scripts/demo.sh            # release build (default)
#   scripts/demo.sh --debug    # debug build (faster to compile)
#
# Exit status 0 when every job ended as expected. The router keeps its
# journal in a temporary directory that is removed afterwards, so the demo
# leaves nothing behind. Logs: target/demo/{router,jobmanager}.log.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
profile_flag=()
for arg in "$@"; do
    case "$arg" in
        --debug) profile_flag=(--debug) ;;
        --release) profile_flag=() ;;
        -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        *) echo "demo: unknown option $arg (try --help)" >&2; exit 2 ;;
    esac
done
profile=release
[[ ${#profile_flag[@]} -gt 0 ]] && profile=debug

cd "$repo"
flags=()
[[ $profile == release ]] && flags+=(--release)
bash scripts/ensure-deps.sh
echo "demo: building ($profile)"
cargo build "${flags[@]}" -p emq-router -p emq-jobmanager -p emq-sender

# Refuse to mix with a cluster that is already running on the default ports.
for port in 47290 47291 47293; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        echo "demo: something already listens on 127.0.0.1:$port (another emq router?); stop it first" >&2
        exit 1
    fi
done

data="$(mktemp -d)"
export EMQ_LOG_DIR="$repo/target/demo"
rm -f "$EMQ_LOG_DIR"/router.log "$EMQ_LOG_DIR"/jobmanager.log
export ROUTER_ARGS="--journal $data/journal.sqlite ${ROUTER_ARGS:-}"
cluster_pid=""
cleanup() {
    if [[ -n "$cluster_pid" ]] && kill -0 "$cluster_pid" 2>/dev/null; then
        kill -TERM "$cluster_pid" 2>/dev/null || true
        wait "$cluster_pid" 2>/dev/null || true
    fi
    rm -rf "$data"
}
trap cleanup EXIT

scripts/local-cluster.sh --no-build "${profile_flag[@]}" &
cluster_pid=$!

# Wait (bounded) until the job manager has registered with the router.
for _ in $(seq 1 100); do
    if grep -q "listening" "$EMQ_LOG_DIR/router.log" 2>/dev/null \
        && grep -qi "registered" "$EMQ_LOG_DIR/jobmanager.log" 2>/dev/null; then
        break
    fi
    if ! kill -0 "$cluster_pid" 2>/dev/null; then
        echo "demo: the cluster did not start; logs in $EMQ_LOG_DIR" >&2
        exit 1
    fi
    sleep 0.1
done

status=0
scripts/submit-example.sh "${profile_flag[@]}" || status=$?

echo "demo: stopping the cluster"
kill -TERM "$cluster_pid" 2>/dev/null || true
wait "$cluster_pid" 2>/dev/null || true
cluster_pid=""
if [[ $status == 0 ]]; then
    echo "demo: done, every job ended as expected"
else
    echo "demo: some jobs did not end as expected (logs in $EMQ_LOG_DIR)" >&2
fi
exit "$status"
