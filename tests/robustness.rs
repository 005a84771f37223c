//! Nothing a user can feed the linter makes it panic or hang; each problem is one
//! `idem::parse_error` finding and the other files are still linted.

mod common;

use common::{manifest, run, s, tree, write};
use std::os::unix::fs::symlink;

const BROKEN: &str = "fn f( {}\n";

/// `(file, line, message)` of every finding.
fn findings(dir: &std::path::Path, extra: &[&str]) -> Vec<(String, u64, String)> {
    let mut args = vec![s(dir), "--message-format", "json"];
    args.extend_from_slice(extra);
    let out = run(&args);
    out.assert_code(0);
    assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
    let mut v: Vec<_> = out
        .messages()
        .iter()
        .map(|m| {
            let span = &m["message"]["spans"][0];
            let file = span["file_name"].as_str().expect("file");
            (
                file.strip_prefix(&format!("{}/", dir.display()))
                    .unwrap_or(file)
                    .to_string(),
                span["line_start"].as_u64().expect("line"),
                m["message"]["message"]
                    .as_str()
                    .expect("message")
                    .to_string(),
            )
        })
        .collect();
    v.sort();
    v
}

fn krate(lib: &str) -> tempfile::TempDir {
    tree(&[("Cargo.toml", &manifest("robust", "")), ("src/lib.rs", lib)])
}

#[test]
fn non_utf8_file() {
    let dir = krate("mod latin1;\nmod other;\n");
    write(dir.path(), "src/latin1.rs", b"pub fn f() {}\n// caf\xe9\n");
    write(dir.path(), "src/other.rs", BROKEN.as_bytes());
    let got = findings(dir.path(), &[]);
    assert_eq!(
        got[0],
        ("src/latin1.rs".into(), 2, "file is not valid UTF-8".into())
    );
    assert_eq!(got[1].0, "src/other.rs", "the other files are still linted");
    // Human output renders the line too.
    run(&[s(dir.path()), "--color", "never"]).assert_code(0);
}

#[test]
fn empty_file() {
    let dir = krate("mod empty;\n");
    write(dir.path(), "src/empty.rs", b"");
    assert_eq!(findings(dir.path(), &[]), []);
    let only_empty = krate("");
    assert_eq!(findings(only_empty.path(), &[]), []);
}

#[test]
fn seven_megabyte_generated_file() {
    // Near the default size cap (8 MiB), which bounds the memory of one parse.
    let dir = krate("mod generated;\nmod broken;\n");
    let mut text = String::with_capacity(7 << 20);
    let mut i = 0;
    while text.len() < 7 << 20 {
        text.push_str(&format!(
            "pub fn generated_{i}(x: u64) -> u64 {{ x.wrapping_add({i}) }}\n"
        ));
        i += 1;
    }
    write(dir.path(), "src/generated.rs", text.as_bytes());
    write(dir.path(), "src/broken.rs", BROKEN.as_bytes());
    // Debug builds parse slowly: a generous budget, so this checks size, not speed.
    let got = findings(dir.path(), &["--file-timeout-ms", "600000"]);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].0, "src/broken.rs");
}

#[test]
fn deep_nesting() {
    // Up to the nesting limit a file parses; past it, it is one finding (see tests/hostile.rs
    // for the inputs that used to overflow the stack).
    let nested = |depth: usize| {
        let expr = format!("{}1{}", "(".repeat(depth), ")".repeat(depth));
        let blocks = format!("{}{}", "{ ".repeat(depth), " }".repeat(depth));
        format!("pub fn f() -> i32 {{ {expr} }}\npub fn g() {blocks}\n")
    };
    let dir = krate("mod deep;\nmod deeper;\n");
    write(dir.path(), "src/deep.rs", nested(1500).as_bytes());
    write(dir.path(), "src/deeper.rs", nested(5000).as_bytes());
    let got = findings(dir.path(), &["--file-timeout-ms", "600000"]);
    assert_eq!(
        got,
        [("src/deeper.rs".into(), 1, "file does not parse".into())]
    );
}

#[test]
fn unreadable_files() {
    // Tests run as root, for whom `chmod 000` changes nothing: a directory where the module
    // file should be and a dangling symlink cannot be read by anyone.
    let dir = krate("mod is_dir;\nmod dangling;\nmod fine;\n");
    std::fs::create_dir_all(dir.path().join("src/is_dir.rs")).expect("mkdir");
    symlink(
        dir.path().join("src/nowhere.rs"),
        dir.path().join("src/dangling.rs"),
    )
    .expect("symlink");
    write(dir.path(), "src/fine.rs", BROKEN.as_bytes());
    let got = findings(dir.path(), &[]);
    assert_eq!(got.len(), 3, "{got:?}");
    assert_eq!((got[0].0.as_str(), got[0].1), ("src/fine.rs", 1));
    // Reported at the `mod` declaration, naming the file.
    assert_eq!((got[1].0.as_str(), got[1].1), ("src/lib.rs", 1));
    assert!(
        got[1].2.starts_with("could not read `") && got[1].2.contains("is_dir.rs"),
        "{got:?}"
    );
    assert_eq!((got[2].0.as_str(), got[2].1), ("src/lib.rs", 2));
    assert!(got[2].2.contains("dangling.rs"), "{got:?}");
}

