//! syn → [`super::ir`]. Runs on the thread that parsed the file (see the `ir` module docs).

use super::ir::{
    ArithOp, Arm, BinOp, Block, Expr, ExprKind, Lit, MacroCall, Pat, Path, Stmt, Type,
};
use super::nesting::{self, MAX_MODULE_NESTING, MAX_NESTING};
use super::test_attrs::TestAttrs;
use super::{byte_offsets, doc_text, expr_span, test_bodies};
use super::{
    Attr, AttrArg, ConstDef, FileId, FileModel, FnDef, GenericParam, ImplDef, Include, ItemInclude,
    ItemKind, ItemSpan, ModDecl, ModulePath, NamedItem, Param, SelfKind, Span, StructDef,
    TypeAliasDef, UseDecl, Visibility,
};
use crate::catalog::store_traits;
use std::time::Instant;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
mod exprs;
mod items;
mod macros;
mod paths;
use self::exprs::*;
pub(in crate::model) use self::items::*;
pub use self::macros::*;
use self::paths::*;

/// Expressions, types, patterns and attribute arguments nested deeper than this are folded
/// into `Other` without children, so the analyses that recurse over the model (on ordinary
/// threads with ordinary stacks) stay shallow whatever the file holds.
pub const MAX_DEPTH: usize = 256;

/// A file that does not parse: syn's message and where it points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub message: String,
    pub span: Span,
}

/// Why [`lower_file_until`] produced no model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LowerError {
    Syntax(ParseError),
    /// The deadline passed (the file ran over its time budget).
    OutOfTime,
}

/// Parses `text` and lowers it. `module` is the file's module path (`["crate", "a"]`) and
/// `in_test` whether the whole file is test-only code.
///
/// A file nested deeper than [`MAX_NESTING`] is rejected before syn sees it; what is accepted
/// still needs a large stack in syn (see [`nesting`]), so untrusted input belongs on a thread
/// with one. Must run on the thread that will drop the result's syn tree, which it does
/// internally.
pub fn lower_file(
    text: &str,
    file: FileId,
    module: Vec<String>,
    in_test: bool,
) -> Result<FileModel, ParseError> {
    lower_file_until(text, file, module, in_test, None).map_err(|e| match e {
        LowerError::Syntax(e) => e,
        LowerError::OutOfTime => ParseError {
            message: "ran out of time".to_string(),
            span: Span::new(file, 0, 0),
        },
    })
}

/// [`lower_file`] that gives up once `deadline` has passed, dropping what it built, so a file
/// over its budget does not keep its thread busy. syn's own parse cannot be interrupted, but
/// it is linear in the text once the nesting is bounded, and the deadline is checked right
/// after it and then between items and expressions.
pub fn lower_file_until(
    text: &str,
    file: FileId,
    module: Vec<String>,
    in_test: bool,
    deadline: Option<Instant>,
) -> Result<FileModel, LowerError> {
    lower_text(text, file, module, in_test, deadline, Skim::All)
}

/// What syn is spared reading: the text of line doc comments (see [`doc_text`]) and the
/// bodies of test fns (see [`test_bodies`]).
#[derive(Clone, Copy, PartialEq)]
enum Skim {
    /// Both written over; the lowering puts back the doc text, and test bodies are empty.
    All,
    /// Everything read as written, to test that skimming changes nothing.
    #[cfg(test)]
    Nothing,
    /// Only doc text written over, to test test bodies apart.
    #[cfg(test)]
    DocText,
}

impl Skim {
    fn writes_over_doc_text(self) -> bool {
        match self {
            Skim::All => true,
            #[cfg(test)]
            Skim::DocText => true,
            #[cfg(test)]
            Skim::Nothing => false,
        }
    }
}

