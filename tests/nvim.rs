//! Neovim's built-in LSP client against the installed binary: open a fixture file, receive
//! the diagnostics, edit the buffer without saving and see them change, apply a code action.
//! Neovim is Debian's package (`.ci/run` installs it); without `nvim` this test fails and says
//! so, because CI must run it.
//!
//! What Neovim received is written to `target/lsp-nvim-report.json` for the record.

mod common;
#[path = "common/lsp.rs"]
mod lsp;

use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn neovim_receives_diagnostics_before_and_after_an_unsaved_edit_and_applies_a_fix() {
    let nvim = common::which("nvim").unwrap_or_else(|| {
        panic!(
            "`nvim` is not installed: this test drives Neovim's LSP client \
             (`apt-get install -y neovim`; `.ci/run` does it)"
        )
    });
    let (_tmp, root) = lsp::fixture_copy();
    let lib = root.join("src/lib.rs");
    let on_disk = std::fs::read_to_string(&lib).expect("read");
    let out = root.join("nvim-report.json");
    let script = common::repo().join("tests/nvim/lsp_check.lua");
    let mut child = Command::new(nvim)
        .args(["--headless", "--clean", "-n", "-c"])
        .arg(format!("luafile {}", script.display()))
        .env("IDEM_LSP_BIN", common::BIN)
        .env("IDEM_FIXTURE_ROOT", &root)
        .env("IDEM_NVIM_OUT", &out)
        .current_dir(&root)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start nvim");
    let status = wait_or_kill(&mut child, Duration::from_secs(180));
    let text = std::fs::read_to_string(&out)
        .unwrap_or_else(|e| panic!("nvim wrote no report ({status}): {e}"));
    let report: Value = serde_json::from_str(&text).expect("JSON report");
    // Kept for the record (the closing note quotes it).
    let _ = std::fs::write(
        common::repo().join("target/lsp-nvim-report.json"),
        serde_json::to_string_pretty(&report).unwrap_or_default(),
    );
    assert!(
        report["error"].is_null(),
        "the Lua script failed: {}",
        report["error"]
    );
    assert!(status.success(), "nvim exited with {status}");

    let steps = report["steps"].as_array().expect("steps");
    let codes = |i: usize| -> Vec<String> {
        steps[i]["diagnostics"]
            .as_array()
            .expect("diagnostics")
            .iter()
            .map(|d| d["code"].as_str().unwrap_or("").to_string())
            .collect()
    };
    assert_eq!(steps[0]["name"], "open");
    assert_eq!(
        codes(0),
        [
            "idem::nondeterministic_key",
            "idem::missing_idempotency_token"
        ]
    );
    assert_eq!(steps[0]["shown"], 2, "Neovim shows both");
    assert_eq!(steps[1]["name"], "unsaved edit");
    assert_eq!(codes(1), ["idem::missing_idempotency_token"]);
    assert_eq!(report["modified"], true, "the buffer was not saved");
    assert!(
        report["actions"][0]
            .as_str()
            .is_some_and(|t| t.contains("client_request_token")),
        "{}",
        report["actions"]
    );
    assert_eq!(steps[2]["name"], "code action applied");
    let buffer = steps[2]["buffer"].as_array().expect("lines");
    assert!(
        buffer.iter().any(|l| l
            .as_str()
            .is_some_and(|l| l.trim_start().starts_with(".client_request_token("))),
        "the fix is in the buffer, on a line of its own: {buffer:?}"
    );
    assert_eq!(codes(2), Vec::<String>::new(), "the token is set now");
    assert_eq!(
        std::fs::read_to_string(&lib).expect("read"),
        on_disk,
        "nothing was saved"
    );
}

/// The README's own Neovim configuration, three files of one crate open: one server for
/// the three buffers, and every finding shown once (issue 25, item 2).
#[test]
fn the_readme_configuration_starts_one_server_for_every_buffer_of_a_project() {
    readme_config_shows_each_finding_once(
        "fixtures/demo",
        &["src/notify.rs", "src/billing.rs", "src/thumbnail_stage.rs"],
        5,
    );
}

