//! emq-bench: raw zmq limit, emq end to end (memory and durable), single-job
//! round trip, router memory with a million buffered jobs. Prints a table
//! and optionally writes JSON. Targets are reported, never asserted.

#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use clap::Parser;
use emq_cli_support::{parse_duration, Exit};
use serde_json::json;

use emq_bench::phases::{self, Config, Outcome};
use emq_bench::procs;
use emq_bench::report::{self, RunFigures};

#[derive(Parser, Debug)]
#[command(
    name = "emq-bench",
    about = "Benchmark emq-router + emq-jobmanager against the raw zmq limit",
    long_about = "Benchmark emq against plain zmq on loopback, in the same run:\n\
  1. raw limit: DEALER -> ROUTER|ROUTER relay -> DEALER echo, eMQP-shaped frames, pipelined;\n\
     also with READY credit flow as a --concurrency job manager must work (at most N jobs\n\
     on the worker side): the limit of plain zmq for that many slots;\n\
  2. emq end to end: real emq-router + one emq-jobmanager (--concurrency 8), pipelined\n\
     no-op jobs with reply-requested, memory mode (--journal none), durable journal (SQLite),\n\
     and the journal on PostgreSQL (--postgres URL);\n\
  3. single job round trip, one job at a time;\n\
  4. router peak RSS (VmHWM) with 1,000,000 jobs buffered and no worker (memory mode,\n\
     and with the durable journal);\n\
  also: the real router with an ideal in-process worker (router cost without the job manager),\n\
  and CPU time per job of every process;\n\
  5. ratios emq / raw.\n\
Each figure is the median of --runs runs. Targets are reported, never asserted;\n\
the exit status is 1 only when a phase failed to run."
)]
struct Args {
    /// Jobs per pipelined phase [default: 100000, --quick 2000]
    #[arg(long)]
    jobs: Option<usize>,
    /// Runs; each figure is the median over them [default: 3, --quick 1]
    #[arg(long)]
    runs: Option<usize>,
    /// Outstanding jobs in the pipelined phases
    #[arg(long, default_value_t = 1000)]
    window: usize,
    /// Jobs of the one-at-a-time round trip phase [default: 2000, --quick 200]
    #[arg(long)]
    single_jobs: Option<usize>,
    /// Jobs buffered in the router memory phase [default: 1000000, --quick 20000]
    #[arg(long)]
    memory_jobs: Option<usize>,
    /// Warm-up jobs before each measured phase [default: 1000, --quick 200]
    #[arg(long)]
    warmup_jobs: Option<usize>,
    /// emq-jobmanager --concurrency
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    /// emq-jobmanager --prefetch (auto, 0 = off, N) [default: the job
    /// manager's own, auto]
    #[arg(long, value_name = "auto|0|N")]
    prefetch: Option<String>,
    /// A short smoke run (2000 jobs, 1 run, 20000 buffered jobs)
    #[arg(long)]
    quick: bool,
    /// Also write the results as JSON here
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
    /// Where emq-router and emq-jobmanager are [default: this binary's directory]
    #[arg(long, value_name = "DIR")]
    bin_dir: Option<PathBuf>,
    /// RUST_LOG for the router and job manager [default: inherited]
    #[arg(long, value_name = "FILTER")]
    rust_log: Option<String>,
    /// Keep the children's logs in this directory
    #[arg(long, value_name = "DIR")]
    keep_logs: Option<PathBuf>,
    /// Give up on a phase when nothing arrives for this many seconds
    #[arg(long, default_value = "15", value_parser = parse_duration)]
    idle_timeout: Duration,
    /// Give up on a phase after this many seconds
    #[arg(long, default_value = "600", value_parser = parse_duration)]
    phase_timeout: Duration,
    /// Skip the raw zmq limit
    #[arg(long)]
    skip_raw: bool,
    /// Skip the raw zmq limit with READY credit flow (--concurrency slots)
    #[arg(long)]
    skip_raw_credit: bool,
    /// Skip emq in memory mode (--journal none)
    #[arg(long)]
    skip_memory_mode: bool,
    /// Skip emq with the durable journal
    #[arg(long)]
    skip_durable: bool,
    /// The PostgreSQL database of the PostgreSQL journal phase
    /// (postgresql://USER@HOST:PORT/DB). Default: a throwaway local server
    /// (initdb in a temporary directory, stopped at the end) when
    /// PostgreSQL is installed (/usr/lib/postgresql/*/bin or EMQ_PG_BIN)
    #[arg(long, value_name = "URL", env = "EMQ_BENCH_POSTGRES")]
    postgres: Option<String>,
    /// Skip emq with the journal on PostgreSQL
    #[arg(long)]
    skip_postgres: bool,
    /// Skip emq in memory mode with CURVE (encryption) on every socket
    #[arg(long)]
    skip_curve: bool,
    /// Skip the one-at-a-time round trip phases
    #[arg(long)]
    skip_single: bool,
    /// Skip the real router with the bench's ideal in-process worker
    #[arg(long)]
    skip_ideal_worker: bool,
    /// Skip the router memory phases (jobs buffered, no worker)
    #[arg(long)]
    skip_buffered: bool,
    /// Skip the router memory phase with the durable journal
    #[arg(long)]
    skip_buffered_durable: bool,
}

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

