//! Configuration: `idem-lint.toml`, `[workspace.metadata.idem-lint]`,
//! `[package.metadata.idem-lint]`, levels, settings and their errors.

mod common;

use common::{manifest, run, s, tree};

const BROKEN: &str = "pub fn f() {\n    let x = ;\n}\n";

#[test]
fn idem_lint_toml_sets_levels() {
    let dir = tree(&[
        ("Cargo.toml", &manifest("cfg", "")),
        ("idem-lint.toml", "[lints]\nparse_error = \"deny\"\n"),
        ("src/lib.rs", BROKEN),
    ]);
    let out = run(&[s(dir.path()), "--message-format", "short"]);
    out.assert_code(1);
    assert!(
        out.stdout.contains("error[idem::parse_error]"),
        "{}",
        out.stdout
    );
    // The command line overrides the config.
    run(&[s(dir.path()), "-W", "parse_error"]).assert_code(0);
    run(&[
        s(dir.path()),
        "-A",
        "parse_error",
        "--message-format",
        "json",
    ])
    .assert_code(0);
}

#[test]
fn table_form_with_level() {
    let dir = tree(&[
        ("Cargo.toml", &manifest("cfg", "")),
        (
            "idem-lint.toml",
            "file-timeout-ms = 5_000\n[lints.parse_error]\nlevel = \"allow\"\n",
        ),
        ("src/lib.rs", BROKEN),
    ]);
    let out = run(&[s(dir.path()), "--message-format", "short"]);
    out.assert_code(0);
    assert_eq!(out.stdout, "");
}

#[test]
fn workspace_metadata_applies_to_members_and_package_metadata_overrides() {
    let dir = tree(&[
        (
            "Cargo.toml",
            "[workspace]\nmembers = [\"a\", \"b\"]\n\n[workspace.metadata.idem-lint.lints]\nparse_error = \"deny\"\n",
        ),
        ("a/Cargo.toml", &manifest("a", "")),
        ("a/src/lib.rs", BROKEN),
        (
            "b/Cargo.toml",
            &manifest("b", "\n[package.metadata.idem-lint.lints]\nparse_error = \"warn\"\n"),
        ),
        ("b/src/lib.rs", BROKEN),
    ]);
    let out = run(&[s(dir.path()), "--message-format", "short"]);
    out.assert_code(1);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", out.stdout);
    assert!(
        lines
            .iter()
            .any(|l| l.contains("a/src/lib.rs") && l.contains("error[")),
        "{}",
        out.stdout
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("b/src/lib.rs") && l.contains("warning[")),
        "{}",
        out.stdout
    );
}

#[test]
fn unknown_lint_names_file_and_key() {
    let dir = tree(&[
        ("Cargo.toml", &manifest("cfg", "")),
        (
            "idem-lint.toml",
            "[lints]\nparse_error = \"warn\"\nno_such_lint = \"deny\"\n",
        ),
        ("src/lib.rs", ""),
    ]);
    let out = run(&[s(dir.path())]);
    out.assert_one_line_error(
        "idem-lint.toml:3:1: key `lints.no_such_lint`: unknown lint `no_such_lint`",
    );
}

#[test]
fn unknown_lint_in_package_metadata() {
    let dir = tree(&[
        (
            "Cargo.toml",
            &manifest(
                "cfg",
                "\n[package.metadata.idem-lint.lints]\nnope = \"deny\"\n",
            ),
        ),
        ("src/lib.rs", ""),
    ]);
    run(&[s(dir.path())])
        .assert_one_line_error("Cargo.toml:7:1: key `package.metadata.idem-lint.lints.nope`");
}

#[test]
fn malformed_configs_are_one_line_errors() {
    let cases: &[(&str, &str)] = &[
        ("[lints\nparse_error = \"deny\"\n", "idem-lint.toml:1:"),
        (
            "[lints]\nparse_error = \"loud\"\n",
            "key `lints.parse_error`: invalid level `loud`",
        ),
        (
            "[lints]\nparse_error = 3\n",
            "key `lints.parse_error`: expected a level",
        ),
        (
            "[lints.parse_error]\nlevel = \"deny\"\nthreshold = 3\n",
            "idem-lint.toml:3:1: key `lints.parse_error.threshold`: lint `parse_error` takes no settings",
        ),
        ("lints = 1\n", "key `lints`: expected a table"),
        ("[linst]\n", "key `linst`: unknown key"),
        ("file-timeout-ms = \"x\"\n", "key `file-timeout-ms`"),
    ];
    for (config, expected) in cases {
        let dir = tree(&[
            ("Cargo.toml", &manifest("cfg", "")),
            ("idem-lint.toml", config),
            ("src/lib.rs", ""),
        ]);
        run(&[s(dir.path())]).assert_one_line_error(expected);
    }
}

#[test]
fn two_workspace_configs_are_an_error() {
    let dir = tree(&[
        (
            "Cargo.toml",
            &manifest(
                "cfg",
                "\n[workspace.metadata.idem-lint.lints]\nparse_error = \"deny\"\n[workspace]\n",
            ),
        ),
        ("idem-lint.toml", "[lints]\n"),
        ("src/lib.rs", ""),
    ]);
    run(&[s(dir.path())]).assert_one_line_error("keep one");
}

#[test]
fn config_timeout_is_used_and_the_flag_wins() {
    // Big enough that no machine parses it within a few milliseconds.
    let slow: String = (0..100_000)
        .map(|i| format!("pub fn f{i}(x: u64) -> u64 {{ x + {i} }}\n"))
        .collect();
    let dir = tree(&[
        ("Cargo.toml", &manifest("cfg", "")),
        ("idem-lint.toml", "file-timeout-ms = 1\n"),
        ("src/lib.rs", &slow),
    ]);
    let out = run(&[s(dir.path()), "--message-format", "short"]);
    assert!(
        out.stdout.contains("parsing took longer than 1 ms"),
        "{}",
        out.stdout
    );
    let out = run(&[
        s(dir.path()),
        "--message-format",
        "short",
        "--file-timeout-ms",
        "2",
    ]);
    assert!(
        out.stdout.contains("parsing took longer than 2 ms"),
        "{}",
        out.stdout
    );
}

#[test]
fn list_shows_default_and_effective_levels() {
    let dir = tree(&[
        ("Cargo.toml", &manifest("cfg", "")),
        ("idem-lint.toml", "[lints]\nparse_error = \"allow\"\n"),
        ("src/lib.rs", ""),
    ]);
    let out = run(&[s(dir.path()), "--list"]);
    out.assert_code(0);
    let line = out
        .stdout
        .lines()
        .find(|l| l.starts_with("parse_error"))
        .expect("listed");
    let cols: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(&cols[1..3], ["warn", "allow"], "{line}");
    let out = run(&[s(dir.path()), "--list", "-D", "parse_error"]);
    let line = out
        .stdout
        .lines()
        .find(|l| l.starts_with("parse_error"))
        .expect("listed");
    assert_eq!(line.split_whitespace().nth(2), Some("deny"));
    for lint in idem_lints::lints::ALL {
        assert!(out.stdout.contains(lint.name));
    }
}
