//! What has happened on every path to a point of a function: a forward "must" analysis over
//! the structured IR.
//!
//! Rust code without `goto` needs no explicit control-flow graph for this: statements run in
//! order, `if`/`match` arms join by intersection, a loop body may run zero times, `return`,
//! `break`, `continue` and diverging macros end a path, and `?` only leaves on the error path
//! (the path that goes on keeps what held). Closures and async blocks run later, after what
//! held where they were made; what they do holds outside only when the caller says they run
//! during the call that takes them ([`Events::runs_arguments`], for transaction closures), or
//! for `async { .. }.await` and the futures of a `join!`, which run side by side.
//!
//! Callers choose the facts (small integers) and say, per expression, which facts it
//! establishes once evaluated: "the guard ran", "the transaction committed".

use crate::model::ir::{BinOp, Block, Expr, ExprKind, Lit, Pat, Stmt};

/// A set of facts, each a small integer chosen by the caller.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Facts(Vec<u64>);

impl Facts {
    pub fn insert(&mut self, fact: u32) {
        let (word, bit) = (fact as usize / 64, fact % 64);
        if self.0.len() <= word {
            self.0.resize(word + 1, 0);
        }
        self.0[word] |= 1 << bit;
    }

    pub fn contains(&self, fact: u32) -> bool {
        let (word, bit) = (fact as usize / 64, fact % 64);
        self.0.get(word).is_some_and(|w| w & (1 << bit) != 0)
    }

    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|w| *w == 0)
    }

    /// The facts, in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().enumerate().flat_map(|(i, w)| {
            (0..64)
                .filter(move |b| w & (1 << b) != 0)
                .map(move |b| (i * 64 + b) as u32)
        })
    }

    fn intersect(&mut self, other: &Facts) {
        self.0.truncate(other.0.len());
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            *a &= b;
        }
    }
}

/// What a client of the walk observes and establishes.
pub trait Events {
    /// Called for every reachable expression once its operands have been evaluated, with the
    /// facts that hold on every path to it; adds the facts its own evaluation establishes.
    fn at(&mut self, e: &Expr, facts: &mut Facts);

    /// Whether the closures and async blocks among the arguments of `call` run before `call`
    /// returns, so that what they establish holds after it (`pool.transaction(|tx| ..)`).
    fn runs_arguments(&self, _call: &Expr) -> bool {
        false
    }

    /// Whether `fact`, established in a loop body, holds after the loop although the body
    /// may run zero times: a fact that matters only on the paths where it happened ("a write
    /// was done"), where a loop that ran no round did nothing to report.
    fn kept_after_loop(&self, _fact: u32) -> bool {
        false
    }
}

/// Walks `body` from its start, where `start` holds.
pub fn walk(body: &Block, start: Facts, events: &mut impl Events) {
    let mut w = Walker {
        events,
        loops: Vec::new(),
        returns: None,
    };
    let mut st = Some(start);
    w.block(body, &mut st);
}

/// The facts holding at a point; `None` where no path reaches (after `return`), which is the
/// identity of the join.
type State = Option<Facts>;

fn join(a: State, b: State) -> State {
    match (a, b) {
        (None, x) | (x, None) => x,
        (Some(mut a), Some(b)) => {
            a.intersect(&b);
            Some(a)
        }
    }
}

/// After futures that all run to completion: what any of them established; nothing
/// follows when one never completes.
fn both(a: State, b: State) -> State {
    let (mut a, b) = (a?, b?);
    if a.0.len() < b.0.len() {
        a.0.resize(b.0.len(), 0);
    }
    for (x, y) in a.0.iter_mut().zip(&b.0) {
        *x |= y;
    }
    Some(a)
}

struct Walker<'e, E> {
    events: &'e mut E,
    /// For each enclosing loop of the current body, the join of the states at its `break`s.
    loops: Vec<State>,
    /// In a closure body run during the call, the join of the states at its `return`s.
    returns: State,
}

