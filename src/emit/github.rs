//! GitHub Actions workflow commands, one per finding:
//! `::warning file=src/a.rs,line=3,endLine=3,col=5,endColumn=9,title=idem::x::message`.
//! The runner turns each into an annotation on the pull request's diff.
//!
//! Paths are relative to the repository root, as the runner resolves them against the
//! checkout. Escaping follows the runner's rules (actions/toolkit's `command.ts`): in the
//! message (the command's data) `%`, CR and LF become `%25`, `%0D`, `%0A`; in a property
//! value `:` and `,` also become `%3A` and `%2C`, since they end a property. Before that,
//! the path and the texts get [`super::snippet::escape`], as on every other stream.

use super::{relative_path, repository_root, snippet::escape, Input};
use crate::report::Finding;
use idem_lints::Level;
use std::io::{self, Write};
use std::path::Path;

pub fn emit(input: &Input, out: &mut dyn Write) -> io::Result<()> {
    let root = repository_root(input.ws);
    for f in &input.report.findings {
        writeln!(out, "{}", command(input, f, &root))?;
    }
    Ok(())
}

fn command(input: &Input, f: &Finding, root: &Path) -> String {
    let d = &f.diag;
    let src = input.source(f, d.span.file);
    let lo = src.clamp(d.span.lo as usize);
    let start = src.position(lo);
    let end = src.position(src.clamp(d.span.hi as usize).max(lo));
    let name = match d.level {
        Level::Deny => "error",
        Level::Warn | Level::Allow => "warning",
    };
    // A file name is the checkout's: its ESC must reach neither the log viewer nor the
    // annotation (the runner's own escapes below cover only `%`, CR, LF, `:` and `,`).
    let mut path = escape(&relative_path(&src.path, root));
    if cfg!(windows) {
        path = path.replace('\\', "/");
    }
    let mut props = vec![
        ("file", path),
        ("line", start.line.to_string()),
        ("endLine", end.line.to_string()),
    ];
    // GitHub reads columns only on a one-line annotation.
    if start.line == end.line {
        props.push(("col", start.column.to_string()));
        props.push(("endColumn", end.column.to_string()));
    }
    props.push(("title", d.lint.code()));
    let props: Vec<String> = props
        .iter()
        .map(|(k, v)| format!("{k}={}", escape_property(v)))
        .collect();
    let mut message = escape(&d.message);
    for h in &d.help {
        message.push_str("\nhelp: ");
        message.push_str(&escape(h));
    }
    format!("::{name} {}::{}", props.join(","), escape_data(&message))
}

/// The command's data (the message): `%`, CR, LF.
pub fn escape_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// A property value: the data's escapes, and `:` and `,`, which end a property.
pub fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_follow_the_runner() {
        assert_eq!(
            escape_data("50% done\r\nnext: a, b"),
            "50%25 done%0D%0Anext: a, b"
        );
        assert_eq!(escape_property("src/a,b:c%.rs\n"), "src/a%2Cb%3Ac%25.rs%0A");
        // `%` first: an escape must not be escaped again.
        assert_eq!(escape_property(":"), "%3A");
    }
}
