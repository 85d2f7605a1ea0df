//! The HEADERS frame: a comma-separated list such as
//! `reply-requested,guarantee,retry-count:3,timeout:10`.
//!
//! Order is preserved, and unknown headers are kept verbatim, so that a
//! router that parses headers forwards exactly the bytes it received.

use crate::error::{utf8_ref, DecodeError};

/// One header of the HEADERS frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Header {
    /// `reply-requested`: send the job's result back.
    ReplyRequested,
    /// `guarantee`: make sure the job runs even across failures.
    Guarantee,
    /// `retry-count:N`: retry a failed job N times.
    RetryCount(u32),
    /// `timeout:N`: kill the job after N seconds (0 = never).
    Timeout(u64),
    /// `nohaste` (SCHEDULE): first run after one interval.
    NoHaste,
    /// Any other header, kept as sent.
    Other(String),
}

impl Header {
    fn parse(item: &str) -> Result<Header, DecodeError> {
        Ok(match item {
            "reply-requested" => Header::ReplyRequested,
            "guarantee" => Header::Guarantee,
            "nohaste" => Header::NoHaste,
            _ => {
                if let Some(n) = item.strip_prefix("retry-count:") {
                    Header::RetryCount(n.trim().parse().map_err(|_| DecodeError::BadNumber {
                        field: "retry-count header",
                        value: n.to_string(),
                    })?)
                } else if let Some(n) = item.strip_prefix("timeout:") {
                    Header::Timeout(n.trim().parse().map_err(|_| DecodeError::BadNumber {
                        field: "timeout header",
                        value: n.to_string(),
                    })?)
                } else {
                    Header::Other(item.to_string())
                }
            }
        })
    }

    fn write(&self, out: &mut String) {
        match self {
            Header::ReplyRequested => out.push_str("reply-requested"),
            Header::Guarantee => out.push_str("guarantee"),
            Header::NoHaste => out.push_str("nohaste"),
            Header::RetryCount(n) => {
                out.push_str("retry-count:");
                out.push_str(&n.to_string());
            }
            Header::Timeout(n) => {
                out.push_str("timeout:");
                out.push_str(&n.to_string());
            }
            Header::Other(s) => out.push_str(s),
        }
    }
}

/// `result-receipt` (emq): the client confirms each RESULT of this job with
/// `RECEIVED`, and the router keeps the result (journaled) until then.
/// Kept as an unknown header on the wire (0.3.13 peers ignore it).
pub const RESULT_RECEIPT: &str = "result-receipt";

/// `batched-acks` (emq): the client takes the acknowledgements of its
/// REQUESTs as `ACKS [ORIG_MSGID, ...]` (several in one message) as well as
/// `REPLY [ORIG_MSGID]`. An emq router sends the acknowledgements it has
/// for such a client at one time in one ACKS. Kept as an unknown header on
/// the wire (0.3.13 routers ignore it and send REPLYs).
pub const BATCHED_ACKS: &str = "batched-acks";

/// `notices` (emq): the client asks for a NOTICE about anything it should
/// know of this job (sent to `default` or held because no job manager
/// serves its queue). Kept as an unknown header on the wire (0.3.13 peers
/// ignore it).
pub const NOTICES: &str = "notices";

/// `attempt:N` (emq, router → worker): the delivery count of a job the
/// router sends again (N > 1). The router sets it on every delivery after
/// the first, and replaces any `attempt` item a client sent; a first
/// delivery is forwarded as the client sent it (without the item, N is 1).
/// 0.3.13 job managers ignore it.
pub const ATTEMPT: &str = "attempt";

/// The delivery count a worker reads from the raw HEADERS frame: the
/// `attempt:N` item, else 1 (see [`ATTEMPT`]).
pub fn frame_attempt(frame: &[u8]) -> u32 {
    frame_item(frame, ATTEMPT)
        .and_then(|v| std::str::from_utf8(v).ok())
        .and_then(|v| v.trim().parse().ok())
        .filter(|n| *n >= 1)
        .unwrap_or(1)
}

