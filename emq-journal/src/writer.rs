//! A [`Journal`] on its own thread: the caller hands over batches and is told
//! (through a callback run on the writer thread) when each one is durable.
//! Batches submitted while a commit is in progress are merged into the next
//! transaction, so the commit cost is shared by everything that queued up.

use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender};

use crate::error::JournalError;
use crate::journal::{Journal, JournalOp, Result};

/// Called once per submitted batch, on the writer thread, after the batch
/// is durable (`Ok`) or definitely not written (`Err`).
pub type OnDurable = Box<dyn FnOnce(Result<()>) + Send + 'static>;

/// Most ops merged into one transaction.
const MAX_OPS_PER_COMMIT: usize = 50_000;

struct Batch {
    ops: Vec<JournalOp>,
    on_durable: OnDurable,
}

/// A journal owned by a background thread. See [`JournalWriter::submit`].
///
/// Dropping the writer (or calling [`JournalWriter::shutdown`]) writes what
/// was submitted before, runs its callbacks, and stops the thread.
pub struct JournalWriter {
    tx: Option<Sender<Batch>>,
    thread: Option<JoinHandle<Journal>>,
}

impl std::fmt::Debug for JournalWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JournalWriter")
            .field("running", &self.tx.is_some())
            .finish()
    }
}

impl JournalWriter {
    /// Move `journal` to a new thread named `emq-journal`.
    pub fn spawn(journal: Journal) -> Result<JournalWriter> {
        let (tx, rx) = crossbeam_channel::unbounded::<Batch>();
        let path = journal.path().to_path_buf();
        let thread = std::thread::Builder::new()
            .name("emq-journal".into())
            .spawn(move || run(journal, rx))
            .map_err(|e| JournalError::io(&path, e))?;
        Ok(JournalWriter {
            tx: Some(tx),
            thread: Some(thread),
        })
    }

    /// Queue `ops` for the next group commit. `on_durable` runs on the
    /// writer thread once they are committed (`Ok`) or the commit failed
    /// (`Err`, nothing of the batch written). Batches are applied in
    /// submission order. Ack a job only from its batch's `Ok` callback.
    ///
    /// Returns `Err(WriterClosed)` (and drops `on_durable` uncalled) if the
    /// writer thread is gone.
    pub fn submit(
        &self,
        ops: Vec<JournalOp>,
        on_durable: impl FnOnce(Result<()>) + Send + 'static,
    ) -> Result<()> {
        let tx = self.tx.as_ref().ok_or(JournalError::WriterClosed)?;
        tx.send(Batch {
            ops,
            on_durable: Box::new(on_durable),
        })
        .map_err(|_| JournalError::WriterClosed)
    }

    /// Submit and wait until the batch is durable.
    pub fn submit_and_wait(&self, ops: Vec<JournalOp>) -> Result<()> {
        let (done_tx, done_rx) = crossbeam_channel::bounded(1);
        self.submit(ops, move |r| {
            let _ = done_tx.send(r);
        })?;
        done_rx.recv().unwrap_or(Err(JournalError::WriterClosed))
    }

    /// Write everything submitted so far, stop the thread, and give the
    /// journal back (e.g. to compact it or read it).
    pub fn shutdown(mut self) -> Result<Journal> {
        self.stop().ok_or(JournalError::WriterClosed)
    }

    fn stop(&mut self) -> Option<Journal> {
        drop(self.tx.take());
        self.thread.take().and_then(|t| t.join().ok())
    }
}

impl Drop for JournalWriter {
    fn drop(&mut self) {
        self.stop();
    }
}

fn run(mut journal: Journal, rx: Receiver<Batch>) -> Journal {
    let mut ops: Vec<JournalOp> = Vec::new();
    let mut callbacks: Vec<OnDurable> = Vec::new();
    while let Ok(first) = rx.recv() {
        ops.extend(first.ops);
        callbacks.push(first.on_durable);
        while ops.len() < MAX_OPS_PER_COMMIT {
            match rx.try_recv() {
                Ok(b) => {
                    ops.extend(b.ops);
                    callbacks.push(b.on_durable);
                }
                Err(_) => break,
            }
        }
        let outcome = journal.append(&ops);
        if let Err(e) = &outcome {
            log::error!("{e}");
        }
        ops.clear();
        for cb in callbacks.drain(..) {
            cb(outcome.clone());
        }
    }
    journal
}
