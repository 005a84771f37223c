//! Byte ranges of syn expressions, functions and `let` statements without re-tokenizing them.
//!
//! syn's `Spanned::span` prints the whole node back to tokens and joins the first and last
//! token's spans. The lowering asks it of every expression, so a file cost the sum of its
//! expressions' sizes (its size times its nesting depth), and printing dominated the
//! lowering. [`bounds`] reads the same first and last tokens off the tree: the start of the
//! leftmost sub-expression or leading token, the end of the rightmost or the closing
//! delimiter. Shapes it does not know (attributes on the expression, labels, closures,
//! qualified paths, rare variants) answer `None`, and the caller falls back to syn.
//! [`fn_bounds`] and [`let_bounds`] do the same for functions (printed once more for their
//! own span) and `let` statements. The tests below hold them equal to syn on every node of
//! the fixtures and of this repository (and of any directory `IDEM_LINT_SPAN_CHECK_DIR`
//! names).

use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::Expr;

/// `(start, end)` byte offsets of `e` as syn's `span()` gives them, when known without
/// printing.
#[cfg(test)]
pub(super) fn bounds(e: &Expr) -> Option<(usize, usize)> {
    Some((lo(e)?, hi(e)?))
}

/// [`bounds`] where the caller already knows where `e` starts or ends: the start of a method
/// call's receiver is the call's, the end of a binary expression's right side is its own. The
/// lowering passes them down, so a chain `a.b().c()..` is not walked again at every link.
/// A hint must be what [`bounds`] would have answered for that end.
pub(super) fn bounds_hinted(
    e: &Expr,
    lo_hint: Option<usize>,
    hi_hint: Option<usize>,
) -> Option<(usize, usize)> {
    let lo = match lo_hint {
        Some(l) => l,
        None => lo(e)?,
    };
    let hi = match hi_hint {
        Some(h) => h,
        None => hi(e)?,
    };
    Some((lo, hi))
}

/// The first and last token of `p` as syn prints it, when known without printing (not for
/// `Fn(A) -> B` arguments or a trailing `::`).
pub(super) fn path_tokens(p: &syn::Path) -> Option<(Span, Span)> {
    let first_seg = p.segments.first()?;
    let first = match &p.leading_colon {
        Some(c) => c.spans[0],
        None => first_seg.ident.span(),
    };
    if p.segments.trailing_punct() {
        return None;
    }
    let last_seg = p.segments.last()?;
    let last = match &last_seg.arguments {
        syn::PathArguments::None => last_seg.ident.span(),
        syn::PathArguments::AngleBracketed(a) => a.gt_token.span,
        syn::PathArguments::Parenthesized(_) => return None,
    };
    Some((first, last))
}

/// `(start, end)` of a path, as syn's `span()` gives them, when [`path_tokens`] knows them.
pub(super) fn path_bounds(p: &syn::Path) -> Option<(usize, usize)> {
    if p.leading_colon.is_none() && p.segments.len() == 1 && !p.segments.trailing_punct() {
        let seg = &p.segments[0];
        if seg.arguments.is_none() {
            // A plain name (most paths: locals, fields' types): one token.
            return Some(ident_bounds(&seg.ident));
        }
    }
    path_tokens(p).map(|(first, last)| (start(first), end(last)))
}

/// Where a path starts: its first token.
fn path_start(p: &syn::Path) -> Option<usize> {
    let first = match &p.leading_colon {
        Some(c) => c.spans[0],
        None => p.segments.first()?.ident.span(),
    };
    Some(start(first))
}

/// Where an identifier starts.
pub(super) fn ident_start(id: &proc_macro2::Ident) -> usize {
    start(id.span())
}

/// `(start, end)` of an identifier: its start plus the bytes it is written with (`r#`
/// included), which costs less than looking its end up in proc_macro2's line table. The
/// `doc` of a doc comment is not written: it spans the whole comment, and is looked up.
pub(super) fn ident_bounds(id: &proc_macro2::Ident) -> (usize, usize) {
    if id == "doc" {
        return (ident_start(id), end(id.span()));
    }
    /// Counts what is written to it.
    struct Len(usize);
    impl std::fmt::Write for Len {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            self.0 += s.len();
            Ok(())
        }
    }
    let mut len = Len(0);
    // Writing to `Len` cannot fail.
    let _ = std::fmt::Write::write_fmt(&mut len, format_args!("{id}"));
    let lo = ident_start(id);
    (lo, lo + len.0)
}

