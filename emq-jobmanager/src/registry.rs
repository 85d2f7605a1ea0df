//! Where a runner records the process groups it starts, so that another
//! thread (a cancel, the kill at the end of a shutdown) can reach them: the
//! narrow handle a runner ([`crate::python`], [`crate::shell`]) gets from
//! its slot. The pool implements it; the runners never see the pool, so
//! there is no pool ↔ runner import cycle.
//!
//! A process group id is only ours while its leader is unreaped (see
//! [`emq_process`]): a runner forgets a group here before it reaps the
//! leader.

/// The slot's record of its process groups, as a runner sees it.
pub(crate) trait GroupRegistry {
    /// The group running job `run` (`None` once it has exited, before it
    /// is reaped). A run stopped before its group existed is killed here.
    fn set_job_group(&self, run: u64, pgid: Option<i32>);
    /// The slot's long-lived worker process group (`None` before it is
    /// reaped). One started while the slot is closing is killed here.
    fn set_worker_group(&self, pgid: Option<i32>);
    /// The slot's spare worker process group, started before the worker
    /// retires (`None` once it took over, or before it is reaped). One
    /// started while the slot is closing is killed here.
    fn set_spare_group(&self, pgid: Option<i32>);
    /// The pool is being torn down: start no new process.
    fn closing(&self) -> bool;
}
