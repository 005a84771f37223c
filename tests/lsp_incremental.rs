//! The language server's incremental re-analysis gives what a from-scratch analysis gives.
//!
//! One [`Root`] lives through a sequence of edits (unsaved buffers), reusing what it kept
//! from earlier analyses (parse results, decoded models, findings of unchanged packages);
//! after every edit its findings, warnings and problems are compared with those of a fresh
//! root analysing the same buffers. The edits change findings in other files through calls
//! (a helper becomes nondeterministic, then deterministic again), shift every span of a file,
//! break a file and mend it, and drop a module and bring it back (file ids move).

use cargo_idem_lint::cli::Args;
use cargo_idem_lint::lsp::engine::{Analysis, Outcome, Root};
use idem_lints::analysis::incremental::Reuse;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// One edit: the file (relative to the fixture) and its whole new text, made from the text
/// the previous step left.
type Edit = (&'static str, fn(&str) -> String);

fn settings() -> Args {
    Args::parse_from_env(["cargo-idem-lint".into()]).expect("default arguments")
}

fn analysed(outcome: Outcome) -> Arc<Analysis> {
    match outcome {
        Outcome::Analysed(a) => a,
        Outcome::Failed(p) => panic!("analysis failed: {p:?}"),
        Outcome::Cancelled => panic!("nothing cancelled it"),
    }
}

/// Everything a client is shown, with file ids spelled as paths.
fn shown(a: &Analysis) -> Vec<String> {
    let mut out: Vec<String> = a
        .report
        .findings
        .iter()
        .map(|f| {
            let path = &a.report.source(f.package, f.diag.span.file).path;
            let labels: Vec<String> = f
                .diag
                .labels
                .iter()
                .map(|l| {
                    let p = &a.report.source(f.package, l.span.file).path;
                    format!("{}:{}..{} {}", p.display(), l.span.lo, l.span.hi, l.message)
                })
                .collect();
            format!(
                "{}:{}..{} {:?} {} | {:?} | {labels:?} | {:?} | {:?} | {:?}",
                path.display(),
                f.diag.span.lo,
                f.diag.span.hi,
                f.diag.level,
                f.diag.lint.name,
                f.diag.message,
                f.diag.notes,
                f.diag.help,
                f.diag.suggestions
            )
        })
        .collect();
    for w in &a.report.warnings {
        out.push(format!("warning {}: {:?}", w.path.display(), w.warning));
    }
    for p in &a.report.packages {
        for d in &p.problems {
            out.push(format!("problem {:?}", d));
        }
    }
    out
}

/// Findings in `file` (relative to `dir`).
fn count_in(a: &Analysis, dir: &Path, file: &str) -> usize {
    let path = dir.join(file);
    a.report
        .findings
        .iter()
        .filter(|f| a.report.source(f.package, f.diag.span.file).path == path)
        .count()
}

/// Runs `edits` on the fixture at `rel`, comparing every step; returns the finding counts
/// of `watch` after each step (the first entry before any edit).
fn replay(rel: &str, edits: &[Edit], watch: &str) -> Vec<usize> {
    replay_reusing(rel, edits, watch).0
}

/// [`replay`], also returning after each edit how much of the kept analysis of the first
/// package was reused.
fn replay_reusing(rel: &str, edits: &[Edit], watch: &str) -> (Vec<usize>, Vec<Option<Reuse>>) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(rel)
        .canonicalize()
        .expect("fixture");
    let settings = settings();
    let no = AtomicBool::new(false);
    let mut kept = Root::new(dir.clone());
    let mut buffers: Vec<(PathBuf, Arc<str>)> = Vec::new();
    let first = analysed(kept.analyze(&settings, &buffers, &no));
    let mut counts = vec![count_in(&first, &dir, watch)];
    let mut reuses = Vec::new();
    let mut previous = first;
    for (step, (file, edit)) in edits.iter().enumerate() {
        let path = dir.join(file);
        let old: Arc<str> = match buffers.iter().find(|(p, _)| *p == path) {
            Some((_, t)) => t.clone(),
            None => Arc::from(std::fs::read_to_string(&path).expect("read")),
        };
        let new: Arc<str> = Arc::from(edit(&old));
        assert_ne!(*old, *new, "step {step} of {rel} must change {file}");
        buffers.retain(|(p, _)| *p != path);
        buffers.push((path.clone(), new));

        let warm = analysed(kept.analyze(&settings, &buffers, &no));
        let cold = analysed(Root::new(dir.clone()).analyze(&settings, &buffers, &no));
        assert_eq!(
            shown(&warm),
            shown(&cold),
            "{rel}, step {step} ({file}): the incremental analysis differs"
        );
        // It was incremental: at most the edited file was parsed again, and the models of
        // files that did not change are the very ones of the step before.
        for (pkg, before) in warm.report.packages.iter().zip(&previous.report.packages) {
            assert!(
                pkg.parsed.len() <= 1,
                "{rel}, step {step}: {:?}",
                pkg.parsed
            );
            for (model, src) in pkg.package.files.iter().zip(&pkg.sources) {
                if src.path == path {
                    continue;
                }
                if let Some(old) = before.package.files.iter().find(|m| m.path == src.path) {
                    if old.id == model.id {
                        assert!(
                            Arc::ptr_eq(old, model),
                            "{rel}, step {step}: `{}` was not reused",
                            src.path.display()
                        );
                    }
                }
            }
        }
        counts.push(count_in(&warm, &dir, watch));
        reuses.push(warm.report.reuse[0]);
        previous = warm;
    }
    (counts, reuses)
}

