//! Schedule identity: a stable hash of queue + message.

use sha2::{Digest, Sha256};
use std::fmt;

use emqp_proto::Schedule;

/// Identifies a schedule: lower-case hex SHA-256 of
/// `"emq-schedule/v1\0" || len(queue) as u64 big-endian || queue || message`.
///
/// The length prefix makes `(queue, message)` pairs unambiguous. The value is
/// stable across processes, platforms and versions (it is stored in the
/// journal), so it must never change for a given input.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(transparent)]
pub struct ScheduleId(String);

const DOMAIN: &[u8] = b"emq-schedule/v1\0";

impl ScheduleId {
    /// The id of the schedule for `message` on `queue`.
    pub fn of(queue: &str, message: &[u8]) -> ScheduleId {
        let mut h = Sha256::new();
        h.update(DOMAIN);
        h.update((queue.len() as u64).to_be_bytes());
        h.update(queue.as_bytes());
        h.update(message);
        let digest = h.finalize();
        let mut hex = String::with_capacity(64);
        for b in digest {
            hex.push(char::from_digit(u32::from(b >> 4), 16).unwrap_or('0'));
            hex.push(char::from_digit(u32::from(b & 0x0f), 16).unwrap_or('0'));
        }
        ScheduleId(hex)
    }

    /// Accept an id given as text (e.g. by an admin): 64 hex digits, any case.
    pub fn parse(text: &str) -> Option<ScheduleId> {
        let t = text.trim();
        if t.len() == 64 && t.bytes().all(|b| b.is_ascii_hexdigit()) {
            Some(ScheduleId(t.to_ascii_lowercase()))
        } else {
            None
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ScheduleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&Schedule> for ScheduleId {
    fn from(s: &Schedule) -> ScheduleId {
        ScheduleId::of(&s.queue, &s.message)
    }
}

impl From<&ScheduleId> for ScheduleId {
    fn from(id: &ScheduleId) -> ScheduleId {
        id.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_is_a_fixed_function_of_queue_and_message() {
        // Pinned value (checked with Python hashlib): changing the hash would
        // orphan journalled schedules.
        let id = ScheduleId::of("default", b"[\"run\", {}]");
        assert_eq!(id.as_str().len(), 64);
        assert_eq!(
            id.as_str(),
            "89b65bdec34492b867966177bf18ec19c37dcf753c7e943de17f4c9445dbdfaa"
        );
        assert_eq!(id, ScheduleId::of("default", b"[\"run\", {}]"));
    }

    #[test]
    fn queue_and_message_boundary_is_unambiguous() {
        assert_ne!(ScheduleId::of("ab", b"c"), ScheduleId::of("a", b"bc"));
        assert_ne!(ScheduleId::of("q", b"m1"), ScheduleId::of("q", b"m2"));
        assert_ne!(ScheduleId::of("q1", b"m"), ScheduleId::of("q2", b"m"));
    }

    #[test]
    fn parse_accepts_only_64_hex_digits() {
        let id = ScheduleId::of("q", b"m");
        assert_eq!(ScheduleId::parse(&id.as_str().to_uppercase()), Some(id));
        assert_eq!(ScheduleId::parse("abc"), None);
        assert_eq!(ScheduleId::parse(&"g".repeat(64)), None);
    }
}
