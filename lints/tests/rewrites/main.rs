//! The rewrite suite: every fixture crate of every lint, rewritten in ways that keep its
//! meaning ([`rules::ALL`]), must keep its findings, and its negatives must stay silent.
//!
//! A variant is one fixture crate with one rewrite applied to every file it changes (or, for
//! a crate rewrite, to the crate at once: it may add files, declared by a `mod` line). Its
//! expected findings are its `//~` annotations (the rewrites keep them on their lines). A
//! finding may move inside its function (a split statement reports where the call now
//! starts), so findings and annotations are compared per function and lint: a finding
//! matched by an annotation in the same function is kept, an annotation without one is
//! lost, a finding beyond the annotations is a negative flagged. A finding inside a fn the
//! rewrite added (the helper a step, a key or a builder moved to) counts at the call of
//! that fn. Each fixture is checked with its `idem-lint.toml` (levels and settings), so the
//! allow-by-default lints are covered where their fixtures turn them on.
//!
//! The robustness table is printed (`cargo test -p idem-lints --test rewrites --
//! --nocapture`); the test fails on any negative flagged and when a lint keeps less than
//! [`MIN_KEPT`] of its findings under a rewrite the lints are expected to see through.

mod config;
mod edit;
mod rules;

use config::FixtureConfig;
use idem_lints::testing::{self, line_of, parse_annotations};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use syn::spanned::Spanned;
use syn::visit::{self, Visit};

/// The fixture trees and the lints their own tests hold them to.
const ROOTS: &[(&str, &[&str])] = &[
    (
        "../fixtures/check_then_act",
        &["check_then_act", "nondeterministic_key"],
    ),
    (
        "../fixtures/nondeterministic_key",
        &["check_then_act", "nondeterministic_key"],
    ),
    ("../fixtures/mark_outside_transaction", &[]),
    ("../fixtures/unguarded_entry_point", &[]),
    (
        "../fixtures/missing_idempotency_token",
        &["missing_idempotency_token"],
    ),
    (
        "../fixtures/claim_without_expiry",
        &["claim_without_expiry"],
    ),
    ("../fixtures/claim_not_released", &["claim_not_released"]),
    (
        "../fixtures/ttl_shorter_than_redelivery",
        &["ttl_shorter_than_redelivery"],
    ),
    ("../fixtures/retry_without_backoff", &[]),
    ("../fixtures/dead_letter_without_context", &[]),
    ("../fixtures/kafka_producer_not_idempotent", &[]),
    (
        "../fixtures/non_idempotent_update",
        &["non_idempotent_update"],
    ),
    ("../fixtures/key_without_stage", &["key_without_stage"]),
];

/// Kept findings per lint the suite requires, in percent.
const MIN_KEPT: usize = 95;

/// Variants left out of the counts, each with its reason (also in the lint's `--explain`,
/// "Known problems"): `(rewrite, lint, fixture file, reason)`.
const KNOWN_GAPS: &[(&str, &str, &str, &str)] = &[
    (
        "if_as_match",
        "nondeterministic_key",
        "nondeterministic_key/origin_and_consumer/src/client.rs",
        "a key minted in the `true` arm of a `match` on a presence test (`match \
     !headers.contains_key(..) { true => mint }`) is not read as minted when absent; only \
     the `if` form is",
    ),
    (
        "tokio_spawn_body",
        "check_then_act",
        "check_then_act/marker_values/src/lib.rs",
        WRAPPED_PURE_HELPER,
    ),
    (
        "retry_closure_body",
        "check_then_act",
        "check_then_act/marker_values/src/lib.rs",
        WRAPPED_PURE_HELPER,
    ),
    (
        "futures_join_body",
        "check_then_act",
        "check_then_act/marker_values/src/lib.rs",
        WRAPPED_PURE_HELPER,
    ),
];

