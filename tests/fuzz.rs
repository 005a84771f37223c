//! Fuzzing the whole per-file pipeline on stable Rust: read, nesting scan, parse, lower,
//! suppression scan, every lint, and every output format, on mutations of the fixtures'
//! sources. No input may panic, hang or crash the process; every problem must be a finding.
//!
//! `PROPTEST_CASES=5000 cargo test --release --test fuzz` runs longer; CI runs the default.

use cargo_idem_lint::cli::MessageFormat;
use cargo_idem_lint::{config::Config, discovery, emit, parse::ParseOptions, report};
use proptest::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Every `.rs` file under `fixtures/`: the seed corpus.
fn corpus() -> &'static [Vec<u8>] {
    static CORPUS: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    CORPUS.get_or_init(|| {
        let mut files = Vec::new();
        collect(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures"),
            &mut files,
        );
        files.sort();
        let corpus: Vec<Vec<u8>> = files.iter().filter_map(|f| std::fs::read(f).ok()).collect();
        assert!(corpus.len() > 20, "the fixtures are the seed corpus");
        corpus
    })
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("fixtures").flatten() {
        let p = e.path();
        if p.is_dir() {
            collect(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Fragments that tend to break lexers, parsers and line-based scans.
const PIECES: &[&str] = &[
    "(",
    ")",
    "{",
    "}",
    "[",
    "]",
    "<",
    ">",
    "\"",
    "'",
    "r#\"",
    "\"#",
    "/*",
    "*/",
    "//",
    "\n",
    "\r\n",
    "#!",
    "#![",
    "\u{feff}",
    "\u{202e}",
    "\x1b[2J",
    "mod x;",
    "mod m {",
    "fn f(",
    "->",
    "=>",
    "&&",
    "..=",
    "?",
    ".await",
    "// idem-lint: allow(",
    "// idem-lint: allow-file(",
    "check_then_act)",
    "#[path = \"../../x.rs\"]",
    "Uuid::new_v4()",
    "'a",
    "b'\\xff'",
    "\\",
    "x + x + x + x",
    "impl Fn() -> ",
    "Vec<Vec<",
];

#[derive(Debug, Clone)]
enum Mutation {
    Insert {
        at: usize,
        piece: usize,
        times: usize,
    },
    Delete {
        at: usize,
        len: usize,
    },
    Duplicate {
        at: usize,
        len: usize,
    },
    Truncate {
        at: usize,
    },
    Byte {
        at: usize,
        value: u8,
    },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 0..PIECES.len(), 1usize..40)
            .prop_map(|(at, piece, times)| Mutation::Insert { at, piece, times }),
        (any::<usize>(), 1usize..200).prop_map(|(at, len)| Mutation::Delete { at, len }),
        (any::<usize>(), 1usize..400).prop_map(|(at, len)| Mutation::Duplicate { at, len }),
        any::<usize>().prop_map(|at| Mutation::Truncate { at }),
        (any::<usize>(), any::<u8>()).prop_map(|(at, value)| Mutation::Byte { at, value }),
    ]
}

fn apply(text: &mut Vec<u8>, m: &Mutation) {
    let pos = |at: usize, len: usize| if len == 0 { 0 } else { at % (len + 1) };
    match *m {
        Mutation::Insert { at, piece, times } => {
            let at = pos(at, text.len());
            let bytes = PIECES[piece].repeat(times);
            text.splice(at..at, bytes.into_bytes());
        }
        Mutation::Delete { at, len } => {
            let at = pos(at, text.len());
            let end = (at + len).min(text.len());
            text.drain(at..end);
        }
        Mutation::Duplicate { at, len } => {
            let at = pos(at, text.len());
            let end = (at + len).min(text.len());
            let copy = text[at..end].to_vec();
            text.splice(end..end, copy);
        }
        Mutation::Truncate { at } => {
            let at = pos(at, text.len());
            text.truncate(at);
        }
        Mutation::Byte { at, value } => {
            if !text.is_empty() {
                let at = at % text.len();
                text[at] = value;
            }
        }
    }
}

/// Lints a plain directory holding `text` as `case.rs` and renders every format.
fn pipeline(text: &[u8]) {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("case.rs"), text).expect("write");
    let ws = discovery::discover(&discovery::Selection::dir(dir.path())).expect("discovers");
    let config = Config::load(&ws).expect("config");
    let report = report::check(&ws, &ParseOptions::default(), &config, &[]).expect("checks");
    for f in &report.findings {
        assert!(
            !f.diag.message.contains("internal error"),
            "the parser panicked: {}",
            f.diag.message
        );
    }
    let input = emit::Input {
        ws: &ws,
        report: &report,
        cwd: dir.path(),
    };
    for format in [
        MessageFormat::Human,
        MessageFormat::Short,
        MessageFormat::Json,
        MessageFormat::Sarif,
    ] {
        let mut out = Vec::new();
        emit::emit(format, &input, &mut out).expect("renders");
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 64,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn the_per_file_pipeline_survives_mutated_sources(
        seed in any::<prop::sample::Index>(),
        mutations in prop::collection::vec(mutation(), 1..8),
    ) {
        let corpus = corpus();
        let mut text = corpus[seed.index(corpus.len())].clone();
        for m in &mutations {
            apply(&mut text, m);
        }
        pipeline(&text);
    }
}

#[test]
fn every_seed_goes_through_the_pipeline() {
    for text in corpus() {
        pipeline(text);
    }
}
