//! Shared helpers: the journal file of a test directory (the test kit's
//! `TempDir`), job builders.
#![allow(dead_code)]

use std::path::PathBuf;

use emq_router_core::journal::{JobRecord, Record};

pub use emq_testkit::TempDir;

/// The journal file of a test's directory.
pub trait JournalPath {
    fn journal(&self) -> PathBuf;
}

impl JournalPath for TempDir {
    fn journal(&self) -> PathBuf {
        self.path().join("journal.sqlite")
    }
}

pub fn job(msgid: &str) -> JobRecord {
    JobRecord {
        msgid: msgid.to_string(),
        client: format!("client-{msgid}").into_bytes(),
        queue: "default".into(),
        route: "default".into(),
        headers: b"reply-requested,guarantee".to_vec(),
        payload: format!(r#"["call",{{"handler":"echo","args":"{msgid}"}}]"#).into_bytes(),
        attempts: 0,
        accepted_at_unix_ms: 1_700_000_000_000,
        run_at_unix_ms: None,
    }
}

pub fn accepted(msgid: &str) -> Record {
    Record::Accepted(job(msgid))
}

pub fn completed(msgid: &str) -> Record {
    Record::Completed {
        msgid: msgid.to_string(),
    }
}

pub fn msgids(jobs: &[JobRecord]) -> Vec<String> {
    jobs.iter().map(|j| j.msgid.clone()).collect()
}
