//! `cargo idem-lint`: the driver around the `idem-lints` crate.
//!
//! The pipeline, one room each: [`cli`] arguments → [`discovery`] of packages and targets →
//! [`config`] and [`levels`] → [`parse`] (parallel, per-file time budget) → [`report`] (lints,
//! levels, [`suppress`]ion comments) → [`changed`] files and the [`baseline`] filter what
//! is reported → [`emit`] in the chosen format, or [`fix`] applies the suggestions.
//! [`with_check`] runs cargo's check before all that for rust-analyzer. [`run`] strings them
//! together for `main`; tests and benchmarks call the rooms directly.

pub mod baseline;
pub mod budget;
pub mod cache;
pub mod changed;
pub mod cli;
pub mod config;
pub mod discovery;
pub mod emit;
pub mod fix;
pub mod git;
mod info;
pub use info::{docs_url, explain_text};
pub mod levels;
pub mod link;
pub mod lsp;
pub mod parse;
pub mod replace;
pub mod report;
pub mod source;
pub mod suppress;
pub mod uri;
pub mod with_check;

use anyhow::{Context, Result};
use cli::Args;
use std::io::Write;

/// How a run ended, for the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Nothing at `deny` (exit 0).
    Clean,
    /// A finding at `deny` (exit 1).
    Denied,
}

/// Runs the subcommand as the command line asks; errors are usage, config or I/O errors
/// (exit 2).
pub fn run(args: &Args) -> Result<Outcome> {
    let docs_url = args.docs_url.clone().or_else(|| {
        std::env::var("IDEM_LINT_DOCS_URL")
            .ok()
            .filter(|u| !u.is_empty())
    });
    info::set_docs_url(docs_url)?;
    if let Some(name) = &args.explain {
        info::explain(name).or_else(quiet_broken_pipe)?;
        return Ok(Outcome::Clean);
    }
    if let Some(cli::Command::Lsp(lsp_args)) = &args.command {
        return lsp::run(args, lsp_args).map(|()| Outcome::Clean);
    }
    let selection = discovery::Selection::from_args(args);
    if args.list {
        // Outside any crate the list still makes sense, with the defaults and the flags.
        let config = match discovery::discover(&selection) {
            Ok(ws) if args.isolated => config::Config::isolated(&ws),
            Ok(ws) => config::Config::load(&ws)?,
            Err(_) => config::Config::default(),
        };
        info::list(&config.workspace_levels(&args.level_flags)?).or_else(quiet_broken_pipe)?;
        return Ok(Outcome::Clean);
    }
    if args.strict_baseline && args.baseline.is_none() {
        anyhow::bail!("`--strict-baseline` goes with `--baseline FILE`");
    }
    if !args.exclude.is_empty() && !args.workspace {
        anyhow::bail!("`--exclude` goes with `--workspace`");
    }
    if args.unsafe_fixes && !(args.fix || args.diff) {
        anyhow::bail!("`--unsafe-fixes` goes with `--fix` or `--diff`");
    }
    if let Some(kind) = args.with_check {
        return with_check::run(args, kind);
    }
    let linted = lint(args)?;
    if args.fix || args.diff {
        return fix::run(args, &linted);
    }
    let input = linted.input();
    let written = if args.statistics {
        info::statistics(&input, args.message_format.is_json()).map_err(|e| {
            e.downcast::<std::io::Error>()
                .unwrap_or_else(|e| std::io::Error::other(e.to_string()))
        })
    } else {
        emit::emit_stdout(args.message_format, args.color, &input)
    };
    match written {
        Ok(()) => {}
        // A closed pipe (`| head`) is the reader's choice, not an error.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        Err(e) => return Err(e).context("could not write the output"),
    }
    if args.message_format != cli::MessageFormat::Human {
        if let Some(b) = &linted.report.baseline {
            stderr_line(&format!("note: {}", b.describe()));
        }
    }
    if args.verbose {
        for line in unmodelled_note(&linted.ws) {
            stderr_line(&line);
        }
    }
    let stale = linted.report.baseline.as_ref().map_or(0, |b| b.stale);
    if args.strict_baseline && stale > 0 {
        stderr_line(&format!(
            "error: {stale} baseline entr{} no longer match a finding (`--strict-baseline`): drop {} with `--prune-baseline`",
            if stale == 1 { "y" } else { "ies" },
            if stale == 1 { "it" } else { "them" }
        ));
    }
    let outcome = if linted.report.has_errors() || (args.strict_baseline && stale > 0) {
        Outcome::Denied
    } else {
        Outcome::Clean
    };
    // The process ends right after: freeing every model node one at a time took about 4% of
    // a run on tokio, on one thread, for memory the exit returns at once.
    std::mem::forget(linted);
    Ok(outcome)
}

