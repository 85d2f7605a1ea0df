//! Each queue's numbers over the last minutes, for the queues page's
//! small charts and a queue's own page (as Sidekiq Web and Flower show
//! them): the sampler of `history.rs` asks the router for `queues` with
//! every STATUS, and this keeps, per queue, the last `keep` samples (the
//! sampler's ten minutes) of
//!
//! - its counters since the router started — accepted (submitted),
//!   started (deliveries to a worker), done, failed, dead-lettered — from
//!   whose differences the page draws rates;
//! - its depth: waiting (buffered, plus waiting for a retry or a delay)
//!   and running (in flight);
//! - the run time p50 and p95, in microseconds, of the deliveries that
//!   ended in the sample's period: from the difference of the router's
//!   per-queue run-time histogram (`queues`' `run_time`, fixed buckets)
//!   since the sample before, interpolated inside a bucket as Prometheus'
//!   `histogram_quantile` does; none when nothing ended.
//!
//! Why here and not in the router: the router already keeps exact
//! counters and a histogram per queue (one definition with `/metrics`);
//! differences of them are exact rates, and the router core keeps no
//! time series. Bounded memory: at most [`MAX_QUEUES`] queues (the first
//! by name; a queue missing from an answer is forgotten) × `keep` samples
//! × one [`Row`] (≈ 90 bytes): about 1.7 MB at worst.

use std::collections::{BTreeMap, VecDeque};

use serde_json::{json, Value};

/// Queues whose history is kept, at most.
pub const MAX_QUEUES: usize = 64;

/// Names of a sample's counter columns after its unix-ms time; then come
/// `run_p50_us` and `run_p95_us` (null when no run ended in the period).
pub const FIELDS: [&str; 7] = [
    "accepted",
    "started",
    "done",
    "failed",
    "dead_lettered",
    "waiting",
    "running",
];

/// One sample of one queue.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Row {
    at: u64,
    counts: [u64; 7],
    p50_us: Option<f64>,
    p95_us: Option<f64>,
}

/// A queue's samples and the run-time histogram of its last one.
#[derive(Debug, Default)]
struct Series {
    rows: VecDeque<Row>,
    /// `(count, counts per bucket)` of the last sample's `run_time`.
    last_hist: Option<(u64, Vec<u64>)>,
}

/// Every queue's samples.
#[derive(Debug, Default)]
pub(crate) struct QueueHistory {
    queues: BTreeMap<String, Series>,
}

fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or(0)
}

/// The `q` quantile (0..1) of a histogram: `bounds[i]` is bucket `i`'s
/// upper bound, `counts[i]` its observations, `total` all of them (those
/// above the last bound too). Linear inside a bucket (from the bound
/// below, 0 for the first); the last bound when it falls above it.
pub(crate) fn quantile(q: f64, bounds: &[f64], counts: &[u64], total: u64) -> Option<f64> {
    if total == 0 {
        return None;
    }
    let rank = q * total as f64;
    let mut below = 0.0;
    for (i, (&bound, &n)) in bounds.iter().zip(counts).enumerate() {
        let n = n as f64;
        if n > 0.0 && below + n >= rank {
            let lower = if i == 0 { 0.0 } else { bounds[i - 1] };
            return Some(lower + (bound - lower) * ((rank - below) / n).clamp(0.0, 1.0));
        }
        below += n;
    }
    bounds.last().copied()
}

