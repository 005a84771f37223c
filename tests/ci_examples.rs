//! The CI examples (issue 9, item 6): `docs/github-workflow.yml` and `.pre-commit-hooks.yaml`
//! are parsed, and the commands they name run, as the runner and pre-commit would run them,
//! through `cargo` with the built binary first on `PATH`.

mod common;

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};
use yaml_rust2::{Yaml, YamlLoader};

fn load(path: &str) -> Yaml {
    let text = std::fs::read_to_string(common::repo().join(path)).expect("the example exists");
    let mut docs = YamlLoader::load_from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
    assert_eq!(docs.len(), 1, "{path}: one document");
    docs.remove(0)
}

/// A repository (`.git` at its top) with a copy of `fixtures/demo` in `rust-svc/`.
fn repository() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    common::copy_dir(
        &common::repo().join("fixtures/demo"),
        &dir.path().join("rust-svc"),
    );
    let git = Command::new("git")
        .args(["init", "-q"])
        .current_dir(dir.path())
        .status()
        .expect("git runs");
    assert!(git.success());
    dir
}

/// `PATH` with the built binary's directory first, so `cargo idem-lint` runs it. A fresh
/// `CARGO_HOME` keeps an installed `cargo-idem-lint` in `~/.cargo/bin` out of the way
/// (cargo looks there before `PATH`); nothing here needs the registry. `RUSTUP_TOOLCHAIN`
/// (set when the tests run under a rustup proxy) is removed, as on a runner, so rustup
/// picks the toolchain from the current directory.
fn shell(script: &str, cwd: &Path, cargo_home: &Path) -> Output {
    shell_env(script, cwd, cargo_home, &[])
}

/// [`shell`] with more environment variables.
fn shell_env(script: &str, cwd: &Path, cargo_home: &Path, env: &[(&str, &Path)]) -> Output {
    let path = common::path_with_binary_first();
    // GitHub's default shell for `run`.
    Command::new("bash")
        .args(["--noprofile", "--norc", "-eo", "pipefail", "-c", script])
        .current_dir(cwd)
        .env("PATH", path)
        .env("CARGO_HOME", cargo_home)
        .env_remove("RUSTUP_TOOLCHAIN")
        .envs(env.iter().copied())
        .env_remove("NO_COLOR")
        .env("CARGO_TERM_COLOR", "always")
        .output()
        .expect("bash runs")
}

fn steps(workflow: &Yaml) -> Vec<&Yaml> {
    let jobs = workflow["jobs"].as_hash().expect("jobs");
    jobs.values()
        .flat_map(|job| job["steps"].as_vec().expect("steps").iter())
        .collect()
}