#[test]
fn edits_through_calls_across_files_match_a_fresh_analysis() {
    let edits: &[Edit] = &[
        // The deterministic key helper mints a fresh id: its callers' keys in handler.rs
        // (and claims.rs) become findings.
        ("src/keys/mod.rs", |t| {
            t.replace("event.kind, event.id)", "event.kind, uuid::Uuid::new_v4())")
        }),
        // Lines added at the top of the caller: every span after them moves.
        ("src/handler.rs", |t| format!("// one\n// two\n\n{t}")),
        // Back to the event's id: those findings go away again.
        ("src/keys/mod.rs", |t| {
            t.replace("event.kind, uuid::Uuid::new_v4())", "event.kind, event.id)")
        }),
        // The nondeterministic helper becomes deterministic: the findings through it go.
        ("src/keys/fresh.rs", |t| {
            t.replace("let id = Uuid::new_v4();", "let id = 7;")
        }),
        // A broken caller, then mended.
        ("src/handler.rs", |t| {
            t.replace("pub async fn start(", "pub async fn start((")
        }),
        ("src/handler.rs", |t| {
            t.replace("pub async fn start((", "pub async fn start(")
        }),
        // A module dropped (the files after it get other ids), then back.
        ("src/lib.rs", |t| t.replace("pub mod claims;\n", "")),
        ("src/lib.rs", |t| {
            t.replace("pub mod handler;", "pub mod claims;\npub mod handler;")
        }),
        ("src/keys/fresh.rs", |t| {
            t.replace("let id = 7;", "let id = Uuid::new_v4();")
        }),
    ];
    let (counts, reuses) =
        replay_reusing("nondeterministic_key/multi_file", edits, "src/handler.rs");
    // Body edits reuse the kept analysis: the callee's changed summary had its callers in
    // handler.rs walked again (their findings changed above), and spans moved in the caller.
    // A broken file loses its fns and a dropped module moves file ids: analysed afresh.
    // Texts seen before get their cached findings (`None`: not analysed).
    use Reuse::{Fresh, Summaries};
    assert_eq!(
        reuses,
        [
            Some(Summaries),
            Some(Summaries),
            Some(Summaries),
            Some(Summaries),
            Some(Fresh),
            None,
            Some(Fresh),
            None,
            None
        ]
    );
    // The edits did what they say, so the comparison above compared findings that moved.
    assert_eq!(counts[0], 3, "{counts:?}");
    assert!(
        counts[1] > counts[0],
        "a finding appears through the call: {counts:?}"
    );
    assert_eq!(counts[3], counts[0], "and goes: {counts:?}");
    assert!(
        counts[4] < counts[0],
        "through the other helper: {counts:?}"
    );
    assert_eq!(counts[9], counts[0], "all back: {counts:?}");
}

