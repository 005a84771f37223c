//! The rewrites, one function each: a source file in, the same program written another way
//! out (`None` when the file has nothing the rewrite applies to). Each finds its places with
//! a `syn` visitor and edits the text there ([`Edits`]), keeping lines, so the `//~`
//! annotations still sit on the line of the finding. To add one: write `fn(&str) ->
//! Option<String>` and list it in [`ALL`].

use crate::edit::Edits;
use idem_lints::catalog::sinks::SinkCatalog;
use proc_macro2::{Span, TokenStream, TokenTree};
use std::collections::HashSet;
use std::path::PathBuf;
use syn::spanned::Spanned;
use syn::visit::{self, Visit};

pub struct Rewrite {
    pub name: &'static str,
    pub apply: Apply,
}

/// A fixture crate's sources: `(path under src/, text)`, in path order.
pub type Sources = Vec<(PathBuf, String)>;

/// How a rewrite applies.
pub enum Apply {
    /// To each file alone.
    File(fn(&str) -> Option<String>),
    /// To the crate at once: it may change several files together (a fn and its callers)
    /// and add files (a module a helper moves to, declared with a `mod` line).
    Crate(fn(&[(PathBuf, String)]) -> Option<Sources>),
}

impl Apply {
    /// The rewritten crate, or `None` when the rewrite changed nothing.
    pub fn to_crate(&self, sources: &[(PathBuf, String)]) -> Option<Sources> {
        match self {
            Apply::File(f) => {
                let mut changed = false;
                let out = sources
                    .iter()
                    .map(|(path, text)| match f(text) {
                        Some(out) => {
                            changed = true;
                            (path.clone(), out)
                        }
                        None => (path.clone(), text.clone()),
                    })
                    .collect();
                changed.then_some(out)
            }
            Apply::Crate(f) => f(sources),
        }
    }
}

pub const ALL: &[Rewrite] = &[
    Rewrite {
        name: "rename_bindings",
        apply: Apply::File(rename_bindings),
    },
    Rewrite {
        name: "alias_imports",
        apply: Apply::File(alias_imports),
    },
    Rewrite {
        name: "full_paths",
        apply: Apply::File(full_paths),
    },
    Rewrite {
        name: "logging_between_steps",
        apply: Apply::File(logging_between_steps),
    },
    Rewrite {
        name: "comments_and_attributes",
        apply: Apply::File(comments_and_attributes),
    },
    Rewrite {
        name: "async_move_body",
        apply: Apply::File(async_move_body),
    },
    Rewrite {
        name: "check_in_a_bool",
        apply: Apply::File(check_in_a_bool),
    },
    Rewrite {
        name: "if_as_match",
        apply: Apply::File(if_as_match),
    },
    Rewrite {
        name: "if_let_as_match",
        apply: Apply::File(if_let_as_match),
    },
    Rewrite {
        name: "map_err_after_await",
        apply: Apply::File(map_err_after_await),
    },
    Rewrite {
        name: "negated_if",
        apply: Apply::File(negated_if),
    },
    Rewrite {
        name: "try_as_match",
        apply: Apply::File(try_as_match),
    },
    Rewrite {
        name: "split_builder_chain",
        apply: Apply::File(split_builder_chain),
    },
    Rewrite {
        name: "redis_conn_from_pool",
        apply: Apply::File(redis_conn_from_pool),
    },
    Rewrite {
        name: "key_from_helper",
        apply: Apply::File(key_from_helper),
    },
    Rewrite {
        name: "instrument_attribute",
        apply: Apply::File(instrument_attribute),
    },
    Rewrite {
        name: "context_after_await",
        apply: Apply::File(context_after_await),
    },
    Rewrite {
        name: "instrument_on_await",
        apply: Apply::File(instrument_on_await),
    },
    Rewrite {
        name: "if_let_some",
        apply: Apply::File(if_let_some),
    },
    Rewrite {
        name: "let_else_none",
        apply: Apply::File(let_else_none),
    },
    Rewrite {
        name: "tokio_spawn_body",
        apply: Apply::File(tokio_spawn_body),
    },
    Rewrite {
        name: "retry_closure_body",
        apply: Apply::File(retry_closure_body),
    },
    Rewrite {
        name: "impl_trait_conn",
        apply: Apply::File(impl_trait_conn),
    },
    Rewrite {
        name: "continue_in_batch",
        apply: Apply::File(continue_in_batch),
    },
    Rewrite {
        name: "futures_join_body",
        apply: Apply::File(futures_join_body),
    },
    Rewrite {
        name: "generic_conn",
        apply: Apply::File(generic_conn),
    },
    Rewrite {
        name: "extra_builder_calls",
        apply: Apply::File(extra_builder_calls),
    },
    Rewrite {
        name: "builder_from_helper",
        apply: Apply::File(builder_from_helper),
    },
    Rewrite {
        name: "key_helper_in_module",
        apply: Apply::Crate(key_helper_in_module),
    },
    Rewrite {
        name: "key_helper_two_deep",
        apply: Apply::Crate(key_helper_two_deep),
    },
    Rewrite {
        name: "key_method_on_message",
        apply: Apply::Crate(key_method_on_message),
    },
    Rewrite {
        name: "client_in_self_field",
        apply: Apply::Crate(client_in_self_field),
    },
    Rewrite {
        name: "client_in_arc_field",
        apply: Apply::Crate(client_in_arc_field),
    },
    Rewrite {
        name: "client_in_static",
        apply: Apply::Crate(client_in_static),
    },
    Rewrite {
        name: "step_helper_in_module",
        apply: Apply::Crate(step_helper_in_module),
    },
    Rewrite {
        name: "step_helper_two_deep",
        apply: Apply::Crate(step_helper_two_deep),
    },
    Rewrite {
        name: "step_extension_trait",
        apply: Apply::Crate(step_extension_trait),
    },
    Rewrite {
        name: "let_through_tuple",
        apply: Apply::File(let_through_tuple),
    },
];

/// Runs `visit` over the parsed file with fresh edits; the result only if it parses.
fn rewrite(text: &str, visit: impl FnOnce(&syn::File, &mut Edits<'_>)) -> Option<String> {
    let file = syn::parse_file(text).ok()?;
    let mut edits = Edits::new(text);
    visit(&file, &mut edits);
    edits.finish().filter(|out| syn::parse_file(out).is_ok())
}

// ------------------------------------------------------------------ rename_bindings

/// Every local and parameter `x` becomes `my_x` (patterns, uses, shorthand fields, macro
/// arguments, inline format arguments, `#[idempotent]`/`#[instrument]` arguments). Names
/// that are also items or imports are left alone, so a call of a fn is never renamed, and so
/// are names that are a key sink by their name (`request_token`, `idempotency_key`): there
/// the name is what the code says.
pub fn rename_bindings(text: &str) -> Option<String> {
    rewrite(text, |file, edits| {
        let mut names = Names::default();
        names.visit_file(file);
        let sinks = SinkCatalog::default();
        let renamed: HashSet<String> = names
            .bindings
            .difference(&names.items)
            .filter(|n| !sinks.is_key_name(n))
            .cloned()
            .collect();
        Renamer {
            names: &renamed,
            edits,
        }
        .visit_file(file);
    })
}

#[derive(Default)]
struct Names {
    bindings: HashSet<String>,
    items: HashSet<String>,
}

impl<'ast> Visit<'ast> for Names {
    fn visit_pat_ident(&mut self, p: &'ast syn::PatIdent) {
        let name = p.ident.to_string();
        if name != "self" && name.starts_with(|c: char| c.is_lowercase()) {
            self.bindings.insert(name);
        }
        visit::visit_pat_ident(self, p);
    }

    fn visit_item(&mut self, i: &'ast syn::Item) {
        let ident = match i {
            syn::Item::Fn(f) => Some(&f.sig.ident),
            syn::Item::Const(c) => Some(&c.ident),
            syn::Item::Static(s) => Some(&s.ident),
            syn::Item::Mod(m) => Some(&m.ident),
            syn::Item::Macro(m) => m.ident.as_ref(),
            _ => None,
        };
        self.items.extend(ident.map(|i| i.to_string()));
        visit::visit_item(self, i);
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        self.items.insert(f.sig.ident.to_string());
        visit::visit_impl_item_fn(self, f);
    }

    fn visit_use_name(&mut self, u: &'ast syn::UseName) {
        self.items.insert(u.ident.to_string());
    }

    fn visit_use_rename(&mut self, u: &'ast syn::UseRename) {
        self.items.insert(u.rename.to_string());
    }
}

struct Renamer<'n, 'e, 't> {
    names: &'n HashSet<String>,
    edits: &'e mut Edits<'t>,
}

fn renamed(name: &str) -> String {
    format!("my_{name}")
}

impl Renamer<'_, '_, '_> {
    /// Idents of a macro's or attribute's tokens that are bindings: not a field or method
    /// after `.`, not a path segment after `::`, not a field label before a single `:`.
    fn tokens(&mut self, tokens: TokenStream) {
        let tts: Vec<TokenTree> = tokens.into_iter().collect();
        for (i, tt) in tts.iter().enumerate() {
            match tt {
                TokenTree::Ident(id) => {
                    let punct = |j: Option<usize>| match j.and_then(|j| tts.get(j)) {
                        Some(TokenTree::Punct(p)) => Some(p.as_char()),
                        _ => None,
                    };
                    let after_dot_or_path = matches!(punct(i.checked_sub(1)), Some('.' | ':'));
                    // `field: value`, `key = expr` (an attribute's or a named format
                    // argument's label), not `a::b` or `a == b`.
                    let next = punct(Some(i + 1));
                    let label = matches!(next, Some(':' | '='))
                        && punct(Some(i + 2)) != next
                        && !matches!(punct(i.checked_sub(1)), Some(':'));
                    if self.names.contains(&id.to_string()) && !after_dot_or_path && !label {
                        self.edits.replace(id.span(), renamed(&id.to_string()));
                    }
                }
                TokenTree::Group(g) => self.tokens(g.stream()),
                TokenTree::Literal(l) => self.inline_format_args(l.span(), &l.to_string()),
                TokenTree::Punct(_) => {}
            }
        }
    }

    /// `"processed:{key}"`: inline format arguments name bindings too.
    fn inline_format_args(&mut self, span: Span, lit: &str) {
        if !(lit.starts_with('"') || lit.starts_with("r\"") || lit.starts_with("r#")) {
            return;
        }
        let mut out = lit.to_owned();
        for name in self.names {
            for close in ['}', ':'] {
                out = out.replace(
                    &format!("{{{name}{close}"),
                    &format!("{{{}{close}", renamed(name)),
                );
            }
        }
        if out != lit {
            self.edits.replace(span, out);
        }
    }
}

