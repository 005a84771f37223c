//! `ttl_shorter_than_redelivery`: a dedupe or claim TTL, written as a constant, shorter than
//! a redelivery window the same code sets as a constant.

use crate::analysis::durations::{int_of, millis_of, FnConsts};
use crate::analysis::flow::FnId;
use crate::analysis::store_ops::{Expiry, OpEnv};
use crate::analysis::{Access, CallGraph, StoreAccess};
use crate::context::LintContext;
use crate::declare_lint;
use crate::model::ir::{Expr, ExprKind, Lit};
use crate::model::{Package, Span};

declare_lint! {
    /// ### What it does
    /// Finds a dedupe key or claim whose TTL is a constant (`SET k v NX EX 60`, `set_ex(k,
    /// "1", TTL)`, `PX`, an `EXPIRE` in the claim's pipeline, a DynamoDB TTL attribute of
    /// `now + N`, `Duration::from_secs(N)` and `const`s followed) that is shorter than a
    /// redelivery window the code sets as a constant too:
    ///
    /// - the SQS visibility timeout (`visibility_timeout(300)`, a `VisibilityTimeout`
    ///   queue attribute, its value as text or a constant's `.to_string()`) times the
    ///   redrive policy's `maxReceiveCount` (in JSON text or a `json!` object) when the code
    ///   has one: a message is redelivered until then;
    /// - a `timeout(Duration, ..)` around the work in the claim's function: the work may
    ///   run that long while the claim is already gone;
    /// - a retry schedule's total (`backoff`'s `max_elapsed_time`, or the sum of a constant
    ///   array of delays named for retries, `const RETRY_SCHEDULE_SECS: [u64; 3] = [60,
    ///   600, 3600]`);
    /// - `redelivery_seconds` in `[lints.ttl_shorter_than_redelivery]`, for a window set
    ///   outside the code (infrastructure config, a queue's console settings).
    ///
    /// It also finds code that relies on the five-minute deduplication interval of an SQS
    /// FIFO queue beyond its end: a send that sets `message_deduplication_id(..)` and is
    /// re-sent later than 300 s after the first attempt, because a retry schedule around it
    /// runs longer (`max_elapsed_time(..)` in the same function) or a loop around it sleeps
    /// longer than 300 s (`sleep(Duration::from_secs(600))`) before sending again.
    ///
    /// Dedupe writes are Redis writes of a marker value (`"1"`, `"done"`, a timestamp) with
    /// a TTL, and claims whose answer is tested. Both numbers must be constants; the
    /// message names both.
    ///
    /// ### Why is this bad?
    /// The key is the only memory of "this message was handled". When it expires before
    /// the queue stops redelivering (or while the work is still running), the next delivery
    /// of the same message finds no key and does the work again: a second charge, a second
    /// e-mail. The TTL must outlive every redelivery: twice the work time or more, and
    /// longer than visibility timeout × receive count.
    ///
    /// ### Known problems
    /// Windows are read from the whole package: a visibility timeout of one queue is
    /// compared with the TTL of a consumer of another. TTLs and windows read from the
    /// environment or a config file are not known, so nothing is reported for them
    /// (arithmetic on constants, `TTL * 1000` or `const DAY: u64 = HOUR * 24`, is followed;
    /// a factor read at run time makes the whole unknown). For the FIFO window, only a
    /// deduplication id set explicitly counts as relying on it (not content-based
    /// deduplication), and only one delay longer than 300 s or a retry schedule's maximum
    /// elapsed time in the sending function: short sleeps that add up past 300 s over many
    /// attempts are not summed. A send in a crate fn that the retry loop or the retrying
    /// function calls is followed two calls deep, and reported where its id is set; with a
    /// retry schedule, any such send the function makes counts, even one the schedule does
    /// not retry.
    ///
    /// ### Example
    /// ```rust
    /// sqs.receive_message().queue_url(&url).visibility_timeout(300).send().await?;
    /// // ...
    /// let claimed: bool = redis::cmd("SET").arg(&key).arg(1).arg("NX").arg("EX").arg(60)
    ///     .query_async(&mut conn).await?;
    /// ```
    ///
    /// ### Use instead
    /// ```rust
    /// sqs.receive_message().queue_url(&url).visibility_timeout(300).send().await?;
    /// // ...
    /// let claimed: bool = redis::cmd("SET").arg(&key).arg(1).arg("NX").arg("EX").arg(600)
    ///     .query_async(&mut conn).await?;
    /// ```
    /// With `idem_guard`, `#[idempotent(lease = .., retention = ..)]`: the in-progress lease
    /// is renewed while the work runs, and the retention of completed records is set from the
    /// same constants as the queue.
    pub TTL_SHORTER_THAN_REDELIVERY, "ttl_shorter_than_redelivery", Allow,
    "a dedupe or claim TTL shorter than the redelivery window set in the same code"
}

