//! The high-availability harness on PostgreSQL, shared by the HA tests
//! (`ha_postgres.rs`, `workflows_failover.rs`): routers on one database —
//! one leader, standbys that bind nothing — and job managers with every
//! router's backend as their failover list.

use std::time::Duration;

use emqp_proto::Command;

use crate::cluster::{spawn_router, start_jobmanager, FAST_HEARTBEAT};
use crate::{admin, Addrs, Proc};

/// A router on `addrs` with the journal at `url`; not waited for (a
/// standby answers nothing).
pub fn router(name: &str, addrs: &Addrs, url: &str, extra: &[&str]) -> Proc {
    let args = [&["--journal", url][..], &FAST_HEARTBEAT, extra].concat();
    spawn_router(name, addrs, &args)
}

/// Wait until `p` logs that it took the leader lease (panics after 20 s).
pub fn wait_leader(p: &mut Proc) {
    p.wait_for_log_line("leader lease taken", Duration::from_secs(20))
        .unwrap_or_else(|e| panic!("{e}"));
}

/// Wait until `p` logs that it is a standby (panics after 20 s).
pub fn wait_standby(p: &mut Proc) {
    p.wait_for_log_line("standby: the lease is held by", Duration::from_secs(20))
        .unwrap_or_else(|e| panic!("{e}"));
}

/// Whether the router at `addrs` answers STATUS within `timeout`.
pub fn serves(addrs: &Addrs, timeout: Duration) -> bool {
    admin::query(&addrs.admin, Command::Status, timeout).is_ok()
}

/// A job manager with 4 slots and fast heartbeats on `backends` (a
/// comma-separated failover list).
pub fn jobmanager(name: &str, backends: &str) -> Proc {
    let mut args = vec!["--concurrency", "4"];
    args.extend(FAST_HEARTBEAT);
    start_jobmanager(name, backends, &args)
}
