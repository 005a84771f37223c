//! The editor's open buffers: their text as the client last sent it (saved or not), kept in
//! step with `didOpen` / `didChange` / `didClose`. These texts are the overlays the analysis
//! reads instead of the files on disk.

use super::position::Encoding;
use anyhow::{bail, Result};
use lsp_types::{TextDocumentContentChangeEvent, Uri};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One open buffer.
#[derive(Debug, Clone)]
pub struct Document {
    /// The URI the client named it by (diagnostics are published under it).
    pub uri: Uri,
    pub version: i32,
    pub text: Arc<str>,
}

/// Open buffers by file path.
#[derive(Debug, Default)]
pub struct Documents {
    by_path: HashMap<PathBuf, Document>,
}

impl Documents {
    pub fn open(&mut self, path: PathBuf, doc: Document) {
        self.by_path.insert(path, doc);
    }

    pub fn close(&mut self, path: &Path) -> Option<Document> {
        self.by_path.remove(path)
    }

    pub fn get(&self, path: &Path) -> Option<&Document> {
        self.by_path.get(path)
    }

    /// Applies the changes of one `didChange` in order. A change whose range does not fit
    /// the text is clamped as the protocol says for positions ([`super::position::offset`]);
    /// a change to a buffer that was never opened is an error (the client and the server
    /// disagree on what is open). The text is edited in pieces ([`Pieces`]) and joined once:
    /// one notification of 8,000 ranged changes to a 1.1 MB buffer copied and indexed the
    /// whole buffer per change, 24 s with the main loop (and `shutdown`) waiting.
    pub fn change(
        &mut self,
        path: &Path,
        version: i32,
        changes: Vec<TextDocumentContentChangeEvent>,
        enc: Encoding,
    ) -> Result<()> {
        let Some(doc) = self.by_path.get_mut(path) else {
            bail!("`{}` changed but was never opened", path.display());
        };
        let mut text = Pieces::new(&doc.text, PIECE_BYTES);
        for change in changes {
            match change.range {
                None => text = Pieces::new(&change.text, PIECE_BYTES),
                Some(range) => {
                    let start = text.offset(range.start, enc);
                    let end = text.offset(range.end, enc).max(start);
                    text.replace(start..end, &change.text);
                }
            }
        }
        doc.text = Arc::from(text.join());
        doc.version = version;
        Ok(())
    }

    /// Every open buffer.
    pub fn iter(&self) -> impl Iterator<Item = (&PathBuf, &Document)> {
        self.by_path.iter()
    }

    /// Every open buffer's path and text.
    pub fn overlays(&self) -> impl Iterator<Item = (&PathBuf, &Arc<str>)> {
        self.by_path.iter().map(|(p, d)| (p, &d.text))
    }
}

/// Size pieces are cut to: an edit costs a piece's bytes and a look at every piece's counts.
const PIECE_BYTES: usize = 4096;

/// A text being edited, in pieces of about [`PIECE_BYTES`], each with its count of newlines
/// and whether it is ASCII: a position is found by skipping whole pieces, and an edit
/// rewrites the pieces it touches, not the text.
struct Pieces {
    pieces: Vec<Piece>,
    size: usize,
}

struct Piece {
    text: String,
    newlines: usize,
    ascii: bool,
}

impl Piece {
    fn new(text: String) -> Piece {
        Piece {
            newlines: text.bytes().filter(|&b| b == b'\n').count(),
            ascii: text.is_ascii(),
            text,
        }
    }
}

impl Pieces {
    fn new(text: &str, size: usize) -> Pieces {
        let mut pieces = Pieces {
            pieces: Vec::new(),
            size,
        };
        pieces.pieces = pieces.cut(text);
        pieces
    }

    /// `text` in pieces of about `self.size` bytes, cut at character boundaries.
    fn cut(&self, mut text: &str) -> Vec<Piece> {
        let mut out = Vec::new();
        while !text.is_empty() {
            let mut at = self.size.min(text.len());
            while !text.is_char_boundary(at) {
                at += 1;
            }
            out.push(Piece::new(text[..at].to_string()));
            text = &text[at..];
        }
        out
    }

    fn len(&self) -> usize {
        self.pieces.iter().map(|p| p.text.len()).sum()
    }

    /// The piece holding byte `at` of the text (or the end), and `at` within it.
    fn locate(&self, mut at: usize) -> (usize, usize) {
        for (i, p) in self.pieces.iter().enumerate() {
            if at < p.text.len() {
                return (i, at);
            }
            at -= p.text.len();
        }
        (self.pieces.len(), 0)
    }

    /// Piece, byte within it and byte in the text where line `line` starts; `None` past the
    /// last line.
    fn line_start(&self, line: usize) -> Option<(usize, usize, usize)> {
        let mut left = line;
        let mut global = 0;
        for (i, p) in self.pieces.iter().enumerate() {
            if left == 0 {
                return Some((i, 0, global));
            }
            if p.newlines < left {
                left -= p.newlines;
                global += p.text.len();
                continue;
            }
            let (nl, _) = p.text.match_indices('\n').nth(left - 1)?;
            return Some((i, nl + 1, global + nl + 1));
        }
        (left == 0).then_some((self.pieces.len(), 0, global))
    }