/// `(start, end)` of an attribute, as syn's `span()` gives them: `#`, `!` when inner, and the
/// bracket group.
pub(super) fn attr_bounds(a: &syn::Attribute) -> (usize, usize) {
    (start(a.pound_token.span), end(a.bracket_token.span.join()))
}

fn start(s: Span) -> usize {
    super::byte_offsets::start(s)
}

fn end(s: Span) -> usize {
    super::byte_offsets::end(s)
}

/// Where `e` starts.
fn lo(e: &Expr) -> Option<usize> {
    if has_attrs(e) {
        return None;
    }
    Some(match e {
        Expr::Path(p) if p.qself.is_none() => path_start(&p.path)?,
        Expr::Lit(l) => start(l.lit.span()),
        Expr::MethodCall(m) => lo(&m.receiver)?,
        Expr::Call(c) => lo(&c.func)?,
        Expr::Field(f) => lo(&f.base)?,
        Expr::Binary(b) => lo(&b.left)?,
        Expr::Assign(a) => lo(&a.left)?,
        Expr::Index(i) => lo(&i.expr)?,
        Expr::Cast(c) => lo(&c.expr)?,
        Expr::Try(t) => lo(&t.expr)?,
        Expr::Await(a) => lo(&a.base)?,
        Expr::Range(r) => match &r.start {
            Some(s) => lo(s)?,
            None => start(r.limits.span()),
        },
        Expr::Unary(u) => start(u.op.span()),
        Expr::Reference(r) => start(r.and_token.span),
        Expr::Paren(p) => start(p.paren_token.span.open()),
        Expr::Tuple(t) => start(t.paren_token.span.open()),
        Expr::Array(a) => start(a.bracket_token.span.open()),
        Expr::Block(b) if b.label.is_none() => start(b.block.brace_token.span.open()),
        Expr::Macro(m) => path_start(&m.mac.path)?,
        Expr::If(i) => start(i.if_token.span),
        Expr::Match(m) => start(m.match_token.span),
        Expr::Let(l) => start(l.let_token.span),
        Expr::Return(r) => start(r.return_token.span),
        Expr::ForLoop(f) if f.label.is_none() => start(f.for_token.span),
        Expr::While(w) if w.label.is_none() => start(w.while_token.span),
        Expr::Loop(l) if l.label.is_none() => start(l.loop_token.span),
        Expr::Struct(s) if s.qself.is_none() => path_start(&s.path)?,
        Expr::Closure(c) => start(
            c.lifetimes
                .as_ref()
                .map(|l| l.for_token.span)
                .or(c.constness.map(|t| t.span))
                .or(c.asyncness.map(|t| t.span))
                .or(c.capture.map(|t| t.span))
                .unwrap_or(c.inputs_begin.span),
        ),
        Expr::Async(a) => start(a.async_token.span),
        Expr::Unsafe(u) => start(u.unsafe_token.span),
        Expr::Break(b) => start(b.break_token.span),
        Expr::Continue(c) => start(c.continue_token.span),
        Expr::Repeat(r) => start(r.bracket_token.span.open()),
        _ => return None,
    })
}

