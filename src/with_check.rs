//! `--with-check check|clippy`: cargo's own check and our lints in one command, for
//! rust-analyzer's `check.overrideCommand`, which runs one command and reads one stream.
//!
//! `cargo idem-lint --with-check clippy --message-format json [ARGS]` runs
//! `cargo clippy --message-format=json [ARGS]` and streams its lines unchanged (except its
//! `build-finished`), then prints our `compiler-message` lines, then one `build-finished`
//! whose `success` is false when either failed. Our lints run whether or not the code
//! compiles (they only parse it). A broken `idem-lint.toml` becomes an error diagnostic on
//! the config file, and the exit code is non-zero, so neither hides the other's failure.
//!
//! Arguments: ours (`-A/-W/-D`, `--only`, ...) are ours; `--manifest-path`, `-p`,
//! `--workspace` and `--color` go to both; `--message-format` goes to cargo as given (a
//! `json-diagnostic-rendered-ansi` included) and makes ours `json`; everything else
//! (`--all-targets`, `--features x`, `--keep-going`, `-- -W clippy::pedantic`) goes to
//! cargo unchanged.

use crate::cli::{Args, CheckKind, MessageFormat};
use crate::emit::json;
use crate::{discovery, lint_workspace, stderr_line, Outcome};
use anyhow::{bail, Context, Result};
use clap::Command as ClapCommand;
use serde_json::Value;
use std::ffi::OsString;
use std::io::{self, BufRead, BufReader, Write};
use std::process::{Command, Stdio};

/// Our arguments both we and cargo read.
const SHARED: &[&str] = &["manifest_path", "packages", "workspace", "color"];

/// Splits `argv` (program name first) into ours (for clap) and cargo's.
pub fn split_args(cmd: &ClapCommand, argv: Vec<OsString>) -> (Vec<OsString>, Vec<OsString>) {
    let mut argv = argv.into_iter();
    let mut ours: Vec<OsString> = argv.next().into_iter().collect();
    let mut cargo: Vec<OsString> = Vec::new();
    let mut rest = argv.peekable();
    while let Some(arg) = rest.next() {
        let Some(text) = arg.to_str().map(str::to_string) else {
            cargo.push(arg);
            continue;
        };
        if text == "--" {
            cargo.push(arg);
            cargo.extend(rest);
            break;
        }
        let Some((def, inline)) = find_flag(cmd, &text) else {
            cargo.push(arg);
            continue;
        };
        let id = def.get_id().as_str();
        let mut values: Vec<OsString> = inline.map(OsString::from).into_iter().collect();
        if values.is_empty() && def.get_action().takes_values() {
            let many = def.get_num_args().is_some_and(|n| n.max_values() > 1);
            while let Some(next) = rest.peek() {
                if !values.is_empty() && (!many || next.to_string_lossy().starts_with('-')) {
                    break;
                }
                values.extend(rest.next());
            }
        }
        let flag = match def.get_long() {
            Some(long) => format!("--{long}"),
            None => format!("-{}", def.get_short().unwrap_or('?')),
        };
        let mine: Vec<OsString> = std::iter::once(OsString::from(&flag))
            .chain(values.iter().map(|v| {
                if id == "message_format" && v.to_string_lossy().starts_with("json") {
                    // Cargo takes a list (`json-diagnostic-short,json-diagnostic-rendered-ansi`);
                    // ours is colored when cargo's is.
                    let ansi = v
                        .to_string_lossy()
                        .split(',')
                        .any(|f| f.trim() == "json-diagnostic-rendered-ansi");
                    OsString::from(if ansi {
                        "json-diagnostic-rendered-ansi"
                    } else {
                        "json"
                    })
                } else {
                    v.clone()
                }
            }))
            .collect();
        if id == "message_format" || SHARED.contains(&id) {
            cargo.push(OsString::from(&flag));
            cargo.extend(values);
        }
        ours.extend(mine);
    }
    (ours, cargo)
}

