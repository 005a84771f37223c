//! Baselines and changed-files mode (issue 9, item 5), run as a user would.

mod common;

use common::{run_in, Run};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A copy of `fixtures/demo` in a fresh directory.
fn demo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    common::copy_dir(&common::repo().join("fixtures/demo"), dir.path());
    dir
}

fn edit(path: &Path, f: impl FnOnce(String) -> String) {
    let text = std::fs::read_to_string(path).expect("read");
    std::fs::write(path, f(text)).expect("write");
}

/// `(file, line, level, code)` of every finding, file relative to `dir`.
fn findings(dir: &Path, args: &[&str]) -> (Run, Vec<(String, u64, String, String)>) {
    let mut all = vec!["--message-format", "json"];
    all.extend_from_slice(args);
    let out = run_in(dir, &all);
    let f = out.findings(dir);
    (out, f)
}

#[test]
fn a_baseline_hides_known_findings_and_counts_stale_ones() {
    let dir = demo();
    let root = dir.path();
    let (_, all) = findings(root, &[]);
    assert!(all.len() >= 5, "{all:?}");
    let written = run_in(root, &["--write-baseline", "idem-baseline.json"]);
    written.assert_code(0);
    assert!(
        written
            .stderr
            .contains(&format!("wrote {} findings", all.len())),
        "{}",
        written.stderr
    );
    assert!(!written.stdout.contains("warning["), "{}", written.stdout);
    let text = std::fs::read_to_string(root.join("idem-baseline.json")).expect("baseline");
    assert!(
        !text.contains("\"line\""),
        "keyed without line numbers: {text}"
    );

    // Known findings are hidden, even at deny.
    let (out, new) = findings(
        root,
        &["--baseline", "idem-baseline.json", "-D", "warnings"],
    );
    out.assert_code(0);
    assert_eq!(new, vec![], "{}", out.stdout);
    assert!(
        out.stderr
            .contains(&format!("{} findings hidden by the baseline", all.len())),
        "{}",
        out.stderr
    );

    // Lines added above every finding move them; the baseline still matches.
    let notify = root.join("src/notify.rs");
    edit(&notify, |t| format!("// moved\n// down\n{t}"));
    let (_, new) = findings(root, &["--baseline", "idem-baseline.json"]);
    assert_eq!(new, vec![], "edits elsewhere do not resurrect entries");

    // A new mistake is reported; the old ones stay hidden.
    let thumb = root.join("src/thumbnail_stage.rs");
    edit(&thumb, |t| {
        t.replace(
            "        Ok(())\n    }\n\n    /// Right",
            "        Ok(())\n    }\n\n    pub async fn again(&self, event: &Event) {\n        self.mediaconvert.create_job().role(&self.role_arn).user_metadata(\"f\", &event.file_id).send().await.ok();\n    }\n\n    /// Right",
        )
    });
    let (out, new) = findings(
        root,
        &["--baseline", "idem-baseline.json", "-D", "warnings"],
    );
    out.assert_code(1);
    assert_eq!(new.len(), 1, "{new:?}");
    assert_eq!(new[0].0, "src/thumbnail_stage.rs");
    assert_eq!(new[0].3, "idem::missing_idempotency_token");

    // Fixing a known finding leaves its entry stale, counted in the human summary.
    edit(&notify, |t| {
        t.replace(
            "    conn.set_nx(format!(\"notified:{dedupe_key}\"), 1).await //~ WARN nondeterministic_key",
            "    conn.set_nx(format!(\"notified:{}\", ready.event_id), 1).await",
        )
    });
    let human = run_in(
        root,
        &["--baseline", "idem-baseline.json", "--color", "never"],
    );
    assert!(
        human.stdout.contains("1 entry no longer matches"),
        "{}",
        human.stdout
    );
}

