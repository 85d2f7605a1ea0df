//! The command line, in two steps as ripgrep's `flags` do: [`lowargs`] is
//! what clap parses (as close to the typed arguments as possible), and
//! [`hiargs`] checks it, with the environment and the config file, into the
//! [`Plan`] that [`crate::run`] carries out.

pub mod hiargs;
pub mod lowargs;

pub use hiargs::{Mode, Plan, UsageError};
pub use lowargs::Cli;
