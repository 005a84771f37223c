//! The one function that binds a pattern: every form that introduces names (`let`,
//! `let .. else`, `if let`, `while let`, `match` arms with guards, closure and fn parameters
//! such as `State(mut st): State<App>`, `for` patterns) goes through [`bind_pattern`], which
//! says, for each name, where inside the bound value it sits. The value flow, the type
//! evidence and whoever else binds read the same answer, so a name is the same value
//! wherever it is used: a read and a write through the same local are the same key whatever
//! the key was built from.

use crate::model::ir::{Expr, ExprKind, Pat, Path, Type};
use crate::model::Span;

/// One step from a bound value to the part of it a name receives.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Hop<'p> {
    /// `pat: T`: the value is written to be a `T`.
    Typed(&'p Type),
    /// `&pat`, `&mut pat`: the same value.
    Deref,
    /// The one field of `Some(x)`, `Ok(x)`, `State(x)`, `Json(x)`: the value inside.
    Unwrap(&'p Path),
    /// Element `i` of a tuple `(a, b)`.
    Elem(usize),
    /// Field `i` of a tuple struct or variant with several fields: `Event(id, _)`.
    Variant(&'p Path, usize),
    /// A named field: `Msg { id, body: b, .. }`.
    Field(&'p Path, &'p str),
    /// The sub-pattern of `x @ sub`.
    Sub,
    /// One alternative of `A(x) | B(x)`.
    Alt,
}

/// A name a pattern binds.
#[derive(Debug, Clone, Copy)]
pub struct Binding<'p> {
    pub name: &'p str,
    pub span: Span,
    pub mutable: bool,
}

/// Calls `f` with every name `pat` binds and the hops from the whole value to it, in source
/// order (the names inside `x @ sub` before `x`).
pub fn bind_pattern<'p>(pat: &'p Pat, f: &mut impl FnMut(Binding<'p>, &[Hop<'p>])) {
    let mut trail = Vec::new();
    walk(pat, &mut trail, f);
}

/// [`bind_pattern`] for a fn parameter, whose type the lowering keeps beside its pattern:
/// `State(st): State<App>` is bound as the typed pattern it is written as.
pub fn bind_param<'p>(pat: &'p Pat, ty: &'p Type, f: &mut impl FnMut(Binding<'p>, &[Hop<'p>])) {
    let mut trail = vec![Hop::Typed(ty)];
    walk(pat, &mut trail, f);
}

fn walk<'p>(pat: &'p Pat, trail: &mut Vec<Hop<'p>>, f: &mut impl FnMut(Binding<'p>, &[Hop<'p>])) {
    let mut under = |hop: Hop<'p>, p: &'p Pat, trail: &mut Vec<Hop<'p>>| {
        trail.push(hop);
        walk(p, trail, f);
        trail.pop();
    };
    match pat {
        Pat::Ident {
            name,
            span,
            sub,
            mutable,
        } => {
            if let Some(sub) = sub {
                under(Hop::Sub, sub, trail);
            }
            f(
                Binding {
                    name,
                    span: *span,
                    mutable: *mutable,
                },
                trail,
            );
        }
        Pat::Typed { pat, ty } => under(Hop::Typed(ty), pat, trail),
        Pat::Ref(p) => under(Hop::Deref, p, trail),
        Pat::Tuple(ps) => {
            for (i, p) in ps.iter().enumerate() {
                under(Hop::Elem(i), p, trail);
            }
        }
        Pat::TupleStruct { path, elems } => match elems.as_slice() {
            [one] => under(Hop::Unwrap(path), one, trail),
            _ => {
                for (i, p) in elems.iter().enumerate() {
                    under(Hop::Variant(path, i), p, trail);
                }
            }
        },
        Pat::Struct { path, fields } => {
            for (name, p) in fields {
                under(Hop::Field(path, name), p, trail);
            }
        }
        Pat::Or(ps) => {
            for p in ps {
                under(Hop::Alt, p, trail);
            }
        }
        Pat::Path(_) | Pat::Lit(_) | Pat::Wild | Pat::Other => {}
    }
}

/// The written type a name of a pattern receives, when the pattern's own ascription says it:
/// `x: T` is a `T`; `State(st): State<App>` and `Json(ev): Json<Event>` unwrap the
/// ascribed wrapper named by the pattern to its one type argument; `(a, b): (A, B)` gives
/// `a` an `A`. `None` past a hop the ascription does not describe.
pub fn written_type<'p>(trail: &[Hop<'p>]) -> Option<&'p Type> {
    let mut ty: Option<&'p Type> = None;
    for hop in trail {
        ty = match (*hop, ty) {
            (Hop::Typed(t), _) => Some(t),
            (Hop::Deref | Hop::Sub | Hop::Alt, t) => t.map(deref),
            (Hop::Unwrap(p), Some(t)) => match deref(t) {
                Type::Path { path, args } if path.last() == p.last() && args.len() == 1 => {
                    Some(&args[0])
                }
                _ => None,
            },
            (Hop::Elem(i), Some(t)) => match deref(t) {
                Type::Tuple(ts) => ts.get(i),
                _ => None,
            },
            _ => None,
        };
    }
    ty
}

fn deref(mut t: &Type) -> &Type {
    while let Type::Ref { inner, .. } = t {
        t = inner;
    }
    t
}

