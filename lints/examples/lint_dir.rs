//! Runs the lints over crate directories and prints every finding with its labels, notes and
//! help, for reading the findings on real crates: `cargo run -p idem-lints --example lint_dir
//! -- DIR...` (each DIR holds `Cargo.toml` and `src/`, or is a directory of `.rs` files).
//! Files that do not parse are skipped.
//!
//! Targets come from the layout: `src/lib.rs` and the modules below it, and `src/main.rs`,
//! `src/bin/*.rs` and `examples/*.rs` as binaries (so `main` is an entry point).

use idem_lints::model::{lower_file, FileId, Package, TargetInfo};
use idem_lints::testing::{collect_rs, line_of, manifest_dependencies, module_of};
use idem_lints::Settings;
use std::path::{Path, PathBuf};

fn main() {
    let mut total = 0;
    // `--stats`: also count what the analysis saw (store operations by kind, branches on
    // them, key sinks reached), to check that real code is understood, not only linted.
    let stats = std::env::args().any(|a| a == "--stats");
    for dir in std::env::args().skip(1).filter(|a| a != "--stats") {
        let dir = PathBuf::from(dir);
        let (package, texts) = load(&dir);
        if stats {
            print_stats(&dir, &package);
        }
        let diags = idem_lints::testing::check(&package, &Settings::default());
        println!(
            "== {} ({} files): {} findings",
            dir.display(),
            texts.len(),
            diags.len()
        );
        total += diags.len();
        for d in &diags {
            let at = |s: idem_lints::model::Span| {
                let f = &package.files[s.file.0 as usize];
                let text = &texts[s.file.0 as usize];
                let line = line_of(text, s.lo);
                let snippet = text.lines().nth(line - 1).unwrap_or("").trim();
                format!("{}:{line}: {snippet}", f.path.display())
            };
            println!("{}: {}", d.lint.name, d.message);
            println!(
                "   --> {}  [{}]",
                at(d.span),
                d.label.as_deref().unwrap_or("")
            );
            for l in &d.labels {
                println!("   - {}  [{}]", at(l.span), l.message);
            }
            for n in &d.notes {
                println!("   = note: {n}");
            }
            for h in &d.help {
                println!("   = help: {h}");
            }
        }
    }
    println!("total findings: {total}");
}

fn print_stats(dir: &Path, package: &Package) {
    let analysis = idem_lints::analysis::Analysis::new(package);
    let summaries = analysis.summaries(package);
    let mut ops = std::collections::BTreeMap::new();
    let (mut decisions, mut key_uses, mut guards) = (0, 0, 0);
    for id in summaries.ids() {
        let flow = summaries.flow(id);
        for e in flow.store_events.iter().filter(|e| e.via.is_none()) {
            *ops.entry(format!("{:?}/{:?}", e.access.store, e.access.access))
                .or_insert(0) += 1;
        }
        decisions += flow.decisions.len();
        if std::env::var_os("FLOW_DUMP").is_some() && !flow.decisions.is_empty() {
            let (file, f) = id.def(package);
            println!("  fn {} ({})", f.display_name(), file.path.display());
            for e in &flow.store_events {
                let a = &e.access;
                println!(
                    "    {:?} {:?} `{}` key={:?} marker={} checked={} via={}",
                    a.store,
                    a.access,
                    a.command,
                    a.key.as_ref().map(|k| k.text.as_str()),
                    a.value_is_marker,
                    e.checked,
                    e.via.is_some()
                );
            }
            for d in &flow.decisions {
                let b: Vec<_> = d
                    .branches
                    .iter()
                    .map(|b| (b.diverges, b.when_present))
                    .collect();
                println!("    decision on {:?}: branches {b:?}", d.ops);
            }
        }
        key_uses += flow.key_uses.len();
        guards += usize::from(summaries.summary(id).is_guard());
    }
    if !ops.is_empty() || key_uses > 0 {
        println!(
            "stats {}: ops {ops:?}, decisions on ops {decisions}, key sinks reached by params or sources {key_uses}, guard fns {guards}",
            dir.display()
        );
    }
    print_path_stats(dir, package, &analysis);
}

