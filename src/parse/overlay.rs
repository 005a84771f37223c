//! Buffer overlays: in-memory texts that stand in for files on disk (an editor's unsaved
//! buffers), read under the same rules as the files they replace.
//!
//! An overlay is found by the file's resolved path, so `src/../src/lib.rs`, a symlink and the
//! plain path all meet the same buffer. Its text goes through the checks of
//! [`read_source`]: inside the workspace root unless the config allows otherwise, under the
//! size cap; the nesting pre-scan runs in the lowering for every text alike. Module
//! resolution still asks the disk which file a `mod x;` names, so an overlay replaces a file
//! that exists; a buffer for a file never saved is not reached through `mod`.

use crate::cache::texts::Probe;
use crate::cache::DiskTexts;
use crate::source::{read_resolved, read_source, ReadError, ReadPolicy, TextFacts};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Texts by path that replace the files on disk for one analysis.
#[derive(Debug, Clone, Default)]
pub struct Overlays {
    texts: HashMap<PathBuf, Arc<str>>,
    /// Texts of files without a buffer, kept from earlier reads (the language server).
    disk: Option<Arc<DiskTexts>>,
    /// The last text of a buffer that parsed, whose `mod` declarations are followed while
    /// the buffer does not parse (see [`Overlays::keep_module_tree`]).
    last_parsed: HashMap<PathBuf, Arc<str>>,
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

    /// Follows the `mod` declarations of `text`, an earlier version of the buffer of `path`
    /// that parsed, besides those of the current text while the current one does not parse:
    /// a keystroke that breaks a `mod` line in `lib.rs` keeps the files below it linted.
    pub fn keep_module_tree(&mut self, path: impl AsRef<Path>, text: impl Into<Arc<str>>) {
        self.last_parsed
            .insert(resolved(path.as_ref()), text.into());
    }

    /// The text given to [`Overlays::keep_module_tree`] for `path`.
    pub(crate) fn module_tree_text(&self, path: &Path) -> Option<&Arc<str>> {
        self.last_parsed.get(&resolved(path))
    }

    pub fn is_empty(&self) -> bool {
        self.texts.is_empty()
    }

    pub fn len(&self) -> usize {
        self.texts.len()
    }

    /// Reads files through `disk`: a file whose metadata is unchanged since it was last read
    /// there is not read again (see [`DiskTexts`] for what that can miss).
    pub fn remembering(mut self, disk: Arc<DiskTexts>) -> Overlays {
        self.disk = Some(disk);
        self
    }

    /// The text of `path`: its overlay when it has one, else the file, both under `policy`.
    pub fn read(&self, path: &Path, policy: &ReadPolicy) -> Result<Arc<str>, ReadError> {
        self.fetch(path, policy, None).text.map(|(text, _)| text)
    }

    /// [`Overlays::read`], with the path `path` resolves to and what is kept of the text;
    /// `probe` is what the disk said of `path` just before, when it was asked.
    pub(crate) fn fetch(&self, path: &Path, policy: &ReadPolicy, probe: Option<&Probe>) -> Fetched {
        let Some(disk) = &self.disk else {
            return self.fetch_fresh(path, policy).0;
        };
        let stamp = match probe {
            Some(probe) => probe.stamp(),
            None => DiskTexts::stamp(path),
        };
        let Some((stamp, settled)) = stamp else {
            return self.fetch_fresh(path, policy).0;
        };
        if let Some((key, text, facts)) = disk.get(path, stamp) {
            // The same file as last time: only the checks that do not read it again.
            let text = match self.texts.get(&key) {
                Some(buffer) => (buffer.clone(), Arc::default()),
                None => (text, facts),
            };
            return Fetched {
                text: check_overlay(&key, &text.0, policy).map(|()| text),
                resolved: Some(key),
            };
        }
        let (fetched, own) = self.fetch_fresh(path, policy);
        match (&fetched.text, &fetched.resolved) {
            (Ok((text, facts)), Some(key)) if own && settled => {
                disk.put(path, stamp, key.clone(), text.clone(), facts.clone())
            }
            _ => disk.drop_path(path),
        }
        fetched
    }

    /// [`Overlays::fetch`] without kept texts; and whether the text is the file's own.
    fn fetch_fresh(&self, path: &Path, policy: &ReadPolicy) -> (Fetched, bool) {
        let fresh = |text: Arc<str>| (text, Arc::default());
        let Ok((key, meta)) = policy.dirs.resolve(path) else {
            // Not a file there (yet): an overlay may still name it, else the read fails as
            // it would have.
            let at = resolved(path);
            let text = match self.texts.get(&at) {
                Some(text) => check_overlay(&at, text, policy).map(|()| fresh(text.clone())),
                None => read_source(path, policy).map(|t| fresh(Arc::from(t))),
            };
            let fetched = Fetched {
                text,
                resolved: None,
            };
            return (fetched, false);
        };
        let (text, own) = match self.texts.get(&key) {
            Some(text) => (
                check_overlay(&key, text, policy).map(|()| fresh(text.clone())),
                false,
            ),
            None => (
                read_resolved(key.clone(), meta, policy).map(|t| fresh(Arc::from(t))),
                true,
            ),
        };
        let fetched = Fetched {
            text,
            resolved: Some(key),
        };
        (fetched, own)
    }
}

/// A text, and what is computed from it (kept with it when the text is kept).
pub(crate) type Text = (Arc<str>, Arc<TextFacts>);

