//! Workspace members analysed together: a package's path dependencies inside the workspace
//! ([`LinkSpec`]) are loaded once each and their library files joined to the package's
//! model as linked targets ([`TargetInfo::linked`]), so the call graph and the summaries
//! follow a call into `common::generate_id` as they follow one into `crate::ids::generate_id`.
//!
//! A linked file's model is renumbered into the package (its spans name the file's place
//! there); packages that join a library at the same place share one renumbered copy.
//!
//! The linked files are analysed as part of the package but never reported in it: a finding
//! inside them is the member's own (its own run reports it), and a label pointing into them
//! becomes a note naming the place, since the package's output only holds its own files.

use crate::discovery::{LinkSpec, Sources, Workspace};
use crate::parse::{self, Inputs, LoadedPackage, ParseOptions};
use crate::source::ReadPolicy;
use idem_lints::model::{with_file_id, FileId, FileModel, Package, TargetInfo};
use idem_lints::Diagnostic;
use rayon::prelude::*;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// The linked libraries of a run, each loaded once however many packages link it: first as
/// a package is loaded for its findings key (outlines where the cache has them), and in full
/// only for the packages analysed ([`Links::complete`]), so an unchanged re-run decodes no
/// model of them.
pub struct Links<'a> {
    specs: Vec<&'a LinkSpec>,
    /// As loaded for keys: every file's text, place and `include_str!` texts.
    keyed: Vec<LoadedPackage>,
    /// Loaded in full, for the analysis of a package that links it.
    full: Vec<Option<LoadedPackage>>,
    /// Per library, its files' models as [`renumbered`] reads them: encoded once, however
    /// many packages join the library.
    encoded: Vec<Encoded>,
    /// Per package of the workspace: (crate name, index in `specs`), nearest first.
    per_package: Vec<Vec<(String, usize)>>,
    /// The workspace root, which notes name linked files relative to.
    root: PathBuf,
    load: LinkLoad<'a>,
    /// Libraries that several packages join at the same place ([`Links::plan`]).
    shared: Shared,
}

/// Where a library's files land in a joined package: (index in `specs`, id of its first file,
/// index of its linked target). Two packages that join a library at the same place get the
/// same renumbered models, so those are made once and shared by reference.
type Place = (usize, u32, usize);

/// The renumbered models of each library joined at the same [`Place`] by more than one
/// package, kept until the last of them has joined it.
#[derive(Default)]
struct Shared(HashMap<Place, SharedModels>);

struct SharedModels {
    models: Mutex<Option<Arc<[Arc<FileModel>]>>>,
    /// Packages still to join the library at this place.
    left: AtomicUsize,
}

/// A library's file models, each encoded on first use (`None` inside: it does not encode).
type Encoded = OnceLock<Box<[OnceLock<Option<Vec<u8>>>]>>;

/// How a linked library is loaded.
#[derive(Clone, Copy)]
struct LinkLoad<'a> {
    opts: &'a ParseOptions,
    policy: &'a ReadPolicy,
    inputs: Inputs<'a>,
}

impl LinkLoad<'_> {
    fn load(&self, link: &LinkSpec, outlines: bool) -> LoadedPackage {
        parse::load_linked(&link.spec, self.opts, self.policy, self.inputs, outlines)
    }
}

/// One package's linked libraries, as [`Links::of`] gives them.
pub struct PackageLinks<'a> {
    /// Crate name, the library as loaded for keys, and in full when it was.
    pub libs: Vec<LinkedLib<'a>>,
    root: &'a Path,
    load: LinkLoad<'a>,
    shared: &'a Shared,
}

/// One library a package links.
pub struct LinkedLib<'a> {
    pub krate: &'a str,
    pub keyed: &'a LoadedPackage,
    full: Option<&'a LoadedPackage>,
    encoded: &'a Encoded,
    spec: &'a LinkSpec,
    /// Index in [`Links`]'s `specs`.
    index: usize,
}

