//! Triage and scoping (issue 38, item 8): `--statistics`, lint groups, `[[overrides]]` for
//! paths, and `--exclude` with `--workspace`.

mod common;

use common::{run, run_in, s};
use std::path::Path;

/// `(file, line, level, code)` of a finding.
type Found = (String, u64, String, String);

/// Every finding of a JSON run in `dir` with `args`.
fn findings(dir: &Path, args: &[&str]) -> Vec<Found> {
    let mut all = vec!["--message-format", "json", "--no-cache"];
    all.extend_from_slice(args);
    let out = run_in(dir, &all);
    assert!(out.code == 0 || out.code == 1, "{}", out.stderr);
    out.findings(dir)
}

/// A copy of `fixtures/claim_without_expiry/redis` without its config: its findings come
/// from a lint at `allow` by default.
fn claims() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    common::copy_dir(
        &common::repo().join("fixtures/claim_without_expiry/redis"),
        dir.path(),
    );
    let _ = std::fs::remove_file(dir.path().join("idem-lint.toml"));
    let _ = std::fs::remove_dir_all(dir.path().join("target"));
    dir
}

#[test]
fn statistics_count_findings_per_lint_and_per_file() {
    let demo = common::repo().join("fixtures/demo");
    let all = findings(&demo, &[]);
    let out = run_in(&demo, &["--statistics", "--no-cache"]);
    out.assert_code(0);
    let count = |pred: &dyn Fn(&Found) -> bool| all.iter().filter(|f| pred(f)).count();
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines[0].trim(), "count  lint", "{}", out.stdout);
    let notify = count(&|f| f.0 == "src/notify.rs");
    assert!(notify >= 2, "{all:?}");
    assert!(
        lines.contains(&format!("{notify:>5}  src/notify.rs").as_str()),
        "{}",
        out.stdout
    );
    let then_act = count(&|f| f.3 == "idem::check_then_act");
    assert!(
        lines.contains(&format!("{then_act:>5}  idem::check_then_act").as_str()),
        "{}",
        out.stdout
    );
    assert!(
        lines.contains(&format!("{:>5}  total", all.len()).as_str()),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("warning["), "no findings, only counts");
    // The same as one JSON object, most first.
    let json = run_in(
        &demo,
        &["--statistics", "--message-format", "json", "--no-cache"],
    );
    let v: serde_json::Value = serde_json::from_str(json.stdout.trim()).expect("one object");
    assert_eq!(v["total"], all.len());
    assert_eq!(
        v["files"][0],
        serde_json::json!({"file": "src/notify.rs", "count": notify})
    );
}

#[test]
fn a_group_sets_each_of_its_lints_on_the_command_line_and_in_the_config() {
    let dir = claims();
    let root = dir.path();
    let none = findings(root, &[]);
    assert!(
        none.iter().all(|f| f.3 != "idem::claim_without_expiry"),
        "claim_without_expiry is at allow: {none:?}"
    );
    let nursery: Vec<&str> = idem_lints::lints::ALL
        .iter()
        .filter(|l| !l.is_meta && l.default_level == idem_lints::Level::Allow)
        .map(|l| l.name)
        .collect();
    assert!(nursery.len() >= 8, "{nursery:?}");
    let mut flags = Vec::new();
    for name in &nursery {
        flags.extend(["-W", name]);
    }
    let one_by_one = findings(root, &flags);
    assert!(
        one_by_one
            .iter()
            .any(|f| f.3 == "idem::claim_without_expiry"),
        "{one_by_one:?}"
    );
    assert_eq!(findings(root, &["-W", "nursery"]), one_by_one);
    assert_eq!(findings(root, &["-W", "idem::all"]), one_by_one);
    // Later flags win over the group.
    assert!(
        findings(root, &["-W", "nursery", "-A", "claim_without_expiry"])
            .iter()
            .all(|f| f.3 != "idem::claim_without_expiry")
    );
    // In the config, a lint named beside its group wins, whatever the order.
    std::fs::write(
        root.join("idem-lint.toml"),
        "[lints]\nclaim_not_released = \"allow\"\nnursery = \"deny\"\n",
    )
    .expect("write");
    let configured = findings(root, &[]);
    assert!(!configured.is_empty());
    assert!(configured.iter().all(|f| f.3 != "idem::claim_not_released"));
    let in_nursery = |code: &str| nursery.iter().any(|n| code == format!("idem::{n}"));
    assert!(configured
        .iter()
        .filter(|f| in_nursery(&f.3))
        .all(|f| f.2 == "error"));
    assert!(configured.iter().any(|f| in_nursery(&f.3)));
    assert_eq!(findings(root, &["-A", "all"]), vec![]);
}

#[test]
fn overrides_set_levels_for_the_paths_they_match() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path();
    common::copy_dir(&common::repo().join("fixtures/demo"), root);
    let all = findings(root, &[]);
    assert!(all.iter().any(|f| f.0 == "src/notify.rs"));
    std::fs::write(
        root.join("idem-lint.toml"),
        "[[overrides]]\npaths = [\"src/notify.rs\"]\nlints = { all = \"allow\" }\n\n\
         [[overrides]]\npaths = [\"/src/billing.rs\"]\nlints = { idempotency = \"deny\" }\n",
    )
    .expect("write");
    let expected: Vec<_> = all
        .iter()
        .filter(|f| f.0 != "src/notify.rs")
        .map(|f| {
            let level = if f.0 == "src/billing.rs" {
                "error"
            } else {
                f.2.as_str()
            };
            (f.0.clone(), f.1, level.to_string(), f.3.clone())
        })
        .collect();
    assert_eq!(findings(root, &[]), expected);
    // An override judges code, not the run: `-W all` does not bring the file back.
    assert!(findings(root, &["-W", "all"])
        .iter()
        .all(|f| f.0 != "src/notify.rs"));
    // Errors name the key.
    std::fs::write(
        root.join("idem-lint.toml"),
        "[[overrides]]\npaths = [\"tests/\"]\nlints = { nope = \"allow\" }\n",
    )
    .expect("write");
    run_in(root, &["--no-cache"])
        .assert_one_line_error("key `overrides[0].lints.nope`: unknown lint");
}

#[test]
fn exclude_leaves_a_member_out_of_the_workspace() {
    let ws = common::repo().join("fixtures/cross_member/nondeterministic_key");
    let all = findings(&ws, &["--workspace"]);
    assert!(all.iter().any(|f| f.0.starts_with("common/")), "{all:?}");
    let service: Vec<_> = all
        .iter()
        .filter(|f| f.0.starts_with("service/"))
        .cloned()
        .collect();
    assert!(!service.is_empty());
    // `service` still reads `common`'s library: its own findings are unchanged.
    assert_eq!(
        findings(&ws, &["--workspace", "--exclude", "common"]),
        service
    );
    let out = run(&[s(&ws), "--workspace", "--exclude", "nope", "--no-cache"]);
    assert!(
        out.stderr
            .contains("warning: excluded package `nope` is not a member of the workspace"),
        "{}",
        out.stderr
    );
    run(&[s(&ws), "--exclude", "common"])
        .assert_one_line_error("`--exclude` goes with `--workspace`");
}
