//! A minimal LSP client over the server's stdio, for the integration test and the keystroke
//! benchmark: frames requests and notifications, reads every message the server sends on a
//! thread, and waits for the ones a test asks about.
#![allow(dead_code)]

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

pub struct Client {
    child: Child,
    stdin: Option<ChildStdin>,
    incoming: Receiver<Value>,
    next_id: i64,
    /// Notifications received while waiting for something else, oldest first.
    pub notifications: Vec<Value>,
}

impl Client {
    /// Starts `bin` as cargo would for `cargo idem-lint lsp ARGS`.
    pub fn start(bin: &str, args: &[&str], cwd: &Path) -> Client {
        Client::start_with(bin, &[], args, cwd)
    }

    /// Starts `bin` as cargo would for `cargo idem-lint FLAGS lsp ARGS` (the time budget and
    /// the levels go before `lsp`).
    pub fn start_with(bin: &str, flags: &[&str], args: &[&str], cwd: &Path) -> Client {
        let mut child = Command::new(bin)
            .arg("idem-lint")
            .args(flags)
            .arg("lsp")
            .args(args)
            .current_dir(cwd)
            // Where the server writes the lint pages its diagnostics link to; not the
            // user's own cache.
            .env(
                "XDG_CACHE_HOME",
                std::env::temp_dir().join("idem-lint-lsp-tests"),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the language server");
        let stdout = child.stdout.take().expect("stdout");
        let stdin = child.stdin.take();
        let (tx, incoming) = channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            while let Some(body) = read_frame(&mut r) {
                let v: Value = serde_json::from_slice(&body).expect("the server sends JSON");
                if tx.send(v).is_err() {
                    return;
                }
            }
        });
        Client {
            child,
            stdin,
            incoming,
            next_id: 1,
            notifications: Vec::new(),
        }
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).expect("write to the server");
        stdin.flush().expect("flush");
    }

    fn send(&mut self, msg: &Value) {
        let text = msg.to_string();
        let frame = format!("Content-Length: {}\r\n\r\n{text}", text.len());
        self.send_raw(frame.as_bytes());
    }

    pub fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Sends a request and returns the whole response (`result` or `error`).
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.wait_message(|m| m["id"] == id && m.get("method").is_none())
    }

    /// The next message (response or notification) matching `pred`, within 60 s; earlier
    /// notifications are kept in [`Client::notifications`].
    pub fn wait_message(&mut self, pred: impl Fn(&Value) -> bool) -> Value {
        self.try_wait_message(pred, Duration::from_secs(60))
            .expect("the awaited message did not come within 60 s")
    }

    pub fn try_wait_message(
        &mut self,
        pred: impl Fn(&Value) -> bool,
        timeout: Duration,
    ) -> Option<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.incoming.recv_timeout(left) {
                Ok(m) if pred(&m) => return Some(m),
                Ok(m) => {
                    if m.get("method").is_some() {
                        self.notifications.push(m);
                    }
                }
                Err(RecvTimeoutError::Timeout) => return None,
                Err(RecvTimeoutError::Disconnected) => panic!("the server closed its stdout"),
            }
        }
    }

    /// The next `publishDiagnostics` for `uri`, taken from those already received first.
    pub fn diagnostics_for(&mut self, uri: &str) -> Value {
        self.diagnostics_where(uri, |_| true)
    }

    /// The first `publishDiagnostics` for `uri` whose params satisfy `pred`; earlier ones
    /// for `uri` are dropped.
    pub fn diagnostics_where(&mut self, uri: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let is_for = |m: &Value| {
            m["method"] == "textDocument/publishDiagnostics" && m["params"]["uri"] == uri
        };
        while let Some(i) = self.notifications.iter().position(is_for) {
            let params = self.notifications.remove(i)["params"].clone();
            if pred(&params) {
                return params;
            }
        }
        self.wait_message(|m| is_for(m) && pred(&m["params"]))["params"].clone()
    }

    /// Drops every notification received so far.
    pub fn forget(&mut self) {
        while let Ok(m) = self.incoming.try_recv() {
            if m.get("method").is_some() {
                self.notifications.push(m);
            }
        }
        self.notifications.clear();
    }

    /// `shutdown`, `exit`, and the server's exit status.
    pub fn shutdown(mut self) -> ExitStatus {
        let answer = self.request("shutdown", Value::Null);
        assert!(answer.get("error").is_none(), "shutdown failed: {answer}");
        self.notify("exit", Value::Null);
        drop(self.stdin.take());
        wait_with_timeout(&mut self.child, Duration::from_secs(30))
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        // A failed test must not leave the server running.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait_with_timeout(child: &mut Child, timeout: Duration) -> ExitStatus {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().expect("wait for the server") {
            return status;
        }
        assert!(Instant::now() < deadline, "the server did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn read_frame(r: &mut impl BufRead) -> Option<Vec<u8>> {
    let mut length = None;
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some(v) = line.strip_prefix("Content-Length:") {
            length = v.trim().parse::<usize>().ok();
        }
    }
    let mut body = vec![0; length?];
    r.read_exact(&mut body).ok()?;
    Some(body)
}

/// `file://` URI of an absolute path (ASCII paths only: what the tests use).
pub fn uri(path: &Path) -> String {
    format!("file://{}", path.display())
}

/// The 0-based line and the UTF-16 column of the first occurrence of `needle` in `text`.
pub fn position_of(text: &str, needle: &str) -> (u32, u32) {
    let at = text.find(needle).expect("needle in the text");
    let before = &text[..at];
    let line = before.matches('\n').count();
    let column = before
        .rsplit('\n')
        .next()
        .unwrap_or("")
        .encode_utf16()
        .count();
    (line as u32, column as u32)
}

/// A fresh copy of `fixtures/lsp` (edits and config changes stay in the copy), canonical.
pub fn fixture_copy() -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/lsp");
    for rel in ["Cargo.toml", "src/lib.rs", "src/transcode.rs"] {
        let to = tmp.path().join(rel);
        std::fs::create_dir_all(to.parent().expect("parent")).expect("mkdir");
        std::fs::copy(from.join(rel), &to).expect("copy the fixture");
    }
    let root = tmp.path().canonicalize().expect("canonical tempdir");
    (tmp, root)
}

/// `initialize` with `folders` as workspace folders and `general` as the client's general
/// capabilities, then `initialized`; returns the `initialize` result.
pub fn initialize(client: &mut Client, folders: &[&Path], general: Value) -> Value {
    let folders: Vec<Value> = folders
        .iter()
        .map(|f| json!({"uri": uri(f), "name": f.file_name().map(|n| n.to_string_lossy().into_owned())}))
        .collect();
    let answer = client.request(
        "initialize",
        json!({
            "processId": null,
            "rootUri": null,
            "capabilities": {"general": general},
            "workspaceFolders": folders,
        }),
    );
    client.notify("initialized", json!({}));
    answer["result"].clone()
}

/// `didOpen` of `path` with `text`, version 1.
pub fn open(client: &mut Client, path: &Path, text: &str) {
    client.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": uri(path), "languageId": "rust", "version": 1, "text": text}}),
    );
}

/// The `code` of every diagnostic of a `publishDiagnostics`, in order.
pub fn codes(published: &Value) -> Vec<String> {
    published["diagnostics"]
        .as_array()
        .expect("diagnostics")
        .iter()
        .map(|d| d["code"].as_str().unwrap_or("").to_string())
        .collect()
}
