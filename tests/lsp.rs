//! The language server spoken to over stdio as an editor would: the installed binary started
//! as cargo starts it (`cargo-idem-lint idem-lint lsp`), on a copy of `fixtures/lsp`.

mod common;
#[path = "common/lsp.rs"]
mod lsp;

use common::BIN;
use lsp::{codes, fixture_copy, initialize, open, position_of, uri, Client};
use serde_json::{json, Value};
use std::time::Duration;

/// The server of [`common::bin`] (`IDEM_LINT_TEST_BIN` runs these tests on another build).
fn start(root: &std::path::Path) -> Client {
    Client::start(&common::bin(), &["--debounce-ms", "20"], root)
}

#[test]
fn diagnostics_follow_unsaved_edits_with_hover_and_quick_fixes() {
    let (_tmp, root) = fixture_copy();
    let lib = root.join("src/lib.rs");
    let text = std::fs::read_to_string(&lib).expect("read");
    let mut c = start(&root);
    let caps = initialize(&mut c, &[&root], json!({}))["capabilities"].clone();
    assert_eq!(caps["positionEncoding"], "utf-16", "{caps}");
    assert_eq!(caps["hoverProvider"], true);
    assert_eq!(caps["workspace"]["workspaceFolders"]["supported"], true);

    // On open: both findings of the file, one with the secondary label as related info.
    open(&mut c, &lib, &text);
    let first = c.diagnostics_for(&uri(&lib));
    assert_eq!(
        codes(&first),
        [
            "idem::nondeterministic_key",
            "idem::missing_idempotency_token"
        ],
        "{first}"
    );
    assert_eq!(first["version"], 1);
    let key = &first["diagnostics"][0];
    assert_eq!(key["source"], "idem-lint");
    assert_eq!(key["severity"], 2, "warn is a warning");
    let (line, _) = position_of(&text, ".message_deduplication_id(id)");
    assert_eq!(key["range"]["start"]["line"], line);
    let related = key["relatedInformation"].as_array().expect("related info");
    let (uuid_line, _) = position_of(&text, "Uuid::new_v4()");
    assert!(
        related
            .iter()
            .any(|r| r["location"]["range"]["start"]["line"] == uuid_line
                && r["location"]["uri"] == uri(&lib)),
        "the key's origin is related information: {key}"
    );
    // The package names no repository, so the link is the lint's page written locally.
    let href = key["codeDescription"]["href"].as_str().expect("a link");
    let page = href.strip_prefix("file://").expect("a file URI");
    let page = std::fs::read_to_string(page).expect("the linked page exists");
    assert!(
        page.starts_with("# idem::nondeterministic_key") && page.contains("### What it does"),
        "{page}"
    );
    // Every file of the package with findings is published, not only the open one.
    let other = c.diagnostics_for(&uri(&root.join("src/transcode.rs")));
    assert_eq!(codes(&other), ["idem::missing_idempotency_token"]);
    assert_eq!(other["version"], Value::Null, "not open");

    // An unsaved edit: the key now comes from the message, so its finding goes away.
    let (line, col) = position_of(&text, "Uuid::new_v4().to_string()");
    let edit = json!({
        "range": {"start": {"line": line, "character": col},
                  "end": {"line": line, "character": col + "Uuid::new_v4().to_string()".len() as u32}},
        "text": "order_id.to_string()",
    });
    c.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": uri(&lib), "version": 2}, "contentChanges": [edit]}),
    );
    let second = c.diagnostics_for(&uri(&lib));
    assert_eq!(second["version"], 2);
    assert_eq!(
        codes(&second),
        ["idem::missing_idempotency_token"],
        "{second}"
    );
    assert_eq!(
        std::fs::read_to_string(&lib).expect("read"),
        text,
        "the file on disk is untouched"
    );

    // Hover on the remaining finding: the lint's `--explain` text.
    let at = second["diagnostics"][0]["range"]["start"].clone();
    let hover = c.request(
        "textDocument/hover",
        json!({"textDocument": {"uri": uri(&lib)}, "position": at}),
    );
    let shown = hover["result"]["contents"]["value"]
        .as_str()
        .expect("markdown");
    assert!(
        shown.contains("# idem::missing_idempotency_token"),
        "{shown}"
    );
    assert!(shown.contains("### What it does"), "{shown}");
    let nothing = c.request(
        "textDocument/hover",
        json!({"textDocument": {"uri": uri(&lib)}, "position": {"line": 0, "character": 0}}),
    );
    assert_eq!(nothing["result"], Value::Null);

    // A quick fix for the suggestion, inserting the token before `.send()`.
    let range = second["diagnostics"][0]["range"].clone();
    let actions = c.request(
        "textDocument/codeAction",
        json!({"textDocument": {"uri": uri(&lib)}, "range": range,
               "context": {"diagnostics": [second["diagnostics"][0]]}}),
    );
    let action = &actions["result"][0];
    assert_eq!(action["kind"], "quickfix", "{actions}");
    assert!(
        action["title"]
            .as_str()
            .is_some_and(|t| t.contains("client_request_token")),
        "{action}"
    );
    let edits = action["edit"]["changes"][uri(&lib)]
        .as_array()
        .expect("edits");
    // On a line of its own in the one-call-per-line chain, as `--fix` lays it out.
    assert!(
        edits[0]["newText"]
            .as_str()
            .is_some_and(|t| t.starts_with("\n        .client_request_token(")),
        "{edits:?}"
    );

    assert!(c.shutdown().success());
}

