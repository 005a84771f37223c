//! Where a fresh random key is made, relative to where it is used: the shapes in which a key
//! is minted once at the origin of a request and then reused, as Stripe's clients do, rather
//! than minted anew for every delivery or every attempt.
//!
//! Public API: [`minted_at_origin`]`(body, mint, sink) -> Option<Origin>` reads the
//! function's structure only; [`consumer_running`] says whether a delivery's consumer runs the
//! function (so that a key minted before its retry loop is still minted per delivery).

use super::binding::{bind_pattern, let_parts};
use super::callgraph::CallGraph;
use super::entry::EntryKind;
use super::flow::FnId;
use crate::model::ir::{BinOp, Block, Expr, ExprKind, Lit, Pat, Stmt};
use crate::model::Span;
use std::collections::{HashMap, HashSet, VecDeque};

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
/// the origin of a request. See [`Origin`] for the shapes. A caller asking this of many keys
/// of one body indexes it once ([`BodyIndex`]).
pub fn minted_at_origin(body: &Block, mint: Span, sink: Span) -> Option<Origin> {
    BodyIndex::new(body).minted_at_origin(mint, sink)
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

/// What [`minted_at_origin`] reads of a body, gathered in one walk, so that each key asks
/// about the few places around it: a body with thousands of keys cost a walk of the whole
/// body per key and per shape (quadratic).
pub struct BodyIndex<'a> {
    /// Statements that tell where a sink's value goes ([`BodyIndex::sink_destination`]).
    destinations: Nested<Destination<'a>>,
    /// `if`s that test whether a key is present ([`BodyIndex::when_absent`]).
    presence_ifs: Nested<PresenceIf<'a>>,
    /// Initializers of `let name = ..` ([`BodyIndex::rendered_form`]).
    lets: Nested<&'a str>,
    /// Per name, the first macro (walk order, span) with an HTML `<input` that carries it.
    forms: HashMap<&'a str, Walked>,
    /// Retry loops ([`is_retry_loop`]).
    loops: Nested<Span>,
    /// Per name, the starts of the retry loops that mention it, in order, each with the
    /// first loop (walk order, span) among those starting there or later.
    mentioned_in: HashMap<&'a str, Vec<(u32, Walked)>>,
}

/// An expression's place in walk order, and its span.
type Walked = (usize, Span);

/// A statement whose value (its `let` binding, or the variable its expression starts from)
/// receives what a sink inside it writes: `None` for a `let` whose pattern is not a name.
type Destination<'a> = Option<&'a str>;

/// An `if` testing a key holder: whether its `then` runs when a key is present, the holder,
/// and facts of its branches.
struct PresenceIf<'a> {
    cond: Span,
    present: bool,
    holder: &'a str,
    then: Span,
    els: Option<Span>,
    then_has_tail: bool,
    then_assigns_holder: bool,
    /// A `match` choosing between the found value and a fresh one: the key is the match's
    /// value, so a sink inside the minting arm is not that choice.
    yields_choice: bool,
}

