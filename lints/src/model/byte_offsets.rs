//! Byte offsets of proc_macro2 spans, read off the line and column proc_macro2 keeps.
//!
//! proc_macro2's `Span::byte_range` turns its character offsets into byte offsets through a
//! per-file `BTreeMap` cache that grows with every offset asked for and walks the text from
//! the nearest cached point; the lowering asks it for every expression, and on a large crate
//! the conversion cost about a tenth of the run. `Span::start`/`Span::end` give the line (a
//! binary search over line starts) and the column in characters; with the file's byte line
//! starts and which lines are ASCII (most), the byte offset is one addition. Non-ASCII lines
//! count characters within the line only. The answers are `byte_range`'s (the lowering's span
//! test holds every node equal to syn's).
//!
//! The index is per thread (proc_macro2's spans are too) and set only while [`with_index`]
//! runs; outside it [`range`] asks proc_macro2.

use proc_macro2::Span;
use std::cell::RefCell;
use std::ops::Range;

struct LineIndex {
    text: String,
    /// Byte offset of each line's first character.
    starts: Vec<usize>,
    /// Whether each line (up to its `\n`) is ASCII: column = byte count.
    ascii: Vec<bool>,
}

thread_local! {
    static INDEX: RefCell<Option<LineIndex>> = const { RefCell::new(None) };
}

/// Runs `f` with `text` (what proc_macro2 parsed) indexed for [`range`] on this thread.
pub(super) fn with_index<R>(text: &str, f: impl FnOnce() -> R) -> R {
    // Line by line (`split` finds newlines with memchr, `is_ascii` checks words at a time):
    // a byte-by-byte loop cost about 5% of the lowering (tokio).
    let mut starts = vec![0];
    let mut ascii = Vec::new();
    let mut next = 0;
    for line in text.split('\n') {
        ascii.push(line.is_ascii());
        next += line.len() + 1;
        starts.push(next);
    }
    // The last line has no newline after it.
    starts.pop();
    let index = LineIndex {
        text: text.to_owned(),
        starts,
        ascii,
    };
    /// Clears the index however `f` ends (a panic included).
    struct Reset(Option<LineIndex>);
    impl Drop for Reset {
        fn drop(&mut self) {
            let old = self.0.take();
            INDEX.with(|i| *i.borrow_mut() = old);
        }
    }
    let old = INDEX.with(|i| i.borrow_mut().replace(index));
    let _reset = Reset(old);
    f()
}

/// `s.byte_range()`, from the index when one is set.
pub(super) fn range(s: Span) -> Range<usize> {
    INDEX.with(|i| match &*i.borrow() {
        Some(index) => index.byte(s.start())..index.byte(s.end()),
        None => s.byte_range(),
    })
}

/// `s.byte_range().start`, from the index when one is set: one line lookup, not two.
pub(super) fn start(s: Span) -> usize {
    INDEX.with(|i| match &*i.borrow() {
        Some(index) => index.byte(s.start()),
        None => s.byte_range().start,
    })
}

/// `s.byte_range().end`, from the index when one is set.
pub(super) fn end(s: Span) -> usize {
    INDEX.with(|i| match &*i.borrow() {
        Some(index) => index.byte(s.end()),
        None => s.byte_range().end,
    })
}

impl LineIndex {
    fn byte(&self, at: proc_macro2::LineColumn) -> usize {
        // Lines are 1-based; a call-site span is line 1, column 0 (`byte_range` says 0..0).
        let line = at.line.saturating_sub(1);
        let Some(&start) = self.starts.get(line) else {
            return self.text.len();
        };
        if self.ascii[line] {
            return start + at.column;
        }
        let rest = &self.text[start..];
        rest.char_indices()
            .nth(at.column)
            .map_or(rest.len(), |(i, _)| i)
            + start
    }
}
