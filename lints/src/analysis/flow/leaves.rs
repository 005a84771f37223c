//! Helpers over the IR: constant text, SQL `format!` skeletons, and whether a
//! block diverges or returns.

use super::*;

/// An argument's value as seen by a parameter fact: the field it reads, or all of it.
/// The text of `include_str!("q.sql")` (read by the driver) or of a crate `const`/`static`
/// holding a literal, an `include_str!` or another such constant; `module` is where `e`
/// is written, in `file`.
pub(crate) fn const_text(
    cx: &FlowCx<'_>,
    file: &FileModel,
    module: &[String],
    e: &Expr,
    depth: usize,
) -> Option<String> {
    match &e.peel().kind {
        ExprKind::Lit(Lit::Str(s)) => Some(s.clone()),
        ExprKind::Macro(m) if m.path.last() == "include_str" => {
            let path = m.args.first()?.as_str_lit()?;
            file.included_text(path).map(str::to_owned)
        }
        ExprKind::Path(p) if depth < 4 => {
            let def = cx.resolver.resolve(file.target, module, p, None);
            let super::super::resolve::Krate::Local(target) = def.krate else {
                return None;
            };
            let (cfile, c) = cx.package.const_def(target, &def.segments)?;
            const_text(cx, cfile, &c.module, &c.value, depth + 1)
        }
        ExprKind::Macro(m) if depth < 4 => {
            format_sql(m, &mut |a| const_text(cx, file, module, a, depth + 1))
        }
        _ => None,
    }
}

/// The SQL statement a `format!` builds (`format!("INSERT INTO {} (id) VALUES ($1)",
/// self.table)`), when its template is a statement and [`super::super::sql::format_skeleton`]
/// finds its shape independent of the run-time values; `text_of` gives an argument's
/// constant text. Other `format!`s (keys, messages) have no text here.
pub(crate) fn format_sql(
    m: &MacroCall,
    text_of: &mut dyn FnMut(&Expr) -> Option<String>,
) -> Option<String> {
    use super::super::sql::{format_skeleton, looks_like_statement, Hole};
    if m.path.last() != "format" {
        return None;
    }
    let template_arg = m.args.first()?;
    let template = template_arg.as_str_lit()?;
    if !looks_like_statement(template) {
        return None;
    }
    // Lowering appends inline captures (`{table}`) after the real arguments, with the
    // template's span.
    let positional: Vec<&Expr> = m.args[1..]
        .iter()
        .filter(|a| a.span != template_arg.span)
        .collect();
    let captured = |name: &str| {
        m.args[1..].iter().find(|a| {
            a.span == template_arg.span && a.as_path().and_then(|p| p.as_ident()) == Some(name)
        })
    };
    let text = format_skeleton(template, &mut |name, index| {
        let arg = if name.is_empty() || name.parse::<usize>().is_ok() {
            positional.get(index).copied()
        } else {
            captured(name)
        };
        match arg {
            Some(a) => match text_of(a) {
                Some(t) => Hole::Text(t),
                None => Hole::Runtime(value_name(a)),
            },
            None => Hole::Runtime(name.to_owned()),
        }
    })?;
    looks_like_statement(&text).then_some(text)
}

/// What a diverging block leaves.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Leaves {
    /// The enclosing block, by any means (`break` and `continue` too).
    Block,
    /// The whole body: `return`, an error, a panic.
    Body,
}

/// Whether a block leaves its enclosing block on every path through its own statements.
pub fn diverges(b: &Block) -> bool {
    block_leaves(b, Leaves::Block)
}

/// Whether a block leaves the function (closure, async block) on every path.
pub fn returns(b: &Block) -> bool {
    block_leaves(b, Leaves::Body)
}

pub(super) fn block_leaves(b: &Block, how: Leaves) -> bool {
    b.stmts.iter().any(|s| match s {
        Stmt::Expr { expr, .. } => expr_leaves(expr, how),
        Stmt::Let { .. } | Stmt::Item { .. } => false,
    })
}

/// The arms of `?` written out: `Ok(v) => v` and an `Err(..)` arm that leaves.
pub(super) fn is_try_match(arms: &[crate::model::ir::Arm]) -> bool {
    let [ok, err] = arms else {
        return false;
    };
    let ok_arm = match &ok.pat {
        Pat::TupleStruct { path, elems } if path.last() == "Ok" => match elems.as_slice() {
            [Pat::Ident { name, .. }] => ok.body.as_path().and_then(Path::as_ident) == Some(name),
            _ => false,
        },
        _ => false,
    };
    let err_arm = matches!(&err.pat, Pat::TupleStruct { path, .. } if path.last() == "Err")
        && expr_diverges(&err.body);
    ok_arm && err_arm && ok.guard.is_none() && err.guard.is_none()
}

pub(super) fn expr_diverges(e: &Expr) -> bool {
    expr_leaves(e, Leaves::Block)
}

pub(super) fn expr_leaves(e: &Expr, how: Leaves) -> bool {
    match &e.kind {
        ExprKind::Return(_) => true,
        ExprKind::Break(_) | ExprKind::Continue => how == Leaves::Block,
        ExprKind::Macro(m) => DIVERGING_MACROS.contains(&m.path.last()),
        ExprKind::Block(b) => block_leaves(b, how),
        ExprKind::Call { func, .. } => func.as_path().is_some_and(|p| {
            p.segments
                .ends_with(&["process".to_owned(), "exit".to_owned()])
        }),
        ExprKind::Try(inner) => matches!(&inner.peel().kind, ExprKind::Call { func, .. }
            if func.as_path().is_some_and(|p| p.last() == "Err")),
        ExprKind::If {
            then,
            els: Some(els),
            ..
        } => block_leaves(then, how) && expr_leaves(els, how),
        _ => false,
    }
}
