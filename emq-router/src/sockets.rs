//! The router's sockets: the zmq context, the ZAP handler, the frontend,
//! backend and admin ROUTER sockets (with their handshake monitors), and
//! the sends and reads the loop does on them.
//!
//! Start-up order: the ZAP handler (when any access rule is active — the
//! admin loopback default always is) is bound before the sockets it
//! guards; each socket gets its ZAP domain (PLAIN or CURVE server),
//! ZMQ_MAXMSGSIZE (twice `--max-message-size`: the core refuses what is
//! over the limit itself) before bind, and a monitor that logs peers the
//! handshake itself refused (clear text on a CURVE or PLAIN socket never
//! reaches the ZAP handler). A send that fails is the core's business
//! (`SendFailed`): EHOSTUNREACH (the peer is gone) or EAGAIN (its pipe is
//! at the high-water mark, logged at a bounded rate). SIGHUP reads the
//! access files again and hands the rules to the ZAP handler. Closing
//! terminates the context (flushing what is queued, with linger) and
//! joins the ZAP thread.

use std::time::Duration;

use emq_router_core::util::LogLimiter;
use emq_router_core::{Frames, SendFailure, Socket};
use emq_transport::zap::{AccessPolicy, ZapHandler};
use emq_transport::SocketOptions;

use crate::flags::Plan;

/// Every socket, in the order the loop reads them: backend first —
/// READYs and REPLYs free slots that the REQUESTs read next can use at
/// once.
pub(crate) const READ_ORDER: [Socket; 3] = [Socket::Backend, Socket::Frontend, Socket::Admin];

/// Where `s` is in [`Sockets::socks`].
fn slot(s: Socket) -> usize {
    match s {
        Socket::Frontend => 0,
        Socket::Backend => 1,
        Socket::Admin => 2,
    }
}

pub(crate) struct Sockets {
    ctx: zmq::Context,
    zap: Option<ZapHandler>,
    /// Indexed by [`slot`].
    socks: [zmq::Socket; 3],
    /// The access rules in force (SIGHUP replaces them).
    access: AccessPolicy,
    eagain_log: LogLimiter,
    msg: zmq::Message,
}

impl Sockets {
    /// The ZAP handler, the three sockets bound and monitored.
    pub(crate) fn open(opts: &Plan) -> Result<Sockets, String> {
        let ctx = zmq::Context::new();
        let sock_opts = SocketOptions {
            max_message_size: opts.socket_max_message_size(),
            ..SocketOptions::default()
        };
        for line in &opts.access_warnings {
            log::warn!("{line}");
        }
        // The ZAP handler must be bound before the sockets it guards.
        let zap = if opts.access.is_active() {
            for line in &opts.access_log {
                log::info!("{line}");
            }
            Some(
                emq_transport::zap::spawn_zap_handler(&ctx, opts.access.clone())
                    .map_err(|e| format!("cannot start the ZAP handler: {e}"))?,
            )
        } else {
            None
        };
        let access = &opts.access;
        let bind = |endpoint: &str, socket: Socket| {
            let what = socket.name();
            let s = emq_transport::bind_router_with(&ctx, endpoint, &sock_opts, |s| {
                access.apply(s, what)
            })
            .map_err(|e| format!("{what}: {e}"))?;
            let mechanism = match access.domains.get(what) {
                Some(d) if d.curve_keys.is_some() => Some("CURVE"),
                Some(d) if d.plain_users.is_some() => Some("PLAIN"),
                _ => None,
            };
            if let Some(mechanism) = mechanism {
                emq_transport::zap::spawn_handshake_monitor(&ctx, &s, what, mechanism)
                    .map_err(|e| format!("{what}: cannot monitor handshakes: {e}"))?;
            }
            Ok::<_, String>(s)
        };
        let frontend = bind(&opts.frontend, Socket::Frontend)?;
        let backend = bind(&opts.backend, Socket::Backend)?;
        let admin = bind(&opts.admin, Socket::Admin)?;
        let socks = Sockets {
            socks: [frontend, backend, admin],
            ctx,
            zap,
            access: opts.access.clone(),
            eagain_log: LogLimiter::new("send-buffer-full warnings", 20),
            msg: zmq::Message::new(),
        };
        for (socket, endpoint, who) in [
            (Socket::Frontend, &opts.frontend, "clients, schedulers"),
            (Socket::Backend, &opts.backend, "workers"),
            (Socket::Admin, &opts.admin, "admin tools"),
        ] {
            let shown = socks
                .get(socket)
                .get_last_endpoint()
                .ok()
                .and_then(|e| e.ok())
                .unwrap_or_else(|| endpoint.clone());
            log::info!("listening: {} {shown} ({who})", socket.name());
        }
        Ok(socks)
    }

