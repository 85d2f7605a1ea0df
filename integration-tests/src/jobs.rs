//! Job payloads for tests, and bookkeeping of which jobs ran how often.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use emqp_proto::job::{CallJob, Job, RunJob, ShellJob};
use serde_json::{Map, Value};

/// A 0.3.13 `run` job (`path` may be `module:Class`).
pub fn run(path: &str, callable: &str, args: Value, kwargs: Value) -> Vec<u8> {
    run_class(
        path,
        callable,
        args,
        kwargs,
        Value::Array(vec![]),
        Value::Object(Map::new()),
    )
}

pub fn run_class(
    path: &str,
    callable: &str,
    args: Value,
    kwargs: Value,
    class_args: Value,
    class_kwargs: Value,
) -> Vec<u8> {
    let as_vec = |v: Value| match v {
        Value::Array(a) => a,
        Value::Null => vec![],
        other => vec![other],
    };
    let as_map = |v: Value| match v {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    Job::Run(RunJob {
        callable: callable.into(),
        path: path.into(),
        args: as_vec(args),
        kwargs: as_map(kwargs),
        class_args: as_vec(class_args),
        class_kwargs: as_map(class_kwargs),
    })
    .to_message()
}

/// A `shell` job.
pub fn shell(argv: &[&str]) -> Vec<u8> {
    Job::Shell(ShellJob {
        argv: argv.iter().map(|s| s.to_string()).collect(),
        stdin: None,
        env: Map::new(),
        cwd: None,
    })
    .to_message()
}

/// A `call` job of a Rust handler (`echo`, `noop`).
pub fn call(handler: &str, args: Value) -> Vec<u8> {
    Job::Call(CallJob {
        handler: handler.into(),
        args,
    })
    .to_message()
}

/// A shell job that appends `tag $PPID` to `file` (one line, atomic
/// append) after sleeping `sleep` seconds (`"0"` for none). `$PPID` is the
/// process that started `sh`: the job manager, when it runs shell jobs
/// directly.
pub fn shell_record(file: &Path, tag: &str, sleep: &str) -> Vec<u8> {
    let script = if sleep == "0" {
        "echo \"$1 $PPID\" >> \"$2\"".to_string()
    } else {
        format!("sleep {sleep}; echo \"$1 $PPID\" >> \"$2\"")
    };
    shell(&["sh", "-c", &script, "sh", tag, &file.display().to_string()])
}

/// Lines of `file` counted by their first word.
pub fn count_lines(file: &Path) -> HashMap<String, usize> {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let mut m = HashMap::new();
    for line in text.lines() {
        if let Some(w) = line.split_whitespace().next() {
            *m.entry(w.to_string()).or_insert(0) += 1;
        }
    }
    m
}

/// Lines of `file`, split into words.
pub fn read_records(file: &Path) -> Vec<Vec<String>> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(|l| l.split_whitespace().map(String::from).collect())
        .filter(|v: &Vec<String>| !v.is_empty())
        .collect()
}

/// Submitted / completed / duplicated / lost, as fault tests print them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    pub submitted: usize,
    /// Distinct jobs that completed at least once.
    pub completed: usize,
    /// Jobs that completed more than once.
    pub duplicated: usize,
    /// Extra completions beyond the first, summed.
    pub extra_runs: usize,
    pub lost: usize,
}

impl Tally {
    /// From the expected tags and how often each was seen.
    pub fn of(tags: &[String], seen: &HashMap<String, usize>) -> Tally {
        let mut t = Tally {
            submitted: tags.len(),
            ..Tally::default()
        };
        for tag in tags {
            match seen.get(tag).copied().unwrap_or(0) {
                0 => t.lost += 1,
                1 => t.completed += 1,
                n => {
                    t.completed += 1;
                    t.duplicated += 1;
                    t.extra_runs += n - 1;
                }
            }
        }
        t
    }
}

impl std::fmt::Display for Tally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "submitted={} completed={} duplicated={} (extra runs {}) lost={}",
            self.submitted, self.completed, self.duplicated, self.extra_runs, self.lost
        )
    }
}

/// Wait (bounded) until `file` holds at least `n` job records; panics with
/// what it holds at the timeout.
pub fn wait_records(file: &Path, n: usize, timeout: Duration) -> Vec<Vec<String>> {
    crate::poll_until(timeout, Duration::from_millis(100), || {
        let r = read_records(file);
        (r.len() >= n).then_some(r)
    })
    .unwrap_or_else(|| {
        panic!(
            "expected {n} job records in {}, got {:?}",
            file.display(),
            read_records(file)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tally_counts_lost_and_duplicated() {
        let tags: Vec<String> = ["a", "b", "c", "d"].iter().map(|s| s.to_string()).collect();
        let seen: HashMap<String, usize> = [("a", 1), ("b", 3), ("d", 2), ("x", 1)]
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect();
        let t = Tally::of(&tags, &seen);
        assert_eq!(
            t,
            Tally {
                submitted: 4,
                completed: 3,
                duplicated: 2,
                extra_runs: 3,
                lost: 1
            }
        );
    }

    #[test]
    fn shell_record_is_a_valid_shell_job() {
        let msg = shell_record(Path::new("/tmp/x y"), "t1", "0.1");
        let Job::Shell(j) = Job::parse(&msg).unwrap() else {
            panic!("not a shell job")
        };
        assert_eq!(j.argv[0], "sh");
        assert_eq!(&j.argv[4..], ["t1", "/tmp/x y"]);
    }
}
