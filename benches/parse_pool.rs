//! What hostile-input safety costs, and how the parse stage grows.
//!
//! `cargo bench --bench parse_pool -- [DIR] [ITERATIONS]` prints, from one run, medians of:
//! 1. the parse pool (long-lived large-stack threads, `parse::load_workspace`) against a
//!    thread spawned per file (the previous design) on every `.rs` file of DIR (default: the
//!    newest tokio under `~/.cargo/registry/src`), interleaved, and their ratio;
//! 2. a file of nested inline modules at doubling depths, below the module limit (parsed) and
//!    far above it (rejected by the nesting scan), with the ratio of each step to the one
//!    before: linear growth is 2x per doubling.

use cargo_idem_lint::discovery::{self, Selection, Sources, Workspace};
use cargo_idem_lint::parse::{self, ParseOptions};
use cargo_idem_lint::source::read_source;
use idem_lints::model::{lower_file_until, FileId};
use rayon::prelude::*;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let iterations: usize = args.get(1).and_then(|n| n.parse().ok()).unwrap_or(7).max(1);
    match args.first().map(PathBuf::from).or_else(tokio_sources) {
        Some(dir) => pool_vs_thread_per_file(&dir, iterations),
        None => eprintln!("no tokio sources under ~/.cargo/registry/src; pass a directory"),
    }
    nested_module_growth(iterations);
}

fn pool_vs_thread_per_file(dir: &Path, iterations: usize) {
    let ws = discovery::discover(&Selection::dir(dir)).expect("a directory of .rs files");
    let opts = ParseOptions::default();
    let files: Vec<PathBuf> = match &ws.packages[0].sources {
        Sources::Files(f) => f.clone(),
        Sources::ModuleTrees => panic!("pass a directory without Cargo.toml"),
    };
    let (mut pool, mut spawned) = (Vec::new(), Vec::new());
    for _ in 0..iterations {
        pool.push(time(|| parse::load_workspace(&ws, &opts).len()));
        spawned.push(time(|| thread_per_file(&ws, &files, &opts)));
    }
    let (p, s) = (median(&mut pool), median(&mut spawned));
    println!("{} files of {}", files.len(), dir.display());
    println!("  parse pool        {:>9.1} ms", ms(p));
    println!("  thread per file   {:>9.1} ms", ms(s));
    println!(
        "  pool / per-file   {:>9.2}",
        p.as_secs_f64() / s.as_secs_f64()
    );
}

/// The previous design: every file read, parsed and lowered on a thread of its own.
fn thread_per_file(ws: &Workspace, files: &[PathBuf], opts: &ParseOptions) -> usize {
    let policy = opts.read_policy(ws);
    files
        .par_iter()
        .enumerate()
        .map(|(i, f)| {
            let (f, policy) = (f.clone(), policy.clone());
            let deadline = Instant::now() + opts.file_timeout;
            std::thread::Builder::new()
                .stack_size(parse::STACK_SIZE)
                .spawn(move || {
                    let text = read_source(&f, &policy).ok()?;
                    lower_file_until(&text, FileId(i as u32), vec![], false, Some(deadline)).ok()
                })
                .expect("spawn")
                .join()
                .ok()
                .flatten()
                .map_or(0, |m| m.fns.len())
        })
        .sum()
}

fn nested_module_growth(iterations: usize) {
    println!("nested inline modules (one file)");
    for depths in [[25, 50, 100], [2_500, 5_000, 10_000]] {
        let mut prev: Option<Duration> = None;
        for depth in depths {
            let dir = tempfile::tempdir().expect("tempdir");
            let text = format!(
                "{}{}\n",
                "pub mod m { pub fn f() {} ".repeat(depth),
                "}".repeat(depth)
            );
            std::fs::write(dir.path().join("deep.rs"), text).expect("write");
            let ws = discovery::discover(&Selection::dir(dir.path())).expect("discovers");
            let opts = ParseOptions::default();
            let mut times: Vec<Duration> = (0..iterations)
                .map(|_| time(|| parse::load_workspace(&ws, &opts)[0].problems.len()))
                .collect();
            let t = median(&mut times);
            let problems = parse::load_workspace(&ws, &opts)[0].problems.len();
            let ratio = prev.map_or(String::new(), |p| {
                format!("  x{:.2}", t.as_secs_f64() / p.as_secs_f64())
            });
            let what = if problems == 0 { "parsed" } else { "rejected" };
            println!("  depth {depth:>6}  {:>9.2} ms  {what}{ratio}", ms(t));
            prev = Some(t);
        }
    }
}

fn time<T>(f: impl FnOnce() -> T) -> Duration {
    let t = Instant::now();
    std::hint::black_box(f());
    t.elapsed()
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn tokio_sources() -> Option<PathBuf> {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))?;
    let mut found: Vec<(Vec<u64>, PathBuf)> = std::fs::read_dir(home.join("registry/src"))
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|index| std::fs::read_dir(index.path()).ok())
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let version = name.strip_prefix("tokio-1.")?;
            let parts: Option<Vec<u64>> = version.split('.').map(|p| p.parse().ok()).collect();
            Some((parts?, e.path().join("src")))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, p)| p)
}