pub use crate::settings::ttl_shorter_than_redelivery::Settings;

/// A redelivery window, in milliseconds, and where it was read.
#[derive(Debug, Clone)]
struct Window {
    ms: u64,
    at: Option<Span>,
    what: String,
}

/// The windows seen package-wide.
#[derive(Default)]
struct Windows {
    visibility: Option<(u64, Span)>,
    receive_count: Option<(u64, Span)>,
    retry_total: Option<(u64, Span)>,
}

pub fn check(cx: &mut LintContext<'_>) {
    let package = cx.package;
    let analysis = cx.analysis();
    let resolver = &analysis.resolver;
    let summaries = analysis.summaries(package);
    // The dedupe TTLs first: most packages have none, and then no window is looked for.
    let mut candidates = Vec::new();
    for id in summaries.ids() {
        if id.def(package).1.in_test {
            continue;
        }
        let ttls: Vec<(&StoreAccess, Span, u64)> = summaries
            .flow(id)
            .store_events
            .iter()
            .filter(|e| e.via.is_none())
            .filter_map(|e| Some((&e.access, e.span, dedupe_ttl(&e.access, e.won_claim())?)))
            .collect();
        if !ttls.is_empty() {
            candidates.push((id, ttls));
        }
    }
    let resends = fifo_resends(package, resolver, analysis.call_graph(package));
    let package_windows = if candidates.is_empty() {
        Vec::new()
    } else {
        package_windows(cx, resolver)
    };
    let mut findings = Vec::new();
    for (id, ttls) in candidates {
        let (file, f) = id.def(package);
        let mut local = package_windows.clone();
        if let (Some(body), Some(env)) = (&f.body, FnConsts::new(package, resolver, file, f)) {
            body.walk(&mut |e| local.extend(work_timeout(&env, e)));
        }
        for (access, span, ttl) in ttls {
            if let Some(w) = local.iter().filter(|w| w.ms > ttl).max_by_key(|w| w.ms) {
                findings.push((access.command.clone(), span, ttl, w.clone()));
            }
        }
    }
    for (command, span, ttl, window) in findings {
        report(cx, &command, span, ttl, &window);
    }
    for r in resends {
        report_fifo(cx, &r);
    }
}

/// The redelivery windows the package sets as constants, and the configured one.
fn package_windows(cx: &LintContext<'_>, resolver: &crate::analysis::Resolver) -> Vec<Window> {
    let package = cx.package;
    let mut windows = Windows::default();
    for (file, f) in package.fns().filter(|(_, f)| !f.in_test) {
        let (Some(body), Some(env)) = (&f.body, FnConsts::new(package, resolver, file, f)) else {
            continue;
        };
        body.walk(&mut |e| read_window(&env, e, &mut windows));
    }
    // A redrive policy kept in a `const` (`const REDRIVE: &str = r#"{..}"#`).
    for c in package.files.iter().flat_map(|f| &f.consts) {
        c.value.walk(&mut |e| {
            if let Some(n) = e.as_str_lit().and_then(receive_count) {
                keep_max(&mut windows.receive_count, n, e.span);
            }
        });
        // A retry schedule kept in an array (`const RETRY_SCHEDULE_SECS: [u64; 4] = [60,
        // 600, 3600, 14400]`): a message is retried until the sum of its delays.
        if let Some(ms) = schedule_total(&c.name, &c.value) {
            keep_max(&mut windows.retry_total, ms, c.value.span);
        }
    }
    let configured = cx
        .settings
        .ttl_shorter_than_redelivery
        .redelivery_seconds
        .map(|s| Window {
            ms: s * 1000,
            at: None,
            what: "`redelivery_seconds` in the configuration".to_owned(),
        });
    let mut out: Vec<Window> = configured.into_iter().collect();
    if let Some((v, at)) = windows.visibility {
        let (ms, what) = match windows.receive_count {
            Some((n, _)) => (
                v * n,
                format!("SQS visibility timeout {} × maxReceiveCount {n}", secs(v)),
            ),
            None => (v, format!("SQS visibility timeout {}", secs(v))),
        };
        out.push(Window {
            ms,
            at: Some(at),
            what,
        });
    }
    if let Some((ms, at)) = windows.retry_total {
        out.push(Window {
            ms,
            at: Some(at),
            what: format!("retry schedule of {}", secs(ms)),
        });
    }
    out
}

