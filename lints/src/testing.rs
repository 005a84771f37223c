//! Helpers for tests of lints: build a [`Package`] from sources or from a fixture crate on
//! disk, and compare findings with the `//~ WARN lint_name` annotations in the sources.
//!
//! Annotation format (shared with the binary's UI test): a trailing `//~ WARN name` (or
//! `DENY`/`ERROR`) expects a finding of `name` whose primary span starts on that line;
//! `//~^ WARN name` expects it on the line above (one `^` per line).

use crate::diagnostic::Diagnostic;
use crate::model::{lower_file, FileId, Package, TargetInfo};
use crate::settings::Settings;
use std::path::{Path, PathBuf};

/// One expected finding: file index, 1-based line, lint name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Expected {
    pub file: usize,
    pub line: usize,
    pub lint: String,
}

/// One annotation: the 1-based line it points at, the level as rustc's JSON spells it
/// (`warning`, `error`) and the lint name without `idem::`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Annotation {
    pub line: usize,
    pub level: &'static str,
    pub lint: String,
}

/// The annotations of one source text. A `//~` that is not a well-formed annotation is an
/// error, so a typo cannot silently drop an expectation.
pub fn parse_annotations(text: &str) -> Result<Vec<Annotation>, String> {
    let mut out = Vec::new();
    for (index, line) in text.lines().enumerate() {
        for raw in line.split("//~").skip(1) {
            let up = raw.chars().take_while(|&c| c == '^').count();
            let mut words = raw[up..].split_whitespace();
            let level = match words.next() {
                Some("WARN") => "warning",
                Some("DENY") | Some("ERROR") => "error",
                other => {
                    return Err(format!(
                        "line {}: expected WARN, DENY or ERROR after `//~`, found {other:?}",
                        index + 1
                    ))
                }
            };
            let lint = words
                .next()
                .ok_or_else(|| format!("line {}: `//~` without a lint name", index + 1))?;
            let lint = lint.strip_prefix("idem::").unwrap_or(lint).to_string();
            let line = index
                .checked_sub(up)
                .ok_or_else(|| format!("line {}: `^` points above the file", index + 1))?;
            out.push(Annotation {
                line: line + 1,
                level,
                lint,
            });
        }
    }
    Ok(out)
}

/// 1-based line of byte offset `lo` in `src`.
pub fn line_of(src: &str, lo: u32) -> usize {
    src.as_bytes()[..(lo as usize).min(src.len())]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

/// A package of in-memory sources: `(module path like "crate::a", source)`, one lib target.
pub fn package(name: &str, deps: &[&str], files: &[(&str, &str)]) -> Package {
    let files = files
        .iter()
        .enumerate()
        .map(|(i, (module, src))| {
            let module = module.split("::").map(String::from).collect();
            let mut f =
                lower_file(src, FileId(i as u32), module, false).expect("test source parses");
            f.path = PathBuf::from(format!("src/file{i}.rs"));
            std::sync::Arc::new(f)
        })
        .collect();
    Package {
        name: name.to_owned(),
        dependencies: deps.iter().map(|d| d.replace('-', "_")).collect(),
        targets: vec![TargetInfo {
            name: name.replace('-', "_"),
            kind: vec!["lib".into()],
            root: "src/lib.rs".into(),
        }],
        files,
        migrations: Default::default(),
    }
}

/// A fixture crate on disk: every `.rs` under `dir/src` (module path from the file path, all
/// in one lib target), dependencies from the `[dependencies]` table of `dir/Cargo.toml`.
/// Returns the package and the texts, in file order.
pub fn fixture_package(dir: &Path) -> (Package, Vec<String>) {
    let sources = fixture_sources(dir);
    let package = package_of_sources(dir, &sources);
    (package, sources.into_iter().map(|(_, text)| text).collect())
}

/// The `.rs` files under `dir/src` and their texts, in path order.
pub fn fixture_sources(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut files = Vec::new();
    collect_rs(&dir.join("src"), &mut files);
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).expect("fixture is readable");
            (path, text)
        })
        .collect()
}

