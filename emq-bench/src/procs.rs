//! Child processes that cannot outlive the bench: a Drop guard that sends
//! SIGTERM then SIGKILL, a registry the Ctrl-C handler empties, and
//! PR_SET_PDEATHSIG so a SIGKILLed bench takes its children along.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Pids of running children, for the signal handler.
static CHILDREN: Mutex<Vec<i32>> = Mutex::new(Vec::new());

fn register(pid: i32) {
    if let Ok(mut c) = CHILDREN.lock() {
        c.push(pid);
    }
}

fn unregister(pid: i32) {
    if let Ok(mut c) = CHILDREN.lock() {
        c.retain(|p| *p != pid);
    }
}

/// `sig` to a child we spawned and have not yet reaped.
fn kill(pid: i32, sig: i32) {
    emq_process::signal(pid, sig);
}

/// On SIGINT/SIGTERM: set the returned flag (every wait loop polls it),
/// give the main thread 3 s to unwind through its Drop guards and exit,
/// and if it has not, kill whatever children are left and exit 130.
pub fn install_signal_handler() -> Result<Arc<AtomicBool>, String> {
    let stop = Arc::new(AtomicBool::new(false));
    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
    ])
    .map_err(|e| format!("signal handler: {e}"))?;
    let flag = Arc::clone(&stop);
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            if signals.forever().next().is_some() {
                eprintln!("emq-bench: interrupted, stopping children");
                flag.store(true, Ordering::Relaxed);
                // main normally unwinds (Drop guards stop the children and
                // remove temp dirs) and exits 130 well within this
                std::thread::sleep(Duration::from_secs(3));
                if let Ok(c) = CHILDREN.lock() {
                    for pid in c.iter() {
                        kill(*pid, libc::SIGKILL);
                    }
                }
                std::process::exit(130);
            }
        })
        .map_err(|e| format!("spawn: {e}"))?;
    Ok(stop)
}

/// A running child; SIGTERM, then SIGKILL after a grace period, on drop.
pub struct ChildGuard {
    pub name: String,
    child: Option<Child>,
    pub log: PathBuf,
}

impl ChildGuard {
    /// Start `program args...` with stdout/stderr appended to `log`.
    pub fn spawn(
        name: &str,
        program: &Path,
        args: &[String],
        env: &[(&str, &str)],
        log: PathBuf,
    ) -> Result<ChildGuard, String> {
        let out = File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let err = out
            .try_clone()
            .map_err(|e| format!("{}: {e}", log.display()))?;
        let mut cmd = Command::new(program);
        cmd.args(args).stdin(Stdio::null()).stdout(out).stderr(err);
        for (k, v) in env {
            cmd.env(k, v);
        }
        emq_process::die_with_parent(&mut cmd);
        let child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", program.display()))?;
        register(child.id() as i32);
        Ok(ChildGuard {
            name: name.to_string(),
            child: Some(child),
            log,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(Child::id).unwrap_or(0)
    }

    /// `Some(description)` when the child has exited.
    pub fn exited(&mut self) -> Option<String> {
        let c = self.child.as_mut()?;
        match c.try_wait() {
            Ok(Some(status)) => Some(status.to_string()),
            Ok(None) => None,
            Err(e) => Some(format!("wait failed: {e}")),
        }
    }

    /// The last `n` lines of the child's log.
    pub fn log_tail(&self, n: usize) -> String {
        log_tail(&self.log, n)
    }

    /// SIGTERM, wait up to `grace`, then SIGKILL. Returns how it ended.
    pub fn stop(&mut self, grace: Duration) -> String {
        let Some(mut c) = self.child.take() else {
            return "not running".into();
        };
        let pid = c.id() as i32;
        let mut how = match c.try_wait() {
            Ok(Some(s)) => format!("had already exited: {s}"),
            _ => {
                kill(pid, libc::SIGTERM);
                let deadline = Instant::now() + grace;
                loop {
                    match c.try_wait() {
                        Ok(Some(s)) => break format!("stopped: {s}"),
                        Ok(None) if Instant::now() < deadline => {
                            std::thread::sleep(Duration::from_millis(20))
                        }
                        _ => {
                            let _ = c.kill();
                            let _ = c.wait();
                            break format!("killed after {grace:?} without exiting");
                        }
                    }
                }
            }
        };
        unregister(pid);
        if how.is_empty() {
            how = "stopped".into();
        }
        how
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(5));
    }
}

pub fn log_tail(path: &Path, n: usize) -> String {
    let Ok(f) = File::open(path) else {
        return String::new();
    };
    let lines: Vec<String> = BufReader::new(f).lines().map_while(Result::ok).collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// A loopback port nobody listens on right now (bind port 0, read, close).
pub fn free_port() -> Result<u16, String> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("free port: {e}"))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("free port: {e}"))
}

