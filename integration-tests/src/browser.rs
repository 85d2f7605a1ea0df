//! A headless Chromium driven over the DevTools protocol (CDP), for tests
//! that load the dashboard in a real browser.
//!
//! Chromium (Debian's `chromium` package, or `$EMQ_CHROMIUM`) is started
//! with `--remote-debugging-port=0`; the port it chose is read from
//! `DevToolsActivePort` in its profile directory. One websocket to the
//! browser target carries everything: a page target is created and
//! attached in flat mode, and each command names its session. Commands are
//! synchronous (send, then read until the answer with the same id; events
//! are skipped), with a read timeout so a stuck browser fails the test.
//!
//! Why a hand-made client over `tungstenite`: the commands a test needs —
//! navigate, evaluate, capture a screenshot — are five methods, and the
//! crates that wrap CDP either download their own browser build or pull in
//! an async runtime and a generated protocol of several hundred thousand
//! lines; with Debian's chromium and a blocking websocket the whole client
//! is this file.
//!
//! The browser is a [`Proc`]: its process group is killed when the
//! [`Browser`] is dropped.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{json, Value};
use tungstenite::{Message, WebSocket};

use crate::process::{scratch_dir, Proc, Spawn};

/// Viewport of every page (the README screenshot's size).
pub const VIEWPORT: (u32, u32) = (1400, 1000);
/// How long one CDP command may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// The Chromium binary: `$EMQ_CHROMIUM`, else the first of `chromium`,
/// `chromium-browser`, `google-chrome` on `PATH`.
pub fn find_chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("EMQ_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        for dir in std::env::split_paths(&path) {
            let p = dir.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

/// A headless browser with one page.
pub struct Browser {
    ws: WebSocket<TcpStream>,
    session: String,
    next_id: u64,
    // Dropped last: the websocket closes before the process is stopped.
    _proc: Proc,
}

impl Browser {
    /// Start Chromium at `binary` and open a blank page.
    pub fn launch(binary: &Path) -> Result<Browser, String> {
        let profile = scratch_dir("chromium-profile");
        let mut proc = Spawn::new("chromium", binary)
            .args([
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--disable-extensions",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                "--no-default-browser-check",
                "--mute-audio",
                "--hide-scrollbars",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
                &format!("--window-size={},{}", VIEWPORT.0, VIEWPORT.1),
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg("about:blank")
            .spawn();
        let port_file = profile.join("DevToolsActivePort");
        let deadline = Instant::now() + Duration::from_secs(30);
        let (port, path) = loop {
            if let Ok(text) = std::fs::read_to_string(&port_file) {
                let mut lines = text.lines();
                if let (Some(port), Some(path)) = (lines.next(), lines.next()) {
                    if let Ok(port) = port.trim().parse::<u16>() {
                        break (port, path.trim().to_string());
                    }
                }
            }
            if !proc.is_running() {
                return Err(format!(
                    "chromium exited before opening its DevTools port:\n{}",
                    proc.tail(20)
                ));
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "chromium wrote no {} within 30 s:\n{}",
                    port_file.display(),
                    proc.tail(20)
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let stream = TcpStream::connect(("127.0.0.1", port))
            .map_err(|e| format!("DevTools port {port}: {e}"))?;
        stream
            .set_read_timeout(Some(COMMAND_TIMEOUT))
            .map_err(|e| e.to_string())?;
        let url = format!("ws://127.0.0.1:{port}{path}");
        let (ws, _) = tungstenite::client(url.as_str(), stream)
            .map_err(|e| format!("DevTools websocket {url}: {e}"))?;
        let mut b = Browser {
            ws,
            session: String::new(),
            next_id: 0,
            _proc: proc,
        };
        let target = b.browser_call("Target.createTarget", json!({"url": "about:blank"}))?;
        let target_id = target["targetId"].as_str().unwrap_or_default().to_string();
        let attached = b.browser_call(
            "Target.attachToTarget",
            json!({"targetId": target_id, "flatten": true}),
        )?;
        b.session = attached["sessionId"]
            .as_str()
            .ok_or("no sessionId from Target.attachToTarget")?
            .to_string();
        b.call("Page.enable", json!({}))?;
        b.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": VIEWPORT.0, "height": VIEWPORT.1, "deviceScaleFactor": 1, "mobile": false}),
        )?;
        Ok(b)
    }

    fn send(
        &mut self,
        session: Option<String>,
        method: &str,
        params: Value,
    ) -> Result<Value, String> {
        self.next_id += 1;
        let id = self.next_id;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if let Some(s) = session {
            msg["sessionId"] = s.into();
        }
        self.ws
            .send(Message::text(msg.to_string()))
            .map_err(|e| format!("{method}: send: {e}"))?;
        let deadline = Instant::now() + COMMAND_TIMEOUT;
        loop {
            if Instant::now() >= deadline {
                return Err(format!("{method}: no answer within {COMMAND_TIMEOUT:?}"));
            }
            let m = self.ws.read().map_err(|e| format!("{method}: read: {e}"))?;
            let Message::Text(text) = m else { continue };
            let v: Value = serde_json::from_str(text.as_str()).map_err(|e| e.to_string())?;
            if v["id"].as_u64() != Some(id) {
                continue; // an event, or an answer to nobody
            }
            if let Some(e) = v.get("error") {
                return Err(format!("{method}: {e}"));
            }
            return Ok(v["result"].clone());
        }
    }

    fn browser_call(&mut self, method: &str, params: Value) -> Result<Value, String> {
        self.send(None, method, params)
    }

    /// One CDP command on the page.
    pub fn call(&mut self, method: &str, params: Value) -> Result<Value, String> {
        let s = self.session.clone();
        self.send(Some(s), method, params)
    }

    /// Load `url` (returns once navigation is committed; wait for content
    /// with [`Browser::wait_for`]).
    pub fn goto(&mut self, url: &str) -> Result<(), String> {
        let r = self.call("Page.navigate", json!({"url": url}))?;
        match r.get("errorText").and_then(Value::as_str) {
            Some(e) if !e.is_empty() => Err(format!("navigate {url}: {e}")),
            _ => Ok(()),
        }
    }

    /// Evaluate `js` in the page (promises awaited); its value as JSON.
    pub fn eval(&mut self, js: &str) -> Result<Value, String> {
        let r = self.call(
            "Runtime.evaluate",
            json!({"expression": js, "returnByValue": true, "awaitPromise": true}),
        )?;
        if let Some(e) = r.get("exceptionDetails") {
            return Err(format!(
                "{js}: {}",
                e["exception"]["description"]
                    .as_str()
                    .unwrap_or(&e.to_string())
            ));
        }
        Ok(r["result"]["value"].clone())
    }

    /// Evaluate `js` every 100 ms until it gives a value other than
    /// `null`, `false`, `""` or `0`, and return it; an error naming `what`
    /// (with the page's text) after `timeout`.
    pub fn wait_for(&mut self, what: &str, js: &str, timeout: Duration) -> Result<Value, String> {
        let deadline = Instant::now() + timeout;
        let mut last_err = String::new();
        loop {
            match self.eval(js) {
                Ok(v) if truthy(&v) => return Ok(v),
                Ok(_) => {}
                Err(e) => last_err = e,
            }
            if Instant::now() >= deadline {
                let page = self
                    .eval("document.body ? document.body.innerText.slice(0, 2000) : ''")
                    .unwrap_or_default();
                return Err(format!(
                    "timed out after {timeout:?} waiting for {what} ({js}){}\npage text: {}",
                    if last_err.is_empty() {
                        String::new()
                    } else {
                        format!("; last error: {last_err}")
                    },
                    page.as_str().unwrap_or_default()
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Click the element `selector` matches (an error if none does).
    pub fn click(&mut self, selector: &str) -> Result<(), String> {
        let js = format!(
            "(() => {{ const e = document.querySelector({s}); if (!e) return 'missing'; \
             if (e.disabled) return 'disabled'; e.click(); return 'ok'; }})()",
            s = Value::from(selector)
        );
        match self.eval(&js)?.as_str() {
            Some("ok") => Ok(()),
            other => Err(format!("click {selector}: {other:?}")),
        }
    }

    /// Set the value of the input `selector` matches, as typing would.
    pub fn fill(&mut self, selector: &str, text: &str) -> Result<(), String> {
        let js = format!(
            "(() => {{ const e = document.querySelector({s}); if (!e) return false; \
             e.focus(); e.value = {t}; e.dispatchEvent(new Event('input', {{bubbles: true}})); \
             return true; }})()",
            s = Value::from(selector),
            t = Value::from(text)
        );
        if self.eval(&js)? == Value::Bool(true) {
            Ok(())
        } else {
            Err(format!("fill {selector}: no such element"))
        }
    }

    /// Emulate a viewport of `width` x `height` CSS pixels; `mobile`: as a
    /// phone shows a page (the page's meta viewport applies).
    pub fn set_viewport(&mut self, width: u32, height: u32, mobile: bool) -> Result<(), String> {
        self.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile}),
        )?;
        Ok(())
    }

    /// A PNG of the viewport, written to `path` (directories created).
    pub fn screenshot(&mut self, path: &Path) -> Result<(), String> {
        let r = self.call("Page.captureScreenshot", json!({"format": "png"}))?;
        let data = base64::engine::general_purpose::STANDARD
            .decode(r["data"].as_str().unwrap_or_default())
            .map_err(|e| format!("screenshot data: {e}"))?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        }
        std::fs::write(path, data).map_err(|e| format!("{}: {e}", path.display()))
    }
}

fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::String(s) => !s.is_empty(),
        Value::Number(n) => n.as_f64() != Some(0.0),
        _ => true,
    }
}