#[test]
fn a_garbage_buffer_and_malformed_messages_do_not_stop_the_server() {
    let (_tmp, root) = fixture_copy();
    let lib = root.join("src/lib.rs");
    let text = std::fs::read_to_string(&lib).expect("read");
    let mut c = start(&root);
    initialize(&mut c, &[&root], json!({}));
    open(&mut c, &lib, &text);
    c.diagnostics_for(&uri(&lib));

    // Garbage: unbalanced, NUL, astral characters, deep nesting.
    let garbage = format!("fn ((( \u{0} 😀 {{{{ ]]{}", "(".repeat(5000));
    c.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": uri(&lib), "version": 2},
               "contentChanges": [{"text": garbage}]}),
    );
    let broken = c.diagnostics_for(&uri(&lib));
    assert!(
        codes(&broken).contains(&"idem::parse_error".to_string()),
        "{broken}"
    );

    // Not JSON: an error answer with a null id, and the server reads on.
    c.send_raw(b"Content-Length: 9\r\n\r\n{garbage}");
    let err = c.wait_message(|m| m.get("error").is_some() && m["id"].is_null());
    assert_eq!(err["error"]["code"], -32700);
    // A frame without a length is skipped; invalid params get InvalidParams.
    c.send_raw(b"X-Nothing: 1\r\n\r\n");
    let bad = c.request("textDocument/hover", json!({"textDocument": 5}));
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    let unknown = c.request("textDocument/definition", json!({}));
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");
    // A change to a buffer never opened, a non-file URI: logged, not fatal.
    c.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": "untitled:x", "version": 1}, "contentChanges": []}),
    );

    // Back to the real text: the findings come back.
    c.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": uri(&lib), "version": 3},
               "contentChanges": [{"text": text}]}),
    );
    let healed = c.diagnostics_for(&uri(&lib));
    assert_eq!(healed["version"], 3);
    assert_eq!(codes(&healed).len(), 2, "{healed}");
    assert!(c.shutdown().success());
}

#[test]
fn utf8_positions_when_the_client_offers_them() {
    let (_tmp, root) = fixture_copy();
    let lib = root.join("src/lib.rs");
    // Non-ASCII before the finding on its line: 3 UTF-16 units, 6 bytes.
    let text = std::fs::read_to_string(&lib).expect("read").replace(
        ".message_deduplication_id(id)",
        "/*é😀*/.message_deduplication_id(id)",
    );
    let column = |general: Value| {
        let mut c = start(&root);
        let caps = initialize(&mut c, &[&root], general)["capabilities"].clone();
        open(&mut c, &lib, &text);
        let published = c.diagnostics_for(&uri(&lib));
        let key = published["diagnostics"]
            .as_array()
            .expect("diagnostics")
            .iter()
            .find(|d| d["code"] == "idem::nondeterministic_key")
            .cloned()
            .expect("the key finding");
        assert!(c.shutdown().success());
        (
            caps["positionEncoding"].clone(),
            key["range"]["start"]["character"].as_u64().expect("column"),
        )
    };
    let (enc16, col16) = column(json!({}));
    let (enc8, col8) = column(json!({"positionEncodings": ["utf-8", "utf-16"]}));
    assert_eq!((enc16, enc8), (json!("utf-16"), json!("utf-8")));
    assert_eq!(col8, col16 + 3, "é and 😀 are 6 bytes and 3 UTF-16 units");
}

