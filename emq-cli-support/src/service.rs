//! Telling the service manager how the process is doing: systemd's
//! `sd_notify` protocol (`Type=notify` units), through the `sd-notify`
//! crate (a datagram to `$NOTIFY_SOCKET`; no libsystemd).
//!
//! The rule: a long-running binary (the router, the job manager) says
//! [`ready`] once it is up — its sockets bound or connected, the journal
//! loaded — with a one-line status; [`status`] when that line changes
//! (a router that became leader or went back to standby); [`stopping`]
//! when a graceful stop begins (a signal or DISCONNECT), so that systemd
//! shows "deactivating" while it drains. Without `NOTIFY_SOCKET` (not
//! started by systemd, or `Type=simple`) every call does nothing. A
//! notification that cannot be sent is logged at debug level and
//! otherwise ignored: the service manager's view must never stop the
//! service. `NOTIFY_SOCKET` stays in the environment (child processes
//! are started without it, see `emq-jobmanager`), and units say
//! `NotifyAccess=main`.

use sd_notify::NotifyState;

/// Start-up is complete; `line` becomes the unit's status line.
pub fn ready(line: &str) {
    send(&[NotifyState::Ready, NotifyState::Status(line)]);
}

/// The unit's status line changes to `line`.
pub fn status(line: &str) {
    send(&[NotifyState::Status(line)]);
}

/// A graceful stop has begun; `line` says why.
pub fn stopping(line: &str) {
    send(&[NotifyState::Stopping, NotifyState::Status(line)]);
}

/// The environment variable that names the service manager's socket; a
/// process that starts children removes it from their environment.
pub const NOTIFY_SOCKET: &str = "NOTIFY_SOCKET";

fn send(states: &[NotifyState<'_>]) {
    if std::env::var_os(NOTIFY_SOCKET).is_none() {
        return;
    }
    if let Err(e) = sd_notify::notify(false, states) {
        log::debug!("service manager notification not sent: {e}");
    }
}
