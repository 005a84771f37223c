//! The cache on disk: `<root>/<build>/{models,outlines,findings}/<shard>/<key>`, where `<root>`
//! is where [`super::disk_root`] allows, `<build>` names the running build and `<shard>` is
//! the key's first two hex digits.
//!
//! - **Foreign and forged entries.** Each entry carries an HMAC-SHA256 tag over its kind, key
//!   and payload, under a key derived from a secret of this user kept outside every workspace
//!   ([`super::secret`]); the build's directory name is derived from the same secret and reveals
//!   nothing of that key. So a rebuilt linter never reads what another build stored, and
//!   entries committed to a repository (a pull request that ships a `target/idem-lint/`
//!   claiming "no findings"), whoever wrote them, never verify. A truncated, corrupt, renamed,
//!   foreign or forged file is a miss, and the result is computed and written over it.
//! - **A tree prepared by the checkout.** No symlink is followed when creating, writing,
//!   reading or deleting anything here ([`super::nofollow`]): a symlink at a name the cache
//!   uses makes that part of the cache unusable, never a write elsewhere.
//! - **Concurrent runs.** An entry is written to a new temporary file in the same directory
//!   and renamed into place, so a reader sees the old file, the new one or none, never half of
//!   one.
//! - **Many files.** Entries are spread over 256 directories per kind, so no directory grows
//!   past a few thousand names (a flat directory of 200,000 entries made every file operation
//!   in it slower, and a cold run superlinear in the number of files).
//! - **Size.** After a run that wrote entries, a build's directory whose entries take more than
//!   [`MAX_BYTES`] of disk (allocated blocks, not lengths: most entries are far smaller than a
//!   block) is brought down to three quarters of it: first the oldest entries the run did not
//!   use, then, for a workspace whose own entries exceed the budget, the run's models, then
//!   its outlines. Directories of other builds beyond the [`KEEP_OTHER_BUILDS`] most recent
//!   are removed when a build opens its own. Only names the cache makes are ever deleted.
//! - **A run's own entries.** A run stops writing models once the entries it has read and
//!   written reach half of what pruning keeps ([`WRITE_BUDGET`]), and outlines once they reach
//!   all of it; findings are always written. On a workspace too large for the budget, a cold
//!   run wrote every entry (1.6 GB at 200,000 files) only for pruning to delete most of it,
//!   and waited on the disk for it: 349 s against 17 s uncached. Entries read count too, so
//!   the re-run of a partly cached workspace does not write what its pruning then deletes.
//! - **Failures.** The cache is an optimization: a directory that cannot be created, an
//!   entry that cannot be read or written, is skipped without a word.

use super::nofollow::{self, Dir};
use super::secret::{Build, TAG_LEN};
use super::{Kind, Store};
use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime};

/// First bytes of every entry (format version in the last byte).
const MAGIC: [u8; 8] = *b"IDEMLC\0\x02";
/// Magic, kind, key, payload length, tag.
const HEADER: usize = 8 + 1 + 16 + 8 + TAG_LEN;
/// Disk budget of one build's directory.
pub const MAX_BYTES: u64 = 512 << 20;
/// Largest payload kept: an entry that would take an eighth of the budget is recomputed.
const MAX_ENTRY: usize = (MAX_BYTES / 8) as usize;
/// Directories of other builds kept (a second checkout, an editor's older language server).
pub const KEEP_OTHER_BUILDS: usize = 2;
/// A temporary file older than this was left by a run that died before renaming it.
const STALE_TEMP: Duration = Duration::from_secs(3600);
/// Shard directories per kind (one per value of the key's first byte).
const SHARDS: usize = 256;
/// The entries one run reads and writes, in disk blocks (as pruning counts them), past which
/// it writes no more models and outlines: the three quarters of [`MAX_BYTES`] pruning brings a
/// directory down to, so a run does not write entries that its own pruning would delete.
pub const WRITE_BUDGET: u64 = MAX_BYTES / 4 * 3;
/// The allocation unit assumed when counting a run's writes before they happen (ext4, xfs,
/// btrfs and tmpfs all allocate 4 KiB blocks by default).
const BLOCK: u64 = 4096;

