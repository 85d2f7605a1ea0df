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
    h.reconnect("old", "new", &["job-ack", "cancel"]);
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
    h.reconnect("old", "new", &["job-ack"]);
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
    h.reconnect("old", "new", &["job-ack"]);
    // j1 is in flight on "other", another job manager (another key): it
    // stays there, and that run counts.
    running(&mut h, "new", &["j1", "nope"]);
    assert_eq!(h.r.stats().adopted, 0);
    assert_eq!(h.r.stats().foreign_claims, 1);
    let sent = h.reply("other", "j1", "{}", None);
    assert_eq!(h.r.inflight_count(), 0, "{sent:?}");
    // Finished: nothing to move.
    running(&mut h, "new", &["j1"]);
    assert_eq!(h.r.stats().adopted, 0);
    // A legacy worker's RUNNING is ignored.
    h.inform("legacy", r#"[[10, "default"]]"#, &[]);
    h.request("c", "j3", "default", "");
    h.ready("other");
    assert_eq!(h.r.inflight_count(), 1);
    running(&mut h, "legacy", &["j3"]);
    assert_eq!(h.r.stats().adopted, 0);
}

/// Item 6 of issue 26: any registered worker could finish any in-flight
/// job by sending REPLY for its msgid. Only the holder's job manager (with
/// the take-back key its ACK gave) may take a job back; a stranger's REPLY
/// and RUNNING are ignored, counted and logged, and the holder's REPLY is
/// the one the client gets.
#[test]
fn a_stranger_cannot_finish_or_adopt_another_job_managers_job() {
    let mut h = H::new();
    worker(&mut h, "holder", "", 1);
    h.request("c", "j1", "default", "reply-requested");
    assert_eq!(h.r.inflight_count(), 1);
    // A stranger with job-ack, and one that makes up a key.
    h.inform("stranger", "", &["job-ack"]);
    let made_up = format!("take-back={}", "0".repeat(32));
    h.inform("guesser", "", &["job-ack", &made_up]);
    assert_ne!(h.key("stranger"), h.key("holder"));
    let sent = h.reply("stranger", "j1", r#"{"value": "forged"}"#, None);
    assert!(results(&sent, "c").is_empty(), "{sent:?}");
    let sent = h.reply("guesser", "j1", r#"{"value": "guessed"}"#, None);
    assert!(results(&sent, "c").is_empty(), "{sent:?}");
    running(&mut h, "stranger", &["j1"]);
    assert_eq!(h.r.stats().foreign_claims, 3);
    assert_eq!(h.r.stats().adopted, 0);
    assert_eq!(h.r.inflight_count(), 1, "still on the holder");
    // The holder is lost: j1 waits in its queue; a stranger cannot take it
    // out either.
    kbye(&mut h, "holder");
    assert_eq!(h.r.buffered_count(), 1);
    let sent = h.reply("stranger", "j1", r#"{"value": "forged"}"#, None);
    assert!(results(&sent, "c").is_empty(), "{sent:?}");
    assert_eq!(h.r.buffered_count(), 1);
    // The holder's job manager, reconnected with its key, adopts it and
    // its REPLY is the result.
    h.reconnect("holder", "holder-again", &["job-ack"]);
    assert_eq!(h.key("holder-again"), h.key("holder"), "the key is kept");
    running(&mut h, "holder-again", &["j1"]);
    assert_eq!(h.r.stats().adopted, 1);
    let sent = h.reply("holder-again", "j1", r#"{"value": "real"}"#, None);
    let rs = results(&sent, "c");
    assert_eq!(rs.len(), 1, "{sent:?}");
    assert_eq!(rs[0].payload, br#"{"value": "real"}"#);
}

/// Keys come from the driver's secret and a counter: one per registration
/// without a key, never the same twice, different under another secret;
/// not shown among the worker's features.
#[test]
fn take_back_keys_are_made_from_the_drivers_secret_and_not_shown() {
    let mut a = H::new();
    a.inform("w1", "", &["job-ack"]);
    a.inform("w2", "", &["job-ack"]);
    assert_ne!(a.key("w1"), a.key("w2"));
    let mut b = H::with(Config {
        take_back_secret: [7; 32],
        ..Config::default()
    });
    b.inform("w1", "", &["job-ack"]);
    assert_ne!(a.key("w1"), b.key("w1"));
    let mut again = H::new();
    again.inform("w1", "", &["job-ack"]);
    assert_eq!(a.key("w1"), again.key("w1"), "the core is deterministic");
    a.reconnect("w1", "w3", &["job-ack"]);
    let w3 = a.r.pool.get(a.r.pool.id_of(b"w3").unwrap()).unwrap();
    assert_eq!(w3.features, vec!["job-ack".to_string()]);
    // a 0.3.13 job manager gets no key (its one-frame ACK)
    let sent = a.inform("py", r#"[[10, "default"]]"#, &[]);
    assert!(!a.keys.contains_key("py"), "{sent:?}");
}