/// Issue 37's skipped-work marker needs outside work between the check and the record; a
/// pure crate fn (`render`) whose own body these rewrites wrap in a spawn, a retry closure
/// or a join awaits another crate's call, so its summary has effects and the cache-aside of
/// `sled_cache_of_a_rendered_page` reads as work recorded.
const WRAPPED_PURE_HELPER: &str = "a pure helper whose body is wrapped in an awaited spawn, \
     retry or join counts as having effects, so the cache-aside that calls it reads as a \
     record of outside work";

/// The reason a lost or flagged finding is a known gap, if it is one.
fn known_gap(rewrite: &str, lint: &str, file: &Path) -> Option<&'static str> {
    KNOWN_GAPS
        .iter()
        .find(|(r, l, f, _)| *r == rewrite && *l == lint && file.ends_with(f))
        .map(|g| g.3)
}

/// Counts of one table cell.
#[derive(Debug, Default, Clone, Copy)]
struct Cell {
    variants: usize,
    expected: usize,
    kept: usize,
    flagged: usize,
    /// Lost or flagged in a [`KNOWN_GAPS`] variant: not counted above.
    excluded: usize,
}

impl Cell {
    fn add(&mut self, other: Cell) {
        self.variants += other.variants;
        self.expected += other.expected;
        self.kept += other.kept;
        self.flagged += other.flagged;
        self.excluded += other.excluded;
    }

    fn percent(&self) -> usize {
        (self.kept * 100).checked_div(self.expected).unwrap_or(100)
    }
}

/// `(lint, rewrite)` cells, and what was lost or flagged, for the report.
#[derive(Default)]
struct Table {
    cells: BTreeMap<(String, &'static str), Cell>,
    problems: Vec<String>,
}

/// The line ranges of the fns of one file (with their names): the innermost one holding a
/// line is its bucket.
struct FnRanges(Vec<(usize, usize, String)>);

impl<'ast> Visit<'ast> for FnRanges {
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        let name = f.sig.ident.to_string();
        self.0
            .push((f.span().start().line, f.span().end().line, name));
        visit::visit_item_fn(self, f);
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        let name = f.sig.ident.to_string();
        self.0
            .push((f.span().start().line, f.span().end().line, name));
        visit::visit_impl_item_fn(self, f);
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        let name = f.sig.ident.to_string();
        self.0
            .push((f.span().start().line, f.span().end().line, name));
        visit::visit_trait_item_fn(self, f);
    }
}

impl FnRanges {
    fn of(text: &str) -> FnRanges {
        let mut r = FnRanges(Vec::new());
        if let Ok(file) = syn::parse_file(text) {
            r.visit_file(&file);
        }
        r
    }

    /// The first line of the innermost fn holding `line`, or 0 outside any.
    fn bucket(&self, line: usize) -> usize {
        self.innermost(line).map_or(0, |(lo, ..)| *lo)
    }

    fn innermost(&self, line: usize) -> Option<&(usize, usize, String)> {
        self.0
            .iter()
            .filter(|(lo, hi, _)| (*lo..=*hi).contains(&line))
            .min_by_key(|(lo, hi, _)| hi - lo)
    }
}

/// The file declaring the module of the file at `path`: `src/a/m.rs` is declared in
/// `src/a.rs` (or `src/a/mod.rs`), `src/m.rs` in `src/lib.rs` or `src/main.rs`.
fn parent_file(sources: &[(PathBuf, String)], path: &Path) -> Option<usize> {
    let dir = path.parent()?;
    let candidates = [
        dir.join("lib.rs"),
        dir.join("main.rs"),
        dir.join("mod.rs"),
        dir.with_extension("rs"),
    ];
    candidates
        .iter()
        .find_map(|c| sources.iter().position(|(p, _)| p == c))
}

/// The fn names of each file of the fixture before the rewrite.
type Original = Vec<std::collections::HashSet<String>>;

