//! `retry_without_backoff`: a retry loop with no delay, a fixed delay without jitter, or no
//! attempt cap; and a retry crate's policy configured without jitter or without a cap.

use crate::analysis::binding::let_parts;
use crate::analysis::resolve::path_ends_with_in;
use crate::analysis::words::{called_path, path_ends_with, words, Word};
use crate::analysis::{Chain, FastMap, FastSet, Locals, MethodStep, Step};
use crate::catalog::logging::is_log_macro;
use crate::catalog::retries::{RETRY_CRATES, TOKIO_RETRY_RUNNERS};
use crate::context::LintContext;
use crate::declare_lint;
use crate::model::ir::{Block, Expr, ExprKind, Lit, Pat, Stmt};
use crate::model::{FileModel, FnDef, Package, Span};
use std::cell::OnceCell;

declare_lint! {
    /// ### What it does
    /// Finds retry loops: a `loop`, `while` or `for` over a range whose body makes a call
    /// that is awaited or sends a request (`send`, `execute`, `query`, `call`, `connect`,
    /// `request`, `publish`), leaves the loop whenever it succeeds (every `Ok` arm returns
    /// or breaks, `if let Ok(..) = .. { break }`, `while let Err(e) = ..`) and goes round
    /// again when it fails. Such a loop is reported when it waits nothing between attempts,
    /// when every wait is a fixed duration (`sleep(Duration::from_millis(100))`, a constant,
    /// a variable that never changes) with no random jitter, or when nothing ends it but
    /// success: no attempt counter or deadline compared, and no other `return`, `break` or
    /// `?` (a non-retryable error, an exhausted backoff iterator, a cancelled token).
    ///
    /// A wait is `sleep`, `sleep_until`, `Delay::new`, `Timer::after`, a function of the
    /// crate that calls one (through any number of its own functions), a call named for
    /// waiting (`wait`, `backoff`, `delay`, `timeout` in its name), a configured helper, or
    /// a macro whose input is not read (`tokio::select!`, which may also hold an exit), other
    /// than a logging macro (`warn!(id = %m.id, ..)` only logs).
    ///
    /// Not retries, so not reported: a loop around a call that waits for input (`accept`,
    /// `recv`, `next`, `read`, `poll`: a server or consumer loop), a failure that is an
    /// interrupted or would-block call (`Err(e) if e.kind() == Interrupted => continue`),
    /// a work loop whose success goes on (`Ok(Some(_)) => continue`), a search that tries a
    /// freshly generated value each round (`let alias = Alias::generate()`), and a `for`
    /// over items or endpoints (failover tries each once).
    ///
    /// Also finds the policies of the common retry crates configured that way, where the
    /// policy is built in sight of its use: `backon` builders (`ExponentialBuilder`,
    /// `ConstantBuilder`, `FibonacciBuilder`) passed to `.retry(..)` without `.with_jitter()`
    /// or with `.without_max_times()`; `tokio-retry` strategies given to `Retry::spawn`/`start`
    /// or `RetryIf::spawn`/`start` without `.map(jitter)` or without `.take(n)`; `again`'s
    /// `RetryPolicy::exponential`/`fixed` without `.with_jitter(true)`; `backoff`'s
    /// `ExponentialBackoff` with a `randomization_factor` of zero, `Constant` backoff, or
    /// `with_max_elapsed_time(None)`. Their defaults with jitter and a cap are correct and not
    /// reported.
    ///
    /// ### Why is this bad?
    /// A failure is usually shared: the database, the broker or the API is down for every
    /// worker at once. Retrying at once hammers it while it tries to recover; retrying on a
    /// fixed interval keeps every worker in step, so each retry lands as one burst; retrying
    /// forever turns a message that can never succeed into a worker that never does
    /// anything else, and never reaches the dead-letter queue. A retry needs a cap, a
    /// growing interval, and random jitter.
    ///
    /// ### Known problems
    /// A wait done by a function of the crate that sleeps, or by a configured helper
    /// (`backoff_helpers = ["wait_before_retry"]` in `[lints.retry_without_backoff]`),
    /// counts as a proper backoff, and so does the attempt itself when it is such a function
    /// (a client that retries inside); a wait whose duration comes from a field or a
    /// parameter is taken as unknown and not reported. Functions are matched by name, so a
    /// name shared with a sleeping function counts as a wait. Code compiled only for tests
    /// under a compound `cfg` (`#[cfg(all(test, feature = ".."))]`) is not known as test
    /// code and is linted. A fixed delay is reported even where a single client retries
    /// (a one-off migration), where jitter spreads nothing. A cap enforced outside the loop (the caller's
    /// timeout, a supervisor) is not seen unless the loop is inside a `timeout(..)` call of
    /// the same function. A retry crate's policy built in one function and used in another is
    /// followed only when the other is a crate fn without parameters that returns it
    /// (`RetryIf::start(backoff(), ..)`).
    ///
    /// ### Example
    /// ```rust
    /// loop {
    ///     match client.post(url).json(&event).send().await {
    ///         Ok(resp) => return Ok(resp),
    ///         Err(e) => {
    ///             warn!("retrying: {e}");
    ///             tokio::time::sleep(Duration::from_secs(1)).await;
    ///         }
    ///     }
    /// }
    /// ```
    ///
    /// ### Use instead
    /// ```rust
    /// let policy = ExponentialBuilder::default().with_jitter().with_max_times(5);
    /// (|| client.post(url).json(&event).send()).retry(policy).await
    /// ```
    pub RETRY_WITHOUT_BACKOFF, "retry_without_backoff", Allow,
    "a retry loop with no delay, a fixed delay without jitter, or no attempt cap"
}

