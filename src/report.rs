//! The lint pipeline after parsing: run the lints, apply levels and suppression comments.

use crate::budget::{Limit, RunBudget};
use crate::cache::{Cache, PackageKey};
use crate::config::Config;
use crate::discovery::{PackageSpec, Workspace};
use crate::levels::LevelFlag;
use crate::link::{Links, PackageLinks};
use crate::parse::{self, Inputs, LoadedPackage, ParseOptions};
use crate::source::{ReadPolicy, SourceFile};
use crate::suppress::{self, CommentWarning};
use anyhow::Result;
use idem_lints::analysis::incremental::Reuse;
use idem_lints::model::FileId;
use idem_lints::{Diagnostic, Level};
use rayon::prelude::*;
use std::path::PathBuf;

/// One finding, at its effective level (never `allow`).
#[derive(Debug, Clone)]
pub struct Finding {
    /// Index in [`Report::packages`] (and `Workspace::packages`).
    pub package: usize,
    pub diag: Diagnostic,
}

/// A suppression comment that was not understood.
#[derive(Debug, Clone)]
pub struct FileWarning {
    pub path: PathBuf,
    pub warning: CommentWarning,
}

#[derive(Debug)]
pub struct Report {
    pub packages: Vec<LoadedPackage>,
    /// Sorted by package, file path and position.
    pub findings: Vec<Finding>,
    pub warnings: Vec<FileWarning>,
    /// What `--baseline` hid, when one was applied.
    pub baseline: Option<crate::baseline::Summary>,
    /// Per package, how much of a kept analysis its analysis reused: `None` when it was not
    /// analysed (its findings were cached) or nothing keeps analyses (a CLI run).
    pub reuse: Vec<Option<Reuse>>,
}

impl Report {
    pub fn source(&self, package: usize, file: FileId) -> &SourceFile {
        &self.packages[package].sources[file.0 as usize]
    }

    /// Appends the report of another workspace whose packages come after the
    /// `package_offset` packages of this one; findings stay sorted by package.
    pub fn absorb(&mut self, other: Report, package_offset: usize) {
        self.packages.extend(other.packages);
        self.findings
            .extend(other.findings.into_iter().map(|mut f| {
                f.package += package_offset;
                f
            }));
        self.warnings.extend(other.warnings);
        self.reuse.extend(other.reuse);
        self.baseline = match (self.baseline.take(), other.baseline) {
            (Some(mut a), Some(b)) => {
                a.hidden += b.hidden;
                a.stale += b.stale;
                Some(a)
            }
            (a, b) => a.or(b),
        };
    }

    /// Whether a finding is at `deny` (exit code 1).
    pub fn has_errors(&self) -> bool {
        self.findings.iter().any(|f| f.diag.level == Level::Deny)
    }
}

/// The error of a run given up through [`Inputs::cancel`]: its partial results are not a
/// report of anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cancelled;

impl std::fmt::Display for Cancelled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the analysis was cancelled")
    }
}

impl std::error::Error for Cancelled {}

/// Parses every package of `ws` and lints it: the whole pipeline.
pub fn check(
    ws: &Workspace,
    opts: &ParseOptions,
    config: &Config,
    flags: &[LevelFlag],
) -> Result<Report> {
    check_with(ws, opts, config, flags, Inputs::default())
}

/// [`check`] with overlays and a cache: files come from [`Inputs::overlays`] before the disk,
/// and parse results and each package's findings from [`Inputs::cache`] when their key
/// matches (and go into it when computed).
///
/// Everything runs on the parse pool ([`parse::on_pool`]), whose threads have a large stack:
/// the analysis recurses over trees as deep as the nesting scan lets through, and loading
/// many packages from another pool nested each one's wait on a default stack.
pub fn check_with(
    ws: &Workspace,
    opts: &ParseOptions,
    config: &Config,
    flags: &[LevelFlag],
    inputs: Inputs<'_>,
) -> Result<Report> {
    parse::on_pool(|| check_here(ws, opts, config, flags, inputs))
        .map_err(anyhow::Error::msg)
        .and_then(|r| r)
}

