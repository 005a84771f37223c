//! How a key expression is spelled once locals, references and conversions are seen
//! through, so two uses of one key compare equal and two keys that differ by a literal part
//! (`format!("{id}:thumbnail")`, `format!("{id}:transcode")`) do not.
//!
//! Public API: [`KeyText::of`]`(locals, expr)`; [`exclusive`]`(body, a, b)`: whether
//! two points of a body sit in different arms of one `if` or `match`, so at most one runs;
//! [`fresh_call_in`]: a call in an expression (or the locals it reads) that makes a new value
//! on every run, such as the id of an inserted row.
//! Unlike [`super::flow::KeyDesc`], which compares keys loosely across a check and a write
//! (a shared root is enough), this compares whole spellings.

use super::chain::Locals;
use crate::model::ir::{Block, Expr, ExprKind, Lit};
use crate::model::Span;

/// Conversions that keep the key's value.
const CONVERSIONS: &[&str] = &[
    "to_string",
    "to_owned",
    "clone",
    "into",
    "as_str",
    "as_ref",
    "as_bytes",
    "as_deref",
    "borrow",
    "to_vec",
];

/// How deep locals and nested expressions are followed.
const MAX_DEPTH: usize = 8;

/// A key's canonical spelling and whether any of it comes from a value rather than literals.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KeyText {
    pub text: String,
    /// Some part is a variable, field or parameter (a key made of literals only is a
    /// constant: another bug, not this comparison's).
    pub has_value: bool,
}

impl KeyText {
    /// The spelling of `e`, following each local to its definition in force; `None` for shapes
    /// that cannot be compared (closures, blocks, loops).
    pub fn of(locals: &Locals<'_>, e: &Expr) -> Option<KeyText> {
        let mut has_value = false;
        let text = spell(locals, e, 0, &mut has_value)?;
        Some(KeyText { text, has_value })
    }
}

fn spell(locals: &Locals<'_>, e: &Expr, depth: usize, value: &mut bool) -> Option<String> {
    if depth > MAX_DEPTH {
        return None;
    }
    let d = depth + 1;
    let e = e.peel();
    Some(match &e.kind {
        ExprKind::Path(p) => match p.as_ident() {
            // The definition in force: the last one written before the use (a shadowing
            // `let key = format!(..)` between two uses makes them different keys).
            Some(name) => match locals
                .defs(name)
                .iter()
                .rev()
                .find(|init| init.span.hi <= e.span.lo)
            {
                Some(init) => spell(locals, init, d, value)?,
                None => {
                    *value = true;
                    name.to_owned()
                }
            },
            None => p.segments.join("::"),
        },
        ExprKind::Lit(Lit::Str(s)) => format!("{s:?}"),
        ExprKind::Lit(_) => "lit".to_owned(),
        ExprKind::Field { base, member } => {
            format!("{}.{member}", spell(locals, base, d, value)?)
        }
        ExprKind::MethodCall {
            receiver,
            method,
            args,
            ..
        } => {
            let recv = spell(locals, receiver, d, value)?;
            if CONVERSIONS.contains(&method.as_str()) {
                return Some(recv);
            }
            let args: Option<Vec<String>> =
                args.iter().map(|a| spell(locals, a, d, value)).collect();
            format!("{recv}.{method}({})", args?.join(","))
        }
        ExprKind::Call { func, args } => {
            let p = func.as_path()?;
            // `String::from(id)`, `AttributeValue::S(id)`, `Some(id)`: the same key.
            if args.len() == 1 && (p.last() == "from" || p.last().starts_with(char::is_uppercase)) {
                return spell(locals, &args[0], d, value);
            }
            let args: Option<Vec<String>> =
                args.iter().map(|a| spell(locals, a, d, value)).collect();
            format!("{}({})", p.segments.join("::"), args?.join(","))
        }
        ExprKind::Macro(m) => {
            let args: Option<Vec<String>> = m
                .args
                .iter()
                .map(|a| match a.as_str_lit() {
                    Some(s) => Some(format!("{:?}", normalize_template(s))),
                    None => spell(locals, a, d, value),
                })
                .collect();
            format!("{}!({})", m.path.last(), args?.join(","))
        }
        ExprKind::Binary { lhs, rhs, .. } => format!(
            "({} op {})",
            spell(locals, lhs, d, value)?,
            spell(locals, rhs, d, value)?
        ),
        _ => return None,
    })
}

