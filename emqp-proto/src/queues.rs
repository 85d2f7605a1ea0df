//! Queue specs: which queues a worker serves, each with a weight.
//!
//! Three spellings exist: the seed's csv (`default,email`), EventMQ 0.3.13's
//! JSON list of `[weight, name]` pairs (`[[10, "default"], [15, "email"]]`),
//! and the command-line form `10:default,15:email` (weight optional).

use crate::error::{excerpt, utf8_ref, DecodeError};

/// The queue a REQUEST for an unserved queue falls back to.
pub const DEFAULT_QUEUE: &str = "default";
/// The weight of a queue given without one (0.3.13's DEFAULT_QUEUE_WEIGHT).
pub const DEFAULT_WEIGHT: u32 = 10;

/// An ordered list of (weight, queue name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueSpec(pub Vec<(u32, String)>);

impl Default for QueueSpec {
    /// `[[10, "default"]]`, what 0.3.13 uses when none is given.
    fn default() -> Self {
        QueueSpec(vec![(DEFAULT_WEIGHT, DEFAULT_QUEUE.to_string())])
    }
}

impl QueueSpec {
    /// Parse the INFORM QUEUES frame in either wire form. An empty frame
    /// yields an empty spec: the router then applies its default queues.
    pub fn from_inform_frame(frame: &[u8]) -> Result<QueueSpec, DecodeError> {
        let text = utf8_ref(frame, "queues")?.trim();
        if text.is_empty() {
            return Ok(QueueSpec(Vec::new()));
        }
        if text.starts_with('[') || text.starts_with('{') {
            return Self::from_json(text);
        }
        // Seed form: csv of names, every weight the default.
        Self::parse_cli(text)
    }

    fn from_json(text: &str) -> Result<QueueSpec, DecodeError> {
        let bad = |reason: String| DecodeError::BadJson {
            field: "queues",
            reason,
        };
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| bad(e.to_string()))?;
        let items = value
            .as_array()
            .ok_or_else(|| bad("expected a list of [weight, name] pairs".into()))?;
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            match item {
                // A bare name is tolerated and gets the default weight.
                serde_json::Value::String(name) => out.push((DEFAULT_WEIGHT, name.clone())),
                serde_json::Value::Array(pair) if pair.len() == 2 => {
                    let weight = match &pair[0] {
                        serde_json::Value::Number(n) => n
                            .as_u64()
                            .and_then(|w| u32::try_from(w).ok())
                            .ok_or_else(|| DecodeError::BadNumber {
                                field: "queue weight",
                                value: n.to_string(),
                            })?,
                        serde_json::Value::String(s) => {
                            s.parse().map_err(|_| DecodeError::BadNumber {
                                field: "queue weight",
                                value: s.clone(),
                            })?
                        }
                        other => return Err(bad(format!("weight must be a number, got {other}"))),
                    };
                    let name = pair[1].as_str().ok_or_else(|| {
                        bad(format!("queue name must be a string, got {}", pair[1]))
                    })?;
                    out.push((weight, name.to_string()));
                }
                other => {
                    return Err(bad(format!(
                        "expected [weight, name], got {}",
                        excerpt(other.to_string().as_bytes())
                    )))
                }
            }
        }
        Ok(QueueSpec(out))
    }

    /// Parse the command-line form: `default`, `default,email`,
    /// `10:default,15:email`, or the JSON form. Whitespace is ignored.
    pub fn parse_cli(text: &str) -> Result<QueueSpec, DecodeError> {
        let text = text.trim();
        if text.starts_with('[') || text.starts_with('{') {
            return Self::from_json(text);
        }
        let mut out = Vec::new();
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            match item.split_once(':') {
                Some((w, name)) => {
                    let weight = w.trim().parse().map_err(|_| DecodeError::BadNumber {
                        field: "queue weight",
                        value: w.to_string(),
                    })?;
                    let name = name.trim();
                    if name.is_empty() {
                        return Err(DecodeError::BadValue {
                            field: "queue name",
                            value: item.to_string(),
                        });
                    }
                    out.push((weight, name.to_string()));
                }
                None => out.push((DEFAULT_WEIGHT, item.to_string())),
            }
        }
        Ok(QueueSpec(out))
    }

    /// The 0.3.13 INFORM form, spaced as Python's `json.dumps`:
    /// `[[10, "default"], [15, "email"]]`.
    pub fn to_inform_json(&self) -> String {
        let mut s = String::from("[");
        for (i, (w, name)) in self.0.iter().enumerate() {
            if i > 0 {
                s.push_str(", ");
            }
            s.push('[');
            s.push_str(&w.to_string());
            s.push_str(", ");
            s.push_str(&serde_json::Value::String(name.clone()).to_string());
            s.push(']');
        }
        s.push(']');
        s
    }

    /// Queue names, highest weight first; ties keep the given order.
    pub fn by_priority(&self) -> Vec<(u32, String)> {
        let mut v = self.0.clone();
        v.sort_by_key(|e| std::cmp::Reverse(e.0));
        v
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_form_from_0_3_13() {
        let q = QueueSpec::from_inform_frame(br#"[[20, "high"], [10, "default"]]"#).unwrap();
        assert_eq!(q.0, vec![(20, "high".into()), (10, "default".into())]);
        assert_eq!(q.to_inform_json(), r#"[[20, "high"], [10, "default"]]"#);
    }

    #[test]
    fn seed_csv_form() {
        let q = QueueSpec::from_inform_frame(b"default,email").unwrap();
        assert_eq!(q.0, vec![(10, "default".into()), (10, "email".into())]);
    }

    #[test]
    fn empty_frame_is_empty_spec() {
        assert!(QueueSpec::from_inform_frame(b"").unwrap().is_empty());
    }

    #[test]
    fn cli_form_with_weights() {
        let q = QueueSpec::parse_cli("10:default, 15:email").unwrap();
        assert_eq!(q.0, vec![(10, "default".into()), (15, "email".into())]);
        assert_eq!(q.by_priority()[0].1, "email");
    }

    #[test]
    fn bad_specs_are_typed_errors() {
        assert!(matches!(
            QueueSpec::from_inform_frame(b"[[10, \"a\""),
            Err(DecodeError::BadJson { .. })
        ));
        assert!(matches!(
            QueueSpec::from_inform_frame(b"[[-1, \"a\"]]"),
            Err(DecodeError::BadNumber { .. })
        ));
        assert!(matches!(
            QueueSpec::parse_cli("x:default"),
            Err(DecodeError::BadNumber { .. })
        ));
        assert!(matches!(
            QueueSpec::parse_cli("10:"),
            Err(DecodeError::BadValue { .. })
        ));
        assert!(matches!(
            QueueSpec::from_inform_frame(b"{}"),
            Err(DecodeError::BadJson { .. })
        ));
    }
}