fn lower_text(
    text: &str,
    file: FileId,
    module: Vec<String>,
    in_test: bool,
    deadline: Option<Instant>,
    skim: Skim,
) -> Result<FileModel, LowerError> {
    let offset = skipped_prefix_len(text);
    let body = &text[offset..];
    let file = Lowered {
        file,
        offset,
        text_len: text.len(),
        body,
        module,
        in_test,
        deadline,
    };
    let Skimmed {
        docs,
        parsed,
        test_bodies: bodies,
        tests,
    } = match skim_body(body, in_test, deadline, skim) {
        Ok(skimmed) => skimmed,
        Err(nesting::Rejected::OutOfTime) => return Err(LowerError::OutOfTime),
        Err(nesting::Rejected::TooDeep(deep)) => {
            let end = body[deep.offset..]
                .chars()
                .next()
                .map_or(deep.offset, |c| deep.offset + c.len_utf8());
            let message = if deep.modules {
                format!("modules nested deeper than {MAX_MODULE_NESTING} levels")
            } else {
                format!("nested deeper than {MAX_NESTING} levels")
            };
            return Err(file.syntax(message, deep.offset, end));
        }
    };
    // Read from the text before test bodies are written over: what test code names counts too.
    let names = Names {
        tests,
        store_crates: crate::catalog::store_crates::store_crates_named(&parsed.text),
        mentions: crate::catalog::store_crates::mentions_in(&parsed.text),
    };
    if bodies.is_empty() {
        return file.lower(parsed, &names);
    }
    let mut skimmed = parsed;
    skimmed.text = test_bodies::write_over(&skimmed.text, &bodies).into();
    match file.lower(skimmed, &names) {
        // Not what the scan expected: the file as written decides, errors included.
        Err(LowerError::Syntax(_)) => file.lower(doc_text::without_doc_text(body, &docs), &names),
        lowered => lowered,
    }
}

/// What syn is spared of a file's body (as `skim` says), found once the nesting check let it
/// through: the line doc comments, already written over in `parsed`, and the test fn bodies
/// of `parsed`, still to write over.
struct Skimmed<'t> {
    docs: Vec<std::ops::Range<usize>>,
    parsed: doc_text::ParsedText<'t>,
    test_bodies: Vec<std::ops::Range<usize>>,
    /// What the test attributes of `parsed` resolve to, read before anything is written over.
    tests: TestAttrs,
}

fn skim_body(
    body: &str,
    in_test: bool,
    deadline: Option<Instant>,
    skim: Skim,
) -> Result<Skimmed<'_>, nesting::Rejected> {
    let docs = nesting::check_until(body, MAX_NESTING, deadline)?;
    // Same bytes and lines as `body`, so spans are unchanged (see `doc_text`).
    let docs = if skim.writes_over_doc_text() {
        docs
    } else {
        Vec::new()
    };
    let parsed = doc_text::without_doc_text(body, &docs);
    let tests = TestAttrs::of(&parsed.text);
    let test_bodies = match skim {
        Skim::All => test_bodies::test_fn_bodies(&parsed.text, in_test, &tests),
        #[cfg(test)]
        Skim::Nothing | Skim::DocText => Vec::new(),
    };
    Ok(Skimmed {
        docs,
        parsed,
        test_bodies,
        tests,
    })
}

/// The text [`lower_file`] hands syn for `text`: without the BOM and shebang, with the doc
/// text and the test fn bodies written over; `None` where the nesting check turns the file
/// away. For the benchmark's floor (`benches/lint_vs_parse.rs`): syn alone on this text is
/// the part of the parse that no change to the lowering or the analysis can remove.
#[doc(hidden)]
pub fn syn_input(text: &str, in_test: bool) -> Option<String> {
    let body = &text[skipped_prefix_len(text)..];
    let s = skim_body(body, in_test, None, Skim::All).ok()?;
    Some(test_bodies::write_over(&s.parsed.text, &s.test_bodies))
}

/// What a file's text names, read from all of it (see [`Lowered::lower`]).
struct Names {
    tests: TestAttrs,
    store_crates: Vec<String>,
    mentions: crate::catalog::store_crates::Mentions,
}

/// A file being lowered: where it is, and what syn is handed of it.
struct Lowered<'t> {
    file: FileId,
    /// Bytes before `body` (BOM, shebang).
    offset: usize,
    text_len: usize,
    body: &'t str,
    module: Vec<String>,
    in_test: bool,
    deadline: Option<Instant>,
}

