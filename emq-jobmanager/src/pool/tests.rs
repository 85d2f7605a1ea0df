//! Runner tests with real processes: a Python worker running jobs from a
//! temporary module (`$EMQ_PY_VENV/bin/python` when that is set, else
//! `python3`; the module needs only the standard library), shell commands,
//! Rust handlers.

use super::*;
use emqp_proto::job::{CallJob, RunJob, ShellJob};
use serde_json::{json, Map, Value};
use std::time::{Duration, Instant};

const MODULE: &str = r#"
import os, sys, time

COUNT = 0

def add(a, b, scale=1):
    return (a + b) * scale

def bump():
    global COUNT
    COUNT += 1
    return COUNT

def pid():
    return os.getpid()

def noisy():
    print("to stdout, must not corrupt the protocol")
    sys.stdout.flush()
    os.write(1, b"raw fd 1 write\n")
    return "quiet result"

def fail():
    raise ValueError("boom")

def exit_hard():
    os._exit(7)

def sleep(secs):
    time.sleep(secs)
    return "slept"

def sleep_marked(path, secs):
    with open(path + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.rename(path + ".tmp", path)
    time.sleep(secs)
    return "slept"

def not_json():
    return object()

def hold_exit():
    import threading
    threading.Thread(target=time.sleep, args=(3600,)).start()
    return os.getpid()

def spawn_and_sleep(path, secs):
    import subprocess
    child = subprocess.Popen(["sleep", "300"])
    with open(path + ".tmp", "w") as f:
        f.write("%d %d" % (os.getpid(), child.pid))
    os.rename(path + ".tmp", path)
    time.sleep(secs)
    return "slept"

def progress_steps(n):
    import emq_job
    for i in range(n):
        emq_job.progress(100 * (i + 1) // n, "step %d" % (i + 1))
    return os.getpid()

def read_stdin():
    return sys.stdin.read()

class Counter:
    def __init__(self, start, step=1):
        self.value = start
        self.step = step

    def next(self, times=1):
        return self.value + self.step * times
"#;

use emq_testkit::process::pid_alive as running;
use emq_testkit::TempDir;

/// The interpreter: the project venv's when `EMQ_PY_VENV` is set.
fn interpreter() -> String {
    match std::env::var("EMQ_PY_VENV") {
        Ok(v) if !v.is_empty() => format!("{v}/bin/python"),
        _ => "python3".to_string(),
    }
}

fn python_pool(name: &str, concurrency: usize) -> (Pool, TempDir) {
    let dir = TempDir::new(name);
    std::fs::write(dir.0.join("emqtestmod.py"), MODULE).unwrap();
    let mut cfg = PoolConfig::new(concurrency);
    cfg.python.interpreter = interpreter();
    cfg.python.python_path = vec![dir.0.clone()];
    (Pool::new(cfg, None).unwrap(), dir)
}

fn run_job(path: &str, callable: &str, args: Value) -> Job {
    Job::Run(RunJob {
        path: path.into(),
        callable: callable.into(),
        args: args.as_array().cloned().unwrap_or_default(),
        kwargs: Map::new(),
        class_args: vec![],
        class_kwargs: Map::new(),
    })
}

fn start(pool: &Pool, slot: usize, run: u64, job: Job) {
    pool.start(JobStart {
        slot,
        run,
        msgid: format!("m{run}"),
        job,
        timeout: None,
        context: Default::default(),
    });
}

/// The next pool event within `wait`, reading the lean runs' answers
/// as the socket loop does (their sockets polled in slices of at most
/// 5 ms: the slot threads' events come without a wake-up here).
fn recv(pool: &Pool, wait: Duration) -> Result<PoolEvent, ()> {
    let deadline = Instant::now() + wait;
    let mut fds = Vec::new();
    loop {
        if let Ok(e) = pool.events().try_recv() {
            return Ok(e);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(());
        }
        pool.lean_fds(&mut fds);
        let mut items: Vec<_> = fds
            .iter()
            .map(|(_, fd)| zmq::PollItem::from_fd(*fd, zmq::POLLIN))
            .collect();
        let slice = left.min(Duration::from_millis(5)).as_millis().max(1) as i64;
        zmq::poll(&mut items, slice).unwrap();
        for (i, (slot, _)) in fds.iter().enumerate() {
            if items[i].is_readable() || items[i].is_error() {
                pool.lean_readable(*slot);
            }
        }
    }
}

/// Wait for `run` to finish; Started events are checked on the way.
fn wait(pool: &Pool, run: u64) -> JobOutcome {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut started = false;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match recv(pool, left) {
            Ok(PoolEvent::Started { run: r, .. }) if r == run => started = true,
            Ok(PoolEvent::Finished {
                run: r, outcome, ..
            }) if r == run => {
                assert!(started, "Finished before Started");
                return outcome;
            }
            Ok(_) => {}
            Err(_) => panic!("run {run} did not finish in time"),
        }
    }
}

/// Wait until every run in `runs` has started (in any order).
fn wait_started(pool: &Pool, runs: &[u64]) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut left: Vec<u64> = runs.to_vec();
    while !left.is_empty() {
        let wait = deadline.saturating_duration_since(Instant::now());
        match recv(pool, wait) {
            Ok(PoolEvent::Started { run, .. }) => left.retain(|&r| r != run),
            Ok(PoolEvent::Finished { run, .. }) if left.contains(&run) => {
                panic!("run {run} finished before it was seen starting")
            }
            Ok(_) => {}
            Err(_) => panic!("runs {left:?} did not start in time"),
        }
    }
}

/// Wait for `run` to finish (its Started event already consumed).
fn wait_finished(pool: &Pool, run: u64) -> JobOutcome {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let wait = deadline.saturating_duration_since(Instant::now());
        match recv(pool, wait) {
            Ok(PoolEvent::Finished {
                run: r, outcome, ..
            }) if r == run => return outcome,
            Ok(_) => {}
            Err(_) => panic!("run {run} did not finish in time"),
        }
    }
}

fn exec(pool: &Pool, run: u64, job: Job) -> JobOutcome {
    start(pool, 0, run, job);
    wait(pool, run)
}

fn err(o: JobOutcome) -> JobError {
    match o {
        JobOutcome::Error(e) => e,
        JobOutcome::Value(v) => panic!("expected an error, got {v}"),
    }
}

fn val(o: JobOutcome) -> Value {
    match o {
        JobOutcome::Value(v) => v,
        JobOutcome::Error(e) => panic!("expected a value, got {e:?}"),
    }
}

#[test]
fn python_function_job_with_args_and_kwargs() {
    let (pool, _d) = python_pool("func", 1);
    let mut job = RunJob {
        path: "emqtestmod".into(),
        callable: "add".into(),
        args: vec![json!(2), json!(3)],
        kwargs: Map::new(),
        class_args: vec![],
        class_kwargs: Map::new(),
    };
    job.kwargs.insert("scale".into(), json!(10));
    assert_eq!(val(exec(&pool, 1, Job::Run(job))), json!(50));
    // A stdlib function, as 0.3.13 jobs often are.
    assert_eq!(
        val(exec(
            &pool,
            2,
            run_job("os.path", "join", json!(["a", "b"]))
        )),
        json!("a/b")
    );
}

#[test]
fn python_class_method_form() {
    let (pool, _d) = python_pool("class", 1);
    let mut job = RunJob {
        path: "emqtestmod:Counter".into(),
        callable: "next".into(),
        args: vec![],
        kwargs: Map::new(),
        class_args: vec![json!(100)],
        class_kwargs: Map::new(),
    };
    job.class_kwargs.insert("step".into(), json!(5));
    job.kwargs.insert("times".into(), json!(3));
    assert_eq!(val(exec(&pool, 1, Job::Run(job))), json!(115));
}