/// emq: `batch:ID`, the batch (docs/PROTOCOL.md, "Batches") a REQUEST's
/// job joins. Workers see an unknown header.
pub const BATCH: &str = "batch";

/// The batch id of the raw HEADERS frame's `batch:ID` item (trimmed; the
/// last if given twice, as [`Headers::batch`]; `None` when absent, empty
/// or not UTF-8).
pub fn frame_batch(frame: &[u8]) -> Option<&str> {
    frame
        .split(|b| *b == b',')
        .filter_map(|item| {
            item.trim_ascii()
                .strip_prefix(BATCH.as_bytes())
                .and_then(|rest| rest.strip_prefix(b":"))
        })
        .next_back()
        .and_then(|v| std::str::from_utf8(v).ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
}

/// The value of the raw HEADERS frame's first `name:VALUE` item.
pub fn frame_item<'a>(frame: &'a [u8], name: &str) -> Option<&'a [u8]> {
    frame.split(|b| *b == b',').find_map(|item| {
        item.trim_ascii()
            .strip_prefix(name.as_bytes())
            .and_then(|rest| rest.strip_prefix(b":"))
    })
}

/// `frame` with its `name:…` items replaced by one `name:value` item at
/// the end (appended when it had none); every other item is kept as it
/// was, byte for byte.
pub fn frame_with_item(frame: &[u8], name: &str, value: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(frame.len() + name.len() + value.len() + 2);
    for item in frame.split(|b| *b == b',') {
        let trimmed = item.trim_ascii();
        let named = trimmed
            .strip_prefix(name.as_bytes())
            .is_some_and(|rest| rest.first() == Some(&b':'));
        if trimmed.is_empty() || named {
            continue;
        }
        if !out.is_empty() {
            out.push(b',');
        }
        out.extend_from_slice(item);
    }
    if !out.is_empty() {
        out.push(b',');
    }
    out.extend_from_slice(name.as_bytes());
    out.push(b':');
    out.extend_from_slice(value.as_bytes());
    out
}

/// Whether the raw HEADERS frame `frame` has the item `name` (items
/// compared after trimming spaces, as [`Headers::parse`] does), without
/// parsing the rest.
pub fn frame_has(frame: &[u8], name: &str) -> bool {
    frame
        .split(|b| *b == b',')
        .any(|item| item.trim_ascii() == name.as_bytes())
}

/// The parsed HEADERS frame.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Headers(pub Vec<Header>);

impl Headers {
    /// No headers (encodes as the empty frame).
    pub fn new() -> Headers {
        Headers(Vec::new())
    }

    /// Parse a HEADERS frame. Empty items (`a,,b`, a trailing comma) are skipped.
    pub fn parse(frame: &[u8]) -> Result<Headers, DecodeError> {
        let text = utf8_ref(frame, "headers")?;
        let mut out = Vec::new();
        for item in text.split(',') {
            let item = item.trim();
            if !item.is_empty() {
                out.push(Header::parse(item)?);
            }
        }
        Ok(Headers(out))
    }

