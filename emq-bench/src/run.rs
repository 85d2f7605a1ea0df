//! Carrying out a [`Plan`]: the phases, each `--runs` times, then the
//! table of medians and the JSON report.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use emq_cli_support::Exit;
use serde_json::json;

use emq_bench::phases::{self, Config, Outcome};
use emq_bench::procs;
use emq_bench::report::{self, RunFigures};

use crate::flags::Plan;

/// The 1, 5 and 15 minute load averages.
fn loadavg() -> Option<[f64; 3]> {
    let t = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut it = t.split_whitespace().map(|v| v.parse::<f64>().ok());
    Some([it.next()??, it.next()??, it.next()??])
}

fn machine() -> serde_json::Value {
    let cpu = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|t| {
        t.lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
    });
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .ok()
        .map(|s| s.trim().to_string());
    json!({
        "cpus": std::thread::available_parallelism().map(|n| n.get()).ok(),
        "cpu_model": cpu,
        "kernel": kernel,
        "bench_build": if cfg!(debug_assertions) { "debug" } else { "release" },
        "loadavg_at_start": loadavg(),
    })
}

/// `--noisy`: the flow-control phase alone (`emq_bench::noisy`).
fn noisy(plan: &Plan, cfg: &Config, machine: &serde_json::Value, stop: &AtomicBool) -> Exit {
    let dir = std::env::temp_dir().join(format!("emq-bench-noisy-{}", std::process::id()));
    let ncfg = emq_bench::noisy::default_config(&cfg.router_bin, &dir, plan.quick);
    let r = emq_bench::noisy::run_all(&ncfg, stop);
    let _ = std::fs::remove_dir_all(&dir);
    match r {
        Ok(v) => {
            if let Some(path) = &plan.json {
                let doc = json!({"machine": machine, "noisy": v});
                if let Err(e) = std::fs::write(path, format!("{doc:#}\n")) {
                    eprintln!("emq-bench: {}: {e}", path.display());
                    return Exit::Internal;
                }
            }
            Exit::Ok
        }
        Err(e) => {
            eprintln!("emq-bench: noisy-neighbour phase failed: {e}");
            Exit::Internal
        }
    }
}

/// Run the phases of `plan` `plan.runs` times, print the table, write the
/// JSON; the exit code says whether every phase ran.
pub(crate) fn run(plan: &Plan) -> Exit {
    let mut cfg = plan.cfg.clone();
    if plan.noisy {
        // No PostgreSQL server for it.
        let stop = match procs::install_signal_handler() {
            Ok(s) => s,
            Err(e) => {
                eprintln!("emq-bench: {e}");
                return Exit::Internal;
            }
        };
        return noisy(plan, &cfg, &machine(), &stop);
    }
    // The PostgreSQL phase's server: the one named, else a throwaway local
    // one (stopped when `_pg` drops, Ctrl-C included: the loop ends first).
    let mut _pg = None;
    if cfg.postgres.is_none() && !plan.skip.postgres {
        match throwaway_postgres() {
            Ok(Some((cluster, url))) => {
                _pg = Some(cluster);
                cfg.postgres = Some(url);
            }
            Ok(None) => {}
            Err(e) => eprintln!("emq-bench: cannot start a PostgreSQL server: {e}"),
        }
    }
    let stop: Arc<AtomicBool> = match procs::install_signal_handler() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("emq-bench: {e}");
            return Exit::Internal;
        }
    };
    let m = machine();
    announce(plan, &cfg, &m);
    let mut all = Vec::new();
    for run in 1..=plan.runs {
        all.push(run_once(run, plan, &cfg, &stop));
        if stop.load(Ordering::Relaxed) {
            eprintln!("emq-bench: interrupted");
            return Exit::Interrupted;
        }
    }
    let runs = plan.runs;
    let rows = report::metrics(&all, cfg.memory_jobs, cfg.concurrency);
    println!();
    println!(
        "emq-bench: medians of {runs} run(s); {} jobs pipelined (window {}), {} one at a time, {} buffered",
        cfg.jobs, cfg.window, cfg.single_jobs, cfg.memory_jobs
    );
    print!("{}", report::table(&rows));
    let failures = failures(&all);
    for f in &failures {
        eprintln!("emq-bench: FAILED {f}");
    }
    if let Some(path) = &plan.json {
        let doc = json!({
            "bench": "emq-bench",
            "timestamp_unix": std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            "machine": m,
            "loadavg_at_end": loadavg(),
            "config": {
                "runs": runs,
                "jobs": cfg.jobs,
                "window": cfg.window,
                "single_jobs": cfg.single_jobs,
                "memory_jobs": cfg.memory_jobs,
                "warmup_jobs": cfg.warmup_jobs,
                "concurrency": cfg.concurrency,
                "prefetch": cfg.prefetch.as_deref().unwrap_or("default"),
                "quick": plan.quick,
                "router_bin": cfg.router_bin.display().to_string(),
                "jobmanager_bin": cfg.jobmanager_bin.display().to_string(),
                "postgres": cfg.postgres.as_deref().map(redact_password),
                "job": "[\"call\", {\"handler\": \"noop\", \"args\": null}] on queue default, header reply-requested",
            },
            "metrics": report::metrics_json(&rows),
            "runs": all.iter().enumerate().map(|(i, r)| r.to_json(i + 1)).collect::<Vec<_>>(),
            "failures": failures,
        });
        if let Err(e) = write_json(path, &doc) {
            eprintln!("emq-bench: cannot write {}: {e}", path.display());
            return Exit::Internal;
        }
        eprintln!("emq-bench: JSON written to {}", path.display());
    }
    if failures.is_empty() {
        Exit::Ok
    } else {
        Exit::Internal
    }
}

