//! Building REQUEST frames from command-line arguments: the job payload
//! (MSG frame) for each convenience form, MESSAGE_JSON validation, and the
//! HEADERS frame.

use std::fmt;

use emqp_proto::job::{CallJob, Job, RunJob, ShellJob};
use emqp_proto::{Header, Headers};
use serde_json::{Map, Value};

/// A usage error: bad input on the command line or stdin (exit code 2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

fn usage(msg: impl Into<String>) -> UsageError {
    UsageError(msg.into())
}

/// Parse the JSON text of option `flag`.
pub fn parse_json(flag: &str, text: &str) -> Result<Value, UsageError> {
    serde_json::from_str(text).map_err(|e| usage(format!("{flag}: not valid JSON ({e}): {text}")))
}

fn json_list(flag: &str, text: Option<&str>) -> Result<Vec<Value>, UsageError> {
    match text {
        None => Ok(Vec::new()),
        Some(t) => match parse_json(flag, t)? {
            Value::Array(v) => Ok(v),
            other => Err(usage(format!(
                "{flag}: expected a JSON list such as '[1, \"a\"]', got {other}"
            ))),
        },
    }
}

fn json_object(flag: &str, text: Option<&str>) -> Result<Map<String, Value>, UsageError> {
    match text {
        None => Ok(Map::new()),
        Some(t) => match parse_json(flag, t)? {
            Value::Object(m) => Ok(m),
            other => Err(usage(format!(
                "{flag}: expected a JSON object such as '{{\"k\": 1}}', got {other}"
            ))),
        },
    }
}

/// Split a Python callable spec into 0.3.13's `(path, callable)`:
/// `pkg.module.func` → (`pkg.module`, `func`);
/// `pkg.module:Class.method` → (`pkg.module:Class`, `method`).
pub fn split_python_spec(spec: &str) -> Result<(String, String), UsageError> {
    let bad = |why: &str| {
        usage(format!(
            "--python {spec:?}: {why} (expected pkg.module.func or pkg.module:Class.method)"
        ))
    };
    let spec = spec.trim();
    let (path, callable) = match spec.split_once(':') {
        Some((module, rest)) => {
            let Some((class, method)) = rest.rsplit_once('.') else {
                return Err(bad("missing .method after the class"));
            };
            if module.is_empty() || class.is_empty() {
                return Err(bad("empty module or class name"));
            }
            if class.contains(':') {
                return Err(bad("more than one ':'"));
            }
            (format!("{module}:{class}"), method.to_string())
        }
        None => {
            let Some((module, func)) = spec.rsplit_once('.') else {
                return Err(bad("missing module"));
            };
            (module.to_string(), func.to_string())
        }
    };
    if path.is_empty() || path.split(['.', ':']).any(str::is_empty) {
        return Err(bad("empty name component"));
    }
    if callable.is_empty() {
        return Err(bad("empty callable name"));
    }
    Ok((path, callable))
}

/// Arguments of the `--python` form (the JSON texts as given).
#[derive(Debug, Clone, Default)]
pub struct PythonArgs<'a> {
    pub args: Option<&'a str>,
    pub kwargs: Option<&'a str>,
    pub class_args: Option<&'a str>,
    pub class_kwargs: Option<&'a str>,
}

/// `["run", {callable, path, args, kwargs, class_args, class_kwargs}]`.
pub fn python_job(spec: &str, a: &PythonArgs) -> Result<Job, UsageError> {
    let (path, callable) = split_python_spec(spec)?;
    let class_args = json_list("--class-args", a.class_args)?;
    let class_kwargs = json_object("--class-kwargs", a.class_kwargs)?;
    if !path.contains(':') && (!class_args.is_empty() || !class_kwargs.is_empty()) {
        return Err(usage(
            "--class-args/--class-kwargs need a method spec: --python pkg.module:Class.method",
        ));
    }
    Ok(Job::Run(RunJob {
        callable,
        path,
        args: json_list("--args", a.args)?,
        kwargs: json_object("--kwargs", a.kwargs)?,
        class_args,
        class_kwargs,
    }))
}

