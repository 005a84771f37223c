//! An in-process analysis session: parse results and findings kept in memory between
//! analyses, for a caller that re-analyses the same workspace as it changes (the language
//! server after each edit).
//!
//! ```no_run
//! use cargo_idem_lint::cache::Session;
//! use cargo_idem_lint::parse::Overlays;
//! use cargo_idem_lint::{config::Config, discovery};
//!
//! let ws = discovery::discover(&discovery::Selection::dir("path/to/crate"))?;
//! let config = Config::load(&ws)?;
//! let session = Session::new();
//! let mut buffers = Overlays::new();
//! let first = session.check(&ws, &config, &[], &buffers)?;
//! // The user types in an unsaved buffer: only that file is parsed again.
//! buffers.insert("path/to/crate/src/lib.rs", "pub fn edited() {}");
//! let second = session.check(&ws, &config, &[], &buffers)?;
//! assert_eq!(second.packages[0].parsed.len(), 1);
//! # Ok::<(), anyhow::Error>(())
//! ```

use super::{Kind, Store};
use crate::config::Config;
use crate::discovery::Workspace;
use crate::levels::LevelFlag;
use crate::parse::{Inputs, Overlays, ParseOptions};
use crate::report::{self, Report};
use anyhow::Result;
use idem_lints::analysis::incremental::Retained;
use idem_lints::model::{FileId, FileModel};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

/// Most package findings kept: enough for every package of a large workspace; past it the
/// oldest generation is dropped.
const MAX_FINDINGS: usize = 1024;

type Entry = (u128, Arc<[u8]>);

/// Per-file parse results (the latest version of each file) and per-package findings, in
/// memory, encoded (a fraction of the size of the models themselves).
#[derive(Default)]
pub struct Session {
    /// By path: the key of the text it was parsed from, and the encoded model.
    models: Mutex<HashMap<PathBuf, Entry>>,
    /// By path: the same model decoded, shared with the reports that use it. A keystroke
    /// then costs the models of the changed files only; the encoded copy serves when a
    /// file's id changed (a module added before it), which the shared one cannot follow.
    shared: Mutex<HashMap<PathBuf, (u128, Arc<FileModel>)>>,
    findings: Mutex<HashMap<u128, Arc<[u8]>>>,
    /// By cargo package id: the package's last analysis, which the next one after an edit
    /// starts from.
    analyses: Mutex<HashMap<String, Retained>>,
    /// Linked members' models as placed in the packages that link them ([`Store::get_linked`]),
    /// by path, file id and target, with the model each was made from.
    linked: Mutex<LinkedModels>,
}

type LinkedModels = HashMap<(PathBuf, FileId, usize), (Arc<FileModel>, Arc<FileModel>)>;

impl Session {
    pub fn new() -> Session {
        Session::default()
    }

    /// Lints `ws` as [`report::check`] does, with `overlays` replacing files on disk, parsing
    /// only the files whose text (or place in the crate) changed since an earlier call and
    /// analysing only the packages where something changed. The options are the config's
    /// (file time budget, size cap, outside-workspace files).
    pub fn check(
        &self,
        ws: &Workspace,
        config: &Config,
        flags: &[LevelFlag],
        overlays: &Overlays,
    ) -> Result<Report> {
        let opts = ParseOptions::from_config(config, None);
        self.check_with(ws, &opts, config, flags, overlays)
    }

    /// [`Session::check`] with explicit parse options.
    pub fn check_with(
        &self,
        ws: &Workspace,
        opts: &ParseOptions,
        config: &Config,
        flags: &[LevelFlag],
        overlays: &Overlays,
    ) -> Result<Report> {
        self.check_until(ws, opts, config, flags, overlays, None)
    }

    /// [`Session::check_with`] that gives up (with [`report::Cancelled`]) once `cancel` is
    /// set: a caller whose input changed again does not wait for a result it will not use.
    pub fn check_until(
        &self,
        ws: &Workspace,
        opts: &ParseOptions,
        config: &Config,
        flags: &[LevelFlag],
        overlays: &Overlays,
        cancel: Option<&AtomicBool>,
    ) -> Result<Report> {
        let inputs = Inputs {
            overlays: Some(overlays),
            cache: Some(self),
            cancel,
        };
        report::check_with(ws, opts, config, flags, inputs)
    }

    /// Number of files whose parse result is kept.
    pub fn files(&self) -> usize {
        lock(&self.models).len()
    }
}

impl Store for Session {
    fn get(&self, kind: Kind, key: u128, path: Option<&Path>) -> Option<Arc<[u8]>> {
        match (kind, path) {
            (Kind::Model, Some(path)) => lock(&self.models)
                .get(path)
                .filter(|(k, _)| *k == key)
                .map(|(_, bytes)| bytes.clone()),
            (Kind::Findings, _) => lock(&self.findings).get(&key).cloned(),
            // Outlines are not kept: the models are in memory already, and a package is
            // loaded from them as it was before outlines existed.
            (Kind::Model, None) | (Kind::Outline, _) => None,
        }
    }

    fn put(&self, kind: Kind, key: u128, path: Option<&Path>, bytes: Arc<[u8]>) {
        match (kind, path) {
            // One entry per path: an edited file replaces its old version.
            (Kind::Model, Some(path)) => {
                lock(&self.models).insert(path.to_path_buf(), (key, bytes));
            }
            (Kind::Findings, _) => {
                let mut findings = lock(&self.findings);
                if findings.len() >= MAX_FINDINGS {
                    findings.clear();
                }
                findings.insert(key, bytes);
            }
            (Kind::Model, None) | (Kind::Outline, _) => {}
        }
    }

    fn get_shared(&self, key: u128, path: &Path) -> Option<Arc<FileModel>> {
        lock(&self.shared)
            .get(path)
            .filter(|(k, _)| *k == key)
            .map(|(_, m)| m.clone())
    }

    fn put_shared(&self, key: u128, path: &Path, model: &Arc<FileModel>) {
        lock(&self.shared).insert(path.to_path_buf(), (key, model.clone()));
    }

    fn keeps_outlines(&self) -> bool {
        false
    }

    fn keeps_analyses(&self) -> bool {
        true
    }

    fn take_analysis(&self, package: &str) -> Option<Retained> {
        lock(&self.analyses).remove(package)
    }

    fn put_analysis(&self, package: &str, analysis: Retained) {
        lock(&self.analyses).insert(package.to_owned(), analysis);
    }

    fn get_linked(
        &self,
        from: &Arc<FileModel>,
        id: FileId,
        target: usize,
    ) -> Option<Arc<FileModel>> {
        lock(&self.linked)
            .get(&(from.path.clone(), id, target))
            .filter(|(made_from, _)| Arc::ptr_eq(made_from, from))
            .map(|(_, linked)| linked.clone())
    }

    fn put_linked(&self, from: &Arc<FileModel>, linked: &Arc<FileModel>) {
        let key = (from.path.clone(), linked.id, linked.target);
        lock(&self.linked).insert(key, (from.clone(), linked.clone()));
    }
}

/// The map, even if a thread panicked while holding it: entries are replaced whole, so a
/// poisoned map is still consistent.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
