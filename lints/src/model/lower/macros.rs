//! Lowering macro calls: their arguments, object literals (`json!`), format
//! strings and `query_file!`.

use super::*;

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

impl Lowerer<'_> {
    pub(super) fn mac(&mut self, m: &syn::Macro) -> MacroCall {
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
    pub(super) fn object_literal(&mut self, tokens: proc_macro2::TokenStream) -> Option<Vec<Expr>> {
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
    pub(super) fn document(
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
