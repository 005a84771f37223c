//! Where a fresh random key is made, relative to where it is used: the shapes in which a key
//! is minted once at the origin of a request and then reused, as Stripe's clients do, rather
//! than minted anew for every delivery or every attempt.
//!
//! Public API: [`minted_at_origin`]`(body, mint, sink) -> Option<Origin>` reads the
//! function's structure only; [`consumer_running`] says whether a delivery's consumer runs the
//! function (so that a key minted before its retry loop is still minted per delivery).

use super::callgraph::CallGraph;
use super::entry::EntryKind;
use super::flow::FnId;
use crate::model::ir::{BinOp, Block, Expr, ExprKind, Lit, Pat, Stmt};
use crate::model::Span;
use std::collections::{HashSet, VecDeque};

/// Why a key minted at `mint` is made once per request rather than once per delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Minted before a retry loop (`loop`, `while`, `for _ in 0..n`) that uses it on every
    /// attempt: the loop's span.
    RetryLoop(Span),
    /// Minted only when no key was given (`if !headers.contains_key(..) { .. }`, the `else`
    /// of `if let Some(k) = given`): the condition's span.
    WhenAbsent(Span),
    /// Rendered into an HTML form field (`<input name="idempotency_key" value="{key}">`)
    /// that the submitted request carries back: the macro's span.
    RenderedForm(Span),
}

/// Whether the key minted at `mint` (a span inside `body`; the call that entered the
/// function when the key was made by a helper) and used as a key at `sink` is made once at
/// the origin of a request. See [`Origin`] for the shapes.
pub fn minted_at_origin(body: &Block, mint: Span, sink: Span) -> Option<Origin> {
    when_absent(body, mint, sink)
        .or_else(|| rendered_form(body, mint))
        .or_else(|| retry_loop(body, mint, sink))
}

/// Entry kinds that run once per delivery: a request, a message, a job, a task. `main` and
/// a library's public functions run when their caller decides, so a key they mint is the
/// origin's.
pub fn consumes_deliveries(kind: EntryKind) -> bool {
    !matches!(kind, EntryKind::Main | EntryKind::PublicApi)
}

/// The consumer (one of `consumers`) that runs fn `id`, itself or through its callers: a key
/// minted there, even before a retry loop, is minted anew for every delivery.
pub fn consumer_running(graph: &CallGraph, consumers: &HashSet<FnId>, id: FnId) -> Option<FnId> {
    let mut seen = HashSet::from([id]);
    let mut queue = VecDeque::from([id]);
    while let Some(f) = queue.pop_front() {
        if consumers.contains(&f) {
            return Some(f);
        }
        for (caller, _) in graph.callers(f) {
            if seen.insert(caller) {
                queue.push_back(caller);
            }
        }
    }
    None
}

/// Minted in the branch an `if` takes when no key was given: the `if` tests the key's own
/// holder (`headers`, the `given` option), not some other lookup (`!seen.contains_key(id)`
/// guards work, and a key minted there is a consumer's).
fn when_absent(body: &Block, mint: Span, sink: Span) -> Option<Origin> {
    let dest = sink_destination(body, sink);
    let mut found = None;
    body.walk(&mut |e| {
        let ExprKind::If { cond, then, els } = &e.kind else {
            return;
        };
        let Some((present, holder)) = presence_test(cond) else {
            return;
        };
        let holds_key = |b: &Block| dest.as_deref() == Some(holder) || assigns(b, holder);
        let in_then = then.span.contains(mint) && !present && holds_key(then);
        // `if let Some(k) = given { k } else { mint }`: the `if` yields the given key or a
        // fresh one.
        let in_else = els.as_ref().is_some_and(|x| x.span.contains(mint))
            && present
            && (then.tail().is_some() || dest.as_deref() == Some(holder));
        if (in_then || in_else) && found.is_none() {
            found = Some(Origin::WhenAbsent(cond.span));
        }
    });
    found
}

/// Whether `cond` holds when a key is there (`x.contains_key(..)`, `x.is_some()`,
/// `let Some(..) = x`: `true`) or when none is (`!x.contains_key(..)`, `x.is_none()`:
/// `false`), with the variable it tests.
fn presence_test(cond: &Expr) -> Option<(bool, &str)> {
    match &cond.peel().kind {
        ExprKind::Unary { not: true, expr } => presence_test(expr).map(|(p, h)| (!p, h)),
        ExprKind::MethodCall {
            method, receiver, ..
        } => {
            let present = match method.as_str() {
                "contains_key" | "contains" | "is_some" | "is_ok" => true,
                "is_none" | "is_empty" | "is_err" => false,
                _ => return None,
            };
            Some((present, root_name(receiver)?))
        }
        ExprKind::Let { pat, expr } if binds_a_value(pat) => Some((true, root_name(expr)?)),
        // `post && !headers.contains_key(..)`: the `then` branch runs only without a key
        // (an `else` says nothing, so only an absence test counts).
        ExprKind::Binary {
            op: BinOp::And,
            lhs,
            rhs,
        } => [lhs, rhs]
            .into_iter()
            .find_map(|side| presence_test(side).filter(|(present, _)| !present)),
        _ => None,
    }
}