/// The definition of the flag `text` spells (`--long`, `--long=value`, `-s`, `-svalue`),
/// with its inline value.
fn find_flag<'c>(cmd: &'c ClapCommand, text: &str) -> Option<(&'c clap::Arg, Option<String>)> {
    if let Some(long) = text.strip_prefix("--") {
        let (name, value) = match long.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (long, None),
        };
        let def = cmd.get_arguments().find(|a| a.get_long() == Some(name))?;
        return Some((def, value));
    }
    let short = text.strip_prefix('-')?;
    let mut chars = short.chars();
    let c = chars.next()?;
    let def = cmd.get_arguments().find(|a| a.get_short() == Some(c))?;
    let value = chars.as_str();
    Some((def, (!value.is_empty()).then(|| value.to_string())))
}

/// Runs cargo, then the lints, and ends the stream with one `build-finished`.
pub fn run(args: &Args, kind: CheckKind) -> Result<Outcome> {
    if !args.message_format.is_json() {
        bail!("`--with-check` prints cargo's JSON: add `--message-format json`");
    }
    let stdout = io::stdout();
    let mut out = stdout.lock();
    // The lints only read sources, so they run while cargo compiles; their lines wait in
    // a buffer and follow cargo's, as rust-analyzer reads one stream in order.
    let (cargo_ok, ours, buffered) = std::thread::scope(|scope| {
        let lints = scope.spawn(|| {
            let mut buf = Vec::new();
            let ours = lint_messages(args, &mut buf);
            (ours, buf)
        });
        let cargo_ok = stream_cargo(kind, &args.check_args, &mut out);
        let (ours, buf) = lints.join().unwrap_or_else(|_| {
            (
                Err(anyhow::anyhow!("the lints stopped unexpectedly")),
                Vec::new(),
            )
        });
        (cargo_ok, ours, buf)
    });
    let cargo_ok = cargo_ok?;
    out.write_all(&buffered)?;
    let ours_ok = matches!(ours, Ok(false));
    json::build_finished(cargo_ok && ours_ok, &mut out)?;
    out.flush().context("could not write the output")?;
    match ours {
        Err(e) => Err(e),
        Ok(true) => Ok(Outcome::Denied),
        Ok(false) if !cargo_ok => {
            stderr_line(&format!("error: `cargo {}` failed", kind_name(kind)));
            Ok(Outcome::Denied)
        }
        Ok(false) => Ok(Outcome::Clean),
    }
}

fn kind_name(kind: CheckKind) -> &'static str {
    match kind {
        CheckKind::Check => "check",
        CheckKind::Clippy => "clippy",
    }
}

/// Runs `cargo check|clippy` with `extra`, copying its stdout to `out` line by line except
/// its `build-finished`; whether it succeeded.
fn stream_cargo(kind: CheckKind, extra: &[OsString], out: &mut dyn Write) -> Result<bool> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
    let mut argv: Vec<OsString> = vec![kind_name(kind).into()];
    let dashes = extra.iter().position(|a| a == "--").unwrap_or(extra.len());
    argv.extend(extra[..dashes].iter().cloned());
    let has_format = extra[..dashes]
        .iter()
        .any(|a| a.to_string_lossy().starts_with("--message-format"));
    if !has_format {
        argv.push("--message-format=json".into());
    }
    argv.extend(extra[dashes..].iter().cloned());
    let mut child = Command::new(&cargo)
        .args(&argv)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| {
            format!(
                "could not run `{} {}`",
                cargo.to_string_lossy(),
                kind_name(kind)
            )
        })?;
    let mut finished = None;
    if let Some(pipe) = child.stdout.take() {
        for line in BufReader::new(pipe).split(b'\n') {
            let line = line.context("could not read cargo's output")?;
            if let Some(success) = build_finished(&line) {
                finished = Some(success);
                continue;
            }
            out.write_all(&line)?;
            out.write_all(b"\n")?;
        }
    }
    let status = child.wait().context("could not wait for cargo")?;
    Ok(status.success() && finished.unwrap_or(true))
}

/// `Some(success)` when `line` is cargo's `build-finished`.
fn build_finished(line: &[u8]) -> Option<bool> {
    let value: Value = serde_json::from_slice(line).ok()?;
    (value["reason"] == "build-finished").then(|| value["success"].as_bool().unwrap_or(false))
}

