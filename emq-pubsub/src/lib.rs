//! emq-pubsub: EventMQ 0.3.13's pub/sub process, in Rust.
//!
//! Publishers send `PUBLISH [topic, message]` to a ROUTER socket; each is
//! sent on as `[topic, message]` to the SUB sockets subscribed to a prefix
//! of the topic. The rule and its call order are in [`core`] (a sans-IO
//! state machine: frames in, the message to publish out, no sockets or
//! clock); [`flags`] turns flags, `EVENTMQ_*` variables and the
//! `[publisher]` config section into a checked [`flags::Plan`]. The
//! `emq-pubsub` binary binds the two sockets and drives the core.
//!
//! Why a process of its own and not a mode of `emq-router`: 0.3.13 runs
//! pub/sub as its own process (`emq-pubsub`, own ports 47298/47299, own
//! config section), so deployments keep their layout and settings; pub/sub
//! shares nothing with job routing (no queues, workers, journal or
//! acknowledgements), so the router's core and its loop stay about jobs; and
//! a burst of publishes cannot slow job dispatch, nor a router restart cut
//! off subscribers.

#![forbid(unsafe_code)]
#![warn(unreachable_pub)]

pub mod core;
pub mod flags;

pub use crate::core::{Config, Pubsub, Stats};
pub use flags::{Cli, Plan};
