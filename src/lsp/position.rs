//! LSP positions: a line and a column counted in the negotiated encoding's code units (UTF-16
//! unless the client offers UTF-8), converted to and from byte offsets through the line index
//! of [`SourceFile`], the same one the emitters use.

use crate::source::SourceFile;
use lsp_types::{Position, PositionEncodingKind, Range};

/// The unit LSP columns are counted in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Utf8,
    Utf16,
}

impl Encoding {
    /// UTF-8 when the client offers it (no conversion needed), else the protocol's default
    /// UTF-16, which every client must support.
    pub fn negotiate(offered: Option<&[PositionEncodingKind]>) -> Encoding {
        let utf8 = offered.is_some_and(|kinds| kinds.contains(&PositionEncodingKind::UTF8));
        if utf8 {
            Encoding::Utf8
        } else {
            Encoding::Utf16
        }
    }

    pub fn kind(self) -> PositionEncodingKind {
        match self {
            Encoding::Utf8 => PositionEncodingKind::UTF8,
            Encoding::Utf16 => PositionEncodingKind::UTF16,
        }
    }

    /// Code units of `c`.
    pub(super) fn width(self, c: char) -> usize {
        match self {
            Encoding::Utf8 => c.len_utf8(),
            Encoding::Utf16 => c.len_utf16(),
        }
    }
}

/// The LSP position of `byte` (clamped into the text and to a character boundary).
pub fn position(src: &SourceFile, byte: usize, enc: Encoding) -> Position {
    let byte = src.clamp(byte);
    let line = src.line_index(byte);
    let start = src.line_range(line).start;
    let column: usize = src.text[start..byte].chars().map(|c| enc.width(c)).sum();
    Position::new(to_u32(line), to_u32(column))
}

/// The LSP range of the bytes `lo..hi`.
pub fn range(src: &SourceFile, lo: usize, hi: usize, enc: Encoding) -> Range {
    Range::new(position(src, lo, enc), position(src, hi.max(lo), enc))
}

/// The byte offset of an LSP position. As the protocol says, a column past the end of its
/// line means the end of the line, and a line past the last means the end of the text; a
/// column inside a character (half a surrogate pair, a UTF-8 continuation byte) moves to the
/// character's end.
pub fn offset(src: &SourceFile, pos: Position, enc: Encoding) -> usize {
    let line = pos.line as usize;
    if line >= src.line_count() {
        return src.text.len();
    }
    let range = src.line_range(line);
    let want = pos.character as usize;
    let mut units = 0;
    for (i, c) in src.text[range.clone()].char_indices() {
        if units >= want {
            return range.start + i;
        }
        units += enc.width(c);
    }
    range.end
}

fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn file(text: &str) -> SourceFile {
        SourceFile::new("a.rs".into(), Arc::from(text))
    }

    #[test]
    fn utf16_counts_surrogate_pairs_twice_and_utf8_counts_bytes() {
        // `é` is 2 bytes and 1 UTF-16 unit; `😀` is 4 bytes and 2 units.
        let src = file("let é = \"😀\"; x\r\nnext");
        let x = src.text.find(" x").expect("x") + 1;
        assert_eq!(position(&src, x, Encoding::Utf16), Position::new(0, 14));
        assert_eq!(position(&src, x, Encoding::Utf8), Position::new(0, 17));
        for enc in [Encoding::Utf8, Encoding::Utf16] {
            assert_eq!(offset(&src, position(&src, x, enc), enc), x);
        }
        let next = src.text.find("next").expect("next");
        assert_eq!(position(&src, next, Encoding::Utf16), Position::new(1, 0));
    }

    #[test]
    fn positions_out_of_range_clamp_to_the_line_or_the_text() {
        let src = file("ab\ncd");
        assert_eq!(offset(&src, Position::new(0, 99), Encoding::Utf16), 2);
        assert_eq!(offset(&src, Position::new(7, 0), Encoding::Utf16), 5);
        assert_eq!(position(&src, 999, Encoding::Utf16), Position::new(1, 2));
        // Inside the surrogate pair of `😀`: the end of the character.
        let emoji = file("😀z");
        assert_eq!(offset(&emoji, Position::new(0, 1), Encoding::Utf16), 4);
    }
}
