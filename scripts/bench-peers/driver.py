#!/usr/bin/env python3
"""The same Python workload through emq and its peers, side by side.

    python driver.py --bin-dir target/release [--jobs 20000] [--rounds 3]
                     [--concurrency 8] [--eventmq-venv .venv] [--only emq,celery]
                     [--bullmq-dir target/bench/bullmq]

Systems (each skipped, and said so, when it is not installed):
  emq-memory   our emq-router --journal none + emq-jobmanager --concurrency N
  emq-journal  the same with the durable journal
  eventmq      EventMQ 0.3.13's router and job manager (-J N), from the test
               virtualenv (--eventmq-venv), submitted with its own client
  celery       Celery with Redis as broker, prefork pool of N, no results
  rq           RQ on Redis, N `rq worker` processes (RQ forks per job: it
               gets a tenth of the jobs)
  dramatiq     Dramatiq with Redis as broker, one worker process of N threads
  bullmq       BullMQ (Node) on Redis, one worker of concurrency N running a
               JS job that does what `peer_jobs.done` does; submitted from
               Node with addBulk (`peer_bullmq.cjs`; node and the bullmq npm
               package in --bullmq-dir, which scripts/setup-bench-peers.sh
               installs)

The workload: --jobs fire-and-forget Python jobs, `peer_jobs.done(path, i)`,
which appends `i time` to a file: completion is measured the same way for
every system (EventMQ 0.3.13 returns no results). Each system is started
fresh for every round, warmed up with 200 jobs, then timed: jobs/s = jobs /
(last completion - first submit); submit -> done p50/p99 from each job's
submit time and its completion time. Systems alternate within each round
(emq-memory, eventmq, bullmq, dramatiq, celery, rq, emq-journal, then the
next round), so load
from other work on the machine falls on all of them. Prints the medians over
the rounds, the load average, and emq-memory's jobs/s over each peer's; for
emq each round also gives CPU µs per job of the router, the job manager with
its Python workers, and the client (this process) over the timed phase.
Every process started is stopped at the end (its process group), Ctrl-C
included; every wait is bounded.
"""

import argparse
import importlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WARMUP = 200


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