impl<'ast> Visit<'ast> for Renamer<'_, '_, '_> {
    fn visit_pat_ident(&mut self, p: &'ast syn::PatIdent) {
        if self.names.contains(&p.ident.to_string()) {
            self.edits
                .replace(p.ident.span(), renamed(&p.ident.to_string()));
        }
        visit::visit_pat_ident(self, p);
    }

    fn visit_expr_path(&mut self, e: &'ast syn::ExprPath) {
        if let (None, Some(id)) = (&e.qself, e.path.get_ident()) {
            if self.names.contains(&id.to_string()) {
                self.edits.replace(id.span(), renamed(&id.to_string()));
                return;
            }
        }
        visit::visit_expr_path(self, e);
    }

    fn visit_field_value(&mut self, f: &'ast syn::FieldValue) {
        if let (None, syn::Member::Named(id)) = (&f.colon_token, &f.member) {
            if self.names.contains(&id.to_string()) {
                self.edits
                    .replace(f.span(), format!("{id}: {}", renamed(&id.to_string())));
                return;
            }
        }
        visit::visit_field_value(self, f);
    }

    fn visit_field_pat(&mut self, f: &'ast syn::FieldPat) {
        if let (None, syn::Member::Named(id), syn::Pat::Ident(p)) =
            (&f.colon_token, &f.member, &*f.pat)
        {
            if self.names.contains(&id.to_string()) {
                let binding = self.edits.source(p.span()).to_owned();
                let (before, _) = binding.rsplit_once(&id.to_string()).unwrap_or(("", ""));
                self.edits.replace(
                    f.span(),
                    format!("{id}: {before}{}", renamed(&id.to_string())),
                );
                return;
            }
        }
        visit::visit_field_pat(self, f);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.tokens(m.tokens.clone());
    }

    fn visit_attribute(&mut self, a: &'ast syn::Attribute) {
        let last = a.path().segments.last().map(|s| s.ident.to_string());
        if matches!(last.as_deref(), Some("idempotent" | "instrument")) {
            if let syn::Meta::List(list) = &a.meta {
                self.tokens(list.tokens.clone());
            }
        }
    }
}

// ------------------------------------------------------------------ imports

/// An imported type or trait `Name` (`use a::b::Name;`).
struct Import {
    name: String,
    /// `a::b::Name`.
    full: String,
    /// The `Name` in the use tree.
    leaf: Span,
    /// The whole `use` item, when it imports nothing else.
    item: Option<Span>,
}

#[derive(Default)]
struct Imports {
    found: Vec<Import>,
}

impl Imports {
    fn tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree, item: Option<Span>) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.tree(prefix, &p.tree, item);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let name = n.ident.to_string();
                if name.starts_with(|c: char| c.is_uppercase()) && !prefix.is_empty() {
                    self.found.push(Import {
                        full: format!("{}::{name}", prefix.join("::")),
                        name,
                        leaf: n.ident.span(),
                        item,
                    });
                }
            }
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.tree(prefix, t, None);
                }
            }
            syn::UseTree::Rename(_) | syn::UseTree::Glob(_) => {}
        }
    }
}

impl<'ast> Visit<'ast> for Imports {
    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let prefix = &mut u.leading_colon.map(|_| String::new()).into_iter().collect();
        self.tree(prefix, &u.tree, Some(u.span()));
    }
}

/// Where a name is mentioned as the first segment of a path (types, calls, patterns, trait
/// bounds) or as a macro token not after `::`.
struct Mentions<'n> {
    name: &'n str,
    spans: Vec<Span>,
}

impl Mentions<'_> {
    fn tokens(&mut self, tokens: TokenStream) {
        let mut after_colon = false;
        for tt in tokens {
            match &tt {
                TokenTree::Ident(id) if id == self.name && !after_colon => {
                    self.spans.push(id.span())
                }
                TokenTree::Group(g) => self.tokens(g.stream()),
                _ => {}
            }
            after_colon = matches!(&tt, TokenTree::Punct(p) if p.as_char() == ':');
        }
    }
}

impl<'ast> Visit<'ast> for Mentions<'_> {
    fn visit_path(&mut self, p: &'ast syn::Path) {
        if p.leading_colon.is_none() {
            if let Some(first) = p.segments.first() {
                if first.ident == self.name {
                    self.spans.push(first.ident.span());
                }
            }
        }
        visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        visit::visit_macro(self, m);
        self.tokens(m.tokens.clone());
    }

    fn visit_item_use(&mut self, _: &'ast syn::ItemUse) {}

    /// `#[derive(Iden)]` names an imported derive macro.
    fn visit_attribute(&mut self, a: &'ast syn::Attribute) {
        if let syn::Meta::List(list) = &a.meta {
            self.tokens(list.tokens.clone());
        }
    }
}

fn mentions(file: &syn::File, name: &str) -> Vec<Span> {
    let mut m = Mentions {
        name,
        spans: Vec::new(),
    };
    m.visit_file(file);
    m.spans
}

/// `use aws_sdk_dynamodb::Client;` becomes `use aws_sdk_dynamodb::Client as ClientRenamed;`
/// and every mention follows; a trait imported for its methods only becomes `as _`. The
/// standard library's names (`Arc`, `OnceLock`) keep theirs: nobody renames them.
pub fn alias_imports(text: &str) -> Option<String> {
    rewrite(text, |file, edits| {
        let mut imports = Imports::default();
        imports.visit_file(file);
        let std = |full: &str| {
            ["std::", "core::", "alloc::"]
                .iter()
                .any(|s| full.starts_with(s))
        };
        for import in imports.found.into_iter().filter(|i| !std(&i.full)) {
            let uses = mentions(file, &import.name);
            if uses.is_empty() {
                edits.insert_after(import.leaf, " as _");
                continue;
            }
            let alias = format!("{}Renamed", import.name);
            edits.insert_after(import.leaf, format!(" as {alias}"));
            for span in uses {
                edits.replace(span, alias.clone());
            }
        }
    })
}

/// `use a::b::Name;` is dropped and every mention is written `a::b::Name`.
pub fn full_paths(text: &str) -> Option<String> {
    rewrite(text, |file, edits| {
        let mut imports = Imports::default();
        imports.visit_file(file);
        for import in imports.found {
            let Some(item) = import.item else {
                continue;
            };
            let uses = mentions(file, &import.name);
            if uses.is_empty() || import.full.starts_with("self::") {
                continue;
            }
            edits.replace(item, "");
            for span in uses {
                edits.replace(span, import.full.clone());
            }
        }
    })
}

// ------------------------------------------------------------------ noise and wrapping

/// Visits the bodies of fns only (not consts, statics or item macros).
struct InFns<F> {
    depth: usize,
    on_block: F,
}

impl<'ast, F: FnMut(&'ast syn::Block)> Visit<'ast> for InFns<F> {
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.depth += 1;
        visit::visit_item_fn(self, f);
        self.depth -= 1;
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        self.depth += 1;
        visit::visit_impl_item_fn(self, f);
        self.depth -= 1;
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        self.depth += 1;
        visit::visit_trait_item_fn(self, f);
        self.depth -= 1;
    }

    fn visit_block(&mut self, b: &'ast syn::Block) {
        if self.depth > 0 {
            (self.on_block)(b);
        }
        visit::visit_block(self, b);
    }
}

fn each_fn_block(file: &syn::File, on_block: impl FnMut(&syn::Block)) {
    InFns { depth: 0, on_block }.visit_file(file);
}

/// A log line before every statement of every fn body, on the statement's own line.
pub fn logging_between_steps(text: &str) -> Option<String> {
    rewrite(text, |file, edits| {
        each_fn_block(file, |b| {
            for stmt in &b.stmts {
                if !matches!(stmt, syn::Stmt::Item(_)) {
                    edits.insert_before(stmt.span(), "tracing::debug!(\"next step\"); ");
                }
            }
        });
    })
}

/// A block comment before every statement of every fn body and `#[allow(unused_variables)]`
/// on every `let`, on the statement's own line.
pub fn comments_and_attributes(text: &str) -> Option<String> {
    rewrite(text, |file, edits| {
        each_fn_block(file, |b| {
            for stmt in &b.stmts {
                match stmt {
                    syn::Stmt::Local(_) => edits.insert_before(
                        stmt.span(),
                        "/* the next step */ #[allow(unused_variables)] ",
                    ),
                    syn::Stmt::Expr(..) | syn::Stmt::Macro(_) => {
                        edits.insert_before(stmt.span(), "/* the next step */ ")
                    }
                    syn::Stmt::Item(_) => {}
                }
            }
        });
    })
}

/// The body of every `async fn` runs in an `async move` block awaited at once.
pub fn async_move_body(text: &str) -> Option<String> {
    wrap_async_bodies(text, " async move {", "}.await ")
}

struct AllFns<'f> {
    on_fn: &'f mut dyn FnMut(&syn::Signature, &syn::Block),
}

impl<'ast> Visit<'ast> for AllFns<'_> {
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        (self.on_fn)(&f.sig, &f.block);
        visit::visit_item_fn(self, f);
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        (self.on_fn)(&f.sig, &f.block);
        visit::visit_impl_item_fn(self, f);
    }
}

// ------------------------------------------------------------------ control flow

/// The `if` statements of fn bodies whose condition is an expression (not `if let`) and whose
/// `else`, if any, is a block (not `else if`).
fn plain_ifs(b: &syn::Block) -> impl Iterator<Item = &syn::ExprIf> {
    b.stmts.iter().filter_map(|s| match s {
        syn::Stmt::Expr(syn::Expr::If(i), _)
            if !matches!(*i.cond, syn::Expr::Let(_))
                && !matches!(&i.else_branch, Some((_, e)) if matches!(**e, syn::Expr::If(_))) =>
        {
            Some(i)
        }
        _ => None,
    })
}

