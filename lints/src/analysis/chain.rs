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

use super::binding::{bind_pattern, keeps_whole, let_parts, part_of};
use crate::model::ir::Pat;
use crate::model::ir::{Block, Expr, ExprKind, Lit, Stmt};
use crate::model::Span;
use std::collections::HashMap;

/// Ways a value may have been built, at most this many per query (counting the partial ways
/// inside variable definitions).
const MAX_CHAINS: usize = 256;
/// Expressions visited per query.
const FUEL: usize = 1024;
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

impl<'a> MethodStep<'a> {
    /// The step of `e` when it is a method call.
    pub fn of(e: &'a Expr) -> Option<Self> {
        match &e.kind {
            ExprKind::MethodCall {
                receiver,
                method,
                method_span,
                args,
            } => Some(MethodStep {
                expr: e,
                receiver,
                method,
                method_span: *method_span,
                args,
            }),
            _ => None,
        }
    }

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
/// e`, `x = e`), closures and nested blocks included. A pattern binds the names whose
/// expression it spells out ([`let_parts`]: `let (a, _) = (x, y)` defines `a` as `x`); a name
/// bound to a part of a value (`let (a, b) = pair()`) has no known definition. A name a
/// pattern unwraps (`Ok(req)`, `Some(req)`) in a `let .. else`, an `if let` or a `match` arm
/// is the scrutinee's value, as `helper()?` is: `match helper() { Ok(req) => req, .. }`
/// builds the same request.
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
            ExprKind::Match { scrutinee, arms } => {
                for arm in arms {
                    locals.add_pattern(&arm.pat, scrutinee);
                }
            }
            ExprKind::Let { pat, expr } => locals.add_pattern(pat, expr),
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
                self.add_pattern(pat, init);
            }
        }
    }

    /// The names `pat` binds from `init`: its part where `init` is written in the pattern's
    /// shape ([`let_parts`]), else the whole `init` for a name that only unwraps it.
    fn add_pattern(&mut self, pat: &'a Pat, init: &'a Expr) {
        let parts = let_parts(pat, init);
        let mut unwrapped = Vec::new();
        bind_pattern(pat, &mut |b, trail| {
            if part_of(init, trail).is_none() && keeps_whole(trail) {
                unwrapped.push(b.name);
            }
        });
        for (name, part) in parts {
            self.defs.entry(name).or_default().push(part);
        }
        for name in unwrapped {
            self.defs.entry(name).or_default().push(init);
        }
    }

    /// The expressions assigned to `name` anywhere in the body.
    pub fn defs(&self, name: &str) -> &[&'a Expr] {
        self.defs.get(name).map(Vec::as_slice).unwrap_or(&[])
    }

    /// Every way `expr`'s value may have been built, or `None` when there are too many to
    /// follow: an incomplete answer could miss the step a caller looks for.
    pub fn chains(&self, expr: &'a Expr) -> Option<Vec<Chain<'a>>> {
        let mut search = Search {
            locals: self,
            visiting: Vec::new(),
            fuel: FUEL,
            chains: 0,
            exhausted: false,
        };
        let mut out = Vec::new();
        search.follow(expr, Vec::new(), 0, &mut out);
        (!search.exhausted).then_some(out)
    }
}

/// One query's state: the variables being followed (a cycle ends there) and its budget.
struct Search<'l, 'a> {
    locals: &'l Locals<'a>,
    visiting: Vec<&'a str>,
    fuel: usize,
    /// Chains made so far, the ones inside variable definitions included.
    chains: usize,
    exhausted: bool,
}

