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

    fn items(
        &mut self,
        items: &[syn::Item],
        module: &ModulePath,
        inline: &[String],
        in_test: bool,
    ) {
        for item in items {
            self.item(item, module, inline, in_test, false);
        }
    }

    fn item(
        &mut self,
        item: &syn::Item,
        module: &ModulePath,
        inline: &[String],
        in_test: bool,
        nested: bool,
    ) {
        if self.stop() {
            return;
        }
        let span = self.item_span(item);
        let kind = match item {
            syn::Item::Fn(f) => {
                let test = in_test || is_test_fn(&f.attrs, self.tests);
                let def = self.fn_def(
                    &f.attrs,
                    &f.vis,
                    &f.sig,
                    Some(&f.block),
                    module,
                    NO_IMPL,
                    test,
                    nested,
                    span,
                );
                self.model.fns.push(def);
                ItemKind::Fn
            }
            syn::Item::Impl(imp) => {
                // `#[cfg(test)] impl Store for MemStore`: its methods are test code.
                self.impl_block(imp, module, in_test || is_cfg_test(&imp.attrs), span);
                ItemKind::Impl
            }
            syn::Item::Trait(t) => {
                self.named(module, &t.ident, &t.vis, ItemKind::Trait);
                let self_ty = Type::Path {
                    path: self.ident_path(&t.ident),
                    args: vec![],
                };
                let trait_path = self.ident_path(&t.ident);
                let generics = self.generics(&t.generics);
                let cx = ImplCx {
                    self_ty: Some(&self_ty),
                    trait_path: Some(&trait_path),
                    generics: &generics,
                };
                for ti in &t.items {
                    if let syn::TraitItem::Fn(m) = ti {
                        let s = self.span_of(m);
                        let def = self.fn_def(
                            &m.attrs,
                            &syn::Visibility::Inherited,
                            &m.sig,
                            m.default.as_ref(),
                            module,
                            cx,
                            in_test,
                            nested,
                            s,
                        );
                        self.model.fns.push(FnDef {
                            vis: visibility(&t.vis),
                            ..def
                        });
                        self.model.items.push(ItemSpan {
                            kind: ItemKind::Fn,
                            span: s,
                        });
                    }
                }
                ItemKind::Trait
            }
            syn::Item::Mod(m) => {
                self.mod_item(m, module, inline, in_test, span);
                ItemKind::Mod
            }
            syn::Item::Use(u) => {
                let mut prefix = Vec::new();
                let is_pub = visibility(&u.vis) == Visibility::Public;
                self.use_tree(&u.tree, &mut prefix, module, is_pub, span);
                ItemKind::Other
            }
            syn::Item::Struct(s) => {
                let fields = s
                    .fields
                    .iter()
                    .enumerate()
                    .map(|(i, f)| {
                        let name = f
                            .ident
                            .as_ref()
                            .map_or_else(|| i.to_string(), |id| id.to_string());
                        (name, self.ty(&f.ty))
                    })
                    .collect();
                self.model.structs.push(StructDef {
                    name: s.ident.to_string(),
                    module: module.clone(),
                    vis: visibility(&s.vis),
                    fields,
                    span,
                });
                ItemKind::Struct
            }
            syn::Item::Enum(e) => {
                self.named(module, &e.ident, &e.vis, ItemKind::Enum);
                ItemKind::Enum
            }
            syn::Item::Const(c) => {
                self.named(module, &c.ident, &c.vis, ItemKind::Const);
                self.const_def(module, &c.ident, &c.ty, &c.expr);
                // `const _: () = { mod imp; impl Trait for T {..} };`: items in the block are
                // compiled like any other (the impls apply crate-wide).
                if let syn::Expr::Block(b) = &*c.expr {
                    self.block_items(&b.block, module, inline, in_test);
                }
                ItemKind::Const
            }
            syn::Item::Static(st) => {
                self.named(module, &st.ident, &st.vis, ItemKind::Const);
                self.const_def(module, &st.ident, &st.ty, &st.expr);
                let ty = self.ty(&st.ty);
                self.model.statics.push(TypeAliasDef {
                    name: unraw(&st.ident),
                    module: module.clone(),
                    ty,
                });
                ItemKind::Const
            }
            syn::Item::Type(t) => {
                self.named(module, &t.ident, &t.vis, ItemKind::Other);
                let ty = self.ty(&t.ty);
                self.model.type_aliases.push(TypeAliasDef {
                    name: unraw(&t.ident),
                    module: module.clone(),
                    ty,
                });
                ItemKind::Other
            }
            syn::Item::Union(u) => {
                self.named(module, &u.ident, &u.vis, ItemKind::Other);
                ItemKind::Other
            }
            syn::Item::Macro(m) => {
                // `include!("real.rs")`: rustc reads the file's items here; the driver loads it.
                if let Some(path) = item_include(&m.mac) {
                    self.model.item_includes.push(ItemInclude {
                        path,
                        module: module.clone(),
                        in_test,
                        span,
                    });
                }
                // A `macro_rules!` is remembered, and the `mod`s of its rules are declared where
                // it is called (`m!();`), as rustc's expansion declares them.
                if m.mac.path.is_ident("macro_rules") {
                    if let Some(name) = &m.ident {
                        self.macro_rules.insert(unraw(name), m.mac.tokens.clone());
                    }
                } else if let Some(rules) = m
                    .mac
                    .path
                    .get_ident()
                    .and_then(|id| self.macro_rules.get(&unraw(id)))
                {
                    let rules = rules.clone();
                    self.macro_mods(rules, module, inline, in_test);
                }
                // `cfg_rt! { mod runtime; pub fn spawn(..) {..} }`: item macros that wrap items
                // (tokio, hyper, cfg-if-free crates) hide modules and fns unless we look inside.
                if let Some(items) = macro_items(&m.mac) {
                    self.items(&items, module, inline, in_test);
                } else if !m.mac.path.is_ident("macro_rules") {
                    // `cfg_if! { if #[cfg(unix)] { mod unix; } .. }`, `cfg_select!`,
                    // `feature! { #![unix] mod x; }`: not items, but their `mod`s are the
                    // crate's modules all the same.
                    self.macro_mods(m.mac.tokens.clone(), module, inline, in_test);
                }
                ItemKind::Other
            }
            _ => ItemKind::Other,
        };
        if !nested {
            self.model.items.push(ItemSpan { kind, span });
        }
    }

    /// The items of a block that is no fn's body (a `const` initializer), lowered as items
    /// of `module`, item macros among them.
    fn block_items(
        &mut self,
        block: &syn::Block,
        module: &ModulePath,
        inline: &[String],
        in_test: bool,
    ) {
        for stmt in &block.stmts {
            match stmt {
                syn::Stmt::Item(item) => self.item(item, module, inline, in_test, true),
                syn::Stmt::Macro(m) => {
                    let item = syn::Item::Macro(syn::ItemMacro {
                        attrs: m.attrs.clone(),
                        ident: None,
                        mac: m.mac.clone(),
                        semi_token: m.semi_token,
                    });
                    self.item(&item, module, inline, in_test, true);
                }
                _ => {}
            }
        }
    }

    /// Keeps the initializer of a `&str` constant, of a struct literal whose fields may
    /// hold text (a table of queries), of an integer or `Duration` constant (a TTL, a
    /// visibility timeout), or of an array of them (a retry schedule); other constants are
    /// never read.
    fn const_def(
        &mut self,
        module: &ModulePath,
        ident: &syn::Ident,
        ty: &syn::Type,
        init: &syn::Expr,
    ) {
        let is_str = matches!(ty, syn::Type::Reference(r)
            if matches!(&*r.elem, syn::Type::Path(p) if p.path.is_ident("str")));
        // A table of numbers or durations (`[u64; 5]`, `&[Duration]`): a retry schedule.
        let numbers = match ty {
            syn::Type::Array(a) => is_number_or_duration(&a.elem),
            syn::Type::Reference(r) => {
                matches!(&*r.elem, syn::Type::Slice(s) if is_number_or_duration(&s.elem))
            }
            _ => false,
        };
        if !is_str
            && !matches!(init, syn::Expr::Struct(_))
            && !is_number_or_duration(ty)
            && !numbers
        {
            return;
        }
        let value = self.expr(init);
        self.model.consts.push(ConstDef {
            module: module.clone(),
            name: unraw(ident),
            value,
        });
    }

    fn named(
        &mut self,
        module: &ModulePath,
        ident: &syn::Ident,
        vis: &syn::Visibility,
        kind: ItemKind,
    ) {
        self.model.decls.push(NamedItem {
            module: module.clone(),
            name: unraw(ident),
            kind,
            vis: visibility(vis),
        });
    }

    fn impl_block(&mut self, imp: &syn::ItemImpl, module: &ModulePath, in_test: bool, _span: Span) {
        let self_ty = self.ty(&imp.self_ty);
        let trait_path = imp.trait_.as_ref().map(|(p, _)| self.path(p));
        let generics = self.generics(&imp.generics);
        let cx = ImplCx {
            self_ty: Some(&self_ty),
            trait_path: trait_path.as_ref(),
            generics: &generics,
        };
        let mut impl_attrs = Vec::new();
        for a in &imp.attrs {
            self.attrs_of(a, &mut impl_attrs);
        }
        let mut methods = Vec::new();
        for ii in &imp.items {
            if let syn::ImplItem::Fn(m) = ii {
                let defaultness = m.modifiers.defaultness.as_ref();
                let s = self.range(expr_span::fn_bounds(
                    &m.attrs,
                    &m.vis,
                    defaultness,
                    &m.sig,
                    &m.block,
                ));
                let test = in_test || is_test_fn(&m.attrs, self.tests);
                let mut def = self.fn_def(
                    &m.attrs,
                    &m.vis,
                    &m.sig,
                    Some(&m.block),
                    module,
                    cx,
                    test,
                    false,
                    s,
                );
                def.impl_attrs = impl_attrs.clone();
                // Trait impl methods are as visible as the trait.
                if trait_path.is_some() {
                    def.vis = Visibility::Public;
                }
                methods.push(def.name.clone());
                self.model.fns.push(def);
                self.model.items.push(ItemSpan {
                    kind: ItemKind::Fn,
                    span: s,
                });
            }
        }
        self.model.impls.push(ImplDef {
            module: module.clone(),
            self_ty: self_ty.clone(),
            trait_path: trait_path.clone(),
            methods,
            span: _span,
        });
    }

    fn mod_item(
        &mut self,
        m: &syn::ItemMod,
        module: &ModulePath,
        inline: &[String],
        in_test: bool,
        span: Span,
    ) {
        let name = unraw(&m.ident);
        let child: ModulePath = module.iter().cloned().chain([name.clone()]).collect();
        let cfg_test = is_cfg_test(&m.attrs);
        let path_attr = m.attrs.iter().find_map(|a| match &a.meta {
            syn::Meta::NameValue(nv) if a.path().is_ident("path") => str_lit(&nv.value),
            _ => None,
        });
        let cfg_path_attrs = m.attrs.iter().filter_map(cfg_attr_path).collect();
        self.model.mods.push(ModDecl {
            name: name.clone(),
            module: child.clone(),
            inline: m.content.is_some(),
            path_attr,
            cfg_path_attrs,
            inline_parents: inline.to_vec(),
            cfg_test,
            is_pub: visibility(&m.vis) == Visibility::Public,
            span,
        });
        if let Some((_, items)) = &m.content {
            let mut inner_inline = inline.to_vec();
            inner_inline.push(name);
            self.items(items, &child, &inner_inline, in_test || cfg_test);
        }
    }

    /// The `mod` items anywhere in the tokens of an item macro whose input is not a list of
    /// items, with the attributes and visibility written before them.
    fn macro_mods(
        &mut self,
        tokens: proc_macro2::TokenStream,
        module: &ModulePath,
        inline: &[String],
        in_test: bool,
    ) {
        use proc_macro2::{Delimiter, TokenTree};
        let tts: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < tts.len() {
            match &tts[i] {
                TokenTree::Ident(kw) if kw == "mod" => {
                    let end = match (tts.get(i + 1), tts.get(i + 2)) {
                        (Some(TokenTree::Ident(_)), Some(TokenTree::Punct(p)))
                            if p.as_char() == ';' =>
                        {
                            Some(i + 3)
                        }
                        (Some(TokenTree::Ident(_)), Some(TokenTree::Group(g)))
                            if g.delimiter() == Delimiter::Brace =>
                        {
                            Some(i + 3)
                        }
                        _ => None,
                    };
                    if let Some(end) = end {
                        let start = item_prefix_start(&tts, i);
                        let item: proc_macro2::TokenStream =
                            tts[start..end].iter().cloned().collect();
                        if let Ok(m) = syn::parse2::<syn::ItemMod>(item) {
                            let span = self.span_of(&m);
                            self.mod_item(&m, module, inline, in_test, span);
                        }
                        i = end;
                        continue;
                    }
                }
                TokenTree::Group(g) => self.macro_mods(g.stream(), module, inline, in_test),
                _ => {}
            }
            i += 1;
        }
    }

    fn use_tree(
        &mut self,
        tree: &syn::UseTree,
        prefix: &mut Vec<String>,
        module: &ModulePath,
        is_pub: bool,
        span: Span,
    ) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(unraw(&p.ident));
                self.use_tree(&p.tree, prefix, module, is_pub, span);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let name = unraw(&n.ident);
                // `use a::b::{self}` brings `b` itself.
                let (path, alias) = if name == "self" {
                    (prefix.clone(), prefix.last().cloned().unwrap_or_default())
                } else {
                    (with_last(prefix, name.clone()), name)
                };
                self.model.uses.push(UseDecl {
                    module: module.clone(),
                    path,
                    alias,
                    glob: false,
                    is_pub,
                    span,
                });
            }
            syn::UseTree::Rename(r) => {
                let alias = unraw(&r.rename);
                if alias != "_" {
                    let name = unraw(&r.ident);
                    let path = if name == "self" {
                        prefix.clone()
                    } else {
                        with_last(prefix, name)
                    };
                    self.model.uses.push(UseDecl {
                        module: module.clone(),
                        path,
                        alias,
                        glob: false,
                        is_pub,
                        span,
                    });
                }
            }
            syn::UseTree::Glob(_) => {
                self.model.uses.push(UseDecl {
                    module: module.clone(),
                    path: prefix.clone(),
                    alias: String::new(),
                    glob: true,
                    is_pub,
                    span,
                });
            }
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(t, prefix, module, is_pub, span);
                }
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn fn_def(
        &mut self,
        attrs: &[syn::Attribute],
        vis: &syn::Visibility,
        sig: &syn::Signature,
        block: Option<&syn::Block>,
        module: &ModulePath,
        cx: ImplCx<'_>,
        in_test: bool,
        nested: bool,
        span: Span,
    ) -> FnDef {
        let mut self_kind = SelfKind::None;
        let mut params = Vec::new();
        for input in &sig.inputs {
            match input {
                syn::FnArg::Receiver(r) => {
                    self_kind = match &r.kind {
                        syn::ReceiverKind::Reference(_, _, Some(_)) => SelfKind::RefMut,
                        syn::ReceiverKind::Reference(_, _, None) => SelfKind::Ref,
                        _ => SelfKind::Value,
                    };
                }
                syn::FnArg::Typed(pt) => params.push(Param {
                    pat: self.pat(&pt.pat),
                    ty: self.ty(&pt.ty),
                    span: self.span_of(pt),
                }),
            }
        }
        // No lint reports in test code, and no code outside it can call into it (test
        // doubles are left out of dispatch), so a test fn keeps its signature and an empty
        // body: lowering and analysing test bodies was most of the cost on crates whose
        // tests outweigh their code.
        let body = block.map(|b| {
            if in_test {
                Block {
                    stmts: Vec::new(),
                    span: self.span(b.brace_token.span.join()),
                }
            } else {
                self.block(b, module, in_test)
            }
        });
        let own = self.generics(&sig.generics);
        let mut generics = Vec::with_capacity(cx.generics.len() + own.len());
        generics.extend_from_slice(cx.generics);
        generics.extend(own);
        FnDef {
            name: unraw(&sig.ident),
            name_span: self.range(expr_span::ident_bounds(&sig.ident)),
            module: module.clone(),
            self_ty: cx.self_ty.cloned(),
            trait_path: cx.trait_path.cloned(),
            self_kind,
            params,
            ret: match &sig.output {
                syn::ReturnType::Default => None,
                syn::ReturnType::Type(_, t) => Some(self.ty(t)),
            },
            is_async: sig.asyncness.is_some(),
            vis: visibility(vis),
            generics,
            attrs: {
                let mut out = Vec::with_capacity(attrs.len());
                for a in attrs {
                    self.attrs_of(a, &mut out);
                }
                out
            },
            impl_attrs: Vec::new(),
            body,
            span,
            in_test,
            nested,
        }
    }

    /// Pushes `a`, or the doc comments syn read as `a` (see [`doc_text`]), onto `out`.
    fn attrs_of(&mut self, a: &syn::Attribute, out: &mut Vec<Attr>) {
        let bounds = expr_span::attr_bounds(a);
        match self.docs.docs_at(bounds.0) {
            Some(docs) => out.extend(docs.iter().map(|d| self.doc_comment(d))),
            None => out.push(self.attr(a, bounds)),
        }
    }

    /// A doc comment, as syn's `#[doc = ".."]` of it lowers: every part spans the comment.
    fn doc_comment(&self, doc: &doc_text::DocComment) -> Attr {
        let span = self.range((doc.range.start, doc.range.end));
        let kind = if self.depth >= MAX_DEPTH {
            ExprKind::Other(vec![])
        } else {
            ExprKind::Lit(Lit::Str(doc.value.clone()))
        };
        Attr {
            path: Path {
                segments: vec!["doc".to_owned()],
                leading_colon: false,
                span,
                qself: None,
            },
            args: vec![],
            value: Some(Expr { kind, span }),
            span,
        }
    }

    /// `a`, which spans `lo..hi` ([`expr_span::attr_bounds`]).
    fn attr(&mut self, a: &syn::Attribute, (lo, hi): (usize, usize)) -> Attr {
        let span = self.range((lo, hi));
        // A doc comment is lexed as `#[doc = "..."]` whose every token has the comment's
        // span: its name starting where `#` does says so (written out, `doc` comes after `#[`),
        // and then the name's and the text's spans are the attribute's, not looked up again.
        let doc = a
            .path()
            .get_ident()
            .filter(|id| expr_span::ident_start(id) == lo);
        if let (Some(id), syn::Meta::NameValue(nv)) = (doc, &a.meta) {
            return Attr {
                path: Path {
                    segments: vec![unraw(id)],
                    leading_colon: false,
                    span,
                    qself: None,
                },
                args: vec![],
                value: Some(self.expr_hinted(&nv.value, Some(lo), Some(hi))),
                span,
            };
        }
        let path = self.path(a.path());
        match &a.meta {
            syn::Meta::Path(_) => Attr {
                path,
                args: vec![],
                value: None,
                span,
            },
            syn::Meta::NameValue(nv) => {
                let value = Some(self.expr(&nv.value));
                Attr {
                    path,
                    args: vec![],
                    value,
                    span,
                }
            }
            syn::Meta::List(list) => {
                let args = list
                    .parse_args_with(Punctuated::<syn::Meta, syn::Token![,]>::parse_terminated)
                    .map(|metas| metas.iter().map(|m| self.attr_arg(m)).collect())
                    .or_else(|_| {
                        // `#[get("/x")]`, `#[route("/x", method = "POST")]`: literal first.
                        list.parse_args_with(
                            Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated,
                        )
                        .map(|es| es.iter().map(|e| self.expr_attr_arg(e)).collect())
                    })
                    .unwrap_or_default();
                Attr {
                    path,
                    args,
                    value: None,
                    span,
                }
            }
        }
    }

    fn attr_arg(&mut self, m: &syn::Meta) -> AttrArg {
        self.attr_arg_at(m, 0)
    }

    fn attr_arg_at(&mut self, m: &syn::Meta, depth: usize) -> AttrArg {
        if depth >= MAX_DEPTH {
            return AttrArg::Path(self.path(m.path()));
        }
        match m {
            syn::Meta::Path(p) => AttrArg::Path(self.path(p)),
            syn::Meta::NameValue(nv) => AttrArg::NameValue {
                name: nv
                    .path
                    .segments
                    .last()
                    .map(|s| unraw(&s.ident))
                    .unwrap_or_default(),
                value: self.expr(&nv.value),
            },
            syn::Meta::List(l) => AttrArg::List {
                path: self.path(&l.path),
                args: l
                    .parse_args_with(Punctuated::<syn::Meta, syn::Token![,]>::parse_terminated)
                    .map(|ms| ms.iter().map(|m| self.attr_arg_at(m, depth + 1)).collect())
                    .unwrap_or_default(),
            },
        }
    }

    fn expr_attr_arg(&mut self, e: &syn::Expr) -> AttrArg {
        match e {
            syn::Expr::Assign(a) => match &*a.left {
                syn::Expr::Path(p) if p.path.get_ident().is_some() => AttrArg::NameValue {
                    name: unraw(p.path.get_ident().unwrap()),
                    value: self.expr(&a.right),
                },
                _ => AttrArg::Lit(self.expr(e)),
            },
            syn::Expr::Path(p) => AttrArg::Path(self.path(&p.path)),
            _ => AttrArg::Lit(self.expr(e)),
        }
    }

    fn ident_path(&self, id: &syn::Ident) -> Path {
        Path {
            segments: vec![unraw(id)],
            leading_colon: false,
            span: self.range(expr_span::ident_bounds(id)),
            qself: None,
        }
    }

    fn path(&self, p: &syn::Path) -> Path {
        self.path_spanned(p, self.path_span(p))
    }

    /// [`Lowerer::path`] whose span the caller knows.
    fn path_spanned(&self, p: &syn::Path, span: Span) -> Path {
        Path {
            segments: p.segments.iter().map(|s| unraw(&s.ident)).collect(),
            leading_colon: p.leading_colon.is_some(),
            span,
            qself: None,
        }
    }

    /// `<Type as Trait>::f`: the path `Trait::f` with `Type` kept as its `qself` (when it is
    /// a plain path type); `<Type>::f` is the path `Type::f`.
    ///
    /// `bounds`: the expression's, when known; without a `qself` they are the path's own.
    fn expr_path(&self, p: &syn::ExprPath, bounds: Option<(usize, usize)>) -> Path {
        let Some(q) = &p.qself else {
            return match bounds {
                Some(b) => self.path_spanned(&p.path, self.range(b)),
                None => self.path(&p.path),
            };
        };
        let mut path = self.path(&p.path);
        let syn::Type::Path(tp) = &*q.ty else {
            return path;
        };
        if tp.qself.is_some() {
            return path;
        }
        let ty = self.path(&tp.path);
        if q.position == 0 {
            let mut segments = ty.segments;
            segments.append(&mut path.segments);
            path.segments = segments;
            path.leading_colon = ty.leading_colon;
        } else {
            path.qself = Some(Box::new(ty));
        }
        path
    }

    fn ty(&self, t: &syn::Type) -> Type {
        self.ty_at(t, 0)
    }

    fn ty_at(&self, t: &syn::Type, depth: usize) -> Type {
        if depth >= MAX_DEPTH {
            return Type::Other;
        }
        let ty = |t: &syn::Type| self.ty_at(t, depth + 1);
        match t {
            syn::Type::Path(tp) => {
                let path = self.path(&tp.path);
                let args = tp
                    .path
                    .segments
                    .last()
                    .map(|seg| match &seg.arguments {
                        syn::PathArguments::AngleBracketed(a) => a
                            .args
                            .iter()
                            .filter_map(|ga| match ga {
                                syn::GenericArgument::Type(t) => Some(ty(t)),
                                _ => None,
                            })
                            .collect(),
                        _ => vec![],
                    })
                    .unwrap_or_default();
                Type::Path { path, args }
            }
            syn::Type::Reference(r) => Type::Ref {
                mutable: r.mutability.is_some(),
                inner: Box::new(ty(&r.elem)),
            },
            syn::Type::Paren(p) => ty(&p.elem),
            syn::Type::Group(g) => ty(&g.elem),
            syn::Type::Tuple(tt) => Type::Tuple(tt.elems.iter().map(ty).collect()),
            syn::Type::ImplTrait(it) => Type::Bounds(self.bounds(&it.bounds)),
            syn::Type::TraitObject(to) => Type::Bounds(self.bounds(&to.bounds)),
            _ => Type::Other,
        }
    }

    /// Type parameters with their bounds, `where T: Bound` clauses merged in.
    fn generics(&self, g: &syn::Generics) -> Vec<GenericParam> {
        let mut out: Vec<GenericParam> = g
            .type_params()
            .map(|tp| GenericParam {
                name: unraw(&tp.ident),
                bounds: self.bounds(&tp.bounds),
            })
            .collect();
        for pred in g.where_clause.iter().flat_map(|w| &w.predicates) {
            let syn::WherePredicate::Type(pt) = pred else {
                continue;
            };
            let syn::Type::Path(tp) = &pt.bounded_ty else {
                continue;
            };
            let Some(id) = tp.path.get_ident() else {
                continue;
            };
            let name = unraw(id);
            let bounds = self.bounds(&pt.bounds);
            match out.iter_mut().find(|p| p.name == name) {
                Some(p) => p.bounds.extend(bounds),
                None => out.push(GenericParam { name, bounds }),
            }
        }
        out
    }

    fn bounds(&self, b: &Punctuated<syn::TypeParamBound, syn::Token![+]>) -> Vec<Path> {
        b.iter()
            .filter_map(|b| match b {
                syn::TypeParamBound::Trait(t) => Some(self.path(&t.path)),
                _ => None,
            })
            .collect()
    }

    fn pat(&mut self, p: &syn::Pat) -> Pat {
        self.pat_at(p, 0)
    }

    fn pat_at(&mut self, p: &syn::Pat, depth: usize) -> Pat {
        if depth >= MAX_DEPTH {
            return Pat::Other;
        }
        let d = depth + 1;
        match p {
            syn::Pat::Ident(pi) => Pat::Ident {
                name: unraw(&pi.ident),
                mutable: pi.mutability.is_some(),
                span: self.range(expr_span::ident_bounds(&pi.ident)),
                sub: pi.subpat.as_ref().map(|(_, s)| Box::new(self.pat_at(s, d))),
            },
            syn::Pat::Tuple(t) => Pat::Tuple(t.elems.iter().map(|p| self.pat_at(p, d)).collect()),
            syn::Pat::TupleStruct(ts) => Pat::TupleStruct {
                path: self.path(&ts.path),
                elems: ts.elems.iter().map(|p| self.pat_at(p, d)).collect(),
            },
            syn::Pat::Struct(s) => Pat::Struct {
                path: self.path(&s.path),
                fields: s
                    .fields
                    .iter()
                    .map(|f| (member_name(&f.member), self.pat_at(&f.pat, d)))
                    .collect(),
            },
            syn::Pat::Or(o) => Pat::Or(o.cases.iter().map(|p| self.pat_at(p, d)).collect()),
            syn::Pat::Reference(r) => Pat::Ref(Box::new(self.pat_at(&r.pat, d))),
            syn::Pat::Paren(pp) => self.pat_at(&pp.pat, d),
            syn::Pat::Type(pt) => Pat::Typed {
                pat: Box::new(self.pat_at(&pt.pat, d)),
                ty: Box::new(self.ty(&pt.ty)),
            },
            syn::Pat::Path(pp) => Pat::Path(self.path(&pp.path)),
            syn::Pat::Lit(l) => Pat::Lit(lit(&l.lit)),
            syn::Pat::Wild(_) | syn::Pat::Rest(_) => Pat::Wild,
            syn::Pat::Guard(g) => self.pat_at(&g.pat, d),
            syn::Pat::Slice(s) => Pat::Tuple(s.elems.iter().map(|p| self.pat_at(p, d)).collect()),
            _ => Pat::Other,
        }
    }

    fn block(&mut self, b: &syn::Block, module: &ModulePath, in_test: bool) -> Block {
        let mut stmts = Vec::with_capacity(b.stmts.len());
        for s in &b.stmts {
            match s {
                syn::Stmt::Local(l) => stmts.push(Stmt::Let {
                    pat: Box::new(self.pat(&l.pat)),
                    init: l.init.as_ref().map(|i| self.expr(&i.expr)),
                    diverge: l
                        .init
                        .as_ref()
                        .and_then(|i| i.diverge.as_ref())
                        .map(|(_, e)| {
                            let e = self.expr(e);
                            let span = e.span;
                            Box::new(Block {
                                stmts: vec![Stmt::Expr {
                                    expr: e,
                                    semi: false,
                                }],
                                span,
                            })
                        }),
                    span: match expr_span::let_bounds(l) {
                        Some(r) => self.range(r),
                        None => self.span_of(l),
                    },
                }),
                syn::Stmt::Item(item) => {
                    // Nested fns become functions of the enclosing module.
                    self.item(item, module, &[], in_test, true);
                    stmts.push(Stmt::Item {
                        span: self.item_span(item),
                    });
                }
                syn::Stmt::Expr(e, semi) => stmts.push(Stmt::Expr {
                    expr: self.expr(e),
                    semi: semi.is_some(),
                }),
                syn::Stmt::Macro(m) => {
                    let span = self.span_of(m);
                    let call = self.mac(&m.mac);
                    stmts.push(Stmt::Expr {
                        expr: Expr {
                            kind: ExprKind::Macro(Box::new(call)),
                            span,
                        },
                        semi: m.semi_token.is_some(),
                    });
                }
            }
        }
        Block {
            stmts,
            // A block prints as one brace group: its span is the group's.
            span: self.span(b.brace_token.span.join()),
        }
    }

    fn boxed(&mut self, e: &syn::Expr) -> Box<Expr> {
        Box::new(self.expr(e))
    }

    fn exprs<'a>(&mut self, es: impl IntoIterator<Item = &'a syn::Expr>) -> Vec<Expr> {
        es.into_iter().map(|e| self.expr(e)).collect()
    }

    fn expr(&mut self, e: &syn::Expr) -> Expr {
        self.expr_hinted(e, None, None)
    }

    /// [`Lowerer::expr`] where the enclosing expression's bounds already say where `e` starts
    /// or ends (see [`expr_span::bounds_hinted`]).
    fn expr_hinted(&mut self, e: &syn::Expr, lo: Option<usize>, hi: Option<usize>) -> Expr {
        if self.stop() {
            return Expr {
                kind: ExprKind::Other(vec![]),
                span: Span::default(),
            };
        }
        // The span of an expression, as `span_of` gives it, without printing the expression
        // back to tokens where `bounds` knows its shape.
        let bounds = expr_span::bounds_hinted(e, lo, hi);
        let span = match bounds {
            Some(r) => self.range(r),
            None => self.span_of(e),
        };
        if self.depth >= MAX_DEPTH {
            return Expr {
                kind: ExprKind::Other(vec![]),
                span,
            };
        }
        self.depth += 1;
        let kind = self.expr_kind(e, bounds);
        self.depth -= 1;
        Expr { kind, span }
    }

    /// `Trait::method(receiver, args)` for a store trait ([`store_traits`]), and
    /// `<C as Trait>::method(..)`, as the `receiver.method(args)` it stands for: the stores'
    /// rooms read method calls, whichever way the user spelled them. A reference taken for
    /// the receiver (`&mut conn`) is the auto-ref of the method form, so it is dropped.
    fn path_form_method(&mut self, c: &syn::ExprCall) -> Option<ExprKind> {
        let syn::Expr::Path(p) = &*c.func else {
            return None;
        };
        let segments = &p.path.segments;
        let method = segments.last()?;
        let trait_at = match &p.qself {
            Some(q) => q.position.checked_sub(1)?,
            None => segments.len().checked_sub(2)?,
        };
        let trait_name = segments.get(trait_at)?.ident.to_string();
        // `Cmds::set(..)`, `<C as Cmds>::get(..)`: an unqualified trait name may be an alias.
        let aliased = || trait_at == 0 && self.imports_method_trait(&trait_name);
        if !store_traits::is_method_trait(&trait_name) && !aliased() {
            return None;
        }
        let (first, rest) = (c.args.first()?, c.args.iter().skip(1));
        let receiver = match first {
            syn::Expr::Reference(r) => &*r.expr,
            other => other,
        };
        Some(ExprKind::MethodCall {
            receiver: self.boxed(receiver),
            method: unraw(&method.ident),
            method_span: self.range(expr_span::ident_bounds(&method.ident)),
            args: self.exprs(rest),
        })
    }

    /// Whether `name` is a store trait imported under another name in this file (`use
    /// redis::AsyncCommands as Cmds;`). The imports above the call are known by then, which
    /// is where they are written.
    fn imports_method_trait(&self, name: &str) -> bool {
        self.model.uses.iter().any(|u| {
            !u.glob
                && u.alias == name
                && u.path
                    .last()
                    .is_some_and(|t| store_traits::is_method_trait(t))
        })
    }

    /// The child that starts where its parent (bounds `b`) starts.
    fn boxed_lo(&mut self, e: &syn::Expr, b: Option<(usize, usize)>) -> Box<Expr> {
        Box::new(self.expr_hinted(e, b.map(|b| b.0), None))
    }

    /// The child that ends where its parent (bounds `b`) ends.
    fn boxed_hi(&mut self, e: &syn::Expr, b: Option<(usize, usize)>) -> Box<Expr> {
        Box::new(self.expr_hinted(e, None, b.map(|b| b.1)))
    }

    /// A block inside an expression, lowered in the file's module: items inside expressions
    /// are rare, and lowered as part of the enclosing fn's module.
    fn inner_block(&mut self, b: &syn::Block) -> Block {
        let module = ModulePath::clone(&self.module);
        self.block(b, &module, false)
    }

    /// `bounds`: `e`'s, when known without printing (its children's hints).
    fn expr_kind(&mut self, e: &syn::Expr, bounds: Option<(usize, usize)>) -> ExprKind {
        let b = bounds;
        match e {
            syn::Expr::Path(p) => ExprKind::Path(self.expr_path(p, b)),
            syn::Expr::Lit(l) => ExprKind::Lit(lit(&l.lit)),
            syn::Expr::Call(c) => match self.path_form_method(c) {
                Some(method_call) => method_call,
                None => ExprKind::Call {
                    func: self.boxed_lo(&c.func, b),
                    args: self.exprs(&c.args),
                },
            },
            syn::Expr::MethodCall(m) => ExprKind::MethodCall {
                receiver: self.boxed_lo(&m.receiver, b),
                method: unraw(&m.method),
                method_span: self.range(expr_span::ident_bounds(&m.method)),
                args: self.exprs(&m.args),
            },
            syn::Expr::Macro(m) => ExprKind::Macro(Box::new(self.mac(&m.mac))),
            syn::Expr::Field(f) => ExprKind::Field {
                base: self.boxed_lo(&f.base, b),
                member: member_name(&f.member),
            },
            syn::Expr::Index(i) => ExprKind::Index {
                base: self.boxed_lo(&i.expr, b),
                index: self.boxed(&i.index),
            },
            syn::Expr::Unary(u) => match u.op {
                syn::UnOp::Deref(_) => ExprKind::Deref(self.boxed_hi(&u.expr, b)),
                syn::UnOp::Not(_) => ExprKind::Unary {
                    not: true,
                    expr: self.boxed_hi(&u.expr, b),
                },
                _ => ExprKind::Unary {
                    not: false,
                    expr: self.boxed_hi(&u.expr, b),
                },
            },
            syn::Expr::Binary(bin) => {
                let lhs = self.boxed_lo(&bin.left, b);
                let rhs = self.boxed_hi(&bin.right, b);
                match (fold_int(&bin.op, &lhs, &rhs), bin_op(&bin.op)) {
                    // `60 * 60 * 24`: one literal, so a TTL written so reads as a number.
                    (Some(n), _) => ExprKind::Lit(Lit::Int(n.to_string())),
                    (None, Some(op)) => ExprKind::Binary { op, lhs, rhs },
                    (None, None) => ExprKind::AssignOp { lhs, rhs },
                }
            }
            syn::Expr::Reference(r) => ExprKind::Ref {
                mutable: r.mutability.is_some(),
                expr: self.boxed_hi(&r.expr, b),
            },
            syn::Expr::RawAddr(r) => ExprKind::Ref {
                mutable: false,
                expr: self.boxed(&r.expr),
            },
            syn::Expr::Cast(c) => ExprKind::Cast {
                expr: self.boxed_lo(&c.expr, b),
                ty: Box::new(self.ty(&c.ty)),
            },
            syn::Expr::Await(a) => ExprKind::Await(self.boxed_lo(traced_future(&a.base), b)),
            syn::Expr::Try(t) => ExprKind::Try(self.boxed_lo(&t.expr, b)),
            syn::Expr::Paren(p) => self.expr(&p.expr).kind,
            syn::Expr::Group(g) => self.expr(&g.expr).kind,
            syn::Expr::Block(blk) => ExprKind::Block(self.inner_block(&blk.block)),
            syn::Expr::Unsafe(u) => ExprKind::Block(self.inner_block(&u.block)),
            syn::Expr::TryBlock(t) => ExprKind::Block(self.inner_block(&t.block)),
            syn::Expr::Const(c) => ExprKind::Block(self.inner_block(&c.block)),
            syn::Expr::Async(a) => ExprKind::Async {
                block: self.inner_block(&a.block),
                is_move: a.capture.is_some(),
            },
            syn::Expr::Closure(c) => ExprKind::Closure {
                params: c.inputs.iter().map(|p| self.pat(p)).collect(),
                body: self.boxed(&c.body),
                is_async: c.asyncness.is_some(),
            },
            syn::Expr::If(i) => ExprKind::If {
                cond: self.boxed(&i.cond),
                then: self.inner_block(&i.then_branch),
                els: i.else_branch.as_ref().map(|(_, e)| self.boxed_hi(e, b)),
            },
            syn::Expr::Let(l) => ExprKind::Let {
                pat: Box::new(self.pat(&l.pat)),
                expr: self.boxed_hi(&l.expr, b),
            },
            syn::Expr::Match(m) => ExprKind::Match {
                scrutinee: self.boxed(&m.expr),
                arms: m.arms.iter().map(|a| self.arm(a)).collect(),
            },
            syn::Expr::While(w) => ExprKind::Loop {
                cond: Some(self.boxed(&w.cond)),
                body: self.inner_block(&w.body),
            },
            syn::Expr::Loop(l) => ExprKind::Loop {
                cond: None,
                body: self.inner_block(&l.body),
            },
            syn::Expr::ForLoop(f) => ExprKind::For {
                pat: Box::new(self.pat(&f.pat)),
                iter: self.boxed(&f.expr),
                body: self.inner_block(&f.body),
            },
            syn::Expr::Return(r) => ExprKind::Return(r.expr.as_ref().map(|e| self.boxed_hi(e, b))),
            syn::Expr::Break(b) => ExprKind::Break(b.expr.as_ref().map(|e| self.boxed(e))),
            syn::Expr::Continue(_) => ExprKind::Continue,
            syn::Expr::Assign(a) => ExprKind::Assign {
                lhs: self.boxed_lo(&a.left, b),
                rhs: self.boxed_hi(&a.right, b),
            },
            syn::Expr::Struct(s) => ExprKind::Struct {
                path: Box::new(self.path(&s.path)),
                fields: s
                    .fields
                    .iter()
                    .map(|f| (member_name(&f.member), self.expr(&f.expr)))
                    .collect(),
                rest: s.rest.as_ref().map(|r| self.boxed(r)),
            },
            syn::Expr::Tuple(t) => ExprKind::Tuple(self.exprs(&t.elems)),
            syn::Expr::Array(a) => ExprKind::Array(self.exprs(&a.elems)),
            syn::Expr::Repeat(r) => ExprKind::Array(vec![self.expr(&r.expr)]),
            syn::Expr::Range(r) => ExprKind::Range {
                start: r.start.as_ref().map(|e| self.boxed_lo(e, b)),
                end: r.end.as_ref().map(|e| self.boxed_hi(e, b)),
            },
            _ => ExprKind::Other(vec![]),
        }
    }

    fn arm(&mut self, a: &syn::Arm) -> Arm {
        let guard = match &a.pat {
            syn::Pat::Guard(g) => Some(Box::new(self.expr(&g.guard))),
            _ => None,
        };
        Arm {
            pat: self.pat(&a.pat),
            guard,
            body: self.expr(&a.body),
        }
    }

    fn mac(&mut self, m: &syn::Macro) -> MacroCall {
        let path = self.path(&m.path);
        let parsed = m.parse_body_with(Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated);
        let Ok(parsed) = parsed else {
            // `doc! { "_id": &id, "state": "new" }`: a document macro's fields, as the
            // catalog names them, are its arguments in pairs (key text, value).
            if crate::catalog::stores::mongodb::DOC_MACROS.contains(&path.last()) {
                if let Ok(args) = self.document(m.tokens.clone(), 0) {
                    return MacroCall {
                        path,
                        args,
                        parsed: true,
                    };
                }
            }
            // `json!({ "k": v, .. })`: the object's fields, in the same pairs.
            if crate::catalog::formats::OBJECT_MACROS.contains(&path.last()) {
                if let Some(args) = self.object_literal(m.tokens.clone()) {
                    return MacroCall {
                        path,
                        args,
                        parsed: true,
                    };
                }
            }
            return MacroCall {
                path,
                args: vec![],
                parsed: false,
            };
        };
        // Recorded for the driver, which reads the file (the analysis never does):
        // `include_str!("q.sql")` beside this file, sqlx's `query_file!("queries/q.sql", ..)`
        // and `query_file_as!(Row, "queries/q.sql", ..)` under the package root.
        let from_package_root = is_query_file_macro(path.last());
        if path.last() == "include_str" || from_package_root {
            let first_text = parsed.iter().take(2).find_map(str_lit);
            if let Some(included) = first_text {
                if !self
                    .model
                    .includes
                    .iter()
                    .any(|i| i.path == included && i.from_package_root == from_package_root)
                {
                    self.model.includes.push(Include {
                        path: included,
                        from_package_root,
                        text: None,
                    });
                }
            }
        }
        let mut args = Vec::with_capacity(parsed.len());
        for e in &parsed {
            // `write!(f, "{x}", x = value)`: the named argument's value is what flows.
            let e = match e {
                syn::Expr::Assign(a) if matches!(&*a.left, syn::Expr::Path(_)) => &*a.right,
                other => other,
            };
            args.push(self.expr(e));
        }
        // Inline captures of the format string (`"{order_id}-{stage}"`) are arguments too.
        if let Some(fmt_idx) = args.iter().position(|a| a.as_str_lit().is_some()) {
            let fmt = args[fmt_idx].as_str_lit().unwrap_or("").to_owned();
            let span = args[fmt_idx].span;
            for name in inline_captures(&fmt) {
                let p = Path {
                    segments: vec![name],
                    leading_colon: false,
                    span,
                    qself: None,
                };
                args.push(Expr {
                    kind: ExprKind::Path(p),
                    span,
                });
            }
        }
        MacroCall {
            path,
            args,
            parsed: true,
        }
    }
}