impl<'a> BodyIndex<'a> {
    pub fn new(body: &'a Block) -> BodyIndex<'a> {
        let mut destinations = Vec::new();
        let mut lets = Vec::new();
        let mut statements = |b: &'a Block, with_lets: bool, order: &mut usize| {
            for s in &b.stmts {
                match s {
                    Stmt::Let {
                        pat,
                        init: Some(init),
                        ..
                    } => {
                        *order += 1;
                        // Each name is its own part of the value (`let (key, _) = (mint(), 0)`).
                        let parts = let_parts(pat, init);
                        if parts.is_empty() {
                            destinations.push((init.span, *order, None));
                        }
                        for (name, part) in parts {
                            destinations.push((part.span, *order, Some(name)));
                            if with_lets {
                                lets.push((part.span, *order, name));
                            }
                        }
                    }
                    Stmt::Expr { expr: e, .. } => {
                        if let Some(name) = root_name(e) {
                            *order += 1;
                            destinations.push((e.span, *order, Some(name)));
                        }
                    }
                    _ => {}
                }
            }
        };
        let mut order = 0;
        statements(body, true, &mut order);
        let mut presence_ifs = Vec::new();
        let mut form_macros: Vec<(usize, &'a Expr)> = Vec::new();
        let mut loops = Vec::new();
        let mut walked = 0;
        body.walk(&mut |e| {
            walked += 1;
            match &e.kind {
                ExprKind::Block(b) | ExprKind::Async { block: b, .. } => {
                    statements(b, true, &mut order)
                }
                ExprKind::If { then, .. } => statements(then, false, &mut order),
                _ => {}
            }
            if let Some(p) = presence_if(e) {
                presence_ifs.push((e.span, walked, p));
            }
            for p in presence_match(e) {
                presence_ifs.push((e.span, walked, p));
            }
            if is_form_macro(e) {
                form_macros.push((walked, e));
            }
            if is_retry_loop(e) {
                loops.push((e, walked));
            }
        });
        let mut forms = HashMap::new();
        for (walked, m) in form_macros {
            if let ExprKind::Macro(mac) = &m.kind {
                for name in mac
                    .args
                    .iter()
                    .filter_map(|a| a.peel().as_path()?.as_ident())
                {
                    forms.entry(name).or_insert((walked, m.span));
                }
            }
        }
        let mut mentioned_in: HashMap<&'a str, Vec<(u32, Walked)>> = HashMap::new();
        for (l, walked) in &loops {
            let mut names = HashSet::new();
            l.walk(&mut |x| {
                names.extend(x.as_path().and_then(|p| p.as_ident()));
            });
            for name in names {
                mentioned_in
                    .entry(name)
                    .or_default()
                    .push((l.span.lo, (*walked, l.span)));
            }
        }
        for list in mentioned_in.values_mut() {
            list.sort_unstable_by_key(|(lo, (walked, _))| (*lo, *walked));
            let mut first: Option<Walked> = None;
            for slot in list.iter_mut().rev() {
                let here = slot.1;
                let least = first.filter(|f| f.0 < here.0).unwrap_or(here);
                slot.1 = least;
                first = Some(least);
            }
        }
        BodyIndex {
            destinations: Nested::new(destinations),
            presence_ifs: Nested::new(presence_ifs),
            lets: Nested::new(lets),
            forms,
            loops: Nested::new(
                loops
                    .into_iter()
                    .map(|(l, w)| (l.span, w, l.span))
                    .collect(),
            ),
            mentioned_in,
        }
    }

    /// [`minted_at_origin`] on the indexed body.
    pub fn minted_at_origin(&self, mint: Span, sink: Span) -> Option<Origin> {
        self.when_absent(mint, sink)
            .or_else(|| self.rendered_form(mint))
            .or_else(|| self.retry_loop(mint, sink))
    }

    /// The variable a sink outside the loop wrote the key into: `headers` of
    /// `headers.insert(k, key);`, `req` of `let req = http.post(u).header(k, key);`. The
    /// innermost statement around the sink that names one decides.
    fn sink_destination(&self, sink: Span) -> Option<&'a str> {
        self.destinations
            .around(sink)
            .max_by_key(|(order, _)| *order)
            .and_then(|(_, dest)| *dest)
    }

    /// Minted in the branch an `if` takes when no key was given: the `if` tests the key's own
    /// holder (`headers`, the `given` option), not some other lookup (`!seen.contains_key(id)`
    /// guards work, and a key minted there is a consumer's). The outermost such `if` decides.
    fn when_absent(&self, mint: Span, sink: Span) -> Option<Origin> {
        let dest = self.sink_destination(sink);
        self.presence_ifs
            .around(mint)
            .filter(|(_, p)| {
                let holds_key = dest == Some(p.holder) || p.then_assigns_holder;
                let in_then = p.then.contains(mint) && !p.present && holds_key;
                // `if let Some(k) = given { k } else { mint }`: the `if` yields the given key
                // or a fresh one.
                let in_else = p.els.is_some_and(|x| x.contains(mint))
                    && p.present
                    && (p.then_has_tail || dest == Some(p.holder))
                    && !(p.yields_choice && p.els.is_some_and(|x| x.contains(sink)));
                in_then || in_else
            })
            .min_by_key(|(order, _)| *order)
            .map(|(_, p)| Origin::WhenAbsent(p.cond))
    }

