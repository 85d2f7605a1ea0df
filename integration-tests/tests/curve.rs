//! CURVE encryption with real processes: keys made by `emq-cli keygen`, a
//! router whose frontend, backend and admin sockets are CURVE, a job
//! manager, emq-sender and emq-cli with their own keys.
//!
//! - Jobs run end to end with CURVE on all three sockets, each connection
//!   going through a recording TCP relay: the job's payload and its
//!   result never appear in the bytes. The same run without CURVE shows
//!   them in the relays' bytes (so the check can fail).
//! - A client with an unknown key, with no key, or with PLAIN credentials
//!   is refused: the router's STATUS counters do not move, its log says
//!   why; after the key is added to the authorised directory and the
//!   router gets SIGHUP, the same client gets in.

use std::path::PathBuf;
use std::time::Duration;

use emqp_proto::Command;
use integration_tests::admin::query_as;
use integration_tests::bins;
use integration_tests::cluster::{start_jobmanager, start_router_as, Addrs};
use integration_tests::process::{run, scratch_dir, RunOutput};
use integration_tests::relay::Relay;
use integration_tests::{Proc, Spawn};
use serde_json::Value;

const CLI: &str = "emq-cli";
const RUN_LIMIT: Duration = Duration::from_secs(30);
const WAIT: Duration = Duration::from_secs(20);
/// In the job (argv) only.
const PAYLOAD_MARK: &str = "PAYLOAD-MARK-7f3a";
/// In the job's result only (the shell computes it).
const RESULT_MARK: &str = "RESULT-42-c9";

/// Key pairs made by the real `emq-cli keygen`: the router's, and in
/// `clients/` the authorised ones (client, worker, ops); `stranger` is
/// not authorised.
struct Keys {
    dir: PathBuf,
}

impl Keys {
    fn make() -> Keys {
        let dir = scratch_dir("curve-keys");
        std::fs::create_dir_all(dir.join("clients")).unwrap();
        for name in [
            "router",
            "clients/client",
            "clients/worker",
            "clients/ops",
            "stranger",
        ] {
            let out = run(
                Spawn::new(CLI, bins::bin(CLI))
                    .args(["keygen"])
                    .arg(dir.join(name)),
                RUN_LIMIT,
            );
            assert_eq!(out.code(), Some(0), "keygen {name}: {}", out.describe());
            assert!(out.stdout.contains("public key: "), "{}", out.describe());
        }
        Keys { dir }
    }

    fn router_public(&self) -> PathBuf {
        self.dir.join("router.key")
    }

    fn secret(&self, name: &str) -> PathBuf {
        let p = self.dir.join(format!("{name}.key_secret"));
        if p.exists() {
            p
        } else {
            self.dir.join("clients").join(format!("{name}.key_secret"))
        }
    }

    /// The client flags for `name`'s key pair.
    fn flags(&self, name: &str) -> Vec<String> {
        vec![
            "--curve-server-key".into(),
            self.router_public().display().to_string(),
            "--curve-secret-key-file".into(),
            self.secret(name).display().to_string(),
        ]
    }

    /// `name`'s keys for the test's own admin queries.
    fn client(&self, name: &str) -> emq_transport::curve::CurveClient {
        emq_transport::curve::CurveClient {
            server_key: emq_transport::curve::read_public_key(
                self.router_public().to_str().unwrap(),
            )
            .unwrap(),
            own: emq_transport::curve::read_key_pair(&self.secret(name)).unwrap(),
        }
    }
}

/// A router whose three sockets are CURVE and let in `clients/`.
fn curve_router(keys: &Keys) -> (Proc, Addrs) {
    let secret = keys.secret("router").display().to_string();
    let clients = keys.dir.join("clients").display().to_string();
    start_router_as(
        &[
            "--journal",
            "none",
            "--curve-secret-key-file",
            &secret,
            "--curve-keys",
            &clients,
        ],
        Some(&keys.client("ops")),
    )
}

fn counters(admin: &str, keys: Option<&Keys>) -> Value {
    let ops = keys.map(|k| k.client("ops"));
    let status =
        query_as(admin, Command::Status, Duration::from_secs(5), ops.as_ref()).expect("STATUS");
    status["counters"].clone()
}

fn workers(admin: &str, keys: Option<&Keys>) -> usize {
    let ops = keys.map(|k| k.client("ops"));
    query_as(
        admin,
        Command::RouterShowWorkers,
        Duration::from_secs(5),
        ops.as_ref(),
    )
    .ok()
    .and_then(|v| v["connected_workers"].as_object().map(|m| m.len()))
    .unwrap_or(0)
}

fn sender(broker: &str, flags: &[String], extra: &[&str]) -> RunOutput {
    run(
        Spawn::new("emq-sender", bins::bin(bins::SENDER))
            .args(["--broker", broker])
            .args(flags)
            .args(extra),
        RUN_LIMIT,
    )
}