impl Lowerer<'_> {
    /// The fields of a macro input that is one object literal (`{ "k": v, .. }`), as
    /// [`Lowerer::document`] gives them; `None` for any other input.
    fn object_literal(&mut self, tokens: proc_macro2::TokenStream) -> Option<Vec<Expr>> {
        let mut trees = tokens.into_iter();
        let (Some(proc_macro2::TokenTree::Group(g)), None) = (trees.next(), trees.next()) else {
            return None;
        };
        if g.delimiter() != proc_macro2::Delimiter::Brace {
            return None;
        }
        self.document(g.stream(), 0).ok()
    }

    /// The fields of a document body (`"k": v, "n": { .. }`) as (key text, value) pairs in
    /// one list; a nested `{ .. }` is a document macro of its own. An error when the body is
    /// not a document.
    fn document(
        &mut self,
        tokens: proc_macro2::TokenStream,
        depth: usize,
    ) -> syn::Result<Vec<Expr>> {
        use syn::parse::{ParseStream, Parser};
        type Field = (proc_macro2::Span, String, FieldValue);
        enum FieldValue {
            Expr(syn::Expr),
            Doc(proc_macro2::TokenStream, proc_macro2::Span),
        }
        let fields = |input: ParseStream| -> syn::Result<Vec<Field>> {
            let mut out = Vec::new();
            while !input.is_empty() {
                let (span, key) = if input.peek(syn::LitStr) {
                    let k: syn::LitStr = input.parse()?;
                    (k.span(), k.value())
                } else {
                    let k: syn::Ident = input.parse()?;
                    (k.span(), k.to_string())
                };
                input.parse::<syn::Token![:]>()?;
                let value = if input.peek(syn::token::Brace) {
                    let g: proc_macro2::Group = input.parse()?;
                    FieldValue::Doc(g.stream(), g.span())
                } else {
                    FieldValue::Expr(input.parse()?)
                };
                out.push((span, key, value));
                if input.is_empty() {
                    break;
                }
                input.parse::<syn::Token![,]>()?;
            }
            Ok(out)
        };
        let fields = fields.parse2(tokens)?;
        let mut args = Vec::with_capacity(fields.len() * 2);
        for (span, key, value) in fields {
            args.push(Expr {
                kind: ExprKind::Lit(Lit::Str(key)),
                span: self.span(span),
            });
            args.push(match value {
                FieldValue::Expr(e) => self.expr(&e),
                FieldValue::Doc(inner, span) => {
                    let nested = if depth < 8 {
                        self.document(inner, depth + 1).ok()
                    } else {
                        None
                    };
                    Expr {
                        kind: ExprKind::Macro(Box::new(MacroCall {
                            path: Path {
                                segments: vec!["doc".to_owned()],
                                leading_colon: false,
                                span: self.span(span),
                                qself: None,
                            },
                            parsed: nested.is_some(),
                            args: nested.unwrap_or_default(),
                        })),
                        span: self.span(span),
                    }
                }
            });
        }
        Ok(args)
    }
}