fn main() -> ExitCode {
    let a = Args::parse();
    let pick = |v: Option<usize>, normal: usize, quick: usize| {
        v.unwrap_or(if a.quick { quick } else { normal })
    };
    let runs = pick(a.runs, 3, 1).max(1);
    let bin_dir = a.bin_dir.clone().unwrap_or_else(|| {
        std::env::current_exe()
            .ok()
            .and_then(|p| p.parent().map(PathBuf::from))
            .unwrap_or_else(|| PathBuf::from("target/release"))
    });
    // The PostgreSQL phase's server: the one named, else a throwaway local
    // one (stopped when `_pg` drops, Ctrl-C included: the loop ends first).
    let mut _pg = None;
    let postgres = match a.postgres.clone().filter(|u| !u.trim().is_empty()) {
        Some(url) => Some(url),
        None if a.skip_postgres => None,
        None => match throwaway_postgres() {
            Ok(Some((cluster, url))) => {
                _pg = Some(cluster);
                Some(url)
            }
            Ok(None) => None,
            Err(e) => {
                eprintln!("emq-bench: cannot start a PostgreSQL server: {e}");
                None
            }
        },
    };
    let cfg = Config {
        jobs: pick(a.jobs, 100_000, 2000).max(1),
        window: a.window.max(1),
        single_jobs: if a.skip_single {
            0
        } else {
            pick(a.single_jobs, 2000, 200)
        },
        memory_jobs: pick(a.memory_jobs, 1_000_000, 20_000).max(1),
        concurrency: a.concurrency.max(1),
        prefetch: a.prefetch.clone(),
        warmup_jobs: pick(a.warmup_jobs, 1000, 200).max(1),
        router_bin: bin_dir.join("emq-router"),
        jobmanager_bin: bin_dir.join("emq-jobmanager"),
        rust_log: a.rust_log.clone(),
        keep_logs: a.keep_logs.clone(),
        idle_timeout: a.idle_timeout.max(Duration::from_secs(1)),
        phase_timeout: a.phase_timeout.max(Duration::from_secs(1)),
        postgres,
    };
    let stop: std::sync::Arc<AtomicBool> = match procs::install_signal_handler() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("emq-bench: {e}");
            return Exit::Internal.into();
        }
    };
    let m = machine();
    eprintln!(
        "emq-bench: {} run(s), {} jobs (window {}), {} single, {} buffered; binaries in {}; machine {}",
        runs,
        cfg.jobs,
        cfg.window,
        cfg.single_jobs,
        cfg.memory_jobs,
        bin_dir.display(),
        m
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
    if cfg!(debug_assertions) || bin_dir.components().any(|c| c.as_os_str() == "debug") {
        eprintln!("emq-bench: WARNING: not a release build; figures are not comparable");
    }

    let mut all = Vec::new();
    for run in 1..=runs {
        let step = |name: &str| eprintln!("emq-bench: run {run}/{runs}: {name}");
        let report_outcome = |name: &str, o: &dyn std::fmt::Debug| {
            let s = format!("{o:?}");
            let short: String = s.chars().take(400).collect();
            eprintln!("emq-bench: run {run}/{runs}: {name}: {short}");
        };
        let interrupted = || stop.load(std::sync::atomic::Ordering::Relaxed);
        let raw = if a.skip_raw || interrupted() {
            Outcome::Skipped
        } else {
            step("raw limit");
            let o = phases::raw(&cfg, None, &stop);
            report_outcome("raw limit", &brief(&o));
            o
        };
        let raw_credit = if a.skip_raw_credit || interrupted() {
            Outcome::Skipped
        } else {
            step("raw limit with READY credit");
            let o = phases::raw(&cfg, Some(cfg.concurrency), &stop);
            report_outcome("raw limit with READY credit", &brief(&o));
            o
        };
        let memory_mode = if a.skip_memory_mode || interrupted() {
            Outcome::Skipped
        } else {
            step("emq memory mode");
            let o = phases::emq(&cfg, phases::Journal::Memory, false, &stop);
            report_outcome("emq memory mode", &brief(&o));
            o
        };
        let curve = if a.skip_curve || interrupted() {
            Outcome::Skipped
        } else {
            step("emq memory mode, CURVE");
            let o = phases::emq(&cfg, phases::Journal::Memory, true, &stop);
            report_outcome("emq memory mode, CURVE", &brief(&o));
            o
        };
        let durable = if a.skip_durable || interrupted() {
            Outcome::Skipped
        } else {
            step("emq durable journal");
            let o = phases::emq(&cfg, phases::Journal::Sqlite, false, &stop);
            report_outcome("emq durable journal", &brief(&o));
            o
        };
        let postgres = if a.skip_postgres || interrupted() {
            Outcome::Skipped
        } else {
            step("emq PostgreSQL journal");
            let o = phases::emq(&cfg, phases::Journal::Postgres, false, &stop);
            report_outcome("emq PostgreSQL journal", &brief(&o));
            o
        };
        let ideal_worker = if a.skip_ideal_worker || interrupted() {
            Outcome::Skipped
        } else {
            step("emq-router + ideal in-process worker");
            let o = phases::emq_ideal_worker(&cfg, &stop);
            report_outcome("emq-router + ideal worker", &brief(&o));
            o
        };
        let buffered = if a.skip_buffered || interrupted() {
            Outcome::Skipped
        } else {
            step("router memory, jobs buffered");
            let o = phases::memory(&cfg, false, &stop);
            report_outcome("router memory", &o);
            o
        };
        let buffered_durable = if a.skip_buffered || a.skip_buffered_durable || interrupted() {
            Outcome::Skipped
        } else {
            step("router memory, jobs buffered, durable journal");
            let o = phases::memory(&cfg, true, &stop);
            report_outcome("router memory, durable", &o);
            o
        };
        all.push(RunFigures {
            raw,
            raw_credit,
            memory_mode,
            curve,
            durable,
            postgres,
            ideal_worker,
            buffered,
            buffered_durable,
        });
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            eprintln!("emq-bench: interrupted");
            return Exit::Interrupted.into();
        }
    }

    let rows = report::metrics(&all, cfg.memory_jobs, cfg.concurrency);
    println!();
    println!(
        "emq-bench: medians of {runs} run(s); {} jobs pipelined (window {}), {} one at a time, {} buffered",
        cfg.jobs, cfg.window, cfg.single_jobs, cfg.memory_jobs
    );
    print!("{}", report::table(&rows));

    let failures: Vec<String> = all
        .iter()
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
        .collect();
    for f in &failures {
        eprintln!("emq-bench: FAILED {f}");
    }

    if let Some(path) = &a.json {
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
                "quick": a.quick,
                "router_bin": cfg.router_bin.display().to_string(),
                "jobmanager_bin": cfg.jobmanager_bin.display().to_string(),
                "postgres": cfg.postgres.as_deref().map(redact_password),
                "job": "[\"call\", {\"handler\": \"noop\", \"args\": null}] on queue default, header reply-requested",
            },
            "metrics": report::metrics_json(&rows),
            "runs": all.iter().enumerate().map(|(i, r)| r.to_json(i + 1)).collect::<Vec<_>>(),
            "failures": failures,
        });
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            let _ = std::fs::create_dir_all(dir);
        }
        let text = serde_json::to_string_pretty(&doc).unwrap_or_default();
        match std::fs::write(path, text + "\n") {
            Ok(()) => eprintln!("emq-bench: JSON written to {}", path.display()),
            Err(e) => {
                eprintln!("emq-bench: cannot write {}: {e}", path.display());
                return Exit::Internal.into();
            }
        }
    }
    if failures.is_empty() {
        Exit::Ok.into()
    } else {
        Exit::Internal.into()
    }
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
            "{:.0}/s pipelined (p50 {:.0} us, p99 {:.0} us, acks {}, CPU us/job {}), single p50 {:.0} us p99 {:.0} us",
            p.pipelined.rate,
            p.pipelined.latency.map(|l| l.p50_us).unwrap_or(f64::NAN),
            p.pipelined.latency.map(|l| l.p99_us).unwrap_or(f64::NAN),
            p.pipelined.acks,
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