    /// The key is bound by `let name = ..mint..` and `name` is an argument of a macro whose
    /// template holds an HTML `<input`.
    fn rendered_form(&self, mint: Span) -> Option<Origin> {
        self.lets
            .around(mint)
            .filter_map(|(_, name)| self.forms.get(name))
            .min_by_key(|(walked, _)| *walked)
            .map(|(_, span)| Origin::RenderedForm(*span))
    }

    fn retry_loop(&self, mint: Span, sink: Span) -> Option<Origin> {
        if self.loops.around(mint).next().is_some() {
            return None;
        }
        let around_sink = self
            .loops
            .around(sink)
            .filter(|(_, l)| l.lo >= mint.hi)
            .map(|(order, l)| (order, *l));
        // A loop after the sink that uses the variable the sink wrote the key into.
        let after = self.sink_destination(sink).and_then(|dest| {
            let list = self.mentioned_in.get(dest)?;
            let from = mint.hi.max(sink.hi);
            let at = list.partition_point(|(lo, _)| *lo < from);
            list.get(at).map(|(_, first)| *first)
        });
        around_sink
            .chain(after)
            .min_by_key(|(order, _)| *order)
            .map(|(_, l)| Origin::RetryLoop(l))
    }
}

/// An `if` whose condition is a presence test ([`presence_test`]).
fn presence_if(e: &Expr) -> Option<PresenceIf<'_>> {
    let ExprKind::If { cond, then, els } = &e.kind else {
        return None;
    };
    let (present, holder) = presence_test(cond)?;
    Some(PresenceIf {
        cond: cond.span,
        present,
        holder,
        then: then.span,
        els: els.as_ref().map(|x| x.span),
        then_has_tail: then.tail().is_some(),
        then_assigns_holder: assigns(then, holder),
        yields_choice: false,
    })
}

/// A `match` that yields the value it found or, in another arm, something else: `match
/// given { Some(k) => k, None => mint }` is `if let Some(k) = given { k } else { mint }`,
/// one presence test per arm that does not bind the value.
fn presence_match(e: &Expr) -> Vec<PresenceIf<'_>> {
    let ExprKind::Match { scrutinee, arms } = &e.kind else {
        return Vec::new();
    };
    let Some(holder) = root_name(scrutinee) else {
        return Vec::new();
    };
    // The arm that gives back what it found (`Some(_) => return`, then a key minted on a
    // miss, guards the work instead).
    let Some(found) = arms
        .iter()
        .find(|a| a.guard.is_none() && binds_a_value(&a.pat) && yields_binding(&a.pat, &a.body))
    else {
        return Vec::new();
    };
    arms.iter()
        .filter(|a| !binds_a_value(&a.pat))
        .map(|other| PresenceIf {
            cond: scrutinee.span,
            present: true,
            holder,
            then: found.body.span,
            els: Some(other.body.span),
            then_has_tail: true,
            then_assigns_holder: false,
            yields_choice: true,
        })
        .collect()
}

/// Whether `body` gives back the value `pat` binds, itself or converted (`k`,
/// `k.clone()`, `k.to_string()`): the found key, not something else built from it
/// (`Some(stage) => format!("{id}-{stage}")` chooses a key, it does not keep one).
fn yields_binding(pat: &Pat, body: &Expr) -> bool {
    let mut value = match &body.kind {
        ExprKind::Block(b) => match b.tail() {
            Some(t) => t.peel(),
            None => return false,
        },
        _ => body.peel(),
    };
    while let ExprKind::MethodCall {
        receiver,
        method,
        args,
        ..
    } = &value.kind
    {
        let converts = matches!(
            method.as_str(),
            "clone" | "to_string" | "to_owned" | "into" | "as_str" | "cloned" | "copied"
        );
        if !converts || !args.is_empty() {
            return false;
        }
        value = receiver.peel();
    }
    let mut names = Vec::new();
    bind_pattern(pat, &mut |b, _| names.push(b.name));
    value
        .as_path()
        .and_then(|p| p.as_ident())
        .is_some_and(|n| names.contains(&n))
}

