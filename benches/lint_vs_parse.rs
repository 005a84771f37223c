//! What the lints cost on top of the parse floor, how the cost grows, and peak memory.
//!
//! `cargo bench --bench lint_vs_parse -- [DIR ...] [ITERATIONS]` measures in one run,
//! interleaved so machine noise hits every stage alike, on each input:
//!
//! - **bare**: `syn::parse_file` of the same files on rayon's pool (read + parse, nothing
//!   else): the floor a syntax-only linter cannot go below;
//! - **syn** (printed apart): syn alone on the text our parse hands it (doc text and test fn
//!   bodies written over), lowering nothing: the part of `load` no change to the lowering or
//!   the analysis can remove;
//! - **load**: our parse stage (read, parse, lower to the model, follow module trees);
//! - **full**: the whole pipeline with every lint enabled (or those `BENCH_LINTS=a,b` names,
//!   or `BENCH_LINTS=default` for the lints on by default);
//! - **analysed**: the same with a configured guard name no code calls, which makes every
//!   package relevant ([`idem_lints::analysis::relevance`]): the call graph and summaries are
//!   built even where nothing could be found, so their cost stays measured;
//!
//! and prints medians and the ratios to bare, of wall time and of the process's CPU time.
//! Inputs default to tokio, lemmy's `lemmy_apub`, the sqlx job queue `graphile_worker` and
//! rust-analyzer's `hir-ty` (the registry crate
//! `ra_ap_hir_ty`), the newest versions under `$CARGO_HOME/registry/src` (fetch them with a
//! scratch project and `cargo fetch`). tokio and hir-ty name no store crate; lemmy_apub and
//! graphile_worker depend on diesel and sqlx, so the relevance pre-check lets the analysis run
//! on them: their `full` measures it on real code.
//!
//! `BENCH_WORKSPACE=1` lints every member of a workspace given as DIR (`--workspace`; else
//! cargo's default selection), as issue 36 measures lemmy. `BENCH_BINARIES=A,B` also runs
//! each of those `cargo-idem-lint` builds on each input (`idem-lint --no-cache`, the
//! selection above, JSON output), interleaved with the stages, and prints their medians
//! against the bare parse: an old build against the new one on the same machine state.
//!
//! `BENCH_RSS=0` skips the peak RSS part below; `scripts/bench-compare.sh` runs two builds of
//! this bench alternately and prints the median ratios of each.
//!
//! The growth check takes the last input's `src/` (hir-ty's by default) 1x, 2x and 4x (copies in separate
//! modules `c0`..`c3` of one crate, so each copy resolves inside itself) and prints the full
//! pipeline's cost relative to 1x: linear code costs 1x, 2x and 4x. `BENCH_GROWTH=0` skips it.
//!
//! Peak RSS is measured in a child process (this binary again, running the pipeline once, Linux
//! `/proc/self/status` `VmHWM`) on each input and on rust-analyzer's workspace: every
//! `ra_ap_*` crate found in the registry, copied as members of one workspace.

use cargo_idem_lint::config::{Config, LintSettings, Origin};
use cargo_idem_lint::discovery::{self, Selection, Workspace};
use cargo_idem_lint::levels::LevelFlag;
use cargo_idem_lint::parse::{self, ParseOptions};
use cargo_idem_lint::report;
use idem_lints::lints::UNGUARDED_ENTRY_POINT;
use idem_lints::Level;
use rayon::prelude::*;
use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

// The binary's allocator, so the figures are the binary's.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Set in the child that measures one run's peak RSS: the directory to lint.
const RSS_CHILD: &str = "IDEM_LINT_BENCH_RSS_CHILD";

/// `BENCH_STAGE=bare|syn|load|full|analysed`: run only that stage, `ITERATIONS` times on each
/// input, and print nothing else; for instruction counts, under
/// callgrind (`scripts/bench-instructions.sh`),
/// or a profiler.
const STAGE: &str = "BENCH_STAGE";

struct Input {
    name: String,
    dir: PathBuf,
    ws: Workspace,
    config: Config,
    /// `config` with a guard name nobody calls: the analysis runs in full.
    analysed: Config,
    files: Vec<PathBuf>,
    lines: usize,
}