/// `req` of `req.headers().get(k)`, `self.key`, `&given`.
fn root_name(e: &Expr) -> Option<&str> {
    let mut root = e.peel();
    while let ExprKind::MethodCall { receiver: r, .. } | ExprKind::Field { base: r, .. } =
        &root.kind
    {
        root = r.peel();
    }
    root.as_path().and_then(|p| p.as_ident())
}

/// Whether `b` assigns variable `name` (`key = Some(..)`).
fn assigns(b: &Block, name: &str) -> bool {
    let mut found = false;
    b.walk(&mut |e| {
        if let ExprKind::Assign { lhs, .. } = &e.kind {
            found |= root_name(lhs) == Some(name);
        }
    });
    found
}

/// `Some(k)` and `Ok(k)`: the pattern matches when a value is there.
fn binds_a_value(pat: &Pat) -> bool {
    match pat {
        Pat::TupleStruct { path, .. } => path
            .segments
            .last()
            .is_some_and(|s| s == "Some" || s == "Ok"),
        Pat::Ref(p) | Pat::Typed { pat: p, .. } => binds_a_value(p),
        _ => false,
    }
}

/// The key is bound by `let name = ..mint..` and `name` is an argument of a macro whose
/// template holds an HTML `<input`.
fn rendered_form(body: &Block, mint: Span) -> Option<Origin> {
    let mut names = Vec::new();
    let mut collect = |b: &Block| {
        for s in &b.stmts {
            if let Stmt::Let {
                pat,
                init: Some(init),
                ..
            } = s
            {
                if init.span.contains(mint) {
                    names.extend(pat.simple_name().map(str::to_owned));
                }
            }
        }
    };
    collect(body);
    body.walk(&mut |e| {
        if let ExprKind::Block(b) | ExprKind::Async { block: b, .. } = &e.kind {
            collect(b);
        }
    });
    let mut found = None;
    body.walk(&mut |e| {
        let ExprKind::Macro(m) = &e.kind else {
            return;
        };
        let html = m.args.iter().any(|a| match &a.kind {
            ExprKind::Lit(Lit::Str(s)) => s.to_ascii_lowercase().contains("<input"),
            _ => false,
        });
        let carries = m.args.iter().any(|a| {
            a.peel()
                .as_path()
                .and_then(|p| p.as_ident())
                .is_some_and(|n| names.iter().any(|k| k == n))
        });
        if html && carries && found.is_none() {
            found = Some(Origin::RenderedForm(e.span));
        }
    });
    found
}

fn retry_loop(body: &Block, mint: Span, sink: Span) -> Option<Origin> {
    let loops = retry_loops(body);
    if loops.iter().any(|l| l.span.contains(mint)) {
        return None;
    }
    let dest = sink_destination(body, sink);
    loops
        .iter()
        .filter(|l| l.span.lo >= mint.hi)
        .find(|l| {
            l.span.contains(sink)
                || (sink.hi <= l.span.lo && dest.as_deref().is_some_and(|d| mentions(l, d)))
        })
        .map(|l| Origin::RetryLoop(l.span))
}

/// `loop`, `while` and `for _ in <range>`: loops that repeat an attempt. A `for` over
/// items (`for record in event.records`) handles one item per turn and is not one.
fn retry_loops(body: &Block) -> Vec<&Expr> {
    let mut out = Vec::new();
    body.walk(&mut |e| match &e.kind {
        ExprKind::Loop { .. } => out.push(e),
        ExprKind::For { iter, .. } if matches!(iter.peel().kind, ExprKind::Range { .. }) => {
            out.push(e)
        }
        _ => {}
    });
    out
}