#[test]
fn python_worker_is_reused_across_jobs() {
    let (pool, _d) = python_pool("reuse", 1);
    let pid1 = val(exec(&pool, 1, run_job("emqtestmod", "pid", json!([]))));
    assert_eq!(
        val(exec(&pool, 2, run_job("emqtestmod", "bump", json!([])))),
        json!(1)
    );
    assert_eq!(
        val(exec(&pool, 3, run_job("emqtestmod", "bump", json!([])))),
        json!(2)
    );
    let pid2 = val(exec(&pool, 4, run_job("emqtestmod", "pid", json!([]))));
    assert_eq!(pid1, pid2);
    assert_eq!(pool.python_pid(0), pid1.as_i64().map(|p| p as i32));
}

#[test]
fn python_exception_gives_message_and_traceback_and_worker_survives() {
    let (pool, _d) = python_pool("exc", 1);
    let pid1 = val(exec(&pool, 1, run_job("emqtestmod", "pid", json!([]))));
    let e = err(exec(&pool, 2, run_job("emqtestmod", "fail", json!([]))));
    assert_eq!(e.kind, ErrorKind::Exception);
    assert_eq!(e.message, "ValueError: boom");
    let tb = e.traceback.unwrap();
    assert!(tb.contains("Traceback") && tb.contains("in fail"), "{tb}");
    let e = err(exec(&pool, 3, run_job("no_such_mod", "f", json!([]))));
    assert_eq!(e.kind, ErrorKind::Exception);
    assert!(
        e.message.contains("No module named 'no_such_mod'"),
        "{}",
        e.message
    );
    let e = err(exec(&pool, 4, run_job("emqtestmod", "missing", json!([]))));
    assert!(e.message.contains("AttributeError"), "{}", e.message);
    let pid2 = val(exec(&pool, 5, run_job("emqtestmod", "pid", json!([]))));
    assert_eq!(pid1, pid2, "exceptions do not restart the worker");
}

#[test]
fn python_job_output_does_not_corrupt_the_protocol() {
    let (pool, _d) = python_pool("noisy", 1);
    assert_eq!(
        val(exec(&pool, 1, run_job("emqtestmod", "noisy", json!([])))),
        json!("quiet result")
    );
    assert_eq!(
        val(exec(
            &pool,
            2,
            run_job("emqtestmod", "read_stdin", json!([]))
        )),
        json!(""),
        "the job's stdin is /dev/null, not the protocol"
    );
    assert_eq!(
        val(exec(&pool, 3, run_job("emqtestmod", "bump", json!([])))),
        json!(1)
    );
}

#[test]
fn python_non_json_return_value_is_an_error() {
    let (pool, _d) = python_pool("notjson", 1);
    let e = err(exec(&pool, 1, run_job("emqtestmod", "not_json", json!([]))));
    assert_eq!(e.kind, ErrorKind::Exception);
    assert!(e.message.contains("not JSON serialisable"), "{}", e.message);
    assert_eq!(
        val(exec(&pool, 2, run_job("emqtestmod", "bump", json!([])))),
        json!(1)
    );
}

/// A stopped run is reported as the slot saw it: the pool says nothing of
/// why it was stopped (the connection core does).
fn assert_killed_python(o: JobOutcome) {
    let e = err(o);
    assert_eq!(e.kind, ErrorKind::Crash);
    assert!(
        e.message
            .contains("died while running the job (killed by signal 9)"),
        "{}",
        e.message
    );
}

#[test]
fn python_timeout_kill_restarts_the_worker() {
    let (pool, dir) = python_pool("timeout", 1);
    let pid1 = val(exec(&pool, 1, run_job("emqtestmod", "pid", json!([]))));
    let marker = dir.0.join("in-job");
    let path = marker.to_string_lossy().into_owned();
    start(
        &pool,
        0,
        2,
        run_job("emqtestmod", "sleep_marked", json!([path, 30])),
    );
    // The job is inside time.sleep.
    assert_eq!(read_pids(&marker), [pid1.as_i64().unwrap() as i32]);
    let t = Instant::now();
    pool.cancel(0, 2);
    assert_killed_python(wait(&pool, 2));
    assert!(t.elapsed() < Duration::from_secs(5));
    let pid2 = val(exec(&pool, 3, run_job("emqtestmod", "pid", json!([]))));
    assert_ne!(pid1, pid2, "a new worker process");
    assert!(
        !running(pid1.as_i64().unwrap() as i32),
        "the old process is gone"
    );
}

#[test]
fn python_crash_reports_crash_and_restarts_the_worker() {
    let (pool, _d) = python_pool("crash", 1);
    let pid1 = val(exec(&pool, 1, run_job("emqtestmod", "pid", json!([]))));
    let e = err(exec(
        &pool,
        2,
        run_job("emqtestmod", "exit_hard", json!([])),
    ));
    assert_eq!(e.kind, ErrorKind::Crash);
    assert!(e.message.contains("exit status 7"), "{}", e.message);
    let pid2 = val(exec(&pool, 3, run_job("emqtestmod", "pid", json!([]))));
    assert_ne!(pid1, pid2);
}

#[test]
fn a_bad_interpreter_gives_crash_results_not_a_panic() {
    let mut cfg = PoolConfig::new(1);
    cfg.python.interpreter = "/nonexistent/python-for-emq-test".into();
    let pool = Pool::new(cfg, None).unwrap();
    let e = err(exec(&pool, 1, run_job("os", "getpid", json!([]))));
    assert_eq!(e.kind, ErrorKind::Crash);
    assert!(
        e.message.contains("cannot start Python worker"),
        "{}",
        e.message
    );
}

#[test]
fn stale_cancel_does_not_touch_the_next_job() {
    let (pool, _d) = python_pool("stale", 1);
    assert_eq!(
        val(exec(&pool, 1, run_job("emqtestmod", "bump", json!([])))),
        json!(1)
    );
    pool.cancel(0, 1);
    assert_eq!(
        val(exec(&pool, 2, run_job("emqtestmod", "bump", json!([])))),
        json!(2)
    );
}

fn shell(argv: &[&str]) -> ShellJob {
    ShellJob {
        argv: argv.iter().map(|s| s.to_string()).collect(),
        stdin: None,
        env: Map::new(),
        cwd: None,
    }
}

#[test]
fn shell_success_and_exit_codes() {
    let pool = Pool::new(PoolConfig::new(1), None).unwrap();
    let v = val(exec(
        &pool,
        1,
        Job::Shell(shell(&["sh", "-c", "echo out; echo err >&2"])),
    ));
    assert_eq!(
        v,
        json!({"exit_status": 0, "stdout": "out\n", "stderr": "err\n"})
    );
    let e = err(exec(
        &pool,
        2,
        Job::Shell(shell(&["sh", "-c", "echo partial; exit 3"])),
    ));
    assert_eq!(e.kind, ErrorKind::Exit);
    assert_eq!(e.exit_status, Some(3));
    assert_eq!(e.stdout.as_deref(), Some("partial\n"));
    assert!(e.message.contains("status 3"), "{}", e.message);
    let e = err(exec(&pool, 3, Job::Shell(shell(&["/nonexistent/prog"]))));
    assert_eq!(e.kind, ErrorKind::Exit);
    assert_eq!(e.exit_status, None);
    assert!(e.message.contains("cannot run"), "{}", e.message);
}

#[test]
fn shell_stdin_cwd_and_env() {
    let pool = Pool::new(PoolConfig::new(1), None).unwrap();
    let mut j = shell(&["cat"]);
    j.stdin = Some("hello\nworld".into());
    assert_eq!(
        val(exec(&pool, 1, Job::Shell(j)))["stdout"],
        json!("hello\nworld")
    );
    let dir = TempDir::new("cwd");
    let mut j = shell(&["pwd"]);
    j.cwd = Some(dir.0.to_string_lossy().into_owned());
    let out = val(exec(&pool, 2, Job::Shell(j)))["stdout"].clone();
    let canon = std::fs::canonicalize(&dir.0).unwrap();
    assert_eq!(out.as_str().unwrap().trim(), canon.to_string_lossy());
    let mut j = shell(&["sh", "-c", "echo $EMQ_A-$EMQ_N"]);
    j.env.insert("EMQ_A".into(), json!("x y"));
    j.env.insert("EMQ_N".into(), json!(5));
    assert_eq!(
        val(exec(&pool, 3, Job::Shell(j)))["stdout"],
        json!("x y-5\n")
    );
}