pub use crate::settings::retry_without_backoff::Settings;

/// Calls that wait.
const SLEEPS: &[&str] = &[
    "sleep",
    "sleep_until",
    "sleep_ms",
    "delay_for",
    "delay_until",
];

/// Methods that send a request without `.await` (blocking clients).
const SENDS: &[&str] = &[
    "send", "execute", "query", "call", "connect", "request", "publish",
];

/// Words of a comparison that bound a retry: attempt counters and deadlines.
const BOUNDS: &[&str] = &[
    "attempt",
    "retr",
    "tries",
    "try_count",
    "count",
    "elapsed",
    "deadline",
    "timeout",
    "max",
    "limit",
    "remaining",
];

pub fn check(cx: &mut LintContext<'_>) {
    let package = cx.package;
    let helpers = &cx.settings.retry_without_backoff.backoff_helpers;
    // The crate's sleeping fns matter to retry loops only: most packages have none.
    let sleepers = OnceCell::new();
    let policies = RETRY_CRATES.iter().any(|k| package.depends_on(k));
    let mut findings = Vec::new();
    for (file, f) in package.fns().filter(|(_, f)| !f.in_test) {
        let Some(body) = &f.body else { continue };
        // Built only for a fn with a retry loop or a policy: most fns have neither.
        let locals = OnceCell::new();
        let locals = || locals.get_or_init(|| Locals::of_body(body));
        body.walk(&mut |e| {
            if let Some(attempt) = retried_call(e) {
                let waits = Waits {
                    helpers,
                    sleepers: sleepers.get_or_init(|| sleeping_fns(package)),
                };
                if let Some(f) = judge_loop(body, locals(), e, attempt, &waits) {
                    findings.push(f);
                }
            }
        });
        if policies {
            findings.extend(crate_policies(package, file, body, locals));
        }
    }
    for f in findings {
        report(cx, f);
    }
}

struct Finding {
    span: Span,
    no_delay: bool,
    /// The fixed waits, when every wait of the loop is fixed.
    fixed: Vec<Span>,
    no_cap: bool,
    /// The retry crate, for a policy.
    policy_of: Option<&'static str>,
}

/// The names of the crate's fns that sleep, themselves or through one another, so a call of
/// one counts as a wait. Each body is walked once (for its sleeps and the names it calls);
/// the sleepers then spread to the names of their callers.
fn sleeping_fns(package: &Package) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let mut known: FastSet<&str> = FastSet::default();
    // Called name -> the names of the fns that call it.
    let mut callers: FastMap<&str, Vec<&str>> = FastMap::default();
    for (_, f) in package.fns() {
        let Some(body) = &f.body else { continue };
        let mut sleeps = false;
        body.walk(&mut |e| {
            sleeps |= is_sleep(e);
            if let Some(callee) = callee_name(e) {
                callers.entry(callee).or_default().push(&f.name);
            }
        });
        if sleeps && known.insert(&f.name) {
            found.push(f.name.clone());
        }
    }
    let mut next = 0;
    while let Some(name) = found.get(next) {
        next += 1;
        let reached: Vec<&str> = callers
            .get(name.as_str())
            .into_iter()
            .flatten()
            .copied()
            .filter(|caller| known.insert(caller))
            .collect();
        found.extend(reached.into_iter().map(str::to_owned));
    }
    found
}

/// A call that waits a duration: `sleep(d)`, `Delay::new(d)`, `Timer::after(d)`.
fn is_sleep(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Call { func, .. } => func.as_path().is_some_and(|p| {
            SLEEPS.contains(&p.last())
                || path_ends_with(p, &["Delay", "new"])
                || path_ends_with(p, &["Timer", "after"])
        }),
        ExprKind::MethodCall { method, .. } => SLEEPS.contains(&method.as_str()),
        _ => false,
    }
}

/// A call or macro that may wait without showing how long: a crate function named for waiting
/// (`wait_timeout(..)`, `backoff.wait()`), or a macro whose input the model does not read
/// (`tokio::select! { _ = sleep(d) => .. }`).
fn may_wait(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Macro(m) => !m.parsed && !is_log_macro(m.path.last()),
        // `.timeout(d)`, `.connect_timeout(d)` on a request or a client builder set how long
        // the attempt may take; they wait nothing between attempts.
        ExprKind::MethodCall { method, .. } if is_limit_setter(method) => false,
        _ => callee_name(e).is_some_and(|n| {
            ["wait", "backoff", "delay", "sleep", "timeout"]
                .iter()
                .any(|w| n.contains(w))
        }),
    }
}