/// `prefix` and then `last`, allocated once at its final size.
fn with_last(prefix: &[String], last: String) -> Vec<String> {
    let mut path = Vec::with_capacity(prefix.len() + 1);
    path.extend_from_slice(prefix);
    path.push(last);
    path
}

/// sqlx's macros that read their SQL from a file relative to the package root.
pub fn is_query_file_macro(name: &str) -> bool {
    matches!(
        name,
        "query_file"
            | "query_file_as"
            | "query_file_scalar"
            | "query_file_unchecked"
            | "query_file_as_unchecked"
            | "query_file_scalar_unchecked"
    )
}

fn str_lit(e: &syn::Expr) -> Option<String> {
    match e {
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(s),
            ..
        }) => Some(str_value(s)),
        _ => None,
    }
}

/// `s.value()`, without syn's character-by-character unescaping when the literal is a plain
/// `"..."` with nothing to unescape (doc comments, most messages and keys).
fn str_value(s: &syn::LitStr) -> String {
    let repr = s.token().to_string();
    if let Some(body) = repr.strip_prefix('"') {
        // Up to the closing quote, unless an escape or a `\r\n` (read as `\n`) comes first.
        if let Some(end) = body.find(['"', '\\', '\r']) {
            if body.as_bytes()[end] == b'"' {
                return body[..end].to_owned();
            }
        }
    }
    s.value()
}

