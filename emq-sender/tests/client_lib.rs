//! The `Client` library type on its own, against a fake ROUTER in a thread.

use std::thread;
use std::time::Duration;

use emq_sender::{Client, Outcome};
use emq_testkit::ports::free_endpoint;
use emq_testkit::FakeRouter;
use emqp_proto::{Command, Headers, JobResult, Reply, ResultStatus};

#[test]
fn submit_and_wait_for_ack_and_result() {
    let fake = FakeRouter::new();
    let ep = fake.endpoint.clone();
    let server = thread::spawn(move || {
        for _ in 0..2 {
            let (id, msg) = fake
                .recv(Duration::from_secs(10))
                .expect("a REQUEST within 10 s");
            fake.send(&id, Command::Reply(Reply::ack_of(&msg.msgid)));
            fake.send(
                &id,
                Command::Result(JobResult {
                    orig_msgid: msg.msgid.clone(),
                    status: ResultStatus::Ok,
                    payload: br#"{"value": 7}"#.to_vec(),
                }),
            );
        }
    });
    let client = Client::connect(&ep).unwrap();
    assert_eq!(client.identity().len(), 36);
    let (_, outcome) = client
        .submit_and_wait(
            "default",
            &Headers::new(),
            b"[1]".to_vec(),
            false,
            Duration::from_secs(10),
        )
        .unwrap();
    assert_eq!(outcome, Outcome::Accepted);
    let (_, outcome) = client
        .submit_and_wait(
            "default",
            &Headers::new(),
            b"[2]".to_vec(),
            true,
            Duration::from_secs(10),
        )
        .unwrap();
    // the first job's RESULT (still queued) is skipped: it is for another msgid
    assert_eq!(
        outcome,
        Outcome::Finished {
            status: ResultStatus::Ok,
            payload: br#"{"value": 7}"#.to_vec()
        }
    );
    server.join().unwrap();
}

#[test]
fn a_full_send_queue_is_a_timeout_error() {
    // nothing listens there: messages pile up in the outgoing queue
    let ep = free_endpoint();
    let opts = emq_transport::SocketOptions {
        hwm: 5,
        max_message_size: -1,
        linger_ms: 0,
        plain: None,
        curve: None,
    };
    let client = Client::connect_with(&ep, &opts).unwrap();
    client.set_send_timeout(Duration::from_millis(100)).unwrap();
    let mut err = None;
    for _ in 0..50 {
        if let Err(e) = client.submit("default", &Headers::new(), b"[1]".to_vec()) {
            err = Some(e);
            break;
        }
    }
    let err = err.expect("the queue never filled up");
    assert_eq!(err.kind, emq_sender::ErrorKind::SendTimeout, "{err}");
}

/// A client on a two-address failover list: the router on the first
/// address takes a REQUEST without answering and goes away; a router on
/// the second address then gets the client's hello and the REQUEST again
/// (same msgid, same identity). Its `duplicate-msgid` answer counts as
/// accepted, and the RESULT is confirmed with RECEIVED.
#[test]
fn a_failover_list_sends_unanswered_requests_again_to_the_next_router() {
    let (a_ep, b_ep) = (free_endpoint(), free_endpoint());
    let a = FakeRouter::bind(&a_ep);
    let client = Client::connect(&format!("{a_ep}, {b_ep}")).unwrap();
    assert_eq!(client.endpoint(), format!("{a_ep},{b_ep}"));
    let headers = Headers::parse(b"reply-requested").unwrap();
    let msgid = client.submit("default", &headers, b"[1]".to_vec()).unwrap();
    let (id_a, req) = a.expect_command("REQUEST");
    assert_eq!(req.msgid, msgid);
    let Command::Request(r) = &req.command else {
        panic!()
    };
    assert!(r.headers.result_receipt(), "{:?}", r.headers);
    // The client sees its connection go down while A is gone.
    drop(a);
    assert!(client
        .recv_event(Duration::from_millis(300))
        .unwrap()
        .is_none());
    let b = FakeRouter::bind(&b_ep);
    let server = thread::spawn(move || {
        let (id, hello) = b.expect_command("HEARTBEAT");
        assert_eq!(id, id_a, "the same identity on the other router");
        let _ = hello;
        let (id, again) = b.expect_command("REQUEST");
        assert_eq!(again.msgid, msgid);
        b.send(
            &id,
            Command::Reject(emqp_proto::Reject {
                orig_msgid: msgid.clone(),
                reason: emqp_proto::RejectReason::DuplicateMsgid,
                text: "held".into(),
            }),
        );
        b.send(
            &id,
            Command::Result(JobResult {
                orig_msgid: msgid.clone(),
                status: ResultStatus::Ok,
                payload: br#"{"value": 1}"#.to_vec(),
            }),
        );
        let (_, receipt) = b.expect_command("RECEIVED");
        assert_eq!(
            receipt.command,
            Command::Received {
                orig_msgids: vec![msgid]
            }
        );
    });
    let mut events = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while std::time::Instant::now() < deadline && events.len() < 3 {
        if let Some(ev) = client.recv_event(Duration::from_millis(100)).unwrap() {
            events.push(ev);
        }
    }
    // The receipt goes out before the client next waits.
    let _ = client.recv_event(Duration::from_millis(200)).unwrap();
    server.join().unwrap();
    assert!(
        matches!(&events[0], emq_sender::Event::Reconnected { endpoint, resent: 1 } if *endpoint == b_ep),
        "{events:?}"
    );
    assert!(
        matches!(&events[1], emq_sender::Event::Accepted { .. }),
        "{events:?}"
    );
    assert!(
        matches!(&events[2], emq_sender::Event::Result { .. }),
        "{events:?}"
    );
}
