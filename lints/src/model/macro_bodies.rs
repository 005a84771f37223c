//! Macro bodies parsed without copying their tokens.
//!
//! syn keeps a macro's body as a token stream, and the lowering parses the bodies of
//! expression, statement and item macros (`format!`, `sqlx::query!`, `cfg_rt! { .. }`). A
//! parse consumes its stream, and proc_macro2 streams are shared: while the syn tree still
//! holds the body, every token of it (and of every group inside) is copied first. On tokio
//! and the sqlx job queue those copies cost about a twentieth of the parse.
//!
//! So the bodies are taken out of a tree before it is lowered ([`Bodies::take_from_items`]),
//! keyed by the address of their `syn::Macro`, and parsed from the stream taken. Addresses
//! identify macros only while no tree is freed: the trees whose bodies are taken (the
//! file's items, the arguments and items parsed out of taken bodies) all live until the file
//! is lowered, and a macro of any other tree (a module inside an unparsed item macro) is
//! parsed from a copy, as before. Arguments are kept once parsed, so a macro lowered twice
//! reads the same ones.

use proc_macro2::TokenStream;
use std::collections::HashMap;
use std::rc::Rc;
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::visit_mut::VisitMut;

/// A macro's arguments: its body as a comma-separated list of expressions.
pub(super) type Args = Punctuated<syn::Expr, syn::Token![,]>;

/// The taken bodies of one file, and what was parsed out of them.
#[derive(Default)]
pub(super) struct Bodies {
    taken: HashMap<usize, TokenStream>,
    /// [`Bodies::args`] of taken bodies (`None`: not a list of expressions).
    args: HashMap<usize, Rc<Option<Args>>>,
    /// Items parsed out of taken item macro bodies.
    items: Vec<Rc<Vec<syn::Item>>>,
}

fn key(m: &syn::Macro) -> usize {
    std::ptr::from_ref(m) as usize
}

/// Takes the bodies of the expression, statement and item macros it visits (the ones the
/// lowering parses); those of types, patterns and impl items are left where they are.
struct Take<'a>(&'a mut HashMap<usize, TokenStream>);

impl Take<'_> {
    fn take(&mut self, m: &mut syn::Macro) {
        self.0.insert(key(m), std::mem::take(&mut m.tokens));
    }
}

impl VisitMut for Take<'_> {
    fn visit_expr_macro_mut(&mut self, m: &mut syn::ExprMacro) {
        self.take(&mut m.mac);
    }

    fn visit_stmt_macro_mut(&mut self, m: &mut syn::StmtMacro) {
        self.take(&mut m.mac);
    }

    fn visit_item_macro_mut(&mut self, m: &mut syn::ItemMacro) {
        self.take(&mut m.mac);
    }

    // A pattern's macro is not lowered, and `Pat::Macro` is an `ExprMacro` too.
    fn visit_pat_mut(&mut self, p: &mut syn::Pat) {
        if !matches!(p, syn::Pat::Macro(_)) {
            syn::visit_mut::visit_pat_mut(self, p);
        }
    }

    // Types are lowered without their expressions (`[u8; n!()]`).
    fn visit_type_mut(&mut self, _: &mut syn::Type) {}
}

impl Bodies {
    /// Takes the bodies of the macros in `items`, which stay where they are until the file is
    /// lowered.
    pub(super) fn take_from_items(&mut self, items: &mut [syn::Item]) {
        let mut take = Take(&mut self.taken);
        for item in items {
            take.visit_item_mut(item);
        }
    }

    /// The body of `m`: taken, or a copy of the one its tree holds.
    fn body(&mut self, m: &syn::Macro) -> (TokenStream, bool) {
        match self.taken.remove(&key(m)) {
            Some(tokens) => (tokens, true),
            None => (m.tokens.clone(), false),
        }
    }

    /// `m`'s body as a comma-separated list of expressions, `None` when it is not one. (A
    /// parse of the stream alone differs from [`syn::Macro::parse_body_with`] only in where
    /// an error points, and errors are dropped here.)
    pub(super) fn args(&mut self, m: &syn::Macro) -> Rc<Option<Args>> {
        if let Some(args) = self.args.get(&key(m)) {
            return args.clone();
        }
        let (tokens, taken) = self.body(m);
        let mut args = Args::parse_terminated.parse2(tokens).ok();
        if !taken {
            return Rc::new(args);
        }
        if let Some(args) = &mut args {
            let mut take = Take(&mut self.taken);
            for e in args.iter_mut() {
                take.visit_expr_mut(e);
            }
        }
        let args = Rc::new(args);
        self.args.insert(key(m), args.clone());
        args
    }

