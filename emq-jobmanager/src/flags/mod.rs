//! The command line in two steps, as in every emq binary: [`lowargs`] is
//! what clap parses ([`Cli`]), [`hiargs`] checks it with the environment
//! and the config file into the [`Plan`] that `run` carries out.

pub mod hiargs;
pub mod lowargs;

pub use hiargs::{exit_for, Plan};
pub use lowargs::Cli;
