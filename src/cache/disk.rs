//! The cache on disk: `<target-dir>/idem-lint/<build>/{models,outlines,findings}/<key>`.
//!
//! - **Foreign entries.** `<build>` is a digest of the tool's version, of the running
//!   executable (size and modification time) and of a random secret of this user kept outside
//!   every workspace ([`SECRET_ENV`], else `$XDG_CACHE_HOME/idem-lint/secret` or
//!   `~/.cache/idem-lint/secret`), so a rebuilt linter never reads what another build stored,
//!   and entries committed to a repository (a pull request that ships a `target/idem-lint/`
//!   claiming "no findings") can never match: without the secret no one can forge a header. Each entry repeats the build, its kind and its key in a header, and ends a
//!   checksummed payload of the stated length: a truncated, corrupt, renamed or foreign file is
//!   a miss, and the result is computed and written over it.
//! - **Concurrent runs.** An entry is written to a temporary file in the same directory and
//!   renamed into place, so a reader sees the old file, the new one or none, never half of one.
//! - **Size.** After a run that wrote entries, a build directory over [`MAX_BYTES`] loses its
//!   oldest entries not used by that run; directories of other builds beyond the
//!   [`KEEP_OTHER_BUILDS`] most recent are removed when a build opens its own.
//! - **Failures.** The cache is an optimization: a directory that cannot be created, an
//!   entry that cannot be read or written, is skipped without a word.

use super::key::Keyer;
use super::{Kind, Store};
use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// First bytes of every entry (format version in the last byte).
const MAGIC: [u8; 8] = *b"IDEMLC\0\x01";
/// Magic, build, kind, key, payload length, payload checksum.
const HEADER: usize = 8 + 16 + 1 + 16 + 8 + 8;
/// Size budget of one build's directory.
pub const MAX_BYTES: u64 = 512 << 20;
/// Directories of other builds kept (a second checkout, an editor's older language server).
pub const KEEP_OTHER_BUILDS: usize = 2;
/// A temporary file older than this was left by a run that died before renaming it.
const STALE_TEMP: Duration = Duration::from_secs(3600);

/// Entries under one build's directory.
pub struct DiskCache {
    dir: PathBuf,
    build: u128,
    /// Entries read or written by this process: pruning keeps them.
    used: Mutex<HashSet<PathBuf>>,
    wrote: AtomicBool,
    temp_counter: AtomicU64,
}

impl DiskCache {
    /// The cache under `root` (`<target-dir>/idem-lint`) for the running build, or `None`
    /// when the build cannot be identified or the directory cannot be created.
    pub fn open(root: &Path) -> Option<DiskCache> {
        DiskCache::open_build(root, current_build()?)
    }

    /// The cache under `root` for build `build` (tests stand in for another build with it).
    pub fn open_build(root: &Path, build: u128) -> Option<DiskCache> {
        let dir = root.join(format!("{build:032x}"));
        for kind in Kind::ALL {
            std::fs::create_dir_all(dir.join(kind.name())).ok()?;
        }
        tag_as_cache(root);
        // The directory's time says when its build last ran, for removing old builds.
        if let Ok(d) = std::fs::File::open(&dir) {
            let _ = d.set_modified(SystemTime::now());
        }
        remove_old_builds(root, &dir);
        Some(DiskCache {
            dir,
            build,
            used: Mutex::new(HashSet::new()),
            wrote: AtomicBool::new(false),
            temp_counter: AtomicU64::new(0),
        })
    }

    /// This build's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn entry_path(&self, kind: Kind, key: u128) -> PathBuf {
        self.dir.join(kind.name()).join(format!("{key:032x}"))
    }

    fn header(&self, kind: Kind, key: u128, payload: &[u8]) -> [u8; HEADER] {
        let mut h = [0u8; HEADER];
        h[..8].copy_from_slice(&MAGIC);
        h[8..24].copy_from_slice(&self.build.to_le_bytes());
        h[24] = kind as u8;
        h[25..41].copy_from_slice(&key.to_le_bytes());
        h[41..49].copy_from_slice(&(payload.len() as u64).to_le_bytes());
        h[49..57].copy_from_slice(&checksum(payload).to_le_bytes());
        h
    }

    /// The payload of an entry file, when it is whole and is the entry asked for.
    fn payload<'b>(&self, kind: Kind, key: u128, file: &'b [u8]) -> Option<&'b [u8]> {
        let (head, payload) = file.split_at_checked(HEADER)?;
        (head == self.header(kind, key, payload)).then_some(payload)
    }

    fn mark_used(&self, path: PathBuf) {
        self.used
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(path);
    }

    /// Writes `bytes` to a temporary file next to `path` and renames it into place.
    fn write_atomically(&self, path: &Path, parts: &[&[u8]]) -> std::io::Result<()> {
        let n = self.temp_counter.fetch_add(1, Ordering::Relaxed);
        let temp = path.with_file_name(format!(".tmp-{}-{n}", std::process::id()));
        let result = std::fs::File::create(&temp).and_then(|mut f| {
            for part in parts {
                f.write_all(part)?;
            }
            Ok(())
        });
        let result = result.and_then(|()| std::fs::rename(&temp, path));
        if result.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
        result
    }

    /// After a run that wrote entries: brings this build's directory under [`MAX_BYTES`] by
    /// removing the oldest entries the run did not use, and clears dead temporary files.
    pub fn prune(&self) {
        self.prune_to(MAX_BYTES);
    }

    /// [`DiskCache::prune`] with another budget (tests).
    pub fn prune_to(&self, max_bytes: u64) {
        if !self.wrote.load(Ordering::Relaxed) {
            return;
        }
        let used = self.used.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let now = SystemTime::now();
        let mut total = 0u64;
        let mut unused: Vec<(SystemTime, u64, PathBuf)> = Vec::new();
        for kind in Kind::ALL {
            let Ok(entries) = std::fs::read_dir(self.dir.join(kind.name())) else {
                continue;
            };
            for entry in entries.flatten() {
                let Ok(meta) = entry.metadata() else { continue };
                let path = entry.path();
                let modified = meta.modified().unwrap_or(now);
                if entry.file_name().to_string_lossy().starts_with(".tmp-") {
                    if now.duration_since(modified).unwrap_or_default() > STALE_TEMP {
                        let _ = std::fs::remove_file(&path);
                    }
                    continue;
                }
                total += meta.len();
                if !used.contains(&path) {
                    unused.push((modified, meta.len(), path));
                }
            }
        }
        if total <= max_bytes {
            return;
        }
        // Down to three quarters, so the next few runs do not prune again.
        let target = max_bytes / 4 * 3;
        unused.sort();
        for (_, len, path) in unused {
            if total <= target {
                break;
            }
            if std::fs::remove_file(&path).is_ok() {
                total = total.saturating_sub(len);
            }
        }
    }
}

