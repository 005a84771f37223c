//! The re-run cache (`src/cache/`): a cached run prints what an uncached one prints, reads
//! back only what is unchanged, and survives broken, foreign and concurrent cache files.
//!
//! Output is compared end to end through the binary; what was parsed and what came from the
//! cache is observed through the library (`LoadedPackage::parsed` and a store that counts),
//! never through timing.

mod common;

use cargo_idem_lint::cache::{DiskCache, Kind, Session, Store};
use cargo_idem_lint::cli::MessageFormat;
use cargo_idem_lint::config::Config;
use cargo_idem_lint::discovery::{self, Selection, Workspace};
use cargo_idem_lint::levels::LevelFlag;
use cargo_idem_lint::parse::{Inputs, Overlays, ParseOptions};
use cargo_idem_lint::{emit, report};
use common::{fixtures, run_env, s, Run};
use idem_lints::Level;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

const FORMATS: [&str; 4] = ["human", "short", "json", "sarif"];

/// Appended to `src/notify.rs` of the demo: a key made per attempt (`nondeterministic_key`).
const NEW_FINDING: &str = "
pub async fn notify_again(conn: &mut redis::aio::MultiplexedConnection) -> redis::RedisResult<bool> {
    let attempt = uuid::Uuid::new_v4().to_string();
    conn.set_nx(format!(\"again:{attempt}\"), 1).await
}
";

/// The binary on `dir` in `format` with the cache in `cache` (`None`: `--no-cache`).
fn lint(dir: &Path, format: &str, cache: Option<&Path>) -> Run {
    let mut args = vec![s(dir), "--message-format", format, "--color", "never"];
    let mut env: Vec<(&str, &str)> = Vec::new();
    match cache {
        Some(c) => env.push(("IDEM_LINT_CACHE_DIR", s(c))),
        None => args.push("--no-cache"),
    }
    // From the repository root, so `human` and `short` print relative paths.
    run_env(&common::repo(), &args, &env)
}

fn entries(dir: &Path) -> usize {
    walk_files(dir).len()
}

fn walk_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(read) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in read.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk_files(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}

#[test]
fn cached_runs_print_what_uncached_runs_print_on_every_fixture() {
    let mut all = Vec::new();
    fixtures(&common::repo().join("fixtures"), &mut all);
    assert!(all.len() > 10, "fixtures found: {all:?}");
    for dir in &all {
        let cache = tempfile::tempdir().expect("tempdir");
        for format in FORMATS {
            let plain = lint(dir, format, None);
            // The first format's cached run is cold, every later one warm.
            let cold = lint(dir, format, Some(cache.path()));
            let warm = lint(dir, format, Some(cache.path()));
            for (name, run) in [("first", &cold), ("second", &warm)] {
                assert_eq!(
                    (run.code, &run.stdout, &run.stderr),
                    (plain.code, &plain.stdout, &plain.stderr),
                    "{format} output of {} differs on the {name} cached run",
                    dir.display()
                );
            }
        }
        assert!(
            entries(cache.path()) > 0,
            "nothing cached for {}",
            dir.display()
        );
    }
}

#[test]
fn no_cache_writes_nothing_and_a_cargo_project_caches_under_its_target_dir() {
    let dir = copy_of_demo();
    let args = |extra: &'static str| {
        vec![
            s(dir.path()).to_string(),
            "--message-format".into(),
            "json".into(),
            extra.into(),
        ]
    };
    let run = |a: Vec<String>| {
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        common::run_in(dir.path(), &a)
    };
    let plain = run(args("--no-cache"));
    assert!(!dir.path().join("target").exists(), "--no-cache wrote");
    let cached = run(args("--color=never"));
    assert_eq!(plain.stdout, cached.stdout);
    assert!(entries(&dir.path().join("target/idem-lint")) > 0);
}

/// A copy of `fixtures/demo` (a package of several files with findings) to edit.
fn copy_of_demo() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().expect("tempdir");
    common::copy_dir(&common::repo().join("fixtures/demo"), tmp.path());
    tmp
}

