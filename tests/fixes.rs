//! `--fix`, `--unsafe-fixes` and `--diff` (issue 9, item 3). Fixtures under
//! `fixtures/fixes/` hold `.fixed` files beside their sources, as Clippy's UI tests do: the
//! binary's fix of `x.rs` must read as `x.fixed`, a source without one must not change, and
//! a second run must change nothing.

mod common;

use cargo_idem_lint::fix;
use common::run_in;
use idem_lints::model::Span;
use idem_lints::{Applicability, Diagnostic};
use serde_json::Value;
use std::collections::BTreeMap;
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
        "\n#[idem_guard::idempotent(key = ready.event_id, store = /* store */)]"
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

/// Issue 38, item 3: `--diff` without `--unsafe-fixes` says how to apply the unsafe fixes,
/// and that is `--fix --unsafe-fixes` (`--diff` applies nothing).
#[test]
fn diff_tells_to_apply_with_fix() {
    let dir = common::repo().join("fixtures/fixes/mark_into_transaction");
    let diff = run_in(&dir, &["--diff", "--no-cache"]);
    diff.assert_code(0);
    assert!(
        diff.stderr
            .contains("review with `--diff --unsafe-fixes`, apply with `--fix --unsafe-fixes`"),
        "{}",
        diff.stderr
    );
    assert!(
        !diff.stderr.contains("apply with `--diff"),
        "{}",
        diff.stderr
    );
}

#[test]
fn unsafe_fixes_alone_is_a_usage_error() {
    run_in(&common::repo(), &["fixtures/demo", "--unsafe-fixes"])
        .assert_one_line_error("`--unsafe-fixes` goes with `--fix` or `--diff`");
}

/// The files as a tool that reads the JSON leaves them (rustfix, rust-analyzer's "apply
/// suggestion"): per finding its first suggestion whose applicability is in `accept`, each
/// span's byte range replaced by its `suggested_replacement` as it is. A suggestion that
/// overlaps one taken before is left out and the same edit twice is made once, the rule
/// `--fix` follows, so the two can be compared.
fn apply_json_suggestions(messages: &[Value], accept: &[&str]) -> BTreeMap<PathBuf, String> {
    let mut edits: BTreeMap<PathBuf, Vec<(usize, usize, String)>> = BTreeMap::new();
    for m in messages {
        let children = m["message"]["children"].as_array().expect("children");
        let Some(spans) = children
            .iter()
            .filter_map(|c| c["spans"].as_array())
            .find(|spans| {
                spans.first().is_some_and(|s| {
                    s["suggestion_applicability"]
                        .as_str()
                        .is_some_and(|a| accept.contains(&a))
                })
            })
        else {
            continue;
        };
        let taken: Vec<(PathBuf, (usize, usize, String))> = spans
            .iter()
            .map(|s| {
                let at = |k: &str| s[k].as_u64().expect("byte offset") as usize;
                let text = s["suggested_replacement"].as_str().expect("replacement");
                (
                    PathBuf::from(s["file_name"].as_str().expect("file_name")),
                    (at("byte_start"), at("byte_end"), text.to_string()),
                )
            })
            .collect();
        let clashes = taken.iter().any(|(file, (lo, hi, text))| {
            edits.get(file).is_some_and(|done| {
                done.iter().any(|(dlo, dhi, dtext)| {
                    let same = (dlo, dhi, dtext) == (lo, hi, text);
                    let same_point = lo == dlo && (lo == hi || dlo == dhi);
                    !same && (same_point || (lo < dhi && dlo < hi))
                })
            })
        });
        if clashes {
            continue;
        }
        for (file, edit) in taken {
            let done = edits.entry(file).or_default();
            if !done.contains(&edit) {
                done.push(edit);
            }
        }
    }
    edits
        .into_iter()
        .map(|(file, mut list)| {
            let mut text = read(&file);
            list.sort_by_key(|(lo, hi, _)| std::cmp::Reverse((*lo, *hi)));
            for (lo, hi, with) in list {
                text.replace_range(lo..hi, &with);
            }
            (file, text)
        })
        .collect()
}

/// The fixes' fixtures and the demo, each copied to a temporary directory.
fn fix_inputs() -> Vec<(tempfile::TempDir, PathBuf)> {
    let mut inputs = fixtures();
    inputs.push(common::repo().join("fixtures/demo"));
    inputs
        .into_iter()
        .map(|from| {
            let tmp = tempfile::tempdir().expect("tempdir");
            let dir = tmp.path().join("crate");
            common::copy_dir(&from, &dir);
            (tmp, dir)
        })
        .collect()
}

#[test]
fn json_suggestions_applied_literally_make_what_fix_makes() {
    for (_tmp, dir) in fix_inputs() {
        let json = run_in(&dir, &["--message-format", "json"]);
        let messages = json.messages();
        let literal = apply_json_suggestions(&messages, &["MachineApplicable", "MaybeIncorrect"]);
        assert!(!literal.is_empty(), "{}: no suggestion", dir.display());
        let originals: Vec<(PathBuf, String)> = sources(&dir)
            .into_iter()
            .map(|p| (p.clone(), read(&p)))
            .collect();
        run_in(&dir, &["--fix", "--unsafe-fixes"]).assert_code(0);
        for (p, original) in &originals {
            let expected = literal.get(p).unwrap_or(original);
            assert_eq!(&read(p), expected, "{}", p.display());
        }
    }
}

#[test]
fn every_json_suggestion_applied_literally_is_the_edit_fix_would_make() {
    use cargo_idem_lint::{config::Config, discovery, parse::ParseOptions, report};
    for (_tmp, dir) in fix_inputs() {
        let json = run_in(&dir, &["--message-format", "json"]);
        let all = ["MachineApplicable", "MaybeIncorrect", "HasPlaceholders"];
        let literal = apply_json_suggestions(&json.messages(), &all);
        let ws = discovery::discover(&discovery::Selection::dir(&dir)).expect("discovers");
        let config = Config::load(&ws).expect("config");
        let report = report::check(&ws, &ParseOptions::default(), &config, &[]).expect("checks");
        let plans = fix::plan(&report, &|_| true);
        let planned: BTreeMap<PathBuf, String> = plans
            .iter()
            .map(|(p, plan)| (p.clone(), fix::apply(&plan.original, &plan.edits)))
            .collect();
        assert_eq!(literal, planned, "{}", dir.display());
        for (p, text) in &literal {
            if let Err(e) = syn::parse_file(text) {
                panic!("{}: {e}\n{text}", p.display());
            }
        }
    }
}
