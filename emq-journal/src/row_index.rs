//! Where each unfinished job's row is: msgid → `seq` (the rowid of the
//! `jobs` table), kept in memory instead of an SQLite index.
//!
//! Why: an index on `msgid` is a second B-tree that every accept and every
//! completion updates at a key-random place (msgids are uuid4s), which about
//! doubled the pages, and so the bytes, each commit wrote to the WAL (4.5
//! against 2.0 µs of CPU per job in a steady accept/complete load, measured
//! with SQLite 3 bundled by rusqlite 0.37). Rows are found by rowid instead;
//! the map is rebuilt from the table when the journal opens.
//!
//! Canonical uuid text (lower-case hex, 8-4-4-4-12, what 0.3.13 and emq
//! clients send) is packed into 16 bytes, so a million unfinished jobs cost
//! about 30 MB here; any other msgid is kept as text.
//!
//! A batch stages its changes in an overlay ([`Staged`]) that lookups see
//! first; they reach the map only when the batch's transaction commits, so
//! a failed batch leaves the map as the database is.

use std::collections::HashMap;

type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// A msgid as a map key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Key {
    Uuid([u64; 2]),
    Text(Box<str>),
}

impl Key {
    pub(crate) fn of(msgid: &str) -> Key {
        match pack_uuid(msgid.as_bytes()) {
            Some(u) => Key::Uuid(u),
            None => Key::Text(msgid.into()),
        }
    }
}

/// `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` in lower-case hex → 128 bits.
/// Anything else (upper case included, so that no two different msgids
/// share a key) → `None`.
fn pack_uuid(s: &[u8]) -> Option<[u64; 2]> {
    if s.len() != 36 {
        return None;
    }
    let mut bits: u128 = 0;
    for (i, &c) in s.iter().enumerate() {
        if matches!(i, 8 | 13 | 18 | 23) {
            if c != b'-' {
                return None;
            }
            continue;
        }
        let v = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            _ => return None,
        };
        bits = (bits << 4) | v as u128;
    }
    Some([(bits >> 64) as u64, bits as u64])
}

/// Committed msgid → rowid.
#[derive(Debug, Default)]
pub(crate) struct RowIndex {
    uuids: FastMap<[u64; 2], i64>,
    texts: FastMap<Box<str>, i64>,
}

impl RowIndex {
    pub(crate) fn get(&self, key: &Key) -> Option<i64> {
        match key {
            Key::Uuid(u) => self.uuids.get(u).copied(),
            Key::Text(t) => self.texts.get(t).copied(),
        }
    }

    /// Set or (with `None`) remove.
    pub(crate) fn set(&mut self, key: Key, row: Option<i64>) {
        match (key, row) {
            (Key::Uuid(u), Some(r)) => {
                self.uuids.insert(u, r);
            }
            (Key::Uuid(u), None) => {
                self.uuids.remove(&u);
            }
            (Key::Text(t), Some(r)) => {
                self.texts.insert(t, r);
            }
            (Key::Text(t), None) => {
                self.texts.remove(&t);
            }
        }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.uuids.len() + self.texts.len()
    }
}

/// One batch's changes, seen before the committed map.
#[derive(Debug, Default)]
pub(crate) struct Staged {
    changes: FastMap<Key, Option<i64>>,
}

impl Staged {
    pub(crate) fn get(&self, index: &RowIndex, key: &Key) -> Option<i64> {
        match self.changes.get(key) {
            Some(row) => *row,
            None => index.get(key),
        }
    }

    pub(crate) fn set(&mut self, key: Key, row: Option<i64>) {
        self.changes.insert(key, row);
    }

    /// The batch committed: its changes become the map's.
    pub(crate) fn apply(self, index: &mut RowIndex) {
        for (k, row) in self.changes {
            index.set(k, row);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_uuids_pack_and_everything_else_stays_text() {
        let u = "0f8a1c2e-3b4d-4e5f-8a9b-0c1d2e3f4a5b";
        assert_eq!(
            Key::of(u),
            Key::Uuid([0x0f8a_1c2e_3b4d_4e5f, 0x8a9b_0c1d_2e3f_4a5b])
        );
        for other in [
            "0F8A1C2E-3B4D-4E5F-8A9B-0C1D2E3F4A5B",
            "0f8a1c2e3b4d4e5f8a9b0c1d2e3f4a5b",
            "0f8a1c2e-3b4d-4e5f-8a9b-0c1d2e3f4a5",
            "0f8a1c2e-3b4d-4e5f-8a9b_0c1d2e3f4a5b",
            "0f8a1c2e-3b4d-4e5f-8a9b-0c1d2e3f4a5g",
            "",
            "job-1",
        ] {
            assert_eq!(Key::of(other), Key::Text(other.into()), "{other}");
        }
    }

    #[test]
    fn staged_changes_shadow_the_map_until_applied() {
        let mut index = RowIndex::default();
        let a = Key::of("0f8a1c2e-3b4d-4e5f-8a9b-0c1d2e3f4a5b");
        let b = Key::of("job-b");
        index.set(a.clone(), Some(1));
        let mut st = Staged::default();
        st.set(a.clone(), None);
        st.set(b.clone(), Some(2));
        assert_eq!(st.get(&index, &a), None);
        assert_eq!(st.get(&index, &b), Some(2));
        // Not applied: the map is unchanged (a failed batch).
        assert_eq!((index.get(&a), index.get(&b)), (Some(1), None));
        st.apply(&mut index);
        assert_eq!((index.get(&a), index.get(&b)), (None, Some(2)));
        assert_eq!(index.len(), 1);
    }
}
