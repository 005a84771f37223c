//! Text kept in struct fields: a table of SQL built once and read at the call
//! (`const QUERIES: Queries = Queries { mark: "INSERT .." }`, a constructor filling
//! `Self { insert_sql: include_str!("q.sql") }`, then `sqlx::query(self.queries.mark)`).
//!
//! Fields are matched by name across the package, since the receiver's type is often not
//! known at the call: a field name given two different texts, or once a value that is not a
//! constant text, has no text.

use super::flow::{const_text, FlowCx};
use super::FastMap;
use crate::model::ir::{Expr, ExprKind};
use crate::model::FileModel;

/// What every struct literal of the package puts in each field name.
#[derive(Debug, Default)]
pub struct FieldTexts {
    /// `None`: the field is given different texts, or a value that is not a constant text.
    by_field: FastMap<String, Option<String>>,
}

impl FieldTexts {
    /// Reads every struct literal in the package's function bodies and constants.
    pub fn new(cx: &FlowCx<'_>) -> FieldTexts {
        let mut out = FieldTexts::default();
        for file in &cx.package.files {
            for f in &file.fns {
                if let Some(body) = &f.body {
                    body.walk(&mut |e| out.add_literal(cx, file, &f.module, e));
                }
            }
            for c in &file.consts {
                c.value
                    .walk(&mut |e| out.add_literal(cx, file, &c.module, e));
            }
        }
        out
    }

    /// The one text the package ever puts in field `name`.
    pub fn text(&self, name: &str) -> Option<&str> {
        self.by_field.get(name)?.as_deref()
    }

    fn add_literal(&mut self, cx: &FlowCx<'_>, file: &FileModel, module: &[String], e: &Expr) {
        let ExprKind::Struct { fields, .. } = &e.kind else {
            return;
        };
        for (name, value) in fields {
            let text = value_text(cx, file, module, value);
            match self.by_field.get_mut(name) {
                None => {
                    self.by_field.insert(name.clone(), text);
                }
                Some(known) => {
                    if *known != text {
                        *known = None;
                    }
                }
            }
        }
    }
}

/// The constant text of a field's value, through `.to_owned()`/`.to_string()`/`.into()` and
/// `String::from(..)`.
fn value_text(cx: &FlowCx<'_>, file: &FileModel, module: &[String], e: &Expr) -> Option<String> {
    match &e.peel().kind {
        ExprKind::MethodCall {
            receiver,
            method,
            args,
            ..
        } if args.is_empty() && matches!(method.as_str(), "to_owned" | "to_string" | "into") => {
            value_text(cx, file, module, receiver)
        }
        ExprKind::Call { func, args }
            if args.len() == 1 && func.as_path().is_some_and(|p| p.last() == "from") =>
        {
            value_text(cx, file, module, &args[0])
        }
        _ => const_text(cx, file, module, e, 0),
    }
}
