//! `--explain` and `--list`.

use crate::levels::Levels;
use anyhow::Result;
use std::io::Write;

pub fn explain(name: &str) -> Result<()> {
    let lint = crate::cli::explain_target(name)?;
    writeln!(std::io::stdout().lock(), "{}", explain_text(lint))?;
    Ok(())
}

/// The `--explain` text of `lint` (Markdown), also the language server's hover.
pub fn explain_text(lint: &idem_lints::Lint) -> String {
    format!(
        "# {} (default: {})\n\n{}\n\n{}",
        lint.code(),
        lint.default_level.as_str(),
        lint.desc,
        lint.doc_markdown().trim_end()
    )
}

/// The `--docs-url` template (or `IDEM_LINT_DOCS_URL`), set once by [`crate::run`].
static DOCS_URL: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();

/// Sets where the lint pages are published for this process ([`docs_url`]): a URL with
/// `{lint}` standing for the lint's name. An error for anything else: a link that goes
/// nowhere is worse than none.
pub fn set_docs_url(template: Option<String>) -> Result<()> {
    if let Some(t) = &template {
        let scheme = ["https://", "http://", "file://"]
            .iter()
            .any(|s| t.starts_with(s));
        if !scheme || !t.contains("{lint}") || t.chars().any(char::is_whitespace) {
            anyhow::bail!(
                "`--docs-url` takes a URL with `{{lint}}` where the lint's name goes \
                 (`https://example.com/lints/{{lint}}.html`), not `{t}`"
            );
        }
    }
    // Set once per process; a second call (tests running `run` twice) keeps the first.
    let _ = DOCS_URL.set(template);
    Ok(())
}

/// Where the documentation page of `lint` is published: the template [`set_docs_url`]
/// was given, else its page in `docs/lints/` of the package's repository at this version
/// (GitHub shows the Markdown); `None` when neither is known (no `repository` in the
/// manifest).
pub fn docs_url(lint: &idem_lints::Lint) -> Option<String> {
    if let Some(Some(t)) = DOCS_URL.get() {
        return Some(t.replace("{lint}", lint.name));
    }
    let repo = env!("CARGO_PKG_REPOSITORY").trim_end_matches('/');
    (!repo.is_empty()).then(|| {
        format!(
            "{repo}/blob/v{}/docs/lints/{}.md",
            env!("CARGO_PKG_VERSION"),
            lint.name
        )
    })
}

pub fn list(levels: &Levels) -> Result<()> {
    let lints = idem_lints::lints::ALL;
    let width = lints.iter().map(|l| l.name.len()).max().unwrap_or(4).max(4);
    let mut out = std::io::stdout().lock();
    writeln!(out, "{:width$}  default  effective  description", "lint")?;
    for l in lints {
        writeln!(
            out,
            "{:width$}  {:7}  {:9}  {}",
            l.name,
            l.default_level.as_str(),
            levels.get(l).as_str(),
            l.desc
        )?;
    }
    writeln!(out)?;
    writeln!(out, "groups (in -A/-W/-D and [lints]):")?;
    for (name, what) in crate::levels::GROUPS {
        writeln!(out, "{name:width$}  {what}")?;
    }
    Ok(())
}

/// `--statistics`: how many findings each lint and each file has, most first, instead of
/// the findings; `json` gives the same as one object.
pub fn statistics(input: &crate::emit::Input, json: bool) -> Result<()> {
    use std::collections::BTreeMap;
    let mut by_lint: BTreeMap<String, usize> = BTreeMap::new();
    let mut by_file: BTreeMap<String, usize> = BTreeMap::new();
    for f in &input.report.findings {
        *by_lint.entry(f.diag.lint.code()).or_default() += 1;
        let path = &input.report.source(f.package, f.diag.span.file).path;
        *by_file
            .entry(crate::emit::relative_path(path, input.cwd))
            .or_default() += 1;
    }
    let sorted = |m: BTreeMap<String, usize>| {
        let mut v: Vec<(String, usize)> = m.into_iter().collect();
        // Most first; ties by name, so the table is the same on every run.
        v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        v
    };
    let (lints, files) = (sorted(by_lint), sorted(by_file));
    let total = input.report.findings.len();
    let mut out = std::io::stdout().lock();
    if json {
        let pairs = |v: &[(String, usize)], key: &str| -> Vec<serde_json::Value> {
            v.iter()
                .map(|(name, n)| serde_json::json!({ key: name, "count": n }))
                .collect()
        };
        let doc = serde_json::json!({
            "total": total,
            "lints": pairs(&lints, "code"),
            "files": pairs(&files, "file"),
        });
        writeln!(out, "{}", crate::emit::json::safe_text(doc.to_string()))?;
        return Ok(());
    }
    let width = total.to_string().len().max(5);
    writeln!(out, "{:>width$}  lint", "count")?;
    for (code, n) in &lints {
        writeln!(out, "{n:>width$}  {code}")?;
    }
    writeln!(out, "{total:>width$}  total")?;
    writeln!(out)?;
    writeln!(out, "{:>width$}  file", "count")?;
    for (file, n) in &files {
        writeln!(out, "{n:>width$}  {}", crate::emit::snippet::escape(file))?;
    }
    Ok(())
}