#[test]
fn config_errors_are_diagnostics_where_they_are_written() {
    let (_tmp, root) = fixture_copy();
    let lib = root.join("src/lib.rs");
    let config = root.join("idem-lint.toml");
    std::fs::write(
        &config,
        "[lints]\ncheck_then_act = \"deny\"\n  no_such_lint = \"warn\"\n",
    )
    .expect("write");
    let mut c = start(&root);
    initialize(&mut c, &[&root], json!({}));
    open(&mut c, &lib, &std::fs::read_to_string(&lib).expect("read"));
    let bad = c.diagnostics_for(&uri(&config));
    let d = &bad["diagnostics"][0];
    assert!(
        d["message"]
            .as_str()
            .is_some_and(|m| m.contains("unknown lint `no_such_lint`")),
        "{d}"
    );
    // The range covers the key, and the code says what kind of problem it is.
    assert_eq!(
        d["range"],
        json!({"start": {"line": 2, "character": 2}, "end": {"line": 2, "character": 14}}),
        "{d}"
    );
    assert_eq!(d["code"], "idem::config_error", "{d}");
    assert_eq!(d["severity"], 1);

    // Fixed and saved: the error is cleared and the findings come.
    std::fs::write(&config, "[lints]\ncheck_then_act = \"deny\"\n").expect("write");
    c.notify(
        "textDocument/didSave",
        json!({"textDocument": {"uri": uri(&config)}}),
    );
    let cleared = c.diagnostics_for(&uri(&config));
    assert_eq!(cleared["diagnostics"], json!([]));
    let linted = c.diagnostics_where(&uri(&lib), |p| p["diagnostics"] != json!([]));
    assert_eq!(codes(&linted).len(), 2);

    // A level from the config shows as the severity: deny is an error.
    std::fs::write(&config, "[lints]\nnondeterministic_key = \"deny\"\n").expect("write");
    c.notify(
        "textDocument/didSave",
        json!({"textDocument": {"uri": uri(&config)}}),
    );
    let denied = c.diagnostics_where(&uri(&lib), |p| p["diagnostics"][0]["severity"] == 1);
    assert_eq!(
        denied["diagnostics"][0]["code"],
        "idem::nondeterministic_key"
    );

    // Broken again: the error shows on the config, and the findings of the last good
    // configuration stay (nothing is published that clears them).
    std::fs::write(&config, "[lints]\nnondeterministic_key = \"sometimes\"\n").expect("write");
    c.notify(
        "textDocument/didSave",
        json!({"textDocument": {"uri": uri(&config)}}),
    );
    let bad = c.diagnostics_where(&uri(&config), |p| p["diagnostics"] != json!([]));
    assert_eq!(
        bad["diagnostics"][0]["range"],
        json!({"start": {"line": 1, "character": 0}, "end": {"line": 1, "character": 20}}),
        "{bad}"
    );
    assert!(
        c.try_wait_message(
            |m| m["params"]["uri"] == uri(&lib) && m["params"]["diagnostics"] == json!([]),
            Duration::from_millis(500)
        )
        .is_none(),
        "the findings of lib.rs were cleared"
    );
    std::fs::write(&config, "[lints]\nnondeterministic_key = \"deny\"\n").expect("write");
    c.notify(
        "textDocument/didSave",
        json!({"textDocument": {"uri": uri(&config)}}),
    );
    let cleared = c.diagnostics_where(&uri(&config), |p| p["diagnostics"] == json!([]));
    assert_eq!(cleared["diagnostics"], json!([]));

    // A broken Cargo.toml: cargo's error, on the manifest.
    let manifest = root.join("Cargo.toml");
    std::fs::write(&manifest, "[package\nname = 1\n").expect("write");
    c.notify(
        "textDocument/didSave",
        json!({"textDocument": {"uri": uri(&manifest)}}),
    );
    let broken = c.diagnostics_for(&uri(&manifest));
    assert_eq!(
        broken["diagnostics"].as_array().map(Vec::len),
        Some(1),
        "{broken}"
    );
    assert!(c.shutdown().success());
}