/// [`check_with`] on the current thread and pool.
fn check_here(
    ws: &Workspace,
    opts: &ParseOptions,
    config: &Config,
    flags: &[LevelFlag],
    inputs: Inputs<'_>,
) -> Result<Report> {
    // Levels are resolved first so a bad flag or setting fails before any parsing.
    let configs = (0..ws.packages.len())
        .map(|i| config.package(i, flags))
        .collect::<Result<Vec<_>>>()?;
    let mut loaded = parse::load_workspace_outlined(ws, opts, inputs);
    if inputs.cancelled() {
        return Err(Cancelled.into());
    }
    let policy = opts.read_policy(ws);
    let mut links = Links::load(ws, &loaded, opts, &policy, inputs);
    let analysed: Vec<bool> = loaded
        .iter()
        .zip(&configs)
        .enumerate()
        .map(|(i, (pkg, cfg))| {
            let enabled = |lint: &'static idem_lints::Lint| cfg.runs(lint);
            !links.of(i).is_empty() && !cached(pkg, &cfg.settings, &enabled, &links.of(i), inputs)
        })
        .collect();
    links.complete(&analysed);
    let own: Vec<(usize, usize)> = loaded
        .iter()
        .map(|p| (p.package.files.len(), p.package.targets.len()))
        .collect();
    links.plan(&own, &analysed);
    let run = RunBudget::new(opts.run_deadline, opts.max_analysis_memory);
    let analyse = || {
        loaded
            .par_iter_mut()
            .zip(configs.par_iter())
            .enumerate()
            .map(|(index, (pkg, cfg))| {
                if inputs.cancelled() {
                    return (Vec::new(), Vec::new(), None);
                }
                let enabled = |lint: &'static idem_lints::Lint| cfg.runs(lint);
                let load = Reload {
                    spec: &ws.packages[index],
                    opts,
                    policy: &policy,
                    inputs,
                    links: links.of(index),
                    run: &run,
                };
                let (mut diags, reuse, stopped) = lint_package(pkg, &load, &cfg.settings, &enabled);
                diags.extend(pkg.problems.iter().filter(|d| enabled(d.lint)).cloned());
                // `[[overrides]]` give some files levels of their own.
                let by_file: Vec<Option<crate::levels::Levels>> = pkg
                    .sources
                    .iter()
                    .map(|src| cfg.levels_at(&src.path))
                    .collect();
                let level = |lint: &'static idem_lints::Lint, file: usize| {
                    by_file
                        .get(file)
                        .and_then(Option::as_ref)
                        .unwrap_or(&cfg.levels)
                        .get(lint)
                };
                let (findings, mut warnings) = finish(index, pkg, diags, level, !stopped);
                if stopped {
                    warnings.push(out_of_budget(pkg, &ws.packages[index], opts, run.limit()));
                }
                (findings, warnings, reuse)
            })
            .collect()
    };
    let per_package: Vec<(Vec<Finding>, Vec<FileWarning>, Option<Reuse>)> = run.watch(analyse);
    if inputs.cancelled() {
        return Err(Cancelled.into());
    }
    let mut findings = Vec::new();
    let mut warnings = Vec::new();
    let mut reuse = Vec::new();
    for (f, w, r) in per_package {
        findings.extend(f);
        warnings.extend(w);
        reuse.push(r);
    }
    let findings = without_repeats(findings, &loaded);
    Ok(Report {
        packages: loaded,
        findings,
        warnings,
        baseline: None,
        reuse,
    })
}

/// `findings` with each finding once: a later one with the file, span, lint and message of
/// an earlier one is dropped. Findings moved from a linked member's file to the package's own
/// label ([`PackageLinks::own_findings`]) meet there when two calls in the member take one
/// entry point to the same effect, and a file that two packages compile is linted in each:
/// the reader sees one finding, whatever the paths that made it.
fn without_repeats(findings: Vec<Finding>, packages: &[LoadedPackage]) -> Vec<Finding> {
    let mut seen = std::collections::HashSet::new();
    findings
        .into_iter()
        .filter(|f| {
            let d = &f.diag;
            let path = &packages[f.package].sources[d.span.file.0 as usize].path;
            seen.insert((
                path.clone(),
                d.span.lo,
                d.span.hi,
                d.lint.name,
                d.message.clone(),
            ))
        })
        .collect()
}

/// Where a package's models come from when its outlines are not enough.
struct Reload<'a> {
    spec: &'a PackageSpec,
    opts: &'a ParseOptions,
    policy: &'a ReadPolicy,
    inputs: Inputs<'a>,
    /// The workspace members' libraries the package is analysed with.
    links: PackageLinks<'a>,
    /// The run's limits on every analysis.
    run: &'a RunBudget,
}