/// Where `e` ends.
fn hi(e: &Expr) -> Option<usize> {
    if has_attrs(e) {
        return None;
    }
    Some(match e {
        Expr::Path(p) if p.qself.is_none() => match path_tokens(&p.path) {
            Some((_, last)) => end(last),
            None => end(p.path.span()),
        },
        Expr::Lit(l) => end(l.lit.span()),
        Expr::MethodCall(m) => end(m.paren_token.span.close()),
        Expr::Call(c) => end(c.paren_token.span.close()),
        Expr::Field(f) => end(f.member.span()),
        Expr::Binary(b) => hi(&b.right)?,
        Expr::Assign(a) => hi(&a.right)?,
        Expr::Index(i) => end(i.bracket_token.span.close()),
        Expr::Cast(c) => end(c.ty.span()),
        Expr::Try(t) => end(t.question_token.span),
        Expr::Await(a) => end(a.await_token.span),
        Expr::Range(r) => match &r.end {
            Some(e) => hi(e)?,
            None => end(r.limits.span()),
        },
        Expr::Unary(u) => hi(&u.expr)?,
        Expr::Reference(r) => hi(&r.expr)?,
        Expr::Paren(p) => end(p.paren_token.span.close()),
        Expr::Tuple(t) => end(t.paren_token.span.close()),
        Expr::Array(a) => end(a.bracket_token.span.close()),
        Expr::Block(b) if b.label.is_none() => end(b.block.brace_token.span.close()),
        Expr::Macro(m) => end(match &m.mac.delimiter {
            syn::MacroDelimiter::Paren(p) => p.span.close(),
            syn::MacroDelimiter::Brace(b) => b.span.close(),
            syn::MacroDelimiter::Bracket(b) => b.span.close(),
        }),
        Expr::If(i) => match &i.else_branch {
            Some((_, els)) => hi(els)?,
            None => end(i.then_branch.brace_token.span.close()),
        },
        Expr::Match(m) => end(m.brace_token.span.close()),
        Expr::Let(l) => hi(&l.expr)?,
        Expr::Return(r) => match &r.expr {
            Some(v) => hi(v)?,
            None => end(r.return_token.span),
        },
        Expr::ForLoop(f) if f.label.is_none() => end(f.body.brace_token.span.close()),
        Expr::While(w) if w.label.is_none() => end(w.body.brace_token.span.close()),
        Expr::Loop(l) if l.label.is_none() => end(l.body.brace_token.span.close()),
        Expr::Struct(s) if s.qself.is_none() => end(s.brace_token.span.close()),
        // With a return type, syn prints a body that is not a plain block inside new braces.
        Expr::Closure(c)
            if matches!(c.output, syn::ReturnType::Default)
                || matches!(&*c.body, Expr::Block(b) if b.attrs.is_empty() && b.label.is_none()) =>
        {
            hi(&c.body)?
        }
        Expr::Async(a) => end(a.block.brace_token.span.close()),
        Expr::Unsafe(u) => end(u.block.brace_token.span.close()),
        Expr::Break(b) if b.label.is_none() => match &b.expr {
            Some(v) => hi(v)?,
            None => end(b.break_token.span),
        },
        Expr::Continue(c) if c.label.is_none() => end(c.continue_token.span),
        Expr::Repeat(r) => end(r.bracket_token.span.close()),
        _ => return None,
    })
}

/// `(start, end)` of an item, as syn's `span()` gives them, for the kinds with a plain first
/// and last token (`use`, `const`, `static`, `type`, `enum`, `struct`, item macros); `None`
/// for the others.
pub(super) fn item_bounds(item: &syn::Item) -> Option<(usize, usize)> {
    use syn::Item;
    let (attrs, vis, keyword, last) = match item {
        Item::Use(u) => (&u.attrs, Some(&u.vis), u.use_token.span, u.semi_token.span),
        Item::Const(c) => (
            &c.attrs,
            Some(&c.vis),
            c.const_token.span,
            c.semi_token.span,
        ),
        Item::Static(st) => (
            &st.attrs,
            Some(&st.vis),
            st.static_token.span,
            st.semi_token.span,
        ),
        Item::Type(t) => (&t.attrs, Some(&t.vis), t.type_token.span, t.semi_token.span),
        Item::Enum(e) => (
            &e.attrs,
            Some(&e.vis),
            e.enum_token.span,
            e.brace_token.span.join(),
        ),
        Item::Struct(st) => {
            let last = match (&st.fields, &st.semi_token) {
                (syn::Fields::Named(f), _) => f.brace_token.span.join(),
                (_, Some(semi)) => semi.span,
                // syn would print a `;` of its own.
                _ => return None,
            };
            (&st.attrs, Some(&st.vis), st.struct_token.span, last)
        }
        Item::Macro(m) => {
            let first = match &m.mac.path.leading_colon {
                Some(c) => c.spans[0],
                None => m.mac.path.segments.first()?.ident.span(),
            };
            let last = match (&m.semi_token, &m.mac.delimiter) {
                (Some(semi), _) => semi.span,
                (None, syn::MacroDelimiter::Paren(d)) => d.span.join(),
                (None, syn::MacroDelimiter::Brace(d)) => d.span.join(),
                (None, syn::MacroDelimiter::Bracket(d)) => d.span.join(),
            };
            (&m.attrs, None, first, last)
        }
        _ => return None,
    };
    let vis = match vis {
        Some(syn::Visibility::Public(p)) => Some(p.span),
        Some(syn::Visibility::Restricted(r)) => Some(r.pub_token.span),
        _ => None,
    };
    let first = first_outer_attr(attrs).or(vis).unwrap_or(keyword);
    Some((start(first), end(last)))
}