/// The path of `#[cfg_attr(predicate, path = "x.rs")]`.
fn cfg_attr_path(a: &syn::Attribute) -> Option<String> {
    if !a.path().is_ident("cfg_attr") {
        return None;
    }
    let metas = a
        .parse_args_with(Punctuated::<syn::Meta, syn::Token![,]>::parse_terminated)
        .ok()?;
    metas.iter().skip(1).find_map(|m| match m {
        syn::Meta::NameValue(nv) if nv.path.is_ident("path") => str_lit(&nv.value),
        _ => None,
    })
}

/// Where the outer attributes (`#[path = ".."]`, `#[cfg(..)]`) and visibility (`pub`,
/// `pub(crate)`) written before the token at `at` begin.
fn item_prefix_start(tts: &[proc_macro2::TokenTree], at: usize) -> usize {
    use proc_macro2::{Delimiter, TokenTree};
    let mut j = at;
    loop {
        match (
            j.checked_sub(2).map(|k| &tts[k]),
            j.checked_sub(1).map(|k| &tts[k]),
        ) {
            (_, Some(TokenTree::Ident(v))) if v == "pub" => j -= 1,
            (Some(TokenTree::Ident(v)), Some(TokenTree::Group(g)))
                if v == "pub" && g.delimiter() == Delimiter::Parenthesis =>
            {
                j -= 2
            }
            (Some(TokenTree::Punct(p)), Some(TokenTree::Group(g)))
                if p.as_char() == '#' && g.delimiter() == Delimiter::Bracket =>
            {
                j -= 2
            }
            _ => return j,
        }
    }
}

