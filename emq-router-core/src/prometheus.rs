//! The Prometheus text exposition format, built by hand: a few `# HELP` /
//! `# TYPE` lines and samples (no client library needed for a text the
//! router renders twice a second).

/// Builds Prometheus text exposition format.
#[derive(Default)]
pub struct PromText {
    out: String,
}

/// Escape a label value as the exposition format requires.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn labels(pairs: &[(&str, &str)]) -> String {
    if pairs.is_empty() {
        return String::new();
    }
    let inner: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
        .collect();
    format!("{{{}}}", inner.join(","))
}

impl PromText {
    pub fn new() -> PromText {
        PromText::default()
    }

    /// `# HELP` and `# TYPE` lines of a metric family.
    pub fn family(&mut self, name: &str, kind: &str, help: &str) -> &mut Self {
        self.out
            .push_str(&format!("# HELP {name} {help}\n# TYPE {name} {kind}\n"));
        self
    }

    /// One sample line.
    pub fn sample(&mut self, name: &str, label_pairs: &[(&str, &str)], value: f64) -> &mut Self {
        self.out.push_str(&format!(
            "{name}{} {}\n",
            labels(label_pairs),
            fmt_value(value)
        ));
        self
    }

    /// A histogram from cumulative-bucket counts: `buckets[i]` = observations
    /// ≤ `bounds[i]`; `count` and `sum` cover all observations.
    pub fn histogram(
        &mut self,
        name: &str,
        label_pairs: &[(&str, &str)],
        bounds: &[f64],
        cumulative: &[u64],
        count: u64,
        sum: f64,
    ) -> &mut Self {
        for (b, c) in bounds.iter().zip(cumulative) {
            let le = fmt_value(*b);
            let mut l: Vec<(&str, &str)> = label_pairs.to_vec();
            l.push(("le", &le));
            self.sample(&format!("{name}_bucket"), &l, *c as f64);
        }
        let mut l: Vec<(&str, &str)> = label_pairs.to_vec();
        l.push(("le", "+Inf"));
        self.sample(&format!("{name}_bucket"), &l, count as f64);
        self.sample(&format!("{name}_sum"), label_pairs, sum);
        self.sample(&format!("{name}_count"), label_pairs, count as f64);
        self
    }

    pub fn finish(self) -> String {
        self.out
    }
}

fn fmt_value(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_exposition_format() {
        let mut p = PromText::new();
        p.family("emq_queue_depth", "gauge", "Jobs waiting.")
            .sample("emq_queue_depth", &[("queue", "a\"b")], 3.0);
        p.family("emq_job_latency_seconds", "histogram", "Latency.")
            .histogram(
                "emq_job_latency_seconds",
                &[],
                &[0.001, 0.01],
                &[1, 2],
                3,
                0.5,
            );
        let t = p.finish();
        assert!(t.contains("# TYPE emq_queue_depth gauge\n"));
        assert!(t.contains("emq_queue_depth{queue=\"a\\\"b\"} 3\n"));
        assert!(t.contains("emq_job_latency_seconds_bucket{le=\"0.001\"} 1\n"));
        assert!(t.contains("emq_job_latency_seconds_bucket{le=\"+Inf\"} 3\n"));
        assert!(t.contains("emq_job_latency_seconds_sum 0.5\n"));
        assert!(t.contains("emq_job_latency_seconds_count 3\n"));
    }
}