/// One shell job through relays on all three sockets (job manager on the
/// backend relay, emq-sender on the frontend relay, emq-cli on the admin
/// relay); returns the relays after the job's result came back and
/// emq-cli showed the job (payload and result) from the admin socket.
fn one_job_through_relays(keys: Option<&Keys>) -> [Relay; 3] {
    let (mut router, addrs) = match keys {
        Some(k) => curve_router(k),
        None => start_router_as(&["--journal", "none"], None),
    };
    let front = Relay::to_endpoint(&addrs.frontend);
    let back = Relay::to_endpoint(&addrs.backend);
    let admin = Relay::to_endpoint(&addrs.admin);
    let flags = |name: &str| keys.map(|k| k.flags(name)).unwrap_or_default();

    let worker_flags = flags("worker");
    let worker_flags: Vec<&str> = worker_flags.iter().map(String::as_str).collect();
    let mut jm = start_jobmanager("emq-jobmanager", &back.endpoint, &worker_flags);
    let registered = integration_tests::poll_until(WAIT, Duration::from_millis(50), || {
        (workers(&addrs.admin, keys) > 0).then_some(())
    });
    assert!(
        registered.is_some(),
        "the job manager did not register; its log:\n{}\nrouter:\n{}",
        jm.tail(20),
        router.tail(20)
    );

    let job = serde_json::json!(["shell", {"argv": [
        "sh", "-c", format!("echo {PAYLOAD_MARK} >/dev/null; printf 'RESULT-%s-c9' $((6*7))")
    ]}])
    .to_string();
    let out = sender(&front.endpoint, &flags("client"), &["--wait", &job]);
    assert_eq!(out.code(), Some(0), "emq-sender: {}", out.describe());
    assert!(out.stdout.contains(RESULT_MARK), "{}", out.describe());

    // The job, with its payload and retained result, from the admin socket.
    let c = counters(&addrs.admin, keys);
    assert_eq!(c["accepted"], 1, "{c}");
    assert_eq!(c["completed"], 1, "{c}");
    let listed = run(
        Spawn::new(CLI, bins::bin(CLI))
            .args(["--admin", &admin.endpoint])
            .args(flags("ops"))
            .args(["--json", "jobs"]),
        RUN_LIMIT,
    );
    assert_eq!(listed.code(), Some(0), "emq-cli: {}", listed.describe());
    assert!(
        listed.stdout.contains(PAYLOAD_MARK) && listed.stdout.contains(RESULT_MARK),
        "emq-cli shows the payload and the result: {}",
        listed.describe()
    );
    jm.stop();
    router.stop();
    [front, back, admin]
}

#[test]
fn with_curve_on_all_three_sockets_jobs_run_and_no_payload_or_result_crosses_in_clear() {
    let keys = Keys::make();
    let relays = one_job_through_relays(Some(&keys));
    for (relay, socket) in relays.iter().zip(["frontend", "backend", "admin"]) {
        assert!(relay.len() > 200, "{socket}: only {} bytes", relay.len());
        assert!(
            !relay.saw(PAYLOAD_MARK.as_bytes()),
            "{socket}: the payload crossed in clear text"
        );
        assert!(
            !relay.saw(RESULT_MARK.as_bytes()),
            "{socket}: the result crossed in clear text"
        );
        assert!(
            !relay.saw(b"eMQP/1.0"),
            "{socket}: eMQP frames in clear text"
        );
    }
}

#[test]
fn without_curve_the_same_run_shows_payload_and_result_on_the_wire() {
    let relays = one_job_through_relays(None);
    let [front, back, admin] = &relays;
    assert!(front.saw(PAYLOAD_MARK.as_bytes()) && front.saw(RESULT_MARK.as_bytes()));
    assert!(back.saw(PAYLOAD_MARK.as_bytes()) && back.saw(RESULT_MARK.as_bytes()));
    assert!(admin.saw(PAYLOAD_MARK.as_bytes()));
}