/// `if conn.exists(&key).await? {` becomes `let check_answer = conn.exists(&key).await?; if
/// check_answer {` for conditions that wait on something (a store call).
pub fn check_in_a_bool(text: &str) -> Option<String> {
    rewrite(text, |file, edits| {
        each_fn_block(file, |b| {
            for i in plain_ifs(b) {
                if edits.source(i.cond.span()).contains(".await") {
                    edits.replace(i.if_token.span(), "let check_answer =");
                    edits.insert_after(i.cond.span(), "; if check_answer");
                }
            }
        });
    })
}

/// `if c { a } else { b }` becomes `match c { true => { a } false => { b } }`.
pub fn if_as_match(text: &str) -> Option<String> {
    rewrite(text, |file, edits| {
        each_fn_block(file, |b| {
            for i in plain_ifs(b) {
                edits.replace(i.if_token.span(), "match");
                edits.insert_after(i.cond.span(), " { true =>");
                match &i.else_branch {
                    Some((else_token, els)) => {
                        edits.replace(else_token.span(), "false =>");
                        edits.insert_after(els.span(), " }");
                    }
                    None => edits.insert_after(i.then_branch.span(), " false => {} }"),
                }
            }
        });
    })
}

/// `if let P = e { a } else { b }` becomes `match e { P => { a } _ => { b } }`, wherever it
/// stands (a statement, a `let`'s value); an `else if` chain is left alone.
pub fn if_let_as_match(text: &str) -> Option<String> {
    struct IfLets<'e, 't> {
        edits: &'e mut Edits<'t>,
    }
    impl<'ast> Visit<'ast> for IfLets<'_, '_> {
        fn visit_expr_if(&mut self, i: &'ast syn::ExprIf) {
            if let (syn::Expr::Let(l), Some((else_token, els))) = (&*i.cond, &i.else_branch) {
                // On one line, so the edit keeps the lines the annotations are on.
                let one_line = !self
                    .edits
                    .source_between(i.if_token.span(), i.cond.span())
                    .contains('\n');
                if one_line && matches!(**els, syn::Expr::Block(_)) {
                    let with = format!(
                        "match {} {{ {} =>",
                        self.edits.source(l.expr.span()),
                        self.edits.source(l.pat.span())
                    );
                    self.edits
                        .replace_between(i.if_token.span(), i.cond.span(), with);
                    self.edits.replace(else_token.span(), "_ =>");
                    self.edits.insert_after(els.span(), " }");
                    // The branches' own `if let`s are left alone: one edit per expression.
                    return;
                }
            }
            visit::visit_expr_if(self, i);
        }
    }
    rewrite(text, |file, edits| IfLets { edits }.visit_file(file))
}

/// `.await?` becomes `.await.map_err(|e| e)?`: an unrelated call between the operation and
/// its `?`.
pub fn map_err_after_await(text: &str) -> Option<String> {
    struct Tries<'e, 't> {
        edits: &'e mut Edits<'t>,
    }
    impl<'ast> Visit<'ast> for Tries<'_, '_> {
        fn visit_expr_try(&mut self, t: &'ast syn::ExprTry) {
            if matches!(*t.expr, syn::Expr::Await(_)) {
                self.edits
                    .insert_before(t.question_token.span(), ".map_err(|e| e)");
            }
            visit::visit_expr_try(self, t);
        }
    }
    rewrite(text, |file, edits| Tries { edits }.visit_file(file))
}

/// `if c { a }` becomes `if !(c) {} else { a }`.
pub fn negated_if(text: &str) -> Option<String> {
    rewrite(text, |file, edits| {
        each_fn_block(file, |b| {
            for i in plain_ifs(b).filter(|i| i.else_branch.is_none()) {
                edits.insert_before(i.cond.span(), "!(");
                edits.insert_after(i.cond.span(), ") {} else");
            }
        });
    })
}

/// `x.await?` becomes `(match x.await { Ok(v) => v, Err(e) => return Err(e.into()) })`.
pub fn try_as_match(text: &str) -> Option<String> {
    struct Tries<'e, 't> {
        edits: &'e mut Edits<'t>,
        /// Inside a closure or an async block, where `return` would leave that instead.
        nested: usize,
    }
    impl<'ast> Visit<'ast> for Tries<'_, '_> {
        fn visit_expr_try(&mut self, t: &'ast syn::ExprTry) {
            if self.nested == 0 && matches!(*t.expr, syn::Expr::Await(_)) {
                self.edits.insert_before(t.expr.span(), "(match ");
                self.edits.replace(
                    t.question_token.span(),
                    " { Ok(v) => v, Err(e) => return Err(e.into()) })",
                );
                // The operand's own `?`s are left alone: one edit per expression.
                return;
            }
            visit::visit_expr_try(self, t);
        }

        fn visit_expr_closure(&mut self, c: &'ast syn::ExprClosure) {
            self.nested += 1;
            visit::visit_expr_closure(self, c);
            self.nested -= 1;
        }

        fn visit_expr_async(&mut self, a: &'ast syn::ExprAsync) {
            self.nested += 1;
            visit::visit_expr_async(self, a);
            self.nested -= 1;
        }
    }
    rewrite(text, |file, edits| {
        Tries { edits, nested: 0 }.visit_file(file)
    })
}

/// Methods that send a built request or run a built query.
const RUNNERS: &[&str] = &[
    "send",
    "execute",
    "fetch_one",
    "fetch_optional",
    "fetch_all",
    "query_async",
    "get_result",
    "load",
    "first",
];

/// `let out = ddb.put_item().table_name(t).item(k, v).send().await?;` becomes `let request =
/// ddb.put_item().table_name(t).item(k, v); let out = request.send().await?;`: the builder in
/// a local, sent in the next statement (on the same lines).
pub fn split_builder_chain(text: &str) -> Option<String> {
    rewrite(text, |file, edits| {
        each_fn_block(file, |b| {
            for stmt in &b.stmts {
                let (start, expr) = match stmt {
                    syn::Stmt::Local(syn::Local {
                        init: Some(init), ..
                    }) => (stmt.span(), &*init.expr),
                    syn::Stmt::Expr(e, Some(_)) => (stmt.span(), e),
                    _ => continue,
                };
                let Some(builder) = built_request(expr) else {
                    continue;
                };
                // `let out = ` (or nothing) moves after the builder's `let`.
                let prefix = edits
                    .source_between(start, builder.span())
                    .strip_suffix(edits.source(builder.span()))
                    .unwrap_or("")
                    .to_owned();
                edits.replace_between(
                    start,
                    builder.span(),
                    format!("let request = {}", edits.source(builder.span())),
                );
                edits.insert_after(builder.span(), format!("; {prefix}request"));
            }
        });
    })
}

/// The receiver of the runner in `e` (through `?`, `.await`), when it is itself a call
/// chain of at least two calls: the builder.
fn built_request(e: &syn::Expr) -> Option<&syn::Expr> {
    let mut cur = e;
    loop {
        match cur {
            syn::Expr::Try(t) => cur = &t.expr,
            syn::Expr::Await(a) => cur = &a.base,
            syn::Expr::MethodCall(m) if RUNNERS.contains(&m.method.to_string().as_str()) => {
                let builder = &*m.receiver;
                let syn::Expr::MethodCall(inner) = builder else {
                    return None;
                };
                return matches!(*inner.receiver, syn::Expr::MethodCall(_)).then_some(builder);
            }
            _ => return None,
        }
    }
}

/// Redis connection types a handler is handed.
const REDIS_CONNECTIONS: &[&str] = &["ConnectionManager", "MultiplexedConnection"];

/// `conn: &mut ConnectionManager` of an `async fn` becomes `conn_pool: &bb8::Pool<..>`, and
/// the body starts by taking a pooled connection: `let mut conn_conn =
/// conn_pool.get().await.expect(..); let conn = &mut *conn_conn;`.
pub fn redis_conn_from_pool(text: &str) -> Option<String> {
    rewrite(text, |file, edits| {
        let mut pool = |sig: &syn::Signature, block: &syn::Block| {
            if sig.asyncness.is_none() {
                return;
            }
            let mut opening = String::new();
            for arg in &sig.inputs {
                let syn::FnArg::Typed(t) = arg else {
                    continue;
                };
                let (syn::Pat::Ident(p), syn::Type::Reference(r)) = (&*t.pat, &*t.ty) else {
                    continue;
                };
                let syn::Type::Path(ty) = &*r.elem else {
                    continue;
                };
                let last = ty.path.segments.last().map(|s| s.ident.to_string());
                let is_conn = last.is_some_and(|l| REDIS_CONNECTIONS.contains(&l.as_str()));
                if r.mutability.is_none() || !is_conn || p.subpat.is_some() {
                    continue;
                }
                let name = p.ident.to_string();
                edits.replace(
                    t.span(),
                    format!("{name}_pool: &bb8::Pool<bb8_redis::RedisConnectionManager>"),
                );
                opening.push_str(&format!(
                    " let mut {name}_conn = {name}_pool.get().await.expect(\"a pooled connection\"); let {name} = &mut *{name}_conn;"
                ));
            }
            if !opening.is_empty() {
                edits.insert_after(block.brace_token.span.open(), opening);
            }
        };
        AllFns { on_fn: &mut pool }.visit_file(file);
    })
}

/// The parameters a macro's tokens name (idents and inline format arguments), or `None` when
/// they name any other lower-case binding (a local the helper would not see).
fn names_used(tokens: &TokenStream, params: &[(String, String)]) -> Option<HashSet<String>> {
    let mut used = HashSet::new();
    let mut ok = true;
    let mut prev_punct: Option<char> = None;
    let mut check = |name: &str, used: &mut HashSet<String>| {
        if params.iter().any(|(p, _)| p == name) {
            used.insert(name.to_owned());
        } else if name.starts_with(|c: char| c.is_lowercase()) {
            ok = false;
        }
    };
    let mut stack: Vec<TokenStream> = vec![tokens.clone()];
    while let Some(ts) = stack.pop() {
        for tt in ts {
            match &tt {
                TokenTree::Ident(id) if !matches!(prev_punct, Some('.' | ':')) => {
                    check(&id.to_string(), &mut used)
                }
                TokenTree::Group(g) => stack.push(g.stream()),
                TokenTree::Literal(l) => {
                    let lit = l.to_string();
                    for part in lit.split('{').skip(1) {
                        let name: String = part
                            .chars()
                            .take_while(|c| c.is_alphanumeric() || *c == '_')
                            .collect();
                        if !name.is_empty() && !name.starts_with(|c: char| c.is_ascii_digit()) {
                            check(&name, &mut used);
                        }
                    }
                }
                _ => {}
            }
            prev_punct = match &tt {
                TokenTree::Punct(p) => Some(p.as_char()),
                _ => None,
            };
        }
    }
    ok.then_some(used)
}