/// `(start, end)` of a function item or method, as syn's `span()` gives them: from its first
/// outer attribute (doc comments included) or leading keyword to its body's closing brace.
pub(super) fn fn_bounds(
    attrs: &[syn::Attribute],
    vis: &syn::Visibility,
    defaultness: Option<&syn::Token![default]>,
    sig: &syn::Signature,
    body: &syn::Block,
) -> (usize, usize) {
    let first = first_outer_attr(attrs)
        .or(match vis {
            syn::Visibility::Public(p) => Some(p.span),
            syn::Visibility::Restricted(r) => Some(r.pub_token.span),
            syn::Visibility::Inherited => None,
        })
        .or(defaultness.map(|d| d.span))
        .or(sig.constness.map(|c| c.span))
        .or(sig.asyncness.map(|a| a.span))
        .or(match &sig.safety {
            syn::Safety::Safe(t) => Some(t.span),
            syn::Safety::Unsafe(t) => Some(t.span),
            syn::Safety::Default => None,
        })
        .or(sig.abi.as_ref().map(|a| a.extern_token.span))
        .unwrap_or(sig.fn_token.span);
    (start(first), end(body.brace_token.span.close()))
}

/// `(start, end)` of an `impl` block, as syn's `span()` gives them.
pub(super) fn impl_bounds(i: &syn::ItemImpl) -> (usize, usize) {
    let first = first_outer_attr(&i.attrs)
        .or(i.modifiers.defaultness.map(|d| d.span))
        .or(i.unsafety.map(|u| u.span))
        .unwrap_or(i.impl_token.span);
    (start(first), end(i.brace_token.span.close()))
}

fn first_outer_attr(attrs: &[syn::Attribute]) -> Option<Span> {
    attrs
        .iter()
        .find(|a| matches!(a.style, syn::AttrStyle::Outer))
        .map(|a| a.pound_token.span)
}

/// `(start, end)` of a `let` statement, as syn's `span()` gives them (`None` with attributes).
pub(super) fn let_bounds(l: &syn::Local) -> Option<(usize, usize)> {
    l.attrs
        .is_empty()
        .then(|| (start(l.let_token.span), end(l.semi_token.span)))
}

