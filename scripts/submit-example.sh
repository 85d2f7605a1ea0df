#!/usr/bin/env bash
# Submit a few jobs of each kind with `emq-sender --wait` to a running emq
# cluster (start one with scripts/local-cluster.sh) and show the results.
#
#   scripts/submit-example.sh [--debug] [--broker ADDR]
#
# Uses target/release/emq-sender (target/debug with --debug, or $EMQ_SENDER).
# The Python jobs come from scripts/examples/emq_example_jobs.py: the job
# manager must have scripts/examples on its PYTHONPATH (local-cluster.sh
# exports it). Exits 1 if any job did not end as expected.
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
profile=release
broker=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --debug) profile=debug ;;
        --broker) broker=(--broker "$2"); shift ;;
        -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        *) echo "submit-example: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
sender="${EMQ_SENDER:-${CARGO_TARGET_DIR:-$repo/target}/$profile/emq-sender}"
if [[ ! -x "$sender" ]]; then
    echo "submit-example: $sender not found; build it: cargo build --release -p emq-sender" >&2
    exit 1
fi

failures=0
# expect EXIT_CODE DESCRIPTION -- SENDER_ARGS...
expect() {
    local want="$1" what="$2"
    shift 3
    printf '%-42s ' "$what"
    local out code
    out="$("$sender" "${broker[@]}" --wait --timeout 30 "$@")"
    code=$?
    if [[ $code == "$want" ]]; then
        printf 'exit %s  %s\n' "$code" "$out"
    else
        printf 'exit %s (expected %s)  %s\n' "$code" "$want" "$out"
        failures=$((failures + 1))
    fi
}

echo "== Rust handlers"
expect 0 "call echo" -- --call echo --args '{"hello": "world"}'
expect 0 "call noop" -- --call noop
expect 4 "call of an unknown handler (fails)" -- --call no-such-handler

echo "== shell commands"
expect 0 "shell: echo" -- --shell -- echo hello from a shell job
expect 0 "shell: stdin, env and cwd" -- \
    --stdin 'piped in' --env GREETING=hi --cwd /tmp \
    --shell -- sh -c 'echo "$GREETING"; cat; pwd'
expect 4 "shell: exit status 3 (fails)" -- --shell -- sh -c 'exit 3'

echo "== Python callables (scripts/examples/emq_example_jobs.py)"
expect 0 "python: add(1, 2)" -- --python emq_example_jobs.add --args '[1, 2]'
expect 0 "python: echo with kwargs" -- \
    --python emq_example_jobs.echo --args '["a"]' --kwargs '{"k": 1}'
expect 0 "python: Greeter('Hi').greet(name='emq')" -- \
    --python emq_example_jobs:Greeter.greet --class-args '["Hi"]' --kwargs '{"name": "emq"}'
expect 4 "python: a job that raises (fails)" -- --python emq_example_jobs.fail

echo "== bulk: 20 echo jobs from stdin"
bulk_out="$(seq 20 | sed 's/.*/["call", {"handler": "echo", "args": &}]/' \
    | "$sender" "${broker[@]}" --wait --timeout 30)"
code=$?
ok=$(grep -c '"status":"ok"' <<<"$bulk_out")
echo "bulk: exit $code, $ok of 20 ok"
if [[ $code != 0 || $ok != 20 ]]; then failures=$((failures + 1)); fi

if [[ $failures == 0 ]]; then
    echo "submit-example: all jobs ended as expected"
else
    echo "submit-example: $failures job(s) did not end as expected" >&2
    exit 1
fi
