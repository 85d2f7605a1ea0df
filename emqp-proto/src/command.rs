//! The commands of eMQP/1.0 and their body frames (everything after
//! `'' | eMQP/1.0 | COMMAND | MSGID`).
//!
//! Decoding is lenient about trailing frames (0.3.13 ignores them too) and
//! strict about everything it reads.

use crate::error::{excerpt, utf8, utf8_ref, DecodeError};
use crate::headers::Headers;
use crate::interval::Interval;
use crate::queues::QueueSpec;

/// What a peer announces itself as in INFORM (0.3.13's TYPE frame).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PeerType {
    Worker,
    Scheduler,
}

impl PeerType {
    pub fn as_str(&self) -> &'static str {
        match self {
            PeerType::Worker => "worker",
            PeerType::Scheduler => "scheduler",
        }
    }
}

/// INFORM: a worker or scheduler registers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inform {
    /// The queues served; empty means "the router's default queues".
    pub queues: QueueSpec,
    /// `None` for the seed form, which has no TYPE frame (a worker).
    pub peer_type: Option<PeerType>,
    /// emq extension, a third body frame: comma-separated features the peer
    /// supports. `job-ack` means the worker sends a REPLY for every job, so
    /// the router can track completion per job (docs/PROTOCOL.md).
    pub features: Vec<String>,
}

/// The INFORM feature by which a worker promises a REPLY for every job.
pub const FEATURE_JOB_ACK: &str = "job-ack";

/// INFORM feature: the worker stops a running job on CANCEL (emq).
pub const FEATURE_CANCEL: &str = "cancel";

/// Router feature, in the second frame of its ACK of a worker's INFORM
/// (emq): REPLYs a worker sends again after a reconnect, for jobs whose
/// first REPLY may have been lost with the old connection, are taken at
/// most once and never forwarded twice (docs/PROTOCOL.md, "Link resets").
pub const FEATURE_REPLY_RESEND: &str = "reply-resend";

/// Router feature, in the ACK's features frame (emq): after a reconnect a
/// worker may list, in `RUNNING`, the jobs it still runs from an earlier
/// connection, and the router moves them to the new connection instead of
/// delivering them again (docs/PROTOCOL.md, "Link resets").
pub const FEATURE_ADOPT_RUNNING: &str = "adopt-running";

/// Router feature, in the ACK's features frame (emq): a worker's
/// `REPLY [MSG, ORIG_MSGID, STATUS, CREDIT]` also stands for CREDIT
/// READYs, sent after it (see [`Reply::credit`]), so that a job manager
/// frees a slot in the message that finishes its job instead of a READY
/// of its own (docs/PROTOCOL.md, "Credit in a REPLY"). A 0.3.13 router
/// never lists it, so a 0.3.13 router never sees the fourth frame.
pub const FEATURE_REPLY_CREDIT: &str = "reply-credit";

/// The prefix of the take-back key in the features frames (emq): the
/// router's ACK of a worker INFORM that listed features carries
/// `take-back=KEY` (32 hex digits), a secret of that job manager; after a
/// reconnect the job manager lists the same `take-back=KEY` in its INFORM,
/// and only then may its new identity take back the jobs delivered on the
/// old one (REPLY from the new identity, RUNNING). docs/PROTOCOL.md, "Link
/// resets".
pub const FEATURE_TAKE_BACK: &str = "take-back=";

/// The take-back key a features list carries, if one is well formed (32
/// lowercase hex digits).
pub fn take_back_key(features: &[String]) -> Option<&str> {
    features.iter().find_map(|f| {
        let key = f.strip_prefix(FEATURE_TAKE_BACK)?;
        (key.len() == 32 && key.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
            .then_some(key)
    })
}

/// Who a worker is, for people (emq, in the INFORM's features frame):
/// `name=NAME`, `host=HOST`, `pid=N`, `slots=N`, `version=V`, each value
/// percent-encoded where it holds `%` or `,`. The router shows them in its
/// `workers` view (`NAME@HOST`); a job manager sends the same name on
/// every reconnect, so the name stays while the connection identity (a
/// fresh uuid per connection) changes. A router that does not know them
/// takes them as unknown features (ignored); a 0.3.13 router ignores the
/// frame.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkerAbout {
    pub name: Option<String>,
    pub host: Option<String>,
    pub pid: Option<u32>,
    /// The job manager's slots (`--concurrency`).
    pub slots: Option<u64>,
    pub version: Option<String>,
}