/// A finished lint run: what the emitters read.
pub struct Linted {
    pub ws: discovery::Workspace,
    pub report: report::Report,
    pub cwd: std::path::PathBuf,
}

impl Linted {
    /// Adds the run of another workspace: its packages after these, so the report and the
    /// emitters see one run. The root becomes the deepest directory holding both roots (what
    /// SARIF and GitHub paths start from, unless `--sarif-root` says).
    fn absorb(&mut self, other: Linted) {
        self.ws.root = common_ancestor(&self.ws.root, &other.ws.root);
        let offset = self.report.packages.len();
        self.ws.packages.extend(other.ws.packages);
        self.ws.warnings.extend(other.ws.warnings);
        self.ws.unselected.extend(other.ws.unselected);
        self.report.absorb(other.report, offset);
    }

    pub fn input(&self) -> emit::Input<'_> {
        emit::Input {
            ws: &self.ws,
            report: &self.report,
            cwd: &self.cwd,
        }
    }
}

/// Discovers, configures and lints what `args` selects, prints the warnings met on the
/// way, and keeps the findings `--only`, `--changed-since` and the baseline let through.
pub fn lint(args: &Args) -> Result<Linted> {
    let mut selection = discovery::Selection::from_args(args);
    let mut only = args.only.clone();
    let named = changed::split_paths(args.path.iter().chain(&args.more_paths))?;
    selection.path = named.dir;
    only.extend(named.files.iter().cloned());
    // Files without a directory: the workspace around each (a pre-commit hook passes the
    // staged files of every crate of a repository at once). `--only` alone keeps cargo's
    // choice when run inside a package.
    if selection.path.is_none() && selection.manifest_path.is_none() {
        let dirs = changed::package_dirs_for(&named.files, &args.only, &mut |w| {
            stderr_line(&format!("warning: {w}"))
        })?;
        if !named.files.is_empty() && dirs.is_empty() {
            anyhow::bail!("no package to lint: none of the files given is inside a package");
        }
        if !dirs.is_empty() {
            selection.workspace = selection.packages.is_empty();
            return lint_dirs(args, &selection, &dirs, &only);
        }
    }
    let mut ws = discovery::discover(&selection)?;
    ws.report_root = args.sarif_root.clone();
    lint_workspace(args, ws, &only)
}

/// Lints the workspace around each of `dirs` once (two files of one workspace are one run)
/// and reports them as one run.
fn lint_dirs(
    args: &Args,
    selection: &discovery::Selection,
    dirs: &[std::path::PathBuf],
    only: &[std::path::PathBuf],
) -> Result<Linted> {
    let mut merged: Option<Linted> = None;
    let mut roots = Vec::new();
    for dir in dirs {
        let mut ws = discovery::discover(&discovery::Selection {
            path: Some(dir.clone()),
            ..selection.clone()
        })?;
        if roots.contains(&ws.root) {
            continue;
        }
        roots.push(ws.root.clone());
        ws.report_root = args.sarif_root.clone();
        let linted = lint_workspace(args, ws, only)?;
        merged = Some(match merged {
            None => linted,
            Some(mut all) => {
                all.absorb(linted);
                all
            }
        });
    }
    merged.ok_or_else(|| anyhow::anyhow!("no package to lint"))
}