/// The items a macro invocation wraps, when its input parses as a list of items and it is not a
/// macro definition.
/// The path of `include!("path")` (also `std::include!`).
fn item_include(mac: &syn::Macro) -> Option<String> {
    if mac.path.segments.last()?.ident != "include" {
        return None;
    }
    let lit: syn::LitStr = mac.parse_body().ok()?;
    Some(lit.value())
}

fn macro_items(mac: &syn::Macro) -> Option<Vec<syn::Item>> {
    if mac.path.is_ident("macro_rules") {
        return None;
    }
    mac.parse_body_with(|input: syn::parse::ParseStream<'_>| {
        let mut items = Vec::new();
        while !input.is_empty() {
            items.push(input.parse::<syn::Item>()?);
        }
        Ok(items)
    })
    .ok()
    .filter(|items| !items.is_empty())
}

/// Names captured inline by a format string: `{id}`, `{id:?}`, `{id:>8}`; not `{}`, `{0}`,
/// `{{`.
pub(crate) fn inline_captures(fmt: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = fmt;
    while let Some(i) = rest.find('{') {
        rest = &rest[i + 1..];
        if let Some(r) = rest.strip_prefix('{') {
            rest = r;
            continue;
        }
        let end = rest.find('}').unwrap_or(rest.len());
        let inner = &rest[..end];
        let name = inner.split(':').next().unwrap_or("").trim();
        let is_ident = name
            .chars()
            .next()
            .is_some_and(|c| c.is_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_alphanumeric() || c == '_');
        if is_ident && !out.iter().any(|n| n == name) {
            out.push(name.to_owned());
        }
        rest = &rest[end.min(rest.len())..];
    }
    out
}

