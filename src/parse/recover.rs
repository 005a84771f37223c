//! What is kept of a file that does not parse. A half-typed line in `lib.rs` or a `mod.rs`
//! must not drop the module tree below it: the file is cut into its top-level items (a line
//! that starts at column 0 with an item keyword, an attribute or a doc comment starts one, as
//! rustfmt lays files out), every item that does not parse on its own is blanked, and the rest
//! is lowered as usual, so its `mod` declarations are followed and its findings kept.
//!
//! A lexing error (an unbalanced delimiter) is also pointed at the delimiter at fault, as rustc
//! does, instead of where the lexer gave up (the end of the file).

use idem_lints::model::nesting::{self, MAX_NESTING};
use std::ops::Range;
use std::time::Instant;

/// An unbalanced delimiter: where it is, and the delimiter that showed it (a mismatched
/// closing one), if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DelimiterError {
    pub message: &'static str,
    pub at: Range<usize>,
    pub label: &'static str,
    pub other: Option<(Range<usize>, &'static str)>,
}

/// `text` with every top-level item that does not parse on its own written over with spaces
/// (line breaks kept, so every offset and line stays that of `text`); `None` when there is
/// nothing to keep (no item parses), the file is nested too deep to try, or `deadline` passes.
pub fn without_broken_items(text: &str, deadline: Instant) -> Option<String> {
    nesting::check(text, MAX_NESTING).ok()?;
    let items = top_level_items(text);
    let mut out = String::with_capacity(text.len());
    let mut kept = false;
    for item in items {
        if Instant::now() > deadline {
            return None;
        }
        let piece = &text[item];
        if syn::parse_file(piece).is_ok() {
            kept |= !piece.trim().is_empty();
            out.push_str(piece);
        } else {
            out.extend(piece.chars().map(blank));
        }
    }
    kept.then_some(out)
}

/// The top-level items [`without_broken_items`] blanks that are a `mod` declaration lacking
/// only its `;` (`pub mod notify` while it is being typed): each item's start and its text
/// with the `;`, so the declaration, its `pub` and its `#[path]` are kept.
pub fn half_typed_mods(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for item in top_level_items(text) {
        let piece = &text[item.clone()];
        let code = piece.trim_end();
        // Cheap test first: only an item that ends its text with a name can be one.
        if !code.contains("mod ") || code.ends_with([';', '}']) || syn::parse_file(piece).is_ok() {
            continue;
        }
        let closed = format!("{code};");
        let is_decl = syn::parse_file(&closed)
            .is_ok_and(|f| matches!(&f.items[..], [syn::Item::Mod(m)] if m.content.is_none()));
        if is_decl {
            out.push((item.start, closed));
        }
    }
    out
}

/// A character written over: a line break stays, anything else becomes as many spaces as
/// it has bytes.
fn blank(c: char) -> String {
    if c == '\n' {
        "\n".to_string()
    } else {
        " ".repeat(c.len_utf8())
    }
}

/// The byte ranges of the top-level items, covering the text.
fn top_level_items(text: &str) -> Vec<Range<usize>> {
    let mut starts = vec![0];
    // The previous item start was an outer attribute or doc comment: its item follows.
    let mut after_attribute = false;
    for line_start in code_line_starts(text) {
        let line = &text[line_start
            ..text[line_start..]
                .find('\n')
                .map_or(text.len(), |i| line_start + i)];
        if !starts_item(line) {
            continue;
        }
        if !after_attribute {
            starts.push(line_start);
        }
        after_attribute = is_outer_attribute(line);
    }
    starts.dedup();
    starts.push(text.len());
    starts.windows(2).map(|w| w[0]..w[1]).collect()
}

fn starts_item(line: &str) -> bool {
    const KEYWORDS: &[&str] = &[
        "pub",
        "mod",
        "fn",
        "use",
        "struct",
        "enum",
        "union",
        "impl",
        "trait",
        "const",
        "static",
        "type",
        "extern",
        "unsafe",
        "async",
        "macro_rules!",
    ];
    if line.starts_with("#[") || line.starts_with("#![") || line.starts_with("//!") {
        return true;
    }
    if is_outer_attribute(line) {
        return true;
    }
    let word = line
        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '!'))
        .next()
        .unwrap_or("");
    let word = word.split('(').next().unwrap_or(word);
    KEYWORDS.contains(&word)
}

