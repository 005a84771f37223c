//! Results kept across runs, so a re-run reads what changed and nothing more.
//!
//! Three kinds of entries, each under a [`key`] of everything it depends on:
//!
//! - a file's lowered model ([`Kind::Model`], [`FileKey`]): a file whose text, module path and
//!   test status are unchanged is not parsed again;
//! - the same file's outline ([`Kind::Outline`], same key): the few fields loading a package
//!   needs (its `mod` declarations and `include_str!` paths), a small fraction of the model;
//! - a package's findings ([`Kind::Findings`], [`PackageKey`]): a package whose files, settings
//!   and enabled lints are unchanged is not analysed again.
//!
//! A [`Session`] also keeps each package's last analysis: after an edit of fn bodies the next
//! analysis starts from it ([`idem_lints::analysis::incremental`]).
//!
//! Every file is still read on every run (its text is what the key is made of, and what the
//! output quotes); what the cache saves is parsing, lowering and the analysis. A package is
//! first loaded from outlines: when its findings are cached, no model of it is decoded (on an
//! unchanged re-run decoding the models was most of the time left), and only when they are not
//! are the models read back (or the files parsed again). Levels,
//! suppression comments and the output are applied fresh each run, so a cached run prints what
//! an uncached one prints, byte for byte.
//!
//! A [`Store`] only keeps bytes: [`DiskCache`] under the target directory (`target/idem-lint/`,
//! for the command line, where [`disk_root`] allows), [`Session`] in memory (for a long-lived
//! caller such as the language server). Encoding is here, once: postcard over the model's serde
//! derives, with no `unsafe`.
//! An entry that does not decode is a miss, and the result is computed and stored again.

mod disk;
mod key;
mod nofollow;
mod root;
mod secret;
mod session;
pub(crate) mod texts;

pub use disk::DiskCache;
pub use key::{FileKey, PackageKey};
pub use root::disk_root;
pub use secret::SECRET_ENV;
pub use session::Session;
pub use texts::DiskTexts;

use idem_lints::analysis::incremental::Retained;
use idem_lints::model::{with_file_id, FileId, FileModel};
use idem_lints::Diagnostic;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::path::Path;
use std::sync::Arc;

/// Overrides where the disk cache lives (a directory; one per build is made inside it).
pub const CACHE_DIR_ENV: &str = "IDEM_LINT_CACHE_DIR";

/// What an entry holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A file's [`FileModel`], keyed by [`FileKey`].
    Model,
    /// A package's findings before levels and suppressions, keyed by [`PackageKey`].
    Findings,
    /// A file's [`outline`], keyed by [`FileKey`].
    Outline,
}

impl Kind {
    /// Every kind, for stores that keep one directory per kind.
    pub const ALL: [Kind; 3] = [Kind::Model, Kind::Findings, Kind::Outline];
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Model => "models",
            Kind::Findings => "findings",
            Kind::Outline => "outlines",
        }
    }
}

/// Keeps encoded entries. Lookups run on many threads at once. `path` is the file a model
/// entry belongs to (`None` for findings): a store may keep one entry per path.
pub trait Store: Sync {
    fn get(&self, kind: Kind, key: u128, path: Option<&Path>) -> Option<Arc<[u8]>>;
    fn put(&self, kind: Kind, key: u128, path: Option<&Path>, bytes: Arc<[u8]>);

    /// The model of `path` stored under `key`, decoded and shared, for a store that keeps
    /// models in memory ([`Session`]): an unchanged file then costs neither a decode nor a
    /// copy. The default keeps none.
    fn get_shared(&self, _key: u128, _path: &Path) -> Option<Arc<FileModel>> {
        None
    }

    fn put_shared(&self, _key: u128, _path: &Path, _model: &Arc<FileModel>) {}

    /// Whether the store keeps outlines ([`Kind::Outline`]): when it does not, none is
    /// computed for it.
    fn keeps_outlines(&self) -> bool {
        true
    }

    /// Whether the store keeps each package's last analysis ([`Store::take_analysis`]), for
    /// a long-lived caller whose next run analyses an edited version of the same package.
    fn keeps_analyses(&self) -> bool {
        false
    }

    /// The analysis last kept for the package with cargo id `package`, taken out.
    fn take_analysis(&self, _package: &str) -> Option<Retained> {
        None
    }