/// `u64`, `i32`, `usize`, `Duration`, `std::time::Duration`: a constant a TTL may be.
fn is_number_or_duration(ty: &syn::Type) -> bool {
    const NUMBERS: &[&str] = &[
        "u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16", "i32", "i64", "i128", "isize",
        "Duration",
    ];
    matches!(ty, syn::Type::Path(p)
        if p.path.segments.last().is_some_and(|s| NUMBERS.iter().any(|n| s.ident == n)))
}

/// `a op b` of two integer literals, when it is `+`, `-`, `*` or `/` and does not
/// overflow.
fn fold_int(op: &syn::BinOp, lhs: &Expr, rhs: &Expr) -> Option<u64> {
    let int = |e: &Expr| match &e.kind {
        ExprKind::Lit(Lit::Int(digits)) => digits.parse::<u64>().ok(),
        _ => None,
    };
    let (a, b) = (int(lhs)?, int(rhs)?);
    match op {
        syn::BinOp::Add(_) => a.checked_add(b),
        syn::BinOp::Sub(_) => a.checked_sub(b),
        syn::BinOp::Mul(_) => a.checked_mul(b),
        syn::BinOp::Div(_) => a.checked_div(b),
        _ => None,
    }
}

fn bin_op(op: &syn::BinOp) -> Option<BinOp> {
    use syn::BinOp as B;
    Some(match op {
        B::And(_) => BinOp::And,
        B::Or(_) => BinOp::Or,
        B::Eq(_) | B::Ne(_) | B::Lt(_) | B::Le(_) | B::Gt(_) | B::Ge(_) => BinOp::Compare,
        B::Add(_) => BinOp::Arith(ArithOp::Add),
        B::Sub(_) => BinOp::Arith(ArithOp::Sub),
        B::Mul(_) => BinOp::Arith(ArithOp::Mul),
        B::Div(_) => BinOp::Arith(ArithOp::Div),
        B::Rem(_) | B::BitXor(_) | B::BitAnd(_) | B::BitOr(_) | B::Shl(_) | B::Shr(_) => {
            BinOp::Arith(ArithOp::Other)
        }
        _ => return None,
    })
}