/// `["call", {handler, args}]`; `args` is any JSON (null when not given).
pub fn call_job(handler: &str, args: Option<&str>) -> Result<Job, UsageError> {
    if handler.trim().is_empty() {
        return Err(usage("--call: empty handler name"));
    }
    let args = match args {
        None => Value::Null,
        Some(t) => parse_json("--args", t)?,
    };
    Ok(Job::Call(CallJob {
        handler: handler.to_string(),
        args,
    }))
}

/// `["shell", {argv, stdin, env, cwd}]`; `env` items are `KEY=VALUE`.
pub fn shell_job(
    argv: &[String],
    stdin: Option<&str>,
    env: &[String],
    cwd: Option<&str>,
) -> Result<Job, UsageError> {
    if argv.is_empty() {
        return Err(usage(
            "--shell: give the command after --, e.g. --shell -- ls -l /tmp",
        ));
    }
    let mut env_map = Map::new();
    for item in env {
        match item.split_once('=') {
            Some((k, v)) if !k.is_empty() => {
                env_map.insert(k.to_string(), Value::String(v.to_string()));
            }
            _ => return Err(usage(format!("--env {item:?}: expected KEY=VALUE"))),
        }
    }
    Ok(Job::Shell(ShellJob {
        argv: argv.to_vec(),
        stdin: stdin.map(str::to_string),
        env: env_map,
        cwd: cwd.map(str::to_string),
    }))
}

/// Check that a message given as text is JSON; returns the frame to send
/// (the text as given, without surrounding whitespace).
pub fn validate_message(text: &str) -> Result<Vec<u8>, UsageError> {
    let t = text.trim();
    if t.is_empty() {
        return Err(usage("MESSAGE_JSON is empty"));
    }
    serde_json::from_str::<Value>(t)
        .map_err(|e| usage(format!("MESSAGE_JSON is not valid JSON: {e}")))?;
    Ok(t.as_bytes().to_vec())
}

/// The HEADERS frame: every `--header` value (each may itself be a comma
/// list), with `reply-requested` first when `reply` is set (0.3.13's order)
/// and never twice.
pub fn build_headers(items: &[String], reply: bool) -> Result<Headers, UsageError> {
    let mut out = Headers::new();
    if reply {
        out.push(Header::ReplyRequested);
    }
    for item in items {
        let parsed = Headers::parse(item.as_bytes())
            .map_err(|e| usage(format!("--header {item:?}: {e}")))?;
        for h in parsed.0 {
            if h == Header::ReplyRequested && out.reply_requested() {
                continue;
            }
            out.push(h);
        }
    }
    Ok(out)
}

/// JSON text exactly as Python's `json.dumps(value)` writes it with its
/// defaults (EventMQ 0.3.13 clients serialize jobs that way): `", "` and
/// `": "` separators, non-ASCII and DEL escaped as `\uXXXX` (lower-case
/// hex, surrogate pairs above U+FFFF), floats as Python's `repr` (`1.0`,
/// `1e+16`, `1e-05`). Object keys keep their order.
///
/// Not covered: integers beyond 64 bits, which serde_json reads as floats
/// (Python keeps them as integers).
pub fn python_json(value: &Value) -> String {
    let mut out = String::new();
    write_python_json(value, &mut out);
    out
}

fn write_python_json(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => out.push_str(&i.to_string()),
            (None, Some(u), _) => out.push_str(&u.to_string()),
            (None, None, Some(f)) => out.push_str(&python_float_repr(f)),
            (None, None, None) => out.push_str(&n.to_string()),
        },
        Value::String(s) => write_python_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_python_json(v, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_python_string(k, out);
                out.push_str(": ");
                write_python_json(v, out);
            }
            out.push('}');
        }
    }
}