/// A disk cache that counts its hits and stores, by kind.
struct Counting {
    inner: DiskCache,
    model_hits: AtomicUsize,
    outline_hits: AtomicUsize,
    findings_hits: AtomicUsize,
    findings_puts: AtomicUsize,
}

impl Counting {
    fn new(inner: DiskCache) -> Counting {
        Counting {
            inner,
            model_hits: AtomicUsize::new(0),
            outline_hits: AtomicUsize::new(0),
            findings_hits: AtomicUsize::new(0),
            findings_puts: AtomicUsize::new(0),
        }
    }

    fn reset(&self) {
        for c in [
            &self.model_hits,
            &self.outline_hits,
            &self.findings_hits,
            &self.findings_puts,
        ] {
            c.store(0, Ordering::SeqCst);
        }
    }
}

impl Store for Counting {
    fn get(&self, kind: Kind, key: u128, path: Option<&Path>) -> Option<Arc<[u8]>> {
        let got = self.inner.get(kind, key, path)?;
        match kind {
            Kind::Model => &self.model_hits,
            Kind::Outline => &self.outline_hits,
            Kind::Findings => &self.findings_hits,
        }
        .fetch_add(1, Ordering::SeqCst);
        Some(got)
    }

    fn put(&self, kind: Kind, key: u128, path: Option<&Path>, bytes: Arc<[u8]>) {
        if kind == Kind::Findings {
            self.findings_puts.fetch_add(1, Ordering::SeqCst);
        }
        self.inner.put(kind, key, path, bytes);
    }
}

struct Project {
    ws: Workspace,
    config: Config,
}

impl Project {
    fn load(dir: &Path) -> Project {
        let ws = discovery::discover(&Selection::dir(dir)).expect("discovers");
        let config = Config::load(&ws).expect("config");
        Project { ws, config }
    }

    fn check(&self, cache: Option<&dyn Store>, flags: &[LevelFlag]) -> report::Report {
        self.check_opts(cache, flags, &ParseOptions::default())
    }

    fn check_opts(
        &self,
        cache: Option<&dyn Store>,
        flags: &[LevelFlag],
        opts: &ParseOptions,
    ) -> report::Report {
        let inputs = Inputs {
            overlays: None,
            cache,
            cancel: None,
        };
        report::check_with(&self.ws, opts, &self.config, flags, inputs).expect("checks")
    }

    fn json(&self, report: &report::Report) -> String {
        let input = emit::Input {
            ws: &self.ws,
            report,
            cwd: &self.ws.root,
        };
        let mut out = Vec::new();
        emit::emit(MessageFormat::Json, &input, &mut out).expect("emits");
        String::from_utf8(out).expect("utf-8")
    }
}

fn parsed(report: &report::Report) -> Vec<PathBuf> {
    let pkg = &report.packages[0];
    pkg.parsed
        .iter()
        .map(|id| pkg.package.file(*id).path.clone())
        .collect()
}

#[test]
fn an_edited_file_is_the_only_one_parsed_again() {
    let dir = copy_of_demo();
    let cache_dir = tempfile::tempdir().expect("tempdir");
    let store = Counting::new(DiskCache::open_build(cache_dir.path(), 7).expect("opens"));
    let project = Project::load(dir.path());
    let files = project.check(None, &[]).packages[0].package.files.len();
    assert!(files >= 5, "demo has {files} files");

    let cold = project.check(Some(&store), &[]);
    assert_eq!(parsed(&cold).len(), files, "a cold run parses everything");
    assert_eq!(store.findings_puts.load(Ordering::SeqCst), 1);

    store.reset();
    let warm = project.check(Some(&store), &[]);
    assert!(
        parsed(&warm).is_empty(),
        "parsed again: {:?}",
        parsed(&warm)
    );
    // Unchanged: the outlines lead to the findings, and no model is decoded.
    assert_eq!(store.outline_hits.load(Ordering::SeqCst), files);
    assert_eq!(store.model_hits.load(Ordering::SeqCst), 0);
    assert_eq!(store.findings_hits.load(Ordering::SeqCst), 1);
    assert_eq!(project.json(&warm), project.json(&cold));

    // An edit that adds a finding: the file is parsed again, the package analysed again.
    let edited = dir.path().join("src/notify.rs");
    let mut text = std::fs::read_to_string(&edited).expect("read");
    text.push_str(NEW_FINDING);
    std::fs::write(&edited, text).expect("write");
    store.reset();
    let after = project.check(Some(&store), &[]);
    let edited = edited.canonicalize().expect("canonical");
    let reparsed: Vec<PathBuf> = parsed(&after)
        .iter()
        .map(|p| p.canonicalize().expect("canonical"))
        .collect();
    assert_eq!(reparsed, vec![edited]);
    // The package is analysed again: every other file's model is read back.
    assert_eq!(store.outline_hits.load(Ordering::SeqCst), files - 1);
    assert_eq!(store.model_hits.load(Ordering::SeqCst), files - 1);
    assert_eq!(store.findings_hits.load(Ordering::SeqCst), 0);
    let json = project.json(&after);
    assert_eq!(json, project.json(&project.check(None, &[])));
    assert!(json.contains("again:"), "the edit's finding is reported");
}

