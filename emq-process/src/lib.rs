//! Processes: every `unsafe` block of the workspace, and the process-group
//! primitives built on them. Every other crate is `#![forbid(unsafe_code)]`
//! and reaches the system through the safe functions here; this crate is
//! small and has no dependency but `libc`, so the test kit and the bench
//! use it without pulling in the job manager.
//!
//! - For the job manager's runners and pool: [`guarded_group`],
//!   [`GroupLeader`] (a child leading its own process group, killed with
//!   it on drop), [`exited_no_reap`], [`kill_group`].
//! - For the job manager's Python fork server: [`send_fd`].
//! - For every crate: [`signal`], [`signal_group`], [`die_with_parent`],
//!   [`clock_ticks_per_second`], [`pid_alive`].
//!
//! The rule: a job's processes never outlive the job manager. A `shell`
//! job runs in a process group of its own (so a timeout or a cancel kills
//! everything it started, by group), and the group is killed as soon as
//! the job manager dies, even by `kill -9`, which no code of ours sees.
//!
//! A process group id is only ours while its leader is unreaped: once
//! `wait` reaps it, the pid (= pgid) may be reused by an unrelated
//! process. So a group is always forgotten (by whoever recorded it: the
//! job manager's `GroupRegistry`) before its leader is reaped, and killed,
//! if at all, before that.
//!
//! `PR_SET_PDEATHSIG` alone is not enough: it reaches only the direct
//! child, while the command's own children (`sh -c 'sleep 77 & …'`) do not
//! inherit it. So [`guarded_group`] puts a small *guard* process at the
//! head of each group:
//!
//! ```text
//! job manager (slot thread)
//!   └─ guard    pid = pgid, the `Child` std returns; PDEATHSIG = a signal
//!      └─ command (execs argv); PDEATHSIG = SIGKILL
//!         └─ whatever the command starts (same group)
//! ```
//!
//! The guard is the process std forks; in its `pre_exec` hook it makes a
//! new group, forks once more (the new process returns from the hook and
//! execs the command, with the stdio, environment and directory std set
//! up), then never returns: it blocks every signal, closes every file
//! descriptor (so std's exec-status pipe and the job's stdout/stderr see
//! EOF exactly when the command's copies close) and waits. If the command
//! exits, the guard exits the same way (same code, or killed by the same
//! signal), so the job manager's `wait` sees what it saw before the guard
//! existed. If the job manager dies, the kernel sends the guard its
//! parent-death signal, and the guard kills the whole group. Signals sent
//! to the group (a timeout's `SIGKILL`, a `kill -TERM 0` from the job
//! itself) reach the command as before; the guard ignores all but
//! `SIGKILL`, which kills it along with the group.
//!
//! Everything between the fork and the exec runs in a copy of a
//! multi-threaded process, where only async-signal-safe calls are allowed:
//! raw system calls, no allocation, no locks, no `std` I/O. The second
//! fork is a raw `clone` (no `pthread_atfork` handlers) for that reason.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus};

/// A child that leads its own process group (spawned with
/// `process_group(0)` or [`guarded_group`]). Dropping it kills the whole
/// group and reaps the leader, so no early return or panic leaves the
/// group behind; [`GroupLeader::reap`] is the orderly end.
pub struct GroupLeader {
    child: Option<Child>,
    pid: i32,
}

impl GroupLeader {
    /// Spawn `cmd`, which must make its child a group leader.
    pub fn spawn(cmd: &mut Command) -> io::Result<GroupLeader> {
        let child = cmd.spawn()?;
        let pid = child.id() as i32;
        Ok(GroupLeader {
            child: Some(child),
            pid,
        })
    }

    /// The leader's pid, which is the group id.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// The `Child`, to take its pipes.
    pub fn child(&mut self) -> &mut Child {
        self.child
            .as_mut()
            .expect("a GroupLeader owns its child until reaped")
    }

    /// Whether the leader has exited (it is not reaped: the group id stays
    /// ours).
    pub fn exited(&self) -> bool {
        exited_no_reap(self.pid, false)
    }

