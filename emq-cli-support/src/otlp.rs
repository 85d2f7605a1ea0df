//! The traces endpoint of the router and the job manager: `--otlp-endpoint`,
//! else the standard OpenTelemetry environment.
//!
//! Order: the flag (`--otlp-endpoint URL`, a base URL like
//! `OTEL_EXPORTER_OTLP_ENDPOINT`: `/v1/traces` is appended), else
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the full traces URL, used as is),
//! else `OTEL_EXPORTER_OTLP_ENDPOINT` (base URL). None of them: no
//! exporter at all. The protocol is OTLP over HTTP with protobuf bodies;
//! `OTEL_EXPORTER_OTLP_PROTOCOL` / `…_TRACES_PROTOCOL`, when set, must say
//! `http/protobuf`. Only `http://` URLs (no TLS stack is linked).

use std::collections::HashMap;

use clap::Args;

/// The traces flag, flattened into the router's and the job manager's
/// `Cli`.
#[derive(Args, Debug, Clone, Default, PartialEq, Eq)]
#[command(next_help_heading = "Traces (OpenTelemetry)")]
pub struct OtlpArgs {
    /// Export a span per job to this OTLP/HTTP (protobuf) collector, a
    /// base URL such as http://127.0.0.1:4318 (`/v1/traces` is appended).
    /// Without it, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
    /// OTEL_EXPORTER_OTLP_ENDPOINT; none set: no traces. OTEL_SERVICE_NAME,
    /// OTEL_RESOURCE_ATTRIBUTES and the batch processor's OTEL_BSP_*
    /// apply
    #[arg(long, value_name = "URL")]
    pub otlp_endpoint: Option<String>,
}

impl OtlpArgs {
    /// The full traces URL to export to, `None` when traces are off, or
    /// why the setting is refused.
    pub fn traces_url(&self, env: &HashMap<String, String>) -> Result<Option<String>, String> {
        let get = |k: &str| env.get(k).map(|v| v.trim()).filter(|v| !v.is_empty());
        for key in [
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        ] {
            if let Some(p) = get(key) {
                if p != "http/protobuf" {
                    return Err(format!(
                        "{key}={p}: emq exports traces as http/protobuf only"
                    ));
                }
            }
        }
        let (source, value, base) = if let Some(v) = self.otlp_endpoint.as_deref() {
            ("--otlp-endpoint", v.trim(), true)
        } else if let Some(v) = get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", v, false)
        } else if let Some(v) = get("OTEL_EXPORTER_OTLP_ENDPOINT") {
            ("OTEL_EXPORTER_OTLP_ENDPOINT", v, true)
        } else {
            return Ok(None);
        };
        let rest = value.strip_prefix("http://").ok_or_else(|| {
            format!(
                "{source}: {value:?} is not an http:// URL \
                 (https is not built in: use a local collector)"
            )
        })?;
        if rest.is_empty() || rest.starts_with('/') {
            return Err(format!("{source}: {value:?} has no host"));
        }
        let url = if base {
            with_traces_path(value)
        } else {
            value.to_string()
        };
        Ok(Some(url))
    }
}

/// `base` + `/v1/traces`, as the OTLP specification builds a signal's URL
/// from `OTEL_EXPORTER_OTLP_ENDPOINT`.
fn with_traces_path(base: &str) -> String {
    format!("{}/v1/traces", base.trim_end_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn flag_then_traces_endpoint_then_base_endpoint() {
        let none = OtlpArgs::default();
        assert_eq!(none.traces_url(&env(&[])), Ok(None));
        let flag = OtlpArgs {
            otlp_endpoint: Some("http://127.0.0.1:4318/".into()),
        };
        let both = env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://base:4318"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c:1/traces"),
        ]);
        assert_eq!(
            flag.traces_url(&both).unwrap().as_deref(),
            Some("http://127.0.0.1:4318/v1/traces")
        );
        assert_eq!(
            none.traces_url(&both).unwrap().as_deref(),
            Some("http://c:1/traces")
        );
        let base = env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://base:4318")]);
        assert_eq!(
            none.traces_url(&base).unwrap().as_deref(),
            Some("http://base:4318/v1/traces")
        );
    }

    #[test]
    fn refuses_https_grpc_and_hostless_urls() {
        let flag = |u: &str| OtlpArgs {
            otlp_endpoint: Some(u.into()),
        };
        assert!(flag("https://c:4318")
            .traces_url(&env(&[]))
            .unwrap_err()
            .contains("https"));
        assert!(flag("http://")
            .traces_url(&env(&[]))
            .unwrap_err()
            .contains("no host"));
        let grpc = env(&[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]);
        assert!(flag("http://c:4318")
            .traces_url(&grpc)
            .unwrap_err()
            .contains("http/protobuf"));
    }
}