#[derive(Default)]
struct Times {
    bare: Vec<Duration>,
    load: Vec<Duration>,
    full: Vec<Duration>,
    analysed: Vec<Duration>,
    /// [`syn_alone`], wall and CPU (apart from `cpu`, whose table the compare script reads).
    syn: Vec<Duration>,
    syn_cpu: Vec<Duration>,
    /// The process's CPU time (every thread) of each stage: bare, load, full, analysed.
    cpu: [Vec<Duration>; 4],
    findings: usize,
    /// Wall time of each of `BENCH_BINARIES`, run as a process.
    binaries: Vec<Vec<Duration>>,
}

/// CPU time the process has used so far, all threads together.
fn process_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec for the call to fill.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "the process CPU clock is readable");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Runs `f`, adding its wall time to `wall` and the process's CPU time to `cpu`.
fn timed<R>(wall: &mut Vec<Duration>, cpu: &mut Vec<Duration>, f: impl FnOnce() -> R) -> R {
    let (start, start_cpu) = (Instant::now(), process_cpu());
    let r = f();
    wall.push(start.elapsed());
    cpu.push(process_cpu().saturating_sub(start_cpu));
    r
}

fn main() {
    if let Some(dir) = std::env::var_os(RSS_CHILD) {
        return rss_child(Path::new(&dir));
    }
    // Cargo passes `--bench` to harness-less benches.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let iterations: usize = args.iter().find_map(|a| a.parse().ok()).unwrap_or(5).max(1);
    let mut dirs: Vec<(String, PathBuf)> = args
        .iter()
        .filter(|a| a.parse::<usize>().is_err())
        .map(|a| (short_name(Path::new(a)), PathBuf::from(a)))
        .collect();
    if dirs.is_empty() {
        // hir-ty stays last: the growth check copies the last input.
        for krate in ["tokio", "lemmy_apub", "graphile_worker", "ra_ap_hir_ty"] {
            match newest_registry_crate(krate) {
                Some(dir) => dirs.push((krate.trim_start_matches("ra_ap_").to_string(), dir)),
                None => eprintln!(
                    "note: no `{krate}` under $CARGO_HOME/registry/src (fetch it with a scratch \
                     project and `cargo fetch`, or pass directories): skipped"
                ),
            }
        }
    }
    if dirs.is_empty() {
        eprintln!("usage: cargo bench --bench lint_vs_parse -- [DIR ...] [ITERATIONS]");
        std::process::exit(2);
    }
    let flags = level_flags();
    let enabled: Vec<&str> = flags
        .iter()
        .filter(|f| f.level == Level::Warn)
        .map(|f| f.name.as_str())
        .collect();
    let mut inputs: Vec<Input> = dirs.iter().map(|(n, d)| input(n, d)).collect();
    if let Ok(stage) = std::env::var(STAGE) {
        for input in &inputs {
            for _ in 0..iterations {
                run_stage(&stage, input, &flags);
            }
        }
        return;
    }

    // The growth inputs live in a temporary directory removed at the end.
    let scratch = tempfile::tempdir().expect("a temporary directory");
    let growth = std::env::var("BENCH_GROWTH").map_or(true, |v| v != "0");
    let mut growth_inputs = Vec::new();
    if growth {
        // The last input: hir-ty by default, the large single crate where cost grew fastest.
        let last = inputs.last().expect("an input");
        let src = last.dir.join("src");
        let base = last.name.clone();
        for copies in [1, 2, 4] {
            let dir = scratch.path().join(format!("growth-{copies}x"));
            copies_crate(&src, &dir, copies);
            growth_inputs.push(inputs.len());
            inputs.push(input(&format!("{base} {copies}x"), &dir));
        }
    }

    println!("lints: {}", enabled.join(", "));
    println!(
        "iterations: {iterations} (interleaved), threads: {}",
        rayon::current_num_threads()
    );
    println!("load average before: {}", load_average());
    let opts = ParseOptions::default();
    let binaries: Vec<PathBuf> = std::env::var("BENCH_BINARIES")
        .map(|b| {
            b.split(',')
                .filter(|b| !b.is_empty())
                .map(PathBuf::from)
                .collect()
        })
        .unwrap_or_default();
    let mut times: Vec<Times> = inputs
        .iter()
        .map(|_| Times {
            binaries: vec![Vec::new(); binaries.len()],
            ..Times::default()
        })
        .collect();
    for _ in 0..iterations {
        for (input, t) in inputs.iter().zip(&mut times) {
            let [bare_cpu, load_cpu, full_cpu, analysed_cpu] = &mut t.cpu;
            timed(&mut t.bare, bare_cpu, || bare_parse(&input.files));
            for (bin, wall) in binaries.iter().zip(&mut t.binaries) {
                let start = Instant::now();
                run_binary(bin, &input.dir);
                wall.push(start.elapsed());
            }
            timed(&mut t.syn, &mut t.syn_cpu, || syn_alone(&input.files));

            let loaded = timed(&mut t.load, load_cpu, || {
                parse::load_workspace(&input.ws, &opts)
            });
            drop(loaded);

            let report = timed(&mut t.full, full_cpu, || {
                report::check(&input.ws, &opts, &input.config, &flags).expect("levels are valid")
            });
            t.findings = report.findings.len();

            let analysed = timed(&mut t.analysed, analysed_cpu, || {
                report::check(&input.ws, &opts, &input.analysed, &flags).expect("levels are valid")
            });
            assert_eq!(
                analysed.findings.len(),
                t.findings,
                "a guard name nobody calls changes no finding"
            );
        }
    }
    println!("load average after:  {}", load_average());
    println!();
    println!(
        "{:<16} {:>6} {:>8} {:>10} {:>18} {:>18} {:>22} {:>9}",
        "input",
        "files",
        "lines",
        "bare ms",
        "load ms (x bare)",
        "full ms (x bare)",
        "analysed ms (x bare)",
        "findings"
    );
    for (input, t) in inputs.iter().zip(&mut times) {
        let (bare, load, full, analysed) = (
            median(&mut t.bare),
            median(&mut t.load),
            median(&mut t.full),
            median(&mut t.analysed),
        );
        println!(
            "{:<16} {:>6} {:>8} {:>10.1} {:>10.1} ({:>4.2}x) {:>10.1} ({:>4.2}x) {:>14.1} ({:>4.2}x) {:>9}",
            input.name,
            input.files.len(),
            input.lines,
            ms(bare),
            ms(load),
            ratio(load, bare),
            ms(full),
            ratio(full, bare),
            ms(analysed),
            ratio(analysed, bare),
            t.findings
        );
    }
    // Less moved than wall time by a busy machine, and by how the work splits over threads
    // (a thread waiting for work spins a little, which counts here).
    println!();
    println!(
        "{:<16} {:>14} {:>22} {:>22} {:>26}",
        "cpu",
        "bare cpu ms",
        "load cpu ms (x bare)",
        "full cpu ms (x bare)",
        "analysed cpu ms (x bare)",
    );
    for (input, t) in inputs.iter().zip(&mut times) {
        let [b, l, f, a] = t.cpu.each_mut().map(|v| median(v));
        println!(
            "{:<16} {:>14.1} {:>14.1} ({:>4.2}x) {:>14.1} ({:>4.2}x) {:>18.1} ({:>4.2}x)",
            input.name,
            ms(b),
            ms(l),
            ratio(l, b),
            ms(f),
            ratio(f, b),
            ms(a),
            ratio(a, b),
        );
    }
    println!();
    println!(
        "{:<16} {:>22} {:>22}   (syn alone on the text the lowering hands it, no lowering)",
        "syn", "wall ms (x bare)", "cpu ms (x bare)",
    );
    for (input, t) in inputs.iter().zip(&mut times) {
        let (bare, syn) = (median(&mut t.bare), median(&mut t.syn));
        let (bare_cpu, syn_cpu) = (median(&mut t.cpu[0]), median(&mut t.syn_cpu));
        println!(
            "{:<16} {:>14.1} ({:>4.2}x) {:>14.1} ({:>4.2}x)",
            input.name,
            ms(syn),
            ratio(syn, bare),
            ms(syn_cpu),
            ratio(syn_cpu, bare_cpu),
        );
    }
    if !binaries.is_empty() {
        println!();
        println!("binaries (`idem-lint --no-cache`, wall ms and x bare):");
        for (input, t) in inputs.iter().zip(&mut times) {
            let bare = median(&mut t.bare);
            for (bin, wall) in binaries.iter().zip(&mut t.binaries) {
                let wall = median(wall);
                println!(
                    "  {:<16} {:>10.1} ({:>5.2}x)  {}",
                    input.name,
                    ms(wall),
                    ratio(wall, bare),
                    bin.display()
                );
            }
        }
    }
    if let Some(&one) = growth_inputs.first() {
        println!();
        println!("growth (median full pipeline, analysed and bare parse, relative to 1x):");
        let full1 = median(&mut times[one].full);
        let analysed1 = median(&mut times[one].analysed);
        let bare1 = median(&mut times[one].bare);
        for &i in &growth_inputs {
            let full = median(&mut times[i].full);
            let analysed = median(&mut times[i].analysed);
            let bare = median(&mut times[i].bare);
            println!(
                "  {:<16} full {:>10.1} ms ({:>4.2}x)   analysed {:>10.1} ms ({:>4.2}x)   bare {:>8.1} ms ({:>4.2}x)",
                inputs[i].name,
                ms(full),
                ratio(full, full1),
                ms(analysed),
                ratio(analysed, analysed1),
                ms(bare),
                ratio(bare, bare1)
            );
        }
    }

    // `BENCH_RSS=0` skips it (scripts/bench-compare.sh, which runs the bench many times).
    if std::env::var("BENCH_RSS").is_ok_and(|v| v == "0") {
        return;
    }
    println!();
    println!("peak RSS (one full run in a child process):");
    let mut rss: Vec<(String, PathBuf)> = inputs
        .iter()
        .map(|i| (i.name.clone(), i.dir.clone()))
        .collect();
    if let Some(ra) = ra_workspace(scratch.path()) {
        rss.push(("ra_ap_* workspace".to_string(), ra));
    }
    for (name, dir) in rss {
        match measure_rss(&dir) {
            Ok(line) => println!("  {name:<18} {line}"),
            Err(e) => println!("  {name:<18} not measured: {e}"),
        }
    }
}