impl<'a> Links<'a> {
    /// Loads every library some package of `ws` links, for keys. `own` is what the run
    /// loaded of `ws`'s packages: a linked member selected too, whose one target is its
    /// library, was loaded from the same inputs already, and is not read and parsed again.
    pub fn load(
        ws: &'a Workspace,
        own: &[LoadedPackage],
        opts: &'a ParseOptions,
        policy: &'a ReadPolicy,
        inputs: Inputs<'a>,
    ) -> Links<'a> {
        let mut specs: Vec<&LinkSpec> = Vec::new();
        let mut index: HashMap<&str, usize> = HashMap::new();
        let per_package = ws
            .packages
            .iter()
            .map(|p| {
                p.links
                    .iter()
                    .map(|link| {
                        let i = *index.entry(&link.spec.id).or_insert_with(|| {
                            specs.push(link);
                            specs.len() - 1
                        });
                        (link.krate.clone(), i)
                    })
                    .collect()
            })
            .collect();
        let load = LinkLoad {
            opts,
            policy,
            inputs,
        };
        let keyed = specs
            .par_iter()
            .map(|link| match same_load(ws, own, link, inputs) {
                Some(loaded) => loaded,
                None => load.load(link, true),
            })
            .collect();
        Links {
            full: specs.iter().map(|_| None).collect(),
            encoded: specs.iter().map(|_| OnceLock::new()).collect(),
            specs,
            keyed,
            per_package,
            root: ws.root.clone(),
            load,
            shared: Shared::default(),
        }
    }

    /// Foresees where each package `wanted` selects will join its libraries (after its own
    /// `files` files and `targets` targets, as [`PackageLinks::join`] places them), so a
    /// library joined at the same place by several packages is renumbered once for all of
    /// them. Only saves work: a package that joins elsewhere than foreseen (a model that
    /// does not encode, a package loaded again) renumbers its own copy, as without a plan.
    pub fn plan(&mut self, own: &[(usize, usize)], wanted: &[bool]) {
        let mut uses: HashMap<Place, usize> = HashMap::new();
        for (i, links) in self.per_package.iter().enumerate() {
            let (Some(&(files, targets)), Some(true)) = (own.get(i), wanted.get(i)) else {
                continue;
            };
            let mut first = files;
            for (k, (_, lib)) in links.iter().enumerate() {
                *uses.entry((*lib, first as u32, targets + k)).or_default() += 1;
                first += self.full[*lib]
                    .as_ref()
                    .unwrap_or(&self.keyed[*lib])
                    .package
                    .files
                    .len();
            }
        }
        self.shared = Shared(
            uses.into_iter()
                .filter(|(_, n)| *n > 1)
                .map(|(place, n)| {
                    let models = SharedModels {
                        models: Mutex::new(None),
                        left: AtomicUsize::new(n),
                    };
                    (place, models)
                })
                .collect(),
        );
    }

    /// Loads in full the libraries linked by the packages `wanted` selects (by index in the
    /// workspace): those whose findings are to be computed.
    pub fn complete(&mut self, wanted: &[bool]) {
        let mut todo = vec![false; self.specs.len()];
        for (links, _) in self.per_package.iter().zip(wanted).filter(|(_, w)| **w) {
            for (_, i) in links {
                todo[*i] = self.full[*i].is_none() && !self.keyed[*i].is_full();
            }
        }
        let load = self.load;
        let loaded: Vec<(usize, LoadedPackage)> = todo
            .par_iter()
            .enumerate()
            .filter(|(_, t)| **t)
            .map(|(i, _)| (i, load.load(self.specs[i], false)))
            .collect();
        for (i, lib) in loaded {
            self.full[i] = Some(lib);
        }
    }

    /// What package `index` of the workspace links.
    pub fn of(&self, index: usize) -> PackageLinks<'_> {
        let libs = self
            .per_package
            .get(index)
            .into_iter()
            .flatten()
            .map(|(krate, i)| LinkedLib {
                krate,
                keyed: &self.keyed[*i],
                full: self.full[*i].as_ref().or_else(|| {
                    let keyed = &self.keyed[*i];
                    keyed.is_full().then_some(keyed)
                }),
                encoded: &self.encoded[*i],
                spec: self.specs[*i],
                index: *i,
            })
            .collect();
        PackageLinks {
            libs,
            root: &self.root,
            load: self.load,
            shared: &self.shared,
        }
    }
}

