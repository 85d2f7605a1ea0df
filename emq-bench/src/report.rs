//! Medians over runs, targets, ratios to the raw limit; the table and JSON.

use serde_json::{json, Value};

use crate::phases::{Memory, Outcome, PipeAndSingle};
use crate::stats::median;

/// Everything one run measured.
#[derive(Debug, Clone)]
pub struct RunFigures {
    pub raw: Outcome<PipeAndSingle>,
    /// The raw limit under READY credit flow with the job manager's slots.
    pub raw_credit: Outcome<PipeAndSingle>,
    pub memory_mode: Outcome<PipeAndSingle>,
    /// Memory mode with CURVE on every socket.
    pub curve: Outcome<PipeAndSingle>,
    pub durable: Outcome<PipeAndSingle>,
    /// The journal on PostgreSQL (`--postgres`).
    pub postgres: Outcome<PipeAndSingle>,
    /// The real router with the bench's ideal worker (no job manager).
    pub ideal_worker: Outcome<PipeAndSingle>,
    pub buffered: Outcome<Memory>,
    /// The same with the durable journal.
    pub buffered_durable: Outcome<Memory>,
}

impl RunFigures {
    pub fn to_json(&self, run: usize) -> Value {
        json!({
            "run": run,
            "raw": self.raw.status_json(PipeAndSingle::to_json),
            "raw_ready_credit": self.raw_credit.status_json(PipeAndSingle::to_json),
            "emq_memory": self.memory_mode.status_json(PipeAndSingle::to_json),
            "emq_memory_curve": self.curve.status_json(PipeAndSingle::to_json),
            "emq_durable": self.durable.status_json(PipeAndSingle::to_json),
            "emq_postgres": self.postgres.status_json(PipeAndSingle::to_json),
            "emq_router_ideal_worker": self.ideal_worker.status_json(PipeAndSingle::to_json),
            "router_buffered": self.buffered.status_json(Memory::to_json),
            "router_buffered_durable": self.buffered_durable.status_json(Memory::to_json),
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Unit {
    PerSec,
    Micros,
    Megabytes,
    Ratio,
}

impl Unit {
    fn name(self) -> &'static str {
        match self {
            Unit::PerSec => "per_s",
            Unit::Micros => "us",
            Unit::Megabytes => "MB",
            Unit::Ratio => "ratio",
        }
    }

    pub fn format(self, v: f64) -> String {
        match self {
            Unit::PerSec => format!("{}/s", thousands(v.round() as u64)),
            Unit::Micros => {
                if v >= 10_000.0 {
                    format!("{:.1} ms", v / 1000.0)
                } else {
                    format!("{v:.0} us")
                }
            }
            Unit::Megabytes => format!("{v:.1} MB"),
            Unit::Ratio => format!("{:.1} %", v * 100.0),
        }
    }
}

/// `1234567` → `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits: Vec<char> = n.to_string().chars().rev().collect();
    let groups: Vec<String> = digits
        .chunks(3)
        .map(|c| c.iter().rev().collect::<String>())
        .collect();
    groups.into_iter().rev().collect::<Vec<_>>().join(",")
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Target {
    AtLeast(f64),
    AtMost(f64),
    Below(f64),
}

impl Target {
    pub fn met(self, v: f64) -> bool {
        match self {
            Target::AtLeast(t) => v >= t,
            Target::AtMost(t) => v <= t,
            Target::Below(t) => v < t,
        }
    }

    fn describe(self, unit: Unit) -> String {
        match self {
            Target::AtLeast(t) => format!(">= {}", unit.format(t)),
            Target::AtMost(t) => format!("<= {}", unit.format(t)),
            Target::Below(t) => format!("< {}", unit.format(t)),
        }
    }

    fn to_json(self) -> Value {
        let (op, v) = match self {
            Target::AtLeast(t) => (">=", t),
            Target::AtMost(t) => ("<=", t),
            Target::Below(t) => ("<", t),
        };
        json!({ "op": op, "value": v })
    }
}

/// One row of the report.
#[derive(Debug, Clone)]
pub struct Metric {
    pub key: &'static str,
    pub label: String,
    pub unit: Unit,
    /// One value per run that produced it.
    pub samples: Vec<f64>,
    /// Median of the samples.
    pub value: Option<f64>,
    pub target: Option<Target>,
    pub ratio_to_raw: Option<f64>,
    /// Why there is no value (or why some runs gave none).
    pub note: Option<String>,
}

impl Metric {
    pub fn met(&self) -> Option<bool> {
        Some(self.target?.met(self.value?))
    }
}

/// Why no run produced a value: the first non-Done outcome's reason.
fn why_missing<T>(outcomes: &[&Outcome<T>]) -> Option<String> {
    let mut failed = Vec::new();
    for o in outcomes {
        match o {
            Outcome::Done(_) => {}
            Outcome::Unavailable(w) => return Some(format!("unavailable: {w}")),
            Outcome::Failed(w) => failed.push(w.lines().next().unwrap_or("").to_string()),
            Outcome::Skipped => return Some("skipped".into()),
        }
    }
    if failed.is_empty() {
        None
    } else {
        Some(format!(
            "error in {} of {} runs: {}",
            failed.len(),
            outcomes.len(),
            failed[0]
        ))
    }
}

fn metric<T>(
    key: &'static str,
    label: impl Into<String>,
    unit: Unit,
    target: Option<Target>,
    outcomes: Vec<&Outcome<T>>,
    get: impl Fn(&T) -> Option<f64>,
) -> Metric {
    let samples: Vec<f64> = outcomes
        .iter()
        .filter_map(|o| o.done())
        .filter_map(&get)
        .collect();
    Metric {
        key,
        label: label.into(),
        unit,
        value: median(&samples),
        samples,
        target,
        ratio_to_raw: None,
        note: why_missing(&outcomes),
    }
}

const MB: f64 = 1_000_000.0;

/// CPU microseconds per job of process `name` in the pipelined phase.
fn cpu_of(p: &PipeAndSingle, name: &str) -> Option<f64> {
    p.pipelined
        .cpu_us_per_job
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| *v)
}

/// The report rows from all runs: medians, targets, ratios.
pub fn metrics(runs: &[RunFigures], memory_jobs: usize, slots: usize) -> Vec<Metric> {
    let raw: Vec<_> = runs.iter().map(|r| &r.raw).collect();
    let raw_credit: Vec<_> = runs.iter().map(|r| &r.raw_credit).collect();
    let mem: Vec<_> = runs.iter().map(|r| &r.memory_mode).collect();
    let curve: Vec<_> = runs.iter().map(|r| &r.curve).collect();
    let dur: Vec<_> = runs.iter().map(|r| &r.durable).collect();
    let pg: Vec<_> = runs.iter().map(|r| &r.postgres).collect();
    let buf: Vec<_> = runs.iter().map(|r| &r.buffered).collect();
    let buf_dur: Vec<_> = runs.iter().map(|r| &r.buffered_durable).collect();
    let ideal: Vec<_> = runs.iter().map(|r| &r.ideal_worker).collect();
    let rate = |p: &PipeAndSingle| Some(p.pipelined.rate);
    let p50 = |p: &PipeAndSingle| p.pipelined.latency.map(|l| l.p50_us);
    let p99 = |p: &PipeAndSingle| p.pipelined.latency.map(|l| l.p99_us);
    let s50 = |p: &PipeAndSingle| p.single.latency.map(|l| l.p50_us);
    let s99 = |p: &PipeAndSingle| p.single.latency.map(|l| l.p99_us);
    use Unit::*;

    let raw_rate = metric(
        "raw.rate",
        "raw limit: pipelined round trips",
        PerSec,
        None,
        raw.clone(),
        rate,
    );
    let raw_p50 = metric(
        "raw.p50",
        "raw limit: pipelined latency p50",
        Micros,
        None,
        raw.clone(),
        p50,
    );
    let raw_p99 = metric(
        "raw.p99",
        "raw limit: pipelined latency p99",
        Micros,
        None,
        raw.clone(),
        p99,
    );
    let raw_s50 = metric(
        "raw.single.p50",
        "raw limit: single round trip p50",
        Micros,
        None,
        raw.clone(),
        s50,
    );
    let credit_rate = metric(
        "raw_credit.rate",
        format!("raw limit with READY credit ({slots} slots): round trips"),
        PerSec,
        None,
        raw_credit.clone(),
        rate,
    );
    let credit_p50 = metric(
        "raw_credit.p50",
        format!("raw limit with READY credit ({slots} slots): latency p50"),
        Micros,
        None,
        raw_credit,
        p50,
    );
    let raw_for_cpu = raw.clone();
    let raw_s99 = metric(
        "raw.single.p99",
        "raw limit: single round trip p99",
        Micros,
        None,
        raw.clone(),
        s99,
    );

    let mut rows = vec![
        metric(
            "emq.memory.rate",
            "emq memory mode: jobs",
            PerSec,
            Some(Target::AtLeast(100_000.0)),
            mem.clone(),
            rate,
        ),
        metric(
            "emq.memory.p50",
            "emq memory mode: submit->result p50",
            Micros,
            None,
            mem.clone(),
            p50,
        ),
        metric(
            "emq.memory.p99",
            "emq memory mode: submit->result p99",
            Micros,
            None,
            mem.clone(),
            p99,
        ),
        metric(
            "emq.curve.rate",
            "emq memory mode, CURVE on every socket: jobs",
            PerSec,
            None,
            curve.clone(),
            rate,
        ),
        metric(
            "emq.curve.p50",
            "emq memory mode, CURVE: submit->result p50",
            Micros,
            None,
            curve.clone(),
            p50,
        ),
        metric(
            "emq.curve.single.p50",
            "single job round trip p50 (memory, CURVE)",
            Micros,
            None,
            curve.clone(),
            s50,
        ),
        metric(
            "emq.curve.router_cpu",
            "router CPU per job (memory mode, CURVE)",
            Micros,
            None,
            curve.clone(),
            |p: &PipeAndSingle| cpu_of(p, "emq-router"),
        ),
        metric(
            "emq.curve.jobmanager_cpu",
            "jobmanager CPU per job (memory mode, CURVE)",
            Micros,
            None,
            curve.clone(),
            |p: &PipeAndSingle| cpu_of(p, "emq-jobmanager"),
        ),
        metric(
            "emq.durable.rate",
            "emq durable journal: jobs",
            PerSec,
            Some(Target::AtLeast(50_000.0)),
            dur.clone(),
            rate,
        ),
        metric(
            "emq.durable.p50",
            "emq durable journal: submit->result p50",
            Micros,
            None,
            dur.clone(),
            p50,
        ),
        metric(
            "emq.durable.p99",
            "emq durable journal: submit->result p99",
            Micros,
            None,
            dur.clone(),
            p99,
        ),
        metric(
            "emq.memory.single.p50",
            "single job round trip p50 (memory)",
            Micros,
            None,
            mem.clone(),
            s50,
        ),
        metric(
            "emq.memory.single.p99",
            "single job round trip p99 (memory)",
            Micros,
            Some(Target::Below(1000.0)),
            mem.clone(),
            s99,
        ),
        metric(
            "emq.durable.single.p50",
            "single job round trip p50 (durable)",
            Micros,
            None,
            dur.clone(),
            s50,
        ),
        metric(
            "emq.durable.single.p99",
            "single job round trip p99 (durable)",
            Micros,
            None,
            dur.clone(),
            s99,
        ),
        metric(
            "emq.postgres.rate",
            "emq PostgreSQL journal: jobs",
            PerSec,
            Some(Target::AtLeast(20_000.0)),
            pg.clone(),
            rate,
        ),
        metric(
            "emq.postgres.p50",
            "emq PostgreSQL journal: submit->result p50",
            Micros,
            None,
            pg.clone(),
            p50,
        ),
        metric(
            "emq.postgres.p99",
            "emq PostgreSQL journal: submit->result p99",
            Micros,
            None,
            pg.clone(),
            p99,
        ),
        metric(
            "emq.postgres.single.p50",
            "single job round trip p50 (PostgreSQL)",
            Micros,
            None,
            pg.clone(),
            s50,
        ),
        metric(
            "emq.postgres.single.p99",
            "single job round trip p99 (PostgreSQL)",
            Micros,
            None,
            pg.clone(),
            s99,
        ),
        metric(
            "emq.postgres.router_cpu",
            "router CPU per job (PostgreSQL)",
            Micros,
            None,
            pg.clone(),
            |p: &PipeAndSingle| cpu_of(p, "emq-router"),
        ),
        metric(
            "emq.postgres.server_cpu",
            "PostgreSQL server CPU per job",
            Micros,
            None,
            pg,
            |p: &PipeAndSingle| cpu_of(p, "postgres"),
        ),
        metric(
            "ideal.rate",
            "emq-router + ideal worker (no jobmanager): jobs",
            PerSec,
            None,
            ideal.clone(),
            rate,
        ),
        metric(
            "ideal.single.p99",
            "single round trip p99 (router + ideal worker)",
            Micros,
            None,
            ideal.clone(),
            s99,
        ),
        metric(
            "ideal.router_cpu",
            "router CPU per job (router + ideal worker)",
            Micros,
            None,
            ideal,
            |p: &PipeAndSingle| cpu_of(p, "emq-router"),
        ),
        metric(
            "emq.memory.router_cpu",
            "router CPU per job (memory mode)",
            Micros,
            None,
            mem.clone(),
            |p: &PipeAndSingle| cpu_of(p, "emq-router"),
        ),
        metric(
            "emq.memory.jobmanager_cpu",
            "jobmanager CPU per job (memory mode)",
            Micros,
            None,
            mem.clone(),
            |p: &PipeAndSingle| cpu_of(p, "emq-jobmanager"),
        ),
        metric(
            "emq.memory.client_cpu",
            "client (emq-bench) CPU per job (memory mode)",
            Micros,
            None,
            mem.clone(),
            |p: &PipeAndSingle| cpu_of(p, "bench"),
        ),
        metric(
            "emq.memory.emq_cpu",
            "router + jobmanager CPU per job (memory mode)",
            Micros,
            None,
            mem.clone(),
            |p: &PipeAndSingle| Some(cpu_of(p, "emq-router")? + cpu_of(p, "emq-jobmanager")?),
        ),
        metric(
            "emq.durable.router_cpu",
            "router CPU per job (durable)",
            Micros,
            None,
            dur.clone(),
            |p: &PipeAndSingle| cpu_of(p, "emq-router"),
        ),
        metric(
            "emq.durable.jobmanager_cpu",
            "jobmanager CPU per job (durable)",
            Micros,
            None,
            dur.clone(),
            |p: &PipeAndSingle| cpu_of(p, "emq-jobmanager"),
        ),
        metric(
            "raw.cpu",
            "raw limit CPU per round trip (all 3 roles)",
            Micros,
            None,
            raw_for_cpu,
            |p: &PipeAndSingle| cpu_of(p, "bench"),
        ),
        metric(
            "router.buffered.vmhwm",
            format!(
                "router peak RSS, {} jobs buffered",
                thousands(memory_jobs as u64)
            ),
            Megabytes,
            // the target is for a million jobs
            (memory_jobs == 1_000_000).then_some(Target::AtMost(200.0)),
            buf.clone(),
            |m: &Memory| m.vmhwm_bytes.map(|b| b as f64 / MB),
        ),
        metric(
            "router.buffered.baseline",
            "router RSS before buffering",
            Megabytes,
            None,
            buf.clone(),
            |m: &Memory| m.baseline_rss_bytes.map(|b| b as f64 / MB),
        ),
        metric(
            "router.buffered.submit_rate",
            "router accept rate, no worker (acks)",
            PerSec,
            None,
            buf,
            |m: &Memory| Some(m.submit_rate),
        ),
        metric(
            "router.buffered_durable.vmhwm",
            format!(
                "router peak RSS, {} jobs buffered, durable",
                thousands(memory_jobs as u64)
            ),
            Megabytes,
            None,
            buf_dur.clone(),
            |m: &Memory| m.vmhwm_bytes.map(|b| b as f64 / MB),
        ),
        metric(
            "router.buffered_durable.submit_rate",
            "router accept rate, no worker, durable (acks)",
            PerSec,
            None,
            buf_dur,
            |m: &Memory| Some(m.submit_rate),
        ),
    ];
    // ratios to the raw limit (of the medians)
    let ratio = |v: Option<f64>, base: Option<f64>| match (v, base) {
        (Some(v), Some(b)) if b > 0.0 => Some(v / b),
        _ => None,
    };
    for r in rows.iter_mut() {
        let base = match r.key {
            "emq.memory.rate" | "emq.durable.rate" | "emq.postgres.rate" | "emq.curve.rate" => {
                raw_rate.value
            }
            "emq.memory.p50" | "emq.durable.p50" | "emq.postgres.p50" | "emq.curve.p50" => {
                raw_p50.value
            }
            "emq.memory.p99" | "emq.durable.p99" | "emq.postgres.p99" | "emq.curve.p99" => {
                raw_p99.value
            }
            "emq.memory.single.p50"
            | "emq.durable.single.p50"
            | "emq.postgres.single.p50"
            | "emq.curve.single.p50" => raw_s50.value,
            "emq.memory.single.p99"
            | "emq.durable.single.p99"
            | "emq.postgres.single.p99"
            | "emq.curve.single.p99"
            | "ideal.single.p99" => raw_s99.value,
            "ideal.rate" => raw_rate.value,
            _ => None,
        };
        r.ratio_to_raw = ratio(r.value, base);
    }
    let find = |key: &str| rows.iter().position(|m| m.key == key).unwrap_or(0);
    let (mem_i, dur_i) = (find("emq.memory.rate"), find("emq.durable.rate"));
    // emq / raw of the same run, then the median over the runs: on a
    // shared machine the load moves between runs, and a ratio of two
    // medians could pair a raw limit and an emq figure of different runs.
    let same_run = |emq: &[&Outcome<PipeAndSingle>]| {
        let per_run: Vec<f64> = raw
            .iter()
            .zip(emq)
            .filter_map(|(r, e)| ratio(rate(e.done()?), rate(r.done()?)))
            .collect();
        median(&per_run)
    };
    let mem_ratio = same_run(&mem);
    let dur_ratio = same_run(&dur);
    let ratio_row = |key, label: &str, v: Option<f64>, target, note: Option<String>| Metric {
        key,
        label: label.to_string(),
        unit: Ratio,
        samples: v.into_iter().collect(),
        value: v,
        target,
        ratio_to_raw: v,
        note: if v.is_none() { note } else { None },
    };
    let ratio_note = |m: &Metric| m.note.clone().or(raw_rate.note.clone());
    let credit_note = |m: &Metric| m.note.clone().or(credit_rate.note.clone());
    let mr = ratio_row(
        "ratio.memory",
        "ratio emq memory / raw limit",
        mem_ratio,
        Some(Target::AtLeast(0.5)),
        ratio_note(&rows[mem_i]),
    );
    let dr = ratio_row(
        "ratio.durable",
        "ratio emq durable / raw limit",
        dur_ratio,
        None,
        ratio_note(&rows[dur_i]),
    );
    let mcr = ratio_row(
        "ratio.memory_credit",
        &format!("ratio emq memory / raw limit with READY credit ({slots} slots)"),
        ratio(rows[mem_i].value, credit_rate.value),
        None,
        credit_note(&rows[mem_i]),
    );
    let curve_i = find("emq.curve.rate");
    let cr = ratio_row(
        "ratio.curve_memory",
        "ratio emq memory with CURVE / without",
        ratio(rows[curve_i].value, rows[mem_i].value),
        None,
        rows[curve_i].note.clone().or(rows[mem_i].note.clone()),
    );
    let dcr = ratio_row(
        "ratio.durable_credit",
        &format!("ratio emq durable / raw limit with READY credit ({slots} slots)"),
        ratio(rows[dur_i].value, credit_rate.value),
        None,
        credit_note(&rows[dur_i]),
    );
    rows[mem_i].ratio_to_raw = mem_ratio;
    rows[dur_i].ratio_to_raw = dur_ratio;
    let mut raw_rate = raw_rate;
    raw_rate.ratio_to_raw = raw_rate.value.map(|_| 1.0);
    let mut credit_rate = credit_rate;
    credit_rate.ratio_to_raw = ratio(credit_rate.value, raw_rate.value);
    let mut credit_p50 = credit_p50;
    credit_p50.ratio_to_raw = ratio(credit_p50.value, raw_p50.value);
    let mut out = vec![
        raw_rate,
        raw_p50,
        raw_p99,
        raw_s50,
        raw_s99,
        credit_rate,
        credit_p50,
    ];
    out.append(&mut rows);
    out.extend([mr, dr, mcr, dcr, cr]);
    out
}

/// The table: metric, value, target, ratio-to-raw.
pub fn table(rows: &[Metric]) -> String {
    let cells: Vec<[String; 4]> = rows
        .iter()
        .map(|m| {
            let value = match (m.value, &m.note) {
                (Some(v), _) => m.unit.format(v),
                (None, Some(n)) => n.clone(),
                (None, None) => "-".into(),
            };
            let target = match (m.target, m.met()) {
                (Some(t), Some(true)) => format!("{} (met)", t.describe(m.unit)),
                (Some(t), Some(false)) => format!("{} (MISSED)", t.describe(m.unit)),
                (Some(t), None) => t.describe(m.unit),
                (None, _) => "-".into(),
            };
            let ratio = m
                .ratio_to_raw
                .map(|r| format!("{r:.2}"))
                .unwrap_or_else(|| "-".into());
            [m.label.clone(), value, target, ratio]
        })
        .collect();
    let head = ["metric", "value", "target", "ratio-to-raw"].map(String::from);
    // long notes (errors) are cut in the value column; JSON has them whole
    const MAX_VALUE: usize = 60;
    let mut w = [0usize; 4];
    for row in std::iter::once(&head).chain(cells.iter()) {
        for (i, c) in row.iter().enumerate() {
            let len = c.chars().count();
            w[i] = w[i].max(if i == 1 { len.min(MAX_VALUE) } else { len });
        }
    }
    let mut out = String::new();
    let line = |row: &[String; 4], out: &mut String| {
        let mut parts = Vec::new();
        for (i, c) in row.iter().enumerate() {
            let mut c: String = c
                .chars()
                .take(if i == 1 { MAX_VALUE } else { usize::MAX })
                .collect();
            if i == 1 && row[1].chars().count() > MAX_VALUE {
                c.pop();
                c.push('~');
            }
            parts.push(format!("{c:<width$}", width = w[i]));
        }
        out.push_str(parts.join(" | ").trim_end());
        out.push('\n');
    };
    line(&head, &mut out);
    out.push_str(
        &w.iter()
            .map(|n| "-".repeat(*n))
            .collect::<Vec<_>>()
            .join("-|-"),
    );
    out.push('\n');
    for c in &cells {
        line(c, &mut out);
    }
    out
}

pub fn metrics_json(rows: &[Metric]) -> Value {
    Value::Array(
        rows.iter()
            .map(|m| {
                json!({
                    "key": m.key,
                    "label": m.label,
                    "unit": m.unit.name(),
                    "value": m.value,
                    "samples": m.samples,
                    "target": m.target.map(Target::to_json),
                    "met": m.met(),
                    "ratio_to_raw": m.ratio_to_raw,
                    "note": m.note,
                })
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::phases::Figures;
    use crate::stats::Latency;

    fn pipe(rate: f64, p99: f64) -> PipeAndSingle {
        let f = Figures {
            rate,
            latency: Some(Latency {
                p50_us: p99 / 2.0,
                p99_us: p99,
                max_us: p99,
            }),
            ..Figures::default()
        };
        PipeAndSingle {
            pipelined: f.clone(),
            single: f,
            router_hwm_bytes: None,
        }
    }

    #[test]
    fn medians_targets_and_ratios() {
        let run = |raw: f64, mem: f64| RunFigures {
            raw: Outcome::Done(pipe(raw, 100.0)),
            raw_credit: Outcome::Done(pipe(raw / 4.0, 400.0)),
            memory_mode: Outcome::Done(pipe(mem, 900.0)),
            curve: Outcome::Done(pipe(mem / 2.0, 1800.0)),
            durable: Outcome::Unavailable("no --journal".into()),
            postgres: Outcome::Done(pipe(25_000.0, 2000.0)),
            ideal_worker: Outcome::Skipped,
            buffered: Outcome::Failed("boom\nmore".into()),
            buffered_durable: Outcome::Skipped,
        };
        let runs = vec![
            run(200_000.0, 90_000.0),
            run(100_000.0, 120_000.0),
            run(300_000.0, 110_000.0),
        ];
        let rows = metrics(&runs, 1_000_000, 8);
        let get = |k: &str| rows.iter().find(|m| m.key == k).unwrap();
        assert_eq!(get("raw.rate").value, Some(200_000.0));
        let m = get("emq.memory.rate");
        assert_eq!(m.value, Some(110_000.0));
        assert_eq!(m.met(), Some(true));
        // emq / raw per run (0.45, 1.2, 0.367), then the median: never
        // the ratio of the two medians (0.55), which pairs runs apart.
        assert_eq!(m.ratio_to_raw, Some(0.45));
        assert_eq!(get("ratio.memory").value, Some(0.45));
        assert_eq!(get("ratio.memory").met(), Some(false));
        assert_eq!(get("emq.postgres.rate").value, Some(25_000.0));
        assert_eq!(get("emq.postgres.rate").met(), Some(true));
        assert_eq!(get("raw_credit.rate").value, Some(50_000.0));
        assert_eq!(get("raw_credit.rate").ratio_to_raw, Some(0.25));
        assert!(get("raw_credit.rate").label.contains("8 slots"));
        assert_eq!(get("ratio.memory_credit").value, Some(2.2));
        assert_eq!(
            get("ratio.durable_credit").note.as_deref(),
            Some("unavailable: no --journal")
        );
        assert_eq!(get("emq.curve.rate").value, Some(55_000.0));
        assert_eq!(get("ratio.curve_memory").value, Some(0.5));
        assert_eq!(get("emq.memory.single.p99").met(), Some(true));
        assert_eq!(get("emq.memory.single.p99").ratio_to_raw, Some(9.0));
        let d = get("emq.durable.rate");
        assert_eq!(d.value, None);
        assert_eq!(d.met(), None);
        assert_eq!(d.note.as_deref(), Some("unavailable: no --journal"));
        assert_eq!(
            get("ratio.durable").note.as_deref(),
            Some("unavailable: no --journal")
        );
        let b = get("router.buffered.vmhwm");
        assert_eq!(b.note.as_deref(), Some("error in 3 of 3 runs: boom"));
        let t = table(&rows);
        assert!(t.starts_with("metric"), "{t}");
        assert!(t.contains("110,000/s"), "{t}");
        assert!(t.contains(">= 100,000/s (met)"), "{t}");
        assert!(t.contains("unavailable: no --journal"), "{t}");
        let j = metrics_json(&rows);
        assert_eq!(j[0]["key"], "raw.rate");
        assert_eq!(j[0]["samples"].as_array().unwrap().len(), 3);
    }

    #[test]
    fn number_formatting() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(Unit::Micros.format(412.4), "412 us");
        assert_eq!(Unit::Micros.format(12_345.0), "12.3 ms");
        assert_eq!(Unit::Ratio.format(0.612), "61.2 %");
        assert!(Target::Below(1000.0).met(999.0) && !Target::Below(1000.0).met(1000.0));
        assert!(Target::AtMost(200.0).met(200.0));
    }
}