class Procs:
    """Children in their own process groups, stopped together."""

    def __init__(self, logdir):
        self.logdir = logdir
        self.procs = []

    def start(self, name, argv, env=None, cwd=None):
        log = open(os.path.join(self.logdir, name + ".log"), "ab")
        e = dict(os.environ)
        e.update(env or {})
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=e, cwd=cwd,
                             start_new_session=True)
        self.procs.append((name, p))
        return p

    def stop(self):
        for _, p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.time() + 10
        for _, p in self.procs:
            try:
                p.wait(max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait(5)
        self.procs = []

    def check(self):
        for name, p in self.procs:
            if p.poll() is not None:
                with open(os.path.join(self.logdir, name + ".log"), "rb") as f:
                    tail = f.read()[-2000:].decode("utf-8", "replace")
                raise RuntimeError("%s exited with %s:\n%s" % (name, p.returncode, tail))


def count_lines(path):
    try:
        with open(path, "rb") as f:
            return f.read().count(b"\n")
    except FileNotFoundError:
        return 0


def wait_lines(path, n, procs, timeout, what):
    """Wait until `path` has `n` lines; bounded by `timeout` and by silence."""
    deadline = time.time() + timeout
    last, last_change = -1, time.time()
    while True:
        have = count_lines(path)
        if have >= n:
            return
        if have != last:
            last, last_change = have, time.time()
        procs.check()
        now = time.time()
        if now > deadline:
            raise RuntimeError("%s: %d of %d jobs done after %.0f s" % (what, have, n, timeout))
        if now - last_change > 60:
            raise RuntimeError("%s: %d of %d jobs done, none for 60 s (lost?)" % (what, have, n))
        time.sleep(0.02)


TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def proc_cpu(pid, children=False):
    """CPU seconds of process `pid` from /proc (user + system; with
    `children`, also its reaped children and its live ones): 0 when gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = int(fields[11]) + int(fields[12])
    if children:
        ticks += int(fields[13]) + int(fields[14])
    total = ticks / TICKS
    if children:
        for task in os.listdir("/proc/%d/task" % pid) if os.path.isdir("/proc/%d/task" % pid) else []:
            try:
                with open("/proc/%d/task/%s/children" % (pid, task)) as f:
                    total += sum(proc_cpu(int(c), True) for c in f.read().split())
            except OSError:
                pass
    return total


def read_done(path):
    done = {}
    with open(path) as f:
        for line in f:
            i, t = line.split()
            done[int(i)] = float(t)
    return done


def pct(xs, p):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = min(len(xs) - 1, max(0, int(round(p / 100.0 * len(xs) + 0.5)) - 1))
    return xs[k]


class System:
    name = "?"
    share = 1.0  # fraction of --jobs this system runs

    def __init__(self, opts, procs, workdir):
        self.opts, self.procs, self.workdir = opts, procs, workdir

    def available(self):
        return None  # or the reason it is skipped

    def start(self):
        raise NotImplementedError

    def submit(self, path, first, n):
        """Submit jobs first..first+n-1; return their submit times."""
        raise NotImplementedError


class Emq(System):
    def __init__(self, opts, procs, workdir, journal):
        super().__init__(opts, procs, workdir)
        self.journal = journal
        self.name = "emq-journal" if journal else "emq-memory"

    def available(self):
        for b in ("emq-router", "emq-jobmanager"):
            if not os.access(os.path.join(self.opts.bin_dir, b), os.X_OK):
                return "no %s in %s" % (b, self.opts.bin_dir)
        try:
            import emq_client  # noqa: F401
        except ImportError:
            return "emq_client is not installed in this python"
        return None

    def start(self):
        fe, be, ad = ("tcp://127.0.0.1:%d" % free_port() for _ in range(3))
        journal = (os.path.join(self.workdir, "journal-%d.sqlite" % time.time_ns())
                   if self.journal else "none")
        self.router = self.procs.start(self.name + "-router", [
            os.path.join(self.opts.bin_dir, "emq-router"), "--frontend", fe, "--backend", be,
            "--admin", ad, "--journal", journal])
        extra = ["--prefetch", self.opts.prefetch] if self.opts.prefetch else []
        self.jobmanager = self.procs.start(self.name + "-jobmanager", [
            os.path.join(self.opts.bin_dir, "emq-jobmanager"), "--broker", be,
            "--concurrency", str(self.opts.concurrency), "--python", sys.executable] + extra,
            env={"PYTHONPATH": HERE})
        from emq_client import Client
        self.client = Client(fe, admin_addr=ad, window=1000)
        deadline = time.time() + 30
        while True:
            self.procs.check()
            try:
                workers = self.client.admin("workers").get("workers", [])
                if workers:
                    break
            except Exception:
                pass
            if time.time() > deadline:
                raise RuntimeError("emq job manager did not register")
            time.sleep(0.1)

    def submit(self, path, first, n):
        from emq_client import python
        times = []

        def items():
            for i in range(first, first + n):
                times.append(time.time())
                yield python("peer_jobs.done", [path, i])

        self.client.submit_many(items())
        return times

    def cpu(self):
        """CPU seconds so far: router, job manager with its Python workers,
        and this process (the client)."""
        return {"router": proc_cpu(self.router.pid), "jobmanager+workers": proc_cpu(self.jobmanager.pid, True),
                "client": time.process_time()}

    def stop(self):
        self.client.close()


class EventMQ(System):
    name = "eventmq-0.3.13"

    def available(self):
        v = self.opts.eventmq_venv
        for b in ("python", "emq-router", "emq-jobmanager"):
            if not os.access(os.path.join(v, "bin", b), os.X_OK):
                return "no EventMQ 0.3.13 virtualenv at %s (scripts/setup-python.sh)" % v
        return None

    def start(self):
        fe, be, ad = ("tcp://127.0.0.1:%d" % free_port() for _ in range(3))
        self.frontend = fe
        env = {"EVENTMQ_FRONTEND_ADDR": fe, "EVENTMQ_BACKEND_ADDR": be,
               "EVENTMQ_ADMINISTRATIVE_ADDR": ad, "PYTHONUNBUFFERED": "1"}
        self.procs.start("eventmq-router", [os.path.join(self.opts.eventmq_venv, "bin", "emq-router")],
                         env=env)
        time.sleep(1.0)
        self.procs.start("eventmq-jobmanager", [
            os.path.join(self.opts.eventmq_venv, "bin", "emq-jobmanager"), "-J", str(self.opts.concurrency)],
            env={"EVENTMQ_WORKER_ADDR": be, "EVENTMQ_WORKER_ADDR_DEFAULT": be,
                 "EVENTMQ_WORKER_ADDR_FAILOVER": be, "EVENTMQ_QUEUES": '[[10, "default"]]',
                 "PYTHONPATH": HERE, "PYTHONUNBUFFERED": "1"})

    def submit(self, path, first, n):
        out = subprocess.run(
            [os.path.join(self.opts.eventmq_venv, "bin", "python"), os.path.join(HERE, "submit_eventmq.py"),
             self.frontend, path, str(n)],
            capture_output=True, text=True, timeout=600, env=dict(os.environ, PYTHONPATH=HERE))
        if out.returncode != 0:
            raise RuntimeError("EventMQ client failed: %s" % out.stderr[-2000:])
        times = [float(line.split()[1]) for line in out.stdout.splitlines() if line and line != "sent"]
        if first:
            # the client numbers jobs from 0: shift into this run's range
            raise RuntimeError("internal: EventMQ submits start at 0")
        return times


class Redis(System):
    def start_redis(self):
        self.port = free_port()
        self.url = "redis://127.0.0.1:%d/0" % self.port
        self.procs.start(self.name + "-redis", [
            shutil.which("redis-server"), "--port", str(self.port), "--bind", "127.0.0.1",
            "--save", "", "--appendonly", "no", "--dir", self.workdir])
        import redis
        r = redis.Redis.from_url(self.url)
        deadline = time.time() + 20
        while True:
            try:
                r.ping()
                return r
            except Exception:
                if time.time() > deadline:
                    raise RuntimeError("redis-server did not start")
                time.sleep(0.05)

    #: The Python package of the system's client and workers.
    package = None

    def available(self):
        if not shutil.which("redis-server"):
            return "redis-server is not installed (apt-get install redis-server)"
        for pkg in ("redis", self.package):
            try:
                importlib.import_module(pkg)
            except ImportError:
                return "the %s package is not installed in this python" % pkg
        return None


class Celery(Redis):
    name = "celery-redis"
    package = "celery"

    def start(self):
        self.start_redis()
        os.environ["PEERS_REDIS_URL"] = self.url
        self.procs.start("celery-worker", [
            sys.executable, "-m", "celery", "-A", "peer_celery", "worker", "--pool", "prefork",
            "--concurrency", str(self.opts.concurrency), "--without-gossip", "--without-mingle",
            "--without-heartbeat", "--loglevel", "WARNING"],
            env={"PYTHONPATH": HERE, "PEERS_REDIS_URL": self.url}, cwd=HERE)
        # A client app of its own per round: this round's Redis.
        from celery import Celery as CeleryApp
        self.app = CeleryApp("peer_celery_client", broker=self.url)
        self.app.conf.task_ignore_result = True

    def submit(self, path, first, n):
        times = []
        send = self.app.send_task
        for i in range(first, first + n):
            times.append(time.time())
            send("peer_celery.done", args=[path, i])
        return times

    def stop(self):
        self.app.close()


class RQ(Redis):
    name = "rq-redis"
    package = "rq"
    share = 0.1

    def start(self):
        r = self.start_redis()
        for k in range(self.opts.concurrency):
            self.procs.start("rq-worker-%d" % k, [
                sys.executable, "-m", "rq.cli", "worker", "--url", self.url, "--quiet", "default"],
                env={"PYTHONPATH": HERE}, cwd=HERE)
        from rq import Queue
        self.queue = Queue("default", connection=r)

    def submit(self, path, first, n):
        times = []
        for i in range(first, first + n):
            times.append(time.time())
            self.queue.enqueue("peer_jobs.done", path, i)
        return times


class Dramatiq(Redis):
    name = "dramatiq-redis"
    package = "dramatiq"

    def start(self):
        self.start_redis()
        self.procs.start("dramatiq-worker", [
            sys.executable, "-m", "dramatiq", "peer_dramatiq", "--processes", "1",
            "--threads", str(self.opts.concurrency)],
            env={"PYTHONPATH": HERE, "PEERS_REDIS_URL": self.url}, cwd=HERE)
        # A broker of its own per round (this round's Redis); messages are
        # built by name, so the driver does not import the actor module.
        from dramatiq.brokers.redis import RedisBroker
        self.broker = RedisBroker(url=self.url)

    def submit(self, path, first, n):
        import dramatiq
        times = []
        enqueue = self.broker.enqueue
        for i in range(first, first + n):
            times.append(time.time())
            enqueue(dramatiq.Message(queue_name="default", actor_name="done", args=(path, i),
                                     kwargs={}, options={}))
        return times

    def stop(self):
        self.broker.close()


class BullMQ(Redis):
    name = "bullmq-redis"
    package = "redis"

    def script(self):
        return os.path.join(HERE, "peer_bullmq.cjs")

    def node_env(self):
        return {"NODE_PATH": os.path.join(self.opts.bullmq_dir, "node_modules")}

    def available(self):
        why = super().available()
        if why:
            return why
        if not shutil.which("node"):
            return "node is not installed (apt-get install nodejs)"
        for pkg in ("bullmq", "ioredis"):
            if not os.path.isdir(os.path.join(self.opts.bullmq_dir, "node_modules", pkg)):
                return "no %s in %s (scripts/setup-bench-peers.sh installs it with npm)" % (
                    pkg, self.opts.bullmq_dir)
        return None

    def start(self):
        self.start_redis()
        self.procs.start("bullmq-worker", [
            shutil.which("node"), self.script(), "worker", self.url, str(self.opts.concurrency)],
            env=self.node_env(), cwd=HERE)

    def submit(self, path, first, n):
        out = subprocess.run(
            [shutil.which("node"), self.script(), "submit", self.url, path, str(first), str(n)],
            capture_output=True, text=True, timeout=600, env=dict(os.environ, **self.node_env()))
        if out.returncode != 0:
            raise RuntimeError("BullMQ submitter failed: %s" % out.stderr[-2000:])
        return [float(line.split()[1]) for line in out.stdout.splitlines() if line and line != "sent"]


def one_round(system, n):
    """Start, warm up, time `n` jobs, stop. The figures of the run."""
    workdir = tempfile.mkdtemp(prefix="emq-peers-")
    procs = Procs(workdir)
    system.procs, system.workdir = procs, workdir
    try:
        system.start()
        warm = os.path.join(workdir, "warmup.txt")
        system.submit(warm, 0, WARMUP)
        wait_lines(warm, WARMUP, procs, 180, system.name + " warm-up")
        path = os.path.join(workdir, "done.txt")
        load = loadavg()
        cpu0 = system.cpu() if hasattr(system, "cpu") else None
        submitted = system.submit(path, 0, n)
        wait_lines(path, n, procs, 900, system.name)
        fig = {}
        if cpu0 is not None:
            cpu1 = system.cpu()
            fig["cpu_us_per_job"] = {k: (cpu1[k] - cpu0[k]) / n * 1e6 for k in cpu0}
        done = read_done(path)
        lat = [done[i] - submitted[i] for i in range(n)]
        elapsed = max(done.values()) - min(submitted)
        fig.update({"jobs": n, "per_s": n / elapsed, "p50_ms": pct(lat, 50) * 1000,
                    "p99_ms": pct(lat, 99) * 1000, "load": load})
        return fig
    finally:
        if hasattr(system, "stop"):
            try:
                system.stop()
            except Exception:
                pass
        procs.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--jobs", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--prefetch", default=None, help="emq-jobmanager --prefetch (default: its own)")
    ap.add_argument("--eventmq-venv", default=os.path.join(HERE, "..", "..", ".venv"))
    ap.add_argument("--bullmq-dir", default=os.path.join(HERE, "..", "..", "target", "bench", "bullmq"),
                    help="where `npm install bullmq` was run (its node_modules)")
    ap.add_argument("--only", default="", help="comma-separated system names")
    ap.add_argument("--json", default=None, help="also write the figures here")
    opts = ap.parse_args()
    opts.bin_dir = os.path.abspath(opts.bin_dir)
    opts.eventmq_venv = os.path.abspath(opts.eventmq_venv)
    opts.bullmq_dir = os.path.abspath(opts.bullmq_dir)
    sys.path.insert(0, HERE)

    systems = [Emq(opts, None, None, False), EventMQ(opts, None, None), BullMQ(opts, None, None),
               Dramatiq(opts, None, None), Celery(opts, None, None), RQ(opts, None, None),
               Emq(opts, None, None, True)]
    if opts.only:
        want = set(opts.only.split(","))
        systems = [s for s in systems if s.name in want or s.name.split("-")[0] in want]
    runnable = []
    for s in systems:
        why = s.available()
        if why:
            print("peers: skipping %s: %s" % (s.name, why), file=sys.stderr)
        else:
            runnable.append(s)
    results = {s.name: [] for s in runnable}
    for r in range(1, opts.rounds + 1):
        for s in runnable:
            n = max(100, int(opts.jobs * s.share))
            try:
                fig = one_round(s, n)
            except Exception as e:  # a failed run is reported, the others go on
                print("peers: round %d %s failed: %s" % (r, s.name, e), file=sys.stderr)
                continue
            results[s.name].append(fig)
            print("peers: round %d %-14s %6d jobs %8.0f jobs/s  p50 %8.1f ms  p99 %8.1f ms  load %s%s" % (
                r, s.name, n, fig["per_s"], fig["p50_ms"], fig["p99_ms"], fig["load"],
                "".join("  %s %.0f µs/job" % kv for kv in fig.get("cpu_us_per_job", {}).items())), file=sys.stderr)

    def med(name, key):
        xs = [f[key] for f in results.get(name, [])]
        return statistics.median(xs) if xs else None

    base = med("emq-memory", "per_s")
    print("Python jobs (`peer_jobs.done`, fire and forget), %d slots, medians of %d rounds, %s" % (
        opts.concurrency, opts.rounds, time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())))
    print("")
    print("| system | jobs | jobs/s | submit -> done p50 | p99 | emq-memory / system | load avg |")
    print("|---|---|---|---|---|---|---|")
    table = []
    for s in runnable:
        rate = med(s.name, "per_s")
        if rate is None:
            print("| %s | - | failed | - | - | - | - |" % s.name)
            continue
        ratio = "%.1f x" % (base / rate) if base else "-"
        loads = ", ".join(f["load"].split()[0] for f in results[s.name])
        row = {"system": s.name, "jobs": results[s.name][0]["jobs"], "per_s": rate,
               "p50_ms": med(s.name, "p50_ms"), "p99_ms": med(s.name, "p99_ms"), "ratio": ratio,
               "load_1m": loads}
        table.append(row)
        print("| %s | %d | %s | %.1f ms | %.1f ms | %s | %s |" % (
            s.name, row["jobs"], format(int(rate), ","), row["p50_ms"], row["p99_ms"], ratio, loads))
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump({"table": table, "runs": results, "config": vars(opts)}, f, indent=2)
    return 0 if all(results.get(s.name) for s in runnable) else 1


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(130))
    sys.exit(main())
