//! Source texts: the one function every file of the user's tree is read through
//! ([`read_source`]), and a line index that turns byte spans into lines and columns.

use std::collections::HashMap;
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

/// Default cap on the size of one file: above any real source file (the largest generated
/// files of the AWS SDK are a few MiB), and what bounds the time and memory of one parse (syn
/// lexes the whole text first: about 60 bytes per byte of ordinary code, up to about 260 for
/// a file of one-byte tokens, 2.1 GB at this cap; a 60 MB file took 3 GB and 29 s before its
/// budget was first looked at).
pub const DEFAULT_MAX_FILE_BYTES: u64 = 8 << 20;

/// What [`read_source`] may read.
#[derive(Debug, Clone)]
pub struct ReadPolicy {
    /// When set, a file must resolve (symlinks followed) inside this directory, which must
    /// itself be canonical: a checkout cannot make the linter read and quote `/etc/passwd`
    /// through `#[path]` or a symlink.
    pub root: Option<PathBuf>,
    /// Larger files are not read.
    pub max_bytes: u64,
    /// Directories resolved so far under this policy (one run shares one policy).
    pub dirs: ResolvedDirs,
}

impl ReadPolicy {
    /// Files inside `root` (canonicalized here), up to the default size.
    pub fn inside(root: &Path) -> ReadPolicy {
        ReadPolicy {
            root: Some(std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf())),
            max_bytes: DEFAULT_MAX_FILE_BYTES,
            dirs: ResolvedDirs::default(),
        }
    }

    /// Any file, up to the default size (trusted inputs: config files named by the user).
    pub fn anywhere() -> ReadPolicy {
        ReadPolicy {
            root: None,
            max_bytes: DEFAULT_MAX_FILE_BYTES,
            dirs: ResolvedDirs::default(),
        }
    }
}

/// Directories already resolved (symlinks and `..` followed), shared by the threads of one
/// run. `std::fs::canonicalize` asks the kernel about every component of the path, about ten
/// calls for a file deep in a registry or CI checkout, for every file; the files of one
/// directory share its answer, so a file costs one `lstat` once its directory is known.
/// A run reads a tree nobody changes meanwhile (a checkout in CI, a save in the editor); the
/// next run starts afresh.
#[derive(Debug, Clone, Default)]
pub struct ResolvedDirs(Arc<Mutex<HashMap<PathBuf, PathBuf>>>);

impl ResolvedDirs {
    /// `path` resolved as `std::fs::canonicalize` resolves it, with what `lstat` said of it
    /// when it is not a symlink (then its `stat`, which the read needs anyway).
    pub fn resolve(&self, path: &Path) -> std::io::Result<(PathBuf, Option<std::fs::Metadata>)> {
        let meta = path.symlink_metadata()?;
        let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
            return Ok((std::fs::canonicalize(path)?, None));
        };
        // A symlink is resolved whole; so is a name whose directory is not spelled out.
        if meta.file_type().is_symlink() || dir.as_os_str().is_empty() {
            return Ok((std::fs::canonicalize(path)?, None));
        }
        let dir_resolved = self.resolve_dir(dir)?;
        Ok((dir_resolved.join(name), Some(meta)))
    }

    /// Directory `dir` resolved, from its parent's resolution when its own name is not a
    /// symlink (one `lstat`), else as `std::fs::canonicalize` resolves it.
    fn resolve_dir(&self, dir: &Path) -> std::io::Result<PathBuf> {
        if let Some(known) = self.0.lock().ok().and_then(|m| m.get(dir).cloned()) {
            return Ok(known);
        }
        let resolved = match (dir.parent(), dir.file_name()) {
            (Some(parent), Some(name))
                if !parent.as_os_str().is_empty()
                    && !dir.symlink_metadata()?.file_type().is_symlink() =>
            {
                self.resolve_dir(parent)?.join(name)
            }
            _ => std::fs::canonicalize(dir)?,
        };
        if let Ok(mut m) = self.0.lock() {
            m.insert(dir.to_path_buf(), resolved.clone());
        }
        Ok(resolved)
    }
}