fn is_outer_attribute(line: &str) -> bool {
    (line.starts_with("#[") || line.starts_with("///") || line.starts_with("/**"))
        && !line.starts_with("////")
}

/// The starts of the lines that begin outside any comment or string literal.
fn code_line_starts(text: &str) -> Vec<usize> {
    let mut out = Vec::new();
    scan(text, &mut |event| {
        if let Event::LineStart(at) = event {
            out.push(at);
        }
        true
    });
    out
}

/// The first unbalanced delimiter of `text`, as rustc reports it: a closing delimiter that
/// does not match the open one points at the open one (the one left unclosed), a closing
/// delimiter with nothing open points at itself, and a delimiter still open at the end of the
/// file points at itself. An unterminated string or block comment points at its start.
pub fn delimiter_error(text: &str) -> Option<DelimiterError> {
    let mut open: Vec<(char, usize)> = Vec::new();
    let mut found = None;
    let complete = scan(text, &mut |event| {
        match event {
            Event::Open(c, at) => open.push((c, at)),
            Event::Close(c, at) => match open.pop() {
                Some((o, _)) if closes(o) == c => {}
                Some((_, o_at)) => {
                    found = Some(DelimiterError {
                        message: "mismatched closing delimiter",
                        at: o_at..o_at + 1,
                        label: "unclosed delimiter",
                        other: Some((at..at + 1, "mismatched closing delimiter")),
                    });
                }
                None => {
                    found = Some(DelimiterError {
                        message: "unexpected closing delimiter",
                        at: at..at + 1,
                        label: "unexpected closing delimiter",
                        other: None,
                    });
                }
            },
            Event::Unterminated(what, at) => {
                found = Some(DelimiterError {
                    message: what,
                    at: at..at + 1,
                    label: "starts here",
                    other: None,
                });
            }
            Event::LineStart(_) => {}
        }
        found.is_none()
    });
    if found.is_some() || !complete {
        return found;
    }
    let (_, at) = open.pop()?;
    Some(DelimiterError {
        message: "this file contains an unclosed delimiter",
        at: at..at + 1,
        label: "unclosed delimiter",
        other: None,
    })
}

fn closes(open: char) -> char {
    match open {
        '(' => ')',
        '[' => ']',
        _ => '}',
    }
}