/// `true` or `false`.
fn bool_pat(p: &Pat) -> bool {
    matches!(p, Pat::Lit(Lit::Bool(_)))
}

/// Macros that never return.
fn diverges(name: &str) -> bool {
    matches!(
        name,
        "panic" | "unreachable" | "todo" | "unimplemented" | "bail"
    )
}

impl<E: Events> Walker<'_, E> {
    /// Walks an `if` condition; the facts on its true and its false exit. The right operand
    /// of `a || b` has run when the condition is false (`if skip || seen(id) { return }`
    /// checks `seen` on the path that goes on), that of `a && b` when it is true.
    fn condition(&mut self, cond: &Expr, st: &mut State) -> (State, State) {
        match &cond.kind {
            ExprKind::Binary {
                op: BinOp::Or,
                lhs,
                rhs,
            } => {
                let (left_yes, mut left_no) = self.condition(lhs, st);
                let (right_yes, right_no) = self.condition(rhs, &mut left_no);
                (join(left_yes, right_yes), right_no)
            }
            ExprKind::Binary {
                op: BinOp::And,
                lhs,
                rhs,
            } => {
                let (mut left_yes, left_no) = self.condition(lhs, st);
                let (right_yes, right_no) = self.condition(rhs, &mut left_yes);
                (right_yes, join(left_no, right_no))
            }
            ExprKind::Unary { not: true, expr } => {
                let (yes, no) = self.condition(expr, st);
                (no, yes)
            }
            _ => {
                self.expr(cond, st);
                (st.clone(), st.take())
            }
        }
    }

    fn block(&mut self, b: &Block, st: &mut State) {
        for stmt in &b.stmts {
            match stmt {
                Stmt::Let { init, diverge, .. } => {
                    if let Some(init) = init {
                        self.expr(init, st);
                    }
                    if let Some(d) = diverge {
                        let mut other = st.clone();
                        self.block(d, &mut other);
                    }
                }
                Stmt::Expr { expr, .. } => self.expr(expr, st),
                Stmt::Item { .. } => {}
            }
        }
    }

    fn expr(&mut self, e: &Expr, st: &mut State) {
        match &e.kind {
            ExprKind::Call { func, args } => {
                self.expr(func, st);
                self.args(e, args, st);
            }
            ExprKind::MethodCall { receiver, args, .. } => {
                self.expr(receiver, st);
                self.args(e, args, st);
            }
            // `join!(a, b)` runs its futures side by side and returns once all are done:
            // each starts from what held before it, and what any of them establishes holds
            // after it (never in a sibling: `join!(reserve(k), notify(k))` is unguarded).
            ExprKind::Macro(m) if m.joins_futures() => {
                let before = st.clone();
                for a in &m.args {
                    let mut arm = before.clone();
                    self.inline(|w, st| w.run_now(a, st), &mut arm);
                    *st = both(st.take(), arm);
                }
            }
            ExprKind::Macro(m) => {
                m.args.iter().for_each(|a| self.expr(a, st));
                if diverges(m.path.last()) {
                    *st = None;
                }
            }
            ExprKind::Binary {
                op: BinOp::And | BinOp::Or,
                lhs,
                rhs,
            } => {
                // The right operand may not run; facts only grow, so the join is the left's.
                self.expr(lhs, st);
                let mut right = st.clone();
                self.expr(rhs, &mut right);
            }
            ExprKind::Block(b) => self.block(b, st),
            ExprKind::Async { block, .. } => {
                let mut later = st.clone();
                self.detached(|w| w.block(block, &mut later));
            }
            ExprKind::Closure { body, .. } => {
                let mut later = st.clone();
                self.detached(|w| w.expr(body, &mut later));
            }
            ExprKind::Await(inner) if matches!(inner.kind, ExprKind::Async { .. }) => {
                self.inline(|w, st| w.run_now(inner, st), st)
            }
            ExprKind::If { cond, then, els } => {
                let (mut yes, mut no) = self.condition(cond, st);
                self.block(then, &mut yes);
                if let Some(els) = els {
                    self.expr(els, &mut no);
                }
                *st = join(yes, no);
            }
            // `match skip || seen(id) { true => .., false => .. }` is an `if`.
            ExprKind::Match { scrutinee, arms } if arms.iter().all(|a| bool_pat(&a.pat)) => {
                let (yes, no) = self.condition(scrutinee, st);
                let mut out = None;
                for arm in arms {
                    let mut s = match arm.pat {
                        Pat::Lit(Lit::Bool(true)) => yes.clone(),
                        _ => no.clone(),
                    };
                    if let Some(g) = &arm.guard {
                        self.expr(g, &mut s);
                    }
                    self.expr(&arm.body, &mut s);
                    out = join(out, s);
                }
                *st = out;
            }
            ExprKind::Match { scrutinee, arms } => {
                self.expr(scrutinee, st);
                let mut out = None;
                for arm in arms {
                    let mut s = st.clone();
                    if let Some(g) = &arm.guard {
                        self.expr(g, &mut s);
                    }
                    self.expr(&arm.body, &mut s);
                    out = join(out, s);
                }
                *st = out;
            }
            ExprKind::Loop { cond, body } => {
                if let Some(c) = cond {
                    self.expr(c, st);
                }
                self.loops.push(None);
                let mut inner = st.clone();
                self.block(body, &mut inner);
                let breaks = self.loops.pop().flatten();
                let kept = self.kept(&inner, &breaks);
                // `loop` leaves only by `break`; `while` also when its condition fails.
                *st = match cond {
                    Some(_) => join(st.take(), breaks),
                    None => breaks,
                };
                self.keep(st, kept);
            }
            ExprKind::For { iter, body, .. } => {
                self.expr(iter, st);
                self.loops.push(None);
                let mut inner = st.clone();
                self.block(body, &mut inner);
                let breaks = self.loops.pop().flatten();
                let kept = self.kept(&inner, &breaks);
                *st = join(st.take(), breaks);
                self.keep(st, kept);
            }
            ExprKind::Return(v) => {
                if let Some(v) = v {
                    self.expr(v, st);
                }
                self.returns = join(self.returns.take(), st.take());
            }
            ExprKind::Break(v) => {
                if let Some(v) = v {
                    self.expr(v, st);
                }
                if let Some(l) = self.loops.last_mut() {
                    *l = join(l.take(), st.take());
                }
                *st = None;
            }
            ExprKind::Continue => *st = None,
            _ => e.for_each_child(&mut |c| self.expr(c, st)),
        }
        if let Some(facts) = st {
            self.events.at(e, facts);
        }
    }

    /// The facts of a loop body's end and its `break`s that the client keeps after the loop.
    fn kept(&self, end: &State, breaks: &State) -> Vec<u32> {
        let mut out: Vec<u32> = end
            .iter()
            .chain(breaks.iter())
            .flat_map(Facts::iter)
            .filter(|f| self.events.kept_after_loop(*f))
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    fn keep(&self, st: &mut State, kept: Vec<u32>) {
        if let Some(facts) = st {
            for f in kept {
                facts.insert(f);
            }
        }
    }

    fn args(&mut self, call: &Expr, args: &[Expr], st: &mut State) {
        let inline = self.events.runs_arguments(call);
        for a in args {
            match closure_body(a) {
                Some(body) if inline => self.inline(|w, st| w.run_now(body, st), st),
                _ => self.expr(a, st),
            }
        }
    }

    /// A closure body or async block evaluated where it stands.
    fn run_now(&mut self, body: &Expr, st: &mut State) {
        match &body.kind {
            ExprKind::Async { block, .. } => self.block(block, st),
            _ => self.expr(body, st),
        }
    }

    /// A body that runs later, in its own frame: its `return`s and `break`s are its own.
    fn detached(&mut self, run: impl FnOnce(&mut Self)) {
        let loops = std::mem::take(&mut self.loops);
        let returns = self.returns.take();
        run(self);
        self.loops = loops;
        self.returns = returns;
    }

    /// A body that runs now, to completion: what holds after it is the join of its end and
    /// its `return`s.
    fn inline(&mut self, run: impl FnOnce(&mut Self, &mut State), st: &mut State) {
        let loops = std::mem::take(&mut self.loops);
        let returns = self.returns.take();
        run(self, st);
        let inner_returns = std::mem::replace(&mut self.returns, returns);
        self.loops = loops;
        *st = join(st.take(), inner_returns);
    }
}

