//! Buffer overlays: in-memory texts that stand in for files on disk (an editor's unsaved
//! buffers), read under the same rules as the files they replace.
//!
//! An overlay is found by the file's resolved path, so `src/../src/lib.rs`, a symlink and the
//! plain path all meet the same buffer. Its text goes through the checks of
//! [`read_source`]: inside the workspace root unless the config allows otherwise, under the
//! size cap; the nesting pre-scan runs in the lowering for every text alike. Module
//! resolution still asks the disk which file a `mod x;` names, so an overlay replaces a file
//! that exists; a buffer for a file never saved is not reached through `mod`.

use crate::source::{read_resolved, read_source, ReadError, ReadPolicy};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Texts by path that replace the files on disk for one analysis.
#[derive(Debug, Clone, Default)]
pub struct Overlays {
    texts: HashMap<PathBuf, Arc<str>>,
}

impl Overlays {
    pub fn new() -> Overlays {
        Overlays::default()
    }

    /// Makes `text` the content of the file at `path` (absolute, or relative to the current
    /// directory) for every read until it is removed or replaced.
    pub fn insert(&mut self, path: impl AsRef<Path>, text: impl Into<Arc<str>>) {
        self.texts.insert(resolved(path.as_ref()), text.into());
    }

    /// Drops the overlay of `path` (the buffer was saved or closed): the disk is read again.
    pub fn remove(&mut self, path: impl AsRef<Path>) -> Option<Arc<str>> {
        self.texts.remove(&resolved(path.as_ref()))
    }

    pub fn is_empty(&self) -> bool {
        self.texts.is_empty()
    }

    pub fn len(&self) -> usize {
        self.texts.len()
    }

    /// The text of `path`: its overlay when it has one, else the file, both under `policy`.
    pub fn read(&self, path: &Path, policy: &ReadPolicy) -> Result<Arc<str>, ReadError> {
        if self.texts.is_empty() {
            return read_source(path, policy).map(Arc::from);
        }
        let Ok(key) = std::fs::canonicalize(path) else {
            // Not a file there (yet): an overlay may still name it, else the read fails as
            // it would have.
            let key = resolved(path);
            return match self.texts.get(&key) {
                Some(text) => check_overlay(&key, text, policy).map(|()| text.clone()),
                None => read_source(path, policy).map(Arc::from),
            };
        };
        match self.texts.get(&key) {
            Some(text) => check_overlay(&key, text, policy).map(|()| text.clone()),
            None => read_resolved(key, policy).map(Arc::from),
        }
    }
}

/// The rules of [`read_source`] that apply to a text already in memory: where it claims to
/// be, and how large it is.
fn check_overlay(resolved: &Path, text: &str, policy: &ReadPolicy) -> Result<(), ReadError> {
    if let Some(root) = &policy.root {
        if !resolved.starts_with(root) {
            return Err(ReadError::OutsideRoot {
                resolved: resolved.to_path_buf(),
            });
        }
    }
    let size = text.len() as u64;
    if size > policy.max_bytes {
        return Err(ReadError::TooLarge {
            size,
            max: policy.max_bytes,
        });
    }
    Ok(())
}

/// `path` with symlinks and `..` resolved; for a file that does not exist (yet), its resolved
/// directory joined with its name.
fn resolved(path: &Path) -> PathBuf {
    if let Ok(p) = std::fs::canonicalize(path) {
        return p;
    }
    match (path.parent(), path.file_name()) {
        (Some(dir), Some(name)) => std::fs::canonicalize(dir)
            .map(|d| d.join(name))
            .unwrap_or_else(|_| path.to_path_buf()),
        _ => path.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_overlay_replaces_the_file_under_the_same_checks() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().join("ws");
        std::fs::create_dir(&root).expect("mkdir");
        std::fs::write(root.join("a.rs"), "fn disk() {}").expect("write");
        let policy = ReadPolicy::inside(&root);
        let mut overlays = Overlays::new();
        // Reached through another spelling of the same path.
        overlays.insert(root.join(".").join("a.rs"), "fn buffer() {}");
        let read = |o: &Overlays, p: &Path| o.read(p, &policy).map(|t| t.to_string());
        assert_eq!(
            read(&overlays, &root.join("a.rs")).expect("read"),
            "fn buffer() {}"
        );

        overlays.insert(tmp.path().join("outside.rs"), "fn leak() {}");
        let outside = read(&overlays, &tmp.path().join("outside.rs")).expect_err("outside");
        assert!(
            matches!(outside, ReadError::OutsideRoot { .. }),
            "{outside}"
        );

        let small = ReadPolicy {
            max_bytes: 4,
            ..policy.clone()
        };
        let big = overlays
            .read(&root.join("a.rs"), &small)
            .expect_err("too large");
        assert_eq!(big.to_string(), "it is 14 bytes, over the limit of 4 bytes");

        overlays.remove(root.join("a.rs"));
        assert_eq!(
            read(&overlays, &root.join("a.rs")).expect("read"),
            "fn disk() {}"
        );
    }
}
