//! Following a value back to where it was built, through method chains, local variables and
//! the calls it was passed through: the data flow of builders.
//!
//! ```ignore
//! let mut req = client.create_job().role(arn);
//! if retry { req = req.queue(q); }
//! with_defaults(req).send().await
//! ```
//!
//! gives, for the receiver of `send`, one [`Chain`] rooted at `client` with the steps
//! `create_job`, `role`, `queue` and "passed through `with_defaults(..)`". Assignments and
//! shadowing `let`s that extend a variable (`req = req.queue(q)`) are applied to every way the
//! variable was first built, whatever branch they sit in: the flow is insensitive to order and
//! control flow, so a step anywhere in the function counts as applied.

use crate::model::ir::{Block, Expr, ExprKind, Lit, Stmt};
use crate::model::Span;
use std::collections::HashMap;

/// Ways a value may have been built, at most this many per query.
const MAX_CHAINS: usize = 64;
/// Variable hops and nested expressions followed per way.
const MAX_DEPTH: usize = 48;

/// One method call applied to the value.
#[derive(Debug, Clone, Copy)]
pub struct MethodStep<'a> {
    /// The whole call expression.
    pub expr: &'a Expr,
    pub receiver: &'a Expr,
    pub method: &'a str,
    pub method_span: Span,
    pub args: &'a [Expr],
}

impl MethodStep<'_> {
    /// From the method name to the end of the call: `create_job()` of `client.create_job()`.
    pub fn call_span(&self) -> Span {
        Span {
            hi: self.expr.span.hi,
            ..self.method_span
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub enum Step<'a> {
    /// `value.method(..)`: the value is the receiver.
    Method(MethodStep<'a>),
    /// `f(value)` or `x.f(value)`: the value was passed to a call, whose result is followed.
    Through(&'a Expr),
}

/// One way a value was built: where following stopped and the steps applied from there on,
/// innermost first.
#[derive(Debug, Clone)]
pub struct Chain<'a> {
    /// An expression that is not a method call on the value: a path without local definitions
    /// (a parameter, `self`), a constructor call, a literal, a macro.
    pub root: &'a Expr,
    pub steps: Vec<Step<'a>>,
}

impl<'a> Chain<'a> {
    pub fn methods(&self) -> impl Iterator<Item = &MethodStep<'a>> {
        self.steps.iter().filter_map(|s| match s {
            Step::Method(m) => Some(m),
            Step::Through(_) => None,
        })
    }
}

/// The local variables of one function body with the expressions assigned to them (`let x =
/// e`, `x = e`), closures and nested blocks included. Patterns other than a plain name bind
/// nothing here: their variables have no known definition.
#[derive(Debug, Default)]
pub struct Locals<'a> {
    defs: HashMap<&'a str, Vec<&'a Expr>>,
}