/// The fixture crate at `dir` with its sources given (`fixture_sources`, perhaps rewritten):
/// module paths from the file paths, dependencies from `dir/Cargo.toml`.
pub fn package_of_sources(dir: &Path, sources: &[(PathBuf, String)]) -> Package {
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap_or_default();
    let mut models = Vec::new();
    for (i, (path, text)) in sources.iter().enumerate() {
        let rel = path.strip_prefix(dir.join("src")).expect("under src");
        let mut f =
            lower_file(text, FileId(i as u32), module_of(rel), false).expect("fixture parses");
        f.path = path.clone();
        // What the driver does for `include_str!` (the fixtures are trusted files).
        for inc in &mut f.includes {
            let included = if inc.from_package_root {
                Some(dir.join(&inc.path))
            } else {
                path.parent().map(|d| d.join(&inc.path))
            };
            inc.text = included
                .and_then(|p| std::fs::read_to_string(p).ok())
                .map(std::sync::Arc::from);
        }
        models.push(std::sync::Arc::new(f));
    }
    let name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("fixture")
        .to_owned();
    Package {
        name: name.clone(),
        dependencies: manifest_dependencies(&manifest),
        targets: vec![TargetInfo {
            name: name.replace('-', "_"),
            kind: vec!["lib".into()],
            root: dir.join("src/lib.rs"),
        }],
        files: models,
        migrations: fixture_migrations(dir),
    }
}

/// What the driver reads of a fixture's `migrations/` folder (the fixtures are trusted, so
/// none of the driver's limits apply).
fn fixture_migrations(dir: &Path) -> crate::model::Migrations {
    let folder = dir.join("migrations");
    let mut found = Vec::new();
    collect_files(&folder, &mut found);
    let rel: Vec<String> = found
        .iter()
        .filter_map(|p| p.strip_prefix(&folder).ok())
        .map(|p| p.to_string_lossy().replace('\\', "/"))
        .collect();
    let files = crate::model::migrations::plan("migrations", &rel)
        .into_iter()
        .map(|(sequence, path)| crate::model::Migration {
            sequence,
            text: std::fs::read_to_string(folder.join(&path))
                .expect("fixture migration is readable")
                .into(),
            path: format!("migrations/{path}"),
        })
        .collect();
    crate::model::Migrations {
        files,
        incomplete: false,
    }
}

