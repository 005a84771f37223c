//! Runs this branch's lints over crate directories and prints every finding with its labels,
//! for reading the findings on real crates: `cargo run -p idem-lints --example lint_dir --
//! DIR...` (each DIR holds `Cargo.toml` and `src/`). Files that do not parse are skipped.

use idem_lints::model::{lower_file, FileId, FileModel, Package, TargetInfo};
use idem_lints::testing::{line_of, manifest_dependencies, module_of};
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
}

fn load(dir: &Path) -> (Package, Vec<String>) {
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml"))
        .or_else(|_| std::fs::read_to_string(dir.join("../Cargo.toml")))
        .unwrap_or_default();
    // A crate's `src/`, or a directory of `.rs` files (an `examples/` folder).
    let src = if dir.join("src").is_dir() {
        dir.join("src")
    } else {
        dir.to_path_buf()
    };
    let mut paths = Vec::new();
    collect(&src, &mut paths);
    paths.sort();
    let mut files: Vec<FileModel> = Vec::new();
    let mut texts = Vec::new();
    for p in paths {
        let Ok(text) = std::fs::read_to_string(&p) else {
            continue;
        };
        let rel = p.strip_prefix(&src).unwrap();
        let id = FileId(files.len() as u32);
        if let Ok(mut m) = lower_file(&text, id, module_of(rel), false) {
            m.path = p.clone();
            files.push(m);
            texts.push(text);
        }
    }
    let deps = manifest_dependencies(&manifest);
    let name = dir.file_name().unwrap().to_string_lossy().into_owned();
    let package = Package {
        name: name.clone(),
        dependencies: deps,
        targets: vec![TargetInfo {
            name: name.replace('-', "_"),
            kind: vec!["lib".into()],
            root: dir.join("src/lib.rs"),
        }],
        files,
    };
    (package, texts)
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}
