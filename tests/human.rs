//! Snapshots of the human (and short) rendering, compared exactly with `--color never`.
//! Set `IDEM_LINT_BLESS=1` to rewrite the expected files after an intended change.

mod common;

use common::run_in;

fn check_snapshot(name: &str, actual: &str) {
    let path = common::repo().join("tests/snapshots").join(name);
    if std::env::var_os("IDEM_LINT_BLESS").is_some() {
        std::fs::write(&path, actual).expect("bless");
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run with IDEM_LINT_BLESS=1 to create it)",
            path.display()
        )
    });
    if expected != actual {
        let diff: Vec<String> = diff_lines(&expected, actual);
        panic!(
            "snapshot {name} differs (IDEM_LINT_BLESS=1 rewrites it):\n{}",
            diff.join("\n")
        );
    }
}

/// A line diff good enough for short snapshots: `-` expected, `+` actual.
fn diff_lines(expected: &str, actual: &str) -> Vec<String> {
    let (e, a): (Vec<_>, Vec<_>) = (expected.lines().collect(), actual.lines().collect());
    let mut out = Vec::new();
    for i in 0..e.len().max(a.len()) {
        match (e.get(i), a.get(i)) {
            (Some(x), Some(y)) if x == y => out.push(format!("  {x}")),
            (x, y) => {
                if let Some(x) = x {
                    out.push(format!("- {x}"));
                }
                if let Some(y) = y {
                    out.push(format!("+ {y}"));
                }
            }
        }
    }
    out
}

fn fixture() -> std::path::PathBuf {
    common::repo().join("fixtures/parse_errors")
}

#[test]
fn human_rendering() {
    // Run inside the fixture so paths are relative to it, as a user would see them.
    let out = run_in(&fixture(), &["--color", "never"]);
    out.assert_code(0);
    check_snapshot("parse_errors.human.txt", &out.stdout);
}

#[test]
fn human_rendering_at_deny() {
    let out = run_in(&fixture(), &["--color", "never", "-D", "warnings"]);
    out.assert_code(1);
    check_snapshot("parse_errors.deny.txt", &out.stdout);
}

#[test]
fn short_rendering() {
    let out = run_in(&fixture(), &["--message-format", "short"]);
    check_snapshot("parse_errors.short.txt", &out.stdout);
}

#[test]
fn color_always_adds_escapes_and_never_removes_them() {
    let colored = run_in(&fixture(), &["--color", "always"]);
    assert!(colored.stdout.contains("\u{1b}["), "{}", colored.stdout);
    let plain = run_in(&fixture(), &["--color", "never"]);
    assert!(!plain.stdout.contains('\u{1b}'));
    // Not a terminal: auto means no color.
    let auto = run_in(&fixture(), &[]);
    assert_eq!(auto.stdout, plain.stdout);
}

#[test]
fn paths_are_relative_to_the_current_directory() {
    let out = run_in(
        &common::repo(),
        &["fixtures/parse_errors", "--message-format", "short"],
    );
    assert!(
        out.stdout
            .starts_with("fixtures/parse_errors/src/broken.rs:2:13: warning[idem::parse_error]"),
        "{}",
        out.stdout
    );
    // Outside the current directory a path stays absolute.
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let out = run_in(
        elsewhere.path(),
        &[common::s(&fixture()), "--message-format", "short"],
    );
    let expected = format!(
        "{}:2:13: warning",
        fixture().join("src/broken.rs").display()
    );
    assert!(out.stdout.starts_with(&expected), "{}", out.stdout);
}

#[test]
fn labels_notes_help_and_suggestions() {
    use cargo_idem_lint::cli::MessageFormat;
    check_snapshot(
        "decorated.human.txt",
        &common::emit_decorated(MessageFormat::Human),
    );
}

/// Suggestions read as rustc's (issue 25, item 5): a `help:` line, then the edited lines with
/// their numbers, `+`/`~` under an edit inside a line or `-`/`+` lines; each once, no help
/// line repeated by a suggestion, and no line ending in blanks.
#[test]
fn suggestions_render_as_snippets_of_the_edited_lines() {
    let demo = common::repo().join("fixtures/demo");
    let out = run_in(&demo, &["--color", "never", "--no-cache"]);
    check_snapshot("demo.human.txt", &out.stdout);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert!(
        lines.iter().all(|l| l.trim_end() == *l),
        "{:?}",
        lines.iter().find(|l| l.trim_end() != **l)
    );
    let helps: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].starts_with("help: "))
        .collect();
    assert_eq!(
        helps.len(),
        5,
        "one per finding's suggestion:\n{}",
        out.stdout
    );
    for i in helps {
        // The gutter, then a numbered line of code.
        assert!(lines[i + 1].trim_end().ends_with('|'), "{}", lines[i + 1]);
        let numbered = lines[i + 2].trim_start();
        assert!(
            numbered.starts_with(|c: char| c.is_ascii_digit()),
            "{}",
            lines[i + 2]
        );
        let message = lines[i].trim_start_matches("help: ");
        let repeated = lines
            .iter()
            .filter(|l| l.trim_start().trim_start_matches("= help: ") == message)
            .count();
        assert_eq!(repeated, 0, "`{message}` also as a help line");
    }
}
