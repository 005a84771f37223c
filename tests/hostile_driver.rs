//! Issue 8, the driver's half: what a hostile checkout or a hostile shell does to the
//! subcommand around the analysis (output streams, directory walks, `-p` specs, config
//! errors, suppression comments, control characters and very long lines).

mod common;

use common::{manifest, run, s, tree, BIN};
use std::process::{Command, Stdio};

/// A file with one `check_then_act` finding on line 4.
const RACY: &str =
    "async fn handle(conn: &mut redis::aio::ConnectionManager, id: u64) -> redis::RedisResult<()> {
    let key = format!(\"done:{}\", id);
    if conn.exists(&key).await? { return Ok(()); }
    conn.set(&key, 1).await?;
    Ok(())
}
";

/// `(path relative to `dir`, line)` of every finding in JSON output.
fn lines_of(out: &common::Run, dir: &std::path::Path) -> Vec<(String, u64)> {
    out.findings(dir)
        .into_iter()
        .map(|(file, line, _, _)| (file, line))
        .collect()
}

// ---- item 4: output errors ----

#[test]
fn an_unwritable_stderr_costs_nothing_on_stdout() {
    // The unknown name makes a `warning:` line on stderr, which cannot be written.
    let src = format!("{RACY}// idem-lint: allow(no_such_lint)\n");
    let dir = tree(&[("a.rs", &src)]);
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full");
    let out = Command::new(BIN)
        .args([s(dir.path()), "--message-format", "json"])
        .stderr(Stdio::from(full))
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("idem::check_then_act"), "{stdout}");
    assert!(stdout.contains("build-finished"), "{stdout}");
}

