//! The leader lease in the database: one row of `emq_lease`, taken,
//! renewed and released with plain `UPDATE … WHERE` statements and their
//! row counts (no advisory locks, no `LOCK TABLE`, nothing PostgreSQL-only),
//! expiring on the database's clock. The timing — when to renew, when to
//! give up, when a standby tries — is `emq_router_core::lease`; this file
//! only carries its actions out.
//!
//! - **take**: `epoch + 1`, holder = us, expiry = now + TTL, only if the
//!   row has expired (or was released). Two standbys taking it at once are
//!   ordered by the row lock; the second finds it no longer expired.
//! - **renew**: expiry = now + TTL, only if the row still names us at our
//!   epoch.
//! - **release**: expiry in the past, only if the row still names us at our
//!   epoch (a standby takes it on its next try).
//! - **fence**: every journal batch first updates the row where holder and
//!   epoch are ours, inside its transaction. A takeover commits either
//!   before (the fence then matches no row and the batch writes nothing)
//!   or after the batch (which the new leader then loads).

use std::time::Duration;

use super::error::PgError;
use super::lease_row::Fence;
use super::store::PgJournal;

/// What [`PgJournal::try_acquire`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acquire {
    /// The lease is ours at `epoch`; load, then serve.
    Won { epoch: u64 },
    /// Another router holds it; it expires in `expires_in` unless renewed.
    Held {
        holder: String,
        epoch: u64,
        expires_in: Duration,
    },
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

impl PgJournal {
    /// Take the lease for `holder` if it has expired; on success every
    /// later commit is fenced with the new epoch (load before appending).
    pub fn try_acquire(&mut self, holder: &str, ttl: Duration) -> Result<Acquire, PgError> {
        let r = self.take(holder, ttl);
        if let Err(e) = &r {
            self.after_error(e);
        }
        r
    }

    fn take(&mut self, holder: &str, ttl: Duration) -> Result<Acquire, PgError> {
        let db = self.db().to_string();
        let err = |e| PgError::sql(&db, "take the lease", e);
        let c = self.conn()?;
        let won = c
            .client
            .query_opt(&c.stmts.take_lease, &[&holder, &ms(ttl)])
            .map_err(err)?;
        if let Some(row) = won {
            let epoch = u64::try_from(row.get::<_, i64>(0)).unwrap_or(0);
            self.set_fence(Some(Fence {
                holder: holder.to_string(),
                epoch,
            }));
            return Ok(Acquire::Won { epoch });
        }
        let row = c.client.query_one(&c.stmts.read_lease, &[]).map_err(err)?;
        Ok(Acquire::Held {
            holder: row.get(0),
            epoch: u64::try_from(row.get::<_, i64>(1)).unwrap_or(0),
            expires_in: Duration::from_millis(u64::try_from(row.get::<_, i64>(2)).unwrap_or(0)),
        })
    }

    /// Extend the lease held (by `ttl` from the database's now).
    /// `Err(Fenced)`: another router holds it now; `Err(NoLease)`: none
    /// was held.
    pub fn renew(&mut self, ttl: Duration) -> Result<(), PgError> {
        let r = self.renew_inner(ttl);
        if let Err(e) = &r {
            self.after_error(e);
        }
        r
    }

    fn renew_inner(&mut self, ttl: Duration) -> Result<(), PgError> {
        let db = self.db().to_string();
        let Some(fence) = self.fence.clone() else {
            return Err(PgError::NoLease { db });
        };
        let epoch = i64::try_from(fence.epoch).unwrap_or(i64::MAX);
        let c = self.conn()?;
        let n = c
            .client
            .execute(&c.stmts.renew_lease, &[&fence.holder, &epoch, &ms(ttl)])
            .map_err(|e| PgError::sql(&db, "renew the lease", e))?;
        if n == 1 {
            Ok(())
        } else {
            self.set_fence(None);
            Err(PgError::Fenced {
                db,
                epoch: fence.epoch,
            })
        }
    }

    /// Give the lease up (a standby takes it on its next try) and stop
    /// fencing with it. A lease already taken over is left alone.
    pub fn release(&mut self) -> Result<(), PgError> {
        let Some(fence) = self.fence.take() else {
            return Ok(());
        };
        self.set_fence(None);
        let db = self.db().to_string();
        let epoch = i64::try_from(fence.epoch).unwrap_or(i64::MAX);
        let r = self.conn().and_then(|c| {
            c.client
                .execute(&c.stmts.release_lease, &[&fence.holder, &epoch])
                .map(|_| ())
                .map_err(|e| PgError::sql(&db, "release the lease", e))
        });
        if let Err(e) = &r {
            self.after_error(e);
        }
        r
    }

    /// Stop using the lease without a word to the database (it was lost):
    /// no commit is attempted with it again.
    pub fn forget_lease(&mut self) {
        self.set_fence(None);
    }

    /// The epoch of the lease this journal fences its commits with.
    pub fn lease_epoch(&self) -> Option<u64> {
        self.fence.as_ref().map(|f| f.epoch)
    }

    /// The lease row as the database has it now: holder, epoch, time to
    /// expiry (negative: expired). For tools and tests.
    pub fn lease_row(&mut self) -> Result<(String, u64, i64), PgError> {
        let db = self.db().to_string();
        let c = self.conn()?;
        let row = c
            .client
            .query_one(&c.stmts.read_lease, &[])
            .map_err(|e| PgError::sql(&db, "read the lease", e))?;
        Ok((
            row.get(0),
            u64::try_from(row.get::<_, i64>(1)).unwrap_or(0),
            row.get(2),
        ))
    }
}