impl Lowered<'_> {
    fn syntax(&self, message: String, lo: usize, hi: usize) -> LowerError {
        LowerError::Syntax(ParseError {
            message,
            span: Span::new(
                self.file,
                (self.offset + lo) as u32,
                (self.offset + hi) as u32,
            ),
        })
    }

    /// Parses `parsed` (the body as syn reads it: doc text, and maybe test bodies, written
    /// over) and lowers it.
    fn lower(
        &self,
        parsed: doc_text::ParsedText<'_>,
        names: &Names,
    ) -> Result<FileModel, LowerError> {
        let (file, deadline, module, in_test) =
            (self.file, self.deadline, &self.module, self.in_test);
        // syn lexes the whole text before its first item: not begun past the deadline.
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(LowerError::OutOfTime);
        }
        // The spans of this file's tree are only needed until it is lowered: the thread's
        // proc_macro2 source map would otherwise keep every text it parsed (and an offset cache
        // per text) until the thread ends.
        struct ForgetSpans;
        impl Drop for ForgetSpans {
            fn drop(&mut self) {
                proc_macro2::extra::invalidate_current_thread_spans();
            }
        }
        let _forget = ForgetSpans;
        byte_offsets::with_index(&parsed.text, || {
            let mut cx = Lowerer {
                file,
                offset: self.offset as u32,
                depth: 0,
                deadline,
                countdown: 0,
                out_of_time: false,
                module: module.as_slice().into(),
                model: FileModel::default(),
                docs: &parsed,
                macro_rules: Default::default(),
                tests: &names.tests,
            };
            // `syn::parse_file` item by item, so the deadline is also checked between top-level items
            // (a generated file of many items stops on time; lexing it is linear and fast).
            let out_of_time = std::cell::Cell::new(false);
            let parse_items = |input: syn::parse::ParseStream<'_>| {
                input.call(syn::Attribute::parse_inner)?;
                let mut items = Vec::new();
                while !input.is_empty() {
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        out_of_time.set(true);
                        return Err(input.error("out of time"));
                    }
                    items.push(input.parse::<syn::Item>()?);
                }
                Ok(items)
            };
            let items = syn::parse::Parser::parse_str(parse_items, &parsed.text);
            if out_of_time.get() {
                return Err(LowerError::OutOfTime);
            }
            let items = items.map_err(|e| {
                let r = parsed.file_range(e.span().byte_range());
                // syn points an error at the end of the whole input at `Span::call_site()`, which
                // is 0..0: that is the end of the file, not its first character.
                if r == (0..0) && e.to_string().starts_with("unexpected end of input") {
                    let end = self.body.trim_end().len();
                    self.syntax(e.to_string(), end, end)
                } else {
                    self.syntax(e.to_string(), r.start, r.end)
                }
            })?;
            if cx.stop() {
                return Err(LowerError::OutOfTime);
            }
            cx.model.id = file;
            cx.model.module = module.clone();
            cx.model.in_test = in_test;
            cx.model.span = Span::new(file, 0, self.text_len as u32);
            cx.model.store_crates = names.store_crates.clone();
            cx.model.mentions = names.mentions;
            let file_module = ModulePath::clone(&cx.module);
            cx.items(&items, &file_module, &[], in_test);
            if cx.out_of_time {
                return Err(LowerError::OutOfTime);
            }
            Ok(cx.model)
        })
    }
}

/// Byte length of a BOM and shebang line, which syn strips before parsing (its spans are
/// relative to what remains). Like rustc and syn, `#!` followed by `[` (after whitespace and
/// comments) is an inner attribute, not a shebang.
fn skipped_prefix_len(text: &str) -> usize {
    let mut offset = 0;
    if text.starts_with('\u{feff}') {
        offset = '\u{feff}'.len_utf8();
    }
    let rest = &text[offset..];
    if rest.starts_with("#!") && !skip_trivia(&rest[2..]).starts_with('[') {
        offset += rest.find('\n').unwrap_or(rest.len());
    }
    offset
}

