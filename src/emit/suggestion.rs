//! A suggestion shown as rustc shows one: its `help:` line, then the lines it edits as they
//! read once it is applied. An edit inside one line shows the new line with `+` under the
//! inserted text or `~` under the replacing text; anything else (a line added, removed or
//! moved) shows the old lines with `-` and the new ones with `+`. The edits are those every
//! consumer makes ([`idem_lints::Suggestion::concrete_edits`]).

use super::snippet;
use crate::source::SourceFile;
use idem_lints::model::FileId;
use idem_lints::Suggestion;
use std::collections::BTreeMap;
use std::ops::Range;

/// Most lines shown per suggestion; a longer one ends with `...`.
const MAX_ROWS: usize = 12;

/// One line of the snippet.
#[derive(Debug, PartialEq)]
enum Row {
    /// A line the suggestion keeps (`12 |`), or the markers under one (no number).
    Kept(Option<usize>, String),
    Removed(usize, String),
    Added(usize, String),
    /// `--> file` when the edit is in another file than the finding.
    File(String),
    Elided,
}

/// The lines of `s` after its `help:` line, gutter included, without trailing blanks.
/// `source` gives a file's text, `name` its shown name; `home` is the finding's file.
pub fn render<'s>(
    s: &Suggestion,
    source: &dyn Fn(FileId) -> &'s SourceFile,
    name: &dyn Fn(FileId) -> String,
    home: FileId,
) -> Vec<String> {
    let edits = s.concrete_edits(&|file| &source(file).text);
    let mut by_file: BTreeMap<FileId, Vec<(Range<usize>, &str)>> = BTreeMap::new();
    for (at, text) in &edits {
        let src = source(at.file);
        let lo = src.clamp(at.lo as usize);
        let hi = src.clamp(at.hi as usize).max(lo);
        by_file.entry(at.file).or_default().push((lo..hi, text));
    }
    let mut rows = Vec::new();
    for (file, mut list) in by_file {
        list.sort_by_key(|(r, _)| (r.start, r.end));
        if file != home {
            rows.push(Row::File(name(file)));
        }
        for hunk in hunks(source(file), &list) {
            rows.extend(hunk_rows(source(file), hunk));
        }
    }
    if rows.len() > MAX_ROWS {
        rows.truncate(MAX_ROWS);
        rows.push(Row::Elided);
    }
    lay_out(&rows)
}

/// The edits grouped by the lines they touch: edits on the same or adjacent lines go together.
fn hunks<'e>(
    src: &SourceFile,
    edits: &'e [(Range<usize>, &'e str)],
) -> Vec<&'e [(Range<usize>, &'e str)]> {
    let mut out = Vec::new();
    let mut start = 0;
    for i in 1..=edits.len() {
        let apart = edits.get(i).is_none_or(|(next, _)| {
            let (_, last) = lines_of(src, &edits[i - 1].0);
            src.line_index(next.start) > last + 1
        });
        if apart {
            out.push(&edits[start..i]);
            start = i;
        }
    }
    out
}

/// The first and last line a byte range touches (a range ending at a line's start ends on the
/// line before).
fn lines_of(src: &SourceFile, r: &Range<usize>) -> (usize, usize) {
    let first = src.line_index(r.start);
    let end = if r.end > r.start && src.text.as_bytes()[r.end - 1] == b'\n' {
        r.end - 1
    } else {
        r.end
    };
    (first, src.line_index(end).max(first))
}

fn hunk_rows(src: &SourceFile, edits: &[(Range<usize>, &str)]) -> Vec<Row> {
    let first = lines_of(src, &edits[0].0).0;
    let last = edits
        .iter()
        .map(|(r, _)| lines_of(src, r).1)
        .max()
        .unwrap_or(first);
    let region = src.line_range(first).start..line_end(src, last);
    let old = &src.text[region.clone()];
    let mut new = String::with_capacity(old.len());
    let mut at = region.start;
    // Where each edit's text lands in `new`, for the markers.
    let mut marks: Vec<(Range<usize>, char)> = Vec::new();
    for (r, text) in edits {
        new.push_str(&src.text[at..r.start]);
        let mark = if r.is_empty() { '+' } else { '~' };
        marks.push((new.len()..new.len() + text.len(), mark));
        new.push_str(text);
        at = r.end;
    }
    new.push_str(&src.text[at..region.end]);
    let line = new.trim_end_matches(['\n', '\r']);
    let inline = first == last
        && !line.contains('\n')
        && edits.iter().all(|(_, t)| !t.is_empty())
        && line.chars().count() <= snippet::MAX_LINE_CHARS;
    if inline {
        let mut under = String::new();
        for (r, mark) in &marks {
            let lo = shown_width(&new[..r.start]);
            let hi = shown_width(&new[..r.end]);
            while under.chars().count() < lo {
                under.push(' ');
            }
            under.extend(std::iter::repeat_n(*mark, hi.saturating_sub(lo)));
        }
        return vec![
            Row::Kept(Some(first + 1), shown(line)),
            Row::Kept(None, under),
        ];
    }
    let diff = similar::TextDiff::from_lines(old, new.as_str());
    let mut rows = Vec::new();
    for change in diff.iter_all_changes() {
        let text = shown(change.value().trim_end_matches(['\n', '\r']));
        rows.push(match change.tag() {
            similar::ChangeTag::Equal => Row::Kept(change.old_index().map(|i| first + i + 1), text),
            similar::ChangeTag::Delete => {
                Row::Removed(first + change.old_index().unwrap_or(0) + 1, text)
            }
            similar::ChangeTag::Insert => {
                Row::Added(first + change.new_index().unwrap_or(0) + 1, text)
            }
        });
    }
    rows
}

