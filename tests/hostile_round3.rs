//! Issue 35: the third round of hostile pull requests. Each test builds the attack tree at
//! test time (the scripts in `shared/hostile/` are the reproductions they came from) and
//! runs the binary the way a CI job does.

mod common;

use common::{run_in, s, write};
use std::path::Path;
use std::process::Command;

/// A handler with one `check_then_act` finding.
const RACY: &str =
    "pub async fn handle(conn: &mut redis::aio::MultiplexedConnection) -> redis::RedisResult<()> {
    let seen: bool = conn.exists(\"k\").await?;
    if !seen { conn.set(\"k\", 1).await?; }
    Ok(())
}
";

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "init.defaultBranch=main",
            "-c",
            "core.fsmonitor=false",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

// ---- item 1: `--changed-since` must not run a command of the checkout ----

/// The pull request of `01-changed-since-fsmonitor-rce.sh`: a directory git would take for a
/// repository (`HEAD`, `config`, `objects/` and `refs/` linked to the real ones) whose
/// `config` names a file-system monitor command, at cargo's workspace root. With
/// `workspace_line`, the package sits at the top of the repository and moves its workspace
/// root to `ws/`; without, the package is a monorepo's subdirectory `svc/`, which needs no
/// `workspace` line. Returns the package directory and the file that command would create.
fn fsmonitor_attack(
    outer: &Path,
    workspace_line: bool,
) -> (std::path::PathBuf, std::path::PathBuf) {
    let repo = outer.join("repo");
    let mark = outer.join("PWNED");
    let package = if workspace_line {
        repo.clone()
    } else {
        repo.join("svc")
    };
    write(
        &package,
        "Cargo.toml",
        b"[package]\nname = \"victim\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    );
    write(&package, "src/lib.rs", RACY.as_bytes());
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-qm", "base"]);
    // The pull request.
    let fake = if workspace_line {
        let mut manifest = std::fs::read_to_string(package.join("Cargo.toml")).expect("read");
        manifest.push_str("workspace = \"ws\"\n");
        std::fs::write(package.join("Cargo.toml"), manifest).expect("write");
        write(&repo, "ws/Cargo.toml", b"[workspace]\nmembers = [\"..\"]\n");
        repo.join("ws")
    } else {
        package.clone()
    };
    write(&fake, "HEAD", b"ref: refs/heads/main\n");
    std::os::unix::fs::symlink(repo.join(".git/objects"), fake.join("objects")).expect("symlink");
    std::os::unix::fs::symlink(repo.join(".git/refs"), fake.join("refs")).expect("symlink");
    let config = format!(
        "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tworktree = .\n\tfsmonitor = \"echo ran > '{}'; false\"\n",
        mark.display()
    );
    write(&fake, "config", config.as_bytes());
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-qm", "pr"]);
    (package, mark)
}

#[test]
fn changed_since_runs_no_command_of_the_checkout() {
    let outer = tempfile::tempdir().expect("tempdir");
    let (repo, mark) = fsmonitor_attack(outer.path(), true);
    let manifest = repo.join("Cargo.toml");
    // Run from outside the checkout, as `docs/github-workflow.yml` does.
    let out = run_in(
        outer.path(),
        &[
            "--manifest-path",
            s(&manifest),
            "--changed-since",
            "main~1",
            "-D",
            "warnings",
            "--message-format",
            "json",
        ],
    );
    assert!(
        !mark.exists(),
        "the checkout's fsmonitor command ran: {}",
        out.stderr
    );
    // The real repository was read: `src/lib.rs` did not change, but the diff is the pull
    // request's, so the run is a real one (no error) and reports nothing outside the diff.
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    // The same run against the base commit of `src/lib.rs`'s history sees it as unchanged;
    // touching it must bring its finding back, so the repository read is the real one.
    std::fs::write(repo.join("src/lib.rs"), format!("{RACY}\n")).expect("write");
    let out = run_in(
        outer.path(),
        &[
            "--manifest-path",
            s(&manifest),
            "--changed-since",
            "main",
            "-D",
            "warnings",
            "--message-format",
            "json",
        ],
    );
    assert!(
        !mark.exists(),
        "the checkout's fsmonitor command ran: {}",
        out.stderr
    );
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(out.messages().len(), 1, "{}", out.stdout);
}

#[test]
fn changed_since_in_a_workspace_below_the_repository_runs_nothing() {
    let outer = tempfile::tempdir().expect("tempdir");
    let (package, mark) = fsmonitor_attack(outer.path(), false);
    std::fs::write(package.join("src/lib.rs"), format!("{RACY}\n")).expect("write");
    let out = run_in(
        &package,
        &[
            "--changed-since",
            "main",
            "-D",
            "warnings",
            "--message-format",
            "json",
        ],
    );
    assert!(
        !mark.exists(),
        "the checkout's fsmonitor command ran: {}",
        out.stderr
    );
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(out.messages().len(), 1, "{}", out.stdout);
}

#[test]
fn changed_since_runs_no_filter_the_checkout_selects() {
    // `.gitattributes` is the checkout's; a clean filter it selects runs only if the user's
    // own configuration defines it, and the attributes are not read at all.
    let outer = tempfile::tempdir().expect("tempdir");
    let repo = outer.path().join("repo");
    let mark = outer.path().join("FILTERED");
    write(
        &repo,
        "Cargo.toml",
        common::manifest("victim", "").as_bytes(),
    );
    write(&repo, "src/lib.rs", RACY.as_bytes());
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-qm", "base"]);
    write(&repo, ".gitattributes", b"*.rs filter=x\n");
    git(
        &repo,
        &[
            "config",
            "filter.x.clean",
            &format!("sh -c 'echo ran > \"{}\"; cat'", mark.display()),
        ],
    );
    std::fs::write(repo.join("src/lib.rs"), format!("{RACY}\n")).expect("write");
    let out = run_in(
        &repo,
        &["--changed-since", "main", "--message-format", "json"],
    );
    assert_eq!(out.messages().len(), 1, "{}\n{}", out.stdout, out.stderr);
    assert!(!mark.exists(), "a clean filter ran: {}", out.stderr);
}

// ---- item 4: `--changed-since` keeps the findings a change causes ----

/// A handler whose check is a helper's: the helper is all the pull request changes.
const CALLER: &str = "mod helper;

pub async fn handle(conn: &mut redis::aio::MultiplexedConnection, id: &str) -> redis::RedisResult<()> {
    let key = format!(\"done:{id}\");
    if helper::already_done(conn, &key).await? {
        return Ok(());
    }
    conn.set(&key, 1).await?;
    Ok(())
}
";
const HELPER_BEFORE: &str = "pub async fn already_done(_c: &mut redis::aio::MultiplexedConnection, _k: &str) -> redis::RedisResult<bool> {\n    Ok(false)\n}\n";
const HELPER_AFTER: &str = "pub async fn already_done(c: &mut redis::aio::MultiplexedConnection, k: &str) -> redis::RedisResult<bool> {\n    c.exists(k).await\n}\n";

#[test]
fn changed_since_keeps_a_finding_whose_label_is_in_the_changed_file() {
    let outer = tempfile::tempdir().expect("tempdir");
    let repo = outer.path().join("r");
    write(
        &repo,
        "Cargo.toml",
        common::manifest("v", "[dependencies]\nredis = \"0.25\"\n").as_bytes(),
    );
    write(&repo, "src/lib.rs", CALLER.as_bytes());
    write(&repo, "src/helper.rs", HELPER_BEFORE.as_bytes());
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-qm", "base"]);
    std::fs::write(repo.join("src/helper.rs"), HELPER_AFTER).expect("write");
    git(&repo, &["commit", "-qam", "pr"]);
    let manifest = repo.join("Cargo.toml");
    let args = |since: &'static str| {
        [
            "--manifest-path",
            s(&manifest),
            "--changed-since",
            since,
            "-D",
            "warnings",
            "--message-format",
            "json",
        ]
    };
    let out = run_in(outer.path(), &args("main~1"));
    assert_eq!(
        out.findings(&repo),
        [(
            "src/lib.rs".to_string(),
            8,
            "error".to_string(),
            "idem::check_then_act".to_string()
        )],
        "{}",
        out.stderr
    );
    assert_eq!(out.code, 1);
    // Nothing changed since `main`: nothing is reported.
    run_in(outer.path(), &args("main")).assert_code(0);
}

#[test]
fn changed_since_keeps_a_finding_whose_label_is_in_a_changed_member() {
    // The label in the linked member `common` becomes a note naming the place; the change
    // is only there, and the finding is the dependent's.
    let outer = tempfile::tempdir().expect("tempdir");
    let repo = outer.path().join("ws");
    write(
        &repo,
        "Cargo.toml",
        b"[workspace]\nresolver = \"2\"\nmembers = [\"common\", \"service\"]\n",
    );
    write(
        &repo,
        "common/Cargo.toml",
        common::manifest("common", "[dependencies]\nredis = \"0.25\"\n").as_bytes(),
    );
    write(&repo, "common/src/lib.rs", HELPER_BEFORE.as_bytes());
    write(
        &repo,
        "service/Cargo.toml",
        common::manifest(
            "service",
            "[dependencies]\nredis = \"0.25\"\ncommon = { path = \"../common\" }\n",
        )
        .as_bytes(),
    );
    write(
        &repo,
        "service/src/lib.rs",
        CALLER
            .replace("mod helper;\n", "")
            .replace("helper::", "common::")
            .as_bytes(),
    );
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-qm", "base"]);
    std::fs::write(repo.join("common/src/lib.rs"), HELPER_AFTER).expect("write");
    let out = run_in(
        outer.path(),
        &[
            "--manifest-path",
            s(&repo.join("Cargo.toml")),
            "--workspace",
            "--changed-since",
            "main",
            "-D",
            "warnings",
            "--message-format",
            "json",
        ],
    );
    let found = out.findings(&repo);
    assert_eq!(found.len(), 1, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(found[0].0, "service/src/lib.rs");
    // Kept through the note: no span of the finding is in `common`.
    assert!(
        out.stdout.contains("in `common`, common/src/lib.rs:2:"),
        "{}",
        out.stdout
    );
    assert_eq!(out.code, 1);
}

// ---- item 5: only a real test attribute marks a test ----

/// A handler with a `check_then_act` finding, under `attr`, after `uses`.
fn handler_under(uses: &str, attr: &str) -> String {
    format!(
        "{uses}

{attr}
pub async fn handle(conn: &mut redis::aio::MultiplexedConnection, id: &str) -> redis::RedisResult<()> {{
    let key = format!(\"done:{{id}}\");
    let seen: bool = conn.exists(&key).await?;
    if !seen {{ conn.set(&key, 1).await?; }}
    Ok(())
}}
"
    )
}

fn lint_lib(lib: &str) -> common::Run {
    let dir = common::tree(&[
        (
            "Cargo.toml",
            &common::manifest(
                "v",
                "[dependencies]\nredis = \"0.25\"\ntracing = \"0.1\"\ntokio = \"1\"\n",
            ),
        ),
        ("src/lib.rs", lib),
    ]);
    run_in(dir.path(), &["--message-format", "json"])
}

#[test]
fn an_attribute_named_test_by_an_alias_hides_no_body() {
    for (uses, attr) in [
        // `04-test-named-attribute-hides-body.sh`: tracing's instrument, named `test`.
        ("use tracing::instrument as test;", "#[test(skip(conn))]"),
        // The same binding inside a fn, a macro's input, or a group.
        (
            "fn f() { use tracing::{instrument as test}; }",
            "#[test(skip(conn))]",
        ),
        (
            "m! { pub use tracing::instrument as test; }",
            "#[test(skip(conn))]",
        ),
        // A crate renamed to a test crate's name, a module of that name, any other crate.
        ("extern crate tracing as tokio;", "#[tokio::test]"),
        (
            "mod tokio { pub use tracing::instrument as test; }",
            "#[tokio::test]",
        ),
        ("", "#[tracing::test]"),
        // A glob import may bring a `test` of the crate's own.
        ("use crate::prelude::*;", "#[test]"),
    ] {
        let out = lint_lib(&handler_under(uses, attr));
        assert_eq!(
            out.findings(Path::new("/")).len(),
            1,
            "{uses} {attr}: the handler's body was hidden\n{}\n{}",
            out.stdout,
            out.stderr
        );
    }
}

#[test]
fn real_test_attributes_still_mark_tests() {
    for (uses, attr) in [
        ("", "#[test]"),
        ("", "#[tokio::test]"),
        ("use tokio::test;", "#[test]"),
        ("", "#[::tokio::test(flavor = \"multi_thread\")]"),
    ] {
        let out = lint_lib(&handler_under(uses, attr));
        assert_eq!(
            out.findings(Path::new("/")).len(),
            0,
            "{uses} {attr}\n{}",
            out.stdout
        );
    }
}

// ---- item 3: modules rustc compiles are read ----

/// A package whose `src/lib.rs` is `lib` and whose `src/real.rs` holds the racy handler,
/// beside a decoy `src/handlers.rs`, linted under `-D warnings`.
fn lint_with_real_rs(lib: &str) -> (common::Run, tempfile::TempDir) {
    let dir = common::tree(&[
        (
            "Cargo.toml",
            &common::manifest("v", "[dependencies]\nredis = \"0.25\"\n"),
        ),
        ("src/lib.rs", lib),
        ("src/real.rs", RACY),
        ("src/handlers.rs", "// decoy: nothing here\n"),
    ]);
    let out = run_in(dir.path(), &["-D", "warnings", "--message-format", "json"]);
    (out, dir)
}

#[test]
fn modules_rustc_compiles_are_linted() {
    // `03-compiled-but-not-linted.sh`, each case.
    for lib in [
        "#[cfg_attr(all(), path = \"real.rs\")]\npub mod handlers;\n",
        "include!(\"real.rs\");\n",
        "macro_rules! m { () => { #[path = \"real.rs\"] pub mod imp; }; }\nm!();\n",
        "const _: () = {\n    #[path = \"real.rs\"]\n    mod imp;\n};\n",
    ] {
        let (out, dir) = lint_with_real_rs(lib);
        assert_eq!(
            out.findings(dir.path()),
            [(
                "src/real.rs".to_string(),
                3,
                "error".to_string(),
                "idem::check_then_act".to_string()
            )],
            "{lib}\n{}",
            out.stderr
        );
        assert_eq!(out.code, 1, "{lib}");
    }
}

#[test]
fn the_modules_of_an_included_file_are_read_from_its_own_directory() {
    // rustc reads a `mod` inside an `include!`d file from the included file's directory, as
    // if that file owned it (graphile-worker's `tests/local_queue.rs` includes
    // `local_queue/common.rs`, which declares `#[path = "common/basic_jobs.rs"] mod ..;`).
    // Read from the including file's directory instead, every such module was a false
    // `parse_error` and its findings were lost.
    let dir = common::tree(&[
        (
            "Cargo.toml",
            &common::manifest("v", "[dependencies]\nredis = \"0.25\"\n"),
        ),
        ("src/lib.rs", "include!(\"queue/common.rs\");\n"),
        (
            "src/queue/common.rs",
            "#[path = \"common/jobs.rs\"]\nmod jobs;\nmod plain;\n",
        ),
        ("src/queue/common/jobs.rs", RACY),
        ("src/queue/plain.rs", RACY),
    ]);
    let out = run_in(dir.path(), &["--message-format", "json"]);
    let found: Vec<(String, String)> = out
        .findings(dir.path())
        .into_iter()
        .map(|(file, _, _, code)| (file, code))
        .collect();
    assert_eq!(
        found,
        [
            (
                "src/queue/common/jobs.rs".to_string(),
                "idem::check_then_act".to_string()
            ),
            (
                "src/queue/plain.rs".to_string(),
                "idem::check_then_act".to_string()
            ),
        ],
        "{}",
        out.stderr
    );
}

#[test]
fn included_and_cfg_attr_files_are_read_under_the_workspace_rule() {
    // Each way of naming a file reads it as a source: a path leaving the workspace is a
    // `parse_error`, its text quoted nowhere.
    let outer = tempfile::tempdir().expect("tempdir");
    write(outer.path(), "secret.rs", b"SECRET_TOKEN_123 (\n");
    for lib in [
        "include!(\"../../secret.rs\");\n",
        "#[cfg_attr(all(), path = \"../../secret.rs\")]\nmod handlers;\n",
    ] {
        let pkg = outer.path().join("pkg");
        let _ = std::fs::remove_dir_all(&pkg);
        write(&pkg, "Cargo.toml", common::manifest("v", "").as_bytes());
        write(&pkg, "src/lib.rs", lib.as_bytes());
        write(&pkg, "src/handlers.rs", b"\n");
        let out = run_in(&pkg, &["--message-format", "json"]);
        assert!(
            out.stdout.contains("leaves the workspace"),
            "{lib}\n{}",
            out.stdout
        );
        assert!(!out.stdout.contains("SECRET_TOKEN"), "{}", out.stdout);
        assert!(!out.stderr.contains("SECRET_TOKEN"), "{}", out.stderr);
    }
}

// ---- item 2: path dependencies that are no workspace members ----

#[test]
fn a_path_dependency_that_is_no_member_is_linted() {
    // `02-path-dependency-never-linted.sh`: a single package (no `[workspace]`) whose handler
    // sits in the path dependency `./handlers`.
    let outer = tempfile::tempdir().expect("tempdir");
    let app = outer.path().join("app");
    write(
        &app,
        "Cargo.toml",
        common::manifest(
            "app",
            "\n[dependencies]\nhandlers = { path = \"handlers\" }\n",
        )
        .as_bytes(),
    );
    write(&app, "src/lib.rs", b"pub use handlers::handle;\n");
    write(
        &app,
        "handlers/Cargo.toml",
        common::manifest("handlers", "\n[dependencies]\nredis = \"0.25\"\n").as_bytes(),
    );
    write(&app, "handlers/src/lib.rs", RACY.as_bytes());
    let manifest = app.join("Cargo.toml");
    for extra in [&["--workspace"][..], &[]] {
        let mut args = vec![
            "--manifest-path",
            s(&manifest),
            "-D",
            "warnings",
            "--message-format",
            "json",
        ];
        args.extend_from_slice(extra);
        let out = run_in(outer.path(), &args);
        assert_eq!(
            out.findings(&app),
            [(
                "handlers/src/lib.rs".to_string(),
                3,
                "error".to_string(),
                "idem::check_then_act".to_string()
            )],
            "{extra:?}\n{}",
            out.stderr
        );
        assert_eq!(out.code, 1);
    }
}

#[test]
fn a_path_dependency_outside_the_workspace_is_named() {
    let outer = tempfile::tempdir().expect("tempdir");
    let app = outer.path().join("app");
    write(
        &app,
        "Cargo.toml",
        common::manifest(
            "app",
            "\n[dependencies]\nshared = { path = \"../shared\" }\n",
        )
        .as_bytes(),
    );
    write(&app, "src/lib.rs", b"pub use shared::handle;\n");
    write(
        outer.path(),
        "shared/Cargo.toml",
        common::manifest("shared", "").as_bytes(),
    );
    write(outer.path(), "shared/src/lib.rs", RACY.as_bytes());
    let out = run_in(
        outer.path(),
        &[
            "--manifest-path",
            s(&app.join("Cargo.toml")),
            "--message-format",
            "json",
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("path dependency `shared` of `app`")
            && out
                .stderr
                .contains("outside the workspace root; not linted"),
        "{}",
        out.stderr
    );
}

// ---- item 6: `--write-baseline` writes nothing through a symlinked directory ----

#[test]
fn write_baseline_refuses_a_symlinked_directory() {
    // `07-write-baseline-through-symlinked-dir.sh`.
    let outer = tempfile::tempdir().expect("tempdir");
    let repo = outer.path().join("repo");
    let outside = outer.path().join("outside");
    write(&repo, "Cargo.toml", common::manifest("v", "").as_bytes());
    write(&repo, "src/lib.rs", b"pub fn f() {}\n");
    std::fs::create_dir_all(&outside).expect("mkdir");
    std::os::unix::fs::symlink(&outside, repo.join("baselines")).expect("symlink");
    let target = repo.join("baselines/idem-baseline.json");
    let out = run_in(
        outer.path(),
        &[
            "--manifest-path",
            s(&repo.join("Cargo.toml")),
            "--write-baseline",
            s(&target),
        ],
    );
    let left: Vec<_> = std::fs::read_dir(&outside)
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert!(left.is_empty(), "written outside the checkout: {left:?}");
    out.assert_one_line_error("symlink");
    // A real directory inside the checkout still takes the baseline.
    std::fs::create_dir_all(repo.join("real")).expect("mkdir");
    let out = run_in(
        outer.path(),
        &[
            "--manifest-path",
            s(&repo.join("Cargo.toml")),
            "--write-baseline",
            s(&repo.join("real/b.json")),
        ],
    );
    out.assert_code(0);
    assert!(repo.join("real/b.json").is_file());
}

// ---- item 8: nothing under `.git/` is a source; configs are read as sources are ----

#[test]
fn a_module_under_dot_git_is_not_read() {
    // `08-reads-outside-or-dotgit.sh` a): a checkout action keeps a token in `.git/config`.
    let outer = tempfile::tempdir().expect("tempdir");
    let repo = outer.path().join("repo");
    write(&repo, "Cargo.toml", common::manifest("v", "").as_bytes());
    write(
        &repo,
        "src/lib.rs",
        b"#[path = \"../.git/config\"] mod c;\n",
    );
    git(&repo, &["init", "-q"]);
    git(
        &repo,
        &[
            "config",
            "http.https://github.com/.extraheader",
            "AUTHORIZATION: basic FAKETOKEN /* x",
        ],
    );
    let out = run_in(&repo, &["--message-format", "json"]);
    assert!(!out.stdout.contains("FAKETOKEN"), "{}", out.stdout);
    assert!(!out.stdout.contains("extraheader"), "{}", out.stdout);
    assert!(!out.stdout.contains("[core]"), "{}", out.stdout);
    let found = out.findings(&repo);
    assert_eq!(found.len(), 1, "{}", out.stdout);
    assert_eq!(found[0].3, "idem::parse_error");
    assert!(
        out.stdout.contains("inside a `.git` directory"),
        "{}",
        out.stdout
    );
}

#[test]
fn a_config_symlink_leading_out_is_refused() {
    // `08-reads-outside-or-dotgit.sh` b): `idem-lint.toml` links to a credentials file.
    let outer = tempfile::tempdir().expect("tempdir");
    let repo = outer.path().join("repo");
    write(
        outer.path(),
        "home/.aws/credentials",
        b"[default]\naws_access_key_id = AKIAFAKEKEYID\naws_secret_access_key = FAKE\n",
    );
    write(&repo, "Cargo.toml", common::manifest("v", "").as_bytes());
    write(&repo, "src/lib.rs", b"pub fn f() {}\n");
    std::os::unix::fs::symlink(
        outer.path().join("home/.aws/credentials"),
        repo.join("idem-lint.toml"),
    )
    .expect("symlink");
    let manifest = repo.join("Cargo.toml");
    let out = run_in(
        outer.path(),
        &["--manifest-path", s(&manifest), "--message-format", "short"],
    );
    out.assert_one_line_error("outside the workspace");
    // Refused before it is parsed: not even the position of a TOML error is given.
    assert!(!out.stderr.contains("invalid TOML"), "{}", out.stderr);
    assert!(!out.stderr.contains("AKIA"), "{}", out.stderr);
}

// ---- item 9: plain-directory mode cannot be emptied without a trace ----

#[test]
fn a_cache_marker_without_the_signature_hides_nothing() {
    // `09-plain-dir-markers-hide-all.sh`: a `CACHEDIR.TAG` of any content, or a
    // `.rustc_info.json`, in `src/`.
    for (marker, content) in [("src/CACHEDIR.TAG", "x\n"), ("src/.rustc_info.json", "{}")] {
        let dir = common::tree(&[("src/lib.rs", RACY), (marker, content)]);
        let out = run_in(
            dir.path(),
            &[".", "-D", "warnings", "--message-format", "json"],
        );
        assert_eq!(
            out.findings(dir.path()).len(),
            1,
            "{marker}\n{}",
            out.stderr
        );
        assert_eq!(out.code, 1);
    }
}

#[test]
fn an_empty_plain_run_says_so() {
    // An ignore file may exclude everything (it is honoured), but not silently.
    for (ignore, content) in [(".ignore", "*\n"), (".gitignore", "*.rs\n")] {
        let dir = common::tree(&[("src/lib.rs", RACY), (ignore, content)]);
        let out = run_in(
            dir.path(),
            &[".", "-D", "warnings", "--message-format", "json"],
        );
        assert_eq!(out.code, 0);
        assert!(
            out.stderr.contains("warning: 0 `.rs` files linted below")
                && out
                    .stderr
                    .contains("(1 left out by ignore files or as hidden)"),
            "{ignore}: {}",
            out.stderr
        );
    }
}

// ---- item 10: CI can see, and refuse, the checkout's own levels ----

#[test]
fn the_checkouts_lowered_levels_are_named_and_isolated_ignores_them() {
    for (config_file, config, manifest_extra) in [
        (
            "idem-lint.toml",
            "[lints]\ncheck_then_act = \"allow\"\n",
            "",
        ),
        (
            "README.md",
            "",
            "\n[package.metadata.idem-lint.lints]\ncheck_then_act = \"allow\"\n",
        ),
    ] {
        let dir = common::tree(&[
            (
                "Cargo.toml",
                &common::manifest(
                    "v",
                    &format!("[dependencies]\nredis = \"0.25\"\n{manifest_extra}"),
                ),
            ),
            ("src/lib.rs", RACY),
            (config_file, config),
        ]);
        let out = run_in(dir.path(), &["-D", "warnings", "--message-format", "json"]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        let line = out
            .stderr
            .lines()
            .find(|l| l.contains("lowers lints below the command line's level"))
            .unwrap_or_else(|| panic!("no line names the lowered lints: {}", out.stderr));
        assert!(
            line.starts_with("warning: ")
                && line.contains("`check_then_act` at allow (not deny) in `v`")
                && line.contains("--isolated"),
            "{line}"
        );
        let out = run_in(
            dir.path(),
            &["--isolated", "-D", "warnings", "--message-format", "json"],
        );
        assert_eq!(out.code, 1, "{}", out.stderr);
        assert_eq!(out.findings(dir.path()).len(), 1);
        assert!(!out.stderr.contains("lowers lints"), "{}", out.stderr);
    }
}

#[test]
fn isolated_ignores_a_config_that_would_stop_the_run() {
    // The checkout's configuration is not even read: a broken one does not stop the gate.
    let dir = common::tree(&[
        ("Cargo.toml", &common::manifest("v", "")),
        ("src/lib.rs", "pub fn f() {}\n"),
        ("idem-lint.toml", "[lints]\nno_such_lint = \"allow\"\n"),
    ]);
    run_in(dir.path(), &["--message-format", "json"]).assert_code(2);
    run_in(dir.path(), &["--isolated", "--message-format", "json"]).assert_code(0);
}

// ---- item 7: run-wide and memory budgets for the analysis ----

/// A member whose analysis takes long (every fn of `n` files calling every other), beside a
/// member with one finding.
fn complete_call_graph(root: &Path, n: usize) {
    common::complete_call_graph_workspace(root, n);
    write(
        root,
        "good/Cargo.toml",
        common::manifest("good", "[dependencies]\nredis = \"0.25\"\n").as_bytes(),
    );
    write(root, "good/src/lib.rs", RACY.as_bytes());
}

fn assert_complete_stream(out: &common::Run) {
    assert!(
        out.stdout.trim_end().ends_with(r#""success":true}"#) && !out.stderr.contains("panicked"),
        "{}",
        out.stderr
    );
}

#[test]
fn the_run_ends_at_its_own_budget_with_a_warning() {
    // Each package within its own budget, the run not: N = 120 took 1.5 s in a
    // release build (minutes in a debug one), the run's budget is 300 ms.
    let dir = tempfile::tempdir().expect("tempdir");
    complete_call_graph(dir.path(), 120);
    let out = run_in(
        dir.path(),
        &[
            "--workspace",
            "--message-format",
            "json",
            "--run-timeout-ms",
            "300",
            "--no-cache",
        ],
    );
    assert_complete_stream(&out);
    let stopped: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.contains("stopped at the run's budget of 300 ms (`--run-timeout-ms`)"))
        .collect();
    assert!(
        stopped.iter().any(|l| l.starts_with("warning: ")
            && l.contains("the analysis of package `complete`")),
        "{}",
        out.stderr
    );
}

#[test]
fn the_analysis_ends_at_the_memory_budget_with_a_warning() {
    // Any process is over 1 MiB: every analysis starts spent, deterministically, and the
    // run still ends with its output and one warning per package.
    let dir = tempfile::tempdir().expect("tempdir");
    complete_call_graph(dir.path(), 20);
    let out = run_in(
        dir.path(),
        &[
            "--workspace",
            "--message-format",
            "json",
            "--max-analysis-memory",
            "1",
            "--no-cache",
        ],
    );
    assert_complete_stream(&out);
    let stopped = out
        .stderr
        .lines()
        .filter(|l| {
            l.starts_with("warning: ")
                && l.contains("stopped at the memory budget of 1 MiB (`--max-analysis-memory`)")
        })
        .count();
    assert_eq!(stopped, 2, "{}", out.stderr);
    // With the default budget, nothing stops.
    let out = run_in(
        dir.path(),
        &["--workspace", "--message-format", "json", "--no-cache"],
    );
    assert!(!out.stderr.contains("stopped at"), "{}", out.stderr);
}