/// `s` without leading whitespace and non-doc comments (syn's rule for the shebang check).
fn skip_trivia(mut s: &str) -> &str {
    loop {
        let trimmed = s.trim_start();
        let doc = nesting::is_line_doc(trimmed.as_bytes())
            || trimmed.starts_with("/**")
                && !trimmed.starts_with("/***")
                && !trimmed.starts_with("/**/")
            || trimmed.starts_with("/*!");
        if doc {
            return trimmed;
        }
        if trimmed.starts_with("//") {
            s = trimmed.find('\n').map_or("", |i| &trimmed[i + 1..]);
        } else if trimmed.starts_with("/*") {
            let mut depth = 0usize;
            let b = trimmed.as_bytes();
            let mut i = 0;
            let mut end = None;
            while i + 1 < b.len() {
                if b[i] == b'/' && b[i + 1] == b'*' {
                    depth += 1;
                    i += 2;
                } else if b[i] == b'*' && b[i + 1] == b'/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        end = Some(i);
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            match end {
                Some(i) => s = &trimmed[i..],
                None => return trimmed,
            }
        } else {
            return trimmed;
        }
    }
}

struct Lowerer<'d> {
    file: FileId,
    offset: u32,
    depth: usize,
    deadline: Option<Instant>,
    /// Steps left before the clock is read again.
    countdown: u32,
    /// Set once the deadline passed: every lowering step returns at once from then on.
    out_of_time: bool,
    /// The file's module path (`model.module`), shared with the blocks inside expressions.
    module: ModulePath,
    model: FileModel,
    /// The doc comments syn read as bare `#[doc]`.
    docs: &'d doc_text::ParsedText<'d>,
    /// The `macro_rules!` seen so far, by name: their rules' tokens.
    macro_rules: std::collections::HashMap<String, proc_macro2::TokenStream>,
    /// What the file's test attributes resolve to.
    tests: &'d TestAttrs,
}

/// Context an item is lowered in.
#[derive(Clone, Copy)]
struct ImplCx<'a> {
    self_ty: Option<&'a Type>,
    trait_path: Option<&'a Path>,
    /// The impl's or trait's type parameters.
    generics: &'a [GenericParam],
}

const NO_IMPL: ImplCx<'static> = ImplCx {
    self_ty: None,
    trait_path: None,
    generics: &[],
};