/// Python's `json` with `ensure_ascii=True`: everything outside `' '..='~'`
/// is escaped.
fn write_python_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            _ => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{u:04x}"));
                }
            }
        }
    }
    out.push('"');
}

/// `repr(float)` of Python 3: the shortest digits that read back as the
/// same float, in positional notation when the decimal exponent is from -4
/// to 15, else as `d.ddde+XX` / `d.ddde-XX`.
pub fn python_float_repr(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    // Rust's `{:e}` gives the shortest round-trip digits too: "-1.2345e-7".
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let n = digits.len() as i32;
    if (-4..16).contains(&exp) {
        // positional
        let point = exp + 1; // digits before the decimal point
        let body = if point <= 0 {
            format!("0.{}{digits}", "0".repeat((-point) as usize))
        } else if point >= n {
            format!("{digits}{}.0", "0".repeat((point - n) as usize))
        } else {
            format!(
                "{}.{}",
                &digits[..point as usize],
                &digits[point as usize..]
            )
        };
        format!("{sign}{body}")
    } else {
        let (first, rest) = digits.split_at(1);
        let frac = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let esign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{first}{frac}e{esign}{:02}", exp.abs())
    }
}

/// The MSG frame of a SCHEDULE / UNSCHEDULE built from a job form: the job
/// as Python's `json.dumps` writes it, byte for byte what 0.3.13's
/// `schedule()` sends for a `run` job, so that an UNSCHEDULE from either
/// side matches a SCHEDULE from the other (schedules are matched on queue
/// and message bytes).
pub fn schedule_message(job: &Job) -> Vec<u8> {
    match serde_json::from_slice::<Value>(&job.to_message()) {
        Ok(v) => python_json(&v).into_bytes(),
        // unreachable: to_message always writes valid JSON
        Err(_) => job.to_message(),
    }
}