/// The TTL of a claim whose answer is tested, or of a Redis write of a marker value.
fn dedupe_ttl(a: &StoreAccess, won_claim: bool) -> Option<u64> {
    let Some(Expiry::After(Some(ms))) = a.shape.expiry else {
        return None;
    };
    let dedupe =
        won_claim || a.access == Access::Write && (a.value_is_marker || a.shape.marks_done);
    dedupe.then_some(ms)
}

/// The total, in milliseconds, of a retry schedule written as a constant array: a name
/// with a part `retry` or `backoff` and a unit (`RETRY_DELAYS_SECS`, `BACKOFF_MS`) over
/// integer literals, or `Duration` constructors of literals under any such name.
fn schedule_total(name: &str, value: &Expr) -> Option<u64> {
    let ExprKind::Array(items) = &value.peel().kind else {
        return None;
    };
    let name = name.to_ascii_lowercase();
    let parts: Vec<&str> = name.split('_').collect();
    if items.is_empty()
        || !parts
            .iter()
            .any(|p| matches!(*p, "retry" | "retries" | "backoff"))
    {
        return None;
    }
    let unit = parts.iter().rev().find_map(|p| match *p {
        "ms" | "millis" => Some(1),
        "s" | "secs" | "seconds" => Some(1000),
        "mins" | "minutes" => Some(60_000),
        _ => None,
    });
    let one = |e: &Expr| -> Option<u64> {
        match &e.peel().kind {
            ExprKind::Lit(Lit::Int(n)) => n.parse::<u64>().ok()?.checked_mul(unit?),
            ExprKind::Call { func, args } => {
                let per = match func.as_path()?.last() {
                    "from_millis" => 1,
                    "from_secs" => 1000,
                    "from_mins" => 60_000,
                    _ => return None,
                };
                match args.as_slice() {
                    [n] => match &n.peel().kind {
                        ExprKind::Lit(Lit::Int(n)) => n.parse::<u64>().ok()?.checked_mul(per),
                        _ => None,
                    },
                    _ => None,
                }
            }
            _ => None,
        }
    };
    items
        .iter()
        .try_fold(0u64, |sum, e| sum.checked_add(one(e)?))
}

/// Records a visibility timeout, a redrive policy's receive count or a retry total.
fn read_window<'a>(env: &FnConsts<'a>, e: &'a Expr, w: &mut Windows) {
    match &e.kind {
        ExprKind::MethodCall {
            method,
            method_span,
            args,
            ..
        } => {
            // The setter alone (`visibility_timeout(120)`), not the builder chain before it.
            let at = Span {
                lo: method_span.lo,
                ..e.span
            };
            read_setter(env, method, args, at, w)
        }
        ExprKind::Lit(Lit::Str(s)) => {
            if let Some(n) = receive_count(s) {
                keep_max(&mut w.receive_count, n, e.span);
            }
        }
        // `json!({ "maxReceiveCount": MAX_RECEIVES.to_string(), .. })`: the object's fields
        // come lowered in (key, value) pairs.
        ExprKind::Macro(m) if m.parsed => {
            for pair in m.args.chunks(2) {
                if let [key, value] = pair {
                    if key.as_str_lit() == Some(RECEIVE_COUNT) {
                        if let Some(n) = number_text(env, value) {
                            keep_max(&mut w.receive_count, n, value.span);
                        }
                    }
                }
            }
        }
        _ => {}
    }
}

