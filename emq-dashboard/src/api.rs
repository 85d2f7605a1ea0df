//! `/api/<op>`: the control plane over HTTP, one ADMIN request per call.
//!
//! - The op is the path's last segment; its arguments come from the query
//!   string and, for POST, from a JSON object body (the body wins). Query
//!   values are strings, except `limit` (a number) and `all` (`true`):
//!   `GET /api/jobs?queue=email&state=queued&limit=20`.
//! - The answer is the router's answer object as it is, with an HTTP status
//!   that says the same: 200 for `"ok": true`; for errors by kind,
//!   `bad-request` 400, `not-found` 404, `conflict` and `unsupported` 409,
//!   `journal-unavailable` and `shutting-down` 503; 504 when the router did
//!   not answer in time (`{"ok": false, "error": {"kind": "timeout"}}`).
//! - The request is decoded into an `AdminOp` here; one that does not
//!   decode gets the router's own `bad-request` answer (400) without
//!   reaching it.
//! - An op name the control plane does not know is 404 (`not-found`),
//!   by GET or POST, before anything else.
//! - Reads (`OpName::is_change` false) take GET or POST; everything else
//!   is a state change and needs POST and the rules of [`crate::access`].
//! - Three answers are the dashboard's own: `GET /api/stats` (the sampled
//!   counters of [`crate::history`]), `GET /api/queue-stats` (each
//!   queue's samples, [`crate::queue_history`]; `?queue=NAME` for one,
//!   `?last=N` for the newest N samples of each) and `GET /api/info`
//!   (version and whether the dashboard is read-only).

use std::sync::Arc;

use emq_http::axum::body::Bytes;
use emq_http::axum::extract::{Path, RawQuery, State};
use emq_http::axum::http::{header, HeaderMap, Method, StatusCode};
use emq_http::axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value};
use tokio::sync::Semaphore;

use emq_transport::admin::ClientError;
use emqp_proto::admin::{decode_answer, encode_answer, AdminError, AdminOp, ErrorKind, OpName};

use crate::access::Access;
use crate::admin::AdminPool;
use crate::history::History;

/// What the API handlers share.
pub(crate) struct Api {
    pub admin: Arc<AdminPool>,
    pub history: History,
    pub access: Access,
    /// Admin requests in progress at once (each holds a blocking thread).
    pub slots: Semaphore,
}

/// Most admin requests waiting for the router at once.
pub(crate) const CONCURRENT: usize = 16;

pub(crate) fn json_response(status: u16, v: &Value) -> Response {
    (
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        v.to_string(),
    )
        .into_response()
}

pub(crate) fn error_response(status: u16, kind: &str, message: &str) -> Response {
    json_response(
        status,
        &json!({"ok": false, "error": {"kind": kind, "message": message}}),
    )
}

/// A refusal as the router would answer it, with its HTTP status.
pub(crate) fn refusal_response(e: AdminError) -> Response {
    json_response(e.kind.http_status(), &encode_answer(Err(e)))
}

/// The HTTP status of an answer.
fn status_of(answer: &Value) -> u16 {
    match decode_answer(answer) {
        Some(Ok(_)) => 200,
        Some(Err(e)) => e.kind.http_status(),
        None => 500,
    }
}

/// The request object of `op` from a query string and a body.
pub(crate) fn request_of(op: &str, query: Option<&str>, body: &[u8]) -> Result<Value, String> {
    let mut req = Map::new();
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let k = decode(k)?;
        let v = decode(v)?;
        if v.is_empty() {
            // An empty form field is no filter.
            continue;
        }
        let value = match k.as_str() {
            "limit" => Value::from(
                v.parse::<u64>()
                    .map_err(|_| format!("limit must be a number, got {v:?}"))?,
            ),
            "all" => Value::Bool(matches!(v.as_str(), "true" | "1" | "yes")),
            _ => Value::String(v),
        };
        req.insert(k, value);
    }
    if !body.iter().all(u8::is_ascii_whitespace) {
        match serde_json::from_slice::<Value>(body) {
            Ok(Value::Object(m)) => req.extend(m),
            Ok(other) => return Err(format!("the body must be a JSON object, got {other}")),
            Err(e) => return Err(format!("the body is not JSON: {e}")),
        }
    }
    req.insert("op".into(), op.into());
    Ok(Value::Object(req))
}

fn decode(s: &str) -> Result<String, String> {
    let s = s.replace('+', " ");
    percent_encoding::percent_decode_str(&s)
        .decode_utf8()
        .map(|c| c.into_owned())
        .map_err(|_| format!("not UTF-8 after decoding: {s:?}"))
}