#[test]
fn edits_in_the_demo_and_the_lsp_fixture_match_a_fresh_analysis() {
    let demo: &[Edit] = &[
        ("src/billing.rs", |t| format!("\n\n{t}")),
        ("src/handlers/transcode.rs", |t| {
            t.replacen("fn ", "fn  ", 1)
        }),
        ("src/lib.rs", |t| {
            format!("{t}\npub fn extra() -> String {{ uuid::Uuid::new_v4().to_string() }}\n")
        }),
        ("src/notify.rs", |t| format!("{t}\nfn broken( {{\n")),
        ("src/notify.rs", |t| t.replace("\nfn broken( {\n", "")),
    ];
    replay("demo", demo, "src/billing.rs");
    let lsp: &[Edit] = &[
        ("src/lib.rs", |t| {
            t.replace("Uuid::new_v4().to_string()", "order_id.to_string()")
        }),
        ("src/transcode.rs", |t| {
            t.replace(
                ".create_job()",
                ".create_job().client_request_token(order_id)",
            )
        }),
        ("src/lib.rs", |t| {
            t.replace("order_id.to_string()", "Uuid::new_v4().to_string()")
        }),
    ];
    let counts = replay("lsp", lsp, "src/lib.rs");
    assert_eq!(counts, [2, 1, 1, 2]);
}

#[test]
fn edits_to_items_or_through_cycles_are_analysed_afresh() {
    let edits: &[Edit] = &[
        // A body edit adding a call: summaries reused.
        ("src/keys/fresh.rs", |t| {
            t.replace(
                "format!(\"evt-{id}\")",
                "format!(\"evt-{id}-{}\", stamped(\"x\"))",
            )
        }),
        // A `use` declaration, a renamed fn, a changed signature: the package-wide tables
        // may change, nothing is reused.
        ("src/keys/mod.rs", |t| {
            t.replace(
                "use crate::Event;",
                "use crate::Event;\nuse std::fmt::Write;",
            )
        }),
        ("src/keys/mod.rs", |t| {
            t.replace("fn event_key(", "fn event_key2(")
        }),
        ("src/keys/mod.rs", |t| {
            t.replace(
                "(event: &Event) -> String",
                "(event: &Event, _n: u8) -> String",
            )
        }),
        // The edited fn becomes recursive: which fns are above a call cycle changed, so the
        // summaries are computed afresh (the tables and call edges are still reused). Then
        // the nondeterministic helper, which calls the recursive one, turns deterministic:
        // the fixed point over the fns in and above the cycle (the helper, its callers in
        // handler.rs) runs again, everything else is kept.
        ("src/keys/fresh.rs", |t| {
            t.replace(
                "pub fn stamped(prefix: &str) -> String {",
                "pub fn stamped(prefix: &str) -> String {\n    if prefix.is_empty() { return stamped(\"p\"); }",
            )
        }),
        ("src/keys/fresh.rs", |t| {
            t.replace("let id = Uuid::new_v4();", "let id = 7;")
        }),
    ];
    let (counts, reuses) =
        replay_reusing("nondeterministic_key/multi_file", edits, "src/handler.rs");
    use Reuse::{Fresh, Summaries, Tables};
    assert_eq!(
        reuses,
        [
            Some(Summaries),
            Some(Fresh),
            Some(Fresh),
            Some(Fresh),
            Some(Tables),
            Some(Summaries)
        ]
    );
    assert!(
        counts[6] < counts[5],
        "the last edit removed findings in handler.rs: {counts:?}"
    );
}

/// Copies the fixture `rel` into a new temporary directory.
fn copied(rel: &str) -> (tempfile::TempDir, PathBuf) {
    let from = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(rel);
    let tmp = tempfile::tempdir().expect("tempdir");
    let to = tmp.path().canonicalize().expect("canonical").join("crate");
    copy_dir(&from, &to);
    (tmp, to)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).expect("copy");
        }
    }
}