// ------------------------------------------------------------------ more wrapping

/// `#[tracing::instrument(skip_all)]` on every fn with a body, on the fn's own line.
pub fn instrument_attribute(text: &str) -> Option<String> {
    struct Fns<'e, 't> {
        edits: &'e mut Edits<'t>,
    }
    impl Fns<'_, '_> {
        /// Before the visibility when there is one (`#[..] pub fn`), else before the signature.
        fn mark(&mut self, vis: &syn::Visibility, sig: &syn::Signature) {
            let at = match vis {
                syn::Visibility::Inherited => sig.span(),
                _ => vis.span(),
            };
            self.edits
                .insert_before(at, "#[tracing::instrument(skip_all)] ");
        }
    }
    impl<'ast> Visit<'ast> for Fns<'_, '_> {
        fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
            self.mark(&f.vis, &f.sig);
            visit::visit_item_fn(self, f);
        }

        fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
            self.mark(&f.vis, &f.sig);
            visit::visit_impl_item_fn(self, f);
        }
    }
    rewrite(text, |file, edits| Fns { edits }.visit_file(file))
}

/// `.await?` becomes `.await.context("store step")?` (`anyhow::Context`): an error-context
/// call between the operation and its `?`.
pub fn context_after_await(text: &str) -> Option<String> {
    struct Tries<'e, 't> {
        edits: &'e mut Edits<'t>,
    }
    impl<'ast> Visit<'ast> for Tries<'_, '_> {
        fn visit_expr_try(&mut self, t: &'ast syn::ExprTry) {
            if matches!(*t.expr, syn::Expr::Await(_)) {
                self.edits
                    .insert_before(t.question_token.span(), ".context(\"store step\")");
            }
            visit::visit_expr_try(self, t);
        }
    }
    rewrite(text, |file, edits| Tries { edits }.visit_file(file))
}

/// `call(..).await` becomes `call(..).instrument(tracing::Span::current()).await`
/// (`tracing::Instrument`) for every awaited method call.
pub fn instrument_on_await(text: &str) -> Option<String> {
    struct Awaits<'e, 't> {
        edits: &'e mut Edits<'t>,
    }
    impl<'ast> Visit<'ast> for Awaits<'_, '_> {
        fn visit_expr_await(&mut self, a: &'ast syn::ExprAwait) {
            if matches!(*a.base, syn::Expr::MethodCall(_)) {
                self.edits
                    .insert_after(a.base.span(), ".instrument(tracing::Span::current())");
            }
            visit::visit_expr_await(self, a);
        }
    }
    rewrite(text, |file, edits| Awaits { edits }.visit_file(file))
}

/// The receiver of `cond` when it is `x.is_some()` (`some`) or `x.is_none()` (`!some`).
fn option_test(cond: &syn::Expr, some: bool) -> Option<&syn::Expr> {
    let syn::Expr::MethodCall(m) = cond else {
        return None;
    };
    let name = if some { "is_some" } else { "is_none" };
    (m.method == name && m.args.is_empty()).then_some(&*m.receiver)
}

/// `if x.is_some() { a }` becomes `if let Some(_) = x { a }`.
pub fn if_let_some(text: &str) -> Option<String> {
    rewrite(text, |file, edits| {
        each_fn_block(file, |b| {
            for i in plain_ifs(b) {
                if let Some(x) = option_test(&i.cond, true) {
                    let with = format!("let Some(_) = {}", edits.source(x.span()));
                    edits.replace(i.cond.span(), with);
                }
            }
        });
    })
}

/// Whether a block leaves its fn or loop on every path: its last statement is a `return`,
/// `continue` or `break`.
fn diverges(b: &syn::Block) -> bool {
    matches!(
        b.stmts.last(),
        Some(syn::Stmt::Expr(
            syn::Expr::Return(_) | syn::Expr::Continue(_) | syn::Expr::Break(_),
            _
        ))
    )
}

/// `if x.is_some() { return .. }` (no `else`) becomes `let None = x else { return .. };`,
/// and `if x.is_none() { return .. }` becomes `let Some(_) = x else { return .. };`.
pub fn let_else_none(text: &str) -> Option<String> {
    rewrite(text, |file, edits| {
        each_fn_block(file, |b| {
            for i in plain_ifs(b).filter(|i| i.else_branch.is_none() && diverges(&i.then_branch)) {
                let (pat, x) = match (option_test(&i.cond, true), option_test(&i.cond, false)) {
                    (Some(x), _) => ("None", x),
                    (None, Some(x)) => ("Some(_)", x),
                    (None, None) => continue,
                };
                let with = format!("let {pat} = {} else", edits.source(x.span()));
                edits.replace_between(i.if_token.span(), i.cond.span(), with);
                edits.insert_after(i.then_branch.span(), ";");
            }
        });
    })
}

/// Wraps the body of every `async fn` (with statements) in `open ... close` on the body's
/// first and last lines.
fn wrap_async_bodies(text: &str, open: &str, close: &str) -> Option<String> {
    rewrite(text, |file, edits| {
        let mut wrap = |sig: &syn::Signature, block: &syn::Block| {
            if sig.asyncness.is_some() && !block.stmts.is_empty() {
                let braces = block.brace_token.span;
                edits.insert_after(braces.open(), open);
                edits.insert_before(braces.close(), close);
            }
        };
        AllFns { on_fn: &mut wrap }.visit_file(file);
    })
}

/// The body of every `async fn` runs in a task: `tokio::spawn(async move { .. }).await`.
pub fn tokio_spawn_body(text: &str) -> Option<String> {
    wrap_async_bodies(
        text,
        " tokio::spawn(async move {",
        "}).await.expect(\"the task ran\") ",
    )
}

/// The body of every `async fn` is a closure handed to a retry helper:
/// `with_retry(|| async move { .. }).await`.
pub fn retry_closure_body(text: &str) -> Option<String> {
    wrap_async_bodies(text, " with_retry(|| async move {", "}).await ")
}

/// `conn: &mut ConnectionManager` becomes `conn: &mut impl redis::aio::ConnectionLike`: the
/// client known by its trait only (`AsyncCommands` is implemented for every one).
pub fn impl_trait_conn(text: &str) -> Option<String> {
    rewrite(text, |file, edits| {
        let mut generic = |sig: &syn::Signature, _: &syn::Block| {
            for arg in &sig.inputs {
                let syn::FnArg::Typed(t) = arg else {
                    continue;
                };
                let syn::Type::Reference(r) = &*t.ty else {
                    continue;
                };
                let syn::Type::Path(ty) = &*r.elem else {
                    continue;
                };
                let last = ty.path.segments.last().map(|s| s.ident.to_string());
                if r.mutability.is_some()
                    && last.is_some_and(|l| REDIS_CONNECTIONS.contains(&l.as_str()))
                {
                    edits.replace(ty.span(), "impl redis::aio::ConnectionLike");
                }
            }
        };
        AllFns {
            on_fn: &mut generic,
        }
        .visit_file(file);
    })
}

/// An `async fn` whose body ends in `Ok(())` runs its steps in a loop over a one-item batch,
/// and its early `return Ok(())`s (the last statement of an `if` directly in the body) become
/// `continue`: `for _item in [()] { ..; if seen { continue; } .. } Ok(())`.
pub fn continue_in_batch(text: &str) -> Option<String> {
    rewrite(text, |file, edits| {
        let mut batch = |sig: &syn::Signature, block: &syn::Block| {
            let Some((syn::Stmt::Expr(tail, None), steps)) = block.stmts.split_last() else {
                return;
            };
            if sig.asyncness.is_none() || steps.is_empty() || edits.source(tail.span()) != "Ok(())"
            {
                return;
            }
            let returns: Vec<&syn::Expr> = steps
                .iter()
                .filter_map(|s| match s {
                    syn::Stmt::Expr(syn::Expr::If(i), _) => i.then_branch.stmts.last(),
                    _ => None,
                })
                .filter_map(|s| match s {
                    syn::Stmt::Expr(e @ syn::Expr::Return(_), _) => Some(e),
                    _ => None,
                })
                .filter(|e| edits.source(e.span()) == "return Ok(())")
                .collect();
            if returns.is_empty() {
                return;
            }
            for r in returns {
                edits.replace(r.span(), "continue");
            }
            edits.insert_after(block.brace_token.span.open(), " for _item in [()] {");
            edits.insert_before(tail.span(), "} ");
        };
        AllFns { on_fn: &mut batch }.visit_file(file);
    })
}

/// The body of every `async fn` runs as one arm of a `futures::join!` with an unrelated
/// future: `futures::join!(async move { .. }, futures::future::ready(())).0`.
pub fn futures_join_body(text: &str) -> Option<String> {
    wrap_async_bodies(
        text,
        " futures::join!(async move {",
        "}, futures::future::ready(())).0 ",
    )
}

/// `conn: &mut ConnectionManager` becomes `conn: &mut C0` with `where C0:
/// redis::AsyncCommands + Send`: the connection a generic parameter bounded by the trait.
pub fn generic_conn(text: &str) -> Option<String> {
    rewrite(text, |file, edits| {
        let mut generic = |sig: &syn::Signature, _: &syn::Block| {
            let mut bounds = Vec::new();
            for arg in &sig.inputs {
                let syn::FnArg::Typed(t) = arg else {
                    continue;
                };
                let syn::Type::Reference(r) = &*t.ty else {
                    continue;
                };
                let syn::Type::Path(ty) = &*r.elem else {
                    continue;
                };
                let last = ty.path.segments.last().map(|s| s.ident.to_string());
                if r.mutability.is_some()
                    && last.is_some_and(|l| REDIS_CONNECTIONS.contains(&l.as_str()))
                {
                    let name = format!("C{}", bounds.len());
                    edits.replace(ty.span(), name.clone());
                    bounds.push(format!("{name}: redis::AsyncCommands + Send"));
                }
            }
            if bounds.is_empty() {
                return;
            }
            let names: Vec<&str> = bounds
                .iter()
                .map(|b| b.split(':').next().unwrap_or(""))
                .collect();
            match &sig.generics.lt_token {
                Some(lt) => edits.insert_after(lt.span(), format!("{}, ", names.join(", "))),
                None => edits.insert_after(sig.ident.span(), format!("<{}>", names.join(", "))),
            }
            match &sig.generics.where_clause {
                Some(w) => edits.insert_after(w.span(), format!(", {}", bounds.join(", "))),
                None => {
                    let end = match &sig.output {
                        syn::ReturnType::Type(_, ty) => ty.span(),
                        syn::ReturnType::Default => sig.paren_token.span.close(),
                    };
                    edits.insert_after(end, format!(" where {}", bounds.join(", ")));
                }
            }
        };
        AllFns {
            on_fn: &mut generic,
        }
        .visit_file(file);
    })
}