/// A folder is linted when it is added (at `initialize` or later), before any of its files
/// is opened; Neovim 0.7's `add_workspace_folder()` sends `removed: [[]]`, which must not
/// cost the folder it adds (issue 25, item 4).
#[test]
fn workspace_folders_come_and_go() {
    let (_tmp_a, a) = fixture_copy();
    let (_tmp_b, b) = fixture_copy();
    let mut c = start(&a);
    initialize(&mut c, &[&a], json!({}));
    // Folder a is linted at once: no file of it is opened.
    assert_eq!(
        codes(&c.diagnostics_for(&uri(&a.join("src/transcode.rs")))).len(),
        1
    );
    c.notify(
        "workspace/didChangeWorkspaceFolders",
        json!({"event": {"added": [{"uri": uri(&b), "name": "b"}], "removed": [[]]}}),
    );
    let b_lib = uri(&b.join("src/lib.rs"));
    let b_other = uri(&b.join("src/transcode.rs"));
    assert_eq!(codes(&c.diagnostics_for(&b_lib)).len(), 2);
    assert_eq!(codes(&c.diagnostics_for(&b_other)).len(), 1);
    c.notify(
        "workspace/didChangeWorkspaceFolders",
        json!({"event": {"added": [], "removed": [{"uri": uri(&b), "name": "b"}]}}),
    );
    // Diagnostics of a removed folder are cleared.
    assert_eq!(c.diagnostics_for(&b_other)["diagnostics"], json!([]));
    assert!(c.shutdown().success());
}

/// Buffers cut at every few bytes, with bytes flipped into other characters: each version is
/// answered with diagnostics for it, and the server is still there at the end.
#[test]
fn any_buffer_content_gets_diagnostics_and_no_crash() {
    let (_tmp, root) = fixture_copy();
    let lib = root.join("src/lib.rs");
    let text = std::fs::read_to_string(&lib).expect("read");
    let mut c = start(&root);
    initialize(&mut c, &[&root], json!({}));
    open(&mut c, &lib, &text);
    c.diagnostics_for(&uri(&lib));
    let chars: Vec<char> = text.chars().collect();
    let odd = [
        '\u{0}', '\u{202e}', '😀', '"', '{', '}', '\r', 'é', '\\', '\'',
    ];
    for (i, version) in (2..42).enumerate() {
        let cut = chars.len() * i / 40;
        let mut buffer: String = chars[..cut].iter().collect();
        buffer.push(odd[i % odd.len()]);
        buffer.extend(chars.iter().skip(cut + i % 3));
        c.notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": uri(&lib), "version": version},
                   "contentChanges": [{"text": buffer}]}),
        );
        c.diagnostics_where(&uri(&lib), |p| p["version"] == version);
    }
    let hover = c.request(
        "textDocument/hover",
        json!({"textDocument": {"uri": uri(&lib)}, "position": {"line": 9999, "character": 9999}}),
    );
    assert!(hover.get("error").is_none(), "{hover}");
    assert!(c.shutdown().success());
}

/// A copy of `fixtures/lsp` with `src/big.rs`, a module of `fns` small functions calling
/// each other: a file whose every version takes a while to parse and analyse (a generated
/// file, a large module), so edits can come while its analysis runs. Its server gets a
/// generous per-file budget ([`BIG_BUDGET`]): these tests are about cancellation, and a debug
/// build on a loaded machine can take longer than the default 10 s to parse it.
fn big_fixture(fns: usize) -> (tempfile::TempDir, std::path::PathBuf, String) {
    let (tmp, root) = fixture_copy();
    let lib = root.join("src/lib.rs");
    let mut text = std::fs::read_to_string(&lib).expect("read");
    text.push_str("\npub mod big;\n");
    std::fs::write(&lib, text).expect("write");
    let mut big = String::from("//! Generated.\n");
    for i in 0..fns {
        let prev = i.saturating_sub(1);
        big.push_str(&format!(
            "pub fn step_{i}(order_id: &str) -> usize {{\n    let n = order_id.len() + {i};\n    \
             if n % 3 == 0 {{\n        return step_{prev}(order_id) + n;\n    }}\n    n\n}}\n"
        ));
    }
    std::fs::write(root.join("src/big.rs"), &big).expect("write");
    (tmp, root, big)
}