impl WorkerAbout {
    const KEYS: [&'static str; 5] = ["name=", "host=", "pid=", "slots=", "version="];

    /// The features entries, in a fixed order, for what is known.
    pub fn to_features(&self) -> Vec<String> {
        let enc = |v: &str| v.replace('%', "%25").replace(',', "%2C");
        let mut out = Vec::new();
        if let Some(v) = &self.name {
            out.push(format!("name={}", enc(v)));
        }
        if let Some(v) = &self.host {
            out.push(format!("host={}", enc(v)));
        }
        if let Some(v) = self.pid {
            out.push(format!("pid={v}"));
        }
        if let Some(v) = self.slots {
            out.push(format!("slots={v}"));
        }
        if let Some(v) = &self.version {
            out.push(format!("version={}", enc(v)));
        }
        out
    }

    /// The entries of `features` that say who the worker is, taken out
    /// of it; `None` when there are none. A number that does not parse is
    /// left out (never an error: it is for display).
    pub fn take_from(features: &mut Vec<String>) -> Option<WorkerAbout> {
        let dec = |v: &str| {
            v.replace("%2C", ",")
                .replace("%2c", ",")
                .replace("%25", "%")
        };
        let mut about = WorkerAbout::default();
        let mut any = false;
        features.retain(|f| {
            let Some(key) = Self::KEYS.iter().find(|k| f.starts_with(**k)) else {
                return true;
            };
            let v = &f[key.len()..];
            any = true;
            match *key {
                "name=" => about.name = Some(dec(v)).filter(|v| !v.is_empty()),
                "host=" => about.host = Some(dec(v)).filter(|v| !v.is_empty()),
                "pid=" => about.pid = v.parse().ok(),
                "slots=" => about.slots = v.parse().ok(),
                _ => about.version = Some(dec(v)).filter(|v| !v.is_empty()),
            }
            false
        });
        any.then_some(about)
    }

    /// `NAME@HOST`, `NAME`, or `PID@HOST` (no name given), as people
    /// read it (one word, for tables); `None`
    /// when neither name nor host is known.
    pub fn label(&self) -> Option<String> {
        match (&self.name, &self.host, self.pid) {
            (Some(n), Some(h), _) => Some(format!("{n}@{h}")),
            (Some(n), None, _) => Some(n.clone()),
            (None, Some(h), Some(p)) => Some(format!("{p}@{h}")),
            (None, Some(h), None) => Some(h.clone()),
            (None, None, _) => None,
        }
    }
}

impl Inform {
    pub fn has_feature(&self, name: &str) -> bool {
        self.features.iter().any(|f| f == name)
    }
}

/// REQUEST: a client submits a job; the router forwards it unchanged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub queue: String,
    pub headers: Headers,
    /// The job payload (JSON text in 0.3.13). Never decoded by the router,
    /// which only tells a message that cannot be a job
    /// ([`crate::job::not_a_job`]).
    pub message: Vec<u8>,
}

/// How a job ended, in a worker REPLY (emq extension frame) or a RESULT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultStatus {
    Ok,
    Failed,
}

impl ResultStatus {
    pub fn as_str(&self) -> &'static str {
        match self {
            ResultStatus::Ok => "ok",
            ResultStatus::Failed => "failed",
        }
    }

    fn parse(frame: Vec<u8>) -> Result<ResultStatus, DecodeError> {
        match frame.as_slice() {
            b"ok" => Ok(ResultStatus::Ok),
            b"failed" => Ok(ResultStatus::Failed),
            other => Err(DecodeError::BadValue {
                field: "result status",
                value: excerpt(other),
            }),
        }
    }
}

/// REPLY, in all its forms.
///
/// - one frame: the router's acknowledgement to a client (the frame is the
///   acknowledged REQUEST msgid), a seed-form worker result, or an admin
///   answer (JSON);
/// - two frames: a 0.3.13 worker result `[payload, orig_msgid]`;
/// - three frames: an emq worker result `[payload, orig_msgid, status]`;
/// - four frames: the same with `credit` READYs in it (decimal), only to a
///   router that listed [`FEATURE_REPLY_CREDIT`] in its ACK.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub payload: Vec<u8>,
    pub orig_msgid: Option<String>,
    pub status: Option<ResultStatus>,
    /// READYs this REPLY also stands for, counted after the result (emq,
    /// [`FEATURE_REPLY_CREDIT`]); 0: none, and no fourth frame.
    pub credit: u32,
}

impl Reply {
    /// The router's acknowledgement of an accepted REQUEST.
    pub fn ack_of(msgid: &str) -> Reply {
        Reply {
            payload: msgid.as_bytes().to_vec(),
            orig_msgid: None,
            status: None,
            credit: 0,
        }
    }