fn lit(l: &syn::Lit) -> Lit {
    match l {
        syn::Lit::Str(s) => Lit::Str(str_value(s)),
        syn::Lit::Int(i) => Lit::Int(i.base10_digits().to_owned()),
        syn::Lit::Float(f) => Lit::Float(f.base10_digits().to_owned()),
        syn::Lit::Bool(b) => Lit::Bool(b.value),
        syn::Lit::Char(c) => Lit::Char(c.value()),
        _ => Lit::Other,
    }
}

fn member_name(m: &syn::Member) -> String {
    match m {
        syn::Member::Named(id) => unraw(id),
        syn::Member::Unnamed(i) => i.index.to_string(),
    }
}

fn visibility(v: &syn::Visibility) -> Visibility {
    match v {
        syn::Visibility::Public(_) => Visibility::Public,
        syn::Visibility::Restricted(_) => Visibility::Restricted,
        syn::Visibility::Inherited => Visibility::Private,
    }
}

/// `r#type` → `type`: names compare without the raw prefix.
fn unraw(id: &proc_macro2::Ident) -> String {
    let s = id.to_string();
    match s.strip_prefix("r#") {
        Some(rest) => rest.to_owned(),
        None => s,
    }
}

/// Whether `attrs` make a fn test code: a test attribute as `tests` resolves it (see
/// [`TestAttrs`]), or a `#[cfg(..)]` that holds in test builds only.
pub(super) fn is_test_fn(attrs: &[syn::Attribute], tests: &TestAttrs) -> bool {
    attrs
        .iter()
        .any(|a| tests.is_test(a.path()) || is_cfg_test_attr(a))
}

