//! Runs the `cargo-idem-lint` binary on one crate as a subprocess and times it.

use crate::finding::{self, Finding};
use anyhow::{bail, Context, Result};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

pub struct Linted {
    pub findings: Vec<Finding>,
    /// Median wall-clock time of the runs.
    pub time: Duration,
}

/// Lints the package at `dir` `runs` times (at least once) and keeps the last run's findings
/// with the median time. Exit codes 0 and 1 are results; 2 (or a crash) is an error.
pub fn lint(binary: &Path, dir: &Path, runs: usize) -> Result<Linted> {
    let mut times = Vec::new();
    let mut findings = Vec::new();
    for _ in 0..runs.max(1) {
        let start = Instant::now();
        let out = Command::new(binary)
            .arg("idem-lint")
            .arg(dir)
            .args(["--message-format", "json", "--color", "never"])
            // A shared or slow machine must not turn into `parse_error` findings: the
            // budget only guards against a hang, and timing is measured per crate anyway.
            .args(["--file-timeout-ms", "120000"])
            .output()
            .with_context(|| format!("could not run `{}`", binary.display()))?;
        times.push(start.elapsed());
        match out.status.code() {
            Some(0 | 1) => {}
            _ => {
                let why = crate::fetch::last_line(&out.stderr)
                    .unwrap_or_else(|| format!("exited with {}", out.status));
                bail!("{why}");
            }
        }
        let stdout = String::from_utf8_lossy(&out.stdout);
        findings = finding::parse_json(&stdout, dir)?;
    }
    times.sort();
    Ok(Linted {
        findings,
        time: times[times.len() / 2],
    })
}