/// [`lint`] after discovery.
pub fn lint_workspace(
    args: &Args,
    mut ws: discovery::Workspace,
    only: &[std::path::PathBuf],
) -> Result<Linted> {
    exclude(&mut ws, &args.exclude);
    let config = if args.isolated {
        config::Config::isolated(&ws)
    } else {
        config::Config::load(&ws)?
    };
    if !args.level_flags.is_empty() {
        say_lowered(&config, &ws, &args.level_flags)?;
    }
    let opts = parse_options(args, &config);
    let disk = if args.no_cache {
        None
    } else {
        cache::disk_root(&ws)
            .unwrap_or_else(|refused| {
                ws.warnings.push(refused);
                None
            })
            .and_then(|root| cache::DiskCache::open(&root))
    };
    let inputs = parse::Inputs {
        overlays: None,
        cache: disk.as_ref().map(|d| d as &dyn cache::Store),
        cancel: None,
    };
    let mut report = report::check_with(&ws, &opts, &config, &args.level_flags, inputs)?;
    if let Some(disk) = &disk {
        disk.prune();
    }
    let cwd = std::env::current_dir().context("could not read the current directory")?;
    for w in &ws.warnings {
        stderr_line(&format!("warning: {w}"));
    }
    for w in &report.warnings {
        stderr_line(&format!(
            "warning: {}:{}:{}: {}",
            emit::relative_path(&w.path, &cwd),
            w.warning.line,
            w.warning.column,
            w.warning.message
        ));
    }
    let files = changed::selected_files(
        only,
        args.changed_since.as_deref(),
        &cwd,
        &ws.origin,
        &mut |w| stderr_line(&format!("warning: {w}")),
    )?;
    if let Some(files) = &files {
        changed::retain(&mut report, files, &ws.root);
    }
    let in_scope = |p: &std::path::Path| files.as_ref().is_none_or(|f| f.contains(p));
    if let Some(path) = &args.write_baseline {
        baseline::write(&report, &ws.root, path)?;
        stderr_line(&format!(
            "note: wrote {} findings to the baseline `{}`",
            report.findings.len(),
            path.display()
        ));
    }
    if let Some(path) = args.baseline.as_ref().or(args.write_baseline.as_ref()) {
        report.baseline = Some(baseline::apply(&mut report, &ws.root, path, &in_scope)?);
    }
    if let Some(path) = &args.prune_baseline {
        let summary = baseline::prune(&mut report, &ws.root, path, &in_scope)?;
        stderr_line(&format!(
            "note: pruned {} stale entr{} from the baseline `{}`",
            summary.stale,
            if summary.stale == 1 { "y" } else { "ies" },
            path.display()
        ));
        report.baseline = Some(baseline::Summary {
            stale: 0,
            ..summary
        });
    }
    Ok(Linted { ws, report, cwd })
}

/// Leaves out the members `--exclude` names (`name`, or `name@version`): they are not
/// linted, but still read as the libraries of the members that depend on them, as with
/// `-p`. A spec that names no member is a warning, as in cargo.
fn exclude(ws: &mut discovery::Workspace, specs: &[String]) {
    if specs.is_empty() {
        return;
    }
    let version = |id: &str| {
        let tail = id.rsplit('#').next().unwrap_or("");
        tail.rsplit('@').next().unwrap_or(tail).to_string()
    };
    let named = |p: &discovery::PackageSpec, spec: &str| {
        spec == p.name || spec == format!("{}@{}", p.name, version(&p.id))
    };
    for spec in specs {
        if !ws.packages.iter().any(|p| named(p, spec)) {
            stderr_line(&format!(
                "warning: excluded package `{spec}` is not a member of the workspace"
            ));
        }
    }
    let (out, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut ws.packages)
        .into_iter()
        .partition(|p| specs.iter().any(|s| named(p, s)));
    ws.packages = kept;
    ws.unselected.extend(out.into_iter().map(|p| p.name));
}

