//! emq-bench: how fast emq is, next to what plain zmq can do on the same
//! machine in the same run. See `scripts/bench.sh` and `emq-bench --help`.
//!
//! Performance is reported, never asserted: the unit tests here cover the
//! statistics, the report and the process handling, not the figures.

#![forbid(unsafe_code)]

pub mod client;
pub mod noisy;
pub mod phases;
pub mod procs;
pub mod raw;
pub mod report;
pub mod stats;
pub mod worker;