/// One run of `stage` on `input` (see [`STAGE`]).
#[inline(never)]
fn run_stage(stage: &str, input: &Input, flags: &[LevelFlag]) {
    let opts = ParseOptions::default();
    match stage {
        "bare" => bare_parse(&input.files),
        "syn" => syn_alone(&input.files),
        "load" => drop(std::hint::black_box(parse::load_workspace(
            &input.ws, &opts,
        ))),
        "full" | "analysed" => {
            let config = if stage == "full" {
                &input.config
            } else {
                &input.analysed
            };
            let report = report::check(&input.ws, &opts, config, flags).expect("levels are valid");
            std::hint::black_box(report.findings.len());
        }
        other => {
            eprintln!("{STAGE}={other}: expected bare, syn, load, full or analysed");
            std::process::exit(2);
        }
    }
}

/// Every lint on (or those `BENCH_LINTS=a,b` names, or with `BENCH_LINTS=default` those on
/// by default: what a run without flags or configuration pays), the others off.
fn level_flags() -> Vec<LevelFlag> {
    let chosen = std::env::var("BENCH_LINTS").unwrap_or_default();
    let on = |lint: &idem_lints::Lint| match chosen.as_str() {
        "" => true,
        "default" => lint.default_level != Level::Allow,
        _ => chosen.split(',').any(|c| c.trim() == lint.name),
    };
    idem_lints::lints::ALL
        .iter()
        .map(|l| LevelFlag {
            level: if on(l) { Level::Warn } else { Level::Allow },
            name: l.name.to_string(),
        })
        .collect()
}