/// The end of line `index`, its line break included (the region a hunk replaces).
fn line_end(src: &SourceFile, index: usize) -> usize {
    let end = src.line_range(index).end;
    let rest = &src.text[end..];
    end + if rest.starts_with("\r\n") {
        2
    } else {
        usize::from(rest.starts_with('\n'))
    }
}

/// A line as printed: tabs as four spaces, control characters visible, cut when long.
fn shown(line: &str) -> String {
    let line = line.replace('\t', "    ");
    let keep = snippet::window(&line, 0..line.len());
    let (text, _) = snippet::cut(&line, keep);
    text
}

/// How many columns `text` takes once [`shown`].
fn shown_width(text: &str) -> usize {
    text.chars().map(|c| if c == '\t' { 4 } else { 1 }).sum()
}

/// The rows with their gutter, rustc's: line numbers right-aligned, then `|`, `-` or `+`.
fn lay_out(rows: &[Row]) -> Vec<String> {
    let width = rows
        .iter()
        .filter_map(|r| match r {
            Row::Kept(Some(n), _) | Row::Removed(n, _) | Row::Added(n, _) => Some(*n),
            _ => None,
        })
        .max()
        .unwrap_or(1)
        .to_string()
        .len();
    let pad = " ".repeat(width);
    let mut out = vec![format!("{pad} |")];
    for row in rows {
        let line = match row {
            Row::Kept(Some(n), text) => format!("{n:>width$} | {text}"),
            Row::Kept(None, text) => format!("{pad} | {text}"),
            Row::Removed(n, text) => format!("{n:>width$} - {text}"),
            Row::Added(n, text) => format!("{n:>width$} + {text}"),
            Row::File(name) => format!("{pad}--> {}", snippet::escape(name)),
            Row::Elided => "...".to_string(),
        };
        out.push(line.trim_end().to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use idem_lints::model::Span;
    use idem_lints::Applicability;
    use std::path::PathBuf;
    use std::sync::Arc;

    fn rendered(text: &str, edits: &[(&str, &str)]) -> String {
        let src = SourceFile::new(PathBuf::from("a.rs"), Arc::from(text));
        let edits = edits
            .iter()
            .map(|(needle, with)| {
                let (needle, insert) = match needle.strip_prefix('^') {
                    Some(n) => (n, true),
                    None => (*needle, false),
                };
                let lo = text.find(needle).expect("needle") as u32;
                let hi = if insert { lo } else { lo + needle.len() as u32 };
                (Span::new(FileId(0), lo, hi), with.to_string())
            })
            .collect();
        let s = Suggestion {
            message: String::new(),
            edits,
            moves: Vec::new(),
            applicability: Applicability::MaybeIncorrect,
        };
        render(&s, &|_| &src, &|_| "a.rs".into(), FileId(0)).join("\n")
    }

    #[test]
    fn an_edit_in_a_line_is_marked_under_the_new_text() {
        let text = "fn f() {\n    if conn.exists(&key)? {\n    }\n}\n";
        assert_eq!(
            rendered(
                text,
                &[("^conn", "!"), ("exists", "set_nx"), ("^)?", ", 1")]
            ),
            "  |\n2 |     if !conn.set_nx(&key, 1)? {\n  |        +     ~~~~~~     +++"
        );
    }

    #[test]
    fn a_line_added_or_removed_is_shown_as_a_diff() {
        let text = "c.op()\n    .role(r)\n    .send()\n";
        assert_eq!(
            rendered(text, &[("^\n    .send", ".token(k)")]),
            "  |\n2 |     .role(r)\n3 +     .token(k)"
        );
        let text = "a();\nb();\nc();\n";
        assert_eq!(rendered(text, &[("b();\n", "")]), "  |\n2 - b();");
    }
}