    /// A worker's result for the REQUEST `orig_msgid`.
    pub fn result(payload: Vec<u8>, orig_msgid: String, status: ResultStatus) -> Reply {
        Reply {
            payload,
            orig_msgid: Some(orig_msgid),
            status: Some(status),
            credit: 0,
        }
    }
}

/// SCHEDULE and UNSCHEDULE body (0.3.13: five frames).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    pub queue: String,
    pub headers: Headers,
    /// Time between runs, or [`Interval::Unset`] (`-1`) when `cron` is used.
    pub interval: Interval,
    pub message: Vec<u8>,
    /// A cron expression, or empty when `interval` is used.
    pub cron: String,
}

/// RESULT (emq extension, router → client): the job's outcome, sent to the
/// client that submitted it, distinct from the REPLY acknowledgement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobResult {
    pub orig_msgid: String,
    pub status: ResultStatus,
    /// The worker's REPLY payload (JSON: `{"value": ...}` or `{"error": ...}`).
    pub payload: Vec<u8>,
}

/// Why the router refused a REQUEST.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RejectReason {
    /// The queue's buffer is at its high-water mark.
    QueueFull,
    /// The REQUEST could not be decoded.
    Malformed,
    /// The router is shutting down and takes no new work.
    ShuttingDown,
    /// The job failed for good (retries or deliveries exhausted).
    DeadLettered,
    /// The router's journal cannot store the job right now (disk full,
    /// database unreachable): nothing was accepted; try again later.
    JournalUnavailable,
    /// The router's journal could not tell whether it stored the job (the
    /// database connection broke during the commit): the job may run.
    /// Not a refusal: send the REQUEST again under the same msgid, which
    /// the router (this one once it can tell, or the next leader) takes as
    /// the same job.
    JournalUncertain,
    /// The router already holds an unfinished job with this msgid.
    DuplicateMsgid,
    /// UNSCHEDULE (or an admin operation) named something that does not exist.
    NotFound,
    /// The REQUEST's message is JSON but not a job: every job form (0.3.13's
    /// and emq's) is an array `[KIND, PARAMS]` ([`crate::job::not_a_job`]).
    NotAJob,
    /// emq: the REQUEST's `unique-key` is held by another job and it asked
    /// `on-conflict:reject`; TEXT starts with the holder's msgid
    /// ([`Reject::duplicate_of`]).
    Duplicate,
    /// emq: the REQUEST's `batch:ID` names a batch that is closed (its
    /// callbacks may have run) or that the router does not hold.
    BatchClosed,
    Other(String),
}

impl RejectReason {
    /// Every reason this build sends or knows (not `Other`), for the
    /// vocabulary dump (`emq-cli vocabulary`) that clients are checked against.
    pub const KNOWN: [RejectReason; 11] = [
        RejectReason::QueueFull,
        RejectReason::Malformed,
        RejectReason::ShuttingDown,
        RejectReason::DeadLettered,
        RejectReason::JournalUnavailable,
        RejectReason::JournalUncertain,
        RejectReason::DuplicateMsgid,
        RejectReason::NotFound,
        RejectReason::NotAJob,
        RejectReason::Duplicate,
        RejectReason::BatchClosed,
    ];

    pub fn as_str(&self) -> &str {
        match self {
            RejectReason::QueueFull => "queue-full",
            RejectReason::Malformed => "malformed",
            RejectReason::ShuttingDown => "shutting-down",
            RejectReason::DeadLettered => "dead-lettered",
            RejectReason::JournalUnavailable => "journal-unavailable",
            RejectReason::JournalUncertain => "journal-uncertain",
            RejectReason::DuplicateMsgid => "duplicate-msgid",
            RejectReason::NotFound => "not-found",
            RejectReason::NotAJob => "not-a-job",
            RejectReason::Duplicate => "duplicate",
            RejectReason::BatchClosed => "batch-closed",
            RejectReason::Other(s) => s,
        }
    }

    /// The reason named `s`: one of [`RejectReason::KNOWN`] by its
    /// [`as_str`](Self::as_str) name, else `Other(s)`.
    fn parse(s: String) -> RejectReason {
        RejectReason::KNOWN
            .iter()
            .find(|r| r.as_str() == s)
            .cloned()
            .unwrap_or(RejectReason::Other(s))
    }
}

/// REJECT (emq extension, router → client): a REQUEST was not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reject {
    pub orig_msgid: String,
    pub reason: RejectReason,
    pub text: String,
}

