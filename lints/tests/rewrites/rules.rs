//! The rewrites, one function each: a source file in, the same program written another way
//! out (`None` when the file has nothing the rewrite applies to). Each finds its places with
//! a `syn` visitor and edits the text there ([`Edits`]), keeping lines, so the `//~`
//! annotations still sit on the line of the finding. To add one: write `fn(&str) ->
//! Option<String>` and list it in [`ALL`].

use crate::edit::Edits;
use idem_lints::catalog::sinks::SinkCatalog;
use proc_macro2::{Span, TokenStream, TokenTree};
use std::collections::HashSet;
use syn::spanned::Spanned;
use syn::visit::{self, Visit};

pub struct Rewrite {
    pub name: &'static str,
    pub apply: fn(&str) -> Option<String>,
}

pub const ALL: &[Rewrite] = &[
    Rewrite {
        name: "rename_bindings",
        apply: rename_bindings,
    },
    Rewrite {
        name: "alias_imports",
        apply: alias_imports,
    },
    Rewrite {
        name: "full_paths",
        apply: full_paths,
    },
    Rewrite {
        name: "logging_between_steps",
        apply: logging_between_steps,
    },
    Rewrite {
        name: "comments_and_attributes",
        apply: comments_and_attributes,
    },
    Rewrite {
        name: "async_move_body",
        apply: async_move_body,
    },
    Rewrite {
        name: "check_in_a_bool",
        apply: check_in_a_bool,
    },
    Rewrite {
        name: "if_as_match",
        apply: if_as_match,
    },
    Rewrite {
        name: "map_err_after_await",
        apply: map_err_after_await,
    },
    Rewrite {
        name: "negated_if",
        apply: negated_if,
    },
    Rewrite {
        name: "try_as_match",
        apply: try_as_match,
    },
    Rewrite {
        name: "split_builder_chain",
        apply: split_builder_chain,
    },
    Rewrite {
        name: "redis_conn_from_pool",
        apply: redis_conn_from_pool,
    },
    Rewrite {
        name: "key_from_helper",
        apply: key_from_helper,
    },
    Rewrite {
        name: "instrument_attribute",
        apply: instrument_attribute,
    },
    Rewrite {
        name: "context_after_await",
        apply: context_after_await,
    },
    Rewrite {
        name: "instrument_on_await",
        apply: instrument_on_await,
    },
    Rewrite {
        name: "if_let_some",
        apply: if_let_some,
    },
    Rewrite {
        name: "let_else_none",
        apply: let_else_none,
    },
    Rewrite {
        name: "tokio_spawn_body",
        apply: tokio_spawn_body,
    },
    Rewrite {
        name: "retry_closure_body",
        apply: retry_closure_body,
    },
    Rewrite {
        name: "impl_trait_conn",
        apply: impl_trait_conn,
    },
    Rewrite {
        name: "continue_in_batch",
        apply: continue_in_batch,
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

/// `let key = format!("processed:{}", msg.id);` in a fn taking `msg: &Msg` becomes `let key =
/// key_of_0(msg);` with `fn key_of_0(msg: &Msg) -> String { format!("processed:{}", msg.id) }`
/// added at the end of the file (so no line above moves). Only a `format!` whose names are
/// all the fn's own parameters is moved.
pub fn key_from_helper(text: &str) -> Option<String> {
    rewrite(text, |file, edits| {
        let mut helpers = String::new();
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
                count += 1;
                let (args, typed): (Vec<&str>, Vec<String>) = params
                    .iter()
                    .filter(|(p, _)| used.contains(p))
                    .map(|(p, ty)| (p.as_str(), format!("{p}: {ty}")))
                    .unzip();
                helpers.push_str(&format!(
                    "\nfn {helper}({}) -> String {{\n    {}\n}}\n",
                    typed.join(", "),
                    edits.source(init.expr.span())
                ));
                edits.replace(init.expr.span(), format!("{helper}({})", args.join(", ")));
            }
        };
        AllFns {
            on_fn: &mut extract,
        }
        .visit_file(file);
        if let (false, Some(last)) = (helpers.is_empty(), file.items.last()) {
            edits.insert_after(last.span(), helpers);
        }
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
            if let Some(out) = (rule.apply)(SAMPLE) {
                assert!(syn::parse_file(&out).is_ok(), "{}: {out}", rule.name);
                assert_eq!(out.lines().count(), SAMPLE.lines().count(), "{}", rule.name);
                assert!(out.contains("//~ WARN check_then_act"), "{}", rule.name);
            }
        }
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
