//! Exit codes: 0 clean, 1 a finding at deny, 2 a usage, config or I/O error on one line.

mod common;

use common::{manifest, run, run_in, s, tree};

#[test]
fn clean_is_zero_and_deny_is_one() {
    run(&["fixtures/demo"]).assert_code(0);
    run(&["fixtures/parse_errors"]).assert_code(0);
    run(&["fixtures/parse_errors", "-D", "parse_error"]).assert_code(1);
    run(&["fixtures/parse_errors", "-D", "warnings"]).assert_code(1);
    run(&[
        "fixtures/parse_errors",
        "-D",
        "warnings",
        "-A",
        "parse_error",
    ])
    .assert_code(0);
}

#[test]
fn cargo_subcommand_invocation() {
    // `cargo idem-lint ARGS` runs `cargo-idem-lint idem-lint ARGS`.
    let out = run(&[
        "idem-lint",
        "fixtures/parse_errors",
        "--message-format",
        "short",
    ]);
    out.assert_code(0);
    assert_eq!(out.stdout.lines().count(), 3, "{}", out.stdout);
}

#[test]
fn usage_errors_are_two() {
    run(&["--bogus"]).assert_one_line_error("--bogus");
    run(&["--message-format", "xml"]).assert_one_line_error("xml");
    run(&["fixtures/demo", "-D", "no_such_lint"])
        .assert_one_line_error("unknown lint `no_such_lint`");
    run(&["--explain", "no_such_lint"]).assert_one_line_error("no lint named `no_such_lint`");
    run(&["does/not/exist"]).assert_one_line_error("`does/not/exist` does not exist");
    run(&["fixtures/demo", "-p", "nope"]).assert_one_line_error("package `nope` is not a member");
    run(&["Cargo.lock"]).assert_one_line_error("is a file");
}

#[test]
fn missing_and_broken_manifests_are_two() {
    run(&["--manifest-path", "/nonexistent/Cargo.toml"])
        .assert_one_line_error("manifest `/nonexistent/Cargo.toml` does not exist");
    let dir = tree(&[("Cargo.toml", "[package\nname = 1\n"), ("src/lib.rs", "")]);
    run(&[s(dir.path())]).assert_one_line_error("Cargo.toml:1:9: unclosed table");
    let dir = tree(&[
        ("Cargo.toml", "[package]\nversion = \"0.1.0\"\n"),
        ("src/lib.rs", ""),
    ]);
    run(&[s(dir.path())]).assert_one_line_error("Cargo.toml");
    // No PATH and no Cargo.toml around the current directory.
    let empty = tempfile::tempdir().expect("tempdir");
    run_in(empty.path(), &[]).assert_one_line_error("Cargo.toml");
}

#[test]
fn explain_prints_the_docs() {
    let out = run(&["--explain", "idem::parse_error"]);
    out.assert_code(0);
    assert!(
        out.stdout
            .starts_with("# idem::parse_error (default: warn)"),
        "{}",
        out.stdout
    );
    assert!(out
        .stdout
        .contains(idem_lints::lint::PARSE_ERROR.doc_markdown().trim_end()));
    // Doc-comment indentation is gone: headings start at the margin.
    let check = run(&["--explain", "check_then_act"]);
    assert!(
        check.stdout.contains("\n### What it does\n"),
        "{}",
        check.stdout
    );
    assert!(
        check.stdout.contains("\n### Use instead\n```rust\n"),
        "{}",
        check.stdout
    );
}

#[test]
fn help_and_version_are_zero() {
    let out = run(&["--help"]);
    out.assert_code(0);
    assert!(out.stdout.contains("--message-format"));
    run(&["--version"]).assert_code(0);
}

#[test]
fn json_reports_failure_at_deny() {
    let dir = tree(&[("Cargo.toml", &manifest("x", "")), ("src/lib.rs", "fn (")]);
    let out = run(&[
        s(dir.path()),
        "--message-format",
        "json",
        "-D",
        "parse_error",
    ]);
    out.assert_code(1);
    assert_eq!(
        out.stdout.lines().last(),
        Some(r#"{"reason":"build-finished","success":false}"#)
    );
}