/// What the call-graph lints saw: entry points by kind, fns reached with and without a guard,
/// fns with side effects of their own, completion marks and transactions.
fn print_path_stats(dir: &Path, package: &Package, analysis: &idem_lints::analysis::Analysis) {
    use idem_lints::analysis::completion::{Completion, Role};
    use idem_lints::analysis::effects::Effects;
    use idem_lints::analysis::entry::entry_points;
    use idem_lints::analysis::guards::{GuardFinder, GuardedPaths};
    let graph = analysis.call_graph(package);
    let summaries = analysis.summaries(package);
    let entries = entry_points(
        package,
        &analysis.resolver,
        graph,
        &analysis.catalog.frameworks,
        &[],
    );
    let mut kinds = std::collections::BTreeMap::new();
    for e in &entries {
        *kinds.entry(format!("{:?}", e.kind)).or_insert(0) += 1;
    }
    let finder = GuardFinder::new(package, &analysis.resolver, graph, summaries, &[]);
    let paths = GuardedPaths::compute(&finder, entries);
    let reached = |guarded: bool| {
        graph
            .ids()
            .filter(|&id| match guarded {
                true => paths.reached_guarded(graph, id),
                false => paths.reached_unguarded(graph, id),
            })
            .count()
    };
    let effects = Effects::compute(
        package,
        &analysis.resolver,
        &analysis.types,
        graph,
        summaries,
        &[],
    );
    let own_effects = graph
        .ids()
        .filter(|&id| {
            effects
                .witness(graph, id)
                .is_some_and(|(chain, _)| chain.is_empty())
        })
        .count();
    let completion = Completion::new(package, &analysis.resolver, graph, summaries, &[]);
    let marks = graph
        .ids()
        .filter(|&id| {
            completion
                .writes(id)
                .iter()
                .any(|w| w.role == Role::Mark && w.via.is_none())
        })
        .count();
    let txs = graph
        .ids()
        .filter(|&id| !completion.transactions(id).is_empty())
        .count();
    let edges: usize = graph.ids().map(|id| graph.calls(id).len()).sum();
    println!(
        "paths {}: {} fns, {edges} edges, entries {kinds:?}, reached guarded/unguarded {}/{}, fns with own effects {own_effects}, with marks {marks}, with transactions {txs}",
        dir.display(),
        graph.len(),
        reached(true),
        reached(false)
    );
}

fn load(dir: &Path) -> (Package, Vec<String>) {
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml"))
        .or_else(|_| std::fs::read_to_string(dir.join("../Cargo.toml")))
        .unwrap_or_default();
    let name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("x")
        .trim_end_matches(|c: char| c.is_ascii_digit() || c == '.' || c == '-')
        .replace('-', "_");
    let mut package = Package {
        name: name.clone(),
        dependencies: manifest_dependencies(&manifest),
        ..Package::default()
    };
    let mut texts = Vec::new();
    let mut add = |package: &mut Package, path: &Path, module: Vec<String>, target: usize| {
        let Ok(text) = std::fs::read_to_string(path) else {
            return;
        };
        let id = FileId(package.files.len() as u32);
        let Ok(mut f) = lower_file(&text, id, module, false) else {
            return;
        };
        f.path = path.to_path_buf();
        f.target = target;
        package.files.push(std::sync::Arc::new(f));
        texts.push(text);
    };
    // A crate's `src/`, or a directory of `.rs` files (an `examples/` folder) as one library.
    let src = if dir.join("src").is_dir() {
        dir.join("src")
    } else {
        dir.to_path_buf()
    };
    let mut files = Vec::new();
    collect_rs(&src, &mut files);
    files.sort();
    // The library owns the module tree below `src/`; without one, `src/main.rs` does.
    let has_lib = src.join("lib.rs").is_file() || !dir.join("src").is_dir();
    let main = src.join("main.rs");
    let mut roots: Vec<(PathBuf, &str)> = Vec::new();
    if has_lib {
        roots.push((src.join("lib.rs"), "lib"));
    }
    if main.is_file() {
        roots.push((main.clone(), "bin"));
    }
    for extra in ["src/bin", "examples"] {
        let Ok(rd) = std::fs::read_dir(dir.join(extra)) else {
            continue;
        };
        let mut bins: Vec<PathBuf> = rd
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "rs"))
            .collect();
        bins.sort();
        roots.extend(bins.into_iter().map(|b| (b, "bin")));
    }
    for (t, (root, kind)) in roots.iter().enumerate() {
        let target_name = match *kind {
            "lib" => name.clone(),
            _ => root
                .file_stem()
                .unwrap()
                .to_string_lossy()
                .replace('-', "_"),
        };
        package.targets.push(TargetInfo {
            name: target_name,
            kind: vec![kind.to_string()],
            root: root.clone(),
        });
        let owns_tree = t == 0 && (has_lib || *root == main);
        if !owns_tree {
            add(&mut package, root, vec!["crate".into()], t);
            continue;
        }
        for p in &files {
            let rel = p.strip_prefix(&src).unwrap();
            let other_root = rel.starts_with("bin") || has_lib && rel == Path::new("main.rs");
            if !other_root {
                add(&mut package, p, module_of(rel), t);
            }
        }
    }
    (package, texts)
}
