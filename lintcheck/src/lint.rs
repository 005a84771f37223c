//! Runs the `cargo-idem-lint` binary on one crate as a subprocess and times it.

use crate::finding::{self, Finding};
use anyhow::{bail, Context, Result};
use std::ffi::OsString;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

pub struct Linted {
    pub findings: Vec<Finding>,
    /// Median wall-clock time of the runs.
    pub time: Duration,
}

/// Lints the package at `dir` `runs` times (at least once) and keeps the last run's findings
/// with the median time, passing `extra` to the linter (the `-W` flags of
/// [`allow_by_default`]). Exit codes 0 and 1 are results; 2 (or a crash) is an error.
pub fn lint(binary: &Path, dir: &Path, runs: usize, extra: &[String]) -> Result<Linted> {
    let mut args: Vec<OsString> = vec![dir.into()];
    args.extend(extra.iter().map(OsString::from));
    run(binary, &args, dir, dir, runs)
}

/// Lints a whole workspace as its users would: `--workspace --manifest-path`, run from
/// outside the checkout, without the re-run cache (so each run measures the whole analysis
/// and nothing is written into the checkout). Finding paths are made relative to `root`
/// (the repository's root, which may lie above the workspace).
pub fn lint_workspace(
    binary: &Path,
    manifest: &Path,
    root: &Path,
    runs: usize,
    extra: &[String],
) -> Result<Linted> {
    let mut args: Vec<OsString> = vec![
        "--workspace".into(),
        "--no-cache".into(),
        "--manifest-path".into(),
        manifest.into(),
    ];
    args.extend(extra.iter().map(OsString::from));
    run(binary, &args, root, &std::env::temp_dir(), runs)
}

fn run(binary: &Path, args: &[OsString], root: &Path, cwd: &Path, runs: usize) -> Result<Linted> {
    let mut times = Vec::new();
    let mut findings = Vec::new();
    for _ in 0..runs.max(1) {
        let start = Instant::now();
        let out = Command::new(binary)
            .arg("idem-lint")
            .args(args)
            .args(["--message-format", "json", "--color", "never"])
            // A shared or slow machine must not turn into `parse_error` findings: the
            // budget only guards against a hang, and timing is measured per crate anyway.
            .args(["--file-timeout-ms", "120000"])
            .current_dir(cwd)
            .output()
            .with_context(|| format!("could not run `{}`", binary.display()))?;
        times.push(start.elapsed());
        match out.status.code() {
            Some(0 | 1) => {}
            _ => {
                let why = crate::fetch::error_line(&out.stderr)
                    .unwrap_or_else(|| format!("exited with {}", out.status));
                bail!("{why}");
            }
        }
        let stdout = String::from_utf8_lossy(&out.stdout);
        findings = finding::parse_json(&stdout, root)?;
    }
    times.sort();
    Ok(Linted {
        findings,
        time: times[times.len() / 2],
    })
}

/// The lints that are off by default, read from `--list`: the lintcheck turns them on, since
/// their precision here is what decides whether they may become `warn`.
pub fn allow_by_default(binary: &Path) -> Result<Vec<String>> {
    let out = Command::new(binary)
        .args(["idem-lint", "--list"])
        .output()
        .with_context(|| format!("could not run `{}`", binary.display()))?;
    if !out.status.success() {
        bail!("`{} idem-lint --list` failed", binary.display());
    }
    Ok(parse_list(&String::from_utf8_lossy(&out.stdout)))
}

/// The names whose default level is `allow` in `--list` output (`name default effective ..`).
fn parse_list(list: &str) -> Vec<String> {
    list.lines()
        .skip(1)
        .filter_map(|l| {
            let mut cols = l.split_whitespace();
            let name = cols.next()?;
            (cols.next()? == "allow").then(|| name.to_owned())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allow_by_default_lints_are_read_from_the_list() {
        let list = "lint  default  effective  description\n\
                    check_then_act  warn  allow  a store is read\n\
                    retry_without_backoff  allow  allow  a retry loop\n";
        assert_eq!(parse_list(list), vec!["retry_without_backoff"]);
    }
}