/// Whether `BENCH_WORKSPACE=1` asks for every member of a workspace.
fn whole_workspace() -> bool {
    std::env::var("BENCH_WORKSPACE").is_ok_and(|v| v == "1")
}

/// One run of the build `bin` on `dir`, as a user runs it, output discarded.
fn run_binary(bin: &Path, dir: &Path) {
    let mut cmd = std::process::Command::new(bin);
    cmd.arg("idem-lint")
        .arg(dir)
        .args(["--no-cache", "--message-format", "json"]);
    if whole_workspace() {
        cmd.arg("--workspace");
    }
    let status = cmd
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap_or_else(|e| panic!("could not run {}: {e}", bin.display()));
    assert!(
        status.code().is_some_and(|c| c < 2),
        "{} failed on {}",
        bin.display(),
        dir.display()
    );
}

fn input(name: &str, dir: &Path) -> Input {
    let selection = Selection {
        workspace: whole_workspace(),
        ..Selection::dir(dir)
    };
    let ws = match discovery::discover(&selection) {
        Ok(ws) => ws,
        Err(e) => {
            eprintln!("error: {}: {e:#}", dir.display());
            std::process::exit(2);
        }
    };
    let config = Config::load(&ws).unwrap_or_default();
    let analysed = with_unused_guard(&config);
    // The bare parse reads exactly the files the pipeline reads.
    let loaded = parse::load_workspace(&ws, &ParseOptions::default());
    let sources = loaded.iter().flat_map(|p| &p.sources);
    let files = sources.clone().map(|s| s.path.clone()).collect();
    let lines = sources.map(|s| s.text.lines().count()).sum();
    Input {
        name: name.to_string(),
        dir: dir.to_path_buf(),
        ws,
        config,
        analysed,
        files,
        lines,
    }
}

