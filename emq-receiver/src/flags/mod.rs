//! The command line in two steps, as in every emq binary: [`lowargs`] is
//! what clap parses ([`Cli`]), [`hiargs`] checks it with the environment
//! into the [`Plan`] that [`crate::run`] carries out.

pub mod hiargs;
pub mod lowargs;

pub use hiargs::{default_subscribe_endpoint, Plan, DEFAULT_SUBSCRIBE_ENDPOINT};
pub use lowargs::{Cli, SocketKind};
