//! Where a diagnostic's `codeDescription` points: the lint's documentation.
//!
//! The lint's page of the documentation site ([`crate::info::docs_url`]: `--docs-url`, else
//! `docs/lints/` in the package's repository). Without either there is no web page to
//! link, so the server writes each lint's `--explain` text once to a Markdown file in the
//! user's cache directory and links that: an editor opens it on a click (VS Code shows the
//! code as a link), as it would a web page.

use lsp_types::Uri;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::OnceLock;

/// The documentation of `lint` as a URI, or `None` when no page can be named.
pub fn url(lint: &idem_lints::Lint) -> Option<Uri> {
    web_url(lint).or_else(|| {
        let dir = written_dir().as_ref()?;
        super::convert::file_uri(&dir.join(file_name(lint)))
    })
}

fn web_url(lint: &idem_lints::Lint) -> Option<Uri> {
    Uri::from_str(&crate::info::docs_url(lint)?).ok()
}

fn file_name(lint: &idem_lints::Lint) -> String {
    format!("{}.md", lint.name)
}

/// The directory holding every lint's page, written on first use; `None` when it cannot be
/// written (the diagnostics then go without a link, as the hover shows the same text).
fn written_dir() -> &'static Option<PathBuf> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = docs_dir()?;
        write_pages(&dir).ok()?;
        Some(dir)
    })
}

/// `$XDG_CACHE_HOME/idem-lint/docs/VERSION`, else `~/.cache/idem-lint/docs/VERSION`: per
/// version, so two installed versions never show each other's text.
fn docs_dir() -> Option<PathBuf> {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| Path::new(d).is_absolute())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))?;
    Some(
        cache
            .join("idem-lint")
            .join("docs")
            .join(env!("CARGO_PKG_VERSION")),
    )
}

/// Writes each page whose file is missing or differs, through a temporary file and a rename,
/// so two servers starting together never leave a half-written page.
fn write_pages(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    for lint in idem_lints::lints::ALL {
        let text = crate::info::explain_text(lint) + "\n";
        let path = dir.join(file_name(lint));
        if std::fs::read_to_string(&path).is_ok_and(|old| old == text) {
            continue;
        }
        let tmp = dir.join(format!(".{}.{}", file_name(lint), std::process::id()));
        std::fs::write(&tmp, &text)?;
        std::fs::rename(&tmp, &path)?;
    }
    Ok(())
}
