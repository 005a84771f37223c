//! The language server's latency: time from a buffer change to the diagnostics published
//! for it, through the installed binary and its stdio as an editor sees it.
//!
//! `cargo bench --bench lsp_keystroke -- [DIR] [ITERATIONS]` opens a file of DIR (default:
//! `src/sync/mutex.rs` of the newest `tokio-*` under `$CARGO_HOME/registry/src`, fetched as
//! the other benches say) and measures, with the debounce set to 0 so only the work is timed:
//!
//! - **cold open**: a fresh server, `didOpen` to the first `publishDiagnostics` of the file
//!   (discovery, config, parsing every file of the package, the lints);
//! - **keystroke**: an unsaved `didChange` inside a fn body (one more digit typed into a
//!   statement `let _typed = 1;` at the top of the first fn body of the file, so every
//!   version is a text never seen before and no cached findings apply) to the
//!   `publishDiagnostics` of that version;
//! - **one-file keystroke** and **one-file cold open**: the same on a directory holding only
//!   that file (a package of one file): what re-analysing one file costs, the floor a
//!   keystroke in the crate can approach;
//! - **demo keystroke** and **demo cold open**: the same on `fixtures/demo`
//!   (`src/notify.rs`), the README's example.
//!
//! `IDEM_LINT_BENCH_FILE=src/...` edits another file of DIR, `IDEM_LINT_BENCH_FN=name` the
//! body of another fn. On lemmy's workspace (issue 38: at most 50 ms past the debounce for
//! a keystroke, 1 s for a cold open):
//!
//! ```text
//! IDEM_LINT_BENCH_FILE=crates/apub/activities/src/create_or_update/post.rs \
//! IDEM_LINT_BENCH_FN=receive cargo bench --bench lsp_keystroke -- /path/to/lemmy 20
//! ```
//!
//! `IDEM_LINT_BENCH_BIN=PATH` measures another build of the server (to compare two builds
//! under the same load, run them in turns). `IDEM_LINT_BENCH_ONE_SERVER=1` opens one server
//! only, so that a profile of a run with many iterations is mostly keystrokes.
//!
//! Keystrokes are interleaved (a crate keystroke, then a one-file and a demo keystroke),
//! and the medians and their ratios printed. An editor adds the debounce (200 ms by
//! default) on top of the keystroke figures.

#[path = "../tests/common/lsp.rs"]
mod lsp;

