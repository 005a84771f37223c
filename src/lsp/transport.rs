//! The stdio transport: `Content-Length` framed JSON-RPC messages in both directions.
//!
//! lsp-server's own stdio transport ends the connection at the first malformed message; an
//! editor that sends one bad frame would lose its linter for the session. This reader skips
//! what it cannot read instead: a frame without a length or with an absurd one is dropped, a
//! body that is not JSON-RPC is answered with a JSON-RPC error (`id: null`, as the spec says
//! for a message whose id cannot be read) and reading goes on.

use crate::emit::json::safe_text;
use crossbeam_channel::{bounded, unbounded, Receiver, Sender};
use lsp_server::{Connection, Message};
use serde_json::{json, Value};
use std::io::{self, BufRead, Read, Write};
use std::thread::JoinHandle;

/// Largest body read. A source file at the read cap (8 MiB by default, larger with
/// `--max-file-bytes`) escaped in JSON fits.
const MAX_BODY_BYTES: usize = 512 << 20;
/// Longest header line kept; longer ones are garbage.
const MAX_HEADER_LINE: u64 = 8 << 10;

/// The JSON-RPC codes for a body that is not JSON and for JSON that is not a message.
const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;

/// The writer thread; join it after dropping the connection so every queued message leaves.
pub struct Writer(JoinHandle<()>);

impl Writer {
    pub fn join(self) {
        let _ = self.0.join();
    }
}

/// A connection over stdin/stdout.
pub fn stdio() -> io::Result<(Connection, Writer)> {
    connect(io::stdin(), io::stdout())
}

/// A connection reading frames from `input` and writing them to `output`, each on its own
/// thread.
pub fn connect(
    input: impl Read + Send + 'static,
    output: impl Write + Send + 'static,
) -> io::Result<(Connection, Writer)> {
    let (to_server, from_client) = bounded::<Message>(0);
    let (to_client, outgoing) = unbounded::<Message>();
    let (raw_tx, raw_rx) = unbounded::<Value>();
    let writer = std::thread::Builder::new()
        .name("idem-lint-lsp-writer".into())
        .spawn(move || write_loop(output, outgoing, raw_rx))?;
    std::thread::Builder::new()
        .name("idem-lint-lsp-reader".into())
        .spawn(move || read_loop(io::BufReader::new(input), to_server, raw_tx))?;
    let conn = Connection {
        sender: to_client,
        receiver: from_client,
    };
    Ok((conn, Writer(writer)))
}

fn write_loop(mut out: impl Write, messages: Receiver<Message>, raw: Receiver<Value>) {
    loop {
        let written = crossbeam_channel::select! {
            recv(messages) -> m => match m {
                Ok(m) => write_message(&mut out, &m),
                // The server is done: everything it sent has been written.
                Err(_) => return,
            },
            recv(raw) -> v => match v {
                Ok(v) => write_raw(&mut out, &v),
                Err(_) => continue,
            },
        };
        if written.is_err() {
            // The client is gone; nothing more can be told to it.
            return;
        }
    }
}

/// `m` framed as `lsp_server` frames it, its text with no raw control or bidi characters
/// ([`safe_text`]: a diagnostic on a file named with them reaches the editor, and any log of
/// the session, escaped).
fn write_message(out: &mut impl Write, m: &Message) -> io::Result<()> {
    let mut framed = Vec::new();
    m.write(&mut framed)?;
    // The header ends at the first blank line; the body is JSON, so UTF-8 with no raw CR.
    let body = framed
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(&framed[..], |end| &framed[end + 4..]);
    write_text(out, String::from_utf8_lossy(body).into_owned())
}

fn write_raw(out: &mut impl Write, v: &Value) -> io::Result<()> {
    write_text(out, v.to_string())
}

fn write_text(out: &mut impl Write, json: String) -> io::Result<()> {
    let text = safe_text(json);
    write!(out, "Content-Length: {}\r\n\r\n{text}", text.len())?;
    out.flush()
}

/// One frame read from the client.
#[derive(Debug, PartialEq)]
enum Frame {
    Body(Vec<u8>),
    /// A frame that was read past and dropped, with why.
    Skipped(String),
    Eof,
}

fn read_loop(mut input: impl BufRead, server: Sender<Message>, raw: Sender<Value>) {
    loop {
        let frame = match read_frame(&mut input) {
            Ok(f) => f,
            Err(e) => {
                crate::stderr_line(&format!("idem-lint lsp: could not read stdin: {e}"));
                return;
            }
        };
        match frame {
            Frame::Eof => return,
            Frame::Skipped(why) => {
                crate::stderr_line(&format!("idem-lint lsp: skipped a message: {why}"));
            }
            Frame::Body(body) => match parse_message(&body) {
                Ok(msg) => {
                    let exit = matches!(&msg, Message::Notification(n) if n.method == "exit");
                    if server.send(msg).is_err() || exit {
                        return;
                    }
                }
                Err(error) => {
                    crate::stderr_line(&format!(
                        "idem-lint lsp: malformed message: {}",
                        error["error"]["message"]
                    ));
                    let _ = raw.send(error);
                }
            },
        }
    }
}

