//! Inputs whose cost grew faster than their size (issue 8, item 14), each at three sizes
//! that double, in one run: the median time per size and the ratio per doubling, which
//! must stay near 2 (linear), not 4 (quadratic).
//!
//! `cargo bench --bench growth -- [ITERATIONS] [NAME..]` (default 3, every input) measures:
//! - `check_then_act`: one fn with N exists/set pairs (the whole pipeline, every lint on);
//! - `suppression`: N fns, each with an own-line `allow` directive and a finding it hides;
//! - `one_long_line`: N findings on one line, rendering human and JSON output (time and
//!   bytes);
//! - `keys_in_one_fn`: one fn given a message, with N nondeterministic keys, each a finding
//!   with a suggestion (issue 24, item 9);
//! - `sibling_modules`: one file of N inline modules side by side, each adding to a scope of
//!   the resolver (quadratic while a file's scopes were found by a scan of those it made);
//! - `call_graph`: a complete call graph, every fn of N files calling every other, sized
//!   so the number of calls doubles (issue 24, item 9);
//! - `did_change_n`: one `didChange` of N ranged edits to a 1.1 MB buffer, and
//!   `did_change_doc`: 8,000 edits to a buffer of N lines (issue 24, item 12), each applied
//!   in full; `did_change_step`: one step of the language server's main loop while such a
//!   `didChange` of N edits is being applied (what a message waits at most), which must not
//!   grow with N.
//! - `members_sharing_one`: a workspace of N one-file members that all depend on one shared
//!   member of 200 fns (issue 36, item 3: at most 2.1 per doubling; the shared member is
//!   analysed once per dependent while members are analysed with the libraries they link);
//! - `member_chain`: a workspace of N one-fn members, each depending on the one before (every
//!   member below a package is linked to it: quadratic while members are re-analysed).

use cargo_idem_lint::cli::MessageFormat;
use cargo_idem_lint::config::Config;
use cargo_idem_lint::discovery::{self, Selection};
use cargo_idem_lint::emit;
use cargo_idem_lint::lsp::documents::{Document, Documents};
use cargo_idem_lint::lsp::position::Encoding;
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
    let runs = Runs {
        iterations,
        // The inputs named on the command line, or all.
        names: std::env::args()
            .skip(1)
            .filter(|a| !a.starts_with("--") && a.parse::<usize>().is_err())
            .collect(),
    };
    println!("median of {iterations} runs; ratio = time(2N) / time(N), linear is 2");
    runs.series(
        "check_then_act",
        &[4_000, 8_000, 16_000],
        |n| lib_rs(pairs_in_one_fn(n)),
        |dir| {
            lint(dir.path());
        },
    );
    runs.series(
        "suppression",
        &[5_000, 10_000, 20_000],
        |n| lib_rs(suppressed_fns(n)),
        |dir| {
            let r = lint(dir.path());
            assert!(r.findings.is_empty(), "every finding is suppressed");
        },
    );
    let mut sizes = Vec::new();
    runs.series(
        "one_long_line",
        &[250, 500, 1_000],
        |n| lib_rs(pairs_on_one_line(n)),
        |dir| {
            let (human, json) = render(dir.path());
            sizes.push((human, json));
        },
    );
    for (human, json) in sizes.iter().step_by(runs.iterations) {
        println!("  one_long_line output: human {human} bytes, json {json} bytes");
    }
    runs.series(
        "keys_in_one_fn",
        &[10_000, 20_000, 40_000],
        |n| lib_rs(keys_in_one_fn(n)),
        |dir| {
            let r = lint(dir.path());
            assert!(!r.findings.is_empty());
        },
    );
    runs.series(
        "sibling_modules",
        &[15_000, 30_000, 60_000],
        |n| lib_rs(sibling_modules(n)),
        |dir| {
            lint(dir.path());
        },
    );
    // 50, 71, 100 files: 2,500, 5,000 and 10,000 calls.
    runs.series("call_graph", &[50, 71, 100], complete_call_graph, |dir| {
        lint(dir.path());
    });
    runs.series(
        "members_sharing_one",
        &[32, 64, 128],
        members_sharing_one,
        |dir| {
            lint(dir.path());
        },
    );
    runs.series("member_chain", &[100, 200, 400], member_chain, |dir| {
        lint(dir.path());
    });
    runs.series(
        "did_change_n",
        &[8_000, 16_000, 32_000],
        |n| (100_000, n),
        |&(lines, edits)| did_change(lines, edits),
    );
    runs.series(
        "did_change_doc",
        &[100_000, 200_000, 400_000],
        |n| (n, 8_000),
        |&(lines, edits)| did_change(lines, edits),
    );
    runs.series(
        "did_change_step",
        &[8_000, 16_000, 32_000],
        |n| {
            let (path, mut docs) = big_buffer(100_000);
            docs.change(&path, 2, edits(100_000, n), Encoding::Utf16)
                .expect("the buffer is open");
            std::cell::RefCell::new(docs)
        },
        |docs| {
            docs.borrow_mut()
                .step(cargo_idem_lint::lsp::server::CHANGES_PER_TURN)
        },
    );
}

