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

struct Scan {
    groups: Vec<Group>,
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
    fn run(&mut self, b: &[u8]) -> Option<usize> {
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

/// `///` (not `////`) and `//!` comments are doc comments, as rustc and proc_macro2 lex them.
pub(super) fn is_line_doc(comment: &[u8]) -> bool {
    comment.starts_with(b"//!") || comment.starts_with(b"///") && !comment.starts_with(b"////")
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

fn char_len(first: u8) -> usize {
    match first {
        0xf0..=0xff => 4,
        0xe0..=0xef => 3,
        0xc0..=0xdf => 2,
        _ => 1,
    }
}

fn memchr(needle: u8, b: &[u8], from: usize) -> Option<usize> {
    memchr::memchr(needle, &b[from..]).map(|p| from + p)
}

/// Past a (nestable) block comment starting at `i`.
fn skip_block_comment(b: &[u8], mut i: usize) -> usize {
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

/// `'a'`, `'\n'`, `'\u{1F600}'` or `'é'` are char literals; `'a` and `'static` are lifetimes
/// (skipped as identifiers).
fn skip_char_or_lifetime(b: &[u8], i: usize) -> usize {
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
    c == b'_' || c.is_ascii_alphanumeric() || c >= 0x80
}

fn skip_ident(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && is_ident_byte(b[i]) {
        i += 1;
    }
    i
}

/// Digits, letters (suffixes, hex, exponents) and a fractional part, but not `..` or a
/// method call on an integer (`1.max(2)`).
fn skip_number(b: &[u8], mut i: usize) -> usize {
    i = skip_ident(b, i);
    if b.get(i) == Some(&b'.') && b.get(i + 1).is_some_and(u8::is_ascii_digit) {
        i = skip_ident(b, i + 1);
    }
    i
}

/// A raw string (`r"..."`, `r#"..."#`), byte or C string (`b"..."`, `br#".."#`, `c"..."`)
/// or byte literal (`b'x'`) starting at `i`: where it ends.
fn raw_or_prefixed_string(b: &[u8], i: usize) -> Option<usize> {
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
        j += 1;
        while j < b.len() {
            if b[j] == b'"'
                && b[j + 1..]
                    .iter()
                    .take(hashes)
                    .filter(|&&c| c == b'#')
                    .count()
                    == hashes
            {
                return Some(j + 1 + hashes);
            }
            j += 1;
        }
        return Some(b.len());
    }
    match b.get(j) {
        Some(b'"') => Some(skip_quoted(b, j + 1, b'"')),
        Some(b'\'') if b[i] == b'b' => Some(skip_quoted(b, j + 1, b'\'')),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
