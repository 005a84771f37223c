//! UI tests: every fixture under `fixtures/` is linted by the real binary and its findings
//! compared with the annotations in its sources.
//!
//! A fixture is a directory with a `Cargo.toml` (a package or a workspace; it may carry its
//! own `idem-lint.toml`) or, failing that, a directory holding `.rs` files (linted as a plain
//! directory). Annotations, at the end of a line:
//!
//! - `//~ WARN lint_name`: a warning of `idem::lint_name` starts on this line;
//! - `//~ DENY lint_name` (or `ERROR`): the same at deny level;
//! - `//~^ WARN lint_name`: on the line above (one `^` per line up).
//!
//! The annotation parser is `idem_lints::testing::parse_annotations`, shared with the lints'
//! own fixture tests.
//!
//! Any missing or extra finding fails the test with a diff, and so does a finding printed
//! twice (same file, span, lint and message), whatever the annotations. New fixtures are picked up
//! without touching this file.

mod common;

use common::{fixtures, run_in, s};
use idem_lints::testing::parse_annotations;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// `(file relative to the fixture, line, level as in JSON, code)`.
type Finding = (String, u64, String, String);

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.filter_map(Result::ok) {
        let p = e.path();
        let Ok(meta) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        if meta.is_dir() && e.file_name() != "target" {
            rs_files(&p, out);
        } else if meta.is_file() && p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn expected(dir: &Path) -> Result<Vec<Finding>, String> {
    let mut files = Vec::new();
    rs_files(dir, &mut files);
    let mut out = Vec::new();
    for f in files {
        // Fixtures may hold invalid UTF-8 on purpose; annotations are ASCII either way.
        let bytes = std::fs::read(&f).map_err(|e| format!("{}: {e}", f.display()))?;
        let text = String::from_utf8_lossy(&bytes);
        let rel = f
            .strip_prefix(dir)
            .unwrap_or(&f)
            .to_string_lossy()
            .into_owned();
        for a in parse_annotations(&text).map_err(|e| format!("{rel}: {e}"))? {
            out.push((
                rel.clone(),
                a.line as u64,
                a.level.to_string(),
                format!("idem::{}", a.lint),
            ));
        }
    }
    out.sort();
    Ok(out)
}

/// Lints one fixture and compares; the error is a readable diff.
fn check_fixture(dir: &Path) -> Result<(), String> {
    let want = expected(dir)?;
    let mut args = vec![s(dir), "--message-format", "json"];
    if dir.join("Cargo.toml").is_file() {
        args.push("--workspace");
    }
    let run = run_in(dir, &args);
    if run.code == 2 || run.code < 0 {
        return Err(format!(
            "the linter failed (exit {}): {}",
            run.code, run.stderr
        ));
    }
    let twice = repeated(&run);
    let got = run.findings(dir);
    let mut count: BTreeMap<&Finding, i64> = BTreeMap::new();
    for f in &want {
        *count.entry(f).or_default() += 1;
    }
    for f in &got {
        *count.entry(f).or_default() -= 1;
    }
    let mut diff = String::new();
    for (f, n) in count.iter().filter(|(_, n)| **n != 0) {
        let (sign, what) = if *n > 0 {
            ('-', "missing")
        } else {
            ('+', "unexpected")
        };
        for _ in 0..n.abs() {
            diff.push_str(&format!(
                "  {sign} {}:{}: {} [{}]  ({what})\n",
                f.0, f.1, f.2, f.3
            ));
        }
    }
    let mut err = String::new();
    if !twice.is_empty() {
        err = format!("findings printed twice:\n{}\n", twice.join("\n"));
    }
    if !diff.is_empty() {
        err.push_str(&format!(
            "findings differ (- expected but not reported, + reported but not expected):\n{diff}"
        ));
    }
    if err.is_empty() {
        Ok(())
    } else {
        Err(err)
    }
}

/// The findings printed more than once: the same file, position, lint and message. The
/// annotations cannot say this (two on a line may mean two findings), so it is checked apart.
fn repeated(run: &common::Run) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for m in run.messages() {
        let msg = &m["message"];
        let Some(span) = msg["spans"]
            .as_array()
            .and_then(|s| s.iter().find(|s| s["is_primary"] == true))
        else {
            continue;
        };
        let key = (
            span["file_name"].to_string(),
            span["byte_start"].as_u64(),
            span["byte_end"].as_u64(),
            msg["code"]["code"].to_string(),
            msg["message"].to_string(),
        );
        if !seen.insert(key.clone()) {
            out.push(format!(
                "  {}:{}: {} {}",
                key.0, span["line_start"], key.3, key.4
            ));
        }
    }
    out
}

#[test]
fn ui_fixtures() {
    let mut all = Vec::new();
    fixtures(&common::repo().join("fixtures"), &mut all);
    assert!(!all.is_empty(), "no fixtures found");
    let failures: Vec<String> = all
        .iter()
        .filter_map(|dir| {
            check_fixture(dir)
                .err()
                .map(|e| format!("fixture {}:\n{e}", dir.display()))
        })
        .collect();
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn the_parse_errors_fixture_is_found() {
    let mut all = Vec::new();
    fixtures(&common::repo().join("fixtures"), &mut all);
    assert!(all.iter().any(|d| d.ends_with("parse_errors")), "{all:?}");
}

#[test]
fn a_wrong_annotation_fails_with_a_diff() {
    let dir = common::tree(&[
        ("Cargo.toml", &common::manifest("wrong", "")),
        // The real finding is on line 2; the annotation claims line 1 and a deny level.
        (
            "src/lib.rs",
            "pub fn f() { //~ DENY parse_error\n    let x = ;\n}\n",
        ),
    ]);
    let err = check_fixture(dir.path()).expect_err("a wrong annotation must fail");
    assert!(
        err.contains("- src/lib.rs:1: error [idem::parse_error]  (missing)"),
        "{err}"
    );
    assert!(
        err.contains("+ src/lib.rs:2: warning [idem::parse_error]  (unexpected)"),
        "{err}"
    );
    // A missing annotation fails as well.
    common::write(
        dir.path(),
        "src/lib.rs",
        b"pub fn f() {\n    let x = ;\n}\n",
    );
    assert!(check_fixture(dir.path()).is_err());
    // And the right one passes.
    common::write(
        dir.path(),
        "src/lib.rs",
        b"pub fn f() {\n    let x = ; //~ WARN parse_error\n}\n",
    );
    check_fixture(dir.path()).expect("matches");
}