impl Store for DiskCache {
    fn get(&self, kind: Kind, key: u128, _path: Option<&Path>) -> Option<Arc<[u8]>> {
        let path = self.entry_path(kind, key);
        let file = std::fs::read(&path).ok()?;
        let payload = self.payload(kind, key, &file)?;
        let payload = Arc::from(payload);
        self.mark_used(path);
        Some(payload)
    }

    fn put(&self, kind: Kind, key: u128, _path: Option<&Path>, bytes: Arc<[u8]>) {
        let path = self.entry_path(kind, key);
        let header = self.header(kind, key, &bytes);
        if self.write_atomically(&path, &[&header, &bytes]).is_ok() {
            self.wrote.store(true, Ordering::Relaxed);
            self.mark_used(path);
        }
    }
}

/// Marks `root` as a cache directory (<https://bford.info/cachedir/>), as cargo marks
/// `target/`: backup tools skip it, and so does this linter's walk of a plain directory when
/// `IDEM_LINT_CACHE_DIR` points inside one.
fn tag_as_cache(root: &Path) {
    let tag = root.join("CACHEDIR.TAG");
    if !tag.exists() {
        let _ = std::fs::write(
            tag,
            "Signature: 8a477f597d28d172789f06886806bc55\n\
             # This file is a cache directory tag created by cargo idem-lint.\n",
        );
    }
}

fn checksum(payload: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(payload)
}

/// Overrides the file holding this user's cache secret.
pub const SECRET_ENV: &str = "IDEM_LINT_CACHE_SECRET";

/// This user's cache secret: 32 random bytes made on first use, in a file outside any
/// workspace. `None` (no cache) when it can be neither read nor made.
fn user_secret() -> Option<Vec<u8>> {
    let path = match std::env::var_os(SECRET_ENV) {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => std::env::var_os("XDG_CACHE_HOME")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?
            .join("idem-lint")
            .join("secret"),
    };
    let read = |p: &Path| std::fs::read(p).ok().filter(|b| b.len() == 32);
    if let Some(secret) = read(&path) {
        return Some(secret);
    }
    std::fs::create_dir_all(path.parent()?).ok()?;
    let mut fresh = [0u8; 32];
    {
        use std::io::Read;
        std::fs::File::open("/dev/urandom")
            .ok()?
            .read_exact(&mut fresh)
            .ok()?;
    }
    // `create_new`: of two first runs at once, one writes and both read its secret.
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    if let Ok(mut f) = options.open(&path) {
        f.write_all(&fresh).ok()?;
    }
    read(&path)
}

/// Identifies the running build: the tool's version, the executable's size and
/// modification time (a rebuild changes them even when the version does not) and the
/// user's secret (entries made elsewhere never match).
fn current_build() -> Option<u128> {
    let exe = std::env::current_exe().ok()?;
    let meta = std::fs::metadata(exe).ok()?;
    let modified = meta
        .modified()
        .ok()?
        .duration_since(SystemTime::UNIX_EPOCH)
        .ok()?;
    let mut k = Keyer::new("build");
    k.str(env!("CARGO_PKG_VERSION"));
    k.bytes(&MAGIC);
    k.len(meta.len() as usize);
    k.bytes(&modified.as_nanos().to_le_bytes());
    k.bytes(&user_secret()?);
    Some(k.finish())
}

/// Removes the directories of other builds beyond the [`KEEP_OTHER_BUILDS`] most recently
/// used. Only names a build directory can have are touched.
fn remove_old_builds(root: &Path, own: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    let mut others: Vec<(SystemTime, PathBuf)> = entries
        .flatten()
        .filter(|e| is_build_dir_name(&e.file_name().to_string_lossy()))
        .map(|e| e.path())
        .filter(|p| p != own)
        .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
        .collect();
    others.sort_by_key(|(modified, _)| std::cmp::Reverse(*modified));
    for (_, old) in others.into_iter().skip(KEEP_OTHER_BUILDS) {
        let _ = std::fs::remove_dir_all(old);
    }
}

fn is_build_dir_name(name: &str) -> bool {
    name.len() == 32 && name.bytes().all(|b| b.is_ascii_hexdigit())
}
