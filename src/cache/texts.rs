//! Texts of files read from disk, kept between the analyses of a language-server root: after
//! a keystroke, a file without a buffer whose metadata is unchanged is not resolved and read
//! again (resolving every path was about a fifth of a keystroke on tokio).
//!
//! A kept text is used when `stat` of the same path (symlinks followed) gives the same device,
//! inode, size, and modification and status-change times to the nanosecond as when it was
//! read. Any write changes the status-change time (`ctime`, which no program can set back),
//! so a change is missed only when it lands in the same timestamp tick as the read (the
//! kernel's clock tick, a few ms): a text is therefore kept only once its `ctime` is
//! [`SETTLED`] in the past when it is read (git's "racily clean" rule), and a file touched
//! since is read again until it has settled.
//!
//! What this cannot see: a symlink or directory on the path re-pointed to a *different path
//! of the same inode* (a hard link, a renamed directory): the text is the same, but the old
//! resolved path is kept, which is what the workspace-root check, the buffer lookup and the
//! test for a file reached twice ([`crate::parse`]) use. The first two are checked again on
//! every use; the server forgets every kept text when the editor reports a saved or changed
//! file ([`DiskTexts::forget`]).
//!
//! With a text go the facts computed from it ([`crate::source::TextFacts`]: its line index,
//! its digest), so an unchanged file is not scanned or hashed again either.

use crate::source::TextFacts;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// How long after its last change a file's text may be kept: far above any timestamp tick.
pub(crate) const SETTLED: Duration = Duration::from_secs(2);

/// The texts, by path as asked for.
#[derive(Debug, Default)]
pub struct DiskTexts {
    kept: Mutex<HashMap<PathBuf, Kept>>,
}

#[derive(Debug)]
struct Kept {
    stamp: Stamp,
    resolved: PathBuf,
    text: Arc<str>,
    /// Computed from `text` on first use (its line index, its digest), kept with it.
    facts: Arc<TextFacts>,
}

/// What identifies one version of a regular file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl DiskTexts {
    pub fn new() -> DiskTexts {
        DiskTexts::default()
    }

    /// Drops every kept text: the next analysis reads every file again.
    pub fn forget(&self) {
        lock(&self.kept).clear();
    }

    pub fn len(&self) -> usize {
        lock(&self.kept).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The stamp of the regular file at `path` now, and whether it may be kept; `None` when
    /// there is no regular file there (the read then reports why) or on a platform without
    /// inodes.
    pub(crate) fn stamp(path: &Path) -> Option<(Stamp, bool)> {
        let now = SystemTime::now();
        let meta = std::fs::metadata(path).ok()?;
        Probe { meta, at: now }.stamp()
    }
}

/// What the disk said about a path when it was asked whether the path exists (module
/// resolution asks that of every file), kept so that reading it does not ask again.
#[derive(Debug, Clone)]
pub(crate) struct Probe {
    /// With symlinks followed.
    meta: std::fs::Metadata,
    /// When it was asked.
    at: SystemTime,
}

impl Probe {
    /// Whether something is at `path` (a dangling symlink is), with what `stat` says of it
    /// when that is known: one `lstat` for a file that is not a symlink (whose `lstat` is
    /// its `stat`), a `stat` more for a symlink.
    pub(crate) fn of(path: &Path) -> Option<Option<Probe>> {
        let at = SystemTime::now();
        let meta = path.symlink_metadata().ok()?;
        if !meta.file_type().is_symlink() {
            return Some(Some(Probe { meta, at }));
        }
        Some(std::fs::metadata(path).ok().map(|meta| Probe { meta, at }))
    }

    /// [`DiskTexts::stamp`] as of when the probe was taken.
    pub(crate) fn stamp(&self) -> Option<(Stamp, bool)> {
        if !self.meta.is_file() {
            return None;
        }
        stamp_of(&self.meta, self.at)
    }
}

impl DiskTexts {
    /// The resolved path, text and facts kept for `path`, if read when it had `stamp`.
    pub(crate) fn get(
        &self,
        path: &Path,
        stamp: Stamp,
    ) -> Option<(PathBuf, Arc<str>, Arc<TextFacts>)> {
        let kept = lock(&self.kept);
        let k = kept.get(path).filter(|k| k.stamp == stamp)?;
        Some((k.resolved.clone(), k.text.clone(), k.facts.clone()))
    }

    /// Keeps `text` (with `facts`, made for it) as what `path`, resolved to `resolved`,
    /// holds while its stamp is `stamp`.
    pub(crate) fn put(
        &self,
        path: &Path,
        stamp: Stamp,
        resolved: PathBuf,
        text: Arc<str>,
        facts: Arc<TextFacts>,
    ) {
        lock(&self.kept).insert(
            path.to_path_buf(),
            Kept {
                stamp,
                resolved,
                text,
                facts,
            },
        );
    }

    /// Drops what is kept for `path` (it was read again and could not be kept).
    pub(crate) fn drop_path(&self, path: &Path) {
        lock(&self.kept).remove(path);
    }
}

#[cfg(unix)]
fn stamp_of(meta: &std::fs::Metadata, now: SystemTime) -> Option<(Stamp, bool)> {
    use std::os::unix::fs::MetadataExt;
    let stamp = Stamp {
        dev: meta.dev(),
        ino: meta.ino(),
        size: meta.size(),
        mtime: (meta.mtime(), meta.mtime_nsec()),
        ctime: (meta.ctime(), meta.ctime_nsec()),
    };
    let changed = |(s, ns): (i64, i64)| {
        let at = Duration::new(s.max(0) as u64, ns.clamp(0, 999_999_999) as u32);
        SystemTime::UNIX_EPOCH.checked_add(at)
    };
    // A time in the future (a skewed clock) or one that cannot be told is never settled.
    let settled = [stamp.mtime, stamp.ctime].into_iter().all(|t| {
        changed(t).is_some_and(|at| now.duration_since(at).is_ok_and(|age| age >= SETTLED))
    });
    Some((stamp, settled))
}

#[cfg(not(unix))]
fn stamp_of(_meta: &std::fs::Metadata, _now: SystemTime) -> Option<(Stamp, bool)> {
    None
}

/// The map, even if a thread panicked while holding it: entries are replaced whole.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