#[test]
fn files_without_a_buffer_changed_on_disk_between_keystrokes_are_read_again() {
    let (_tmp, dir) = copied("nondeterministic_key/multi_file");
    // Texts are kept only once their files are settled (see `DiskTexts`): wait for that, so
    // the keystrokes below do use kept texts.
    std::thread::sleep(std::time::Duration::from_millis(2200));
    let settings = settings();
    let no = AtomicBool::new(false);
    let mut kept = Root::new(dir.clone());
    let handler = dir.join("src/handler.rs");
    let fresh = dir.join("src/keys/fresh.rs");
    let mut text = std::fs::read_to_string(&handler).expect("read");
    let step = |kept: &mut Root, text: &mut String| {
        text.insert_str(0, "// typed\n");
        let buffers = vec![(handler.clone(), Arc::from(text.as_str()))];
        let warm = analysed(kept.analyze(&settings, &buffers, &no));
        let cold = analysed(Root::new(dir.clone()).analyze(&settings, &buffers, &no));
        assert_eq!(
            shown(&warm),
            shown(&cold),
            "the kept texts differ from the disk"
        );
        count_in(&warm, &dir, "src/handler.rs")
    };
    let before = step(&mut kept, &mut text);
    let files = kept.kept_texts();
    assert!(files >= 4, "the other files' texts are kept: {files}");
    assert_eq!(step(&mut kept, &mut text), before);

    // The helper becomes deterministic on disk, at the same size, with no event from the
    // editor: the next keystroke elsewhere sees it (its findings in handler.rs go).
    let old = std::fs::read_to_string(&fresh).expect("read");
    let from = "let id = Uuid::new_v4();";
    let to = format!("{:<1$}", "let id = 7;", from.len());
    let new = old.replace(from, &to);
    assert!(new != old && new.len() == old.len());
    std::fs::write(&fresh, new).expect("write");
    let after = step(&mut kept, &mut text);
    assert!(after < before, "{before} -> {after}");
    // Just written, so not kept (read again until it settles); the rest still are.
    assert_eq!(kept.kept_texts(), files - 1);

    // And back, after the editor said files changed (which drops every kept text).
    std::fs::write(&fresh, old).expect("write");
    kept.forget_texts();
    assert_eq!(kept.kept_texts(), 0);
    assert_eq!(step(&mut kept, &mut text), before);
}

#[test]
fn a_file_reached_twice_is_linted_once_with_kept_texts_too() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().canonicalize().expect("canonical").join("crate");
    std::fs::create_dir_all(dir.join("src")).expect("mkdir");
    let write = |rel: &str, text: &str| std::fs::write(dir.join(rel), text).expect("write");
    write(
        "Cargo.toml",
        "[package]\nname = \"twice\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    );
    write(
        "src/lib.rs",
        "mod keys;\nmod linked;\n#[path = \"keys.rs\"]\nmod again;\n",
    );
    write(
        "src/keys.rs",
        "pub fn key() -> String { uuid::Uuid::new_v4().to_string() }\n",
    );
    std::os::unix::fs::symlink(dir.join("src/keys.rs"), dir.join("src/linked.rs"))
        .expect("symlink");
    // Settled, so the second analysis uses kept texts (and the paths they resolved to).
    std::thread::sleep(std::time::Duration::from_millis(2200));
    let settings = settings();
    let no = AtomicBool::new(false);
    let mut root = Root::new(dir.clone());
    let lib = dir.join("src/lib.rs");
    let mut files = Vec::new();
    for text in ["", "// typed\n", "// typed again\n"] {
        let buffer = format!("{text}{}", std::fs::read_to_string(&lib).expect("read"));
        let buffers = vec![(lib.clone(), Arc::from(buffer.as_str()))];
        let a = analysed(root.analyze(&settings, &buffers, &no));
        let cold = analysed(Root::new(dir.clone()).analyze(&settings, &buffers, &no));
        assert_eq!(shown(&a), shown(&cold));
        let paths: Vec<PathBuf> = a.report.packages[0]
            .sources
            .iter()
            .map(|s| s.path.clone())
            .collect();
        files.push(paths);
    }
    assert!(root.kept_texts() >= 2, "{}", root.kept_texts());
    assert_eq!(files[0], [lib.clone(), dir.join("src/keys.rs")]);
    assert_eq!(files[1], files[0]);
    assert_eq!(files[2], files[0]);
}
