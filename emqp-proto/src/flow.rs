//! Flow control's vocabulary (docs/PROTOCOL.md, "Flow control"): a
//! queue's [`Policy`] — concurrency and rate limits, global and per key,
//! fairness across keys — and a [`Rate`], `N/SECS`. The router core
//! enforces a policy (`emq-router-core`, `router/flow.rs`); the admin ops
//! `limits-set` / `limits-show` / `limits-clear`, emq-cli, the router's
//! `--limit` flag and the journal all speak this one type. Sans-IO.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The longest period of a rate (one day).
pub const MAX_RATE_PERIOD: Duration = Duration::from_secs(86_400);

/// At most `n` dispatches per `per` (a token bucket of `n` tokens, one
/// back every `per / n`: bursts of up to `n`). Written `N/SECS`, SECS a
/// decimal number of seconds (`10/1`, `1/0.5`, `100/60`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Rate {
    pub n: u32,
    pub per: Duration,
}

/// Why a policy or a rate is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyError(pub String);

impl std::fmt::Display for PolicyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PolicyError {}

impl Rate {
    /// The time one token takes to come back: `per / n`.
    pub fn interval(&self) -> Duration {
        self.per / self.n.max(1)
    }

    /// Parse `N/SECS` (N ≥ 1, 0 < SECS ≤ one day).
    pub fn parse(text: &str) -> Result<Rate, PolicyError> {
        let bad = |why: &str| PolicyError(format!("bad rate {text:?}: {why} (N/SECS, e.g. 10/1)"));
        let (n, secs) = text.trim().split_once('/').ok_or_else(|| bad("no '/'"))?;
        let n: u32 = n
            .trim()
            .parse()
            .map_err(|_| bad("N is not a whole number"))?;
        if n == 0 {
            return Err(bad("N must be at least 1"));
        }
        let secs: f64 = secs
            .trim()
            .parse()
            .map_err(|_| bad("SECS is not a number"))?;
        if !secs.is_finite() || secs <= 0.0 || secs > MAX_RATE_PERIOD.as_secs_f64() {
            return Err(bad("SECS must be above 0 and at most 86400"));
        }
        let per = Duration::from_secs_f64(secs);
        if per < Duration::from_micros(1) {
            return Err(bad("SECS is below a microsecond"));
        }
        Ok(Rate { n, per })
    }
}

impl std::fmt::Display for Rate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let per = self.per.as_secs_f64();
        write!(f, "{}/{}", self.n, per)
    }
}

impl TryFrom<String> for Rate {
    type Error = PolicyError;
    fn try_from(s: String) -> Result<Rate, PolicyError> {
        Rate::parse(&s)
    }
}

impl From<Rate> for String {
    fn from(r: Rate) -> String {
        r.to_string()
    }
}

impl std::str::FromStr for Rate {
    type Err = PolicyError;
    fn from_str(s: &str) -> Result<Rate, PolicyError> {
        Rate::parse(s)
    }
}

/// A queue's flow-control policy. Absent limits do not limit; `fair`
/// off dispatches the oldest job first (across keys, within a priority),
/// on takes keys in turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Policy {
    /// Jobs of the queue running at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u32>,
    /// Jobs of one key running at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency_per_key: Option<u32>,
    /// Dispatches of the queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<Rate>,
    /// Dispatches of one key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_per_key: Option<Rate>,
    /// Round robin across keys within a priority.
    #[serde(default)]
    pub fair: bool,
}

/// A change to a policy (`limits-set`, `--limit`): each field given
/// replaces the policy's; a concurrency of 0 removes that limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PolicyChange {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency_per_key: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<RateChange>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_per_key: Option<RateChange>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair: Option<bool>,
}

/// A rate to set, or `none` to remove it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum RateChange {
    Set(Rate),
    Remove,
}