/// Entries under one build's directory.
pub struct DiskCache {
    dir: PathBuf,
    build: Build,
    /// Per kind and shard, once known: whether the shard is a real directory.
    shards: Box<[OnceLock<bool>]>,
    /// Entries read or written by this process: pruning keeps them longest.
    used: Mutex<HashSet<PathBuf>>,
    wrote: AtomicBool,
    temp_counter: AtomicU64,
    /// Disk the entries this run read or wrote take (lengths rounded up to [`BLOCK`]),
    /// against `write_budget`.
    written: AtomicU64,
    write_budget: u64,
}

impl DiskCache {
    /// The cache under `root` (from [`super::disk_root`]) for the running build, or `None`
    /// when the build cannot be identified or its directory cannot be made.
    pub fn open(root: &Path) -> Option<DiskCache> {
        DiskCache::open_keyed(root, Build::current(&MAGIC)?)
    }

    /// The cache under `root` for the build named `build`, keyed by this user's secret (tests
    /// stand in for another build with it).
    pub fn open_build(root: &Path, build: u128) -> Option<DiskCache> {
        DiskCache::open_keyed(root, Build::for_user(build)?)
    }

    fn open_keyed(root: &Path, build: Build) -> Option<DiskCache> {
        let dir = root.join(format!("{:032x}", build.name));
        let real = |d: &Path| nofollow::ensure_dir(d).ok() == Some(Dir::Real);
        if !real(&dir) || !Kind::ALL.iter().all(|k| real(&dir.join(k.name()))) {
            return None;
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
            shards: (0..Kind::ALL.len() * SHARDS)
                .map(|_| OnceLock::new())
                .collect(),
            used: Mutex::new(HashSet::new()),
            wrote: AtomicBool::new(false),
            temp_counter: AtomicU64::new(0),
            written: AtomicU64::new(0),
            write_budget: WRITE_BUDGET,
        })
    }

    /// This cache with another limit on what one run writes (tests).
    pub fn with_write_budget(mut self, bytes: u64) -> DiskCache {
        self.write_budget = bytes;
        self
    }

    /// Takes `bytes` of this run's write budget for an entry of `kind`, or says there is none
    /// left for that kind: models may use half of the budget, outlines all of it (an unchanged
    /// re-run reads outlines and findings, not models), findings are always written (one per
    /// package, and without them a re-run analyses everything again).
    fn take_budget(&self, kind: Kind, bytes: u64) -> bool {
        let limit = match kind {
            Kind::Model => self.write_budget / 2,
            Kind::Outline => self.write_budget,
            Kind::Findings => u64::MAX,
        };
        self.written
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |w| {
                w.checked_add(bytes).filter(|&after| after <= limit)
            })
            .is_ok()
    }

    /// This build's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the entry `key` of `kind` is, once its shard is known to be a real directory
    /// (made first when `create`).
    fn entry_path(&self, kind: Kind, key: u128, create: bool) -> Option<PathBuf> {
        let shard = (key >> 120) as usize;
        let dir = self.dir.join(kind.name()).join(format!("{shard:02x}"));
        let cell = &self.shards[kind as usize * SHARDS + shard];
        let real = match cell.get() {
            Some(&real) => real,
            None => {
                let found = if create {
                    nofollow::ensure_dir(&dir)
                } else {
                    nofollow::existing_dir(&dir)
                };
                match found {
                    Ok(state) => *cell.get_or_init(|| state == Dir::Real),
                    // Not made yet (or not makeable now): asked about again next time.
                    Err(_) => false,
                }
            }
        };
        real.then(|| dir.join(format!("{key:032x}")))
    }

    /// The header of the entry `key` of `kind` holding `payload`.
    fn header(&self, kind: Kind, key: u128, payload: &[u8]) -> [u8; HEADER] {
        let (kind, key, len) = fields(kind, key, payload);
        let tag = self.build.tag(&[&MAGIC, &kind, &key, &len, payload]);
        let mut h = [0u8; HEADER];
        h[..8].copy_from_slice(&MAGIC);
        h[8] = kind[0];
        h[9..25].copy_from_slice(&key);
        h[25..33].copy_from_slice(&len);
        h[33..].copy_from_slice(&tag);
        h
    }

    /// The payload of an entry file, when it is whole, is the entry asked for and was written
    /// by this build of this user.
    fn payload<'b>(&self, kind: Kind, key: u128, file: &'b [u8]) -> Option<&'b [u8]> {
        let (head, payload) = file.split_at_checked(HEADER)?;
        let (kind, key, len) = fields(kind, key, payload);
        let stated = [&MAGIC[..], &kind, &key, &len].concat();
        (head[..33] == stated[..]
            && self
                .build
                .verify(&[&MAGIC, &kind, &key, &len, payload], &head[33..]))
        .then_some(payload)
    }

    fn mark_used(&self, path: PathBuf) {
        self.used
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(path);
    }

    /// Writes `parts` to a new temporary file next to `path` and renames it into place.
    fn write_atomically(&self, path: &Path, parts: &[&[u8]]) -> std::io::Result<()> {
        let n = self.temp_counter.fetch_add(1, Ordering::Relaxed);
        let temp = path.with_file_name(format!(".tmp-{}-{n}", std::process::id()));
        let written = nofollow::create_new(&temp).and_then(|mut f| {
            for part in parts {
                f.write_all(part)?;
            }
            Ok(())
        });
        match written {
            Ok(()) => std::fs::rename(&temp, path).inspect_err(|_| {
                let _ = std::fs::remove_file(&temp);
            }),
            // A temporary file made here but not filled is removed; one that was there before
            // (the error when `create_new` met it) is not this run's.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(e),
            Err(e) => {
                let _ = std::fs::remove_file(&temp);
                Err(e)
            }
        }
    }

    /// After a run that wrote entries: brings this build's directory under [`MAX_BYTES`] of
    /// disk, and clears dead temporary files.
    pub fn prune(&self) {
        self.prune_to(MAX_BYTES);
    }

    /// [`DiskCache::prune`] with another budget (tests).
    pub fn prune_to(&self, max_bytes: u64) {
        if !self.wrote.load(Ordering::Relaxed) {
            return;
        }
        let used = self.used.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let mut total = 0u64;
        let mut entries = Vec::new();
        for kind in Kind::ALL {
            for (path, meta) in self.entry_files(kind) {
                let size = nofollow::disk_bytes(&meta);
                total += size;
                let order = prune_order(kind, used.contains(&path));
                entries.push((order, meta.modified().ok(), size, path));
            }
        }
        if total <= max_bytes {
            return;
        }
        // Down to three quarters, so the next few runs do not prune again.
        let target = max_bytes / 4 * 3;
        entries.sort();
        for (_, _, size, path) in entries {
            if total <= target {
                break;
            }
            if std::fs::remove_file(&path).is_ok() {
                total = total.saturating_sub(size);
            }
        }
    }

    /// The entry files of `kind` (regular files with an entry's name in a shard directory),
    /// with their `lstat`; dead temporary files met on the way are removed.
    fn entry_files(&self, kind: Kind) -> Vec<(PathBuf, std::fs::Metadata)> {
        let now = SystemTime::now();
        let (_, shards) = nofollow::list(&self.dir.join(kind.name()));
        let mut out = Vec::new();
        for shard in shards.iter().filter(|d| has_name(d, is_shard_name)) {
            for (path, meta) in nofollow::list(shard).0 {
                if has_name(&path, is_temp_name) {
                    let modified = meta.modified().unwrap_or(now);
                    if now.duration_since(modified).unwrap_or_default() > STALE_TEMP {
                        let _ = std::fs::remove_file(&path);
                    }
                } else if has_name(&path, is_entry_name) {
                    out.push((path, meta));
                }
            }
        }
        out
    }
}