#[test]
fn a_bad_baseline_is_an_error() {
    let dir = demo();
    std::fs::write(
        dir.path().join("b.json"),
        "{\"version\": 9, \"findings\": []}",
    )
    .expect("write");
    run_in(dir.path(), &["--baseline", "b.json"]).assert_one_line_error("version 9");
    run_in(dir.path(), &["--baseline", "missing.json"])
        .assert_one_line_error("could not read the baseline `missing.json`");
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_partial_report_is_the_full_report_filtered() {
    let dir = demo();
    let root = dir.path();
    let (_, all) = findings(root, &[]);
    let in_file = |file: &str| -> Vec<_> { all.iter().filter(|f| f.0 == file).cloned().collect() };
    let full_json = run_in(root, &["--message-format", "json"]).messages();

    // `--only` with two files: exactly their findings, with the full run's messages.
    let (_, only) = findings(root, &["--only", "src/notify.rs", "src/billing.rs"]);
    let mut expected = in_file("src/billing.rs");
    expected.extend(in_file("src/notify.rs"));
    expected.sort();
    assert_eq!(only, expected);
    assert!(expected.len() >= 4, "{all:?}");
    let only_json = run_in(
        root,
        &["--message-format", "json", "--only", "src/notify.rs"],
    )
    .messages();
    for m in &only_json {
        assert!(
            full_json.contains(m),
            "a message differs from the full run's: {m}"
        );
    }

    // A source file as PATH means the same, run from anywhere.
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let notify: PathBuf = root.join("src/notify.rs");
    let out = run_in(
        elsewhere.path(),
        &[notify.to_str().expect("utf-8"), "--message-format", "json"],
    );
    assert_eq!(out.findings(root), in_file("src/notify.rs"));

    // `--changed-since`: files changed since a commit, and untracked ones.
    git(root, &["init", "-q"]);
    git(root, &["add", "-A"]);
    git(root, &["commit", "-qm", "demo"]);
    let (_, none) = findings(root, &["--changed-since", "HEAD"]);
    assert_eq!(none, vec![]);
    edit(&root.join("src/billing.rs"), |t| format!("// touched\n{t}"));
    let (out, changed) = findings(root, &["--changed-since", "HEAD"]);
    out.assert_code(0);
    let moved: Vec<_> = in_file("src/billing.rs")
        .into_iter()
        .map(|(f, l, lv, c)| (f, l + 1, lv, c))
        .collect();
    assert_eq!(changed, moved);
    run_in(root, &["--changed-since", "no-such-ref"]).assert_one_line_error("no-such-ref");
}

/// Issue 38, item 6: editing only a comment on a flagged line keeps its entry matching;
/// `--strict-baseline` fails on stale entries; `--prune-baseline` drops them and records
/// nothing new.
#[test]
fn comments_do_not_count_and_stale_entries_are_pruned_or_fail() {
    let dir = demo();
    let root = dir.path();
    let (_, all) = findings(root, &[]);
    run_in(root, &["--write-baseline", "b.json"]).assert_code(0);
    let entries = |root: &Path| -> usize {
        let text = std::fs::read_to_string(root.join("b.json")).expect("baseline");
        let v: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        v["findings"].as_array().expect("findings").len()
    };
    assert_eq!(entries(root), all.len());

    // Only the trailing comment of a flagged line changes: still known.
    let notify = root.join("src/notify.rs");
    edit(&notify, |t| {
        t.replace(
            "//~ WARN check_then_act",
            "//~ WARN check_then_act // reviewed: see PR 12",
        )
    });
    let (out, new) = findings(root, &["--baseline", "b.json", "--strict-baseline"]);
    assert_eq!(new, vec![], "a comment edit resurrected a finding");
    out.assert_code(0);

    // One finding fixed (its entry goes stale), one new mistake.
    edit(&notify, |t| {
        t.replace(
            "let dedupe_key = uuid::Uuid::new_v4().to_string();",
            "let dedupe_key = ready.event_id.to_string();",
        )
    });
    edit(&root.join("src/thumbnail_stage.rs"), |t| {
        t.replace(
            "        Ok(())\n    }\n\n    /// Right",
            "        Ok(())\n    }\n\n    pub async fn again(&self, event: &Event) {\n        self.mediaconvert.create_job().role(&self.role_arn).user_metadata(\"f\", &event.file_id).send().await.ok();\n    }\n\n    /// Right",
        )
    });
    let strict = run_in(root, &["--baseline", "b.json", "--strict-baseline"]);
    strict.assert_code(1);
    assert!(
        strict
            .stderr
            .contains("error: 1 baseline entry no longer match a finding (`--strict-baseline`)"),
        "{}",
        strict.stderr
    );
    run_in(root, &["--baseline", "b.json"]).assert_code(0);

    let (pruned, new) = findings(root, &["--prune-baseline", "b.json"]);
    pruned.assert_code(0);
    assert!(
        pruned
            .stderr
            .contains("pruned 1 stale entry from the baseline `b.json`"),
        "{}",
        pruned.stderr
    );
    assert_eq!(new.len(), 1, "the new finding is reported: {new:?}");
    assert_eq!(new[0].3, "idem::missing_idempotency_token");
    assert_eq!(
        entries(root),
        all.len() - 1,
        "nothing recorded, one dropped"
    );
    let (out, again) = findings(root, &["--baseline", "b.json", "--strict-baseline"]);
    out.assert_code(0);
    assert_eq!(again, new, "the new finding was not recorded");
}

/// A baseline written before comments were left out of the hash (by 2107073, this entry
/// exactly) still matches its finding while the line is unchanged, and `--prune-baseline`
/// rewrites it with today's hash, after which a comment edit keeps it matching.
#[test]
fn a_baseline_of_the_first_hash_still_matches_and_prune_migrates_it() {
    let dir = demo();
    let root = dir.path();
    std::fs::write(
        root.join("b.json"),
        r#"{"version": 1, "findings": [{"lint": "check_then_act", "file": "src/notify.rs",
            "hash": "5428ec31088f2c56", "message": ""}]}"#,
    )
    .expect("write");
    let known = |root: &Path| {
        let (out, new) = findings(root, &["--baseline", "b.json", "--strict-baseline"]);
        out.assert_code(0);
        !new.iter().any(|f| f.3 == "idem::check_then_act")
    };
    assert!(known(root), "the first format's hash matches");
    run_in(root, &["--prune-baseline", "b.json"]).assert_code(0);
    let text = std::fs::read_to_string(root.join("b.json")).expect("read");
    assert!(!text.contains("5428ec31088f2c56"), "rewritten: {text}");
    edit(&root.join("src/notify.rs"), |t| {
        t.replace("//~ WARN check_then_act", "//~ WARN check_then_act (ok)")
    });
    assert!(known(root), "today's hash leaves the comment out");
}