fn collect_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect_files(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// Every `.rs` file below `dir`, recursively (unsorted).
pub fn collect_rs(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect_rs(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

pub use crate::model::module_of;

/// Keys of `[dependencies]`, `[dev-dependencies]` and `[build-dependencies]` (and
/// `[dependencies.name]` tables), `-` as `_`.
pub fn manifest_dependencies(manifest: &str) -> Vec<String> {
    let mut in_deps = false;
    let mut out = Vec::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_deps = line.ends_with("dependencies]");
            // `[dependencies.sqlx]`: one dependency's own table.
            let table = line.trim_matches(|c| c == '[' || c == ']');
            if let Some((_, name)) = table.split_once("dependencies.") {
                out.push(name.trim_matches('"').replace('-', "_"));
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

/// Runs every lint with default levels (allow-by-default lints off).
pub fn check(package: &Package, settings: &Settings) -> Vec<Diagnostic> {
    crate::check_package(package, settings, &|l| {
        l.default_level != crate::Level::Allow
    })
}

/// Runs the lints over `package` and panics with a readable diff unless the findings are
/// exactly the annotations of `texts` (restricted to `lints`, when not empty).
pub fn assert_annotations(
    package: &Package,
    texts: &[String],
    settings: &Settings,
    lints: &[&str],
) {
    let relevant = |name: &str| lints.is_empty() || lints.contains(&name);
    let mut expected: Vec<Expected> = texts
        .iter()
        .enumerate()
        .flat_map(|(file, t)| {
            parse_annotations(t)
                .unwrap_or_else(|e| panic!("{}: {e}", package.files[file].path.display()))
                .into_iter()
                .map(move |a| Expected {
                    file,
                    line: a.line,
                    lint: a.lint,
                })
        })
        .filter(|e| relevant(&e.lint))
        .collect();
    let diags = check(package, settings);
    let mut got: Vec<Expected> = diags
        .iter()
        .filter(|d| relevant(d.lint.name))
        .map(|d| {
            let file = d.span.file.0 as usize;
            Expected {
                file,
                line: line_of(&texts[file], d.span.lo),
                lint: d.lint.name.to_owned(),
            }
        })
        .collect();
    expected.sort();
    got.sort();
    if expected != got {
        let show = |e: &Expected| {
            format!(
                "{}:{} {}",
                package.files[e.file].path.display(),
                e.line,
                e.lint
            )
        };
        let missing: Vec<String> = expected
            .iter()
            .filter(|e| !got.contains(e))
            .map(show)
            .collect();
        let extra: Vec<String> = got
            .iter()
            .filter(|e| !expected.contains(e))
            .map(show)
            .collect();
        let messages: Vec<String> = diags
            .iter()
            .map(|d| format!("{}: {}", d.lint.name, d.message))
            .collect();
        panic!("findings differ from annotations\nmissing: {missing:#?}\nextra: {extra:#?}\nall messages: {messages:#?}");
    }
}

/// Checks every fixture crate below `root` against its annotations of `lints` (all lints when
/// empty) with default settings; returns how many crates were checked.
pub fn assert_fixture_crates(root: &Path, lints: &[&str]) -> usize {
    let crates = fixture_crates(root);
    for dir in &crates {
        let (package, texts) = fixture_package(dir);
        assert_annotations(&package, &texts, &Settings::default(), lints);
    }
    crates.len()
}

/// Every fixture crate below `root` (a directory holding `Cargo.toml`), sorted.
pub fn fixture_crates(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        if dir.join("Cargo.toml").is_file() && dir.join("src").is_dir() {
            out.push(dir);
            continue;
        }
        if let Ok(entries) = std::fs::read_dir(&dir) {
            stack.extend(entries.flatten().map(|e| e.path()).filter(|p| p.is_dir()));
        }
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn annotations_point_at_their_line_or_above() {
        let text = "a(); //~ WARN check_then_act\n\
                    b();\n\
                    //~^ DENY idem::nondeterministic_key //~^^ ERROR parse_error\n";
        let got: Vec<(usize, &str, String)> = parse_annotations(text)
            .expect("valid")
            .into_iter()
            .map(|a| (a.line, a.level, a.lint))
            .collect();
        assert_eq!(
            got,
            vec![
                (1, "warning", "check_then_act".to_string()),
                (2, "error", "nondeterministic_key".to_string()),
                (1, "error", "parse_error".to_string()),
            ]
        );
    }

    #[test]
    fn malformed_annotations_are_errors() {
        assert!(parse_annotations("x //~ WARNING foo").is_err());
        assert!(parse_annotations("x //~ WARN").is_err());
        assert!(parse_annotations("//~^ WARN foo").is_err());
    }

    #[test]
    fn module_paths_follow_file_paths() {
        assert_eq!(module_of(Path::new("lib.rs")), vec!["crate"]);
        assert_eq!(module_of(Path::new("a/b.rs")), vec!["crate", "a", "b"]);
        assert_eq!(module_of(Path::new("a/mod.rs")), vec!["crate", "a"]);
    }

    #[test]
    fn dependencies_are_read_from_every_dependency_table() {
        let m = "[package]\nname = \"x\"\n[dependencies]\naws-sdk-ec2 = \"1\"\n[dev-dependencies]\ntokio = {}\n[dependencies.tokio-postgres]\nversion = \"0.7\"\n";
        assert_eq!(
            manifest_dependencies(m),
            vec!["aws_sdk_ec2", "tokio", "tokio_postgres"]
        );
    }
}