#[test]
fn broken_and_foreign_entries_are_ignored_and_rebuilt() {
    let dir = copy_of_demo();
    let cache_dir = tempfile::tempdir().expect("tempdir");
    let project = Project::load(dir.path());
    let expected = project.json(&project.check(None, &[]));
    let files = project.check(None, &[]).packages[0].package.files.len();
    {
        let cache = DiskCache::open_build(cache_dir.path(), 1).expect("opens");
        project.check(Some(&cache), &[]);
    }
    let build_dir = cache_dir.path().join(format!("{:032x}", 1u128));
    let stored = walk_files(&build_dir);
    // A model and an outline per file, and the package's findings.
    assert_eq!(stored.len(), 2 * files + 1, "{stored:?}");
    let first = std::fs::read(&stored[0]).expect("read");
    // Each entry broken another way: truncated, a flipped byte, empty, garbage, another
    // entry's content under this name.
    for (i, path) in stored.iter().enumerate() {
        let mut bytes = std::fs::read(path).expect("read");
        match i % 5 {
            0 => bytes.truncate(bytes.len() / 2),
            1 => {
                let last = bytes.len() - 1;
                bytes[last] ^= 0x55;
            }
            2 => bytes.clear(),
            3 => bytes = vec![0x08; 4096],
            _ => bytes = first.clone(),
        }
        std::fs::write(path, bytes).expect("write");
    }
    let cache = Counting::new(DiskCache::open_build(cache_dir.path(), 1).expect("opens"));
    let rerun = project.check(Some(&cache), &[]);
    assert_eq!(project.json(&rerun), expected);
    assert_eq!(parsed(&rerun).len(), files, "every broken entry is a miss");
    assert_eq!(cache.model_hits.load(Ordering::SeqCst), 0);
    assert_eq!(cache.outline_hits.load(Ordering::SeqCst), 0);
    assert_eq!(cache.findings_hits.load(Ordering::SeqCst), 0);
    // Rebuilt: the next run reads everything back.
    cache.reset();
    let again = project.check(Some(&cache), &[]);
    assert!(parsed(&again).is_empty());
    assert_eq!(cache.findings_hits.load(Ordering::SeqCst), 1);
    assert_eq!(project.json(&again), expected);
}

#[test]
fn another_build_reads_none_of_these_entries() {
    let dir = copy_of_demo();
    let cache_dir = tempfile::tempdir().expect("tempdir");
    let project = Project::load(dir.path());
    let expected = project.json(&project.check(None, &[]));
    let old = DiskCache::open_build(cache_dir.path(), 1).expect("opens");
    project.check(Some(&old), &[]);
    // The old build's files copied into the new build's directory are foreign too.
    let new = Counting::new(DiskCache::open_build(cache_dir.path(), 2).expect("opens"));
    for f in walk_files(old.dir()) {
        let to = new
            .inner
            .dir()
            .join(f.strip_prefix(old.dir()).expect("below"));
        std::fs::create_dir_all(to.parent().expect("parent")).expect("mkdir");
        std::fs::copy(&f, to).expect("copy");
    }
    let report = project.check(Some(&new), &[]);
    assert_eq!(
        parsed(&report).len(),
        report.packages[0].package.files.len()
    );
    assert_eq!(new.model_hits.load(Ordering::SeqCst), 0);
    assert_eq!(new.outline_hits.load(Ordering::SeqCst), 0);
    assert_eq!(new.findings_hits.load(Ordering::SeqCst), 0);
    assert_eq!(project.json(&report), expected);
}

