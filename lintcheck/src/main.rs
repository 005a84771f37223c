//! `cargo run -p lintcheck -- [OPTIONS]`: lint the pinned crates and write the report.

use anyhow::{bail, Context, Result};
use clap::Parser;
use lintcheck::crates::CrateSpec;
use lintcheck::report::{self, CrateResult, Outcome};
use lintcheck::{apps, crates, fetch, lint, verdicts};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// Lints pinned real crates with cargo idem-lint and diffs the findings against the reviewed
/// verdicts in lintcheck/verdicts/; with `--apps`, pinned whole application workspaces against
/// lintcheck/verdicts-apps/.
#[derive(Parser)]
struct Args {
    /// The cargo-idem-lint binary to run [default: build it with `cargo build --release`]
    #[arg(long)]
    binary: Option<PathBuf>,
    /// Lint the whole applications of `--apps-list` instead of the registry crates
    #[arg(long)]
    apps: bool,
    /// The pinned crate list
    #[arg(long, default_value_os_t = workspace_root().join("lintcheck/crates.toml"))]
    crates: PathBuf,
    /// The pinned application list (with `--apps`)
    #[arg(long, default_value_os_t = workspace_root().join("lintcheck/apps.toml"))]
    apps_list: PathBuf,
    /// The directory of verdict files [default: lintcheck/verdicts, or lintcheck/verdicts-apps
    /// with `--apps`]
    #[arg(long)]
    verdicts: Option<PathBuf>,
    /// Where the bare git mirrors of the applications are (`owner+name/repo`, `owner+name.git`
    /// or `owner+name`) [default: $IDEM_LINT_MIRRORS, else /work/.mirror]
    #[arg(long)]
    mirrors: Option<PathBuf>,
    /// Where the applications are extracted [default: <target dir>/lintcheck/apps]
    #[arg(long)]
    apps_dir: Option<PathBuf>,
    /// Where to write the Markdown report [default: <target dir>/lintcheck/report.md, or
    /// apps-report.md with `--apps`]
    #[arg(long)]
    out: Option<PathBuf>,
    /// Lint only this crate or application (repeatable)
    #[arg(long = "only", value_name = "NAME")]
    only: Vec<String>,
    /// Lint each crate or application this many times and report the median time
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

/// Lints every crate with this workspace's toolchain. A crate's own `rust-toolchain.toml`
/// would make rustup look for the toolchain it pins (its `cargo metadata` is all the linter
/// asks of cargo), and that toolchain is usually not installed: the crate would fail to lint.
/// Under `cargo run` rustup has set `RUSTUP_TOOLCHAIN` already; a binary started directly
/// asks rustup which toolchain is active here.
fn pin_toolchain() {
    if std::env::var_os("RUSTUP_TOOLCHAIN").is_some() {
        return;
    }
    let active = Command::new("rustup")
        .args(["show", "active-toolchain"])
        .current_dir(workspace_root())
        .output();
    if let Ok(out) = active {
        let text = String::from_utf8_lossy(&out.stdout);
        if let Some(name) = text
            .split_whitespace()
            .next()
            .filter(|_| out.status.success())
        {
            // Set once at start-up, before any thread is spawned.
            std::env::set_var("RUSTUP_TOOLCHAIN", name);
        }
    }
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
    pin_toolchain();
    if args.apps {
        return run_apps(args);
    }
    let mut specs = crates::load(&args.crates)?;
    let names: Vec<String> = specs.iter().map(|s| s.name.clone()).collect();
    check_only(&args.only, &names, &args.crates)?;
    if !args.only.is_empty() {
        specs.retain(|s| args.only.contains(&s.name));
    }
    let verdict_dir = args
        .verdicts
        .clone()
        .unwrap_or_else(|| workspace_root().join("lintcheck/verdicts"));
    let all_verdicts = load_verdicts(&verdict_dir, &names)?;
    let (binary, enable) = linter(args.binary.clone())?;
    let off_by_default = allow_names(&enable);
    let scratch = target_dir().join("lintcheck").join("fetch");
    let home = fetch::cargo_home();

    let mut results = Vec::new();
    for spec in specs {
        eprint!("{} {} ... ", spec.name, spec.version);
        let outcome = fetch::source_dir(&home, &spec, &scratch)
            .and_then(|dir| lint::lint(&binary, &dir, args.runs, &enable));
        results.push(result_of(spec, outcome, &all_verdicts));
    }

    let header = vec![
        format!("binary: `{}`", binary.display()),
        format!("runs per crate: {} (time is the median)", args.runs.max(1)),
    ];
    let md = report::render(&results, &header, &off_by_default);
    let out = args
        .out
        .unwrap_or_else(|| target_dir().join("lintcheck").join("report.md"));
    finish(&results, &off_by_default, "crate", &md, &out)
}

/// `--apps`: extract each pinned application from its mirror, check that its workspace loads
/// offline, lint it with `--workspace`, and report it against lintcheck/verdicts-apps/.
fn run_apps(args: Args) -> Result<()> {
    let mut list = apps::load(&args.apps_list)?;
    let names: Vec<String> = list.iter().map(|a| a.name.clone()).collect();
    check_only(&args.only, &names, &args.apps_list)?;
    if !args.only.is_empty() {
        list.retain(|a| args.only.contains(&a.name));
    }
    let verdict_dir = args
        .verdicts
        .clone()
        .unwrap_or_else(|| workspace_root().join("lintcheck/verdicts-apps"));
    let all_verdicts = load_verdicts(&verdict_dir, &names)?;
    let mirrors = args
        .mirrors
        .clone()
        .or_else(|| std::env::var_os("IDEM_LINT_MIRRORS").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("/work/.mirror"));
    let apps_dir = args
        .apps_dir
        .clone()
        .unwrap_or_else(|| target_dir().join("lintcheck").join("apps"));
    let (binary, enable) = linter(args.binary.clone())?;
    let off_by_default = allow_names(&enable);

    let mut results = Vec::new();
    let mut rows = Vec::new();
    for app in list {
        eprint!("{} {} ... ", app.name, &app.commit[..12]);
        let mut stats = None;
        let outcome = (|| {
            let git_dir = app
                .find_mirror(&mirrors)
                .ok_or_else(|| apps::missing_mirror(&app, &mirrors))?;
            let checkout = apps::extract(&git_dir, &app, &apps_dir.join(&app.name))?;
            // Finding paths are made relative to this root: it must be spelled as the
            // linter spells the files it reads.
            let checkout = checkout
                .canonicalize()
                .with_context(|| format!("no checkout at `{}`", checkout.display()))?;
            let workspace = app.workspace_dir(&checkout);
            let manifest = workspace.join("Cargo.toml");
            let members = apps::members(&manifest)?;
            stats = Some(apps::AppStats {
                members,
                lines: apps::rust_lines(&workspace)?,
            });
            lint::lint_workspace(&binary, &manifest, &checkout, args.runs, &enable)
        })();
        let time = outcome.as_ref().ok().map(|l| l.time);
        rows.push((app.clone(), stats, time));
        results.push(result_of(app.as_crate_spec(), outcome, &all_verdicts));
    }

    let header = vec![
        format!("binary: `{}`", binary.display()),
        format!(
            "each application linted as its users would: `cargo idem-lint --workspace --no-cache \
             --manifest-path <checkout>/Cargo.toml`, every lint on; runs per application: {} \
             (time is the median)",
            args.runs.max(1)
        ),
    ];
    let table = apps::table(&rows);
    let layout = report::Layout {
        unit: "app",
        verdict_dir: "lintcheck/verdicts-apps",
        after_summary: &table,
    };
    let md = report::render_with(&results, &header, &off_by_default, &layout);
    let out = args
        .out
        .unwrap_or_else(|| target_dir().join("lintcheck").join("apps-report.md"));
    finish(&results, &off_by_default, "app", &md, &out)
}

fn check_only(only: &[String], names: &[String], list: &Path) -> Result<()> {
    for name in only {
        if !names.contains(name) {
            bail!("`--only {name}`: no such entry in `{}`", list.display());
        }
    }
    Ok(())
}

fn load_verdicts(
    dir: &Path,
    names: &[String],
) -> Result<std::collections::BTreeMap<String, verdicts::CrateVerdicts>> {
    let all = verdicts::load_dir(dir)?;
    for name in all.keys() {
        if !names.contains(name) {
            bail!(
                "verdict file `{name}.toml` in `{}` names an entry that is not in the list",
                dir.display()
            );
        }
    }
    Ok(all)
}

/// The linter to run and the `-W` flags that turn on its lints that are `allow` by default.
fn linter(binary: Option<PathBuf>) -> Result<(PathBuf, Vec<String>)> {
    let binary = match binary {
        Some(b) => b,
        None => build_binary()?,
    };
    let binary = binary
        .canonicalize()
        .with_context(|| format!("no linter binary at `{}`", binary.display()))?;
    let enable = lint::allow_by_default(&binary)?
        .into_iter()
        .flat_map(|name| ["-W".to_owned(), name])
        .collect();
    Ok((binary, enable))
}

fn allow_names(enable: &[String]) -> Vec<String> {
    enable.iter().skip(1).step_by(2).cloned().collect()
}

fn result_of(
    spec: CrateSpec,
    outcome: Result<lint::Linted>,
    all_verdicts: &std::collections::BTreeMap<String, verdicts::CrateVerdicts>,
) -> CrateResult {
    let verdicts = all_verdicts.get(&spec.name);
    match outcome {
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
    }
}

fn finish(
    results: &[CrateResult],
    off_by_default: &[String],
    unit: &str,
    md: &str,
    out: &Path,
) -> Result<()> {
    if let Some(parent) = out.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("could not create `{}`", parent.display()))?;
    }
    std::fs::write(out, md).with_context(|| format!("could not write `{}`", out.display()))?;
    for line in report::summary(results, off_by_default, unit) {
        println!("{line}");
    }
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
