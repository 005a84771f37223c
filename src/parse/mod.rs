//! Reads, parses and lowers every file of a package, in parallel on the parse pool
//! ([`worker`]), following each target's module tree.
//!
//! The tree is walked level by level: the files of a level are parsed in parallel, and the
//! task that parsed a file reads the files its `mod x;` declarations lead to, the next level
//! (reading tells the path each resolves to, so a file reached twice is known before it gets
//! an id). File ids are
//! handed out in a fixed order (target order, then declaration order), so a run's output does
//! not depend on thread timing. Every file is read under the rules of
//! [`crate::source::read_source`]: regular files only, under a size cap, inside the workspace
//! unless `--allow-outside-workspace` allows otherwise.
//!
//! [`Inputs`] adds what an editor or a re-run brings: [`Overlays`] (unsaved buffers that
//! replace files, read under the same rules) and a [`crate::cache::Store`] of earlier parse
//! results, so a file whose text, module path and test status are unchanged is not parsed again.
//! [`crate::report`] loads with outlines first ([`load_workspace_outlined`]) and asks for the
//! models ([`complete`]) only where the analysis or the output needs them.

pub(crate) mod migrations;
mod modpath;
mod overlay;
mod recover;
mod worker;

pub use modpath::{ModDir, Resolved};
pub use overlay::Overlays;
pub use worker::{on_pool, parsing, STACK_SIZE};

use crate::cache::texts::Probe;
use crate::cache::{Cache, FileKey, Store};
use crate::discovery::{PackageSpec, Sources, Workspace};
use crate::source::{ReadError, ReadPolicy, SourceFile, DEFAULT_MAX_FILE_BYTES};
use idem_lints::lint::PARSE_ERROR;
use idem_lints::model::{FileId, FileModel, Package, Span};
use idem_lints::Diagnostic;
use overlay::{Fetched, Text};
use rayon::prelude::*;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How files are read and parsed.
#[derive(Debug, Clone)]
pub struct ParseOptions {
    /// Time budget for one file (reading, parsing, lowering); past it the file is reported
    /// and skipped.
    pub file_timeout: Duration,
    /// Larger files are reported and skipped.
    pub max_file_bytes: u64,
    /// Read modules whose path resolves outside the workspace root (monorepos that share
    /// sources through `#[path = "../../.."]`); off by default so an untrusted checkout cannot
    /// make the linter print files of the machine it runs on.
    pub allow_outside_workspace: bool,
    /// Time budget for the analysis of one package (after its files are parsed); past it
    /// the analysis stops with the findings found so far and a warning.
    pub package_timeout: Duration,
    /// When the analysis of the whole run must end (every package's analysis stops then),
    /// and the budget it was computed from, for the warning; `None`: no run-wide budget.
    pub run_deadline: Option<Instant>,
    pub run_timeout: Option<Duration>,
    /// Resident memory, in bytes, past which every analysis stops ([`crate::budget`]).
    pub max_analysis_memory: Option<u64>,
}

pub const DEFAULT_FILE_TIMEOUT: Duration = Duration::from_secs(10);

/// Far above what any real crate takes (tokio: about a second), far below a hang.
pub const DEFAULT_PACKAGE_TIMEOUT: Duration = Duration::from_secs(300);

impl Default for ParseOptions {
    fn default() -> Self {
        ParseOptions {
            file_timeout: DEFAULT_FILE_TIMEOUT,
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            allow_outside_workspace: false,
            package_timeout: DEFAULT_PACKAGE_TIMEOUT,
            run_deadline: None,
            run_timeout: None,
            max_analysis_memory: None,
        }
    }
}

impl ParseOptions {
    /// The config's options; a `--file-timeout-ms` flag wins over the config's budget.
    pub fn from_config(config: &crate::config::Config, flag_timeout_ms: Option<u64>) -> Self {
        let mut opts = ParseOptions::default();
        let ws = &config.workspace;
        if let Some(ms) = flag_timeout_ms.or(ws.file_timeout_ms) {
            opts.file_timeout = Duration::from_millis(ms);
        }
        if let Some(bytes) = ws.max_file_bytes {
            opts.max_file_bytes = bytes;
        }
        opts.allow_outside_workspace = ws.allow_outside_workspace.unwrap_or(false);
        opts
    }

    /// What the files of `ws` may be read under.
    pub fn read_policy(&self, ws: &Workspace) -> ReadPolicy {
        let mut policy = ReadPolicy::inside(&ws.root);
        if self.allow_outside_workspace {
            policy.root = None;
        }
        policy.max_bytes = self.max_file_bytes;
        policy
    }
}

