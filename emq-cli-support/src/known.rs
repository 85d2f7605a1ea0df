//! Every setting an emq tool reads, once: its one name, the older names
//! it is also read under, the config file sections that use it and what
//! it is. [`crate::Settings`] reads the INI file against this table: an
//! older name counts as the setting's name (`WORKER_ADDR` is the job
//! manager's `BACKEND_ADDR`, as in EventMQ 0.3.13), and a key the table
//! does not know is reported with the nearest known name (`HTTP_ADR` →
//! did you mean `HTTP_ADDR`?) instead of being silently ignored.
//!
//! `emq-cli vocabulary` prints the table ([`to_json`]) so that clients in
//! other languages (the Python client) read the same names.

use serde_json::{json, Value};

/// One setting: its name, in a config file section or as `EVENTMQ_<NAME>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Known {
    /// The one name (upper case, without `EVENTMQ_`).
    pub name: &'static str,
    /// Older names read as this one (EventMQ 0.3.13's), lowest priority:
    /// the name itself wins when both are set in the same place.
    pub aliases: &'static [&'static str],
    /// The config file sections of the tools that read it (`[global]`
    /// serves every one).
    pub sections: &'static [&'static str],
    /// What it is, one line.
    pub help: &'static str,
}

const R: &[&str] = &["router"];
const JM: &[&str] = &["jobmanager"];
const PUB: &[&str] = &["publisher"];
const IGNORED: &[&str] = &[];

macro_rules! known {
    ($name:literal, $sections:expr, $help:literal) => {
        Known {
            name: $name,
            aliases: &[],
            sections: $sections,
            help: $help,
        }
    };
    ($name:literal, aliases $aliases:expr, $sections:expr, $help:literal) => {
        Known {
            name: $name,
            aliases: $aliases,
            sections: $sections,
            help: $help,
        }
    };
}