/// The first call in `e` that `is_fresh` says makes a new value on every run
/// (`Uuid::new_v4()`), following locals to their definitions in force: the call's span.
pub fn fresh_call_in(
    locals: &Locals<'_>,
    e: &Expr,
    is_fresh: &dyn Fn(&crate::model::ir::Path) -> bool,
) -> Option<Span> {
    fresh_at(locals, e, is_fresh, 0)
}

fn fresh_at(
    locals: &Locals<'_>,
    e: &Expr,
    is_fresh: &dyn Fn(&crate::model::ir::Path) -> bool,
    depth: usize,
) -> Option<Span> {
    if depth > MAX_DEPTH {
        return None;
    }
    let mut found = None;
    e.walk(&mut |x| {
        if found.is_some() {
            return;
        }
        match &x.kind {
            ExprKind::Call { func, .. } if func.as_path().is_some_and(is_fresh) => {
                found = Some(x.span);
            }
            ExprKind::Path(p) => {
                let def = p.as_ident().and_then(|name| {
                    locals
                        .defs(name)
                        .iter()
                        .rev()
                        .find(|init| init.span.hi <= x.span.lo)
                });
                if let Some(init) = def {
                    found = fresh_at(locals, init, is_fresh, depth + 1);
                }
            }
            _ => {}
        }
    });
    found
}

/// `"{id}:{}"` and `"{}:{}"` compare equal: inline captures are lowered to arguments.
fn normalize_template(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '{' && chars.peek() != Some(&'{') {
            for n in chars.by_ref() {
                if n == '}' {
                    break;
                }
            }
            out.push_str("{}");
        } else {
            out.push(c);
        }
    }
    out
}

/// Whether points `a` and `b` of `body` sit in different arms of one `if`/`else` or
/// `match`: at most one of them runs per call.
pub fn exclusive(body: &Block, a: Span, b: Span) -> bool {
    let mut found = false;
    body.walk(&mut |e| {
        if found || !e.span.contains(a) || !e.span.contains(b) {
            return;
        }
        let arms: Vec<Span> = match &e.kind {
            ExprKind::If { then, els, .. } => {
                let mut v = vec![then.span];
                v.extend(els.as_ref().map(|x| x.span));
                v
            }
            ExprKind::Match { arms, .. } => arms.iter().map(|arm| arm.body.span).collect(),
            _ => return,
        };
        let arm_of = |p: Span| arms.iter().position(|s| s.contains(p));
        found = matches!((arm_of(a), arm_of(b)), (Some(x), Some(y)) if x != y);
    });
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{lower_file, FileId};

    /// The spellings of the arguments of every `tok(..)` call in `body`, in order.
    fn texts(body: &str) -> Vec<Option<String>> {
        let src = format!("fn f(msg: Msg) {{ {body} }}");
        let file = lower_file(&src, FileId(0), vec!["crate".into()], false).unwrap();
        let body = file.fns[0].body.as_ref().unwrap();
        let locals = Locals::of_body(body);
        let mut out = Vec::new();
        body.walk(&mut |e| {
            if let ExprKind::Call { func, args } = &e.kind {
                if func.as_path().is_some_and(|p| p.last() == "tok") {
                    out.push(KeyText::of(&locals, &args[0]).map(|k| k.text));
                }
            }
        });
        out
    }

    #[test]
    fn locals_and_conversions_are_seen_through_and_stage_parts_kept() {
        let got = texts(
            r#"let id = msg.file_id.clone();
               let k = format!("{id}:thumb");
               tok(&msg.file_id); tok(id.to_string()); tok(k); tok(format!("{}:transcode", msg.file_id));"#,
        );
        assert_eq!(got[0], got[1]);
        assert_ne!(got[2], got[3]);
        assert_ne!(got[0], got[2]);
        let shadowed = texts(
            r#"let key = format!("{}:a", msg.id); tok(&key);
               let key = format!("{}:b", msg.id); tok(&key); tok(key.clone());"#,
        );
        assert_ne!(shadowed[0], shadowed[1]);
        assert_eq!(shadowed[1], shadowed[2]);
    }
}