impl Reload<'_> {
    /// See [`parse::complete`].
    fn complete(&self, pkg: &mut LoadedPackage, wanted: &(dyn Fn(FileId) -> bool + Sync)) -> bool {
        parse::complete(pkg, self.spec, self.opts, self.policy, self.inputs, wanted)
    }
}

/// The warning for a package whose analysis ran out of a budget, at its first file.
fn out_of_budget(
    pkg: &LoadedPackage,
    spec: &PackageSpec,
    opts: &ParseOptions,
    limit: Limit,
) -> FileWarning {
    let path = pkg
        .sources
        .first()
        .map_or_else(|| spec.manifest_path.clone(), |s| s.path.clone());
    FileWarning {
        path,
        warning: suppress::CommentWarning {
            line: 1,
            column: 1,
            message: format!(
                "the analysis of package `{}` stopped at {}: these are the findings found so far, others may be missing",
                spec.name,
                match limit {
                    Limit::Package => format!(
                        "its budget of {} ms (`--package-timeout-ms`)",
                        opts.package_timeout.as_millis()
                    ),
                    Limit::Run => format!(
                        "the run's budget of {} ms (`--run-timeout-ms`)",
                        opts.run_timeout.unwrap_or_default().as_millis()
                    ),
                    Limit::Memory => format!(
                        "the memory budget of {} MiB (`--max-analysis-memory`)",
                        opts.max_analysis_memory.unwrap_or_default() >> 20
                    ),
                }
            ),
        },
    }
}

/// The lints' findings on `pkg`, from the cache when the package and the lints are unchanged,
/// how much of a kept analysis was reused (`None`: not analysed, or nothing kept), and
/// whether the analysis stopped at its budget ([`ParseOptions::package_timeout`]; such
/// findings are not cached).
/// Leaves in `pkg` the models the output needs: every model when the package was analysed,
/// else those of the files [`finish`] scans for suppression comments (the others stay
/// outlines: decoding them was most of an unchanged re-run).
fn lint_package(
    pkg: &mut LoadedPackage,
    load: &Reload<'_>,
    settings: &idem_lints::Settings,
    enabled: &idem_lints::Enabled<'_>,
) -> (Vec<Diagnostic>, Option<Reuse>, bool) {
    let links = &load.links;
    let within_budget = |pkg: &LoadedPackage| {
        let budget = load.run.package(load.opts.package_timeout);
        // Past the run's time or memory already: not even joined with its linked members
        // (that join, for each of 2,000 chained members, was most of such a run).
        if budget.spent() {
            return (Vec::new(), true);
        }
        linked(&pkg.package, links, |p| {
            idem_lints::check_package_within(p, settings, enabled, &budget)
        })
    };
    let Some(cache) = load.inputs.cache.map(Cache::new) else {
        let (found, stopped) = within_budget(pkg);
        return (found, None, stopped);
    };
    let mut key = PackageKey::of(pkg, settings, enabled).with_links(links);
    let cached = cache.load_findings(key);
    let scanned: Vec<bool> = pkg.sources.iter().map(SourceFile::may_suppress).collect();
    let wanted = |id: FileId| cached.is_none() || scanned[id.0 as usize];
    let same = load.complete(pkg, &wanted);
    match cached {
        Some(found) if same => return (found, None, false),
        _ if !same => {
            // Loaded again from scratch: the key is the new load's.
            key = PackageKey::of(pkg, settings, enabled).with_links(links);
            if let Some(found) = cache.load_findings(key) {
                return (found, None, false);
            }
        }
        _ => {}
    }
    let session = load.inputs.cache.filter(|s| s.keeps_analyses());
    let (found, reuse, stopped) = if let Some(store) = session {
        // A long-lived session: start from the package's last analysis, keep this one.
        let prev = store.take_analysis(&load.spec.id);
        let (found, (retained, reuse)) = linked(&pkg.package, links, |p| {
            let (found, retained, reuse) =
                idem_lints::check_package_retaining(p, settings, enabled, prev);
            (found, (retained, reuse))
        });
        store.put_analysis(&load.spec.id, retained);
        (found, Some(reuse), false)
    } else {
        let (found, stopped) = within_budget(pkg);
        (found, None, stopped)
    };
    // A cut analysis is not the package's answer: a run with more time must not get it.
    if !stopped {
        cache.store_findings(key, &found);
    }
    (found, reuse, stopped)
}