impl Reject {
    /// `REJECT [msgid, duplicate, "EXISTING_MSGID: text"]`: refused because
    /// the job `existing` holds the REQUEST's unique key.
    pub fn duplicate(orig_msgid: String, existing: &str, text: &str) -> Reject {
        Reject {
            orig_msgid,
            reason: RejectReason::Duplicate,
            text: format!("{existing}: {text}"),
        }
    }

    /// The msgid of the job that holds the unique key, for a `duplicate`
    /// REJECT (the TEXT up to its first `": "`).
    pub fn duplicate_of(&self) -> Option<&str> {
        if self.reason != RejectReason::Duplicate {
            return None;
        }
        self.text
            .split_once(": ")
            .map(|(m, _)| m)
            .filter(|m| !m.is_empty())
    }
}

/// DUPLICATE (emq extension, router → client): the REQUEST `orig_msgid`
/// was not accepted as a new job because the job `existing_msgid` holds
/// its `unique-key` (with `on-conflict:existing`, the default, or
/// `replace` while that job runs). It is the acknowledgement of the
/// REQUEST: the client takes `existing_msgid` as its job, and with
/// `reply-requested` gets that job's `RESULT [existing_msgid, ...]`. Sent
/// only in answer to a REQUEST with a `unique-key` header, so 0.3.13
/// clients never see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Duplicate {
    pub orig_msgid: String,
    pub existing_msgid: String,
    /// One line for a person.
    pub text: String,
}

/// What a NOTICE tells the submitter about its job (emq).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoticeKind {
    /// `routed-to-default`: no connected job manager served the job's
    /// queue, so the router sent it to `default` (`--unserved-queues
    /// default`, EventMQ 0.3.13's rule).
    RoutedToDefault,
    /// `held-unserved`: no connected job manager serves the job's queue;
    /// the router holds the job there until one does (`--unserved-queues
    /// hold`).
    HeldUnserved,
    /// A kind this version does not know, kept as sent.
    Other(String),
}

impl NoticeKind {
    pub fn as_str(&self) -> &str {
        match self {
            NoticeKind::RoutedToDefault => "routed-to-default",
            NoticeKind::HeldUnserved => "held-unserved",
            NoticeKind::Other(s) => s,
        }
    }

    fn parse(s: String) -> NoticeKind {
        match s.as_str() {
            "routed-to-default" => NoticeKind::RoutedToDefault,
            "held-unserved" => NoticeKind::HeldUnserved,
            _ => NoticeKind::Other(s),
        }
    }
}

/// NOTICE (emq extension, router → client): something the submitter of
/// `orig_msgid` should know about its accepted job. Sent after the job's
/// acknowledgement, only to a client whose REQUEST had the `notices`
/// header ([`crate::headers::NOTICES`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub orig_msgid: String,
    pub kind: NoticeKind,
    /// One line for a person.
    pub text: String,
}

/// Every command of eMQP/1.0, 0.3.13's additions, and emq's extensions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Inform(Inform),
    /// `features` (emq, a second body frame, csv): what the router offers
    /// the worker it ACKs ([`FEATURE_REPLY_RESEND`]); empty: no frame (a
    /// 0.3.13 ACK, or an ACK to a peer that listed no features).
    Ack {
        acked_msgid: String,
        features: Vec<String>,
    },
    Ready,
    Request(Request),
    Reply(Reply),
    /// `timestamp` is 0.3.13's `str(time.time())`; the seed has none.
    Heartbeat {
        timestamp: Option<String>,
    },
    Disconnect,
    /// "I am leaving". KBAI (the later spec page's name) decodes to this too.
    Kbye,
    Schedule(Schedule),
    Unschedule(Schedule),
    Publish {
        topic: String,
        message: Vec<u8>,
    },
    Status,
    RouterShowWorkers,
    RouterShowSchedulers,
    /// emq: a control-plane request on the admin socket, `REQUEST_JSON`
    /// (see docs/PROTOCOL.md, "Control plane").
    Admin {
        request: Vec<u8>,
    },
    /// emq: router → worker with the `cancel` feature: stop running the
    /// job `orig_msgid`.
    Cancel {
        orig_msgid: String,
    },
    Result(JobResult),
    Reject(Reject),
    Notice(Notice),
    Duplicate(Duplicate),
    /// emq: client → router, the receipt of RESULTs: the client has the
    /// results of these jobs (one or more ORIG_MSGID frames), so the router
    /// may forget them. Sent for jobs submitted with the `result-receipt`
    /// header (see docs/PROTOCOL.md, "Results until delivered").
    Received {
        orig_msgids: Vec<String>,
    },
    /// emq: worker → router after the ACK of a reconnect, when the ACK
    /// listed [`FEATURE_ADOPT_RUNNING`]: the jobs (one or more ORIG_MSGID
    /// frames) that this job manager still runs, delivered on an earlier
    /// connection; their REPLYs will come on this one.
    Running {
        orig_msgids: Vec<String>,
    },
    /// emq: router → client, the acknowledgements of several REQUESTs in
    /// one message (one or more ORIG_MSGID frames), each standing for the
    /// `REPLY [ORIG_MSGID]` it replaces. Only to a client whose REQUESTs
    /// carry the [`BATCHED_ACKS`](crate::headers::BATCHED_ACKS) header
    /// (docs/PROTOCOL.md, "Batched acknowledgements").
    Acks {
        orig_msgids: Vec<String>,
    },
    /// emq: client → router, a whole workflow (a DAG of jobs) in one
    /// `SPEC` frame (JSON, see docs/PROTOCOL.md, "Workflows"); the msgid
    /// is the workflow's id. Answered `REPLY [msgid]` (accepted, all of
    /// it) or `REJECT`, later `RESULT [msgid, ...]`. 0.3.13 peers never
    /// see it.
    Workflow {
        spec: Vec<u8>,
    },
    /// emq: client → router, `BATCH [SPEC]`: open or close a batch (Sidekiq
    /// Pro's batches with callbacks; JSON, see docs/PROTOCOL.md,
    /// "Batches"); the msgid is the batch's id. Answered `REPLY [msgid]`
    /// once journaled, or `REJECT`. Jobs join a batch with the `batch:ID`
    /// header on their REQUEST. 0.3.13 peers never see it.
    Batch {
        spec: Vec<u8>,
    },
    /// emq: worker → router, `PROGRESS [ORIG_MSGID, PERCENT, MESSAGE]`: how
    /// far the running job `orig_msgid` is, a whole percent 0–100 and an
    /// optional line of text (empty frame: none). See docs/PROTOCOL.md,
    /// "Job progress".
    Progress(Progress),
}