impl<'a> Locals<'a> {
    pub fn of_body(body: &'a Block) -> Locals<'a> {
        let mut locals = Locals::default();
        locals.add_block(body);
        body.walk(&mut |e| match &e.kind {
            ExprKind::Block(b) | ExprKind::Async { block: b, .. } => locals.add_block(b),
            ExprKind::If { then, .. } => locals.add_block(then),
            ExprKind::Loop { body, .. } | ExprKind::For { body, .. } => locals.add_block(body),
            ExprKind::Assign { lhs, rhs } => {
                if let Some(name) = lhs.as_path().and_then(|p| p.as_ident()) {
                    locals.defs.entry(name).or_default().push(rhs);
                }
            }
            _ => {}
        });
        for defs in locals.defs.values_mut() {
            defs.sort_by_key(|e| e.span.lo);
        }
        locals
    }

    fn add_block(&mut self, block: &'a Block) {
        for stmt in &block.stmts {
            if let Stmt::Let {
                pat,
                init: Some(init),
                ..
            } = stmt
            {
                if let Some(name) = pat.simple_name() {
                    self.defs.entry(name).or_default().push(init);
                }
            }
        }
    }

    /// The expressions assigned to `name` anywhere in the body.
    pub fn defs(&self, name: &str) -> &[&'a Expr] {
        self.defs.get(name).map(Vec::as_slice).unwrap_or(&[])
    }

    /// Every way `expr`'s value may have been built (bounded; see the module docs).
    pub fn chains(&self, expr: &'a Expr) -> Vec<Chain<'a>> {
        let mut out = Vec::new();
        self.follow(expr, Vec::new(), &mut Vec::new(), 0, &mut out);
        out
    }

    fn follow(
        &self,
        expr: &'a Expr,
        suffix: Vec<Step<'a>>,
        visiting: &mut Vec<&'a str>,
        depth: usize,
        out: &mut Vec<Chain<'a>>,
    ) {
        if out.len() >= MAX_CHAINS {
            return;
        }
        let e = expr.peel();
        if depth >= MAX_DEPTH {
            out.push(Chain {
                root: e,
                steps: suffix,
            });
            return;
        }
        let prepend = |step: Step<'a>| {
            let mut steps = Vec::with_capacity(suffix.len() + 1);
            steps.push(step);
            steps.extend(suffix.iter().copied());
            steps
        };
        match &e.kind {
            ExprKind::MethodCall {
                receiver,
                method,
                method_span,
                args,
            } => {
                let step = Step::Method(MethodStep {
                    expr: e,
                    receiver,
                    method,
                    method_span: *method_span,
                    args,
                });
                self.follow(receiver, prepend(step), visiting, depth + 1, out);
                for arg in args.iter().filter(|a| may_carry_value(a)) {
                    self.follow(arg, prepend(Step::Through(e)), visiting, depth + 1, out);
                }
            }
            ExprKind::Call { args, .. } => {
                out.push(Chain {
                    root: e,
                    steps: suffix.clone(),
                });
                for arg in args.iter().filter(|a| may_carry_value(a)) {
                    self.follow(arg, prepend(Step::Through(e)), visiting, depth + 1, out);
                }
            }
            ExprKind::Path(p) => match p.as_ident() {
                Some(name) if !self.defs(name).is_empty() && !visiting.contains(&name) => {
                    self.follow_variable(e, name, suffix, visiting, depth, out)
                }
                _ => out.push(Chain {
                    root: e,
                    steps: suffix,
                }),
            },
            ExprKind::Block(b) | ExprKind::Async { block: b, .. } => match b.tail() {
                Some(tail) => self.follow(tail, suffix, visiting, depth + 1, out),
                None => out.push(Chain {
                    root: e,
                    steps: suffix,
                }),
            },
            ExprKind::If { then, els, .. } => {
                if let Some(tail) = then.tail() {
                    self.follow(tail, suffix.clone(), visiting, depth + 1, out);
                }
                if let Some(els) = els {
                    self.follow(els, suffix, visiting, depth + 1, out);
                }
            }
            ExprKind::Match { arms, .. } => {
                for arm in arms {
                    self.follow(&arm.body, suffix.clone(), visiting, depth + 1, out);
                }
            }
            _ => out.push(Chain {
                root: e,
                steps: suffix,
            }),
        }
    }

    /// A variable: each definition that does not start from the variable itself is a way it
    /// was built; the definitions that do (`req = req.x(..)`, `let req = req.x(..)`) add their
    /// steps to every such way.
    fn follow_variable(
        &self,
        var: &'a Expr,
        name: &'a str,
        suffix: Vec<Step<'a>>,
        visiting: &mut Vec<&'a str>,
        depth: usize,
        out: &mut Vec<Chain<'a>>,
    ) {
        visiting.push(name);
        let mut bases = Vec::new();
        let mut extensions = Vec::new();
        for def in self.defs(name) {
            let mut found = Vec::new();
            self.follow(def, Vec::new(), visiting, depth + 1, &mut found);
            for chain in found {
                if chain.root.as_path().and_then(|p| p.as_ident()) == Some(name) {
                    extensions.extend(chain.steps);
                } else {
                    bases.push(chain);
                }
            }
        }
        visiting.pop();
        if bases.is_empty() {
            bases.push(Chain {
                root: var,
                steps: Vec::new(),
            });
        }
        for mut chain in bases {
            if out.len() >= MAX_CHAINS {
                break;
            }
            chain.steps.extend(extensions.iter().copied());
            chain.steps.extend(suffix.iter().copied());
            out.push(chain);
        }
    }
}

/// Literals and closures are never the followed value; skipping them keeps the search small.
fn may_carry_value(arg: &Expr) -> bool {
    !matches!(
        arg.peel().kind,
        ExprKind::Lit(Lit::Str(_) | Lit::Int(_) | Lit::Float(_) | Lit::Bool(_) | Lit::Char(_))
            | ExprKind::Closure { .. }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{lower_file, FileId};

    /// The method names of every chain reaching the receiver of the first `send()` in `body`.
    fn chains_at_send(body: &str) -> Vec<(String, Vec<String>)> {
        let src = format!("fn f() {{ {body} }}");
        let file = lower_file(&src, FileId(0), vec!["crate".into()], false).unwrap();
        let block = file.fns[0].body.as_ref().unwrap();
        let locals = Locals::of_body(block);
        let mut receiver = None;
        block.walk(&mut |e| {
            if let ExprKind::MethodCall {
                receiver: r,
                method,
                ..
            } = &e.kind
            {
                if method == "send" && receiver.is_none() {
                    receiver = Some(&**r);
                }
            }
        });
        let show = |chain: &Chain| {
            let root = chain
                .root
                .as_path()
                .map_or("<expr>".to_owned(), |p| p.segments.join("::"));
            let steps = chain
                .steps
                .iter()
                .map(|s| match s {
                    Step::Method(m) => m.method.to_owned(),
                    Step::Through(_) => "<through>".to_owned(),
                })
                .collect();
            (root, steps)
        };
        locals
            .chains(receiver.expect("a send() call"))
            .iter()
            .map(show)
            .collect()
    }

    fn chain(root: &str, steps: &[&str]) -> (String, Vec<String>) {
        (
            root.to_owned(),
            steps.iter().map(|s| s.to_string()).collect(),
        )
    }

    #[test]
    fn a_fluent_chain_is_one_way_from_its_receiver() {
        assert_eq!(
            chains_at_send("client.create_job().role(arn).send();"),
            vec![
                chain("client", &["create_job", "role"]),
                chain("arn", &["<through>"]),
            ]
        );
    }

    #[test]
    fn builder_variables_reassignments_and_shadowing_extend_the_first_definition() {
        let got = chains_at_send(
            "let mut req = client.create_job(); \
             if retry { req = req.queue(q); } \
             let req = req.role(r); \
             let sent = req; \
             sent.send();",
        );
        assert!(got.contains(&chain("client", &["create_job", "queue", "role"])));
    }

    #[test]
    fn branches_give_one_way_each_and_helpers_are_passed_through() {
        let got = chains_at_send(
            "let req = if a { client.create_job().tag(t) } else { client.create_job() }; \
             with_token(req, key).send();",
        );
        assert!(got.contains(&chain("client", &["create_job", "tag", "<through>"])));
        assert!(got.contains(&chain("client", &["create_job", "<through>"])));
    }

    #[test]
    fn self_referencing_definitions_terminate() {
        let got = chains_at_send("let mut a = b; let mut b = a; a = b.x(); a.send();");
        assert!(!got.is_empty());
    }
}
