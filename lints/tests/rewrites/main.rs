//! The rewrite suite: every fixture crate of every lint, rewritten in ways that keep its
//! meaning ([`rules::ALL`]), must keep its findings, and its negatives must stay silent.
//!
//! A variant is one fixture crate with one rewrite applied to every file it changes. Its
//! expected findings are its `//~` annotations (the rewrites keep them on their lines). A
//! finding may move inside its function (a split statement reports where the call now
//! starts), so findings and annotations are compared per function and lint: a finding
//! matched by an annotation in the same function is kept, an annotation without one is
//! lost, a finding beyond the annotations is a negative flagged.
//!
//! The robustness table is printed (`cargo test -p idem-lints --test rewrites --
//! --nocapture`); the test fails on any negative flagged and when a lint keeps less than
//! [`MIN_KEPT`] of its findings under a rewrite the lints are expected to see through.

mod edit;
mod rules;

use idem_lints::testing::{self, line_of, parse_annotations};
use idem_lints::Settings;
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
        "../fixtures/non_idempotent_update",
        &["non_idempotent_update"],
    ),
    ("../fixtures/key_without_stage", &["key_without_stage"]),
];

/// Kept findings per lint the suite requires, in percent.
const MIN_KEPT: usize = 95;

/// Variants left out of the counts, each with its reason (also in the lint's `--explain`,
/// "Known problems"): `(rewrite, lint, fixture file, reason)`.
const KNOWN_GAPS: &[(&str, &str, &str, &str)] = &[(
    "if_as_match",
    "nondeterministic_key",
    "nondeterministic_key/origin_and_consumer/src/client.rs",
    "a key minted in the `true` arm of a `match` on a presence test (`match \
     !headers.contains_key(..) { true => mint }`) is not read as minted when absent; only \
     the `if` form is",
)];

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

/// The line ranges of the fns of one file: the innermost one holding a line is its bucket.
struct FnRanges(Vec<(usize, usize)>);

impl<'ast> Visit<'ast> for FnRanges {
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.0.push((f.span().start().line, f.span().end().line));
        visit::visit_item_fn(self, f);
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        self.0.push((f.span().start().line, f.span().end().line));
        visit::visit_impl_item_fn(self, f);
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        self.0.push((f.span().start().line, f.span().end().line));
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
        self.0
            .iter()
            .filter(|(lo, hi)| (*lo..=*hi).contains(&line))
            .min_by_key(|(lo, hi)| hi - lo)
            .map_or(0, |(lo, _)| *lo)
    }
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
    // The root's lints are checked even when off by default.
    let enabled = |l: &idem_lints::Lint| {
        l.default_level != idem_lints::Level::Allow || lints.contains(&l.name)
    };
    for d in idem_lints::check_package(&package, &Settings::default(), &enabled) {
        let file = d.span.file.0 as usize;
        if relevant(d.lint.name) {
            let line = line_of(&sources[file].1, d.span.lo);
            *got.entry((file, ranges[file].bucket(line), d.lint.name.to_owned()))
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
            // Fixtures configured by an `idem-lint.toml` are held to it by their own test,
            // unless all it does is turn on the root's lints (off by default).
            if dir.join("idem-lint.toml").is_file() && !only_enables(&dir, lints) {
                continue;
            }
            let sources = testing::fixture_sources(&dir);
            for rule in rules::ALL {
                let mut changed = false;
                let variant: Vec<(PathBuf, String)> = sources
                    .iter()
                    .map(|(path, text)| match (rule.apply)(text) {
                        Some(out) => {
                            changed = true;
                            (path.clone(), out)
                        }
                        None => (path.clone(), text.clone()),
                    })
                    .collect();
                if changed {
                    dump_variant(&dir, rule.name, &variant);
                    check_variant(&mut table, &dir, rule.name, &variant, lints);
                }
            }
        }
    }
    table
}

/// Whether `dir`'s `idem-lint.toml` only sets levels of `lints`: `[lints]` and `name = "warn"`.
fn only_enables(dir: &Path, lints: &[&str]) -> bool {
    let text = std::fs::read_to_string(dir.join("idem-lint.toml")).unwrap_or_default();
    !lints.is_empty()
        && text.lines().map(str::trim).all(|l| {
            l.is_empty()
                || l.starts_with('#')
                || l == "[lints]"
                || l.split_once('=').is_some_and(|(name, level)| {
                    lints.contains(&name.trim()) && level.trim() == "\"warn\""
                })
        })
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
