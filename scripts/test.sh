#!/usr/bin/env bash
# The project's test command (README, .ci/run): format, lints, build, tests.
# Fails on the first failing step.
#
#   scripts/test.sh
#
# Environment:
#   EMQ_PY_VENV      venv with EventMQ 0.3.13, pytest and emq_client (default
#                    <repo>/.venv, which this script makes or brings up to
#                    date first with scripts/setup-python.sh; a venv named
#                    here is used as it is). Interop tests need it; under
#                    CI=true they fail when it is missing.
#   EMQ_FAULT_JOBS   jobs in the kill -9 fault run (default 2000)
#   EMQ_MALFORMED    malformed messages in the flood test (default 10000)
#   EMQ_TEST_THREADS test threads per test binary (default 2)
#   EMQ_PYTEST_ARGS  extra pytest arguments for the Python client's tests
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
threads="${EMQ_TEST_THREADS:-2}"

step() {
    echo
    echo "=== $* ($(date -u +%H:%M:%S))"
}

# Debian packages the build needs (libsodium-dev for libzmq's CURVE).
step "scripts/ensure-deps.sh"
bash scripts/ensure-deps.sh

# The Python virtualenv the interop tests and the Python client's tests
# need (idempotent: quick when it is already there).
if [[ -z "${EMQ_PY_VENV:-}" ]]; then
    step "scripts/setup-python.sh"
    bash scripts/setup-python.sh
fi

step "cargo fmt --all -- --check"
cargo fmt --all -- --check

# No two files of a crate reach each other through crate-internal uses
# (issue 25: one room per concern; a circle means a concern is split).
step "scripts/module-cycles.py"
python3 scripts/module-cycles.py

step "cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

# The integration tests start our binaries from target/debug; build them all
# first (debug: fast enough, and what `cargo test` builds anyway).
step "cargo build --workspace --bins"
cargo build --workspace --bins

# Unit and doc tests of every crate except the process-starting ones.
step "cargo test --workspace --exclude integration-tests"
# A failure here is reported at the end, after the integration tests ran too.
failed=()
cargo test --workspace --exclude integration-tests --no-fail-fast -- --test-threads="$threads" ||
    failed+=("cargo test --workspace --exclude integration-tests")

# Tests that start routers and job managers on loopback ports (each test
# has its own free ports, so two run in parallel; the fault tests serialise
# themselves). The binaries were built above.
step "cargo test -p integration-tests"
summary="${CARGO_TARGET_DIR:-$repo/target}/emq-it-logs/summary.txt"
rm -f "$summary"
show_summary() {
    if [[ -s "$summary" ]]; then
        echo
        echo "=== fault and interop figures ($summary)"
        cat "$summary"
    fi
}
trap show_summary EXIT
EMQ_SKIP_BUILD=1 cargo test -p integration-tests --no-fail-fast -- --test-threads="$threads" ||
    failed+=("cargo test -p integration-tests")
trap - EXIT
show_summary

# The Python client (python/): pytest against the binaries built above, with
# the venv's Python (scripts/setup-python.sh installs pytest and emq_client
# there). test_wheel.py packs those binaries into the wheels
# (scripts/build-wheel.sh --no-build), installs them into a fresh venv and
# runs the README's quick start from it. pytest's exit code 5 (no test
# collected) is a failure, not a pass.
step "pytest python/tests"
venv="${EMQ_PY_VENV:-$repo/.venv}"
if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c 'import pytest, emq_client' 2>/dev/null; then
    if [[ "${CI:-}" == "true" ]]; then
        failed+=("pytest: $venv lacks pytest or emq_client (run scripts/setup-python.sh)")
    else
        echo "SKIPPED: $venv lacks pytest or emq_client; run scripts/setup-python.sh"
    fi
else
    rc=0
    # shellcheck disable=SC2086
    EMQ_BIN_DIR="${CARGO_TARGET_DIR:-$repo/target}/debug" \
        "$venv/bin/python" -m pytest -p no:cacheprovider -q -rs python/tests ${EMQ_PYTEST_ARGS:-} || rc=$?
    if ((rc == 5)); then
        failed+=("pytest python/tests: no tests collected")
    elif ((rc != 0)); then
        failed+=("pytest python/tests (exit $rc)")
    fi
fi

if ((${#failed[@]})); then
    step "FAILED: ${failed[*]}"
    exit 1
fi
step "all tests passed"
