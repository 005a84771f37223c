//! `--with-check` (issue 9, item 2): cargo's check and our lints in one stream for
//! rust-analyzer, read back with `cargo_metadata::Message` as rust-analyzer reads it.

mod common;

use cargo_metadata::diagnostic::DiagnosticLevel;
use cargo_metadata::Message;
use common::{run_in, tree, Run};

/// A crate with our finding (a configured API sent without its token) and a type error.
const LIB: &str = "pub struct Payments;\npub struct Refund;\n\n\
impl Payments {\n    pub fn create_refund(&self) -> Refund {\n        Refund\n    }\n}\n\n\
impl Refund {\n    pub fn idempotency_key(self, _key: &str) -> Refund {\n        self\n    }\n    \
pub fn send(self) -> u32 {\n        1\n    }\n}\n\n\
pub fn refund(p: &Payments) -> u32 {\n    p.create_refund().send()\n}\n";
const TYPE_ERROR: &str = "\npub fn broken() -> u32 {\n    \"not a number\"\n}\n";
const CONFIG: &str =
    "[lints.missing_idempotency_token]\napis = [{ method = \"create_refund\", token = \"idempotency_key\" }]\n";

fn crate_with(lib: &str, config: &str) -> tempfile::TempDir {
    tree(&[
        ("Cargo.toml", &common::manifest("chained", "")),
        ("idem-lint.toml", config),
        ("src/lib.rs", lib),
    ])
}

fn messages(out: &Run) -> Vec<Message> {
    out.stdout
        .lines()
        .map(|l| serde_json::from_str::<Message>(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// `(code, level, file name ending)` of every compiler message.
fn diagnostics(msgs: &[Message]) -> Vec<(String, DiagnosticLevel, String)> {
    msgs.iter()
        .filter_map(|m| match m {
            Message::CompilerMessage(c) => Some(&c.message),
            _ => None,
        })
        .map(|d| {
            (
                d.code.as_ref().map_or(String::new(), |c| c.code.clone()),
                d.level,
                d.spans
                    .first()
                    .map_or(String::new(), |s| s.file_name.clone()),
            )
        })
        .collect()
}

/// Exactly one `build-finished`, last, with `success`.
fn finished(msgs: &[Message]) -> bool {
    let count = msgs
        .iter()
        .filter(|m| matches!(m, Message::BuildFinished(_)))
        .count();
    assert_eq!(count, 1, "one build-finished");
    match msgs.last() {
        Some(Message::BuildFinished(b)) => b.success,
        other => panic!("the stream ends with {other:?}"),
    }
}

#[test]
fn our_findings_follow_cargo_check_even_when_the_code_does_not_compile() {
    let dir = crate_with(&format!("{LIB}{TYPE_ERROR}"), CONFIG);
    let out = run_in(
        dir.path(),
        &[
            "--with-check",
            "check",
            "--message-format",
            "json",
            "--all-targets",
        ],
    );
    assert_ne!(out.code, 0, "{}", out.stderr);
    let msgs = messages(&out);
    let diags = diagnostics(&msgs);
    assert!(
        diags
            .iter()
            .any(|(code, level, _)| code == "E0308" && *level == DiagnosticLevel::Error),
        "rustc's type error is in the stream: {diags:?}"
    );
    let ours: Vec<_> = diags
        .iter()
        .filter(|(code, _, _)| code == "idem::missing_idempotency_token")
        .collect();
    assert_eq!(ours.len(), 1, "{diags:?}");
    assert!(ours[0].2.ends_with("src/lib.rs"));
    // Cargo's own lines come first, unchanged: its artifacts and messages precede ours.
    let first_ours = msgs
        .iter()
        .position(|m| matches!(m, Message::CompilerMessage(c) if c.message.code.as_ref().is_some_and(|c| c.code.starts_with("idem::"))))
        .expect("ours");
    let last_cargo = msgs
        .iter()
        .rposition(|m| matches!(m, Message::CompilerMessage(c) if c.message.code.as_ref().is_some_and(|c| c.code == "E0308")))
        .expect("cargo's");
    assert!(last_cargo < first_ours);
    assert!(!finished(&msgs));
}

#[test]
fn clippy_lints_and_ours_both_show_and_a_clean_build_succeeds() {
    let dir = crate_with(
        &format!("{LIB}\npub fn needless(x: &u32) -> u32 {{\n    return *x;\n}}\n"),
        CONFIG,
    );
    let out = run_in(
        dir.path(),
        &[
            "--with-check",
            "clippy",
            "--message-format=json-diagnostic-rendered-ansi",
        ],
    );
    out.assert_code(0);
    let msgs = messages(&out);
    let diags = diagnostics(&msgs);
    assert!(
        diags
            .iter()
            .any(|(code, _, _)| code == "clippy::needless_return"),
        "{diags:?}"
    );
    assert!(
        diags
            .iter()
            .any(|(code, _, _)| code == "idem::missing_idempotency_token"),
        "{diags:?}"
    );
    assert!(finished(&msgs), "warnings only: the build succeeded");
    // Issue 38, item 10: cargo was asked for ANSI-rendered diagnostics, so ours are too.
    for m in &msgs {
        if let Message::CompilerMessage(c) = m {
            let rendered = c.message.rendered.as_deref().unwrap_or_default();
            assert!(rendered.contains('\x1b'), "no ANSI code: {rendered}");
        }
    }
    // Our level flags stay ours; `-D warnings` after `--` is clippy's.
    let out = run_in(
        dir.path(),
        &[
            "--with-check",
            "clippy",
            "--message-format",
            "json",
            "-D",
            "missing_idempotency_token",
        ],
    );
    out.assert_code(1);
    assert!(!finished(&messages(&out)));
}

#[test]
fn a_broken_config_is_a_diagnostic_on_the_config_file_and_fails() {
    let dir = crate_with(LIB, "[lints]\nno_such_lint = \"deny\"\n");
    let out = run_in(
        dir.path(),
        &["--with-check", "check", "--message-format", "json"],
    );
    out.assert_code(2);
    assert!(
        out.stderr.contains("unknown lint `no_such_lint`"),
        "{}",
        out.stderr
    );
    let msgs = messages(&out);
    let config = msgs
        .iter()
        .find_map(|m| match m {
            Message::CompilerMessage(c)
                if c.message
                    .spans
                    .iter()
                    .any(|s| s.file_name.ends_with("idem-lint.toml")) =>
            {
                Some(&c.message)
            }
            _ => None,
        })
        .expect("a diagnostic on idem-lint.toml");
    assert_eq!(config.level, DiagnosticLevel::Error);
    assert!(
        config.message.contains("unknown lint `no_such_lint`"),
        "{}",
        config.message
    );
    let span = &config.spans[0];
    assert_eq!((span.line_start, span.column_start), (2, 1));
    assert!(!finished(&msgs), "cargo's success does not hide our exit 2");
}

#[test]
fn with_check_needs_json() {
    let dir = crate_with(LIB, CONFIG);
    run_in(dir.path(), &["--with-check", "check"]).assert_one_line_error("--message-format json");
}