/// The table. A setting with no sections is one EventMQ 0.3.13 reads and
/// emq does not: accepted in a file without a warning, and without effect.
pub const KNOWN: &[Known] = &[
    // Addresses: each is a router's (or the pub/sub process's) bind
    // address, and where the tools that connect to it look for it.
    known!("FRONTEND_ADDR", &["router", "sender", "client"], "the router's client socket (REQUEST, SCHEDULE); emq-sender and the Python client connect there"),
    known!("BACKEND_ADDR", aliases &["WORKER_ADDR"], &["router", "jobmanager"], "the router's worker socket; the job manager connects there (WORKER_ADDR is EventMQ 0.3.13's job manager name)"),
    known!("BACKEND_ADDR_FAILOVER", aliases &["WORKER_ADDR_FAILOVER"], JM, "a second router's worker socket the job manager also connects to"),
    known!("ADMINISTRATIVE_ADDR", &["router", "cli", "client"], "the router's admin socket; emq-cli and the Python client connect there"),
    known!("PUBLISHER_INCOMING_ADDR", &["publisher", "sender"], "the pub/sub process's PUBLISH socket (emq-sender --publish)"),
    known!("PUBLISHER_OUTGOING_ADDR", &["publisher", "receiver"], "the pub/sub process's subscriber socket (emq-receiver --subscribe)"),
    known!("METRICS_ADDR", R, "the router's Prometheus /metrics address (blank or none: off)"),
    known!("HTTP_ADDR", R, "the router's dashboard and HTTP API address (blank or none: off)"),
    known!("HTTP_TOKEN_FILE", R, "the dashboard's bearer token file"),
    known!("HTTP_READ_ONLY", R, "the dashboard refuses every change (true/false)"),
    // Router.
    known!("JOURNAL", R, "the router's journal: a SQLite path, postgres://..., or none"),
    known!("LEASE_TTL", R, "the PostgreSQL leader lease's lifetime"),
    known!("LEASE_RENEW", R, "how often the leader renews its lease"),
    known!("HWM", R, "the router sockets' high-water mark"),
    known!("QUEUES", &["router", "jobmanager"], "the router's default queues / the queues a job manager serves (weight:name,...)"),
    known!("UNSERVED_QUEUES", R, "what the router does with a job for a queue no worker serves"),
    known!("MAX_ATTEMPTS", R, "how many times a job is delivered before it is dead-lettered"),
    known!("RETRY_BACKOFF", R, "the first delay before a failed job's retry"),
    known!("RETRY_BACKOFF_MAX", R, "the longest delay between retries"),
    known!("DEAD_LETTER_KEEP", R, "how many dead letters the router keeps"),
    known!("DRAIN_TIMEOUT", R, "how long a drained worker's jobs may run"),
    known!("LIMITS", R, "flow-control policies at start, `;`-separated QUEUE:concurrency=N,rate=N/SECS,... (as --limit)"),
    known!("MAX_UNIQUE_KEYS", R, "how many unique keys the router holds at once; a new key past it is refused queue-full"),
    known!("OUTBOX", R, "a PostgreSQL URL whose emq_outbox table the serving router drains (jobs enqueued in the application's transaction)"),
    known!("RETAIN_FINISHED", R, "how many finished jobs the router keeps for `emq-cli jobs`"),
    known!("RETAIN_FOR", R, "how long the router keeps a finished job"),
    known!("RETAIN_RESULT_BYTES", R, "the largest result the router keeps with a finished job"),
    known!("RESULTS_KEEP", R, "how many results the router keeps for GET_RESULT"),
    known!("RESULTS_KEEP_FOR", R, "how long the router keeps a result for GET_RESULT"),
    known!("RESULTS_KEEP_BYTES", R, "the bytes of results the router keeps for GET_RESULT"),
    known!("WORKFLOWS_KEEP", R, "how many finished workflows the router keeps"),
    known!("WORKFLOWS_KEEP_FOR", R, "how long the router keeps a finished workflow"),
    known!("PLAIN_USERS", R, "the router's ZMQ PLAIN users file"),
    known!("ALLOW_FRONTEND", R, "who may connect to the client socket"),
    known!("ALLOW_BACKEND", R, "who may connect to the worker socket"),
    known!("ALLOW_ADMIN", R, "who may connect to the admin socket"),
    known!("CURVE_KEYS", R, "public keys allowed on every CURVE socket"),
    known!("CURVE_FRONTEND_KEYS", R, "public keys allowed on the client socket"),
    known!("CURVE_BACKEND_KEYS", R, "public keys allowed on the worker socket"),
    known!("CURVE_ADMIN_KEYS", R, "public keys allowed on the admin socket"),
    // Shared by several tools.
    known!("LOG_FORMAT", &["router", "jobmanager", "publisher", "sender", "receiver", "cli"], "text or json: one JSON object per log line"),
    known!("MAX_MESSAGE_SIZE", &["router", "jobmanager", "sender"], "the largest frame in bytes (0 or negative: no limit)"),
    known!("HEARTBEAT_INTERVAL", &["router", "jobmanager"], "time between heartbeats"),
    known!("HEARTBEAT_LIVENESS", &["router", "jobmanager"], "heartbeats missed before a peer counts as gone"),
    known!("CURVE_SERVER_KEY", &["jobmanager", "cli", "sender", "receiver", "client"], "the router's public CURVE key (clients)"),
    known!("CURVE_SECRET_KEY_FILE", &["router", "jobmanager", "cli", "sender", "receiver", "client"], "this process's CURVE key pair file"),
    // Job manager.
    known!("CONCURRENT_JOBS", JM, "how many jobs run at once"),
    known!("KILL_GRACE_PERIOD", JM, "how long a job may finish after SIGTERM before it is killed"),
    known!("GLOBAL_TIMEOUT", JM, "a job's time limit when it sets none (0: no limit)"),
    known!("PYTHON", JM, "the Python interpreter that runs jobs"),
    known!("SUBPROCESS_SETUP_FUNC", JM, "a dotted path called once in each worker process"),
    known!("SETUP_PATH", JM, "deprecated (0.3.13): use SUBPROCESS_SETUP_FUNC"),
    known!("SETUP_CALLABLE", JM, "deprecated (0.3.13): use SUBPROCESS_SETUP_FUNC"),
    known!("JOB_ENTRY_FUNC", JM, "a dotted path called before each job"),
    known!("JOB_EXIT_FUNC", JM, "a dotted path called after each job"),
    known!("MAX_JOB_COUNT", JM, "jobs a worker process runs before it is replaced"),
    known!("PREFETCH", JM, "the credit window: auto, 0 or N"),
    known!("PREFETCH_CAP", JM, "the largest automatic credit window"),
    known!("NAME", JM, "the job manager's name, shown by emq-cli workers as NAME@HOST"),
    // Pub/sub.
    known!("PUBLISHER_SUBSCRIBER_HWM", PUB, "the subscriber socket's high-water mark"),
    known!("PUBLISHER_REPORT_INTERVAL", PUB, "time between the pub/sub process's reports"),
    known!("PUBLISHER_MAX_SUBSCRIPTIONS", PUB, "the most subscriptions the pub/sub process keeps"),
    // EventMQ 0.3.13's own, read by 0.3.13 and not by emq.
    known!("SUPER_DEBUG", IGNORED, "EventMQ 0.3.13 only"),
    known!("HIDE_HEARTBEAT_LOGS", IGNORED, "EventMQ 0.3.13 only"),
    known!("MAX_SOCKETS", IGNORED, "EventMQ 0.3.13 only"),
    known!("SCHEDULER_ADDR", IGNORED, "EventMQ 0.3.13 only"),
    known!("RQ_HOST", IGNORED, "EventMQ 0.3.13 only"),
    known!("RQ_PORT", IGNORED, "EventMQ 0.3.13 only"),
    known!("RQ_DB", IGNORED, "EventMQ 0.3.13 only"),
    known!("RQ_PASSWORD", IGNORED, "EventMQ 0.3.13 only"),
    known!("DEFAULT_QUEUE_NAME", IGNORED, "EventMQ 0.3.13 only"),
    known!("DEFAULT_QUEUE_WEIGHT", IGNORED, "EventMQ 0.3.13 only"),
    known!("WORKER_ADDR_DEFAULT", IGNORED, "EventMQ 0.3.13 only"),
    known!("HEARTBEAT_TIMEOUT", IGNORED, "EventMQ 0.3.13 only"),
    known!("CONFIG_FILE", IGNORED, "the config file itself (EVENTMQ_CONFIG_FILE)"),
];