/// A method that sets a time limit (`timeout`, `read_timeout`), named for nothing else.
fn is_limit_setter(method: &str) -> bool {
    method.contains("timeout")
        && !["wait", "backoff", "delay", "sleep"]
            .iter()
            .any(|w| method.contains(w))
}

/// The name of the function or method `e` calls.
fn callee_name(e: &Expr) -> Option<&str> {
    match &e.kind {
        ExprKind::Call { func, .. } => func.as_path().map(|p| p.last()),
        ExprKind::MethodCall { method, .. } => Some(method),
        _ => None,
    }
}

/// The call a retry loop attempts: `e` is a loop whose body leaves when the call succeeds
/// and goes round again when it fails.
fn retried_call(e: &Expr) -> Option<&Expr> {
    let (cond, body) = match &e.kind {
        ExprKind::Loop { cond, body } => (cond.as_deref(), body),
        // Over a range of attempts; a `for` over endpoints or items tries each once (failover).
        ExprKind::For { iter, body, .. } if matches!(iter.peel().kind, ExprKind::Range { .. }) => {
            (None, body)
        }
        _ => return None,
    };
    if let Some(ExprKind::Let { pat, expr }) = cond.map(|c| &c.kind) {
        return (is_variant(pat, "Err") && is_request(expr)).then_some(&**expr);
    }
    body.stmts.iter().find_map(|s| attempt_in_stmt(body, s))
}

/// A statement of the loop body that tests a request's result and leaves on success.
fn attempt_in_stmt<'a>(body: &'a Block, stmt: &'a Stmt) -> Option<&'a Expr> {
    let expr = match stmt {
        Stmt::Expr { expr, .. } => expr,
        Stmt::Let {
            init: Some(init), ..
        } => init,
        _ => return None,
    };
    let (tested, leaves_on_ok) = match &expr.kind {
        // `match sent.is_ok() { true => break, false => {} }`: an `if` written as a match.
        ExprKind::Match { scrutinee, arms } if arms.iter().all(|a| bool_pat(&a.pat).is_some()) => {
            let (tested, on) = success_test(scrutinee)?;
            let leaves = arms
                .iter()
                .any(|a| bool_pat(&a.pat) == Some(on) && exits(&a.body));
            (tested, leaves)
        }
        ExprKind::Match { scrutinee, arms } => {
            // Every success leaves (an `Ok(Some(_)) => continue` is a work loop, not a retry),
            // and some failure goes round again, other than an interrupted system call.
            let oks: Vec<_> = arms.iter().filter(|a| is_variant(&a.pat, "Ok")).collect();
            // `Ok(resp) if resp.status().is_success() => return ..` picks the successes; the
            // `Ok` arms after it are answers that failed (a 503), and may go round.
            let guarded_success = oks
                .iter()
                .any(|a| a.guard.as_deref().is_some_and(tests_success) && exits(&a.body));
            let ok_leaves =
                !oks.is_empty() && (oks.iter().all(|a| exits(&a.body)) || guarded_success);
            let err_stays = arms.iter().any(|a| {
                !is_variant(&a.pat, "Ok")
                    && !exits(&a.body)
                    && !a.guard.as_deref().is_some_and(is_interrupt)
            });
            (&**scrutinee, ok_leaves && err_stays)
        }
        ExprKind::If { cond, then, els } => {
            let (tested, on) = success_test(cond)?;
            let leaves = if on {
                block_exits(then)
            } else {
                els.as_deref().is_some_and(exits)
            };
            (tested, leaves)
        }
        _ => return None,
    };
    if !leaves_on_ok {
        return None;
    }
    let attempt = bound_in(body, tested).unwrap_or(tested);
    (is_request(attempt) && !is_receive(attempt) && !uses_fresh_value(body, attempt))
        .then_some(attempt)
}

/// The result a condition tests for success, and the condition's value on success:
/// `r.is_ok()` and `let Ok(_) = r` are true on success, `r.is_err()` and `!r.is_ok()` false.
fn success_test(cond: &Expr) -> Option<(&Expr, bool)> {
    match &cond.peel().kind {
        ExprKind::Let { pat, expr } if is_variant(pat, "Ok") => Some((expr, true)),
        ExprKind::Let { pat, expr } if is_variant(pat, "Err") => Some((expr, false)),
        ExprKind::MethodCall {
            receiver, method, ..
        } if method == "is_ok" => Some((receiver, true)),
        ExprKind::MethodCall {
            receiver, method, ..
        } if method == "is_err" => Some((receiver, false)),
        ExprKind::Unary { not: true, expr } => success_test(expr).map(|(t, on)| (t, !on)),
        _ => None,
    }
}

/// A guard that tests an answer for success: `resp.status().is_success()`, `r.is_ok()`.
fn tests_success(guard: &Expr) -> bool {
    words(guard)
        .iter()
        .any(|w| matches!(w, Word::Member(m) if m == "is_success" || m == "is_ok"))
}

/// `true` or `false` as a pattern.
fn bool_pat(p: &Pat) -> Option<bool> {
    match p {
        Pat::Lit(Lit::Bool(b)) => Some(*b),
        _ => None,
    }
}