    /// Wait until the leader exits, without reaping it.
    pub fn wait_exited(&self) {
        exited_no_reap(self.pid, true);
    }

    /// `SIGKILL` to the whole group (the leader is unreaped, so the group
    /// id is still ours).
    pub fn kill(&self) {
        kill_group(self.pid);
    }

    /// Reap the leader (waiting for it to exit). Forget the group first
    /// (wherever it was recorded): after this the pid may be reused.
    pub fn reap(mut self) -> io::Result<ExitStatus> {
        let mut child = self
            .child
            .take()
            .expect("a GroupLeader owns its child until reaped");
        child.wait()
    }
}

impl Drop for GroupLeader {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            kill_group(self.pid);
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Make `cmd` run in a new process group headed by a guard that kills the
/// group when the job manager (the thread that spawns `cmd`) dies. The
/// `Child` that `cmd.spawn()` returns is the guard: its pid is the group
/// id, and its exit status mirrors the command's.
pub fn guarded_group(cmd: &mut Command) {
    let death_signal = libc::SIGRTMIN();
    // SAFETY: the hook runs between fork and exec and makes only
    // async-signal-safe system calls (see the module doc and `guard`).
    unsafe {
        cmd.pre_exec(move || split_guard(death_signal));
    }
}

/// Have the child killed (`SIGKILL`) when the thread that spawns it goes
/// away (e.g. the whole process is `kill -9`ed), so no child outlives its
/// parent. Only the direct child: see [`guarded_group`] for a whole group.
pub fn die_with_parent(cmd: &mut Command) {
    // SAFETY: the closure only calls prctl(2), which is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
}

/// Send `data` over the Unix stream socket `sock` with a copy of `fd`
/// attached (`SCM_RIGHTS`): the receiver gets its own descriptor for the
/// same open file. The job manager hands a fresh worker's socket to its
/// Python fork server this way. All of `data` goes in one `sendmsg` (it
/// must be short: a partial write is an error, as the descriptor rides on
/// its first byte).
pub fn send_fd(
    sock: &std::os::unix::net::UnixStream,
    data: &[u8],
    fd: std::os::fd::BorrowedFd<'_>,
) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let raw = fd.as_raw_fd();
    let fd_len = std::mem::size_of::<libc::c_int>() as libc::c_uint;
    // SAFETY: CMSG_SPACE is a pure computation.
    let space = unsafe { libc::CMSG_SPACE(fd_len) } as usize;
    // u64 words: aligned for cmsghdr.
    let mut control = vec![0u64; space.div_ceil(8)];
    let mut iov = libc::iovec {
        iov_base: data.as_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    // SAFETY: msghdr is plain data; every pointer set below points into
    // `iov`, `data` and `control`, which outlive the sendmsg call, and the
    // control buffer is CMSG_SPACE bytes for one descriptor.
    let sent = unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = space as _;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(fd_len) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg) as *mut libc::c_int, raw);
        libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL)
    };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    if sent as usize != data.len() {
        return Err(io::Error::new(
            io::ErrorKind::WriteZero,
            "short write of a message carrying a descriptor",
        ));
    }
    Ok(())
}

/// Send signal `sig` to process `pid`; whether it was delivered. Nothing is
/// sent for `pid <= 0` (which would reach a group, or every process).
pub fn signal(pid: i32, sig: i32) -> bool {
    // SAFETY: kill(2) has no memory-safety preconditions.
    pid > 0 && unsafe { libc::kill(pid, sig) } == 0
}

/// Send signal `sig` to every process of group `pgid`; whether it was
/// delivered (nothing is sent for `pgid <= 0`).
pub fn signal_group(pgid: i32, sig: i32) -> bool {
    // SAFETY: kill(2) has no memory-safety preconditions.
    pgid > 0 && unsafe { libc::kill(-pgid, sig) } == 0
}

/// `SIGKILL` to every process of group `pgid` (nothing for `pgid <= 0`).
/// The group id stays valid while its leader is unreaped, even if exited.
pub fn kill_group(pgid: i32) {
    signal_group(pgid, libc::SIGKILL);
}