#[test]
fn lints_and_settings_are_part_of_the_findings_key_and_levels_are_not() {
    let dir = copy_of_demo();
    let cache_dir = tempfile::tempdir().expect("tempdir");
    let store = Counting::new(DiskCache::open_build(cache_dir.path(), 3).expect("opens"));
    let flag = |level, name: &str| LevelFlag {
        level,
        name: name.to_string(),
    };
    let project = Project::load(dir.path());
    project.check(Some(&store), &[]);
    for flags in [
        vec![flag(Level::Allow, "nondeterministic_key")],
        vec![flag(Level::Deny, "warnings")],
    ] {
        store.reset();
        let cached = project.check(Some(&store), &flags);
        let plain = project.check(None, &flags);
        assert_eq!(project.json(&cached), project.json(&plain), "{flags:?}");
        let hits = store.findings_hits.load(Ordering::SeqCst);
        if flags[0].level == Level::Allow {
            assert_eq!(hits, 0, "a disabled lint must not reuse the findings");
        } else {
            assert_eq!(hits, 1, "a level change reuses the findings");
            assert!(project.json(&cached).contains("\"level\":\"error\""));
        }
    }
    // A lint setting from the config file.
    std::fs::write(
        dir.path().join("idem-lint.toml"),
        "[lints.check_then_act]\nchecks = [\"already_seen\"]\n",
    )
    .expect("write");
    let project = Project::load(dir.path());
    store.reset();
    let cached = project.check(Some(&store), &[]);
    assert_eq!(store.findings_hits.load(Ordering::SeqCst), 0);
    assert_eq!(
        project.json(&cached),
        project.json(&project.check(None, &[]))
    );
}

