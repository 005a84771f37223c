//! The editor's open buffers: their text as the client last sent it (saved or not), kept in
//! step with `didOpen` / `didChange` / `didClose`. These texts are the overlays the analysis
//! reads instead of the files on disk.

use super::position::Encoding;
use anyhow::{bail, Result};
use lsp_types::{TextDocumentContentChangeEvent, Uri};
use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
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
#[derive(Default)]
pub struct Documents {
    by_path: HashMap<PathBuf, Document>,
    /// Changes received and not applied yet, per buffer ([`Documents::step`]).
    pending: HashMap<PathBuf, Pending>,
    /// The buffers of `pending`, in the order their changes first came.
    order: VecDeque<PathBuf>,
}

/// The changes of one buffer's `didChange`s not applied yet, and the text they apply to.
struct Pending {
    text: Pieces,
    changes: VecDeque<TextDocumentContentChangeEvent>,
    /// The version the buffer has once they are applied.
    version: i32,
    enc: Encoding,
}

impl std::fmt::Debug for Documents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Documents")
            .field("by_path", &self.by_path)
            .field("pending", &self.order)
            .finish()
    }
}

impl Documents {
    pub fn open(&mut self, path: PathBuf, doc: Document) {
        self.drop_pending(&path);
        self.by_path.insert(path, doc);
    }

    pub fn close(&mut self, path: &Path) -> Option<Document> {
        self.drop_pending(path);
        self.by_path.remove(path)
    }

    /// The buffer as its changes applied so far left it: [`Documents::settle`] it first
    /// for the text the client has.
    pub fn get(&self, path: &Path) -> Option<&Document> {
        self.by_path.get(path)
    }

