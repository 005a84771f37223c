//! A cheap, linear pass over a file's text that bounds how deep syn will recurse on it.
//!
//! syn recurses once per nesting level of the syntax tree, and so do the `Drop`, `Clone` and
//! `ToTokens` of the tree it builds: `Vec<Vec<..>>`, `fn() -> fn() -> ..`, `((..))`, `-!-!x`,
//! `x + x + ..` (a left-deep tree), `a.b().c()..`, `if .. else if ..` all nest. A file nested
//! deep enough overflows any stack, and the process aborts. This pass runs before syn and
//! gives a conservative nesting score: each open delimiter adds one, and inside a delimiter
//! every token that can add a tree level (operators, `.`, `?`, `->`, `<`, keywords such as
//! `else`, `return`, `as`, `impl`) adds one until the end of the current statement or list
//! element (`;`, `,` outside `<..>`, or a `}` not continued by an operator). Real code scores
//! well under 200; [`MAX_NESTING`] sits far above that and far below what the parser threads'
//! stack holds.
//!
//! The lexer is approximate (it only needs comments, strings and char literals right so their
//! contents are not counted); it never rejects text, it only measures it. Since it finds the
//! comments anyway, it also says where the line doc comments are ([`super::doc_text`]).

use std::ops::Range;
use std::time::Instant;

/// Deepest nesting score accepted; deeper files are a `parse_error` ("nested deeper than").
/// The deepest file among the 150,000 of a registry cache with tokio, rust-analyzer and the
/// AWS SDK scores 826 (a 400-call builder chain in `aws-sdk-sagemaker`).
pub const MAX_NESTING: usize = 2000;

/// Deepest inline `mod` nesting accepted. Every item stores its module path, so a file's
/// model grows with the square of its module depth; real code nests a handful of levels.
pub const MAX_MODULE_NESTING: usize = 100;

/// Where a file first goes past a limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooDeep {
    /// Byte offset of the token that went past the limit.
    pub offset: usize,
    /// Which limit: modules, or nesting of any kind.
    pub modules: bool,
}

/// The deepest nesting score in `text`, with the offset where it is first reached.
pub fn max_nesting(text: &str) -> (usize, usize) {
    let mut scan = Scan::new(usize::MAX);
    scan.run(text.as_bytes());
    (scan.max, scan.max_at)
}

/// `Err` at the first token whose nesting score exceeds `limit`; otherwise where the line doc
/// comments are (`///` and `//!`, from the slashes up to the end of the line), which the same
/// lexing finds for free (see [`super::doc_text`]).
pub fn check(text: &str, limit: usize) -> Result<Vec<Range<usize>>, TooDeep> {
    check_until(text, limit, None).map_err(|r| match r {
        Rejected::TooDeep(deep) => deep,
        // No deadline, so never out of time.
        Rejected::OutOfTime => TooDeep {
            offset: 0,
            modules: false,
        },
    })
}

/// Why [`check_until`] rejected a text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejected {
    TooDeep(TooDeep),
    /// `deadline` passed during the scan.
    OutOfTime,
}

/// Bytes scanned between two looks at the clock: a few hundred microseconds of scanning.
const CLOCK_EVERY: usize = 256 << 10;

/// [`check`], giving up once `deadline` passes: the scan is the first pass over the whole
/// text, so a file far over its budget stops here rather than after syn lexed all of it.
pub fn check_until(
    text: &str,
    limit: usize,
    deadline: Option<Instant>,
) -> Result<Vec<Range<usize>>, Rejected> {
    let mut scan = Scan::new(limit);
    scan.deadline = deadline;
    match scan.run(text.as_bytes()) {
        Some(_) if scan.out_of_time => Err(Rejected::OutOfTime),
        Some(offset) => Err(Rejected::TooDeep(TooDeep {
            offset,
            modules: scan.modules > MAX_MODULE_NESTING,
        })),
        None => Ok(scan.line_docs),
    }
}

/// One open delimiter.
#[derive(Clone, Copy)]
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

impl Group {
    const ROOT: Group = Group {
        base: 0,
        ops: 0,
        angle: 0,
        module: false,
    };
}