    /// The frame text, in the order the headers were given.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        for (i, h) in self.0.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            h.write(&mut out);
        }
        out
    }

    pub fn push(&mut self, h: Header) -> &mut Self {
        self.0.push(h);
        self
    }

    pub fn reply_requested(&self) -> bool {
        self.0.contains(&Header::ReplyRequested)
    }

    pub fn guarantee(&self) -> bool {
        self.0.contains(&Header::Guarantee)
    }

    pub fn nohaste(&self) -> bool {
        self.0.contains(&Header::NoHaste)
    }

    /// [`RESULT_RECEIPT`]: the client sends `RECEIVED` for the RESULT.
    pub fn result_receipt(&self) -> bool {
        self.0
            .iter()
            .any(|h| matches!(h, Header::Other(o) if o == RESULT_RECEIPT))
    }

    /// [`BATCHED_ACKS`]: the client takes `ACKS` for this REQUEST.
    pub fn batched_acks(&self) -> bool {
        self.0
            .iter()
            .any(|h| matches!(h, Header::Other(o) if o == BATCHED_ACKS))
    }

    /// [`NOTICES`]: the client takes NOTICEs about this job.
    pub fn notices(&self) -> bool {
        self.0
            .iter()
            .any(|h| matches!(h, Header::Other(o) if o == NOTICES))
    }

    /// `retry-count:N`, the last one if given twice.
    pub fn retry_count(&self) -> Option<u32> {
        self.0.iter().rev().find_map(|h| match h {
            Header::RetryCount(n) => Some(*n),
            _ => None,
        })
    }

    /// `timeout:N` in seconds; `timeout:0` means no timeout and yields `None`.
    pub fn timeout_secs(&self) -> Option<u64> {
        self.0
            .iter()
            .rev()
            .find_map(|h| match h {
                Header::Timeout(n) => Some(*n),
                _ => None,
            })
            .filter(|n| *n > 0)
    }

    /// `delay:SECS` (emq): run the job no earlier than SECS after it is
    /// accepted; fractions allowed, the last one if given twice. Kept as an
    /// unknown header on the wire (0.3.13 peers ignore it). `Err` names a
    /// value that is not a finite, non-negative number of seconds below
    /// ten years.
    pub fn delay(&self) -> Result<Option<std::time::Duration>, String> {
        let Some(text) = self.0.iter().rev().find_map(|h| match h {
            Header::Other(o) => o.strip_prefix("delay:"),
            _ => None,
        }) else {
            return Ok(None);
        };
        let secs: f64 = text
            .trim()
            .parse()
            .map_err(|_| format!("bad delay header {text:?}: not a number of seconds"))?;
        if !secs.is_finite() || !(0.0..=315_360_000.0).contains(&secs) {
            return Err(format!(
                "bad delay header {text:?}: must be between 0 and 315360000 seconds"
            ));
        }
        Ok(Some(std::time::Duration::from_secs_f64(secs)))
    }
}

/// The longest flow-control key (`key:K`), in bytes.
pub const MAX_FLOW_KEY: usize = 128;

/// The highest `priority:N`.
pub const MAX_PRIORITY: u8 = 9;

/// Why a `key:` or `priority:` header is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FlowHeaderError {
    /// `key:K` longer than [`MAX_FLOW_KEY`] bytes.
    KeyTooLong(usize),
    /// `key:` with nothing after it.
    EmptyKey,
    /// `priority:N` that is not an integer 0–9.
    BadPriority(String),
}

impl std::fmt::Display for FlowHeaderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FlowHeaderError::KeyTooLong(n) => write!(
                f,
                "bad key header: {n} bytes, the longest flow-control key is {MAX_FLOW_KEY} bytes"
            ),
            FlowHeaderError::EmptyKey => f.write_str("bad key header: the key is empty"),
            FlowHeaderError::BadPriority(v) => write!(
                f,
                "bad priority header {v:?}: must be an integer from 0 to {MAX_PRIORITY}"
            ),
        }
    }
}

/// `unique-key:K` (emq): at most one job with key K at a time (see
/// docs/PROTOCOL.md, "Unique jobs").
pub const UNIQUE_KEY: &str = "unique-key";
/// `unique-for:SECS` (emq): K stays taken for SECS from acceptance, also
/// after the job finished.
pub const UNIQUE_FOR: &str = "unique-for";
/// `on-conflict:existing|reject|replace` (emq): what a REQUEST whose key
/// is taken gets.
pub const ON_CONFLICT: &str = "on-conflict";
/// The longest unique key, in bytes (keys are journaled and held in
/// memory: bounded).
pub const MAX_UNIQUE_KEY: usize = 256;
/// The longest `unique-for`, in seconds (ten years, as `delay`).
pub const MAX_UNIQUE_FOR_SECS: f64 = 315_360_000.0;

/// What a REQUEST whose unique key is taken gets (`on-conflict:`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnConflict {
    /// `existing` (the default): acknowledged as the job that holds the
    /// key (`DUPLICATE [msgid, existing msgid, text]`).
    #[default]
    Existing,
    /// `reject`: `REJECT [msgid, duplicate, text]` naming the holder.
    Reject,
    /// `replace`: a still-queued holder is cancelled and the new job takes
    /// the key; a running one is kept and the new job is its duplicate.
    Replace,
}