    /// Takes the changes of one `didChange`, to apply in order after those before them
    /// ([`Documents::step`], [`Documents::settle`]). A change whose range does not fit the
    /// text is clamped as the protocol says for positions ([`super::position::offset`]); a
    /// change to a buffer that was never opened is an error (the client and the server
    /// disagree on what is open). The text is edited in pieces ([`Pieces`]) and joined once
    /// the last change is applied: one notification of 8,000 ranged changes to a 1.1 MB
    /// buffer copied and indexed the whole buffer per change, 24 s with the main loop (and
    /// `shutdown`) waiting; in pieces it is under a second, and in steps the server answers
    /// other messages between them.
    pub fn change(
        &mut self,
        path: &Path,
        version: i32,
        changes: Vec<TextDocumentContentChangeEvent>,
        enc: Encoding,
    ) -> Result<()> {
        let Some(doc) = self.by_path.get(path) else {
            bail!("`{}` changed but was never opened", path.display());
        };
        let pending = match self.pending.entry(path.to_path_buf()) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => {
                self.order.push_back(path.to_path_buf());
                e.insert(Pending {
                    text: Pieces::new(&doc.text, piece_size(doc.text.len())),
                    changes: VecDeque::new(),
                    version,
                    enc,
                })
            }
        };
        pending.changes.extend(changes);
        pending.version = version;
        pending.enc = enc;
        Ok(())
    }

    /// Whether some buffer has changes not applied yet.
    pub fn any_pending(&self) -> bool {
        !self.order.is_empty()
    }

    /// Whether `path` has changes not applied yet.
    pub fn is_pending(&self, path: &Path) -> bool {
        self.pending.contains_key(path)
    }

    /// Applies at most `max` changes, oldest buffer first; a buffer whose changes are all
    /// applied gets its new text and version.
    pub fn step(&mut self, max: usize) {
        let mut left = max;
        while left > 0 {
            let Some(path) = self.order.front().cloned() else {
                return;
            };
            if self.apply(&path, left, &mut left) {
                self.order.pop_front();
            }
        }
    }

    /// Applies every change of `path` not applied yet.
    pub fn settle(&mut self, path: &Path) {
        if self.apply(path, usize::MAX, &mut 0) {
            self.order.retain(|p| p != path);
        }
    }

    /// Applies every change not applied yet.
    pub fn settle_all(&mut self) {
        while self.any_pending() {
            self.step(usize::MAX);
        }
    }

    /// Forgets the changes not applied yet (nothing will read the buffers any more).
    pub fn drop_all_pending(&mut self) {
        self.pending.clear();
        self.order.clear();
    }

    fn drop_pending(&mut self, path: &Path) {
        if self.pending.remove(path).is_some() {
            self.order.retain(|p| p != path);
        }
    }

    /// Applies up to `max` of `path`'s pending changes, subtracting how many from `left`;
    /// true when none are left (the buffer then has its new text), or there were none.
    fn apply(&mut self, path: &Path, max: usize, left: &mut usize) -> bool {
        let Some(p) = self.pending.get_mut(path) else {
            return true;
        };
        let mut applied = 0;
        while applied < max {
            let Some(change) = p.changes.pop_front() else {
                break;
            };
            applied += 1;
            match change.range {
                None => p.text = Pieces::new(&change.text, piece_size(change.text.len())),
                Some(range) => {
                    let (start, end) = p.text.range(range, p.enc);
                    p.text.replace(start, end, &change.text);
                }
            }
        }
        *left = left.saturating_sub(applied);
        if !p.changes.is_empty() {
            return false;
        }
        let Some(p) = self.pending.remove(path) else {
            return true;
        };
        if let Some(doc) = self.by_path.get_mut(path) {
            doc.text = Arc::from(p.text.join());
            doc.version = p.version;
        }
        true
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

/// Least size pieces are cut to: an edit copies about one piece, and finding a line looks
/// at the counts of the pieces before it (a 4 MB buffer is about 250 pieces). Larger texts
/// get pieces of the square root of their size, so both stay under that root.
const PIECE_BYTES: usize = 16 << 10;

/// The size of the pieces of a `len`-byte text.
fn piece_size(len: usize) -> usize {
    PIECE_BYTES.max(len.isqrt())
}

/// A text being edited, in pieces of about [`PIECE_BYTES`], each with its count of newlines
/// and whether it is ASCII: a position is found by skipping whole pieces, and an edit
/// rewrites the pieces it touches, not the text.
struct Pieces {
    pieces: Vec<Piece>,
    size: usize,
    len: usize,
}

struct Piece {
    text: String,
    newlines: usize,
    ascii: bool,
}

impl Piece {
    fn new(text: String) -> Piece {
        Piece {
            newlines: text.matches('\n').count(),
            ascii: text.is_ascii(),
            text,
        }
    }
}

/// A place in [`Pieces`]: a piece (or the end), a byte within it, and the byte in the text.
#[derive(Debug, Clone, Copy)]
struct At {
    piece: usize,
    byte: usize,
    global: usize,
}

/// A line's number and where it starts.
#[derive(Debug, Clone, Copy)]
struct Line {
    number: usize,
    start: At,
}

impl Pieces {
    fn new(text: &str, size: usize) -> Pieces {
        Pieces {
            pieces: cut(text, size),
            size,
            len: text.len(),
        }
    }

    fn end(&self) -> At {
        At {
            piece: self.pieces.len(),
            byte: 0,
            global: self.len,
        }
    }

    fn first_line(&self) -> Line {
        Line {
            number: 0,
            start: At {
                piece: 0,
                byte: 0,
                global: 0,
            },
        }
    }

    /// The bytes an LSP range covers, as [`super::position::offset`] finds its ends in the
    /// joined text (an end before the start is the start). The end's line is looked for
    /// from the start's.
    fn range(&self, range: lsp_types::Range, enc: Encoding) -> (At, At) {
        let (start, line) = self.offset(self.first_line(), range.start, enc);
        let from = if range.end.line >= range.start.line {
            line
        } else {
            self.first_line()
        };
        let (end, _) = self.offset(from, range.end, enc);
        (
            start,
            if end.global < start.global {
                start
            } else {
                end
            },
        )
    }

    /// Line `number`, looked for from line `from` (at or before it); `None` past the last
    /// line.
    fn line(&self, from: Line, number: usize) -> Option<Line> {
        let mut left = number - from.number;
        let mut at = from.start;
        while left > 0 {
            let p = self.pieces.get(at.piece)?;
            if at.byte == 0 && p.newlines < left {
                // A whole piece before the line.
                left -= p.newlines;
                at.piece += 1;
                at.global += p.text.len();
                continue;
            }
            let rest = &p.text[at.byte..];
            let newlines = if at.byte == 0 {
                p.newlines
            } else {
                rest.matches('\n').count()
            };
            if newlines < left {
                left -= newlines;
                at = At {
                    piece: at.piece + 1,
                    byte: 0,
                    global: at.global + rest.len(),
                };
                continue;
            }
            let (nl, _) = rest.match_indices('\n').nth(left - 1)?;
            at.byte += nl + 1;
            at.global += nl + 1;
            left = 0;
        }
        Some(Line { number, start: at })
    }

    /// The byte before `at` (`at` is not the start of the text).
    fn before(&self, at: At) -> At {
        let (piece, byte) = if at.byte > 0 {
            (at.piece, at.byte - 1)
        } else {
            // Pieces are never empty.
            (at.piece - 1, self.pieces[at.piece - 1].text.len() - 1)
        };
        At {
            piece,
            byte,
            global: at.global - 1,
        }
    }

    /// Where an LSP position is, as [`super::position::offset`] finds it in the joined text,
    /// and its line; the line is looked for from `from`, or from the first when `from` is
    /// after it.
    fn offset(&self, from: Line, pos: lsp_types::Position, enc: Encoding) -> (At, Line) {
        let number = pos.line as usize;
        let from = if from.number <= number {
            from
        } else {
            self.first_line()
        };
        let Some(line) = self.line(from, number) else {
            return (self.end(), self.first_line());
        };
        (self.column(line.start, pos.character as usize, enc), line)
    }

    /// Where column `want` of the line starting `at` is.
    fn column(&self, mut at: At, want: usize, enc: Encoding) -> At {
        let mut units = 0;
        // Whether the last character of the line so far is `\r` (not part of the line when
        // a newline or the end follows).
        let mut after_cr = false;
        let line_end = |at: At, after_cr: bool| if after_cr { self.before(at) } else { at };
        while let Some(p) = self.pieces.get(at.piece) {
            let rest = &p.text[at.byte..];
            let line = rest.find('\n').map_or(rest, |nl| &rest[..nl]);
            let column = if p.ascii {
                let k = want.saturating_sub(units);
                units += line.len();
                after_cr = line.ends_with('\r') || (line.is_empty() && after_cr);
                (k < line.len()).then_some(k)
            } else {
                line.char_indices().find_map(|(k, c)| {
                    if units >= want {
                        return Some(k);
                    }
                    units += enc.width(c);
                    after_cr = c == '\r';
                    None
                })
            };
            if let Some(k) = column {
                return At {
                    byte: at.byte + k,
                    global: at.global + k,
                    ..at
                };
            }
            at.global += line.len();
            if line.len() < rest.len() {
                // The line ends at a newline in this piece.
                at.byte += line.len();
                return line_end(at, after_cr);
            }
            at.piece += 1;
            at.byte = 0;
        }
        line_end(at, after_cr)
    }

    /// Replaces the text from `start` to `end` with `with`.
    fn replace(&mut self, start: At, end: At, with: &str) {
        let mut text = String::new();
        if let Some(p) = self.pieces.get(start.piece) {
            text.push_str(&p.text[..start.byte]);
        }
        text.push_str(with);
        if let Some(p) = self.pieces.get(end.piece) {
            text.push_str(&p.text[end.byte..]);
        }
        let to = (end.piece + 1).min(self.pieces.len());
        self.pieces
            .splice(start.piece.min(to)..to, cut(&text, self.size));
        self.len = self.len - (end.global - start.global) + with.len();
    }

    fn join(&self) -> String {
        let mut out = String::with_capacity(self.len);
        for p in &self.pieces {
            out.push_str(&p.text);
        }
        out
    }
}

/// `text` in pieces of `size` to `2 * size` bytes (a shorter text in one), cut at character
/// boundaries. Cut evenly, not into `size`s and a remainder: an edit that makes a piece one
/// byte longer would leave a crumb beside it, one more per such edit, and every later edit
/// walks all the pieces before its line (32,000 edits of a 1.1 MB buffer cost 2.3 times
/// 16,000).
fn cut(text: &str, size: usize) -> Vec<Piece> {
    let n = (text.len() / size.max(1)).max(1);
    let mut out = Vec::with_capacity(n);
    let mut start = 0;
    for i in 1..=n {
        let mut end = text.len() * i / n;
        while !text.is_char_boundary(end) {
            end += 1;
        }
        // Pieces are never empty.
        if end > start {
            out.push(Piece::new(text[start..end].to_string()));
            start = end;
        }
    }
    out
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
        docs.settle(&path);
        let doc = docs.get(&path).expect("open");
        assert_eq!(&*doc.text, "let s = \"😀\"!;\nbar();\n");
        assert_eq!(doc.version, 2);
        assert!(docs
            .change(Path::new("/nope.rs"), 1, vec![], Encoding::Utf16)
            .is_err());
    }

    #[test]
    fn changes_applied_in_steps_keep_their_order_across_notifications() {
        let mut docs = Documents::default();
        let path = PathBuf::from("/x/a.rs");
        let open = |docs: &mut Documents| {
            docs.open(
                path.clone(),
                Document {
                    uri: Uri::from_str("file:///x/a.rs").expect("uri"),
                    version: 1,
                    text: Arc::from("abc\n"),
                },
            )
        };
        open(&mut docs);
        let insert = |c: u32, text: &str| TextDocumentContentChangeEvent {
            range: Some(Range::new(Position::new(0, c), Position::new(0, c))),
            range_length: None,
            text: text.to_string(),
        };
        let whole = |text: &str| TextDocumentContentChangeEvent {
            range: None,
            range_length: None,
            text: text.to_string(),
        };
        let enc = Encoding::Utf16;
        docs.change(&path, 2, vec![insert(0, "1"), insert(0, "2")], enc)
            .expect("open");
        docs.change(&path, 3, vec![whole("x\n"), insert(1, "y")], enc)
            .expect("open");
        docs.change(&path, 4, vec![insert(0, "z")], enc)
            .expect("open");
        docs.step(3);
        // Three of five applied: the buffer keeps its text and version until the last.
        assert!(docs.is_pending(&path));
        assert_eq!(&*docs.get(&path).expect("open").text, "abc\n");
        assert_eq!(docs.get(&path).expect("open").version, 1);
        docs.step(3);
        assert!(!docs.any_pending());
        let doc = docs.get(&path).expect("open");
        assert_eq!((&*doc.text, doc.version), ("zxy\n", 4));
        // Opening again drops what was not applied of the old buffer.
        docs.change(&path, 5, vec![insert(0, "q")], enc)
            .expect("open");
        open(&mut docs);
        assert!(!docs.any_pending());
        docs.settle_all();
        assert_eq!(&*docs.get(&path).expect("open").text, "abc\n");
    }

    #[test]
    fn edits_that_grow_pieces_do_not_multiply_them() {
        let size = 1 << 10;
        let lines = 6_000;
        let mut pieces = Pieces::new(&"let x = 1;\n".repeat(lines), size);
        let bound = |p: &Pieces| p.len / size + 1;
        assert!(pieces.pieces.len() <= bound(&pieces));
        for i in 0..20_000 {
            let line = (i * 19 % lines) as u32;
            let range = Range::new(Position::new(line, 4), Position::new(line, 5));
            let (start, end) = pieces.range(range, Encoding::Utf8);
            pieces.replace(start, end, "yy");
        }
        // 20,000 bytes longer, in as many pieces as that takes: not one more per edit.
        assert!(
            pieces.pieces.len() <= bound(&pieces),
            "{} pieces for {} bytes",
            pieces.pieces.len(),
            pieces.len
        );
        assert!(pieces.pieces.iter().all(|p| !p.text.is_empty()));
        assert_eq!(pieces.join().len(), lines * 11 + 20_000);
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
                    // Mostly in order; a range that ends before it starts is empty.
                    let range = if next(4) == 0 {
                        Range::new(a, b)
                    } else {
                        Range::new(a.min(b), a.max(b))
                    };
                    let with: String = (0..next(4))
                        .map(|_| alphabet[next(alphabet.len())])
                        .collect();
                    edit_whole(&mut whole, range, &with, enc);
                    let (start, end) = pieces.range(range, enc);
                    pieces.replace(start, end, &with);
                    assert_eq!(pieces.join(), whole, "{enc:?}, pieces of {size}");
                    assert_eq!(pieces.len, whole.len());
                }
            }
        }
    }
}