/// The redrive policy's field that counts receives.
const RECEIVE_COUNT: &str = "maxReceiveCount";

/// The number a setting given as text holds: `"300"`, a constant's `.to_string()`,
/// `format!("{}", N)`, or the number itself.
fn number_text<'a>(env: &FnConsts<'a>, e: &'a Expr) -> Option<u64> {
    if let Some(n) = env.string_of(e).and_then(|s| s.trim().parse().ok()) {
        return Some(n);
    }
    match &e.peel().kind {
        ExprKind::MethodCall {
            receiver,
            method,
            args,
            ..
        } if args.is_empty() && matches!(method.as_str(), "to_string" | "to_owned" | "into") => {
            int_of(env, receiver)
        }
        ExprKind::Macro(m) if m.path.last() == "format" && m.args.len() == 2 => {
            (m.args[0].as_str_lit()?.trim() == "{}")
                .then(|| int_of(env, &m.args[1]))
                .flatten()
        }
        _ => int_of(env, e),
    }
}

/// A builder setter of a visibility timeout, a queue attribute or a retry total.
fn read_setter<'a>(env: &FnConsts<'a>, method: &str, args: &'a [Expr], at: Span, w: &mut Windows) {
    match (method, args) {
        ("visibility_timeout" | "set_visibility_timeout", [n]) => {
            if let Some(s) = int_of(env, unwrap_some(n)) {
                keep_max(&mut w.visibility, s * 1000, at);
            }
        }
        ("max_elapsed_time" | "with_max_elapsed_time", [d]) => {
            if let Some(ms) = millis_of(env, unwrap_some(d)) {
                keep_max(&mut w.retry_total, ms, at);
            }
        }
        // `.attributes(QueueAttributeName::VisibilityTimeout, "300")`.
        (_, [name, value]) if names_visibility(env, name) => {
            if let Some(s) = number_text(env, value) {
                keep_max(&mut w.visibility, s * 1000, at);
            }
        }
        _ => {}
    }
}

/// `Some(x)` → `x`.
fn unwrap_some(e: &Expr) -> &Expr {
    match &e.peel().kind {
        ExprKind::Call { func, args } if args.len() == 1 => {
            if func.as_path().is_some_and(|p| p.last() == "Some") {
                &args[0]
            } else {
                e
            }
        }
        _ => e,
    }
}

fn names_visibility<'a>(env: &FnConsts<'a>, e: &'a Expr) -> bool {
    let by_path = e
        .peel()
        .as_path()
        .is_some_and(|p| p.last() == "VisibilityTimeout");
    by_path || env.string_of(e).is_some_and(|s| s == "VisibilityTimeout")
}

/// The `maxReceiveCount` of a redrive policy written as JSON text.
fn receive_count(s: &str) -> Option<u64> {
    let at = s.find(RECEIVE_COUNT)? + RECEIVE_COUNT.len();
    let digits: String = s[at..]
        .chars()
        .skip_while(|c| !c.is_ascii_digit())
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// `tokio::time::timeout(Duration::from_secs(120), work(..))`: how long the work may run.
fn work_timeout<'a>(env: &FnConsts<'a>, e: &'a Expr) -> Option<Window> {
    let ExprKind::Call { func, args } = &e.kind else {
        return None;
    };
    if func.as_path()?.last() != "timeout" || args.len() != 2 {
        return None;
    }
    let ms = millis_of(env, &args[0])?;
    Some(Window {
        ms,
        at: Some(e.span),
        what: format!("work timeout {}", secs(ms)),
    })
}

/// How long SQS FIFO remembers a deduplication id: a send with the same id after it is a
/// new message.
const FIFO_DEDUP_WINDOW_MS: u64 = 300_000;

/// A send relying on FIFO deduplication and the resend that can come after its window.
struct FifoResend {
    dedup_id: Span,
    later: Window,
}