/// The variable a sink outside the loop wrote the key into: `headers` of
/// `headers.insert(k, key);`, `req` of `let req = http.post(u).header(k, key);`.
fn sink_destination(body: &Block, sink: Span) -> Option<String> {
    let mut found = None;
    let mut visit = |b: &Block| {
        for s in &b.stmts {
            match s {
                Stmt::Let {
                    pat,
                    init: Some(init),
                    ..
                } if init.span.contains(sink) => {
                    found = pat.simple_name().map(str::to_owned);
                }
                Stmt::Expr { expr: e, .. } if e.span.contains(sink) => {
                    if let Some(name) = root_name(e) {
                        found = Some(name.to_owned());
                    }
                }
                _ => {}
            }
        }
    };
    visit(body);
    body.walk(&mut |e| match &e.kind {
        ExprKind::Block(b) | ExprKind::Async { block: b, .. } => visit(b),
        ExprKind::If { then, .. } => visit(then),
        _ => {}
    });
    found
}

fn mentions(e: &Expr, name: &str) -> bool {
    let mut found = false;
    e.walk(&mut |x| {
        found |= x.as_path().and_then(|p| p.as_ident()) == Some(name);
    });
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    /// The origin of the first `Uuid::new_v4()` used at the first `KEY` occurrence.
    fn origin(body: &str) -> Option<Origin> {
        let src = format!("fn f(http: C, headers: H, given: Option<String>) {{ {body} }}");
        let package = testing::package("app", &[], &[("crate", &src)]);
        let f = &package.files[0].fns[0];
        let body = f.body.as_ref().unwrap();
        let mint = src.find("Uuid::new_v4()").expect("a mint") as u32;
        let sink = src.find("KEY").expect("a sink") as u32;
        let span = |lo: u32| Span::new(body.span.file, lo, lo + 3);
        minted_at_origin(body, span(mint), span(sink))
    }

    #[test]
    fn a_key_minted_before_the_retry_loop_is_made_once() {
        let before = "let k = Uuid::new_v4(); loop { http.header(KEY, &k).send(); }";
        assert!(matches!(origin(before), Some(Origin::RetryLoop(_))));
        let ranged = "let k = Uuid::new_v4(); for _ in 0..3 { http.header(KEY, &k).send(); }";
        assert!(matches!(origin(ranged), Some(Origin::RetryLoop(_))));
        let inserted =
            "headers.insert(KEY, Uuid::new_v4()); while go() { http.send(headers.clone()); }";
        assert!(matches!(origin(inserted), Some(Origin::RetryLoop(_))));
    }

    #[test]
    fn a_key_minted_per_attempt_or_per_item_is_not() {
        let inside = "loop { let k = Uuid::new_v4(); http.header(KEY, &k).send(); }";
        assert_eq!(origin(inside), None);
        let per_item = "let k = Uuid::new_v4(); for r in records { http.header(KEY, &k).send(); }";
        assert_eq!(origin(per_item), None);
        let unrelated = "headers.insert(KEY, Uuid::new_v4()); loop { http.send(other); }";
        assert_eq!(origin(unrelated), None);
    }

    #[test]
    fn a_key_minted_only_when_none_was_given_is_a_default() {
        let absent = "if !headers.contains_key(K) { headers.insert(KEY, Uuid::new_v4()); }";
        assert!(matches!(origin(absent), Some(Origin::WhenAbsent(_))));
        let els =
            "let k = if let Some(k) = given { k } else { Uuid::new_v4() }; http.header(KEY, k);";
        assert!(matches!(origin(els), Some(Origin::WhenAbsent(_))));
        // svix: `if post && !self.headers.contains_key(..) { self.headers.insert(..) }`.
        let both = "if post && !self.headers.contains_key(K) { self.headers.insert(KEY, Uuid::new_v4()); }";
        assert!(matches!(origin(both), Some(Origin::WhenAbsent(_))));
        let present = "if headers.contains_key(K) { headers.insert(KEY, Uuid::new_v4()); }";
        assert_eq!(origin(present), None);
        // A guard on some other lookup says nothing of the key.
        let other = "if !seen.contains_key(id) { headers.insert(KEY, Uuid::new_v4()); }";
        assert_eq!(origin(other), None);
        let assigned =
            "let mut k = given; if k.is_none() { k = Some(Uuid::new_v4()); } http.header(KEY, k);";
        assert!(matches!(origin(assigned), Some(Origin::WhenAbsent(_))));
    }

    #[test]
    fn a_key_rendered_into_a_form_field_is_handed_to_the_client() {
        let form = "let idempotency_key = Uuid::new_v4(); \
                    let KEY = 0; \
                    format!(r#\"<input hidden name=\"idempotency_key\" value=\"{idempotency_key}\">\"#)";
        assert!(matches!(origin(form), Some(Origin::RenderedForm(_))));
        let plain =
            "let idempotency_key = Uuid::new_v4(); let KEY = 0; format!(\"key={idempotency_key}\")";
        assert_eq!(origin(plain), None);
    }
}
