//! Runs the lints over crate directories and prints every finding with its labels, notes and
//! help, for reading the findings on real crates: `cargo run -p idem-lints --example lint_dir
//! -- DIR...` (each DIR holds `Cargo.toml` and `src/`, or is a directory of `.rs` files).
//! Files that do not parse are skipped.
//!
//! Targets come from the layout: `src/lib.rs` and the modules below it, and `src/main.rs`,
//! `src/bin/*.rs` and `examples/*.rs` as binaries (so `main` is an entry point).

use idem_lints::model::{lower_file, FileId, Package, TargetInfo};
use idem_lints::testing::line_of;
use idem_lints::Settings;
use std::path::{Path, PathBuf};

fn main() {
    let mut total = 0;
    for dir in std::env::args().skip(1) {
        let dir = PathBuf::from(dir);
        let (package, texts) = load(&dir);
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
        dependencies: dependencies(&manifest),
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
        package.files.push(f);
        texts.push(text);
    };
    // A crate's `src/`, or a directory of `.rs` files (an `examples/` folder) as one library.
    let src = if dir.join("src").is_dir() {
        dir.join("src")
    } else {
        dir.to_path_buf()
    };
    let mut files = Vec::new();
    collect(&src, &mut files);
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

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            collect(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn module_of(rel: &Path) -> Vec<String> {
    let mut module = vec!["crate".to_owned()];
    let parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    for (i, part) in parts.iter().enumerate() {
        let stem = part.trim_end_matches(".rs");
        if i + 1 == parts.len() && matches!(stem, "lib" | "main" | "mod") {
            break;
        }
        module.push(stem.to_owned());
    }
    module
}

fn dependencies(manifest: &str) -> Vec<String> {
    let mut in_deps = false;
    let mut out = Vec::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_deps = line.contains("dependencies");
            if let Some(rest) = line.strip_prefix("[dependencies.") {
                out.push(rest.trim_end_matches(']').replace('-', "_"));
            }
            continue;
        }
        if in_deps {
            if let Some((key, _)) = line.split_once('=') {
                out.push(key.trim().trim_matches('"').replace('-', "_"));
            }
        }
    }
    out
}
