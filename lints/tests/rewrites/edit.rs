//! Text edits at `syn` spans. A rewrite finds what to change with a `syn` visitor and
//! changes the text in place, so comments, `//~` annotations and line numbers outside the
//! edited tokens stay where they were (a token stream printed back would lose them).

use proc_macro2::{LineColumn, Span};

/// Edits to one source text, applied together by [`Edits::finish`].
pub struct Edits<'t> {
    text: &'t str,
    line_starts: Vec<usize>,
    /// `(start, end, replacement)` in bytes.
    edits: Vec<(usize, usize, String)>,
}

impl<'t> Edits<'t> {
    pub fn new(text: &'t str) -> Self {
        let line_starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        Edits {
            text,
            line_starts,
            edits: Vec::new(),
        }
    }

    /// The byte offset of a span location (1-based line, column in chars).
    fn offset(&self, at: LineColumn) -> usize {
        let start = self.line_starts[at.line.saturating_sub(1).min(self.line_starts.len() - 1)];
        self.text[start..]
            .char_indices()
            .nth(at.column)
            .map_or(self.text.len(), |(i, _)| start + i)
    }

    /// The source text a span covers.
    pub fn source(&self, span: Span) -> &'t str {
        &self.text[self.offset(span.start())..self.offset(span.end())]
    }

    /// The source text from the start of `from` to the end of `to`.
    pub fn source_between(&self, from: Span, to: Span) -> &'t str {
        &self.text[self.offset(from.start())..self.offset(to.end())]
    }

    /// Replaces the text from the start of `from` to the end of `to`.
    pub fn replace_between(&mut self, from: Span, to: Span, with: impl Into<String>) {
        let (start, end) = (self.offset(from.start()), self.offset(to.end()));
        self.edits.push((start, end, with.into()));
    }

    pub fn replace(&mut self, span: Span, with: impl Into<String>) {
        let (start, end) = (self.offset(span.start()), self.offset(span.end()));
        self.edits.push((start, end, with.into()));
    }

    pub fn insert_before(&mut self, span: Span, text: impl Into<String>) {
        let at = self.offset(span.start());
        self.edits.push((at, at, text.into()));
    }

    pub fn insert_after(&mut self, span: Span, text: impl Into<String>) {
        let at = self.offset(span.end());
        self.edits.push((at, at, text.into()));
    }

    /// The edited text, or `None` when nothing was edited. Of two overlapping edits the
    /// first made wins; insertions at one point keep the order they were made in.
    pub fn finish(self) -> Option<String> {
        if self.edits.is_empty() {
            return None;
        }
        let mut kept: Vec<(usize, usize, String)> = Vec::new();
        for e in self.edits {
            let overlaps = kept.iter().any(|k| e.0 < k.1 && k.0 < e.1);
            if !overlaps {
                kept.push(e);
            }
        }
        // Stable sort: insertions at the same point keep their order.
        kept.sort_by_key(|e| (e.0, e.1));
        let mut out = String::with_capacity(self.text.len() + 256);
        let mut at = 0;
        for (start, end, with) in kept {
            out.push_str(&self.text[at..start]);
            out.push_str(&with);
            at = end;
        }
        out.push_str(&self.text[at..]);
        Some(out)
    }
}
