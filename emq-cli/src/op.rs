//! The operations emq-cli asks a router for, and how each is put to an emq
//! router (an `ADMIN` request object) and to an EventMQ 0.3.13 router (one
//! of its own admin commands, or none).

use emqp_proto::Command;
use serde_json::{json, Map, Value};

/// Which dead letters a `dead retry` / `dead discard` acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    One(String),
    All {
        queue: Option<String>,
        contains: Option<String>,
    },
}

/// One operation on the router.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Status,
    Queues,
    Workers,
    Schedules,
    Job {
        msgid: String,
    },
    Jobs {
        queue: Option<String>,
        state: Option<String>,
        contains: Option<String>,
        oldest: bool,
        limit: Option<u32>,
        all: bool,
    },
    Cancel {
        msgid: String,
    },
    DeadList {
        queue: Option<String>,
        contains: Option<String>,
        limit: Option<u32>,
        all: bool,
    },
    DeadRetry(Target),
    DeadDiscard(Target),
    Pause {
        queue: String,
    },
    Resume {
        queue: String,
    },
    Purge {
        queue: String,
    },
    Drain {
        worker: String,
    },
    Undrain {
        worker: String,
    },
    Unschedule {
        id: String,
    },
    Shutdown,
}

/// How many pages `--all` follows at most: with the router's largest page
/// (1,000) that is a million jobs, and it keeps a misbehaving cursor from
/// looping for ever.
pub const MAX_PAGES: usize = 1000;

impl Op {
    /// The `op` name of the control plane (also the subcommand in messages).
    pub fn name(&self) -> &'static str {
        match self {
            Op::Status => "status",
            Op::Queues => "queues",
            Op::Workers => "workers",
            Op::Schedules => "schedules",
            Op::Job { .. } => "job",
            Op::Jobs { .. } => "jobs",
            Op::Cancel { .. } => "cancel",
            Op::DeadList { .. } => "dead",
            Op::DeadRetry(_) => "dead-retry",
            Op::DeadDiscard(_) => "dead-discard",
            Op::Pause { .. } => "pause",
            Op::Resume { .. } => "resume",
            Op::Purge { .. } => "purge",
            Op::Drain { .. } => "drain",
            Op::Undrain { .. } => "undrain",
            Op::Unschedule { .. } => "unschedule",
            Op::Shutdown => "shutdown",
        }
    }

    /// The command as typed, for messages ("dead retry", not "dead-retry").
    pub fn command_name(&self) -> &'static str {
        match self {
            Op::DeadList { .. } => "dead list",
            Op::DeadRetry(_) => "dead retry",
            Op::DeadDiscard(_) => "dead discard",
            other => other.name(),
        }
    }

    /// The ADMIN request object for the page after `cursor` (`None`: the
    /// first page; ops without pages ignore it).
    pub fn request(&self, cursor: Option<&Value>) -> Value {
        let mut m = Map::new();
        m.insert("op".into(), self.name().into());
        let mut put = |k: &str, v: Option<&String>| {
            if let Some(v) = v {
                m.insert(k.into(), Value::String(v.clone()));
            }
        };
        match self {
            Op::Status | Op::Queues | Op::Workers | Op::Schedules | Op::Shutdown => {}
            Op::Job { msgid } | Op::Cancel { msgid } => put("msgid", Some(msgid)),
            Op::Jobs {
                queue,
                state,
                contains,
                oldest,
                limit,
                all: _,
            } => {
                put("queue", queue.as_ref());
                put("state", state.as_ref());
                put("contains", contains.as_ref());
                if *oldest {
                    m.insert("order".into(), "oldest".into());
                }
                if let Some(n) = limit {
                    m.insert("limit".into(), (*n).into());
                }
            }
            Op::DeadList {
                queue,
                contains,
                limit,
                all: _,
            } => {
                put("queue", queue.as_ref());
                put("contains", contains.as_ref());
                if let Some(n) = limit {
                    m.insert("limit".into(), (*n).into());
                }
            }
            Op::DeadRetry(t) | Op::DeadDiscard(t) => match t {
                Target::One(msgid) => put("msgid", Some(msgid)),
                Target::All { queue, contains } => {
                    put("queue", queue.as_ref());
                    put("contains", contains.as_ref());
                    m.insert("all".into(), true.into());
                }
            },
            Op::Pause { queue } | Op::Resume { queue } | Op::Purge { queue } => {
                put("queue", Some(queue))
            }
            Op::Drain { worker } | Op::Undrain { worker } => put("worker", Some(worker)),
            Op::Unschedule { id } => put("id", Some(id)),
        }
        if let (Some(c), true) = (cursor, self.paged().is_some()) {
            m.insert("cursor".into(), c.clone());
        }
        Value::Object(m)
    }

    /// For a listing that `--all` pages through: the answer's list key.
    pub fn paged(&self) -> Option<&'static str> {
        match self {
            Op::Jobs { all: true, .. } => Some("jobs"),
            Op::DeadList { all: true, .. } => Some("dead_letters"),
            _ => None,
        }
    }

    /// The EventMQ 0.3.13 admin command that does this op, if there is one.
    pub fn legacy_command(&self) -> Option<Command> {
        match self {
            Op::Status => Some(Command::Status),
            Op::Workers => Some(Command::RouterShowWorkers),
            Op::Schedules => Some(Command::RouterShowSchedulers),
            Op::Shutdown => Some(Command::Disconnect),
            _ => None,
        }
    }

    /// What a destructive op is about to do ("remove every waiting job of
    /// queue ..."), when it needs a confirmation.
    pub fn confirmation(&self) -> Option<String> {
        match self {
            Op::Purge { queue } => Some(format!(
                "remove every waiting job (queued, delayed, retrying) of queue {queue:?}"
            )),
            Op::DeadDiscard(Target::All { queue, contains }) => {
                let mut which = String::from("every dead letter");
                if let Some(q) = queue {
                    which.push_str(&format!(" of queue {q:?}"));
                }
                if let Some(c) = contains {
                    which.push_str(&format!(" containing {c:?}"));
                }
                Some(format!("discard {which} for good"))
            }
            _ => None,
        }
    }
}

