//! `--fix`, `--unsafe-fixes` and `--diff` (issue 9, item 3). Fixtures under
//! `fixtures/fixes/` hold `.fixed` files beside their sources, as Clippy's UI tests do: the
//! binary's fix of `x.rs` must read as `x.fixed`, a source without one must not change, and
//! a second run must change nothing.

mod common;

use cargo_idem_lint::fix;
use common::run_in;
use idem_lints::model::Span;
use idem_lints::{Applicability, Diagnostic};
use std::path::{Path, PathBuf};

/// Every `.rs` file below `dir`, sorted.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn fixtures() -> Vec<PathBuf> {
    let root = common::repo().join("fixtures/fixes");
    let mut out: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("fixtures/fixes")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("Cargo.toml").is_file())
        .collect();
    out.sort();
    assert!(!out.is_empty());
    out
}

#[test]
fn fixes_match_the_fixed_files_and_a_second_run_changes_nothing() {
    for fixture in fixtures() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("crate");
        common::copy_dir(&fixture, &dir);
        let originals: Vec<(PathBuf, String)> = sources(&dir)
            .into_iter()
            .map(|p| (p.clone(), read(&p)))
            .collect();

        // Safe fixes only: these are all `MaybeIncorrect`, so nothing changes.
        let safe = run_in(&dir, &["--fix"]);
        safe.assert_code(0);
        // ... and the summary says how many `--unsafe-fixes` would apply, and how.
        let unsafe_count = run_in(&dir, &["--message-format", "json"])
            .messages()
            .iter()
            .filter(|m| {
                m["message"]["children"].as_array().is_some_and(|c| {
                    c.iter().any(|c| {
                        c["spans"].as_array().is_some_and(|s| {
                            s.iter()
                                .any(|s| s["suggestion_applicability"] == "MaybeIncorrect")
                        })
                    })
                })
            })
            .count();
        assert!(unsafe_count > 0, "{}", fixture.display());
        let hint = format!(
            "fixed 0 findings in 0 files; {unsafe_count} more finding{} {} a fix that may be incorrect: review with `--diff --unsafe-fixes`, apply with `--fix --unsafe-fixes`",
            if unsafe_count == 1 { "" } else { "s" },
            if unsafe_count == 1 { "has" } else { "have" },
        );
        assert!(
            safe.stderr.contains(&hint),
            "{}\n{}",
            fixture.display(),
            safe.stderr
        );
        for (p, text) in &originals {
            assert_eq!(
                &read(p),
                text,
                "{}: changed without --unsafe-fixes",
                p.display()
            );
        }

        // `--diff` prints the change and writes nothing.
        let diff = run_in(&dir, &["--diff", "--unsafe-fixes"]);
        diff.assert_code(0);
        assert!(diff.stdout.contains("+++ b/src/"), "{}", diff.stdout);
        for (p, text) in &originals {
            assert_eq!(&read(p), text, "{}: --diff wrote", p.display());
        }

        let fixed = run_in(&dir, &["--fix", "--unsafe-fixes"]);
        fixed.assert_code(0);
        let mut checked = 0;
        for (p, original) in &originals {
            let expected = p.with_extension("fixed");
            if expected.is_file() {
                assert_eq!(read(p), read(&expected), "{}", p.display());
                // Every changed line is in the diff `--diff` printed.
                for line in read(p).lines().filter(|l| !original.contains(*l)) {
                    assert!(diff.stdout.contains(&format!("+{line}\n")), "{line}");
                }
                checked += 1;
            } else {
                assert_eq!(
                    &read(p),
                    original,
                    "{}: no .fixed, must not change",
                    p.display()
                );
            }
        }
        assert!(checked > 0, "{}: no .fixed file", fixture.display());
        assert!(fixed.stderr.contains("note: fixed "), "{}", fixed.stderr);

        // The fixed findings are gone; a second run changes nothing.
        let after: Vec<(PathBuf, String)> = sources(&dir)
            .into_iter()
            .map(|p| (p.clone(), read(&p)))
            .collect();
        let again = run_in(&dir, &["--fix", "--unsafe-fixes"]);
        again.assert_code(0);
        assert!(
            again.stderr.contains("fixed 0 findings in 0 files"),
            "{}",
            again.stderr
        );
        for (p, text) in &after {
            assert_eq!(
                &read(p),
                text,
                "{}: the second --fix changed it",
                p.display()
            );
        }
    }
}