/// Calls a request builder takes beside its key, by operation: `(right after the operation,
/// right before `.send()`)`. Extra attributes, capacity reports, metadata: none changes what
/// the request claims, checks or needs as a token.
const EXTRA_BUILDER_CALLS: &[(&str, &str, &str)] = &[
    (
        "put_item",
        ".item(\"written_by\", aws_sdk_dynamodb::types::AttributeValue::S(std::env::var(\"HOSTNAME\").unwrap_or_default()))",
        ".return_consumed_capacity(aws_sdk_dynamodb::types::ReturnConsumedCapacity::Total)",
    ),
    (
        "get_item",
        ".return_consumed_capacity(aws_sdk_dynamodb::types::ReturnConsumedCapacity::Total)",
        ".consistent_read(true)",
    ),
    (
        "update_item",
        ".return_consumed_capacity(aws_sdk_dynamodb::types::ReturnConsumedCapacity::Total)",
        ".return_values(aws_sdk_dynamodb::types::ReturnValue::None)",
    ),
    (
        "delete_item",
        ".return_consumed_capacity(aws_sdk_dynamodb::types::ReturnConsumedCapacity::Total)",
        ".return_values(aws_sdk_dynamodb::types::ReturnValue::None)",
    ),
    (
        "transact_write_items",
        ".return_consumed_capacity(aws_sdk_dynamodb::types::ReturnConsumedCapacity::Total)",
        ".return_item_collection_metrics(aws_sdk_dynamodb::types::ReturnItemCollectionMetrics::Size)",
    ),
    ("create_job", ".priority(0)", ".user_metadata(\"source\", \"worker\")"),
    ("send_message", ".delay_seconds(0)", ""),
    ("start_execution", ".trace_header(\"worker\")", ""),
];

/// `ddb.put_item().item(k, v).send()` gets unrelated builder calls right after the
/// operation and right before `.send()` (an extra attribute from the environment, a capacity
/// report, metadata).
pub fn extra_builder_calls(text: &str) -> Option<String> {
    struct Sends<'e, 't> {
        edits: &'e mut Edits<'t>,
    }
    impl<'ast> Visit<'ast> for Sends<'_, '_> {
        fn visit_expr_method_call(&mut self, send: &'ast syn::ExprMethodCall) {
            if send.method == "send" && send.args.is_empty() {
                // Down the chain to the operation: the first call on a non-call receiver.
                let mut op = &*send.receiver;
                while let syn::Expr::MethodCall(m) = op {
                    if !matches!(*m.receiver, syn::Expr::MethodCall(_)) {
                        break;
                    }
                    op = &m.receiver;
                }
                if let syn::Expr::MethodCall(m) = op {
                    let name = m.method.to_string();
                    if let Some((_, after, before)) =
                        EXTRA_BUILDER_CALLS.iter().find(|(n, ..)| *n == name)
                    {
                        self.edits.insert_after(m.span(), *after);
                        if !before.is_empty() && !std::ptr::eq(op, &*send.receiver) {
                            self.edits.insert_after(send.receiver.span(), *before);
                        }
                    }
                }
            }
            visit::visit_expr_method_call(self, send);
        }
    }
    rewrite(text, |file, edits| Sends { edits }.visit_file(file))
}

// ------------------------------------------------------------------ builders from helpers

/// DynamoDB operations whose fluent builder a helper may hand out.
const DYNAMO_OPS: &[&str] = &[
    "get_item",
    "put_item",
    "update_item",
    "delete_item",
    "query",
    "transact_write_items",
];

/// `fooBar` of `foo_bar`.
fn camel(snake: &str) -> String {
    snake
        .split('_')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_uppercase().chain(c).collect::<String>())
                .unwrap_or_default()
        })
        .collect()
}

/// `ddb.put_item().table_name("t")` on a client parameter becomes `put_item_request_0(ddb)`,
/// a helper at the end of the file returning the builder (`fn put_item_request_0(ddb:
/// &Client) -> PutItemFluentBuilder { ddb.put_item().table_name("t") }`); `redis::cmd("SET")`
/// becomes `cmd_0()` returning a `redis::Cmd`. The rest of the chain stays at the call.
pub fn builder_from_helper(text: &str) -> Option<String> {
    let (out, helpers) = {
        let mut helpers = String::new();
        let out = rewrite(text, |file, edits| {
            let mut count = 0;
            let mut extract = |sig: &syn::Signature, block: &syn::Block| {
                let params: Vec<(String, String)> = sig
                    .inputs
                    .iter()
                    .filter_map(|a| match a {
                        syn::FnArg::Typed(t) => match &*t.pat {
                            syn::Pat::Ident(p) if p.subpat.is_none() => {
                                Some((p.ident.to_string(), edits.source(t.ty.span()).to_owned()))
                            }
                            _ => None,
                        },
                        syn::FnArg::Receiver(_) => None,
                    })
                    .collect();
                let mut found: Vec<(Span, String, String)> = Vec::new();
                let mut visit = BuilderCalls {
                    params: &params,
                    found: &mut found,
                    edits,
                };
                visit.visit_block(block);
                for (span, source, kind) in found {
                    let helper = format!("{kind}_request_{count}");
                    count += 1;
                    let (typed, args, ret) = match kind.as_str() {
                        "cmd" => (String::new(), String::new(), "redis::Cmd".to_owned()),
                        op => {
                            let (p, ty) = params
                                .iter()
                                .find(|(p, _)| source.starts_with(&format!("{p}.")))
                                .cloned()
                                .unwrap_or_default();
                            (
                                format!("{p}: {ty}"),
                                p,
                                format!(
                                    "aws_sdk_dynamodb::operation::{op}::builders::{}FluentBuilder",
                                    camel(op)
                                ),
                            )
                        }
                    };
                    // The annotations stay on their lines at the call; the helper has none.
                    helpers.push_str(&format!(
                        "\nfn {helper}({typed}) -> {ret} {{\n    {}\n}}\n",
                        without_annotations(&source)
                    ));
                    let mut lines = annotation_lines(&source);
                    if let Some(first) = lines.first_mut() {
                        *first = format!("{helper}({args}){first}");
                    }
                    edits.replace(span, lines.join("\n"));
                }
            };
            AllFns {
                on_fn: &mut extract,
            }
            .visit_file(file);
        });
        (out, helpers)
    };
    Some(out? + &helpers).filter(|o| syn::parse_file(o).is_ok())
}

/// The builder starts [`builder_from_helper`] moves: `(span, source, kind)`.
struct BuilderCalls<'p, 'f, 'e, 't> {
    params: &'p [(String, String)],
    found: &'f mut Vec<(Span, String, String)>,
    edits: &'e Edits<'t>,
}

impl<'ast> Visit<'ast> for BuilderCalls<'_, '_, '_, '_> {
    fn visit_expr_method_call(&mut self, m: &'ast syn::ExprMethodCall) {
        // `client.op()` on a parameter, with its `.table_name(..)` when that comes next.
        let op = |e: &syn::Expr| -> Option<String> {
            let syn::Expr::MethodCall(call) = e else {
                return None;
            };
            let name = call.method.to_string();
            let on_param = matches!(&*call.receiver, syn::Expr::Path(p)
                if p.path.get_ident().is_some_and(|id| self.params.iter().any(|(n, _)| id == n)));
            (on_param && call.args.is_empty() && DYNAMO_OPS.contains(&name.as_str()))
                .then_some(name)
        };
        if m.method == "table_name" {
            if let Some(name) = op(&m.receiver) {
                let source = self.edits.source(m.span()).to_owned();
                self.found.push((m.span(), source, name));
                return;
            }
        } else if let Some(name) = op(&syn::Expr::MethodCall(m.clone())) {
            let source = self.edits.source(m.span()).to_owned();
            self.found.push((m.span(), source, name));
            return;
        }
        visit::visit_expr_method_call(self, m);
    }

    fn visit_expr_call(&mut self, c: &'ast syn::ExprCall) {
        let is_cmd = matches!(&*c.func, syn::Expr::Path(p)
            if p.path.segments.len() == 2 && p.path.segments[0].ident == "redis" && p.path.segments[1].ident == "cmd");
        let literal = matches!(c.args.first(), Some(syn::Expr::Lit(_))) && c.args.len() == 1;
        if is_cmd && literal {
            let source = self.edits.source(c.span()).to_owned();
            self.found.push((c.span(), source, "cmd".to_owned()));
            return;
        }
        visit::visit_expr_call(self, c);
    }
}

// ------------------------------------------------------------------ crate rewrites