/// Why a file was not read. Messages name the file's kind or size, never its contents.
#[derive(Debug)]
pub enum ReadError {
    /// Missing, unreadable, a dangling or looping symlink.
    Io(std::io::Error),
    /// A FIFO, socket, device or directory: reading one could block forever or never end.
    NotRegular(&'static str),
    TooLarge {
        size: u64,
        max: u64,
    },
    /// The path resolves outside [`ReadPolicy::root`].
    OutsideRoot {
        resolved: PathBuf,
    },
    /// The path resolves inside a `.git` directory: git's own files (a checkout action may
    /// keep a token in `.git/config`) are never a source, whatever the policy.
    InGitDir,
    /// Not UTF-8: the text with invalid bytes replaced, and the offset of the first one (equal
    /// in both texts), so a finding can still show the line.
    NotUtf8 {
        lossy: String,
        valid_up_to: usize,
    },
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Io(e) => write!(f, "{e}"),
            ReadError::NotRegular(kind) => write!(f, "it is {kind}, not a regular file"),
            ReadError::TooLarge { size, max } => {
                write!(f, "it is {size} bytes, over the limit of {max} bytes")
            }
            ReadError::OutsideRoot { resolved } => {
                write!(
                    f,
                    "it resolves to `{}`, outside the workspace",
                    resolved.display()
                )
            }
            ReadError::InGitDir => write!(f, "it is inside a `.git` directory, which is not read"),
            ReadError::NotUtf8 { valid_up_to, .. } => {
                write!(
                    f,
                    "it is not valid UTF-8 (invalid byte at offset {valid_up_to})"
                )
            }
        }
    }
}

/// Reads one file of the tree being linted: only a regular file (a FIFO would block, `/dev/zero`
/// would never end), at most `policy.max_bytes`, inside `policy.root` after resolving symlinks,
/// as UTF-8. The parse stage calls it on its pool threads, inside the file's time budget.
pub fn read_source(path: &Path, policy: &ReadPolicy) -> Result<String, ReadError> {
    let (resolved, meta) = policy.dirs.resolve(path).map_err(ReadError::Io)?;
    read_resolved(resolved, meta, policy)
}