impl OnConflict {
    pub fn as_str(self) -> &'static str {
        match self {
            OnConflict::Existing => "existing",
            OnConflict::Reject => "reject",
            OnConflict::Replace => "replace",
        }
    }

    pub fn parse(s: &str) -> Option<OnConflict> {
        match s {
            "existing" => Some(OnConflict::Existing),
            "reject" => Some(OnConflict::Reject),
            "replace" => Some(OnConflict::Replace),
            _ => None,
        }
    }
}

impl std::error::Error for FlowHeaderError {}

/// The flow-control fields of a job (emq): `key:K` (None without one) and
/// `priority:N` (0 without one), the last of each if given twice. Kept as
/// unknown headers on the wire (0.3.13 peers ignore them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FlowFields<'a> {
    pub key: Option<&'a str>,
    pub priority: u8,
}

fn flow_value<'a>(items: impl DoubleEndedIterator<Item = &'a str>, name: &str) -> Option<&'a str> {
    items.rev().find_map(|i| i.strip_prefix(name))
}

fn flow_fields_of<'a>(
    items: impl DoubleEndedIterator<Item = &'a str> + Clone,
) -> Result<FlowFields<'a>, FlowHeaderError> {
    let key = match flow_value(items.clone(), "key:") {
        None => None,
        Some(k) => {
            let k = k.trim();
            if k.is_empty() {
                return Err(FlowHeaderError::EmptyKey);
            }
            if k.len() > MAX_FLOW_KEY {
                return Err(FlowHeaderError::KeyTooLong(k.len()));
            }
            Some(k)
        }
    };
    let priority = match flow_value(items, "priority:") {
        None => 0,
        Some(p) => match p.trim().parse::<u8>() {
            Ok(n) if n <= MAX_PRIORITY => n,
            _ => return Err(FlowHeaderError::BadPriority(p.to_string())),
        },
    };
    Ok(FlowFields { key, priority })
}

impl Headers {
    /// `key:K` and `priority:N` (see [`FlowFields`]); `Err` says what is
    /// wrong with them.
    pub fn flow(&self) -> Result<FlowFields<'_>, FlowHeaderError> {
        flow_fields_of(self.0.iter().filter_map(|h| match h {
            Header::Other(o) => Some(o.as_str()),
            _ => None,
        }))
    }
}

/// A REQUEST's unique-job headers, parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct Unique {
    /// The key (`unique-key:K`), trimmed, 1 to [`MAX_UNIQUE_KEY`] bytes.
    pub key: String,
    /// `unique-for:SECS`: the window from acceptance; `None` (or 0): the
    /// key is taken only while the job is unfinished.
    pub window: Option<std::time::Duration>,
    pub on_conflict: OnConflict,
}

/// Why the unique-job headers of a REQUEST are refused (`malformed`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UniqueError {
    /// `unique-key:` with nothing after it.
    EmptyKey,
    /// A key over [`MAX_UNIQUE_KEY`] bytes.
    KeyTooLong(usize),
    /// `unique-for:` that is not a number of seconds in range.
    BadWindow(String),
    /// `on-conflict:` other than existing, reject, replace.
    BadOnConflict(String),
    /// `unique-for` or `on-conflict` without `unique-key`.
    WithoutKey(&'static str),
}

impl std::fmt::Display for UniqueError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UniqueError::EmptyKey => write!(f, "bad unique-key header: the key is empty"),
            UniqueError::KeyTooLong(n) => write!(
                f,
                "bad unique-key header: the key has {n} bytes, over the limit of {MAX_UNIQUE_KEY}"
            ),
            UniqueError::BadWindow(v) => write!(
                f,
                "bad unique-for header {v:?}: must be a number of seconds between 0 and \
                 {MAX_UNIQUE_FOR_SECS}"
            ),
            UniqueError::BadOnConflict(v) => write!(
                f,
                "bad on-conflict header {v:?}: must be existing, reject or replace"
            ),
            UniqueError::WithoutKey(h) => {
                write!(f, "the {h} header needs a unique-key header")
            }
        }
    }
}

impl std::error::Error for UniqueError {}

