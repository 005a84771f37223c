//! Output for CI (issue 9, item 4): `--message-format github`, color that problem matchers
//! can read, and SARIF that GitHub code scanning resolves in a monorepo.

mod common;

use common::{manifest, run, run_env, s, tree};
use serde_json::Value;
use std::path::Path;

/// A repository (`.git` at its top) whose Rust code lives in `rust-svc/`, as in a monorepo.
fn monorepo(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tree(files);
    std::fs::create_dir(dir.path().join(".git")).expect("mkdir .git");
    dir
}

/// Two identical flagged lines in one function: two `nondeterministic_key` findings whose
/// line text is the same.
const TWICE: &str = "use redis::AsyncCommands;\n\
pub async fn f(conn: &mut redis::aio::MultiplexedConnection) -> bool {\n    \
let a = conn.set_nx(uuid::Uuid::new_v4().to_string(), 1).await.unwrap_or(false);\n    \
let a = conn.set_nx(uuid::Uuid::new_v4().to_string(), 1).await.unwrap_or(false);\n    \
a\n}\n";

#[test]
fn github_commands_name_the_file_from_the_repository_root() {
    let out = run(&["fixtures/demo", "--message-format", "github"]);
    out.assert_code(0);
    let json = run(&["fixtures/demo", "--message-format", "json"]);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), json.messages().len(), "{}", out.stdout);
    for line in &lines {
        assert!(
            line.starts_with("::warning file=fixtures/demo/src/"),
            "{line}"
        );
        assert!(line.contains(",title=idem%3A%3A"), "{line}");
        // Every file named exists, relative to the repository root.
        let file = line["::warning file=".len()..]
            .split(',')
            .next()
            .expect("file");
        assert!(common::repo().join(file).is_file(), "{file}");
    }
    let cta = lines
        .iter()
        .find(|l| l.contains("check_then_act"))
        .expect("the check_then_act finding");
    assert!(
        cta.starts_with("::warning file=fixtures/demo/src/notify.rs,line=59,endLine=59,col="),
        "{cta}"
    );
    let deny = run(&[
        "fixtures/demo",
        "--message-format",
        "github",
        "-D",
        "warnings",
    ]);
    deny.assert_code(1);
    assert!(
        deny.stdout.lines().all(|l| l.starts_with("::error ")),
        "{}",
        deny.stdout
    );
}

#[test]
fn github_properties_are_escaped() {
    let dir = monorepo(&[("a,b:c%.rs", "fn f( {\n")]);
    let out = run_env(dir.path(), &[".", "--message-format", "github"], &[]);
    out.assert_code(0);
    let line = out.stdout.lines().next().expect("one command");
    assert!(
        line.starts_with("::warning file=a%2Cb%3Ac%25.rs,line=1,"),
        "`,` and `:` end a property, `%` starts an escape: {line}"
    );
    // The data part keeps `:` (only `%`, CR and LF are escaped there).
    let data = line.splitn(3, "::").nth(2).expect("data");
    assert!(!data.contains('\n') && !data.contains('\r'), "{data}");
}

/// The Rust problem matcher GitHub users install (`rust.json`, as in `actions-rust-lang`):
/// the severity line, then the location line.
fn matcher_location(line: &str) -> Option<(String, u32, u32)> {
    let rest = line.trim_start_matches([' ', '-', '>', '=']);
    let mut parts = rest.rsplitn(3, ':');
    let col = parts.next()?.parse().ok()?;
    let line_no = parts.next()?.parse().ok()?;
    Some((parts.next()?.to_string(), line_no, col))
}

