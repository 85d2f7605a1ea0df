//! The PostgreSQL journal on a thread of its own, so that a commit (a few
//! network round trips and the server's fsync: milliseconds) does not stop
//! the poll loop. The loop hands a batch over and goes on reading,
//! dispatching jobs already durable and gathering the next batch (the
//! core keeps one batch in flight and holds what waits for it); the
//! outcome comes back as a [`Reply`] and is fed to the core as
//! `JournalDone`. Lease calls (take, renew, release) go through the same
//! thread and connection, in order with the batches.
//!
//! A reply wakes the loop through a socket pair whose read end is one of
//! the loop's poll items. The SQLite port (`journal_port.rs`) has a
//! thread of its own the same way.
//!
//! Every commit goes through the thread, also a lone job's: when the
//! connection breaks during a commit, the store asks the database, for up
//! to the lease TTL, whether it happened, and the loop must go on (heart-
//! beats, the lease's timers) meanwhile.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};
use emq_journal::postgres::{Acquire, PgError, PgJournal};
use emq_router_core::journal::{Batch, BatchId, JournalStore, Restored};

/// What the loop asks the journal thread.
#[derive(Debug)]
pub(crate) enum Request {
    Append(Batch),
    Load,
    TryAcquire {
        holder: String,
        ttl: Duration,
    },
    Renew {
        ttl: Duration,
    },
    Release,
    /// The lease was lost: never commit with it again.
    ForgetLease,
}

/// What it answers, one reply per request except `ForgetLease`, in order.
#[derive(Debug)]
pub(crate) enum Reply {
    Appended {
        batch: BatchId,
        records: usize,
        result: Result<(), PgError>,
    },
    Loaded(Result<Restored, PgError>),
    Acquired(Result<Acquire, PgError>),
    Renewed(Result<(), PgError>),
    Released(Result<(), PgError>),
}

/// The loop's handle on the journal thread.
pub(crate) struct PgWriter {
    requests: Option<Sender<Request>>,
    replies: Receiver<Reply>,
    wake: UnixStream,
    thread: Option<JoinHandle<()>>,
    describe: String,
    /// Requests sent whose reply has not been taken yet.
    outstanding: usize,
    /// Batches and records committed.
    pub(crate) batches: u64,
    pub(crate) records: u64,
}

impl PgWriter {
    pub(crate) fn start(mut pg: PgJournal) -> std::io::Result<PgWriter> {
        let (wake, mut wake_tx) = UnixStream::pair()?;
        wake.set_nonblocking(true)?;
        let (req_tx, req_rx) = crossbeam_channel::unbounded::<Request>();
        let (rep_tx, rep_rx) = crossbeam_channel::unbounded::<Reply>();
        let describe = pg.describe();
        let thread = std::thread::Builder::new()
            .name("journal".into())
            .spawn(move || {
                for req in req_rx {
                    let reply = match req {
                        Request::Append(batch) => Reply::Appended {
                            batch: batch.id,
                            records: batch.records.len(),
                            result: JournalStore::append(&mut pg, &batch),
                        },
                        Request::Load => Reply::Loaded(JournalStore::load(&mut pg)),
                        Request::TryAcquire { holder, ttl } => {
                            Reply::Acquired(pg.try_acquire(&holder, ttl))
                        }
                        Request::Renew { ttl } => Reply::Renewed(pg.renew(ttl)),
                        Request::Release => Reply::Released(pg.release()),
                        Request::ForgetLease => {
                            pg.forget_lease();
                            continue;
                        }
                    };
                    if rep_tx.send(reply).is_err() {
                        break;
                    }
                    let _ = wake_tx.write(&[1]);
                }
            })?;
        Ok(PgWriter {
            requests: Some(req_tx),
            replies: rep_rx,
            wake,
            thread: Some(thread),
            describe,
            outstanding: 0,
            batches: 0,
            records: 0,
        })
    }

    pub(crate) fn describe(&self) -> &str {
        &self.describe
    }

    /// Hand a request over; its reply comes through [`PgWriter::try_recv`].
    pub(crate) fn send(&mut self, req: Request) {
        let counts = !matches!(req, Request::ForgetLease);
        if let Some(tx) = &self.requests {
            if tx.send(req).is_ok() && counts {
                self.outstanding += 1;
            }
        }
    }

    /// A reply, if one is ready.
    pub(crate) fn try_recv(&mut self) -> Option<Reply> {
        let mut buf = [0u8; 256];
        while matches!((&self.wake).read(&mut buf), Ok(n) if n > 0) {}
        let r = self.replies.try_recv().ok()?;
        self.note(&r);
        Some(r)
    }

    /// The next reply, waiting for it (standby, start-up, shutdown: when
    /// nothing else is going on).
    pub(crate) fn recv(&mut self) -> Option<Reply> {
        let r = self.replies.recv().ok()?;
        self.note(&r);
        Some(r)
    }

    /// Send `req` and wait for its reply, dropping the replies of earlier
    /// requests still outstanding (a term that ended).
    pub(crate) fn call(&mut self, req: Request) -> Option<Reply> {
        self.drain();
        self.send(req);
        self.recv()
    }

    /// Wait for (and drop) every outstanding reply.
    pub(crate) fn drain(&mut self) {
        while self.outstanding > 0 {
            if self.recv().is_none() {
                self.outstanding = 0;
            }
        }
    }

    fn note(&mut self, r: &Reply) {
        self.outstanding = self.outstanding.saturating_sub(1);
        if let Reply::Appended {
            records,
            result: Ok(()),
            ..
        } = r
        {
            self.batches += 1;
            self.records += *records as u64;
        }
    }

    /// Readable when a reply is ready.
    pub(crate) fn poll_item(&self) -> zmq::PollItem<'static> {
        use std::os::fd::AsRawFd;
        zmq::PollItem::from_fd(self.wake.as_raw_fd(), zmq::POLLIN)
    }
}

impl Drop for PgWriter {
    fn drop(&mut self) {
        // Closing the request channel ends the thread after what it has.
        self.requests = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