/// The body of [`Command::Progress`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    pub orig_msgid: String,
    /// 0–100.
    pub percent: u8,
    /// Empty: none.
    pub message: String,
}

impl Command {
    /// The command frame text.
    pub fn name(&self) -> &'static str {
        match self {
            Command::Inform(_) => "INFORM",
            Command::Ack { .. } => "ACK",
            Command::Ready => "READY",
            Command::Request(_) => "REQUEST",
            Command::Reply(_) => "REPLY",
            Command::Heartbeat { .. } => "HEARTBEAT",
            Command::Disconnect => "DISCONNECT",
            Command::Kbye => "KBYE",
            Command::Schedule(_) => "SCHEDULE",
            Command::Unschedule(_) => "UNSCHEDULE",
            Command::Publish { .. } => "PUBLISH",
            Command::Status => "STATUS",
            Command::RouterShowWorkers => "ROUTER_SHOW_WORKERS",
            Command::RouterShowSchedulers => "ROUTER_SHOW_SCHEDULERS",
            Command::Admin { .. } => "ADMIN",
            Command::Cancel { .. } => "CANCEL",
            Command::Result(_) => "RESULT",
            Command::Reject(_) => "REJECT",
            Command::Notice(_) => "NOTICE",
            Command::Duplicate(_) => "DUPLICATE",
            Command::Received { .. } => "RECEIVED",
            Command::Acks { .. } => "ACKS",
            Command::Running { .. } => "RUNNING",
            Command::Workflow { .. } => "WORKFLOW",
            Command::Batch { .. } => "BATCH",
            Command::Progress(_) => "PROGRESS",
        }
    }

    /// Decode the body frames of command `name` (the command frame itself).
    pub fn decode(name: &[u8], body: Vec<Vec<u8>>) -> Result<Command, DecodeError> {
        let canonical = canonical_name(name)?;
        let mut frames = Body {
            command: canonical,
            frames: body.into_iter(),
            offset: 0,
        };
        let cmd = match canonical {
            "INFORM" => {
                let queues = QueueSpec::from_inform_frame(&frames.next(1)?)?;
                let peer_type = match frames.optional() {
                    None => None,
                    Some(t) => Some(match t.as_slice() {
                        b"worker" | b"" => PeerType::Worker,
                        b"scheduler" => PeerType::Scheduler,
                        other => {
                            return Err(DecodeError::BadValue {
                                field: "peer type",
                                value: excerpt(other),
                            })
                        }
                    }),
                };
                let features = decode_features(frames.optional())?;
                Command::Inform(Inform {
                    queues,
                    peer_type,
                    features,
                })
            }
            "ACK" => Command::Ack {
                acked_msgid: utf8(frames.next(1)?, "acked msgid")?,
                features: decode_features(frames.optional())?,
            },
            "READY" => Command::Ready,
            "REQUEST" => Command::Request(Request {
                queue: utf8(frames.next(3)?, "queue")?,
                headers: Headers::parse(&frames.next(3)?)?,
                message: frames.next(3)?,
            }),
            "REPLY" => {
                let payload = frames.next(1)?;
                let orig_msgid = frames
                    .optional()
                    .map(|f| utf8(f, "original msgid"))
                    .transpose()?;
                let status = frames.optional().map(ResultStatus::parse).transpose()?;
                let credit = match frames.optional() {
                    None => 0,
                    Some(f) => decode_credit(&f)?,
                };
                Command::Reply(Reply {
                    payload,
                    orig_msgid,
                    status,
                    credit,
                })
            }
            "HEARTBEAT" => Command::Heartbeat {
                timestamp: frames
                    .optional()
                    .map(|f| utf8(f, "heartbeat timestamp"))
                    .transpose()?,
            },
            "DISCONNECT" => Command::Disconnect,
            "KBYE" => Command::Kbye,
            "SCHEDULE" | "UNSCHEDULE" => {
                let s = decode_schedule(&mut frames)?;
                if canonical == "SCHEDULE" {
                    Command::Schedule(s)
                } else {
                    Command::Unschedule(s)
                }
            }
            "PUBLISH" => Command::Publish {
                topic: utf8(frames.next(2)?, "topic")?,
                message: frames.next(2)?,
            },
            "STATUS" => Command::Status,
            "ROUTER_SHOW_WORKERS" => Command::RouterShowWorkers,
            "ROUTER_SHOW_SCHEDULERS" => Command::RouterShowSchedulers,
            "ADMIN" => Command::Admin {
                request: frames.next(1)?,
            },
            "CANCEL" => Command::Cancel {
                orig_msgid: utf8(frames.next(1)?, "original msgid")?,
            },
            "RESULT" => Command::Result(JobResult {
                orig_msgid: utf8(frames.next(3)?, "original msgid")?,
                status: ResultStatus::parse(frames.next(3)?)?,
                payload: frames.next(3)?,
            }),
            "REJECT" => Command::Reject(Reject {
                orig_msgid: utf8(frames.next(3)?, "original msgid")?,
                reason: RejectReason::parse(utf8(frames.next(3)?, "reject reason")?),
                text: utf8(frames.next(3)?, "reject text")?,
            }),
            "NOTICE" => Command::Notice(Notice {
                orig_msgid: utf8(frames.next(3)?, "original msgid")?,
                kind: NoticeKind::parse(utf8(frames.next(3)?, "notice kind")?),
                text: utf8(frames.next(3)?, "notice text")?,
            }),
            "PROGRESS" => {
                let orig_msgid = utf8(frames.next(3)?, "original msgid")?;
                let text = utf8(frames.next(3)?, "progress percent")?;
                let percent = text.trim().parse::<u8>().ok().filter(|p| *p <= 100).ok_or(
                    DecodeError::BadNumber {
                        field: "progress percent (0-100)",
                        value: text,
                    },
                )?;
                let message = utf8(frames.next(3)?, "progress message")?;
                Command::Progress(Progress {
                    orig_msgid,
                    percent,
                    message,
                })
            }
            "DUPLICATE" => Command::Duplicate(Duplicate {
                orig_msgid: utf8(frames.next(3)?, "original msgid")?,
                existing_msgid: utf8(frames.next(3)?, "existing msgid")?,
                text: utf8(frames.next(3)?, "duplicate text")?,
            }),
            "RECEIVED" | "RUNNING" | "ACKS" => {
                let mut orig_msgids = vec![utf8(frames.next(1)?, "original msgid")?];
                while let Some(f) = frames.optional() {
                    orig_msgids.push(utf8(f, "original msgid")?);
                }
                match canonical {
                    "RECEIVED" => Command::Received { orig_msgids },
                    "RUNNING" => Command::Running { orig_msgids },
                    _ => Command::Acks { orig_msgids },
                }
            }
            "WORKFLOW" => Command::Workflow {
                spec: frames.next(1)?,
            },
            "BATCH" => Command::Batch {
                spec: frames.next(1)?,
            },
            _ => unreachable!("canonical_name returns only known names"),
        };
        Ok(cmd)
    }

    /// Append the body frames to `out`.
    pub fn encode_body(self, out: &mut Vec<Vec<u8>>) {
        match self {
            Command::Inform(i) => {
                out.push(if i.queues.is_empty() {
                    Vec::new()
                } else {
                    i.queues.to_inform_json().into_bytes()
                });
                let t = i.peer_type.unwrap_or(PeerType::Worker);
                out.push(t.as_str().as_bytes().to_vec());
                encode_features(&i.features, out);
            }
            Command::Ack {
                acked_msgid,
                features,
            } => {
                out.push(acked_msgid.into_bytes());
                encode_features(&features, out);
            }
            Command::Ready
            | Command::Disconnect
            | Command::Kbye
            | Command::Status
            | Command::RouterShowWorkers
            | Command::RouterShowSchedulers => {}
            Command::Request(r) => {
                out.push(r.queue.into_bytes());
                out.push(r.headers.encode().into_bytes());
                out.push(r.message);
            }
            Command::Reply(r) => {
                out.push(r.payload);
                if let Some(m) = r.orig_msgid {
                    out.push(m.into_bytes());
                    if let Some(s) = r.status {
                        out.push(s.as_str().as_bytes().to_vec());
                        if r.credit > 0 {
                            out.push(r.credit.to_string().into_bytes());
                        }
                    }
                }
            }
            Command::Heartbeat { timestamp } => {
                if let Some(ts) = timestamp {
                    out.push(ts.into_bytes());
                }
            }
            Command::Schedule(s) | Command::Unschedule(s) => {
                out.push(s.queue.into_bytes());
                out.push(s.headers.encode().into_bytes());
                out.push(s.interval.to_string().into_bytes());
                out.push(s.message);
                out.push(s.cron.into_bytes());
            }
            Command::Publish { topic, message } => {
                out.push(topic.into_bytes());
                out.push(message);
            }
            Command::Admin { request } => out.push(request),
            Command::Workflow { spec } | Command::Batch { spec } => out.push(spec),
            Command::Cancel { orig_msgid } => out.push(orig_msgid.into_bytes()),
            Command::Result(r) => {
                out.push(r.orig_msgid.into_bytes());
                out.push(r.status.as_str().as_bytes().to_vec());
                out.push(r.payload);
            }
            Command::Reject(r) => {
                out.push(r.orig_msgid.into_bytes());
                out.push(r.reason.as_str().as_bytes().to_vec());
                out.push(r.text.into_bytes());
            }
            Command::Notice(n) => {
                out.push(n.orig_msgid.into_bytes());
                out.push(n.kind.as_str().as_bytes().to_vec());
                out.push(n.text.into_bytes());
            }
            Command::Duplicate(d) => {
                out.push(d.orig_msgid.into_bytes());
                out.push(d.existing_msgid.into_bytes());
                out.push(d.text.into_bytes());
            }
            Command::Received { orig_msgids }
            | Command::Running { orig_msgids }
            | Command::Acks { orig_msgids } => {
                out.extend(orig_msgids.into_iter().map(String::into_bytes));
            }
            Command::Progress(p) => {
                out.push(p.orig_msgid.into_bytes());
                out.push(p.percent.to_string().into_bytes());
                out.push(p.message.into_bytes());
            }
        }
    }
}

