//! The lease row's statements and this router's claim on it: the leaf
//! that the store (which prepares the statements on its connection and
//! fences every batch with the claim) and the lease operations
//! (`lease.rs`: take, renew, release) both use, so neither imports the
//! other's internals. What the statements do is `lease.rs`'s rule.

/// The lease this router holds: every commit checks it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fence {
    pub(crate) holder: String,
    pub(crate) epoch: u64,
}

pub(crate) const TAKE: &str = "UPDATE emq_lease
    SET holder = $1, epoch = epoch + 1,
        expires_at = CURRENT_TIMESTAMP + CAST($2 AS DOUBLE PRECISION) * INTERVAL '1 millisecond',
        acquired_at = CURRENT_TIMESTAMP
    WHERE name = 'router' AND expires_at < CURRENT_TIMESTAMP
    RETURNING epoch";
/// Holder, epoch, and milliseconds until expiry (negative: expired).
pub(crate) const READ: &str = "SELECT holder, epoch,
        CAST(EXTRACT(EPOCH FROM (expires_at - CURRENT_TIMESTAMP)) * 1000 AS BIGINT)
    FROM emq_lease WHERE name = 'router'";
pub(crate) const RENEW: &str = "UPDATE emq_lease
    SET expires_at = CURRENT_TIMESTAMP + CAST($3 AS DOUBLE PRECISION) * INTERVAL '1 millisecond'
    WHERE name = 'router' AND holder = $1 AND epoch = $2";
pub(crate) const RELEASE: &str = "UPDATE emq_lease
    SET expires_at = TIMESTAMPTZ '1970-01-01 00:00:00+00'
    WHERE name = 'router' AND holder = $1 AND epoch = $2";