/// The body of a closure or async block passed as an argument, through the wrappers
/// transaction APIs want (`|tx| Box::pin(async move { .. })`, `.scope_boxed()`).
fn closure_body(arg: &Expr) -> Option<&Expr> {
    match &arg.kind {
        ExprKind::Closure { body, .. } => Some(unwrap_future(body)),
        ExprKind::Async { .. } => Some(arg),
        _ => None,
    }
}

fn unwrap_future(e: &Expr) -> &Expr {
    match &e.kind {
        // `|tx| { Box::pin(async move { .. }) }`: a block that only returns the future.
        ExprKind::Block(b) if b.stmts.len() == 1 => match b.tail() {
            Some(tail) => unwrap_future(tail),
            None => e,
        },
        ExprKind::Call { func, args }
            if args.len() == 1 && func.as_path().is_some_and(|p| p.last() == "pin") =>
        {
            unwrap_future(&args[0])
        }
        ExprKind::MethodCall {
            receiver, method, ..
        } if matches!(method.as_str(), "scope_boxed" | "boxed") => unwrap_future(receiver),
        _ => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{lower_file, FileId};
    use std::collections::BTreeMap;

    /// Calls named `g*` establish a fact (their number); every call `x*` records the facts
    /// holding there. `run_in(..)` runs its closure during the call.
    struct Probe(BTreeMap<String, Vec<u32>>);

    fn callee(e: &Expr) -> Option<&str> {
        match &e.kind {
            ExprKind::Call { func, .. } => func.as_path().map(|p| p.last()),
            ExprKind::MethodCall { method, .. } => Some(method),
            _ => None,
        }
    }

    impl Events for Probe {
        fn at(&mut self, e: &Expr, facts: &mut Facts) {
            let Some(name) = callee(e) else { return };
            if let Some(n) = name.strip_prefix('g') {
                facts.insert(n.parse().unwrap());
            } else if name.starts_with('x') {
                self.0.insert(name.to_owned(), facts.iter().collect());
            }
        }

        fn runs_arguments(&self, call: &Expr) -> bool {
            callee(call) == Some("run_in")
        }
    }

    fn facts(body: &str) -> BTreeMap<String, Vec<u32>> {
        let src = format!("async fn f() {{ {body} }}");
        let file = lower_file(&src, FileId(0), vec!["crate".into()], false).unwrap();
        let mut probe = Probe(BTreeMap::new());
        walk(
            file.fns[0].body.as_ref().unwrap(),
            Facts::default(),
            &mut probe,
        );
        probe.0
    }

    fn at<'a>(m: &'a BTreeMap<String, Vec<u32>>, x: &str) -> &'a [u32] {
        m.get(x)
            .map(Vec::as_slice)
            .unwrap_or_else(|| panic!("{x} not reached: {m:?}"))
    }

    #[test]
    fn sequence_question_mark_and_let_else_dominate() {
        let m = facts("g1(k)?; x1(); let Ok(_) = g2(k).await else { return; }; x2(); x3(g3()?);");
        assert_eq!(at(&m, "x1"), [1]);
        assert_eq!(at(&m, "x2"), [1, 2]);
        assert_eq!(at(&m, "x3"), [1, 2, 3]);
    }

    #[test]
    fn branches_join_and_diverging_branches_do_not_count() {
        let m = facts(
            "if c { g1(); } x1();
             if c { g2(); } else { return; } x2();
             if g3() { x3(); }
             match g4() { Ok(true) => x4(), Ok(false) => return, Err(e) => panic!() }
             let dup = c && g5(); x5();",
        );
        assert_eq!(at(&m, "x1"), [] as [u32; 0]);
        assert_eq!(at(&m, "x2"), [2]);
        assert_eq!(at(&m, "x3"), [2, 3]);
        assert_eq!(at(&m, "x4"), [2, 3, 4]);
        assert_eq!(at(&m, "x5"), [2, 3, 4]);
    }

    #[test]
    fn loops_may_not_run_and_continue_skips() {
        let m = facts(
            "for m in ms { if !g1(m) { continue; } x1(m); } x2();
             loop { g2(); break; } x3();
             while c { g3(); } x4();",
        );
        assert_eq!(at(&m, "x1"), [1]);
        assert_eq!(at(&m, "x2"), [] as [u32; 0]);
        assert_eq!(at(&m, "x3"), [2]);
        assert_eq!(at(&m, "x4"), [2]);
    }

    /// Facts numbered 5 and up are kept after a loop that may not have run.
    struct Keeping(Probe);

    impl Events for Keeping {
        fn at(&mut self, e: &Expr, facts: &mut Facts) {
            self.0.at(e, facts)
        }

        fn kept_after_loop(&self, fact: u32) -> bool {
            fact >= 5
        }
    }

    #[test]
    fn facts_the_client_keeps_survive_a_loop_that_may_not_run() {
        let src = "async fn f() { for m in ms { g1(); g5(m); } x1(); while c { g6(); } x2(); \
                   loop { if d { g7(); break; } } x3(); for m in ms { if !g8(m) { continue; } } x4(); }";
        let file = lower_file(src, FileId(0), vec!["crate".into()], false).unwrap();
        let mut probe = Keeping(Probe(BTreeMap::new()));
        walk(
            file.fns[0].body.as_ref().unwrap(),
            Facts::default(),
            &mut probe,
        );
        let m = probe.0 .0;
        assert_eq!(at(&m, "x1"), [5]);
        assert_eq!(at(&m, "x2"), [5, 6]);
        assert_eq!(at(&m, "x3"), [5, 6, 7]);
        // `g8` runs before the `continue`, on every round.
        assert_eq!(at(&m, "x4"), [5, 6, 7, 8]);
    }

    #[test]
    fn closures_run_later_unless_run_during_the_call() {
        let m = facts(
            "g1(); spawn(async move { g2(); x1(); }); x2();
             let h = |v| { g3(); x3(); }; x4();
             pool.run_in(|tx| Box::pin(async move { g4(); if c { return Ok(()); } g5(); x5(); })).await?;
             x6();
             pool.run_in(|tx| { Box::pin(async move { g9(); }) }).await?;
             x9();
             async { g6(); }.await; x7();",
        );
        assert_eq!(at(&m, "x1"), [1, 2]);
        assert_eq!(at(&m, "x2"), [1]);
        assert_eq!(at(&m, "x3"), [1, 3]);
        assert_eq!(at(&m, "x4"), [1]);
        assert_eq!(at(&m, "x5"), [1, 4, 5]);
        assert_eq!(at(&m, "x6"), [1, 4]);
        assert_eq!(at(&m, "x7"), [1, 4, 6, 9]);
        assert_eq!(at(&m, "x9"), [1, 4, 9]);
    }

    #[test]
    fn nothing_after_return_is_reached() {
        let m = facts("g1(); return; x1();");
        assert!(!m.contains_key("x1"));
    }
}
