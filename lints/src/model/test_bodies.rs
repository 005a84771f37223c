//! The bodies of test fns, found before syn parses a file so it does not have to read them.
//!
//! The lowering keeps a test fn's signature and an empty body (no lint reads test code), so
//! whatever syn builds for the body is thrown away, and where tests outweigh the code (a
//! `tests/` target, a `#[cfg(test)] mod tests` under every module) that is most of the parse.
//! This pass lexes the file and finds the bodies the lowering is sure to empty; the lowering
//! then hands syn a copy with their insides written over with spaces (newlines kept, so every
//! span is where it was), and builds the same model.
//!
//! Only a body the lowering would empty is written over, by the lowering's own attribute
//! predicates ([`super::lower::is_test_fn`], [`super::lower::is_cfg_test`]):
//!
//! - a fn of a test file, or inside an inline module or an `impl` whose outer attributes hold
//!   a `#[cfg(test)]`, or a fn or method with a `#[test]`-like attribute (not a trait's
//!   provided method: the lowering reads only the trait's context there);
//! - never inside a macro's tokens (the lowering finds modules there), nor in a block inside an
//!   expression or a `const`, whose items the lowering treats as non-test code, nor in the
//!   body of a fn that is not test code (a test fn nested there is rare, and left as written).
//!
//! Anything the scan cannot place (a brace in a signature, where a const generic argument can
//! be; brackets that do not match) means nothing in the file is written over. If the copy does
//! not parse, the lowering parses the file as written ([`super::lower`]), so a lexing mistake
//! here costs time, never a finding or an error. A syntax error inside a test body itself is no
//! longer reported: the body is not read, as no lint reads it.

use super::lower::{is_cfg_test, is_test_fn};
use super::nesting::{
    is_ident_byte, memchr, past_raw_string, raw_or_prefixed_string, skip_block_comment,
    skip_char_or_lifetime, skip_ident, skip_number, skip_quoted,
};
use super::test_attrs::TestAttrs;
use std::ops::Range;

/// The insides (between the braces) of the test fn bodies of `text`, in order. `in_test`:
/// the whole file is test code.
/// `tests`: what the file's test attributes resolve to.
pub(super) fn test_fn_bodies(text: &str, in_test: bool, tests: &TestAttrs) -> Vec<Range<usize>> {
    // Without one of these words there is no test attribute, and outside a test file no test
    // context: nothing to find.
    let mentions = |word: &[u8]| memchr::memmem::find(text.as_bytes(), word).is_some();
    if !in_test && !mentions(b"test") && !mentions(b"bench") {
        return Vec::new();
    }
    let mut scan = Scan {
        text,
        lexer: Lexer {
            b: text.as_bytes(),
            at: 0,
        },
        bodies: Vec::new(),
        tests,
    };
    match scan.run(in_test) {
        Some(()) => scan.bodies,
        None => Vec::new(),
    }
}

/// `text` with the insides of `bodies` written over with spaces, newlines kept.
pub(super) fn write_over(text: &str, bodies: &[Range<usize>]) -> String {
    let mut out = text.as_bytes().to_vec();
    for body in bodies {
        for byte in &mut out[body.clone()] {
            if *byte != b'\n' {
                *byte = b' ';
            }
        }
    }
    // Whole UTF-8 sequences were replaced (a body starts after `{` and ends before `}`), so
    // the bytes are still UTF-8; checked rather than assumed.
    String::from_utf8(out).unwrap_or_else(|_| text.to_owned())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tok {
    Word,
    Open(u8),
    Close(u8),
    Punct(u8),
    /// A string, char, byte or number literal, or a lifetime.
    Literal,
    End,
}

/// Rust's tokens, as far as the scan needs them: comments skipped, literals whole.
#[derive(Clone)]
struct Lexer<'b> {
    b: &'b [u8],
    at: usize,
}

