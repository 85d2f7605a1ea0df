//! The command line as clap parses it, as close to what was typed as
//! possible; [`super::hiargs`] checks it into a [`super::Plan`].

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use emq_cli_support::parse_duration;

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
pub(crate) struct Cli {
    /// Jobs per pipelined phase [default: 100000, --quick 2000]
    #[arg(long)]
    pub(crate) jobs: Option<usize>,
    /// Runs; each figure is the median over them [default: 3, --quick 1]
    #[arg(long)]
    pub(crate) runs: Option<usize>,
    /// Outstanding jobs in the pipelined phases
    #[arg(long, default_value_t = 1000)]
    pub(crate) window: usize,
    /// Jobs of the one-at-a-time round trip phase [default: 2000, --quick 200]
    #[arg(long)]
    pub(crate) single_jobs: Option<usize>,
    /// Jobs buffered in the router memory phase [default: 1000000, --quick 20000]
    #[arg(long)]
    pub(crate) memory_jobs: Option<usize>,
    /// Warm-up jobs before each measured phase [default: 1000, --quick 200]
    #[arg(long)]
    pub(crate) warmup_jobs: Option<usize>,
    /// emq-jobmanager --concurrency
    #[arg(long, default_value_t = 8)]
    pub(crate) concurrency: usize,
    /// emq-jobmanager --prefetch (auto, 0 = off, N) [default: the job
    /// manager's own, auto]
    #[arg(long, value_name = "auto|0|N")]
    pub(crate) prefetch: Option<String>,
    /// Run only the flow-control phase (issue 27): the noisy neighbour (key A
    /// floods 100,000 jobs, key B one job every 10 ms: B's submit -> start
    /// p50/p99 with fair and without) and dispatch throughput with limits
    /// on and off
    #[arg(long)]
    pub(crate) noisy: bool,
    /// A short smoke run (2000 jobs, 1 run, 20000 buffered jobs)
    #[arg(long)]
    pub(crate) quick: bool,
    /// Also write the results as JSON here
    #[arg(long, value_name = "PATH")]
    pub(crate) json: Option<PathBuf>,
    /// Where emq-router and emq-jobmanager are [default: this binary's directory]
    #[arg(long, value_name = "DIR")]
    pub(crate) bin_dir: Option<PathBuf>,
    /// RUST_LOG for the router and job manager [default: inherited]
    #[arg(long, value_name = "FILTER")]
    pub(crate) rust_log: Option<String>,
    /// Keep the children's logs in this directory
    #[arg(long, value_name = "DIR")]
    pub(crate) keep_logs: Option<PathBuf>,
    /// Give up on a phase when nothing arrives for this many seconds
    #[arg(long, default_value = "15", value_parser = parse_duration)]
    pub(crate) idle_timeout: Duration,
    /// Give up on a phase after this many seconds
    #[arg(long, default_value = "600", value_parser = parse_duration)]
    pub(crate) phase_timeout: Duration,
    /// Skip the raw zmq limit
    #[arg(long)]
    pub(crate) skip_raw: bool,
    /// Skip the raw zmq limit with READY credit flow (--concurrency slots)
    #[arg(long)]
    pub(crate) skip_raw_credit: bool,
    /// Skip emq in memory mode (--journal none)
    #[arg(long)]
    pub(crate) skip_memory_mode: bool,
    /// Skip emq with the durable journal
    #[arg(long)]
    pub(crate) skip_durable: bool,
    /// The PostgreSQL database of the PostgreSQL journal phase
    /// (postgresql://USER@HOST:PORT/DB). Default: a throwaway local server
    /// (initdb in a temporary directory, stopped at the end) when
    /// PostgreSQL is installed (/usr/lib/postgresql/*/bin or EMQ_PG_BIN)
    #[arg(long, value_name = "URL", env = "EMQ_BENCH_POSTGRES")]
    pub(crate) postgres: Option<String>,
    /// Skip emq with the journal on PostgreSQL
    #[arg(long)]
    pub(crate) skip_postgres: bool,
    /// Skip emq in memory mode with CURVE (encryption) on every socket
    #[arg(long)]
    pub(crate) skip_curve: bool,
    /// Skip the one-at-a-time round trip phases
    #[arg(long)]
    pub(crate) skip_single: bool,
    /// Skip the real router with the bench's ideal in-process worker
    #[arg(long)]
    pub(crate) skip_ideal_worker: bool,
    /// Skip the router memory phases (jobs buffered, no worker)
    #[arg(long)]
    pub(crate) skip_buffered: bool,
    /// Skip the router memory phase with the durable journal
    #[arg(long)]
    pub(crate) skip_buffered_durable: bool,
}
