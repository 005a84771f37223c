//! Discovery: packages, workspaces, every target kind, and module trees (`mod a;`, `a/mod.rs`,
//! inline modules, `#[path]`), and plain directories.

mod common;

use common::{manifest, run, run_in, s, tree};
use std::path::Path;

const BROKEN: &str = "fn f( {}\n";

/// Files with a finding, relative to `dir`, from a JSON run.
fn files(dir: &Path, args: &[&str]) -> Vec<String> {
    let mut all = vec![s(dir), "--message-format", "json"];
    all.extend_from_slice(args);
    let out = run(&all);
    assert_ne!(out.code, 2, "{}", out.stderr);
    let mut files: Vec<String> = out.findings(dir).into_iter().map(|f| f.0).collect();
    files.dedup();
    files
}

#[test]
fn every_target_kind_is_followed() {
    let dir = tree(&[
        ("Cargo.toml", &manifest("kinds", "")),
        ("src/lib.rs", "mod l;\n"),
        ("src/l.rs", BROKEN),
        ("src/main.rs", "mod m;\nfn main() {}\n"),
        ("src/m.rs", BROKEN),
        // A crate root owns its directory: `mod t;` in `src/bin/tool/main.rs` is a sibling.
        ("src/bin/tool/main.rs", "mod t;\nfn main() {}\n"),
        ("src/bin/tool/t.rs", BROKEN),
        ("src/bin/single.rs", "mod s;\nfn main() {}\n"),
        ("src/bin/s.rs", BROKEN),
        ("examples/ex.rs", "fn main() {}\nfn x( {}\n"),
        ("tests/it.rs", BROKEN),
        ("benches/b.rs", BROKEN),
    ]);
    let out = run(&[s(dir.path()), "--message-format", "json"]);
    let mut seen: Vec<(String, String)> = out
        .messages()
        .iter()
        .map(|m| {
            let file = m["message"]["spans"][0]["file_name"]
                .as_str()
                .expect("file")
                .to_string();
            let file = file
                .strip_prefix(&format!("{}/", dir.path().display()))
                .unwrap_or(&file)
                .to_string();
            (
                file,
                m["target"]["kind"][0].as_str().expect("kind").to_string(),
            )
        })
        .collect();
    seen.sort();
    let expected: Vec<(String, String)> = [
        ("benches/b.rs", "bench"),
        ("examples/ex.rs", "example"),
        ("src/bin/s.rs", "bin"),
        ("src/bin/tool/t.rs", "bin"),
        ("src/l.rs", "lib"),
        ("src/m.rs", "bin"),
        ("tests/it.rs", "test"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(seen, expected, "{}", out.stdout);
}

#[test]
fn module_trees_with_path_nested_inline_and_mod_rs() {
    let dir = tree(&[
        ("Cargo.toml", &manifest("mods", "")),
        (
            "src/lib.rs",
            "mod a;\nmod c;\nmod e { mod f; }\n#[path = \"elsewhere/imp.rs\"]\nmod imp;\n#[path = \"lib.rs\"]\nmod itself;\n",
        ),
        ("src/a.rs", "mod b;\n"),
        ("src/a/b.rs", BROKEN),
        ("src/c/mod.rs", "mod d;\n"),
        ("src/c/d.rs", BROKEN),
        ("src/e/f.rs", BROKEN),
        ("src/elsewhere/imp.rs", "mod g;\n"),
        // A `#[path]` file owns its directory, like `mod.rs`.
        ("src/elsewhere/g.rs", BROKEN),
        ("src/unreachable.rs", BROKEN),
    ]);
    assert_eq!(
        files(dir.path(), &[]),
        [
            "src/a/b.rs",
            "src/c/d.rs",
            "src/e/f.rs",
            "src/elsewhere/g.rs"
        ]
    );
}

#[test]
fn a_module_shared_by_two_targets_is_reported_once() {
    let dir = tree(&[
        ("Cargo.toml", &manifest("shared", "")),
        ("src/lib.rs", "mod util;\n"),
        ("src/main.rs", "mod util;\nfn main() {}\n"),
        ("src/util.rs", BROKEN),
    ]);
    let out = run(&[s(dir.path()), "--message-format", "json"]);
    let msgs = out.messages();
    assert_eq!(msgs.len(), 1, "{}", out.stdout);
    assert_eq!(msgs[0]["target"]["kind"][0], "lib");
}

fn virtual_workspace() -> tempfile::TempDir {
    tree(&[
        (
            "Cargo.toml",
            "[workspace]\nmembers = [\"a\", \"b\"]\nresolver = \"2\"\n",
        ),
        ("a/Cargo.toml", &manifest("a", "")),
        ("a/src/lib.rs", BROKEN),
        ("b/Cargo.toml", &manifest("b", "")),
        ("b/src/lib.rs", BROKEN),
    ])
}

#[test]
fn virtual_workspace_selection() {
    let ws = virtual_workspace();
    let d = ws.path();
    let both = ["a/src/lib.rs", "b/src/lib.rs"];
    assert_eq!(files(d, &[]), both);
    assert_eq!(files(d, &["-p", "b"]), ["b/src/lib.rs"]);
    assert_eq!(files(d, &["-p", "a", "--package", "b"]), both);
    let a_manifest = d.join("a/Cargo.toml");
    let only_a = run(&[
        "--manifest-path",
        s(&a_manifest),
        "--message-format",
        "short",
    ]);
    assert_eq!(only_a.stdout.lines().count(), 1, "{}", only_a.stdout);
    let all = run(&[
        "--manifest-path",
        s(&a_manifest),
        "--workspace",
        "--message-format",
        "short",
    ]);
    assert_eq!(all.stdout.lines().count(), 2, "{}", all.stdout);
    // Without PATH, the package around the current directory.
    let here = run_in(&d.join("b/src"), &["--message-format", "short"]);
    assert_eq!(
        here.stdout,
        "lib.rs:1:5: warning[idem::parse_error]: this file contains an unclosed delimiter\n"
    );
}

#[test]
fn a_root_package_of_a_workspace_is_linted_alone_and_the_summary_says_so() {
    let dir = tree(&[
        (
            "Cargo.toml",
            &format!(
                "{}\n[workspace]\nmembers = [\"member\"]\n",
                manifest("root", "")
            ),
        ),
        ("src/lib.rs", BROKEN),
        ("member/Cargo.toml", &manifest("member", "")),
        ("member/src/lib.rs", BROKEN),
    ]);
    let d = dir.path();
    assert_eq!(files(d, &[]), ["src/lib.rs"]);
    assert_eq!(
        files(d, &["--workspace"]),
        ["member/src/lib.rs", "src/lib.rs"]
    );
    let note = "note: linted `root` only; 1 other workspace member not read (`member`): \
                `--workspace` lints all members";
    let human = run(&[s(d), "--color", "never"]);
    assert!(human.stdout.contains(note), "{}", human.stdout);
    // Said even when nothing was found, and not when every member was read or `-p` chose.
    std::fs::write(d.join("src/lib.rs"), "pub fn ok() {}\n").unwrap();
    let clean = run(&[s(d), "--color", "never"]);
    assert_eq!(clean.stdout.trim_end(), note);
    for args in [["--workspace"], ["--package=root"]] {
        let all = run(&[s(d), "--color", "never", args[0]]);
        assert!(!all.stdout.contains("not read"), "{}", all.stdout);
    }
}

#[test]
fn plain_directory_honours_gitignore_and_skips_target() {
    let dir = tree(&[
        (".gitignore", "ignored.rs\n"),
        ("x.rs", BROKEN),
        ("ignored.rs", BROKEN),
        // Cargo marks the target directories it makes; only those are skipped.
        (
            "target/CACHEDIR.TAG",
            "Signature: 8a477f597d28d172789f06886806bc55\n",
        ),
        ("target/debug/build.rs", BROKEN),
        ("sub/z.rs", BROKEN),
        ("sub/fine.rs", "pub fn ok() {}\n"),
        ("notes.txt", "fn ("),
    ]);
    assert_eq!(files(dir.path(), &[]), ["sub/z.rs", "x.rs"]);
    let out = run(&[s(dir.path()), "--message-format", "json"]);
    let m = &out.messages()[0];
    assert_eq!(m["target"]["kind"][0], "lib");
    assert!(m["package_id"]
        .as_str()
        .is_some_and(|p| p.starts_with("path+file://")));
}

/// sqlx's `query_file!` reads its file relative to the package root (here a workspace member's
/// directory), not to the source file nor to the workspace root: only the SQL of the file sqlx
/// would read decides the finding.
#[test]
fn query_file_is_read_from_the_package_root() {
    const LIB: &str = "use sqlx::PgPool;\n\
        pub struct E { pub id: i64 }\n\
        async fn send(_e: &E) {}\n\
        pub async fn handle(pool: &PgPool, e: &E) -> sqlx::Result<()> {\n\
        \x20   if sqlx::query_file!(\"q/seen.sql\", e.id).fetch_optional(pool).await?.is_some() {\n\
        \x20       return Ok(());\n\
        \x20   }\n\
        \x20   send(e).await;\n\
        \x20   sqlx::query_file!(\"q/mark.sql\", e.id).execute(pool).await?;\n\
        \x20   Ok(())\n\
        }\n";
    const SEEN: &str = "SELECT 1 FROM processed_events WHERE event_id = $1";
    const PLAIN: &str = "INSERT INTO processed_events (event_id) VALUES ($1)";
    let ws = |member_root: &str, beside_source: &str, workspace_root: &str| {
        tree(&[
            (
                "Cargo.toml",
                "[workspace]\nmembers = [\"app\"]\nresolver = \"2\"\n",
            ),
            (
                "app/Cargo.toml",
                &manifest("app", "[dependencies]\nsqlx = \"0.8\"\n"),
            ),
            ("app/src/lib.rs", LIB),
            ("app/q/seen.sql", SEEN),
            ("app/q/mark.sql", member_root),
            ("app/src/q/mark.sql", beside_source),
            ("q/mark.sql", workspace_root),
        ])
    };
    // Where `q/mark.sql` is a plain insert, the check then the insert is a finding; where it
    // is a read, there is no write to report.
    let plain_read = ws(PLAIN, SEEN, SEEN);
    assert_eq!(
        files(plain_read.path(), &["--workspace"]),
        vec!["app/src/lib.rs".to_owned()]
    );
    let read_read = ws(SEEN, PLAIN, PLAIN);
    assert_eq!(
        files(read_read.path(), &["--workspace"]),
        Vec::<String>::new()
    );
}