impl Lexer<'_> {
    /// The next token and where it starts.
    fn next(&mut self) -> (Tok, usize) {
        let b = self.b;
        loop {
            let i = self.at;
            let Some(&c) = b.get(i) else {
                return (Tok::End, i);
            };
            let (tok, end) = match c {
                b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c => {
                    self.at += 1;
                    continue;
                }
                b'/' if b.get(i + 1) == Some(&b'/') => {
                    self.at = memchr(b'\n', b, i).unwrap_or(b.len());
                    continue;
                }
                b'/' if b.get(i + 1) == Some(&b'*') => {
                    self.at = skip_block_comment(b, i);
                    continue;
                }
                b'"' => (Tok::Literal, skip_quoted(b, i + 1, b'"')),
                b'\'' => (Tok::Literal, skip_char_or_lifetime(b, i)),
                b'0'..=b'9' => (Tok::Literal, skip_number(b, i)),
                b'(' | b'[' | b'{' => (Tok::Open(c), i + 1),
                b')' | b']' | b'}' => (Tok::Close(c), i + 1),
                _ if is_ident_byte(c) => match raw_or_prefixed_string(b, i) {
                    Some(end) => (Tok::Literal, end),
                    // `r#fn` is an identifier, not the keyword.
                    None if c == b'r' && b.get(i + 1) == Some(&b'#') => {
                        (Tok::Word, skip_ident(b, i + 2))
                    }
                    None => (Tok::Word, skip_ident(b, i)),
                },
                _ => (Tok::Punct(c), i + 1),
            };
            self.at = end.max(i + 1);
            return (tok, i);
        }
    }

    fn peek(&self) -> (Tok, usize) {
        self.clone().next()
    }

    /// Past the group whose opening bracket was just read: where its closing bracket is.
    /// `None` when the brackets do not match. Most of a file is inside groups passed over
    /// here, so only the bytes that can start a bracket, a literal or a comment are looked at.
    fn close_group(&mut self, open: u8) -> Option<usize> {
        let b = self.b;
        let mut open_brackets = vec![open];
        let mut i = self.at;
        while i < b.len() {
            let c = b[i];
            if !STARTS_SOMETHING[usize::from(c)] {
                i += 1;
                continue;
            }
            i = match c {
                b'(' | b'[' | b'{' => {
                    open_brackets.push(c);
                    i + 1
                }
                b')' | b']' | b'}' => {
                    if open_brackets.pop().map(closing) != Some(c) {
                        return None;
                    }
                    if open_brackets.is_empty() {
                        self.at = i + 1;
                        return Some(i);
                    }
                    i + 1
                }
                b'"' => match raw_string_hashes(b, i) {
                    Some(hashes) => past_raw_string(b, i + 1, hashes),
                    None => skip_quoted(b, i + 1, b'"'),
                },
                b'\'' => skip_char_or_lifetime(b, i).max(i + 1),
                b'/' if b.get(i + 1) == Some(&b'/') => memchr(b'\n', b, i).unwrap_or(b.len()),
                b'/' if b.get(i + 1) == Some(&b'*') => skip_block_comment(b, i),
                _ => i + 1,
            };
        }
        self.at = b.len();
        None
    }
}

/// The bytes [`Lexer::close_group`] stops at.
static STARTS_SOMETHING: [bool; 256] = {
    let mut starts = [false; 256];
    let special = b"()[]{}\"'/";
    let mut k = 0;
    while k < special.len() {
        starts[special[k] as usize] = true;
        k += 1;
    }
    starts
};

/// For the `"` at `quote`: the number of `#`s when it opens a raw string (`r"`, `r#"`,
/// `br##"`, `cr"`), told by what precedes it.
fn raw_string_hashes(b: &[u8], quote: usize) -> Option<usize> {
    let hashes = b[..quote].iter().rev().take_while(|&&c| c == b'#').count();
    let r = quote.checked_sub(hashes + 1)?;
    if b[r] != b'r' {
        return None;
    }
    let starts_word = |at: usize| at == 0 || !is_ident_byte(b[at - 1]);
    let prefixed = r > 0 && matches!(b[r - 1], b'b' | b'c') && starts_word(r - 1);
    (starts_word(r) || prefixed).then_some(hashes)
}

