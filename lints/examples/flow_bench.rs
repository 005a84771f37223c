//! Measures the cost of lints against parsing: lowers every `.rs` file of a crate (tokio by
//! default, found in the cargo registry), then runs `check_package` with the chosen lints on,
//! and prints medians of several runs.
//! `cargo run --release -p idem-lints --example flow_bench [-- SRC_DIR [RUNS]]`; the lints are
//! `nondeterministic_key` and `check_then_act` unless `BENCH_LINTS` lists others
//! (`BENCH_LINTS=unguarded_entry_point,mark_outside_transaction`, or `all`).

use idem_lints::model::{lower_file, FileId, Package, TargetInfo};
use idem_lints::Settings;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = args.next().map(PathBuf::from).unwrap_or_else(find_tokio);
    let runs: usize = args.next().and_then(|r| r.parse().ok()).unwrap_or(7);
    let lints = std::env::var("BENCH_LINTS")
        .unwrap_or_else(|_| "nondeterministic_key,check_then_act".to_owned());
    let enabled = |name: &str| lints == "all" || lints.split(',').any(|l| l == name);
    let mut paths = Vec::new();
    idem_lints::testing::collect_rs(&dir, &mut paths);
    paths.sort();
    let texts: Vec<String> = paths
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .collect();
    let mut parse = Vec::new();
    let mut lint = Vec::new();
    let mut findings = 0;
    for _ in 0..runs {
        let t = Instant::now();
        let files: Vec<_> = texts
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                lower_file(s, FileId(i as u32), vec!["crate".into()], false)
                    .ok()
                    .map(std::sync::Arc::new)
            })
            .collect();
        parse.push(t.elapsed());
        let package = Package {
            name: "bench".into(),
            dependencies: vec![],
            targets: vec![TargetInfo {
                name: "bench".into(),
                kind: vec!["lib".into()],
                root: dir.join("lib.rs"),
            }],
            files,
            migrations: Default::default(),
        };
        if std::env::var_os("FLOW_BENCH_SPLIT").is_some() {
            let t = Instant::now();
            let a = idem_lints::analysis::Analysis::new(&package);
            let built = t.elapsed();
            a.summaries(&package);
            eprintln!(
                "analysis tables {:?}, summaries {:?}",
                built,
                t.elapsed() - built
            );
        }
        let t = Instant::now();
        let diags = idem_lints::check_package(&package, &Settings::default(), &|l| enabled(l.name));
        lint.push(t.elapsed());
        findings = diags.len();
    }
    let (p, l) = (median(&mut parse), median(&mut lint));
    println!(
        "{} files; lints {lints}; parse+lower median {:?}; lints median {:?}; findings {findings}",
        texts.len(),
        p,
        l
    );
    println!(
        "ratio (parse + lints) / parse = {:.3}",
        (p + l).as_secs_f64() / p.as_secs_f64()
    );
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn find_tokio() -> PathBuf {
    let home = std::env::var("HOME").unwrap_or_default();
    let reg = Path::new(&home).join(".cargo/registry/src");
    for idx in std::fs::read_dir(&reg).into_iter().flatten().flatten() {
        let mut found: Vec<PathBuf> = std::fs::read_dir(idx.path())
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("tokio-1"))
            })
            .collect();
        found.sort();
        if let Some(p) = found.pop() {
            return p.join("src");
        }
    }
    panic!("tokio not found in the cargo registry; pass a source directory")
}