/// One `warning:` line naming the lints the checkout's configuration sets below the level
/// the command line gives them: its levels win, by design (as clippy's `#[allow]` in the
/// code does), but a CI gate must see that they did.
fn say_lowered(
    config: &config::Config,
    ws: &discovery::Workspace,
    flags: &[levels::LevelFlag],
) -> Result<()> {
    let lowered = config.lowered(ws, flags)?;
    if lowered.is_empty() {
        return Ok(());
    }
    let named: Vec<String> = lowered
        .iter()
        .map(|l| {
            format!(
                "`{}` at {} (not {}) in {}",
                l.lint.name,
                l.level.as_str(),
                l.asked.as_str(),
                l.packages
                    .iter()
                    .map(|p| format!("`{p}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
        .collect();
    stderr_line(&format!(
        "warning: the checkout's configuration lowers lints below the command line's level: {}; `--isolated` ignores it",
        named.join("; ")
    ));
    Ok(())
}

fn common_ancestor(a: &std::path::Path, b: &std::path::Path) -> std::path::PathBuf {
    a.ancestors()
        .find(|d| b.starts_with(d))
        .unwrap_or(a)
        .to_path_buf()
}

/// Writes one line to stderr, every control character in it made visible
/// ([`emit::snippet::escape`]): warnings and errors quote the checkout (lint names of
/// suppression comments, config keys, file and symlink names), and a CR, LF or ESC of
/// theirs must not start a workflow command or drive a terminal. A stderr that cannot be
/// written (`2>/dev/full`, a closed pipe) must not cost the findings on stdout, so the
/// failure is ignored, where `eprintln!` would panic (and abort inside the panic hook).
pub fn stderr_line(line: &str) {
    let line = emit::snippet::escape(line);
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{line}");
}

/// The `--verbose` lines naming the dependencies of the linted packages that the catalog does
/// not model, each once for the run (none when every one is modelled or neutral).
pub fn unmodelled_note(ws: &discovery::Workspace) -> Vec<String> {
    let members: Vec<String> = ws
        .packages
        .iter()
        .map(|p| p.name.replace('-', "_"))
        .chain(
            ws.packages
                .iter()
                .flat_map(|p| p.links.iter().map(|l| l.krate.clone())),
        )
        .collect();
    let mut named: Vec<&str> = Vec::new();
    for p in &ws.packages {
        for d in idem_lints::catalog::coverage::unmodelled(&p.dependencies, &members) {
            if !named.contains(&d) {
                named.push(d);
            }
        }
    }
    if named.is_empty() {
        return Vec::new();
    }
    named.sort_unstable();
    // Store, queue and client crates first: those are the ones that hide findings.
    let (io, other): (Vec<&str>, Vec<&str>) = named
        .iter()
        .partition(|d| idem_lints::catalog::coverage::looks_like_io(d));
    let mut lines = vec![format!(
        "note: no model for {} dependenc{}: calls into {} are opaque to the analysis",
        named.len(),
        if named.len() == 1 { "y" } else { "ies" },
        if named.len() == 1 { "it" } else { "them" },
    )];
    if !io.is_empty() {
        lines.push(format!(
            "  stores, queues or clients by name: {}",
            io.join(", ")
        ));
    }
    if !other.is_empty() {
        lines.push(format!("  others: {}", other.join(", ")));
    }
    lines
}

/// A closed stdout (`--list | head -1`) is the reader's choice, not an error.
fn quiet_broken_pipe(e: anyhow::Error) -> Result<()> {
    match e.downcast_ref::<std::io::Error>() {
        Some(io) if io.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        _ => Err(e),
    }
}

/// How files are read and parsed: the per-file time budget and the size cap from the flag,
/// else the config (which may only narrow them, see [`config`]), else the default; files
/// outside the workspace only with `--allow-outside-workspace`; the per-package analysis
/// budget from the flag, else the default.
pub fn parse_options(args: &Args, config: &config::Config) -> parse::ParseOptions {
    let mut opts = parse::ParseOptions::from_config(config, args.file_timeout_ms);
    if let Some(bytes) = args.max_file_bytes {
        opts.max_file_bytes = bytes;
    }
    opts.allow_outside_workspace |= args.allow_outside_workspace;
    if let Some(ms) = args.package_timeout_ms {
        opts.package_timeout = std::time::Duration::from_millis(ms);
    }
    // From the start of the run: a run of several workspaces (files of several packages
    // given as paths) shares one deadline.
    static RUN_START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    let run_timeout = std::time::Duration::from_millis(args.run_timeout_ms);
    opts.run_timeout = Some(run_timeout);
    opts.run_deadline = Some(*RUN_START.get_or_init(std::time::Instant::now) + run_timeout);
    opts.max_analysis_memory = Some(args.max_analysis_memory.saturating_mul(1 << 20));
    opts
}