    fn put_analysis(&self, _package: &str, _analysis: Retained) {}

    /// The model of a linked member's file as file `id` of target `target` of a package
    /// ([`crate::link`]), made from `from` and kept by [`Store::put_linked`]: a store that
    /// keeps analyses gives the same one back while `from` is the same, so the package's
    /// next analysis sees that file unchanged. The default keeps none.
    fn get_linked(
        &self,
        _from: &Arc<FileModel>,
        _id: FileId,
        _target: usize,
    ) -> Option<Arc<FileModel>> {
        None
    }

    fn put_linked(&self, _from: &Arc<FileModel>, _linked: &Arc<FileModel>) {}
}

/// Typed access to a [`Store`].
pub struct Cache<'a> {
    store: &'a dyn Store,
}

impl<'a> Cache<'a> {
    pub fn new(store: &'a dyn Store) -> Cache<'a> {
        Cache { store }
    }

    /// The model stored under `key`, with every span placed in file `id`: the shared one
    /// when the store keeps it under that id, else decoded (and then shared).
    pub fn load_model(&self, key: FileKey, path: &Path, id: FileId) -> Option<Arc<FileModel>> {
        if let Some(model) = self.store.get_shared(key.0, path) {
            if model.id == id {
                return Some(model);
            }
        }
        let bytes = self.store.get(Kind::Model, key.0, Some(path))?;
        let mut model: FileModel = with_file_id(id, || decode(&bytes))?;
        model.id = id;
        let model = Arc::new(model);
        self.store.put_shared(key.0, path, &model);
        Some(model)
    }

    pub fn store_model(&self, key: FileKey, path: &Path, model: &Arc<FileModel>) {
        if let Some(bytes) = encode(&**model) {
            self.store.put(Kind::Model, key.0, Some(path), bytes);
        }
        self.store.put_shared(key.0, path, model);
    }

    /// The outline stored under `key`, with every span placed in file `id`.
    pub fn load_outline(&self, key: FileKey, path: &Path, id: FileId) -> Option<FileModel> {
        if !self.store.keeps_outlines() {
            return None;
        }
        let bytes = self.store.get(Kind::Outline, key.0, Some(path))?;
        let mut model: FileModel = with_file_id(id, || decode(&bytes))?;
        model.id = id;
        Some(model)
    }

    /// Stores the outline of `model` (the model itself is [`Cache::store_model`]'s).
    pub fn store_outline(&self, key: FileKey, path: &Path, model: &FileModel) {
        if !self.store.keeps_outlines() {
            return;
        }
        if let Some(bytes) = encode(&outline(model)) {
            self.store.put(Kind::Outline, key.0, Some(path), bytes);
        }
    }

    pub fn load_findings(&self, key: PackageKey) -> Option<Vec<Diagnostic>> {
        decode(&self.store.get(Kind::Findings, key.0, None)?)
    }

    pub fn store_findings(&self, key: PackageKey, findings: &[Diagnostic]) {
        if let Some(bytes) = encode(&findings) {
            self.store.put(Kind::Findings, key.0, None, bytes);
        }
    }
}

/// What loading a package reads of a file's model: where it is in the crate (module path, test
/// status, file span), its `mod` declarations (the files it leads to) and its `include_str!`
/// paths (texts that are part of the package's key). Everything the analysis reads is left
/// empty: an outline stands in for a model only until the package's findings are known.
pub fn outline(model: &FileModel) -> FileModel {
    FileModel {
        id: model.id,
        path: model.path.clone(),
        target: model.target,
        module: model.module.clone(),
        in_test: model.in_test,
        mods: model.mods.clone(),
        item_includes: model.item_includes.clone(),
        includes: model.includes.clone(),
        span: model.span,
        ..FileModel::default()
    }
}

fn encode<T: Serialize + ?Sized>(value: &T) -> Option<Arc<[u8]>> {
    postcard::to_allocvec(value).ok().map(Arc::from)
}

/// Decodes `bytes`, or `None` when they are not a `T` (or the decoder stops on them: a
/// cache must never take the run down).
fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Option<T> {
    std::panic::catch_unwind(|| postcard::from_bytes(bytes).ok())
        .ok()
        .flatten()
}