/// `config` with `[lints.unguarded_entry_point] guards = [..]` naming a fn no code calls: a
/// configured name makes every package relevant, and a guard nobody calls guards nothing.
fn with_unused_guard(config: &Config) -> Config {
    let origin = Origin {
        file: PathBuf::from("lint_vs_parse"),
        line: 1,
        column: 1,
        key: "lints.unguarded_entry_point".to_owned(),
    };
    let mut analysed = config.clone();
    analysed.workspace.settings.push(LintSettings {
        lint: &UNGUARDED_ENTRY_POINT,
        value: serde_json::json!({ "guards": ["bench_guard_no_code_calls"] }),
        keys: vec![("guards".to_owned(), origin.clone())],
        origin,
    });
    analysed
}

/// Read and `syn::parse_file` every file on rayon's pool: the floor.
fn bare_parse(files: &[PathBuf]) {
    parse_each(files, |text| Some(Cow::Borrowed(text)));
}

/// The part of `load` that is syn's: read, write over what the lowering spares syn
/// ([`idem_lints::model::syn_input`]: doc text, test fn bodies) and `syn::parse_file` the rest,
/// lowering nothing. What `full` costs above this is the lowering, the analysis and the
/// bookkeeping around them, the share that changes to this project can reduce.
fn syn_alone(files: &[PathBuf]) {
    parse_each(files, |text| {
        idem_lints::model::syn_input(text, false).map(Cow::Owned)
    });
}

/// Reads each file on rayon's pool and hands syn what `input` makes of its text.
fn parse_each(files: &[PathBuf], input: for<'t> fn(&'t str) -> Option<Cow<'t, str>>) {
    files.par_iter().for_each(|f| {
        let Ok(text) = std::fs::read_to_string(f) else {
            return;
        };
        if let Some(text) = input(&text) {
            std::hint::black_box(syn::parse_file(&text).is_ok());
        }
        // With `span-locations` proc_macro2 keeps every text a thread parsed, and its line
        // table, until told otherwise (the pipeline does this after each file): without
        // it the floor's memory grew with every iteration and its time with it (lemmy_apub:
        // a median of 21-25 ms over 3 iterations, 26-29 ms over 40).
        proc_macro2::extra::invalidate_current_thread_spans();
    });
}