#[test]
fn shell_timeout_kills_the_whole_process_group() {
    let pool = Pool::new(PoolConfig::new(1), None).unwrap();
    let marker = TempDir::new("pg");
    let pidfile = marker.0.join("bg.pid");
    let script = format!(
        "sleep 30 & echo $! > {0}.tmp; mv {0}.tmp {0}; wait",
        pidfile.display()
    );
    start(&pool, 0, 1, Job::Shell(shell(&["sh", "-c", &script])));
    let bg = read_pids(&pidfile)[0];
    let t = Instant::now();
    pool.cancel(0, 1);
    let e = err(wait(&pool, 1));
    assert_eq!(
        (e.kind, e.message.as_str()),
        (ErrorKind::Exit, "sh was killed by signal 9")
    );
    assert!(t.elapsed() < Duration::from_secs(10));
    assert!(eventually(|| !running(bg)), "background child killed too");
}

#[test]
fn shell_leftover_background_children_do_not_hold_the_slot() {
    let pool = Pool::new(PoolConfig::new(1), None).unwrap();
    let t = Instant::now();
    let v = val(exec(
        &pool,
        1,
        Job::Shell(shell(&["sh", "-c", "sleep 30 & echo started"])),
    ));
    assert_eq!(v["stdout"], json!("started\n"));
    assert!(t.elapsed() < Duration::from_secs(5));
}

fn call(handler: &str, args: Value) -> Job {
    Job::Call(CallJob {
        handler: handler.into(),
        args,
    })
}

#[test]
fn call_builtins_custom_handlers_unknown_and_panics() {
    let mut cfg = PoolConfig::new(1);
    cfg.handlers.register("add", |a: Value| {
        Ok(json!(
            a[0].as_i64().ok_or("not int")? + a[1].as_i64().ok_or("not int")?
        ))
    });
    cfg.handlers
        .register("boom", |_| -> Result<Value, String> { panic!("kaput") });
    cfg.handlers.register("sleepy", |_| {
        std::thread::sleep(Duration::from_secs(3));
        Ok(Value::Null)
    });
    let pool = Pool::new(cfg, None).unwrap();
    assert_eq!(
        val(exec(&pool, 1, call("echo", json!({"a": [1]})))),
        json!({"a": [1]})
    );
    assert_eq!(val(exec(&pool, 2, call("noop", json!(1)))), Value::Null);
    assert_eq!(val(exec(&pool, 3, call("add", json!([2, 3])))), json!(5));
    let e = err(exec(&pool, 4, call("add", json!(["x", 3]))));
    assert_eq!(
        (e.kind, e.message.as_str()),
        (ErrorKind::Exception, "not int")
    );
    let e = err(exec(&pool, 5, call("nope", json!(null))));
    assert_eq!(e.kind, ErrorKind::UnknownHandler);
    assert!(e.message.contains("echo"), "{}", e.message);
    let e = err(exec(&pool, 6, call("boom", json!(null))));
    assert!(e.message.contains("kaput"), "{}", e.message);
    // The `sleep` built-in sleeps its seconds; anything else is refused.
    let t = Instant::now();
    assert_eq!(
        val(exec(&pool, 60, call("sleep", json!(0.05)))),
        Value::Null
    );
    assert!(
        t.elapsed() >= Duration::from_millis(50),
        "{:?}",
        t.elapsed()
    );
    for (run, bad) in [(61, json!(-1)), (62, json!("1")), (63, json!(3601))] {
        let e = err(exec(&pool, run, call("sleep", bad.clone())));
        assert_eq!(e.kind, ErrorKind::Exception, "{bad}");
        assert!(e.message.contains("0 to 3600"), "{}", e.message);
    }
    start(&pool, 0, 7, call("sleepy", json!(null)));
    wait_started(&pool, &[7]);
    let t = Instant::now();
    pool.cancel(0, 7);
    let e = err(wait_finished(&pool, 7));
    assert_eq!(
        (e.kind, e.message.as_str()),
        (
            ErrorKind::Crash,
            "handler \"sleepy\" was stopped (left running in the background)"
        )
    );
    assert!(t.elapsed() < Duration::from_secs(2));
    // The abandoned handler's slot is served by a fresh thread at once.
    let t = Instant::now();
    assert_eq!(val(exec(&pool, 8, call("echo", json!(8)))), json!(8));
    assert!(t.elapsed() < Duration::from_secs(1));
}

/// A handler returning the name of the thread it runs on.
fn thread_name(_: Value) -> Result<Value, String> {
    Ok(json!(std::thread::current().name().unwrap_or("")))
}

#[test]
fn inline_handlers_run_on_the_calling_thread_and_others_are_left_to_slots() {
    let mut cfg = PoolConfig::new(1);
    cfg.handlers.register_inline("whoami", thread_name);
    cfg.handlers
        .register_inline("boom", |_| -> Result<Value, String> {
            panic!("inline kaput")
        });
    cfg.handlers.register("threaded", thread_name);
    let pool = Pool::new(cfg, None).unwrap();
    let js = |run: u64, job: Job| JobStart {
        slot: 0,
        run,
        msgid: format!("m{run}"),
        job,
        timeout: Some(Duration::from_secs(1)),
        context: Default::default(),
    };
    let here = std::thread::current().name().unwrap_or("").to_string();
    let mut j = js(1, call("whoami", json!(null)));
    assert_eq!(pool.run_inline(&mut j).map(val), Some(json!(here)));
    let mut j = js(2, call("echo", json!({"k": [1, 2]})));
    assert_eq!(pool.run_inline(&mut j).map(val), Some(json!({"k": [1, 2]})));
    let mut j = js(3, call("boom", json!(null)));
    let e = err(pool.run_inline(&mut j).unwrap());
    assert_eq!(e.kind, ErrorKind::Exception);
    assert!(e.message.contains("inline kaput"), "{}", e.message);
    // Slot-thread handlers, unknown handlers and other job kinds are not
    // run inline, and nothing was emitted for the inline runs.
    for job in [
        call("threaded", json!({"keep": 1})),
        call("nope", json!(null)),
        Job::Shell(ShellJob {
            argv: vec!["true".into()],
            stdin: None,
            env: Map::new(),
            cwd: None,
        }),
    ] {
        let mut j = js(4, job.clone());
        assert!(pool.run_inline(&mut j).is_none());
        assert_eq!(j.job, job, "a job not run inline is left as it was");
    }
    assert!(pool.events().try_recv().is_err());
    // Through the slot the threaded handler runs on the slot's thread.
    assert_eq!(
        val(exec(&pool, 5, call("threaded", json!(null)))),
        json!("emq-slot-0")
    );
}

/// Sends on its channel when the thread that holds it ends (a
/// thread-local's destructor runs after everything the thread did).
struct ThreadEnd(Sender<()>);

impl Drop for ThreadEnd {
    fn drop(&mut self) {
        let _ = self.0.send(());
    }
}

thread_local! {
    static THREAD_END: std::cell::RefCell<Option<ThreadEnd>> = const { std::cell::RefCell::new(None) };
}

