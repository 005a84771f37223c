//! `cargo run -p lintcheck -- [OPTIONS]`: lint the pinned crates and write the report.

use anyhow::{bail, Context, Result};
use clap::Parser;
use lintcheck::report::{self, CrateResult, Outcome};
use lintcheck::{crates, fetch, lint, verdicts};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// Lints pinned real crates with cargo idem-lint and diffs the findings against the reviewed
/// verdicts in lintcheck/verdicts/.
#[derive(Parser)]
struct Args {
    /// The cargo-idem-lint binary to run [default: build it with `cargo build --release`]
    #[arg(long)]
    binary: Option<PathBuf>,
    /// The pinned crate list
    #[arg(long, default_value_os_t = workspace_root().join("lintcheck/crates.toml"))]
    crates: PathBuf,
    /// The directory of per-crate verdict files
    #[arg(long, default_value_os_t = workspace_root().join("lintcheck/verdicts"))]
    verdicts: PathBuf,
    /// Where to write the Markdown report [default: <target dir>/lintcheck/report.md]
    #[arg(long)]
    out: Option<PathBuf>,
    /// Lint only this crate (repeatable)
    #[arg(long = "only", value_name = "NAME")]
    only: Vec<String>,
    /// Lint each crate this many times and report the median time
    #[arg(long, default_value_t = 1)]
    runs: usize,
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", format!("{e:#}").replace('\n', " "));
            ExitCode::from(2)
        }
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("lintcheck/ sits in the workspace root")
        .to_path_buf()
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"))
}

fn build_binary() -> Result<PathBuf> {
    eprintln!("building cargo-idem-lint (release)...");
    let status = Command::new("cargo")
        .args([
            "build",
            "--release",
            "-p",
            "cargo-idem-lint",
            "--manifest-path",
        ])
        .arg(workspace_root().join("Cargo.toml"))
        .status()
        .context("could not run `cargo build`")?;
    if !status.success() {
        bail!("`cargo build --release -p cargo-idem-lint` failed");
    }
    Ok(target_dir().join("release").join("cargo-idem-lint"))
}

fn run(args: Args) -> Result<()> {
    let mut specs = crates::load(&args.crates)?;
    for name in &args.only {
        if !specs.iter().any(|s| &s.name == name) {
            bail!(
                "`--only {name}`: no such crate in `{}`",
                args.crates.display()
            );
        }
    }
    if !args.only.is_empty() {
        specs.retain(|s| args.only.contains(&s.name));
    }
    let all_verdicts = verdicts::load_dir(&args.verdicts)?;
    for name in all_verdicts.keys() {
        if !specs.iter().any(|s| &s.name == name) && args.only.is_empty() {
            bail!("verdict file `{name}.toml` names a crate that is not in the list");
        }
    }
    let binary = match args.binary {
        Some(b) => b,
        None => build_binary()?,
    };
    let binary = binary
        .canonicalize()
        .with_context(|| format!("no linter binary at `{}`", binary.display()))?;
    let off_by_default = lint::allow_by_default(&binary)?;
    let enable: Vec<String> = off_by_default
        .iter()
        .flat_map(|name| ["-W".to_owned(), name.clone()])
        .collect();
    let scratch = target_dir().join("lintcheck").join("fetch");
    let home = fetch::cargo_home();

    let mut results = Vec::new();
    for spec in specs {
        eprint!("{} {} ... ", spec.name, spec.version);
        let verdicts = all_verdicts.get(&spec.name);
        let outcome = fetch::source_dir(&home, &spec, &scratch)
            .and_then(|dir| lint::lint(&binary, &dir, args.runs, &enable));
        let result = match outcome {
            Ok(linted) => {
                let (findings, vanished) =
                    verdicts::match_findings(&linted.findings, &spec.version, verdicts);
                let bugs = bugs_of(verdicts, &linted.findings);
                eprintln!(
                    "{} findings, {} ms",
                    findings.len(),
                    linted.time.as_millis()
                );
                CrateResult {
                    outcome: Outcome::Linted {
                        findings,
                        time: linted.time,
                    },
                    vanished,
                    bugs,
                    spec,
                }
            }
            Err(e) => {
                let why = format!("{e:#}").replace('\n', " ");
                eprintln!("failed: {why}");
                CrateResult {
                    outcome: Outcome::Failed(why),
                    vanished: Vec::new(),
                    bugs: bugs_of(verdicts, &[]),
                    spec,
                }
            }
        };
        results.push(result);
    }

    let header = vec![
        format!("binary: `{}`", binary.display()),
        format!("runs per crate: {} (time is the median)", args.runs.max(1)),
    ];
    let md = report::render(&results, &header, &off_by_default);
    let out = args
        .out
        .unwrap_or_else(|| target_dir().join("lintcheck").join("report.md"));
    if let Some(parent) = out.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("could not create `{}`", parent.display()))?;
    }
    std::fs::write(&out, md).with_context(|| format!("could not write `{}`", out.display()))?;
    let t = report::totals(&results, &off_by_default);
    let ratio = |x: Option<f64>| x.map_or("n/a".to_string(), |x| format!("{x:.3}"));
    println!(
        "{} crates ({} failed): {} findings, {} TP, {} FP, {} debatable, {} NEW, {} VANISHED; \
         precision {} ({} for the lints on by default); bugs found {}/{} (recall {}); lint time {} ms",
        results.len(),
        t.failed,
        t.counts.findings,
        t.counts.tp,
        t.counts.fp,
        t.counts.debatable,
        t.counts.new,
        t.vanished,
        ratio(t.counts.precision()),
        ratio(t.on_by_default.precision()),
        t.bugs_found,
        t.bugs,
        ratio(t.recall()),
        t.time.as_millis()
    );
    println!("report: {}", out.display());
    Ok(())
}

fn bugs_of(
    verdicts: Option<&verdicts::CrateVerdicts>,
    findings: &[lintcheck::finding::Finding],
) -> Vec<(verdicts::Bug, bool)> {
    verdicts
        .map(|v| {
            v.bug
                .iter()
                .map(|b| (b.clone(), b.found_by(findings)))
                .collect()
        })
        .unwrap_or_default()
}