impl PackageLinks<'_> {
    pub fn is_empty(&self) -> bool {
        self.libs.is_empty()
    }

    /// `own` with the linked libraries' files after its own, each library a linked target,
    /// and their dependencies added to its (a store crate used only in `common` is still the
    /// store crate the joined code calls). `own` itself when nothing is linked.
    pub fn join(&self, own: &Package) -> Package {
        let mut package = own.clone();
        for linked in &self.libs {
            let krate = linked.krate;
            let target = package.targets.len();
            let first = package.files.len();
            let place = (linked.index, first as u32, target);
            // Only a library loaded in full: renumbering under the lock then runs nothing on
            // the pool, where this thread could pick up another package's join of it.
            let shared = linked.full.and(self.shared.0.get(&place));
            match shared {
                Some(shared) => {
                    let mut kept = shared.models.lock().unwrap_or_else(|e| e.into_inner());
                    let models = kept
                        .get_or_insert_with(|| self.renumbered_lib(linked, first, target).into())
                        .clone();
                    let left = &shared.left;
                    let was = left
                        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
                    if was == Ok(1) {
                        // The last package to join it here: free the models with this one.
                        kept.take();
                    }
                    drop(kept);
                    package.files.extend(models.iter().cloned());
                }
                None => {
                    let models = self.renumbered_lib(linked, first, target);
                    package.files.extend(models);
                }
            }
            let lib = linked.full.unwrap_or(linked.keyed);
            let root = lib
                .package
                .targets
                .first()
                .map(|t| t.root.clone())
                .unwrap_or_default();
            package.targets.push(TargetInfo::linked(krate, root));
            for dep in &lib.package.dependencies {
                if !package.depends_on(dep) {
                    package.dependencies.push(dep.clone());
                }
            }
            // The member's schema is the one its joined code runs against (the workspace's
            // own migrations, which both read, once).
            let theirs = &lib.package.migrations;
            for m in &theirs.files {
                if !package.migrations.files.iter().any(|o| o.path == m.path) {
                    package.migrations.files.push(m.clone());
                }
            }
            package.migrations.incomplete |= theirs.incomplete;
        }
        package
    }

    /// The files of `linked`, numbered from `first` on (a file that does not encode is left
    /// out), in linked target `target`.
    fn renumbered_lib(
        &self,
        linked: &LinkedLib<'_>,
        first: usize,
        target: usize,
    ) -> Vec<Arc<FileModel>> {
        let loaded_here;
        let (lib, encoded) = match linked.full {
            Some(full) => {
                let encoded = linked
                    .encoded
                    .get_or_init(|| full.package.files.iter().map(|_| OnceLock::new()).collect());
                (full, Some(encoded))
            }
            None => {
                // Not foreseen by [`Links::complete`] (the package was loaded again).
                loaded_here = self.load.load(linked.spec, false);
                (&loaded_here, None)
            }
        };
        let mut models = Vec::with_capacity(lib.package.files.len());
        for (n, file) in lib.package.files.iter().enumerate() {
            let id = FileId((first + models.len()) as u32);
            let encoded = encoded.and_then(|e| e.get(n));
            if let Some(model) = self.placed(file, encoded, id, target) {
                models.push(model);
            }
        }
        models
    }

    /// `file` as file `id` of linked target `target`: the one the cache kept when it was made
    /// from this very model, else made now (and kept).
    fn placed(
        &self,
        file: &Arc<FileModel>,
        encoded: Option<&OnceLock<Option<Vec<u8>>>>,
        id: FileId,
        target: usize,
    ) -> Option<Arc<FileModel>> {
        let cache = self.load.inputs.cache;
        if let Some(kept) = cache.and_then(|c| c.get_linked(file, id, target)) {
            return Some(kept);
        }
        let model = Arc::new(renumbered(file, encoded, id, target)?);
        if let Some(c) = cache {
            c.put_linked(file, &model);
        }
        Some(model)
    }

    /// The findings of the joined package that belong to the package's own `own_files`
    /// files: labels pointing into linked files made notes, and suggestions editing them
    /// dropped (the package's output cannot apply them). A finding inside a linked file is
    /// the member's own and dropped, unless one of its labels is in the package: then the
    /// package's code made it (a request built in `common` without its token, sent here),
    /// and it is reported at that label.
    pub fn own_findings(&self, diags: Vec<Diagnostic>, own_files: usize) -> Vec<Diagnostic> {
        let own = |file: FileId| (file.0 as usize) < own_files;
        diags
            .into_iter()
            .filter_map(|d| {
                if own(d.span.file) {
                    return Some(d);
                }
                self.moved_to_own_label(d, own_files)
            })
            .map(|mut d| {
                let (kept, linked): (Vec<_>, Vec<_>) =
                    d.labels.drain(..).partition(|l| own(l.span.file));
                d.labels = kept;
                for label in linked {
                    let at = self.place(label.span.file.0 as usize - own_files, label.span.lo);
                    d.notes.push(format!("{}: {}", at, label.message));
                }
                d.suggestions.retain(|s| {
                    s.edits.iter().all(|(span, _)| own(span.file))
                        && s.moves.iter().all(|m| own(m.from.file) && own(m.to.file))
                });
                d
            })
            .collect()
    }

    /// `d`, whose primary span is in a linked file, at its first label in the package's
    /// own files (the old primary span becomes a label, made a note with the others).
    fn moved_to_own_label(&self, mut d: Diagnostic, own_files: usize) -> Option<Diagnostic> {
        let i = d
            .labels
            .iter()
            .position(|l| (l.span.file.0 as usize) < own_files)?;
        let label = d.labels.remove(i);
        let old = idem_lints::Label {
            span: d.span,
            message: d.label.take().unwrap_or_else(|| d.message.clone()),
        };
        d.labels.insert(0, old);
        d.span = label.span;
        d.label = Some(label.message);
        Some(d)
    }

    /// `path:line:column` of byte `lo` in the `nth` linked file (counted across libraries).
    fn place(&self, nth: usize, lo: u32) -> String {
        let mut nth = nth;
        for linked in &self.libs {
            let (krate, lib) = (linked.krate, linked.keyed);
            if let Some(source) = lib.sources.get(nth) {
                let p = source.position(lo as usize);
                let path = source.path.strip_prefix(self.root).unwrap_or(&source.path);
                return format!(
                    "{NOTE_PREFIX}{krate}`, {}:{}:{}",
                    path.display(),
                    p.line,
                    p.column
                );
            }
            nth -= lib.sources.len();
        }
        "in a linked crate".to_owned()
    }
}