/// A guard that picks an interrupted or would-block call (`e.kind() == Interrupted`): it is
/// meant to be repeated at once.
fn is_interrupt(guard: &Expr) -> bool {
    words(guard)
        .iter()
        .any(|w| matches!(w.text(), "interrupted" | "wouldblock" | "eintr" | "eagain"))
}

/// What a tested variable was bound to by a `let` of the loop body (`let r = call().await;
/// match r { .. }`).
fn bound_in<'a>(body: &'a Block, tested: &Expr) -> Option<&'a Expr> {
    let name = tested.as_path()?.as_ident()?;
    body.stmts.iter().find_map(|s| match s {
        Stmt::Let {
            pat, init: Some(i), ..
        } => let_parts(pat, i)
            .into_iter()
            .find_map(|(n, part)| (n == name).then_some(part)),
        _ => None,
    })
}

/// Whether the attempt waits for input rather than asks for something (`listener.accept()`,
/// `rx.recv()`): a loop around it serves, and has no reason to give up or back off.
fn is_receive(attempt: &Expr) -> bool {
    const RECEIVES: &[&str] = &[
        "accept",
        "recv",
        "recv_from",
        "receive",
        "next",
        "poll",
        "read",
        "listen",
        "changed",
        "tick",
    ];
    callee_name(attempt.peel()).is_some_and(|n| RECEIVES.contains(&n))
}

/// Whether the attempt uses a value the round generates anew (`let alias =
/// Alias::generate(..)`): the loop searches for a free name, it does not repeat a call.
fn uses_fresh_value(body: &Block, attempt: &Expr) -> bool {
    let used: Vec<Word> = words(attempt);
    body.stmts.iter().any(|s| match s {
        Stmt::Let {
            pat,
            init: Some(init),
            ..
        } => {
            let generated = words(init).iter().any(|w| {
                [
                    "generate", "random", "rand", "new_v4", "now_v7", "ulid", "nanoid",
                ]
                .iter()
                .any(|g| w.text().contains(g))
            });
            generated
                && pat.bindings().iter().any(|(n, _)| {
                    used.iter()
                        .any(|w| matches!(w, Word::Name(u) if *u == n.to_lowercase()))
                })
        }
        _ => false,
    })
}

/// `Ok(..)` / `Err(..)` (also as `Result::Ok`).
fn is_variant(pat: &Pat, name: &str) -> bool {
    match pat {
        Pat::TupleStruct { path, .. } | Pat::Path(path) => path.last() == name,
        _ => false,
    }
}

/// An awaited call or a blocking client's send.
fn is_request(e: &Expr) -> bool {
    let mut found = false;
    e.walk(&mut |x| {
        found |= matches!(x.kind, ExprKind::Await(_))
            || matches!(&x.kind, ExprKind::MethodCall { method, .. } if SENDS.contains(&method.as_str()));
    });
    found
}

/// Whether evaluating `e` always leaves the loop (`return`, `break`, a block ending so).
fn exits(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Return(_) | ExprKind::Break(_) => true,
        ExprKind::Block(b) => block_exits(b),
        _ => false,
    }
}

fn block_exits(b: &Block) -> bool {
    b.stmts.iter().any(|s| match s {
        Stmt::Expr { expr, .. } => exits(expr),
        _ => false,
    })
}

/// What counts as a wait besides the sleeps: configured helpers and the crate's sleeping fns.
struct Waits<'a> {
    helpers: &'a [String],
    sleepers: &'a [String],
}

/// How one loop waits between attempts.
#[derive(PartialEq)]
enum Wait {
    Fixed(Span),
    /// Grows, is jittered, or comes from somewhere the source does not show.
    Other,
}

fn judge_loop(
    fn_body: &Block,
    locals: &Locals<'_>,
    looped: &Expr,
    attempt: &Expr,
    waits: &Waits<'_>,
) -> Option<Finding> {
    let (cond, body) = match &looped.kind {
        ExprKind::Loop { cond, body } => (cond.as_deref(), body),
        ExprKind::For { body, .. } => (None, body),
        _ => return None,
    };
    let varying = varying_names(looped);
    let mut found = Vec::new();
    body.walk(&mut |e| {
        if is_sleep(e) {
            found.push(classify_wait(e, &varying, locals));
        } else if may_wait(e)
            || callee_name(e)
                .is_some_and(|n| waits.helpers.iter().chain(waits.sleepers).any(|h| h == n))
        {
            found.push(Wait::Other);
        }
    });
    let no_delay = found.is_empty();
    let fixed: Vec<Span> = if found.iter().all(|w| matches!(w, Wait::Fixed(_))) {
        found
            .iter()
            .filter_map(|w| match w {
                Wait::Fixed(s) => Some(*s),
                Wait::Other => None,
            })
            .collect()
    } else {
        Vec::new()
    };
    let capped = matches!(looped.kind, ExprKind::For { .. })
        || cond.is_some_and(|c| !matches!(c.kind, ExprKind::Let { .. }))
        || has_bound(body, &assigned_names(looped))
        || leaves_otherwise(body)
        || in_timeout(fn_body, looped.span);
    (no_delay || !fixed.is_empty() || !capped).then_some(Finding {
        span: attempt.span,
        no_delay,
        fixed,
        no_cap: !capped,
        policy_of: None,
    })
}