/// The same with files of two members of one workspace open (issue 38, item 1): the
/// nearest `Cargo.toml` is each member's, and one server for the workspace, not one per
/// member, shows each finding once.
#[test]
fn the_readme_configuration_starts_one_server_for_the_members_of_a_workspace() {
    readme_config_shows_each_finding_once(
        "fixtures/cross_member/nondeterministic_key",
        &["common/src/lib.rs", "service/src/lib.rs"],
        3,
    );
}

/// Opens `files` of a copy of `fixture` in Neovim under the README's configuration: one
/// idem-lint client, attached to every buffer, and the findings of the CLI in those files
/// (at least `at_least`), each shown once.
fn readme_config_shows_each_finding_once(fixture: &str, files: &[&str], at_least: usize) {
    let nvim = common::which("nvim").expect("`nvim` is not installed (`.ci/run` installs it)");
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().canonicalize().expect("canonical").join("svc");
    common::copy_dir(&common::repo().join(fixture), &root);
    let init = tmp.path().join("init.lua");
    std::fs::write(&init, readme_neovim_config()).expect("write init.lua");
    let mut expected: Vec<(String, u64, String)> =
        common::run_in(&root, &["--message-format", "json"])
            .findings(&root)
            .into_iter()
            .filter(|f| files.contains(&f.0.as_str()))
            .map(|(file, line, _, code)| (file, line, code))
            .collect();
    expected.sort();
    assert!(expected.len() >= at_least, "{expected:?}");

    // `cargo idem-lint` finds the built binary first on PATH (a fresh CARGO_HOME keeps an
    // installed one out of the way).
    let path = common::path_with_binary_first();
    let out = tmp.path().join("report.json");
    let script = common::repo().join("tests/nvim/readme_config.lua");
    let mut child = Command::new(nvim)
        .args(["--headless", "-n", "-u"])
        .arg(&init)
        .arg("-c")
        .arg(format!("luafile {}", script.display()))
        .env("PATH", path)
        .env("CARGO_HOME", tmp.path().join("cargo-home"))
        .env("IDEM_FILES", files.join("\n"))
        .env("IDEM_WANT", expected.len().to_string())
        .env("IDEM_NVIM_OUT", &out)
        .current_dir(&root)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start nvim");
    let status = wait_or_kill(&mut child, Duration::from_secs(180));
    let text = std::fs::read_to_string(&out)
        .unwrap_or_else(|e| panic!("nvim wrote no report ({status}): {e}"));
    let report: Value = serde_json::from_str(&text).expect("JSON report");
    assert!(
        report["error"].is_null(),
        "the Lua script failed: {}",
        report["error"]
    );
    assert!(status.success(), "nvim exited with {status}");
    assert_eq!(report["clients"], 1, "one server for the project: {report}");
    let mut shown = Vec::new();
    for buffer in report["buffers"].as_array().expect("buffers") {
        assert_eq!(buffer["attached"], 1, "{buffer}");
        let file = buffer["file"].as_str().expect("file").to_string();
        for d in buffer["diagnostics"].as_array().expect("diagnostics") {
            shown.push((
                file.clone(),
                d["line"].as_u64().expect("line"),
                d["code"].as_str().expect("code").to_string(),
            ));
        }
    }
    shown.sort();
    assert_eq!(shown, expected, "each finding shown once");
}

/// The first Lua block after the README's "**Neovim**" heading.
fn readme_neovim_config() -> String {
    let readme = std::fs::read_to_string(common::repo().join("README.md")).expect("README");
    let from = readme
        .find("**Neovim**")
        .expect("the README's Neovim section");
    let block = &readme[from..];
    let start = block.find("```lua\n").expect("a lua block") + "```lua\n".len();
    let end = block[start..].find("```").expect("the block's end");
    block[start..start + end].to_string()
}

fn wait_or_kill(child: &mut std::process::Child, limit: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("wait for nvim") {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("nvim did not finish within {} s", limit.as_secs());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
