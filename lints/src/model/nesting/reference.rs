//! The nesting scan as it was before it was made cheaper, kept as the reference that the
//! differential tests hold [`super::Scan`] to: every answer must stay the same. The lexing
//! helpers the rewrite left as they were are shared with it.

use super::{
    char_len, is_line_doc, memchr, raw_or_prefixed_string, skip_block_comment,
    skip_char_or_lifetime, skip_number, MAX_MODULE_NESTING,
};
use std::ops::Range;
use std::time::Instant;

/// Bytes scanned between two looks at the clock: a few hundred microseconds of scanning.
const CLOCK_EVERY: usize = 256 << 10;

/// One open delimiter.
struct Group {
    /// Score of the tokens directly inside it, before counting its own operators.
    base: usize,
    /// Operators counted in the current statement or list element.
    ops: usize,
    /// `<` minus `>` in the current segment, so `HashMap<K, V>`'s comma does not end it.
    angle: usize,
    /// The body of an inline `mod name { .. }`.
    module: bool,
}

pub(super) struct Scan {
    groups: Vec<Group>,
    limit: usize,
    pub(super) max: usize,
    pub(super) max_at: usize,
    /// A `}` just closed: the next token decides whether the segment goes on (`} else`,
    /// `} + x`, `}.f()`) or a new one starts (the next item or statement).
    after_brace: bool,
    /// The next token starts an operand (after an operator, an opening delimiter or a
    /// separator), where a range is a prefix operator.
    prefix: bool,
    /// Open inline module bodies.
    pub(super) modules: usize,
    /// Tokens since `mod`: 1 after `mod`, 2 after its name; a `{` then opens a module body.
    after_mod: u8,
    /// Line doc comments seen.
    pub(super) line_docs: Vec<Range<usize>>,
    deadline: Option<Instant>,
    /// Offset at which to look at the clock next.
    next_clock: usize,
    out_of_time: bool,
}

impl Scan {
    pub(super) fn new(limit: usize) -> Scan {
        Scan {
            groups: vec![Group {
                base: 0,
                ops: 0,
                angle: 0,
                module: false,
            }],
            limit,
            max: 0,
            max_at: 0,
            after_brace: false,
            prefix: true,
            modules: 0,
            after_mod: 0,
            line_docs: Vec::new(),
            deadline: None,
            next_clock: CLOCK_EVERY,
            out_of_time: false,
        }
    }

    /// Whether the deadline passed, looking at the clock once per [`CLOCK_EVERY`] bytes.
    fn past_deadline(&mut self, at: usize) -> bool {
        if at < self.next_clock {
            return false;
        }
        self.next_clock = at + CLOCK_EVERY;
        self.out_of_time = self.deadline.is_some_and(|d| Instant::now() >= d);
        self.out_of_time
    }

    fn top(&mut self) -> &mut Group {
        // The root group is never popped (a stray closer is ignored), so there is always one.
        let last = self.groups.len() - 1;
        &mut self.groups[last]
    }

    fn score(&self) -> usize {
        self.groups.last().map_or(0, |g| g.base + g.ops)
    }

    /// Records the current score at `at`; `true` when it is past the limit.
    fn note(&mut self, at: usize) -> bool {
        let s = self.score();
        if s > self.max {
            self.max = s;
            self.max_at = at;
        }
        s > self.limit
    }

    /// A token that is not an operator: a `}` just before it ends the segment.
    fn plain(&mut self) {
        self.prefix = false;
        if std::mem::take(&mut self.after_brace) {
            let g = self.top();
            g.ops = 0;
            g.angle = 0;
        }
    }

    fn op(&mut self, at: usize) -> bool {
        self.after_brace = false;
        self.prefix = true;
        self.top().ops += 1;
        self.note(at)
    }

    fn open(&mut self, at: usize, brace: bool) -> bool {
        self.plain();
        let base = self.score() + 1;
        let module = brace && self.after_mod == 2;
        self.modules += usize::from(module);
        self.groups.push(Group {
            base,
            ops: 0,
            angle: 0,
            module,
        });
        self.prefix = true;
        self.note(at) || self.modules > MAX_MODULE_NESTING
    }

    fn close(&mut self, brace: bool) {
        self.plain();
        if self.groups.len() > 1 {
            if let Some(g) = self.groups.pop() {
                self.modules -= usize::from(g.module);
            }
        }
        self.after_brace = brace;
    }

    fn end_segment(&mut self, comma: bool) {
        self.after_brace = false;
        self.prefix = true;
        let g = self.top();
        if !comma || g.angle == 0 {
            g.ops = 0;
            g.angle = 0;
        }
    }

