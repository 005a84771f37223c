//! What of a source line an emitter may print: terminal control characters and bidi
//! overrides made visible (a flagged line must not clear the screen, retitle the terminal
//! or reorder what the reviewer reads), and long lines cut around the span, as rustc does,
//! so a finding costs output in proportion to what it points at, not to its line.

use std::ops::Range;

/// Most characters of one line printed around a span.
pub const MAX_LINE_CHARS: usize = 140;

/// `s` with every control character shown as a visible symbol: C0 controls (NUL, CR, LF,
/// ESC, so also OSC sequences) as the Unicode control pictures (`␀`, `␍`, `␊`, `␛`), DEL as
/// `␡`, C1 controls, bidi controls and the Unicode line separators as `�`. Tabs stay (the
/// renderer expands them).
///
/// Every text that comes from the checkout goes through it before it is printed: source
/// lines, paths, and every line on stderr ([`crate::stderr_line`]), so a pull request can
/// neither start a line of its own (an Actions runner splits on CR and reads `::error`,
/// `::stop-commands::` at a line's start) nor drive the terminal of whoever reads the log.
pub fn escape(s: &str) -> String {
    if !s.chars().any(needs_escape) {
        return s.to_string();
    }
    s.chars().map(escape_char).collect()
}

/// Whether [`escape`] changes `c`.
pub(crate) fn needs_escape(c: char) -> bool {
    escape_char(c) != c
}

fn escape_char(c: char) -> char {
    match c {
        '\t' => c,
        '\u{0}'..='\u{1f}' => char::from_u32(0x2400 + c as u32).unwrap_or('\u{fffd}'),
        '\u{7f}' => '\u{2421}',
        '\u{80}'..='\u{9f}'
        | '\u{61c}'
        | '\u{200e}'
        | '\u{200f}'
        | '\u{202a}'..='\u{202e}'
        | '\u{2066}'..='\u{2069}'
        | '\u{2028}'
        | '\u{2029}' => '\u{fffd}',
        _ => c,
    }
}

/// The part of `line` to print so that the byte range `focus` (relative to the line) shows:
/// the whole line when it is short, else at most [`MAX_LINE_CHARS`] characters from just
/// before the focus. Returns the byte range kept.
pub fn window(line: &str, focus: Range<usize>) -> Range<usize> {
    let clamp = |b: usize| {
        let mut b = b.min(line.len());
        while !line.is_char_boundary(b) {
            b -= 1;
        }
        b
    };
    if line.len() <= MAX_LINE_CHARS {
        return 0..line.len();
    }
    let lo = clamp(focus.start);
    let hi = clamp(focus.end.max(focus.start));
    let focus_chars = line[lo..hi].chars().count();
    // Context on both sides when the focus is short; the start of the focus when not.
    let context = MAX_LINE_CHARS.saturating_sub(focus_chars) / 2;
    let start = line[..lo]
        .char_indices()
        .rev()
        .nth(context.saturating_sub(1))
        .map_or(0, |(i, _)| i);
    let start = if context == 0 { lo } else { start };
    let end = line[start..]
        .char_indices()
        .nth(MAX_LINE_CHARS)
        .map_or(line.len(), |(i, _)| start + i);
    start..end
}

/// `line[keep]` with `...` where it was cut, escaped, and a function from a byte offset of
/// `line` to the offset in that text (offsets outside `keep` go to its nearest end).
pub fn cut(line: &str, keep: Range<usize>) -> (String, impl Fn(usize) -> usize + '_) {
    let prefix = if keep.start > 0 { "..." } else { "" };
    let suffix = if keep.end < line.len() { "..." } else { "" };
    let body = escape(&line[keep.clone()]);
    let text = format!("{prefix}{body}{suffix}");
    let map = move |b: usize| {
        let b = b.clamp(keep.start, keep.end);
        let mut b2 = b;
        while !line.is_char_boundary(b2) {
            b2 -= 1;
        }
        prefix.len()
            + line[keep.start..b2]
                .chars()
                .map(escape_char)
                .map(char::len_utf8)
                .sum::<usize>()
    };
    (text, map)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_become_visible() {
        assert_eq!(escape("a\x1b]0;x\x07b\x1b[2J"), "a␛]0;x␇b␛[2J");
        assert_eq!(
            escape("let s = \"\u{202e}evil\";"),
            "let s = \"\u{fffd}evil\";"
        );
        assert_eq!(escape("tab\tok λ"), "tab\tok λ");
        assert_eq!(escape("a\rb\nc\0d\u{9d}e\u{2028}"), "a␍b␊c␀d�e�");
    }

    #[test]
    fn long_lines_are_cut_around_the_focus() {
        let line = format!("{}TARGET{}", "a".repeat(10_000), "b".repeat(10_000));
        let at = line.find("TARGET").expect("target");
        let keep = window(&line, at..at + 6);
        assert!(keep.start < at && at + 6 < keep.end, "{keep:?}");
        assert!(line[keep.clone()].chars().count() <= MAX_LINE_CHARS);
        let (text, map) = cut(&line, keep);
        assert!(text.starts_with("...") && text.ends_with("..."));
        assert_eq!(&text[map(at)..map(at + 6)], "TARGET");
        let short = "fn f() {}";
        assert_eq!(window(short, 3..4), 0..short.len());
    }
}
