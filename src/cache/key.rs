//! Cache keys: 128-bit XXH3 digests of everything a stored result depends on.
//!
//! A key names its inputs, each written length-prefixed so two different inputs never feed
//! the hasher the same bytes. The tool's build is not part of these keys: a store that outlives
//! the process (the disk) adds it itself.

use crate::parse::LoadedPackage;
use crate::source::SourceFile;
use idem_lints::{Lint, Settings};
use xxhash_rust::xxh3::Xxh3;

/// What a file's lowered model depends on: its text (by its digest, computed once per kept
/// text), module path and whether it is test code.
/// (Its path and target are set after lowering, its `include_str!` texts are read again on
/// every run, and its file id is given when the model is read back.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileKey(pub u128);

impl FileKey {
    pub fn of(source: &SourceFile, module: &[String], in_test: bool) -> FileKey {
        let mut h = Keyer::new("file");
        h.bytes(&source.digest().to_le_bytes());
        h.strs(module);
        h.bytes(&[in_test as u8]);
        FileKey(h.finish())
    }
}

/// What a package's findings depend on: the package as loaded (every file's path, place and
/// text, the texts its `include_str!`s read, its SQL migrations, the problems met loading it, its targets and
/// dependencies) and which lints run with which settings. Levels are applied after, so
/// `-W`/`-D` changes do not invalidate it; enabling or disabling a lint does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PackageKey(pub u128);

impl PackageKey {
    pub fn of(
        pkg: &LoadedPackage,
        settings: &Settings,
        enabled: &dyn Fn(&'static Lint) -> bool,
    ) -> PackageKey {
        let mut h = Keyer::new("package");
        let p = &pkg.package;
        h.str(&p.name);
        h.strs(&p.dependencies);
        h.str(&format!("{:?}", p.targets));
        h.len(p.files.len());
        for (file, source) in p.files.iter().zip(&pkg.sources) {
            h.str(&file.path.to_string_lossy());
            h.strs(&file.module);
            h.bytes(&[file.in_test as u8]);
            h.len(file.target);
            h.bytes(&source.digest().to_le_bytes());
            h.len(file.includes.len());
            for inc in &file.includes {
                h.str(&inc.path);
                h.bytes(&[inc.from_package_root as u8]);
                h.bytes(inc.text.as_deref().unwrap_or("\u{0}none").as_bytes());
            }
        }
        migrations(&mut h, &p.migrations);
        // A file that timed out or failed to read leaves a placeholder model with the same
        // text as a parsed one: the problems tell them apart.
        h.bytes(&postcard::to_allocvec(&pkg.problems).unwrap_or_default());
        h.str(&format!("{settings:?}"));
        for lint in idem_lints::lints::ALL {
            h.bytes(&[enabled(lint) as u8]);
            h.str(lint.name);
        }
        PackageKey(h.finish())
    }

    /// This key, for findings computed with `links` joined to the package: they depend on
    /// every linked file as the package's own findings depend on its files, so an edit in a
    /// member invalidates the findings of the packages that link it, and only theirs.
    pub fn with_links(self, links: &crate::link::PackageLinks<'_>) -> PackageKey {
        if links.is_empty() {
            return self;
        }
        let mut h = Keyer::new("linked");
        h.bytes(&self.0.to_le_bytes());
        for linked in &links.libs {
            let lib = linked.keyed;
            h.str(linked.krate);
            h.len(lib.package.files.len());
            for (file, source) in lib.package.files.iter().zip(&lib.sources) {
                h.str(&file.path.to_string_lossy());
                h.strs(&file.module);
                h.bytes(&source.digest().to_le_bytes());
                for inc in &file.includes {
                    h.str(&inc.path);
                    h.bytes(inc.text.as_deref().unwrap_or("\u{0}none").as_bytes());
                }
            }
            migrations(&mut h, &lib.package.migrations);
            h.bytes(&postcard::to_allocvec(&lib.problems).unwrap_or_default());
        }
        PackageKey(h.finish())
    }
}

/// The SQL migrations a package's findings read the schema from: an edit to one is a new key.
fn migrations(h: &mut Keyer, m: &idem_lints::model::Migrations) {
    h.bytes(&[m.incomplete as u8]);
    h.len(m.files.len());
    for f in &m.files {
        h.str(&f.sequence);
        h.str(&f.path);
        h.str(&f.text);
    }
}

/// A streaming hasher over length-prefixed fields.
pub(crate) struct Keyer(Xxh3);

impl Keyer {
    /// A hasher for keys of `kind`: keys of different kinds never meet.
    pub(crate) fn new(kind: &str) -> Keyer {
        let mut k = Keyer(Xxh3::new());
        k.str(kind);
        k
    }

    pub(crate) fn len(&mut self, n: usize) {
        self.0.update(&(n as u64).to_le_bytes());
    }

    pub(crate) fn bytes(&mut self, b: &[u8]) {
        self.len(b.len());
        self.0.update(b);
    }

    pub(crate) fn str(&mut self, s: &str) {
        self.bytes(s.as_bytes());
    }

    pub(crate) fn strs(&mut self, items: &[String]) {
        self.len(items.len());
        for s in items {
            self.str(s);
        }
    }

    pub(crate) fn finish(&self) -> u128 {
        self.0.digest128()
    }
}