/// The flags a server linting [`big_fixture`] starts with (only the command line may raise
/// the budget, never the checkout's `idem-lint.toml`).
const BIG_BUDGET: &[&str] = &["--file-timeout-ms", "600000"];

/// The `publishDiagnostics` for `uri` among what was received so far, in order.
fn published_for(c: &Client, uri: &str) -> Vec<Value> {
    c.notifications
        .iter()
        .filter(|m| m["method"] == "textDocument/publishDiagnostics" && m["params"]["uri"] == uri)
        .map(|m| m["params"].clone())
        .collect()
}

/// `shutdown` is answered while an analysis runs, not after it: the analysis of the large
/// module has started (and takes far longer than the pause) when the request is sent, and
/// nothing is published before the answer.
#[test]
fn shutdown_is_answered_while_an_analysis_runs() {
    let (_tmp, root, big_text) = big_fixture(6000);
    let big = root.join("src/big.rs");
    let mut c = Client::start_with(BIN, BIG_BUDGET, &["--debounce-ms", "0"], &root);
    initialize(&mut c, &[&root], json!({}));
    open(&mut c, &big, &big_text);
    std::thread::sleep(Duration::from_millis(150));
    let asked = std::time::Instant::now();
    let answer = c.request("shutdown", Value::Null);
    let waited = asked.elapsed();
    assert!(answer.get("error").is_none(), "{answer}");
    assert!(
        published_for(&c, &uri(&big)).is_empty(),
        "the analysis finished before the answer ({waited:?}): {:?}",
        c.notifications
    );
    c.notify("exit", Value::Null);
    // The running analysis is dropped with the process: the answer and the exit are quick.
    assert!(waited < Duration::from_secs(2), "shutdown took {waited:?}");
}

/// Edits arriving while the analysis of an older version runs make it stale: only the
/// latest version's diagnostics are published. A hover on a buffer unchanged since the last
/// analysis is answered from it while the new one runs; on the edited buffer, it waits for
/// the analysis of the text on screen.
#[test]
fn rapid_edits_publish_only_the_latest_version_and_hovers_answer_meanwhile() {
    let (_tmp, root, big_text) = big_fixture(6000);
    let big = root.join("src/big.rs");
    let lib = root.join("src/lib.rs");
    let lib_text = std::fs::read_to_string(&lib).expect("read");
    let mut c = Client::start_with(BIN, BIG_BUDGET, &["--debounce-ms", "0"], &root);
    initialize(&mut c, &[&root], json!({}));
    open(&mut c, &lib, &lib_text);
    open(&mut c, &big, &big_text);
    let first = c.diagnostics_where(&uri(&big), |p| p["version"] == 1);
    assert_eq!(first["diagnostics"], json!([]), "{first}");
    let lib_first = c.diagnostics_where(&uri(&lib), |p| p["version"] == 1);
    let finding = lib_first["diagnostics"][1].clone();
    assert_eq!(finding["code"], "idem::missing_idempotency_token");
    c.forget();

    // Five versions of the large file, each a changed line at its end, 30 ms apart: far
    // less than one analysis of it takes.
    let last_line = big_text.lines().count() as u32;
    for version in 2..=6 {
        c.notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": uri(&big), "version": version},
                   "contentChanges": [{"range": {"start": {"line": last_line, "character": 0},
                                                 "end": {"line": last_line, "character": 0}},
                                       "text": format!("// v{version}\n")}]}),
        );
        std::thread::sleep(Duration::from_millis(30));
    }
    // The other buffer did not change: its finding is hovered on at once.
    let hover = c.request(
        "textDocument/hover",
        json!({"textDocument": {"uri": uri(&lib)}, "position": finding["range"]["start"]}),
    );
    assert!(
        hover["result"]["contents"]["value"]
            .as_str()
            .is_some_and(|v| v.contains("# idem::missing_idempotency_token")),
        "{hover}"
    );
    assert!(
        published_for(&c, &uri(&big)).is_empty(),
        "the hover waited for the analysis: {:?}",
        c.notifications
    );
    // The edited buffer: the answer comes after the analysis of version 6.
    let on_big = c.request(
        "textDocument/hover",
        json!({"textDocument": {"uri": uri(&big)}, "position": {"line": 1, "character": 7}}),
    );
    assert!(on_big.get("error").is_none(), "{on_big}");
    assert_eq!(on_big["result"], Value::Null, "no finding there");
    let versions: Vec<Value> = published_for(&c, &uri(&big))
        .iter()
        .map(|p| p["version"].clone())
        .collect();
    assert_eq!(versions, [json!(6)], "only the latest version is published");
    assert!(c.shutdown().success());
}

