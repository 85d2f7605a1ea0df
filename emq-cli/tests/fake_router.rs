//! emq-cli against a fake admin socket played by the test: an emq router
//! (STATUS with `counters`, ADMIN answered from a script) or an EventMQ
//! 0.3.13 one (STATUS without `counters`, ADMIN ignored as 0.3.13 ignores
//! commands it does not know). Covers detection, exit codes, `--json`,
//! paging, confirmations and timeouts without a real router.

use std::collections::HashMap;
use std::time::Duration;

use clap::Parser;
use emq_cli::{run, Cli, Exit, Io};
use emq_testkit::fake::ServedRouter;
use emq_testkit::process::run_to_exit;
use emq_testkit::Spawn;
use emqp_proto::{Command, Reply};
use serde_json::{json, Value};

const EMQ_STATUS: &str = r#"{"counters":{"accepted":0},"waiting_messages_by_queue":{}}"#;
const OLD_STATUS: &str = r#"{"inflight_messages_by_queue": {}, "latency_messages_by_queue": {}, "max_latency_messages_by_queue": {}, "waiting_messages_by_queue": {"default": 2}, "processed_messages_by_queue": {}, "processed_messages_by_worker": {}}"#;

/// What the fake router answers to an ADMIN request: the answer text, or
/// `None` for silence.
type Script = Box<dyn Fn(&Value) -> Option<String> + Send>;

/// emq-testkit's fake ROUTER, served by its own thread until dropped,
/// answering as a router's admin socket does.
struct FakeRouter(ServedRouter);