/// A package ready to lint: its model, the texts behind it (index = `FileId`), and the
/// `parse_error` findings met on the way.
#[derive(Debug)]
pub struct LoadedPackage {
    pub package: Package,
    pub sources: Vec<SourceFile>,
    pub problems: Vec<Diagnostic>,
    /// The files this load parsed and lowered; the others came from [`Inputs::cache`].
    pub parsed: Vec<FileId>,
    /// Files whose entry in `package.files` is still an outline ([`crate::cache::outline`]:
    /// place in the crate, `mod` declarations and `include_str!`s, no items), with the key of
    /// their model. Only [`load_workspace_outlined`] leaves any; [`complete`] replaces them.
    pub(crate) outlines: Vec<(FileId, FileKey)>,
}

impl LoadedPackage {
    /// Whether every file holds its model, as a load without outlines gives it: a load for
    /// keys ([`load_workspace_outlined`]) that found no outline in the cache (a run without
    /// one) is the full load, and need not be made again.
    pub(crate) fn is_full(&self) -> bool {
        self.outlines.is_empty()
    }

    /// Another handle on the same load: the models and texts are shared, not copied.
    pub(crate) fn copy(&self) -> LoadedPackage {
        LoadedPackage {
            package: self.package.clone(),
            sources: self.sources.clone(),
            problems: self.problems.clone(),
            parsed: self.parsed.clone(),
            outlines: self.outlines.clone(),
        }
    }
}

/// Where a load gets texts and parse results besides the disk and the parser. The default
/// reads every file from disk and parses it.
#[derive(Clone, Copy, Default)]
pub struct Inputs<'a> {
    /// Texts that replace files on disk.
    pub overlays: Option<&'a Overlays>,
    /// Parse results (and findings, see [`crate::report::check_with`]) of earlier runs.
    pub cache: Option<&'a dyn Store>,
    /// Set when the result is no longer wanted (the language server's buffer changed
    /// again): files not parsed yet are skipped, and [`crate::report::check_with`] returns
    /// [`crate::report::Cancelled`] instead of a report.
    pub cancel: Option<&'a AtomicBool>,
}

impl Inputs<'_> {
    /// The text of `path`: its overlay, else the file.
    fn read(&self, path: &Path, policy: &ReadPolicy) -> Result<Arc<str>, ReadError> {
        match self.overlays {
            Some(o) => o.read(path, policy),
            None => crate::source::read_source(path, policy).map(Arc::from),
        }
    }

    /// [`Inputs::read`], with the path `path` resolves to.
    fn fetch(&self, path: &Path, policy: &ReadPolicy, probe: Option<&Probe>) -> Fetched {
        match self.overlays {
            Some(o) => o.fetch(path, policy, probe),
            None => overlay::fetch_source(path, policy),
        }
    }

    /// Whether the caller gave up on this run.
    pub fn cancelled(&self) -> bool {
        self.cancel.is_some_and(|c| c.load(Ordering::Relaxed))
    }
}

/// Loads every selected package, packages and files in parallel.
pub fn load_workspace(ws: &Workspace, opts: &ParseOptions) -> Vec<LoadedPackage> {
    load_workspace_with(ws, opts, Inputs::default())
}

/// [`load_workspace`] with overlays and a cache.
pub fn load_workspace_with(
    ws: &Workspace,
    opts: &ParseOptions,
    inputs: Inputs<'_>,
) -> Vec<LoadedPackage> {
    load_all(ws, opts, inputs, false)
}

/// [`load_workspace_with`], but a file whose outline is in the cache is loaded as its outline,
/// and its model is left unread: enough to follow the module trees and compute each package's
/// findings key. [`complete`] reads the models a package needs after all.
pub(crate) fn load_workspace_outlined(
    ws: &Workspace,
    opts: &ParseOptions,
    inputs: Inputs<'_>,
) -> Vec<LoadedPackage> {
    load_all(ws, opts, inputs, true)
}

fn load_all(
    ws: &Workspace,
    opts: &ParseOptions,
    inputs: Inputs<'_>,
    outlines: bool,
) -> Vec<LoadedPackage> {
    let policy = opts.read_policy(ws);
    ws.packages
        .par_iter()
        .map(|p| load_with_includes(p, opts, &policy, inputs, outlines))
        .collect()
}

