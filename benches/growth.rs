//! Inputs whose cost grew faster than their size (issue 8, item 14), each at three sizes
//! that double, in one run: the median time per size and the ratio per doubling, which
//! must stay near 2 (linear), not 4 (quadratic).
//!
//! `cargo bench --bench growth -- [ITERATIONS]` (default 3) measures:
//! - `check_then_act`: one fn with N exists/set pairs (the whole pipeline, every lint on);
//! - `suppression`: N fns, each with an own-line `allow` directive and a finding it hides;
//! - `one_long_line`: N findings on one line, rendering human and JSON output (time and
//!   bytes).

use cargo_idem_lint::cli::MessageFormat;
use cargo_idem_lint::config::Config;
use cargo_idem_lint::discovery::{self, Selection};
use cargo_idem_lint::emit;
use cargo_idem_lint::parse::ParseOptions;
use cargo_idem_lint::report::{self, Report};
use std::path::Path;
use std::time::{Duration, Instant};

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let iterations: usize = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .find_map(|a| a.parse().ok())
        .unwrap_or(3)
        .max(1);
    println!("median of {iterations} runs; ratio = time(2N) / time(N), linear is 2");
    series(
        "check_then_act",
        &[4_000, 8_000, 16_000],
        iterations,
        pairs_in_one_fn,
        |dir| {
            lint(dir);
        },
    );
    series(
        "suppression",
        &[5_000, 10_000, 20_000],
        iterations,
        suppressed_fns,
        |dir| {
            let r = lint(dir);
            assert!(r.findings.is_empty(), "every finding is suppressed");
        },
    );
    let mut sizes = Vec::new();
    series(
        "one_long_line",
        &[250, 500, 1_000],
        iterations,
        pairs_on_one_line,
        |dir| {
            let (human, json) = render(dir);
            sizes.push((human, json));
        },
    );
    for (human, json) in sizes.iter().step_by(iterations) {
        println!("  one_long_line output: human {human} bytes, json {json} bytes");
    }
}

/// Times `run` on the input `make(n)` builds, for each `n`.
fn series(
    name: &str,
    sizes: &[usize],
    iterations: usize,
    make: fn(usize) -> String,
    mut run: impl FnMut(&Path),
) {
    let mut medians: Vec<Duration> = Vec::new();
    for &n in sizes {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("lib.rs"), make(n)).expect("write");
        let mut times: Vec<Duration> = (0..iterations)
            .map(|_| {
                let start = Instant::now();
                run(dir.path());
                start.elapsed()
            })
            .collect();
        times.sort();
        let median = times[times.len() / 2];
        let ratio = medians
            .last()
            .map(|prev| format!("  ratio {:.2}", median.as_secs_f64() / prev.as_secs_f64()))
            .unwrap_or_default();
        println!(
            "{name:>15}  N = {n:>6}  {:>9.3} s{ratio}",
            median.as_secs_f64()
        );
        medians.push(median);
    }
}

fn lint(dir: &Path) -> Report {
    let ws = discovery::discover(&Selection::dir(dir)).expect("discovers");
    let config = Config::load(&ws).expect("config");
    // No budget: the point is how long it takes.
    let opts = ParseOptions {
        file_timeout: Duration::from_secs(3_600),
        ..ParseOptions::default()
    };
    report::check(&ws, &opts, &config, &[]).expect("checks")
}

/// Bytes of human and JSON output.
fn render(dir: &Path) -> (usize, usize) {
    let ws = discovery::discover(&Selection::dir(dir)).expect("discovers");
    let r = lint(dir);
    let input = emit::Input {
        ws: &ws,
        report: &r,
        cwd: dir,
    };
    let mut sizes = [0; 2];
    for (i, format) in [MessageFormat::Human, MessageFormat::Json]
        .into_iter()
        .enumerate()
    {
        let mut out = Vec::new();
        emit::emit(format, &input, &mut out).expect("emits");
        sizes[i] = out.len();
    }
    (sizes[0], sizes[1])
}

fn pair(i: usize) -> String {
    format!(
        "let k{i} = format!(\"done:{{}}:{i}\", id); if c.exists(&k{i}).await? {{ return Ok(()); }} c.set(&k{i}, 1).await?;"
    )
}

const HEAD: &str =
    "async fn h(c: &mut redis::aio::ConnectionManager, id: u64) -> redis::RedisResult<()> {";

fn pairs_in_one_fn(n: usize) -> String {
    let body: Vec<String> = (0..n).map(|i| format!("    {}\n", pair(i))).collect();
    format!("{HEAD}\n{}    Ok(())\n}}\n", body.concat())
}

fn pairs_on_one_line(n: usize) -> String {
    let body: Vec<String> = (0..n).map(pair).collect();
    format!("{HEAD} {} Ok(()) }}\n", body.join(" "))
}

fn suppressed_fns(n: usize) -> String {
    (0..n)
        .map(|i| {
            format!(
                "// idem-lint: allow(check_then_act)\nasync fn h{i}(c: &mut redis::aio::ConnectionManager, id: u64) -> redis::RedisResult<()> {{\n    {}\n    Ok(())\n}}\n",
                pair(i)
            )
        })
        .collect()
}