/// What an entry of `len` bytes takes on disk, as the write budget counts it.
fn blocks(len: usize) -> u64 {
    (len as u64).div_ceil(BLOCK) * BLOCK
}

/// The kind, key and payload length of an entry, as its header and tag hold them.
fn fields(kind: Kind, key: u128, payload: &[u8]) -> ([u8; 1], [u8; 16], [u8; 8]) {
    (
        [kind as u8],
        key.to_le_bytes(),
        (payload.len() as u64).to_le_bytes(),
    )
}

/// Which entries pruning removes first: those the run did not use, then (when the run's own
/// entries exceed the budget) its models, which an unchanged re-run does not read, then its
/// outlines, its findings last.
fn prune_order(kind: Kind, used: bool) -> u8 {
    match (used, kind) {
        (false, _) => 0,
        (true, Kind::Model) => 1,
        (true, Kind::Outline) => 2,
        (true, Kind::Findings) => 3,
    }
}

impl Store for DiskCache {
    fn get(&self, kind: Kind, key: u128, _path: Option<&Path>) -> Option<Arc<[u8]>> {
        let path = self.entry_path(kind, key, false)?;
        let file = nofollow::read_regular(&path, (HEADER + MAX_ENTRY) as u64)?;
        let payload = self.payload(kind, key, &file)?;
        let payload = Arc::from(payload);
        self.written
            .fetch_add(blocks(file.len()), Ordering::Relaxed);
        self.mark_used(path);
        Some(payload)
    }

