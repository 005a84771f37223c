//! Lowering paths, types, generics and bounds.

use super::*;

/// `u64`, `i32`, `usize`, `Duration`, `std::time::Duration`: a constant a TTL may be.
pub(super) fn is_number_or_duration(ty: &syn::Type) -> bool {
    const NUMBERS: &[&str] = &[
        "u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16", "i32", "i64", "i128", "isize",
        "Duration",
    ];
    matches!(ty, syn::Type::Path(p)
        if p.path.segments.last().is_some_and(|s| NUMBERS.iter().any(|n| s.ident == n)))
}

/// `r#type` → `type`: names compare without the raw prefix.
pub(super) fn unraw(id: &proc_macro2::Ident) -> String {
    let s = id.to_string();
    match s.strip_prefix("r#") {
        Some(rest) => rest.to_owned(),
        None => s,
    }
}

impl Lowerer<'_> {
    pub(super) fn ident_path(&self, id: &syn::Ident) -> Path {
        Path {
            segments: vec![unraw(id)],
            leading_colon: false,
            span: self.range(expr_span::ident_bounds(id)),
            qself: None,
        }
    }

    pub(super) fn path(&self, p: &syn::Path) -> Path {
        self.path_spanned(p, self.path_span(p))
    }

    /// [`Lowerer::path`] whose span the caller knows.
    pub(super) fn path_spanned(&self, p: &syn::Path, span: Span) -> Path {
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
    pub(super) fn expr_path(&self, p: &syn::ExprPath, bounds: Option<(usize, usize)>) -> Path {
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

    pub(super) fn ty(&self, t: &syn::Type) -> Type {
        self.ty_at(t, 0)
    }

    pub(super) fn ty_at(&self, t: &syn::Type, depth: usize) -> Type {
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
    pub(super) fn generics(&self, g: &syn::Generics) -> Vec<GenericParam> {
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

    pub(super) fn bounds(&self, b: &Punctuated<syn::TypeParamBound, syn::Token![+]>) -> Vec<Path> {
        b.iter()
            .filter_map(|b| match b {
                syn::TypeParamBound::Trait(t) => Some(self.path(&t.path)),
                _ => None,
            })
            .collect()
    }
}
