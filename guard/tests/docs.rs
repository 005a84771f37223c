//! What the documentation promises exists: the test files it points to, the re-exported
//! driver crates, and the README's Lambda example as the doc test that runs.

use std::path::Path;

/// Every `tests/...` path named in the crate's sources and README.
fn mentioned_test_paths(text: &str) -> Vec<String> {
    text.match_indices("tests/")
        .filter(|(at, _)| {
            // `tests/` at the start of a path, not inside another one (`guard/tests/`).
            !text[..*at].ends_with(|c: char| c.is_alphanumeric() || c == '/' || c == '_')
        })
        .map(|(at, _)| {
            let path: String = text[at..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || "/_.-".contains(*c))
                .collect();
            path.trim_end_matches(['.', '/']).to_owned()
        })
        .collect()
}

fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn test_files_named_in_the_docs_exist() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("README.md"), root.join("macros/src/lib.rs")];
    sources(&root.join("src"), &mut files);
    let mut missing = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for path in mentioned_test_paths(&text) {
            if !root.join(&path).exists() {
                missing.push(format!("{}: {path}", file.display()));
            }
        }
    }
    assert!(missing.is_empty(), "named but missing: {missing:#?}");
}

/// Users build pools and connection managers with the same crate versions as the guard.
#[test]
fn the_driver_crates_are_re_exported() {
    fn pool_type(_: Option<idem_guard::sqlx::PgPool>) {}
    fn manager_type(_: Option<idem_guard::redis::aio::ConnectionManager>) {}
    pool_type(None::<sqlx::PgPool>);
    manager_type(None::<redis::aio::ConnectionManager>);
    assert!(idem_guard::redis::Client::open("redis://127.0.0.1:6379").is_ok());
    #[cfg(feature = "dynamodb")]
    {
        fn client_type(_: Option<idem_guard::aws_sdk_dynamodb::Client>) {}
        client_type(Some(idem_guard::dynamodb::local_client(
            "http://127.0.0.1:1",
        )));
    }
}

/// The visible lines of the first Rust code block after the line `heading` in `text`, with a
/// doc comment's `//! ` prefix removed and rustdoc's hidden `# ` lines left out.
fn code_block_after(text: &str, heading: &str) -> Vec<String> {
    let lines: Vec<&str> = text
        .lines()
        .map(|l| {
            l.strip_prefix("//!")
                .map_or(l, |l| l.strip_prefix(' ').unwrap_or(l))
        })
        .collect();
    let at = lines
        .iter()
        .position(|l| *l == heading)
        .unwrap_or_else(|| panic!("no line `{heading}`"));
    let open = at
        + lines[at..]
            .iter()
            .position(|l| l.starts_with("```"))
            .unwrap();
    let close = open + 1 + lines[open + 1..].iter().position(|l| *l == "```").unwrap();
    lines[open + 1..close]
        .iter()
        .filter(|l| **l != "#" && !l.starts_with("# "))
        .map(|l| (*l).to_owned())
        .collect()
}

/// The README's Lambda/SQS example is the doc test that runs (with the `dynamodb` feature).
#[test]
fn readme_lambda_example_is_the_doc_test() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |path: &str| std::fs::read_to_string(root.join(path)).unwrap();
    let readme = code_block_after(
        &read("README.md"),
        "### A Lambda consumer of an SQS queue (DynamoDB store)",
    );
    let doc_test = code_block_after(
        &read("src/dynamodb/mod.rs"),
        "# A Lambda consumer of an SQS queue",
    );
    assert!(readme.len() > 40, "{readme:#?}");
    assert_eq!(readme, doc_test);
}

/// The README's axum example is the doc test of `src/http/mod.rs`, so it compiles.
#[test]
fn the_readme_axum_example_is_the_doc_test() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let section = readme
        .split("## HTTP: the `Idempotency-Key` header")
        .nth(1)
        .expect("the README has the HTTP section");
    let example = section
        .split("```rust,no_run\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the HTTP section opens with a `rust,no_run` block");
    let module = std::fs::read_to_string(root.join("src/http/mod.rs")).unwrap();
    let docs: String = module
        .lines()
        .filter_map(|line| line.strip_prefix("//!"))
        .map(|line| format!("{}\n", line.strip_prefix(' ').unwrap_or(line)))
        .collect();
    assert!(
        docs.contains(&format!("```rust,no_run\n{example}```")),
        "the README's example differs from the doc test in src/http/mod.rs"
    );
}
