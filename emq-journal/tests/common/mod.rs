//! Shared helpers: a temporary directory removed on drop, job builders.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use emq_router_core::journal::{JobRecord, Record};

pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicU32 = AtomicU32::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let dir = std::env::temp_dir().join(format!(
            "emq-journal-{tag}-{}-{}-{nanos}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn journal(&self) -> PathBuf {
        self.0.join("journal.sqlite")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
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