/// A csv FEATURES frame (INFORM's third, ACK's second): items trimmed,
/// empty ones skipped; absent → none.
fn decode_features(frame: Option<Vec<u8>>) -> Result<Vec<String>, DecodeError> {
    let Some(f) = frame else {
        return Ok(Vec::new());
    };
    Ok(utf8(f, "features")?
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect())
}

/// A REPLY's CREDIT frame ([`FEATURE_REPLY_CREDIT`]): a decimal count.
fn decode_credit(frame: &[u8]) -> Result<u32, DecodeError> {
    std::str::from_utf8(frame)
        .ok()
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| DecodeError::BadValue {
            field: "reply credit",
            value: excerpt(frame),
        })
}

/// The FEATURES frame, only when there is a feature to list.
fn encode_features(features: &[String], out: &mut Vec<Vec<u8>>) {
    if !features.is_empty() {
        out.push(features.join(",").into_bytes());
    }
}

/// Schedules: the 0.3.13 five-frame form, or the three-frame form of
/// protocol.rst (`QUEUE, HEADERS, MSG`, no interval and no cron).
fn decode_schedule(frames: &mut Body) -> Result<Schedule, DecodeError> {
    let queue = utf8(frames.next(3)?, "queue")?;
    let headers = Headers::parse(&frames.next(3)?)?;
    let third = frames.next(3)?;
    match frames.optional() {
        None => Ok(Schedule {
            queue,
            headers,
            interval: Interval::Unset,
            message: third,
            cron: String::new(),
        }),
        Some(message) => {
            let interval = decode_interval(&third)?;
            let cron = frames
                .optional()
                .map(|f| utf8(f, "cron"))
                .transpose()?
                .unwrap_or_default();
            Ok(Schedule {
                queue,
                headers,
                interval,
                message,
                cron,
            })
        }
    }
}

