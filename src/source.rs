//! Source texts with a line index: turns byte spans into lines and columns for the emitters.

use std::path::PathBuf;
use std::sync::Arc;

/// One file's text, shared (not copied) with the thread that parsed it.
#[derive(Debug, Clone)]
pub struct SourceFile {
    /// Absolute path.
    pub path: PathBuf,
    pub text: Arc<str>,
    /// Byte offset of the start of each line.
    line_starts: Vec<usize>,
}

/// A position: 1-based line, 1-based column counted in characters (rustc's convention).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    pub line: usize,
    pub column: usize,
}

impl SourceFile {
    pub fn new(path: PathBuf, text: Arc<str>) -> SourceFile {
        let line_starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        SourceFile {
            path,
            text,
            line_starts,
        }
    }

    /// A file whose text could not be read: findings about it point at its start.
    pub fn empty(path: PathBuf) -> SourceFile {
        SourceFile::new(path, Arc::from(""))
    }

    pub fn line_count(&self) -> usize {
        self.line_starts.len()
    }

    /// `byte` moved back to a character boundary inside the text, so a span from a stale or
    /// foreign offset can never make slicing panic.
    pub fn clamp(&self, byte: usize) -> usize {
        let mut b = byte.min(self.text.len());
        while !self.text.is_char_boundary(b) {
            b -= 1;
        }
        b
    }

    /// 0-based index of the line holding `byte`.
    pub fn line_index(&self, byte: usize) -> usize {
        let byte = self.clamp(byte);
        self.line_starts.partition_point(|&s| s <= byte) - 1
    }

    /// Byte range of line `index` (0-based), without its line terminator.
    pub fn line_range(&self, index: usize) -> std::ops::Range<usize> {
        let start = self.line_starts[index.min(self.line_starts.len() - 1)];
        let end = self
            .line_starts
            .get(index + 1)
            .map(|&next| next - 1)
            .unwrap_or(self.text.len());
        let end = if end > start && self.text.as_bytes()[end - 1] == b'\r' {
            end - 1
        } else {
            end
        };
        start..end.max(start)
    }

    /// Text of line `index` (0-based), without its line terminator.
    pub fn line_text(&self, index: usize) -> &str {
        &self.text[self.line_range(index)]
    }

    pub fn position(&self, byte: usize) -> Position {
        let byte = self.clamp(byte);
        let line = self.line_index(byte);
        let start = self.line_starts[line];
        Position {
            line: line + 1,
            column: self.text[start..byte].chars().count() + 1,
        }
    }

    /// Number of characters before `byte`.
    pub fn char_offset(&self, byte: usize) -> usize {
        self.text[..self.clamp(byte)].chars().count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_count_characters_from_one() {
        let f = SourceFile::new("a.rs".into(), Arc::from("ab\r\nλx\n"));
        assert_eq!(f.position(0), Position { line: 1, column: 1 });
        assert_eq!(f.position(4), Position { line: 2, column: 1 });
        assert_eq!(f.position(6), Position { line: 2, column: 2 });
        assert_eq!(f.line_text(0), "ab");
        assert_eq!(f.line_text(1), "λx");
        assert_eq!(f.line_count(), 3);
        assert_eq!(f.position(5), Position { line: 2, column: 1 });
        assert_eq!(f.position(999), Position { line: 3, column: 1 });
    }
}