/// A linked library ([`crate::link`]), with its `include_str!` texts; with `outlines`, as
/// [`load_workspace_outlined`] loads a package.
pub(crate) fn load_linked(
    spec: &PackageSpec,
    opts: &ParseOptions,
    policy: &ReadPolicy,
    inputs: Inputs<'_>,
    outlines: bool,
) -> LoadedPackage {
    load_with_includes(spec, opts, policy, inputs, outlines)
}

fn load_with_includes(
    spec: &PackageSpec,
    opts: &ParseOptions,
    policy: &ReadPolicy,
    inputs: Inputs<'_>,
    outlines: bool,
) -> LoadedPackage {
    let mut loaded = load_package_inner(spec, opts, policy, inputs, outlines);
    let root = spec.manifest_path.parent().unwrap_or(Path::new(""));
    attach_included_texts(&mut loaded.package, root, policy, inputs);
    loaded.package.migrations = migrations::read(spec, policy, inputs);
    loaded
}

/// Replaces the outlines of the files `wanted` selects in `pkg` (loaded by
/// [`load_workspace_outlined`] from `spec`) with their models: from the cache, else parsed
/// again from the text already read. Returns `false` when a file's model could be neither
/// (its entry gone and the parse failed or ran out of time): then `pkg` is loaded again from
/// scratch, exactly as a run without outlines would have loaded it (a file that does not
/// parse has no `mod` declarations to follow), with every model, and anything computed from
/// the old `pkg` (its findings key) must be computed again.
pub(crate) fn complete(
    pkg: &mut LoadedPackage,
    spec: &PackageSpec,
    opts: &ParseOptions,
    policy: &ReadPolicy,
    inputs: Inputs<'_>,
    wanted: &(dyn Fn(FileId) -> bool + Sync),
) -> bool {
    let todo: Vec<(FileId, FileKey)> = pkg
        .outlines
        .iter()
        .copied()
        .filter(|(id, _)| wanted(*id))
        .collect();
    if todo.is_empty() {
        return true;
    }
    let cache = inputs.cache.map(Cache::new);
    let model_of = |(id, key): &(FileId, FileKey)| -> Option<(Arc<FileModel>, bool)> {
        let outline = pkg.package.file(*id);
        if let Some(model) = cache
            .as_ref()
            .and_then(|c| c.load_model(*key, &outline.path, *id))
        {
            return Some((model, false));
        }
        let text = &pkg.sources[id.0 as usize].text;
        let deadline = Instant::now() + opts.file_timeout;
        match worker::parse(text, *id, outline.module.clone(), outline.in_test, deadline) {
            worker::Outcome::Parsed(model) => {
                let model = Arc::new(*model);
                if let Some(c) = &cache {
                    c.store_model(*key, &outline.path, &model);
                }
                Some((model, true))
            }
            _ => None,
        }
    };
    let models: Option<Vec<(Arc<FileModel>, bool)>> =
        worker::on_pool(|| todo.par_iter().map(model_of).collect())
            .ok()
            .flatten();
    let Some(models) = models else {
        *pkg = load_with_includes(spec, opts, policy, inputs, false);
        return false;
    };
    for ((id, _), (mut model, parsed)) in todo.iter().zip(models) {
        let slot = &mut pkg.package.files[id.0 as usize];
        let m = Arc::make_mut(&mut model);
        m.path = slot.path.clone();
        m.target = slot.target;
        // Same key, same `include_str!` list; the outline's carries the texts read this run.
        m.includes = slot.includes.clone();
        *slot = model;
        if parsed {
            pkg.parsed.push(*id);
        }
    }
    pkg.parsed.sort_unstable();
    pkg.outlines.retain(|(id, _)| !wanted(*id));
    true
}

/// Largest file `include_str!` is followed to: SQL files are small, and a bigger file is not
/// read for a lint.
const MAX_INCLUDED_BYTES: u64 = 1 << 20;