/// Outer attributes print first: their tokens would start the span.
fn has_attrs(e: &Expr) -> bool {
    let attrs = match e {
        Expr::Path(x) => &x.attrs,
        Expr::Lit(x) => &x.attrs,
        Expr::MethodCall(x) => &x.attrs,
        Expr::Call(x) => &x.attrs,
        Expr::Field(x) => &x.attrs,
        Expr::Binary(x) => &x.attrs,
        Expr::Assign(x) => &x.attrs,
        Expr::Index(x) => &x.attrs,
        Expr::Cast(x) => &x.attrs,
        Expr::Try(x) => &x.attrs,
        Expr::Await(x) => &x.attrs,
        Expr::Range(x) => &x.attrs,
        Expr::Unary(x) => &x.attrs,
        Expr::Reference(x) => &x.attrs,
        Expr::Paren(x) => &x.attrs,
        Expr::Tuple(x) => &x.attrs,
        Expr::Array(x) => &x.attrs,
        Expr::Block(x) => &x.attrs,
        Expr::Macro(x) => &x.attrs,
        Expr::If(x) => &x.attrs,
        Expr::Match(x) => &x.attrs,
        Expr::Let(x) => &x.attrs,
        Expr::Return(x) => &x.attrs,
        Expr::ForLoop(x) => &x.attrs,
        Expr::While(x) => &x.attrs,
        Expr::Loop(x) => &x.attrs,
        Expr::Struct(x) => &x.attrs,
        Expr::Closure(x) => &x.attrs,
        Expr::Async(x) => &x.attrs,
        Expr::Unsafe(x) => &x.attrs,
        Expr::Break(x) => &x.attrs,
        Expr::Continue(x) => &x.attrs,
        Expr::Repeat(x) => &x.attrs,
        // Not read by `lo`/`hi`: they answer `None` for every other shape anyway.
        _ => return false,
    };
    !attrs.is_empty()
}

#[cfg(test)]
mod tests {
    use super::{
        attr_bounds, bounds, fn_bounds, impl_bounds, item_bounds, let_bounds, path_bounds,
    };
    use proc_macro2::Span;
    use std::path::{Path, PathBuf};
    use syn::spanned::Spanned;
    use syn::visit::Visit;