/// `text` with every `word` (a whole identifier, outside string literals) replaced.
fn replace_word(text: &str, word: &str, with: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_str = false;
    let mut prev: Option<char> = None;
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if c == '"' && prev != Some('\\') {
            in_str = !in_str;
        }
        let ident_start = prev.is_none_or(|p| !(p.is_alphanumeric() || p == '_'));
        if !in_str && ident_start && rest.starts_with(word) {
            let after = rest[word.len()..].chars().next();
            if after.is_none_or(|a| !(a.is_alphanumeric() || a == '_')) {
                out.push_str(with);
                rest = &rest[word.len()..];
                prev = word.chars().last();
                continue;
            }
        }
        out.push(c);
        prev = Some(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// How many times `word` occurs as a whole identifier in the crate.
fn word_count(sources: &[(PathBuf, String)], word: &str) -> usize {
    sources
        .iter()
        .map(|(_, t)| replace_word(t, word, "\u{0}").matches('\u{0}').count())
        .sum()
}

/// Where a child module `name` of the module in file `path` lives: `src/lib.rs` ->
/// `src/name.rs`, `src/a.rs` -> `src/a/name.rs`.
fn child_module_path(path: &std::path::Path, name: &str) -> PathBuf {
    let dir = path.parent().unwrap_or(std::path::Path::new("."));
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    if matches!(stem, "lib" | "main" | "mod") {
        dir.join(format!("{name}.rs"))
    } else {
        dir.join(stem).join(format!("{name}.rs"))
    }
}

/// A file with items added in a new child module `name`: `mod name;` at the end of the file
/// (no line above moves) and the module's file, which sees the parent's names through `use
/// super::*;`. `None` when the file is there already or the result does not parse.
fn with_child_module(
    out: &mut Sources,
    path: &std::path::Path,
    text: String,
    name: &str,
    items: &str,
    glob_use: bool,
) -> Option<()> {
    let child = child_module_path(path, name);
    if out.iter().any(|(p, _)| *p == child) {
        return None;
    }
    // A trait's methods are called by name: its module's items are brought in.
    let glob = if glob_use {
        format!("use {name}::*;\n")
    } else {
        String::new()
    };
    let text = format!("{text}\nmod {name};\n{glob}");
    let module = format!("#![allow(unused_imports, non_camel_case_types)]\nuse super::*;\n{items}");
    syn::parse_file(&text).ok()?;
    syn::parse_file(&module).ok()?;
    out.iter_mut().find(|(p, _)| p == path)?.1 = text;
    out.push((child, module));
    Some(())
}

// ------------------------------------------------------------------ key helpers

/// Where [`extract_keys`] puts a key helper.
#[derive(Clone, Copy, PartialEq)]
enum KeyPlace {
    /// At the end of the same file.
    SameFile,
    /// In a child module in its own file; `deep`: the helper calls a second helper there.
    Module { deep: bool },
    /// A method of the message type (`msg.key_of_0()`), in a child module's file.
    MessageMethod,
}

/// The `let key = format!(..)` statements of fns whose names are all the fn's parameters
/// become calls of helpers; returns the edited file and the helpers' text.
fn extract_keys(text: &str, place: KeyPlace, module: &str) -> Option<(String, String)> {
    let mut helpers = String::new();
    let out = rewrite(text, |file, edits| {
        let mut count = 0;
        let mut extract = |sig: &syn::Signature, block: &syn::Block| {
            let params: Vec<(String, String)> = sig
                .inputs
                .iter()
                .filter_map(|a| match a {
                    syn::FnArg::Typed(t) => match &*t.pat {
                        syn::Pat::Ident(p) if p.subpat.is_none() => {
                            Some((p.ident.to_string(), edits.source(t.ty.span()).to_owned()))
                        }
                        _ => None,
                    },
                    syn::FnArg::Receiver(_) => None,
                })
                .collect();
            for stmt in &block.stmts {
                let syn::Stmt::Local(syn::Local {
                    pat: syn::Pat::Ident(name),
                    init: Some(init),
                    ..
                }) = stmt
                else {
                    continue;
                };
                let syn::Expr::Macro(m) = &*init.expr else {
                    continue;
                };
                if init.diverge.is_some() || !m.mac.path.is_ident("format") {
                    continue;
                }
                let Some(used) = names_used(&m.mac.tokens, &params) else {
                    continue;
                };
                let helper = format!("{}_of_{count}", name.ident);
                let (args, typed): (Vec<&str>, Vec<String>) = params
                    .iter()
                    .filter(|(p, _)| used.contains(p))
                    .map(|(p, ty)| (p.as_str(), format!("{p}: {ty}")))
                    .unzip();
                let (args, typed) = (args.join(", "), typed.join(", "));
                let body = edits.source(init.expr.span());
                let call = match place {
                    KeyPlace::SameFile => {
                        helpers.push_str(&format!(
                            "\nfn {helper}({typed}) -> String {{\n    {body}\n}}\n"
                        ));
                        format!("{helper}({args})")
                    }
                    KeyPlace::Module { deep: false } => {
                        helpers.push_str(&format!(
                            "\npub(crate) fn {helper}({typed}) -> String {{\n    {body}\n}}\n"
                        ));
                        format!("{module}::{helper}({args})")
                    }
                    KeyPlace::Module { deep: true } => {
                        helpers.push_str(&format!(
                            "\npub(crate) fn {helper}({typed}) -> String {{\n    {helper}_text({args})\n}}\n\nfn {helper}_text({typed}) -> String {{\n    {body}\n}}\n"
                        ));
                        format!("{module}::{helper}({args})")
                    }
                    KeyPlace::MessageMethod => {
                        // Only a key of one parameter of a named type, never named inside
                        // the format string (`{msg}` cannot become `{self}`).
                        let [(p, ty)] = params
                            .iter()
                            .filter(|(p, _)| used.contains(p))
                            .collect::<Vec<_>>()[..]
                        else {
                            continue;
                        };
                        let ty = ty.trim_start_matches('&').trim();
                        let named = ty.chars().all(|c| c.is_alphanumeric() || c == '_')
                            && ty.starts_with(|c: char| c.is_uppercase());
                        let lits = body.split('"').skip(1).step_by(2);
                        if !named || lits.clone().any(|l| l.contains(&format!("{{{p}"))) {
                            continue;
                        }
                        helpers.push_str(&format!(
                            "\nimpl {ty} {{\n    pub(crate) fn {helper}(&self) -> String {{\n        {}\n    }}\n}}\n",
                            replace_word(body, p, "self")
                        ));
                        format!("{p}.{helper}()")
                    }
                };
                count += 1;
                edits.replace(init.expr.span(), call);
            }
        };
        AllFns {
            on_fn: &mut extract,
        }
        .visit_file(file);
    })?;
    Some((out, helpers))
}

/// `let key = format!("processed:{}", msg.id);` in a fn taking `msg: &Msg` becomes `let key =
/// key_of_0(msg);` with `fn key_of_0(msg: &Msg) -> String { format!("processed:{}", msg.id) }`
/// added at the end of the file (so no line above moves). Only a `format!` whose names are
/// all the fn's own parameters is moved.
pub fn key_from_helper(text: &str) -> Option<String> {
    let (out, helpers) = extract_keys(text, KeyPlace::SameFile, "")?;
    Some(out + &helpers).filter(|o| syn::parse_file(o).is_ok())
}

/// Every file's keys (as [`key_from_helper`]) moved to helpers in a child module
/// `key_helpers` in its own file, called as `key_helpers::key_of_0(msg)`; with `deep`, that
/// helper calls a second one which builds the key.
fn keys_in_module(sources: &[(PathBuf, String)], place: KeyPlace) -> Option<Sources> {
    let mut out: Sources = sources.to_vec();
    let mut changed = false;
    for (path, text) in sources {
        let Some((edited, helpers)) = extract_keys(text, place, "key_helpers") else {
            continue;
        };
        if helpers.is_empty() {
            continue;
        }
        changed |=
            with_child_module(&mut out, path, edited, "key_helpers", &helpers, false).is_some();
    }
    changed.then_some(out)
}

pub fn key_helper_in_module(sources: &[(PathBuf, String)]) -> Option<Sources> {
    keys_in_module(sources, KeyPlace::Module { deep: false })
}

pub fn key_helper_two_deep(sources: &[(PathBuf, String)]) -> Option<Sources> {
    keys_in_module(sources, KeyPlace::Module { deep: true })
}

/// The key a method of the message type: `msg.key_of_0()`, the `impl Msg` in another file.
pub fn key_method_on_message(sources: &[(PathBuf, String)]) -> Option<Sources> {
    keys_in_module(sources, KeyPlace::MessageMethod)
}

// ------------------------------------------------------------------ step helpers

/// Where [`extract_steps`] puts a store step or an effect.
#[derive(Clone, Copy, PartialEq)]
enum StepPlace {
    /// A fn of a child module in its own file; `deep`: it calls a second fn there that runs
    /// the step.
    Module { deep: bool },
    /// A method of an extension trait on the client's type (`conn.step_0(&key)`), the trait
    /// and its impl in a child module's file.
    ExtensionTrait,
}

/// The lower-case names a statement's tokens use as values (not methods after `.`, not
/// path roots before `::`, not fns or macros called by name, not field labels), or `None`
/// when it uses `self` or a closure.
fn value_names(tokens: TokenStream) -> Option<Vec<String>> {
    let tts: Vec<TokenTree> = tokens.into_iter().collect();
    let mut out = Vec::new();
    let punct = |j: Option<usize>| match j.and_then(|j| tts.get(j)) {
        Some(TokenTree::Punct(p)) => Some(p.as_char()),
        _ => None,
    };
    for (i, tt) in tts.iter().enumerate() {
        match tt {
            TokenTree::Ident(id) => {
                let name = id.to_string();
                if matches!(name.as_str(), "self" | "Self" | "move") {
                    return None;
                }
                let after_dot_or_path = matches!(punct(i.checked_sub(1)), Some('.' | ':'));
                let next = punct(Some(i + 1));
                let called = matches!(tts.get(i + 1), Some(TokenTree::Group(g)) if g.delimiter() == proc_macro2::Delimiter::Parenthesis);
                let keyword = matches!(
                    name.as_str(),
                    "let"
                        | "mut"
                        | "ref"
                        | "as"
                        | "true"
                        | "false"
                        | "await"
                        | "async"
                        | "if"
                        | "else"
                        | "match"
                        | "in"
                        | "for"
                        | "return"
                );
                if !after_dot_or_path
                    && !called
                    && !keyword
                    && !matches!(next, Some(':' | '!'))
                    && name.starts_with(|c: char| c.is_lowercase() || c == '_')
                    && name != "_"
                {
                    out.push(name);
                }
            }
            TokenTree::Group(g) => out.extend(value_names(g.stream())?),
            TokenTree::Punct(p) if p.as_char() == '|' => return None,
            _ => {}
        }
    }
    Some(out)
}

/// `text` without its `//~` annotations.
fn without_annotations(text: &str) -> String {
    text.lines()
        .map(|l| l.split("//~").next().unwrap_or(l).trim_end())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The `//~` annotations of each line of `text`, one line each (empty when none).
fn annotation_lines(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| {
            l.find("//~")
                .map_or(String::new(), |i| format!(" {}", &l[i..]))
        })
        .collect()
}

/// A statement that runs a step and drops its value: `E.await?;`, `let _: T = E.await?;`,
/// `E.await;`. Returns whether it has a `?`.
fn step_statement(stmt: &syn::Stmt) -> Option<bool> {
    let (expr, dropped) = match stmt {
        syn::Stmt::Expr(e, Some(_)) => (e, true),
        syn::Stmt::Local(syn::Local {
            pat,
            init: Some(init),
            ..
        }) if init.diverge.is_none() => {
            let wild = match pat {
                syn::Pat::Wild(_) => true,
                syn::Pat::Type(t) => matches!(*t.pat, syn::Pat::Wild(_)),
                _ => false,
            };
            (&*init.expr, wild)
        }
        _ => return None,
    };
    if !dropped {
        return None;
    }
    match expr {
        syn::Expr::Try(t) if matches!(*t.expr, syn::Expr::Await(_)) => Some(true),
        syn::Expr::Await(a) if matches!(*a.base, syn::Expr::Call(_) | syn::Expr::MethodCall(_)) => {
            Some(false)
        }
        _ => None,
    }
}

/// The store writes and effects of async fns (statements of the fn body that await a call
/// and drop its value) moved into helpers of a child module `steps` in its own file; the
/// statement becomes a call of its helper, on the statement's first line, the annotations
/// kept on their lines. A step whose names are not all parameters of the fn (or keys built
/// by `format!` in it) stays.
/// `prefix` names the helpers apart from other files' (`step_balance_0`): two extension
/// traits with one method name on one type would be ambiguous.
fn extract_steps(text: &str, place: StepPlace, prefix: &str) -> Option<(String, String)> {
    let mut helpers = String::new();
    let out = rewrite(text, |file, edits| {
        let mut count = 0;
        let mut extract = |sig: &syn::Signature, block: &syn::Block| {
            if sig.asyncness.is_none() {
                return;
            }
            let output = match &sig.output {
                syn::ReturnType::Type(_, ty) => edits.source(ty.span()).to_owned(),
                syn::ReturnType::Default => String::new(),
            };
            // A helper with `?` returns the fn's own `Result<(), E>`.
            let unit_result = output.contains("Result") && output.contains("()");
            // A parameter typed by the fn's own type parameters stays: the helper has none.
            let generics: Vec<String> = sig
                .generics
                .type_params()
                .map(|t| t.ident.to_string())
                .collect();
            let generic = |ty: &str| {
                generics
                    .iter()
                    .any(|g| replace_word(ty, g, "\u{0}").contains('\u{0}'))
            };
            let mut known: Vec<(String, String, bool)> = sig
                .inputs
                .iter()
                .filter_map(|a| match a {
                    syn::FnArg::Typed(t) => match &*t.pat {
                        syn::Pat::Ident(p) if p.subpat.is_none() => {
                            let ty = edits.source(t.ty.span()).to_owned();
                            if generic(&ty) {
                                return None;
                            }
                            let client = matches!(&*t.ty, syn::Type::Reference(r)
                                if matches!(&*r.elem, syn::Type::Path(tp)
                                    if tp.path.segments.last().is_some_and(|s| CLIENT_TYPES.contains(&s.ident.to_string().as_str()))));
                            Some((p.ident.to_string(), ty, client))
                        }
                        _ => None,
                    },
                    syn::FnArg::Receiver(_) => None,
                })
                .collect();
            for stmt in &block.stmts {
                if let syn::Stmt::Local(syn::Local {
                    pat: syn::Pat::Ident(name),
                    init: Some(init),
                    ..
                }) = stmt
                {
                    if matches!(&*init.expr, syn::Expr::Macro(m) if m.mac.path.is_ident("format")) {
                        known.push((name.ident.to_string(), "&str".into(), false));
                    }
                    continue;
                }
                let Some(tried) = step_statement(stmt) else {
                    continue;
                };
                if tried && !unit_result {
                    continue;
                }
                let Some(names) = value_names(quote::quote!(#stmt)) else {
                    continue;
                };
                let mut used: Vec<&(String, String, bool)> = Vec::new();
                let mut ok = true;
                for n in &names {
                    match known.iter().find(|(k, ..)| k == n) {
                        Some(k) if !used.iter().any(|u| u.0 == k.0) => used.push(k),
                        Some(_) => {}
                        None => ok = false,
                    }
                }
                if !ok || used.is_empty() {
                    continue;
                }
                let source = edits.source(stmt.span()).to_owned();
                let body = without_annotations(&source);
                let ret = if tried {
                    format!(" -> {output}")
                } else {
                    String::new()
                };
                let tail = if tried { "\n    Ok(())" } else { "" };
                let helper = format!("step_{prefix}_{count}");
                let call = match place {
                    StepPlace::Module { deep } => {
                        let typed: Vec<String> =
                            used.iter().map(|(n, t, _)| format!("{n}: {t}")).collect();
                        let args: Vec<&str> = used.iter().map(|(n, ..)| n.as_str()).collect();
                        let (typed, args) = (typed.join(", "), args.join(", "));
                        if deep {
                            helpers.push_str(&format!(
                                "\npub(crate) async fn {helper}({typed}){ret} {{\n    {helper}_run({args}).await\n}}\n\nasync fn {helper}_run({typed}){ret} {{\n    {body}{tail}\n}}\n"
                            ));
                        } else {
                            helpers.push_str(&format!(
                                "\npub(crate) async fn {helper}({typed}){ret} {{\n    {body}{tail}\n}}\n"
                            ));
                        }
                        format!("steps::{helper}({args}).await")
                    }
                    StepPlace::ExtensionTrait => {
                        let Some(client) = used.iter().find(|(.., c)| *c) else {
                            continue;
                        };
                        let recv_ty = client.1.trim_start_matches('&').trim();
                        let (receiver, ty) = match recv_ty.strip_prefix("mut ") {
                            Some(ty) => ("&mut self", ty.trim()),
                            None => ("&self", recv_ty),
                        };
                        let others: Vec<&&(String, String, bool)> =
                            used.iter().filter(|u| u.0 != client.0).collect();
                        let typed: String = others
                            .iter()
                            .map(|(n, t, _)| format!(", {n}: {t}"))
                            .collect();
                        let args: Vec<&str> = others.iter().map(|(n, ..)| n.as_str()).collect();
                        let body = replace_word(&body, &client.0, "self");
                        let tr = format!("Steps_{prefix}_{count}");
                        helpers.push_str(&format!(
                            "\npub(crate) trait {tr} {{\n    async fn {helper}({receiver}{typed}){ret};\n}}\n\nimpl {tr} for {ty} {{\n    async fn {helper}({receiver}{typed}){ret} {{\n        {body}{tail}\n    }}\n}}\n"
                        ));
                        format!("{}.{helper}({}).await", client.0, args.join(", "))
                    }
                };
                count += 1;
                let mut lines = annotation_lines(&source);
                let question = if tried { "?" } else { "" };
                if let Some(first) = lines.first_mut() {
                    *first = format!("{call}{question};{first}");
                }
                edits.replace(stmt.span(), lines.join("\n"));
            }
        };
        AllFns {
            on_fn: &mut extract,
        }
        .visit_file(file);
    })?;
    Some((out, helpers))
}

fn steps_in_module(sources: &[(PathBuf, String)], place: StepPlace) -> Option<Sources> {
    let mut out: Sources = sources.to_vec();
    let mut changed = false;
    for (path, text) in sources {
        let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("file");
        let Some((edited, helpers)) = extract_steps(text, place, stem) else {
            continue;
        };
        if helpers.is_empty() {
            continue;
        }
        let glob = place == StepPlace::ExtensionTrait;
        changed |= with_child_module(&mut out, path, edited, "steps", &helpers, glob).is_some();
    }
    changed.then_some(out)
}

/// Writes and effects moved into fns of a child module in another file.
pub fn step_helper_in_module(sources: &[(PathBuf, String)]) -> Option<Sources> {
    steps_in_module(sources, StepPlace::Module { deep: false })
}

/// The same, two calls deep.
pub fn step_helper_two_deep(sources: &[(PathBuf, String)]) -> Option<Sources> {
    steps_in_module(sources, StepPlace::Module { deep: true })
}

/// Writes and effects on a client moved into methods of an extension trait on the client's
/// type, trait and impl in another file: `conn.step_0(&key).await?`.
pub fn step_extension_trait(sources: &[(PathBuf, String)]) -> Option<Sources> {
    steps_in_module(sources, StepPlace::ExtensionTrait)
}

// ------------------------------------------------------------------ moved clients

/// The last path segment of the clients and connections a handler is handed.
const CLIENT_TYPES: &[&str] = &[
    "Client",
    "PgPool",
    "MySqlPool",
    "Pool",
    "ConnectionManager",
    "MultiplexedConnection",
    "DatabaseConnection",
];

/// A client parameter `name: &T` or `name: &mut T`.
struct ClientParam {
    name: String,
    ty: String,
    mutable: bool,
}

/// Where a moved client lives.
#[derive(Clone, Copy, PartialEq)]
enum ClientHome {
    /// A field of a service struct the fn becomes a method of (`self.ddb`).
    SelfField,
    /// The same, the field an `Arc<T>`.
    ArcField,
    /// A `once_cell::sync::OnceCell<T>` static.
    Static,
}

/// The client parameters of a fn, with the spans to remove them by (the argument and its
/// comma).
fn client_params(sig: &syn::Signature) -> Vec<(ClientParam, Span, Option<Span>)> {
    let mut out = Vec::new();
    for pair in sig.inputs.pairs() {
        let syn::FnArg::Typed(t) = pair.value() else {
            continue;
        };
        let (syn::Pat::Ident(p), syn::Type::Reference(r)) = (&*t.pat, &*t.ty) else {
            continue;
        };
        let syn::Type::Path(ty) = &*r.elem else {
            continue;
        };
        let last = ty.path.segments.last().map(|s| s.ident.to_string());
        if last.is_some_and(|l| CLIENT_TYPES.contains(&l.as_str())) && p.subpat.is_none() {
            let param = ClientParam {
                name: p.ident.to_string(),
                ty: quote::quote!(#ty).to_string().replace(" ", ""),
                mutable: r.mutability.is_some(),
            };
            out.push((param, t.span(), pair.punct().map(|c| c.span())));
        }
    }
    out
}

/// Replaces the uses of client parameters in a fn body: as a method's receiver by
/// `receiver`, elsewhere by `other`.
struct ClientUses<'e, 't, 'p> {
    edits: &'e mut Edits<'t>,
    /// `(name, receiver form, other form)`.
    params: &'p [(String, String, String)],
}

impl ClientUses<'_, '_, '_> {
    fn find(&self, e: &syn::Expr) -> Option<&(String, String, String)> {
        let syn::Expr::Path(p) = e else {
            return None;
        };
        let id = p.path.get_ident()?.to_string();
        self.params.iter().find(|(n, ..)| *n == id)
    }

    fn tokens(&mut self, tokens: TokenStream) {
        let mut prev: Option<char> = None;
        for tt in tokens {
            match &tt {
                TokenTree::Ident(id) if !matches!(prev, Some('.' | ':')) => {
                    if let Some((_, _, other)) = self.params.iter().find(|(n, ..)| id == n.as_str())
                    {
                        self.edits.replace(id.span(), other.clone());
                    }
                }
                TokenTree::Group(g) => self.tokens(g.stream()),
                _ => {}
            }
            prev = match &tt {
                TokenTree::Punct(p) => Some(p.as_char()),
                _ => None,
            };
        }
    }
}

impl<'ast> Visit<'ast> for ClientUses<'_, '_, '_> {
    fn visit_expr_method_call(&mut self, m: &'ast syn::ExprMethodCall) {
        if let Some((_, receiver, _)) = self.find(&m.receiver) {
            self.edits.replace(m.receiver.span(), receiver.clone());
        }
        visit::visit_expr_method_call(self, m);
    }

    fn visit_expr(&mut self, e: &'ast syn::Expr) {
        if let Some((_, _, other)) = self.find(e) {
            self.edits.replace(e.span(), other.clone());
        }
        visit::visit_expr(self, e);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.tokens(m.tokens.clone());
    }
}

/// Every top-level fn handed a client (`ddb: &Client`, `conn: &mut ConnectionManager`,
/// `pool: &PgPool`) that nothing in the crate calls (a handler, an entry point: no caller
/// changes) gets it from `home` instead of a parameter.
fn move_clients(sources: &[(PathBuf, String)], home: ClientHome) -> Option<Sources> {
    let mut out: Sources = sources.to_vec();
    let mut changed = false;
    for (i, (_, text)) in sources.iter().enumerate() {
        let edited = rewrite(text, |file, edits| {
            let mut statics = String::new();
            for (n, item) in file.items.iter().enumerate() {
                let syn::Item::Fn(f) = item else {
                    continue;
                };
                let name = f.sig.ident.to_string();
                let params = client_params(&f.sig);
                if params.is_empty() || word_count(sources, &name) != 1 {
                    continue;
                }
                let mutable = params.iter().any(|(p, ..)| p.mutable);
                let service = format!("Service{n}");
                let mut fields = Vec::new();
                let mut forms = Vec::new();
                let mut opening = String::new();
                for (p, arg, comma) in &params {
                    edits.replace(*arg, "");
                    if let Some(c) = comma {
                        edits.replace(*c, "");
                    }
                    let (field, refer) = (&p.name, if p.mutable { "&mut " } else { "&" });
                    match home {
                        ClientHome::SelfField | ClientHome::ArcField => {
                            let ty = match home {
                                ClientHome::ArcField => format!("std::sync::Arc<{}>", p.ty),
                                _ => p.ty.clone(),
                            };
                            fields.push(format!("{field}: {ty}"));
                            forms.push((
                                p.name.clone(),
                                format!("self.{field}"),
                                format!("{refer}self.{field}"),
                            ));
                        }
                        ClientHome::Static => {
                            let global = format!("{}_{}", name, p.name).to_uppercase();
                            statics.push_str(&format!(
                                "\nstatic {global}: once_cell::sync::OnceCell<{}> = once_cell::sync::OnceCell::new();\n",
                                p.ty
                            ));
                            let got = format!("{global}.get().expect(\"set at startup\")");
                            if p.mutable {
                                opening.push_str(&format!(
                                    " let mut {field}_owned = {got}.clone(); let {field} = &mut {field}_owned;"
                                ));
                            } else {
                                forms.push((p.name.clone(), got.clone(), got));
                            }
                        }
                    }
                }
                ClientUses {
                    edits,
                    params: &forms,
                }
                .visit_block(&f.block);
                if !opening.is_empty() {
                    edits.insert_after(f.block.brace_token.span.open(), opening);
                }
                if home != ClientHome::Static {
                    let receiver = if mutable { "&mut self, " } else { "&self, " };
                    edits.insert_after(f.sig.paren_token.span.open(), receiver);
                    edits.insert_before(
                        f.span(),
                        format!(
                            "pub struct {service} {{ {} }} impl {service} {{ ",
                            fields.join(", ")
                        ),
                    );
                    edits.insert_after(f.span(), " }");
                }
            }
            if let (false, Some(last)) = (statics.is_empty(), file.items.last()) {
                edits.insert_after(last.span(), statics);
            }
        });
        if let Some(edited) = edited {
            out[i].1 = edited;
            changed = true;
        }
    }
    changed.then_some(out)
}

pub fn client_in_self_field(sources: &[(PathBuf, String)]) -> Option<Sources> {
    move_clients(sources, ClientHome::SelfField)
}

pub fn client_in_arc_field(sources: &[(PathBuf, String)]) -> Option<Sources> {
    move_clients(sources, ClientHome::ArcField)
}

pub fn client_in_static(sources: &[(PathBuf, String)]) -> Option<Sources> {
    move_clients(sources, ClientHome::Static)
}

// ------------------------------------------------------------------ binding forms

/// Every `let x = init;` (one name, no type, no `else`) becomes `let (x, _) = (init, ());`:
/// the same binding through a tuple pattern, so the name is the same value.
pub fn let_through_tuple(text: &str) -> Option<String> {
    rewrite(text, |file, edits| {
        each_fn_block(file, |b| {
            for stmt in &b.stmts {
                let syn::Stmt::Local(local) = stmt else {
                    continue;
                };
                let (syn::Pat::Ident(id), Some(init)) = (&local.pat, &local.init) else {
                    continue;
                };
                if id.subpat.is_some() || id.by_ref.is_some() || init.diverge.is_some() {
                    continue;
                }
                edits.replace(id.span(), format!("({}, _)", edits.source(id.span())));
                edits.insert_before(init.expr.span(), "(");
                edits.insert_after(init.expr.span(), ", ())");
            }
        });
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "async fn f(ddb: &Client, id: &str) -> Result<(), E> {
    let out = ddb
        .get_item()
        .key(\"pk\", id)
        .send()
        .await?;
    if out.item().is_some() {
        return Ok(());
    }
    ddb.put_item() //~ WARN check_then_act
        .item(\"pk\", id)
        .send()
        .await?;
    Ok(())
}
";

    #[test]
    fn every_rewrite_keeps_the_sample_parsing_and_its_lines() {
        for rule in ALL {
            let Apply::File(apply) = rule.apply else {
                continue;
            };
            if let Some(out) = apply(SAMPLE) {
                assert!(syn::parse_file(&out).is_ok(), "{}: {out}", rule.name);
                assert_eq!(out.lines().count(), SAMPLE.lines().count(), "{}", rule.name);
                assert!(out.contains("//~ WARN check_then_act"), "{}", rule.name);
            }
        }
    }

    #[test]
    fn if_let_else_becomes_a_match_on_its_lines() {
        let src = "fn f(given: Option<String>) -> String {\n    let k = if let Some(k) = given { k } else { mint() };\n    k\n}\n";
        let out = if_let_as_match(src).expect("one if let");
        assert!(
            out.contains("let k = match given { Some(k) => { k } _ => { mint() } };"),
            "{out}"
        );
        // Without an `else` there is nothing to choose between.
        assert_eq!(
            if_let_as_match("fn f(x: Option<u8>) { if let Some(v) = x { g(v); } }"),
            None
        );
    }

    #[test]
    fn builder_chains_are_split_on_their_lines() {
        let out = split_builder_chain(SAMPLE).expect("two chains to split");
        assert!(
            out.contains("let request = ddb\n        .get_item()"),
            "{out}"
        );
        assert!(
            out.contains(".key(\"pk\", id); let out = request\n"),
            "{out}"
        );
        assert!(
            out.contains("let request = ddb.put_item() //~ WARN check_then_act"),
            "{out}"
        );
        assert!(
            out.contains(".item(\"pk\", id); request\n        .send()"),
            "{out}"
        );
        assert_eq!(out.lines().count(), SAMPLE.lines().count());
    }
    #[test]
    fn option_tests_become_if_let_and_let_else() {
        let out = if_let_some(SAMPLE).expect("an `is_some` test");
        assert!(out.contains("if let Some(_) = out.item() {"), "{out}");
        let out = let_else_none(SAMPLE).expect("an `is_some` test that returns");
        assert!(out.contains("let None = out.item() else {"), "{out}");
        assert!(out.contains("return Ok(());\n    };"), "{out}");
    }

    #[test]
    fn early_returns_become_continue_in_a_batch_loop() {
        let out = continue_in_batch(SAMPLE).expect("an early return");
        assert!(out.contains("{ for _item in [()] {"), "{out}");
        assert!(out.contains("continue;"), "{out}");
        assert!(out.contains("} Ok(())"), "{out}");
        assert!(!out.contains("return"), "{out}");
    }

    #[test]
    fn bodies_are_wrapped_in_a_task_and_a_retry_closure() {
        let out = tokio_spawn_body(SAMPLE).expect("an async fn");
        assert!(out.contains("{ tokio::spawn(async move {"), "{out}");
        assert!(out.contains("}).await.expect(\"the task ran\") }"), "{out}");
        let out = retry_closure_body(SAMPLE).expect("an async fn");
        assert!(out.contains("{ with_retry(|| async move {"), "{out}");
    }

    #[test]
    fn tracing_is_added_to_fns_and_awaits() {
        let out = instrument_attribute(SAMPLE).expect("a fn");
        assert!(
            out.starts_with("#[tracing::instrument(skip_all)] async fn f"),
            "{out}"
        );
        let out = instrument_on_await(SAMPLE).expect("awaited calls");
        assert!(
            out.contains(".send().instrument(tracing::Span::current())\n        .await"),
            "{out}"
        );
        let out = context_after_await(SAMPLE).expect("awaited `?`s");
        assert!(out.contains(".await.context(\"store step\")?;"), "{out}");
    }

    #[test]
    fn redis_connections_become_impl_trait() {
        let out = impl_trait_conn("async fn f(conn: &mut ConnectionManager) {}\n")
            .expect("a connection parameter");
        assert_eq!(
            out,
            "async fn f(conn: &mut impl redis::aio::ConnectionLike) {}\n"
        );
    }
}