/// How a note naming a place in a linked file starts: ``in `krate`, path:line:column: ..``.
const NOTE_PREFIX: &str = "in `";

/// The place a note of [`PackageLinks::own_findings`] names: a label in a linked member's
/// file, written `in `krate`, path:line:column: message` (the path relative to the
/// workspace root, 1-based line and character column), read back here so the editor and
/// SARIF can point at it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotePlace<'a> {
    pub krate: &'a str,
    pub path: &'a str,
    pub line: usize,
    pub column: usize,
    pub message: &'a str,
}

/// [`NotePlace`] of `note`, `None` for any other note.
pub fn note_place(note: &str) -> Option<NotePlace<'_>> {
    let rest = note.strip_prefix(NOTE_PREFIX)?;
    let (krate, rest) = rest.split_once("`, ")?;
    // The path may hold `:`; the first `:line:column: ` after it ends it.
    let mut from = 0;
    while let Some(i) = rest[from..].find(':').map(|i| from + i) {
        let after = &rest[i + 1..];
        let mut parts = after.splitn(3, ':');
        let (line, column, message) = (parts.next()?, parts.next(), parts.next());
        let numeric = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
        if let (true, Some(column), Some(message)) = (numeric(line), column, message) {
            if numeric(column) && message.starts_with(' ') {
                return Some(NotePlace {
                    krate,
                    path: &rest[..i],
                    line: line.parse().ok()?,
                    column: column.parse().ok()?,
                    message: &message[1..],
                });
            }
        }
        from = i + 1;
    }
    None
}

/// The selected package's load that `link` would load again, when it is the same load: the
/// member's spec has the library as its only target (so reading it from the same manifest
/// walks the same module tree to the same files), and it was loaded in full. Only without a
/// cache: with one, the load for keys may be outlines, which the cache's findings keys read.
fn same_load(
    ws: &Workspace,
    own: &[LoadedPackage],
    link: &LinkSpec,
    inputs: Inputs<'_>,
) -> Option<LoadedPackage> {
    if inputs.cache.is_some() {
        return None;
    }
    let spec = &link.spec;
    let (i, member) = ws
        .packages
        .iter()
        .enumerate()
        .find(|(_, p)| p.id == spec.id)?;
    let same_targets = member.targets.len() == spec.targets.len()
        && member
            .targets
            .iter()
            .zip(&spec.targets)
            .all(|(a, b)| a.info == b.info);
    let same = same_targets
        && member.manifest_path == spec.manifest_path
        && member.name == spec.name
        && member.dependencies == spec.dependencies
        && matches!(
            (&member.sources, &spec.sources),
            (Sources::ModuleTrees, Sources::ModuleTrees)
        );
    let loaded = own.get(i).filter(|l| same && l.is_full())?;
    Some(loaded.copy())
}

/// `file` as file `id` of the joined package, in linked target `target`: its spans placed in
/// `id` by a round trip through the cache's encoding (the one way to move every span of a
/// model). `encoded` keeps the encoding for the next package that joins the file. `None`
/// when the model does not encode.
fn renumbered(
    file: &FileModel,
    encoded: Option<&OnceLock<Option<Vec<u8>>>>,
    id: FileId,
    target: usize,
) -> Option<FileModel> {
    let here;
    let bytes: &[u8] = match encoded {
        Some(kept) => kept
            .get_or_init(|| postcard::to_allocvec(file).ok())
            .as_deref()?,
        None => {
            here = postcard::to_allocvec(file).ok()?;
            &here
        }
    };
    let mut model: FileModel = with_file_id(id, || postcard::from_bytes(bytes).ok())?;
    model.id = id;
    model.target = target;
    model.path = file.path.clone();
    // Read by the driver, not stored: carried over as they are.
    model.includes = file.includes.clone();
    Some(model)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_names_its_place_and_other_notes_none() {
        let p = note_place("in `common`, com:mon/src/ids.rs:5:28: a random id: made here")
            .expect("a place");
        assert_eq!(
            p,
            NotePlace {
                krate: "common",
                path: "com:mon/src/ids.rs",
                line: 5,
                column: 28,
                message: "a random id: made here",
            }
        );
        assert_eq!(
            note_place("a crash between the two leaves the work done"),
            None
        );
        assert_eq!(note_place("in `x`, no place here"), None);
    }
}
