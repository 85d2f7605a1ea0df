//! The read model (`router/snapshot.rs`) as admin STATUS / ROUTER_SHOW_* and
//! the metrics render it.

use super::*;

// ----- admin and shutdown ---------------------------------------------------

#[test]
fn admin_status_has_the_0_3_13_fields_and_ours() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 1);
    h.request("c", "a", "default", "");
    h.request("c", "b", "default", "");
    h.now += 2 * SECOND;
    h.reply("w1", "a", "{}", None);
    h.request("c", "c", "default", "");
    let v = admin(&mut h, Command::Status);
    for k in [
        "inflight_messages_by_queue",
        "latency_messages_by_queue",
        "max_latency_messages_by_queue",
        "waiting_messages_by_queue",
        "processed_messages_by_queue",
        "processed_messages_by_worker",
        "dead_letter",
        "inflight_messages_by_worker",
        "counters",
    ] {
        assert!(v.get(k).is_some(), "missing {k}: {v}");
    }
    assert_eq!(v["inflight_messages_by_queue"]["default"], 2);
    assert_eq!(v["waiting_messages_by_queue"]["default"], 2);
    assert_eq!(v["max_latency_messages_by_queue"]["default"], 2000);
    assert_eq!(v["latency_messages_by_queue"]["default"], 1000);
    assert_eq!(v["processed_messages_by_queue"]["default"], 1);
    assert_eq!(v["processed_messages_by_worker"]["w1"], 1);
    assert_eq!(v["inflight_messages_by_worker"]["w1"], 0);
    assert_eq!(v["counters"]["accepted"], 3);
    assert_eq!(v["dead_letter"]["count"], 0);
}

#[test]
fn admin_show_workers_and_schedulers() {
    let mut h = H::new();
    worker(&mut h, "w1", r#"[[10, "default"], [15, "email"]]"#, 2);
    sched(&mut h, "s1");
    let v = admin(&mut h, Command::RouterShowWorkers);
    let w = &v["connected_workers"]["w1"];
    assert_eq!(
        w["queues"],
        serde_json::json!([[10, "default"], [15, "email"]])
    );
    assert_eq!(w["available_slots"], 2);
    assert!(w["hb"].is_number());
    assert_eq!(
        v["connected_queues"]["email"],
        serde_json::json!([[15, "w1"]])
    );
    h.msg(Backend, "w1", "k", Command::Kbye);
    let v = admin(&mut h, Command::RouterShowWorkers);
    assert_eq!(v["connected_queues"]["default"], serde_json::json!([]));
    let v = admin(&mut h, Command::RouterShowSchedulers);
    assert!(v["connected_schedulers"]["s1"].is_object());
    // anything else is ignored
    assert!(h.msg(Admin, "adm", "x", Command::Ready).is_empty());
}

// ----- metrics ----------------------------------------------------------------

#[test]
fn metrics_count_per_queue_and_the_latency_histogram() {
    let mut h = H::new();
    worker(&mut h, "w1", r#"[[10, "default"], [5, "mail"]]"#, 1);
    h.request("c", "j1", "default", "");
    h.now += us(3_000); // 3 ms
    h.reply("w1", "j1", "{}", Some(ResultStatus::Ok));
    // Waiting 1 ms for the worker, then a 2 ms run.
    h.request("c", "j0", "default", "");
    h.now += us(1_000);
    h.ready("w1");
    h.now += us(2_000);
    h.reply("w1", "j0", "{}", Some(ResultStatus::Ok));
    h.ready("w1");
    h.request("c", "j2", "mail", "retry-count:1");
    h.reply("w1", "j2", "{}", Some(ResultStatus::Failed));
    h.ready("w1");
    h.request("c", "j3", "mail", "");
    h.msg(Backend, "w1", "k", Command::Kbye);
    let text = crate::metrics::render(&h.r.snapshot(h.now));
    for line in [
        r#"emq_jobs_processed_total{queue="default"} 2"#,
        r#"emq_jobs_started_total{queue="default"} 2"#,
        r#"emq_jobs_started_total{queue="mail"} 2"#,
        r#"emq_job_run_seconds_bucket{queue="default",le="0.001"} 0"#,
        r#"emq_job_run_seconds_bucket{queue="default",le="0.0025"} 1"#,
        r#"emq_job_run_seconds_bucket{queue="default",le="0.005"} 2"#,
        r#"emq_job_run_seconds_count{queue="default"} 2"#,
        "# TYPE emq_job_run_seconds histogram",
        r#"emq_jobs_processed_total{queue="mail"} 0"#,
        r#"emq_jobs_retried_total{queue="mail"} 1"#,
        r#"emq_jobs_redelivered_total{queue="mail"} 1"#,
        r#"emq_queue_depth{queue="mail"} 1"#,
        r#"emq_queue_depth{queue="default"} 0"#,
        r#"emq_queue_retry_waiting{queue="mail"} 1"#,
        r#"emq_job_latency_seconds_bucket{queue="default",le="0.0025"} 0"#,
        r#"emq_job_latency_seconds_bucket{queue="default",le="0.005"} 2"#,
        r#"emq_job_latency_seconds_bucket{queue="default",le="+Inf"} 2"#,
        r#"emq_job_latency_seconds_count{queue="default"} 2"#,
        "emq_connected_workers 0",
        "# TYPE emq_job_latency_seconds histogram",
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
    // Admin's processed count keeps its meaning (finished jobs).
    let v = admin(&mut h, Command::Status);
    assert_eq!(v["processed_messages_by_queue"]["default"], 2, "{v}");
}

#[test]
fn latency_histogram_buckets_are_cumulative_and_bounded() {
    let mut hist = crate::data::Histogram::default();
    for us in [50, 100, 101, 60_000_000, 60_000_001] {
        hist.observe(us);
    }
    let c = hist.cumulative();
    assert_eq!(c[0], 2, "≤ 100 µs");
    assert_eq!(c[1], 3);
    assert_eq!(*c.last().unwrap(), 4, "≤ 60 s");
    assert_eq!(hist.count, 5, "+Inf");
}