/// Where a finding in a fn the rewrite added (a helper a step, a key or a builder moved to,
/// in its file or a file it added) counts: at the call of that fn (`name(` not after `fn `),
/// followed through added helpers (two levels deep), so the finding the helper now holds is
/// the one the call site had.
fn call_site(
    sources: &[(PathBuf, String)],
    ranges: &[FnRanges],
    original: &Original,
    (mut file, mut line): (usize, usize),
) -> (usize, usize) {
    for _ in 0..4 {
        let Some((.., name)) = ranges[file].innermost(line) else {
            break;
        };
        let added = original.get(file).is_none_or(|names| !names.contains(name));
        if !added {
            break;
        }
        let call = format!("{name}(");
        // Called from its own file (the second of two helpers) or from the module's parent.
        let parent = parent_file(sources, &sources[file].0);
        let site = [Some(file), parent].into_iter().flatten().find_map(|i| {
            sources[i].1.lines().enumerate().find_map(|(n, l)| {
                let at = l.find(&call)?;
                let before = &l[..at];
                let whole = !before.ends_with(|c: char| c.is_alphanumeric() || c == '_');
                (whole && !before.trim_end().ends_with("fn")).then_some((i, n + 1))
            })
        });
        let Some(site) = site else {
            break;
        };
        (file, line) = site;
    }
    (file, ranges[file].bucket(line))
}

/// `(file, fn bucket, lint)` -> count.
type Buckets = BTreeMap<(usize, usize, String), usize>;

/// Lints one variant and adds its counts to `table`.
fn check_variant(
    table: &mut Table,
    dir: &Path,
    rewrite: &'static str,
    sources: &[(PathBuf, String)],
    lints: &[&str],
    config: &FixtureConfig,
    original: &Original,
) {
    let relevant = |l: &str| lints.is_empty() || lints.contains(&l);
    let ranges: Vec<FnRanges> = sources.iter().map(|(_, t)| FnRanges::of(t)).collect();
    let mut want = Buckets::new();
    for (file, (_, text)) in sources.iter().enumerate() {
        for a in parse_annotations(text).expect("annotations survive the rewrite") {
            if relevant(&a.lint) {
                *want
                    .entry((file, ranges[file].bucket(a.line), a.lint))
                    .or_default() += 1;
            }
        }
    }
    let package = testing::package_of_sources(dir, sources);
    let mut got = Buckets::new();
    for d in config.check(&package) {
        let file = d.span.file.0 as usize;
        if relevant(d.lint.name) {
            let line = line_of(&sources[file].1, d.span.lo);
            let (file, bucket) = call_site(sources, &ranges, original, (file, line));
            *got.entry((file, bucket, d.lint.name.to_owned()))
                .or_default() += 1;
        }
    }
    let mut per_lint: BTreeMap<String, Cell> = BTreeMap::new();
    for key in want.keys().chain(got.keys()) {
        per_lint.entry(key.2.clone()).or_default();
    }
    for (lint, cell) in per_lint.iter_mut() {
        cell.variants = 1;
        let gap = |file: usize| known_gap(rewrite, lint, &sources[file].0);
        for (key, &n) in want.iter().filter(|(k, _)| &k.2 == lint) {
            let found = got.get(key).copied().unwrap_or(0);
            if found < n && gap(key.0).is_some() {
                cell.excluded += n - found;
                continue;
            }
            cell.expected += n;
            cell.kept += n.min(found);
            if found < n {
                table.problems.push(format!(
                    "lost     {rewrite:<22} {lint:<26} {} (fn at line {}): {} of {n}",
                    sources[key.0].0.display(),
                    key.1,
                    n - found,
                ));
            }
        }
        for (key, &n) in got.iter().filter(|(k, _)| &k.2 == lint) {
            let allowed = want.get(key).copied().unwrap_or(0);
            if n > allowed && gap(key.0).is_some() {
                cell.excluded += n - allowed;
                continue;
            }
            if n > allowed {
                cell.flagged += n - allowed;
                table.problems.push(format!(
                    "flagged  {rewrite:<22} {lint:<26} {} (fn at line {})",
                    sources[key.0].0.display(),
                    key.1
                ));
            }
        }
    }
    for (lint, cell) in per_lint {
        table.cells.entry((lint, rewrite)).or_default().add(cell);
    }
}