/// The names that change from one round to the next: bound by the loop's pattern, by `let`s
/// of its body, or assigned in it.
fn varying_names(looped: &Expr) -> Vec<String> {
    let mut out = Vec::new();
    if let ExprKind::For { pat, .. } = &looped.kind {
        out.extend(pat.bindings().into_iter().map(|(n, _)| n.to_lowercase()));
    }
    looped.walk_pats(&mut |p| out.extend(p.bindings().into_iter().map(|(n, _)| n.to_lowercase())));
    out.extend(assigned_names(looped));
    out
}

/// The names assigned in the loop (attempt counters, deadlines).
fn assigned_names(looped: &Expr) -> Vec<String> {
    let mut out = Vec::new();
    looped.walk(&mut |e| {
        if let ExprKind::Assign { lhs, .. } | ExprKind::AssignOp { lhs, .. } = &e.kind {
            out.extend(words(lhs).into_iter().map(|w| w.text().to_owned()));
        }
    });
    out
}

/// A sleep whose duration is the same every round and has no randomness is fixed.
fn classify_wait(call: &Expr, varying: &[String], locals: &Locals<'_>) -> Wait {
    let arg = match &call.kind {
        ExprKind::Call { args, .. } | ExprKind::MethodCall { args, .. } => args.first(),
        _ => None,
    };
    match arg {
        Some(arg) if is_fixed_duration(arg, varying, locals, 0) => Wait::Fixed(call.span),
        _ => Wait::Other,
    }
}

fn is_fixed_duration(e: &Expr, varying: &[String], locals: &Locals<'_>, depth: usize) -> bool {
    let e = e.peel();
    match &e.kind {
        ExprKind::Lit(Lit::Int(_) | Lit::Float(_)) => true,
        ExprKind::Path(p) => match p.as_ident() {
            Some(name) if varying.iter().any(|v| v == &name.to_lowercase()) => false,
            Some(name) if is_const_name(name) => true,
            Some(name) => {
                // A local bound once, outside the loop, to a fixed duration.
                let defs = locals.defs(name);
                depth < 4
                    && defs.len() == 1
                    && is_fixed_duration(defs[0], varying, locals, depth + 1)
            }
            None => p.segments.last().is_some_and(|s| is_const_name(s)),
        },
        ExprKind::Call { func, args } => {
            func.as_path().is_some_and(is_duration_ctor)
                && args
                    .iter()
                    .all(|a| is_fixed_duration(a, varying, locals, depth + 1))
        }
        _ => false,
    }
}