impl QueueHistory {
    /// Record one `queues` answer taken at `unix_ms`, keeping the last
    /// `keep` samples of each queue.
    pub(crate) fn record(&mut self, unix_ms: u64, answer: &Value, keep: usize) {
        let Some(list) = answer["queues"].as_array() else {
            return;
        };
        let mut seen: Vec<&str> = Vec::new();
        for q in list.iter() {
            let Some(name) = q["name"].as_str() else {
                continue;
            };
            if !self.queues.contains_key(name) && self.queues.len() >= MAX_QUEUES {
                continue;
            }
            seen.push(name);
            let series = self.queues.entry(name.to_string()).or_default();
            let h = &q["run_time"];
            let bounds: Vec<f64> = h["bounds_us"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_f64).collect())
                .unwrap_or_default();
            let counts: Vec<u64> = h["counts"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_u64).collect())
                .unwrap_or_default();
            let total = u(h, "count");
            // The runs that ended since the last sample; all of them after
            // a router restart (its counters start again from zero).
            let (delta, delta_total) = match &series.last_hist {
                Some((t, c)) if *t <= total && c.len() == counts.len() => (
                    counts
                        .iter()
                        .zip(c)
                        .map(|(a, b)| a.saturating_sub(*b))
                        .collect::<Vec<u64>>(),
                    total - t,
                ),
                Some(_) => (counts.clone(), total),
                // The first sample: its runs ended at any time before.
                None => (vec![0; counts.len()], 0),
            };
            series.last_hist = Some((total, counts));
            let row = Row {
                at: unix_ms,
                counts: [
                    u(q, "accepted"),
                    u(q, "started"),
                    u(q, "processed"),
                    u(q, "failed"),
                    u(q, "dead_lettered"),
                    u(q, "depth") + u(q, "retry_waiting") + u(q, "delayed"),
                    u(q, "inflight"),
                ],
                p50_us: quantile(0.5, &bounds, &delta, delta_total),
                p95_us: quantile(0.95, &bounds, &delta, delta_total),
            };
            if series.rows.len() >= keep {
                series.rows.pop_front();
            }
            series.rows.push_back(row);
        }
        self.queues.retain(|name, _| seen.contains(&name.as_str()));
    }

    /// `{"queues": {name: [[unix_ms, ...FIELDS, p50_us, p95_us]...]}}`,
    /// the newest `last` samples of each (all when `None`), of `only` or
    /// of every queue.
    pub(crate) fn to_json(&self, only: Option<&str>, last: Option<usize>) -> Value {
        let queues: serde_json::Map<String, Value> = self
            .queues
            .iter()
            .filter(|(name, _)| only.is_none_or(|o| o == name.as_str()))
            .map(|(name, s)| {
                let skip = last.map_or(0, |n| s.rows.len().saturating_sub(n));
                let rows: Vec<Value> = s
                    .rows
                    .iter()
                    .skip(skip)
                    .map(|r| {
                        let mut a: Vec<Value> = Vec::with_capacity(10);
                        a.push(r.at.into());
                        a.extend(r.counts.iter().map(|v| Value::from(*v)));
                        a.push(r.p50_us.map(|v| v.round()).into());
                        a.push(r.p95_us.map(|v| v.round()).into());
                        Value::Array(a)
                    })
                    .collect();
                (name.clone(), Value::Array(rows))
            })
            .collect();
        let mut fields: Vec<&str> = FIELDS.to_vec();
        fields.extend(["run_p50_us", "run_p95_us"]);
        json!({ "fields": fields, "queues": queues })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEEP: usize = 300;

    fn answer(accepted: u64, done: u64, depth: u64, hist: [u64; 3], count: u64) -> Value {
        json!({"queues": [{
            "name": "mail", "accepted": accepted, "started": done, "processed": done,
            "failed": 1, "dead_lettered": 0, "depth": depth, "retry_waiting": 1,
            "delayed": 0, "inflight": 2,
            "run_time": {"count": count, "sum_us": 0, "bounds_us": [100, 1000, 10000],
                         "counts": hist},
        }]})
    }

    #[test]
    fn quantiles_interpolate_inside_a_bucket() {
        let b = [100.0, 1000.0, 10000.0];
        assert_eq!(quantile(0.5, &b, &[0, 0, 0], 0), None);
        // 10 runs in (100, 1000]: the median halfway.
        assert_eq!(quantile(0.5, &b, &[0, 10, 0], 10), Some(550.0));
        // 95 fast ones and 5 slow: p95 is at the top of the fast bucket.
        assert_eq!(quantile(0.95, &b, &[95, 0, 5], 100), Some(100.0));
        assert_eq!(quantile(0.99, &b, &[95, 0, 5], 100), Some(8200.0));
        // Above the last bound: the last bound.
        assert_eq!(quantile(0.5, &b, &[0, 0, 0], 4), Some(10000.0));
    }

    #[test]
    fn samples_keep_counts_depth_and_the_run_times_of_each_period() {
        let mut h = QueueHistory::default();
        h.record(1_000, &answer(5, 3, 4, [0, 3, 0], 3), KEEP);
        h.record(3_000, &answer(9, 6, 2, [0, 3, 3], 6), KEEP);
        h.record(5_000, &answer(9, 6, 2, [0, 3, 3], 6), KEEP);
        let v = h.to_json(None, None);
        let rows = v["queues"]["mail"].as_array().unwrap();
        assert_eq!(v["fields"][0], "accepted");
        // The first sample has no period before it: no run times.
        assert_eq!(rows[0], json!([1000, 5, 3, 3, 1, 0, 5, 2, null, null]));
        // Three runs in (1000, 10000] ended in the second period.
        assert_eq!(rows[1], json!([3000, 9, 6, 6, 1, 0, 3, 2, 5500.0, 9550.0]));
        // None in the third.
        assert_eq!(rows[2][8], Value::Null);
        assert_eq!(
            h.to_json(Some("mail"), Some(1))["queues"]["mail"][0][0],
            5000
        );
        assert_eq!(h.to_json(Some("other"), None)["queues"], json!({}));
        // A router restart: counters from zero, the runs since count.
        h.record(7_000, &answer(1, 1, 0, [1, 0, 0], 1), KEEP);
        assert_eq!(h.to_json(None, Some(1))["queues"]["mail"][0][8], 50.0);
        // A queue gone from the answer is forgotten.
        h.record(9_000, &json!({"queues": []}), KEEP);
        assert_eq!(h.to_json(None, None)["queues"], json!({}));
    }

    #[test]
    fn memory_is_bounded_in_samples_and_queues() {
        let mut h = QueueHistory::default();
        let many: Vec<Value> = (0..MAX_QUEUES + 10)
            .map(|i| json!({"name": format!("q{i:03}")}))
            .collect();
        for t in 0..(KEEP as u64 + 5) {
            h.record(t, &json!({ "queues": many }), KEEP);
        }
        let v = h.to_json(None, None);
        let q = v["queues"].as_object().unwrap();
        assert_eq!(q.len(), MAX_QUEUES);
        assert!(q
            .values()
            .all(|rows| rows.as_array().unwrap().len() == KEEP));
    }
}
