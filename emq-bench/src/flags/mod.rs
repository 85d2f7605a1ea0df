//! The command line in two steps, as in every emq binary: [`lowargs`] is
//! what clap parses ([`Cli`]), [`hiargs`] checks it into the [`Plan`] that
//! `run` carries out.

pub(crate) mod hiargs;
pub(crate) mod lowargs;

pub(crate) use hiargs::Plan;
pub(crate) use lowargs::Cli;