/// Whether the raw HEADERS frame may carry unique-job headers (a cheap
/// scan for `unique-key:`; [`Headers::unique`] decides).
pub fn frame_may_be_unique(frame: &[u8]) -> bool {
    frame
        .windows(UNIQUE_KEY.len() + 1)
        .any(|w| w.ends_with(b":") && &w[..UNIQUE_KEY.len()] == UNIQUE_KEY.as_bytes())
}

impl Headers {
    /// The last `Other` header `name:VALUE`, its value trimmed.
    fn other_value(&self, name: &str) -> Option<&str> {
        self.0.iter().rev().find_map(|h| match h {
            Header::Other(o) => o
                .strip_prefix(name)
                .and_then(|rest| rest.strip_prefix(':'))
                .map(str::trim),
            _ => None,
        })
    }

    /// emq: the `batch:ID` item's id (trimmed; the last if given twice),
    /// `None` when absent or empty.
    pub fn batch(&self) -> Option<&str> {
        self.other_value(BATCH).filter(|v| !v.is_empty())
    }

    /// The unique-job headers (emq: `unique-key:K`, `unique-for:SECS`,
    /// `on-conflict:existing|reject|replace`; the last of each if given
    /// twice). `Ok(None)`: no `unique-key`. Kept as unknown headers on
    /// the wire (0.3.13 peers ignore them).
    pub fn unique(&self) -> Result<Option<Unique>, UniqueError> {
        let key = self.other_value(UNIQUE_KEY);
        let window = self.other_value(UNIQUE_FOR);
        let conflict = self.other_value(ON_CONFLICT);
        let Some(key) = key else {
            if window.is_some() {
                return Err(UniqueError::WithoutKey(UNIQUE_FOR));
            }
            if conflict.is_some() {
                return Err(UniqueError::WithoutKey(ON_CONFLICT));
            }
            return Ok(None);
        };
        if key.is_empty() {
            return Err(UniqueError::EmptyKey);
        }
        if key.len() > MAX_UNIQUE_KEY {
            return Err(UniqueError::KeyTooLong(key.len()));
        }
        let window = match window {
            None => None,
            Some(v) => {
                let secs: f64 = v
                    .parse()
                    .map_err(|_| UniqueError::BadWindow(v.to_string()))?;
                if !secs.is_finite() || !(0.0..=MAX_UNIQUE_FOR_SECS).contains(&secs) {
                    return Err(UniqueError::BadWindow(v.to_string()));
                }
                Some(std::time::Duration::from_secs_f64(secs)).filter(|d| !d.is_zero())
            }
        };
        let on_conflict = match conflict {
            None => OnConflict::default(),
            Some(v) => {
                OnConflict::parse(v).ok_or_else(|| UniqueError::BadOnConflict(v.to_string()))?
            }
        };
        Ok(Some(Unique {
            key: key.to_string(),
            window,
            on_conflict,
        }))
    }
}