fn is_const_name(name: &str) -> bool {
    name.chars().any(|c| c.is_ascii_uppercase())
        && name
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

fn is_duration_ctor(p: &crate::model::ir::Path) -> bool {
    p.segments.len() >= 2
        && p.segments[p.segments.len() - 2] == "Duration"
        && (p.last().starts_with("from_") || p.last() == "new")
}

/// A comparison of an attempt counter or a deadline, or a `None` of a backoff iterator that
/// leaves the loop.
fn has_bound(body: &Block, counters: &[String]) -> bool {
    let mut found = false;
    body.walk(&mut |e| match &e.kind {
        ExprKind::Binary {
            op: crate::model::ir::BinOp::Compare,
            lhs,
            rhs,
        } => {
            let ws: Vec<Word> = words(lhs).into_iter().chain(words(rhs)).collect();
            found |= ws.iter().any(|w| {
                counters.iter().any(|v| v == w.text())
                    || BOUNDS.iter().any(|b| w.text().contains(b))
            });
        }
        ExprKind::Match { arms, .. } => {
            found |= arms
                .iter()
                .any(|a| matches!(&a.pat, Pat::Path(p) if p.last() == "None") && exits(&a.body));
        }
        ExprKind::MethodCall { method, .. } => {
            found |= method.contains("exhausted") || method.contains("attempts");
        }
        _ => {}
    });
    if !found {
        for s in &body.stmts {
            if let Stmt::Let {
                diverge: Some(_), ..
            } = s
            {
                found = true;
            }
        }
    }
    found
}

/// Whether the loop can end other than by success: a `return`, `break` or `?` outside the
/// success arms (a non-retryable error, an exhausted backoff, a cancelled token, an
/// expired deadline). Closures are their own; in a nested loop only `return` and `?` count.
fn leaves_otherwise(body: &Block) -> bool {
    let mut found = false;
    for s in &body.stmts {
        match s {
            Stmt::Let {
                diverge: Some(_), ..
            } => found = true,
            _ => s.for_each_expr(&mut |e| exits_besides_success(e, true, &mut found)),
        }
    }
    found
}

fn exits_besides_success(e: &Expr, breaks_count: bool, found: &mut bool) {
    match &e.kind {
        ExprKind::Return(_) | ExprKind::Try(_) => *found = true,
        ExprKind::Break(_) if breaks_count => *found = true,
        // A macro the model does not read (`select!`) may hold an exit; a logging macro
        // (`warn!(id = %msg.id, ..)`) holds none.
        ExprKind::Macro(m) if !m.parsed && !is_log_macro(m.path.last()) => *found = true,
        ExprKind::Closure { .. } | ExprKind::Async { .. } => return,
        ExprKind::Loop { .. } | ExprKind::For { .. } => {
            e.for_each_child(&mut |c| exits_besides_success(c, false, found));
            return;
        }
        ExprKind::Match { scrutinee, arms } => {
            exits_besides_success(scrutinee, breaks_count, found);
            for a in arms.iter().filter(|a| !is_variant(&a.pat, "Ok")) {
                if let Some(g) = &a.guard {
                    exits_besides_success(g, breaks_count, found);
                }
                exits_besides_success(&a.body, breaks_count, found);
            }
            return;
        }
        ExprKind::If { cond, then, els } => {
            let success_branch = match &cond.kind {
                ExprKind::Let { pat, .. } => is_variant(pat, "Ok"),
                ExprKind::MethodCall { method, .. } => method == "is_ok",
                _ => false,
            };
            exits_besides_success(cond, breaks_count, found);
            if !success_branch {
                then.for_each_expr(&mut |c| exits_besides_success(c, breaks_count, found));
            }
            if let Some(els) = els {
                exits_besides_success(els, breaks_count, found);
            }
            return;
        }
        _ => {}
    }
    e.for_each_child(&mut |c| exits_besides_success(c, breaks_count, found));
}

/// Whether the loop runs inside a `timeout(..)` call of the function.
fn in_timeout(fn_body: &Block, looped: Span) -> bool {
    let mut found = false;
    fn_body.walk(&mut |e| {
        if let Some(name) = callee_name(e) {
            if matches!(name, "timeout" | "timeout_at") && e.span.contains(looped) {
                found |= e.span != looped;
            }
        }
    });
    found
}

/// A retry crate's policy, where the policy is built in the function that uses it.
fn crate_policies<'l, 'a: 'l>(
    package: &Package,
    file: &FileModel,
    body: &Block,
    locals: impl Fn() -> &'l Locals<'a>,
) -> Vec<Finding> {
    let mut out = Vec::new();
    body.walk(&mut |e| {
        for (krate, policy) in policy_uses(package, file, e) {
            judge_use(package, file, krate, policy, locals(), &mut out);
        }
    });
    out
}

/// The crate fn a policy's chain starts with when it is built there (`retry::search_backoff()`
/// of `RetryIf::start(retry::search_backoff(), ..)`): a fn without parameters of that name,
/// the only one, whose body ends in the policy.
fn policy_helper<'p>(package: &'p Package, root: &Expr) -> Option<(&'p FileModel, &'p FnDef)> {
    let ExprKind::Call { func, args } = &root.peel().kind else {
        return None;
    };
    let name = func.as_path()?.last();
    if !args.is_empty() {
        return None;
    }
    let mut found = package
        .fns()
        .filter(|(_, f)| f.name == name && f.params.is_empty() && f.body.is_some());
    match (found.next(), found.next()) {
        (Some(one), None) => Some(one),
        _ => None,
    }
}

/// The policies `e` hands to a retry crate, with the crate: `fetch.retry(policy)` (backon),
/// `policy.retry(op)` (again), `Retry::spawn(policy, op)` (tokio-retry),
/// `backoff::future::retry(policy, op)`.
fn policy_uses<'a>(
    package: &Package,
    file: &FileModel,
    e: &'a Expr,
) -> Vec<(&'static str, &'a Expr)> {
    let mut out = Vec::new();
    match &e.kind {
        ExprKind::MethodCall {
            method,
            receiver,
            args,
            ..
        } if matches!(method.as_str(), "retry" | "retry_if") => {
            if package.depends_on("backon") && args.len() == 1 {
                out.push(("backon", &args[0]));
            }
            if package.depends_on("again") {
                out.push(("again", &**receiver));
            }
        }
        ExprKind::Call { func, args } if !args.is_empty() => {
            let Some(p) = func.as_path() else { return out };
            let tokio_retry =
                package.depends_on("tokio_retry") || package.depends_on("tokio_retry2");
            if tokio_retry
                && TOKIO_RETRY_RUNNERS
                    .iter()
                    .any(|r| path_ends_with_in(file, p, r))
            {
                out.push(("tokio-retry", &args[0]));
            } else if package.depends_on("backoff")
                && matches!(p.last(), "retry" | "retry_notify")
                && p.segments.iter().any(|s| s == "backoff" || s == "future")
            {
                out.push(("backoff", &args[0]));
            }
        }
        _ => {}
    }
    out
}