struct Scan {
    /// The innermost open delimiter, kept out of `outer` so each token reaches it directly.
    top: Group,
    /// The delimiters around `top`, outermost first; the root group is never popped (a stray
    /// closer is ignored).
    outer: Vec<Group>,
    limit: usize,
    max: usize,
    max_at: usize,
    /// A `}` just closed: the next token decides whether the segment goes on (`} else`,
    /// `} + x`, `}.f()`) or a new one starts (the next item or statement).
    after_brace: bool,
    /// The next token starts an operand (after an operator, an opening delimiter or a
    /// separator), where a range is a prefix operator.
    prefix: bool,
    /// Open inline module bodies.
    modules: usize,
    /// Tokens since `mod`: 1 after `mod`, 2 after its name; a `{` then opens a module body.
    /// Whitespace and comments leave it alone; every other token sets it.
    after_mod: u8,
    /// Line doc comments seen.
    line_docs: Vec<Range<usize>>,
    deadline: Option<Instant>,
    /// Offset at which to look at the clock next.
    next_clock: usize,
    out_of_time: bool,
}

impl Scan {
    fn new(limit: usize) -> Scan {
        Scan {
            top: Group::ROOT,
            outer: Vec::new(),
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

    /// Whether the deadline passed; called at the first token at or past `next_clock`.
    fn past_deadline(&mut self, at: usize) -> bool {
        self.next_clock = at + CLOCK_EVERY;
        self.out_of_time = self.deadline.is_some_and(|d| Instant::now() >= d);
        self.out_of_time
    }

    fn score(&self) -> usize {
        self.top.base + self.top.ops
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
            self.top.ops = 0;
            self.top.angle = 0;
        }
    }

    fn op(&mut self, at: usize) -> bool {
        self.after_brace = false;
        self.prefix = true;
        self.top.ops += 1;
        self.note(at)
    }

    fn open(&mut self, at: usize, brace: bool) -> bool {
        self.plain();
        let module = brace && self.after_mod == 2;
        self.modules += usize::from(module);
        let inner = Group {
            base: self.score() + 1,
            ops: 0,
            angle: 0,
            module,
        };
        self.outer.push(std::mem::replace(&mut self.top, inner));
        self.prefix = true;
        self.note(at) || self.modules > MAX_MODULE_NESTING
    }

    fn close(&mut self, brace: bool) {
        self.plain();
        if let Some(parent) = self.outer.pop() {
            self.modules -= usize::from(self.top.module);
            self.top = parent;
        }
        self.after_brace = brace;
    }

    fn end_segment(&mut self, comma: bool) {
        self.after_brace = false;
        self.prefix = true;
        if !comma || self.top.angle == 0 {
            self.top.ops = 0;
            self.top.angle = 0;
        }
    }

    /// Returns the offset of the first token past the limit.
    fn run(&mut self, b: &[u8]) -> Option<usize> {
        let mut i = 0;
        while i < b.len() {
            // Tokens up to the next look at the clock, which happens at the first token that
            // starts at or past `next_clock`.
            match self.tokens(b, i, self.next_clock) {
                Ok(next) => i = next,
                Err(at) => return Some(at),
            }
            if i < b.len() && self.past_deadline(i) {
                return Some(i);
            }
        }
        None
    }

    /// Scans the tokens that start before `stop`; `Ok` with where the next token starts, or
    /// `Err` with the offset of the first token past the limit.
    fn tokens(&mut self, b: &[u8], mut i: usize, stop: usize) -> Result<usize, usize> {
        let stop = stop.min(b.len());
        while i < stop {
            let start = i;
            let c = b[i];
            // What `after_mod` becomes: whitespace and comments (which `continue`) keep
            // `mod name {` together, any other token moves it on.
            let mut after_mod = 0;
            let over = match CLASS[usize::from(c)] {
                SPACE => {
                    // A whole run at once (indentation is most of a file's bytes).
                    i = skip_space(b, i + 1);
                    continue;
                }
                WORD => {
                    let (end, over, next) = self.word(b, i);
                    i = end;
                    after_mod = next;
                    over
                }
                DIGIT => {
                    i = skip_number(b, i);
                    self.plain();
                    after_mod = self.mod_name();
                    false
                }
                QUOTE => {
                    self.plain();
                    i = skip_quoted(b, i + 1, b'"');
                    false
                }
                APOSTROPHE => {
                    self.plain();
                    i = skip_char_or_lifetime(b, i);
                    false
                }
                OPEN => {
                    i += 1;
                    self.open(start, c == b'{')
                }
                CLOSE => {
                    i += 1;
                    self.close(c == b'}');
                    false
                }
                SEMI => {
                    i += 1;
                    self.end_segment(false);
                    false
                }
                COMMA => {
                    i += 1;
                    self.end_segment(true);
                    false
                }
                _ => match (c, b.get(i + 1)) {
                    (b'/', Some(b'/')) => {
                        i = memchr(b'\n', b, i).unwrap_or(b.len());
                        if is_line_doc(&b[start..i]) {
                            self.line_docs.push(start..i);
                        }
                        continue;
                    }
                    (b'/', Some(b'*')) => {
                        i = skip_block_comment(b, i);
                        continue;
                    }
                    _ => {
                        let (len, kind) = punct(b, i);
                        i += len;
                        self.punct(start, kind)
                    }
                },
            };
            self.after_mod = after_mod;
            if over {
                return Err(start);
            }
        }
        Ok(i)
    }

    /// What `after_mod` becomes after a token that starts with an identifier byte (a word, a
    /// number, a prefixed string) other than `mod`: it names the module right after `mod`.
    fn mod_name(&self) -> u8 {
        if self.after_mod == 1 {
            2
        } else {
            0
        }
    }

    /// The identifier, keyword or prefixed literal (`r#"..."#`, `b'x'`) at `i`: where it ends,
    /// whether it went past the limit, and what `after_mod` becomes.
    fn word(&mut self, b: &[u8], i: usize) -> (usize, bool, u8) {
        if matches!(b[i], b'b' | b'c' | b'r') {
            if let Some(end) = raw_or_prefixed_string(b, i) {
                self.plain();
                return (end, false, self.mod_name());
            }
        }
        let end = skip_ident(b, i + 1);
        match keyword(&b[i..end]) {
            Keyword::None => {
                self.plain();
                (end, false, self.mod_name())
            }
            Keyword::Mod => {
                self.plain();
                (end, false, 1)
            }
            // After `}` only `else` and `as` continue the expression; any other keyword starts
            // the next statement or item.
            Keyword::Continues => (end, self.op(i), self.mod_name()),
            Keyword::Nests => {
                self.plain();
                (end, self.op(i), self.mod_name())
            }
        }
    }

    fn punct(&mut self, at: usize, kind: Punct) -> bool {
        match kind {
            Punct::Open(n) => {
                self.top.angle += n;
                let mut over = false;
                for _ in 0..n {
                    over |= self.op(at);
                }
                over
            }
            Punct::Close(n) => {
                self.after_brace = false;
                self.top.angle = self.top.angle.saturating_sub(n);
                false
            }
            Punct::Op => self.op(at),
            Punct::Range if self.prefix => self.op(at),
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
}

/// `///` (not `////`) and `//!` comments are doc comments, as rustc and proc_macro2 lex them.
pub(super) fn is_line_doc(comment: &[u8]) -> bool {
    comment.starts_with(b"//!") || comment.starts_with(b"///") && !comment.starts_with(b"////")
}

/// The keywords the scan reacts to.
enum Keyword {
    None,
    /// `mod`, which may open a module body.
    Mod,
    /// `else` and `as`: take a nested expression or type, and continue the expression a `}`
    /// ended.
    Continues,
    /// The other keywords that take a nested expression, type or pattern after them.
    Nests,
}

fn keyword(word: &[u8]) -> Keyword {
    match word {
        b"mod" => Keyword::Mod,
        b"else" | b"as" => Keyword::Continues,
        b"return" | b"break" | b"yield" | b"if" | b"let" | b"move" | b"dyn" | b"impl"
        | b"async" | b"ref" | b"box" | b"static" => Keyword::Nests,
        _ => Keyword::None,
    }
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

/// The punctuation token at `b[i]` and its length, told apart by its first two bytes.
fn punct(b: &[u8], i: usize) -> (usize, Punct) {
    let second = b.get(i + 1).copied().unwrap_or(0);
    match (b[i], second) {
        (b'.', b'.') => match b.get(i + 2) {
            Some(b'.' | b'=') => (3, Punct::Range),
            _ => (2, Punct::Range),
        },
        (b'<' | b'>', c) if c == b[i] => match (b.get(i + 2), c) {
            (Some(b'='), _) => (3, Punct::Op),
            (_, b'<') => (2, Punct::Open(2)),
            _ => (2, Punct::Close(2)),
        },
        (b':', b':') => (2, Punct::Other),
        (b'-' | b'=', b'>')
        | (b'&', b'&')
        | (b'|', b'|')
        | (
            b'<' | b'>' | b'=' | b'!' | b'+' | b'-' | b'*' | b'/' | b'%' | b'^' | b'&' | b'|',
            b'=',
        ) => (2, Punct::Op),
        (b'<', _) => (1, Punct::Open(1)),
        (b'>', _) => (1, Punct::Close(1)),
        (b'+' | b'-' | b'*' | b'/' | b'%' | b'^' | b'!' | b'&' | b'|' | b'=' | b'.' | b'?', _) => {
            (1, Punct::Op)
        }
        (c, _) => (char_len(c), Punct::Other),
    }
}

fn char_len(first: u8) -> usize {
    match first {
        0xf0..=0xff => 4,
        0xe0..=0xef => 3,
        0xc0..=0xdf => 2,
        _ => 1,
    }
}

pub(super) fn memchr(needle: u8, b: &[u8], from: usize) -> Option<usize> {
    memchr::memchr(needle, &b[from..]).map(|p| from + p)
}

/// Past a (nestable) block comment starting at `i`.
pub(super) fn skip_block_comment(b: &[u8], mut i: usize) -> usize {
    let mut depth = 0usize;
    while i < b.len() {
        if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
            depth += 1;
            i += 2;
        } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
            depth -= 1;
            i += 2;
            if depth == 0 {
                return i;
            }
        } else {
            i += 1;
        }
    }
    b.len()
}

/// Past the closing `quote` of a literal whose body starts at `i` (backslash escapes).
pub(super) fn skip_quoted(b: &[u8], mut i: usize, quote: u8) -> usize {
    while i < b.len() {
        match memchr::memchr2(quote, b'\\', &b[i..]) {
            Some(p) if b[i + p] == quote => return i + p + 1,
            Some(p) => i += p + 2,
            None => break,
        }
    }
    b.len()
}

/// `'a'`, `'\n'`, `'\u{1F600}'` or `'é'` are char literals; `'a` and `'static` are lifetimes
/// (skipped as identifiers).
pub(super) fn skip_char_or_lifetime(b: &[u8], i: usize) -> usize {
    match b.get(i + 1) {
        Some(b'\\') => skip_quoted(b, i + 1, b'\''),
        Some(&c) => {
            let after = i + 1 + char_len(c);
            if b.get(after) == Some(&b'\'') {
                after + 1
            } else {
                skip_ident(b, i + 1)
            }
        }
        None => b.len(),
    }
}

pub(crate) fn is_ident_byte(c: u8) -> bool {
    CLASS[usize::from(c)] <= DIGIT
}

/// Past the identifier bytes from `i`, eight at a time: identifiers are about half of a
/// file's bytes.
pub(super) fn skip_ident(b: &[u8], i: usize) -> usize {
    skip_run(b, i, non_ident_bytes, is_ident_byte)
}

/// Past the whitespace from `i`: mostly a single space or a line's indentation.
fn skip_space(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && CLASS[usize::from(b[i])] == SPACE {
        i += 1;
    }
    i
}

/// Past the bytes from `i` that `member` accepts; `outside` gives the high bit of each byte of
/// an 8-byte word (first byte lowest) that `member` rejects.
fn skip_run(b: &[u8], mut i: usize, outside: fn(u64) -> u64, member: fn(u8) -> bool) -> usize {
    while let Some(eight) = b.get(i..i + 8) {
        let mut bytes = [0; 8];
        bytes.copy_from_slice(eight);
        let out = outside(u64::from_le_bytes(bytes));
        if out != 0 {
            return i + (out.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < b.len() && member(b[i]) {
        i += 1;
    }
    i
}

// Eight bytes at once (SWAR): the arithmetic below works on the low 7 bits of each byte, where
// adding a constant below 0x80 never carries into the next byte, and reads the answer from
// each byte's high bit.
const LOW: u64 = 0x7f7f_7f7f_7f7f_7f7f;
const HIGH: u64 = !LOW;

const fn splat(c: u8) -> u64 {
    0x0101_0101_0101_0101 * c as u64
}

/// High bit of each byte of `low` (high bits clear) that is at least `c` (`c` >= 1).
fn at_least(low: u64, c: u8) -> u64 {
    low.wrapping_add(splat(0x80 - c)) & HIGH
}

/// High bit of each byte of `low` (high bits clear) equal to `c` (below 0x80).
fn equal(low: u64, c: u8) -> u64 {
    !(low ^ splat(c)).wrapping_add(LOW) & HIGH
}

/// High bit of each byte that [`is_ident_byte`] rejects.
fn non_ident_bytes(word: u64) -> u64 {
    let low = word & LOW;
    // `| 0x20` folds upper case onto lower case, and nothing else onto it.
    let folded = low | splat(0x20);
    let letter = at_least(folded, b'a') & !at_least(folded, b'z' + 1);
    let digit = at_least(low, b'0') & !at_least(low, b'9' + 1);
    let ident = letter | digit | equal(low, b'_') | word & HIGH;
    !ident & HIGH
}

// Byte classes, so each token starts with one table look-up. Identifier bytes (letters, `_`,
// and every non-ASCII byte) and digits come first, so `<= DIGIT` tells an identifier byte.
const WORD: u8 = 0;
const DIGIT: u8 = 1;
const SPACE: u8 = 2;
const QUOTE: u8 = 3;
const APOSTROPHE: u8 = 4;
const OPEN: u8 = 5;
const CLOSE: u8 = 6;
const SEMI: u8 = 7;
const COMMA: u8 = 8;
/// Punctuation, and `/`, which may start a comment.
const PUNCT: u8 = 9;

static CLASS: [u8; 256] = byte_classes();

const fn byte_classes() -> [u8; 256] {
    let mut class = [PUNCT; 256];
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        class[c] = match b {
            b'_' | b'a'..=b'z' | b'A'..=b'Z' | 0x80..=0xff => WORD,
            b'0'..=b'9' => DIGIT,
            b' ' | b'\t' | b'\n' | b'\r' => SPACE,
            b'"' => QUOTE,
            b'\'' => APOSTROPHE,
            b'(' | b'[' | b'{' => OPEN,
            b')' | b']' | b'}' => CLOSE,
            b';' => SEMI,
            b',' => COMMA,
            _ => PUNCT,
        };
        c += 1;
    }
    class
}

/// Digits, letters (suffixes, hex, exponents) and a fractional part, but not `..` or a
/// method call on an integer (`1.max(2)`).
pub(super) fn skip_number(b: &[u8], mut i: usize) -> usize {
    i = skip_ident(b, i);
    if b.get(i) == Some(&b'.') && b.get(i + 1).is_some_and(u8::is_ascii_digit) {
        i = skip_ident(b, i + 1);
    }
    i
}

/// A raw string (`r"..."`, `r#"..."#`), byte or C string (`b"..."`, `br#".."#`, `c"..."`)
/// or byte literal (`b'x'`) starting at `i`: where it ends.
pub(super) fn raw_or_prefixed_string(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i;
    if matches!(b[j], b'b' | b'c') {
        j += 1;
    }
    let raw = b.get(j) == Some(&b'r');
    if raw {
        j += 1;
    }
    if j == i {
        return None;
    }
    if raw {
        let hashes = b[j..].iter().take_while(|&&c| c == b'#').count();
        j += hashes;
        if b.get(j) != Some(&b'"') {
            return None;
        }
        return Some(past_raw_string(b, j + 1, hashes));
    }
    match b.get(j) {
        Some(b'"') => Some(skip_quoted(b, j + 1, b'"')),
        Some(b'\'') if b[i] == b'b' => Some(skip_quoted(b, j + 1, b'\'')),
        _ => None,
    }
}

/// Past the raw string whose body starts at `i`, closed by `"` and `hashes` `#`s.
pub(super) fn past_raw_string(b: &[u8], mut i: usize, hashes: usize) -> usize {
    while let Some(quote) = memchr(b'"', b, i) {
        let end = quote + 1 + hashes;
        if b.get(quote + 1..end)
            .is_some_and(|h| h.iter().all(|&c| c == b'#'))
        {
            return end;
        }
        i = quote + 1;
    }
    b.len()
}

#[cfg(test)]
mod reference;

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use std::path::{Path, PathBuf};

    fn score(src: &str) -> usize {
        max_nesting(src).0
    }

    #[test]
    fn ordinary_code_scores_low() {
        let src = r##"
            use std::collections::HashMap;
            pub fn f(a: HashMap<String, Vec<u8>>, b: &str) -> Result<(), Error> {
                let x = a.get(b).map(|v| v.len()).unwrap_or(0) + 1;
                if x > 2 { return Err(Error::new("x > 2 { {")); } else if x < 1 { }
                let c = '{'; let l: &'static str = "}"; let r = r#"(("#;
                Ok(())
            }
        "##;
        assert!(score(src) < 20, "{}", score(src));
    }

    #[test]
    fn each_kind_of_nesting_counts() {
        let n = 100;
        let generics = format!("type T = {}u8{};", "Vec<".repeat(n), ">".repeat(n));
        let fns = format!("type T = {}u8;", "fn() -> ".repeat(n));
        let impls = format!("fn f() -> {}u8 {{}}", "impl Fn() -> ".repeat(n));
        let mods = format!("{}{}", "mod m {".repeat(n), "}".repeat(n));
        let chain = format!("fn f() {{ let x = {}x; }}", "x + ".repeat(n));
        let unary = format!("fn f() {{ let x = {}x; }}", "-".repeat(n));
        let else_if = format!("fn f() {{ if a {{}} {} }}", "else if a {} ".repeat(n));
        let tries = format!("fn f() {{ x{}; }}", "?".repeat(n));
        let returns = format!("fn f() {{ {} x }}", "return ".repeat(n));
        let ranges = format!("fn f() {{ let x = {}x; }}", ".. ".repeat(n));
        let ranges_after = format!("fn f() {{ let x = 1{}x; }}", ".. ".repeat(n));
        for src in [
            generics,
            fns,
            impls,
            mods,
            chain,
            unary,
            else_if,
            tries,
            returns,
            ranges,
            ranges_after,
        ] {
            assert!(score(&src) >= n, "{} for {}", score(&src), &src[..40]);
        }
    }

    #[test]
    fn separators_end_the_count() {
        let table = format!("const T: [i8; 10000] = [{}];", "-1, ".repeat(10_000));
        assert!(score(&table) < 10, "{}", score(&table));
        let fns = "fn f() -> u8 { 1 }\n".repeat(10_000);
        assert!(score(&fns) < 10, "{}", score(&fns));
        let stmts = format!("fn f() {{ {} }}", "x = x + 1;".repeat(10_000));
        assert!(score(&stmts) < 10, "{}", score(&stmts));
        let arms = format!(
            "fn f(c: char) -> bool {{ match c {{ {} => true, _ => false }} }}",
            ["'a'..='b'"; 1000].join(" | ")
        );
        assert!(score(&arms) < 1100, "{}", score(&arms));
    }

    #[test]
    fn module_nesting_has_its_own_limit() {
        let nested = |n: usize| format!("{}{}", "pub mod m { fn f() {} ".repeat(n), "}".repeat(n));
        assert!(check(&nested(MAX_MODULE_NESTING), MAX_NESTING).is_ok());
        let src = nested(MAX_MODULE_NESTING + 1);
        let e = check(&src, MAX_NESTING).expect_err("too deep");
        assert!(e.modules);
        assert_eq!(&src[e.offset..e.offset + 1], "{");
        // Blocks are not modules; a `mod` declaration without a body opens nothing.
        let blocks = format!("mod a; fn f() {}{} }}", "{".repeat(150), "}".repeat(150));
        assert!(check(&blocks, MAX_NESTING).is_ok());
    }

    #[test]
    fn check_reports_the_first_token_past_the_limit() {
        let src = format!("fn f() {{ {} }}", "(".repeat(50));
        let e = check(&src, 10).expect_err("too deep");
        assert_eq!(&src[e.offset..e.offset + 1], "(");
        assert!(check(&src, 100).is_ok());
    }

    #[test]
    fn strings_and_comments_do_not_count() {
        let inner = "(".repeat(5000);
        for src in [
            format!("const S: &str = \"{inner}\";"),
            format!("const S: &str = r##\"{inner}\"##;"),
            format!("const S: &[u8] = b\"{inner}\";"),
            format!("// {inner}\nfn f() {{}}"),
            format!("/* /* {inner} */ */ fn f() {{}}"),
        ] {
            assert!(score(&src) < 5, "{}", score(&src));
        }
    }

    /// Everything a scan answers: where it stopped, the deepest score and where, whether it
    /// stopped for the module limit, and the line doc comments.
    #[derive(Debug, PartialEq, Eq)]
    struct Answers {
        over: Option<usize>,
        max: usize,
        max_at: usize,
        modules: bool,
        line_docs: Vec<Range<usize>>,
    }

    fn answers(text: &[u8], limit: usize) -> Answers {
        let mut scan = Scan::new(limit);
        let over = scan.run(text);
        Answers {
            over,
            max: scan.max,
            max_at: scan.max_at,
            modules: scan.modules > MAX_MODULE_NESTING,
            line_docs: scan.line_docs,
        }
    }

    fn reference_answers(text: &[u8], limit: usize) -> Answers {
        let mut scan = reference::Scan::new(limit);
        let over = scan.run(text);
        Answers {
            over,
            max: scan.max,
            max_at: scan.max_at,
            modules: scan.modules > MAX_MODULE_NESTING,
            line_docs: scan.line_docs,
        }
    }

    /// The scan answers as the previous implementation did on `text`, with no limit and
    /// with limits that stop it at its deepest token, just before it, and early.
    fn assert_same_as_reference(text: &[u8], what: &dyn std::fmt::Display) {
        let unlimited = reference_answers(text, usize::MAX);
        assert_eq!(answers(text, usize::MAX), unlimited, "{what}");
        let max = unlimited.max;
        for limit in [max.saturating_sub(1), max / 2, 3, 0, MAX_NESTING] {
            assert_eq!(
                answers(text, limit),
                reference_answers(text, limit),
                "{what}, limit {limit}"
            );
        }
    }

    /// Every `.rs` file under `dir`, `target/` and `.git/` left out.
    pub(in crate::model) fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            if path.is_dir() && name != "target" && name != ".git" {
                rust_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    #[test]
    fn eight_bytes_at_once_agree_with_one_at_a_time() {
        for c in 0..=u8::MAX {
            for filler in [
                b'a', b'Z', b'0', b'_', b' ', b'@', b'[', b'`', b'{', 0, 0x7f, 0xff,
            ] {
                for k in 0..8 {
                    let mut bytes = [filler; 8];
                    bytes[k] = c;
                    let expected = bytes
                        .iter()
                        .enumerate()
                        .filter(|&(_, &b)| !is_ident_byte(b))
                        .fold(0, |m, (j, _)| m | 0x80 << (8 * j));
                    let word = u64::from_le_bytes(bytes);
                    assert_eq!(non_ident_bytes(word), expected, "{bytes:?}");
                }
            }
        }
    }

    /// Every `.rs` file of this repository, whole and cut short at a few places (cuts leave
    /// strings, comments and groups open).
    #[test]
    fn same_answers_as_the_reference_on_the_repository() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut files = Vec::new();
        rust_files(&root, &mut files);
        assert!(files.len() > 100, "{} files", files.len());
        for path in files {
            let text = std::fs::read(&path).expect("readable");
            let what = path.display();
            assert_same_as_reference(&text, &what);
            for cut in [text.len() / 3, text.len() / 2, text.len() * 5 / 7] {
                assert_same_as_reference(&text[..cut], &format_args!("{what} cut at {cut}"));
            }
        }
    }

    /// The `.rs` files under the directories in `NESTING_REFERENCE_DIRS` (`:`-separated), for
    /// a wider run by hand, e.g. over `~/.cargo/registry/src`.
    #[test]
    fn same_answers_as_the_reference_on_given_dirs() {
        let Some(dirs) = std::env::var_os("NESTING_REFERENCE_DIRS") else {
            return;
        };
        let mut files = Vec::new();
        for dir in std::env::split_paths(&dirs) {
            rust_files(&dir, &mut files);
        }
        assert!(!files.is_empty(), "no .rs files under {dirs:?}");
        for path in files {
            let text = std::fs::read(&path).expect("readable");
            assert_same_as_reference(&text, &path.display());
        }
    }

    /// Random soups of the tokens and fragments the lexer tells apart, including unclosed and
    /// malformed ones.
    #[test]
    fn same_answers_as_the_reference_on_token_soup() {
        const PIECES: &[&str] = &[
            " ", "\n", "\t", "\r", "(", ")", "[", "]", "{", "}", ";", ",", "<", ">", "<<", ">>",
            "<<=", ">>=", "<=", ">=", "=", "==", "=>", "->", "-", "+", "*", "/", "%", "^", "!",
            "!=", "&", "&&", "|", "||", "+=", "-=", "*=", "/=", "%=", "^=", "&=", "|=", ".", "..",
            "...", "..=", "?", ":", "::", "#", "$", "@", "~", "\\", "\0", "mod", "mod ", "m", "x",
            "_", "r", "b", "c", "br", "cr", "rb", "if", "else", "as", "return", "break", "yield",
            "let", "move", "dyn", "impl", "async", "ref", "box", "static", "modx", "1", "1.5",
            "1.max", "0x1f", "1e3", "\"", "\"s\"", "\"\\\"\"", "'", "'a'", "'a", "'\\n'", "'\\''",
            "'é'", "'static", "é", "日本", "r\"", "r#\"", "\"#", "#\"", "b'", "b'x'", "b\"", "c\"",
            "br#\"", "//", "///", "////", "//!", "/*", "*/", "/**", "/*!", "\\\\",
        ];
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            // xorshift64: deterministic, so a failure reproduces.
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for round in 0..20_000 {
            let len = (next() % 60) as usize;
            let mut text = String::new();
            for _ in 0..len {
                text.push_str(PIECES[(next() % PIECES.len() as u64) as usize]);
            }
            assert_same_as_reference(text.as_bytes(), &format_args!("round {round}: {text:?}"));
        }
    }

    #[test]
    fn same_answers_as_the_reference_on_deep_inputs() {
        let n = 3000;
        for text in [
            format!("{}{}", "mod m {".repeat(n), "}".repeat(n)),
            format!("{}{}", "mod m { fn f() {} ".repeat(150), "}".repeat(150)),
            format!("type T = {}u8{};", "Vec<".repeat(n), ">".repeat(n)),
            format!("fn f() {{ let x = {}x; }}", "x << ".repeat(n)),
            format!("fn f() {{ let x = {}x; }}", ".. ".repeat(n)),
            format!("fn f() {{ if a {{}} {} }}", "else if a {} ".repeat(n)),
            format!("fn f() {{ {} }}", "(".repeat(n)),
            "mod /* c */ m // c\n {".repeat(200),
            "mod 1 {".repeat(200),
            "mod r\"x\" {".repeat(200),
        ] {
            assert_same_as_reference(text.as_bytes(), &&text[..40]);
        }
    }
}
