//! The timer table (`router/timers.rs`) on the fake clock: the liveness
//! deadline follows the quietest worker, a sweep removes the dead ones
//! and no other, only due timers fire.

use super::*;
use crate::router::timers::{Timer, TIMERS};

/// `n` workers, one registered every millisecond from `h.now`.
fn staggered(h: &mut H, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            let id = format!("w{i}");
            h.inform(&id, "", &["job-ack"]);
            h.now += us(1_000);
            id
        })
        .collect()
}

#[test]
fn the_liveness_deadline_follows_the_quietest_worker_and_a_sweep_takes_only_the_dead() {
    let mut h = H::new();
    let limit = h.r.liveness().silence_limit();
    let t0 = h.now;
    let ids = staggered(&mut h, 300);
    let dead_at = |t: Duration| t + limit + us(1);
    assert_eq!(h.r.deadline(Timer::Liveness), Some(dead_at(t0)));
    // The quietest speaks: the next one is the quietest.
    h.heartbeat(&ids[0]);
    assert_eq!(h.r.deadline(Timer::Liveness), Some(dead_at(t0 + us(1_000))));
    // At w150's deadline, w1..=w150 are dead; w0 (heard later) and the
    // rest live.
    h.now = dead_at(t0 + us(150_000));
    assert!(h.r.poll_timeout().is_some_and(|t| t <= h.now));
    h.tick();
    assert_eq!(h.r.worker_count(), 300 - 150);
    assert!(h.r.pool.id_of(ids[0].as_bytes()).is_some());
    assert!(h.r.pool.id_of(ids[150].as_bytes()).is_none());
    assert!(h.r.pool.id_of(ids[151].as_bytes()).is_some());
    assert_eq!(
        h.r.deadline(Timer::Liveness),
        Some(dead_at(t0 + us(151_000)))
    );
}

#[test]
fn only_due_timers_fire_and_poll_timeout_is_the_earliest_deadline() {
    let mut h = H::new();
    worker(&mut h, "w1", "", 1);
    h.tick();
    // Heartbeat sent; nothing due until the next one.
    let next = h.r.poll_timeout().expect("peers: timed");
    let earliest = TIMERS.into_iter().filter_map(|t| h.r.deadline(t)).min();
    assert_eq!(Some(next), earliest);
    assert_eq!(h.r.deadline(Timer::Heartbeat), Some(next));
    h.now = next - us(1);
    assert!(h.tick().is_empty(), "nothing is due yet");
    h.now = next;
    let sent = h.tick();
    assert!(
        sent.iter()
            .all(|(s, to, m)| *s == Backend && to == "w1" && m.command.name() == "HEARTBEAT"),
        "{sent:?}"
    );
    assert_eq!(sent.len(), 1);
}