    /// The items an item macro wraps (`cfg_rt! { .. }`), when its body parses as a non-empty
    /// list of items; otherwise its body, for the `mod`s inside.
    pub(super) fn items(&mut self, m: &syn::Macro) -> Result<Rc<Vec<syn::Item>>, TokenStream> {
        let (tokens, taken) = self.body(m);
        let parse = |input: syn::parse::ParseStream<'_>| {
            let mut items = Vec::new();
            while !input.is_empty() {
                items.push(input.parse::<syn::Item>()?);
            }
            Ok(items)
        };
        // The body is needed again when it is not items: parsed from a copy then.
        let parsed = parse.parse2(tokens.clone());
        let mut items = match parsed {
            Ok(items) if !items.is_empty() => items,
            _ => return Err(tokens),
        };
        if !taken {
            return Ok(Rc::new(items));
        }
        self.take_from_items(&mut items);
        let items = Rc::new(items);
        self.items.push(items.clone());
        Ok(items)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::ToTokens;
    use syn::visit::Visit;

    /// Every macro's parsed body, depth first: from the tree as syn reads it, or through
    /// [`Bodies`].
    #[derive(Default)]
    struct Read {
        bodies: Option<Bodies>,
        out: Vec<String>,
    }

    /// `args` with the bodies of the macros inside emptied: those are read on their own.
    fn render(args: &Args) -> String {
        let mut args = args.clone();
        let mut sink = HashMap::new();
        let mut take = Take(&mut sink);
        for e in args.iter_mut() {
            take.visit_expr_mut(e);
        }
        args.to_token_stream().to_string()
    }

    impl Read {
        fn args(&mut self, m: &syn::Macro) {
            let args = match &mut self.bodies {
                Some(b) => b.args(m),
                None => Rc::new(m.parse_body_with(Args::parse_terminated).ok()),
            };
            let Some(args) = &*args else {
                self.out.push("not expressions".into());
                return;
            };
            self.out.push(render(args));
            for e in args {
                self.visit_expr(e);
            }
        }
    }

    impl<'a> Visit<'a> for Read {
        fn visit_expr_macro(&mut self, m: &'a syn::ExprMacro) {
            self.args(&m.mac);
        }
        fn visit_stmt_macro(&mut self, m: &'a syn::StmtMacro) {
            self.args(&m.mac);
        }
        fn visit_item_macro(&mut self, m: &'a syn::ItemMacro) {
            let items = match &mut self.bodies {
                Some(b) => b.items(&m.mac).ok(),
                None => m
                    .mac
                    .parse_body_with(|input: syn::parse::ParseStream<'_>| {
                        let mut items = Vec::new();
                        while !input.is_empty() {
                            items.push(input.parse::<syn::Item>()?);
                        }
                        Ok(items)
                    })
                    .ok()
                    .filter(|i| !i.is_empty())
                    .map(Rc::new),
            };
            match items {
                Some(items) => items.iter().for_each(|i| self.visit_item(i)),
                None => self.out.push("not items".into()),
            }
        }
    }

    #[test]
    fn taken_bodies_parse_as_the_tree_holds_them() {
        let src = "
            cfg_rt! {
                fn f(id: u32) {
                    let v = vec![format!(\"{id}\", x = y), m!(a; b)];
                    g(h!(1, w!(2)));
                    tracing::info!(id, \"done\");
                }
            }
            cfg_if! { if #[cfg(unix)] { mod unix; } }
            fn k() -> [u8; n!()] {
                let q!(p) = 1;
                println!(\"{}\", q!(z, vec![1; 3]));
                sqlx::query!(\"SELECT 1 WHERE id = $1\", id).fetch_one(db);
            }
        ";
        let file: syn::File = syn::parse_str(src).expect("parses");
        let mut plain = Read::default();
        plain.visit_file(&file);
        let mut items = file.items.clone();
        let mut bodies = Bodies::default();
        bodies.take_from_items(&mut items);
        let mut taken = Read {
            bodies: Some(bodies),
            out: Vec::new(),
        };
        for item in &items {
            taken.visit_item(item);
        }
        assert_eq!(taken.out, plain.out);
        assert!(plain.out.len() >= 12, "{:?}", plain.out);
        // Asked again (as a macro lowered twice would be), the expression macros give the
        // same arguments.
        let first = std::mem::take(&mut taken.out);
        let mut again = Read {
            bodies: taken.bodies.take(),
            out: Vec::new(),
        };
        for item in &items {
            if !matches!(item, syn::Item::Macro(_)) {
                again.visit_item(item);
            }
        }
        let fns: Vec<String> = first
            .into_iter()
            .skip_while(|s| s != "not items")
            .skip(1)
            .collect();
        assert_eq!(again.out, fns);
    }
}
