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

/// A wrong `[models]` row is a one-line error naming the file, the line of the row and
/// what is allowed; nothing is read as something else.
#[test]
fn bad_models_are_one_line_errors_with_the_allowed_values() {
    let store = "[[models.store]]\ntype = \"MyKv\"\nmethod = \"claim\"\nkey = 0\n";
    let cases: &[(String, &str)] = &[
        (
            "[[models.stores]]\ntype = \"K\"\n".into(),
            "idem-lint.toml:1:10: key `models.stores`: unknown kind of model `stores` (expected one of `store`, `entry`, `effect`, `sink`, `source`)",
        ),
        (
            format!("{store}op = \"grab\"\n"),
            "idem-lint.toml:1:1: key `models.store[0]`: unknown variant `grab`, expected one of `read`, `write`, `upsert`, `claim`, `increment`, `delete`, `expire`, `tx_begin`, `tx_commit`, `tx_rollback`",
        ),
        (
            format!("{store}op = \"claim\"\n"),
            "key `models.store[0]`: a `claim` needs `claim_test`",
        ),
        (
            format!("{store}op = \"read\"\nvalue = 0\n"),
            "`MyKv::claim`: a value argument on an operation that stores none",
        ),
        (
            format!("{store}op = \"claim\"\nclaim_test = \"maybe\"\n"),
            "unknown variant `maybe`, expected `answer` or `fails_when_taken`",
        ),
        (
            format!("{store}op = \"tx_begin\"\n"),
            "transaction steps of a user's type are not read yet",
        ),
        (
            "[lints]\n\n[[models.entry]]\nattribute = \"my_consumer\"\nkind = \"consumer\"\n".into(),
            "idem-lint.toml:3:1: key `models.entry[0]`: unknown variant `consumer`, expected one of `route`, `job`, `service`, `spawned`",
        ),
        (
            "[[models.entry]]\nkind = \"job\"\n".into(),
            "give exactly one of `attribute`",
        ),
        (
            "[[models.sink]]\nkey = \"job_key\"\n".into(),
            "unknown field `key`, expected `key_name`",
        ),
        (
            "models = 1\n".into(),
            "key `models`: expected a table of arrays of tables",
        ),
        (
            "[models]\nstore = 1\n".into(),
            "key `models.store`: expected an array of tables (`[[models.store]]`)",
        ),
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