    /// Every node of `text` whose bounds differ from syn's span, and how many were compared
    /// (`None`: the text does not parse).
    fn mismatches(text: &str) -> Option<(Vec<String>, usize)> {
        struct Check(Vec<String>, usize);
        impl<'a> Visit<'a> for Check {
            fn visit_expr(&mut self, e: &'a syn::Expr) {
                if let Some(ours) = bounds(e) {
                    self.1 += 1;
                    let r = e.span().byte_range();
                    if ours != (r.start, r.end) {
                        self.0
                            .push(format!("{ours:?} vs {r:?}: {}", quote::quote!(#e)));
                    }
                }
                syn::visit::visit_expr(self, e);
            }
            fn visit_item_fn(&mut self, f: &'a syn::ItemFn) {
                let ours = fn_bounds(&f.attrs, &f.vis, None, &f.sig, &f.block);
                self.compare(ours, f.span(), &f.sig.ident);
                syn::visit::visit_item_fn(self, f);
            }
            fn visit_impl_item_fn(&mut self, f: &'a syn::ImplItemFn) {
                let d = f.modifiers.defaultness.as_ref();
                let ours = fn_bounds(&f.attrs, &f.vis, d, &f.sig, &f.block);
                self.compare(ours, f.span(), &f.sig.ident);
                syn::visit::visit_impl_item_fn(self, f);
            }
            fn visit_item_impl(&mut self, i: &'a syn::ItemImpl) {
                self.compare(impl_bounds(i), i.span(), &i.self_ty);
                syn::visit::visit_item_impl(self, i);
            }
            fn visit_item(&mut self, i: &'a syn::Item) {
                if let Some(ours) = item_bounds(i) {
                    self.compare(ours, i.span(), i);
                }
                syn::visit::visit_item(self, i);
            }
            fn visit_path(&mut self, p: &'a syn::Path) {
                if let Some(ours) = path_bounds(p) {
                    self.compare(ours, p.span(), p);
                }
                syn::visit::visit_path(self, p);
            }
            fn visit_attribute(&mut self, a: &'a syn::Attribute) {
                self.compare(attr_bounds(a), a.span(), a);
                syn::visit::visit_attribute(self, a);
            }
            fn visit_local(&mut self, l: &'a syn::Local) {
                if let Some(ours) = let_bounds(l) {
                    self.compare(ours, l.span(), &l.pat);
                }
                syn::visit::visit_local(self, l);
            }
        }
        impl Check {
            fn compare(&mut self, ours: (usize, usize), theirs: Span, what: &dyn quote::ToTokens) {
                self.1 += 1;
                let r = theirs.byte_range();
                if ours != (r.start, r.end) {
                    let what = what.to_token_stream();
                    self.0.push(format!("{ours:?} vs {r:?}: {what}"));
                }
            }
        }
        let file = syn::parse_file(text).ok()?;
        let mut check = Check(Vec::new(), 0);
        check.visit_file(&file);
        // Again through the line index the lowering reads offsets from (for texts syn strips
        // no prefix from: the index is of the text proc_macro2 parsed).
        if !text.starts_with("#!") && !text.starts_with('\u{feff}') {
            super::super::byte_offsets::with_index(text, || check.visit_file(&file));
        }
        Some((check.0, check.1))
    }

    fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() && p.file_name().is_some_and(|n| n != "target") {
                rs_files(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }

    #[test]
    fn bounds_equal_syn_spans_on_every_expression_of_the_repository() {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut files = Vec::new();
        for dir in ["fixtures", "src", "lints/src", "guard", "tests", "benches"] {
            rs_files(&repo.join(dir), &mut files);
        }
        // More inputs (tokio's sources, say) through the environment.
        if let Some(extra) = std::env::var_os("IDEM_LINT_SPAN_CHECK_DIR") {
            rs_files(Path::new(&extra), &mut files);
        }
        assert!(files.len() > 50, "{} files", files.len());
        let mut compared = 0;
        let mut bad = Vec::new();
        for f in &files {
            let text = std::fs::read_to_string(f).unwrap_or_default();
            let (found, n) = mismatches(&text).unwrap_or_default();
            compared += n;
            bad.extend(found.into_iter().map(|m| format!("{}: {m}", f.display())));
        }
        assert!(
            bad.is_empty(),
            "{} mismatches:\n{}",
            bad.len(),
            bad.join("\n")
        );
        assert!(compared > 10_000, "only {compared} nodes compared");
    }

    #[test]
    fn tricky_shapes_match_syn() {
        let text = r#"
            //! Inner docs.
            #![allow(unused)]
            /// Docs.
            #[inline]
            pub(crate) async unsafe fn g() {}
            impl S { const fn c() {} pub extern "C" fn e() {} #[doc = "x"] fn d(&self) {} }
            /// An impl.
            unsafe impl<T> Send for W<T> {}
            impl !Sync for V {}
            fn f() {
                #[allow(unused)] let q = 1;
                let r = 2 else { return };
                let a = ::std::mem::take(&mut x)?.await.0..=y;
                let b = -x as u64 + (y)[0] * [1, 2].len() - (a, b).0;
                let c = if a { b } else if c { d } else { e };
                let d = match x { _ => 1 } + loop { break } + async { 1 }.await;
                let e = S { a, ..Default::default() } .. ;
                let g = Vec::<u8>::new().into_iter().map(|x| x + 1).collect::<Vec<_>>();
                let p: ::std::vec::Vec<Vec<u8>> = <Vec<u8> as Default>::default();
                let q: Box<dyn Fn(u8) -> u8> = Box::new(|x| x);
                let c = (move |a: u8| -> u8 { a }, async move || 1, || async { 2 }, |x| [x; 4]);
                let u = unsafe { f() } + loop { break 3 } + loop { break } + 'l: loop { break 'l };
                for _ in 0.. { continue }
                use a::{b, c as d}; const K: &str = "k"; static S: u8 = 1; type T = u8;
                enum E { A } struct N { a: u8 } struct P(u8); struct U; m!(x); m! { y }
                #[derive(Debug)] pub(crate) struct D<T> where T: Copy { t: T }
                let h = vec![1; 3][..2].to_vec();
                return;
                x = y += 1;
                #[allow(unused)] z;
                'a: loop {}
                while let Some(x) = it.next() {}
                for i in 0..n {}
                // Names whose end is their start plus their written length (`r#`, non-ASCII),
                // and a doc comment's `doc`, which spans the whole comment.
                let r#type = r#match + café + r#fn::x;
                /// d
                fn inner() {}
                f()()()
            }
        "#;
        let (bad, compared) = mismatches(text).expect("parses");
        assert_eq!(bad, Vec::<String>::new());
        assert!(compared > 50, "{compared}");
    }
}