impl Lowerer<'_> {
    /// Whether the deadline has passed. Called once per item and expression; the clock is
    /// read every 256 calls, a few microseconds of work apart.
    fn stop(&mut self) -> bool {
        let Some(deadline) = self.deadline else {
            return false;
        };
        if self.out_of_time {
            return true;
        }
        if self.countdown == 0 {
            self.countdown = 256;
            self.out_of_time = Instant::now() >= deadline;
        }
        self.countdown -= 1;
        self.out_of_time
    }

    fn span(&self, s: proc_macro2::Span) -> Span {
        let r = byte_offsets::range(s);
        Span::new(
            self.file,
            r.start as u32 + self.offset,
            r.end as u32 + self.offset,
        )
    }

    fn span_of<T: Spanned>(&self, node: &T) -> Span {
        self.span(node.span())
    }

    /// The span of a path, as [`Lowerer::span_of`] gives it, without printing it where
    /// [`super::expr_span::path_bounds`] knows its shape.
    fn path_span(&self, p: &syn::Path) -> Span {
        match expr_span::path_bounds(p) {
            Some(r) => self.range(r),
            None => self.span_of(p),
        }
    }

    /// A span from byte offsets in the parsed text.
    fn range(&self, (lo, hi): (usize, usize)) -> Span {
        Span::new(self.file, lo as u32 + self.offset, hi as u32 + self.offset)
    }

    /// The span of an item. syn's `span()` re-tokenizes the whole item, so nested modules
    /// cost the square of their depth; a module's span is read off its first and last tokens.
    fn item_span(&self, item: &syn::Item) -> Span {
        let m = match item {
            syn::Item::Mod(m) => m,
            syn::Item::Fn(f) => {
                return self.range(expr_span::fn_bounds(
                    &f.attrs, &f.vis, None, &f.sig, &f.block,
                ))
            }
            syn::Item::Impl(i) => return self.range(expr_span::impl_bounds(i)),
            _ => {
                return match expr_span::item_bounds(item) {
                    Some(r) => self.range(r),
                    None => self.span_of(item),
                }
            }
        };
        let first = match (m.attrs.first(), &m.vis) {
            (Some(a), _) => a.pound_token.span,
            (None, syn::Visibility::Public(p)) => p.span,
            (None, syn::Visibility::Restricted(r)) => r.pub_token.span,
            (None, syn::Visibility::Inherited) => match m.unsafety {
                Some(u) => u.span,
                None => m.mod_token.span,
            },
        };
        let last = match (&m.content, &m.semi) {
            (Some((brace, _)), _) => brace.span.close(),
            (None, Some(semi)) => semi.span,
            (None, None) => m.ident.span(),
        };
        self.span(first).to(self.span(last))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_under_a_cfg_that_holds_only_in_tests_is_test_code() {
        let cfg = |p: &str| -> bool {
            let attr: syn::Attribute = syn::parse_quote!(#[cfg(DUMMY)]);
            let text = quote::quote!(#attr).to_string().replace("DUMMY", p);
            let file: syn::File = syn::parse_str(&format!("{text} fn f() {{}}")).expect("parses");
            let syn::Item::Fn(f) = &file.items[0] else {
                panic!("a fn")
            };
            is_cfg_test_attr(&f.attrs[0])
        };
        assert!(cfg("test"));
        assert!(cfg("all(test, feature = \"postgres\")"));
        assert!(cfg("all(unix, all(test, debug_assertions))"));
        assert!(cfg("any(test, all(test, unix))"));
        assert!(!cfg("not(test)"));
        assert!(!cfg("any(test, feature = \"mock\")"));
        assert!(!cfg("feature = \"test\""));
        assert!(!cfg("all(unix, not(test))"));
    }

    fn lower(src: &str) -> FileModel {
        lower_file(src, FileId(0), vec!["crate".into()], false).expect("parses")
    }

    #[test]
    fn test_fns_keep_their_signature_and_an_empty_body() {
        let src = "fn work(id: u64) { send(id); }\n\
                   #[tokio::test] async fn sends() { work(1); }\n\
                   #[cfg(test)] mod tests { impl Fake { fn send(&self, id: u64) { log(id); } } }\n";
        let m = lower(src);
        let body_len = |name: &str| {
            let f = m.fns.iter().find(|f| f.name == name).expect("the fn");
            (f.in_test, f.body.as_ref().map(|b| b.stmts.len()))
        };
        assert_eq!(body_len("work"), (false, Some(1)));
        assert_eq!(body_len("sends"), (true, Some(0)));
        let send = m.fns.iter().find(|f| f.name == "send").expect("the method");
        assert_eq!((send.in_test, send.params.len()), (true, 1));
        assert_eq!(send.body.as_ref().map(|b| b.stmts.len()), Some(0));
        // The body's span is still the braces, so a span that points into it is inside the fn.
        let body = send.body.as_ref().expect("a body");
        assert_eq!(
            &src[body.span.lo as usize..body.span.hi as usize],
            "{ log(id); }"
        );
    }

    #[test]
    fn spans_are_byte_offsets_after_bom_and_shebang() {
        let src = "\u{feff}#!/usr/bin/env run\nfn é() {}\nfn main() {}\n";
        let m = lower(src);
        let main = m.fns.iter().find(|f| f.name == "main").unwrap();
        let s = main.name_span;
        assert_eq!(&src[s.lo as usize..s.hi as usize], "main");
    }

    #[test]
    fn tracing_adapters_are_awaited_through() {
        let m = lower(
            "async fn f(c: C, s: Span) { c.send().instrument(s).await; \
             c.go().in_current_span().await; c.instrument().await; }",
        );
        let mut awaited = Vec::new();
        let body = m.fns[0].body.as_ref().expect("a body");
        body.walk(&mut |e| {
            if let ExprKind::Await(inner) = &e.kind {
                awaited.extend(inner.method_chain().first().map(|m| m.to_string()));
            }
        });
        assert_eq!(awaited, ["send", "go", "instrument"]);
    }

    #[test]
    fn parse_error_points_at_the_error() {
        let src = "fn main() {\n    let x = ;\n}\n";
        let err = lower_file(src, FileId(0), vec![], false).unwrap_err();
        assert_eq!(&src[err.span.lo as usize..err.span.hi as usize], ";");
    }

    #[test]
    fn use_trees_are_flattened_with_renames_and_globs() {
        let m = lower("use uuid::{Uuid as Id, self}; use chrono::prelude::*;");
        let got: Vec<_> = m
            .uses
            .iter()
            .map(|u| (u.path.join("::"), u.alias.as_str(), u.glob))
            .collect();
        assert_eq!(
            got,
            vec![
                ("uuid::Uuid".to_string(), "Id", false),
                ("uuid".to_string(), "uuid", false),
                ("chrono::prelude".to_string(), "", true),
            ]
        );
    }

    #[test]
    fn format_macros_capture_inline_names() {
        assert_eq!(
            inline_captures("{a}-{b:?}-{}-{0}-{{c}}-{a}"),
            vec!["a", "b"]
        );
        let m = lower("fn f(id: u64) { let k = format!(\"order-{id}\"); }");
        let body = m.fns[0].body.as_ref().unwrap();
        let Stmt::Let {
            init: Some(init), ..
        } = &body.stmts[0]
        else {
            panic!()
        };
        let ExprKind::Macro(call) = &init.kind else {
            panic!()
        };
        assert!(call
            .args
            .iter()
            .any(|a| a.as_path().and_then(Path::as_ident) == Some("id")));
    }

    #[test]
    fn methods_know_their_self_type_and_modules_their_path() {
        let m =
            lower("mod a { #[path = \"x.rs\"] mod b; struct S; impl S { pub fn go(&self) {} } }");
        let go = m.fns.iter().find(|f| f.name == "go").unwrap();
        assert_eq!(go.module[..], ["crate", "a"]);
        assert_eq!(go.self_kind, SelfKind::Ref);
        assert_eq!(go.display_name(), "S::go");
        let b = m.mods.iter().find(|d| d.name == "b").unwrap();
        assert_eq!(
            (b.path_attr.as_deref(), b.inline_parents.as_slice()),
            (Some("x.rs"), &["a".to_string()][..])
        );
    }

    #[test]
    fn cfg_attr_paths_of_modules_are_kept() {
        let m = lower(
            "#[cfg_attr(unix, path = \"u.rs\")] #[cfg_attr(windows, path = \"w.rs\")] mod imp;",
        );
        assert_eq!(m.mods[0].cfg_path_attrs, vec!["u.rs", "w.rs"]);
        assert_eq!(m.mods[0].path_attr, None);
    }

    #[test]
    fn modules_in_item_macros_that_are_not_items_are_declared() {
        let m = lower(
            "cfg_if::cfg_if! { if #[cfg(unix)] { #[path = \"sys/unix.rs\"] pub(crate) mod unix; } \
             else { mod windows; } }\n\
             feature! { #![net] #[cfg(test)] mod net_tests; mod inline { mod nested; } }\n\
             macro_rules! m { () => { mod generated; } }",
        );
        let decls: Vec<(&str, bool, Option<&str>, bool)> = m
            .mods
            .iter()
            .map(|d| {
                (
                    d.name.as_str(),
                    d.inline,
                    d.path_attr.as_deref(),
                    d.cfg_test,
                )
            })
            .collect();
        assert_eq!(
            decls,
            [
                ("unix", false, Some("sys/unix.rs"), false),
                ("windows", false, None, false),
                ("net_tests", false, None, true),
                ("inline", true, None, false),
                ("nested", false, None, false),
            ]
        );
        let nested = &m.mods[4];
        assert_eq!(nested.module[..], ["crate", "inline", "nested"]);
        assert_eq!(nested.inline_parents, ["inline"]);
    }

    #[test]
    fn items_wrapped_in_item_macros_are_lowered() {
        let m = lower("cfg_rt! { mod runtime; pub fn spawn() {} } macro_rules! m { () => {} }");
        assert!(m.mods.iter().any(|d| d.name == "runtime"));
        assert!(m.fns.iter().any(|f| f.name == "spawn"));
    }

    /// What the bench's floor hands syn: the lowering's input, doc text and test bodies
    /// written over in place (same length, same lines), the code as written.
    #[test]
    fn syn_input_writes_over_doc_text_and_test_bodies_only() {
        let text = "#!/usr/bin/env run\n/// Says hi.\nfn f() { hi(); }\n#[test]\nfn t() {\n    slow();\n}\n";
        let input = syn_input(text, false).expect("not too deep");
        let body = &text[text.find('\n').unwrap()..];
        assert_eq!(input.len(), body.len());
        assert_eq!(input.lines().count(), body.lines().count());
        assert!(input.contains("fn f() { hi(); }") && input.contains("fn t() {"));
        assert!(!input.contains("Says hi") && !input.contains("slow"));
        syn::parse_file(&input).expect("still parses");
        let deep = format!("fn f() {{ {}{} }}", "(".repeat(2000), ")".repeat(2000));
        assert_eq!(
            syn_input(&deep, false),
            None,
            "turned away like the lowering"
        );
    }

    /// Lowering with the doc text written over gives the very model (spans and doc values
    /// included) and the very errors that reading it gives.
    #[test]
    fn skipping_doc_text_changes_no_model_and_no_error() {
        let texts = [
            "//! The crate.\n//! More.\n\n/// Says hi.\n/// Twice é.\npub fn f(\n    /// a param\n    x: u8,\n) {\n    /// a statement\n    let y = x;\n    match y {\n        /// an arm\n        _ => {}\n    }\n}\n",
            "/// CRLF\r\nfn f() {}\r\nmod m {\r\n    //! inner\r\n    /// item\r\n    pub struct S {\r\n        /// field\r\n        pub a: u8,\r\n    }\r\n}\r\n",
            "cfg_rt! {\n    /// in an item macro\n    pub fn spawn() {}\n}\nmacro_rules! m {\n    () => {\n        /// in a macro body\n        fn g() {}\n    };\n}\n",
            "#[doc = \"written\"]\n/// and a comment \"quoted\" \\ back\nfn f() { let s = \"/// not a comment\"; }\n",
            "/// one\rbare CR\nfn f() {}\n",
            "/// Documented.\npub fn f() {}\n//! misplaced inner doc\nfn g() {}\n",
            "fn f() {\n    let x = 1;\n    /// documents nothing\n}\n",
            "struct S {\n    /// a field\n    a: u8,\n    /// dangling\n}\n",
            "fn f() {}\n/// at the end of the file\n",
            "fn f() {}\n/// at the end of a CRLF file\r\n",
            "impl S {\n    /// documents nothing, then a stray token\n    )\n}\n",
            "/// A run\n///\n/// of lines.\n#[inline]\n/// Then one more.\n///\n\t/// And é.\npub fn f() {}\n",
            "//! Inner\n//! run.\n/// Outer right after.\n/// Run.\nfn f() {\n    //! inner in a body\n    //! twice\n}\n",
            "/// CRLF\r\n/// run\r\n///\r\nfn f() {}\r\n",
            "///\n/// Short first line.\nfn f() {}\n/// one\rbare CR\n/// after it\nfn g() {}\n",
            "fn f() {\n    let x = 1;\n    /// a dangling\n    /// run\n}\n",
            "fn f() {}\n//! a misplaced\n//! inner run\nfn g() {}\n",
        ];
        let lower_with = |text: &str, doc_text| {
            let module = vec!["crate".to_owned()];
            format!(
                "{:?}",
                lower_text(text, FileId(0), module, false, None, doc_text)
            )
        };
        for text in texts {
            assert_eq!(
                lower_with(text, Skim::DocText),
                lower_with(text, Skim::Nothing),
                "{text:?}"
            );
        }
    }

    /// Lowering with test bodies written over gives the very model that reading them gives,
    /// and the same errors, except one inside a test body (which is no longer read).
    fn assert_test_bodies_change_nothing(text: &str, what: &dyn std::fmt::Display) {
        for in_test in [false, true] {
            let module = || vec!["crate".to_owned()];
            let skimmed = lower_text(text, FileId(0), module(), in_test, None, Skim::All);
            let read = lower_text(text, FileId(0), module(), in_test, None, Skim::DocText);
            if let (Ok(_), Err(LowerError::Syntax(e))) = (&skimmed, &read) {
                let bodies = test_bodies::test_fn_bodies(text, in_test, &TestAttrs::of(text));
                let at = e.span.lo as usize;
                assert!(
                    bodies.iter().any(|b| b.contains(&at)),
                    "{what} (in_test {in_test}): {e:?} is outside the test bodies {bodies:?}"
                );
                continue;
            }
            assert_eq!(
                format!("{skimmed:?}"),
                format!("{read:?}"),
                "{what} (in_test {in_test})"
            );
        }
    }

    #[test]
    fn writing_over_test_bodies_changes_no_model() {
        let texts = [
            "#[test]\nfn t() {\n    let s = \"}\"; é();\n}\nfn code() { db.insert(1).await; }\n",
            "#[cfg(test)]\nmod tests {\n    use super::*;\n    #[tokio::test]\n    async fn t() { x().await }\n    fn helper() -> u8 { 1 }\n    impl S { fn f(&self) { g() } }\n    trait T { fn p() { q() } }\n}\n",
            "fn code() {\n    #[test]\n    fn nested() { n() }\n    if x { #[test] fn deeper() { d() } }\n}\n",
            "#[cfg(test)]\nconst C: &str = { fn in_const() {} \"x\" };\nmacro_rules! m { () => { #[test] fn made() { q() } } }\n",
            "cfg_if::cfg_if! { if #[cfg(test)] { mod t { fn t() { include_str!(\"x\"); } } } }\n",
            "#[test]\nfn broken() { let = ; }\nfn code() {}\n",
            "#[test]\nfn unclosed() { \"\n",
            "#[cfg(test)] impl<const N: usize> S<{ N }> { fn f() { g() } }\n",
            "#[test] #[should_panic(expected = \"}\")] pub(crate) async unsafe fn t() { /* } */ }\n",
            "/// Doc.\n#[test]\n/// More.\nfn t() {\n    /// inside\n    let x = 1;\n}\n",
            "#[test]\nfn t() {\n    //! Inner doc.\n    #![allow(unused)]\n    let x = 1;\n}\n",
        ];
        for text in texts {
            assert_test_bodies_change_nothing(text, &format_args!("{text:?}"));
        }
    }

    /// The repository's Rust files that hold test code, and with `TEST_BODIES_DIRS` set
    /// (`:`-separated) every `.rs` file under those directories too (a wider run by hand, e.g.
    /// over `~/.cargo/registry/src`).
    #[test]
    fn writing_over_test_bodies_changes_no_model_on_real_files() {
        use super::nesting::tests::rust_files;
        let mut files = Vec::new();
        rust_files(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".."),
            &mut files,
        );
        files.retain(|f| std::fs::read_to_string(f).is_ok_and(|t| t.contains("#[test]")));
        assert!(files.len() > 50, "{} files", files.len());
        if let Some(dirs) = std::env::var_os("TEST_BODIES_DIRS") {
            for dir in std::env::split_paths(&dirs) {
                rust_files(&dir, &mut files);
            }
        }
        for path in files {
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            assert_test_bodies_change_nothing(&text, &path.display());
        }
    }

    #[test]
    fn doc_comments_and_written_doc_attributes_keep_their_spans() {
        let src = "/// Says hi.\n#[doc = \"more\"]\nfn f() {}\n";
        let m = lower(src);
        let text = |s: Span| &src[s.lo as usize..s.hi as usize];
        let attrs = &m.fns[0].attrs;
        // The comment: every part is the comment.
        assert_eq!(text(attrs[0].span), "/// Says hi.");
        assert_eq!(text(attrs[0].path.span), "/// Says hi.");
        let value = attrs[0].value.as_ref().unwrap();
        assert_eq!(
            (text(value.span), value.as_str_lit()),
            ("/// Says hi.", Some(" Says hi."))
        );
        // Written out: each part its own.
        assert_eq!(text(attrs[1].span), "#[doc = \"more\"]");
        assert_eq!(text(attrs[1].path.span), "doc");
        let value = attrs[1].value.as_ref().unwrap();
        assert_eq!(
            (text(value.span), value.as_str_lit()),
            ("\"more\"", Some("more"))
        );
    }

    #[test]
    fn string_values_are_unescaped() {
        let m = lower("const A: &str = \"a\\tb\\\"c\"; const B: &str = \"line\r\nnext\"; const C: &str = r#\"r\"aw\"#;");
        let values: Vec<_> = m
            .consts
            .iter()
            .map(|c| c.value.as_str_lit().unwrap())
            .collect();
        assert_eq!(values, ["a\tb\"c", "line\nnext", "r\"aw"]);
    }

    #[test]
    fn deep_nesting_is_bounded() {
        let depth = MAX_DEPTH * 2;
        let src = format!(
            "fn f() {{ let x = {}1{}; }}",
            "(".repeat(depth),
            ")".repeat(depth)
        );
        let handle = std::thread::Builder::new()
            .stack_size(256 << 20)
            .spawn(move || lower_file(&src, FileId(0), vec![], false).is_ok())
            .unwrap();
        assert!(handle.join().unwrap());
    }
}