/// A crate at `to` whose root declares `c0`..`c{copies-1}`, each a copy of `src` (its
/// `lib.rs` as the module's `mod.rs`).
fn copies_crate(src: &Path, to: &Path, copies: usize) {
    let root = to.join("src");
    let mut lib = String::new();
    for c in 0..copies {
        let module = root.join(format!("c{c}"));
        copy_dir(src, &module).expect("copy the sources");
        std::fs::rename(module.join("lib.rs"), module.join("mod.rs")).expect("a lib.rs in src/");
        lib.push_str(&format!("mod c{c};\n"));
    }
    std::fs::write(root.join("lib.rs"), lib).expect("write lib.rs");
    std::fs::write(
        to.join("Cargo.toml"),
        "[package]\nname = \"growth\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\n[workspace]\n",
    )
    .expect("write Cargo.toml");
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            copy_dir(&path, &to.join(entry.file_name()))?;
        } else {
            std::fs::copy(&path, to.join(entry.file_name()))?;
        }
    }
    Ok(())
}

/// A workspace under `scratch` whose members are copies of every `ra_ap_*` crate in the
/// registry (the newest version of each).
fn ra_workspace(scratch: &Path) -> Option<PathBuf> {
    let mut names: Vec<String> = registry_dirs()
        .filter_map(|(name, _)| name.strip_prefix("ra_ap_").map(|_| name.clone()))
        .filter_map(|name| Some(name[..name.rfind('-')?].to_string()))
        .collect();
    names.sort();
    names.dedup();
    if names.is_empty() {
        return None;
    }
    let root = scratch.join("ra_ap");
    let mut members = Vec::new();
    for name in &names {
        let dir = newest_registry_crate(name)?;
        copy_dir(&dir, &root.join(name)).ok()?;
        members.push(format!("{name:?}"));
    }
    let manifest = format!(
        "[workspace]\nresolver = \"2\"\nmembers = [{}]\n",
        members.join(", ")
    );
    std::fs::write(root.join("Cargo.toml"), manifest).ok()?;
    Some(root)
}

/// Runs this binary on `dir` as the RSS child; its one-line answer.
fn measure_rss(dir: &Path) -> Result<String, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let out = std::process::Command::new(exe)
        .env(RSS_CHILD, dir)
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The child: one full run on `dir`, then the process's peak RSS.
fn rss_child(dir: &Path) {
    let start = Instant::now();
    let input = input("", dir);
    let report = report::check(
        &input.ws,
        &ParseOptions::default(),
        &input.config,
        &level_flags(),
    )
    .expect("levels are valid");
    let wall = start.elapsed();
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let hwm_kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0);
    println!(
        "{:>7.1} MiB   ({} packages, {} files, {} lines, {} findings; load + full run {:.1} s)",
        hwm_kib as f64 / 1024.0,
        input.ws.packages.len(),
        input.files.len(),
        input.lines,
        report.findings.len(),
        wall.as_secs_f64()
    );
}

fn median(times: &mut [Duration]) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64().max(f64::EPSILON)
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".to_string())
}

fn short_name(dir: &Path) -> String {
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.display().to_string())
}

/// `(directory name, path)` of every crate under `$CARGO_HOME/registry/src/*/`.
fn registry_dirs() -> impl Iterator<Item = (String, PathBuf)> {
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .unwrap_or_default();
    std::fs::read_dir(cargo_home.join("registry/src"))
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|index| std::fs::read_dir(index.path()).ok())
        .flatten()
        .filter_map(Result::ok)
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
}

/// The newest `krate-X.Y.Z` (or `krate-X.Y.Z-pre`, older than `X.Y.Z`) under
/// `$CARGO_HOME/registry/src/*/`.
fn newest_registry_crate(krate: &str) -> Option<PathBuf> {
    let prefix = format!("{krate}-");
    let mut found: Vec<((Vec<u64>, bool), PathBuf)> = registry_dirs()
        .filter_map(|(name, path)| {
            let version = name.strip_prefix(&prefix)?;
            let (release, pre) = match version.split_once('-') {
                Some((release, _)) => (release, true),
                None => (version, false),
            };
            let parts: Option<Vec<u64>> = release.split('.').map(|p| p.parse().ok()).collect();
            Some(((parts?, !pre), path))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, p)| p)
}