/// The unit of the CPU times in `/proc/PID/stat` (`sysconf(_SC_CLK_TCK)`).
pub fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf(3) has no memory-safety preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(hz).ok().filter(|&h| h > 0).unwrap_or(100)
}

/// Whether process `pid` exists and has not exited (a zombie, exited but
/// unreaped, counts as gone). Reads `/proc`: no signal is sent.
pub fn pid_alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.trim_start().chars().next());
            !matches!(state, Some('Z') | Some('X'))
        }
        Err(_) => false,
    }
}

/// Whether child `pid` has exited, without reaping it (the zombie keeps
/// the pid and its process group ours until `Child::wait`). With `block`,
/// waits for the exit.
pub fn exited_no_reap(pid: i32, block: bool) -> bool {
    let flags = libc::WEXITED | libc::WNOWAIT | if block { 0 } else { libc::WNOHANG };
    loop {
        // SAFETY: a zeroed siginfo_t is a valid out-parameter for waitid.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid(2) writes only into `info`, which we own.
        let rc = unsafe { libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, flags) };
        if rc == 0 {
            // With WNOHANG and no state change, si_pid stays 0.
            // SAFETY: waitid filled in the struct (or left it zeroed).
            return block || unsafe { info.si_pid() } != 0;
        }
        match io::Error::last_os_error().raw_os_error() {
            Some(libc::EINTR) => continue,
            // ECHILD: not our child any more (already reaped).
            _ => return true,
        }
    }
}

/// A `syscall(2)` argument: variadic, so every one must be a full `long`.
const ZERO: libc::c_long = 0;

/// In the forked child: new group, fork the command, become its guard.
/// Returns (in the command's process only) to let std exec it.
fn split_guard(death_signal: i32) -> io::Result<()> {
    // SAFETY (whole function): raw system calls on values we own; called
    // only between fork and exec.
    unsafe {
        if libc::setpgid(0, 0) != 0 {
            return Err(io::Error::last_os_error());
        }
        let manager = libc::getppid();
        let guard = libc::getpid();
        // fork(2) without glibc's atfork handlers.
        let command = libc::syscall(
            libc::SYS_clone,
            libc::c_long::from(libc::SIGCHLD),
            ZERO,
            ZERO,
            ZERO,
            ZERO,
        );
        if command < 0 {
            return Err(io::Error::last_os_error());
        }
        if command == 0 {
            // The command: die with its guard, as it died with the job
            // manager before (the flag survives exec).
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            if libc::getppid() != guard {
                libc::kill(libc::getpid(), libc::SIGKILL);
            }
            return Ok(());
        }
        guard_loop(manager, command as libc::pid_t, death_signal)
    }
}

/// The guard: wait for the command to exit (then exit the same way) or for
/// the job manager to die (then kill the group).
///
/// SAFETY: only between fork and exec, in the guard process.
unsafe fn guard_loop(manager: libc::pid_t, command: libc::pid_t, death_signal: i32) -> ! {
    let mut all: libc::sigset_t = std::mem::zeroed();
    libc::sigfillset(&mut all);
    libc::sigprocmask(libc::SIG_SETMASK, &all, std::ptr::null_mut());
    libc::prctl(libc::PR_SET_PDEATHSIG, death_signal);
    close_all_fds();
    // Checked after PDEATHSIG is armed: a manager that died before that
    // sent no signal, but has already left us to another parent.
    let mut manager_gone = libc::getppid() != manager;
    loop {
        if manager_gone {
            libc::kill(0, libc::SIGKILL);
            libc::_exit(128 + libc::SIGKILL);
        }
        let mut status = 0;
        let r = libc::waitpid(command, &mut status, libc::WNOHANG);
        if r == command {
            mirror(status);
        }
        if r < 0 && *libc::__errno_location() != libc::EINTR {
            // Not our child any more: cannot happen; take the group down
            // rather than leave it unguarded.
            libc::kill(0, libc::SIGKILL);
            libc::_exit(127);
        }
        // Any signal wakes us (SIGCHLD when the command exits); the
        // timeout re-checks the parent in case a signal was merged.
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let timeout = libc::timespec {
            tv_sec: 1,
            tv_nsec: 0,
        };
        let sig = libc::sigtimedwait(&all, &mut info, &timeout);
        // The kernel sends PDEATHSIG as if from the dying parent thread.
        if (sig == death_signal && info.si_pid() == manager) || libc::getppid() != manager {
            manager_gone = true;
        }
    }
}