/// A half-typed line in the crate root (issue 25, item 3): a keystroke in `lib.rs` that
/// breaks its parse must not clear the findings of the files its `mod` declarations reach,
/// and the error is on the delimiter left open.
#[test]
fn a_half_typed_line_in_the_crate_root_keeps_the_other_files_findings() {
    let (_tmp, root) = fixture_copy();
    let lib = root.join("src/lib.rs");
    let transcode = uri(&root.join("src/transcode.rs"));
    let text = std::fs::read_to_string(&lib).expect("read");
    let mut c = start(&root);
    initialize(&mut c, &[&root], json!({}));
    open(&mut c, &lib, &text);
    c.diagnostics_where(&uri(&lib), |p| p["version"] == 1);
    let before = c.diagnostics_for(&transcode);
    assert_eq!(codes(&before), ["idem::missing_idempotency_token"]);

    let half = format!("{text}\npub fn half_typed() {{\n    start(;\n}}\n");
    c.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": uri(&lib), "version": 2},
               "contentChanges": [{"text": half}]}),
    );
    let second = c.diagnostics_where(&uri(&lib), |p| p["version"] == 2);
    let error = second["diagnostics"]
        .as_array()
        .expect("diagnostics")
        .iter()
        .find(|d| d["code"] == "idem::parse_error")
        .unwrap_or_else(|| panic!("a parse error: {second}"));
    let (line, col) = position_of(&half, "start(;");
    assert_eq!(error["range"]["start"]["line"], line, "{error}");
    assert_eq!(
        error["range"]["start"]["character"],
        col + "start".len() as u32,
        "{error}"
    );
    // One analysis publishes a file's cleared diagnostics before the others: had
    // `transcode.rs` lost its finding, its empty list would have come before `lib.rs`'s.
    let cleared: Vec<&Value> = c
        .notifications
        .iter()
        .filter(|m| m["params"]["uri"] == transcode)
        .collect();
    assert!(cleared.is_empty(), "{cleared:?}");
    assert!(c.shutdown().success());
}

/// While a buffer does not parse, the language server also follows the `mod` declarations
/// of its last version that did (issue 25, item 3): deleting the `;` of `pub mod transcode;`
/// (the item the recovery must drop) keeps `transcode.rs` and its finding.
#[test]
fn a_broken_mod_line_keeps_the_module_tree_of_the_last_version_that_parsed() {
    let (_tmp, root) = fixture_copy();
    let lib = root.join("src/lib.rs");
    let transcode = uri(&root.join("src/transcode.rs"));
    let text = std::fs::read_to_string(&lib).expect("read");
    assert!(text.contains("pub mod transcode;\n"));
    let mut c = start(&root);
    initialize(&mut c, &[&root], json!({}));
    open(&mut c, &lib, &text);
    c.diagnostics_where(&uri(&lib), |p| p["version"] == 1);
    let before = c.diagnostics_for(&transcode);
    assert_eq!(codes(&before), ["idem::missing_idempotency_token"]);

    let half = text.replace("pub mod transcode;", "pub mod transcode");
    c.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": uri(&lib), "version": 2},
               "contentChanges": [{"text": half}]}),
    );
    let second = c.diagnostics_where(&uri(&lib), |p| p["version"] == 2);
    assert!(
        codes(&second).contains(&"idem::parse_error".to_string()),
        "{second}"
    );
    // As in the test above: a cleared `transcode.rs` would have been published first.
    let cleared: Vec<&Value> = c
        .notifications
        .iter()
        .filter(|m| m["params"]["uri"] == transcode)
        .collect();
    assert!(cleared.is_empty(), "{cleared:?}");
    assert!(c.shutdown().success());
}

