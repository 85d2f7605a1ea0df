//! Where the journal lives by default, and the
//! `--journal PATH|postgresql://…|none` rule.

use std::ffi::OsString;
use std::path::PathBuf;

/// The journal file name inside a data directory.
pub const JOURNAL_FILE_NAME: &str = "journal.sqlite";

/// `$EMQ_DATA_DIR/journal.sqlite`, else `$XDG_DATA_HOME/emq/journal.sqlite`,
/// else `$HOME/.local/share/emq/journal.sqlite`. Empty variables count as
/// unset. `None` if none of them is set.
pub fn default_journal_path() -> Option<PathBuf> {
    default_journal_path_from(|name| std::env::var_os(name))
}

/// [`default_journal_path`] with the environment passed in (for tests).
pub fn default_journal_path_from(env: impl Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    let var = |name: &str| env(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(dir) = var("EMQ_DATA_DIR") {
        return Some(dir.join(JOURNAL_FILE_NAME));
    }
    if let Some(dir) = var("XDG_DATA_HOME") {
        return Some(dir.join("emq").join(JOURNAL_FILE_NAME));
    }
    var("HOME").map(|home| {
        home.join(".local")
            .join("share")
            .join("emq")
            .join(JOURNAL_FILE_NAME)
    })
}

/// The value of `--journal`: `None` (flag absent) means the default path,
/// `"none"` (any case) means no journal (memory only), anything else is a
/// path. Returns the file to open, or `None` for no journal.
pub fn resolve_journal_path(arg: Option<&str>) -> Option<PathBuf> {
    match arg {
        None => default_journal_path(),
        Some(a) if a.eq_ignore_ascii_case("none") || a.is_empty() => None,
        Some(a) => Some(PathBuf::from(a)),
    }
}

/// Which store `--journal` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JournalTarget {
    /// Memory only.
    None,
    /// The SQLite file at this path.
    Sqlite(PathBuf),
    /// The PostgreSQL database at this URL (`postgresql://` or
    /// `postgres://`), shared by routers under a leader lease.
    Postgres(String),
}

impl JournalTarget {
    pub fn is_some(&self) -> bool {
        !matches!(self, JournalTarget::None)
    }
}

/// The value of `--journal`: absent means the default SQLite path (or
/// none when no data directory is known), `none` means memory only, a
/// `postgresql://` or `postgres://` URL the PostgreSQL store, anything
/// else a SQLite file.
pub fn resolve_journal_target(arg: Option<&str>) -> JournalTarget {
    match arg {
        Some(a) if crate::postgres::is_postgres_url(a) => JournalTarget::Postgres(a.trim().into()),
        other => match resolve_journal_path(other) {
            Some(p) => JournalTarget::Sqlite(p),
            None => JournalTarget::None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<OsString> + 'a {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| OsString::from(v))
        }
    }

    #[test]
    fn default_path_prefers_emq_data_dir_then_xdg_then_home() {
        let all = [
            ("EMQ_DATA_DIR", "/d"),
            ("XDG_DATA_HOME", "/x"),
            ("HOME", "/h"),
        ];
        assert_eq!(
            default_journal_path_from(env(&all)),
            Some(PathBuf::from("/d/journal.sqlite"))
        );
        assert_eq!(
            default_journal_path_from(env(&all[1..])),
            Some(PathBuf::from("/x/emq/journal.sqlite"))
        );
        assert_eq!(
            default_journal_path_from(env(&all[2..])),
            Some(PathBuf::from("/h/.local/share/emq/journal.sqlite"))
        );
        assert_eq!(default_journal_path_from(env(&[])), None);
    }

    #[test]
    fn empty_variables_count_as_unset() {
        let e = [("EMQ_DATA_DIR", ""), ("XDG_DATA_HOME", ""), ("HOME", "/h")];
        assert_eq!(
            default_journal_path_from(env(&e)),
            Some(PathBuf::from("/h/.local/share/emq/journal.sqlite"))
        );
    }

    #[test]
    fn journal_arg_none_disables_and_path_is_taken_verbatim() {
        assert_eq!(resolve_journal_path(Some("none")), None);
        assert_eq!(resolve_journal_target(Some("none")), JournalTarget::None);
        assert_eq!(
            resolve_journal_target(Some("postgresql://emq@db/emq")),
            JournalTarget::Postgres("postgresql://emq@db/emq".into())
        );
        assert_eq!(
            resolve_journal_target(Some("postgres://db/emq")),
            JournalTarget::Postgres("postgres://db/emq".into())
        );
        assert_eq!(
            resolve_journal_target(Some("/var/j.sqlite")),
            JournalTarget::Sqlite("/var/j.sqlite".into())
        );
        assert_eq!(resolve_journal_path(Some("NONE")), None);
        assert_eq!(
            resolve_journal_path(Some("/tmp/j.sqlite")),
            Some(PathBuf::from("/tmp/j.sqlite"))
        );
    }
}
