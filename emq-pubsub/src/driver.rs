//! The sockets and the loop.
//!
//! One poll loop over three things: the incoming ROUTER (PUBLISH from
//! publishers), the outgoing XPUB (subscriptions coming and going; the
//! same wire as PUB for subscribers) and the shutdown signal's pipe. Each
//! readable socket is drained without blocking (at most `BATCH` messages a
//! round, so neither side starves the other) into the core; what the core
//! returns is sent on the XPUB at once (never blocking: a subscriber at its
//! high-water mark loses the message, which is PUB's rule). zmq_poll
//! blocks only after a round that found nothing, and only until the core's
//! next report is due. On a signal: log the totals, close the XPUB with a
//! one-second linger so queued messages can still go out, exit.

use std::time::{Duration, Instant};

use emq_pubsub::{Plan, Pubsub};
use emq_transport::{recv_frames, send_frames, ShutdownSignal, SocketOptions};

/// Messages read off one socket per round.
const BATCH: usize = 1024;
/// How long queued messages may take to reach subscribers at exit.
const EXIT_LINGER_MS: i32 = 1000;

pub(crate) fn run(opts: &Plan) -> Result<(), String> {
    let signal =
        ShutdownSignal::install().map_err(|e| format!("cannot install signal handlers: {e}"))?;
    let ctx = zmq::Context::new();
    let incoming = emq_transport::bind_router(
        &ctx,
        &opts.incoming,
        &SocketOptions {
            max_message_size: opts.socket_max_message_size(),
            linger_ms: 0,
            ..SocketOptions::default()
        },
    )
    .map_err(|e| format!("incoming socket: {e}"))?;
    let outgoing = bind_xpub(&ctx, opts).map_err(|e| format!("outgoing socket: {e}"))?;
    log::info!(
        "emq-pubsub {}: listening for PUBLISH on {} (ROUTER), subscribers on {} (PUB); \
         max message size {}, {} message(s) queued per subscriber at most",
        env!("CARGO_PKG_VERSION"),
        opts.incoming,
        opts.outgoing,
        opts.max_message_size
            .map_or("unlimited".to_string(), |n| format!("{n} bytes")),
        opts.subscriber_hwm
    );

    let start = Instant::now();
    let mut core = Pubsub::new(opts.core_config(), Duration::ZERO);
    let mut msg = zmq::Message::new();
    let mut send_errors = 0u64;
    let mut idle = false;
    loop {
        if idle {
            let now = start.elapsed();
            let wait_ms = match core.poll_timeout() {
                None => -1,
                Some(due) => i64::try_from(due.saturating_sub(now).as_millis())
                    .unwrap_or(i64::MAX)
                    .saturating_add(1),
            };
            let mut items = [
                incoming.as_poll_item(zmq::POLLIN),
                outgoing.as_poll_item(zmq::POLLIN),
                signal.poll_item(),
            ];
            match zmq::poll(&mut items, wait_ms) {
                Ok(_) | Err(zmq::Error::EINTR) => {}
                Err(e) => return Err(format!("zmq poll: {e}")),
            }
        }
        if signal.requested() {
            log::info!("shutdown signal received");
            break;
        }
        idle = true;
        for _ in 0..BATCH {
            let frames = match recv_frames(&incoming, &mut msg) {
                Ok(f) => f,
                Err(zmq::Error::EAGAIN) | Err(zmq::Error::EINTR) => break,
                Err(e) => return Err(format!("zmq recv on the incoming socket: {e}")),
            };
            idle = false;
            if let Some(published) = core.handle_incoming(frames, start.elapsed()) {
                if let Err(e) = send_frames(&outgoing, None, published.encode(), zmq::DONTWAIT) {
                    send_errors += 1;
                    log::warn!("could not publish a message: zmq send: {e}");
                }
            }
        }
        for _ in 0..BATCH {
            let frames = match recv_frames(&outgoing, &mut msg) {
                Ok(f) => f,
                Err(zmq::Error::EAGAIN) | Err(zmq::Error::EINTR) => break,
                Err(e) => return Err(format!("zmq recv on the outgoing socket: {e}")),
            };
            idle = false;
            if let Some(first) = frames.first() {
                core.handle_subscription(first, start.elapsed());
            }
        }
        let now = start.elapsed();
        if core.poll_timeout().is_some_and(|due| due <= now) {
            core.handle_timeout(now);
        }
    }
    log::info!(
        "exiting after {:.1} s: {}{}",
        start.elapsed().as_secs_f64(),
        core.summary(),
        if send_errors > 0 {
            format!("; {send_errors} send error(s)")
        } else {
            String::new()
        }
    );
    let _ = outgoing.set_linger(EXIT_LINGER_MS);
    Ok(())
}

/// The outgoing socket: an XPUB, so subscriptions reach the core.
fn bind_xpub(ctx: &zmq::Context, opts: &Plan) -> Result<zmq::Socket, String> {
    emq_transport::check_endpoint(&opts.outgoing).map_err(|e| e.to_string())?;
    let zerr = |e: zmq::Error| format!("zmq: {e}");
    let sock = ctx.socket(zmq::XPUB).map_err(zerr)?;
    sock.set_sndhwm(opts.subscriber_hwm).map_err(zerr)?;
    sock.set_linger(0).map_err(zerr)?;
    sock.bind(&opts.outgoing)
        .map_err(|e| format!("cannot bind {}: {e}", opts.outgoing))?;
    Ok(sock)
}
