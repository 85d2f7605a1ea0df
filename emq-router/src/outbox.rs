//! The outbox drainer (`--outbox postgresql://…`; docs/UNIQUE_AND_ON_COMMIT.md,
//! "PostgreSQL outbox"): jobs the application wrote into the `emq_outbox`
//! table of its own database, in its own transactions
//! (`emq_journal::postgres::outbox`), become jobs of this router.
//!
//! **Rule.** A thread of its own owns the connection: it `LISTEN`s, reads
//! rows in id order (at most [`IN_HAND`] not yet answered, again every
//! [`POLL`] for rows whose notification was missed, and at once on a
//! notification) and hands them to the loop. The loop feeds each row to
//! the core as a REQUEST from the internal client [`IDENTITY`] under the
//! row's msgid, and takes the core's answers to that identity off the
//! send path: an acknowledgement (sent once the job's record is
//! committed to the journal), a `DUPLICATE`, or a final REJECT
//! (`malformed`, `duplicate`, ...; logged) deletes the row; `queue-full`,
//! `journal-unavailable`, `journal-uncertain` and `shutting-down` leave it
//! to be read again at the next poll. A row whose answer was lost (the
//! router died between its journal commit and the delete) is read again
//! under the same msgid, which the core acknowledges as the job it holds:
//! not run twice while the job is kept (`--retain-for`).
//!
//! Only a serving router drains (the port lives in a term of service, so
//! a PostgreSQL standby does not). A database that cannot be reached is
//! logged and tried again every [`POLL`]; the router goes on meanwhile.

use std::collections::{HashMap, HashSet};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use emq_journal::postgres::outbox::{Outbox, OutboxRow};
use emqp_proto::{Command, Message, RejectReason, PROTOCOL_VERSION};

/// The frontend identity the core answers outbox rows to.
pub(crate) const IDENTITY: &[u8] = b"emq-outbox";
/// Rows handed to the loop and not answered yet, at most.
pub(crate) const IN_HAND: usize = 512;
/// Rows are read again this often without a notification.
pub(crate) const POLL: Duration = Duration::from_secs(1);
/// The thread's longest wait (it then looks at the loop's answers).
const TICK: Duration = Duration::from_millis(50);

/// What the loop tells the thread about rows it had.
enum Answer {
    /// Answered for good: delete.
    Done(i64),
    /// Refused for now: read it again later.
    Again(i64),
}

/// The loop's handle on the outbox thread.
pub(crate) struct OutboxPort {
    rows: Receiver<OutboxRow>,
    answers: Sender<Answer>,
    wake: UnixStream,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// Rows fed to the core: msgid → row id.
    fed: HashMap<String, i64>,
}

impl OutboxPort {
    pub(crate) fn start(url: &str) -> std::io::Result<OutboxPort> {
        let (wake, wake_tx) = UnixStream::pair()?;
        wake.set_nonblocking(true)?;
        let (row_tx, row_rx) = crossbeam_channel::unbounded();
        let (ans_tx, ans_rx) = crossbeam_channel::unbounded();
        let stop = Arc::new(AtomicBool::new(false));
        let url = url.to_string();
        let stopping = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("outbox".into())
            .spawn(move || drain(&url, &row_tx, &ans_rx, wake_tx, &stopping))?;
        Ok(OutboxPort {
            rows: row_rx,
            answers: ans_tx,
            wake,
            stop,
            thread: Some(thread),
            fed: HashMap::new(),
        })
    }

