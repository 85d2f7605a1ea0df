#!/usr/bin/env bash
# Where a Python job's time goes: release emq-router (--journal none) and
# emq-jobmanager (--concurrency 8) on loopback, N no-op Python jobs
# (math.floor; or $JOB) submitted with `emq-sender --wait -`, then per process: CPU
# time per job (/proc/PID/stat), context switches per job (/proc/PID/task/*/
# status), and with PROFILE=1 a perf profile of the job manager (cpu-clock)
# and a py-spy profile of one Python worker (when perf / py-spy are there).
# "Python (all workers)" is every descendant of the job manager (the fork
# server and its workers), workers replaced during the run included (their
# CPU is in their parent's cutime/cstime once reaped).
#
#   scripts/profile-python-jobs.sh [N=20000] [extra emq-jobmanager flags...]
#
# Not a test: prints figures; starts and stops its own processes.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${BIN_DIR:-$repo/target/release}"
n="${1:-20000}"; shift || true
out="${OUT_DIR:-$(mktemp -d /tmp/emq-prof.XXXXXX)}"
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
fe="tcp://127.0.0.1:$(port)"; be="tcp://127.0.0.1:$(port)"; ad="tcp://127.0.0.1:$(port)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
"$bin/emq-router" --frontend "$fe" --backend "$be" --admin "$ad" --journal none 2>"$out/router.log" &
router=$!; pids+=("$router")
"$bin/emq-jobmanager" --broker "$be" --concurrency 8 --python python3 "$@" 2>"$out/jm.log" &
jm=$!; pids+=("$jm")
for _ in $(seq 100); do grep -q "registered with" "$out/jm.log" && break; sleep 0.1; done
sleep 2   # the Python workers start
default_job='["run", {"path": "math", "callable": "floor", "args": [1.5]}]'
job="${JOB:-$default_job}"
jobs() { python3 -c 'import sys; sys.stdout.write((sys.argv[1] + "\n") * int(sys.argv[2]))' "$job" "$1"; }
jobs 2000 > "$out/warmup.jsonl"; jobs "$n" > "$out/jobs.jsonl"
"$bin/emq-sender" --broker "$fe" --wait - < "$out/warmup.jsonl" >/dev/null 2>&1   # warm-up
cpu() { awk '{print $14+$15}' "/proc/$1/stat" 2>/dev/null || echo gone; }   # utime+stime, ticks
csw() { cat /proc/"$1"/task/*/status 2>/dev/null | awk '/ctxt_switches/ {s+=$2} END {print s+0}'; }
descendants() { local c; for c in $(pgrep -P "$1" || true); do echo "$c"; descendants "$c"; done; }
# The Python side (fork server and workers, replaced ones too): utime+stime
# +cutime+cstime of every descendant of the job manager, so a worker reaped
# during the run still counts (in its parent's cutime).
tree_cpu() { local t=0 p c; for p in $(descendants "$jm"); do
    c=$(awk '{print $14+$15+$16+$17}' "/proc/$p/stat" 2>/dev/null || echo 0); t=$((t + c)); done; echo "$t"; }
tree_csw() { local t=0 p; for p in $(descendants "$jm"); do t=$((t + $(csw "$p"))); done; echo "$t"; }
workers=$(descendants "$jm")
declare -A c0 s0
for p in $router $jm $workers; do c0[$p]=$(cpu "$p"); s0[$p]=$(csw "$p"); done
jmc0=$(awk '{print $16+$17}' "/proc/$jm/stat"); py0=$(tree_cpu); pys0=$(tree_csw)
if [[ "${PROFILE:-}" == 1 ]] && command -v perf >/dev/null; then
    perf record -F 999 -g -p "$jm" -o "$out/jm.perf" -- sleep 4 >/dev/null 2>&1 &
    pids+=($!)
fi
if [[ "${PROFILE:-}" == 1 ]] && command -v "${PY_SPY:-py-spy}" >/dev/null; then
    w1=$(echo "$workers" | tail -1)   # a worker (the first descendant is the fork server)
    "${PY_SPY:-py-spy}" record -p "$w1" -d 4 -r 500 -f raw -o "$out/worker.pyspy.txt" >/dev/null 2>&1 &
    pids+=($!)
fi
t0=$(date +%s.%N)
/usr/bin/time -f "%e %U %S" -o "$out/sender.time" \
    "$bin/emq-sender" --broker "$fe" --wait - < "$out/jobs.jsonl" >/dev/null 2>"$out/sender.log"
t1=$(date +%s.%N)
hz=$(getconf CLK_TCK)
echo "jobs: $n in $(python3 -c "print(round($t1-$t0,2))") s = $(python3 -c "print(round($n/($t1-$t0)))") jobs/s (load $(cut -d' ' -f1 /proc/loadavg))"
report() { # name pid
    local c s; c=$(cpu "$2"); s=$(csw "$2")
    python3 -c "print('%-22s CPU %6.1f us/job   context switches %5.2f /job' % ('$1', ($c-${c0[$2]})*1e6/$hz/$n, ($s-${s0[$2]})/$n))"
}
report emq-router "$router"; report emq-jobmanager "$jm"
# Workers the job manager reaped itself (its own children) are in its cutime.
jmc1=$(awk '{print $16+$17}' "/proc/$jm/stat")
py1=$(tree_cpu); pys1=$(tree_csw)
python3 -c "print('%-22s CPU %6.1f us/job   context switches %5.2f /job (live ones)' % ('Python (all workers)', ($py1-$py0+$jmc1-$jmc0)*1e6/$hz/$n, ($pys1-$pys0)/$n))"
read -r el us sy < "$out/sender.time"
python3 -c "print('%-22s CPU %6.1f us/job' % ('emq-sender', ($us+$sy)*1e6/$n))"
echo "logs and profiles in $out"