/// A crate linted through the library, with findings whose suggestions the test chooses.
fn report_with(
    text: &str,
    suggestions: &[(&str, &str, Applicability)],
) -> (tempfile::TempDir, cargo_idem_lint::report::Report) {
    use cargo_idem_lint::{config::Config, discovery, parse::ParseOptions, report};
    let dir = common::tree(&[
        ("Cargo.toml", &common::manifest("fixes", "")),
        ("src/lib.rs", text),
    ]);
    let ws = discovery::discover(&discovery::Selection::dir(dir.path())).expect("discovers");
    let config = Config::load(&ws).expect("config");
    let mut report = report::check(&ws, &ParseOptions::default(), &config, &[]).expect("checks");
    let id = report.packages[0].package.files[0].id;
    for (needle, replacement, applicability) in suggestions {
        let lo = text.find(needle).expect("needle") as u32;
        let span = Span::new(id, lo, lo + needle.len() as u32);
        let mut d = Diagnostic::new(&idem_lints::lint::PARSE_ERROR, span, "test finding");
        d.suggest("replace", span, *replacement, *applicability);
        report.findings.push(cargo_idem_lint::report::Finding {
            package: 0,
            diag: d,
        });
    }
    (dir, report)
}

#[test]
fn overlapping_fixes_are_resolved_in_source_order() {
    let text = "pub fn f() -> u32 {\n    let a = 1;\n    a + 2\n}\n";
    let (_dir, report) = report_with(
        text,
        &[
            (
                "let a = 1;",
                "let a = 10;",
                Applicability::MachineApplicable,
            ),
            // Overlaps the first: left for the next run.
            ("a = 1", "b = 1", Applicability::MachineApplicable),
            // The same edit twice is made once.
            ("a + 2", "a + 3", Applicability::MachineApplicable),
            ("a + 2", "a + 3", Applicability::MachineApplicable),
            // Not applied without --unsafe-fixes, never with placeholders.
            ("u32", "u64", Applicability::MaybeIncorrect),
            ("pub fn", "/* vis */ fn", Applicability::HasPlaceholders),
        ],
    );
    let plans = fix::plan(&report, &|a| fix::accepts(a, false));
    let plan = plans.values().next().expect("one file");
    assert_eq!((plan.fixed, plan.deferred), (3, 1));
    assert_eq!(
        fix::fixed_text(plan).expect("parses"),
        "pub fn f() -> u32 {\n    let a = 10;\n    a + 3\n}\n"
    );
    let plans = fix::plan(&report, &|a| fix::accepts(a, true));
    let plan = plans.values().next().expect("one file");
    assert!(fix::fixed_text(plan).expect("parses").contains("-> u64"));
}

#[test]
fn a_fix_that_breaks_the_parse_is_not_written() {
    let text = "pub fn f() -> u32 {\n    1\n}\n";
    let (_dir, report) = report_with(
        text,
        &[("-> u32 {", "-> u32 ", Applicability::MachineApplicable)],
    );
    let plans = fix::plan(&report, &|a| fix::accepts(a, false));
    let plan = plans.values().next().expect("one file");
    let err = fix::fixed_text(plan).expect_err("unparsable");
    // The unclosed brace is found at the end of the file.
    assert!(err.ends_with(" at 3:1"), "{err}");
}

#[test]
fn the_unguarded_entry_point_is_offered_the_guard_attribute_with_a_store_placeholder() {
    let demo = common::repo().join("fixtures/demo");
    let out = run_in(&demo, &["--message-format", "json"]);
    let m = out
        .messages()
        .into_iter()
        .find(|m| m["message"]["code"]["code"] == "idem::unguarded_entry_point")
        .expect("the demo's unguarded entry point");
    let fix = m["message"]["children"]
        .as_array()
        .expect("children")
        .iter()
        .flat_map(|c| c["spans"].as_array().cloned().unwrap_or_default())
        .find(|s| !s["suggested_replacement"].is_null())
        .expect("a suggestion");
    assert_eq!(
        fix["suggested_replacement"],
        "#[idempotent(key = ready.event_id, store = /* store */)]"
    );
    assert_eq!(fix["suggestion_applicability"], "HasPlaceholders");
    // After the doc comment of `admin_resend`, the line above the fn.
    let notify = read(&demo.join("src/notify.rs"));
    let at = fix["byte_start"].as_u64().expect("byte_start") as usize;
    assert!(
        notify[..at].ends_with("double click mails twice."),
        "{}",
        &notify[..at]
    );
    assert!(notify[at..]
        .trim_start()
        .starts_with("pub async fn admin_resend"));
}

#[test]
fn unsafe_fixes_alone_is_a_usage_error() {
    run_in(&common::repo(), &["fixtures/demo", "--unsafe-fixes"])
        .assert_one_line_error("`--unsafe-fixes` goes with `--fix` or `--diff`");
}