#[test]
fn the_workflow_runs_the_linter_and_uploads_its_sarif() {
    let wf = load("docs/github-workflow.yml");
    assert_eq!(wf["permissions"]["security-events"].as_str(), Some("write"));
    let steps = steps(&wf);
    let uses = |prefix: &str| {
        steps
            .iter()
            .find(|s| s["uses"].as_str().is_some_and(|u| u.starts_with(prefix)))
    };
    assert!(uses("actions/checkout@").is_some());
    let upload = uses("github/codeql-action/upload-sarif@").expect("an upload step");
    assert_eq!(upload["if"].as_str(), Some("always()"));
    let sarif_file = upload["with"]["sarif_file"].as_str().expect("sarif_file");
    assert!(
        steps.iter().any(|s| s["run"]
            .as_str()
            .is_some_and(|r| r.starts_with("cargo install"))),
        "an install step"
    );
    // Every cargo step runs outside the checkout: inside it, rustup would take the pull
    // request's `rust-toolchain.toml`.
    let runner_temp = "${{ runner.temp }}";
    let runs: Vec<(&str, &str)> = steps
        .iter()
        .filter_map(|s| Some((s["run"].as_str()?, s["working-directory"].as_str())))
        .filter(|(run, _)| run.starts_with("cargo"))
        .map(|(run, dir)| (run, dir.unwrap_or("the checkout")))
        .collect();
    assert_eq!(runs.len(), 3, "{runs:?}");
    for (run, dir) in &runs {
        assert_eq!(*dir, runner_temp, "`{run}` runs in the checkout");
    }
    let runs: Vec<&str> = runs
        .iter()
        .map(|(run, _)| *run)
        .filter(|run| run.contains("cargo idem-lint"))
        .collect();
    assert_eq!(runs.len(), 2, "{runs:?}");

    let repo = repository();
    let svc = repo.path().join("rust-svc");
    let home = tempfile::tempdir().expect("cargo home");
    let temp = tempfile::tempdir().expect("runner temp");
    // The pull request ships a toolchain of its own and names it in `rust-toolchain.toml`
    // (rustup takes an absolute `path`, and a runner's checkout path is known in advance).
    let ran = temp.path().join("the pull request's toolchain ran");
    let evil = repo.path().join("toolchain");
    for bin in ["cargo", "rustc"] {
        let script = format!("#!/bin/sh\ntouch '{}'\nexit 42\n", ran.display());
        let path = evil.join("bin").join(bin);
        std::fs::create_dir_all(path.parent().expect("bin")).expect("mkdir");
        std::fs::write(&path, script).expect("write");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    std::fs::write(
        repo.path().join("rust-toolchain.toml"),
        format!("[toolchain]\npath = \"{}\"\n", evil.display()),
    )
    .expect("write");
    // The workflow names `$GITHUB_WORKSPACE/Cargo.toml`; this checkout is a monorepo whose
    // crate is one level down, so the variable names the crate's directory (the `.git` of the
    // repository root stays one level up).
    let step = |script: &str| {
        shell_env(
            script,
            temp.path(),
            home.path(),
            &[("GITHUB_WORKSPACE", &svc)],
        )
    };
    let gate = runs
        .iter()
        .find(|r| r.contains("github"))
        .expect("the annotation step");
    let out = step(gate);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "findings at deny fail the step: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let annotations: Vec<&str> = stdout.lines().collect();
    assert!(annotations.len() >= 5, "{stdout}");
    for a in &annotations {
        assert!(a.starts_with("::error file=rust-svc/src/"), "{a}");
        let file = a["::error file=".len()..].split(',').next().expect("file");
        assert!(
            repo.path().join(file).is_file(),
            "{file} from the repository root"
        );
    }

    let sarif = runs
        .iter()
        .find(|r| r.contains("sarif"))
        .expect("the SARIF step");
    let out = step(sarif);
    assert!(
        out.status.success(),
        "findings do not fail the SARIF step: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sarif_file = sarif_file.replace(runner_temp, &temp.path().to_string_lossy());
    let doc: Value = serde_json::from_str(
        &std::fs::read_to_string(sarif_file).expect("the step wrote the file upload reads"),
    )
    .expect("SARIF is JSON");
    let results = doc["runs"][0]["results"].as_array().expect("results");
    assert_eq!(results.len(), annotations.len());
    for r in results {
        let uri = r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
            .as_str()
            .expect("uri");
        assert!(
            repo.path().join(uri).is_file(),
            "{uri} resolves against the checkout"
        );
    }

    // An error (not findings) still fails the SARIF step.
    std::fs::write(
        svc.join("idem-lint.toml"),
        "[lints]\nno_such_lint = \"deny\"\n",
    )
    .expect("write");
    let out = step(sarif);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown lint `no_such_lint`"));
    assert!(!ran.exists(), "a step ran the pull request's toolchain");
}

#[test]
fn the_pre_commit_hook_reports_the_staged_files_only() {
    let hooks = load(".pre-commit-hooks.yaml");
    let hooks = hooks.as_vec().expect("a list of hooks");
    let hook = hooks
        .iter()
        .find(|h| h["id"].as_str() == Some("idem-lint"))
        .expect("the idem-lint hook");
    assert_eq!(hook["types"][0].as_str(), Some("rust"));
    assert_eq!(hook["pass_filenames"].as_bool(), Some(true));
    assert!(hook["name"].as_str().is_some() && hook["language"].as_str().is_some());
    let entry = hook["entry"].as_str().expect("entry");

    // pre-commit runs `entry args files` from the repository's root.
    let repo = repository();
    let home = tempfile::tempdir().expect("cargo home");
    let run = |extra: &str, files: &[&str]| {
        shell(
            &format!("{entry} {extra} {}", files.join(" ")),
            repo.path(),
            home.path(),
        )
    };
    let notify = "rust-svc/src/notify.rs";
    let out = run("--message-format json", &[notify]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let reported = common::Run {
        code: 0,
        stdout,
        stderr: String::new(),
    }
    .findings(repo.path());
    let full = common::run_in(&repo.path().join("rust-svc"), &["--message-format", "json"])
        .findings(repo.path());
    let expected: Vec<_> = full.into_iter().filter(|f| f.0 == notify).collect();
    assert_eq!(reported, expected);
    assert!(expected.len() >= 3, "{expected:?}");
    // With the args a user adds (`args: [-D, warnings]`) the commit is refused.
    let out = run("-D warnings", &[notify, "rust-svc/src/lib.rs"]);
    assert_eq!(out.status.code(), Some(1));
    // A clean file passes.
    let out = run("-D warnings", &["rust-svc/src/lib.rs"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// The hook's command on a commit that touches two independent crates (no `[workspace]`):
/// each crate is linted once and every staged file's findings are reported, whatever the
/// order of the files (issue 25, item 1). A `.rs` file in no crate is named on stderr.
#[test]
fn the_pre_commit_hook_lints_every_crate_its_files_belong_to() {
    let hooks = load(".pre-commit-hooks.yaml");
    let entry = hooks
        .as_vec()
        .expect("a list of hooks")
        .iter()
        .find(|h| h["id"].as_str() == Some("idem-lint"))
        .and_then(|h| h["entry"].as_str())
        .expect("the idem-lint hook's entry")
        .to_string();
    let repo = repository();
    // A second, independent crate: the demo under another name.
    let other = repo.path().join("billing-svc");
    common::copy_dir(&common::repo().join("fixtures/demo"), &other);
    let manifest = other.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).expect("manifest");
    std::fs::write(
        &manifest,
        text.replace("name = \"demo-transcoder\"", "name = \"billing-svc\""),
    )
    .expect("write");
    std::fs::write(repo.path().join("build_helper.rs"), "fn main() {}\n").expect("write");
    let home = tempfile::tempdir().expect("cargo home");
    let run = |files: &[&str]| {
        shell(
            &format!(
                "{entry} -D warnings --message-format json {}",
                files.join(" ")
            ),
            repo.path(),
            home.path(),
        )
    };
    let findings = |out: &Output| {
        common::Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::new(),
        }
        .findings(repo.path())
    };
    let clean = "rust-svc/src/lib.rs";
    let notify = "billing-svc/src/notify.rs";
    let full = |dir: &Path| {
        common::run_in(dir, &["-D", "warnings", "--message-format", "json"]).findings(repo.path())
    };
    let expected: Vec<_> = full(&other).into_iter().filter(|f| f.0 == notify).collect();
    assert!(expected.len() >= 3, "{expected:?}");
    for files in [[clean, notify], [notify, clean]] {
        let out = run(&files);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{files:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(findings(&out), expected, "{files:?}");
    }
    // Both crates' files: each crate's findings in its file, each crate linted once.
    let own = "rust-svc/src/notify.rs";
    let out = run(&[own, notify, "rust-svc/src/billing.rs"]);
    let reported = findings(&out);
    let mut want = expected.clone();
    want.extend(
        full(&repo.path().join("rust-svc"))
            .into_iter()
            .filter(|f| f.0 == own || f.0 == "rust-svc/src/billing.rs"),
    );
    want.sort();
    let mut sorted = reported.clone();
    sorted.sort();
    assert_eq!(sorted, want);
    // A file in no crate is named, and the crates' files are still linted.
    let out = run(&["build_helper.rs", notify]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("`build_helper.rs` belongs to no package"),
        "{stderr}"
    );
    assert!(!stderr.contains("--workspace"), "{stderr}");
    assert_eq!(findings(&out), expected);
    let out = run(&["build_helper.rs"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no package to lint"));
}

/// pre-commit itself (issue 25, item 1): the hook of `.pre-commit-hooks.yaml`, as a local
/// hook (`language: system` on the built binary instead of `language: rust`, which would
/// build this repository), run by `pre-commit run` on a commit that stages a clean file of
/// one crate and a file with findings of another. pre-commit passes the files in git's
/// order, the clean crate's first: the commit must still be refused, with the other crate's
/// findings. `.ci/run` installs pre-commit; without it this test fails and says so.
#[test]
fn pre_commit_refuses_a_commit_with_findings_in_a_second_crate() {
    let pre_commit = common::which("pre-commit").unwrap_or_else(|| {
        panic!("`pre-commit` is not installed (`python3 -m pip install pre-commit`; `.ci/run` does it)")
    });
    let hooks = load(".pre-commit-hooks.yaml");
    let hook = hooks
        .as_vec()
        .expect("a list of hooks")
        .iter()
        .find(|h| h["id"].as_str() == Some("idem-lint"))
        .expect("the idem-lint hook")
        .clone();
    let field = |k: &str| hook[k].as_str().expect(k).to_string();
    let types: Vec<&str> = hook["types"]
        .as_vec()
        .expect("types")
        .iter()
        .map(|t| t.as_str().expect("type"))
        .collect();
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = dir.path();
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .args(args)
            .current_dir(repo)
            .output()
            .expect("git runs");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    git(&["init", "-q"]);
    // The clean crate sorts first, so it comes first on the hook's command line.
    for (name, crate_name) in [("a-svc", "a-svc"), ("b-svc", "b-svc")] {
        let to = repo.join(name);
        common::copy_dir(&common::repo().join("fixtures/demo"), &to);
        let manifest = to.join("Cargo.toml");
        let text = std::fs::read_to_string(&manifest).expect("manifest");
        std::fs::write(
            &manifest,
            text.replace(
                "name = \"demo-transcoder\"",
                &format!("name = \"{crate_name}\""),
            ),
        )
        .expect("write");
    }
    std::fs::write(
        repo.join(".pre-commit-config.yaml"),
        format!(
            "repos:\n  - repo: local\n    hooks:\n      - id: {id}\n        name: {name}\n        entry: {entry}\n        language: system\n        types: [{types}]\n        pass_filenames: {pass}\n        require_serial: {serial}\n        args: [-D, warnings]\n",
            id = field("id"),
            name = field("name"),
            entry = field("entry"),
            types = types.join(", "),
            pass = hook["pass_filenames"].as_bool().expect("pass_filenames"),
            serial = hook["require_serial"].as_bool().expect("require_serial"),
        ),
    )
    .expect("write the config");
    git(&[
        "add",
        ".pre-commit-config.yaml",
        "a-svc/src/lib.rs",
        "b-svc/src/notify.rs",
    ]);

    let path = common::path_with_binary_first();
    let out = Command::new(pre_commit)
        .args(["run", "--color", "never"])
        .current_dir(repo)
        .env("PATH", path)
        .env("PRE_COMMIT_HOME", dir.path().join(".pre-commit-home"))
        .env_remove("NO_COLOR")
        .output()
        .expect("pre-commit runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("Failed"), "{stdout}");
    for finding in [
        "b-svc/src/notify.rs:42:5",
        "b-svc/src/notify.rs:59:5",
        "b-svc/src/notify.rs:66:17",
    ] {
        assert!(stdout.contains(finding), "{finding} missing:\n{stdout}");
    }
    // The other staged file's crate was linted too, and has no finding in it.
    assert!(!stdout.contains("a-svc/src/lib.rs:"), "{stdout}");
}