/// Whether the hops keep the whole value (through references, ascriptions, alternatives and
/// the one field of `Some(x)`/`Ok(x)`), so the name has the type of the value bound.
pub fn keeps_whole(trail: &[Hop<'_>]) -> bool {
    trail.iter().all(|h| match h {
        Hop::Typed(_) | Hop::Deref | Hop::Sub | Hop::Alt => true,
        Hop::Unwrap(p) => matches!(p.last(), "Some" | "Ok"),
        _ => false,
    })
}

/// The part of `init` a name receives through `trail` when `init` is written in the
/// pattern's shape: `let (key, ttl) = (format!(..), 60)` binds `key` to the `format!`, as
/// `let key = format!(..)` would; `Some(x)` against `Some(e)`, `Msg { id, .. }` against a
/// struct literal, `W(x)` against `W(e)`. `None` when a hop takes a part the expression
/// does not spell out (the name is then a part of a value, not of an expression).
pub fn part_of<'e>(init: &'e Expr, trail: &[Hop<'_>]) -> Option<&'e Expr> {
    let mut e = init;
    for hop in trail {
        e = match (*hop, &e.kind) {
            (Hop::Typed(_) | Hop::Sub | Hop::Alt, _) => e,
            (Hop::Deref, ExprKind::Ref { expr, .. }) => expr,
            (Hop::Deref, _) => e,
            (Hop::Elem(i), ExprKind::Tuple(items)) => items.get(i)?,
            (Hop::Unwrap(p), ExprKind::Call { func, args }) if args.len() == 1 => {
                (func.as_path()?.last() == p.last()).then(|| &args[0])?
            }
            (Hop::Variant(p, i), ExprKind::Call { func, args }) => {
                (func.as_path()?.last() == p.last()).then(|| args.get(i))??
            }
            (Hop::Field(_, name), ExprKind::Struct { fields, .. }) => {
                &fields.iter().find(|(n, _)| n == name)?.1
            }
            _ => return None,
        };
    }
    Some(e)
}

/// Whether the hops take a part of the value (a tuple element, a field, the inside of a
/// one-field tuple struct) rather than the whole of it.
pub fn takes_parts(trail: &[Hop<'_>]) -> bool {
    trail.iter().any(|h| {
        matches!(
            h,
            Hop::Unwrap(_) | Hop::Elem(_) | Hop::Variant(..) | Hop::Field(..)
        )
    })
}

/// Every name `let pat = init` binds with the expression it is: the whole `init` for a lone
/// name (`x`, `mut x`, `x: T`), its part for a pattern written in `init`'s shape
/// ([`part_of`]). Names bound to a part of a value (`let (a, b) = pair()`) have none.
pub fn let_parts<'p>(pat: &'p Pat, init: &'p Expr) -> Vec<(&'p str, &'p Expr)> {
    let mut out = Vec::new();
    bind_pattern(pat, &mut |b, trail| {
        if let Some(e) = part_of(init, trail) {
            out.push((b.name, e));
        }
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{lower_file, FileId};

    /// The patterns of every `let` and fn parameter of `src`, bound: (name, hops as text).
    fn bound(src: &str) -> Vec<(String, String)> {
        let file = lower_file(src, FileId(0), vec!["crate".into()], false).expect("parses");
        let mut out = Vec::new();
        for f in &file.fns {
            let mut pats: Vec<(&Pat, Option<&Type>)> =
                f.params.iter().map(|p| (&p.pat, Some(&p.ty))).collect();
            if let Some(b) = &f.body {
                for s in &b.stmts {
                    if let crate::model::ir::Stmt::Let { pat, .. } = s {
                        pats.push((pat, None));
                    }
                }
            }
            for (p, ty) in pats {
                let mut visit = |b: Binding<'_>, trail: &[Hop<'_>]| {
                    let hops: Vec<String> = trail
                        .iter()
                        .map(|h| match h {
                            Hop::Typed(_) => "typed".into(),
                            Hop::Deref => "&".into(),
                            Hop::Unwrap(p) => format!("{}()", p.last()),
                            Hop::Elem(i) => format!(".{i}"),
                            Hop::Variant(p, i) => format!("{}.{i}", p.last()),
                            Hop::Field(_, n) => format!(".{n}"),
                            Hop::Sub => "@".into(),
                            Hop::Alt => "|".into(),
                        })
                        .collect();
                    out.push((b.name.to_owned(), hops.join(" ")));
                };
                match ty {
                    Some(ty) => bind_param(p, ty, &mut visit),
                    None => bind_pattern(p, &mut visit),
                }
            }
        }
        out
    }

    #[test]
    fn every_pattern_form_names_where_its_names_sit() {
        let got = bound(
            "fn h(State(mut st): State<App>, Json(Ev { id, .. }): Json<Ev>, (a, b): (u8, u8)) {
                 let x @ Some(y) = f();
                 let Some(&E(p, _) | &E(_, p)) = g() else { return };
             }",
        );
        let want = [
            ("st", "typed State()"),
            ("id", "typed Json() .id"),
            ("a", "typed .0"),
            ("b", "typed .1"),
            ("y", "@ Some()"),
            ("x", ""),
            ("p", "Some() | & E.0"),
            ("p", "Some() | & E.1"),
        ];
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn an_ascribed_wrapper_named_by_the_pattern_gives_its_argument() {
        let src = "fn h(State(st): State<App>, Foo(x): Bar<App>, (a, _): (&Db, u8)) {}";
        let file = lower_file(src, FileId(0), vec!["crate".into()], false).expect("parses");
        let mut got = Vec::new();
        for p in &file.fns[0].params {
            bind_param(&p.pat, &p.ty, &mut |b, trail| {
                let ty = written_type(trail)
                    .and_then(Type::core_path)
                    .map(|p| p.last().to_owned());
                got.push((b.name.to_owned(), ty));
            });
        }
        assert_eq!(
            got,
            vec![
                ("st".to_owned(), Some("App".to_owned())),
                ("x".to_owned(), None),
                ("a".to_owned(), Some("Db".to_owned())),
            ]
        );
    }
}
