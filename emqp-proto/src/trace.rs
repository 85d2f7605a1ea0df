//! The `traceparent` header (emq): a W3C Trace Context `traceparent`
//! (`00-<32 hex trace id>-<16 hex parent span id>-<2 hex flags>`) carried in
//! the HEADERS frame as the item `traceparent:<value>`.
//!
//! A client puts the caller's span there; the router replaces it with its
//! own span (the job's queue wait) when it dispatches the job, so the job
//! manager's span (the run) is the router's child, and the job manager
//! hands its own span to the job. Peers that do not trace keep the item
//! verbatim like any unknown header. Parsing never fails loudly: a value
//! that is not a valid version-00 `traceparent` (bad hex, all-zero ids) is
//! treated as absent, as the W3C recommendation says.

use std::fmt;

/// The header item's name: `traceparent:<value>`.
pub const TRACEPARENT: &str = "traceparent";

/// A parsed `traceparent` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceParent {
    pub trace_id: [u8; 16],
    /// The span the receiver's span is a child of.
    pub span_id: [u8; 8],
    /// Trace flags; bit 0 is `sampled`.
    pub flags: u8,
}

impl TraceParent {
    /// Whether the caller sampled its span (flag bit 0).
    pub fn sampled(&self) -> bool {
        self.flags & 1 == 1
    }

    /// Parse a `traceparent` value; `None` unless it is a valid version-00
    /// value with non-zero ids.
    pub fn parse(value: &str) -> Option<TraceParent> {
        let value = value.trim();
        let mut parts = value.split('-');
        let (version, trace, span, flags) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() || version != "00" {
            return None;
        }
        let trace_id: [u8; 16] = hex(trace)?;
        let span_id: [u8; 8] = hex(span)?;
        let [flags] = hex::<1>(flags)?;
        if trace_id == [0; 16] || span_id == [0; 8] {
            return None;
        }
        Some(TraceParent {
            trace_id,
            span_id,
            flags,
        })
    }

    /// The `traceparent` item of a raw HEADERS frame, if there is a valid
    /// one (the first such item counts).
    pub fn from_headers(frame: &[u8]) -> Option<TraceParent> {
        frame.split(|b| *b == b',').find_map(|item| {
            let item = std::str::from_utf8(item).ok()?.trim();
            let value = item.strip_prefix(TRACEPARENT)?.strip_prefix(':')?;
            TraceParent::parse(value)
        })
    }

    /// `frame` with its `traceparent` items replaced by `self` (appended
    /// when it had none); every other item is kept as it was.
    pub fn set_in_headers(&self, frame: &[u8]) -> Vec<u8> {
        crate::headers::frame_with_item(frame, TRACEPARENT, &self.to_string())
    }
}

impl fmt::Display for TraceParent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("00-")?;
        for b in self.trace_id {
            write!(f, "{b:02x}")?;
        }
        f.write_str("-")?;
        for b in self.span_id {
            write!(f, "{b:02x}")?;
        }
        write!(f, "-{:02x}", self.flags)
    }
}

/// Lower- or upper-case hex of exactly `N` bytes.
fn hex<const N: usize>(s: &str) -> Option<[u8; N]> {
    if s.len() != 2 * N || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut out = [0u8; N];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TP: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn parses_and_prints_the_w3c_example() {
        let tp = TraceParent::parse(TP).unwrap();
        assert_eq!(tp.trace_id[0], 0x4b);
        assert_eq!(tp.span_id[7], 0xb7);
        assert!(tp.sampled());
        assert_eq!(tp.to_string(), TP);
    }

    #[test]
    fn refuses_what_is_not_a_version_00_value() {
        for bad in [
            "",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
            "00-4bf92f3577b34da6a3ce929d0e0e47é-00f067aa0ba902b7-01",
        ] {
            assert_eq!(TraceParent::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn found_in_and_replaced_in_a_headers_frame() {
        let frame = format!("reply-requested,traceparent:{TP},retry-count:2");
        let tp = TraceParent::from_headers(frame.as_bytes()).unwrap();
        assert_eq!(tp.to_string(), TP);
        let mine = TraceParent {
            span_id: [1; 8],
            ..tp
        };
        let out = mine.set_in_headers(frame.as_bytes());
        assert_eq!(
            String::from_utf8(out).unwrap(),
            format!("reply-requested,retry-count:2,traceparent:{mine}")
        );
        assert_eq!(
            String::from_utf8(mine.set_in_headers(b"")).unwrap(),
            format!("traceparent:{mine}")
        );
        assert_eq!(TraceParent::from_headers(b"reply-requested"), None);
        assert_eq!(TraceParent::from_headers(b"traceparent:junk"), None);
        assert_eq!(TraceParent::from_headers(b"\xff,traceparentx:1"), None);
    }
}
