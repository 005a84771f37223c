//! Line doc comments handed to syn without their text.
//!
//! proc_macro2 lexes `/// text` as `#[doc = "text"]`: it escapes the text into a string
//! literal, syn parses the attribute, and the lowering unescapes the literal again. No lint
//! reads doc text, and in a documented crate it is much of the file (46% of tokio's bytes,
//! a third of its parse time). So syn reads a copy of the file where each run of line doc
//! comments (of one kind, one after the other with only whitespace between) is written over
//! with one `#[doc]` (`#![doc]` for `//!`) and spaces, and the lowering puts back what syn
//! would have read, one attribute per comment:
//!
//! - the same bytes and lines, so every span is where it was in the file;
//! - an attribute in the same place, so a doc comment that documents nothing is still the
//!   parse error rustc and syn report, at the same comment.
//!
//! A comment with a carriage return inside it (a lexing error proc_macro2 must still see),
//! and a run's first comment when it is shorter than its replacement, are left as written.

use std::borrow::Cow;
use std::ops::Range;

const OUTER: &str = "#[doc]";
const INNER: &str = "#![doc]";

/// The text syn reads, and the doc comments written over in it.
pub(super) struct ParsedText<'t> {
    pub text: Cow<'t, str>,
    /// In order of `range.start`.
    docs: Vec<DocComment>,
    /// Each run of `docs` syn reads as one attribute (at its first comment), in order.
    runs: Vec<Range<usize>>,
}

/// A line doc comment written over.
pub(super) struct DocComment {
    /// The comment as proc_macro2 spans it: from the slashes to the end of the line, a CRLF
    /// line's `\r` included.
    pub range: Range<usize>,
    /// The text syn's `#[doc = ".."]` would hold: after the slashes, without the `\r`.
    pub value: String,
}

impl ParsedText<'_> {
    /// The comments of the run syn read as the attribute starting at `lo`.
    pub fn docs_at(&self, lo: usize) -> Option<&[DocComment]> {
        let i = self
            .runs
            .binary_search_by_key(&lo, |run| self.docs[run.start].range.start)
            .ok()?;
        self.docs.get(self.runs[i].clone())
    }

    /// `r` in the text syn read, as syn would have spanned it in the file: every token of a
    /// doc comment spans the whole comment.
    pub fn file_range(&self, r: Range<usize>) -> Range<usize> {
        let within = |at: usize| {
            let i = self.docs.partition_point(|d| d.range.start <= at);
            i.checked_sub(1)
                .map(|i| &self.docs[i].range)
                .filter(|d| at < d.end)
        };
        let start = within(r.start).map_or(r.start, |d| d.start);
        let end = match r.end.checked_sub(1).and_then(within) {
            Some(d) if r.end > r.start => d.end,
            _ => r.end,
        };
        start..end.max(start)
    }
}

/// `text` with the line doc comments at `docs` (from the slashes to the end of the line, as
/// [`super::nesting::check`] gives them, in order) written over, each run as one bare `#[doc]`.
pub(super) fn without_doc_text<'t>(text: &'t str, docs: &[Range<usize>]) -> ParsedText<'t> {
    let mut out = ParsedText {
        text: Cow::Borrowed(text),
        docs: Vec::new(),
        runs: Vec::new(),
    };
    let mut written = String::new();
    let mut copied = 0;
    // The kind (its replacement) of the run the last comment written over is in.
    let mut run: Option<&str> = None;
    for doc in docs {
        let Some(comment) = text.get(doc.clone()) else {
            run = None;
            continue;
        };
        // A CRLF file's comments end in `\r`, which proc_macro2 drops: keep it in place.
        let comment = comment.strip_suffix('\r').unwrap_or(comment);
        let attr = if comment.starts_with("//!") {
            INNER
        } else {
            OUTER
        };
        let goes_on = run == Some(attr)
            && text[copied..doc.start]
                .bytes()
                .all(|b| matches!(b, b' ' | b'\t' | b'\n'));
        if comment.contains('\r') || doc.start < copied || !goes_on && comment.len() < attr.len() {
            run = None;
            continue;
        }
        if written.is_empty() {
            written.reserve(text.len());
        }
        written.push_str(&text[copied..doc.start]);
        let blank = if goes_on {
            comment.len()
        } else {
            written.push_str(attr);
            out.runs.push(out.docs.len()..out.docs.len());
            comment.len() - attr.len()
        };
        written.extend(std::iter::repeat_n(' ', blank));
        copied = doc.start + comment.len();
        run = Some(attr);
        out.docs.push(DocComment {
            range: doc.clone(),
            // Both markers are three bytes.
            value: comment[3..].to_owned(),
        });
        if let Some(last) = out.runs.last_mut() {
            last.end = out.docs.len();
        }
    }
    if !out.docs.is_empty() {
        written.push_str(&text[copied..]);
        out.text = Cow::Owned(written);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::nesting::{check, MAX_NESTING};
    use super::*;

    fn plain(text: &str) -> String {
        let docs = check(text, MAX_NESTING).expect("shallow");
        without_doc_text(text, &docs).text.into_owned()
    }

    #[test]
    fn doc_comments_become_bare_attributes_of_the_same_length() {
        let rest = "fn f() {\n    //// not a doc\n    // nor this\n}\n";
        let text = format!("//! The crate.\n/// Does é things.\r\n{rest}");
        let out = plain(&text);
        // `é` is two bytes: two spaces.
        let spaces = |n| " ".repeat(n);
        assert_eq!(
            out,
            format!("#![doc]{}\n#[doc]{}\r\n{rest}", spaces(7), spaces(13))
        );
    }

    #[test]
    fn a_run_of_doc_comments_becomes_one_attribute() {
        let text = "/// One.\n///\n    /// Two.\n#[inline]\n/// Three.\n//! Inner.\nfn f() {}";
        let spaces = |n| " ".repeat(n);
        assert_eq!(
            plain(text),
            format!(
                "#[doc]{}\n{}\n    {}\n#[inline]\n#[doc]{}\n#![doc]{}\nfn f() {{}}",
                spaces(2),
                spaces(3),
                spaces(8),
                spaces(4),
                spaces(3)
            )
        );
    }

    #[test]
    fn doc_comment_lookalikes_in_literals_and_block_comments_stay() {
        let text = concat!(
            "const A: &str = \"\n/// in a string\n\";\n",
            "const B: &str = r#\"\n/// in a raw \"string\n\"#;\n",
            "/* /// in a block /* nested */ //! comment */\n",
            "const C: char = '\"'; const D: &str = \"/// after a char\";\n",
            "fn f<'a>(x: &'a str) -> &'a str { x } /// after a lifetime\n",
        );
        let out = plain(text);
        let changed: Vec<&str> = text
            .lines()
            .zip(out.lines())
            .filter(|(a, b)| a != b)
            .map(|(a, _)| a)
            .collect();
        assert_eq!(
            changed,
            ["fn f<'a>(x: &'a str) -> &'a str { x } /// after a lifetime"]
        );
    }

    #[test]
    fn short_comments_and_a_bare_carriage_return_stay_as_written() {
        let text = "///\n/// a\nfn f() {}\n//! ab\nfn g() {}\n/// one\rtwo\nfn h() {}";
        assert_eq!(plain(text), text);
    }

    #[test]
    fn a_file_without_doc_comments_is_not_copied() {
        let text = "// plain\nfn f() {}\n";
        assert!(matches!(
            without_doc_text(text, &check(text, MAX_NESTING).unwrap()).text,
            Cow::Borrowed(_)
        ));
    }
}