/// A text as [`Overlays::fetch`] found it.
pub(crate) struct Fetched {
    pub text: Result<Text, ReadError>,
    /// The path `path` resolves to (symlinks and `..` followed), when it resolves: two
    /// spellings of one file resolve to the same path.
    pub resolved: Option<PathBuf>,
}

/// [`read_source`], with the path it resolved to.
pub(crate) fn fetch_source(path: &Path, policy: &ReadPolicy) -> Fetched {
    match policy.dirs.resolve(path) {
        Ok((key, meta)) => Fetched {
            text: read_resolved(key.clone(), meta, policy).map(|t| (Arc::from(t), Arc::default())),
            resolved: Some(key),
        },
        Err(e) => Fetched {
            text: Err(ReadError::Io(e)),
            resolved: None,
        },
    }
}

/// The rules of [`read_source`] that apply to a text already in memory: where it claims to
/// be, and how large it is.
fn check_overlay(resolved: &Path, text: &str, policy: &ReadPolicy) -> Result<(), ReadError> {
    crate::source::check_place(resolved, policy)?;
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
    use std::time::Duration;

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

    #[test]
    fn a_kept_text_serves_only_while_the_file_is_the_same() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().join("ws");
        std::fs::create_dir(&root).expect("mkdir");
        let a = root.join("a.rs");
        std::fs::write(&a, "fn one() {}").expect("write");
        std::fs::write(tmp.path().join("secret.rs"), "SECRET").expect("write");
        let policy = ReadPolicy::inside(&root);
        let disk = Arc::new(DiskTexts::new());
        let mut overlays = Overlays::new().remembering(disk.clone());

        // Just written: not settled, read again each time.
        let first = overlays.read(&a, &policy).expect("read");
        assert!(disk.is_empty());
        std::thread::sleep(crate::cache::texts::SETTLED + Duration::from_millis(100));
        let kept = overlays.read(&a, &policy).expect("read");
        assert_eq!(disk.len(), 1);
        assert!(!Arc::ptr_eq(&first, &kept));
        let again = overlays.read(&a, &policy).expect("read");
        assert!(Arc::ptr_eq(&kept, &again), "the kept text is served");

        // A buffer still wins, and the checks still apply to the kept text.
        overlays.insert(&a, "fn buffer() {}");
        assert_eq!(
            &*overlays.read(&a, &policy).expect("read"),
            "fn buffer() {}"
        );
        overlays.remove(&a);
        let small = ReadPolicy {
            max_bytes: 4,
            ..policy.clone()
        };
        let big = overlays.read(&a, &small).expect_err("too large");
        assert!(matches!(big, ReadError::TooLarge { .. }), "{big}");

        // Same size, written again: another version.
        std::fs::write(&a, "fn two() {}").expect("write");
        assert_eq!(&*overlays.read(&a, &policy).expect("read"), "fn two() {}");
        // A directory, then a symlink out of the root, in its place.
        std::fs::remove_file(&a).expect("rm");
        std::fs::create_dir(&a).expect("mkdir");
        let dir = overlays.read(&a, &policy).expect_err("a directory");
        assert_eq!(dir.to_string(), "it is a directory, not a regular file");
        std::fs::remove_dir(&a).expect("rmdir");
        std::os::unix::fs::symlink(tmp.path().join("secret.rs"), &a).expect("symlink");
        let leak = overlays.read(&a, &policy).expect_err("outside");
        assert!(matches!(leak, ReadError::OutsideRoot { .. }), "{leak}");
        assert!(disk.is_empty());
    }

    #[test]
    fn a_kept_text_keeps_its_facts_until_the_file_changes() {
        use crate::source::SourceFile;
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().join("ws");
        std::fs::create_dir(&root).expect("mkdir");
        let a = root.join("a.rs");
        std::fs::write(&a, "fn one() {}\n").expect("write");
        std::os::unix::fs::symlink(&a, root.join("b.rs")).expect("symlink");
        let policy = ReadPolicy::inside(&root);
        let overlays = Overlays::new().remembering(Arc::new(DiskTexts::new()));
        let fetch = |p: &Path| {
            let f = overlays.fetch(p, &policy, None);
            let (text, facts) = f.text.expect("read");
            (
                SourceFile::with_facts(a.clone(), text, facts.clone()),
                facts,
                f.resolved,
            )
        };
        std::thread::sleep(crate::cache::texts::SETTLED + Duration::from_millis(100));
        let (first, facts, resolved) = fetch(&a);
        assert_eq!(resolved, Some(a.canonicalize().expect("canonical")));
        assert_eq!(first.line_count(), 2);
        let digest = first.digest();
        let (_, kept, kept_at) = fetch(&a);
        assert!(Arc::ptr_eq(&facts, &kept), "computed once per text");
        assert_eq!(kept_at, resolved);
        // Another spelling resolves to the same path, read or kept.
        assert_eq!(fetch(&root.join("b.rs")).2, resolved);
        assert_eq!(fetch(&root.join("b.rs")).2, resolved);

        std::fs::write(&a, "fn two() {}\nfn three() {}\n").expect("write");
        let (changed, changed_facts, _) = fetch(&a);
        assert!(!Arc::ptr_eq(&facts, &changed_facts));
        assert_eq!(changed.line_count(), 3);
        assert_ne!(changed.digest(), digest);
    }
}