fn run_suite() -> Table {
    let mut table = Table::default();
    for (root, lints) in ROOTS {
        for dir in testing::fixture_crates(Path::new(root)) {
            let config = FixtureConfig::of(&dir);
            let sources = testing::fixture_sources(&dir);
            let original: Original = sources
                .iter()
                .map(|(_, text)| FnRanges::of(text).0.into_iter().map(|r| r.2).collect())
                .collect();
            for rule in rules::ALL {
                if let Some(variant) = rule.apply.to_crate(&sources) {
                    dump_variant(&dir, rule.name, &variant);
                    check_variant(
                        &mut table, &dir, rule.name, &variant, lints, &config, &original,
                    );
                }
            }
        }
    }
    table
}

/// With `IDEM_REWRITE_DUMP=DIR`, the variants are written under `DIR/<fixture>/<rewrite>/` to
/// read what a lost or flagged finding was reported on.
fn dump_variant(dir: &Path, rewrite: &str, sources: &[(PathBuf, String)]) {
    let Some(out) = std::env::var_os("IDEM_REWRITE_DUMP") else {
        return;
    };
    let fixture = dir.file_name().unwrap_or_default();
    for (path, text) in sources {
        let rel = path.strip_prefix(dir).unwrap_or(path);
        let to = Path::new(&out).join(fixture).join(rewrite).join(rel);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).expect("dump directory is writable");
        }
        std::fs::write(&to, text).expect("dump file is writable");
    }
}

fn render(table: &Table) -> String {
    let mut out = String::from(
        "lint                        rewrite                 variants  expected  kept  kept%  flagged  excluded\n",
    );
    let mut totals: BTreeMap<&str, Cell> = BTreeMap::new();
    for ((lint, rewrite), cell) in &table.cells {
        totals.entry(lint).or_default().add(*cell);
        out.push_str(&format!(
            "{lint:<27} {rewrite:<23} {:>8}  {:>8}  {:>4}  {:>4}%  {:>7}  {:>8}\n",
            cell.variants,
            cell.expected,
            cell.kept,
            cell.percent(),
            cell.flagged,
            cell.excluded
        ));
    }
    for (lint, cell) in totals {
        out.push_str(&format!(
            "{lint:<27} {:<23} {:>8}  {:>8}  {:>4}  {:>4}%  {:>7}  {:>8}\n",
            "(all rewrites)",
            cell.variants,
            cell.expected,
            cell.kept,
            cell.percent(),
            cell.flagged,
            cell.excluded
        ));
    }
    out
}

#[test]
fn rewrites_keep_findings() {
    let table = run_suite();
    println!("{}", render(&table));
    for p in &table.problems {
        println!("{p}");
    }
    for (rewrite, lint, file, reason) in KNOWN_GAPS {
        println!("excluded {rewrite:<22} {lint:<26} {file}: {reason}");
    }
    let mut failures = Vec::new();
    let mut totals: BTreeMap<&str, Cell> = BTreeMap::new();
    for ((lint, _), cell) in &table.cells {
        totals.entry(lint).or_default().add(*cell);
    }
    for (lint, cell) in totals {
        if cell.flagged > 0 {
            failures.push(format!("{lint}: {} negatives flagged", cell.flagged));
        }
        if cell.percent() < MIN_KEPT {
            failures.push(format!(
                "{lint}: {}% of findings kept, below {MIN_KEPT}%",
                cell.percent()
            ));
        }
    }
    assert!(
        !table.cells.is_empty(),
        "no variant was made: the rewrites found nothing to change"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
