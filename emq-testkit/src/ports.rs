//! Free loopback TCP ports.
//!
//! Ports come from 20000..32000, below Linux's ephemeral range
//! (32768..60999), so a port we picked is not taken meanwhile by an outgoing
//! connection. Each is checked by binding 127.0.0.1 and never handed out
//! twice in one process; the start is random so concurrent test processes
//! rarely probe the same ports. A router that still fails to bind is
//! restarted on fresh ports by `integration_tests::cluster`.

use std::collections::HashSet;
use std::net::TcpListener;
use std::sync::Mutex;

const LOW: u16 = 20000;
const HIGH: u16 = 32000;

struct State {
    used: HashSet<u16>,
    next: u16,
}

static STATE: Mutex<Option<State>> = Mutex::new(None);

/// A loopback port that was free a moment ago.
pub fn free_port() -> u16 {
    let mut guard = STATE.lock().unwrap_or_else(|e| e.into_inner());
    let state = guard.get_or_insert_with(|| {
        let seed = std::process::id() as u64
            ^ std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0);
        State {
            used: HashSet::new(),
            next: LOW + (seed % u64::from(HIGH - LOW)) as u16,
        }
    });
    for _ in 0..(HIGH - LOW) {
        let p = state.next;
        state.next = if p + 1 >= HIGH { LOW } else { p + 1 };
        if state.used.contains(&p) {
            continue;
        }
        if TcpListener::bind(("127.0.0.1", p)).is_ok() {
            state.used.insert(p);
            return p;
        }
    }
    panic!("no free loopback port in {LOW}..{HIGH}");
}

/// `tcp://127.0.0.1:PORT`.
pub fn tcp(port: u16) -> String {
    format!("tcp://127.0.0.1:{port}")
}

/// A fresh `tcp://127.0.0.1:PORT` endpoint.
pub fn free_endpoint() -> String {
    tcp(free_port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_distinct_and_bindable() {
        let ports: Vec<u16> = (0..50).map(|_| free_port()).collect();
        let set: HashSet<u16> = ports.iter().copied().collect();
        assert_eq!(set.len(), ports.len());
        for p in ports {
            assert!((LOW..HIGH).contains(&p));
            TcpListener::bind(("127.0.0.1", p)).unwrap();
        }
    }
}
