//! Suppression comments, end to end.

mod common;

use common::{manifest, run, s, tree};

fn short(dir: &std::path::Path) -> common::Run {
    run(&[s(dir), "--message-format", "short"])
}

#[test]
fn on_the_line_above_an_item_and_on_the_line() {
    let dir = tree(&[
        ("Cargo.toml", &manifest("sup", "")),
        (
            "src/lib.rs",
            "// idem-lint: allow(parse_error)\nmod gone_a;\nmod gone_b; // idem-lint: allow(idem::parse_error)\nmod gone_c;\n",
        ),
    ]);
    let out = short(dir.path());
    out.assert_code(0);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(
        lines,
        ["src/lib.rs:4:1: warning[idem::parse_error]: file not found for module `gone_c`"]
            .iter()
            .map(|l| format!("{}/{l}", dir.path().display()))
            .collect::<Vec<_>>()
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
    );
}

#[test]
fn above_an_item_covers_the_whole_item() {
    let dir = tree(&[
        ("Cargo.toml", &manifest("sup", "")),
        (
            "src/lib.rs",
            "/// Docs and attributes may sit between.\n// idem-lint: allow(parse_error)\n#[cfg(feature = \"x\")]\nmod outer {\n    mod gone;\n}\nmod other {\n    mod gone;\n}\n",
        ),
    ]);
    let out = short(dir.path());
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{}", out.stdout);
    assert!(lines[0].contains("src/lib.rs:8:5"), "{}", out.stdout);
}

#[test]
fn allow_file_in_the_header_even_when_the_file_does_not_parse() {
    let dir = tree(&[
        ("Cargo.toml", &manifest("sup", "")),
        ("src/lib.rs", "mod broken;\nmod also_broken;\n"),
        (
            "src/broken.rs",
            "//! Generated.\n// idem-lint: allow-file(parse_error)\n\nfn f( {}\n",
        ),
        (
            "src/also_broken.rs",
            "fn f( {}\n// idem-lint: allow-file(parse_error)\n",
        ),
    ]);
    let out = short(dir.path());
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{}", out.stdout);
    assert!(lines[0].contains("also_broken.rs"), "{}", out.stdout);
    // The late allow-file is a warning on stderr.
    assert!(
        out.stderr
            .contains("also_broken.rs:2:1: `allow-file` must be among the first lines"),
        "{}",
        out.stderr
    );
}

#[test]
fn unknown_names_warn_and_do_not_fail() {
    let dir = tree(&[
        ("Cargo.toml", &manifest("sup", "")),
        (
            "src/lib.rs",
            "mod gone; // idem-lint: allow(parse_eror, parse_error)\n",
        ),
    ]);
    let out = short(dir.path());
    out.assert_code(0);
    assert_eq!(out.stdout, "");
    assert!(
        out.stderr.contains("warning: ")
            && out
                .stderr
                .contains("src/lib.rs:1:11: unknown lint `parse_eror`"),
        "{}",
        out.stderr
    );
}

#[test]
fn suppressed_deny_findings_do_not_fail_the_run() {
    let dir = tree(&[
        ("Cargo.toml", &manifest("sup", "")),
        ("src/lib.rs", "mod gone; // idem-lint: allow(parse_error)\n"),
    ]);
    run(&[s(dir.path()), "-D", "warnings"]).assert_code(0);
}