/// Reads the files the package's `include_str!`s name (relative to the including file, as
/// rustc does) and its sqlx `query_file!`s name (relative to the package root `root`, as sqlx
/// does) and attaches their text to the model, so SQL kept in `queries/x.sql` is classified
/// like a literal. They are read like every other file (an overlay first, else
/// [`crate::source::read_source`]), but under a smaller cap: a file that is missing, outside
/// the workspace, not a regular file, over [`MAX_INCLUDED_BYTES`] or not UTF-8 is left unread,
/// and no finding depends on it.
fn attach_included_texts(
    package: &mut Package,
    root: &Path,
    policy: &ReadPolicy,
    inputs: Inputs<'_>,
) {
    let mut policy = policy.clone();
    policy.max_bytes = policy.max_bytes.min(MAX_INCLUDED_BYTES);
    for file in &mut package.files {
        if file.includes.is_empty() {
            continue;
        }
        let Some(dir) = file.path.parent().map(Path::to_path_buf) else {
            continue;
        };
        let texts: Vec<Option<Arc<str>>> = file
            .includes
            .iter()
            .map(|inc| {
                let base = if inc.from_package_root { root } else { &dir };
                inputs.read(&base.join(&inc.path), &policy).ok()
            })
            .collect();
        // A model shared with a cache is copied only when a text is new to it.
        let same = file
            .includes
            .iter()
            .zip(&texts)
            .all(|(inc, text)| text.is_none() || inc.text == *text);
        if same {
            continue;
        }
        for (inc, text) in Arc::make_mut(file).includes.iter_mut().zip(texts) {
            if text.is_some() {
                inc.text = text;
            }
        }
    }
}

/// A file to read: where it is and what it is in the crate.
struct Pending {
    path: PathBuf,
    module: Vec<String>,
    in_test: bool,
    target: usize,
    dir: ModDir,
    /// The `mod` declaration that led here, for reporting a file that cannot be read.
    origin: Option<Span>,
    /// Whether to follow its `mod` declarations.
    follow: bool,
    /// What the disk said of `path` when module resolution found it there.
    probe: Option<Probe>,
}

struct Loaded {
    model: Arc<FileModel>,
    source: SourceFile,
    problems: Vec<Diagnostic>,
    /// Parsed here, not taken from the cache.
    parsed: bool,
    /// `model` is the outline stored under this key, not the model.
    outline: Option<FileKey>,
}

pub fn load_package(spec: &PackageSpec, opts: &ParseOptions, policy: &ReadPolicy) -> LoadedPackage {
    load_package_with(spec, opts, policy, Inputs::default())
}

/// [`load_package`] with overlays and a cache.
pub fn load_package_with(
    spec: &PackageSpec,
    opts: &ParseOptions,
    policy: &ReadPolicy,
    inputs: Inputs<'_>,
) -> LoadedPackage {
    load_package_inner(spec, opts, policy, inputs, false)
}