enum Event {
    Open(char, usize),
    Close(char, usize),
    Unterminated(&'static str, usize),
    /// A line starts here, outside comments and literals.
    LineStart(usize),
}

/// Walks the tokens of `text` that matter here (delimiters and line starts), skipping
/// comments, string, byte string, raw string and character literals and lifetimes; stops when
/// `on` returns `false`. Returns whether it reached the end.
fn scan(text: &str, on: &mut dyn FnMut(Event) -> bool) -> bool {
    let bytes = text.as_bytes();
    let mut i = 0;
    if !on(Event::LineStart(0)) {
        return false;
    }
    while i < bytes.len() {
        let b = bytes[i];
        let event = match b {
            b'\n' => {
                i += 1;
                Some(Event::LineStart(i))
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                i = text[i..].find('\n').map_or(bytes.len(), |n| i + n);
                None
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => match block_comment_end(bytes, i) {
                Some(end) => {
                    i = end;
                    None
                }
                None => return on(Event::Unterminated("unterminated block comment", i)),
            },
            b'"' => match string_end(bytes, i + 1) {
                Some(end) => {
                    i = end;
                    None
                }
                None => return on(Event::Unterminated("unterminated double quote string", i)),
            },
            b'\'' => {
                i = char_or_lifetime_end(text, i);
                None
            }
            b'(' | b'[' | b'{' => {
                i += 1;
                Some(Event::Open(b as char, i - 1))
            }
            b')' | b']' | b'}' => {
                i += 1;
                Some(Event::Close(b as char, i - 1))
            }
            _ if b.is_ascii_alphanumeric() || b == b'_' => {
                // A whole identifier, so only a lone `r`, `br` or `cr` opens a raw string.
                let start = i;
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                let hashes = bytes[i..].iter().take_while(|&&c| c == b'#').count();
                let raw = matches!(&text[start..i], "r" | "br" | "cr")
                    && bytes.get(i + hashes) == Some(&b'"');
                if raw {
                    let body = i + hashes + 1;
                    let close = format!("\"{}", "#".repeat(hashes));
                    match text[body..].find(&close) {
                        Some(n) => i = body + n + close.len(),
                        None => return on(Event::Unterminated("unterminated raw string", start)),
                    }
                }
                None
            }
            _ => {
                i += 1;
                None
            }
        };
        if let Some(event) = event {
            if !on(event) {
                return false;
            }
        }
    }
    true
}

/// The offset after the `*/` closing the block comment opened at `i` (they nest).
fn block_comment_end(bytes: &[u8], mut i: usize) -> Option<usize> {
    let mut depth = 0;
    while i + 1 < bytes.len() {
        match (bytes[i], bytes[i + 1]) {
            (b'/', b'*') => {
                depth += 1;
                i += 2;
            }
            (b'*', b'/') => {
                depth -= 1;
                i += 2;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => i += 1,
        }
    }
    None
}

/// The offset after the `"` closing a string whose text starts at `i`.
fn string_end(bytes: &[u8], mut i: usize) -> Option<usize> {
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

/// The offset after a character literal (`'a'`, `'\n'`, `'('`) or a lifetime (`'a`) at `i`.
fn char_or_lifetime_end(text: &str, i: usize) -> usize {
    let rest = &text[i + 1..];
    let mut chars = rest.char_indices();
    match chars.next() {
        // An escape: the quote after the escaped character closes it.
        Some((_, '\\')) => rest
            .get(2..)
            .and_then(|r| r.find('\''))
            .map_or(i + 1, |n| i + 1 + 2 + n + 1),
        Some((_, c)) => match chars.next() {
            Some((n, '\'')) => i + 1 + n + 1,
            _ => i + 1 + c.len_utf8(),
        },
        None => i + 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mod_line_without_its_semicolon_is_kept_with_it() {
        let text = "mod a;\n/// Docs.\n#[path = \"x.rs\"]\npub mod notify\npub fn f() {\n    foo(;\n}\nmod c {\n";
        let found = half_typed_mods(text);
        let at = text.find("/// Docs.").expect("item");
        assert_eq!(
            found,
            [(
                at,
                "/// Docs.\n#[path = \"x.rs\"]\npub mod notify;".to_string()
            )]
        );
    }

    fn at(text: &str, needle: &str) -> Range<usize> {
        let lo = text.find(needle).expect("needle");
        lo..lo + 1
    }

    #[test]
    fn an_unclosed_delimiter_is_pointed_at_not_the_end_of_the_file() {
        let text = "fn f() {\n    foo(;\n}\n\nfn g() {}\n";
        let e = delimiter_error(text).expect("an error");
        assert_eq!(e.at, at(text, "(;"));
        assert_eq!(e.label, "unclosed delimiter");
        assert_eq!(e.other.map(|o| o.0), Some(at(text, "}\n\n")));
        let text = "fn f() {\n    let s = \"({[\"; // )\n    let c = '(';\n";
        assert_eq!(delimiter_error(text).expect("an error").at, at(text, "{"));
        let text = "fn f<'a>(x: &'a str) -> char { let _ = r#\"}\"#; '}' }\n}";
        let e = delimiter_error(text).expect("an error");
        assert_eq!(e.message, "unexpected closing delimiter");
        assert_eq!(e.at, text.len() - 1..text.len());
        assert_eq!(delimiter_error("fn f() { /* ( */ }"), None);
        let text = "fn f() { \"open }\n";
        assert_eq!(delimiter_error(text).expect("an error").at, at(text, "\""));
    }

    #[test]
    fn the_items_that_parse_are_kept_and_the_broken_one_blanked() {
        let text = "//! Root.\n\nmod a;\n/// Docs.\n#[path = \"x.rs\"]\npub mod b;\n\npub fn f() {\n    foo(;\n}\n\nmod c {\n    mod d;\n}\n";
        let later = Instant::now() + std::time::Duration::from_secs(60);
        let kept = without_broken_items(text, later).expect("something kept");
        assert_eq!(kept.len(), text.len());
        assert_eq!(kept.lines().count(), text.lines().count());
        let file = syn::parse_file(&kept).expect("parses");
        assert_eq!(file.items.len(), 3, "{kept}");
        assert!(!kept.contains("foo") && kept.contains("mod d;") && kept.contains("#[path"));
        assert_eq!(without_broken_items("fn f() { foo(; }", later), None);
        let past = Instant::now() - std::time::Duration::from_millis(1);
        assert_eq!(without_broken_items(text, past), None, "past the deadline");
    }
}