/// The INTERVAL frame: `60`, `60.0`, `1.5`, `-1`, ... (see
/// [`crate::interval`]).
fn decode_interval(frame: &[u8]) -> Result<Interval, DecodeError> {
    let text = utf8_ref(frame, "interval")?;
    Interval::parse(text).map_err(|reason| DecodeError::BadInterval {
        value: excerpt(frame),
        reason,
    })
}

/// Every command name this crate knows.
pub const NAMES: [&str; 26] = [
    "INFORM",
    "ACK",
    "READY",
    "REQUEST",
    "REPLY",
    "HEARTBEAT",
    "DISCONNECT",
    "KBYE",
    "SCHEDULE",
    "UNSCHEDULE",
    "PUBLISH",
    "STATUS",
    "ROUTER_SHOW_WORKERS",
    "ROUTER_SHOW_SCHEDULERS",
    "RESULT",
    "REJECT",
    "ADMIN",
    "CANCEL",
    "RECEIVED",
    "RUNNING",
    "NOTICE",
    "PROGRESS",
    "DUPLICATE",
    "WORKFLOW",
    "BATCH",
    "ACKS",
];

/// Map the command frame to its canonical name. Upper case is what every
/// peer sends; lower case is accepted because 0.3.13 dispatches worker
/// commands case-insensitively.
fn canonical_name(name: &[u8]) -> Result<&'static str, DecodeError> {
    if let Some(n) = NAMES.iter().find(|n| n.as_bytes() == name) {
        return Ok(n);
    }
    if name.eq_ignore_ascii_case(b"KBAI") {
        return Ok("KBYE");
    }
    NAMES
        .iter()
        .find(|n| n.as_bytes().eq_ignore_ascii_case(name))
        .copied()
        .ok_or_else(|| DecodeError::UnknownCommand(excerpt(name)))
}

