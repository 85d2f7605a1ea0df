//! The checked plan: [`Cli`] with its `--quick` and defaults applied,
//! turned into what emq-bench will run ([`Plan`]).

use std::path::PathBuf;
use std::time::Duration;

use emq_bench::phases::Config;

use super::lowargs::Cli;

/// Which phases to skip.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Skips {
    pub(crate) raw: bool,
    pub(crate) raw_credit: bool,
    pub(crate) memory_mode: bool,
    pub(crate) curve: bool,
    pub(crate) durable: bool,
    pub(crate) postgres: bool,
    pub(crate) ideal_worker: bool,
    pub(crate) buffered: bool,
    pub(crate) buffered_durable: bool,
}

/// What emq-bench will run, checked.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub(crate) runs: usize,
    pub(crate) quick: bool,
    /// Where emq-router and emq-jobmanager are.
    pub(crate) bin_dir: PathBuf,
    /// The phases' configuration; its `postgres` is the `--postgres` URL
    /// (`run` starts a throwaway server when there is none).
    pub(crate) cfg: Config,
    pub(crate) skip: Skips,
    /// `--json`: where to write the results.
    pub(crate) json: Option<PathBuf>,
    /// `--noisy`: only the flow-control phase.
    pub(crate) noisy: bool,
}

impl Cli {
    /// Apply `--quick` and the defaults.
    pub(crate) fn plan(&self) -> Plan {
        let pick = |v: Option<usize>, normal: usize, quick: usize| {
            v.unwrap_or(if self.quick { quick } else { normal })
        };
        let bin_dir = self.bin_dir.clone().unwrap_or_else(|| {
            std::env::current_exe()
                .ok()
                .and_then(|p| p.parent().map(PathBuf::from))
                .unwrap_or_else(|| PathBuf::from("target/release"))
        });
        let cfg = Config {
            jobs: pick(self.jobs, 100_000, 2000).max(1),
            window: self.window.max(1),
            single_jobs: if self.skip_single {
                0
            } else {
                pick(self.single_jobs, 2000, 200)
            },
            memory_jobs: pick(self.memory_jobs, 1_000_000, 20_000).max(1),
            concurrency: self.concurrency.max(1),
            prefetch: self.prefetch.clone(),
            warmup_jobs: pick(self.warmup_jobs, 1000, 200).max(1),
            router_bin: bin_dir.join("emq-router"),
            jobmanager_bin: bin_dir.join("emq-jobmanager"),
            rust_log: self.rust_log.clone(),
            keep_logs: self.keep_logs.clone(),
            idle_timeout: self.idle_timeout.max(Duration::from_secs(1)),
            phase_timeout: self.phase_timeout.max(Duration::from_secs(1)),
            postgres: self.postgres.clone().filter(|u| !u.trim().is_empty()),
        };
        Plan {
            noisy: self.noisy,
            runs: pick(self.runs, 3, 1).max(1),
            quick: self.quick,
            bin_dir,
            cfg,
            skip: Skips {
                raw: self.skip_raw,
                raw_credit: self.skip_raw_credit,
                memory_mode: self.skip_memory_mode,
                curve: self.skip_curve,
                durable: self.skip_durable,
                postgres: self.skip_postgres,
                ideal_worker: self.skip_ideal_worker,
                buffered: self.skip_buffered,
                buffered_durable: self.skip_buffered || self.skip_buffered_durable,
            },
            json: self.json.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    fn plan(args: &[&str]) -> Plan {
        Cli::try_parse_from(std::iter::once("emq-bench").chain(args.iter().copied()))
            .unwrap()
            .plan()
    }

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn quick_and_flags_pick_the_sizes() {
        let p = plan(&[]);
        assert_eq!(
            (p.runs, p.cfg.jobs, p.cfg.memory_jobs),
            (3, 100_000, 1_000_000)
        );
        assert_eq!(p.cfg.idle_timeout, Duration::from_secs(15));
        let p = plan(&[
            "--quick",
            "--jobs",
            "7",
            "--idle-timeout",
            "0",
            "--skip-buffered",
        ]);
        assert_eq!((p.runs, p.cfg.jobs, p.cfg.single_jobs), (1, 7, 200));
        assert_eq!(
            p.cfg.idle_timeout,
            Duration::from_secs(1),
            "at least a second"
        );
        assert!(p.skip.buffered && p.skip.buffered_durable && !p.skip.raw);
        let p = plan(&["--skip-single", "--postgres", " ", "--phase-timeout", "2m"]);
        assert_eq!(p.cfg.single_jobs, 0);
        assert_eq!(p.cfg.postgres, None);
        assert_eq!(p.cfg.phase_timeout, Duration::from_secs(120));
    }
}
