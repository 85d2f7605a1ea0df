//! The command line in two steps, as in every emq binary: [`lowargs`] is
//! what clap parses ([`Cli`]), [`hiargs`] checks it with the environment
//! into the [`Plan`] that [`crate::run`] carries out.

pub mod hiargs;
pub mod lowargs;

pub use hiargs::{Mode, Plan, ScheduleSpec};
pub use lowargs::{Cli, DEFAULT_ACK_TIMEOUT, DEFAULT_WAIT_TIMEOUT, DEFAULT_WINDOW};