    /// Readable when rows are ready.
    pub(crate) fn poll_item(&self) -> zmq::PollItem<'static> {
        use std::os::fd::AsRawFd;
        zmq::PollItem::from_fd(self.wake.as_raw_fd(), zmq::POLLIN)
    }

    /// The rows ready, as frontend REQUEST frames from [`IDENTITY`].
    pub(crate) fn take(&mut self) -> Vec<Vec<Vec<u8>>> {
        let mut buf = [0u8; 256];
        while matches!((&self.wake).read(&mut buf), Ok(n) if n > 0) {}
        let mut out = Vec::new();
        while let Ok(row) = self.rows.try_recv() {
            self.fed.insert(row.msgid.clone(), row.id);
            out.push(vec![
                IDENTITY.to_vec(),
                Vec::new(),
                PROTOCOL_VERSION.as_bytes().to_vec(),
                b"REQUEST".to_vec(),
                row.msgid.into_bytes(),
                row.queue.into_bytes(),
                row.headers.into_bytes(),
                row.payload,
            ]);
        }
        out
    }

    /// A send of the core to [`IDENTITY`]: the answer about a row.
    pub(crate) fn answer(&mut self, frames: Vec<Vec<u8>>) {
        let Ok(msg) = Message::decode(frames) else {
            return;
        };
        let (msgid, done) = match msg.command {
            Command::Reply(r) if r.orig_msgid.is_none() => {
                (String::from_utf8_lossy(&r.payload).into_owned(), true)
            }
            Command::Duplicate(d) => {
                log::info!(
                    "outbox: job {} is a duplicate of {}: {}",
                    d.orig_msgid,
                    d.existing_msgid,
                    d.text
                );
                (d.orig_msgid, true)
            }
            Command::Reject(r) => {
                let again = matches!(
                    r.reason,
                    RejectReason::QueueFull
                        | RejectReason::JournalUnavailable
                        | RejectReason::JournalUncertain
                        | RejectReason::ShuttingDown
                );
                if !again {
                    log::error!(
                        "outbox: job {} refused ({}): {}; its row is deleted",
                        r.orig_msgid,
                        r.reason.as_str(),
                        r.text
                    );
                }
                (r.orig_msgid, !again)
            }
            // RESULTs (a row with reply-requested), NOTICEs: nobody waits.
            _ => return,
        };
        let Some(id) = self.fed.remove(&msgid) else {
            return;
        };
        let _ = self.answers.send(if done {
            Answer::Done(id)
        } else {
            Answer::Again(id)
        });
    }
}

impl Drop for OutboxPort {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The thread: connect, read, hand over, delete (see the module
/// documentation).
fn drain(
    url: &str,
    rows: &Sender<OutboxRow>,
    answers: &Receiver<Answer>,
    mut wake: UnixStream,
    stop: &AtomicBool,
) {
    let mut conn: Option<Outbox> = None;
    let mut failing = false;
    let mut in_hand: HashSet<i64> = HashSet::new();
    let mut to_delete: Vec<i64> = Vec::new();
    let mut next_read = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let Some(o) = conn.as_mut() else {
            match Outbox::open(url, Duration::from_secs(2)) {
                Ok(o) => {
                    log::info!("outbox: draining emq_outbox of {}", o.describe());
                    failing = false;
                    conn = Some(o);
                    next_read = Instant::now();
                }
                Err(e) => {
                    if !failing {
                        log::error!("outbox: cannot use {url:?}: {e}; trying every {POLL:?}");
                        failing = true;
                    }
                    sleep_unless(stop, POLL);
                }
            }
            continue;
        };
        while let Ok(a) = answers.try_recv() {
            match a {
                Answer::Done(id) => {
                    in_hand.remove(&id);
                    to_delete.push(id);
                }
                Answer::Again(id) => {
                    in_hand.remove(&id);
                }
            }
        }
        let result = (|| {
            o.delete(&to_delete)?;
            to_delete.clear();
            if Instant::now() >= next_read && in_hand.len() < IN_HAND {
                let skip: Vec<i64> = in_hand.iter().copied().collect();
                let got = o.fetch(&skip, IN_HAND - in_hand.len())?;
                let full = got.len() == IN_HAND - in_hand.len();
                if !got.is_empty() {
                    for r in got {
                        in_hand.insert(r.id);
                        let _ = rows.send(r);
                    }
                    let _ = wake.write_all(b"x");
                }
                next_read = if full {
                    Instant::now()
                } else {
                    Instant::now() + POLL
                };
            }
            if o.wait(TICK)? {
                next_read = Instant::now();
            }
            Ok::<(), emq_journal::postgres::PgError>(())
        })();
        if let Err(e) = result {
            log::error!("outbox: {e}; connecting again");
            conn = None;
            failing = true;
            sleep_unless(stop, POLL);
        }
    }
    // Stopping: the rows answered last go now (else they are read again
    // by the next router and acknowledged as the jobs they are).
    while let Ok(a) = answers.try_recv() {
        if let Answer::Done(id) = a {
            to_delete.push(id);
        }
    }
    if let Some(o) = conn.as_mut() {
        if let Err(e) = o.delete(&to_delete) {
            log::warn!("outbox: {e}: {} answered row(s) stay", to_delete.len());
        }
    }
}

fn sleep_unless(stop: &AtomicBool, d: Duration) {
    let end = Instant::now() + d;
    while !stop.load(Ordering::Relaxed) && Instant::now() < end {
        std::thread::sleep(TICK);
    }
}