#[test]
fn concurrent_runs_on_one_cache_agree() {
    let dir = copy_of_demo();
    let cache_dir = tempfile::tempdir().expect("tempdir");
    let project = Project::load(dir.path());
    let expected = project.json(&project.check(None, &[]));
    let outputs: Vec<String> = std::thread::scope(|scope| {
        let runs: Vec<_> = (0..4)
            .map(|_| {
                scope.spawn(|| {
                    let cache = DiskCache::open_build(cache_dir.path(), 4).expect("opens");
                    (0..3)
                        .map(|_| project.json(&project.check(Some(&cache), &[])))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        runs.into_iter()
            .flat_map(|r| r.join().expect("no panic"))
            .collect()
    });
    for out in outputs {
        assert_eq!(out, expected);
    }
}

/// Space a file takes on disk (its allocated blocks), as the budget counts it.
fn disk_bytes(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).expect("stat").blocks() * 512
}

/// Whether `path` is an entry of `kind` (`models`, `outlines`, `findings`).
fn of_kind(path: &Path, kind: &str) -> bool {
    path.components().any(|c| c.as_os_str() == kind)
}

fn apparent_bytes(path: &Path) -> u64 {
    std::fs::metadata(path).expect("stat").len()
}

/// A cache directory holding the demo's entries twice: stale ones from a run before every
/// file was edited (`stale`) and the last run's own (`own`, still open in `cache`).
struct TwoGenerations {
    _dir: tempfile::TempDir,
    _cache_dir: tempfile::TempDir,
    cache: DiskCache,
    stale: Vec<PathBuf>,
    own: Vec<PathBuf>,
}

fn two_generations(build: u128) -> TwoGenerations {
    let dir = copy_of_demo();
    let cache_dir = tempfile::tempdir().expect("tempdir");
    let project = Project::load(dir.path());
    let old = DiskCache::open_build(cache_dir.path(), build).expect("opens");
    project.check(Some(&old), &[]);
    let stale = walk_files(old.dir());
    for f in walk_files(&dir.path().join("src")) {
        let mut text = std::fs::read_to_string(&f).expect("read");
        text.push_str("\n// edited\n");
        std::fs::write(&f, text).expect("write");
    }
    let cache = DiskCache::open_build(cache_dir.path(), build).expect("opens");
    project.check(Some(&cache), &[]);
    let own: Vec<PathBuf> = walk_files(cache.dir())
        .into_iter()
        .filter(|f| !stale.contains(f))
        .collect();
    assert_eq!(own.len(), stale.len());
    TwoGenerations {
        _dir: dir,
        _cache_dir: cache_dir,
        cache,
        stale,
        own,
    }
}

/// The smallest budget whose three quarters (what pruning brings a directory down to) hold
/// `bytes`.
fn budget_holding(bytes: u64) -> u64 {
    (bytes / 3 + 1) * 4
}

#[test]
fn pruning_keeps_what_the_run_used_and_drops_the_rest() {
    let g = two_generations(5);
    let own: u64 = g.own.iter().map(|f| disk_bytes(f)).sum();
    g.cache.prune_to(budget_holding(own));
    let left = walk_files(g.cache.dir());
    assert_eq!(left, g.own, "the run's own entries stay, the stale ones go");
}

/// Entries are far smaller than a disk block: counted by length, a directory several times
/// over its budget on disk looked well under it.
#[test]
fn pruning_counts_disk_blocks_not_lengths() {
    let g = two_generations(8);
    let all: Vec<&PathBuf> = g.stale.iter().chain(&g.own).collect();
    let apparent: u64 = all.iter().map(|f| apparent_bytes(f)).sum();
    let on_disk: u64 = all.iter().map(|f| disk_bytes(f)).sum();
    assert!(on_disk > 2 * apparent, "{on_disk} on disk, {apparent} long");
    // Over budget only when blocks are counted.
    g.cache.prune_to(apparent + 1);
    let left: u64 = walk_files(g.cache.dir())
        .iter()
        .map(|f| disk_bytes(f))
        .sum();
    assert!(left <= (apparent + 1) / 4 * 3, "{left} bytes left");
    assert!(
        g.stale.iter().all(|f| !f.exists()),
        "the stale entries go first"
    );
}

/// A workspace whose own entries exceed the budget keeps it all the same: the run's models
/// go (an unchanged re-run reads outlines and findings), its outlines and findings stay.
#[test]
fn a_run_whose_own_entries_exceed_the_budget_loses_its_models_first() {
    let g = two_generations(9);
    let models: Vec<&PathBuf> = g.own.iter().filter(|f| of_kind(f, "models")).collect();
    let rest: u64 = g
        .own
        .iter()
        .filter(|f| !models.contains(f))
        .map(|f| disk_bytes(f))
        .sum();
    assert!(!models.is_empty());
    g.cache.prune_to(budget_holding(rest));
    let left = walk_files(g.cache.dir());
    let kept_own: Vec<&PathBuf> = g.own.iter().filter(|f| left.contains(f)).collect();
    assert!(g.stale.iter().all(|f| !left.contains(f)), "stale first");
    assert!(models.iter().all(|f| !left.contains(f)), "then models");
    assert_eq!(kept_own.len(), g.own.len() - models.len(), "{left:?}");
    assert!(left.iter().any(|f| of_kind(f, "outlines")));
    assert!(left.iter().any(|f| of_kind(f, "findings")));
}

/// A run whose entries would pass its write budget stops writing them (models at half of it,
/// outlines at all of it; findings always), and prints what an uncached run prints, cold and
/// on the re-runs that read the partial cache (what they read counts against their budget,
/// so the cache settles instead of being written and pruned again on every run).
#[test]
fn a_run_stops_writing_at_its_write_budget_and_prints_the_same_findings() {
    const BLOCK: u64 = 4096;
    let dir = copy_of_demo();
    let project = Project::load(dir.path());
    let plain = project.json(&project.check(None, &[]));
    let files = project.check(None, &[]).packages[0].package.files.len();

    let cache_dir = tempfile::tempdir().expect("tempdir");
    let budget = 4 * BLOCK;
    let cache = DiskCache::open_build(cache_dir.path(), 21)
        .expect("opens")
        .with_write_budget(budget);
    assert_eq!(project.json(&project.check(Some(&cache), &[])), plain);
    let written = walk_files(cache.dir());
    // Each entry as the budget counts it: its length rounded up to whole blocks.
    let taken = |kind: &str| -> (usize, u64) {
        let of: Vec<&PathBuf> = written.iter().filter(|f| of_kind(f, kind)).collect();
        let bytes = of
            .iter()
            .map(|f| apparent_bytes(f).div_ceil(BLOCK) * BLOCK)
            .sum();
        (of.len(), bytes)
    };
    let (_, model_bytes) = taken("models");
    let (outlines, outline_bytes) = taken("outlines");
    let (findings, _) = taken("findings");
    assert!(model_bytes <= budget / 2, "{model_bytes} bytes of models");
    assert!(model_bytes + outline_bytes <= budget, "{written:?}");
    assert!(
        outlines >= 1 && outlines < files,
        "{outlines} of {files} outlines"
    );
    assert_eq!(findings, 1, "findings are written past the budget");

    // The re-run reads what there is, parses the rest and still prints the same.
    let rerun = DiskCache::open_build(cache_dir.path(), 21)
        .expect("opens")
        .with_write_budget(budget);
    assert_eq!(project.json(&project.check(Some(&rerun), &[])), plain);

    // Without the limit the same run writes an entry of each kind per file.
    let unlimited_dir = tempfile::tempdir().expect("tempdir");
    let unlimited = DiskCache::open_build(unlimited_dir.path(), 21).expect("opens");
    assert_eq!(project.json(&project.check(Some(&unlimited), &[])), plain);
    assert_eq!(walk_files(unlimited.dir()).len(), 2 * files + 1);
}

/// The entries a run reads count against its write budget: re-runs of a workspace too large
/// for the budget settle near it, instead of each writing a budget's worth more (which pruning
/// then deletes again, every run).
#[test]
fn entries_read_count_against_the_write_budget() {
    const BLOCK: u64 = 4096;
    const MODULES: usize = 40;
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("src")).expect("mkdir");
    std::fs::write(
        dir.path().join("Cargo.toml"),
        "[package]\nname = \"many\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .expect("write");
    let mut lib = String::new();
    for i in 0..MODULES {
        lib.push_str(&format!("mod m{i};\n"));
        let text = format!("pub fn f{i}(x: u64) -> u64 {{\n    x + {i}\n}}\n");
        std::fs::write(dir.path().join(format!("src/m{i}.rs")), text).expect("write");
    }
    std::fs::write(dir.path().join("src/lib.rs"), lib).expect("write");
    let project = Project::load(dir.path());
    let plain = project.json(&project.check(None, &[]));

    let cache_dir = tempfile::tempdir().expect("tempdir");
    let budget = 8 * BLOCK;
    for _ in 0..5 {
        let cache = DiskCache::open_build(cache_dir.path(), 22)
            .expect("opens")
            .with_write_budget(budget);
        assert_eq!(project.json(&project.check(Some(&cache), &[])), plain);
    }
    let cache = DiskCache::open_build(cache_dir.path(), 22).expect("opens");
    let outlines = walk_files(cache.dir())
        .iter()
        .filter(|f| of_kind(f, "outlines"))
        .count();
    // Each run reads every outline there is; without counting what it reads, five runs of a
    // budget of eight entries wrote the outline of every file. The margin is for the writes
    // racing the reads of one run on parallel threads.
    assert!(outlines <= 16, "{outlines} outlines of {MODULES} files");
}

/// Entries are spread over directories named by the key's first two hex digits, so no
/// directory holds every entry of a large workspace.
#[test]
fn entries_are_sharded_by_the_first_byte_of_their_key() {
    let g = two_generations(10);
    let mut shards = std::collections::HashSet::new();
    for f in g.own.iter().chain(&g.stale) {
        let name = f.file_name().and_then(|n| n.to_str()).expect("name");
        let shard = f.parent().expect("shard");
        let kind = shard.parent().expect("kind");
        assert_eq!(kind.parent(), Some(g.cache.dir()), "{}", f.display());
        assert_eq!(name.len(), 32, "{name}");
        assert_eq!(
            shard.file_name().and_then(|n| n.to_str()),
            Some(&name[..2]),
            "{}",
            f.display()
        );
        shards.insert(shard.to_path_buf());
    }
    assert!(shards.len() > 3, "{shards:?}");
}

#[test]
fn old_builds_beyond_the_most_recent_are_removed() {
    let cache_dir = tempfile::tempdir().expect("tempdir");
    for build in 1..=5u128 {
        DiskCache::open_build(cache_dir.path(), build).expect("opens");
        // Directory times must differ for "most recent" to mean something.
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let mut left: Vec<String> = std::fs::read_dir(cache_dir.path())
        .expect("list")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    let name = |b: u128| format!("{b:032x}");
    let tag = "CACHEDIR.TAG".to_string();
    assert_eq!(left, vec![name(3), name(4), name(5), tag]);
}

#[test]
fn a_session_parses_only_the_changed_buffer_and_lints_its_text() {
    let dir = copy_of_demo();
    let project = Project::load(dir.path());
    let session = Session::new();
    let mut buffers = Overlays::new();
    let check = |b: &Overlays| {
        session
            .check(&project.ws, &project.config, &[], b)
            .expect("checks")
    };
    let first = check(&buffers);
    let files = first.packages[0].package.files.len();
    assert_eq!(parsed(&first).len(), files);
    assert_eq!(session.files(), files);
    assert!(parsed(&check(&buffers)).is_empty());

    // An unsaved buffer with a new finding: only it is parsed, and its text is what is linted.
    let path = dir.path().join("src/notify.rs");
    let mut text = std::fs::read_to_string(&path).expect("read");
    text.push_str(NEW_FINDING);
    buffers.insert(&path, text.as_str());
    let edited = check(&buffers);
    assert_eq!(parsed(&edited).len(), 1);
    assert_ne!(project.json(&edited), project.json(&first));
    // What the buffer shows is what the saved file would show.
    std::fs::write(&path, &text).expect("write");
    assert_eq!(
        project.json(&edited),
        project.json(&project.check(None, &[]))
    );
    // Closing the buffer on the saved file: same text, nothing parsed.
    buffers.remove(&path);
    assert!(parsed(&check(&buffers)).is_empty());
}

/// Entries made with another user's secret (a `target/idem-lint/` committed to a pull
/// request, say) belong to another build: this run neither reads them nor can its own be
/// forged without the secret.
#[test]
fn another_secret_is_another_build() {
    let demo = copy_of_demo();
    let cache = tempfile::tempdir().expect("tempdir");
    let secrets = tempfile::tempdir().expect("tempdir");
    let build_dirs = || {
        std::fs::read_dir(cache.path())
            .map(|d| d.flatten().filter(|e| e.path().is_dir()).count())
            .unwrap_or(0)
    };
    let run = |secret: &str| {
        let secret = secrets.path().join(secret);
        let env = [
            ("IDEM_LINT_CACHE_DIR", s(cache.path())),
            ("IDEM_LINT_CACHE_SECRET", s(&secret)),
        ];
        run_env(
            &common::repo(),
            &[s(demo.path()), "--message-format", "short"],
            &env,
        )
    };
    let uncached = lint(demo.path(), "short", None);
    let a = run("a");
    assert_eq!(a.stdout, uncached.stdout);
    assert_eq!(build_dirs(), 1);
    let b = run("b");
    assert_eq!(b.stdout, uncached.stdout);
    assert_eq!(
        build_dirs(),
        2,
        "a second secret opens a second build directory"
    );
    let (sa, sb) = (
        std::fs::read(secrets.path().join("a")).expect("secret a"),
        std::fs::read(secrets.path().join("b")).expect("secret b"),
    );
    assert_eq!((sa.len(), sb.len()), (32, 32));
    assert_ne!(sa, sb);
    // The same secret finds its own build again.
    run("a");
    assert_eq!(build_dirs(), 2);
}

/// On an unchanged re-run the findings come from the cache and the models stay unread, except
/// in files with suppression comments: an item's comment covers the item's span, which only
/// the model knows. The suppressed finding stays hidden, the other one is reported.
#[test]
fn a_warm_run_reads_the_models_of_files_with_suppression_comments_only() {
    let dir = copy_of_demo();
    let edited = dir.path().join("src/notify.rs");
    let mut text = std::fs::read_to_string(&edited).expect("read");
    let appended = text.len();
    text.push_str("\n// idem-lint: allow(nondeterministic_key)");
    text.push_str(NEW_FINDING);
    let unsuppressed = text.len();
    text.push_str(&NEW_FINDING.replace("notify_again", "notify_twice"));
    std::fs::write(&edited, text).expect("write");
    let cache_dir = tempfile::tempdir().expect("tempdir");
    let store = Counting::new(DiskCache::open_build(cache_dir.path(), 8).expect("opens"));
    let project = Project::load(dir.path());
    let report = project.check(None, &[]);
    // Of the two appended fns, only the one without the comment is reported.
    let appended_findings: Vec<u32> = report
        .findings
        .iter()
        .filter(|f| f.diag.lint.name == "nondeterministic_key")
        .filter(|f| {
            report
                .source(0, f.diag.span.file)
                .path
                .ends_with("src/notify.rs")
        })
        .map(|f| f.diag.span.lo)
        .filter(|lo| *lo as usize >= appended)
        .collect();
    assert_eq!(appended_findings.len(), 1, "{appended_findings:?}");
    assert!(appended_findings[0] as usize >= unsuppressed);
    let plain = project.json(&report);
    project.check(Some(&store), &[]);
    store.reset();
    let warm = project.check(Some(&store), &[]);
    assert_eq!(project.json(&warm), plain);
    assert_eq!(store.findings_hits.load(Ordering::SeqCst), 1);
    assert_eq!(
        store.model_hits.load(Ordering::SeqCst),
        1,
        "only the file with the comment"
    );
}

/// An outline whose model is gone (pruned, or broken) is parsed again from the text when the
/// package must be analysed: the output does not change.
#[test]
fn a_missing_model_behind_an_outline_is_parsed_again() {
    let dir = copy_of_demo();
    let cache_dir = tempfile::tempdir().expect("tempdir");
    let project = Project::load(dir.path());
    let cache = DiskCache::open_build(cache_dir.path(), 9).expect("opens");
    project.check(Some(&cache), &[]);
    for f in walk_files(&cache.dir().join("models")) {
        std::fs::remove_file(f).expect("remove");
    }
    for f in walk_files(&cache.dir().join("findings")) {
        std::fs::remove_file(f).expect("remove");
    }
    let rerun = project.check(Some(&cache), &[]);
    let files = rerun.packages[0].package.files.len();
    assert_eq!(parsed(&rerun).len(), files, "every model parsed again");
    assert_eq!(
        project.json(&rerun),
        project.json(&project.check(None, &[]))
    );
}

/// When a model behind an outline can be neither read nor parsed again (here: no time to parse),
/// the package is loaded again without outlines, as an uncached run loads it: the files that
/// do not parse lead to no modules and are reported.
#[test]
fn a_model_that_cannot_be_rebuilt_loads_the_package_again() {
    let dir = copy_of_demo();
    let cache_dir = tempfile::tempdir().expect("tempdir");
    let project = Project::load(dir.path());
    let cache = DiskCache::open_build(cache_dir.path(), 10).expect("opens");
    project.check(Some(&cache), &[]);
    for kind in ["models", "findings"] {
        for f in walk_files(&cache.dir().join(kind)) {
            std::fs::remove_file(f).expect("remove");
        }
    }
    let no_time = ParseOptions {
        file_timeout: std::time::Duration::ZERO,
        ..ParseOptions::default()
    };
    let rerun = project.check_opts(Some(&cache), &[], &no_time);
    let plain = project.check_opts(None, &[], &no_time);
    assert_eq!(project.json(&rerun), project.json(&plain));
    assert!(project.json(&plain).contains("parsing took longer"));
    assert_eq!(
        rerun.packages[0].package.files.len(),
        plain.packages[0].package.files.len()
    );
}