fn closing(open: u8) -> u8 {
    match open {
        b'(' => b')',
        b'[' => b']',
        _ => b'}',
    }
}

/// A brace-delimited scope items can be written in.
#[derive(Clone, Copy)]
struct Scope {
    /// The lowering treats the items here as test code.
    test: bool,
    /// A trait's body: its provided methods are test code only by `test`.
    in_trait: bool,
}

/// The attributes read since the last item or statement began.
#[derive(Default)]
struct Pending {
    test_fn: bool,
    cfg_test: bool,
}

struct Scan<'t> {
    text: &'t str,
    lexer: Lexer<'t>,
    bodies: Vec<Range<usize>>,
    tests: &'t TestAttrs,
}

/// Words that may stand between an item's attributes and its keyword.
fn is_qualifier(word: &str) -> bool {
    matches!(
        word,
        "pub" | "async" | "unsafe" | "extern" | "default" | "safe" | "auto" | "const"
    )
}

impl<'t> Scan<'t> {
    fn word(&self, at: usize) -> &'t str {
        let end = skip_ident(self.text.as_bytes(), at);
        &self.text[at..end]
    }

    /// `None` when the file holds something the scan cannot place.
    fn run(&mut self, in_test: bool) -> Option<()> {
        let mut scopes = vec![Scope {
            test: in_test,
            in_trait: false,
        }];
        let mut pending = Pending::default();
        // An ABI string after `extern` keeps the attributes for the item's keyword.
        let mut after_extern = false;
        loop {
            let scope = *scopes.last()?;
            let (tok, at) = self.lexer.next();
            let was_extern = std::mem::take(&mut after_extern);
            match tok {
                Tok::End => return (scopes.len() == 1).then_some(()),
                Tok::Punct(b'#') => match self.lexer.peek().0 {
                    Tok::Punct(b'!') => {
                        self.lexer.next();
                        if self.lexer.next().0 != Tok::Open(b'[') {
                            return None;
                        }
                        self.lexer.close_group(b'[')?;
                    }
                    Tok::Open(b'[') => {
                        self.lexer.next();
                        let end = self.lexer.close_group(b'[')? + 1;
                        self.attribute(&self.text[at..end], &mut pending);
                    }
                    _ => pending = Pending::default(),
                },
                Tok::Word => {
                    let word = self.word(at);
                    let attrs = std::mem::take(&mut pending);
                    match word {
                        "fn" => {
                            if self.lexer.peek().0 != Tok::Word {
                                continue;
                            }
                            self.lexer.next();
                            let test = scope.test || (!scope.in_trait && attrs.test_fn);
                            let Some(open) = self.until_body()? else {
                                continue;
                            };
                            if test {
                                let start = self.past_inner_attributes()?.unwrap_or(open + 1);
                                let close = self.lexer.close_group(b'{')?;
                                if close > start {
                                    self.bodies.push(start..close);
                                }
                            } else {
                                // Test fns nested in code are rare: the body is passed over
                                // (and left as written) rather than read item by item.
                                self.lexer.close_group(b'{')?;
                            }
                        }
                        "mod" => {
                            if self.lexer.peek().0 != Tok::Word {
                                continue;
                            }
                            self.lexer.next();
                            if self.lexer.peek().0 == Tok::Open(b'{') {
                                self.lexer.next();
                                scopes.push(Scope {
                                    test: scope.test || attrs.cfg_test,
                                    in_trait: false,
                                });
                            }
                        }
                        "impl" | "trait" => {
                            let in_trait = word == "trait";
                            let test = scope.test || (!in_trait && attrs.cfg_test);
                            if self.until_body()?.is_some() {
                                scopes.push(Scope { test, in_trait });
                            }
                        }
                        "macro_rules" if self.lexer.peek().0 == Tok::Punct(b'!') => {
                            self.lexer.next();
                            self.lexer.next();
                            self.skip_macro_group()?;
                        }
                        _ if is_qualifier(word) => {
                            pending = attrs;
                            after_extern = word == "extern";
                            // `pub(crate)`
                            if word == "pub" && self.next_is(b'(') {
                                self.lexer.next();
                                self.lexer.close_group(b'(')?;
                            }
                        }
                        _ if self.next_is(b'!') => {
                            // A macro call: its tokens are not items the scan can place.
                            let mut after_bang = self.lexer.clone();
                            after_bang.next();
                            if let Tok::Open(_) = after_bang.peek().0 {
                                self.lexer = after_bang;
                                self.skip_macro_group()?;
                            }
                        }
                        _ => {}
                    }
                }
                Tok::Literal if was_extern => {}
                Tok::Open(b'{') => {
                    pending = Pending::default();
                    scopes.push(Scope {
                        test: false,
                        in_trait: false,
                    });
                }
                Tok::Open(c) => {
                    pending = Pending::default();
                    self.lexer.close_group(c)?;
                }
                Tok::Close(b'}') => {
                    pending = Pending::default();
                    if scopes.len() == 1 {
                        return None;
                    }
                    scopes.pop();
                }
                Tok::Close(_) => return None,
                Tok::Punct(_) | Tok::Literal => pending = Pending::default(),
            }
        }
    }

    /// Past the inner attributes (`#![allow(..)]`) that open a body: syn reads them as the
    /// fn's attributes, so they stay. Where the last ends, if any.
    fn past_inner_attributes(&mut self) -> Option<Option<usize>> {
        let mut end = None;
        loop {
            let mut ahead = self.lexer.clone();
            if ahead.next().0 != Tok::Punct(b'#') || ahead.next().0 != Tok::Punct(b'!') {
                return Some(end);
            }
            if ahead.next().0 != Tok::Open(b'[') {
                return Some(end);
            }
            end = Some(ahead.close_group(b'[')? + 1);
            self.lexer = ahead;
        }
    }

    /// Whether the next token is the one-byte `token` (`!` after a macro's name, `(` after
    /// `pub`). Most words are followed by a space or punctuation, told without lexing them.
    fn next_is(&self, token: u8) -> bool {
        let b = self.lexer.b;
        let mut i = self.lexer.at;
        while b.get(i).is_some_and(|&c| c == b' ' || c == b'\t') {
            i += 1;
        }
        match b.get(i) {
            Some(&c) if c == token => true,
            Some(b'/' | b'\n' | b'\r') => match self.lexer.peek().0 {
                Tok::Punct(c) | Tok::Open(c) => c == token,
                _ => false,
            },
            _ => false,
        }
    }

    /// The group of a macro call, whose opening bracket comes next.
    fn skip_macro_group(&mut self) -> Option<()> {
        match self.lexer.next().0 {
            Tok::Open(c) => self.lexer.close_group(c).map(drop),
            _ => None,
        }
    }

    /// After a fn's name or an `impl`/`trait` keyword: where the body's `{` is (the lexer
    /// past it), or `None` at a `;` (no body). `Err`-like `None` from the outer `Option` when
    /// a brace could be a const generic argument rather than the body.
    fn until_body(&mut self) -> Option<Option<usize>> {
        let mut before = Tok::End;
        loop {
            let (tok, at) = self.lexer.next();
            match tok {
                Tok::Open(b'{') => {
                    return match before {
                        Tok::Punct(b'<' | b',' | b'=') => None,
                        _ => Some(Some(at)),
                    }
                }
                Tok::Open(c) => {
                    self.lexer.close_group(c)?;
                    before = Tok::Close(closing(c));
                }
                Tok::Punct(b';') => return Some(None),
                Tok::Close(_) | Tok::End => return None,
                _ => before = tok,
            }
        }
    }

    /// Adds what the attribute `#[..]` says to `pending`, by the lowering's predicates.
    fn attribute(&self, text: &str, pending: &mut Pending) {
        if !text.contains("test") && !text.contains("bench") {
            return;
        }
        let Ok(attrs) = syn::parse::Parser::parse_str(syn::Attribute::parse_outer, text) else {
            return;
        };
        pending.test_fn |= is_test_fn(&attrs, self.tests);
        pending.cfg_test |= is_cfg_test(&attrs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The texts of the bodies written over.
    fn bodies(src: &str, in_test: bool) -> Vec<&str> {
        test_fn_bodies(src, in_test, &TestAttrs::of(src))
            .into_iter()
            .map(|r| src[r].trim())
            .collect()
    }

    #[test]
    fn test_fns_and_test_modules_are_found() {
        let src = r#"
            fn code() { let a = 1; }
            #[test]
            fn unit() { assert!(true); }
            #[tokio::test(flavor = "multi_thread")]
            async fn tokio_unit() { run().await; }
            #[cfg(test)]
            pub(crate) mod tests {
                use super::*;
                fn helper() -> u8 { 1 }
                impl Fixture { fn make() -> Self { Fixture } }
                trait Double { fn go(&self) { go() } }
                mod deeper { fn deep() { x() } }
            }
            #[cfg(all(test, feature = "x"))]
            impl Store { fn fake(&self) { y() } }
            impl Store { #[test] fn in_impl() { z() } fn real(&self) { w() } }
        "#;
        assert_eq!(
            bodies(src, false),
            [
                "assert!(true);",
                "run().await;",
                "1",
                "Fixture",
                "go()",
                "x()",
                "y()",
                "z()"
            ]
        );
    }

    #[test]
    fn every_fn_of_a_test_file_is_test_code() {
        let src = "fn a() { 1 } impl S { fn b(&self) -> u8 { 2 } } trait T { fn c() { 3 } }";
        assert_eq!(bodies(src, true), ["1", "2", "3"]);
    }

    #[test]
    fn what_the_lowering_reads_as_code_is_kept() {
        let src = r#"
            fn code() { #[test] fn nested() { n() } if x { y() } }
            #[cfg(not(test))] mod real { fn r() { r() } }
            #[cfg(any(test, feature = "x"))] fn maybe() { m() }
            trait T { #[test] fn provided() { p() } }
            #[cfg(test)] const C: () = { fn in_const() { c() } };
            macro_rules! m { () => { #[test] fn made() { q() } } }
            cfg_if! { if #[cfg(test)] { mod t { fn t() { t() } } } }
            #[cfg(test)] struct S; fn after_struct() { a() }
            #[cfg(test)] use x; fn after_use() { b() }
            fn r#fn() { k() }
        "#;
        // The fn nested in a code fn's body is a test fn to the lowering, but left as
        // written: the code fn's body is passed over.
        assert!(bodies(src, false).is_empty());
    }

    #[test]
    fn literals_and_comments_hide_braces_and_inner_attributes_stay() {
        let src = r##"
            #[test]
            fn unit() {
                let s = "}"; let r = r#"{"#; let c = '}'; let l: &'static str = "";
                // }
                /* } /* { */ */
            }
            fn code() { z() }
            #[test]
            fn inner() { #![allow(unused)] /* kept */ #![doc] body() }
        "##;
        assert_eq!(bodies(src, false).len(), 2);
        assert!(bodies(src, false)[0].ends_with("*/"));
        // Inner attributes are the fn's: they stay.
        assert_eq!(bodies(src, false)[1], "body()");
    }

    #[test]
    fn a_brace_that_may_be_a_const_generic_argument_leaves_the_file_as_written() {
        assert!(bodies("#[test] fn a() -> Foo<{ N }> { 1 }", false).is_empty());
        assert!(bodies("#[test] fn a() {  }  fn b( { }", false).is_empty());
        assert!(bodies("#[test] fn a() { ) }", false).is_empty());
    }

    #[test]
    fn writing_over_keeps_every_byte_offset_and_line() {
        let src = "#[test]\nfn a() {\n    é(\"}\");\n}\nfn b() {}\n";
        let over = write_over(src, &test_fn_bodies(src, false, &TestAttrs::of(src)));
        assert_eq!(over.len(), src.len());
        assert_eq!(over.lines().count(), src.lines().count());
        assert_eq!(over, "#[test]\nfn a() {\n            \n}\nfn b() {}\n");
    }
}
