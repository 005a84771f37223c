//! Lints crate directories (each holding `src/`) and prints every finding with its labels and
//! notes, for reading findings on real crates:
//! `cargo run -p idem-lints --example scan -- DIR...`.
//!
//! Targets are taken from the layout: `src/lib.rs` and the modules below it, `src/main.rs`,
//! `src/bin/*.rs` and `examples/*.rs` as binaries.

use idem_lints::model::{lower_file, FileId, FileModel, Package, TargetInfo};
use idem_lints::{check_package, Level, Settings};
use std::path::{Path, PathBuf};

fn main() {
    let mut total = 0;
    for dir in std::env::args().skip(1) {
        let (package, texts) = load(Path::new(&dir));
        let diags = check_package(&package, &Settings::default(), &|l| {
            l.default_level != Level::Allow
        });
        let diags: Vec<_> = diags.into_iter().filter(|d| !d.lint.is_meta).collect();
        println!(
            "== {dir}: {} files, {} findings",
            package.files.len(),
            diags.len()
        );
        total += diags.len();
        for d in &diags {
            let at = |s: idem_lints::model::Span| {
                let f = &package.files[s.file.0 as usize];
                let t = &texts[s.file.0 as usize];
                format!(
                    "{}:{}",
                    f.path.display(),
                    idem_lints::testing::line_of(t, s.lo)
                )
            };
            println!("{}: {} [{}]", at(d.span), d.message, d.lint.name);
            if let Some(l) = &d.label {
                println!("    primary: {l}");
            }
            for l in &d.labels {
                println!("    {}: {}", at(l.span), l.message);
            }
            for n in &d.notes {
                println!("    note: {n}");
            }
            for h in &d.help {
                println!("    help: {h}");
            }
        }
    }
    println!("total findings: {total}");
}

fn load(dir: &Path) -> (Package, Vec<String>) {
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap_or_default();
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
    let src = dir.join("src");
    if src.join("lib.rs").is_file() {
        package.targets.push(TargetInfo {
            name: name.clone(),
            kind: vec!["lib".into()],
            root: src.join("lib.rs"),
        });
        let mut files = Vec::new();
        collect(&src, &mut files);
        files.sort();
        for p in files {
            let rel = p.strip_prefix(&src).unwrap();
            if rel == Path::new("main.rs") || rel.starts_with("bin") {
                continue;
            }
            add(&mut package, &p, module_of(rel), 0);
        }
    }
    let mut bins: Vec<PathBuf> = vec![src.join("main.rs")];
    for extra in ["src/bin", "examples"] {
        if let Ok(rd) = std::fs::read_dir(dir.join(extra)) {
            bins.extend(
                rd.flatten()
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|x| x == "rs")),
            );
        }
    }
    for b in bins.into_iter().filter(|b| b.is_file()) {
        let t = package.targets.len();
        package.targets.push(TargetInfo {
            name: b.file_stem().unwrap().to_string_lossy().into_owned(),
            kind: vec!["bin".into()],
            root: b.clone(),
        });
        add(&mut package, &b, vec!["crate".into()], t);
    }
    let _: &[FileModel] = &package.files;
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