#[test]
fn unknown_keys_no_keys_and_plain_are_refused_before_the_core_and_sighup_lets_a_new_key_in() {
    let keys = Keys::make();
    let (mut router, addrs) = curve_router(&keys);
    let before = counters(&addrs.admin, Some(&keys));
    let job = r#"["call", {"handler": "echo", "args": "refused"}]"#;
    let short = ["--timeout", "1", job];

    let stranger = keys.flags("stranger");
    let out = sender(&addrs.frontend, &stranger, &short);
    assert_eq!(out.code(), Some(5), "unknown key: {}", out.describe());
    let out = sender(&addrs.frontend, &[], &short);
    assert_eq!(out.code(), Some(5), "no key: {}", out.describe());
    let plain: Vec<String> = ["--username", "u", "--password", "p"]
        .map(String::from)
        .to_vec();
    let out = sender(&addrs.frontend, &plain, &short);
    assert_eq!(out.code(), Some(5), "PLAIN: {}", out.describe());
    // A job manager with an unknown key cannot register; emq-cli without
    // keys gets no answer from the admin socket.
    let mut jm = start_jobmanager("emq-jobmanager-stranger", &addrs.backend, &{
        let f: Vec<&str> = stranger.iter().map(String::as_str).collect();
        f
    });
    let cli = run(
        Spawn::new(CLI, bins::bin(CLI)).args(["--admin", &addrs.admin, "--timeout", "1", "status"]),
        RUN_LIMIT,
    );
    assert_eq!(
        cli.code(),
        Some(1),
        "emq-cli without keys: {}",
        cli.describe()
    );

    let stranger_key = keys.client("stranger").own.public.to_string();
    for line in [
        format!("CURVE key {stranger_key} from 127.0.0.1 is not authorised on frontend"),
        format!("CURVE key {stranger_key} from 127.0.0.1 is not authorised on backend"),
        // (libzmq reports a mechanism mismatch, or a handshake that ended
        // early when the client gave up first)
        "frontend: a peer".to_string(),
        "admin: a peer".to_string(),
    ] {
        router
            .wait_for_log_line(&line, WAIT)
            .unwrap_or_else(|e| panic!("router log lacks {line:?}: {e}"));
    }
    let after = counters(&addrs.admin, Some(&keys));
    assert_eq!(
        before, after,
        "nothing of the refused peers reached the core"
    );
    assert_eq!(workers(&addrs.admin, Some(&keys)), 0);
    jm.stop();

    // Authorise the stranger's key and tell the router: it gets in.
    std::fs::copy(
        keys.dir.join("stranger.key"),
        keys.dir.join("clients").join("stranger.key"),
    )
    .unwrap();
    router.signal(libc::SIGHUP);
    router
        .wait_for_log_line("SIGHUP: reloaded frontend: 4 authorised key(s)", WAIT)
        .unwrap_or_else(|e| panic!("no reload: {e}"));
    let out = sender(&addrs.frontend, &stranger, &["--timeout", "10", job]);
    assert_eq!(out.code(), Some(0), "after SIGHUP: {}", out.describe());
    assert_eq!(counters(&addrs.admin, Some(&keys))["accepted"], 1);
    router.stop();
}

#[test]
fn three_hundred_random_keys_cost_a_bounded_number_of_log_lines() {
    const ATTEMPTS: usize = 300;
    let keys = Keys::make();
    let (mut router, addrs) = curve_router(&keys);
    let server_key = keys.client("ops").server_key;
    // each with a key of its own (free to make), one attempt each (no
    // reconnecting), all at once
    let socks: Vec<zmq::Socket> = (0..ATTEMPTS)
        .map(|i| {
            let sock = integration_tests::zmq_ctx().socket(zmq::DEALER).unwrap();
            sock.set_linger(0).unwrap();
            sock.set_reconnect_ivl(-1).unwrap();
            emq_transport::curve::CurveClient {
                server_key,
                own: emq_transport::curve::generate().unwrap(),
            }
            .apply(&sock)
            .unwrap();
            sock.set_identity(format!("random-{i}").as_bytes()).unwrap();
            sock.connect(&addrs.frontend).unwrap();
            sock
        })
        .collect();
    // every refusal is either its own line (a key of its own) or counted
    // in a summary once its 10 s window is over
    let refusal = "is not authorised on frontend";
    let summary = "more connection refusal(s) in the last 10 s";
    let accounted = |log: &str| -> (usize, u64) {
        let lines = log.lines().filter(|l| l.contains(refusal)).count();
        let summed: u64 = log
            .lines()
            .filter_map(|l| {
                let head = &l[..l.find(summary)?];
                head.rsplit(|c: char| !c.is_ascii_digit())
                    .find(|w| !w.is_empty())?
                    .parse::<u64>()
                    .ok()
            })
            .sum();
        (lines, summed)
    };
    let done =
        integration_tests::poll_until(Duration::from_secs(40), Duration::from_millis(100), || {
            let (lines, summed) = accounted(&router.stderr());
            (lines as u64 + summed >= ATTEMPTS as u64).then_some((lines, summed))
        });
    drop(socks);
    let log = router.stderr();
    let (lines, summed) = done.unwrap_or_else(|| {
        panic!(
            "not all {ATTEMPTS} refusals were logged or summed up: {:?}\n{}",
            accounted(&log),
            router.tail(30)
        )
    });
    router.stop();
    let warnings = log.lines().filter(|l| l.contains(" WARN ")).count();
    assert!(
        lines <= 2 * emq_transport::zap::REFUSALS_PER_WINDOW as usize,
        "{lines} refusal lines for {ATTEMPTS} random keys"
    );
    assert!(warnings <= 30, "{warnings} warning lines in all:\n{log}");
    integration_tests::report(&format!(
        "curve: {ATTEMPTS} random-key attempts -> {lines} refusal line(s) + {summed} summed up \
         in a summary; {warnings} warning line(s) in all"
    ));
}
