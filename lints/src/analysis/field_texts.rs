//! Text kept in struct fields: a table of SQL built once and read at the call
//! (`const QUERIES: Queries = Queries { mark: "INSERT .." }`, a constructor filling
//! `Self { insert_sql: include_str!("q.sql") }` or `Self { insert_sql }` from `let insert_sql
//! = format!("INSERT INTO {table} ..")` or from a helper of the same file that returns such a
//! `format!`, then `sqlx::query(self.queries.mark)`).
//!
//! Fields are matched by name across the package, since the receiver's type is often not
//! known at the call: a field name given two different texts, or once a value that is not a
//! constant text, has no text.

use super::binding::let_parts;
use super::flow::{const_text, format_sql, FlowCx};
use super::FastMap;
use crate::model::ir::{Block, Expr, ExprKind, Stmt};
use crate::model::FileModel;
use rayon::prelude::*;

/// What every struct literal of the package puts in each field name.
#[derive(Debug, Default)]
pub struct FieldTexts {
    /// `None`: the field is given different texts, or a value that is not a constant text.
    by_field: FastMap<String, Option<String>>,
    /// Per file, the same of its own literals: the package's table is their union (a field
    /// keeps its text only when every file gives it that text), so an edit of one file
    /// reads only that file again ([`FieldTexts::updated`]).
    files: Vec<FastMap<String, Option<String>>>,
}

/// Equal tables: what [`FieldTexts::text`] answers.
impl PartialEq for FieldTexts {
    fn eq(&self, other: &FieldTexts) -> bool {
        self.by_field == other.by_field
    }
}

impl FieldTexts {
    /// Reads every struct literal in the package's function bodies and constants.
    pub fn new(cx: &FlowCx<'_>) -> FieldTexts {
        let files = cx
            .package
            .files
            .iter()
            .map(|f| Self::of_file(cx, f))
            .collect();
        Self::merged(files)
    }

    /// [`FieldTexts::new`], the files read in parallel.
    pub fn new_parallel(cx: &FlowCx<'_>) -> FieldTexts {
        let files = cx
            .package
            .files
            .par_iter()
            .map(|f| Self::of_file(cx, f))
            .collect();
        Self::merged(files)
    }

    /// The table after an edit of the files marked in `changed`: those are read again.
    /// `self` must be the table of a package with the same files, which read the others'
    /// constants as they are now (the caller checks the edit changed no item).
    pub(crate) fn updated(&self, cx: &FlowCx<'_>, changed: &[bool]) -> FieldTexts {
        let files = cx
            .package
            .files
            .iter()
            .enumerate()
            .map(|(i, f)| match self.files.get(i) {
                Some(part) if !changed[i] => part.clone(),
                _ => Self::of_file(cx, f),
            })
            .collect();
        Self::merged(files)
    }

    /// What the struct literals of one file put in each field name.
    fn of_file(cx: &FlowCx<'_>, file: &FileModel) -> FastMap<String, Option<String>> {
        let mut out = FieldTexts::default();
        let no_locals = FastMap::default();
        for f in &file.fns {
            if let Some(body) = &f.body {
                let locals = top_level_lets(body);
                body.walk(&mut |e| out.add_literal(cx, file, &f.module, &locals, e));
            }
        }
        for c in &file.consts {
            c.value
                .walk(&mut |e| out.add_literal(cx, file, &c.module, &no_locals, e));
        }
        out.by_field
    }

    /// The package's table from its files': a field given one text everywhere keeps it.
    fn merged(files: Vec<FastMap<String, Option<String>>>) -> FieldTexts {
        let mut by_field: FastMap<String, Option<String>> = FastMap::default();
        for part in &files {
            for (name, text) in part {
                match by_field.get_mut(name) {
                    None => {
                        by_field.insert(name.clone(), text.clone());
                    }
                    Some(known) => {
                        if known != text {
                            *known = None;
                        }
                    }
                }
            }
        }
        FieldTexts { by_field, files }
    }

    /// The one text the package ever puts in field `name`.
    pub fn text(&self, name: &str) -> Option<&str> {
        self.by_field.get(name)?.as_deref()
    }

    fn add_literal(
        &mut self,
        cx: &FlowCx<'_>,
        file: &FileModel,
        module: &[String],
        locals: &Locals<'_>,
        e: &Expr,
    ) {
        let ExprKind::Struct { fields, .. } = &e.kind else {
            return;
        };
        for (name, value) in fields {
            match self.by_field.get_mut(name) {
                None => {
                    let text = value_text(cx, file, module, locals, value);
                    self.by_field.insert(name.clone(), text);
                }
                // Given two texts already: no third one gives it a text again.
                Some(None) => {}
                Some(known) => {
                    if *known != value_text(cx, file, module, locals, value) {
                        *known = None;
                    }
                }
            }
        }
    }
}

/// Locals bound once at the top of a function body, by name: what a constructor computes
/// before `Self { insert_sql, .. }`. A name bound twice has no entry.
type Locals<'a> = FastMap<&'a str, Option<&'a Expr>>;

fn top_level_lets(body: &Block) -> Locals<'_> {
    let mut out: Locals<'_> = FastMap::default();
    for stmt in &body.stmts {
        if let Stmt::Let {
            pat,
            init: Some(init),
            ..
        } = stmt
        {
            for (name, part) in let_parts(pat, init) {
                out.entry(name)
                    .and_modify(|known| *known = None)
                    .or_insert(Some(part));
            }
        }
    }
    out
}

/// The constant text of a field's value, through `.to_owned()`/`.to_string()`/`.into()`,
/// `String::from(..)` and a local of `locals`; a `format!` of a statement gives its skeleton
/// ([`format_sql`]).
fn value_text(
    cx: &FlowCx<'_>,
    file: &FileModel,
    module: &[String],
    locals: &Locals<'_>,
    e: &Expr,
) -> Option<String> {
    match &e.peel().kind {
        ExprKind::MethodCall {
            receiver,
            method,
            args,
            ..
        } if args.is_empty() && matches!(method.as_str(), "to_owned" | "to_string" | "into") => {
            value_text(cx, file, module, locals, receiver)
        }
        ExprKind::Call { func, args }
            if args.len() == 1 && func.as_path().is_some_and(|p| p.last() == "from") =>
        {
            value_text(cx, file, module, locals, &args[0])
        }
        ExprKind::Path(p) if p.as_ident().is_some_and(|n| locals.contains_key(n)) => {
            let init = (*locals.get(p.as_ident()?)?)?;
            // The local's own initializer, without the locals (no cycles).
            value_text(cx, file, module, &FastMap::default(), init)
        }
        ExprKind::Macro(m) if m.path.last() == "format" => format_sql(m, &mut |a| {
            value_text(cx, file, module, &FastMap::default(), a)
        }),
        ExprKind::Call { func, .. } if helper_text(file, func).is_some() => {
            let tail = helper_text(file, func)?;
            value_text(cx, file, module, &FastMap::default(), tail)
        }
        _ => const_text(cx, file, module, e, 0),
    }
}

/// `insert_sql(&table)` of a fn of the same file whose body ends in a `format!`: that
/// `format!` (its arguments named as the helper's parameters are).
fn helper_text<'f>(file: &'f FileModel, func: &Expr) -> Option<&'f Expr> {
    let name = func.as_path()?.as_ident()?;
    let f = file
        .fns
        .iter()
        .find(|f| f.name == name && f.self_ty.is_none())?;
    let tail = f.body.as_ref()?.tail()?;
    matches!(&tail.kind, ExprKind::Macro(m) if m.path.last() == "format").then_some(tail)
}
