//! Helpers shared by the integration tests: run the real binary, build throwaway crates.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub const BIN: &str = env!("CARGO_BIN_EXE_cargo-idem-lint");

/// The binary [`run_env`] runs: [`BIN`], or the one `IDEM_LINT_TEST_BIN` names, so a test can
/// be shown to fail on an older build (`IDEM_LINT_TEST_BIN=old/cargo-idem-lint cargo test`).
pub fn bin() -> String {
    std::env::var("IDEM_LINT_TEST_BIN").unwrap_or_else(|_| BIN.to_string())
}

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The result of one run of the binary.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// The parsed JSON lines of `--message-format json` (without `build-finished`).
    pub fn messages(&self) -> Vec<serde_json::Value> {
        self.stdout
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("a JSON line"))
            .filter(|v| v["reason"] == "compiler-message")
            .collect()
    }

    /// `(file name relative to `base`, line, level, code)` of every finding.
    pub fn findings(&self, base: &Path) -> Vec<(String, u64, String, String)> {
        let base = base.canonicalize().unwrap_or(base.to_path_buf());
        let mut out: Vec<_> = self
            .messages()
            .iter()
            .map(|m| {
                let msg = &m["message"];
                let span = msg["spans"]
                    .as_array()
                    .and_then(|s| s.iter().find(|s| s["is_primary"] == true))
                    .expect("a primary span");
                let file = PathBuf::from(span["file_name"].as_str().expect("file_name"));
                let file = file.canonicalize().unwrap_or(file);
                (
                    file.strip_prefix(&base)
                        .unwrap_or(&file)
                        .to_string_lossy()
                        .into_owned(),
                    span["line_start"].as_u64().expect("line"),
                    msg["level"].as_str().expect("level").to_string(),
                    msg["code"]["code"].as_str().expect("code").to_string(),
                )
            })
            .collect();
        out.sort();
        out
    }

    pub fn assert_code(&self, code: i32) -> &Run {
        assert_eq!(
            self.code, code,
            "exit code; stdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }

    /// Errors are one line, start with `error: `, and never show a panic or backtrace.
    pub fn assert_one_line_error(&self, contains: &str) -> &Run {
        self.assert_code(2);
        let lines: Vec<&str> = self.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "one line expected:\n{}", self.stderr);
        assert!(lines[0].starts_with("error: "), "{}", self.stderr);
        assert!(!self.stderr.contains("panicked"), "{}", self.stderr);
        assert!(
            lines[0].contains(contains),
            "`{contains}` not in: {}",
            self.stderr
        );
        self
    }
}