/// `n` distinct free ports (the listeners are held until all are picked).
pub fn free_ports(n: usize) -> Result<Vec<u16>, String> {
    let mut held = Vec::new();
    for _ in 0..n {
        held.push(TcpListener::bind("127.0.0.1:0").map_err(|e| format!("free port: {e}"))?);
    }
    held.iter()
        .map(|l| {
            l.local_addr()
                .map(|a| a.port())
                .map_err(|e| format!("free port: {e}"))
        })
        .collect()
}

/// Wait until something accepts TCP connections on 127.0.0.1:`port`, the
/// child is still alive, and `timeout` has not passed.
pub fn wait_listening(
    child: &mut ChildGuard,
    port: u16,
    timeout: Duration,
    stop: &AtomicBool,
) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    loop {
        if stop.load(Ordering::Relaxed) {
            return Err("interrupted".into());
        }
        if let Some(status) = child.exited() {
            return Err(format!(
                "{} exited ({status}) before listening on port {port}; log:\n{}",
                child.name,
                child.log_tail(15)
            ));
        }
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "{} not listening on port {port} after {timeout:?}; log:\n{}",
                child.name,
                child.log_tail(15)
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A directory removed (with its contents) on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(label: &str) -> Result<TempDir, String> {
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("emq-bench-{}-{label}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        Ok(TempDir(p))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// CPU time (user + system, all threads) of process `pid`, in seconds.
pub fn proc_cpu_secs(pid: u32) -> Option<f64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let tck = emq_process::clock_ticks_per_second();
    parse_stat_ticks(&text).map(|t| t as f64 / tck as f64)
}

/// CPU time of every process whose command name is `comm` (e.g. all the
/// processes of a PostgreSQL server: `postgres`), in seconds; processes
/// that exited meanwhile are not counted.
pub fn named_cpu_secs(comm: &str) -> Option<f64> {
    let tck = emq_process::clock_ticks_per_second();
    let mut ticks = 0u64;
    let mut found = false;
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(name) = e.file_name().to_str().map(str::to_string) else {
            continue;
        };
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (text.find('('), text.rfind(')')) else {
            continue;
        };
        if &text[open + 1..close] == comm {
            if let Some(t) = parse_stat_ticks(&text) {
                ticks += t;
                found = true;
            }
        }
    }
    found.then(|| ticks as f64 / tck.max(1) as f64)
}

/// Whose CPU time a phase reports.
#[derive(Debug, Clone, Copy)]
pub enum CpuOf {
    Pid(u32),
    /// Every process with this command name.
    Named(&'static str),
}

impl CpuOf {
    pub fn secs(self) -> Option<f64> {
        match self {
            CpuOf::Pid(p) => proc_cpu_secs(p),
            CpuOf::Named(n) => named_cpu_secs(n),
        }
    }
}

/// utime + stime (fields 14 and 15) of a /proc/PID/stat line; the command
/// name (field 2) may contain spaces and parentheses, so fields are counted
/// after its last ')'.
fn parse_stat_ticks(text: &str) -> Option<u64> {
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state): utime is f[11], stime f[12]
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

/// Busy and total jiffies of all CPUs since boot (the `cpu` line of
/// /proc/stat: busy is everything but idle and iowait).
fn cpu_jiffies() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    parse_cpu_line(text.lines().next()?)
}

fn parse_cpu_line(line: &str) -> Option<(u64, u64)> {
    let mut it = line.split_whitespace();
    if it.next()? != "cpu" {
        return None;
    }
    let v: Vec<u64> = it.map(|f| f.parse().ok()).collect::<Option<_>>()?;
    let total: u64 = v.iter().take(8).sum();
    let idle = v.get(3)? + v.get(4).copied().unwrap_or(0);
    Some((total - idle, total))
}

/// Wait until the machine is quiet: a 100 ms window in which all CPUs
/// together were busy less than `max_busy` (a fraction of all of them),
/// so that a measured phase does not share the machine with the start-up
/// of what it measures (a job manager starts one Python worker per slot,
/// which takes a core for a while) or the teardown of the previous phase.
/// Gives up after `limit`. Returns the time waited and whether it got
/// quiet.
pub fn wait_quiet(max_busy: f64, limit: Duration, stop: &AtomicBool) -> (Duration, bool) {
    let start = Instant::now();
    let Some(mut last) = cpu_jiffies() else {
        return (Duration::ZERO, false);
    };
    while start.elapsed() < limit && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
        let Some(now) = cpu_jiffies() else {
            break;
        };
        let (busy, total) = (now.0 - last.0, now.1 - last.1);
        last = now;
        if total > 0 && (busy as f64) < max_busy * total as f64 {
            return (start.elapsed(), true);
        }
    }
    (start.elapsed(), false)
}