/// The setting `key` (upper case) names, by its name or an older one.
pub fn lookup(key: &str) -> Option<&'static Known> {
    KNOWN
        .iter()
        .find(|k| k.name == key || k.aliases.contains(&key))
}

/// The known name nearest to `key`, if one is near enough to be a typo
/// (Jaro-Winkler similarity, which weighs a shared beginning: `HTTP_ADR`
/// → `HTTP_ADDR`).
pub fn nearest(key: &str) -> Option<&'static str> {
    KNOWN
        .iter()
        .flat_map(|k| std::iter::once(k.name).chain(k.aliases.iter().copied()))
        .map(|name| (strsim::jaro_winkler(key, name), name))
        .filter(|(score, _)| *score >= 0.85)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, name)| name)
}

/// The table as JSON: `[{"name", "aliases": [..], "sections": [..],
/// "env": "EVENTMQ_<NAME>", "help"}]`, in the table's order.
pub fn to_json() -> Value {
    Value::Array(
        KNOWN
            .iter()
            .map(|k| {
                json!({
                    "name": k.name,
                    "aliases": k.aliases,
                    "sections": k.sections,
                    "env": format!("EVENTMQ_{}", k.name),
                    "help": k.help,
                })
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_upper_case() {
        let mut seen = std::collections::HashSet::new();
        for k in KNOWN {
            for n in std::iter::once(k.name).chain(k.aliases.iter().copied()) {
                assert!(seen.insert(n), "{n} twice");
                assert_eq!(n, n.to_ascii_uppercase());
            }
        }
    }

    #[test]
    fn typos_find_the_nearest_name_and_far_keys_none() {
        assert_eq!(nearest("HTTP_ADR"), Some("HTTP_ADDR"));
        assert_eq!(nearest("CONCURENT_JOBS"), Some("CONCURRENT_JOBS"));
        assert_eq!(nearest("WORKER_ADR"), Some("WORKER_ADDR"));
        assert_eq!(nearest("COLOUR"), None);
        assert_eq!(lookup("WORKER_ADDR").map(|k| k.name), Some("BACKEND_ADDR"));
        assert_eq!(lookup("HTTP_ADR"), None);
    }
}