    /// The byte offset of an LSP position, as [`super::position::offset`] finds it in the
    /// joined text.
    fn offset(&self, pos: lsp_types::Position, enc: Encoding) -> usize {
        let Some((mut piece, mut from, mut global)) = self.line_start(pos.line as usize) else {
            return self.len();
        };
        let want = pos.character as usize;
        let mut units = 0;
        // Whether the last character of the line so far is `\r` (not part of the line when
        // a newline or the end follows).
        let mut after_cr = false;
        while let Some(p) = self.pieces.get(piece) {
            let rest = &p.text[from..];
            let line = rest.find('\n').map_or(rest, |nl| &rest[..nl]);
            if p.ascii {
                let k = want.saturating_sub(units);
                if k < line.len() {
                    return global + k;
                }
                units += line.len();
                after_cr = line.ends_with('\r') || (line.is_empty() && after_cr);
            } else {
                for (k, c) in line.char_indices() {
                    if units >= want {
                        return global + k;
                    }
                    units += enc.width(c);
                    after_cr = c == '\r';
                }
            }
            global += line.len();
            if line.len() < rest.len() {
                // The line ends at a newline in this piece.
                return global - usize::from(after_cr);
            }
            piece += 1;
            from = 0;
        }
        global - usize::from(after_cr)
    }

    /// Replaces bytes `range` of the text (character boundaries) with `with`.
    fn replace(&mut self, range: std::ops::Range<usize>, with: &str) {
        let (first, lo) = self.locate(range.start);
        let (last, hi) = self.locate(range.end);
        let mut text = String::new();
        if let Some(p) = self.pieces.get(first) {
            text.push_str(&p.text[..lo]);
        }
        text.push_str(with);
        if let Some(p) = self.pieces.get(last) {
            text.push_str(&p.text[hi..]);
        }
        let end = (last + 1).min(self.pieces.len());
        let new = self.cut(&text);
        self.pieces.splice(first.min(end)..end, new);
    }

    fn join(&self) -> String {
        let mut out = String::with_capacity(self.len());
        for p in &self.pieces {
            out.push_str(&p.text);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lsp_types::{Position, Range};
    use std::str::FromStr;

    #[test]
    fn incremental_changes_apply_in_order_in_utf16() {
        let mut docs = Documents::default();
        let path = PathBuf::from("/x/a.rs");
        docs.open(
            path.clone(),
            Document {
                uri: Uri::from_str("file:///x/a.rs").expect("uri"),
                version: 1,
                text: Arc::from("let s = \"😀\";\nfoo();\n"),
            },
        );
        let edit = |l1, c1, l2, c2, text: &str| TextDocumentContentChangeEvent {
            range: Some(Range::new(Position::new(l1, c1), Position::new(l2, c2))),
            range_length: None,
            text: text.to_string(),
        };
        // The emoji takes UTF-16 columns 9 and 10, the closing quote 11: 12 is after it.
        docs.change(
            &path,
            2,
            vec![edit(0, 12, 0, 12, "!"), edit(1, 0, 1, 3, "bar")],
            Encoding::Utf16,
        )
        .expect("open");
        let doc = docs.get(&path).expect("open");
        assert_eq!(&*doc.text, "let s = \"😀\"!;\nbar();\n");
        assert_eq!(doc.version, 2);
        assert!(docs
            .change(Path::new("/nope.rs"), 1, vec![], Encoding::Utf16)
            .is_err());
    }

    /// The edit as the whole text would take it: its line index, then `replace_range`.
    fn edit_whole(text: &mut String, range: Range, with: &str, enc: Encoding) {
        let src = crate::source::SourceFile::new("a.rs".into(), Arc::from(text.as_str()));
        let start = super::super::position::offset(&src, range.start, enc);
        let end = super::super::position::offset(&src, range.end, enc).max(start);
        text.replace_range(start..end, with);
    }

    #[test]
    fn edits_in_pieces_equal_edits_of_the_whole_text() {
        // Tiny pieces, so lines, characters, `\r\n` and edits straddle their boundaries.
        let alphabet = ["a", "bc", "\n", "\r\n", "\r", "é", "😀", "  ", "x\n\n"];
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        for enc in [Encoding::Utf8, Encoding::Utf16] {
            for size in [1, 3, 7, 64] {
                let mut whole: String = (0..200).map(|_| alphabet[next(alphabet.len())]).collect();
                let mut pieces = Pieces::new(&whole, size);
                for _ in 0..300 {
                    let mut pos = || Position::new(next(60) as u32, next(12) as u32);
                    let (a, b) = (pos(), pos());
                    let range = Range::new(a.min(b), a.max(b));
                    let with: String = (0..next(4))
                        .map(|_| alphabet[next(alphabet.len())])
                        .collect();
                    edit_whole(&mut whole, range, &with, enc);
                    let start = pieces.offset(range.start, enc);
                    let end = pieces.offset(range.end, enc).max(start);
                    pieces.replace(start..end, &with);
                    assert_eq!(pieces.join(), whole, "{enc:?}, pieces of {size}");
                }
            }
        }
    }
}