/// [`load_package_with`]; with `outlines`, a file whose outline is cached is loaded as it.
fn load_package_inner(
    spec: &PackageSpec,
    opts: &ParseOptions,
    policy: &ReadPolicy,
    inputs: Inputs<'_>,
    outlines: bool,
) -> LoadedPackage {
    let roots: Vec<Pending> = match &spec.sources {
        Sources::ModuleTrees => spec
            .targets
            .iter()
            .enumerate()
            .map(|(i, t)| Pending {
                dir: ModDir::owning(&t.info.root),
                path: t.info.root.clone(),
                module: vec!["crate".to_string()],
                in_test: t.info.is_test_like(),
                target: i,
                origin: None,
                follow: true,
                probe: None,
            })
            .collect(),
        Sources::Files(files) => {
            let root = spec.manifest_path.parent().unwrap_or(Path::new(""));
            files
                .iter()
                .map(|f| Pending {
                    dir: ModDir::owning(f),
                    module: plain_module_path(root, f),
                    in_test: plain_is_test(root, f),
                    path: f.clone(),
                    target: 0,
                    origin: None,
                    // Every file is listed already; following `mod` would only find them twice.
                    follow: false,
                    probe: None,
                })
                .collect()
        }
    };
    let package_root = spec.manifest_path.parent().unwrap_or(Path::new(""));
    let mut seen: HashSet<PathBuf> = HashSet::new();
    let mut files: Vec<Arc<FileModel>> = Vec::new();
    let mut sources: Vec<SourceFile> = Vec::new();
    let mut problems: Vec<Diagnostic> = Vec::new();
    let mut parsed: Vec<FileId> = Vec::new();
    let mut outlined: Vec<(FileId, FileKey)> = Vec::new();
    let fetch_all = || roots.par_iter().map(|p| fetch(p, policy, inputs)).collect();
    let fetched: Vec<Fetch> = worker::on_pool(fetch_all)
        .unwrap_or_else(|_| roots.iter().map(|p| fetch(p, policy, inputs)).collect());
    // Each level's files, read: a file's modules are read by the task that parsed it, so a
    // level waits for its slowest file once, not once to read and once to parse.
    let mut level: Vec<(Pending, Fetch)> = roots.into_iter().zip(fetched).collect();
    while !level.is_empty() {
        // A file reached twice (two targets sharing a module, a `#[path]` cycle, a symlink to
        // a file already read) is linted once, as part of the first target that reached it.
        let batch: Vec<(FileId, Pending, Fetch)> = level
            .drain(..)
            .filter(|(p, f)| seen.insert(f.resolved.clone().unwrap_or_else(|| p.path.clone())))
            .enumerate()
            .map(|(i, (p, f))| (FileId((files.len() + i) as u32), p, f))
            .collect();
        // Each file with the files its `mod` declarations lead to (found on the pool too:
        // asking the disk for them is most of what an unchanged file costs). Largest files
        // first, one per task: a level waits for its slowest task, and a large file started
        // last would leave the other threads idle at the end of every level.
        let mut order: Vec<usize> = (0..batch.len()).collect();
        order.sort_by_key(|&k| std::cmp::Reverse(fetched_len(&batch[k].2)));
        let parse_all = || {
            let mut loaded: Vec<(usize, _)> = order
                .par_iter()
                .with_max_len(1)
                .map(|&k| {
                    let (id, p, f) = &batch[k];
                    let file = load_file(*id, p, f, opts, inputs, outlines);
                    let (mut next, mut missing) = (Vec::new(), Vec::new());
                    if p.follow {
                        children(p, &file.model, package_root, &mut next, &mut missing);
                        if !file.problems.is_empty() {
                            earlier_children(*id, p, opts, inputs, package_root, &mut next);
                        }
                    }
                    let next: Vec<(Pending, Fetch)> = next
                        .into_iter()
                        .map(|c| {
                            let f = fetch(&c, policy, inputs);
                            (c, f)
                        })
                        .collect();
                    (k, (file, (next, missing)))
                })
                .collect();
            loaded.sort_unstable_by_key(|(k, _)| *k);
            loaded.into_iter().map(|(_, l)| l).collect()
        };
        let loaded: Vec<(Loaded, _)> = worker::on_pool(parse_all).unwrap_or_else(|e| {
            batch
                .iter()
                // A placeholder declares no modules.
                .map(|(id, p, _)| (failed(*id, p, e.clone()), (Vec::new(), Vec::new())))
                .collect()
        });
        for ((id, _, _), (file, (next, missing))) in batch.iter().zip(loaded) {
            if file.parsed {
                parsed.push(*id);
            }
            if let Some(key) = file.outline {
                outlined.push((*id, key));
            }
            level.extend(next);
            problems.extend(missing);
            files.push(file.model);
            sources.push(file.source);
            problems.extend(file.problems);
        }
    }
    LoadedPackage {
        package: Package {
            name: spec.name.clone(),
            dependencies: spec.dependencies.clone(),
            targets: spec.targets.iter().map(|t| t.info.clone()).collect(),
            files,
            migrations: Default::default(),
        },
        sources,
        problems,
        parsed,
        outlines: outlined,
    }
}

/// Queues the out-of-line modules `model` declares, or reports the missing ones.
fn children(
    parent: &Pending,
    model: &FileModel,
    package_root: &Path,
    next: &mut Vec<Pending>,
    problems: &mut Vec<Diagnostic>,
) {
    included(parent, model, next);
    for decl in model.mods.iter().filter(|m| !m.inline) {
        let test_parent = modpath::inline_parents(model, decl)
            .iter()
            .any(|m| m.cfg_test);
        // The answer for the file found is kept for reading it.
        let mut probed: Option<(PathBuf, Probe)> = None;
        let mut present = |p: &Path| match Probe::of(p) {
            Some(found) => {
                probed = found.map(|f| (p.to_path_buf(), f));
                true
            }
            None => false,
        };
        let in_test = parent.in_test || decl.cfg_test || test_parent;
        let resolved = modpath::resolve(&parent.dir, model, decl, &mut present);
        let chosen = match &resolved {
            Resolved::File { path, .. } => Some(path.as_path()),
            Resolved::Missing { .. } => None,
        };
        // The `cfg_attr` paths rustc may read instead: read too, when they exist.
        for path in modpath::cfg_alternatives(&parent.dir, model, decl, chosen) {
            if Probe::of(&path).is_some() {
                next.push(Pending {
                    dir: ModDir::owning(&path),
                    path,
                    probe: None,
                    module: decl.module.to_vec(),
                    in_test,
                    target: parent.target,
                    origin: Some(decl.span),
                    follow: true,
                });
            }
        }
        match resolved {
            Resolved::File { path, dir } => next.push(Pending {
                probe: probed.filter(|(at, _)| *at == path).map(|(_, p)| p),
                path,
                dir,
                module: decl.module.to_vec(),
                in_test,
                target: parent.target,
                origin: Some(decl.span),
                follow: true,
            }),
            Resolved::Missing { candidates } => {
                let mut d = Diagnostic::new(
                    &PARSE_ERROR,
                    decl.span,
                    format!("file not found for module `{}`", decl.name),
                );
                let shown: Vec<String> = candidates
                    .iter()
                    .map(|c| format!("`{}`", c.strip_prefix(package_root).unwrap_or(c).display()))
                    .collect();
                d.primary_label("declared here")
                    .help(format!("create {}", shown.join(" or ")));
                problems.push(d);
            }
        }
    }
}

