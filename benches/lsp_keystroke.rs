//! The language server's latency: time from a buffer change to the diagnostics published
//! for it, on tokio's sources, through the installed binary and its stdio as an editor sees it.
//!
//! `cargo bench --bench lsp_keystroke -- [DIR] [ITERATIONS]` opens `src/sync/mutex.rs` of DIR
//! (default: the newest `tokio-*` under `$CARGO_HOME/registry/src`, fetched as the other benches
//! say) and measures, with the debounce set to 0 so only the work is timed:
//!
//! - **cold open**: a fresh server, `didOpen` to the first `publishDiagnostics` of the file
//!   (discovery, config, parsing every file of the package, the lints);
//! - **keystroke**: an unsaved `didChange` (one more character typed at the end of a comment
//!   line, so every version is a text never seen before and no cached findings apply) to the
//!   `publishDiagnostics` of that version;
//! - **one-file keystroke** and **one-file cold open**: the same on a directory holding only
//!   that file (a package of one file): what re-analysing one file costs, the floor a
//!   keystroke in the crate can approach;
//!
//! `IDEM_LINT_BENCH_FILE=src/...` edits another file of DIR (it needs a `//` comment line).
//! `IDEM_LINT_BENCH_BIN=PATH` measures another build of the server (to compare two builds
//! under the same load, run them in turns). `IDEM_LINT_BENCH_ONE_SERVER=1` opens one server
//! only, so that a profile of a run with many iterations is mostly keystrokes.
//!
//! interleaved (a crate keystroke, then a one-file keystroke), and prints the medians and
//! their ratios. An editor adds the debounce (200 ms by default) on top of the keystroke
//! figures.

#[path = "../tests/common/lsp.rs"]
mod lsp;

use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_cargo-idem-lint");
/// The file edited, relative to DIR, unless `IDEM_LINT_BENCH_FILE` names another.
const FILE: &str = "src/sync/mutex.rs";

/// The server to measure: this build, unless `IDEM_LINT_BENCH_BIN` names another.
fn bin() -> String {
    std::env::var("IDEM_LINT_BENCH_BIN").unwrap_or_else(|_| BIN.to_string())
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let dir = match args.first().map(PathBuf::from).or_else(newest_tokio) {
        Some(dir) => dir,
        None => {
            eprintln!("note: no `tokio-*` under $CARGO_HOME/registry/src; pass a directory");
            return;
        }
    };
    let iterations: usize = args.get(1).and_then(|n| n.parse().ok()).unwrap_or(15);
    let dir = dir.canonicalize().expect("the input directory");
    let edited = std::env::var("IDEM_LINT_BENCH_FILE").unwrap_or_else(|_| FILE.to_string());
    let file = dir.join(&edited);
    let text = std::fs::read_to_string(&file).expect("the file to edit");
    println!(
        "input: {} ({edited}), {iterations} iterations",
        dir.display()
    );

    // The one-file package: the file alone in a plain directory.
    let alone = tempfile::tempdir().expect("tempdir");
    let alone_dir = alone.path().canonicalize().expect("canonical");
    let alone_file = alone_dir.join(file.file_name().expect("a file name"));
    std::fs::write(&alone_file, &text).expect("write the one-file package");

    let mut cold = Vec::new();
    let mut keystroke = Vec::new();
    let mut one_cold = Vec::new();
    let mut one_keystroke = Vec::new();
    // Cold opens are fewer: each starts a server.
    let rounds = match std::env::var_os("IDEM_LINT_BENCH_ONE_SERVER") {
        Some(_) => 1,
        None => iterations.div_ceil(5),
    };
    for round in 0..rounds {
        let (mut c, t) = opened(&dir, &file, &text);
        cold.push(t);
        let (mut one, t) = opened(&alone_dir, &alone_file, &text);
        one_cold.push(t);
        let per_server = if round == 0 { iterations } else { 0 };
        let (mut current, mut one_current) = (text.clone(), text.clone());
        for version in 2..2 + per_server as i64 {
            keystroke.push(type_one(&mut c, &file, &mut current, version));
            one_keystroke.push(type_one(&mut one, &alone_file, &mut one_current, version));
        }
        assert!(c.shutdown().success());
        assert!(one.shutdown().success());
    }
    let cold_ms = median_ms(&mut cold);
    let key_ms = median_ms(&mut keystroke);
    let one_cold_ms = median_ms(&mut one_cold);
    let one_key_ms = median_ms(&mut one_keystroke);
    println!(
        "cold open           median {cold_ms:8.1} ms  ({} runs)",
        cold.len()
    );
    println!(
        "keystroke           median {key_ms:8.1} ms  ({} runs)",
        keystroke.len()
    );
    println!(
        "one-file cold open  median {one_cold_ms:8.1} ms  ({} runs)",
        one_cold.len()
    );
    println!(
        "one-file keystroke  median {one_key_ms:8.1} ms  ({} runs)",
        one_keystroke.len()
    );
    println!("keystroke / cold open          = {:.3}", key_ms / cold_ms);
    println!(
        "keystroke / one-file keystroke = {:.2}",
        key_ms / one_key_ms
    );
    println!(
        "keystroke / one-file cold open = {:.2}",
        key_ms / one_cold_ms
    );
}