#[test]
fn abandoned_handler_reports_nothing_more_and_kill_all_does_not_wait_for_handlers() {
    let mut cfg = PoolConfig::new(2);
    let (ended_tx, ended) = unbounded::<()>();
    let (gate_tx, gate) = unbounded::<()>();
    cfg.handlers.register("sleepy", move |_| {
        // Tell the test when this (soon abandoned) thread is gone.
        THREAD_END.with(|t| *t.borrow_mut() = Some(ThreadEnd(ended_tx.clone())));
        let _ = gate.recv_timeout(Duration::from_secs(20));
        Ok(json!("late"))
    });
    cfg.handlers.register("stuck", |_| {
        std::thread::sleep(Duration::from_secs(30));
        Ok(Value::Null)
    });
    let pool = Pool::new(cfg, None).unwrap();
    let started = |run| match recv(&pool, Duration::from_secs(10)) {
        Ok(PoolEvent::Started { run: r, .. }) => assert_eq!(r, run),
        other => panic!("expected Started of run {run}, got {other:?}"),
    };
    start(&pool, 0, 1, call("sleepy", json!(null)));
    started(1);
    pool.cancel(0, 1);
    match recv(&pool, Duration::from_secs(1)) {
        Ok(PoolEvent::Finished {
            run: 1, outcome, ..
        }) => {
            assert_eq!(err(outcome).kind, ErrorKind::Crash)
        }
        other => panic!("expected Finished of run 1, got {other:?}"),
    }
    // Once the handler returns, the abandoned thread ends, and its late
    // result was never reported.
    gate_tx.send(()).unwrap();
    ended
        .recv_timeout(Duration::from_secs(10))
        .expect("the abandoned thread ended");
    assert!(
        pool.events().try_recv().is_err(),
        "abandoned run reported twice"
    );
    // A handler that never returns does not hold up kill_all or drop.
    start(&pool, 1, 2, call("stuck", json!(null)));
    started(2);
    let t = Instant::now();
    pool.kill_all();
    match recv(&pool, Duration::from_secs(1)) {
        Ok(PoolEvent::Finished {
            run: 2, outcome, ..
        }) => {
            assert_eq!(err(outcome).kind, ErrorKind::Crash)
        }
        other => panic!("expected Finished of run 2, got {other:?}"),
    }
    drop(pool);
    assert!(t.elapsed() < Duration::from_secs(2));
}

#[test]
fn slots_run_in_parallel_and_kill_all_stops_everything() {
    let (pool, _d) = python_pool("killall", 2);
    start(&pool, 0, 1, run_job("emqtestmod", "sleep", json!([30])));
    start(&pool, 1, 2, Job::Shell(shell(&["sleep", "30"])));
    wait_started(&pool, &[1, 2]);
    let t = Instant::now();
    pool.kill_all();
    let mut done = 0;
    while done < 2 {
        match recv(&pool, Duration::from_secs(10)) {
            Ok(PoolEvent::Finished { outcome, .. }) => {
                assert!(!outcome.is_ok());
                done += 1;
            }
            Ok(_) => {}
            Err(_) => panic!("kill_all did not finish both jobs"),
        }
    }
    assert!(t.elapsed() < Duration::from_secs(5));
}

#[test]
fn python_worker_killed_while_idle_is_replaced_before_the_next_job() {
    let (pool, _d) = python_pool("idlekill", 1);
    let pid1 = val(exec(&pool, 1, run_job("emqtestmod", "pid", json!([]))))
        .as_i64()
        .unwrap() as i32;
    assert!(emq_process::signal(pid1, libc::SIGKILL));
    assert!(eventually(|| !running(pid1)), "the worker died");
    let pid2 = val(exec(&pool, 2, run_job("emqtestmod", "pid", json!([]))))
        .as_i64()
        .unwrap() as i32;
    assert_ne!(
        pid1, pid2,
        "the job ran on a fresh worker, not blamed for the dead one"
    );
}

#[test]
fn slow_call_handlers_on_different_slots_run_in_parallel() {
    let mut cfg = PoolConfig::new(4);
    cfg.handlers.register("slow", |a: Value| {
        std::thread::sleep(Duration::from_millis(400));
        Ok(a)
    });
    // No Python worker start-up in the way of the measurement.
    cfg.python.prestart = false;
    let pool = Pool::new(cfg, None).unwrap();
    // Every slot thread is up and waiting for work.
    for slot in 0..4 {
        start(&pool, slot, 100 + slot as u64, call("echo", json!(slot)));
    }
    let mut warm = 0;
    while warm < 4 {
        match recv(&pool, Duration::from_secs(10)) {
            Ok(PoolEvent::Finished { outcome, .. }) => {
                assert!(outcome.is_ok());
                warm += 1;
            }
            Ok(_) => {}
            Err(_) => panic!("the slot threads did not start"),
        }
    }
    let t = Instant::now();
    for slot in 0..4 {
        start(&pool, slot, slot as u64 + 1, call("slow", json!(slot)));
    }
    let mut done = std::collections::BTreeMap::new();
    while done.len() < 4 {
        match recv(&pool, Duration::from_secs(10)) {
            Ok(PoolEvent::Finished {
                slot, run, outcome, ..
            }) => {
                assert_eq!(run, slot as u64 + 1);
                done.insert(slot, val(outcome));
            }
            Ok(_) => {}
            Err(_) => panic!("call jobs did not finish"),
        }
    }
    assert_eq!(
        done.values().cloned().collect::<Vec<_>>(),
        [0, 1, 2, 3].map(|i| json!(i))
    );
    assert!(
        t.elapsed() < Duration::from_millis(1200),
        "4 x 400 ms handlers took {:?}: not in parallel",
        t.elapsed()
    );
}

