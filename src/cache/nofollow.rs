//! File operations of the disk cache that never follow a symbolic link.
//!
//! The cache lives in a tree the checkout under review may have shaped (a committed `target/`
//! can hold symlinks at any name the cache uses), so a name the cache creates, writes, reads
//! or deletes must never lead elsewhere:
//!
//! - a directory is made with `mkdir` (which does not follow a symlink at its name) and then
//!   accepted only if `lstat` says it is a directory;
//! - a file is created with `create_new` (`O_CREAT | O_EXCL`, which fails on any symlink,
//!   dangling or not), read with `O_NOFOLLOW | O_NONBLOCK` (no FIFO can block) and `fstat`
//!   checked to be a regular file of bounded size;
//! - a rename replaces the name, never what a symlink there points to;
//! - only regular files are deleted, and directories only when empty.
//!
//! Each component is checked as it is reached. What this does not stop is another process
//! swapping a checked directory for a symlink between the check and the use: the threat here
//! is a tree prepared in advance, which runs no code.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::path::{Component, Path, PathBuf};

/// What [`ensure_dir`] found at a name.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Dir {
    /// A directory (made now or before), not a symlink.
    Real,
    /// Something else: a symlink (dangling or not), a file, a FIFO.
    Other,
}

/// Makes `dir` a directory unless something is at its name already; says whether what is
/// there now is a real directory. The parent is the caller's to have checked.
pub(super) fn ensure_dir(dir: &Path) -> io::Result<Dir> {
    match std::fs::create_dir(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    existing_dir(dir)
}

/// Whether `dir` is a real directory, without making it.
pub(super) fn existing_dir(dir: &Path) -> io::Result<Dir> {
    let meta = std::fs::symlink_metadata(dir)?;
    Ok(if meta.file_type().is_dir() {
        Dir::Real
    } else {
        Dir::Other
    })
}

/// Makes every directory from `base` (which must exist) down to `base/rel`, each checked with
/// [`ensure_dir`]. `rel` must be plain names; `Err(Some(path))` names the first component
/// that is not a real directory, `Err(None)` an I/O failure.
pub(super) fn ensure_dirs_below(base: &Path, rel: &Path) -> Result<PathBuf, Option<PathBuf>> {
    let mut dir = base.to_path_buf();
    for part in rel.components() {
        match part {
            Component::Normal(name) => dir.push(name),
            Component::CurDir => continue,
            _ => return Err(Some(dir)),
        }
        match ensure_dir(&dir) {
            Ok(Dir::Real) => {}
            Ok(Dir::Other) => return Err(Some(dir)),
            Err(_) => return Err(None),
        }
    }
    Ok(dir)
}

/// Creates `path` for writing; fails when anything (a symlink too) is at that name.
pub(super) fn create_new(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    options.open(path)
}

/// The contents of the regular file at `path` when it is at most `max` bytes: `None` for a
/// symlink, a FIFO, a device, a directory, a larger file or a failed read.
pub(super) fn read_regular(path: &Path, max: u64) -> Option<Vec<u8>> {
    let file = open_nofollow(path)?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.len() > max {
        return None;
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(max + 1).read_to_end(&mut bytes).ok()?;
    (bytes.len() as u64 <= max).then_some(bytes)
}

#[cfg(unix)]
fn open_nofollow(path: &Path) -> Option<File> {
    use std::os::unix::fs::OpenOptionsExt;
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()
}

#[cfg(not(unix))]
fn open_nofollow(path: &Path) -> Option<File> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.file_type().is_file() {
        return None;
    }
    File::open(path).ok()
}

/// Space `meta` takes on disk: its allocated blocks (a 100-byte file takes a whole block, and
/// on a cache of many small entries the blocks, not the lengths, fill the disk).
pub(super) fn disk_bytes(meta: &std::fs::Metadata) -> u64 {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        meta.blocks().saturating_mul(512)
    }
    #[cfg(not(unix))]
    {
        meta.len().div_ceil(4096) * 4096
    }
}

/// The regular files and the real directories directly in `dir`, by `lstat` (a symlink is
/// in neither list), with their metadata.
pub(super) fn list(dir: &Path) -> (Vec<(PathBuf, std::fs::Metadata)>, Vec<PathBuf>) {
    let (mut files, mut dirs) = (Vec::new(), Vec::new());
    let Ok(entries) = std::fs::read_dir(dir) else {
        return (files, dirs);
    };
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            dirs.push(entry.path());
        } else if kind.is_file() {
            if let Ok(meta) = entry.metadata() {
                files.push((entry.path(), meta));
            }
        }
    }
    (files, dirs)
}
