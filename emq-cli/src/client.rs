//! Which router answers on the admin socket (the socket itself is
//! `emq_transport::admin`'s client)?
//!
//! Both answer STATUS with `REPLY [json]`; emq's object
//! has a `counters` object, 0.3.13's (`inflight_messages_by_queue`,
//! `latency_messages_by_queue`, `max_latency_messages_by_queue`,
//! `waiting_messages_by_queue`, `processed_messages_by_queue`,
//! `processed_messages_by_worker`) has not. STATUS is asked first because a
//! 0.3.13 router ignores a command it does not know (ADMIN included)
//! without a word: asking it ADMIN would only ever time out.

use emq_transport::admin::{AdminClient, Answer, ClientError};
use emqp_proto::Command;
use serde_json::Value;

/// What kind of router answers on the admin socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavour {
    /// emq: the control plane (ADMIN).
    Emq,
    /// EventMQ 0.3.13: STATUS, ROUTER_SHOW_WORKERS, ROUTER_SHOW_SCHEDULERS,
    /// DISCONNECT only.
    EventMq0313,
}

impl Flavour {
    /// Tell the router apart by its STATUS answer (see the module docs).
    pub fn of_status(status: &Value) -> Flavour {
        if status.get("counters").is_some_and(Value::is_object) {
            Flavour::Emq
        } else {
            Flavour::EventMq0313
        }
    }
}

/// Ask STATUS and tell the router's flavour from it.
pub fn detect(client: &AdminClient) -> Result<(Flavour, Answer), ClientError> {
    let status = client.query(Command::Status)?;
    Ok((Flavour::of_status(&status.json), status))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn flavour_from_status() {
        // 0.3.13's STATUS keys (eventmq/router.py, get_status).
        let old = json!({
            "inflight_messages_by_queue": {}, "latency_messages_by_queue": {},
            "max_latency_messages_by_queue": {}, "waiting_messages_by_queue": {},
            "processed_messages_by_queue": {}, "processed_messages_by_worker": {}
        });
        assert_eq!(Flavour::of_status(&old), Flavour::EventMq0313);
        let emq = json!({"inflight_messages_by_queue": {}, "counters": {"accepted": 1}});
        assert_eq!(Flavour::of_status(&emq), Flavour::Emq);
        assert_eq!(
            Flavour::of_status(&json!({"counters": 3})),
            Flavour::EventMq0313
        );
    }
}