/// Poll `cond` every 10 ms for at most 10 s; whether it became true.
fn eventually(mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

/// The pids a job wrote to `path` (written to a temporary name, then
/// renamed: the file is complete once it exists).
fn read_pids(path: &std::path::Path) -> Vec<i32> {
    assert!(
        eventually(|| path.exists()),
        "{} never written",
        path.display()
    );
    std::fs::read_to_string(path)
        .unwrap()
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect()
}

/// What the pool reports for a run taken out of its mailbox.
fn assert_dequeued(o: JobOutcome) {
    let e = err(o);
    assert_eq!(
        (e.kind, e.message.as_str()),
        (
            ErrorKind::Crash,
            "stopped by the job manager before it started"
        )
    );
}

#[test]
fn cancelled_shell_job_loses_its_process_group_and_the_slot_runs_the_next_job() {
    let pool = Pool::new(PoolConfig::new(1), None).unwrap();
    let dir = TempDir::new("cancel-sh");
    let pidfile = dir.0.join("pids");
    let script = format!(
        "sleep 30 & echo $$ $! > {0}.tmp; mv {0}.tmp {0}; wait",
        pidfile.display()
    );
    start(&pool, 0, 1, Job::Shell(shell(&["sh", "-c", &script])));
    let pids = read_pids(&pidfile);
    assert_eq!(pids.len(), 2);
    assert!(pids.iter().all(|&p| running(p)));
    pool.cancel(0, 1);
    let e = err(wait(&pool, 1));
    assert_eq!(
        (e.kind, e.message.as_str()),
        (ErrorKind::Exit, "sh was killed by signal 9")
    );
    for p in pids {
        assert!(eventually(|| !running(p)), "{p} outlived the cancel");
    }
    // A second cancel of the finished run touches nothing.
    pool.cancel(0, 1);
    assert_eq!(
        val(exec(&pool, 2, Job::Shell(shell(&["echo", "next"]))))["stdout"],
        json!("next\n")
    );
}

#[test]
fn cancelled_python_job_loses_its_worker_which_is_replaced_before_the_next_job() {
    let (pool, dir) = python_pool("cancel-py", 1);
    let pid1 = val(exec(&pool, 1, run_job("emqtestmod", "bump", json!([]))));
    assert_eq!(pid1, json!(1));
    let old = pool.python_pid(0).expect("a worker");
    let marker = dir.0.join("in-job");
    let path = marker.to_string_lossy().into_owned();
    start(
        &pool,
        0,
        2,
        run_job("emqtestmod", "sleep_marked", json!([path, 30])),
    );
    // The job is inside time.sleep on the old worker.
    assert_eq!(read_pids(&marker), [old]);
    pool.cancel(0, 2);
    assert_killed_python(wait(&pool, 2));
    assert!(eventually(|| !running(old)), "the old worker is gone");
    // A fresh worker is started at once, before any job asks for one.
    assert!(
        eventually(|| pool.python_pid(0).is_some_and(|p| p != old)),
        "no fresh worker"
    );
    let fresh = pool.python_pid(0).unwrap();
    assert_eq!(
        val(exec(&pool, 3, run_job("emqtestmod", "pid", json!([])))),
        json!(fresh)
    );
    assert_eq!(
        val(exec(&pool, 4, run_job("emqtestmod", "bump", json!([])))),
        json!(1),
        "a new process: module state starts over"
    );
}

/// A handler that reports its thread, then blocks until released.
fn gated_pool() -> (Pool, Receiver<String>, Sender<()>) {
    let (started_tx, started_rx) = unbounded::<String>();
    let (gate_tx, gate_rx) = unbounded::<()>();
    let mut cfg = PoolConfig::new(1);
    cfg.python.prestart = false;
    cfg.handlers.register("gated", move |_| {
        let me = format!("{:?}", std::thread::current().id());
        let _ = started_tx.send(me.clone());
        let _ = gate_rx.recv_timeout(Duration::from_secs(20));
        Ok(json!(me))
    });
    cfg.handlers.register("whoami", |_| {
        Ok(json!(format!("{:?}", std::thread::current().id())))
    });
    (Pool::new(cfg, None).unwrap(), started_rx, gate_tx)
}

#[test]
fn cancelled_call_job_is_reported_at_once_and_a_fresh_thread_serves_the_slot() {
    let (pool, started, gate) = gated_pool();
    start(&pool, 0, 1, call("gated", json!(null)));
    let stuck = started.recv_timeout(Duration::from_secs(10)).unwrap();
    pool.cancel(0, 1);
    let e = err(wait(&pool, 1));
    assert_eq!(e.kind, ErrorKind::Crash);
    assert!(e.message.contains("was stopped"), "{}", e.message);
    // The handler is still blocked: the next job runs on another thread.
    let fresh = val(exec(&pool, 2, call("whoami", json!(null))));
    assert_ne!(fresh, json!(stuck));
    // Once released, the abandoned handler's result is discarded: the
    // events that follow are those of the next job only.
    gate.send(()).unwrap();
    start(&pool, 0, 3, call("whoami", json!(null)));
    loop {
        match recv(&pool, Duration::from_secs(10)) {
            Ok(PoolEvent::Finished {
                run: 3, outcome, ..
            }) => {
                assert_eq!(val(outcome), fresh, "same fresh thread");
                break;
            }
            Ok(PoolEvent::Started { run: 3, .. }) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
}

#[test]
fn a_job_cancelled_before_its_slot_thread_takes_it_never_starts() {
    let (pool, started, gate) = gated_pool();
    start(&pool, 0, 1, call("gated", json!(null)));
    started.recv_timeout(Duration::from_secs(10)).unwrap();
    // Run 2 waits in the slot's mailbox behind run 1.
    start(&pool, 0, 2, call("whoami", json!(null)));
    pool.cancel(0, 2);
    match recv(&pool, Duration::from_secs(10)) {
        Ok(PoolEvent::Started { run: 1, .. }) => {}
        other => panic!("expected Started of run 1, got {other:?}"),
    }
    match recv(&pool, Duration::from_secs(10)) {
        Ok(PoolEvent::Finished {
            run: 2, outcome, ..
        }) => assert_dequeued(outcome),
        other => panic!("expected Finished of run 2, got {other:?}"),
    }
    gate.send(()).unwrap();
    match recv(&pool, Duration::from_secs(10)) {
        Ok(PoolEvent::Finished {
            run: 1, outcome, ..
        }) => assert!(outcome.is_ok()),
        other => panic!("expected Finished of run 1, got {other:?}"),
    }
    // Run 2 never started; the slot takes the next job.
    assert_eq!(val(exec(&pool, 3, call("echo", json!(3)))), json!(3));
}

#[test]
fn python_worker_is_retired_after_max_job_count_jobs_and_exits_on_its_own() {
    let dir = TempDir::new("maxjobs");
    std::fs::write(dir.0.join("emqtestmod.py"), MODULE).unwrap();
    std::fs::write(
        dir.0.join("emqatexit.py"),
        "import atexit, os\n\
         def mark(path):\n\
         \x20   atexit.register(lambda: open(path + '.%d' % os.getpid(), 'w').close())\n\
         \x20   return os.getpid()\n",
    )
    .unwrap();
    let mut cfg = PoolConfig::new(1);
    cfg.python.interpreter = interpreter();
    cfg.python.python_path = vec![dir.0.clone()];
    cfg.python.max_job_count = 3;
    let pool = Pool::new(cfg, None).unwrap();
    let marker = dir.0.join("exited").to_string_lossy().into_owned();
    let mut pids = Vec::new();
    for run in 1..=7 {
        // Each job is queued while the slot may still be replacing its
        // worker: none is lost, each runs once.
        let job = if run == 1 {
            run_job("emqatexit", "mark", json!([marker]))
        } else {
            run_job("emqtestmod", "pid", json!([]))
        };
        pids.push(val(exec(&pool, run, job)).as_i64().unwrap() as i32);
    }
    assert_eq!(pids[0], pids[1]);
    assert_eq!(pids[1], pids[2]);
    assert_ne!(pids[2], pids[3], "a fresh worker after 3 jobs");
    assert_eq!(pids[3], pids[4]);
    assert_eq!(pids[4], pids[5]);
    assert_ne!(pids[5], pids[6]);
    assert_ne!(pids[6], pids[0]);
    // The first worker was not killed: its atexit handler ran.
    let exited = dir.0.join(format!("exited.{}", pids[0]));
    assert!(
        eventually(|| exited.exists()),
        "the retired worker exited on its own"
    );
    // Retirement does not hold the slot: the second retired worker may
    // still be on its way out when job 7 is answered.
    assert!(eventually(|| !running(pids[0]) && !running(pids[3])));
}

#[test]
fn a_slot_takes_other_jobs_while_its_python_worker_is_still_starting() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("slowpy");
    std::fs::write(dir.0.join("emqtestmod.py"), MODULE).unwrap();
    // An interpreter that takes 3 s to start (a loaded machine, a big
    // SUBPROCESS_SETUP_FUNC).
    let slow = dir.0.join("slowpy");
    std::fs::write(
        &slow,
        format!("#!/bin/sh\nsleep 3\nexec {} \"$@\"\n", interpreter()),
    )
    .unwrap();
    std::fs::set_permissions(&slow, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut cfg = PoolConfig::new(1);
    cfg.python.interpreter = slow.to_string_lossy().into_owned();
    cfg.python.python_path = vec![dir.0.clone()];
    let t = Instant::now();
    let pool = Pool::new(cfg, None).unwrap();
    // The fork server is started with the pool; the slot's worker is
    // asked of it at once, and forked once the server has started.
    assert!(
        eventually(|| pool.fork_server_pid().is_some()),
        "the fork server is started with the pool"
    );
    assert_eq!(val(exec(&pool, 1, call("echo", json!(1)))), json!(1));
    let echo = t.elapsed();
    assert!(
        echo < Duration::from_secs(2),
        "the call job waited {echo:?} for the Python worker to start"
    );
    // The Python job waits for the worker's hello, and runs.
    let v = val(exec(&pool, 2, run_job("emqtestmod", "add", json!([1, 2]))));
    assert_eq!(v, json!(3));
    assert!(t.elapsed() >= Duration::from_secs(3), "{:?}", t.elapsed());
}

#[test]
fn a_spare_worker_starts_before_the_old_one_retires_and_takes_the_slot_over() {
    let dir = TempDir::new("spare");
    std::fs::write(dir.0.join("emqtestmod.py"), MODULE).unwrap();
    let mut cfg = PoolConfig::new(1);
    cfg.python.interpreter = interpreter();
    cfg.python.python_path = vec![dir.0.clone()];
    cfg.python.max_job_count = 8;
    assert_eq!(crate::python::spare_lead(8), 2);
    let pool = Pool::new(cfg, None).unwrap();
    let pid = |run| {
        val(exec(&pool, run, run_job("emqtestmod", "pid", json!([]))))
            .as_i64()
            .unwrap() as i32
    };
    let first = pid(1);
    for run in 2..=5 {
        assert_eq!(pid(run), first);
        assert_eq!(pool.python_spare_pid(0), None, "no spare after job {run}");
    }
    // 6 jobs run, 2 left: the spare starts now (right after the result
    // of job 6 is out), while the worker works on.
    assert_eq!(pid(6), first);
    assert!(
        eventually(|| pool.python_spare_pid(0).is_some()),
        "a spare once 2 jobs are left"
    );
    let spare = pool.python_spare_pid(0).expect("the spare");
    assert_ne!(spare, first);
    assert!(running(spare) && running(first));
    assert_eq!(pid(7), first);
    assert_eq!(pid(8), first, "the old worker runs its MAX_JOB_COUNT jobs");
    // It retired; the spare, already started, runs the next job.
    assert_eq!(pid(9), spare);
    assert_eq!(pool.python_pid(0), Some(spare));
    assert_eq!(pool.python_spare_pid(0), None);
    assert!(eventually(|| !running(first)), "the retired worker exits");
}

const HOOKS_MODULE: &str = r#"
import os

STATE = {"setup": 0, "entry": 0, "exit": 0, "ready": False, "in_job": False}

def setup():
    STATE["setup"] += 1
    STATE["ready"] = True

def setup_raises():
    raise RuntimeError("no database")

def entry():
    STATE["entry"] += 1
    STATE["in_job"] = True

def exit():
    STATE["exit"] += 1
    STATE["in_job"] = False

def entry_raises_on_second():
    STATE["entry"] += 1
    if STATE["entry"] == 2:
        raise ValueError("entry refused")

def exit_raises():
    STATE["exit"] += 1
    raise ValueError("exit failed")

def state():
    return dict(STATE, pid=os.getpid())

def fail():
    raise KeyError("job failed")

class Hooks:
    def entry(self):
        STATE["entry"] += 100
"#;

fn hooks_pool(
    name: &str,
    setup: Option<&str>,
    entry: Option<&str>,
    exit: Option<&str>,
) -> (Pool, TempDir) {
    let dir = TempDir::new(name);
    std::fs::write(dir.0.join("emqhooks.py"), HOOKS_MODULE).unwrap();
    let mut cfg = PoolConfig::new(1);
    cfg.python.interpreter = interpreter();
    cfg.python.python_path = vec![dir.0.clone()];
    cfg.python.setup_func = setup.map(String::from);
    cfg.python.job_entry_func = entry.map(String::from);
    cfg.python.job_exit_func = exit.map(String::from);
    (Pool::new(cfg, None).unwrap(), dir)
}

fn hook_state(pool: &Pool, run: u64) -> Value {
    val(exec(pool, run, run_job("emqhooks", "state", json!([]))))
}

#[test]
fn setup_runs_once_per_worker_and_entry_and_exit_around_every_job() {
    let (pool, _d) = hooks_pool(
        "hooks",
        Some("emqhooks.setup"),
        Some("emqhooks.entry"),
        Some("emqhooks.exit"),
    );
    // Inside its first job: setup once, entry once, exit not yet.
    let s = hook_state(&pool, 1);
    assert_eq!(
        (
            &s["setup"],
            &s["ready"],
            &s["entry"],
            &s["exit"],
            &s["in_job"]
        ),
        (&json!(1), &json!(true), &json!(1), &json!(0), &json!(true))
    );
    // A job that raises still gets its exit call.
    let e = err(exec(&pool, 2, run_job("emqhooks", "fail", json!([]))));
    assert!(e.message.contains("KeyError"), "{}", e.message);
    let s = hook_state(&pool, 3);
    assert_eq!(
        (&s["setup"], &s["entry"], &s["exit"]),
        (&json!(1), &json!(3), &json!(2))
    );
    // A fresh worker (after a crash) runs setup again.
    let e = err(exec(
        &pool,
        4,
        run_job("emqtestmod_absent_os", "x", json!([])),
    ));
    assert_eq!(e.kind, ErrorKind::Exception);
    assert!(emq_process::signal(
        s["pid"].as_i64().unwrap() as i32,
        libc::SIGKILL
    ));
    assert!(eventually(|| !running(s["pid"].as_i64().unwrap() as i32)));
    let s2 = hook_state(&pool, 5);
    assert_ne!(s2["pid"], s["pid"]);
    assert_eq!(
        (&s2["setup"], &s2["entry"], &s2["exit"]),
        (&json!(1), &json!(1), &json!(0))
    );
}

#[test]
fn hook_failures_follow_the_documented_rules() {
    // A setup that raises: the worker runs jobs anyway (0.3.13).
    let (pool, _d) = hooks_pool("hooks-setup", Some("emqhooks.setup_raises"), None, None);
    let s = hook_state(&pool, 1);
    assert_eq!(s["ready"], json!(false));
    drop(pool);

    // An entry that raises fails that job, which does not run, and no
    // exit is called; the worker lives on.
    let (pool, _d) = hooks_pool(
        "hooks-entry",
        None,
        Some("emqhooks.entry_raises_on_second"),
        Some("emqhooks.exit"),
    );
    let s1 = hook_state(&pool, 1);
    assert_eq!((&s1["entry"], &s1["exit"]), (&json!(1), &json!(0)));
    let e = err(exec(&pool, 2, run_job("emqhooks", "state", json!([]))));
    assert_eq!(e.kind, ErrorKind::Exception);
    assert_eq!(
        e.message,
        "JOB_ENTRY_FUNC emqhooks.entry_raises_on_second raised ValueError: entry refused"
    );
    assert!(e.traceback.is_some_and(|t| t.contains("entry refused")));
    let s3 = hook_state(&pool, 3);
    assert_eq!(s3["pid"], s1["pid"]);
    assert_eq!(
        (&s3["entry"], &s3["exit"]),
        (&json!(3), &json!(1)),
        "the refused job had no exit call"
    );
    drop(pool);

    // An exit that raises: the job's own result stands.
    let (pool, _d) = hooks_pool("hooks-exit", None, None, Some("emqhooks.exit_raises"));
    assert_eq!(hook_state(&pool, 1)["exit"], json!(0));
    assert_eq!(hook_state(&pool, 2)["exit"], json!(1));
    drop(pool);

    // The class form (0.3.13's callable_from_name), and a path that cannot
    // be loaded: every job fails without running.
    let (pool, _d) = hooks_pool("hooks-class", None, Some("emqhooks:Hooks.entry"), None);
    assert_eq!(hook_state(&pool, 1)["entry"], json!(100));
    drop(pool);
    let (pool, _d) = hooks_pool("hooks-bad", None, Some("emqhooks.nope"), None);
    let e = err(exec(&pool, 1, run_job("emqhooks", "state", json!([]))));
    assert!(
        e.message
            .starts_with("cannot load JOB_ENTRY_FUNC 'emqhooks.nope'"),
        "{}",
        e.message
    );
}

// The fork server (crate::forkserver).

/// Wait for every run of `runs` to finish (in any order); their values.
fn wait_all(pool: &Pool, runs: &[u64]) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut done: Vec<Option<Value>> = vec![None; runs.len()];
    while done.iter().any(Option::is_none) {
        let left = deadline.saturating_duration_since(Instant::now());
        match recv(pool, left) {
            Ok(PoolEvent::Finished { run, outcome, .. }) => {
                if let Some(i) = runs.iter().position(|&r| r == run) {
                    done[i] = Some(val(outcome));
                }
            }
            Ok(_) => {}
            Err(_) => panic!("runs {runs:?} did not finish in time"),
        }
    }
    done.into_iter().flatten().collect()
}

#[test]
fn recycling_under_load_never_leaves_a_slot_waiting_for_a_start() {
    let dir = TempDir::new("recycle-load");
    std::fs::write(dir.0.join("emqtestmod.py"), MODULE).unwrap();
    let mut cfg = PoolConfig::new(2);
    cfg.python.interpreter = interpreter();
    cfg.python.python_path = vec![dir.0.clone()];
    // A spare is forked 2 jobs (100 ms) before its worker retires.
    cfg.python.max_job_count = 8;
    let pool = Pool::new(cfg, None).unwrap();
    // Both slots' first workers are there (their start is not recycling).
    for (slot, run) in [(0, 1), (1, 2)] {
        start(&pool, slot, run, run_job("emqtestmod", "pid", json!([])));
    }
    let first = wait_all(&pool, &[1, 2]);
    let mut pids = std::collections::HashSet::new();
    let mut run = 10;
    // 25 jobs a slot: at least 3 workers' lives each, both slots busy
    // all along.
    for _ in 0..24 {
        for slot in 0..2 {
            run += 1;
            start(
                &pool,
                slot,
                run,
                run_job("emqtestmod", "sleep", json!([0.05])),
            );
        }
        for v in wait_all(&pool, &[run - 1, run]) {
            assert_eq!(v, json!("slept"));
        }
        for slot in 0..2 {
            pids.extend(pool.python_pid(slot));
        }
    }
    assert!(
        pids.len() >= 6
            && first
                .iter()
                .all(|p| pids.contains(&(p.as_i64().unwrap() as i32))),
        "workers were recycled: {pids:?}"
    );
    assert_eq!(
        pool.python_start_waits(),
        0,
        "a slot waited for a fresh worker to start"
    );
}

#[test]
fn a_killed_fork_server_is_replaced() {
    let (pool, _d) = python_pool("forkserver-kill", 1);
    let pid1 = val(exec(&pool, 1, run_job("emqtestmod", "pid", json!([]))))
        .as_i64()
        .unwrap() as i32;
    let server = pool.fork_server_pid().expect("a fork server");
    assert_ne!(server, pid1);
    assert!(emq_process::signal(server, libc::SIGKILL));
    // Its workers die with it, and count as exited.
    assert!(eventually(|| pool.fork_server_pid().is_none()));
    assert!(eventually(|| !running(pid1)), "its worker died with it");
    // The next job is not blamed: a new server forks a new worker.
    let pid2 = val(exec(&pool, 2, run_job("emqtestmod", "pid", json!([]))))
        .as_i64()
        .unwrap() as i32;
    assert_ne!(pid1, pid2);
    let server2 = pool.fork_server_pid().expect("a new fork server");
    assert_ne!(server2, server);
    assert!(!running(server));
    assert_eq!(
        val(exec(&pool, 3, run_job("emqtestmod", "add", json!([2, 3])))),
        json!(5)
    );
}

#[test]
fn a_job_that_calls_os_exit_is_reported() {
    let (pool, _d) = python_pool("os-exit", 1);
    let pid1 = val(exec(&pool, 1, run_job("emqtestmod", "pid", json!([]))));
    for (run, code) in [(2, 0), (4, 3)] {
        let e = err(exec(&pool, run, run_job("os", "_exit", json!([code]))));
        assert_eq!(e.kind, ErrorKind::Crash);
        assert_eq!(
            e.message,
            format!("Python worker process died while running the job (exit status {code})")
        );
        let pid = val(exec(
            &pool,
            run + 1,
            run_job("emqtestmod", "pid", json!([])),
        ));
        assert_ne!(pid, pid1, "a fresh worker");
    }
}

#[test]
fn cancel_kills_the_forked_workers_group() {
    let (pool, dir) = python_pool("cancel-group", 1);
    let marker = dir.0.join("pids");
    let path = marker.to_string_lossy().into_owned();
    start(
        &pool,
        0,
        1,
        run_job("emqtestmod", "spawn_and_sleep", json!([path, 30])),
    );
    let pids = read_pids(&marker);
    assert_eq!(pids.len(), 2, "the worker and the job's child");
    assert_eq!(pool.python_pid(0), Some(pids[0]));
    assert!(pids.iter().all(|&p| running(p)));
    pool.cancel(0, 1);
    assert_killed_python(wait(&pool, 1));
    for p in pids {
        assert!(eventually(|| !running(p)), "{p} outlived the cancel");
    }
    assert_eq!(
        val(exec(&pool, 2, run_job("emqtestmod", "add", json!([1, 1])))),
        json!(2)
    );
}

#[test]
fn a_code_change_takes_a_new_fork_server_and_spares_the_running_job() {
    let dir = TempDir::new("forkserver-reload");
    std::fs::write(dir.0.join("emqtestmod.py"), MODULE).unwrap();
    let mut cfg = PoolConfig::new(2);
    cfg.python.interpreter = interpreter();
    cfg.python.python_path = vec![dir.0.clone()];
    let version = cfg.python.code_version.clone();
    let pool = Pool::new(cfg, None).unwrap();
    let pid1 = val(exec(&pool, 1, run_job("emqtestmod", "pid", json!([]))));
    let server1 = pool.fork_server_pid().expect("a fork server");
    // A job runs on slot 1 across the change, on the old server's worker.
    let marker = dir.0.join("in-job");
    let path = marker.to_string_lossy().into_owned();
    start(
        &pool,
        1,
        2,
        run_job("emqtestmod", "sleep_marked", json!([path, 1])),
    );
    let old_worker = read_pids(&marker)[0];
    version.bump();
    // The next job on slot 0 runs on a worker of a new server, and the
    // running job finishes on the old code's worker.
    start(&pool, 0, 3, run_job("emqtestmod", "pid", json!([])));
    let done = wait_all(&pool, &[2, 3]);
    assert_eq!(done[0], json!("slept"));
    assert_ne!(pid1, done[1]);
    let server2 = pool.fork_server_pid().expect("a new fork server");
    assert_ne!(server1, server2);
    // Slot 1 is then served by the new server too; the old one, with no
    // worker left, exits.
    start(&pool, 1, 4, run_job("emqtestmod", "pid", json!([])));
    let pid4 = val(wait(&pool, 4));
    assert_ne!(pid4.as_i64(), Some(old_worker as i64));
    let gone = eventually(|| !running(server1));
    assert!(gone, "the old fork server exits");
}

#[test]
fn the_fork_server_outlives_the_thread_that_started_the_pool() {
    let dir = TempDir::new("forkserver-thread");
    std::fs::write(dir.0.join("emqtestmod.py"), MODULE).unwrap();
    let mut cfg = PoolConfig::new(1);
    cfg.python.interpreter = interpreter();
    cfg.python.python_path = vec![dir.0.clone()];
    // PR_SET_PDEATHSIG fires when the spawning *thread* ends.
    let pool = std::thread::spawn(move || Pool::new(cfg, None).unwrap())
        .join()
        .unwrap();
    assert!(eventually(|| pool.fork_server_pid().is_some()));
    let server = pool.fork_server_pid().unwrap();
    // The thread has ended (joined): a parent-death signal tied to it is
    // on its way by now; two jobs later the server must still be there.
    let pid1 = val(exec(&pool, 1, run_job("emqtestmod", "pid", json!([]))));
    let pid2 = val(exec(&pool, 2, run_job("emqtestmod", "pid", json!([]))));
    assert!(running(server), "the fork server died with its thread");
    assert_eq!(pool.fork_server_pid(), Some(server));
    assert_eq!(pid1, pid2, "the same worker");
}

#[test]
fn a_retired_worker_that_does_not_exit_is_killed_after_its_grace() {
    let dir = TempDir::new("retire-grace");
    std::fs::write(dir.0.join("emqtestmod.py"), MODULE).unwrap();
    let mut cfg = PoolConfig::new(1);
    cfg.python.interpreter = interpreter();
    cfg.python.python_path = vec![dir.0.clone()];
    cfg.python.max_job_count = 1;
    let pool = Pool::new(cfg, None).unwrap();
    // A non-daemon thread keeps the retired worker's interpreter from
    // exiting on its own.
    let held = val(exec(
        &pool,
        1,
        run_job("emqtestmod", "hold_exit", json!([])),
    ));
    let held = held.as_i64().unwrap() as i32;
    let next = val(exec(&pool, 2, run_job("emqtestmod", "pid", json!([]))));
    assert_ne!(next, json!(held));
    assert!(
        eventually(|| !running(held)),
        "killed by its fork server after {:?}",
        crate::python::RETIRE_GRACE
    );
    // The server goes on forking.
    let after = val(exec(&pool, 3, run_job("emqtestmod", "pid", json!([]))));
    assert_ne!(after, next);
}

/// Wait until the worker of `slot` is lent to the socket loop, so that its
/// next `run` job takes the lean path.
fn wait_lent(pool: &Pool, slot: usize) {
    assert!(
        eventually(|| pool.python_lent(slot)),
        "the worker of slot {slot} is never lent to the loop"
    );
}

#[test]
fn run_jobs_take_the_lean_path_once_the_worker_is_lent() {
    let (pool, _dir) = python_pool("lean-path", 2);
    // The first job of a slot goes through its thread (which reads the
    // worker's hello), the next ones are written by the caller.
    assert_eq!(
        val(exec(&pool, 1, run_job("emqtestmod", "bump", json!([])))),
        json!(1)
    );
    let pid = pool.python_pid(0).expect("a worker");
    for run in 2..=20u64 {
        wait_lent(&pool, 0);
        let before = pool.lean_starts();
        let v = val(exec(
            &pool,
            run,
            run_job("emqtestmod", "add", json!([run, 1])),
        ));
        assert_eq!(v, json!(run + 1));
        assert_eq!(
            pool.lean_starts(),
            before + 1,
            "run {run} took the lean path"
        );
    }
    wait_lent(&pool, 0);
    assert_eq!(
        val(exec(&pool, 21, run_job("emqtestmod", "bump", json!([])))),
        json!(2)
    );
    assert_eq!(
        pool.python_pid(0),
        Some(pid),
        "the same worker ran every job"
    );
    // Errors come back the same way, and the worker stays.
    wait_lent(&pool, 0);
    let e = err(exec(&pool, 22, run_job("emqtestmod", "fail", json!([]))));
    assert_eq!(e.kind, ErrorKind::Exception);
    assert!(e.message.contains("boom"), "{e:?}");
    assert_eq!(pool.python_pid(0), Some(pid));
}

#[test]
fn a_worker_dying_mid_job_on_the_lean_path_is_a_crash_and_is_replaced() {
    let (pool, _dir) = python_pool("lean-died", 1);
    assert_eq!(
        val(exec(&pool, 1, run_job("emqtestmod", "bump", json!([])))),
        json!(1)
    );
    let old = pool.python_pid(0).expect("a worker");
    wait_lent(&pool, 0);
    let before = pool.lean_starts();
    let e = err(exec(
        &pool,
        2,
        run_job("emqtestmod", "exit_hard", json!([])),
    ));
    assert_eq!(pool.lean_starts(), before + 1, "it took the lean path");
    assert_eq!(e.kind, ErrorKind::Crash);
    assert!(e.message.contains("died while running the job"), "{e:?}");
    assert!(eventually(|| !running(old)), "the dead worker is reaped");
    // A fresh worker runs the next job (module state starts over), and
    // is lent to the loop in turn.
    assert_eq!(
        val(exec(&pool, 3, run_job("emqtestmod", "bump", json!([])))),
        json!(1)
    );
    assert_ne!(pool.python_pid(0), Some(old));
    wait_lent(&pool, 0);
    let before = pool.lean_starts();
    assert_eq!(
        val(exec(&pool, 4, run_job("emqtestmod", "bump", json!([])))),
        json!(2)
    );
    assert_eq!(pool.lean_starts(), before + 1);
}

#[test]
fn a_cancel_racing_the_answer_on_the_lean_path_reports_once_and_never_reuses_the_worker() {
    let (pool, _dir) = python_pool("lean-race", 1);
    let mut run = 0;
    for round in 0..10 {
        run += 1;
        assert!(matches!(
            exec(&pool, run, run_job("emqtestmod", "pid", json!([]))),
            JobOutcome::Value(_)
        ));
        wait_lent(&pool, 0);
        let old = pool.python_pid(0).expect("a worker");
        run += 1;
        let before = pool.lean_starts();
        start(&pool, 0, run, run_job("emqtestmod", "pid", json!([])));
        assert_eq!(pool.lean_starts(), before + 1, "round {round}: lean");
        // The answer may already be on its way: either outcome is fine,
        // but exactly one Finished comes, and the worker goes.
        pool.cancel(0, run);
        let outcome = wait(&pool, run);
        if let JobOutcome::Value(v) = &outcome {
            assert_eq!(v, &json!(old));
        }
        let deadline = Instant::now() + Duration::from_millis(300);
        while let Ok(e) = recv(&pool, deadline.saturating_duration_since(Instant::now())) {
            assert!(
                !matches!(e, PoolEvent::Finished { run: r, .. } if r == run),
                "run {run} reported twice"
            );
        }
        assert!(
            eventually(|| !running(old)),
            "round {round}: the cancelled worker is killed"
        );
        assert!(
            eventually(|| pool.python_pid(0).is_some_and(|p| p != old)),
            "round {round}: a fresh worker takes the slot"
        );
    }
}

#[test]
fn progress_comes_through_the_lean_path_before_the_answer() {
    let (pool, _dir) = python_pool("lean-progress", 1);
    assert!(matches!(
        exec(&pool, 1, run_job("emqtestmod", "pid", json!([]))),
        JobOutcome::Value(_)
    ));
    wait_lent(&pool, 0);
    let before = pool.lean_starts();
    start(
        &pool,
        0,
        2,
        run_job("emqtestmod", "progress_steps", json!([4])),
    );
    assert_eq!(pool.lean_starts(), before + 1);
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match recv(&pool, deadline.saturating_duration_since(Instant::now())) {
            Ok(PoolEvent::Progress {
                run: 2,
                percent,
                message,
                ..
            }) => seen.push((percent, message)),
            Ok(PoolEvent::Finished {
                run: 2, outcome, ..
            }) => {
                val(outcome);
                break;
            }
            Ok(_) => {}
            Err(()) => panic!("run 2 did not finish"),
        }
    }
    let want: Vec<(u8, String)> = (1..=4)
        .map(|i| (25 * i as u8, format!("step {i}")))
        .collect();
    assert_eq!(seen, want);
}

#[test]
fn recycling_on_the_lean_path_keeps_the_max_job_count_and_never_waits_for_a_start() {
    let dir = TempDir::new("lean-recycle");
    std::fs::write(dir.0.join("emqtestmod.py"), MODULE).unwrap();
    let mut cfg = PoolConfig::new(1);
    cfg.python.interpreter = interpreter();
    cfg.python.python_path = vec![dir.0.clone()];
    cfg.python.max_job_count = 8;
    let pool = Pool::new(cfg, None).unwrap();
    let mut pids = Vec::new();
    for run in 1..=40u64 {
        // Give the slot thread its turn between jobs (as the router's
        // round trip does): then the spare is always ready.
        if run > 1 {
            eventually(|| pool.python_lent(0));
        }
        let pid = val(exec(&pool, run, run_job("emqtestmod", "pid", json!([]))));
        pids.push(pid.as_i64().unwrap());
    }
    // Each worker ran exactly MAX_JOB_COUNT jobs, in a row.
    let mut runs: Vec<(i64, usize)> = Vec::new();
    for p in pids {
        match runs.last_mut() {
            Some((q, n)) if *q == p => *n += 1,
            _ => runs.push((p, 1)),
        }
    }
    assert_eq!(runs.len(), 5, "{runs:?}");
    assert!(runs.iter().all(|(_, n)| *n == 8), "{runs:?}");
    assert!(
        pool.lean_starts() >= 20,
        "most jobs took the lean path: {}",
        pool.lean_starts()
    );
    assert_eq!(pool.python_start_waits(), 0, "the spare was always ready");
}
