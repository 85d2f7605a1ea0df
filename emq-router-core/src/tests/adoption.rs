//! Jobs a reconnected job manager still runs (`RUNNING`, feature
//! `adopt-running`; `router/completion.rs` "Adoption"): moved onto its new
//! identity instead of being delivered again.

use super::*;

fn running(h: &mut H, id: &str, msgids: &[&str]) -> Vec<Sent> {
    let orig_msgids = msgids.iter().map(|m| m.to_string()).collect();
    h.msg(Backend, id, "run-list", Command::Running { orig_msgids })
}

fn kbye(h: &mut H, id: &str) -> Vec<Sent> {
    h.msg(Backend, id, "bye", Command::Kbye)
}

/// The job manager reconnected (new identity) while j1 ran; it says so
/// before the router drops the old identity: the drop delivers nothing
/// again, the REPLY from the new identity completes j1 with one RESULT,
/// and the new identity's slot is its own READY's.
#[test]
fn a_job_still_in_flight_on_the_old_identity_moves_and_is_not_delivered_again() {
    let mut h = H::new();
    worker(&mut h, "old", "", 1);
    h.request("c", "j1", "default", "reply-requested");
    assert_eq!(h.r.inflight_count(), 1);
    h.inform("new", "", &["job-ack", "cancel"]);
    running(&mut h, "new", &["j1"]);
    assert_eq!(h.r.stats().adopted, 1);
    let sent = kbye(&mut h, "old");
    assert!(sent.is_empty(), "{sent:?}");
    assert_eq!(h.r.stats().redelivered, 0);
    assert_eq!(h.r.inflight_count(), 1);
    // The new identity offers its free slot: j2 goes there, not j1 again.
    h.request("c", "j2", "default", "");
    let sent = h.ready("new");
    assert_eq!(forwarded(&sent, "new"), vec!["j2"]);
    let sent = h.reply("new", "j1", r#"{"value": 1}"#, None);
    assert_eq!(results(&sent, "c").len(), 1);
    assert_eq!(h.r.inflight_count(), 1);
}

/// The router dropped the old identity first (j1 back at the front of
/// its queue, no other worker yet): RUNNING takes it back out, its lost
/// delivery is taken back, and a later worker does not get it.
#[test]
fn a_job_already_back_in_its_queue_is_taken_back_out() {
    let mut h = H::new();
    worker(&mut h, "old", "", 1);
    h.request("c", "j1", "default", "reply-requested");
    kbye(&mut h, "old");
    assert_eq!(h.r.buffered_count(), 1);
    assert_eq!(h.r.stats().redelivered, 1);
    h.inform("new", "", &["job-ack"]);
    running(&mut h, "new", &["j1"]);
    assert_eq!(h.r.buffered_count(), 0);
    assert_eq!(h.r.inflight_count(), 1);
    assert_eq!(
        h.r.store
            .jobs
            .get(&h.r.store.find("j1").unwrap())
            .unwrap()
            .lost(),
        0
    );
    let sent = h.ready("new");
    assert!(forwarded(&sent, "new").is_empty(), "{sent:?}");
    worker(&mut h, "other", "", 1);
    assert_eq!(h.r.inflight_count(), 1);
    let sent = h.reply("new", "j1", r#"{"value": 1}"#, None);
    assert_eq!(results(&sent, "c").len(), 1);
}

/// A job already handed out again runs there; RUNNING leaves it alone
/// wherever it is not claimable: on the claimant already, handed out
/// again to another worker, finished, unknown; and from a worker without
/// job-ack.
#[test]
fn running_leaves_alone_what_it_cannot_claim() {
    let mut h = H::new();
    worker(&mut h, "old", "", 1);
    h.request("c", "j1", "default", "");
    kbye(&mut h, "old");
    worker(&mut h, "other", "", 1);
    assert_eq!(h.r.inflight_count(), 1, "j1 handed out again to other");
    h.inform("new", "", &["job-ack"]);
    // j1 is in flight on "other" with a lost delivery: it moves (both
    // run it already; whichever REPLY comes first completes it).
    running(&mut h, "new", &["j1", "nope"]);
    assert_eq!(h.r.stats().adopted, 1);
    let sent = h.reply("other", "j1", "{}", None);
    assert_eq!(h.r.inflight_count(), 0, "{sent:?}");
    // Finished: nothing to move.
    running(&mut h, "new", &["j1"]);
    assert_eq!(h.r.stats().adopted, 1);
    // A legacy worker's RUNNING is ignored.
    h.inform("legacy", r#"[[10, "default"]]"#, &[]);
    h.request("c", "j3", "default", "");
    h.ready("other");
    assert_eq!(h.r.inflight_count(), 1);
    running(&mut h, "legacy", &["j3"]);
    assert_eq!(h.r.stats().adopted, 1);
}
