//! How much the lints cost on top of reading and parsing.
//!
//! `cargo bench --bench lint_vs_parse -- [DIR] [ITERATIONS]` measures, in one run and
//! interleaved so machine noise hits both alike: (a) reading, parsing and lowering every file
//! of DIR, and (b) the whole pipeline with every lint enabled. Both go through the same
//! parallel parse code of the library. DIR defaults to the tokio sources cargo keeps under
//! `~/.cargo/registry/src` (tokio is in Cargo.lock through idem-guard). `BENCH_LINTS=a,b`
//! enables only those lints (default: all).

use cargo_idem_lint::config::Config;
use cargo_idem_lint::discovery::{self, Selection};
use cargo_idem_lint::levels::LevelFlag;
use cargo_idem_lint::parse::{self, ParseOptions};
use cargo_idem_lint::report;
use idem_lints::Level;
use std::path::PathBuf;
use std::time::{Duration, Instant};

// Parsing and the analysis allocate many small nodes on many short-lived threads; mimalloc
// measured faster than the system allocator on tokio's sources (see the commit).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    // Cargo passes `--bench` to harness-less benches.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let Some(dir) = args.first().map(PathBuf::from).or_else(tokio_sources) else {
        eprintln!(
            "no tokio sources under $CARGO_HOME/registry/src: run `cargo fetch` in this repository \
             (tokio is in its Cargo.lock), or pass a directory: \
             cargo bench --bench lint_vs_parse -- DIR [ITERATIONS]"
        );
        return;
    };
    let iterations: usize = args
        .get(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(10)
        .max(1);
    let ws = match discovery::discover(&Selection::dir(&dir)) {
        Ok(ws) => ws,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::exit(2);
        }
    };
    let config = Config::load(&ws).unwrap_or_default();
    let opts = ParseOptions::default();
    // Every lint on (or those `BENCH_LINTS=a,b` names), the others off, so only the chosen
    // passes run and each issue's budget can be checked for its own lints.
    let chosen = std::env::var("BENCH_LINTS").unwrap_or_default();
    let on = |name: &str| chosen.is_empty() || chosen.split(',').any(|c| c.trim() == name);
    let all: Vec<LevelFlag> = idem_lints::lints::ALL
        .iter()
        .map(|l| LevelFlag {
            level: if on(l.name) {
                Level::Warn
            } else {
                Level::Allow
            },
            name: l.name.to_string(),
        })
        .collect();
    let enabled: Vec<&str> = all
        .iter()
        .filter(|f| f.level == Level::Warn)
        .map(|f| f.name.as_str())
        .collect();

    let warm = parse::load_workspace(&ws, &opts);
    let files: usize = warm.iter().map(|p| p.sources.len()).sum();
    let bytes: usize = warm
        .iter()
        .flat_map(|p| &p.sources)
        .map(|s| s.text.len())
        .sum();
    drop(warm);
    let mut findings = 0;
    let (mut parse_times, mut full_times) = (Vec::new(), Vec::new());
    for _ in 0..iterations {
        let start = Instant::now();
        let loaded = parse::load_workspace(&ws, &opts);
        parse_times.push(start.elapsed());
        drop(loaded);

        let start = Instant::now();
        let report = report::check(&ws, &opts, &config, &all).expect("levels are valid");
        full_times.push(start.elapsed());
        findings = report.findings.len();
    }
    let (a, b) = (median(&mut parse_times), median(&mut full_times));
    println!(
        "input: {} ({files} files, {:.1} MiB)",
        dir.display(),
        bytes as f64 / (1 << 20) as f64
    );
    println!("iterations: {iterations}, lints: {}", enabled.join(", "));
    println!("(a) read + parse + lower: median {:.1} ms", ms(a));
    println!(
        "(b) full lint pipeline:   median {:.1} ms ({findings} findings)",
        ms(b)
    );
    println!(
        "ratio b/a: {:.2}",
        b.as_secs_f64() / a.as_secs_f64().max(f64::EPSILON)
    );
}

fn median(times: &mut [Duration]) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The newest `tokio-1.*` under `$CARGO_HOME/registry/src/*/`.
fn tokio_sources() -> Option<PathBuf> {
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))?;
    let mut found: Vec<(Vec<u64>, PathBuf)> = std::fs::read_dir(cargo_home.join("registry/src"))
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|index| std::fs::read_dir(index.path()).ok())
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let version = name.strip_prefix("tokio-1.")?;
            let parts: Option<Vec<u64>> = version.split('.').map(|p| p.parse().ok()).collect();
            Some((parts?, e.path()))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, p)| p)
}