pub(super) fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(is_cfg_test_attr)
}

/// `#[cfg(P)]` where `P` holds in test builds only: `test`, `all(.., test, ..)`, or an
/// `any(..)` each of whose branches does (never `not(test)`).
fn is_cfg_test_attr(a: &syn::Attribute) -> bool {
    a.path().is_ident("cfg") && a.parse_args::<syn::Meta>().is_ok_and(|p| only_in_tests(&p))
}

fn only_in_tests(predicate: &syn::Meta) -> bool {
    match predicate {
        syn::Meta::Path(p) => p.is_ident("test"),
        syn::Meta::List(l) => {
            let Ok(items) =
                l.parse_args_with(Punctuated::<syn::Meta, syn::Token![,]>::parse_terminated)
            else {
                return false;
            };
            if l.path.is_ident("all") {
                items.iter().any(only_in_tests)
            } else if l.path.is_ident("any") {
                !items.is_empty() && items.iter().all(only_in_tests)
            } else {
                false
            }
        }
        syn::Meta::NameValue(_) => false,
    }
}

/// The future an `.await` waits on, through `tracing`'s adapters (`.instrument(span)`,
/// `.in_current_span()`): they change how it is traced, not what it does.
fn traced_future(e: &syn::Expr) -> &syn::Expr {
    match e {
        syn::Expr::MethodCall(m)
            if (m.method == "instrument" && m.args.len() == 1)
                || (m.method == "in_current_span" && m.args.is_empty()) =>
        {
            traced_future(&m.receiver)
        }
        _ => e,
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