/// A fresh server on `dir` with `file` opened: the client and the time to its first
/// diagnostics.
fn opened(dir: &Path, file: &Path, text: &str) -> (lsp::Client, Duration) {
    let mut c = lsp::Client::start(&bin(), &["--debounce-ms", "0"], dir);
    lsp::initialize(&mut c, &[dir], json!({}));
    let start = Instant::now();
    lsp::open(&mut c, file, text);
    c.diagnostics_for(&lsp::uri(file));
    (c, start.elapsed())
}

/// Types one more `x` at the end of the first comment line of `current` (the text stays
/// valid Rust and differs from every earlier version) and times the change to the
/// diagnostics of `version`.
fn type_one(c: &mut lsp::Client, file: &Path, current: &mut String, version: i64) -> Duration {
    let end = comment_line_end(current);
    let line = current[..end].matches('\n').count() as u32;
    let column = current[..end]
        .rsplit('\n')
        .next()
        .unwrap_or("")
        .encode_utf16()
        .count() as u32;
    current.insert(end, 'x');
    let change = json!({"range": {"start": {"line": line, "character": column},
                                  "end": {"line": line, "character": column}}, "text": "x"});
    let start = Instant::now();
    c.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": lsp::uri(file), "version": version},
               "contentChanges": [change]}),
    );
    c.diagnostics_where(&lsp::uri(file), |p| p["version"] == version);
    start.elapsed()
}

/// Byte offset of the end of the first line that is a `//` comment.
fn comment_line_end(text: &str) -> usize {
    let mut start = 0;
    for line in text.split_inclusive('\n') {
        if line.trim_start().starts_with("//") {
            return start + line.trim_end_matches(['\n', '\r']).len();
        }
        start += line.len();
    }
    panic!("no comment line to type into");
}

fn median_ms(times: &mut [Duration]) -> f64 {
    times.sort();
    times[times.len() / 2].as_secs_f64() * 1000.0
}

/// The newest `tokio-X.Y.Z` in the registry sources.
fn newest_tokio() -> Option<PathBuf> {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")))?;
    let mut found: Vec<(Vec<u64>, PathBuf)> = Vec::new();
    for index in std::fs::read_dir(home.join("registry/src")).ok()?.flatten() {
        for krate in std::fs::read_dir(index.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let name = krate.file_name().to_string_lossy().into_owned();
            let Some(version) = name.strip_prefix("tokio-") else {
                continue;
            };
            let parts: Option<Vec<u64>> = version.split('.').map(|p| p.parse().ok()).collect();
            if let Some(parts) = parts {
                found.push((parts, krate.path()));
            }
        }
    }
    found.sort();
    found.pop().map(|(_, p)| p)
}