/// The fixtures below `dir`: crates, else directories with `.rs` files.
pub fn fixtures(dir: &Path, out: &mut Vec<PathBuf>) {
    if dir.join("Cargo.toml").is_file() {
        out.push(dir.to_path_buf());
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    if entries
        .iter()
        .any(|p| p.extension().is_some_and(|e| e == "rs"))
    {
        out.push(dir.to_path_buf());
        return;
    }
    for e in entries {
        if e.is_dir() && e.file_name().is_some_and(|n| n != "target") {
            fixtures(&e, out);
        }
    }
}

/// Runs the binary in `cwd` with `args`.
pub fn run_in(cwd: &Path, args: &[&str]) -> Run {
    run_env(cwd, args, &[])
}

/// Runs the binary in `cwd` with `args` and the environment variables `env` set (the
/// color and target-directory variables of the caller's environment removed first: a
/// developer's `CARGO_TARGET_DIR` would move the cache the tests look for).
pub fn run_env(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    let out: Output = Command::new(bin())
        .args(args)
        .current_dir(cwd)
        .env_remove("NO_COLOR")
        .env_remove("CARGO_TERM_COLOR")
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_BUILD_TARGET_DIR")
        .envs(env.iter().copied())
        .output()
        .expect("the binary runs");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

pub fn run(args: &[&str]) -> Run {
    run_in(&repo(), args)
}

/// Writes `files` (path, content) below a fresh temporary directory.
pub fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for (path, content) in files {
        write(dir.path(), path, content.as_bytes());
    }
    dir
}

pub fn write(root: &Path, path: &str, content: &[u8]) {
    let full = root.join(path);
    std::fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
    std::fs::write(full, content).expect("write");
}

/// A minimal `Cargo.toml` for package `name`, plus `extra` appended.
pub fn manifest(name: &str, extra: &str) -> String {
    format!("[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n{extra}")
}

pub fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// A crate with one unparsable file, linted through the library, plus one extra finding
/// decorated with everything a finding can carry (labels, note, help, a suggestion), so
/// emitters can be tested on shapes no lint of this branch produces yet.
pub fn decorated_report(
    dir: &Path,
) -> (
    cargo_idem_lint::discovery::Workspace,
    cargo_idem_lint::report::Report,
) {
    use cargo_idem_lint::{config::Config, discovery, parse::ParseOptions, report};
    use idem_lints::lint::PARSE_ERROR;
    use idem_lints::model::Span;
    use idem_lints::{Applicability, Diagnostic, Level};

    let ws = discovery::discover(&discovery::Selection::dir(dir)).expect("discovers");
    let config = Config::load(&ws).expect("config");
    let mut report = report::check(&ws, &ParseOptions::default(), &config, &[]).expect("checks");
    let pkg = &report.packages[0];
    let (id, text) = pkg
        .package
        .files
        .iter()
        .zip(&pkg.sources)
        .find(|(_, s)| s.text.contains(".send()"))
        .map(|(m, s)| (m.id, s.text.clone()))
        .expect("a file with `.send()`");
    let at = |needle: &str| {
        let lo = text.find(needle).expect("needle") as u32;
        Span::new(id, lo, lo + needle.len() as u32)
    };
    let mut d = Diagnostic::new(
        &PARSE_ERROR,
        at("create_job()"),
        "`create_job` sent without a token",
    );
    d.level = Level::Deny;
    d.primary_label("this operation takes `client_request_token`")
        .span_label(at("λ"), "the key came from here")
        .note("the SDK fills a missing token with a random UUID per `send()`")
        .help("set the token from the message")
        .suggest(
            "pass the message's key",
            at(".send()").shrink_to_lo(),
            ".client_request_token(/* idempotency key */)",
            Applicability::HasPlaceholders,
        );
    report.findings.push(cargo_idem_lint::report::Finding {
        package: 0,
        diag: d,
    });
    (ws, report)
}

/// `decorated_report` rendered in `format`, with paths relative to the crate.
pub fn emit_decorated(format: cargo_idem_lint::cli::MessageFormat) -> String {
    let dir = decorated_crate();
    let (ws, report) = decorated_report(dir.path());
    let input = cargo_idem_lint::emit::Input {
        ws: &ws,
        report: &report,
        cwd: dir.path(),
    };
    let mut buf = Vec::new();
    cargo_idem_lint::emit::emit(format, &input, &mut buf).expect("emits");
    String::from_utf8(buf).expect("utf-8")
}

/// The files of the crate `decorated_report` expects.
pub fn decorated_crate() -> tempfile::TempDir {
    tree(&[
        ("Cargo.toml", &manifest("decorated", "")),
        ("src/lib.rs", "mod jobs;\nmod broken;\n"),
        ("src/broken.rs", "fn f( {}\n"),
        (
            "src/jobs.rs",
            "pub async fn go(c: &Client) {\n    let λ = 1;\n    c.create_job()\n        .send()\n        .await;\n}\n",
        ),
    ])
}

/// Copies the tree `from` into `to`, leaving out its top-level `target/` (cargo's build
/// directory, where the re-run cache of earlier test runs lives).
pub fn copy_dir(from: &Path, to: &Path) {
    copy_entries(from, to, true);
}

fn copy_entries(from: &Path, to: &Path, top: bool) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir").flatten() {
        if top && entry.file_name() == "target" {
            continue;
        }
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_entries(&entry.path(), &target, false);
        } else {
            std::fs::copy(entry.path(), target).expect("copy");
        }
    }
}

/// `PATH` with the built binary's directory first, so `cargo idem-lint` and a hook's
/// `cargo-idem-lint` entry run it.
pub fn path_with_binary_first() -> std::ffi::OsString {
    let bin_dir = Path::new(BIN).parent().expect("bin dir").to_path_buf();
    std::env::join_paths(std::iter::once(bin_dir).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .expect("PATH")
}

/// The executable `name` on `PATH`.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// A workspace of two members, `complete` and `good`: `complete` is `n` files whose fns all
/// call each other (an analysis that takes long: the hostile budget tests), `good` is left
/// for the caller to write.
pub fn complete_call_graph_workspace(root: &Path, n: usize) {
    write(
        root,
        "Cargo.toml",
        b"[workspace]\nresolver = \"2\"\nmembers = [\"complete\", \"good\"]\n",
    );
    write(
        root,
        "complete/Cargo.toml",
        manifest("complete", "[dependencies]\nredis = \"0.25\"\n").as_bytes(),
    );
    let mods: String = (0..n).map(|i| format!("pub mod m{i};\n")).collect();
    write(root, "complete/src/lib.rs", mods.as_bytes());
    let calls: String = (0..n)
        .map(|j| format!("    crate::m{j}::f{j}(c, id).await?;\n"))
        .collect();
    for i in 0..n {
        let f = format!(
            "pub async fn f{i}(c: &mut redis::aio::ConnectionManager, id: u64) -> redis::RedisResult<()> {{\n    let k = format!(\"done:{{}}\", id);\n    if c.exists(&k).await? {{ return Ok(()); }}\n{calls}    c.set(&k, 1).await?;\n    Ok(())\n}}\n"
        );
        write(root, &format!("complete/src/m{i}.rs"), f.as_bytes());
    }
}