/// Reports the policy `policy` of `krate` when its construction shows no jitter or no cap.
fn judge_use(
    package: &Package,
    file: &FileModel,
    krate: &'static str,
    policy: &Expr,
    locals: &Locals<'_>,
    out: &mut Vec<Finding>,
) {
    let Some(chains) = locals.chains(policy) else {
        return;
    };
    for chain in chains {
        // A policy a crate fn builds and returns: its chain there, then the steps added here.
        if let Some((helper_file, helper)) = policy_helper(package, chain.root) {
            let Some((body, tail)) = helper.body.as_ref().and_then(|b| Some((b, b.tail()?))) else {
                continue;
            };
            let helper_locals = Locals::of_body(body);
            for inner in helper_locals.chains(tail).unwrap_or_default() {
                let whole = Chain {
                    root: inner.root,
                    steps: inner.steps.iter().chain(&chain.steps).copied().collect(),
                };
                judge_chain(helper_file, krate, &whole, out);
            }
            continue;
        }
        judge_chain(file, krate, &chain, out);
    }
}

/// Reports one way a policy was built when it shows no jitter or no cap.
fn judge_chain(file: &FileModel, krate: &'static str, chain: &Chain<'_>, out: &mut Vec<Finding>) {
    let Some((no_jitter, no_cap)) = judge_policy(file, krate, chain) else {
        return;
    };
    if no_jitter || no_cap {
        out.push(Finding {
            span: chain.root.span,
            no_delay: false,
            fixed: if no_jitter {
                vec![chain.root.span]
            } else {
                Vec::new()
            },
            no_cap,
            policy_of: Some(krate),
        });
    }
}

/// `(without jitter, without a cap)` of a policy whose construction the chain shows; `None`
/// when its root is not one of the crate's constructors.
fn judge_policy(file: &FileModel, krate: &str, chain: &Chain<'_>) -> Option<(bool, bool)> {
    let methods: Vec<&MethodStep<'_>> = chain.methods().collect();
    let has = |name: &str| methods.iter().any(|m| m.method == name);
    let root = chain.root.peel();
    let ctor = |suffixes: &[&[&str]]| {
        called_path(root).is_some_and(|p| suffixes.iter().any(|s| path_ends_with_in(file, p, s)))
    };
    if chain.steps.iter().any(|s| matches!(s, Step::Through(_))) {
        return None;
    }
    match krate {
        "backon" => {
            let builders = ["ExponentialBuilder", "ConstantBuilder", "FibonacciBuilder"];
            let known = builders
                .iter()
                .any(|b| ctor(&[&[b, "default"], &[b, "new"]]));
            known.then(|| (!has("with_jitter"), has("without_max_times")))
        }
        "tokio-retry" => {
            let known = ctor(&[
                &["ExponentialBackoff", "from_millis"],
                &["ExponentialFactorBackoff", "from_millis"],
                &["FixedInterval", "from_millis"],
                &["FixedInterval", "new"],
                &["FibonacciBackoff", "from_millis"],
            ]);
            let jittered = methods
                .iter()
                .any(|m| m.method == "map" && m.args.iter().any(|a| mentions(a, "jitter")));
            known.then(|| (!jittered, !has("take")))
        }
        "again" => {
            let known = ctor(&[&["RetryPolicy", "exponential"], &["RetryPolicy", "fixed"]]);
            let jittered = methods.iter().any(|m| {
                m.method == "with_jitter"
                    && m.args
                        .first()
                        .is_some_and(|a| matches!(a.kind, ExprKind::Lit(Lit::Bool(true))))
            });
            known.then_some((!jittered, false))
        }
        "backoff" => {
            let no_cap = methods.iter().any(|m| {
                m.method == "with_max_elapsed_time"
                    && m.args
                        .first()
                        .is_some_and(|a| a.as_path().is_some_and(|p| p.last() == "None"))
            });
            let zero_factor = methods.iter().any(|m| {
                m.method == "with_randomization_factor" && m.args.first().is_some_and(is_zero)
            }) || matches!(&root.kind, ExprKind::Struct { fields, .. }
                if fields.iter().any(|(f, v)| f == "randomization_factor" && is_zero(v)));
            let constant = ctor(&[&["Constant", "new"]]);
            let known = constant
                || ctor(&[
                    &["ExponentialBackoff", "default"],
                    &["ExponentialBackoffBuilder", "new"],
                    &["ExponentialBackoffBuilder", "default"],
                ])
                || matches!(&root.kind, ExprKind::Struct { path, .. } if path.last() == "ExponentialBackoff");
            known.then_some((zero_factor || constant, no_cap))
        }
        _ => None,
    }
}

fn mentions(e: &Expr, part: &str) -> bool {
    words(e).iter().any(|w| w.text().contains(part))
}

fn is_zero(e: &Expr) -> bool {
    matches!(&e.peel().kind, ExprKind::Lit(Lit::Float(s) | Lit::Int(s))
        if s.trim_end_matches("f64").trim_end_matches("f32").parse::<f64>() == Ok(0.0))
}

