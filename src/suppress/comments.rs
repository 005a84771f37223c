//! The comments of a Rust file, found by a scanner that knows the tokens a comment marker
//! can hide in: strings with escapes, byte and C strings, raw strings with any number of
//! `#`, char literals (`'"'`) as opposed to lifetimes (`'a`), and nested block comments.
//! One pass, linear in the file's length; text that does not lex (an unterminated string)
//! ends the scan quietly, since the parser reports it.

use std::ops::Range;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comment {
    /// Byte range, markers included (`// x` or `/* x */`).
    pub range: Range<usize>,
    pub block: bool,
    /// `///`, `//!`, `/** */`, `/*! */`: documentation, which may mention a directive but
    /// never is one.
    pub doc: bool,
    /// Nothing but whitespace and other comments before it on its line.
    pub own_line: bool,
    /// Byte offset of the code it sits directly above: the first code after it, with only
    /// line breaks and other comments between (no blank line). `None` at the end of the
    /// file or past a blank line.
    pub next_code: Option<usize>,
}

/// What the scanner found.
#[derive(Debug, Default)]
pub struct Scan {
    pub comments: Vec<Comment>,
    /// Where the file's header ends: the first code that is not an inner attribute
    /// (`#![...]`). `allow-file` directives must come before it.
    pub header_end: usize,
}

pub fn scan(text: &str) -> Scan {
    let mut lexer = Lexer {
        b: text.as_bytes(),
        at: 0,
        out: Scan::default(),
        pending: 0,
        newlines: 0,
        line_has_code: false,
        header: Header::Start,
    };
    lexer.run();
    let mut out = lexer.out;
    if let Header::Done(at) = lexer.header {
        out.header_end = at;
    } else {
        out.header_end = text.len();
    }
    out
}

/// Where the header scan stands: inner attributes (`#![..]`, brackets balanced) may come
/// before the first item.
#[derive(Debug, Clone, Copy)]
enum Header {
    Start,
    Hash(usize),
    HashBang(usize),
    Attr(usize),
    Done(usize),
}

struct Lexer<'a> {
    b: &'a [u8],
    at: usize,
    out: Scan,
    /// Comments before `pending` already know their next code (or have none).
    pending: usize,
    /// Line breaks since the last token: two make a blank line.
    newlines: usize,
    line_has_code: bool,
    header: Header,
}

impl Lexer<'_> {
    fn peek(&self, ahead: usize) -> Option<u8> {
        self.b.get(self.at + ahead).copied()
    }

    fn run(&mut self) {
        while let Some(c) = self.peek(0) {
            match c {
                b'\n' => {
                    self.line_has_code = false;
                    self.newlines += 1;
                    self.at += 1;
                }
                c if c.is_ascii_whitespace() => self.at += 1,
                b'/' if self.peek(1) == Some(b'/') => self.line_comment(),
                b'/' if self.peek(1) == Some(b'*') => self.block_comment(),
                _ => {
                    let start = self.at;
                    self.code(start, c);
                    if !self.token(c) {
                        return;
                    }
                }
            }
        }
    }

    /// Records code at `at` (first byte `c`): it ends the header unless it belongs to an
    /// inner attribute, and it is the next code of every comment still waiting.
    fn code(&mut self, at: usize, c: u8) {
        self.token_starts();
        for comment in &mut self.out.comments[self.pending..] {
            comment.next_code = Some(at);
        }
        self.pending = self.out.comments.len();
        self.line_has_code = true;
        self.header = match (self.header, c) {
            (Header::Start, b'#') => Header::Hash(at),
            (Header::Start, _) => Header::Done(at),
            (Header::Hash(h), b'!') => Header::HashBang(h),
            (Header::HashBang(_), b'[') => Header::Attr(1),
            (Header::Hash(h) | Header::HashBang(h), _) => Header::Done(h),
            (Header::Attr(d), b'[') => Header::Attr(d + 1),
            (Header::Attr(1), b']') => Header::Start,
            (Header::Attr(d), b']') => Header::Attr(d - 1),
            (other, _) => other,
        };
    }

    /// A blank line detaches the comments before it from the code after it.
    fn token_starts(&mut self) {
        if self.newlines >= 2 {
            self.pending = self.out.comments.len();
        }
        self.newlines = 0;
    }

    fn push(&mut self, range: Range<usize>, block: bool, doc: bool) {
        self.token_starts();
        self.out.comments.push(Comment {
            range,
            block,
            doc,
            own_line: !self.line_has_code,
            next_code: None,
        });
    }

    fn line_comment(&mut self) {
        let start = self.at;
        let end = memchr_newline(self.b, start);
        let body = &self.b[start + 2..end];
        let doc = (body.first() == Some(&b'/') && body.get(1) != Some(&b'/'))
            || body.first() == Some(&b'!');
        self.push(start..end, false, doc);
        self.at = end;
    }

    fn block_comment(&mut self) {
        let start = self.at;
        let mut depth = 0usize;
        let mut i = start;
        while i < self.b.len() {
            if self.b[i] == b'/' && self.b.get(i + 1) == Some(&b'*') {
                depth += 1;
                i += 2;
            } else if self.b[i] == b'*' && self.b.get(i + 1) == Some(&b'/') {
                depth -= 1;
                i += 2;
                if depth == 0 {
                    break;
                }
            } else {
                i += 1;
            }
        }
        let body = &self.b[start + 2..i.min(self.b.len())];
        // `/**/` and `/***` are plain comments.
        let doc = (body.first() == Some(&b'*') && !matches!(body.get(1), Some(b'*' | b'/')))
            || body.first() == Some(&b'!');
        self.push(start..i, true, doc);
        self.at = i;
    }

    /// Skips one token starting with `c`; `false` when the rest of the file does not lex.
    fn token(&mut self, c: u8) -> bool {
        match c {
            b'"' => self.string(self.at + 1),
            b'\'' => self.quote(),
            c if c == b'_' || c.is_ascii_alphabetic() || c >= 0x80 => self.ident(),
            _ => {
                self.at += 1;
                true
            }
        }
    }

    /// A string body from `from` (after the opening quote), escapes included.
    fn string(&mut self, from: usize) -> bool {
        let mut i = from;
        while i < self.b.len() {
            match self.b[i] {
                b'\\' => i += 2,
                b'"' => {
                    self.at = i + 1;
                    return true;
                }
                _ => i += 1,
            }
        }
        false
    }

    /// An identifier, or the prefix of a raw string (`r`, `br`, `cr`) or a raw identifier.
    fn ident(&mut self) -> bool {
        let start = self.at;
        let mut i = start;
        while i < self.b.len()
            && (self.b[i] == b'_' || self.b[i].is_ascii_alphanumeric() || self.b[i] >= 0x80)
        {
            i += 1;
        }
        let word = &self.b[start..i];
        self.at = i;
        if matches!(word, b"r" | b"br" | b"cr") {
            let hashes = self.b[i..].iter().take_while(|&&b| b == b'#').count();
            if self.b.get(i + hashes) == Some(&b'"') {
                return self.raw_string(i + hashes + 1, hashes);
            }
        }
        true
    }

    fn raw_string(&mut self, from: usize, hashes: usize) -> bool {
        let mut i = from;
        while let Some(off) = self.b[i..].iter().position(|&b| b == b'"') {
            let quote = i + off;
            let closing = self.b[quote + 1..]
                .iter()
                .take(hashes)
                .take_while(|&&b| b == b'#')
                .count();
            if closing == hashes {
                self.at = quote + 1 + hashes;
                return true;
            }
            i = quote + 1;
        }
        false
    }

    /// `'x'`, `'\n'`, `'"'` (a char literal) or `'a` (a lifetime or label).
    fn quote(&mut self) -> bool {
        let i = self.at + 1;
        match self.b.get(i) {
            Some(b'\\') => {
                // Skip the escaped character, then find the closing quote (`'\u{1F600}'`).
                let mut j = i + 2;
                while j < self.b.len() && self.b[j] != b'\'' && self.b[j] != b'\n' {
                    j += 1;
                }
                self.at = (j + 1).min(self.b.len());
                true
            }
            Some(&first) => {
                let width = utf8_width(first);
                if self.b.get(i + width) == Some(&b'\'') {
                    self.at = i + width + 1;
                } else {
                    // A lifetime: the quote alone; the name lexes as an identifier.
                    self.at = i;
                }
                true
            }
            None => {
                self.at = i;
                true
            }
        }
    }
}