/// Queues the files `model`'s item-position `include!`s name (relative to the including
/// file's directory, as rustc reads them), as part of the module they are called in.
fn included(parent: &Pending, model: &FileModel, next: &mut Vec<Pending>) {
    let here = parent.path.parent().unwrap_or(Path::new(""));
    for inc in &model.item_includes {
        let path = here.join(&inc.path);
        next.push(Pending {
            // rustc reads the `mod`s of an included file from the included file's directory,
            // as if it owned it (`include!("q/common.rs")` with `#[path = "common/jobs.rs"]`
            // inside reads `q/common/jobs.rs`): graphile-worker's tests are written so.
            dir: ModDir::owning(&path),
            path,
            module: inc.module.to_vec(),
            in_test: parent.in_test || inc.in_test,
            target: parent.target,
            origin: Some(inc.span),
            follow: true,
            probe: None,
        });
    }
}

/// Queues the out-of-line modules of the last version of a buffer that parsed
/// ([`Overlays::keep_module_tree`]) too, for a file whose current text does not: what the
/// current text also declares is read once (the next level skips a path seen before), and a
/// module file missing is not reported from the old text.
fn earlier_children(
    id: FileId,
    p: &Pending,
    opts: &ParseOptions,
    inputs: Inputs<'_>,
    package_root: &Path,
    next: &mut Vec<Pending>,
) {
    let Some(text) = inputs.overlays.and_then(|o| o.module_tree_text(&p.path)) else {
        return;
    };
    let deadline = Instant::now() + opts.file_timeout;
    if let worker::Outcome::Parsed(model) =
        worker::parse(text, id, p.module.clone(), p.in_test, deadline)
    {
        children(p, &model, package_root, next, &mut Vec::new());
    }
}

/// A file that produced no model: an empty one stands in, with the finding that says why.
fn placeholder(id: FileId, p: &Pending, problem: Diagnostic, source: SourceFile) -> Loaded {
    Loaded {
        model: Arc::new(FileModel {
            id,
            path: p.path.clone(),
            target: p.target,
            module: p.module.clone(),
            in_test: p.in_test,
            span: Span::new(id, 0, source.text.len() as u32),
            ..FileModel::default()
        }),
        source,
        problems: vec![problem],
        parsed: true,
        outline: None,
    }
}

fn failed(id: FileId, p: &Pending, message: String) -> Loaded {
    let d = Diagnostic::new(
        &PARSE_ERROR,
        p.origin.unwrap_or(Span::new(id, 0, 0)),
        message,
    );
    placeholder(id, p, d, SourceFile::empty(p.path.clone()))
}

/// A file's text as read before its id is given (reading tells which path it resolves to),
/// and how long reading took (part of the file's time budget).
struct Fetch {
    text: Option<Result<Text, ReadError>>,
    resolved: Option<PathBuf>,
    took: Duration,
}

/// Bytes of the text `f` read (0 when it was not read).
fn fetched_len(f: &Fetch) -> usize {
    match &f.text {
        Some(Ok((text, _))) => text.len(),
        _ => 0,
    }
}

/// Reads the file `p` names, unless the run is cancelled (then `text` is `None`).
fn fetch(p: &Pending, policy: &ReadPolicy, inputs: Inputs<'_>) -> Fetch {
    if inputs.cancelled() {
        return Fetch {
            text: None,
            resolved: None,
            took: Duration::ZERO,
        };
    }
    let started = Instant::now();
    let Fetched { text, resolved } = inputs.fetch(&p.path, policy, p.probe.as_ref());
    Fetch {
        text: Some(text),
        resolved,
        took: started.elapsed(),
    }
}