impl TryFrom<String> for RateChange {
    type Error = PolicyError;
    fn try_from(s: String) -> Result<RateChange, PolicyError> {
        RateChange::parse(&s)
    }
}

impl From<RateChange> for String {
    fn from(r: RateChange) -> String {
        match r {
            RateChange::Set(r) => r.to_string(),
            RateChange::Remove => "none".into(),
        }
    }
}

impl RateChange {
    /// `N/SECS`, or `none`.
    pub fn parse(text: &str) -> Result<RateChange, PolicyError> {
        if text.trim() == "none" {
            Ok(RateChange::Remove)
        } else {
            Rate::parse(text).map(RateChange::Set)
        }
    }
}

impl std::str::FromStr for RateChange {
    type Err = PolicyError;
    fn from_str(s: &str) -> Result<RateChange, PolicyError> {
        RateChange::parse(s)
    }
}

impl PolicyChange {
    /// Nothing to change.
    pub fn is_empty(&self) -> bool {
        *self == PolicyChange::default()
    }

    /// `policy` with this change applied.
    pub fn apply(&self, mut policy: Policy) -> Policy {
        let limit = |n: u32| (n > 0).then_some(n);
        if let Some(n) = self.concurrency {
            policy.concurrency = limit(n);
        }
        if let Some(n) = self.concurrency_per_key {
            policy.concurrency_per_key = limit(n);
        }
        let rate = |r: RateChange| match r {
            RateChange::Set(r) => Some(r),
            RateChange::Remove => None,
        };
        if let Some(r) = self.rate {
            policy.rate = rate(r);
        }
        if let Some(r) = self.rate_per_key {
            policy.rate_per_key = rate(r);
        }
        if let Some(f) = self.fair {
            policy.fair = f;
        }
        policy
    }

    /// Parse the `--limit` form: `concurrency=2,concurrency-per-key=1,
    /// rate=10/1,rate-per-key=1/1,fair` (`fair=off`/`no-fair` for off).
    pub fn parse_items(text: &str) -> Result<PolicyChange, PolicyError> {
        let mut c = PolicyChange::default();
        let num = |k: &str, v: &str| {
            v.trim()
                .parse::<u32>()
                .map_err(|_| PolicyError(format!("{k}={v}: not a whole number")))
        };
        for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (k, v) = match item.split_once('=') {
                Some((k, v)) => (k.trim(), Some(v.trim())),
                None => (item, None),
            };
            match (k, v) {
                ("concurrency", Some(v)) => c.concurrency = Some(num(k, v)?),
                ("concurrency-per-key", Some(v)) => c.concurrency_per_key = Some(num(k, v)?),
                ("rate", Some(v)) => c.rate = Some(RateChange::parse(v)?),
                ("rate-per-key", Some(v)) => c.rate_per_key = Some(RateChange::parse(v)?),
                ("fair", None) | ("fair", Some("on" | "true")) => c.fair = Some(true),
                ("no-fair", None) | ("fair", Some("off" | "false")) => c.fair = Some(false),
                _ => {
                    return Err(PolicyError(format!(
                        "unknown limit {item:?} (concurrency=N, concurrency-per-key=N, \
                         rate=N/SECS, rate-per-key=N/SECS, fair, no-fair)"
                    )))
                }
            }
        }
        Ok(c)
    }
}

/// One `--limit` value, `QUEUE:ITEMS` (ITEMS as
/// [`PolicyChange::parse_items`]): the queue and its policy.
pub fn parse_queue_limit(text: &str) -> Result<(String, Policy), PolicyError> {
    let (queue, items) = text.split_once(':').ok_or_else(|| {
        PolicyError(format!(
            "bad limit {text:?}: QUEUE:concurrency=N,concurrency-per-key=N,rate=N/SECS,\
             rate-per-key=N/SECS,fair"
        ))
    })?;
    let queue = queue.trim();
    if queue.is_empty() {
        return Err(PolicyError(format!("bad limit {text:?}: no queue")));
    }
    let p = PolicyChange::parse_items(items)
        .map_err(|e| PolicyError(format!("bad limit {text:?}: {e}")))?
        .apply(Policy::default());
    if p.is_none() {
        return Err(PolicyError(format!("bad limit {text:?}: no limit given")));
    }
    Ok((queue.to_string(), p))
}