/// Whether the findings of `pkg` (as loaded, with `links`) are in the cache.
fn cached(
    pkg: &LoadedPackage,
    settings: &idem_lints::Settings,
    enabled: &idem_lints::Enabled<'_>,
    links: &PackageLinks<'_>,
    inputs: Inputs<'_>,
) -> bool {
    let Some(cache) = inputs.cache.map(Cache::new) else {
        return false;
    };
    let key = PackageKey::of(pkg, settings, enabled).with_links(links);
    cache.load_findings(key).is_some()
}

/// `analyse` run on `package` joined with its linked libraries, and the findings of its own
/// files ([`PackageLinks::own_findings`]); on `package` alone when nothing is linked.
fn linked<T>(
    package: &idem_lints::model::Package,
    links: &PackageLinks<'_>,
    analyse: impl FnOnce(&idem_lints::model::Package) -> (Vec<Diagnostic>, T),
) -> (Vec<Diagnostic>, T) {
    if links.is_empty() {
        return analyse(package);
    }
    let (found, rest) = analyse(&links.join(package));
    (links.own_findings(found, package.files.len()), rest)
}

/// Sets levels, drops suppressed findings, adds the findings about the suppression comments
/// themselves (`complete`: the analysis ran to the end, so a suppression that caught
/// nothing is unused), and sorts by file path and position.
fn finish(
    package: usize,
    pkg: &LoadedPackage,
    diags: Vec<Diagnostic>,
    level: impl Fn(&'static idem_lints::Lint, usize) -> Level,
    complete: bool,
) -> (Vec<Finding>, Vec<FileWarning>) {
    let mut warnings = Vec::new();
    let mut scanned: Vec<Option<suppress::Suppressions>> = pkg
        .sources
        .iter()
        .zip(&pkg.package.files)
        .map(|(src, model)| {
            // Most files hold no suppression comment, and the test is kept with the text.
            if !src.may_suppress() {
                return None;
            }
            let (sup, found) = suppress::scan(src, model);
            warnings.extend(found.into_iter().map(|warning| FileWarning {
                path: src.path.clone(),
                warning,
            }));
            Some(sup)
        })
        .collect();
    // A file that was not read or parsed in full hides findings: its suppressions prove
    // nothing. (A missing module is reported on its `mod` line in a file that parsed.)
    let broken: std::collections::HashSet<u32> = diags
        .iter()
        .filter(|d| {
            d.lint.name == idem_lints::lint::PARSE_ERROR.name
                && !d.message.starts_with("file not found for module")
        })
        .map(|d| d.span.file.0)
        .collect();
    let mut kept: Vec<Diagnostic> = diags
        .into_iter()
        // A lint that runs for an override's files only, or one an override allows.
        .filter(|d| level(d.lint, d.span.file.0 as usize) != Level::Allow)
        .filter(|d| {
            let file = d.span.file.0 as usize;
            let suppressed = scanned
                .get_mut(file)
                .and_then(Option::as_mut)
                .is_some_and(|s| s.take(d.lint, d.span, &pkg.sources[file]));
            !suppressed
        })
        .collect();
    for (file, sup) in scanned.iter().enumerate() {
        let Some(sup) = sup else { continue };
        let about = suppress::comment_findings(
            sup,
            FileId(file as u32),
            &pkg.sources[file],
            &|l| level(l, file) != Level::Allow,
            complete && !broken.contains(&(file as u32)),
        );
        // They may be suppressed too (`allow-file(unused_suppression)` in generated code).
        kept.extend(
            about
                .into_iter()
                .filter(|d| !sup.allows(d.lint, d.span, &pkg.sources[file])),
        );
    }
    let mut findings: Vec<Finding> = kept
        .into_iter()
        .map(|mut d| {
            d.level = level(d.lint, d.span.file.0 as usize);
            Finding { package, diag: d }
        })
        .collect();
    findings.sort_by(|a, b| {
        let pa = &pkg.sources[a.diag.span.file.0 as usize].path;
        let pb = &pkg.sources[b.diag.span.file.0 as usize].path;
        (pa, a.diag.span.lo, a.diag.lint.name).cmp(&(pb, b.diag.span.lo, b.diag.lint.name))
    });
    (findings, warnings)
}