fn report(cx: &mut LintContext<'_>, f: Finding) {
    let mut missing = Vec::new();
    if f.no_delay {
        missing.push("no delay between attempts");
    }
    match (f.fixed.is_empty(), f.policy_of) {
        (true, _) => {}
        (false, None) => missing.push("a fixed delay without jitter"),
        (false, Some(_)) => missing.push("no jitter"),
    }
    if f.no_cap {
        missing.push("no attempt cap");
    }
    let message = match f.policy_of {
        Some(krate) => format!("`{krate}` retry policy with {}", missing.join(" and ")),
        None => format!("retry loop with {}", missing.join(" and ")),
    };
    cx.span_lint(&RETRY_WITHOUT_BACKOFF, f.span, message, |d| {
        d.primary_label(if f.policy_of.is_some() {
            "policy built here"
        } else {
            "retried here"
        });
        if f.policy_of.is_none() {
            for s in &f.fixed {
                d.span_label(*s, "waits the same time on every attempt");
            }
        }
        d.help(match f.policy_of {
            Some("backon") => "add `.with_jitter()` and keep a cap (`.with_max_times(n)`)",
            Some("tokio-retry") => "add `.map(jitter)` and a cap (`.take(n)`)",
            Some("again") => "add `.with_jitter(true)`",
            Some(_) => "keep the default `randomization_factor` (0.5) and a `max_elapsed_time`",
            None => {
                "cap the attempts and wait a growing, jittered delay between them (e.g. \
                 `backon::ExponentialBuilder::default().with_jitter()`)"
            }
        });
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    fn lint(deps: &[&str], src: &str) -> Vec<(usize, String)> {
        let package = testing::package("app", deps, &[("crate", src)]);
        crate::check_package(&package, &Default::default(), &|l| {
            l == &RETRY_WITHOUT_BACKOFF
        })
        .into_iter()
        .map(|d| (testing::line_of(src, d.span.lo), d.message))
        .collect()
    }

    #[test]
    fn sleeping_spreads_to_callers_at_any_depth_and_in_any_order() {
        // Callers written before their callees, a cycle, and a fn that sleeps nothing.
        let src = "fn top() { middle(); }\n\
                   fn middle() { helper.pause(); }\n\
                   fn pause() { tokio::time::sleep(D); }\n\
                   fn ping() { pong(); }\n\
                   fn pong() { ping(); }\n\
                   fn rest() { if x { ping() } else { top() } }\n\
                   fn busy() { compute(); }\n";
        let package = testing::package("app", &[], &[("crate", src)]);
        let mut found = sleeping_fns(&package);
        found.sort();
        assert_eq!(found, ["middle", "pause", "rest", "top"]);
    }

    #[test]
    fn a_loop_is_judged_by_its_wait_and_its_cap() {
        let src = "async fn f() {\n    loop {\n        \
                   match c.send().await {\n            Ok(v) => return v,\n            \
                   Err(e) => sleep(Duration::from_secs(1)).await,\n        }\n    }\n}\n";
        assert_eq!(
            lint(&[], src),
            vec![(
                3,
                "retry loop with a fixed delay without jitter and no attempt cap".into()
            )]
        );
        let growing = src.replace("from_secs(1)", "from_secs(1 << n)");
        let growing = growing.replace("Err(e) =>", "Err(e) if n < 5 => { n += 1; ");
        let growing = growing.replace(".await,\n", ".await }\n            Err(e) => return e,\n");
        assert!(lint(&[], &growing).is_empty(), "{growing}");
    }

    #[test]
    fn a_request_timeout_is_no_wait_and_a_status_guard_picks_the_successes() {
        let src = "async fn f() {\n    for n in 0..5 {\n        \
                   let r = c.post(u).timeout(LIMIT).send().await;\n        \
                   match r {\n            \
                   Ok(resp) if resp.status().is_success() => return Ok(()),\n            \
                   Ok(resp) => warn!(\"{}\", resp.status()),\n            \
                   Err(e) => warn!(\"{e}\"),\n        }\n        \
                   sleep(RETRY_DELAY).await;\n    }\n}\n";
        assert_eq!(
            lint(&[], src),
            vec![(3, "retry loop with a fixed delay without jitter".into())]
        );
        // A wait named for a timeout that waits (`wait_timeout`) still counts as a wait.
        let waits = src.replace("sleep(RETRY_DELAY)", "cv.wait_timeout(g, RETRY_DELAY)");
        assert!(lint(&[], &waits).is_empty(), "{waits}");
        // Without the success guard, an `Ok` that goes round is a work loop.
        let work = src.replace(" if resp.status().is_success()", "");
        let work = work.replace("Ok(resp) => warn!", "Ok(resp) if x => warn!");
        assert!(lint(&[], &work).is_empty(), "{work}");
    }

    #[test]
    fn a_poll_loop_is_not_a_retry() {
        let src = "async fn f() {\n    loop {\n        match q.recv().await {\n            \
                   Ok(v) => handle(v),\n            Err(e) => log(e),\n        }\n    }\n}\n";
        assert!(lint(&[], src).is_empty());
    }

    #[test]
    fn backon_needs_jitter() {
        let src = "async fn f() {\n    \
                   let p = ExponentialBuilder::default();\n    \
                   (|| fetch()).retry(p).await;\n    \
                   (|| fetch()).retry(ExponentialBuilder::default().with_jitter()).await;\n}\n";
        assert_eq!(
            lint(&["backon"], src),
            vec![(2, "`backon` retry policy with no jitter".into())]
        );
        assert!(lint(&[], src).is_empty());
    }
}