/// [`Headers::flow`] of a raw HEADERS frame, without parsing the rest
/// (items trimmed as [`Headers::parse`] does; a frame that is not UTF-8
/// has no flow fields).
pub fn frame_flow(frame: &[u8]) -> Result<FlowFields<'_>, FlowHeaderError> {
    let Ok(text) = std::str::from_utf8(frame) else {
        return Ok(FlowFields::default());
    };
    flow_fields_of(text.split(',').map(str::trim))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_batch_item_is_read_the_same_from_the_frame_and_the_parsed_headers() {
        for (frame, want) in [
            (&b"retry-count:2, batch: b1 "[..], Some("b1")),
            (b"batch:a,batch:b", Some("b")),
            (b"batch:,reply-requested", None),
            (b"batches:x", None),
            (b"", None),
        ] {
            assert_eq!(frame_batch(frame), want, "{frame:?}");
            let parsed = Headers::parse(frame).unwrap();
            assert_eq!(parsed.batch(), want, "{frame:?}");
        }
    }

    #[test]
    fn an_item_is_replaced_or_appended_and_the_others_kept_byte_for_byte() {
        assert_eq!(frame_with_item(b"", "attempt", "2"), b"attempt:2");
        assert_eq!(
            frame_with_item(b"guarantee, attempt:7,retry-count:3", "attempt", "2"),
            b"guarantee,retry-count:3,attempt:2"
        );
        // A longer name sharing the prefix is another item.
        assert_eq!(
            frame_with_item(b"attempts:1", "attempt", "3"),
            b"attempts:1,attempt:3"
        );
    }

    #[test]
    fn the_attempt_a_worker_reads_is_the_item_else_one() {
        assert_eq!(frame_attempt(b"guarantee"), 1);
        assert_eq!(frame_attempt(b"guarantee, attempt:3"), 3);
        assert_eq!(frame_attempt(b"attempt:0"), 1);
        assert_eq!(frame_attempt(b"attempt:x"), 1);
        assert_eq!(frame_item(b"a:1, b:2", "b"), Some(&b"2"[..]));
    }

    use std::time::Duration;

    #[test]
    fn result_receipt_is_an_unknown_header_found_raw_or_parsed() {
        let h = super::Headers::parse(b"reply-requested, result-receipt").unwrap();
        assert!(h.result_receipt() && h.reply_requested());
        assert_eq!(h.encode(), "reply-requested,result-receipt");
        assert!(super::frame_has(
            b"reply-requested, result-receipt",
            super::RESULT_RECEIPT
        ));
        assert!(!super::frame_has(
            b"reply-requested,result-receipts",
            super::RESULT_RECEIPT
        ));
        assert!(!super::frame_has(b"", super::RESULT_RECEIPT));
        assert!(!super::Headers::parse(b"reply-requested")
            .unwrap()
            .result_receipt());
    }

    #[test]
    fn notices_is_an_unknown_header_kept_as_sent() {
        let h = Headers::parse(b"reply-requested, notices").unwrap();
        assert!(h.notices());
        assert_eq!(h.encode(), "reply-requested,notices");
        assert!(!Headers::parse(b"notices-x,reply-requested")
            .unwrap()
            .notices());
        assert!(!Headers::parse(b"").unwrap().notices());
    }

    #[test]
    fn delay_header_is_seconds_kept_as_an_unknown_header() {
        let h = Headers::parse(b"reply-requested,delay:1.5").unwrap();
        assert_eq!(h.delay(), Ok(Some(Duration::from_millis(1500))));
        assert_eq!(h.encode(), "reply-requested,delay:1.5");
        assert_eq!(Headers::parse(b"").unwrap().delay(), Ok(None));
        assert_eq!(
            Headers::parse(b"delay:0").unwrap().delay(),
            Ok(Some(Duration::ZERO))
        );
        for bad in ["delay:abc", "delay:-1", "delay:inf", "delay:1e12"] {
            let e = Headers::parse(bad.as_bytes()).unwrap().delay().unwrap_err();
            assert!(e.contains("delay"), "{e}");
        }
    }

    use super::*;

    #[test]
    fn parses_the_0_3_13_header_order_and_round_trips() {
        let raw = b"reply-requested,guarantee,retry-count:3,timeout:10";
        let h = Headers::parse(raw).unwrap();
        assert_eq!(
            h.0,
            vec![
                Header::ReplyRequested,
                Header::Guarantee,
                Header::RetryCount(3),
                Header::Timeout(10)
            ]
        );
        assert!(h.reply_requested() && h.guarantee() && !h.nohaste());
        assert_eq!(h.retry_count(), Some(3));
        assert_eq!(h.timeout_secs(), Some(10));
        assert_eq!(h.encode().as_bytes(), raw);
    }

    #[test]
    fn empty_frame_means_no_headers() {
        let h = Headers::parse(b"").unwrap();
        assert!(h.0.is_empty());
        assert_eq!(h.encode(), "");
        assert!(!h.reply_requested());
        assert_eq!(h.retry_count(), None);
    }

    #[test]
    fn unknown_headers_are_preserved() {
        let h = Headers::parse(b"nohaste,x-trace:abc").unwrap();
        assert_eq!(
            h.0,
            vec![Header::NoHaste, Header::Other("x-trace:abc".into())]
        );
        assert_eq!(h.encode(), "nohaste,x-trace:abc");
    }

    #[test]
    fn bad_numbers_are_typed_errors() {
        assert_eq!(
            Headers::parse(b"retry-count:x").unwrap_err(),
            DecodeError::BadNumber {
                field: "retry-count header",
                value: "x".into()
            }
        );
        assert!(matches!(
            Headers::parse(b"timeout:-1"),
            Err(DecodeError::BadNumber { .. })
        ));
        assert_eq!(
            Headers::parse(&[0xff]).unwrap_err(),
            DecodeError::NotUtf8 { field: "headers" }
        );
    }

    #[test]
    fn timeout_zero_is_no_timeout() {
        assert_eq!(Headers::parse(b"timeout:0").unwrap().timeout_secs(), None);
    }

    #[test]
    fn flow_headers_are_key_and_priority_kept_as_unknown_headers() {
        let h = Headers::parse(b"reply-requested,key:acme,priority:7").unwrap();
        let f = h.flow().unwrap();
        assert_eq!((f.key, f.priority), (Some("acme"), 7));
        assert_eq!(h.encode(), "reply-requested,key:acme,priority:7");
        assert_eq!(
            super::frame_flow(b"key:a, priority:3,key:b").unwrap(),
            super::FlowFields {
                key: Some("b"),
                priority: 3
            }
        );
        assert_eq!(
            Headers::parse(b"").unwrap().flow().unwrap(),
            super::FlowFields::default()
        );
        let long = format!("key:{}", "k".repeat(129));
        assert_eq!(
            Headers::parse(long.as_bytes()).unwrap().flow(),
            Err(super::FlowHeaderError::KeyTooLong(129))
        );
        let ok = format!("key:{}", "k".repeat(128));
        assert!(Headers::parse(ok.as_bytes()).unwrap().flow().is_ok());
        for bad in ["priority:10", "priority:-1", "priority:x", "priority:"] {
            assert!(
                matches!(
                    Headers::parse(bad.as_bytes()).unwrap().flow(),
                    Err(super::FlowHeaderError::BadPriority(_))
                ),
                "{bad}"
            );
        }
        assert_eq!(
            Headers::parse(b"key:").unwrap().flow(),
            Err(super::FlowHeaderError::EmptyKey)
        );
    }

    #[test]
    fn unique_headers_parse_with_typed_errors() {
        use super::{Headers, OnConflict, UniqueError};
        let u = Headers::parse(
            b"reply-requested,unique-key: order-7 ,unique-for:60,on-conflict:reject",
        )
        .unwrap()
        .unique()
        .unwrap()
        .unwrap();
        assert_eq!(u.key, "order-7");
        assert_eq!(u.window, Some(Duration::from_secs(60)));
        assert_eq!(u.on_conflict, OnConflict::Reject);
        let u = Headers::parse(b"unique-key:k")
            .unwrap()
            .unique()
            .unwrap()
            .unwrap();
        assert_eq!((u.window, u.on_conflict), (None, OnConflict::Existing));
        assert_eq!(Headers::parse(b"guarantee").unwrap().unique(), Ok(None));
        let err = |h: &[u8]| Headers::parse(h).unwrap().unique().unwrap_err();
        assert_eq!(err(b"unique-key:"), UniqueError::EmptyKey);
        assert_eq!(
            err(b"unique-key:k,unique-for:soon"),
            UniqueError::BadWindow("soon".into())
        );
        assert_eq!(
            err(b"unique-key:k,unique-for:-1"),
            UniqueError::BadWindow("-1".into())
        );
        assert_eq!(
            err(b"unique-key:k,on-conflict:merge"),
            UniqueError::BadOnConflict("merge".into())
        );
        assert_eq!(err(b"unique-for:5"), UniqueError::WithoutKey("unique-for"));
        let long = format!("unique-key:{}", "x".repeat(300));
        assert_eq!(err(long.as_bytes()), UniqueError::KeyTooLong(300));
        assert!(super::frame_may_be_unique(b"a,unique-key:k"));
        assert!(!super::frame_may_be_unique(b"a,unique-keys"));
    }
}
