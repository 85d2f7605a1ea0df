//! The `Client` library type on its own, against a fake ROUTER in a thread.

use std::thread;
use std::time::Duration;

use emq_sender::{Client, Outcome};
use emqp_proto::{Command, Headers, JobResult, Message, Reply, ResultStatus};

fn fake_router() -> (zmq::Context, zmq::Socket, String) {
    let ctx = zmq::Context::new();
    let sock = emq_transport::bind_router(
        &ctx,
        "tcp://127.0.0.1:*",
        &emq_transport::SocketOptions::default(),
    )
    .unwrap();
    sock.set_linger(0).unwrap();
    let ep = sock.get_last_endpoint().unwrap().unwrap();
    (ctx, sock, ep)
}

#[test]
fn submit_and_wait_for_ack_and_result() {
    let (_ctx, router, ep) = fake_router();
    let server = thread::spawn(move || {
        for _ in 0..2 {
            assert!(router.poll(zmq::POLLIN, 10_000).unwrap() > 0);
            let (id, msg) = Message::decode_routed(router.recv_multipart(0).unwrap()).unwrap();
            let send =
                |c| emq_transport::send_routed(&router, id.clone(), Message::new(c)).unwrap();
            send(Command::Reply(Reply::ack_of(&msg.msgid)));
            send(Command::Result(JobResult {
                orig_msgid: msg.msgid.clone(),
                status: ResultStatus::Ok,
                payload: br#"{"value": 7}"#.to_vec(),
            }));
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
    let ep = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("tcp://127.0.0.1:{}", l.local_addr().unwrap().port())
    };
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
    assert!(err.timed_out, "{err}");
}