#[test]
fn colored_output_keeps_the_location_line_plain() {
    let fixture = common::repo().join("fixtures/demo");
    let colored = run_env(&fixture, &[], &[("CARGO_TERM_COLOR", "always")]);
    colored.assert_code(0);
    assert!(
        colored.stdout.contains("\x1b["),
        "CARGO_TERM_COLOR=always colors"
    );
    let locations: Vec<&str> = colored
        .stdout
        .lines()
        .filter(|l| l.trim_start().starts_with("-->"))
        .collect();
    let findings = common::run_in(&fixture, &["--message-format", "json"])
        .messages()
        .len();
    assert!(
        locations.len() >= findings && findings > 0,
        "{}",
        colored.stdout
    );
    for l in &locations {
        assert!(
            !l.contains('\x1b'),
            "an escape code in the location line: {l:?}"
        );
        let (file, line, _) = matcher_location(l).expect("the matcher reads it");
        assert!(fixture.join(&file).is_file(), "{file}");
        assert!(line > 0);
    }
    // The flag wins over the variable, and `never` colors nothing.
    let plain = run_env(
        &fixture,
        &["--color", "never"],
        &[("CARGO_TERM_COLOR", "always")],
    );
    assert!(!plain.stdout.contains('\x1b'));
    let never = run_env(&fixture, &[], &[("CARGO_TERM_COLOR", "never")]);
    assert!(!never.stdout.contains('\x1b'));
    // `--color always` with NO_COLOR set: the flag is explicit, so it colors.
    let forced = run_env(&fixture, &["--color", "always"], &[("NO_COLOR", "1")]);
    assert!(forced.stdout.contains("\x1b["));
}

fn sarif(dir: &Path, args: &[&str]) -> Value {
    let mut all = vec![".", "--message-format", "sarif"];
    all.extend_from_slice(args);
    let out = run_env(dir, &all, &[]);
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", out.stderr))
}

fn uris(doc: &Value) -> Vec<String> {
    doc["runs"][0]["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
                .as_str()
                .expect("uri")
                .to_string()
        })
        .collect()
}

#[test]
fn sarif_uris_are_relative_to_the_repository_root() {
    let repo = monorepo(&[
        ("rust-svc/Cargo.toml", &manifest("svc", "")),
        ("rust-svc/src/lib.rs", "fn f( {\n"),
    ]);
    let svc = repo.path().join("rust-svc");
    let doc = sarif(&svc, &[]);
    assert_eq!(uris(&doc), ["rust-svc/src/lib.rs"]);
    let base = doc["runs"][0]["originalUriBaseIds"]["%SRCROOT%"]["uri"]
        .as_str()
        .expect("base");
    let root = repo.path().canonicalize().expect("canonical");
    assert!(
        base.starts_with("file:///") && base.trim_end_matches('/').ends_with(s(&root)),
        "{base} is not the repository root {}",
        root.display()
    );
    // `--sarif-root` names another base.
    let doc = sarif(&svc, &["--sarif-root", s(&svc)]);
    assert_eq!(uris(&doc), ["src/lib.rs"]);
}

#[test]
fn identical_lines_get_distinct_fingerprints_and_no_made_up_uri() {
    let dir = tree(&[
        (
            "Cargo.toml",
            &manifest("twice", "[dependencies]\nredis = \"0.27\"\nuuid = \"1\"\n"),
        ),
        ("src/lib.rs", TWICE),
    ]);
    let doc = sarif(dir.path(), &[]);
    let results = doc["runs"][0]["results"].as_array().expect("results");
    assert_eq!(results.len(), 2, "{doc:#}");
    let prints: Vec<&str> = results
        .iter()
        .map(|r| {
            r["partialFingerprints"]["idemLint/v2"]
                .as_str()
                .expect("fp")
        })
        .collect();
    let (hash_a, n_a) = prints[0].split_once(':').expect("hash:occurrence");
    let (hash_b, n_b) = prints[1].split_once(':').expect("hash:occurrence");
    assert_eq!(hash_a, hash_b, "same lint, file and line text");
    assert_eq!((n_a, n_b), ("1", "2"));
    let driver = &doc["runs"][0]["tool"]["driver"];
    match option_env!("CARGO_PKG_REPOSITORY").filter(|r| !r.is_empty()) {
        Some(repo) => assert_eq!(driver["informationUri"], repo),
        None => assert!(driver.get("informationUri").is_none(), "{driver}"),
    }
}
