//! The documentation site in `docs/lints/` (issue 38, item 9): one page per lint, made of
//! its `--explain` text and the guard usage that fixes it (`guard/README.md`), and an index.
//! The pages are generated from the code; this test fails when they are out of date, and
//! `IDEM_LINT_BLESS=1 cargo test --test docs_site` writes them.

mod common;

use common::{run, s};
use serde_json::Value;
use std::path::PathBuf;

/// The row of `guard/README.md`'s table "The lints, and the guard usage that fixes each"
/// for `lint`: the mistake and the fix.
fn guard_usage(readme: &str, lint: &str) -> Option<(String, String)> {
    let table = &readme[readme.find("## The lints, and the guard usage")?..];
    let row = table
        .lines()
        .find(|l| l.starts_with(&format!("| `{lint}` |")))?;
    let cells: Vec<&str> = row.trim_matches('|').split(" | ").map(str::trim).collect();
    match cells[..] {
        [_, mistake, fix] => Some((mistake.to_string(), fix.to_string())),
        _ => None,
    }
}

/// Every page of the site: `(path relative to the repository, text)`.
fn pages() -> Vec<(PathBuf, String)> {
    let readme =
        std::fs::read_to_string(common::repo().join("guard/README.md")).expect("guard/README");
    let mut index = String::from(
        "# idem-lint: the lints\n\n\
         Generated from the code by `IDEM_LINT_BLESS=1 cargo test --test docs_site`; do not \
         edit. Each page is the lint's `cargo idem-lint --explain` text, with the guard usage \
         that fixes it.\n\n\
         | lint | default | what it catches |\n| --- | --- | --- |\n",
    );
    let mut out = Vec::new();
    for lint in idem_lints::lints::ALL {
        index.push_str(&format!(
            "| [`{}`]({}.md) | {} | {} |\n",
            lint.name,
            lint.name,
            lint.default_level.as_str(),
            lint.desc
        ));
        let mut page = cargo_idem_lint::explain_text(lint);
        page.push('\n');
        if let Some((mistake, fix)) = guard_usage(&readme, lint.name) {
            page.push_str(&format!(
                "\n## The fix with idem-guard\n\nThe mistake: {mistake}.\n\nThe fix: {fix}.\n\n\
                 See the guard's [README](../../guard/README.md).\n"
            ));
        }
        out.push((PathBuf::from(format!("docs/lints/{}.md", lint.name)), page));
    }
    out.push((PathBuf::from("docs/lints/README.md"), index));
    out
}

#[test]
fn the_site_matches_the_code() {
    let repo = common::repo();
    let pages = pages();
    if std::env::var_os("IDEM_LINT_BLESS").is_some() {
        std::fs::create_dir_all(repo.join("docs/lints")).expect("mkdir");
        for (path, text) in &pages {
            std::fs::write(repo.join(path), text).expect("write a page");
        }
    }
    let mut stale = Vec::new();
    for (path, text) in &pages {
        if std::fs::read_to_string(repo.join(path)).ok().as_deref() != Some(text.as_str()) {
            stale.push(path.display().to_string());
        }
    }
    assert!(
        stale.is_empty(),
        "out of date (run `IDEM_LINT_BLESS=1 cargo test --test docs_site`): {stale:?}"
    );
    // No page of a lint that is gone.
    let listed: Vec<PathBuf> = std::fs::read_dir(repo.join("docs/lints"))
        .expect("docs/lints")
        .flatten()
        .map(|e| PathBuf::from("docs/lints").join(e.file_name()))
        .collect();
    for path in listed {
        assert!(
            pages.iter().any(|(p, _)| *p == path),
            "{} is not generated: remove it",
            path.display()
        );
    }
    // Every idempotency lint's page says how the guard fixes it.
    for lint in idem_lints::lints::ALL.iter().filter(|l| !l.is_meta) {
        let (_, text) = pages
            .iter()
            .find(|(p, _)| p.ends_with(format!("{}.md", lint.name)))
            .expect("a page");
        assert!(
            text.contains("## The fix with idem-guard")
                || lint.default_level == idem_lints::Level::Allow,
            "{}: no guard usage in guard/README.md",
            lint.name
        );
    }
}

/// SARIF rules link their page (`helpUri`), at the address `--docs-url` gives.
#[test]
fn sarif_rules_link_their_page() {
    let fixture = common::repo().join("fixtures/parse_errors");
    let out = run(&[
        s(&fixture),
        "--message-format",
        "sarif",
        "--docs-url",
        "https://docs.example.test/lints/{lint}.html",
    ]);
    let doc: Value = serde_json::from_str(&out.stdout).expect("JSON");
    let rules = doc["runs"][0]["tool"]["driver"]["rules"]
        .as_array()
        .expect("rules");
    for rule in rules {
        assert_eq!(
            rule["helpUri"],
            format!(
                "https://docs.example.test/lints/{}.html",
                rule["name"].as_str().expect("name")
            )
        );
    }
    run(&[s(&fixture), "--docs-url", "docs/{lint}"])
        .assert_one_line_error("`--docs-url` takes a URL with `{lint}`");
    // The environment sets it too.
    let out = common::run_env(
        &fixture,
        &["--message-format", "sarif"],
        &[("IDEM_LINT_DOCS_URL", "https://env.example.test/{lint}")],
    );
    let doc: Value = serde_json::from_str(&out.stdout).expect("JSON");
    assert_eq!(
        doc["runs"][0]["tool"]["driver"]["rules"][0]["helpUri"],
        "https://env.example.test/parse_error"
    );
}

/// The language server's `codeDescription` links the same page.
#[test]
fn the_language_server_links_the_page() {
    let (_tmp, root) = common_lsp::fixture_copy();
    let mut c = common_lsp::Client::start_with(
        &common::bin(),
        &["--docs-url", "https://docs.example.test/{lint}"],
        &["--debounce-ms", "0"],
        &root,
    );
    common_lsp::initialize(&mut c, &[&root], serde_json::json!({}));
    let lib = root.join("src/lib.rs");
    let published = c.diagnostics_for(&common_lsp::uri(&lib));
    let first = &published["diagnostics"][0];
    let code = first["code"].as_str().expect("code");
    assert_eq!(
        first["codeDescription"]["href"],
        format!(
            "https://docs.example.test/{}",
            code.trim_start_matches("idem::")
        )
    );
    assert!(c.shutdown().success());
}

#[path = "common/lsp.rs"]
mod common_lsp;
