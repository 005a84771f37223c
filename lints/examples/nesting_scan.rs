//! Prints the deepest nesting scores (`idem_lints::model::nesting`) of every `.rs` file below
//! a directory, and every file the limits would reject: how `MAX_NESTING` was calibrated
//! (`cargo run --release -p idem-lints --example nesting_scan -- ~/.cargo/registry/src`).

use idem_lints::model::nesting;
use std::path::{Path, PathBuf};

fn main() {
    let Some(dir) = std::env::args().nth(1) else {
        eprintln!("usage: nesting_scan DIR");
        std::process::exit(2);
    };
    let mut all = Vec::new();
    for path in rust_files(Path::new(&dir)) {
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        if let Err(e) = nesting::check(&text, nesting::MAX_NESTING) {
            println!("rejected {} at byte {}", path.display(), e.offset);
        }
        let (score, at) = nesting::max_nesting(&text);
        all.push((score, at, path));
    }
    all.sort();
    println!("{} files; deepest:", all.len());
    for (score, at, path) in all.iter().rev().take(20) {
        println!("{score:5} {} (byte {at})", path.display());
    }
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let path = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() => out.extend(rust_files(&path)),
            Ok(t) if t.is_file() && path.extension().is_some_and(|x| x == "rs") => out.push(path),
            _ => {}
        }
    }
    out
}
