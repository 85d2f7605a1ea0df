//! Human-readable output: aligned tables, `key: value` views, times as
//! ages (`3m12s ago`, `in 40s`). Pure functions of an answer and the
//! current unix time in milliseconds, so tests pin every byte.
//!
//! Values the router may leave out or send as `null` show as `-`; keys this
//! emq-cli does not know are still shown in a job view, as JSON.

use serde_json::Value;

use emqp_proto::admin::AdminOp;

/// Column alignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// A table: a header row, then rows, columns two spaces apart, no
/// trailing blanks.
#[derive(Debug, Clone)]
pub struct Table {
    head: Vec<(&'static str, Align)>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(head: &[(&'static str, Align)]) -> Table {
        Table {
            head: head.to_vec(),
            rows: Vec::new(),
        }
    }

    /// Add a row (missing cells are blank, extra cells dropped).
    pub fn row(&mut self, mut cells: Vec<String>) {
        cells.resize(self.head.len(), String::new());
        self.rows.push(cells);
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn render(&self) -> String {
        let width = |s: &str| s.chars().count();
        let mut widths: Vec<usize> = self.head.iter().map(|(h, _)| width(h)).collect();
        for r in &self.rows {
            for (w, c) in widths.iter_mut().zip(r) {
                *w = (*w).max(width(c));
            }
        }
        let mut out = String::new();
        let head: Vec<String> = self.head.iter().map(|(h, _)| h.to_string()).collect();
        for cells in std::iter::once(&head).chain(&self.rows) {
            let mut line = String::new();
            for (i, c) in cells.iter().enumerate() {
                if i > 0 {
                    line.push_str("  ");
                }
                let pad = widths[i] - width(c);
                if self.head[i].1 == Align::Right {
                    line.extend(std::iter::repeat_n(' ', pad));
                    line.push_str(c);
                } else {
                    line.push_str(c);
                    line.extend(std::iter::repeat_n(' ', pad));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// `key: value` lines with the values aligned.
#[derive(Debug, Clone, Default)]
pub struct KeyValues(Vec<(String, String)>);

impl KeyValues {
    pub fn push(&mut self, key: impl Into<String>, value: impl Into<String>) {
        self.0.push((key.into(), value.into()));
    }

    pub fn render(&self) -> String {
        let w = self
            .0
            .iter()
            .map(|(k, _)| k.chars().count())
            .max()
            .unwrap_or(0);
        let mut out = String::new();
        for (k, v) in &self.0 {
            let pad = w - k.chars().count();
            let line = format!("{k}:{} {v}", " ".repeat(pad));
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// A duration as people read it: `850ms`, `12s`, `3m12s`, `2h05m`, `3d04h`.
pub fn age(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0 => format!("{ms}ms"),
        1..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        3600..=86_399 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d{:02}h", s / 86_400, s % 86_400 / 3600),
    }
}

/// A unix time relative to `now_ms`: `3m12s ago`, `in 40s`.
pub fn relative(now_ms: u64, t_ms: u64) -> String {
    if t_ms <= now_ms {
        format!("{} ago", age(now_ms - t_ms))
    } else {
        format!("in {}", age(t_ms - now_ms))
    }
}

/// A JSON value in a cell: text as is, `null` as `-`, booleans as yes/no,
/// anything else as compact JSON.
pub fn cell(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => "-".into(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Bool(b)) => yes_no(*b).into(),
        Some(other) => other.to_string(),
    }
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

/// Text on one line (control characters as spaces), cut to `max`
/// characters with `…`.
pub fn one_line(s: &str, max: usize) -> String {
    let flat: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if flat.chars().count() <= max {
        flat
    } else {
        let mut t: String = flat.chars().take(max.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

fn u64_of(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(Value::as_u64)
}

fn num(v: &Value, key: &str) -> String {
    cell(v.get(key))
}

/// A count in a table: absent or `null` is none of them, 0 (the router
/// leaves zeros out of its per-queue maps).
fn count(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => "0".into(),
        other => cell(other),
    }
}

fn ms_age(v: &Value, key: &str) -> String {
    match u64_of(v, key) {
        Some(ms) => age(ms),
        None => "-".into(),
    }
}

fn ms_ago(v: &Value, key: &str, now_ms: u64) -> String {
    match u64_of(v, key) {
        Some(t) => relative(now_ms, t),
        None => "-".into(),
    }
}

fn list<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// A 0.3.13 queue list `[[weight, name], ...]` as `name(weight),...`.
fn queue_list(v: Option<&Value>) -> String {
    let Some(items) = v.and_then(Value::as_array) else {
        return cell(v);
    };
    let names: Vec<String> = items
        .iter()
        .map(|q| match q.as_array().map(Vec::as_slice) {
            Some([w, name]) => format!("{}({})", cell(Some(name)), cell(Some(w))),
            _ => cell(Some(q)),
        })
        .collect();
    names.join(",")
}

/// An error value as `kind: message` when it has that shape (a result's
/// `{"error": {...}}`, or the error object itself), else compact JSON.
fn error_text(v: Option<&Value>) -> String {
    let Some(v) = v.filter(|v| !v.is_null()) else {
        return "-".into();
    };
    let inner = v.get("error").filter(|e| e.is_object()).unwrap_or(v);
    match (
        inner.get("kind").and_then(Value::as_str),
        inner.get("message").and_then(Value::as_str),
    ) {
        (Some(k), Some(m)) => format!("{k}: {m}"),
        (Some(k), None) => k.to_string(),
        _ => cell(Some(v)),
    }
}

/// The output of a successful answer to `op`. A 0.3.13 answer (STATUS,
/// ROUTER_SHOW_WORKERS, ROUTER_SHOW_SCHEDULERS) is told apart by its keys.
pub fn render(op: &AdminOp, answer: &Value, now_ms: u64) -> String {
    match op {
        AdminOp::Status => status(answer),
        AdminOp::Queues => queues(answer),
        AdminOp::Workers if answer.get("connected_workers").is_some() => workers_0313(answer),
        AdminOp::Workers => workers(answer),
        AdminOp::Schedules if answer.get("connected_schedulers").is_some() => {
            schedulers_0313(answer)
        }
        AdminOp::Schedules => schedules(answer, now_ms),
        AdminOp::Job { .. } => job_view(answer.get("job").unwrap_or(&Value::Null), now_ms),
        AdminOp::Jobs(_) => jobs(answer, now_ms),
        AdminOp::Workflow { .. } => {
            workflow(answer.get("workflow").unwrap_or(&Value::Null), now_ms)
        }
        AdminOp::Batch { .. } => batch(answer.get("batch").unwrap_or(&Value::Null)),
        AdminOp::Cancel { .. } if answer.get("jobs").is_some() => cancelled_group(answer),
        AdminOp::Cancel { msgid } => {
            // The router's msgid: the whole one when a prefix was typed.
            let msgid = answer.get("msgid").and_then(Value::as_str).unwrap_or(msgid);
            let state = cell(answer.get("state"));
            let was = cell(answer.get("was"));
            if state == "cancelling" {
                format!(
                    "{msgid}: cancelling (was {was}): its job manager stops it; \
                     `emq-cli job {msgid}` shows when it ended\n"
                )
            } else {
                format!("{msgid}: {state} (was {was})\n")
            }
        }
        AdminOp::Dead(_) => dead(answer, now_ms),
        AdminOp::DeadRetry(_) => {
            let mut s = format!("retried {} dead letter(s)\n", num(answer, "retried"));
            if let Some(n) = u64_of(answer, "skipped_msgid_in_use").filter(|n| *n > 0) {
                s.push_str(&format!(
                    "skipped {n}: an unfinished job has the same msgid\n"
                ));
            }
            s
        }
        AdminOp::DeadDiscard(_) => {
            format!("discarded {} dead letter(s)\n", num(answer, "discarded"))
        }
        AdminOp::Requeue { .. } => {
            let msgid = cell(answer.get("msgid"));
            format!(
                "{msgid}: queued again (was {}); `emq-cli job {msgid}` follows it\n",
                cell(answer.get("was"))
            )
        }
        AdminOp::Pause { queue } | AdminOp::Resume { queue } => {
            let paused = answer.get("paused").and_then(Value::as_bool);
            let what = match paused {
                Some(true) => "paused: it accepts and buffers jobs, and dispatches none",
                Some(false) => "resumed",
                None => "-",
            };
            format!("queue {queue} {what}\n")
        }
        AdminOp::Purge { queue } => format!(
            "purged {} waiting job(s) of queue {queue}\n",
            num(answer, "purged")
        ),
        AdminOp::Drain { worker } | AdminOp::Undrain { worker } => {
            match answer.get("draining").and_then(Value::as_bool) {
                Some(true) => {
                    format!("worker {worker} draining: it finishes its jobs and gets no new ones\n")
                }
                _ => format!("worker {worker} undrained: it gets jobs again\n"),
            }
        }
        AdminOp::Unschedule { id } => match answer.get("removed") {
            Some(Value::String(r)) => format!("removed schedule {r}\n"),
            _ => format!("removed schedule {id}\n"),
        },
        AdminOp::Shutdown => "the router is shutting down\n".into(),
        AdminOp::LimitsSet(a) => {
            format!("queue {}: limits {}\n", a.queue, cell(answer.get("text")))
        }
        AdminOp::LimitsShow { .. } => limits(answer),
        AdminOp::LimitsClear { queue } => format!("queue {queue}: no limits\n"),
    }
}

/// `limits-show`: per queue its policy and figures, then its keys.
fn limits(v: &Value) -> String {
    let queues = list(v, "limits");
    if queues.is_empty() {
        return "no flow-control policies\n".into();
    }
    let mut out = String::new();
    for q in queues {
        out.push_str(&format!(
            "queue {}: {}\n  running {}, waiting {}, held by a limit {}, throttled {}, \
             presumed running {}, active keys {}\n",
            cell(q.get("queue")),
            cell(q.get("text")),
            count(q.get("running")),
            count(q.get("waiting")),
            count(q.get("limited")),
            count(q.get("throttled")),
            count(q.get("presumed")),
            count(q.get("active_keys")),
        ));
        let mut t = Table::new(&[
            ("KEY", Align::Left),
            ("RUNNING", Align::Right),
            ("WAITING", Align::Right),
            ("HELD", Align::Left),
        ]);
        for k in list(q, "keys") {
            let name = match k.get("key").and_then(Value::as_str) {
                Some("") => "(no key)".to_string(),
                _ => cell(k.get("key")),
            };
            t.row(vec![
                name,
                count(k.get("running")),
                count(k.get("waiting")),
                cell(k.get("blocked")),
            ]);
        }
        if !t.is_empty() {
            for line in t.render().lines() {
                out.push_str("  ");
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

/// STATUS (emq's, with `version` when asked through ADMIN, or 0.3.13's).
fn status(v: &Value) -> String {
    let mut kv = KeyValues::default();
    // The counters get a block of their own: their long names would push
    // the values of the short keys far right.
    let mut counters = KeyValues::default();
    let emq = v.get("counters").is_some_and(Value::is_object);
    if emq {
        kv.push("router", format!("emq {}", cell(v.get("version"))));
        kv.push(
            "shutting down",
            yes_no(
                v.get("shutting_down")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            ),
        );
        if let Some(j) = v.get("journal") {
            let mut s = cell(j.get("state"));
            if let Some(e) = j.get("error").filter(|e| !e.is_null()) {
                s.push_str(&format!(
                    " ({}; {} refused)",
                    cell(Some(e)),
                    num(j, "refused")
                ));
            }
            if let Some(h) = u64_of(j, "held_sends").filter(|h| *h > 0) {
                s.push_str(&format!(", {h} sends held"));
            }
            kv.push("journal", s);
        }
        if let Some(r) = v.get("results").filter(|r| r.is_object()) {
            let mut s = format!("{} held", num(r, "held"));
            if let Some(u) = u64_of(r, "unreachable_clients").filter(|u| *u > 0) {
                s.push_str(&format!(", {u} client(s) unreachable"));
            }
            if let Some(d) = u64_of(r, "dropped").filter(|d| *d > 0) {
                s.push_str(&format!(", {d} dropped"));
            }
            kv.push("results", s);
        }
        kv.push("retry waiting", num(v, "retry_waiting_messages"));
        kv.push(
            "dead letters",
            cell(v.get("dead_letter").and_then(|d| d.get("count"))),
        );
        if let Some(Value::Object(c)) = v.get("counters") {
            for (k, n) in c {
                counters.push(k.replace('_', " "), cell(Some(n)));
            }
        }
    } else {
        kv.push("router", "EventMQ 0.3.13 (no control plane)");
    }
    let mut out = kv.render();
    if !counters.0.is_empty() {
        out.push('\n');
        out.push_str(&counters.render());
    }
    // Per-queue figures: each column only when the router sends its map.
    // emq's processed_messages_by_queue counts every finished job (done,
    // failed, dead-lettered: `queues`' FINISHED); 0.3.13's its own way.
    let finished = if emq { "FINISHED" } else { "PROCESSED" };
    let columns: [(&'static str, &str, bool); 6] = [
        ("WAITING", "waiting_messages_by_queue", false),
        ("UNFINISHED", "inflight_messages_by_queue", false),
        ("RUNNING", "dispatched_messages_by_queue", false),
        (finished, "processed_messages_by_queue", false),
        ("MEAN AGE", "latency_messages_by_queue", true),
        ("MAX AGE", "max_latency_messages_by_queue", true),
    ];
    let present: Vec<_> = columns
        .iter()
        .filter(|(_, key, _)| v.get(*key).is_some_and(Value::is_object))
        .collect();
    let mut names = std::collections::BTreeSet::new();
    for (_, key, _) in &present {
        if let Some(Value::Object(m)) = v.get(*key) {
            names.extend(m.keys().cloned());
        }
    }
    let mut head = vec![("QUEUE", Align::Left)];
    head.extend(present.iter().map(|(h, _, _)| (*h, Align::Right)));
    let mut t = Table::new(&head);
    for name in &names {
        let mut row = vec![name.clone()];
        for (_, key, is_ms) in &present {
            let x = v.get(*key).and_then(|m| m.get(name));
            row.push(match (x.and_then(Value::as_u64), is_ms) {
                (Some(ms), true) => age(ms),
                (_, false) => count(x),
                (None, true) => "-".into(),
            });
        }
        t.row(row);
    }
    out.push('\n');
    if t.is_empty() {
        out.push_str("no queue has jobs\n");
    } else {
        out.push_str(&t.render());
    }
    out
}

fn queues(v: &Value) -> String {
    let mut t = Table::new(&[
        ("QUEUE", Align::Left),
        ("DEPTH", Align::Right),
        ("IN-FLIGHT", Align::Right),
        ("RETRYING", Align::Right),
        ("DELAYED", Align::Right),
        ("OLDEST", Align::Right),
        ("PAUSED", Align::Left),
        ("FINISHED", Align::Right),
        ("DONE", Align::Right),
        ("FAILED", Align::Right),
        ("DEAD", Align::Right),
        ("WORKERS", Align::Right),
    ]);
    for q in list(v, "queues") {
        t.row(vec![
            cell(q.get("name")),
            count(q.get("depth")),
            count(q.get("inflight")),
            count(q.get("retry_waiting")),
            count(q.get("delayed")),
            match u64_of(q, "oldest_age_ms") {
                Some(0) | None => "-".into(),
                Some(ms) => age(ms),
            },
            cell(q.get("paused")),
            count(q.get("finished")),
            count(q.get("processed")),
            count(q.get("failed")),
            count(q.get("dead_lettered")),
            count(q.get("workers")),
        ]);
    }
    if t.is_empty() {
        "no queues\n".into()
    } else {
        t.render()
    }
}

fn workers(v: &Value) -> String {
    let mut t = Table::new(&[
        ("NAME", Align::Left),
        ("WORKER", Align::Left),
        ("PID", Align::Right),
        ("VERSION", Align::Left),
        ("QUEUES", Align::Left),
        ("CONCURRENCY", Align::Right),
        ("CREDIT", Align::Right),
        ("IN-FLIGHT", Align::Right),
        ("LONGEST", Align::Right),
        ("CONNECTED", Align::Right),
        ("DRAINING", Align::Left),
        ("FEATURES", Align::Left),
    ]);
    for w in list(v, "workers") {
        let longest = list(w, "running")
            .iter()
            .filter_map(|r| u64_of(r, "running_ms"))
            .max();
        let features = match w.get("features").and_then(Value::as_array) {
            Some(f) => f
                .iter()
                .map(|x| cell(Some(x)))
                .collect::<Vec<_>>()
                .join(","),
            None => cell(w.get("features")),
        };
        t.row(vec![
            cell(w.get("name")),
            cell(w.get("identity")),
            cell(w.get("pid")),
            cell(w.get("version")),
            queue_list(w.get("queues")),
            cell(w.get("concurrency")),
            num(w, "credit"),
            num(w, "inflight"),
            longest.map_or("-".into(), age),
            ms_age(w, "connected_ms"),
            cell(w.get("draining")),
            features,
        ]);
    }
    if t.is_empty() {
        "no workers connected\n".into()
    } else {
        t.render()
    }
}

/// ROUTER_SHOW_WORKERS of 0.3.13: `connected_workers{id: {queues, hb,
/// available_slots}}` (`hb` is the router's monotonic clock: not shown).
fn workers_0313(v: &Value) -> String {
    let mut t = Table::new(&[
        ("WORKER", Align::Left),
        ("QUEUES", Align::Left),
        ("CREDIT", Align::Right),
    ]);
    if let Some(Value::Object(m)) = v.get("connected_workers") {
        for (id, w) in m {
            t.row(vec![
                id.clone(),
                queue_list(w.get("queues")),
                num(w, "available_slots"),
            ]);
        }
    }
    if t.is_empty() {
        "no workers connected\n".into()
    } else {
        t.render()
    }
}

/// An interval in seconds as JSON (`60`, `1.5`) as `60s`, `1.5s`.
fn every(secs: &Value) -> String {
    match secs.as_f64() {
        Some(s) if s >= 60.0 && s.fract() == 0.0 => age((s * 1000.0) as u64),
        Some(_) => format!("{secs}s"),
        None => cell(Some(secs)),
    }
}

fn schedules(v: &Value, now_ms: u64) -> String {
    let mut t = Table::new(&[
        ("ID", Align::Left),
        ("QUEUE", Align::Left),
        ("WHEN", Align::Left),
        ("NEXT", Align::Left),
        ("LAST", Align::Left),
        ("RUNS", Align::Right),
        ("JOB", Align::Left),
    ]);
    for s in list(v, "schedules") {
        let when = match (s.get("interval_secs"), s.get("cron")) {
            (Some(i), _) if !i.is_null() => format!("every {}", every(i)),
            (_, Some(Value::String(c))) => format!("cron {c}"),
            _ => "-".into(),
        };
        let runs = match u64_of(s, "run_limit") {
            Some(limit) => format!("{}/{limit}", num(s, "run_count")),
            None => num(s, "run_count"),
        };
        t.row(vec![
            cell(s.get("id")),
            cell(s.get("queue")),
            when,
            ms_ago(s, "next_run_ms", now_ms),
            match u64_of(s, "last_run_ms") {
                Some(t) => relative(now_ms, t),
                None => "never".into(),
            },
            runs,
            one_line(&cell(s.get("message")), 48),
        ]);
    }
    if t.is_empty() {
        "no schedules\n".into()
    } else {
        t.render()
    }
}

/// ROUTER_SHOW_SCHEDULERS of 0.3.13: the scheduler peers connected; 0.3.13
/// has no way to list their schedules.
fn schedulers_0313(v: &Value) -> String {
    let mut t = Table::new(&[("SCHEDULER", Align::Left)]);
    if let Some(Value::Object(m)) = v.get("connected_schedulers") {
        for id in m.keys() {
            t.row(vec![id.clone()]);
        }
    }
    let mut out = if t.is_empty() {
        "no scheduler connected\n".to_string()
    } else {
        t.render()
    };
    out.push_str("(an EventMQ 0.3.13 router lists its scheduler peers, not their schedules)\n");
    out
}

fn jobs(v: &Value, now_ms: u64) -> String {
    let mut t = Table::new(&[
        ("MSGID", Align::Left),
        ("QUEUE", Align::Left),
        ("STATE", Align::Left),
        ("ATTEMPTS", Align::Right),
        ("WHEN", Align::Right),
        ("WAITED", Align::Right),
        ("RAN", Align::Right),
        ("WORKER", Align::Left),
        ("PAYLOAD", Align::Left),
    ]);
    for j in list(v, "jobs") {
        let (waited, ran) = waited_ran(j);
        t.row(vec![
            cell(j.get("msgid")),
            cell(j.get("queue")),
            cell(j.get("state")),
            num(j, "attempts"),
            when_listed(j, now_ms),
            waited,
            ran,
            cell(j.get("worker")),
            one_line(&cell(j.get("payload")), 48),
        ]);
    }
    if t.is_empty() {
        "no jobs\n".into()
    } else {
        t.render()
    }
}

/// How long a job waited (accepted → started) and ran (started →
/// finished; a running job's time so far, `3s…`), `-` when it has not
/// started (or the router did not know its start).
fn waited_ran(j: &Value) -> (String, String) {
    let waited = u64_of(j, "waited_ms").map_or("-".into(), age);
    let ran = match (u64_of(j, "ran_ms"), u64_of(j, "running_ms")) {
        (Some(ms), _) => age(ms),
        (None, Some(ms)) => format!("{}…", age(ms)),
        (None, None) => "-".into(),
    };
    (waited, ran)
}

/// A `jobs` row's time, the one its place in the list goes by: a
/// finished job's finish (the router lists those in finishing order),
/// else its acceptance (unfinished ones are in acceptance order).
fn when_listed(j: &Value, now_ms: u64) -> String {
    match (u64_of(j, "finished_at_ms"), u64_of(j, "accepted_at_ms")) {
        (Some(f), _) => format!("finished {}", relative(now_ms, f)),
        (None, Some(a)) => format!("accepted {}", relative(now_ms, a)),
        (None, None) => "-".into(),
    }
}

fn dead(v: &Value, now_ms: u64) -> String {
    let mut t = Table::new(&[
        ("MSGID", Align::Left),
        ("QUEUE", Align::Left),
        ("ATTEMPTS", Align::Right),
        ("REASON", Align::Left),
        ("DIED", Align::Right),
        ("ERROR", Align::Left),
    ]);
    for d in list(v, "dead_letters") {
        t.row(vec![
            cell(d.get("msgid")),
            cell(d.get("queue")),
            num(d, "attempts"),
            cell(d.get("reason")),
            ms_ago(d, "at_ms", now_ms),
            one_line(&error_text(d.get("error")), 60),
        ]);
    }
    if t.is_empty() {
        "no dead letters\n".into()
    } else {
        t.render()
    }
}

/// One job as `key: value` lines, known keys first in a fixed order.
pub fn job_view(job: &Value, now_ms: u64) -> String {
    let Some(m) = job.as_object() else {
        return format!("{}\n", cell(Some(job)));
    };
    let mut kv = KeyValues::default();
    let mut seen: Vec<&str> = Vec::new();
    let mut take = |key: &'static str| -> Option<&Value> {
        seen.push(key);
        m.get(key).filter(|v| !v.is_null())
    };
    let plain: [(&str, &'static str); 4] = [
        ("msgid", "msgid"),
        ("queue", "queue"),
        ("route", "route"),
        ("state", "state"),
    ];
    let queue = m.get("queue").cloned();
    for (label, key) in plain {
        if let Some(x) = take(key) {
            if key == "route" && Some(x) == queue.as_ref() {
                continue;
            }
            kv.push(label, cell(Some(x)));
        }
    }
    if let Some(x) = take("waiting") {
        kv.push("waiting", cell(Some(x)));
    }
    if let Some(x) = take("attempts") {
        kv.push("attempts", cell(Some(x)));
    }
    if let Some(x) = take("headers") {
        kv.push("headers", cell(Some(x)));
    }
    // The job's unique key, and whether it still holds it (`unique.rs`).
    let held = take("unique_held").and_then(Value::as_bool);
    if let Some(k) = take("unique_key").and_then(Value::as_str) {
        let note = match held {
            Some(true) => " (held)",
            Some(false) => " (released)",
            None => "",
        };
        kv.push("unique key", format!("{k}{note}"));
    }
    if let Some(x) = take("client") {
        kv.push("client", cell(Some(x)));
    }
    // A running job's `dispatched_at_ms` is its `started_at_ms`: one line.
    let started = take("started_at_ms").and_then(Value::as_u64);
    let dispatched = take("dispatched_at_ms").and_then(Value::as_u64);
    let times = [
        ("accepted", take("accepted_at_ms").and_then(Value::as_u64)),
        ("started", started.or(dispatched)),
        ("runs", take("run_at_ms").and_then(Value::as_u64)),
        ("finished", take("finished_at_ms").and_then(Value::as_u64)),
    ];
    for (label, t) in times {
        if let Some(t) = t {
            kv.push(label, relative(now_ms, t));
        }
    }
    // Waited (accepted → started) and ran (started → finished), apart.
    if let Some(ms) = take("waited_ms").and_then(Value::as_u64) {
        kv.push("waited", age(ms));
    }
    if let Some(ms) = take("ran_ms").and_then(Value::as_u64) {
        kv.push("ran", age(ms));
    }
    if let Some(ms) = take("running_ms").and_then(Value::as_u64) {
        kv.push("running for", age(ms));
    }
    if let Some(p) = take("progress") {
        kv.push("progress", progress_text(p, now_ms));
    }
    let worker_name = take("worker_name").map(|n| cell(Some(n)));
    if let Some(x) = take("worker") {
        match worker_name {
            Some(n) => kv.push("worker", format!("{n} ({})", cell(Some(x)))),
            None => kv.push("worker", cell(Some(x))),
        }
    }
    if let Some(x) = take("reason") {
        kv.push("reason", cell(Some(x)));
    }
    let last_error = take("last_error").cloned();
    if let Some(x) = &last_error {
        kv.push("last error", error_text(Some(x)));
    }
    // A dead letter's view repeats its last error as `error`, and its
    // finish time as `at_ms`.
    if let Some(x) = take("error") {
        if Some(x) != last_error.as_ref() {
            kv.push("error", error_text(Some(x)));
        }
    }
    take("at_ms");
    let result_cut = take("result_truncated").and_then(Value::as_bool) == Some(true);
    let result = take("result").cloned();
    // A failed job's traceback, as text after the key-value lines: the
    // last error's (a dead letter's, a retried job's), else the result's.
    let traceback = [last_error.as_ref(), m.get("error"), result.as_ref()]
        .into_iter()
        .flatten()
        .find_map(emqp_proto::job::traceback_text);
    match &result {
        Some(x) if x.get("error").is_some_and(Value::is_object) && traceback.is_some() => {
            kv.push("result", format!("failed: {}", error_text(Some(x))))
        }
        Some(x) => kv.push("result", compact(x)),
        None if result_cut => kv.push("result", "(too large to keep)"),
        None => {}
    }
    let payload_cut = take("payload_truncated").and_then(Value::as_bool) == Some(true);
    if let Some(x) = take("payload") {
        let mut p = cell(Some(x)).replace('\n', "\\n");
        if payload_cut {
            p.push_str(" … (cut at 1,000 bytes)");
        }
        kv.push("payload", p);
    }
    let mut rest: Vec<(&String, &Value)> = m
        .iter()
        .filter(|(k, v)| !seen.contains(&k.as_str()) && !v.is_null())
        .collect();
    rest.sort_by(|a, b| a.0.cmp(b.0));
    for (k, v) in rest {
        kv.push(k.clone(), cell(Some(v)));
    }
    let mut text = kv.render();
    if let Some(tb) = traceback {
        text.push_str("traceback:\n");
        for line in tb.lines() {
            text.push_str("  ");
            text.push_str(line);
            text.push('\n');
        }
    }
    text
}

fn compact(v: &Value) -> String {
    match v {
        Value::String(s) => s.replace('\n', "\\n"),
        other => other.to_string(),
    }
}

/// The router's error message from a refusal: `kind: message`.
pub fn refusal(answer: &Value) -> String {
    let e = answer.get("error").unwrap_or(&Value::Null);
    let kind = e.get("kind").and_then(Value::as_str).unwrap_or("error");
    match e.get("message").and_then(Value::as_str) {
        Some(m) if !m.is_empty() => format!("{kind}: {m}"),
        _ => kind.to_string(),
    }
}

/// The answer of `cancel` of a batch or a workflow: counts, and a line
/// per job that could not be cancelled.
fn cancelled_group(answer: &Value) -> String {
    let (what, id) = match (answer.get("batch"), answer.get("workflow")) {
        (Some(b), _) => ("batch", cell(Some(b))),
        (None, w) => ("workflow", cell(w)),
    };
    let jobs = answer
        .get("jobs")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let n = |st: &str| jobs.iter().filter(|j| j["state"] == st).count();
    let failed: Vec<&Value> = jobs.iter().filter(|j| j.get("error").is_some()).collect();
    let mut parts = Vec::new();
    if let Some(nodes) = u64_of(answer, "nodes_cancelled") {
        parts.push(format!("{nodes} waiting node(s) cancelled"));
    }
    if !jobs.is_empty() {
        parts.push(format!("{} job(s) cancelled", n("cancelled")));
        parts.push(format!(
            "{} being stopped by their job managers",
            n("cancelling")
        ));
    }
    if !failed.is_empty() {
        parts.push(format!("{} not cancelled", failed.len()));
    }
    let mut s = format!(
        "{what} {id}: {}: {}\n",
        cell(answer.get("state")),
        parts.join(", ")
    );
    for j in failed {
        s.push_str(&format!(
            "  {}: {}\n",
            cell(j.get("msgid")),
            cell(j.get("error"))
        ));
    }
    s
}

/// A batch: its state and times, a progress bar of its ended jobs with
/// the counts, its callbacks, its first failed jobs.
fn batch(b: &Value) -> String {
    let n = |k: &str| b.get(k).and_then(Value::as_u64).unwrap_or(0);
    let (total, pending) = (n("total"), n("pending"));
    let (succeeded, failed) = (n("succeeded"), n("failed"));
    const WIDTH: u64 = 30;
    let filled = |c: u64| (c * WIDTH).checked_div(total).unwrap_or(0) as usize;
    let (ok_w, failed_w) = (filled(succeeded), filled(failed));
    let rest = (WIDTH as usize).saturating_sub(ok_w + failed_w);
    let mut s = format!(
        "batch {}: {} (opened {}, closed {}, finished {})\n  [{}{}{}] {} of {} ended: \
         {succeeded} succeeded, {failed} failed, {pending} pending\n",
        cell(b.get("batch")),
        cell(b.get("state")),
        cell(b.get("opened_at_unix_ms")),
        cell(b.get("closed_at_unix_ms")),
        cell(b.get("finished_at_unix_ms")),
        "#".repeat(ok_w),
        "x".repeat(failed_w),
        ".".repeat(rest),
        succeeded + failed,
        total,
    );
    if let Some(d) = b.get("description").and_then(Value::as_str) {
        if !d.is_empty() {
            s.push_str(&format!("  description: {d}\n"));
        }
    }
    if let Some(cbs) = b.get("callbacks").and_then(Value::as_object) {
        for (name, c) in cbs {
            s.push_str(&format!(
                "  {name}: {} [{}]\n",
                cell(c.get("msgid")),
                cell(c.get("state"))
            ));
        }
    }
    if let Some(ids) = b.get("failed_ids").and_then(Value::as_array) {
        if !ids.is_empty() {
            let ids: Vec<String> = ids.iter().map(|i| cell(Some(i))).collect();
            s.push_str(&format!("  failed: {}\n", ids.join(" ")));
        }
    }
    s
}

/// A workflow as a tree: every node under the nodes it waits for (a node
/// with several parents under its first, marked with the others), with its
/// state, times (relative to `now_ms`: queued, started, finished, and how
/// long it took) and value or error.
fn workflow(w: &Value, now_ms: u64) -> String {
    let empty = Vec::new();
    let nodes = w.get("nodes").and_then(Value::as_array).unwrap_or(&empty);
    let at = |k: &str, v: &Value| {
        v.get(k)
            .and_then(Value::as_u64)
            .map(|t| relative(now_ms, t))
    };
    let mut s = format!(
        "workflow {}: {} (accepted {}, finished {})\n",
        cell(w.get("workflow")),
        cell(w.get("state")),
        at("accepted_at_unix_ms", w).unwrap_or_else(|| "-".into()),
        at("finished_at_unix_ms", w).unwrap_or_else(|| "-".into()),
    );
    let id_of = |n: &Value| {
        n.get("id")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let after = |n: &Value| -> Vec<String> {
        n.get("after")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let line = |n: &Value, depth: usize, others: &[String]| -> String {
        let mut l = format!(
            "{}{} [{}]",
            "  ".repeat(depth + 1),
            cell(n.get("id")),
            cell(n.get("state"))
        );
        for (key, word) in [
            ("queued_at_unix_ms", "queued"),
            ("started_at_unix_ms", "started"),
            ("finished_at_unix_ms", "finished"),
        ] {
            if let Some(t) = at(key, n) {
                l.push_str(&format!(" {word} {t}"));
            }
        }
        if let Some(ms) = n.get("took_ms").and_then(Value::as_u64) {
            l.push_str(&format!(" took {}", age(ms)));
        }
        if !others.is_empty() {
            l.push_str(&format!(" (also after {})", others.join(", ")));
        }
        if let Some(v) = n.get("value") {
            l.push_str(&format!(" value {v}"));
        }
        if let Some(e) = n.get("error") {
            let e = e.get("error").unwrap_or(e);
            l.push_str(&format!(
                " error {}: {}",
                cell(e.get("kind")),
                cell(e.get("message"))
            ));
        }
        l.push('\n');
        l
    };
    // Depth-first from the roots; each node printed once, under its first
    // parent.
    let mut stack: Vec<(usize, usize)> = nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| after(n).is_empty())
        .map(|(i, _)| (i, 0))
        .rev()
        .collect();
    let mut printed = vec![false; nodes.len()];
    while let Some((i, depth)) = stack.pop() {
        if printed[i] {
            continue;
        }
        printed[i] = true;
        let a = after(&nodes[i]);
        let others: Vec<String> = a.iter().skip(1).cloned().collect();
        s.push_str(&line(&nodes[i], depth, &others));
        let me = id_of(&nodes[i]);
        let kids: Vec<(usize, usize)> = nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| after(n).first() == Some(&me))
            .map(|(j, _)| (j, depth + 1))
            .rev()
            .collect();
        stack.extend(kids);
    }
    s
}

/// A running job's last progress: `42 % half way (reported 3s ago)`.
fn progress_text(p: &Value, now_ms: u64) -> String {
    let mut out = match p.get("percent").and_then(Value::as_u64) {
        Some(n) => format!("{n} %"),
        None => "?".to_string(),
    };
    if let Some(m) = p
        .get("message")
        .and_then(Value::as_str)
        .filter(|m| !m.is_empty())
    {
        out.push(' ');
        out.push_str(m);
    }
    if let Some(t) = p.get("at_ms").and_then(Value::as_u64) {
        out.push_str(&format!(" (reported {})", relative(now_ms, t)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const NOW: u64 = 1_700_000_000_000;

    #[test]
    fn ages_read_like_a_person_would_say_them() {
        assert_eq!(age(0), "0ms");
        assert_eq!(age(850), "850ms");
        assert_eq!(age(1_000), "1s");
        assert_eq!(age(59_999), "59s");
        assert_eq!(age(192_000), "3m12s");
        assert_eq!(age(3_605_000), "1h00m");
        assert_eq!(age(7_500_000), "2h05m");
        assert_eq!(age(273_600_000), "3d04h");
        assert_eq!(relative(NOW, NOW - 192_000), "3m12s ago");
        assert_eq!(relative(NOW, NOW + 40_000), "in 40s");
        assert_eq!(relative(NOW, NOW), "0ms ago");
    }

    #[test]
    fn tables_align_columns_without_trailing_blanks() {
        let mut t = Table::new(&[
            ("NAME", Align::Left),
            ("N", Align::Right),
            ("NOTE", Align::Left),
        ]);
        t.row(vec!["a".into(), "1".into(), "x".into()]);
        t.row(vec!["longer".into(), "1234".into(), String::new()]);
        t.row(vec!["é".into()]);
        assert_eq!(
            t.render(),
            "NAME       N  NOTE\n\
             a          1  x\n\
             longer  1234\n\
             é\n"
        );
    }

    #[test]
    fn cells_and_one_line_text() {
        assert_eq!(cell(None), "-");
        assert_eq!(cell(Some(&Value::Null)), "-");
        assert_eq!(cell(Some(&json!(true))), "yes");
        assert_eq!(cell(Some(&json!(3))), "3");
        assert_eq!(cell(Some(&json!("t"))), "t");
        assert_eq!(cell(Some(&json!({"a": 1}))), r#"{"a":1}"#);
        assert_eq!(one_line("a\nb\tc", 10), "a b c");
        assert_eq!(one_line("abcdef", 4), "abc…");
    }

    #[test]
    fn queues_table() {
        let a = json!({"ok": true, "queues": [
            {"name": "default", "depth": 3, "inflight": 2, "retry_waiting": 0, "delayed": 1,
             "oldest_age_ms": 192000, "paused": false, "finished": 13, "processed": 10, "failed": 1,
             "dead_lettered": 2, "workers": 2},
            {"name": "email", "depth": 0, "inflight": 0, "retry_waiting": 0, "delayed": 0,
             "oldest_age_ms": 0, "paused": true, "processed": 0, "failed": 0, "workers": 0},
            {"name": "sms", "paused": false}
        ]});
        assert_eq!(
            render(&AdminOp::Queues, &a, NOW),
            "QUEUE    DEPTH  IN-FLIGHT  RETRYING  DELAYED  OLDEST  PAUSED  FINISHED  DONE  FAILED  DEAD  WORKERS\n\
             default      3          2         0        1   3m12s  no            13    10       1     2        2\n\
             email        0          0         0        0       -  yes            0     0       0     0        0\n\
             sms          0          0         0        0       -  no             0     0       0     0        0\n"
        );
        assert_eq!(
            render(&AdminOp::Queues, &json!({"ok": true, "queues": []}), NOW),
            "no queues\n"
        );
    }

    #[test]
    fn workers_table_emq_and_0313() {
        let a = json!({"ok": true, "workers": [
            {"identity": "w-1", "queues": [[10, "default"], [5, "email"]], "credit": 1,
             "inflight": 2, "running": [{"msgid": "m", "running_ms": 4000}, {"msgid": "n", "running_ms": 65000}],
             "connected_ms": 7500000, "draining": true, "features": ["job-ack", "cancel"],
             "name": "mail@box1", "pid": 42, "concurrency": 4, "version": "0.1.0"},
            {"identity": "w-2", "queues": [], "credit": 0, "inflight": 0, "running": [],
             "connected_ms": 1000, "draining": false, "features": []}
        ]});
        assert_eq!(
            render(&AdminOp::Workers, &a, NOW),
            "NAME       WORKER  PID  VERSION  QUEUES                CONCURRENCY  CREDIT  IN-FLIGHT  LONGEST  CONNECTED  DRAINING  FEATURES\n\
             mail@box1  w-1      42  0.1.0    default(10),email(5)            4       1          2    1m05s      2h05m  yes       job-ack,cancel\n\
             -          w-2       -  -                                        -       0          0        -         1s  no\n"
        );
        let old = json!({"connected_workers": {"abc": {"queues": [[10, "default"]], "hb": 123.4, "available_slots": 4}},
                         "connected_queues": {"default": [[10, "abc"]]}});
        assert_eq!(
            render(&AdminOp::Workers, &old, NOW),
            "WORKER  QUEUES       CREDIT\nabc     default(10)       4\n"
        );
        assert_eq!(
            render(
                &AdminOp::Workers,
                &json!({"connected_workers": {}, "connected_queues": {}}),
                NOW
            ),
            "no workers connected\n"
        );
    }

    #[test]
    fn status_emq_and_0313() {
        let emq = json!({"ok": true, "version": "0.1.0", "shutting_down": false,
            "journal": {"state": "ok", "held_sends": 0},
            "retry_waiting_messages": 1,
            "dead_letter": {"count": 2, "from_journal": 0, "recent": []},
            "counters": {"accepted": 5, "dead_lettered": 2},
            "waiting_messages_by_queue": {"default": 3},
            "inflight_messages_by_queue": {"default": 4, "email": 1},
            "dispatched_messages_by_queue": {"default": 1},
            "processed_messages_by_queue": {"email": 7},
            "latency_messages_by_queue": {"default": 2500},
            "max_latency_messages_by_queue": {"default": 192000}});
        assert_eq!(
            render(&AdminOp::Status, &emq, NOW),
            "router:        emq 0.1.0\n\
             shutting down: no\n\
             journal:       ok\n\
             retry waiting: 1\n\
             dead letters:  2\n\
             \n\
             accepted:      5\n\
             dead lettered: 2\n\
             \n\
             QUEUE    WAITING  UNFINISHED  RUNNING  FINISHED  MEAN AGE  MAX AGE\n\
             default        3           4        1         0        2s    3m12s\n\
             email          0           1        0         7         -        -\n"
        );
        let failing = json!({"counters": {}, "journal": {"state": "failing", "error": "disk full", "refused": 3, "held_sends": 2}});
        assert!(render(&AdminOp::Status, &failing, NOW)
            .contains("journal:       failing (disk full; 3 refused), 2 sends held\n"));
        let held = json!({"counters": {}, "results": {"held": 7, "bytes": 900,
            "unreachable_clients": 2, "delivered": 1, "resent": 0, "dropped": 3}});
        assert!(render(&AdminOp::Status, &held, NOW)
            .contains("results:       7 held, 2 client(s) unreachable, 3 dropped\n"));
        // 0.3.13's six keys (eventmq/router.py get_status).
        let old = json!({"inflight_messages_by_queue": {}, "latency_messages_by_queue": {},
            "max_latency_messages_by_queue": {}, "waiting_messages_by_queue": {"default": 2},
            "processed_messages_by_queue": {"default": 9}, "processed_messages_by_worker": {"w": 9}});
        assert_eq!(
            render(&AdminOp::Status, &old, NOW),
            "router: EventMQ 0.3.13 (no control plane)\n\
             \n\
             QUEUE    WAITING  UNFINISHED  PROCESSED  MEAN AGE  MAX AGE\n\
             default        2           0          9         -        -\n"
        );
    }

    #[test]
    fn schedules_table_and_0313_schedulers() {
        let a = json!({"ok": true, "schedules": [
            {"id": "s1", "queue": "default", "headers": "", "message": "[\"run\",\n{}]",
             "interval_secs": 1.5, "cron": null, "nohaste": false, "run_limit": 10, "runs_left": 7,
             "next_run_ms": NOW + 1500, "last_run_ms": NOW - 100, "run_count": 3, "created_ms": 0, "updated_ms": 0},
            {"id": "s2", "queue": "reports", "headers": "", "message": "x",
             "interval_secs": null, "cron": "*/5 * * * *", "nohaste": true, "run_limit": null, "runs_left": null,
             "next_run_ms": null, "last_run_ms": null, "run_count": 0, "created_ms": 0, "updated_ms": 0},
            {"id": "s3", "queue": "q", "message": "y", "interval_secs": 3600, "run_count": 1,
             "next_run_ms": NOW + 3_600_000, "last_run_ms": NOW}
        ]});
        assert_eq!(
            render(&AdminOp::Schedules, &a, NOW),
            "ID  QUEUE    WHEN              NEXT      LAST       RUNS  JOB\n\
             s1  default  every 1.5s        in 1s     100ms ago  3/10  [\"run\", {}]\n\
             s2  reports  cron */5 * * * *  -         never         0  x\n\
             s3  q        every 1h00m       in 1h00m  0ms ago       1  y\n"
        );
        let old = json!({"connected_schedulers": {}});
        assert_eq!(
            render(&AdminOp::Schedules, &old, NOW),
            "no scheduler connected\n\
             (an EventMQ 0.3.13 router lists its scheduler peers, not their schedules)\n"
        );
    }

    #[test]
    fn jobs_and_dead_letters_tables() {
        let a = json!({"ok": true, "next_cursor": null, "scanned": 2, "jobs": [
            {"msgid": "m1", "queue": "default", "route": "default", "state": "in-flight",
             "attempts": 1, "accepted_at_ms": NOW - 12_000, "worker": "w-1",
             "waited_ms": 2_000, "running_ms": 10_000,
             "payload": "[\"call\", {\"handler\": \"echo\"}]"},
            {"msgid": "m2", "queue": "email", "state": "queued", "attempts": 0,
             "accepted_at_ms": NOW - 192_000, "payload": "x"},
            {"msgid": "m3", "queue": "email", "state": "done", "attempts": 1,
             "accepted_at_ms": NOW - 600_000, "finished_at_ms": NOW - 5_000, "payload": "y",
             "started_at_ms": NOW - 65_000, "waited_ms": 535_000, "ran_ms": 60_000}
        ]});
        let jobs = AdminOp::Jobs(Default::default());
        // Issue 32: the time shown is the one the list is ordered by (a
        // finished job's finish), not always the acceptance.
        assert_eq!(
            render(&jobs, &a, NOW),
            "MSGID  QUEUE    STATE      ATTEMPTS                WHEN  WAITED    RAN  WORKER  PAYLOAD\n\
             m1     default  in-flight         1    accepted 12s ago      2s   10s…  w-1     [\"call\", {\"handler\": \"echo\"}]\n\
             m2     email    queued            0  accepted 3m12s ago       -      -  -       x\n\
             m3     email    done              1     finished 5s ago   8m55s  1m00s  -       y\n"
        );
        let d = json!({"ok": true, "count": 1, "next_cursor": null, "dead_letters": [
            {"msgid": "d1", "queue": "default", "client": "c", "attempts": 3, "reason": "retries-exhausted",
             "error": {"error": {"kind": "exception", "message": "boom"}}, "at_ms": NOW - 5000, "payload": "p"}
        ]});
        let dead = AdminOp::Dead(Default::default());
        assert_eq!(
            render(&dead, &d, NOW),
            "MSGID  QUEUE    ATTEMPTS  REASON               DIED  ERROR\n\
             d1     default         3  retries-exhausted  5s ago  exception: boom\n"
        );
    }

    #[test]
    fn a_running_jobs_worker_is_shown_by_name() {
        let j = json!({"msgid": "m", "state": "in-flight", "worker": "w-1", "worker_name": "mail@box1"});
        assert_eq!(
            job_view(&j, NOW),
            "msgid:  m\nstate:  in-flight\nworker: mail@box1 (w-1)\n"
        );
    }

    #[test]
    fn a_failed_jobs_view_ends_with_its_traceback_as_text() {
        let error = json!({"error": {"kind": "exception", "message": "ValueError: 7",
            "traceback": "Traceback (most recent call last):\n  File \"<string>\", line 170, in _run\n  File \"/app/jobs.py\", line 4, in boom\n    raise ValueError(x)\nValueError: 7\n"}});
        // A dead letter: its error is also its last error.
        let dead = json!({"msgid": "d1", "queue": "q", "state": "dead-lettered",
            "error": error.clone(), "last_error": error.clone()});
        assert_eq!(
            job_view(&dead, NOW),
            "msgid:      d1\n\
             queue:      q\n\
             state:      dead-lettered\n\
             last error: exception: ValueError: 7\n\
             traceback:\n  \
               Traceback (most recent call last):\n    \
                 File \"/app/jobs.py\", line 4, in boom\n      \
                   raise ValueError(x)\n  \
               ValueError: 7\n"
        );
        let failed = json!({"msgid": "f1", "state": "failed", "result": error});
        let v = job_view(&failed, NOW);
        assert!(
            v.contains("result: failed: exception: ValueError: 7\n"),
            "{v}"
        );
        assert!(v.ends_with("traceback:\n  Traceback (most recent call last):\n    File \"/app/jobs.py\", line 4, in boom\n      raise ValueError(x)\n  ValueError: 7\n"), "{v}");
        assert!(!v.contains("\\n"), "{v}");
    }

    #[test]
    fn a_job_view_is_key_value_lines() {
        let job = json!({"msgid": "m1", "queue": "email", "route": "default", "state": "failed",
            "headers": "reply-requested,retry-count:2", "attempts": 3,
            "accepted_at_ms": NOW - 192_000, "started_at_ms": NOW - 60_000, "finished_at_ms": NOW - 1_000,
            "waited_ms": 132_000, "ran_ms": 59_000,
            "run_at_ms": null, "client": "c-1",
            "last_error": {"error": {"kind": "exit", "message": "exit status 1"}},
            "result": {"error": {"kind": "exit", "message": "exit status 1"}},
            "payload": "[\"shell\",\n{}]", "payload_truncated": true, "future_key": 7});
        assert_eq!(
            job_view(&job, NOW),
            "msgid:      m1\n\
             queue:      email\n\
             route:      default\n\
             state:      failed\n\
             attempts:   3\n\
             headers:    reply-requested,retry-count:2\n\
             client:     c-1\n\
             accepted:   3m12s ago\n\
             started:    1m00s ago\n\
             finished:   1s ago\n\
             waited:     2m12s\n\
             ran:        59s\n\
             last error: exit: exit status 1\n\
             result:     {\"error\":{\"kind\":\"exit\",\"message\":\"exit status 1\"}}\n\
             payload:    [\"shell\",\\n{}] … (cut at 1,000 bytes)\n\
             future_key: 7\n"
        );
        let delayed = json!({"msgid": "m2", "queue": "q", "route": "q", "state": "delayed",
            "attempts": 0, "run_at_ms": NOW + 40_000, "result": null, "result_truncated": false});
        assert_eq!(
            job_view(&delayed, NOW),
            "msgid:    m2\nqueue:    q\nstate:    delayed\nattempts: 0\nruns:     in 40s\n"
        );
        let running = json!({"msgid": "m3", "queue": "q", "route": "q", "state": "in-flight",
            "attempts": 1, "running_ms": 5_000,
            "progress": {"percent": 42, "message": "half way", "at_ms": NOW - 2_000}});
        assert_eq!(
            job_view(&running, NOW),
            "msgid:       m3\nqueue:       q\nstate:       in-flight\nattempts:    1\n\
             running for: 5s\nprogress:    42 % half way (reported 2s ago)\n"
        );
        let unique = json!({"msgid": "m3", "queue": "q", "route": "q", "state": "queued",
            "headers": "unique-key:order-7", "unique_key": "order-7", "unique_held": true});
        assert_eq!(
            job_view(&unique, NOW),
            "msgid:      m3\nqueue:      q\nstate:      queued\nheaders:    unique-key:order-7\n\
             unique key: order-7 (held)\n"
        );
    }

    #[test]
    fn a_cancelled_batch_or_workflow_lists_its_jobs() {
        let t = |a: Value| render(&AdminOp::Cancel { msgid: "b".into() }, &a, NOW);
        assert_eq!(
            t(json!({"batch": "b", "state": "cancelling", "jobs": [
                {"msgid": "j1", "was": "in-flight", "state": "cancelling"},
                {"msgid": "j2", "was": "queued", "state": "cancelled"},
                {"msgid": "j3", "error": "job j3 runs on worker w, which cannot cancel jobs"}]})),
            "batch b: cancelling: 1 job(s) cancelled, 1 being stopped by their job managers, 1 not cancelled\n\
             \x20 j3: job j3 runs on worker w, which cannot cancel jobs\n"
        );
        assert_eq!(
            t(json!({"workflow": "w", "state": "cancelled", "nodes_cancelled": 2, "jobs": []})),
            "workflow w: cancelled: 2 waiting node(s) cancelled\n"
        );
    }

    #[test]
    fn one_line_answers() {
        let t = |op: AdminOp, a: Value| render(&op, &a, NOW);
        assert_eq!(
            t(
                AdminOp::Cancel { msgid: "m".into() },
                json!({"msgid": "m", "was": "queued", "state": "cancelled"})
            ),
            "m: cancelled (was queued)\n"
        );
        assert!(t(
            AdminOp::Cancel { msgid: "m".into() },
            json!({"was": "in-flight", "state": "cancelling"})
        )
        .starts_with("m: cancelling (was in-flight)"));
        assert_eq!(
            t(
                AdminOp::DeadRetry(emqp_proto::admin::DeadTarget::One { msgid: "m".into() }),
                json!({"retried": 2, "skipped_msgid_in_use": 1})
            ),
            "retried 2 dead letter(s)\nskipped 1: an unfinished job has the same msgid\n"
        );
        assert_eq!(
            t(
                AdminOp::DeadDiscard(emqp_proto::admin::DeadTarget::One { msgid: "m".into() }),
                json!({"discarded": 0})
            ),
            "discarded 0 dead letter(s)\n"
        );
        assert!(t(
            AdminOp::Pause { queue: "q".into() },
            json!({"queue": "q", "paused": true})
        )
        .starts_with("queue q paused"));
        assert_eq!(
            t(
                AdminOp::Resume { queue: "q".into() },
                json!({"queue": "q", "paused": false})
            ),
            "queue q resumed\n"
        );
        assert_eq!(
            t(AdminOp::Purge { queue: "q".into() }, json!({"purged": 4})),
            "purged 4 waiting job(s) of queue q\n"
        );
        assert!(t(
            AdminOp::Drain { worker: "w".into() },
            json!({"draining": true})
        )
        .starts_with("worker w draining"));
        assert!(t(
            AdminOp::Undrain { worker: "w".into() },
            json!({"draining": false})
        )
        .starts_with("worker w undrained"));
        assert_eq!(
            t(
                AdminOp::Unschedule { id: "s".into() },
                json!({"removed": "s"})
            ),
            "removed schedule s\n"
        );
        assert!(t(AdminOp::Shutdown, json!({"shutting_down": true}))
            .starts_with("the router is shutting down"));
    }

    #[test]
    fn limits_print_each_policy_and_its_keys() {
        let show = json!({"ok": true, "limits": [{
        "queue": "email", "text": "concurrency-per-key=2,fair", "running": 3,
        "waiting": 5, "limited": 4, "throttled": 7, "presumed": 0, "active_keys": 2,
        "keys": [
            {"key": "acme", "running": 2, "waiting": 4,
             "blocked": "limited: key acme at 2/2 running"},
            {"key": "", "running": 1, "waiting": 1, "blocked": null}
        ]}]});
        let text = render(&AdminOp::LimitsShow { queue: None }, &show, 0);
        assert!(
            text.starts_with("queue email: concurrency-per-key=2,fair\n"),
            "{text}"
        );
        assert!(
            text.contains("  acme            2        4  limited: key acme at 2/2 running\n"),
            "{text}"
        );
        assert!(text.contains("(no key)"), "{text}");
        assert_eq!(
            render(
                &AdminOp::LimitsShow { queue: None },
                &json!({"limits": []}),
                0
            ),
            "no flow-control policies\n"
        );
        let job = json!({"job": {"msgid": "m", "state": "queued",
            "waiting": "limited: key acme at 2/2 running"}});
        let text = render(&AdminOp::Job { msgid: "m".into() }, &job, 0);
        assert!(
            text.contains("waiting: limited: key acme at 2/2 running"),
            "{text}"
        );
    }

    #[test]
    fn refusals_print_kind_and_message() {
        assert_eq!(
            refusal(&json!({"ok": false, "error": {"kind": "not-found", "message": "no job m"}})),
            "not-found: no job m"
        );
        assert_eq!(
            refusal(&json!({"ok": false, "error": {"kind": "conflict"}})),
            "conflict"
        );
        assert_eq!(refusal(&json!({"ok": false})), "error");
    }
    #[test]
    fn batch_shows_a_bar_with_its_counts_and_callbacks() {
        let b = serde_json::json!({
            "batch": "b1", "state": "closed", "opened_at_unix_ms": 5, "closed_at_unix_ms": 6,
            "finished_at_unix_ms": null, "total": 10, "pending": 4, "succeeded": 5,
            "failed": 1, "failed_ids": ["j9"], "description": "",
            "callbacks": {"on_complete": {"msgid": "b1/on-complete", "state": "waiting"}},
        });
        assert_eq!(
            super::batch(&b),
            "batch b1: closed (opened 5, closed 6, finished -)\n  \
             [###############xxx............] 6 of 10 ended: 5 succeeded, 1 failed, 4 pending\n  \
             on_complete: b1/on-complete [waiting]\n  failed: j9\n"
        );
    }

    #[test]
    fn workflow_tree_puts_children_under_their_first_parent() {
        let w = serde_json::json!({
            "workflow": "w1", "state": "running", "accepted_at_unix_ms": NOW - 60_000,
            "nodes": [
                {"id": "a", "after": [], "state": "done", "queued_at_unix_ms": NOW - 60_000,
                 "started_at_unix_ms": NOW - 59_000, "finished_at_unix_ms": NOW - 47_000,
                 "took_ms": 12_000, "value": 4},
                {"id": "b", "after": [], "state": "started", "queued_at_unix_ms": NOW - 60_000,
                 "started_at_unix_ms": NOW - 6_000},
                {"id": "cb", "after": ["a", "b"], "state": "waiting"},
            ]
        });
        let out = super::workflow(&w, NOW);
        assert_eq!(
            out,
            "workflow w1: running (accepted 1m00s ago, finished -)\n  a [done] queued 1m00s ago \
             started 59s ago finished 47s ago took 12s value 4\n    cb [waiting] (also after b)\n  \
             b [started] queued 1m00s ago started 6s ago\n"
        );
    }
}