use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_cargo-idem-lint");
/// The file edited, relative to DIR, unless `IDEM_LINT_BENCH_FILE` names another.
const FILE: &str = "src/sync/mutex.rs";
/// The demo's file edited.
const DEMO_FILE: &str = "src/notify.rs";
/// The statement the keystrokes type into: one more digit before its `;` each time.
const TYPED: &str = "let _typed = 1";

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
    let in_fn = std::env::var("IDEM_LINT_BENCH_FN").ok();
    let file = dir.join(&edited);
    let text = std::fs::read_to_string(&file).expect("the file to edit");
    let (text, at) = with_typed_statement(&text, in_fn.as_deref());
    // Opened as it is on screen: with the statement, which is not written to DIR.
    println!(
        "input: {} ({edited}, fn body at byte {at}), {iterations} iterations",
        dir.display()
    );

    // The one-file package: the file alone in a plain directory.
    let alone = tempfile::tempdir().expect("tempdir");
    let alone_dir = alone.path().canonicalize().expect("canonical");
    let alone_file = alone_dir.join(file.file_name().expect("a file name"));
    std::fs::write(&alone_file, &text).expect("write the one-file package");
    // The demo, copied so nothing is written into the repository.
    let demo = tempfile::tempdir().expect("tempdir");
    let demo_dir = demo.path().canonicalize().expect("canonical");
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo"),
        &demo_dir,
    );
    let demo_file = demo_dir.join(DEMO_FILE);
    let demo_text = std::fs::read_to_string(&demo_file).expect("the demo file");
    let (demo_text, demo_at) = with_typed_statement(&demo_text, None);
    std::fs::write(&demo_file, &demo_text).expect("write the demo file");

    let mut cold = Vec::new();
    let mut keystroke = Vec::new();
    let mut one_cold = Vec::new();
    let mut one_keystroke = Vec::new();
    let mut demo_cold = Vec::new();
    let mut demo_keystroke = Vec::new();
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
        let (mut d, t) = opened(&demo_dir, &demo_file, &demo_text);
        demo_cold.push(t);
        let per_server = if round == 0 { iterations } else { 0 };
        let mut typed = [at, at, demo_at];
        let mut current = [text.clone(), text.clone(), demo_text.clone()];
        for version in 2..2 + per_server as i64 {
            keystroke.push(type_one(
                &mut c,
                &file,
                &mut current[0],
                &mut typed[0],
                version,
            ));
            one_keystroke.push(type_one(
                &mut one,
                &alone_file,
                &mut current[1],
                &mut typed[1],
                version,
            ));
            demo_keystroke.push(type_one(
                &mut d,
                &demo_file,
                &mut current[2],
                &mut typed[2],
                version,
            ));
        }
        assert!(c.shutdown().success());
        assert!(one.shutdown().success());
        assert!(d.shutdown().success());
    }
    let cold_ms = median_ms(&mut cold);
    let key_ms = median_ms(&mut keystroke);
    let one_cold_ms = median_ms(&mut one_cold);
    let one_key_ms = median_ms(&mut one_keystroke);
    let demo_cold_ms = median_ms(&mut demo_cold);
    let demo_key_ms = median_ms(&mut demo_keystroke);
    let line = |name: &str, ms: f64, runs: usize| {
        println!("{name:<20}median {ms:8.1} ms  ({runs} runs)");
    };
    line("cold open", cold_ms, cold.len());
    line("keystroke", key_ms, keystroke.len());
    line("one-file cold open", one_cold_ms, one_cold.len());
    line("one-file keystroke", one_key_ms, one_keystroke.len());
    line("demo cold open", demo_cold_ms, demo_cold.len());
    line("demo keystroke", demo_key_ms, demo_keystroke.len());
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

/// Types one more digit into the statement [`TYPED`] whose `;` is at byte `at` of
/// `current` (the text stays valid Rust, differs from every earlier version, and the change
/// is inside a fn body) and times the change to the diagnostics of `version`.
fn type_one(
    c: &mut lsp::Client,
    file: &Path,
    current: &mut String,
    at: &mut usize,
    version: i64,
) -> Duration {
    let line = current[..*at].matches('\n').count() as u32;
    let column = current[..*at]
        .rsplit('\n')
        .next()
        .unwrap_or("")
        .encode_utf16()
        .count() as u32;
    current.insert(*at, '7');
    *at += 1;
    let change = json!({"range": {"start": {"line": line, "character": column},
                                  "end": {"line": line, "character": column}}, "text": "7"});
    let start = Instant::now();
    c.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": lsp::uri(file), "version": version},
               "contentChanges": [change]}),
    );
    c.diagnostics_where(&lsp::uri(file), |p| p["version"] == version);
    start.elapsed()
}

/// `text` with the statement [`TYPED`] as the first line of the body of fn `name` (the
/// first fn with a body when `None`), and the byte offset of its `;`.
fn with_typed_statement(text: &str, name: Option<&str>) -> (String, usize) {
    let fn_at = match name {
        Some(name) => text
            .find(&format!("fn {name}("))
            .or_else(|| text.find(&format!("fn {name}<")))
            .unwrap_or_else(|| panic!("no fn `{name}` to type into")),
        None => text.find("fn ").expect("a fn to type into"),
    };
    // The first line that ends with the `{` opening the body.
    let open = text[fn_at..]
        .find("{\n")
        .map(|i| fn_at + i + 2)
        .expect("a fn body to type into");
    let mut out = String::with_capacity(text.len() + 32);
    out.push_str(&text[..open]);
    out.push_str("    ");
    out.push_str(TYPED);
    let at = out.len();
    out.push_str(";\n");
    out.push_str(&text[open..]);
    (out, at)
}

/// Copies the files of `from` into `to`, keeping their relative paths.
fn copy_dir(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).expect("read dir").flatten() {
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            std::fs::create_dir_all(&target).expect("mkdir");
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
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