    /// Returns the offset of the first token past the limit.
    pub(super) fn run(&mut self, b: &[u8]) -> Option<usize> {
        let mut i = 0;
        while i < b.len() {
            if self.past_deadline(i) {
                return Some(i);
            }
            let c = b[i];
            let start = i;
            // Whitespace and comments keep `mod name {` together; any other token moves it on.
            let trivia = matches!(c, b' ' | b'\t' | b'\n' | b'\r')
                || c == b'/' && matches!(b.get(i + 1), Some(b'/' | b'*'));
            let after_mod = self.after_mod;
            let over = match c {
                b' ' | b'\t' | b'\n' | b'\r' => {
                    // A whole run at once (indentation is most of a file's bytes).
                    i += 1;
                    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r') {
                        i += 1;
                    }
                    false
                }
                b'/' if b.get(i + 1) == Some(&b'/') => {
                    i = memchr(b'\n', b, i).unwrap_or(b.len());
                    if is_line_doc(&b[start..i]) {
                        self.line_docs.push(start..i);
                    }
                    false
                }
                b'/' if b.get(i + 1) == Some(&b'*') => {
                    i = skip_block_comment(b, i);
                    false
                }
                b'"' => {
                    self.plain();
                    i = skip_quoted(b, i + 1, b'"');
                    false
                }
                b'\'' => {
                    self.plain();
                    i = skip_char_or_lifetime(b, i);
                    false
                }
                b'(' | b'[' | b'{' => {
                    i += 1;
                    self.open(start, c == b'{')
                }
                b')' | b']' | b'}' => {
                    i += 1;
                    self.close(c == b'}');
                    false
                }
                b';' => {
                    i += 1;
                    self.end_segment(false);
                    false
                }
                b',' => {
                    i += 1;
                    self.end_segment(true);
                    false
                }
                c if c == b'_' || c.is_ascii_alphabetic() || c >= 0x80 => {
                    if let Some(end) = raw_or_prefixed_string(b, i) {
                        self.plain();
                        i = end;
                        false
                    } else {
                        i = skip_ident(b, i);
                        let word = &b[start..i];
                        if nests(word) {
                            // After `}` only `else` and `as` continue the expression; any other
                            // keyword starts the next statement or item.
                            if !matches!(word, b"else" | b"as") {
                                self.plain();
                            }
                            self.op(start)
                        } else {
                            self.plain();
                            false
                        }
                    }
                }
                c if c.is_ascii_digit() => {
                    i = skip_number(b, i);
                    self.plain();
                    false
                }
                _ => {
                    let (len, kind) = punct(&b[i..]);
                    i += len;
                    match kind {
                        Punct::Open(n) => {
                            self.top().angle += n;
                            let mut over = false;
                            for _ in 0..n {
                                over |= self.op(start);
                            }
                            over
                        }
                        Punct::Close(n) => {
                            self.after_brace = false;
                            let g = self.top();
                            g.angle = g.angle.saturating_sub(n);
                            false
                        }
                        Punct::Op => self.op(start),
                        Punct::Range if self.prefix => self.op(start),
                        Punct::Range => {
                            self.after_brace = false;
                            self.prefix = true;
                            false
                        }
                        Punct::Other => {
                            self.plain();
                            false
                        }
                    }
                }
            };
            if !trivia {
                self.after_mod = match (after_mod, &b[start..i]) {
                    (_, b"mod") => 1,
                    (1, word) if word.first().is_some_and(|&c| is_ident_byte(c)) => 2,
                    _ => 0,
                };
            }
            if over {
                return Some(start);
            }
        }
        None
    }
}

/// Keywords that take a nested expression, type or pattern after them.
fn nests(ident: &[u8]) -> bool {
    matches!(
        ident,
        b"return"
            | b"break"
            | b"yield"
            | b"if"
            | b"else"
            | b"let"
            | b"move"
            | b"as"
            | b"dyn"
            | b"impl"
            | b"async"
            | b"ref"
            | b"box"
            | b"static"
    )
}

enum Punct {
    /// `<` (1) or `<<` (2): may open generic arguments.
    Open(usize),
    /// `>` or `>>`: may close them.
    Close(usize),
    /// Any other operator: may add a tree level.
    Op,
    /// `..`, `..=`, `...`: a binary range never chains (`a..b..c` is not Rust), so only a
    /// prefix range (`.. ..x`) nests; counting the binary ones would count every arm of a
    /// generated `'a'..='z' | ..` pattern.
    Range,
    /// `#`, `$`, `::`, `:`, `@` ... : never nests on its own.
    Other,
}

/// The punctuation token at the start of `b` and its length.
fn punct(b: &[u8]) -> (usize, Punct) {
    const RANGES: [&[u8]; 3] = [b"...", b"..=", b".."];
    const THREE: [&[u8]; 2] = [b"<<=", b">>="];
    const TWO: [&[u8]; 18] = [
        b"->", b"=>", b"::", b"==", b"!=", b"<=", b">=", b"&&", b"||", b"+=", b"-=", b"*=", b"/=",
        b"%=", b"^=", b"&=", b"|=", b"<<",
    ];
    if let Some(t) = RANGES.iter().find(|t| b.starts_with(t)) {
        return (t.len(), Punct::Range);
    }
    if let Some(t) = THREE.iter().find(|t| b.starts_with(t)) {
        return (t.len(), Punct::Op);
    }
    if b.starts_with(b">>") {
        return (2, Punct::Close(2));
    }
    if let Some(t) = TWO.iter().find(|t| b.starts_with(t)) {
        return match *t {
            b"::" => (2, Punct::Other),
            b"<<" => (2, Punct::Open(2)),
            _ => (2, Punct::Op),
        };
    }
    match b[0] {
        b'<' => (1, Punct::Open(1)),
        b'>' => (1, Punct::Close(1)),
        b'+' | b'-' | b'*' | b'/' | b'%' | b'^' | b'!' | b'&' | b'|' | b'=' | b'.' | b'?' => {
            (1, Punct::Op)
        }
        _ => (char_len(b[0]), Punct::Other),
    }
}

/// Past the closing `quote` of a literal whose body starts at `i` (backslash escapes).
fn skip_quoted(b: &[u8], mut i: usize, quote: u8) -> usize {
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            c if c == quote => return i + 1,
            _ => i += 1,
        }
    }
    b.len()
}

fn is_ident_byte(c: u8) -> bool {
    c == b'_' || c.is_ascii_alphanumeric() || c >= 0x80
}

fn skip_ident(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && is_ident_byte(b[i]) {
        i += 1;
    }
    i
}