/// The HEADERS frame of a SCHEDULE / UNSCHEDULE: the `--header` values,
/// then `nohaste` and `run_count:N` when asked for. With none of these the
/// frame is `guarantee`, the default of 0.3.13's `schedule()`.
pub fn build_schedule_headers(
    items: &[String],
    nohaste: bool,
    run_count: Option<u64>,
) -> Result<Headers, UsageError> {
    let mut out = build_headers(items, false)?;
    if items.is_empty() && !nohaste && run_count.is_none() {
        out.push(Header::Guarantee);
        return Ok(out);
    }
    if nohaste && !out.nohaste() {
        out.push(Header::NoHaste);
    }
    if let Some(n) = run_count {
        out.push(Header::Other(format!("run_count:{n}")));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(job: &Job) -> String {
        String::from_utf8(job.to_message()).unwrap()
    }

    #[test]
    fn python_function_payload_has_0_3_13_keys_in_order() {
        let a = PythonArgs {
            args: Some(r#"["x", 2]"#),
            kwargs: Some(r#"{"k": 1}"#),
            ..Default::default()
        };
        let job = python_job("pkg.mod.func", &a).unwrap();
        assert_eq!(
            text(&job),
            r#"["run",{"callable":"func","path":"pkg.mod","args":["x",2],"kwargs":{"k":1},"class_args":[],"class_kwargs":{}}]"#
        );
    }

    #[test]
    fn python_method_payload_with_class_args() {
        let a = PythonArgs {
            class_args: Some("[1]"),
            class_kwargs: Some(r#"{"name": "n"}"#),
            ..Default::default()
        };
        let Job::Run(j) = python_job("pkg.mod:Greeter.hello", &a).unwrap() else {
            panic!("not run")
        };
        assert_eq!(j.path, "pkg.mod:Greeter");
        assert_eq!(j.callable, "hello");
        assert_eq!(j.class_args, vec![Value::from(1)]);
        assert_eq!(j.class_kwargs["name"], Value::from("n"));
        assert!(j.args.is_empty() && j.kwargs.is_empty());
    }

    #[test]
    fn python_spec_errors() {
        for bad in [
            "func",
            "pkg.",
            ".func",
            "pkg:Class",
            "pkg:.m",
            ":C.m",
            "a..b",
            "a:b:C.m",
        ] {
            assert!(split_python_spec(bad).is_err(), "{bad} accepted");
        }
        assert_eq!(
            split_python_spec("mod.f").unwrap(),
            ("mod".to_string(), "f".to_string())
        );
        assert_eq!(
            split_python_spec("a.b:C.m").unwrap(),
            ("a.b:C".to_string(), "m".to_string())
        );
    }

    #[test]
    fn python_arg_types_are_checked() {
        let e = python_job(
            "m.f",
            &PythonArgs {
                args: Some(r#"{"a":1}"#),
                ..Default::default()
            },
        )
        .unwrap_err();
        assert!(e.0.contains("--args") && e.0.contains("list"), "{e}");
        let e = python_job(
            "m.f",
            &PythonArgs {
                kwargs: Some("[1]"),
                ..Default::default()
            },
        )
        .unwrap_err();
        assert!(e.0.contains("--kwargs") && e.0.contains("object"), "{e}");
        let e = python_job(
            "m.f",
            &PythonArgs {
                args: Some("[1,"),
                ..Default::default()
            },
        )
        .unwrap_err();
        assert!(e.0.contains("not valid JSON"), "{e}");
        let e = python_job(
            "m.f",
            &PythonArgs {
                class_args: Some("[1]"),
                ..Default::default()
            },
        )
        .unwrap_err();
        assert!(e.0.contains("Class.method"), "{e}");
    }

    #[test]
    fn call_payload() {
        let job = call_job("echo", Some(r#"{"a": [1, 2]}"#)).unwrap();
        assert_eq!(
            text(&job),
            r#"["call",{"handler":"echo","args":{"a":[1,2]}}]"#
        );
        assert_eq!(
            text(&call_job("noop", None).unwrap()),
            r#"["call",{"handler":"noop","args":null}]"#
        );
        assert!(call_job("echo", Some("nope")).is_err());
        assert!(call_job(" ", None).is_err());
    }

    #[test]
    fn shell_payload() {
        let job = shell_job(
            &["sh".into(), "-c".into(), "echo $X".into()],
            Some("in"),
            &["X=1".into(), "Y=a=b".into()],
            Some("/tmp"),
        )
        .unwrap();
        assert_eq!(
            text(&job),
            r#"["shell",{"argv":["sh","-c","echo $X"],"stdin":"in","env":{"X":"1","Y":"a=b"},"cwd":"/tmp"}]"#
        );
        assert_eq!(
            text(&shell_job(&["true".into()], None, &[], None).unwrap()),
            r#"["shell",{"argv":["true"]}]"#
        );
        assert!(shell_job(&[], None, &[], None).is_err());
        assert!(shell_job(&["x".into()], None, &["NOEQ".into()], None).is_err());
        assert!(shell_job(&["x".into()], None, &["=v".into()], None).is_err());
    }

    #[test]
    fn every_built_payload_parses_as_a_job() {
        let jobs = [
            python_job("m.f", &PythonArgs::default()).unwrap(),
            call_job("echo", Some("1")).unwrap(),
            shell_job(&["true".into()], Some(""), &[], None).unwrap(),
        ];
        for j in jobs {
            assert_eq!(Job::parse(&j.to_message()).unwrap(), j);
        }
    }

    #[test]
    fn message_json_is_validated() {
        assert_eq!(
            validate_message("  [\"call\", {\"handler\": \"noop\"}]\n").unwrap(),
            b"[\"call\", {\"handler\": \"noop\"}]".to_vec()
        );
        assert!(validate_message("{")
            .unwrap_err()
            .0
            .contains("not valid JSON"));
        assert!(validate_message("hello").is_err());
        assert!(validate_message("   ").is_err());
    }

    #[test]
    fn headers_are_built_in_order_without_duplicates() {
        let h = build_headers(
            &["guarantee,retry-count:3".into(), "timeout:10".into()],
            true,
        )
        .unwrap();
        assert_eq!(
            h.encode(),
            "reply-requested,guarantee,retry-count:3,timeout:10"
        );
        let h = build_headers(&["reply-requested".into()], true).unwrap();
        assert_eq!(h.encode(), "reply-requested");
        assert_eq!(build_headers(&[], false).unwrap().encode(), "");
        assert!(build_headers(&["retry-count:x".into()], false).is_err());
        assert_eq!(
            build_headers(&["x-custom".into()], false).unwrap().encode(),
            "x-custom"
        );
    }

    #[test]
    fn python_json_matches_pythons_json_dumps() {
        // expected: python3 -c 'import json; print(json.dumps(v))' for the
        // same value
        let input = r#"["run", {"callable":"f","path":"m","args":[1, 1.0, -0.0, 1e16, 1e15, 0.0001, 1e-05, 1.5e-07, 123.456, -2.5e300, 9223372036854775807, 18446744073709551615, -9223372036854775808, 0.30000000000000004, 5e-324, 1.7976931348623157e308],"kwargs":{"z":"é ü € 😀 \u007f \u0001 \" \\ \n\t\b\f\r /","a":null,"b":true,"c":false,"d":[],"e":{}}}]"#;
        let expected = r#"["run", {"callable": "f", "path": "m", "args": [1, 1.0, -0.0, 1e+16, 1000000000000000.0, 0.0001, 1e-05, 1.5e-07, 123.456, -2.5e+300, 9223372036854775807, 18446744073709551615, -9223372036854775808, 0.30000000000000004, 5e-324, 1.7976931348623157e+308], "kwargs": {"z": "\u00e9 \u00fc \u20ac \ud83d\ude00 \u007f \u0001 \" \\ \n\t\b\f\r /", "a": null, "b": true, "c": false, "d": [], "e": {}}}]"#;
        let v: Value = serde_json::from_str(input).unwrap();
        assert_eq!(python_json(&v), expected);
        // and it is JSON that reads back as the same value
        assert_eq!(serde_json::from_str::<Value>(expected).unwrap(), v);
    }

    #[test]
    fn python_float_repr_cases() {
        for (f, want) in [
            (0.0, "0.0"),
            (2.0, "2.0"),
            (-1.5, "-1.5"),
            (0.001, "0.001"),
            (1e22, "1e+22"),
            (1.25e-10, "1.25e-10"),
            (9999999999999998.0, "9999999999999998.0"),
            (f64::INFINITY, "Infinity"),
        ] {
            assert_eq!(python_float_repr(f), want, "{f}");
        }
    }

    #[test]
    fn schedule_messages_are_python_style() {
        let job = python_job(
            "pyemq_jobs.noop",
            &PythonArgs {
                kwargs: Some(r#"{"b": 1, "a": [2, "x"]}"#),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(schedule_message(&job)).unwrap(),
            r#"["run", {"callable": "noop", "path": "pyemq_jobs", "args": [], "kwargs": {"b": 1, "a": [2, "x"]}, "class_args": [], "class_kwargs": {}}]"#
        );
        let job = call_job("echo", None).unwrap();
        assert_eq!(
            schedule_message(&job),
            br#"["call", {"handler": "echo", "args": null}]"#.to_vec()
        );
    }

    #[test]
    fn schedule_headers_default_to_guarantee_like_0_3_13() {
        assert_eq!(
            build_schedule_headers(&[], false, None).unwrap().encode(),
            "guarantee"
        );
        assert_eq!(
            build_schedule_headers(&[], true, Some(4)).unwrap().encode(),
            "nohaste,run_count:4"
        );
        assert_eq!(
            build_schedule_headers(&["reply-requested".into()], false, None)
                .unwrap()
                .encode(),
            "reply-requested"
        );
        assert!(build_schedule_headers(&["timeout:x".into()], false, None).is_err());
    }
}