fn load_file(
    id: FileId,
    p: &Pending,
    fetched: &Fetch,
    opts: &ParseOptions,
    inputs: Inputs<'_>,
    outlines: bool,
) -> Loaded {
    let read = match &fetched.text {
        Some(read) if !inputs.cancelled() => read,
        _ => {
            // The run is thrown away; a placeholder keeps the shapes without parsing the file.
            let why = Diagnostic::new(&PARSE_ERROR, Span::new(id, 0, 0), "analysis cancelled");
            return placeholder(id, p, why, SourceFile::empty(p.path.clone()));
        }
    };
    // The budget started when the file was read, not when the batch was.
    let deadline = Instant::now() + opts.file_timeout.saturating_sub(fetched.took);
    let source = match read {
        Ok((text, facts)) => SourceFile::with_facts(p.path.clone(), text.clone(), facts.clone()),
        Err(ReadError::NotUtf8 { lossy, valid_up_to }) => {
            let valid_up_to = *valid_up_to;
            // The lossy text equals the original up to the first bad byte, so the offset is
            // right in both; it lets the finding show the line.
            let source = SourceFile::new(p.path.clone(), Arc::from(lossy.as_str()));
            let lo = source.clamp(valid_up_to);
            let hi = source.clamp(valid_up_to + '\u{fffd}'.len_utf8());
            let mut d = Diagnostic::new(
                &PARSE_ERROR,
                Span::new(id, lo as u32, hi as u32),
                "file is not valid UTF-8",
            );
            d.primary_label(format!("invalid byte at offset {valid_up_to}"));
            return placeholder(id, p, d, source);
        }
        Err(e) => {
            return placeholder(
                id,
                p,
                unreadable(id, p, e),
                SourceFile::empty(p.path.clone()),
            )
        }
    };
    let text = &source.text;
    let cache = inputs.cache.map(Cache::new);
    let key = FileKey::of(&source, &p.module, p.in_test);
    if let Some(c) = &cache {
        if outlines {
            if let Some(outline) = c.load_outline(key, &p.path, id) {
                let mut loaded = parsed_file(Arc::new(outline), p, source, false);
                loaded.outline = Some(key);
                return loaded;
            }
        }
        if let Some(model) = c.load_model(key, &p.path, id) {
            if outlines {
                c.store_outline(key, &p.path, &model);
            }
            return parsed_file(model, p, source, false);
        }
    }
    let outcome = worker::parse(text, id, p.module.clone(), p.in_test, deadline);
    let problem = match outcome {
        worker::Outcome::Parsed(mut model) => {
            // Placed before it is stored, so a cache that shares it never needs a copy.
            model.path = p.path.clone();
            model.target = p.target;
            let model = Arc::new(*model);
            if let Some(c) = &cache {
                c.store_model(key, &p.path, &model);
                c.store_outline(key, &p.path, &model);
            }
            return parsed_file(model, p, source, true);
        }
        worker::Outcome::Invalid(e) => {
            let d = syntax_error(id, text, e);
            return recovered(id, p, source, d, deadline);
        }
        worker::Outcome::TimedOut => {
            let mut d = Diagnostic::new(
                &PARSE_ERROR,
                Span::new(id, 0, 0),
                format!(
                    "parsing took longer than {} ms; file skipped",
                    opts.file_timeout.as_millis()
                ),
            );
            d.help("raise the budget with `--file-timeout-ms`");
            d
        }
        worker::Outcome::Failed(msg) => Diagnostic::new(&PARSE_ERROR, Span::new(id, 0, 0), msg),
    };
    placeholder(id, p, problem, source)
}

/// The finding for a file that does not parse; a lexing error is pointed at the delimiter
/// at fault, as rustc does (the lexer itself gives up at the end of the file).
fn syntax_error(id: FileId, text: &str, e: idem_lints::model::ParseError) -> Diagnostic {
    // proc_macro2's lexer error says nothing about the cause it always has.
    let lexing = e.message == "cannot parse string into token stream";
    let mut d = match recover::delimiter_error(text).filter(|_| lexing) {
        Some(found) => {
            let span = |r: std::ops::Range<usize>| Span::new(id, r.start as u32, r.end as u32);
            let mut d = Diagnostic::new(&PARSE_ERROR, span(found.at), found.message);
            d.primary_label(found.label);
            if let Some((at, label)) = found.other {
                d.span_label(span(at), label);
            }
            d
        }
        None => {
            let mut d = Diagnostic::new(&PARSE_ERROR, e.span, "file does not parse");
            d.primary_label(if lexing {
                "unbalanced delimiter or invalid token".to_string()
            } else {
                e.message
            });
            d
        }
    };
    d.note("the rest of the package is linted; findings that depend on this file may be missed");
    d
}