/// The sends with a deduplication id that are retried later than the FIFO window.
fn fifo_resends(
    package: &Package,
    resolver: &crate::analysis::Resolver,
    graph: &CallGraph,
) -> Vec<FifoResend> {
    if !package.depends_on("aws_sdk_sqs") {
        return Vec::new();
    }
    let mut found: Vec<FifoResend> = Vec::new();
    for id in graph.ids() {
        let (file, f) = id.def(package);
        if f.in_test {
            continue;
        }
        let (Some(body), Some(env)) = (&f.body, FnConsts::new(package, resolver, file, f)) else {
            continue;
        };
        let mut sends = Vec::new();
        let mut schedule: Option<Window> = None;
        body.walk(&mut |e| {
            sends.extend(dedup_id_setter(e));
            if let Some(w) = retry_schedule(&env, e) {
                if schedule.as_ref().is_none_or(|s| w.ms > s.ms) {
                    schedule = Some(w);
                }
            }
            if let Some(r) = loop_resend(&env, e, |at| helper_send(package, graph, id, Some(at))) {
                found.push(r);
            }
        });
        if let Some(w) = schedule.filter(|w| w.ms > FIFO_DEDUP_WINDOW_MS) {
            sends.extend(helper_send(package, graph, id, None));
            found.extend(sends.into_iter().map(|dedup_id| FifoResend {
                dedup_id,
                later: w.clone(),
            }));
        }
    }
    // Nested loops and a schedule around a loop find the same send twice.
    found.sort_by_key(|r| (r.dedup_id.lo, std::cmp::Reverse(r.later.ms)));
    found.dedup_by_key(|r| r.dedup_id.lo);
    found
}

/// The `message_deduplication_id(..)` setter of a send or batch entry (not `None`).
fn dedup_id_setter(e: &Expr) -> Option<Span> {
    let ExprKind::MethodCall {
        method,
        method_span,
        args,
        ..
    } = &e.kind
    else {
        return None;
    };
    let [id] = args.as_slice() else {
        return None;
    };
    let unset = id.peel().as_path().is_some_and(|p| p.last() == "None");
    let setter = matches!(
        method.as_str(),
        "message_deduplication_id" | "set_message_deduplication_id"
    );
    (setter && !unset).then_some(Span {
        lo: method_span.lo,
        ..e.span
    })
}

/// `max_elapsed_time(Some(Duration::from_secs(900)))`: how late a retry may run.
fn retry_schedule<'a>(env: &FnConsts<'a>, e: &'a Expr) -> Option<Window> {
    let ExprKind::MethodCall {
        method,
        method_span,
        args,
        ..
    } = &e.kind
    else {
        return None;
    };
    let ("max_elapsed_time" | "with_max_elapsed_time", [d]) = (method.as_str(), args.as_slice())
    else {
        return None;
    };
    let ms = millis_of(env, unwrap_some(d))?;
    Some(Window {
        ms,
        at: Some(Span {
            lo: method_span.lo,
            ..e.span
        }),
        what: format!("retry schedule of {}", secs(ms)),
    })
}

/// The deduplication id set by a crate fn that `id` calls (within the span `within`, when
/// given), two calls deep at most (`send_order(&sqs, &ev).await` in the retry loop).
fn helper_send(
    package: &Package,
    graph: &CallGraph,
    id: FnId,
    within: Option<Span>,
) -> Option<Span> {
    let inside =
        |c: &&crate::analysis::Call| within.is_none_or(|w| c.span.lo >= w.lo && c.span.hi <= w.hi);
    graph.calls(id).iter().filter(inside).find_map(|c| {
        let direct = graph.calls(c.callee).iter().map(|d| d.callee);
        std::iter::once(c.callee).chain(direct).find_map(|callee| {
            let mut found = None;
            if let Some(body) = &callee.def(package).1.body {
                body.walk(&mut |e| found = found.or(dedup_id_setter(e)));
            }
            found
        })
    })
}

/// A loop that sends with a deduplication id (itself or through `helper`, asked with the
/// loop's span) and sleeps longer than the FIFO window.
fn loop_resend<'a>(
    env: &FnConsts<'a>,
    e: &'a Expr,
    helper: impl Fn(Span) -> Option<Span>,
) -> Option<FifoResend> {
    let body = match &e.kind {
        ExprKind::Loop { body, .. } | ExprKind::For { body, .. } => body,
        _ => return None,
    };
    let mut dedup_id = None;
    let mut longest: Option<Window> = None;
    body.walk(&mut |e| {
        dedup_id = dedup_id.or(dedup_id_setter(e));
        if let Some(w) = sleep_of(env, e) {
            if longest.as_ref().is_none_or(|l| w.ms > l.ms) {
                longest = Some(w);
            }
        }
    });
    let later = longest.filter(|w| w.ms > FIFO_DEDUP_WINDOW_MS)?;
    Some(FifoResend {
        dedup_id: dedup_id.or_else(|| helper(e.span))?,
        later,
    })
}