/// Merge the pages of an `--all` listing into one answer: the last page's
/// object with `key`'s lists concatenated and `scanned` summed.
pub fn merge_pages(key: &str, pages: Vec<Value>) -> Value {
    let mut all = Vec::new();
    let mut scanned: Option<u64> = None;
    let mut last = json!({"ok": true});
    for mut page in pages {
        if let Some(Value::Array(items)) = page.get_mut(key).map(Value::take) {
            all.extend(items);
        }
        if let Some(n) = page.get("scanned").and_then(Value::as_u64) {
            scanned = Some(scanned.unwrap_or(0) + n);
        }
        last = page;
    }
    if let Some(m) = last.as_object_mut() {
        m.insert(key.into(), Value::Array(all));
        if let Some(n) = scanned {
            m.insert("scanned".into(), n.into());
        }
    }
    last
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_carry_the_documented_arguments() {
        let jobs = Op::Jobs {
            queue: Some("email".into()),
            state: Some("in-flight".into()),
            contains: Some("x".into()),
            oldest: true,
            limit: Some(7),
            all: true,
        };
        assert_eq!(
            jobs.request(None),
            json!({"op": "jobs", "queue": "email", "state": "in-flight", "contains": "x",
                   "order": "oldest", "limit": 7})
        );
        assert_eq!(
            jobs.request(Some(&json!("c-1")))["cursor"],
            json!("c-1"),
            "pages after the first pass the cursor back"
        );
        let one = Op::Jobs {
            queue: None,
            state: None,
            contains: None,
            oldest: false,
            limit: None,
            all: false,
        };
        assert_eq!(one.request(Some(&json!("c"))), json!({"op": "jobs"}));
        assert_eq!(
            Op::DeadRetry(Target::All {
                queue: Some("q".into()),
                contains: None
            })
            .request(None),
            json!({"op": "dead-retry", "queue": "q", "all": true})
        );
        assert_eq!(
            Op::DeadDiscard(Target::One("m".into())).request(None),
            json!({"op": "dead-discard", "msgid": "m"})
        );
        assert_eq!(
            Op::Drain { worker: "w".into() }.request(None),
            json!({"op": "drain", "worker": "w"})
        );
        assert_eq!(
            Op::Unschedule { id: "s".into() }.request(None),
            json!({"op": "unschedule", "id": "s"})
        );
        assert_eq!(
            Op::Purge { queue: "q".into() }.request(None),
            json!({"op": "purge", "queue": "q"})
        );
    }

    #[test]
    fn only_four_ops_have_a_0313_command() {
        assert_eq!(Op::Status.legacy_command(), Some(Command::Status));
        assert_eq!(
            Op::Workers.legacy_command(),
            Some(Command::RouterShowWorkers)
        );
        assert_eq!(
            Op::Schedules.legacy_command(),
            Some(Command::RouterShowSchedulers)
        );
        assert_eq!(Op::Shutdown.legacy_command(), Some(Command::Disconnect));
        assert_eq!(Op::Queues.legacy_command(), None);
        assert_eq!(Op::Cancel { msgid: "m".into() }.legacy_command(), None);
    }

    #[test]
    fn pages_merge_into_one_answer() {
        let merged = merge_pages(
            "jobs",
            vec![
                json!({"ok": true, "jobs": [1, 2], "next_cursor": "a", "scanned": 10}),
                json!({"ok": true, "jobs": [3], "next_cursor": null, "scanned": 5}),
            ],
        );
        assert_eq!(
            merged,
            json!({"ok": true, "jobs": [1, 2, 3], "next_cursor": null, "scanned": 15})
        );
    }
}