/// [`read_source`] of a path already resolved ([`ResolvedDirs::resolve`]), with its `stat`
/// when the caller has it: the language server resolves every path to find its overlay, and
/// resolving it twice was a large part of a keystroke.
pub(crate) fn read_resolved(
    resolved: PathBuf,
    meta: Option<std::fs::Metadata>,
    policy: &ReadPolicy,
) -> Result<String, ReadError> {
    check_place(&resolved, policy)?;
    // The kind is checked before opening (opening a FIFO for reading blocks until a writer
    // comes) and again on the open file, in case the path was swapped in between.
    let meta = match meta {
        Some(meta) => meta,
        None => std::fs::metadata(&resolved).map_err(ReadError::Io)?,
    };
    check_kind(&meta, policy.max_bytes)?;
    let file = open_nonblocking(&resolved).map_err(ReadError::Io)?;
    let meta = file.metadata().map_err(ReadError::Io)?;
    check_kind(&meta, policy.max_bytes)?;
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    // A file that grows while it is read still stops at the cap.
    file.take(policy.max_bytes + 1)
        .read_to_end(&mut bytes)
        .map_err(ReadError::Io)?;
    if bytes.len() as u64 > policy.max_bytes {
        return Err(ReadError::TooLarge {
            size: bytes.len() as u64,
            max: policy.max_bytes,
        });
    }
    String::from_utf8(bytes).map_err(|e| ReadError::NotUtf8 {
        valid_up_to: e.utf8_error().valid_up_to(),
        lossy: String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

/// Where a resolved path may be read from: inside [`ReadPolicy::root`] when it is set, and
/// never inside a `.git` directory (below the root, or anywhere when there is none).
pub(crate) fn check_place(resolved: &Path, policy: &ReadPolicy) -> Result<(), ReadError> {
    let below = match &policy.root {
        Some(root) => match resolved.strip_prefix(root) {
            Ok(rel) => rel,
            Err(_) => {
                return Err(ReadError::OutsideRoot {
                    resolved: resolved.to_path_buf(),
                })
            }
        },
        None => resolved,
    };
    if below.components().any(|c| c.as_os_str() == ".git") {
        return Err(ReadError::InGitDir);
    }
    Ok(())
}

fn check_kind(meta: &std::fs::Metadata, max: u64) -> Result<(), ReadError> {
    let t = meta.file_type();
    if !t.is_file() {
        return Err(ReadError::NotRegular(kind_name(&t)));
    }
    if meta.len() > max {
        return Err(ReadError::TooLarge {
            size: meta.len(),
            max,
        });
    }
    Ok(())
}

fn kind_name(t: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_socket() {
            return "a socket";
        }
        if t.is_char_device() {
            return "a character device";
        }
        if t.is_block_device() {
            return "a block device";
        }
    }
    if t.is_dir() {
        "a directory"
    } else {
        "not a regular file"
    }
}

#[cfg(unix)]
fn open_nonblocking(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    // O_NONBLOCK: opening a FIFO swapped in after the check returns at once instead of
    // waiting for a writer. It changes nothing for a regular file.
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
}

#[cfg(not(unix))]
fn open_nonblocking(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::File::open(path)
}

/// One file's text, shared (not copied) with the thread that parsed it.
#[derive(Debug, Clone)]
pub struct SourceFile {
    /// Absolute path.
    pub path: PathBuf,
    pub text: Arc<str>,
    facts: Arc<TextFacts>,
}

/// What is computed from a text alone, each on first use: most texts of a run are never
/// asked for a position, and a text kept between runs ([`crate::cache::DiskTexts`]) keeps
/// these with it, so an unchanged file costs none of them again.
#[derive(Debug, Default)]
pub struct TextFacts {
    /// Byte offset of the start of each line.
    line_starts: OnceLock<Vec<usize>>,
    digest: OnceLock<u128>,
    marked: OnceLock<bool>,
}

/// A position: 1-based line, 1-based column counted in characters (rustc's convention).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    pub line: usize,
    pub column: usize,
}

impl SourceFile {
    pub fn new(path: PathBuf, text: Arc<str>) -> SourceFile {
        SourceFile::with_facts(path, text, Arc::default())
    }

    /// A file whose text's facts are kept elsewhere: `facts` must have been made for this
    /// very text (or be fresh).
    pub(crate) fn with_facts(path: PathBuf, text: Arc<str>, facts: Arc<TextFacts>) -> SourceFile {
        SourceFile { path, text, facts }
    }

    fn line_starts(&self) -> &[usize] {
        self.facts.line_starts.get_or_init(|| {
            std::iter::once(0)
                .chain(self.text.match_indices('\n').map(|(i, _)| i + 1))
                .collect()
        })
    }

    /// A 128-bit XXH3 digest of the text: what cache keys hold of it.
    pub fn digest(&self) -> u128 {
        *self
            .facts
            .digest
            .get_or_init(|| xxhash_rust::xxh3::xxh3_128(self.text.as_bytes()))
    }

    /// Whether the text holds a suppression comment's marker: most files do not, and
    /// [`crate::suppress::scan`] is not run on them.
    pub(crate) fn may_suppress(&self) -> bool {
        *self
            .facts
            .marked
            .get_or_init(|| self.text.contains(crate::suppress::MARKER))
    }

    /// A file whose text could not be read: findings about it point at its start.
    pub fn empty(path: PathBuf) -> SourceFile {
        SourceFile::new(path, Arc::from(""))
    }

    pub fn line_count(&self) -> usize {
        self.line_starts().len()
    }

    /// `byte` moved back to a character boundary inside the text, so a span from a stale or
    /// foreign offset can never make slicing panic.
    pub fn clamp(&self, byte: usize) -> usize {
        let mut b = byte.min(self.text.len());
        while !self.text.is_char_boundary(b) {
            b -= 1;
        }
        b
    }

    /// 0-based index of the line holding `byte`.
    pub fn line_index(&self, byte: usize) -> usize {
        let byte = self.clamp(byte);
        self.line_starts().partition_point(|&s| s <= byte) - 1
    }

    /// Byte range of line `index` (0-based), without its line terminator.
    pub fn line_range(&self, index: usize) -> std::ops::Range<usize> {
        let starts = self.line_starts();
        let start = starts[index.min(starts.len() - 1)];
        let end = starts
            .get(index + 1)
            .map(|&next| next - 1)
            .unwrap_or(self.text.len());
        let end = if end > start && self.text.as_bytes()[end - 1] == b'\r' {
            end - 1
        } else {
            end
        };
        start..end.max(start)
    }

    /// Text of line `index` (0-based), without its line terminator.
    pub fn line_text(&self, index: usize) -> &str {
        &self.text[self.line_range(index)]
    }

    pub fn position(&self, byte: usize) -> Position {
        let byte = self.clamp(byte);
        let line = self.line_index(byte);
        let start = self.line_starts()[line];
        Position {
            line: line + 1,
            column: self.text[start..byte].chars().count() + 1,
        }
    }

    /// Number of characters before `byte`.
    pub fn char_offset(&self, byte: usize) -> usize {
        self.text[..self.clamp(byte)].chars().count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_only_regular_files_inside_the_root_under_the_cap() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().join("ws");
        std::fs::create_dir(&root).expect("mkdir");
        std::fs::write(root.join("a.rs"), "fn a() {}").expect("write");
        std::fs::write(tmp.path().join("secret.rs"), "SECRET").expect("write");
        std::os::unix::fs::symlink(tmp.path().join("secret.rs"), root.join("leak.rs"))
            .expect("symlink");
        let policy = ReadPolicy::inside(&root);
        assert_eq!(
            read_source(&root.join("a.rs"), &policy).expect("reads"),
            "fn a() {}"
        );
        let leak = read_source(&root.join("leak.rs"), &policy).expect_err("outside");
        assert!(matches!(leak, ReadError::OutsideRoot { .. }), "{leak}");
        assert!(!leak.to_string().contains("SECRET"));
        assert!(read_source(&root.join("leak.rs"), &ReadPolicy::anywhere()).is_ok());
        let dev = read_source(Path::new("/dev/zero"), &ReadPolicy::anywhere()).expect_err("dev");
        assert_eq!(
            dev.to_string(),
            "it is a character device, not a regular file"
        );
        let small = ReadPolicy {
            max_bytes: 4,
            ..policy
        };
        let big = read_source(&root.join("a.rs"), &small).expect_err("too large");
        assert_eq!(big.to_string(), "it is 9 bytes, over the limit of 4 bytes");
    }

    #[test]
    fn directories_resolved_once_resolve_every_file_as_canonicalize_does() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().join("ws");
        let outside = tmp.path().join("outside");
        for d in [root.join("src/a"), outside.clone()] {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        for f in [
            root.join("src/a/x.rs"),
            root.join("src/y.rs"),
            outside.join("z.rs"),
        ] {
            std::fs::write(f, "fn f() {}").expect("write");
        }
        std::os::unix::fs::symlink(&outside, root.join("src/out")).expect("symlink");
        std::os::unix::fs::symlink(root.join("src/y.rs"), root.join("src/a/y.rs"))
            .expect("symlink");
        let dirs = ResolvedDirs::default();
        let paths = [
            root.join("src/a/x.rs"),
            root.join("src/a/../y.rs"),
            // `..` after a symlink leaves the directory it points to, as the kernel does.
            root.join("src/out/../ws/src/a/x.rs"),
            root.join("src/a/y.rs"),
            root.join("src/out/z.rs"),
            root.join("src/a/x.rs"),
        ];
        for p in &paths {
            let (got, _) = dirs.resolve(p).expect("resolves");
            assert_eq!(
                got,
                std::fs::canonicalize(p).expect("canonical"),
                "{}",
                p.display()
            );
        }
        assert!(dirs.resolve(&root.join("src/a/missing.rs")).is_err());
        // A directory symlinked out of the root still leads out of it.
        let policy = ReadPolicy::inside(&root);
        let out = read_source(&root.join("src/out/z.rs"), &policy).expect_err("outside");
        assert!(matches!(out, ReadError::OutsideRoot { .. }), "{out}");
        assert!(read_source(&root.join("src/a/x.rs"), &policy).is_ok());
    }

    #[test]
    fn positions_count_characters_from_one() {
        let f = SourceFile::new("a.rs".into(), Arc::from("ab\r\nλx\n"));
        assert_eq!(f.position(0), Position { line: 1, column: 1 });
        assert_eq!(f.position(4), Position { line: 2, column: 1 });
        assert_eq!(f.position(6), Position { line: 2, column: 2 });
        assert_eq!(f.line_text(0), "ab");
        assert_eq!(f.line_text(1), "λx");
        assert_eq!(f.line_count(), 3);
        assert_eq!(f.position(5), Position { line: 2, column: 1 });
        assert_eq!(f.position(999), Position { line: 3, column: 1 });
    }
}
