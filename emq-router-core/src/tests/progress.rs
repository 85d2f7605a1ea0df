//! Job progress (`router/progress.rs`) on the fake clock: the last report
//! of a running job, shown by the job lookup; rate-limited; only from the
//! worker that runs it; gone with a new delivery.

use super::*;
use emqp_proto::Progress;
use serde_json::{json, Value};

fn progress(h: &mut H, worker: &str, msgid: &str, percent: u8, message: &str) {
    let p = Progress {
        orig_msgid: msgid.into(),
        percent,
        message: message.into(),
    };
    let sent = h.msg(Backend, worker, "prog", Command::Progress(p));
    assert!(sent.is_empty(), "PROGRESS is not answered: {sent:?}");
}

/// The job lookup's `progress`, or Null.
fn shown(h: &mut H, msgid: &str) -> Value {
    let req = json!({"op": "job", "msgid": msgid});
    let frames = crate::router::admin_request("adm-1", &req).encode_routed(b"adm".to_vec());
    let sent = h.frames(Admin, frames);
    let m = to(&sent, Admin, "adm");
    let Command::Reply(r) = &m[0].command else {
        panic!("no REPLY: {sent:?}")
    };
    let v: Value = serde_json::from_slice(&r.payload).unwrap();
    assert_eq!(v["ok"], true, "{v}");
    v["job"]["progress"].clone()
}

#[test]
fn the_last_report_of_a_running_job_is_shown_by_the_lookup() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 1);
    h.request("c", "j1", "default", "");
    assert_eq!(shown(&mut h, "j1"), Value::Null, "nothing reported yet");
    progress(&mut h, "w1", "j1", 10, "starting");
    let p = shown(&mut h, "j1");
    assert_eq!(
        (p["percent"].as_u64(), p["message"].as_str()),
        (Some(10), Some("starting"))
    );
    h.now += SECOND;
    progress(&mut h, "w1", "j1", 60, "");
    assert_eq!(shown(&mut h, "j1")["percent"], 60);
    assert_eq!(shown(&mut h, "j1")["message"], "");
}

#[test]
fn reports_closer_than_the_interval_are_dropped_except_100_percent() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 1);
    h.request("c", "j1", "default", "");
    progress(&mut h, "w1", "j1", 10, "a");
    h.now += PROGRESS_MIN_INTERVAL / 2;
    progress(&mut h, "w1", "j1", 20, "b");
    assert_eq!(shown(&mut h, "j1")["percent"], 10, "dropped: too soon");
    h.now += PROGRESS_MIN_INTERVAL / 2;
    progress(&mut h, "w1", "j1", 30, "c");
    assert_eq!(
        shown(&mut h, "j1")["percent"],
        30,
        "kept: the interval passed"
    );
    progress(&mut h, "w1", "j1", 100, "done");
    assert_eq!(
        shown(&mut h, "j1")["percent"],
        100,
        "100 % is never dropped"
    );
}

#[test]
fn only_the_worker_running_the_job_reports_and_a_redelivery_starts_from_nothing() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 1);
    worker(&mut h, "w2", "", 0);
    h.request("c", "j1", "default", "");
    progress(&mut h, "w2", "j1", 50, "not mine");
    progress(&mut h, "w1", "j1", 40, "mine");
    assert_eq!(shown(&mut h, "j1")["message"], "mine");
    // w1 leaves: the job is redelivered to w2, and its progress is gone.
    h.ready("w2");
    h.msg(Backend, "w1", "k", Command::Kbye);
    assert_eq!(h.r.inflight_count(), 1);
    assert_eq!(shown(&mut h, "j1"), Value::Null);
    h.now += SECOND;
    progress(&mut h, "w2", "j1", 5, "again");
    assert_eq!(shown(&mut h, "j1")["percent"], 5);
}

#[test]
fn a_long_message_is_cut_at_a_char_boundary() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 1);
    h.request("c", "j1", "default", "");
    let long = "é".repeat(PROGRESS_MESSAGE_MAX);
    progress(&mut h, "w1", "j1", 1, &long);
    let kept = shown(&mut h, "j1")["message"].as_str().unwrap().to_string();
    assert_eq!(kept.len(), PROGRESS_MESSAGE_MAX);
    assert!(long.starts_with(&kept));
}

use crate::router::progress::{PROGRESS_MESSAGE_MAX, PROGRESS_MIN_INTERVAL};