/// The body frames of one command, consumed in order.
struct Body {
    command: &'static str,
    frames: std::vec::IntoIter<Vec<u8>>,
    offset: usize,
}

impl Body {
    /// The next frame, which must exist; `needed` is the body's minimum
    /// length, for the error.
    fn next(&mut self, needed: usize) -> Result<Vec<u8>, DecodeError> {
        match self.frames.next() {
            Some(f) => {
                self.offset += 1;
                Ok(f)
            }
            None => Err(DecodeError::TooFewFrames {
                command: Some(self.command),
                // header frames (delimiter, protocol, command, msgid) + body
                expected: 4 + needed,
                got: 4 + self.offset,
            }),
        }
    }

    fn optional(&mut self) -> Option<Vec<u8>> {
        let f = self.frames.next();
        if f.is_some() {
            self.offset += 1;
        }
        f
    }
}

#[cfg(test)]
mod about_tests {
    #[test]
    fn every_known_reject_reason_reads_back_as_itself() {
        for r in RejectReason::KNOWN {
            assert_eq!(RejectReason::parse(r.as_str().to_string()), r);
        }
    }

    use super::*;
    use crate::Message;

    #[test]
    fn who_a_worker_is_rides_in_the_features_and_comes_back_out() {
        let about = WorkerAbout {
            name: Some("mail,1%".into()),
            host: Some("box".into()),
            pid: Some(42),
            slots: Some(4),
            version: Some("0.1.0".into()),
        };
        let mut features = vec!["job-ack".to_string(), "cancel".into()];
        features.extend(about.to_features());
        assert_eq!(
            features.join(","),
            "job-ack,cancel,name=mail%2C1%25,host=box,pid=42,slots=4,version=0.1.0"
        );
        // Through the frame and back.
        let frames = Message::with_msgid(
            "m",
            Command::Inform(Inform {
                queues: QueueSpec::default(),
                peer_type: Some(PeerType::Worker),
                features,
            }),
        )
        .encode();
        let Command::Inform(mut i) = Message::decode(frames).unwrap().command else {
            panic!("not an INFORM");
        };
        assert_eq!(WorkerAbout::take_from(&mut i.features), Some(about.clone()));
        assert_eq!(i.features, ["job-ack", "cancel"]);
        assert_eq!(about.label().as_deref(), Some("mail,1%@box"));
        assert_eq!(WorkerAbout::take_from(&mut vec!["job-ack".into()]), None);
        let mut bad = vec!["pid=x".to_string()];
        assert_eq!(
            WorkerAbout::take_from(&mut bad),
            Some(WorkerAbout::default())
        );
    }
}