struct Runs {
    iterations: usize,
    names: Vec<String>,
}

impl Runs {
    /// Times `run` on the input `make(n)` builds, for each `n`, when `name` is wanted.
    fn series<T>(
        &self,
        name: &str,
        sizes: &[usize],
        make: impl FnMut(usize) -> T,
        run: impl FnMut(&T),
    ) {
        if self.names.is_empty() || self.names.iter().any(|n| n == name) {
            series(name, sizes, self.iterations, make, run);
        }
    }
}

/// Times `run` on the input `make(n)` builds, for each `n`.
fn series<T>(
    name: &str,
    sizes: &[usize],
    iterations: usize,
    mut make: impl FnMut(usize) -> T,
    mut run: impl FnMut(&T),
) {
    let mut medians: Vec<Duration> = Vec::new();
    for &n in sizes {
        let input = make(n);
        let mut times: Vec<Duration> = (0..iterations)
            .map(|_| {
                let start = Instant::now();
                run(&input);
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
            "{name:>15}  N = {n:>6}  {:>10.6} s{ratio}",
            median.as_secs_f64()
        );
        medians.push(median);
    }
}

/// A directory holding `text` as `lib.rs`.
fn lib_rs(text: String) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("lib.rs"), text).expect("write");
    dir
}

fn lint(dir: &Path) -> Report {
    let ws = discovery::discover(&Selection::dir(dir)).expect("discovers");
    let config = Config::load(&ws).expect("config");
    // No budget: the point is how long it takes.
    let opts = ParseOptions {
        file_timeout: Duration::from_secs(3_600),
        package_timeout: Duration::from_secs(3_600),
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

fn keys_in_one_fn(n: usize) -> String {
    let key = "    sqs.send_message().message_deduplication_id(uuid::Uuid::new_v4().to_string()).send().await.ok();\n";
    // Given a message, so each finding also gets its suggestion.
    format!(
        "pub struct Order {{ pub id: String }}\npub async fn h(sqs: &aws_sdk_sqs::Client, o: &Order) {{\n{}}}\n",
        key.repeat(n)
    )
}

/// `n` inline modules side by side in one file, each with a `use` and a fn: one file adds
/// to `n` scopes of the resolver.
fn sibling_modules(n: usize) -> String {
    let mods: String = (0..n)
        .map(|i| format!("mod m{i} {{ use super::*; pub fn f() {{}} }}\n"))
        .collect();
    format!("use redis::AsyncCommands;\n{mods}")
}

/// A crate of `n` modules whose fns each check a key, call every fn of the crate, and
/// write the key.
fn complete_call_graph(n: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let write = |path: &str, text: String| {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    };
    write(
        "Cargo.toml",
        "[package]\nname = \"complete\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[dependencies]\nredis = \"0.25\"\n".to_string(),
    );
    write(
        "src/lib.rs",
        (0..n).map(|i| format!("pub mod m{i};\n")).collect(),
    );
    let calls: String = (0..n)
        .map(|j| format!("    crate::m{j}::f{j}(c, id).await?;\n"))
        .collect();
    for i in 0..n {
        write(
            &format!("src/m{i}.rs"),
            format!(
                "pub async fn f{i}(c: &mut redis::aio::ConnectionManager, id: u64) -> redis::RedisResult<()> {{\n    let k = format!(\"done:{{}}\", id);\n    if c.exists(&k).await? {{ return Ok(()); }}\n{calls}    c.set(&k, 1).await?;\n    Ok(())\n}}\n"
            ),
        );
    }
    dir
}

/// A virtual workspace under a temporary directory whose member `p{i}` is `members[i]`:
/// (dependencies by member index, `lib.rs`). Cargo's default for a virtual root selects
/// every member, as `--workspace` does.
fn workspace(members: &[(Vec<usize>, String)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("Cargo.toml"),
        "[workspace]\nresolver = \"2\"\nmembers = [\"m/*\"]\n",
    )
    .expect("write");
    for (i, (deps, lib)) in members.iter().enumerate() {
        let src = dir.path().join(format!("m/p{i}/src"));
        std::fs::create_dir_all(&src).expect("mkdir");
        let deps: String = deps
            .iter()
            .map(|d| format!("p{d} = {{ path = \"../p{d}\" }}\n"))
            .collect();
        std::fs::write(
            dir.path().join(format!("m/p{i}/Cargo.toml")),
            format!(
                "[package]\nname = \"p{i}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\nredis = \"0.25\"\n{deps}"
            ),
        )
        .expect("write");
        std::fs::write(src.join("lib.rs"), lib).expect("write");
    }
    dir
}

/// Member 0 holds 200 fns that check and write keys; members 1..=n each call two of them.
fn members_sharing_one(n: usize) -> tempfile::TempDir {
    let shared: String = (0..200)
        .map(|i| {
            format!(
                "pub async fn f{i}(c: &mut redis::aio::ConnectionManager, id: u64) -> redis::RedisResult<()> {{\n    let k = format!(\"done:{{}}:{i}\", id);\n    if c.exists(&k).await? {{ return Ok(()); }}\n    c.set(&k, 1).await?;\n    Ok(())\n}}\n"
            )
        })
        .collect();
    let mut members = vec![(Vec::new(), shared)];
    members.extend((1..=n).map(|i| {
        let lib = format!(
            "pub async fn g{i}(c: &mut redis::aio::ConnectionManager, id: u64) -> redis::RedisResult<()> {{\n    p0::f{}(c, id).await?;\n    p0::f{}(c, id).await\n}}\n",
            i % 200,
            (i * 7) % 200
        );
        (vec![0], lib)
    }));
    workspace(&members)
}

/// Member `i` checks a key, calls member `i - 1`'s fn and writes the key (the hostile input
/// `05-member-chain-quadratic.sh` of the shared notes).
fn member_chain(n: usize) -> tempfile::TempDir {
    let members: Vec<(Vec<usize>, String)> = (0..n)
        .map(|i| {
            let call = if i > 0 {
                format!("    p{}::f{}(c).await?;\n", i - 1, i - 1)
            } else {
                String::new()
            };
            let lib = format!(
                "pub async fn f{i}(c: &mut redis::aio::ConnectionManager) -> redis::RedisResult<()> {{\n    if c.exists(\"k\").await? {{ return Ok(()); }}\n{call}    c.set(\"k\", 1).await?;\n    Ok(())\n}}\n"
            );
            let deps = if i > 0 { vec![i - 1] } else { Vec::new() };
            (deps, lib)
        })
        .collect();
    workspace(&members)
}

/// Applies one `didChange` of `n` ranged edits spread over a buffer of `lines` lines.
fn did_change(lines: usize, n: usize) {
    let (path, mut docs) = big_buffer(lines);
    docs.change(&path, 2, edits(lines, n), Encoding::Utf16)
        .expect("the buffer is open");
    docs.settle(&path);
}

/// An open buffer of `lines` lines.
fn big_buffer(lines: usize) -> (std::path::PathBuf, Documents) {
    let path = std::path::PathBuf::from("/bench/big.rs");
    let mut docs = Documents::default();
    docs.open(
        path.clone(),
        Document {
            uri: "file:///bench/big.rs".parse().expect("uri"),
            version: 1,
            text: "let x = 1;\n".repeat(lines).into(),
        },
    );
    (path, docs)
}

/// `n` ranged edits spread over a buffer of `lines` lines.
fn edits(lines: usize, n: usize) -> Vec<lsp_types::TextDocumentContentChangeEvent> {
    (0..n)
        .map(|i| {
            let line = ((i * 19) % lines) as u32;
            lsp_types::TextDocumentContentChangeEvent {
                range: Some(lsp_types::Range::new(
                    lsp_types::Position::new(line, 4),
                    lsp_types::Position::new(line, 5),
                )),
                range_length: None,
                text: "yy".to_string(),
            }
        })
        .collect()
}
