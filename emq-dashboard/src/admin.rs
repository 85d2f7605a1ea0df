//! The dashboard as an admin client of its own router: every API call is
//! one control-plane request, `ADMIN [request JSON]`, answered `REPLY
//! [answer JSON, msgid]` (docs/PROTOCOL.md, "Control plane").
//!
//! The router binds its admin ROUTER socket on an extra `inproc://`
//! endpoint in the same zmq context ([`crate::INPROC_ADMIN`]); inproc
//! carries no ZAP handshake, so the HTTP side's own access rules
//! ([`crate::access`]) are what guard it. The router core answers in its
//! poll loop, between other messages: a request costs the loop what the op
//! costs, never a lock held across threads.
//!
//! zmq sockets belong to one thread at a time, so requests borrow a client
//! (`emq_transport::admin`, one DEALER) from a small idle pool (creating
//! one when none is free), send, wait for the REPLY whose ORIG_MSGID is
//! theirs — anything else on the socket is a late answer to an earlier
//! request and is dropped — and give it back. A client whose request
//! failed or timed out is closed instead, so a late answer never meets a
//! later request. Calls block; the HTTP handlers run them on tokio's
//! blocking threads.

use std::sync::Mutex;
use std::time::Duration;

use emq_transport::admin::{AdminClient, ClientError};
use emqp_proto::admin::AdminOp;
use serde_json::Value;

/// Idle clients kept for reuse; more concurrent requests open more.
const POOL_KEEP: usize = 4;

/// Control-plane requests to one router, from any thread.
pub struct AdminPool {
    ctx: zmq::Context,
    endpoint: String,
    timeout: Duration,
    idle: Mutex<Vec<AdminClient>>,
}

impl AdminPool {
    /// Requests to the admin endpoint `endpoint` (normally
    /// [`crate::INPROC_ADMIN`], in the router's context `ctx`); each
    /// waits at most `timeout` for its answer. Nothing is connected until
    /// the first request.
    pub fn new(ctx: &zmq::Context, endpoint: &str, timeout: Duration) -> AdminPool {
        AdminPool {
            ctx: ctx.clone(),
            endpoint: endpoint.to_string(),
            timeout,
            idle: Mutex::new(Vec::new()),
        }
    }

    /// Send `op` and return the answer object (`{"ok": true, ...}` or
    /// `{"ok": false, "error": ...}`) as the router sent it. Blocks for at
    /// most the timeout.
    pub fn request(&self, op: &AdminOp) -> Result<Value, ClientError> {
        let client = match self.idle.lock().ok().and_then(|mut v| v.pop()) {
            Some(c) => c,
            None => {
                AdminClient::connect(&self.ctx, &self.endpoint, "dashboard", self.timeout, None)?
            }
        };
        // On an error the client is dropped, not pooled: a late answer
        // must not be read by the next request.
        let answer = client.request(op)?;
        if let Ok(mut idle) = self.idle.lock() {
            if idle.len() < POOL_KEEP {
                idle.push(client);
            }
        }
        match answer.json {
            v @ Value::Object(_) => Ok(v),
            other => Err(ClientError::NotJson {
                what: format!("ADMIN {}", op.name()),
                text: other.to_string(),
            }),
        }
    }
}