/// A macro whose template holds an HTML `<input`.
fn is_form_macro(e: &Expr) -> bool {
    let ExprKind::Macro(m) = &e.kind else {
        return false;
    };
    m.args.iter().any(|a| match &a.kind {
        ExprKind::Lit(Lit::Str(s)) => s.to_ascii_lowercase().contains("<input"),
        _ => false,
    })
}

/// `loop`, `while` and `for _ in <range>`: loops that repeat an attempt. A `for` over
/// items (`for record in event.records`) handles one item per turn and is not one.
fn is_retry_loop(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Loop { .. } => true,
        ExprKind::For { iter, .. } => matches!(iter.peel().kind, ExprKind::Range { .. }),
        _ => false,
    }
}

/// Spans of a syntax tree (nested or apart, never overlapping) with a value and an order
/// each, for finding the few that hold a given span in time proportional to how deep it is.
struct Nested<T> {
    /// By start, the longer first at the same start.
    entries: Vec<(Span, usize, T)>,
    /// Index of the nearest earlier entry that holds each one.
    parent: Vec<Option<usize>>,
}

impl<T> Nested<T> {
    fn new(mut entries: Vec<(Span, usize, T)>) -> Nested<T> {
        entries.sort_by_key(|(s, order, _)| (s.lo, std::cmp::Reverse(s.hi), *order));
        let mut parent = Vec::with_capacity(entries.len());
        let mut open: Vec<usize> = Vec::new();
        for (i, (s, _, _)) in entries.iter().enumerate() {
            while open.last().is_some_and(|&j| !entries[j].0.contains(*s)) {
                open.pop();
            }
            parent.push(open.last().copied());
            open.push(i);
        }
        Nested { entries, parent }
    }

    /// The order and value of every entry whose span holds `span`, innermost first.
    fn around(&self, span: Span) -> impl Iterator<Item = (usize, &T)> + '_ {
        let start = self
            .entries
            .partition_point(|(s, _, _)| s.lo <= span.lo)
            .checked_sub(1);
        std::iter::successors(start, |&i| self.parent[i])
            .map(|i| &self.entries[i])
            .filter(move |(s, _, _)| s.contains(span))
            .map(|(_, order, v)| (*order, v))
    }
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
        // The same choice written as a `match` on the lookup.
        let arms = "let k = match given.get() { Some(k) => k, None => Uuid::new_v4() }; http.header(KEY, k);";
        assert!(matches!(origin(arms), Some(Origin::WhenAbsent(_))));
        let wild = "let k = match given { Ok(k) => k.clone(), _ => { log(); Uuid::new_v4() } }; http.header(KEY, k);";
        assert!(matches!(origin(wild), Some(Origin::WhenAbsent(_))));
        // The found arm builds a key from what it found: the other arm's mint is a key too.
        let built = "let k = match stage { Some(s) => format!(\"{id}-{s}\"), None => Uuid::new_v4().to_string() }; http.header(KEY, k);";
        assert_eq!(origin(built), None);
        // Minted in the arm that found a value: not a default.
        let found = "let k = match given { Some(_) => Uuid::new_v4(), None => fallback() }; http.header(KEY, k);";
        assert_eq!(origin(found), None);
        // The found arm leaves: the miss arm runs the work, minting per delivery.
        let leaves = "match seen.get(id) { Some(_) => return, None => { http.header(KEY, Uuid::new_v4()); } }";
        assert_eq!(origin(leaves), None);
        // Sent inside the minting arm: the match's value is not the key.
        let inside = "let r = match seen.get(id) { Some(r) => r, None => { http.header(KEY, Uuid::new_v4()); r0 } };";
        assert_eq!(origin(inside), None);
        // A match on something else than a lookup's answer.
        let other = "let k = match kind { Kind::A => Uuid::new_v4(), Kind::B => b() }; http.header(KEY, k);";
        assert_eq!(origin(other), None);
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