    fn put(&self, kind: Kind, key: u128, _path: Option<&Path>, bytes: Arc<[u8]>) {
        if bytes.len() > MAX_ENTRY {
            return;
        }
        let blocks = blocks(HEADER + bytes.len());
        if !self.take_budget(kind, blocks) {
            return;
        }
        let Some(path) = self.entry_path(kind, key, true) else {
            return;
        };
        let header = self.header(kind, key, &bytes);
        if self.write_atomically(&path, &[&header, &bytes]).is_ok() {
            self.wrote.store(true, Ordering::Relaxed);
            self.mark_used(path);
        } else {
            self.written.fetch_sub(blocks, Ordering::Relaxed);
        }
    }
}

/// Marks `root` as a cache directory (<https://bford.info/cachedir/>), as cargo marks
/// `target/`: backup tools skip it, and so does this linter's walk of a plain directory when
/// `IDEM_LINT_CACHE_DIR` points inside one. Whatever is at the name already (a symlink, even
/// a dangling one) is left alone.
fn tag_as_cache(root: &Path) {
    if let Ok(mut tag) = nofollow::create_new(&root.join("CACHEDIR.TAG")) {
        let _ = tag.write_all(
            b"Signature: 8a477f597d28d172789f06886806bc55\n\
              # This file is a cache directory tag created by cargo idem-lint.\n",
        );
    }
}

/// Removes the directories of other builds beyond the [`KEEP_OTHER_BUILDS`] most recently
/// used.
fn remove_old_builds(root: &Path, own: &Path) {
    let mut others: Vec<(SystemTime, PathBuf)> = nofollow::list(root)
        .1
        .into_iter()
        .filter(|p| p != own && has_name(p, is_build_dir_name))
        .filter_map(|p| Some((std::fs::symlink_metadata(&p).ok()?.modified().ok()?, p)))
        .collect();
    others.sort_by_key(|(modified, _)| std::cmp::Reverse(*modified));
    for (_, old) in others.into_iter().skip(KEEP_OTHER_BUILDS) {
        remove_build(&old);
    }
}

/// Removes what the cache makes in a build's directory: entry and temporary files in its kind
/// directories and their shards (or directly in them: the layout of earlier versions), then
/// those directories once empty. Anything else, and the directories holding it, stays.
fn remove_build(dir: &Path) {
    for kind in Kind::ALL {
        let kind_dir = dir.join(kind.name());
        if nofollow::existing_dir(&kind_dir).ok() != Some(Dir::Real) {
            continue;
        }
        remove_entries(&kind_dir);
        for shard in nofollow::list(&kind_dir).1 {
            if has_name(&shard, is_shard_name) {
                remove_entries(&shard);
                let _ = std::fs::remove_dir(&shard);
            }
        }
        let _ = std::fs::remove_dir(&kind_dir);
    }
    let _ = std::fs::remove_dir(dir);
}

fn remove_entries(dir: &Path) {
    for (path, _) in nofollow::list(dir).0 {
        if has_name(&path, |n| is_entry_name(n) || is_temp_name(n)) {
            let _ = std::fs::remove_file(&path);
        }
    }
}

fn has_name(path: &Path, test: impl Fn(&str) -> bool) -> bool {
    path.file_name().and_then(|n| n.to_str()).is_some_and(test)
}

fn is_hex(name: &str, len: usize) -> bool {
    name.len() == len
        && name
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn is_build_dir_name(name: &str) -> bool {
    is_hex(name, 32)
}

fn is_entry_name(name: &str) -> bool {
    is_hex(name, 32)
}

fn is_shard_name(name: &str) -> bool {
    is_hex(name, 2)
}

fn is_temp_name(name: &str) -> bool {
    name.starts_with(".tmp-")
}
