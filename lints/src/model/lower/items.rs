//! Lowering items: modules, `use` trees, fns, impls, consts, attributes and doc
//! comments, and which items are test code.

use super::*;

/// `prefix` and then `last`, allocated once at its final size.
pub(super) fn with_last(prefix: &[String], last: String) -> Vec<String> {
    let mut path = Vec::with_capacity(prefix.len() + 1);
    path.extend_from_slice(prefix);
    path.push(last);
    path
}

/// The path of `#[cfg_attr(predicate, path = "x.rs")]`.
pub(super) fn cfg_attr_path(a: &syn::Attribute) -> Option<String> {
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
pub(super) fn item_prefix_start(tts: &[proc_macro2::TokenTree], at: usize) -> usize {
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
pub(super) fn item_include(mac: &syn::Macro) -> Option<String> {
    if mac.path.segments.last()?.ident != "include" {
        return None;
    }
    let lit: syn::LitStr = mac.parse_body().ok()?;
    Some(lit.value())
}

pub(super) fn macro_items(mac: &syn::Macro) -> Option<Vec<syn::Item>> {
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

pub(super) fn visibility(v: &syn::Visibility) -> Visibility {
    match v {
        syn::Visibility::Public(_) => Visibility::Public,
        syn::Visibility::Restricted(_) => Visibility::Restricted,
        syn::Visibility::Inherited => Visibility::Private,
    }
}

/// Whether `attrs` make a fn test code: a test attribute as `tests` resolves it (see
/// [`TestAttrs`]), or a `#[cfg(..)]` that holds in test builds only.
pub(in crate::model) fn is_test_fn(attrs: &[syn::Attribute], tests: &TestAttrs) -> bool {
    attrs
        .iter()
        .any(|a| tests.is_test(a.path()) || is_cfg_test_attr(a))
}

pub(in crate::model) fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(is_cfg_test_attr)
}

/// `#[cfg(P)]` where `P` holds in test builds only: `test`, `all(.., test, ..)`, or an
/// `any(..)` each of whose branches does (never `not(test)`).
pub(super) fn is_cfg_test_attr(a: &syn::Attribute) -> bool {
    a.path().is_ident("cfg") && a.parse_args::<syn::Meta>().is_ok_and(|p| only_in_tests(&p))
}

pub(super) fn only_in_tests(predicate: &syn::Meta) -> bool {
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

impl Lowerer<'_> {
    pub(super) fn items(
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

    pub(super) fn item(
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
    pub(super) fn block_items(
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
    pub(super) fn const_def(
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

    pub(super) fn named(
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

    pub(super) fn impl_block(
        &mut self,
        imp: &syn::ItemImpl,
        module: &ModulePath,
        in_test: bool,
        _span: Span,
    ) {
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

    pub(super) fn mod_item(
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
    pub(super) fn macro_mods(
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

    pub(super) fn use_tree(
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
    pub(super) fn fn_def(
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
    pub(super) fn attrs_of(&mut self, a: &syn::Attribute, out: &mut Vec<Attr>) {
        let bounds = expr_span::attr_bounds(a);
        match self.docs.docs_at(bounds.0) {
            Some(docs) => out.extend(docs.iter().map(|d| self.doc_comment(d))),
            None => out.push(self.attr(a, bounds)),
        }
    }

    /// A doc comment, as syn's `#[doc = ".."]` of it lowers: every part spans the comment.
    pub(super) fn doc_comment(&self, doc: &doc_text::DocComment) -> Attr {
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
    pub(super) fn attr(&mut self, a: &syn::Attribute, (lo, hi): (usize, usize)) -> Attr {
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

    pub(super) fn attr_arg(&mut self, m: &syn::Meta) -> AttrArg {
        self.attr_arg_at(m, 0)
    }

    pub(super) fn attr_arg_at(&mut self, m: &syn::Meta, depth: usize) -> AttrArg {
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

    pub(super) fn expr_attr_arg(&mut self, e: &syn::Expr) -> AttrArg {
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
}