/// Exit with the command's wait status.
///
/// SAFETY: only between fork and exec, in the guard process.
unsafe fn mirror(status: i32) -> ! {
    if libc::WIFEXITED(status) {
        libc::_exit(libc::WEXITSTATUS(status));
    }
    let sig = if libc::WIFSIGNALED(status) {
        libc::WTERMSIG(status)
    } else {
        libc::SIGKILL
    };
    // Die of the same signal: default action (the job manager's handlers
    // were inherited), no core file of the guard, then unblock it.
    let no_core = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    libc::setrlimit(libc::RLIMIT_CORE, &no_core);
    let mut dfl: libc::sigaction = std::mem::zeroed();
    dfl.sa_sigaction = libc::SIG_DFL;
    libc::sigaction(sig, &dfl, std::ptr::null_mut());
    libc::kill(libc::getpid(), sig);
    let mut one: libc::sigset_t = std::mem::zeroed();
    libc::sigemptyset(&mut one);
    libc::sigaddset(&mut one, sig);
    libc::sigprocmask(libc::SIG_UNBLOCK, &one, std::ptr::null_mut());
    // A signal whose default action does not kill: report it shell-style.
    libc::_exit(128 + sig);
}

/// Close every file descriptor of the guard, stdio included.
///
/// SAFETY: only between fork and exec, in the guard process.
unsafe fn close_all_fds() {
    if libc::syscall(
        libc::SYS_close_range,
        ZERO,
        libc::c_long::from(u32::MAX),
        ZERO,
    ) == 0
    {
        return;
    }
    // Kernels before 5.9: one close per possible descriptor.
    let mut lim: libc::rlimit = std::mem::zeroed();
    let max = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 {
        lim.rlim_cur.min(1 << 20) as i32
    } else {
        1024
    };
    for fd in 0..max {
        libc::close(fd);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;
    use std::time::{Duration, Instant};

    fn guarded(script: &str) -> Command {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", script])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        guarded_group(&mut cmd);
        cmd
    }

    use super::pid_alive as running;

    fn wait_gone(pid: i32) -> bool {
        let t = Instant::now();
        while running(pid) && t.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
        }
        !running(pid)
    }

    /// Read pids the script printed on its first stdout line.
    fn first_line_pids(out: &mut impl Read) -> Vec<i32> {
        let mut line = Vec::new();
        let mut b = [0u8; 1];
        while out.read(&mut b).unwrap() == 1 && b[0] != b'\n' {
            line.push(b[0]);
        }
        String::from_utf8(line)
            .unwrap()
            .split_whitespace()
            .map(|p| p.parse().unwrap())
            .collect()
    }

    #[test]
    fn the_guard_mirrors_exit_codes_signals_and_output() {
        let out = guarded("echo out; echo err >&2; exit 3").output().unwrap();
        assert_eq!(out.status.code(), Some(3));
        assert_eq!(out.stdout, b"out\n");
        assert_eq!(out.stderr, b"err\n");
        let out = guarded("exit 0").output().unwrap();
        assert!(out.status.success());
        // SIGTERM to the whole group reaches the command, not the guard.
        let out = guarded("kill -TERM 0; sleep 5").output().unwrap();
        assert_eq!(out.status.signal(), Some(libc::SIGTERM));
        let out = guarded("kill -USR1 $$; sleep 5").output().unwrap();
        assert_eq!(out.status.signal(), Some(libc::SIGUSR1));
    }

    #[test]
    fn exec_failure_is_a_spawn_error() {
        let mut cmd = Command::new("/nonexistent/prog");
        guarded_group(&mut cmd);
        let e = cmd.spawn().unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn the_group_is_the_guard_and_kill_group_kills_all_of_it() {
        let mut child = guarded("sleep 30 & echo $$ $!; wait").spawn().unwrap();
        let pids = first_line_pids(child.stdout.as_mut().unwrap());
        let guard = child.id() as i32;
        for &p in &pids {
            assert_ne!(p, guard, "the command runs under the guard");
            // SAFETY: getpgid(2) has no memory-safety preconditions.
            assert_eq!(unsafe { libc::getpgid(p) }, guard);
        }
        kill_group(guard);
        assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGKILL));
        for p in pids {
            assert!(wait_gone(p), "{p} outlived the group kill");
        }
    }

    /// The guard's parent-death signal fires when the spawning thread
    /// ends: the same kernel path as a `kill -9` of the job manager.
    #[test]
    fn the_group_dies_when_the_spawning_thread_does() {
        let (pids, mut child) = std::thread::spawn(|| {
            let mut child = guarded("sleep 30 & echo $$ $!; wait").spawn().unwrap();
            let pids = first_line_pids(child.stdout.as_mut().unwrap());
            (pids, child)
        })
        .join()
        .unwrap();
        assert_eq!(pids.len(), 2);
        for p in pids {
            assert!(wait_gone(p), "{p} outlived the thread that spawned it");
        }
        assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGKILL));
    }

    #[test]
    fn a_dropped_group_leader_takes_its_whole_group_and_is_reaped() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "sleep 30 & echo $$ $!; wait"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .process_group(0);
        let mut leader = GroupLeader::spawn(&mut cmd).unwrap();
        let pids = first_line_pids(leader.child().stdout.as_mut().unwrap());
        assert_eq!(pids[0], leader.pid(), "sh leads its group");
        assert!(!leader.exited());
        let pid = leader.pid();
        drop(leader);
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "the leader was reaped"
        );
        for p in pids {
            assert!(wait_gone(p), "{p} outlived the dropped leader");
        }
    }

    #[test]
    fn signals_reach_a_process_and_never_a_group_by_accident() {
        assert!(!signal(0, libc::SIGTERM), "pid 0 would be our own group");
        assert!(!signal(-1, libc::SIGTERM), "pid -1 would be every process");
        assert!(!signal_group(0, libc::SIGKILL));
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        assert!(signal(child.id() as i32, libc::SIGTERM));
        assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGTERM));
        assert!(clock_ticks_per_second() > 0);
    }

    /// Receive one message and the descriptor riding on it.
    fn recv_fd(sock: &std::os::unix::net::UnixStream) -> (Vec<u8>, Option<std::os::fd::OwnedFd>) {
        use std::os::fd::{AsRawFd, FromRawFd};
        let mut data = vec![0u8; 256];
        let mut control = [0u64; 8];
        let mut iov = libc::iovec {
            iov_base: data.as_mut_ptr() as *mut libc::c_void,
            iov_len: data.len(),
        };
        // SAFETY: the buffers outlive the call; the control data is read
        // only within msg_controllen, as the kernel filled it.
        unsafe {
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
            msg.msg_controllen = std::mem::size_of_val(&control) as _;
            let n = libc::recvmsg(sock.as_raw_fd(), &mut msg, 0);
            assert!(n >= 0, "{}", io::Error::last_os_error());
            data.truncate(n as usize);
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            let fd = (!cmsg.is_null() && (*cmsg).cmsg_type == libc::SCM_RIGHTS).then(|| {
                let raw = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg) as *const libc::c_int);
                std::os::fd::OwnedFd::from_raw_fd(raw)
            });
            (data, fd)
        }
    }

    #[test]
    fn send_fd_hands_over_a_descriptor_with_the_message() {
        use std::io::Write;
        use std::os::fd::AsFd;
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let (mut ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        send_fd(&a, b"{\"fork\": 1}\n", theirs.as_fd()).unwrap();
        drop(theirs);
        let (data, fd) = recv_fd(&b);
        assert_eq!(data, b"{\"fork\": 1}\n");
        // The received descriptor is the other end of `ours`.
        let mut received = std::os::unix::net::UnixStream::from(fd.expect("a descriptor"));
        received.write_all(b"hello").unwrap();
        let mut got = [0u8; 5];
        ours.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"hello");
    }
}