/// A file that does not parse, with what of it can be kept: its items that parse on their
/// own, lowered, so its `mod` declarations are still followed ([`recover`]); else an empty
/// model. Never cached: the finding comes with it on every load.
fn recovered(
    id: FileId,
    p: &Pending,
    source: SourceFile,
    problem: Diagnostic,
    deadline: Instant,
) -> Loaded {
    let kept =
        recover::without_broken_items(&source.text, deadline).and_then(|kept| match worker::parse(
            &kept,
            id,
            p.module.clone(),
            p.in_test,
            deadline,
        ) {
            worker::Outcome::Parsed(model) => Some(model),
            _ => None,
        });
    let Some(mut model) = kept else {
        return placeholder(id, p, problem, source);
    };
    model.path = p.path.clone();
    model.target = p.target;
    // A `mod` line being typed keeps its declaration (and its `pub`, which decides what
    // the crate exports), lowered alone with its `;` and placed back at its offset.
    for (at, decl) in recover::half_typed_mods(&source.text) {
        if let Ok(alone) = idem_lints::model::lower_file(&decl, id, p.module.clone(), p.in_test) {
            model.mods.extend(alone.mods.into_iter().map(|mut m| {
                m.span = Span::new(id, m.span.lo + at as u32, m.span.hi + at as u32);
                m
            }));
        }
    }
    Loaded {
        model: Arc::new(*model),
        source,
        problems: vec![problem],
        parsed: true,
        outline: None,
    }
}

/// A file with its model, placed in its target (a shared model is copied only when its
/// place changed).
fn parsed_file(mut model: Arc<FileModel>, p: &Pending, source: SourceFile, parsed: bool) -> Loaded {
    if model.path != p.path || model.target != p.target {
        let m = Arc::make_mut(&mut model);
        m.path = p.path.clone();
        m.target = p.target;
    }
    Loaded {
        model,
        source,
        problems: Vec::new(),
        parsed,
        outline: None,
    }
}

/// The finding for a file that was not read, at the `mod` declaration that led to it when
/// there is one (the file itself has no text to point into).
fn unreadable(id: FileId, p: &Pending, e: &ReadError) -> Diagnostic {
    let span = p.origin.unwrap_or(Span::new(id, 0, 0));
    match e {
        ReadError::OutsideRoot { resolved } => {
            let mut d = Diagnostic::new(&PARSE_ERROR, span, "module path leaves the workspace");
            d.primary_label(format!("`{}` resolves to `{}`", p.path.display(), resolved.display()))
                .note("files outside the workspace are not read, so a checkout cannot make the linter print them")
                .help("pass `--allow-outside-workspace` to lint them");
            d
        }
        e => Diagnostic::new(
            &PARSE_ERROR,
            span,
            format!("could not read `{}`: {e}", p.path.display()),
        ),
    }
}

/// `src/a/b.rs` below a plain directory is module `crate::a::b` (`src/`, `lib.rs`, `main.rs`
/// and `mod.rs` add no level), a best guess without a crate root to follow.
fn plain_module_path(root: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(root).unwrap_or(file);
    idem_lints::model::module_of(rel.strip_prefix("src").unwrap_or(rel))
}

/// Files under `tests/` or `benches/` hold test code.
fn plain_is_test(root: &Path, file: &Path) -> bool {
    file.strip_prefix(root)
        .unwrap_or(file)
        .iter()
        .any(|c| c == "tests" || c == "benches")
}

#[cfg(test)]
mod tests {
    use super::plain_module_path;
    use std::path::Path;

    #[test]
    fn plain_files_get_module_paths() {
        let m = |f: &str| plain_module_path(Path::new("/r"), Path::new(f)).join("::");
        assert_eq!(m("/r/src/lib.rs"), "crate");
        assert_eq!(m("/r/src/a/b.rs"), "crate::a::b");
        assert_eq!(m("/r/src/a/mod.rs"), "crate::a");
        assert_eq!(m("/r/x.rs"), "crate::x");
    }
}
