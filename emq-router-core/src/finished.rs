//! Finished jobs kept for lookups: the last `Config::retain_finished`,
//! none older than `Config::retain_for`, each with its result when that is
//! at most `Config::retain_result_bytes` (else only the fact that it was
//! larger). Bounded memory: count × (a job record with at most 1,000
//! payload bytes + the result bound).

use std::collections::VecDeque;

use crate::journal::FinishedRecord;
use crate::util::FastMap;

/// The retained finished jobs, oldest first, indexed by msgid.
#[derive(Debug, Default)]
pub struct Finished {
    jobs: VecDeque<FinishedRecord>,
    /// Sequence number of `jobs[0]`.
    base: u64,
    /// msgid → sequence of its newest finished job.
    by_msgid: FastMap<String, u64>,
}

impl Finished {
    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// Keep `r`, then drop beyond `keep` and anything finished before
    /// `drop_before_unix_ms`.
    pub fn push(&mut self, r: FinishedRecord, keep: usize, drop_before_unix_ms: u64) {
        if keep == 0 {
            return;
        }
        let seq = self.base + self.jobs.len() as u64;
        self.by_msgid.insert(r.job.msgid.clone(), seq);
        self.jobs.push_back(r);
        self.trim(keep, drop_before_unix_ms);
    }

    /// Drop the oldest beyond `keep` or finished before the cut-off.
    pub fn trim(&mut self, keep: usize, drop_before_unix_ms: u64) {
        while let Some(front) = self.jobs.front() {
            if self.jobs.len() <= keep && front.finished_at_unix_ms >= drop_before_unix_ms {
                break;
            }
            let r = self.jobs.pop_front().expect("front exists");
            if self.by_msgid.get(&r.job.msgid) == Some(&self.base) {
                self.by_msgid.remove(&r.job.msgid);
            }
            self.base += 1;
        }
    }

    /// When the oldest kept job expires (unix ms), given the retention.
    pub fn oldest_finished_unix_ms(&self) -> Option<u64> {
        self.jobs.front().map(|r| r.finished_at_unix_ms)
    }

    /// The msgids of the retained finished jobs, in no order.
    pub fn msgids(&self) -> impl Iterator<Item = &str> + '_ {
        self.by_msgid.keys().map(String::as_str)
    }

    /// The newest finished job with this msgid.
    pub fn get(&self, msgid: &str) -> Option<&FinishedRecord> {
        let seq = *self.by_msgid.get(msgid)?;
        self.jobs.get(usize::try_from(seq - self.base).ok()?)
    }

    /// Finished jobs with their sequence numbers, newest or oldest first,
    /// after `cursor` (exclusive).
    pub fn iter(
        &self,
        newest: bool,
        cursor: Option<u64>,
    ) -> Box<dyn Iterator<Item = (u64, &FinishedRecord)> + '_> {
        let base = self.base;
        let all = self
            .jobs
            .iter()
            .enumerate()
            .map(move |(i, r)| (base + i as u64, r));
        match (newest, cursor) {
            (true, None) => Box::new(all.rev()),
            (true, Some(c)) => Box::new(all.rev().filter(move |(s, _)| *s < c)),
            (false, None) => Box::new(all),
            (false, Some(c)) => Box::new(all.filter(move |(s, _)| *s > c)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::JobRecord;

    fn rec(msgid: &str, at: u64) -> FinishedRecord {
        FinishedRecord {
            job: JobRecord {
                msgid: msgid.into(),
                client: vec![],
                queue: "q".into(),
                route: "q".into(),
                headers: vec![],
                payload: vec![],
                attempts: 1,
                accepted_at_unix_ms: at,
                run_at_unix_ms: None,
            },
            outcome: "done".into(),
            started_at_unix_ms: None,
            finished_at_unix_ms: at,
            result: None,
            result_truncated: false,
        }
    }

    #[test]
    fn keeps_the_newest_by_count_and_age() {
        let mut f = Finished::default();
        for i in 0..5 {
            f.push(rec(&format!("m{i}"), 100 + i), 3, 0);
        }
        assert_eq!(f.len(), 3);
        assert!(f.get("m1").is_none());
        assert_eq!(f.get("m4").unwrap().finished_at_unix_ms, 104);
        f.trim(3, 104);
        assert_eq!(f.len(), 1);
        let newest: Vec<&str> = f
            .iter(true, None)
            .map(|(_, r)| r.job.msgid.as_str())
            .collect();
        assert_eq!(newest, ["m4"]);
        // A msgid finished twice: the newer wins the lookup.
        f.push(rec("m4", 200), 3, 0);
        assert_eq!(f.get("m4").unwrap().finished_at_unix_ms, 200);
        f.trim(1, 0);
        assert_eq!(f.get("m4").unwrap().finished_at_unix_ms, 200);
    }
}