/// A `kB` field of /proc/PID/status (`VmHWM`, `VmRSS`), in bytes.
pub fn proc_status_bytes(pid: u32, field: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_status_kb(&text, field).map(|kb| kb * 1024)
}

fn parse_status_kb(text: &str, field: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let rest = l.strip_prefix(field)?.strip_prefix(':')?;
        rest.trim().strip_suffix("kB")?.trim().parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_line_gives_busy_and_total() {
        // user nice system idle iowait irq softirq steal guest guest_nice
        let l = "cpu  100 5 50 800 20 3 2 10 0 0";
        assert_eq!(parse_cpu_line(l), Some((170, 990)));
        assert_eq!(parse_cpu_line("cpu0 1 2 3 4"), None);
        assert_eq!(parse_cpu_line("cpu  x"), None);
        assert!(cpu_jiffies().is_some_and(|(b, t)| b <= t));
    }

    #[test]
    fn status_fields_parse_in_kb() {
        let t = "Name:\tx\nVmHWM:\t  123456 kB\nVmRSS:\t   100 kB\n";
        assert_eq!(parse_status_kb(t, "VmHWM"), Some(123_456));
        assert_eq!(parse_status_kb(t, "VmRSS"), Some(100));
        assert_eq!(parse_status_kb(t, "VmPeak"), None);
        let me = proc_status_bytes(std::process::id(), "VmHWM").unwrap();
        assert!(me > 0);
    }

    #[test]
    fn stat_ticks_count_fields_after_the_command_name() {
        let line = "42 (a b) c) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 1 0";
        assert_eq!(parse_stat_ticks(line), Some(300));
        assert_eq!(parse_stat_ticks("garbage"), None);
        assert!(proc_cpu_secs(std::process::id()).is_some());
    }

    #[test]
    fn child_guard_kills_on_drop_and_ports_are_distinct() {
        let dir = TempDir::new("test").unwrap();
        let pid;
        {
            let g = ChildGuard::spawn(
                "sleep",
                Path::new("sleep"),
                &["30".to_string()],
                &[],
                dir.path().join("log"),
            )
            .unwrap();
            pid = g.pid();
            assert!(Path::new(&format!("/proc/{pid}")).exists());
        }
        // reaped: no zombie left behind under that pid (or reused by another)
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        assert!(!status.contains("sleep"), "{status}");
        let ports = free_ports(3).unwrap();
        assert!(ports[0] != ports[1] && ports[1] != ports[2] && ports[0] != ports[2]);
    }
}