/// Runs the binary with a stdout whose reader is gone before the binary writes: the read
/// end is closed right after `spawn`, while the child is still starting up.
fn with_closed_stdout(args: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new(BIN)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("runs");
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("waits");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn list_and_explain_into_a_closed_pipe_exit_quietly() {
    let dir = tree(&[("a.rs", RACY)]);
    for args in [
        vec!["--list"],
        vec!["--explain", "check_then_act"],
        vec![s(dir.path()), "--message-format", "short"],
    ] {
        let (code, stderr) = with_closed_stdout(&args);
        assert_eq!(code, Some(0), "{args:?}: {stderr}");
        assert_eq!(stderr, "", "{args:?}");
    }
}

// ---- item 5: plain directories ----

#[test]
fn a_plain_directory_whose_path_is_not_utf8_is_linted() {
    use std::os::unix::ffi::OsStrExt;
    let parent = tempfile::tempdir().expect("tempdir");
    let dir = parent.path().join(std::ffi::OsStr::from_bytes(b"bad\xff"));
    std::fs::create_dir(&dir).expect("mkdir");
    std::fs::write(dir.join("a.rs"), RACY).expect("write");
    for format in ["json", "human", "short"] {
        let out = Command::new(BIN)
            .arg(&dir)
            .args(["--message-format", format])
            .output()
            .expect("runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{format}: {stderr}");
        assert!(stdout.contains("check_then_act"), "{format}: {stdout}");
    }
}

#[test]
fn an_unlistable_directory_is_reported_and_the_rest_is_linted() {
    // Running as root, a permission bit stops nothing; a path longer than PATH_MAX stops
    // every user. The chain is built from the inside out so that no call sees a long path.
    let dir = tree(&[("a.rs", RACY)]);
    let long = "d".repeat(250);
    let chain = dir.path().join(&long);
    let wrapper = dir.path().join("w");
    std::fs::create_dir(&chain).expect("mkdir");
    std::fs::write(chain.join("deep.rs"), RACY).expect("write");
    for _ in 0..17 {
        std::fs::create_dir(&wrapper).expect("mkdir");
        std::fs::rename(&chain, wrapper.join(&long)).expect("rename");
        std::fs::rename(&wrapper, &chain).expect("rename");
    }
    let out = run(&[s(dir.path()), "--message-format", "json"]);
    out.assert_code(0);
    assert_eq!(lines_of(&out, dir.path()), [("a.rs".to_string(), 4)]);
    assert!(
        out.stderr.starts_with("warning: could not list `") && out.stderr.contains("skipped"),
        "{}",
        out.stderr
    );
}

// ---- item 13: what a plain walk skips and follows ----

#[test]
fn plain_mode_skips_the_cargo_target_directory_only() {
    let dir = tree(&[
        ("src/target/mod.rs", RACY),
        ("target/debug/build/out.rs", RACY),
        (
            "target/CACHEDIR.TAG",
            "Signature: 8a477f597d28d172789f06886806bc55\n",
        ),
        (
            "other/build/CACHEDIR.TAG",
            "Signature: 8a477f597d28d172789f06886806bc55\n",
        ),
        ("other/build/gen.rs", RACY),
        ("nested/Cargo.toml", &manifest("nested", "")),
        ("nested/target/x.rs", RACY),
        ("nested/src/target.rs", RACY),
    ]);
    let out = run(&[s(dir.path()), "--message-format", "json"]);
    out.assert_code(0);
    assert_eq!(
        lines_of(&out, dir.path()),
        [
            ("nested/src/target.rs".to_string(), 4),
            ("src/target/mod.rs".to_string(), 4)
        ]
    );
}

#[test]
fn directory_symlinks_out_of_the_tree_are_named() {
    let outside = tree(&[("ext.rs", RACY)]);
    let dir = tree(&[("a.rs", RACY), ("sub/b.rs", RACY)]);
    std::os::unix::fs::symlink(outside.path(), dir.path().join("ext")).expect("symlink");
    std::os::unix::fs::symlink(dir.path().join("sub"), dir.path().join("again")).expect("symlink");
    let out = run(&[s(dir.path()), "--message-format", "json"]);
    out.assert_code(0);
    // Inside the tree: linted once, at its own path. Outside: not read, and said so.
    assert_eq!(
        lines_of(&out, dir.path()),
        [("a.rs".to_string(), 4), ("sub/b.rs".to_string(), 4)]
    );
    let warnings: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(warnings.len(), 1, "{}", out.stderr);
    assert!(
        warnings[0].contains("/ext`") && warnings[0].contains("not followed"),
        "{}",
        out.stderr
    );
}

// ---- item 11: package selection ----

fn two_member_workspace() -> tempfile::TempDir {
    tree(&[
        (
            "Cargo.toml",
            "[workspace]\nmembers = [\"a\", \"b\"]\nresolver = \"2\"\n",
        ),
        ("a/Cargo.toml", &manifest("a", "")),
        ("a/src/lib.rs", RACY),
        ("b/Cargo.toml", &manifest("b", "")),
        ("b/src/lib.rs", RACY),
    ])
}

#[test]
fn package_specs_follow_cargo() {
    let dir = two_member_workspace();
    let root = dir.path().canonicalize().expect("canonical");
    let a_only = [("a/src/lib.rs".to_string(), 4)];
    let url = format!("path+file://{}/a#0.1.0", root.display());
    let url_named = format!("file://{}/a#a@0.1.0", root.display());
    for spec in [
        vec!["-p", "a", "-p", "a"],
        vec!["-p", "a@0.1.0"],
        vec!["-p", "a@0.1"],
        vec!["-p", "a:0.1.0"],
        vec!["-p", &url],
        vec!["-p", &url_named],
    ] {
        let mut args = vec![s(dir.path()), "--message-format", "json"];
        args.extend(&spec);
        let out = run(&args);
        out.assert_code(0);
        assert_eq!(lines_of(&out, &root), a_only, "{spec:?}");
    }
    let out = run(&[
        s(dir.path()),
        "--message-format",
        "json",
        "-p",
        "b",
        "-p",
        "a",
        "-p",
        "b",
    ]);
    assert_eq!(out.messages().len(), 2, "{}", out.stdout);
}

#[test]
fn package_specs_that_name_no_member_are_errors() {
    let dir = two_member_workspace();
    run(&[s(dir.path()), "-p", "a@9.9.9"])
        .assert_one_line_error("`a@9.9.9` did not match any member");
    run(&[
        s(dir.path()),
        "-p",
        "registry+https://github.com/rust-lang/crates.io-index#a@0.1.0",
    ])
    .assert_one_line_error("did not match any member");
    run(&[s(dir.path()), "-p", "a@x"]).assert_one_line_error("invalid package ID specification");
    run(&[s(dir.path()), "-p", "c"]).assert_one_line_error("`c` is not a member");
}

#[test]
fn manifest_path_at_a_directory_says_so() {
    let dir = two_member_workspace();
    let a = dir.path().join("a");
    run(&["--manifest-path", s(&a)]).assert_one_line_error("is a directory (try `");
}

// ---- item 12: config errors point at the setting ----

#[test]
fn config_errors_carry_the_settings_own_position() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "[package]\nname = \"cfg\"\nversion = \"0.1.0\"\n\n[package.metadata.idem-lint]\nfile-timeout-ms = 5\n",
            "",
            "Cargo.toml:6:1: key `package.metadata.idem-lint.file-timeout-ms`",
        ),
        (
            "[package]\nname = \"cfg\"\nversion = \"0.1.0\"\n[workspace]\n\n[workspace.metadata.idem-lint.lints]\nparse_error = \"deny\"\n",
            "[lints]\n",
            "Cargo.toml:6:21: key `workspace.metadata.idem-lint`: ",
        ),
        (
            "[package]\nname = \"cfg\"\nversion = \"0.1.0\"\n",
            "[lints.missing_idempotency_token]\nlevel = \"warn\"\n\napis = 3\n",
            "idem-lint.toml:4:1: key `lints.missing_idempotency_token.apis`: invalid type",
        ),
        (
            "[package]\nname = \"cfg\"\nversion = \"0.1.0\"\n",
            "[lints]\ncheck_then_act = \"forbid\"\n",
            "idem-lint.toml:2:1: key `lints.check_then_act`: level `forbid` is not supported",
        ),
    ];
    for (cargo_toml, idem_toml, expected) in cases {
        let mut files = vec![("Cargo.toml", *cargo_toml), ("src/lib.rs", "")];
        if !idem_toml.is_empty() {
            files.push(("idem-lint.toml", idem_toml));
        }
        let dir = tree(&files);
        run(&[s(dir.path())]).assert_one_line_error(expected);
    }
}

