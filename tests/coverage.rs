//! `--verbose` names the dependencies no catalog model covers (issue 37, item 3): once each
//! for the run, store and client crates first, and never a modelled, neutral or member crate.

mod common;

use common::{manifest, run_in, tree};

fn workspace() -> tempfile::TempDir {
    tree(&[
        ("Cargo.toml", "[workspace]\nmembers = [\"api\", \"worker\", \"common\"]\n"),
        (
            "api/Cargo.toml",
            &manifest(
                "api",
                "[dependencies]\naxum = \"0.7\"\nserde = \"1\"\npulsar = \"6\"\nratatui = \"0.28\"\ncommon = { path = \"../common\" }\n",
            ),
        ),
        ("api/src/lib.rs", "pub fn f() {}\n"),
        (
            "worker/Cargo.toml",
            &manifest(
                "worker",
                "[dependencies]\nredis = \"0.27\"\npulsar = \"6\"\nomniqueue = \"0.2\"\ncommon = { path = \"../common\" }\n",
            ),
        ),
        ("worker/src/lib.rs", "pub fn g() {}\n"),
        ("common/Cargo.toml", &manifest("common", "")),
        ("common/src/lib.rs", "pub fn h() {}\n"),
    ])
}

#[test]
fn verbose_names_each_unmodelled_dependency_once_io_crates_first() {
    let dir = workspace();
    let out = run_in(dir.path(), &["--workspace", "--no-cache", "--verbose"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let note = out
        .stderr
        .lines()
        .position(|l| l.starts_with("note: no model for 3 dependencies"))
        .unwrap_or_else(|| panic!("no coverage note in:\n{}", out.stderr));
    let lines: Vec<&str> = out.stderr.lines().skip(note + 1).take(2).collect();
    assert_eq!(
        lines,
        [
            "  stores, queues or clients by name: omniqueue, pulsar",
            "  others: ratatui"
        ],
        "{}",
        out.stderr
    );
    // Modelled (axum, redis), neutral (serde) and member (common) crates are not named.
    for name in ["axum", "redis", "serde", "common"] {
        assert!(
            !out.stderr.contains(&format!(" {name}")),
            "{name} named:\n{}",
            out.stderr
        );
    }
}

#[test]
fn without_verbose_nothing_is_said() {
    let dir = workspace();
    let out = run_in(dir.path(), &["--workspace", "--no-cache"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!out.stderr.contains("no model for"), "{}", out.stderr);
}