impl<'a> Search<'_, 'a> {
    fn push(&mut self, out: &mut Vec<Chain<'a>>, chain: Chain<'a>) {
        self.chains += 1;
        if self.chains > MAX_CHAINS {
            self.exhausted = true;
        }
        out.push(chain);
    }

    fn follow(
        &mut self,
        expr: &'a Expr,
        suffix: Vec<Step<'a>>,
        depth: usize,
        out: &mut Vec<Chain<'a>>,
    ) {
        if self.exhausted || self.fuel == 0 || depth >= MAX_DEPTH {
            self.exhausted = true;
            return;
        }
        self.fuel -= 1;
        let e = expr.peel();
        let prepend = |step: Step<'a>| {
            let mut steps = Vec::with_capacity(suffix.len() + 1);
            steps.push(step);
            steps.extend(suffix.iter().copied());
            steps
        };
        match &e.kind {
            ExprKind::MethodCall { receiver, args, .. } => {
                let step = MethodStep::of(e).map(Step::Method).expect("a method call");
                self.follow(receiver, prepend(step), depth + 1, out);
                for arg in args.iter().filter(|a| may_carry_value(a)) {
                    self.follow(arg, prepend(Step::Through(e)), depth + 1, out);
                }
            }
            ExprKind::Call { args, .. } => {
                let chain = Chain {
                    root: e,
                    steps: suffix.clone(),
                };
                self.push(out, chain);
                for arg in args.iter().filter(|a| may_carry_value(a)) {
                    self.follow(arg, prepend(Step::Through(e)), depth + 1, out);
                }
            }
            ExprKind::Path(p) => match p.as_ident() {
                Some(name)
                    if !self.locals.defs(name).is_empty() && !self.visiting.contains(&name) =>
                {
                    self.follow_variable(e, name, suffix, depth, out)
                }
                _ => self.push(
                    out,
                    Chain {
                        root: e,
                        steps: suffix,
                    },
                ),
            },
            ExprKind::Block(b) | ExprKind::Async { block: b, .. } => match b.tail() {
                Some(tail) => self.follow(tail, suffix, depth + 1, out),
                None => self.push(
                    out,
                    Chain {
                        root: e,
                        steps: suffix,
                    },
                ),
            },
            ExprKind::If { then, els, .. } => {
                if let Some(tail) = then.tail() {
                    self.follow(tail, suffix.clone(), depth + 1, out);
                }
                if let Some(els) = els {
                    self.follow(els, suffix, depth + 1, out);
                }
            }
            ExprKind::Match { arms, .. } => {
                for arm in arms {
                    self.follow(&arm.body, suffix.clone(), depth + 1, out);
                }
            }
            _ => self.push(
                out,
                Chain {
                    root: e,
                    steps: suffix,
                },
            ),
        }
    }

    /// A variable: each definition that does not start from the variable itself is a way it
    /// was built; the definitions that do (`req = req.x(..)`, `let req = req.x(..)`) add their
    /// steps to every such way.
    fn follow_variable(
        &mut self,
        var: &'a Expr,
        name: &'a str,
        suffix: Vec<Step<'a>>,
        depth: usize,
        out: &mut Vec<Chain<'a>>,
    ) {
        self.visiting.push(name);
        let mut bases = Vec::new();
        let mut extensions = Vec::new();
        for def in self.locals.defs(name) {
            let mut found = Vec::new();
            self.follow(def, Vec::new(), depth + 1, &mut found);
            for chain in found {
                if chain.root.as_path().and_then(|p| p.as_ident()) == Some(name) {
                    extensions.extend(chain.steps);
                } else {
                    bases.push(chain);
                }
            }
        }
        self.visiting.pop();
        if bases.is_empty() {
            bases.push(Chain {
                root: var,
                steps: Vec::new(),
            });
        }
        for mut chain in bases {
            chain.steps.extend(extensions.iter().copied());
            chain.steps.extend(suffix.iter().copied());
            self.push(out, chain);
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
            .expect("a small search")
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
    fn a_name_a_pattern_unwraps_is_the_scrutinee() {
        for body in [
            "let req = match client.create_job() { Ok(r) => r, Err(_) => return }; req.role(a).send();",
            "let Some(req) = client.create_job() else { return }; req.role(a).send();",
            "if let Ok(req) = client.create_job() { req.role(a).send(); }",
        ] {
            assert!(
                chains_at_send(body).contains(&chain("client", &["create_job", "role"])),
                "{body}: {:?}",
                chains_at_send(body)
            );
        }
        // `Err(e)` is not the value, and a part of a value is not its whole.
        for body in [
            "let req = match client.create_job() { Err(r) => r, Ok(_) => return }; req.role(a).send();",
            "let Pair(req, _) = client.create_job() else { return }; req.role(a).send();",
        ] {
            assert!(
                !chains_at_send(body).contains(&chain("client", &["create_job", "role"])),
                "{body}"
            );
        }
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
    fn data_flow_that_fans_out_gives_up_instead_of_exploding() {
        // Each variable is built from the previous one twice: 2^40 ways without a budget.
        let mut body = String::from("let a0 = seed;");
        for i in 1..=40 {
            body.push_str(&format!("let a{i} = a{p}.mix(a{p});", p = i - 1));
        }
        body.push_str("a40.send();");
        let src = format!("fn f() {{ {body} }}");
        let file = lower_file(&src, FileId(0), vec!["crate".into()], false).unwrap();
        let block = file.fns[0].body.as_ref().unwrap();
        let locals = Locals::of_body(block);
        let Some(Stmt::Expr { expr, .. }) = block.stmts.last() else {
            panic!("a trailing send");
        };
        let ExprKind::MethodCall { receiver, .. } = &expr.kind else {
            panic!("a method call");
        };
        assert!(locals.chains(receiver).is_none());
    }

    #[test]
    fn self_referencing_definitions_terminate() {
        let got = chains_at_send("let mut a = b; let mut b = a; a = b.x(); a.send();");
        assert!(!got.is_empty());
    }
}