// ---- item 9: control characters in a flagged line ----

#[test]
fn control_characters_are_escaped_in_human_output() {
    let line4 = "    conn.set(&key, 1).await?;";
    let src = RACY.replace(
        line4,
        &format!("{line4} // \x1b]0;pwned\x07 \x1b[2J \u{202e}gnp.exe"),
    );
    let dir = tree(&[("a.rs", &src)]);
    let human = run(&[s(dir.path()), "--color", "never"]);
    human.assert_code(0);
    let json = run(&[s(dir.path()), "--message-format", "json"]);
    let rendered = json.messages()[0]["message"]["rendered"]
        .as_str()
        .expect("rendered")
        .to_string();
    for out in [&human.stdout, &rendered] {
        assert!(out.contains("check_then_act"), "{out}");
        assert!(
            !out.contains(['\x1b', '\x07', '\u{202e}']),
            "raw control characters: {out:?}"
        );
        assert!(out.contains("␛]0;pwned␇ ␛[2J"), "{out}");
    }
}

// ---- item 14: output in proportion to the findings, not to their line ----

#[test]
fn findings_on_one_long_line_print_a_window_of_it() {
    // 300 findings on one 32 KB line: printing the line with each finding is ~10 MB of
    // human output; a window around each span is a few hundred bytes.
    let pairs: Vec<String> = (0..300)
        .map(|i| {
            format!(
                "let k{i} = format!(\"done:{{}}:{i}\", id); if c.exists(&k{i}).await? {{ return Ok(()); }} c.set(&k{i}, 1).await?;"
            )
        })
        .collect();
    let src = format!(
        "async fn h(c: &mut redis::aio::ConnectionManager, id: u64) -> redis::RedisResult<()> {{ {} Ok(()) }}\n",
        pairs.join(" ")
    );
    let dir = tree(&[("lib.rs", &src)]);
    let human = run(&[s(dir.path()), "--color", "never"]);
    human.assert_code(0);
    assert_eq!(
        human
            .stdout
            .matches("warning[idem::check_then_act]")
            .count(),
        300
    );
    assert!(
        human.stdout.len() < 300 * 4_000,
        "{} bytes",
        human.stdout.len()
    );
    // The header's column is the file's, though the line is cut.
    let col = src.find("c.set(&k7,").expect("k7") + 1;
    assert!(
        human.stdout.contains(&format!("lib.rs:1:{col}\n")),
        "column {col} missing"
    );
    let json = run(&[s(dir.path()), "--message-format", "json"]);
    let messages = json.messages();
    assert_eq!(messages.len(), 300);
    let explanation = messages[0]["message"]["code"]["explanation"]
        .as_str()
        .map_or(0, str::len);
    assert!(
        json.stdout.len() < 300 * (explanation + 8_000),
        "{} bytes",
        json.stdout.len()
    );
    // The cut text still highlights the span.
    let span = &messages[7]["message"]["spans"][0];
    let text = &span["text"][0];
    let line: Vec<char> = text["text"].as_str().expect("text").chars().collect();
    let (from, to) = (
        text["highlight_start"].as_u64().expect("start") as usize,
        text["highlight_end"].as_u64().expect("end") as usize,
    );
    let highlighted: String = line[from - 1..to - 1].iter().collect();
    assert_eq!(highlighted, "c.set(&k7, 1)");
    assert_eq!(span["column_start"].as_u64(), Some(col as u64));
}

// ---- issue 24: a checkout must not configure, inject or poison the driver ----

/// A `check_then_act` finding whose fix (`--unsafe-fixes`) makes the file longer: the `exists`
/// check becomes a `set_nx` claim.
const FIXABLE: &str = "use redis::AsyncCommands;