/// What is about to run, and what makes the figures noisy or not comparable.
fn announce(plan: &Plan, cfg: &Config, machine: &serde_json::Value) {
    eprintln!(
        "emq-bench: {} run(s), {} jobs (window {}), {} single, {} buffered; binaries in {}; machine {}",
        plan.runs,
        cfg.jobs,
        cfg.window,
        cfg.single_jobs,
        cfg.memory_jobs,
        plan.bin_dir.display(),
        machine
    );
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    if let Some(l) = loadavg().filter(|l| l[0] > cpus as f64 * 0.5) {
        eprintln!(
            "emq-bench: WARNING: load average {:.2} on {cpus} CPU(s) before starting; other work competes with the bench and figures will be noisy",
            l[0]
        );
    }
    if cfg!(debug_assertions) || plan.bin_dir.components().any(|c| c.as_os_str() == "debug") {
        eprintln!("emq-bench: WARNING: not a release build; figures are not comparable");
    }
}

/// One phase of run `run`: skipped (by flag or after Ctrl-C), or run with
/// a line before and a summary after.
fn phase<T>(
    run: usize,
    plan: &Plan,
    skip: bool,
    stop: &AtomicBool,
    (step, name): (&str, &str),
    measure: impl FnOnce() -> Outcome<T>,
    summary: impl FnOnce(&Outcome<T>) -> String,
) -> Outcome<T> {
    if skip || stop.load(Ordering::Relaxed) {
        return Outcome::Skipped;
    }
    let runs = plan.runs;
    eprintln!("emq-bench: run {run}/{runs}: {step}");
    let o = measure();
    let short: String = summary(&o).chars().take(400).collect();
    eprintln!("emq-bench: run {run}/{runs}: {name}: {short}");
    o
}

/// Every phase once.
fn run_once(run: usize, plan: &Plan, cfg: &Config, stop: &AtomicBool) -> RunFigures {
    let skip = plan.skip;
    let pipe = |o: &Outcome<phases::PipeAndSingle>| format!("{:?}", brief(o));
    let mem = |o: &Outcome<phases::Memory>| format!("{o:?}");
    let emq = |journal, curve| move || phases::emq(cfg, journal, curve, stop);
    RunFigures {
        raw: phase(
            run,
            plan,
            skip.raw,
            stop,
            ("raw limit", "raw limit"),
            || phases::raw(cfg, None, stop),
            pipe,
        ),
        raw_credit: phase(
            run,
            plan,
            skip.raw_credit,
            stop,
            ("raw limit with READY credit", "raw limit with READY credit"),
            || phases::raw(cfg, Some(cfg.concurrency), stop),
            pipe,
        ),
        memory_mode: phase(
            run,
            plan,
            skip.memory_mode,
            stop,
            ("emq memory mode", "emq memory mode"),
            emq(phases::Journal::Memory, false),
            pipe,
        ),
        curve: phase(
            run,
            plan,
            skip.curve,
            stop,
            ("emq memory mode, CURVE", "emq memory mode, CURVE"),
            emq(phases::Journal::Memory, true),
            pipe,
        ),
        durable: phase(
            run,
            plan,
            skip.durable,
            stop,
            ("emq durable journal", "emq durable journal"),
            emq(phases::Journal::Sqlite, false),
            pipe,
        ),
        postgres: phase(
            run,
            plan,
            skip.postgres,
            stop,
            ("emq PostgreSQL journal", "emq PostgreSQL journal"),
            emq(phases::Journal::Postgres, false),
            pipe,
        ),
        ideal_worker: phase(
            run,
            plan,
            skip.ideal_worker,
            stop,
            (
                "emq-router + ideal in-process worker",
                "emq-router + ideal worker",
            ),
            || phases::emq_ideal_worker(cfg, stop),
            pipe,
        ),
        buffered: phase(
            run,
            plan,
            skip.buffered,
            stop,
            ("router memory, jobs buffered", "router memory"),
            || phases::memory(cfg, false, stop),
            mem,
        ),
        buffered_durable: phase(
            run,
            plan,
            skip.buffered_durable,
            stop,
            (
                "router memory, jobs buffered, durable journal",
                "router memory, durable",
            ),
            || phases::memory(cfg, true, stop),
            mem,
        ),
    }
}

