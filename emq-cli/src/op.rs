//! The operations emq-cli asks a router for: an [`AdminOp`] (the control
//! plane's vocabulary, `emqp_proto::admin`) and whether `--all` follows its
//! pages; how each is put to an EventMQ 0.3.13 router (one of its own
//! admin commands, or none), and which need a confirmation.

use emqp_proto::admin::{AdminOp, DeadTarget, OpName};
use emqp_proto::Command;
use serde_json::{json, Value};

/// One operation on the router.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Op {
    /// The ADMIN request (of the first page).
    pub admin: AdminOp,
    /// `--all`: follow the router's cursor through every page (`jobs`,
    /// `dead`).
    pub all: bool,
}

impl From<AdminOp> for Op {
    fn from(admin: AdminOp) -> Op {
        Op { admin, all: false }
    }
}

/// How many pages `--all` follows at most: with the router's largest page
/// (1,000) that is a million jobs, and it keeps a misbehaving cursor from
/// looping for ever.
pub const MAX_PAGES: usize = 1000;

impl Op {
    /// The op's name on the wire.
    pub fn name(&self) -> OpName {
        self.admin.name()
    }

    /// The command as typed, for messages ("dead retry", not the op's
    /// name).
    pub fn command_name(&self) -> String {
        match self.name() {
            OpName::Dead => format!("{} list", OpName::Dead),
            n => n.as_str().replacen('-', " ", 1),
        }
    }

    /// The ADMIN request for the page after `cursor` (`None`: the first
    /// page; without `--all` there is only the first).
    pub fn request(&self, cursor: Option<&str>) -> AdminOp {
        let mut op = self.admin.clone();
        if let (Some(c), true) = (cursor, self.all) {
            match &mut op {
                AdminOp::Jobs(q) => q.cursor = Some(c.to_string()),
                AdminOp::Dead(q) => q.cursor = Some(c.to_string()),
                _ => {}
            }
        }
        op
    }

    /// For a listing that `--all` pages through: the answer's list key.
    pub fn paged(&self) -> Option<&'static str> {
        match (&self.admin, self.all) {
            (AdminOp::Jobs(_), true) => Some("jobs"),
            (AdminOp::Dead(_), true) => Some("dead_letters"),
            _ => None,
        }
    }

    /// The EventMQ 0.3.13 admin command that does this op, if there is one.
    pub fn legacy_command(&self) -> Option<Command> {
        match self.admin {
            AdminOp::Status => Some(Command::Status),
            AdminOp::Workers => Some(Command::RouterShowWorkers),
            AdminOp::Schedules => Some(Command::RouterShowSchedulers),
            AdminOp::Shutdown => Some(Command::Disconnect),
            _ => None,
        }
    }

    /// What a destructive op is about to do ("remove every waiting job of
    /// queue ..."), when it needs a confirmation.
    pub fn confirmation(&self) -> Option<String> {
        match &self.admin {
            AdminOp::Purge { queue } => Some(format!(
                "remove every waiting job (queued, delayed, retrying) of queue {queue:?}"
            )),
            AdminOp::DeadDiscard(DeadTarget::All { queue, contains }) => {
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
    use emqp_proto::admin::{JobsQuery, Order, ViewState};
    use std::num::NonZeroU64;

    fn jobs(all: bool) -> Op {
        Op {
            admin: AdminOp::Jobs(JobsQuery {
                queue: Some("email".into()),
                state: Some(ViewState::InFlight),
                contains: Some("x".into()),
                order: Some(Order::Oldest),
                limit: NonZeroU64::new(7),
                cursor: None,
            }),
            all,
        }
    }

    #[test]
    fn requests_carry_the_documented_arguments() {
        let jobs = jobs(true);
        assert_eq!(
            jobs.request(None).to_value(),
            json!({"op": "jobs", "queue": "email", "state": "in-flight", "contains": "x",
                   "order": "oldest", "limit": 7})
        );
        assert_eq!(
            jobs.request(Some("c-1")).to_value()["cursor"],
            json!("c-1"),
            "pages after the first pass the cursor back"
        );
        let one = Op::from(AdminOp::Jobs(JobsQuery::default()));
        assert_eq!(one.request(Some("c")).to_value(), json!({"op": "jobs"}));
        assert_eq!(
            Op::from(AdminOp::DeadRetry(DeadTarget::All {
                queue: Some("q".into()),
                contains: None
            }))
            .request(None)
            .to_value(),
            json!({"op": "dead-retry", "queue": "q", "all": true})
        );
        assert_eq!(jobs.command_name(), "jobs");
        assert_eq!(
            Op::from(AdminOp::Dead(Default::default())).command_name(),
            "dead list"
        );
        let retry = Op::from(AdminOp::DeadRetry(DeadTarget::One { msgid: "m".into() }));
        assert_eq!(retry.command_name(), "dead retry");
    }

    #[test]
    fn only_four_ops_have_a_0313_command() {
        let legacy = |a: AdminOp| Op::from(a).legacy_command();
        assert_eq!(legacy(AdminOp::Status), Some(Command::Status));
        assert_eq!(legacy(AdminOp::Workers), Some(Command::RouterShowWorkers));
        assert_eq!(
            legacy(AdminOp::Schedules),
            Some(Command::RouterShowSchedulers)
        );
        assert_eq!(legacy(AdminOp::Shutdown), Some(Command::Disconnect));
        assert_eq!(legacy(AdminOp::Queues), None);
        assert_eq!(legacy(AdminOp::Cancel { msgid: "m".into() }), None);
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