#[test]
fn unreadable_target_root() {
    let dir = tree(&[(
        "Cargo.toml",
        &manifest("robust", "[lib]\npath = \"src/lib.rs\"\n"),
    )]);
    std::fs::create_dir_all(dir.path().join("src/lib.rs")).expect("mkdir");
    let got = findings(dir.path(), &[]);
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(got[0].2.starts_with("could not read"), "{got:?}");
}

#[test]
fn symlink_loops() {
    let dir = krate("mod looped;\n#[path = \"lib.rs\"]\nmod again;\n");
    let src = dir.path().join("src");
    symlink(src.join("loop_b.rs"), src.join("looped.rs")).expect("symlink");
    symlink(src.join("looped.rs"), src.join("loop_b.rs")).expect("symlink");
    // A directory loop in a plain directory walk is not followed.
    symlink(dir.path(), src.join("up")).expect("symlink");
    let got = findings(dir.path(), &[]);
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(got[0].2.contains("looped.rs"), "{got:?}");
    let plain = findings(&src, &[]);
    assert_eq!(
        plain.len(),
        2,
        "both symlinks reported once each: {plain:?}"
    );
}

#[test]
fn missing_module_file() {
    let dir = krate("pub mod present;\nmod absent;\n");
    write(dir.path(), "src/present.rs", b"pub fn ok() {}\n");
    let got = findings(dir.path(), &[]);
    assert_eq!(
        got,
        [(
            "src/lib.rs".into(),
            2,
            "file not found for module `absent`".into()
        )]
    );
}

#[test]
fn a_file_over_the_time_budget_is_skipped_and_the_rest_finishes() {
    let dir = krate("mod slow;\nmod broken;\n");
    let mut text = String::new();
    // About 6 MB: seconds to parse even in a release build.
    for i in 0..150_000 {
        text.push_str(&format!("pub fn f{i}(x: u64) -> u64 {{ x + {i} }}\n"));
    }
    write(dir.path(), "src/slow.rs", text.as_bytes());
    write(dir.path(), "src/broken.rs", BROKEN.as_bytes());
    let started = std::time::Instant::now();
    let got = findings(dir.path(), &["--file-timeout-ms", "1000"]);
    assert!(started.elapsed() < std::time::Duration::from_secs(60));
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(
        (got[0].0.as_str(), got[0].2.as_str()),
        ("src/broken.rs", "this file contains an unclosed delimiter")
    );
    assert_eq!(got[1].0, "src/slow.rs");
    assert_eq!(got[1].2, "parsing took longer than 1000 ms; file skipped");
}

/// A half-typed line in the crate root (issue 25, item 3): the other files are still reached
/// through its `mod` declarations, so their findings are those of the intact crate, and the
/// error points at the delimiter left open, as rustc does, not at the end of the file.
#[test]
fn a_half_typed_line_in_the_crate_root_keeps_the_module_tree() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("demo");
    common::copy_dir(&common::repo().join("fixtures/demo"), &dir);
    let intact = findings(&dir, &["--no-cache"]);
    assert!(intact.iter().any(|f| f.0 == "src/notify.rs"), "{intact:?}");
    let lib = dir.join("src/lib.rs");
    let text = std::fs::read_to_string(&lib).expect("lib.rs");
    let half = "\npub fn half_typed() {\n    notify(;\n}\n";
    std::fs::write(&lib, format!("{text}{half}")).expect("write");
    let broken = findings(&dir, &["--no-cache"]);
    let line = text.lines().count() as u64 + 3;
    let error = (
        "src/lib.rs".to_string(),
        line,
        "mismatched closing delimiter".to_string(),
    );
    assert!(broken.contains(&error), "{broken:?}");
    let others: Vec<_> = broken.into_iter().filter(|f| *f != error).collect();
    assert_eq!(others, intact);
}

#[test]
fn an_unclosed_delimiter_is_reported_where_it_was_opened() {
    let dir = krate("pub fn f() {\n    g(;\n}\n\npub fn g() {}\n");
    let out = run(&[s(dir.path()), "--message-format", "short"]);
    assert!(
        out.stdout
            .contains("src/lib.rs:2:6: warning[idem::parse_error]: mismatched closing delimiter"),
        "{}",
        out.stdout
    );
}

/// Issue 38, item 2: a `pub mod notify` line typed without its `;` yet keeps the module,
/// and its `pub`: the finding that needs `notify` to be public (an entry point of the
/// library's API) stays.
#[test]
fn a_half_typed_pub_mod_line_keeps_the_module_public() {
    let tmp = tempfile::tempdir().expect("tempdir");
    common::copy_dir(&common::repo().join("fixtures/demo"), tmp.path());
    let before = findings(tmp.path(), &["--no-cache"]);
    let lib = tmp.path().join("src/lib.rs");
    let text = std::fs::read_to_string(&lib).expect("read");
    assert!(text.contains("pub mod notify;\n"));
    std::fs::write(&lib, text.replace("pub mod notify;", "pub mod notify")).expect("write");
    let after = findings(tmp.path(), &["--no-cache"]);
    let in_notify = |all: &[(String, u64, String)]| -> Vec<(String, u64, String)> {
        all.iter()
            .filter(|f| f.0.ends_with("src/notify.rs"))
            .cloned()
            .collect()
    };
    assert!(
        in_notify(&before)
            .iter()
            .any(|f| f.2.contains("without the idempotency guard")),
        "{before:?}"
    );
    assert_eq!(in_notify(&after), in_notify(&before));
    assert!(
        after.iter().any(|f| f.0.ends_with("src/lib.rs")),
        "{after:?}"
    );
}