/// `GET|POST /api/{op}`.
pub(crate) async fn op(
    State(api): State<Arc<Api>>,
    method: Method,
    Path(op): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let is_post = method == Method::POST;
    match op.as_str() {
        "stats" => return json_response(200, &api.history.to_json()),
        "queue-stats" => {
            let req = match request_of(&op, query.as_deref(), &[]) {
                Ok(r) => r,
                Err(e) => return refusal_response(AdminError::bad_request(e)),
            };
            let last = match req["last"].as_str().map(str::parse::<usize>) {
                None => None,
                Some(Ok(n)) => Some(n),
                Some(Err(_)) => {
                    return refusal_response(AdminError::bad_request(format!(
                        "last must be a number, got {}",
                        req["last"]
                    )))
                }
            };
            let only = req["queue"].as_str();
            return json_response(200, &api.history.queues_json(only, last));
        }
        "info" => {
            return json_response(
                200,
                &json!({
                    "ok": true,
                    "version": env!("CARGO_PKG_VERSION"),
                    "read_only": api.access.read_only,
                    "token": api.access.token.is_some(),
                }),
            )
        }
        _ => {}
    }
    let Some(name) = OpName::parse(&op) else {
        return error_response(404, "not-found", &format!("unknown op {op:?}"));
    };
    let change = name.is_change();
    if change {
        if let Err((status, kind, message)) = api.access.admit_change(is_post, &headers) {
            return error_response(status, kind, &message);
        }
    }
    let decoded = request_of(&op, query.as_deref(), if is_post { &body } else { &[] })
        .map_err(AdminError::bad_request)
        .and_then(|req| Ok((AdminOp::from_value(req.clone())?, req)));
    let (admin_op, req) = match decoded {
        Ok(d) => d,
        Err(e) => return refusal_response(e),
    };
    if change {
        let mut args = req.clone();
        if let Some(m) = args.as_object_mut() {
            m.remove("op");
        }
        log::info!("dashboard: {op} {args}");
    }
    let Ok(_slot) = api.slots.acquire().await else {
        return refusal_response(AdminError::new(
            ErrorKind::ShuttingDown,
            "the server is stopping",
        ));
    };
    let admin = api.admin.clone();
    match tokio::task::spawn_blocking(move || admin.request(&admin_op)).await {
        Ok(Ok(answer)) => json_response(status_of(&answer), &answer),
        Ok(Err(ClientError::Timeout { timeout: t, .. })) => error_response(
            504,
            "timeout",
            &format!("the router did not answer within {t:?}"),
        ),
        Ok(Err(e)) => error_response(502, "router-unreachable", &e.to_string()),
        Err(e) => error_response(500, "internal", &e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_and_body_make_the_request() {
        let r = request_of(
            "jobs",
            Some("queue=e%20mail&state=&limit=20&contains=a+b"),
            b"",
        )
        .unwrap();
        assert_eq!(
            r,
            json!({"queue": "e mail", "limit": 20, "contains": "a b", "op": "jobs"})
        );
        let r = request_of(
            "dead-retry",
            Some("all=true&queue=x"),
            br#"{"queue": "y", "op": "shutdown"}"#,
        )
        .unwrap();
        assert_eq!(r, json!({"all": true, "queue": "y", "op": "dead-retry"}));
        assert!(request_of("jobs", Some("limit=lots"), b"").is_err());
        assert!(request_of("jobs", None, b"[1]").is_err());
    }

    #[test]
    fn error_kinds_have_http_statuses() {
        assert_eq!(status_of(&json!({"ok": true})), 200);
        for (kind, code) in [
            ("bad-request", 400),
            ("not-found", 404),
            ("conflict", 409),
            ("unsupported", 409),
            ("journal-unavailable", 503),
        ] {
            assert_eq!(
                status_of(&json!({"ok": false, "error": {"kind": kind}})),
                code
            );
        }
    }

    /// `method /api/<op>?query` against a router that never answers: what
    /// the dashboard decides itself comes back at once, what it asks the
    /// router times out (504).
    fn call(method: Method, op: &str, query: &str) -> (u16, Value) {
        let ctx = zmq::Context::new();
        let silent = ctx.socket(zmq::ROUTER).unwrap();
        silent.bind("inproc://api-test-silent").unwrap();
        let api = Arc::new(Api {
            admin: Arc::new(AdminPool::new(
                &ctx,
                "inproc://api-test-silent",
                std::time::Duration::from_millis(100),
            )),
            history: History::default(),
            access: Access::default(),
            slots: Semaphore::new(CONCURRENT),
        });
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, "127.0.0.1:1".parse().unwrap());
        headers.insert(crate::access::ACTION_HEADER, "1".parse().unwrap());
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let response = rt.block_on(super::op(
            State(api),
            method,
            Path(op.to_string()),
            RawQuery(Some(query.to_string())),
            headers,
            Bytes::new(),
        ));
        let status = response.status().as_u16();
        let body = rt
            .block_on(emq_http::axum::body::to_bytes(
                response.into_body(),
                1 << 20,
            ))
            .unwrap();
        (status, serde_json::from_slice(&body).unwrap())
    }

    #[test]
    fn ops_are_decoded_here_and_unknown_ones_need_post() {
        // A read that decodes goes to the router (which is silent here).
        assert_eq!(call(Method::GET, "jobs", "limit=5").0, 504);
        // One that does not decode is answered as the router would.
        let (status, v) = call(Method::GET, "jobs", "limit=0");
        assert_eq!(status, 400);
        assert_eq!(v["error"]["kind"], "bad-request", "{v}");
        // A change needs POST.
        assert_eq!(call(Method::GET, "pause", "queue=q").0, 405);
    }

    /// The per-queue history is the dashboard's own answer (never the
    /// router's, which is silent here).
    #[test]
    fn queue_stats_are_answered_here() {
        let (status, v) = call(Method::GET, "queue-stats", "queue=mail&last=5");
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["queues"], json!({}), "{v}");
        assert_eq!(v["fields"][0], "accepted", "{v}");
        assert_eq!(call(Method::GET, "queue-stats", "last=many").0, 400);
    }

    /// Issue 32: `GET /api/nope` answered 405 (as a change needing POST):
    /// an op name nobody knows is 404, by GET or POST.
    #[test]
    fn unknown_ops_are_not_found() {
        for method in [Method::GET, Method::POST] {
            let (status, v) = call(method.clone(), "nope", "");
            assert_eq!(status, 404, "{method}: {v}");
            assert_eq!(v["error"]["kind"], "not-found", "{v}");
            assert!(
                v["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("unknown op \"nope\""),
                "{v}"
            );
        }
    }
}