/// Issue 38, item 1: a server whose folder is one member of a larger workspace (an editor
/// that starts a server per member) publishes for that member's files and for the buffers
/// opened in it, never for the other members' files, which are another server's.
#[test]
fn a_member_folder_publishes_only_its_own_files_and_its_buffers() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().canonicalize().expect("canonical");
    common::copy_dir(
        &common::repo().join("fixtures/cross_member/nondeterministic_key"),
        &root,
    );
    let service = root.join("service");
    let service_lib = service.join("src/lib.rs");
    let common_lib = root.join("common/src/lib.rs");
    let mut c = start(&service);
    initialize(&mut c, &[&service], json!({}));
    assert_eq!(
        codes(&c.diagnostics_for(&uri(&service_lib))),
        ["idem::nondeterministic_key", "idem::nondeterministic_key"]
    );
    // One analysis publishes its files in path order, `common/` before `service/`: had it
    // published anything outside the folder, it would be here by now.
    let outside: Vec<&Value> = c
        .notifications
        .iter()
        .filter(|m| m["method"] == "textDocument/publishDiagnostics")
        .filter(|m| {
            !m["params"]["uri"]
                .as_str()
                .is_some_and(|u| u.starts_with(&uri(&service)))
        })
        .collect();
    assert!(
        outside.is_empty(),
        "published outside the folder: {outside:?}"
    );
    // A file of the other member opened in this server is this server's to publish.
    let text = std::fs::read_to_string(&common_lib).expect("read");
    open(&mut c, &common_lib, &text);
    assert_eq!(
        codes(&c.diagnostics_for(&uri(&common_lib))),
        ["idem::nondeterministic_key"]
    );
    assert!(c.shutdown().success());
}

/// Issue 38, item 5: a note naming a place in a linked member's file is related
/// information there (the editor can go to it), not only text in the message.
#[test]
fn notes_into_linked_members_are_related_information() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().canonicalize().expect("canonical");
    common::copy_dir(
        &common::repo().join("fixtures/cross_member/nondeterministic_key"),
        &root,
    );
    let service_lib = root.join("service/src/lib.rs");
    let mut c = start(&root);
    initialize(&mut c, &[&root], json!({}));
    let published = c.diagnostics_for(&uri(&service_lib));
    let ids = uri(&root.join("common/src/ids.rs"));
    let related: Vec<Value> = published["diagnostics"]
        .as_array()
        .expect("diagnostics")
        .iter()
        .flat_map(|d| {
            d["relatedInformation"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter(|r| r["location"]["uri"] == ids.as_str())
        .collect();
    assert!(!related.is_empty(), "{published}");
    let made = related
        .iter()
        .find(|r| {
            r["message"]
                .as_str()
                .is_some_and(|m| m.contains("a random id"))
        })
        .expect("the place the id is made");
    assert_eq!(
        made["location"]["range"]["start"],
        json!({"line": 4, "character": 27})
    );
    assert!(c.shutdown().success());
}

/// Issue 38, item 2: while `pub mod notify` lacks its `;` in the buffer of `lib.rs`, the
/// module stays public: `notify.rs` keeps the finding that needs it to be (an entry point
/// of the library), where the recovery used to drop the `pub`.
#[test]
fn a_half_typed_pub_mod_line_keeps_the_finding_that_needs_it_public() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().canonicalize().expect("canonical");
    common::copy_dir(&common::repo().join("fixtures/demo"), &root);
    let lib = root.join("src/lib.rs");
    let notify = uri(&root.join("src/notify.rs"));
    let text = std::fs::read_to_string(&lib).expect("read");
    let mut c = start(&root);
    initialize(&mut c, &[&root], json!({}));
    open(&mut c, &lib, &text);
    c.diagnostics_where(&uri(&lib), |p| p["version"] == 1);
    let before = codes(&c.diagnostics_for(&notify));
    assert!(
        before.contains(&"idem::unguarded_entry_point".to_string()),
        "{before:?}"
    );
    c.forget();
    c.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": uri(&lib), "version": 2},
               "contentChanges": [{"text": text.replace("pub mod notify;", "pub mod notify")}]}),
    );
    let second = c.diagnostics_where(&uri(&lib), |p| p["version"] == 2);
    assert!(
        codes(&second).contains(&"idem::parse_error".to_string()),
        "{second}"
    );
    // The analysis publishes all its files before the server reads the next message: once
    // this answer is in, a changed `notify.rs` would have been published.
    let answer = c.request(
        "textDocument/hover",
        json!({"textDocument": {"uri": notify}, "position": {"line": 0, "character": 0}}),
    );
    assert!(answer.get("error").is_none(), "{answer}");
    let changed: Vec<Value> = published_for(&c, &notify);
    assert!(changed.is_empty(), "notify.rs changed: {changed:?}");
    assert!(c.shutdown().success());
}