fn memchr_newline(b: &[u8], from: usize) -> usize {
    b[from..]
        .iter()
        .position(|&c| c == b'\n')
        .map_or(b.len(), |p| from + p)
}

fn utf8_width(first: u8) -> usize {
    match first {
        0xF0..=0xFF => 4,
        0xE0..=0xEF => 3,
        0xC0..=0xDF => 2,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The text of every plain (not doc) comment.
    fn plain(text: &str) -> Vec<&str> {
        scan(text)
            .comments
            .iter()
            .filter(|c| !c.doc)
            .map(|c| &text[c.range.clone()])
            .collect()
    }

    #[test]
    fn markers_inside_literals_are_not_comments() {
        let text = r####"
let a = "\\"; // one
let b = r#"a " b"#; // two
let c = "x // not
// still a string
"; // three
let d = '"'; // four
let e = b"/*"; let f = r"\"; /* five */
fn g<'a>(x: &'a str) {} // six
let h = '\''; let i = '\u{1F600}'; // seven
let j = 'λ'; // eight
let k = r##"a "# // no "##; // nine
"####;
        assert_eq!(
            plain(text),
            [
                "// one",
                "// two",
                "// three",
                "// four",
                "/* five */",
                "// six",
                "// seven",
                "// eight",
                "// nine"
            ]
        );
    }

    #[test]
    fn nested_block_comments_and_doc_comments() {
        let text = "/* a /* b */ // c */ x(); /// d\n//// e\n/** f */ /**/ /*** g */ //! h\n";
        let s = scan(text);
        let kinds: Vec<(&str, bool)> = s
            .comments
            .iter()
            .map(|c| (&text[c.range.clone()], c.doc))
            .collect();
        assert_eq!(
            kinds,
            [
                ("/* a /* b */ // c */", false),
                ("/// d", true),
                ("//// e", false),
                ("/** f */", true),
                ("/**/", false),
                ("/*** g */", false),
                ("//! h", true),
            ]
        );
    }

    #[test]
    fn own_line_next_code_and_header() {
        let text = "//! docs\n#![allow(x, y = \"]\")]\n// a\n  /* b */ // c\nfn f() {} // d\n// e\n\n// f\nfn g() {}\n";
        let s = scan(text);
        let own: Vec<bool> = s.comments.iter().map(|c| c.own_line).collect();
        assert_eq!(own, [true, true, true, true, false, true, true]);
        let fn_at = text.find("fn f").expect("f");
        assert_eq!(s.comments[2].next_code, Some(fn_at));
        assert_eq!(s.comments[4].next_code, None, "past a blank line");
        assert_eq!(s.comments[5].next_code, None, "blank line");
        assert_eq!(s.comments[6].next_code, text.find("fn g"));
        assert_eq!(s.header_end, fn_at);
    }
}
