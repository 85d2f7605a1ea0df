//! Message ids: EventMQ uses `str(uuid.uuid4())`, 36 lower-case hex chars.
//!
//! [`new_msgid`] draws a fresh random id (one `getrandom` per id: fine for
//! clients). The cores use [`MsgIds`]: a base drawn once plus a counter, so
//! an id costs no system call, and a core seeded with a fixed number
//! ([`MsgIds::seeded`]) produces the same ids on every run — its tests can
//! assert exact frames. No randomness is read inside a core: its driver
//! passes the seed in the core's configuration.

/// A fresh random message id in the form EventMQ 0.3.13 uses.
pub fn new_msgid() -> String {
    uuid::Uuid::new_v4().hyphenated().to_string()
}

/// A random seed for [`MsgIds::seeded`], for drivers (not cores).
pub fn random_seed() -> u64 {
    uuid::Uuid::new_v4().as_u64_pair().0
}

/// uuid4-shaped ids from one base plus a counter: unique within a run, and
/// across runs when the seed is random.
#[derive(Debug, Clone)]
pub struct MsgIds {
    base: u128,
    n: u64,
}

/// Low 62 bits of a uuid: below the variant bits, so they stay valid.
const LOW_MASK: u128 = (1u128 << 62) - 1;

/// splitmix64: spreads a seed over 64 bits (Steele, Lea, Flood 2014).
fn splitmix64(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl MsgIds {
    /// Ids derived from `seed` only: the same seed gives the same ids.
    pub fn seeded(seed: u64) -> MsgIds {
        let mut s = seed;
        let hi = u128::from(splitmix64(&mut s));
        let lo = u128::from(splitmix64(&mut s));
        // Version 4, variant RFC 4122.
        let raw = (hi << 64) | lo;
        let base = uuid::Builder::from_random_bytes(raw.to_be_bytes())
            .into_uuid()
            .as_u128();
        MsgIds { base, n: 0 }
    }

    /// The next id.
    pub fn next_id(&mut self) -> String {
        self.n = self.n.wrapping_add(1);
        let low = self.base.wrapping_add(u128::from(self.n)) & LOW_MASK;
        let v = (self.base & !LOW_MASK) | low;
        uuid::Uuid::from_u128(v).hyphenated().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn msgid_is_uuid4_text_and_unique() {
        let a = new_msgid();
        let b = new_msgid();
        assert_eq!(a.len(), 36);
        assert_ne!(a, b);
        let parsed = uuid::Uuid::parse_str(&a).unwrap();
        assert_eq!(parsed.get_version_num(), 4);
        assert_eq!(a, a.to_lowercase());
    }

    #[test]
    fn seeded_ids_repeat_per_seed_and_differ_between_seeds() {
        let mut a = MsgIds::seeded(7);
        let mut b = MsgIds::seeded(7);
        let mut c = MsgIds::seeded(8);
        let (a1, a2) = (a.next_id(), a.next_id());
        assert_eq!(a1, b.next_id());
        assert_eq!(a2, b.next_id());
        assert_ne!(a1, a2);
        assert_ne!(a1, c.next_id());
        for id in [&a1, &a2] {
            let u = uuid::Uuid::parse_str(id).unwrap();
            assert_eq!(u.get_version_num(), 4);
            assert_eq!(u.get_variant(), uuid::Variant::RFC4122);
        }
    }
}