impl FakeRouter {
    /// `status`: the STATUS answer; `admin`: the ADMIN script (a 0.3.13
    /// router: `None`, ADMIN is never answered).
    fn start(status: &'static str, admin: Option<Script>) -> FakeRouter {
        let reply = |payload: String, orig: Option<String>| {
            Command::Reply(Reply {
                payload: payload.into_bytes(),
                orig_msgid: orig,
                status: None,
                credit: 0,
            })
        };
        FakeRouter(emq_testkit::FakeRouter::new().serve(move |msg| match &msg.command {
            Command::Status => Some(reply(status.to_string(), None)),
            Command::RouterShowWorkers => Some(reply(
                r#"{"connected_workers": {"w-1": {"queues": [[10, "default"]], "hb": 1.0, "available_slots": 3}}, "connected_queues": {}}"#.into(),
                None,
            )),
            Command::RouterShowSchedulers => {
                Some(reply(r#"{"connected_schedulers": {}}"#.into(), None))
            }
            Command::Disconnect => Some(Command::Ack {
                acked_msgid: msg.msgid.clone(),
                features: vec![],
            }),
            Command::Admin { request } => admin.as_ref().and_then(|script| {
                let req: Value = serde_json::from_slice(request).unwrap();
                script(&req).map(|a| reply(a, Some(msg.msgid.clone())))
            }),
            _ => None,
        }))
    }

    fn emq(script: impl Fn(&Value) -> Option<String> + Send + 'static) -> FakeRouter {
        FakeRouter::start(EMQ_STATUS, Some(Box::new(script)))
    }

    fn eventmq_0313() -> FakeRouter {
        FakeRouter::start(OLD_STATUS, None)
    }

    fn endpoint(&self) -> &str {
        &self.0.endpoint
    }

    /// Every message received, in order.
    fn seen(&self) -> Vec<Command> {
        self.0.seen().into_iter().map(|m| m.command).collect()
    }

    /// The ADMIN requests received, as JSON.
    fn admin_requests(&self) -> Vec<Value> {
        self.seen()
            .into_iter()
            .filter_map(|c| match c {
                Command::Admin { request } => serde_json::from_slice(&request).ok(),
                _ => None,
            })
            .collect()
    }
}

struct Outcome {
    exit: Exit,
    out: String,
    err: String,
    asked: Vec<String>,
}

/// Run emq-cli in-process against `endpoint`; `answer` is what the user
/// types at a confirmation (stdin is taken to be a terminal).
fn cli(endpoint: &str, args: &[&str], answer: bool) -> Outcome {
    let argv = ["emq-cli", "--admin", endpoint, "--timeout", "3"]
        .into_iter()
        .chain(args.iter().copied());
    let env: HashMap<String, String> =
        [("EVENTMQ_CONFIG_FILE".to_string(), "/dev/null".to_string())].into();
    let plan = Cli::try_parse_from(argv).unwrap().plan(&env, true).unwrap();
    let (mut out, mut err, mut asked) = (Vec::new(), Vec::new(), Vec::new());
    let mut ask = |q: &str| {
        asked.push(q.to_string());
        answer
    };
    let exit = run(
        &plan,
        Io {
            out: &mut out,
            err: &mut err,
            ask: &mut ask,
        },
    );
    Outcome {
        exit,
        out: String::from_utf8(out).unwrap(),
        err: String::from_utf8(err).unwrap(),
        asked,
    }
}

#[test]
fn an_emq_router_gets_admin_requests_and_tables_come_back() {
    let r = FakeRouter::emq(|req| {
        assert_eq!(req, &json!({"op": "queues"}));
        Some(r#"{"ok":true,"queues":[{"name":"default","depth":1,"inflight":0,"retry_waiting":0,"delayed":0,"oldest_age_ms":5000,"paused":false,"processed":2,"failed":0,"workers":1}]}"#.into())
    });
    let o = cli(r.endpoint(), &["queues"], false);
    assert_eq!(o.exit, Exit::Ok, "{}", o.err);
    assert!(o.out.starts_with("QUEUE    DEPTH"), "{}", o.out);
    assert!(o.out.contains("default      1"), "{}", o.out);
    // STATUS first (detection), then the ADMIN request.
    let seen = r.seen();
    assert!(matches!(seen.first(), Some(Command::Status)), "{seen:?}");
    assert_eq!(r.admin_requests(), vec![json!({"op": "queues"})]);
}

#[test]
fn json_prints_the_answer_unchanged() {
    let answer = r#"{"ok": true,   "queues": [], "zz": 1, "aa": 2}"#;
    let r = FakeRouter::emq(move |_| Some(answer.into()));
    let o = cli(r.endpoint(), &["--json", "queues"], false);
    assert_eq!(o.exit, Exit::Ok);
    assert_eq!(o.out, format!("{answer}\n"));
}

#[test]
fn a_refusal_is_exit_3_with_the_routers_message() {
    let r = FakeRouter::emq(|req| {
        Some(
            json!({"ok": false, "error": {"kind": "not-found", "message": format!("no job {}", req["msgid"].as_str().unwrap())}})
                .to_string(),
        )
    });
    let o = cli(r.endpoint(), &["job", "m-404"], false);
    assert_eq!(o.exit, Exit::Refused);
    assert_eq!(o.out, "");
    assert!(
        o.err
            .contains("job: the router refused: not-found: no job m-404"),
        "{}",
        o.err
    );
    // With --json the answer goes to stdout as well.
    let o = cli(r.endpoint(), &["--json", "cancel", "m-404"], false);
    assert_eq!(o.exit, Exit::Refused);
    assert_eq!(
        serde_json::from_str::<Value>(&o.out).unwrap()["error"]["kind"],
        "not-found"
    );
}

#[test]
fn an_answer_that_is_not_the_control_planes_is_exit_1() {
    let r = FakeRouter::emq(|_| Some("not json".into()));
    let o = cli(r.endpoint(), &["queues"], false);
    assert_eq!(o.exit, Exit::Internal);
    assert!(o.err.contains("not JSON"), "{}", o.err);
    let r = FakeRouter::emq(|_| Some(r#"{"queues": []}"#.into()));
    let o = cli(r.endpoint(), &["queues"], false);
    assert_eq!(o.exit, Exit::Internal);
    assert!(
        o.err.contains("not an answer of the control plane"),
        "{}",
        o.err
    );
}

#[test]
fn all_follows_the_cursor_and_merges_the_pages() {
    let r = FakeRouter::emq(|req| {
        let (jobs, next) = match req.get("cursor").and_then(Value::as_str) {
            None => (json!([{"msgid": "a"}, {"msgid": "b"}]), json!("c1")),
            Some("c1") => (json!([{"msgid": "c"}]), json!("c2")),
            Some("c2") => (json!([]), Value::Null),
            Some(other) => panic!("unknown cursor {other}"),
        };
        Some(json!({"ok": true, "jobs": jobs, "next_cursor": next, "scanned": 10}).to_string())
    });
    let o = cli(
        r.endpoint(),
        &["--json", "jobs", "--all", "--queue", "q", "--limit", "2"],
        false,
    );
    assert_eq!(o.exit, Exit::Ok, "{}", o.err);
    let v: Value = serde_json::from_str(&o.out).unwrap();
    let ids: Vec<&str> = v["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["msgid"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["a", "b", "c"]);
    assert_eq!(v["scanned"], 30);
    assert_eq!(v["next_cursor"], Value::Null);
    let reqs = r.admin_requests();
    assert_eq!(reqs.len(), 3);
    assert_eq!(reqs[1]["cursor"], "c1");
    assert!(reqs.iter().all(|q| q["queue"] == "q" && q["limit"] == 2));
    // Without --all: one page, and a note that more follow.
    let o = cli(r.endpoint(), &["jobs"], false);
    assert_eq!(o.exit, Exit::Ok);
    assert!(o.err.contains("--all"), "{}", o.err);
    assert_eq!(r.admin_requests().len(), 4);
}

#[test]
fn all_is_bounded_when_the_cursor_never_ends() {
    let r = FakeRouter::emq(|req| {
        let n = req.get("cursor").and_then(Value::as_u64).unwrap_or(0);
        Some(
            json!({"ok": true, "dead_letters": [{"msgid": n}], "next_cursor": n + 1, "count": 1})
                .to_string(),
        )
    });
    let o = cli(r.endpoint(), &["--json", "dead", "list", "--all"], false);
    assert_eq!(o.exit, Exit::Ok, "{}", o.err);
    let v: Value = serde_json::from_str(&o.out).unwrap();
    assert_eq!(
        v["dead_letters"].as_array().unwrap().len(),
        emq_cli::op::MAX_PAGES
    );
    assert!(o.err.contains("stopped after 1000 pages"), "{}", o.err);
}

#[test]
fn a_declined_confirmation_sends_nothing() {
    let r = FakeRouter::emq(|_| Some(r#"{"ok":true,"queue":"q","purged":3}"#.into()));
    let o = cli(r.endpoint(), &["purge", "q"], false);
    assert_eq!(o.exit, Exit::Usage);
    assert_eq!(o.asked.len(), 1);
    assert!(o.asked[0].contains("queue \"q\"") && o.asked[0].ends_with("[y/N] "));
    assert!(r.admin_requests().is_empty());
    let o = cli(r.endpoint(), &["purge", "q"], true);
    assert_eq!(o.exit, Exit::Ok, "{}", o.err);
    assert_eq!(o.out, "purged 3 waiting job(s) of queue q\n");
    assert_eq!(
        r.admin_requests(),
        vec![json!({"op": "purge", "queue": "q"})]
    );
    // --yes: no question.
    let o = cli(r.endpoint(), &["dead", "discard", "--all", "--yes"], true);
    assert!(o.asked.is_empty());
    assert_eq!(
        r.admin_requests()[1],
        json!({"op": "dead-discard", "all": true})
    );
}

#[test]
fn an_emq_router_without_the_control_plane_times_out_with_a_hint() {
    let r = FakeRouter::emq(|_| None);
    let argv = [
        "emq-cli",
        "--admin",
        r.endpoint(),
        "--timeout",
        "0.3",
        "queues",
    ];
    let env: HashMap<String, String> =
        [("EVENTMQ_CONFIG_FILE".to_string(), "/dev/null".to_string())].into();
    let plan = Cli::try_parse_from(argv)
        .unwrap()
        .plan(&env, false)
        .unwrap();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let exit = run(
        &plan,
        Io {
            out: &mut out,
            err: &mut err,
            ask: &mut |_| false,
        },
    );
    assert_eq!(exit, Exit::Internal);
    let err = String::from_utf8(err).unwrap();
    assert!(
        err.contains("no answer to ADMIN queues within 0.3s") && err.contains("older than"),
        "{err}"
    );
}

#[test]
fn an_eventmq_0313_router_gets_its_own_commands_or_exit_4() {
    let r = FakeRouter::eventmq_0313();
    let o = cli(r.endpoint(), &["status"], false);
    assert_eq!(o.exit, Exit::Ok, "{}", o.err);
    assert!(o.out.starts_with("router: EventMQ 0.3.13"), "{}", o.out);
    assert!(o.out.contains("default        2"), "{}", o.out);
    let o = cli(r.endpoint(), &["--json", "status"], false);
    assert_eq!(o.out, format!("{OLD_STATUS}\n"));
    let o = cli(r.endpoint(), &["workers"], false);
    assert_eq!(o.exit, Exit::Ok);
    assert_eq!(
        o.out,
        "WORKER  QUEUES       CREDIT\nw-1     default(10)       3\n"
    );
    let o = cli(r.endpoint(), &["schedules"], false);
    assert_eq!(o.exit, Exit::Ok);
    assert!(o.out.starts_with("no scheduler connected"), "{}", o.out);
    for args in [
        &["queues"][..],
        &["jobs"],
        &["job", "m"],
        &["cancel", "m"],
        &["dead", "list"],
        &["dead", "retry", "m"],
        &["dead", "discard", "--all"],
        &["pause", "q"],
        &["resume", "q"],
        &["purge", "q"],
        &["drain", "w"],
        &["undrain", "w"],
        &["unschedule", "s"],
    ] {
        let o = cli(r.endpoint(), args, true);
        assert_eq!(o.exit, Exit::Unsupported, "{args:?}");
        assert!(o.err.contains("EventMQ 0.3.13"), "{}", o.err);
        assert!(
            o.asked.is_empty(),
            "{args:?}: no confirmation for an unsupported op"
        );
    }
    let o = cli(r.endpoint(), &["shutdown"], false);
    assert_eq!(o.exit, Exit::Ok, "{}", o.err);
    let seen = r.seen();
    assert!(matches!(seen.last(), Some(Command::Disconnect)), "{seen:?}");
    // Nothing but the 0.3.13 commands went to it.
    assert!(
        seen.iter().all(|c| !matches!(c, Command::Admin { .. })),
        "{seen:?}"
    );
}

#[test]
fn the_binary_maps_outcomes_to_exit_codes() {
    // The binary, run to its exit within a bound: its code and stderr.
    let run_bin = |args: &[&str]| {
        let spawn = Spawn::new("emq-cli", env!("CARGO_BIN_EXE_emq-cli"))
            .args(args)
            .env("EVENTMQ_CONFIG_FILE", "/dev/null");
        let out = run_to_exit(spawn, Duration::from_secs(30));
        (out.code(), out.stderr)
    };
    let code = |endpoint: &str, args: &[&str]| {
        run_bin(&[&["--admin", endpoint, "--timeout", "2"][..], args].concat())
    };
    let emq = FakeRouter::emq(|req| match req["op"].as_str() {
        Some("pause") => Some(r#"{"ok":true,"queue":"q","paused":true}"#.into()),
        _ => Some(r#"{"ok":false,"error":{"kind":"conflict","message":"finished"}}"#.into()),
    });
    assert_eq!(code(emq.endpoint(), &["pause", "q"]).0, Some(0));
    let (c, err) = code(emq.endpoint(), &["cancel", "m"]);
    assert_eq!(c, Some(3), "{err}");
    assert!(err.contains("conflict: finished"), "{err}");
    // Usage errors: clap's and ours (no terminal for a confirmation).
    assert_eq!(code(emq.endpoint(), &["dead", "retry"]).0, Some(2));
    let (c, err) = code(emq.endpoint(), &["purge", "q"]);
    assert_eq!(c, Some(2), "{err}");
    assert!(err.contains("--yes"), "{err}");
    let old = FakeRouter::eventmq_0313();
    assert_eq!(code(old.endpoint(), &["queues"]).0, Some(4));
    drop(old);
    // Nobody there.
    let gone = {
        let r = FakeRouter::eventmq_0313();
        r.endpoint().to_string()
    };
    assert_eq!(
        run_bin(&["--admin", &gone, "--timeout", "0.3", "status"]).0,
        Some(1)
    );
}

#[test]
fn a_failover_list_reaches_the_router_that_serves() {
    let r = FakeRouter::emq(|_| Some(r#"{"ok":true,"queues":[]}"#.into()));
    // Nobody listens on the first address (a standby binds nothing).
    let dead = emq_testkit::ports::free_endpoint();
    for _ in 0..3 {
        let o = cli(&format!("{dead},{}", r.endpoint()), &["queues"], false);
        assert_eq!(o.exit, Exit::Ok, "{}", o.err);
    }
    assert_eq!(r.admin_requests().len(), 3);
}