/// `sleep(Duration::from_secs(600))`, `tokio::time::sleep(..)`, `delay_for(..)`.
fn sleep_of<'a>(env: &FnConsts<'a>, e: &'a Expr) -> Option<Window> {
    let ExprKind::Call { func, args } = &e.kind else {
        return None;
    };
    if !matches!(func.as_path()?.last(), "sleep" | "delay_for") {
        return None;
    }
    let [d] = args.as_slice() else {
        return None;
    };
    let ms = millis_of(env, d)?;
    Some(Window {
        ms,
        at: Some(e.span),
        what: format!("a {} delay before sending again", secs(ms)),
    })
}

fn report_fifo(cx: &mut LintContext<'_>, r: &FifoResend) {
    let window = secs(FIFO_DEDUP_WINDOW_MS);
    cx.span_lint(
        &TTL_SHORTER_THAN_REDELIVERY,
        r.dedup_id,
        format!(
            "this send relies on the SQS FIFO deduplication window of {window}, but is sent \
             again up to {} later ({})",
            secs(r.later.ms),
            r.later.what
        ),
        |d| {
            d.primary_label(format!("deduplicated for {window} only"));
            if let Some(at) = r.later.at {
                d.span_label(at, format!("sent again up to {} later", secs(r.later.ms)));
            }
            d.note(
                "SQS accepts a message with the same deduplication id once 5 minutes have \
                 passed: the consumer receives it twice",
            );
            d.help(format!(
                "keep every retry of the send within {window}, or deduplicate in the consumer \
                 (a claim or `idem_guard`'s `#[idempotent]` keyed by the same id)"
            ));
        },
    );
}

fn keep_max(slot: &mut Option<(u64, Span)>, value: u64, at: Span) {
    if slot.is_none_or(|(v, _)| value > v) {
        *slot = Some((value, at));
    }
}

/// `90 s`, `1.5 s`.
fn secs(ms: u64) -> String {
    if ms % 1000 == 0 {
        format!("{} s", ms / 1000)
    } else {
        format!("{} s", ms as f64 / 1000.0)
    }
}

fn report(cx: &mut LintContext<'_>, command: &str, span: Span, ttl: u64, w: &Window) {
    cx.span_lint(
        &TTL_SHORTER_THAN_REDELIVERY,
        span,
        format!(
            "`{command}` TTL of {} is shorter than the redelivery window of {} ({})",
            secs(ttl),
            secs(w.ms),
            w.what
        ),
        |d| {
            d.primary_label(format!("expires after {}", secs(ttl)));
            if let Some(at) = w.at {
                d.span_label(at, format!("redelivered for up to {}", secs(w.ms)));
            }
            d.note("a delivery after the key expired finds no key and does the work again");
            d.help(format!(
                "make the TTL longer than {} (twice the work time or more); with `idem_guard`, \
                 `#[idempotent(lease = .., retention = ..)]`: a lease renewed while the work \
                 runs and a retention longer than the window",
                secs(w.ms)
            ));
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redrive_policies_give_their_receive_count() {
        let policy =
            r#"{"deadLetterTargetArn":"arn:aws:sqs:eu-west-1:1:dlq","maxReceiveCount":"5"}"#;
        assert_eq!(receive_count(policy), Some(5));
        assert_eq!(receive_count(r#"{"maxReceiveCount": 12}"#), Some(12));
        assert_eq!(receive_count("maxReceiveCount"), None);
        assert_eq!(receive_count(r#"{"visibility": 30}"#), None);
    }

    #[test]
    fn durations_read_in_seconds() {
        assert_eq!(secs(600_000), "600 s");
        assert_eq!(secs(1_500), "1.5 s");
    }
}