    pub(crate) fn context(&self) -> &zmq::Context {
        &self.ctx
    }

    pub(crate) fn get(&self, s: Socket) -> &zmq::Socket {
        &self.socks[slot(s)]
    }

    /// Poll items for the three sockets (readable).
    pub(crate) fn poll_items(&self) -> [zmq::PollItem<'_>; 3] {
        READ_ORDER.map(|s| self.get(s).as_poll_item(zmq::POLLIN))
    }

    /// Send `frames` to `identity` without blocking; `now` paces the
    /// warning about a peer that is not reading.
    pub(crate) fn send(
        &mut self,
        socket: Socket,
        identity: &[u8],
        frames: Frames,
        now: Duration,
    ) -> Result<(), SendFailure> {
        match emq_transport::send_frames(self.get(socket), Some(identity), frames, zmq::DONTWAIT) {
            Ok(()) => Ok(()),
            Err(zmq::Error::EHOSTUNREACH) => Err(SendFailure::HostUnreachable),
            Err(zmq::Error::EAGAIN) => {
                if self.eagain_log.allow(now) {
                    log::warn!(
                        "{}: peer {} is not reading (send buffer full)",
                        socket.name(),
                        String::from_utf8_lossy(identity)
                    );
                }
                Err(SendFailure::WouldBlock)
            }
            Err(other) => Err(SendFailure::Other(other.to_string())),
        }
    }

    /// One message from `socket`, if one is waiting.
    pub(crate) fn recv(&mut self, socket: Socket) -> Option<Frames> {
        match emq_transport::recv_frames(&self.socks[slot(socket)], &mut self.msg) {
            Ok(frames) => Some(frames),
            Err(zmq::Error::EAGAIN) | Err(zmq::Error::EINTR) => None,
            Err(e) => {
                log::error!("{}: receive failed: {e}", socket.name());
                None
            }
        }
    }

    /// SIGHUP: read the access files again (`--plain-users`, the CURVE
    /// sockets' authorised keys) and hand the result to the ZAP handler. A
    /// file that cannot be read or parsed keeps the policy as it was (and
    /// says so); connections already let in stay either way.
    pub(crate) fn reload_access(&mut self, opts: &Plan) {
        let Some(zap) = &self.zap else {
            log::info!("SIGHUP: no access files to read again");
            return;
        };
        match opts.access_files.reload(&self.access) {
            Ok((next, lines)) => {
                if lines.is_empty() {
                    log::info!("SIGHUP: no access files to read again");
                    return;
                }
                for line in lines {
                    log::info!("SIGHUP: reloaded {line}");
                }
                zap.set_policy(next.clone());
                self.access = next;
            }
            Err(e) => log::error!("SIGHUP: {e}; keeping the access rules as they were"),
        }
    }

    /// Close the sockets and terminate the context, which flushes what
    /// is queued (KBYEs, ACKs) for at most `linger` each (`None`: the
    /// sockets' default). The ZAP thread's socket holds the context too,
    /// so the context is terminated explicitly (that also ends the ZAP
    /// thread, which is joined).
    pub(crate) fn close(self, linger: Option<Duration>) {
        let Sockets {
            mut ctx,
            zap,
            socks,
            ..
        } = self;
        for s in socks {
            if let Some(l) = linger {
                let _ = s.set_linger(i32::try_from(l.as_millis()).unwrap_or(i32::MAX));
            }
        }
        let _ = ctx.destroy();
        if let Some(zap) = zap {
            let _ = zap.join();
        }
    }
}
