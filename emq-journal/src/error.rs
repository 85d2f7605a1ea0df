//! The one error type of the journal. Every variant names the journal file,
//! so a log line alone tells the operator which file to look at.

use std::fmt;
use std::path::{Path, PathBuf};

use rusqlite::ErrorCode;

/// Why the journal could not be opened, read or written.
///
/// The type is `Clone` and `Eq`: it keeps the underlying error as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JournalError {
    /// The file is an SQLite database but damaged: a torn page, garbage
    /// bytes, a truncated file. `PRAGMA quick_check` failed on open, or
    /// SQLite reported `SQLITE_CORRUPT` while reading or writing.
    Corrupt { path: PathBuf, detail: String },
    /// The file at the path is not an SQLite database at all (wrong header,
    /// or SQLite reported `SQLITE_NOTADB`).
    NotADatabase { path: PathBuf, detail: String },
    /// Another process (another router?) holds the journal open.
    Locked { path: PathBuf, detail: String },
    /// The journal was written by a newer emq (schema `user_version`).
    UnsupportedVersion {
        path: PathBuf,
        found: i64,
        supported: i64,
    },
    /// Creating the directory or reading the file failed.
    Io {
        path: PathBuf,
        kind: std::io::ErrorKind,
        detail: String,
    },
    /// Any other SQLite failure (disk full, read-only file, ...).
    Sqlite {
        path: PathBuf,
        /// What the journal was doing, e.g. "append", "open".
        context: &'static str,
        detail: String,
    },
}

impl JournalError {
    /// The journal file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            JournalError::Corrupt { path, .. }
            | JournalError::NotADatabase { path, .. }
            | JournalError::Locked { path, .. }
            | JournalError::UnsupportedVersion { path, .. }
            | JournalError::Io { path, .. }
            | JournalError::Sqlite { path, .. } => path,
        }
    }

    /// True for a damaged or foreign file (the operator must move it aside),
    /// as opposed to a transient or environmental failure.
    pub fn is_corruption(&self) -> bool {
        matches!(
            self,
            JournalError::Corrupt { .. } | JournalError::NotADatabase { .. }
        )
    }

    /// Classify an SQLite error: corruption, foreign file and lock errors get
    /// their own variants wherever they show up.
    pub(crate) fn sqlite(path: &Path, context: &'static str, e: rusqlite::Error) -> JournalError {
        let path = path.to_path_buf();
        let detail = e.to_string();
        match e.sqlite_error_code() {
            Some(ErrorCode::DatabaseCorrupt) => JournalError::Corrupt { path, detail },
            Some(ErrorCode::NotADatabase) => JournalError::NotADatabase { path, detail },
            Some(ErrorCode::DatabaseBusy) | Some(ErrorCode::DatabaseLocked) => {
                JournalError::Locked { path, detail }
            }
            _ => JournalError::Sqlite {
                path,
                context,
                detail,
            },
        }
    }

    pub(crate) fn io(path: &Path, e: std::io::Error) -> JournalError {
        JournalError::Io {
            path: path.to_path_buf(),
            kind: e.kind(),
            detail: e.to_string(),
        }
    }
}

impl fmt::Display for JournalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JournalError::Corrupt { path, detail } => write!(
                f,
                "journal {} is corrupt ({detail}); move it aside (or restore a backup) \
                 and restart, or run with --journal none",
                path.display()
            ),
            JournalError::NotADatabase { path, detail } => write!(
                f,
                "journal {} is not an SQLite database ({detail}); \
                 check the --journal path or move the file aside",
                path.display()
            ),
            JournalError::Locked { path, detail } => write!(
                f,
                "journal {} is in use by another process ({detail}); \
                 is another emq-router running with the same journal?",
                path.display()
            ),
            JournalError::UnsupportedVersion {
                path,
                found,
                supported,
            } => write!(
                f,
                "journal {} has schema version {found}, this emq supports up to {supported}; \
                 it was written by a newer emq",
                path.display()
            ),
            JournalError::Io { path, detail, .. } => {
                write!(f, "journal {}: {detail}", path.display())
            }
            JournalError::Sqlite {
                path,
                context,
                detail,
            } => write!(f, "journal {}: {context} failed: {detail}", path.display()),
        }
    }
}

impl std::error::Error for JournalError {}