pub async fn on_paid(conn: &mut redis::aio::MultiplexedConnection, order_id: &str) -> Result<(), String> {
    let key = format!(\"charged:{order_id}\");
    let seen: bool = conn.exists(&key).await.map_err(|e| e.to_string())?;
    if seen {
        return Ok(());
    }
    conn.set(&key, \"done\").await.map_err(|e| e.to_string())
}
";

/// Runs `cmd` with piped output, every byte as written; a run that has not ended after two
/// minutes is killed and fails the test (a hang is what some of these inputs caused).
fn output_within(cmd: &mut Command) -> std::process::Output {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("runs");
    let pid = child.id() as libc::pid_t;
    let waiter = std::thread::spawn(move || child.wait_with_output());
    let started = std::time::Instant::now();
    while !waiter.is_finished() {
        if started.elapsed() > std::time::Duration::from_secs(120) {
            // SAFETY: kill(2) on the pid of a child this test spawned and has not reaped.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("no result after two minutes: the run hangs");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    waiter.join().expect("waiter").expect("output")
}

/// Control bytes a checkout could use to start a workflow command (CR, LF inside a line) or
/// drive a terminal (ESC, BEL, NUL, C1 CSI/OSC, a bidi override) are absent from `bytes`.
fn assert_no_raw_controls(what: &str, bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    for bad in [
        '\r', '\x1b', '\x07', '\0', '\x7f', '\u{9b}', '\u{9d}', '\u{202e}',
    ] {
        assert!(!text.contains(bad), "{what}: raw {bad:?} in {text:?}");
    }
}

fn git_in(dir: &std::path::Path, args: &[&str]) {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

#[test]
fn a_checkout_cannot_widen_what_the_linter_reads() {
    // Item 1: `allow-outside-workspace = true` in the checkout printed `/etc/passwd` and
    // `/proc/self/environ` through `#[path]`.
    let marker = "idem-secdrv-outside-7a3e";
    let outside = tree(&[(
        "secret.rs",
        &format!("fn leaked() {{ let k = \"{marker}\"; let = ; }}\n"),
    )]);
    let lib = format!(
        "#[path = \"{}\"]\nmod pw;\n",
        outside.path().join("secret.rs").display()
    );
    let cases: &[(&str, &str, &str)] = &[
        (
            "idem-lint.toml",
            "allow-outside-workspace = true\n",
            "idem-lint.toml:1:1: key `allow-outside-workspace`",
        ),
        (
            "Cargo.toml",
            "[workspace]\n[workspace.metadata.idem-lint]\nallow-outside-workspace = true\n",
            "key `workspace.metadata.idem-lint.allow-outside-workspace`",
        ),
        (
            "Cargo.toml",
            "[package.metadata.idem-lint]\nallow-outside-workspace = true\n",
            "key `package.metadata.idem-lint.allow-outside-workspace`",
        ),
        (
            "idem-lint.toml",
            "max-file-bytes = 1073741824\n",
            "pass `--max-file-bytes 1073741824` on the command line",
        ),
        (
            "idem-lint.toml",
            "file-timeout-ms = 600000\n",
            "pass `--file-timeout-ms 600000` on the command line",
        ),
    ];
    for (file, text, expected) in cases {
        let cargo_toml = match *file {
            "Cargo.toml" => manifest("ws", text),
            _ => manifest("ws", ""),
        };
        let mut files = vec![("Cargo.toml", cargo_toml.as_str()), ("src/lib.rs", &lib)];
        if *file == "idem-lint.toml" {
            files.push(("idem-lint.toml", text));
        }
        let dir = tree(&files);
        let out = run(&[s(dir.path()), "--color", "never"]);
        assert!(
            !out.stdout.contains(marker),
            "{text}: leaked {}",
            out.stdout
        );
        out.assert_one_line_error(expected);
        assert!(
            out.stderr
                .contains("a checkout cannot widen what the linter reads"),
            "{}",
            out.stderr
        );
    }
    // The flags still widen, and a narrowing setting of the checkout still holds.
    let dir = tree(&[("Cargo.toml", &manifest("ws", "")), ("src/lib.rs", &lib)]);
    let out = run(&[
        s(dir.path()),
        "--color",
        "never",
        "--allow-outside-workspace",
    ]);
    out.assert_code(0);
    assert!(out.stdout.contains(marker), "{}", out.stdout);
    common::write(dir.path(), "idem-lint.toml", b"max-file-bytes = 10\n");
    let out = run(&[s(dir.path()), "--message-format", "json"]);
    out.assert_code(0);
    assert!(
        out.stdout.contains("over the limit of 10 bytes"),
        "{}",
        out.stdout
    );
    std::fs::remove_file(dir.path().join("idem-lint.toml")).expect("rm");
    let out = run(&[
        s(dir.path()),
        "--message-format",
        "json",
        "--max-file-bytes",
        "12",
    ]);
    out.assert_code(0);
    assert!(
        out.stdout.contains("over the limit of 12 bytes"),
        "{}",
        out.stdout
    );
}

#[test]
fn fix_never_writes_outside_the_workspace() {
    // Item 1: with reading outside allowed, `--fix --unsafe-fixes` rewrote the file a
    // `#[path]` pointed to. Its name also carries a CR and an ESC (item 3: the warning
    // naming it is escaped).
    let outside = tempfile::tempdir().expect("tempdir");
    let name = "sh\r::error::x\x1b[2Jared.rs";
    std::fs::write(outside.path().join(name), FIXABLE).expect("write");
    let lib = format!(
        "mod inside;\n#[path = {:?}]\nmod shared;\n",
        outside.path().join(name).to_str().expect("utf-8")
    );
    let dir = tree(&[
        ("Cargo.toml", &manifest("ws", "")),
        ("src/lib.rs", &lib),
        ("src/inside.rs", FIXABLE),
    ]);
    let out = output_within(Command::new(BIN).args([
        s(dir.path()),
        "--allow-outside-workspace",
        "--fix",
        "--unsafe-fixes",
        "--no-cache",
    ]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let read = |p: &std::path::Path| std::fs::read_to_string(p).expect("read");
    assert_eq!(read(&outside.path().join(name)), FIXABLE, "{stderr}");
    assert!(
        read(&dir.path().join("src/inside.rs")).contains("set_nx"),
        "{stderr}"
    );
    assert!(
        stderr.contains("not fixed: it resolves to `") && stderr.contains("outside the workspace"),
        "{stderr}"
    );
    assert_no_raw_controls("stderr", &out.stderr);
    assert!(stderr.contains("sh␍::error::x␛[2Jared.rs"), "{stderr}");
}

#[test]
fn checkout_text_reaches_no_stream_raw() {
    // Item 3: a lone CR let the pull request write `::error` (or `::stop-commands::`) as a
    // line of its own on stderr; ESC, OSC, bidi controls and NUL reached it raw, and ESC
    // reached the github format's annotation path.
    let outside = tempfile::tempdir().expect("tempdir");
    let src = format!(
        "{RACY}// idem-lint: allow(foo\r::error title=x::y)\n// idem-lint: allow(bar\x1b]0;t\x07\u{202e}\u{9d}z)\n"
    );
    let evil_name = "a\x1b[31m\u{202e}\x7f\u{9b}.rs";
    let dir = tree(&[("a.rs", &src), (evil_name, RACY)]);
    std::os::unix::fs::symlink(
        outside.path(),
        dir.path().join("ext\r::stop-commands::x\x1b[2J"),
    )
    .expect("symlink");
    for format in ["github", "short", "human"] {
        let out = output_within(Command::new(BIN).args([
            s(dir.path()),
            "--message-format",
            format,
            "--color",
            "never",
        ]));
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        assert_no_raw_controls(&format!("{format} stderr"), &out.stderr);
        assert_no_raw_controls(&format!("{format} stdout"), &out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        // Two unknown names, one symlink: three lines, each one whole.
        assert_eq!(stderr.lines().count(), 3, "{stderr}");
        assert!(stderr.contains("foo␍::error title=x::y"), "{stderr}");
        assert!(stderr.contains("bar␛]0;t␇"), "{stderr}");
        assert!(stderr.contains("ext␍::stop-commands::x␛[2J"), "{stderr}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("a␛[31m"), "{format}: {stdout}");
    }
    // JSON and SARIF: the same names to a parser, written with `\u` escapes (DEL, C1 and bidi
    // controls are valid raw in JSON, and went out raw to whatever logged the output).
    for format in ["json", "sarif"] {
        let out =
            output_within(Command::new(BIN).args([s(dir.path()), "--message-format", format]));
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        assert_no_raw_controls(&format!("{format} stdout"), &out.stdout);
        assert_no_raw_controls(&format!("{format} stderr"), &out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let names: Vec<String> = stdout
            .lines()
            .filter(|l| format == "json" && l.contains("compiler-message"))
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).expect("a JSON line");
                v["message"]["spans"][0]["file_name"]
                    .as_str()
                    .expect("file name")
                    .to_string()
            })
            .collect();
        if format == "json" {
            assert!(
                names.iter().any(|n| n.ends_with(evil_name)),
                "the exact path, for editors to match: {names:?}"
            );
        }
    }
    // A config key and an error on stderr: one line, escaped.
    let cfg = tree(&[
        ("Cargo.toml", &manifest("cfg", "")),
        ("src/lib.rs", ""),
        (
            "idem-lint.toml",
            "\"k\\r::error::x\\u001b[2J\\u0000\" = 1\n",
        ),
    ]);
    let out = output_within(Command::new(BIN).arg(cfg.path()));
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_no_raw_controls("config error", &out.stderr);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("k␍::error::x␛[2J␀"), "{stderr}");
}

#[test]
fn changed_since_is_never_read_as_an_option() {
    // Item 6: `--changed-since=--output=FILE` truncated FILE, and with `--output=/dev/null
    // -D warnings` nothing was reported and the exit code was 0.
    let outer = tempfile::tempdir().expect("tempdir");
    let ws = outer.path().join("ws");
    common::write(&ws, "a.rs", RACY.as_bytes());
    git_in(&ws, &["init", "-q"]);
    let victim = outer.path().join("victim.txt");
    std::fs::write(&victim, "keep").expect("write");
    let before = snapshot(outer.path(), &ws);
    let flag = format!("--changed-since=--output={}", victim.display());
    let out = run(&[s(&ws), &flag, "-D", "warnings"]);
    assert_eq!(snapshot(outer.path(), &ws), before, "{}", out.stderr);
    out.assert_one_line_error("could not list the files changed since `--output=");
}

/// Every file below `dir` outside `skip`, with its contents.
fn snapshot(dir: &std::path::Path, skip: &std::path::Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read_dir").flatten() {
        let path = entry.path();
        if path == skip {
            continue;
        }
        if path.is_dir() {
            out.extend(snapshot(&path, skip));
        } else {
            out.push((path.clone(), std::fs::read(&path).expect("read")));
        }
    }
    out.sort();
    out
}

#[test]
fn changed_since_keeps_file_names_that_are_not_utf8() {
    // Item 6: names were read with `from_utf8_lossy`, so a changed `b\xff.rs` lost its findings.
    use std::os::unix::ffi::OsStrExt;
    let dir = tree(&[("a.rs", RACY)]);
    git_in(dir.path(), &["init", "-q"]);
    git_in(dir.path(), &["add", "a.rs"]);
    git_in(dir.path(), &["commit", "-q", "-m", "a"]);
    let bad = dir.path().join(std::ffi::OsStr::from_bytes(b"b\xff.rs"));
    std::fs::write(&bad, RACY).expect("write");
    let out = run(&[
        s(dir.path()),
        "--changed-since",
        "HEAD",
        "--message-format",
        "json",
    ]);
    out.assert_code(0);
    let messages = out.messages();
    assert_eq!(messages.len(), 1, "{}", out.stdout);
    let file = messages[0]["message"]["spans"][0]["file_name"]
        .as_str()
        .expect("file_name");
    assert!(file.ends_with(".rs") && !file.ends_with("a.rs"), "{file}");
}

#[test]
fn fix_refuses_a_file_changed_since_it_was_read() {
    // Item 7: an edit made while the run went was overwritten by the fixed old text.
    use cargo_idem_lint::{cli::Args, fix};
    let dir = tree(&[("Cargo.toml", &manifest("ws", "")), ("src/lib.rs", FIXABLE)]);
    let lib = dir.path().join("src/lib.rs");
    let args = Args::parse_from_env(
        [
            "cargo-idem-lint",
            s(dir.path()),
            "--fix",
            "--unsafe-fixes",
            "--no-cache",
        ]
        .map(std::ffi::OsString::from),
    )
    .expect("args");
    let linted = cargo_idem_lint::lint(&args).expect("lints");
    let edited = format!("{FIXABLE}// edited while the run went\n");
    std::fs::write(&lib, &edited).expect("write");
    fix::run(&args, &linted).expect("runs");
    assert_eq!(std::fs::read_to_string(&lib).expect("read"), edited);
    // Unchanged, the same file is fixed.
    let linted = cargo_idem_lint::lint(&args).expect("lints");
    fix::run(&args, &linted).expect("runs");
    assert!(std::fs::read_to_string(&lib)
        .expect("read")
        .contains("set_nx"));
}

#[test]
fn a_failed_fix_write_leaves_the_file_whole() {
    // Item 7: `--fix` wrote in place, so a full disk left the file cut. A file size limit
    // at the original's size makes the longer fixed text fail to write the same way.
    use std::os::unix::process::CommandExt;
    let dir = tree(&[("Cargo.toml", &manifest("ws", "")), ("src/lib.rs", FIXABLE)]);
    let limit = FIXABLE.len() as libc::rlim_t;
    let mut cmd = Command::new(BIN);
    cmd.args([s(dir.path()), "--fix", "--unsafe-fixes", "--no-cache"]);
    // SAFETY: setrlimit(2) and signal(2) are async-signal-safe; they only change this child.
    unsafe {
        cmd.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            libc::setrlimit(libc::RLIMIT_FSIZE, &lim);
            // EFBIG from write(2) instead of a signal killing the process.
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            Ok(())
        });
    }
    let out = output_within(&mut cmd);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("could not write the fix to `"), "{stderr}");
    let src = dir.path().join("src");
    assert_eq!(
        std::fs::read_to_string(src.join("lib.rs")).expect("read"),
        FIXABLE
    );
    let left: Vec<_> = std::fs::read_dir(&src)
        .expect("read_dir")
        .flatten()
        .collect();
    assert_eq!(left.len(), 1, "the temporary file is removed: {left:?}");
}

#[test]
fn the_baseline_is_read_like_a_source() {
    // Item 8: a baseline linked to /dev/zero grew until the OOM killer, a FIFO hung, and an
    // outside JSON file's string values appeared in the error.
    let outside = tree(&[("secret.json", "{\"version\": \"idem-secdrv-baseline-1\"}\n")]);
    let dir = tree(&[
        ("a.rs", RACY),
        ("inside.json", "{\"version\": \"idem-secdrv-baseline-2\"}\n"),
    ]);
    let ws = dir.path();
    std::os::unix::fs::symlink(outside.path().join("secret.json"), ws.join("linked.json"))
        .expect("symlink");
    std::os::unix::fs::symlink("/dev/zero", ws.join("zero.json")).expect("symlink");
    let fifo = std::ffi::CString::new(s(&ws.join("fifo.json"))).expect("c string");
    // SAFETY: mkfifo(2) with a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0, "mkfifo");
    let cases = [
        ("linked.json", "resolves to `"),
        (
            "zero.json",
            "resolves to `/dev/zero`, outside the workspace",
        ),
        ("fifo.json", "it is a FIFO, not a regular file"),
        (
            "inside.json",
            "is not a baseline (not the baseline format at line 1",
        ),
        ("/dev/zero", "it is a character device, not a regular file"),
    ];
    for (name, expected) in cases {
        let path = ws.join(name);
        let out = output_within(Command::new(BIN).args([s(ws), "--baseline", s(&path)]));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{name}: {stderr}");
        assert!(stderr.contains(expected), "{name}: {stderr}");
        assert!(!stderr.contains("idem-secdrv-baseline"), "{name}: {stderr}");
    }
    // Written through a planted symlink, the baseline replaces the link, not its target.
    let keep = outside.path().join("keep.txt");
    std::fs::write(&keep, "keep").expect("write");
    std::os::unix::fs::symlink(&keep, ws.join("planted.json")).expect("symlink");
    let out = run(&[s(ws), "--write-baseline", s(&ws.join("planted.json"))]);
    out.assert_code(0);
    assert_eq!(std::fs::read_to_string(&keep).expect("read"), "keep");
    assert!(std::fs::read_to_string(ws.join("planted.json"))
        .expect("read")
        .contains("check_then_act"));
}

// ---- issue 24 items 4 and 5: the re-run cache writes, reads and deletes nothing outside the
// workspace, and trusts no entry it did not write ----

mod issue24_cache {
    use super::common::{self, manifest, s, tree, BIN};
    use super::RACY;
    use std::collections::BTreeMap;
    use std::os::unix::fs::symlink;
    use std::path::{Path, PathBuf};
    use std::process::Command;

    /// Every file, directory and symlink below `dir` with its contents (a symlink's target),
    /// symlinks not followed: two snapshots differ when anything below `dir` changed.
    fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
        let mut out = BTreeMap::new();
        let mut todo = vec![dir.to_path_buf()];
        while let Some(d) = todo.pop() {
            for e in std::fs::read_dir(&d).expect("list").flatten() {
                let p = e.path();
                let kind = e.file_type().expect("type");
                let content = if kind.is_symlink() {
                    std::fs::read_link(&p)
                        .expect("readlink")
                        .into_os_string()
                        .into_encoded_bytes()
                } else if kind.is_dir() {
                    todo.push(p.clone());
                    b"<dir>".to_vec()
                } else {
                    std::fs::read(&p).expect("read")
                };
                out.insert(p, content);
            }
        }
        out
    }

    /// The binary on `ws`, run from inside it (so its `.cargo/config.toml` applies) as a CI
    /// job runs it, with this test's cache secret and no cache location from the environment
    /// except `env`.
    fn lint(ws: &Path, secret: &Path, args: &[&str], env: &[(&str, &Path)]) -> common::Run {
        let out = Command::new(BIN)
            .args([s(ws), "--message-format", "json"])
            .args(args)
            .current_dir(ws)
            .env_remove("IDEM_LINT_CACHE_DIR")
            .env_remove("CARGO_TARGET_DIR")
            .env_remove("CARGO_BUILD_TARGET_DIR")
            .env("IDEM_LINT_CACHE_SECRET", secret)
            .envs(env.iter().map(|(k, v)| (*k, *v)))
            .output()
            .expect("the binary runs");
        common::Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    fn racy_crate() -> tempfile::TempDir {
        tree(&[
            ("Cargo.toml", &manifest("victim", "")),
            ("src/lib.rs", RACY),
        ])
    }

    /// Files below `dir` (not following symlinks).
    fn files_below(dir: &Path) -> Vec<PathBuf> {
        let mut snap = snapshot(dir);
        snap.retain(|p, v| v.as_slice() != b"<dir>" && !p.is_symlink());
        snap.into_keys().collect()
    }

    #[test]
    fn a_checkout_cannot_aim_the_cache_outside_the_workspace() {
        let secrets = tempfile::tempdir().expect("tempdir");
        let secret = secrets.path().join("secret");
        let attacks = [
            "target is a symlink",
            "target/idem-lint is a symlink",
            ".cargo/config.toml build.target-dir",
            "CACHEDIR.TAG is a dangling symlink",
        ];
        for attack in attacks {
            let outside = tempfile::tempdir().expect("tempdir");
            let o = outside.path();
            // What pruning of old builds would take for its own: directories named like
            // builds, more than are kept.
            for build in ["0123", "4567", "89ab", "cdef"] {
                common::write(o, &format!("{build:0>32}/models/keep"), b"precious");
            }
            let ws = racy_crate();
            let w = ws.path();
            let tag_target = o.join("made-by-the-tag");
            match attack {
                "target is a symlink" => symlink(o, w.join("target")).expect("symlink"),
                "target/idem-lint is a symlink" => {
                    std::fs::create_dir(w.join("target")).expect("mkdir");
                    symlink(o, w.join("target/idem-lint")).expect("symlink");
                }
                ".cargo/config.toml build.target-dir" => common::write(
                    w,
                    ".cargo/config.toml",
                    format!("[build]\ntarget-dir = \"{}\"\n", s(o)).as_bytes(),
                ),
                _ => {
                    std::fs::create_dir_all(w.join("target/idem-lint")).expect("mkdir");
                    symlink(&tag_target, w.join("target/idem-lint/CACHEDIR.TAG")).expect("symlink");
                }
            }
            let before = snapshot(o);
            let plain = lint(w, &secret, &["--no-cache"], &[]);
            plain.assert_code(0);
            let run = lint(w, &secret, &[], &[]);
            assert_eq!(run.stdout, plain.stdout, "{attack}");
            assert_eq!(run.code, 0, "{attack}: {}", run.stderr);
            assert_eq!(snapshot(o), before, "{attack}: a file outside changed");
            assert!(!tag_target.exists(), "{attack}");
            if attack.starts_with("CACHEDIR") {
                // The workspace's own target directory still caches.
                let entries = files_below(&w.join("target/idem-lint"));
                assert!(!entries.is_empty(), "{attack}: nothing cached");
                assert_eq!(run.stderr, "", "{attack}");
            } else {
                let lines: Vec<&str> = run.stderr.lines().collect();
                assert_eq!(lines.len(), 1, "{attack}: {}", run.stderr);
                assert!(
                    lines[0].starts_with("warning: no re-run cache: ")
                        && lines[0].contains("IDEM_LINT_CACHE_DIR"),
                    "{attack}: {}",
                    run.stderr
                );
            }
        }
    }

    /// What the person running the linter names is used, outside the workspace or not.
    #[test]
    fn the_environment_may_place_the_cache_outside_the_workspace() {
        let secrets = tempfile::tempdir().expect("tempdir");
        let secret = secrets.path().join("secret");
        for var in ["CARGO_TARGET_DIR", "IDEM_LINT_CACHE_DIR"] {
            let outside = tempfile::tempdir().expect("tempdir");
            let ws = racy_crate();
            // The checkout's config names another place; the environment wins.
            common::write(
                ws.path(),
                ".cargo/config.toml",
                b"[build]\ntarget-dir = \"/nonexistent/elsewhere\"\n",
            );
            let run = lint(ws.path(), &secret, &[], &[(var, outside.path())]);
            run.assert_code(0);
            assert_eq!(run.stderr, "", "{var}");
            assert!(
                !files_below(outside.path()).is_empty(),
                "{var}: nothing cached"
            );
            assert!(!ws.path().join("target").exists(), "{var}");
        }
    }

    /// The entry of `kind` (`findings`, ...) a run left below `root`: its path, its build's
    /// directory name and its key, as anyone who can list the tree sees them.
    fn entry_of(root: &Path, kind: &str) -> (PathBuf, u128, u128) {
        let entries: Vec<PathBuf> = files_below(root)
            .into_iter()
            .filter(|p| p.components().any(|c| c.as_os_str() == kind))
            .collect();
        assert_eq!(entries.len(), 1, "{entries:?}");
        let path = entries[0].clone();
        let rel = path.strip_prefix(root).expect("below");
        let build = rel.components().next().expect("build directory");
        let hex = |s: &std::ffi::OsStr| {
            u128::from_str_radix(s.to_str().expect("utf-8"), 16).expect("hex name")
        };
        let key = hex(path.file_name().expect("name"));
        (path.clone(), hex(build.as_os_str()), key)
    }

    /// A pull request that finds (or guesses) the layout of `target/idem-lint/` writes a
    /// findings entry saying "none": everything in it is what the tree shows (the build's
    /// directory name, the entry's name, its header layout, an unkeyed checksum), and the run
    /// must still report the finding and fail under `-D warnings`.
    #[test]
    fn a_findings_entry_forged_from_what_the_tree_shows_is_not_trusted() {
        let secrets = tempfile::tempdir().expect("tempdir");
        let secret = secrets.path().join("secret");
        let ws = racy_crate();
        let w = ws.path();
        let first = lint(w, &secret, &["-D", "warnings"], &[]);
        first.assert_code(1);
        assert_eq!(first.findings(w).len(), 1);
        let (path, build, key) = entry_of(&w.join("target/idem-lint"), "findings");
        let stored = std::fs::read(&path).expect("read");
        let payload = postcard::to_allocvec(&Vec::<()>::new()).expect("encodes");
        let mut forged = stored[..8].to_vec();
        forged.extend(build.to_le_bytes());
        forged.push(cargo_idem_lint::cache::Kind::Findings as u8);
        forged.extend(key.to_le_bytes());
        forged.extend((payload.len() as u64).to_le_bytes());
        forged.extend(xxhash_rust::xxh3::xxh3_64(&payload).to_le_bytes());
        forged.extend(&payload);
        std::fs::write(&path, forged).expect("write");
        let second = lint(w, &secret, &["-D", "warnings"], &[]);
        assert_eq!(second.code, 1, "the forged entry was trusted");
        assert_eq!(second.stdout, first.stdout);
        // Nor does an entry this user's linter wrote for another input stand in for this
        // one: the tag covers the entry's key.
        let clean = tree(&[
            ("Cargo.toml", &manifest("victim", "")),
            ("src/lib.rs", "pub fn nothing_here() {}\n"),
        ]);
        lint(clean.path(), &secret, &[], &[]).assert_code(0);
        let (clean_entry, _, _) = entry_of(&clean.path().join("target/idem-lint"), "findings");
        let (path, _, _) = entry_of(&w.join("target/idem-lint"), "findings");
        std::fs::copy(clean_entry, &path).expect("copy");
        let third = lint(w, &secret, &["-D", "warnings"], &[]);
        assert_eq!(third.code, 1, "another input's entry was trusted");
        assert_eq!(third.stdout, first.stdout);
    }
}