/// Reads the next frame: header lines up to an empty one, then `Content-Length` bytes.
fn read_frame(input: &mut impl BufRead) -> io::Result<Frame> {
    let mut length: Option<Result<usize, String>> = None;
    let mut any_header = false;
    loop {
        let mut line = Vec::new();
        let n = input
            .by_ref()
            .take(MAX_HEADER_LINE)
            .read_until(b'\n', &mut line)?;
        if n == 0 {
            return Ok(Frame::Eof);
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\r', '\n']);
        if text.is_empty() {
            if any_header {
                break;
            }
            // Blank lines between frames are harmless.
            continue;
        }
        any_header = true;
        if let Some((name, value)) = text.split_once(':') {
            if name.trim().eq_ignore_ascii_case("content-length") {
                let value = value.trim();
                length = Some(
                    value
                        .parse::<usize>()
                        .map_err(|_| format!("invalid Content-Length `{value}`")),
                );
            }
        }
    }
    match length {
        None => Ok(Frame::Skipped("a header without Content-Length".into())),
        Some(Err(why)) => Ok(Frame::Skipped(why)),
        Some(Ok(len)) if len > MAX_BODY_BYTES => {
            // Read past it so the next frame starts where it should.
            io::copy(&mut input.by_ref().take(len as u64), &mut io::sink())?;
            Ok(Frame::Skipped(format!(
                "a body of {len} bytes, over the limit of {MAX_BODY_BYTES}"
            )))
        }
        Some(Ok(len)) => {
            let mut body = Vec::with_capacity(len.min(1 << 20));
            input.by_ref().take(len as u64).read_to_end(&mut body)?;
            if body.len() < len {
                return Ok(Frame::Eof);
            }
            Ok(Frame::Body(body))
        }
    }
}

/// The message in `body`, or the JSON-RPC error response to send back.
fn parse_message(body: &[u8]) -> Result<Message, Value> {
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        json!({"jsonrpc": "2.0", "id": null,
               "error": {"code": PARSE_ERROR, "message": format!("not JSON: {e}")}})
    })?;
    // A request whose params do not fit still has an id the answer can name.
    let id = value
        .get("id")
        .filter(|id| id.is_string() || id.is_number())
        .cloned()
        .unwrap_or(Value::Null);
    serde_json::from_value::<Message>(value).map_err(|e| {
        json!({"jsonrpc": "2.0", "id": id,
               "error": {"code": INVALID_REQUEST, "message": format!("not a JSON-RPC message: {e}")}})
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(input: &[u8]) -> Vec<Frame> {
        let mut r = io::BufReader::new(input);
        let mut out = Vec::new();
        loop {
            let f = read_frame(&mut r).expect("read");
            if f == Frame::Eof {
                return out;
            }
            out.push(f);
        }
    }

    #[test]
    fn bad_frames_are_skipped_and_reading_goes_on() {
        let input =
            b"X-Junk: 1\r\n\r\nContent-Length: abc\r\n\r\nContent-Length: 2\r\n\r\n{}\nContent-Length: 9\n\n[1,2,3,4]";
        let got = frames(input);
        assert_eq!(
            got,
            vec![
                Frame::Skipped("a header without Content-Length".into()),
                Frame::Skipped("invalid Content-Length `abc`".into()),
                Frame::Body(b"{}".to_vec()),
                Frame::Body(b"[1,2,3,4]".to_vec()),
            ]
        );
        assert_eq!(frames(b"Content-Length: 10\r\n\r\n{\"a\""), vec![]);
    }

    #[test]
    fn malformed_bodies_get_json_rpc_errors() {
        let e = parse_message(b"{not json").expect_err("not json");
        assert_eq!(e["error"]["code"], PARSE_ERROR);
        assert_eq!(e["id"], Value::Null);
        let e = parse_message(br#"{"jsonrpc":"2.0","id":7,"method":5}"#).expect_err("shape");
        assert_eq!(e["error"]["code"], INVALID_REQUEST);
        assert_eq!(e["id"], 7);
        assert!(parse_message(br#"{"jsonrpc":"2.0","method":"exit"}"#).is_ok());
    }

    #[test]
    fn written_messages_carry_no_raw_controls_or_bidi() {
        let name = "/w/a\u{202e}sr.rs\u{7f}\u{9b}[2J\u{2066}";
        let m: Message = lsp_server::Notification::new(
            "textDocument/publishDiagnostics".into(),
            json!({"uri": format!("file://{name}"), "diagnostics": [{"message": name}]}),
        )
        .into();
        let mut out = Vec::new();
        write_message(&mut out, &m).expect("written");
        let text = String::from_utf8(out).expect("UTF-8");
        let (header, body) = text.split_once("\r\n\r\n").expect("framed");
        assert_eq!(header, format!("Content-Length: {}", body.len()));
        for c in ['\u{202e}', '\u{7f}', '\u{9b}', '\u{2066}'] {
            assert!(!body.contains(c), "{c:?} raw in {body}");
        }
        // The same message to the client.
        let back: Value = serde_json::from_str(body).expect("JSON");
        assert_eq!(back["params"]["diagnostics"][0]["message"], name);
        assert_eq!(back["jsonrpc"], "2.0");
    }
}