/// One line per phase that failed, in every run.
fn failures(all: &[RunFigures]) -> Vec<String> {
    all.iter()
        .enumerate()
        .flat_map(|(i, r)| {
            [
                ("raw", fail(&r.raw)),
                ("raw with READY credit", fail(&r.raw_credit)),
                ("emq memory mode", fail(&r.memory_mode)),
                ("emq memory mode, CURVE", fail(&r.curve)),
                ("emq durable", fail(&r.durable)),
                ("emq PostgreSQL", fail(&r.postgres)),
                ("emq-router + ideal worker", fail(&r.ideal_worker)),
                ("router memory", fail(&r.buffered)),
                ("router memory, durable", fail(&r.buffered_durable)),
            ]
            .into_iter()
            .filter_map(move |(n, f)| f.map(|f| format!("run {}: {n}: {f}", i + 1)))
        })
        .collect()
}

/// `doc` as pretty JSON at `path` (its directory made if missing).
fn write_json(path: &Path, doc: &serde_json::Value) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        let _ = std::fs::create_dir_all(dir);
    }
    let text = serde_json::to_string_pretty(doc).unwrap_or_default();
    std::fs::write(path, text + "\n")
}

/// A local PostgreSQL server in a temporary directory, and the URL of a
/// fresh database on it; `None` when PostgreSQL is not installed.
fn throwaway_postgres() -> Result<Option<(emq_testkit::postgres::PgCluster, String)>, String> {
    if emq_testkit::postgres::bin_dir().is_none() {
        eprintln!(
            "emq-bench: PostgreSQL is not installed (apt-get install postgresql): no PostgreSQL phase"
        );
        return Ok(None);
    }
    std::panic::catch_unwind(|| {
        let c = emq_testkit::postgres::PgCluster::start();
        let url = c.create_database("emq_bench");
        eprintln!("emq-bench: throwaway PostgreSQL server for the PostgreSQL phase: {url}");
        (c, url)
    })
    .map(Some)
    .map_err(|p| {
        p.downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "panicked".into())
    })
}

/// A database URL without its password (for the JSON report).
fn redact_password(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let user = &url[s + 3..at];
            match user.split_once(':') {
                Some((u, _)) => format!("{}{u}:***{}", &url[..s + 3], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

fn fail<T>(o: &Outcome<T>) -> Option<String> {
    match o {
        Outcome::Failed(e) => Some(e.clone()),
        _ => None,
    }
}

/// A one-line progress summary of a pipelined + single phase.
fn brief(o: &Outcome<phases::PipeAndSingle>) -> String {
    match o {
        Outcome::Done(p) => format!(
            "{:.0}/s pipelined (p50 {:.0} us, p99 {:.0} us, acks {} in {} messages, CPU us/job {}), single p50 {:.0} us p99 {:.0} us",
            p.pipelined.rate,
            p.pipelined.latency.map(|l| l.p50_us).unwrap_or(f64::NAN),
            p.pipelined.latency.map(|l| l.p99_us).unwrap_or(f64::NAN),
            p.pipelined.acks,
            p.pipelined.ack_messages,
            p.pipelined
                .cpu_us_per_job
                .iter()
                .map(|(k, v)| format!("{k} {v:.1}"))
                .collect::<Vec<_>>()
                .join(", "),
            p.single.latency.map(|l| l.p50_us).unwrap_or(f64::NAN),
            p.single.latency.map(|l| l.p99_us).unwrap_or(f64::NAN),
        ),
        Outcome::Unavailable(w) => format!("unavailable: {w}"),
        Outcome::Failed(w) => format!("FAILED: {w}"),
        Outcome::Skipped => "skipped".into(),
    }
}