/// Issue 38, item 4: an edit in a workspace member is answered with its own package's
/// analysis first; the members that depend on it (most of the work on a large workspace)
/// follow. Here the dependent's file (`service/`) sorts before the edited member's
/// (`zz_common/`), so a server that publishes once, after analysing every package, sends the
/// dependent's changed findings before the edited file's; they must come after. The
/// dependent then gets the findings a fresh analysis gives (the random id made
/// deterministic in the member removes both of its findings).
#[test]
fn an_edited_member_is_published_before_its_dependents() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().canonicalize().expect("canonical");
    let from = common::repo().join("fixtures/cross_member/nondeterministic_key");
    common::copy_dir(&from.join("service"), &root.join("service"));
    common::copy_dir(&from.join("common"), &root.join("zz_common"));
    std::fs::write(
        root.join("Cargo.toml"),
        "[workspace]\nmembers = [\"zz_common\", \"service\"]\nresolver = \"2\"\n",
    )
    .expect("write the workspace manifest");
    let service_manifest = root.join("service/Cargo.toml");
    let manifest = std::fs::read_to_string(&service_manifest).expect("read");
    std::fs::write(
        &service_manifest,
        manifest.replace("path = \"../common\"", "path = \"../zz_common\""),
    )
    .expect("write");
    let ids = root.join("zz_common/src/ids.rs");
    let service = uri(&root.join("service/src/lib.rs"));
    let key_findings = |p: &Value| {
        codes(p)
            .iter()
            .filter(|c| *c == "idem::nondeterministic_key")
            .count()
    };

    let mut c = Client::start(&common::bin(), &["--debounce-ms", "0"], &root);
    initialize(&mut c, &[&root], json!({}));
    // Opened with a text that is not the disk's, so the hover below waits for the
    // analysis of the buffer.
    let text = std::fs::read_to_string(&ids).expect("read") + "\n// opened\n";
    open(&mut c, &ids, &text);
    c.diagnostics_where(&uri(&ids), |p| p["version"] == 1);
    let hover = json!({"textDocument": {"uri": uri(&ids)},
                       "position": {"line": 0, "character": 0}});
    c.request("textDocument/hover", hover);
    let before = c.diagnostics_where(&service, |p| key_findings(p) > 0);
    assert_eq!(key_findings(&before), 2, "{before}");
    c.forget();

    let edited = text.replace("Uuid::new_v4()", "prefix.len()");
    c.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": uri(&ids), "version": 2},
               "contentChanges": [{"text": edited}]}),
    );
    let edited_file = c.wait_message(|m| {
        m["method"] == "textDocument/publishDiagnostics"
            && m["params"]["uri"] == uri(&ids)
            && m["params"]["version"] == 2
    });
    let before_it: Vec<&Value> = c
        .notifications
        .iter()
        .filter(|m| m["params"]["uri"] == service.as_str())
        .collect();
    assert!(
        before_it.is_empty(),
        "the dependent was published before the edited file: {before_it:?} then {edited_file}"
    );
    let after = c.diagnostics_for(&service);
    assert_eq!(key_findings(&after), 0, "{after}");
    assert!(c.shutdown().success());
}
