//! The layers of `idem-lints` import only downward (see `ARCHITECTURE.md`): every `crate::`
//! path in `lints/src` names a module of the same layer or of one below. A path inside a
//! comment or a string literal (test inputs are Rust text) does not count, nor one in the
//! unit tests at the end of a file.

use std::path::{Path, PathBuf};

/// Top-level modules of `lints/src`, bottom layer first.
const LAYERS: &[(&str, &[&str])] = &[
    ("base", &["lint", "util", "budget", "names"]),
    ("catalog", &["catalog"]),
    ("model", &["model"]),
    ("findings and settings", &["diagnostic", "settings"]),
    ("engine", &["analysis"]),
    ("lints", &["lints", "context"]),
    ("runner", &["runner", "testing", "lib"]),
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|(_, mods)| mods.contains(&module))
}

/// The top-level module a file of `lints/src` belongs to (`analysis/flow.rs` → `analysis`).
fn module_of_file(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).expect("below src");
    let first = rel.components().next().expect("a component");
    let name = first.as_os_str().to_string_lossy();
    name.trim_end_matches(".rs").to_string()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("read_dir")
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// `text` with comments and the contents of string and char literals blanked, lines kept.
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    let blank = |out: &mut Vec<u8>, c: u8| out.push(if c == b'\n' { b'\n' } else { b' ' });
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                out.push(b' ');
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let mut depth = 0usize;
            while i < b.len() {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    out.extend_from_slice(b"  ");
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    depth -= 1;
                    out.extend_from_slice(b"  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, b[i]);
                    i += 1;
                }
            }
        } else if c == b'r'
            && matches!(b.get(i + 1), Some(b'"' | b'#'))
            && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_'))
        {
            // A raw string: r"..", r#".."#.
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&b'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&b'"') {
                out.push(c);
                i += 1;
                continue;
            }
            let close: Vec<u8> = std::iter::once(b'"')
                .chain(std::iter::repeat_n(b'#', hashes))
                .collect();
            out.extend(std::iter::repeat_n(b' ', j + 1 - i));
            i = j + 1;
            while i < b.len() && !b[i..].starts_with(&close) {
                blank(&mut out, b[i]);
                i += 1;
            }
            out.extend(std::iter::repeat_n(b' ', close.len().min(b.len() - i)));
            i += close.len();
        } else if c == b'"' {
            out.push(b' ');
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    blank(&mut out, b[i]);
                    i += 1;
                }
                if i < b.len() {
                    blank(&mut out, b[i]);
                    i += 1;
                }
            }
            out.push(b' ');
            i += 1;
        } else if c == b'\'' && b.get(i + 2) == Some(&b'\'') {
            out.extend_from_slice(b"   ");
            i += 3;
        } else {
            out.push(c);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The file's text before its unit tests (a top-level `#[cfg(test)]`): tests may use the
/// runner's test helpers from any layer; the library code may not.
fn library_part(text: &str) -> &str {
    match text.find("\n#[cfg(test)]\n") {
        Some(at) => &text[..at + 1],
        None => text,
    }
}

/// Every top-level module named by a `crate::` path in `code`, with its line. `use crate::{a,
/// b::c}` names each.
fn crate_paths(code: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (n, line) in code.lines().enumerate() {
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            let before = rest[..at].chars().last();
            rest = &rest[at + "crate::".len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
                continue;
            }
            if let Some(group) = rest.strip_prefix('{') {
                let end = group.find('}').unwrap_or(group.len());
                for part in group[..end].split(',') {
                    let name: String = part
                        .trim()
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    if !name.is_empty() {
                        found.push((n + 1, name));
                    }
                }
            } else {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                found.push((n + 1, name));
            }
        }
    }
    found
}

#[test]
fn lints_src_imports_only_downward() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(files.len() > 50, "lints/src read: {} files", files.len());
    let mut upward = Vec::new();
    let mut unknown = Vec::new();
    for file in &files {
        let module = module_of_file(&src, file);
        let Some(own) = layer_of(&module) else {
            unknown.push(format!(
                "{}: module `{module}` is in no layer",
                file.display()
            ));
            continue;
        };
        let text = std::fs::read_to_string(file).expect("read");
        for (line, target) in crate_paths(&code_only(library_part(&text))) {
            match layer_of(&target) {
                Some(layer) if layer > own => upward.push(format!(
                    "{}:{line}: `{module}` ({}) imports `crate::{target}` ({})",
                    file.strip_prefix(&src).unwrap_or(file).display(),
                    LAYERS[own].0,
                    LAYERS[layer].0
                )),
                // Items re-exported at the crate root (`crate::Settings`) belong to the runner.
                None if target.chars().next().is_some_and(char::is_uppercase)
                    && own < LAYERS.len() - 1 =>
                {
                    upward.push(format!(
                        "{}:{line}: `{module}` names the crate root's `{target}`; import it from its module",
                        file.strip_prefix(&src).unwrap_or(file).display()
                    ))
                }
                _ => {}
            }
        }
    }
    assert!(unknown.is_empty(), "{}", unknown.join("\n"));
    assert!(
        upward.is_empty(),
        "{} upward imports:\n{}",
        upward.len(),
        upward.join("\n")
    );
}

#[test]
fn the_scanner_sees_paths_and_skips_text() {
    let code = code_only(
        "use crate::lints::x; // crate::runner\nlet s = \"crate::runner\"; let r = r#\"crate::testing\"#;\nuse crate::{model::a, catalog};\n/* crate::lints */ f(crate::analysis::g);\n",
    );
    let names: Vec<String> = crate_paths(&code).into_iter().map(|(_, n)| n).collect();
    assert_eq!(names, ["lints", "model", "catalog", "analysis"]);
}