/// Lints and prints our `compiler-message` lines; whether one is at deny. A config error
/// is printed as a diagnostic on the config file, then returned.
fn lint_messages(args: &Args, out: &mut dyn Write) -> Result<bool> {
    let mut ws = discovery::discover(&discovery::Selection::from_args(args))?;
    ws.report_root = args.sarif_root.clone();
    let linted = match lint_workspace(args, ws.clone(), &args.only) {
        Ok(l) => l,
        Err(e) => {
            if let Some(msg) = config_error_message(&ws, &format!("{e:#}")) {
                json::write_line(&msg, out)?;
            }
            return Err(e);
        }
    };
    let ansi = args.message_format == MessageFormat::JsonDiagnosticRenderedAnsi;
    json::emit_messages(&linted.input(), ansi, out)?;
    Ok(linted.report.has_errors())
}

/// An error that starts with `file.toml:line:col: ` (every config error does) as a
/// diagnostic on that file; `None` for other errors.
fn config_error_message(ws: &discovery::Workspace, error: &str) -> Option<Value> {
    let package = ws.packages.first()?;
    let at = error.find(".toml:")? + ".toml".len();
    let path = std::path::Path::new(&error[..at]);
    let mut rest = error[at + 1..].splitn(3, ':');
    let line: usize = rest.next()?.parse().ok()?;
    let column: usize = rest.next()?.parse().ok()?;
    let message = rest.next()?.trim();
    let text = crate::source::read_source(path, &crate::source::ReadPolicy::anywhere()).ok()?;
    let file = crate::source::SourceFile::new(path.to_path_buf(), std::sync::Arc::from(text));
    Some(json::config_error(package, &file, line, column, message))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn split(args: &[&str]) -> (Vec<String>, Vec<String>) {
        let argv = std::iter::once("prog")
            .chain(args.iter().copied())
            .map(OsString::from)
            .collect();
        let (ours, cargo) = split_args(&Args::command(), argv);
        let s = |v: Vec<OsString>| {
            v.into_iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect()
        };
        (s(ours), s(cargo))
    }

    #[test]
    fn arguments_go_where_they_are_read() {
        let (ours, cargo) = split(&[
            "--with-check",
            "clippy",
            "--message-format=json-diagnostic-rendered-ansi",
            "--all-targets",
            "-D",
            "warnings",
            "--features",
            "x",
            "-p",
            "app",
            "--",
            "-W",
            "clippy::pedantic",
        ]);
        assert_eq!(
            ours,
            [
                "prog",
                "--with-check",
                "clippy",
                "--message-format",
                "json-diagnostic-rendered-ansi",
                "--deny",
                "warnings",
                "--package",
                "app"
            ]
        );
        assert_eq!(
            cargo,
            [
                "--message-format",
                "json-diagnostic-rendered-ansi",
                "--all-targets",
                "--features",
                "x",
                "--package",
                "app",
                "--",
                "-W",
                "clippy::pedantic"
            ]
        );
    }

    #[test]
    fn a_config_error_points_into_its_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let toml = dir.path().join("idem-lint.toml");
        std::fs::write(&toml, "[lints]\nno_such = \"deny\"\n").expect("write");
        let ws = discovery::Workspace {
            root: dir.path().to_path_buf(),
            root_manifest: None,
            packages: vec![discovery::PackageSpec {
                name: "p".into(),
                id: "path+file:///p#0.1.0".into(),
                manifest_path: dir.path().join("Cargo.toml"),
                has_manifest: false,
                dependencies: Vec::new(),
                targets: Vec::new(),
                sources: discovery::Sources::Files(Vec::new()),
                links: Vec::new(),
                workspace_root: None,
            }],
            warnings: Vec::new(),
            unselected: Vec::new(),
            report_root: None,
            origin: dir.path().to_path_buf(),
            target_dir: None,
        };
        let error = format!("{}:2:1: key `lints.no_such`: unknown lint", toml.display());
        let msg = config_error_message(&ws, &error).expect("a diagnostic");
        let span = &msg["message"]["spans"][0];
        assert_eq!(span["line_start"], 2);
        assert_eq!(span["byte_start"], 8);
        assert_eq!(
            msg["message"]["message"],
            "key `lints.no_such`: unknown lint"
        );
        assert!(config_error_message(&ws, "no location here").is_none());
    }
}