impl Policy {
    /// No limit and not fair: the same as no policy.
    pub fn is_none(&self) -> bool {
        *self == Policy::default()
    }

    /// Whether it limits how many jobs run at once.
    pub fn limits_concurrency(&self) -> bool {
        self.concurrency.is_some() || self.concurrency_per_key.is_some()
    }

    /// The journal's blob (JSON).
    pub fn to_blob(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a policy serializes")
    }

    /// A journal blob read back.
    pub fn from_blob(blob: &[u8]) -> Result<Policy, PolicyError> {
        serde_json::from_slice(blob).map_err(|e| PolicyError(format!("bad policy blob: {e}")))
    }
}

impl std::fmt::Display for Policy {
    /// The `--limit` form (`concurrency=2,rate=10/1,fair`), `none` for no
    /// limit.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut items: Vec<String> = Vec::new();
        if let Some(n) = self.concurrency {
            items.push(format!("concurrency={n}"));
        }
        if let Some(n) = self.concurrency_per_key {
            items.push(format!("concurrency-per-key={n}"));
        }
        if let Some(r) = self.rate {
            items.push(format!("rate={r}"));
        }
        if let Some(r) = self.rate_per_key {
            items.push(format!("rate-per-key={r}"));
        }
        if self.fair {
            items.push("fair".into());
        }
        if items.is_empty() {
            f.write_str("none")
        } else {
            f.write_str(&items.join(","))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse_and_print_back() {
        let r = Rate::parse("10/1").unwrap();
        assert_eq!((r.n, r.per), (10, Duration::from_secs(1)));
        assert_eq!(r.interval(), Duration::from_millis(100));
        assert_eq!(r.to_string(), "10/1");
        assert_eq!(Rate::parse("1/0.5").unwrap().to_string(), "1/0.5");
        for bad in [
            "10", "0/1", "x/1", "1/0", "1/-1", "1/x", "1/100000", "1/inf",
        ] {
            assert!(Rate::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn changes_merge_into_a_policy_and_round_trip_as_json() {
        let c = PolicyChange::parse_items("concurrency=2, rate=10/1,fair").unwrap();
        let p = c.apply(Policy::default());
        assert_eq!(p.to_string(), "concurrency=2,rate=10/1,fair");
        let p2 = PolicyChange::parse_items("concurrency=0,rate-per-key=1/2,no-fair")
            .unwrap()
            .apply(p);
        assert_eq!(p2.to_string(), "rate=10/1,rate-per-key=1/2");
        let p3 = PolicyChange::parse_items("rate=none").unwrap().apply(p2);
        assert_eq!(p3.to_string(), "rate-per-key=1/2");
        assert_eq!(Policy::from_blob(&p2.to_blob()), Ok(p2));
        assert_eq!(
            serde_json::to_value(p).unwrap(),
            serde_json::json!({"concurrency": 2, "rate": "10/1", "fair": true})
        );
        assert!(PolicyChange::parse_items("speed=3").is_err());
        assert!(PolicyChange::parse_items("concurrency=x").is_err());
        assert!(Policy::from_blob(b"{\"rate\": \"0/1\"}").is_err());
        let (q, p) = parse_queue_limit("email:concurrency-per-key=2,rate=10/1").unwrap();
        assert_eq!(
            (q.as_str(), p.to_string().as_str()),
            ("email", "concurrency-per-key=2,rate=10/1")
        );
        for bad in ["email", ":concurrency=1", "email:", "email:speed=1"] {
            assert!(parse_queue_limit(bad).is_err(), "{bad}");
        }
    }
}
