//! `dead_letter_without_context`: a message sent to a dead-letter queue, topic or table without
//! the error that sent it there, or without the original message or its id.

use crate::analysis::resolve::path_ends_with_in;
use crate::analysis::words::{called_path, has_part};
use crate::analysis::{Locals, MethodStep, Step};
use crate::context::LintContext;
use crate::declare_lint;
use crate::model::ir::{Block, Expr, ExprKind, Lit};
use crate::model::{FileModel, Span};
use std::cell::OnceCell;

declare_lint! {
    /// ### What it does
    /// Finds sends to a dead-letter destination whose payload carries no error, or neither
    /// the original message nor its id. A destination is a dead letter when its name has a
    /// part `dlq`, `dead_letter`, `deadletter` or `poison` (or a configured name), or, in a
    /// string literal, `failed` or `dead` (`"orders.failed"`, `"bookings.dead"`, `INSERT
    /// INTO failed_jobs`), or `dead` next to a destination word (`DEAD_EXCHANGE`):
    ///
    /// - a send on a receiver so named: `self.dlq.send(..)`, `dead_letter_tx.send(..)`,
    ///   `poison_queue.push(..)`;
    /// - a send whose destination argument is so named: `conn.lpush("jobs:dlq", ..)`,
    ///   `channel.basic_publish("", DLQ_ROUTING_KEY, .., &body, ..)`;
    /// - an AWS request whose `queue_url`, `topic_arn`, `target_arn` or `stream_name` is so
    ///   named (`sqs.send_message().queue_url(&self.dlq_url).message_body(..)`);
    /// - a Kafka record `FutureRecord::to(..)`/`BaseRecord::to(..)` to such a topic;
    /// - an SQL `INSERT INTO` such a table, judged by its column list.
    ///
    /// The payload is followed through local variables, struct literals (their field names
    /// count) and calls (their arguments count); a parameter of which only fields are taken
    /// (`booking.hotel_id`) carries those fields. It carries the error when it mentions a name
    /// like `err`, `error`, `reason`, `cause`, `failure` or `exception`, and the original
    /// when it mentions the message (`msg`, `message`, `record`, `event`, `delivery`,
    /// `envelope`, `original`, `job`) or an id (`id`, `*_id`, `key`).
    ///
    /// ### Why is this bad?
    /// A dead letter is read later by someone who has to decide whether to replay, fix or
    /// drop it. Without the error they cannot tell a bug from a bad message; without the
    /// original message or its id they cannot replay it, nor match it with the logs and the
    /// idempotency store, so a replay may run twice or not at all. The dead letter needs the
    /// original message, why it failed, how many attempts were made, and the last error.
    ///
    /// ### Known problems
    /// The payload is judged by names: an error carried under an unusual name is missed, so
    /// the send is reported. A payload that comes from a parameter of a helper (`fn
    /// to_dlq(&self, body: Vec<u8>)`) or from a macro that does not parse as expressions is
    /// not judged (its caller may have put the error in). More destination names:
    /// `names = ["graveyard"]` in `[lints.dead_letter_without_context]`. Message attributes
    /// and headers count as payload only when set in the same builder chain.
    ///
    /// ### Example
    /// ```rust
    /// Err(e) => {
    ///     warn!("giving up: {e}");
    ///     sqs.send_message().queue_url(&cfg.dlq_url).message_body(msg.body()).send().await?;
    /// }
    /// ```
    ///
    /// ### Use instead
    /// ```rust
    /// Err(e) => {
    ///     let letter = DeadLetter { message_id: msg.id(), body: msg.body(), error: e.to_string(), attempts };
    ///     sqs.send_message().queue_url(&cfg.dlq_url).message_body(serde_json::to_string(&letter)?).send().await?;
    /// }
    /// ```
    pub DEAD_LETTER_WITHOUT_CONTEXT, "dead_letter_without_context", Allow,
    "a dead letter sent without the error or without the original message id"
}

pub use crate::settings::dead_letter_without_context::Settings;

/// Names that mark a dead-letter destination wherever they appear.
const STRONG: &[&str] = &["dlq", "dead_letter", "deadletter", "dead_letters", "poison"];

/// Methods that send a payload somewhere.
const SENDS: &[&str] = &[
    "send",
    "send_message",
    "send_to",
    "publish",
    "basic_publish",
    "produce",
    "push",
    "push_back",
    "enqueue",
    "lpush",
    "rpush",
    "xadd",
];

/// Builder setters that name an AWS destination.
const AWS_DESTINATIONS: &[&str] = &["queue_url", "topic_arn", "target_arn", "stream_name"];

/// Words of a destination variable or field (`dlq_topic`), as opposed to a value (`dlq_msg`).
const DESTINATION_WORDS: &[&str] = &[
    "queue", "topic", "url", "key", "name", "table", "stream", "exchange", "routing", "subject",
    "channel", "arn",
];

pub fn check(cx: &mut LintContext<'_>) {
    let names: Vec<String> = STRONG
        .iter()
        .map(|s| s.to_string())
        .chain(
            cx.settings
                .dead_letter_without_context
                .names
                .iter()
                .map(|n| n.to_lowercase()),
        )
        .collect();
    let mut findings = Vec::new();
    for (file, f) in cx.package.fns().filter(|(_, f)| !f.in_test) {
        let Some(body) = &f.body else { continue };
        findings.extend(dead_letters(file, body, &names));
    }
    for f in findings {
        report(cx, f);
    }
}

struct Finding {
    send: Span,
    destination: Span,
    missing: Missing,
}

enum Missing {
    Error,
    Original,
}

/// What a payload mentions.
#[derive(Default)]
struct Evidence {
    error: bool,
    original: bool,
    /// Comes from somewhere the source does not show here.
    opaque: bool,
}

fn dead_letters(file: &FileModel, body: &Block, names: &[String]) -> Vec<Finding> {
    // Built at the first send: most fns have none.
    let locals = OnceCell::new();
    let locals = || locals.get_or_init(|| Locals::of_body(body));
    let mut out = Vec::new();
    body.walk(&mut |e| {
        if let ExprKind::Lit(Lit::Str(sql)) = &e.kind {
            if let Some(missing) = sql_dead_letter(sql, names) {
                out.push(Finding {
                    send: e.span,
                    destination: e.span,
                    missing,
                });
            }
            return;
        }
        let Some(step) = MethodStep::of(e).filter(|s| SENDS.contains(&s.method)) else {
            return;
        };
        let Some((send, destination, payload)) = send_to_dead_letter(file, &step, locals(), names)
        else {
            return;
        };
        let mut ev = Evidence::default();
        for p in &payload {
            gather(p, locals(), 0, &mut ev);
        }
        let missing = if ev.opaque || payload.is_empty() {
            None
        } else if !ev.error {
            Some(Missing::Error)
        } else if !ev.original {
            Some(Missing::Original)
        } else {
            None
        };
        if let Some(missing) = missing {
            out.push(Finding {
                send,
                destination,
                missing,
            });
        }
    });
    out
}

/// Where a send to a dead letter is reported, its destination and its payload.
type DeadLetterSend<'a> = (Span, Span, Vec<&'a Expr>);

/// The send to a dead letter `step` makes, if it makes one.
fn send_to_dead_letter<'a>(
    file: &FileModel,
    step: &MethodStep<'a>,
    locals: &Locals<'a>,
    names: &[String],
) -> Option<DeadLetterSend<'a>> {
    if step.method == "send" && step.args.is_empty() {
        return aws_request(step, locals, names);
    }
    if !SENDS.contains(&step.method) {
        return None;
    }
    let at = step.call_span();
    if let Some((dest, payload)) = kafka_record(file, step, locals, names) {
        return Some((at, dest, payload));
    }
    if names_dead_letter(last_name(step.receiver)?, names) {
        return Some((at, step.receiver.span, step.args.iter().collect()));
    }
    let dest = step
        .args
        .iter()
        .find(|a| is_dead_letter_destination(a, names))?;
    let payload: Vec<&Expr> = step.args.iter().filter(|a| a.span != dest.span).collect();
    Some((at, dest.span, payload))
}

/// `client.send_message().queue_url(DLQ).message_body(..).send()`: the payload is every
/// other setter's argument.
fn aws_request<'a>(
    step: &MethodStep<'a>,
    locals: &Locals<'a>,
    names: &[String],
) -> Option<DeadLetterSend<'a>> {
    for chain in locals.chains(step.receiver)? {
        let methods: Vec<&MethodStep<'a>> = chain.methods().collect();
        let dest = methods.iter().find(|m| {
            AWS_DESTINATIONS.contains(&m.method)
                && m.args
                    .first()
                    .is_some_and(|a| mentions_dead_letter(a, names))
        });
        if let Some(dest) = dest {
            let payload = methods
                .iter()
                .filter(|m| m.expr.span != dest.expr.span)
                .flat_map(|m| m.args.iter())
                .collect();
            return Some((methods[0].call_span(), dest.args[0].span, payload));
        }
    }
    None
}

/// `producer.send(FutureRecord::to(DLQ).payload(..).key(..), ..)`.
fn kafka_record<'a>(
    file: &FileModel,
    step: &MethodStep<'a>,
    locals: &Locals<'a>,
    names: &[String],
) -> Option<(Span, Vec<&'a Expr>)> {
    for arg in step.args {
        for chain in locals.chains(arg).unwrap_or_default() {
            let Some(ExprKind::Call { args, .. }) =
                called_path(chain.root).map(|_| &chain.root.peel().kind)
            else {
                continue;
            };
            let is_record = called_path(chain.root).is_some_and(|p| {
                path_ends_with_in(file, p, &["FutureRecord", "to"])
                    || path_ends_with_in(file, p, &["BaseRecord", "to"])
            });
            let Some(topic) = args.first().filter(|_| is_record) else {
                continue;
            };
            if !mentions_dead_letter(topic, names) {
                continue;
            }
            let payload = chain
                .steps
                .iter()
                .filter_map(|s| match s {
                    Step::Method(m) => Some(m.args.iter()),
                    Step::Through(_) => None,
                })
                .flatten()
                .collect();
            return Some((topic.span, payload));
        }
    }
    None
}

/// The name a receiver or an argument ends in: `dlq` of `self.dlq`, `DLQ_URL`.
fn last_name(e: &Expr) -> Option<String> {
    match &e.peel().kind {
        ExprKind::Path(p) => Some(p.last().to_lowercase()),
        ExprKind::Field { member, .. } => Some(member.to_lowercase()),
        ExprKind::MethodCall {
            receiver, method, ..
        } if matches!(method.as_str(), "clone" | "as_str" | "as_ref" | "to_string") => {
            last_name(receiver)
        }
        _ => None,
    }
}

fn names_dead_letter(name: String, names: &[String]) -> bool {
    names.iter().any(|n| has_part(&name, n))
}

/// A string literal naming a dead letter (where `failed` counts too), or a constant,
/// variable or field named as a dead-letter destination.
fn is_dead_letter_destination(e: &Expr, names: &[String]) -> bool {
    if let Some(s) = e.as_str_lit() {
        return literal_names_dead_letter(s, names);
    }
    let Some(name) = last_name(e) else {
        return false;
    };
    let destination = DESTINATION_WORDS.iter().any(|w| has_part(&name, w));
    // `DEAD_EXCHANGE`, `dead_queue`: `dead` names a dead letter only next to a destination
    // word (a `dead_nodes` list is not one).
    names_dead_letter(name.clone(), names) && (names.contains(&name) || destination)
        || destination && has_part(&name, DEAD)
}

fn literal_names_dead_letter(s: &str, names: &[String]) -> bool {
    let s = s.to_lowercase();
    names.iter().any(|n| has_part(&s, n)) || has_part(&s, "failed") || has_part(&s, DEAD)
}

/// A part that names a dead letter in a destination's name or text (`bookings.dead`,
/// `DEAD_EXCHANGE`), not wherever it appears.
const DEAD: &str = "dead";

/// A destination expression naming a dead letter anywhere in it (`&self.cfg.dlq_url`,
/// `format!("{}.dlq", topic)`).
fn mentions_dead_letter(e: &Expr, names: &[String]) -> bool {
    let mut found = false;
    e.walk(&mut |x| {
        found |= match &x.kind {
            ExprKind::Lit(Lit::Str(s)) => literal_names_dead_letter(s, names),
            ExprKind::Path(p) => p
                .segments
                .iter()
                .any(|s| names_dead_letter(s.to_lowercase(), names)),
            ExprKind::Field { member, .. } => names_dead_letter(member.to_lowercase(), names),
            _ => false,
        }
    });
    found
}

/// Adds what `e` mentions to `ev`, following local variables.
fn gather(e: &Expr, locals: &Locals<'_>, depth: usize, ev: &mut Evidence) {
    // The functions called are not values (`to_vec(&letter)`); a value whose field is taken
    // (`booking.hotel_id`) carries that field, which names itself.
    let mut called = Vec::new();
    let mut field_bases = Vec::new();
    e.walk(&mut |x| match &x.kind {
        ExprKind::Call { func, .. } => called.push(func.span),
        ExprKind::Field { base, .. } => field_bases.push(base.peel().span),
        _ => {}
    });
    e.walk(&mut |x| match &x.kind {
        ExprKind::Path(_) if called.contains(&x.span) => {}
        ExprKind::Path(p) => {
            if let Some(name) = p.as_ident() {
                let lower = name.to_lowercase();
                if classify(&lower, ev)
                    || lower == "self"
                    || name.chars().all(|c| !c.is_lowercase())
                {
                    return;
                }
                let defs = locals.defs(name);
                if !defs.is_empty() && depth < 4 {
                    for d in defs {
                        gather(d, locals, depth + 1, ev);
                    }
                } else if name.starts_with(char::is_lowercase) && !field_bases.contains(&x.span) {
                    // A parameter or a pattern binding: what it holds is decided elsewhere.
                    ev.opaque = true;
                }
            }
        }
        ExprKind::Field { member, .. } => {
            classify(&member.to_lowercase(), ev);
        }
        ExprKind::MethodCall { method, .. } => {
            classify(&method.to_lowercase(), ev);
        }
        ExprKind::Struct { fields, .. } => {
            for (name, _) in fields {
                classify(&name.to_lowercase(), ev);
            }
        }
        ExprKind::Lit(Lit::Str(s)) => {
            let s = s.to_lowercase();
            ev.error |= ERROR_WORDS.iter().any(|w| s.contains(w));
        }
        ExprKind::Macro(m) if !m.parsed => ev.opaque = true,
        _ => {}
    });
}

const ERROR_WORDS: &[&str] = &["err", "reason", "cause", "fail", "exception", "panic"];
const ORIGINAL_WORDS: &[&str] = &[
    "msg", "message", "record", "event", "delivery", "envelope", "original", "job",
];

/// Records what a name says; true when it says something.
fn classify(name: &str, ev: &mut Evidence) -> bool {
    let error = name == "e" || ERROR_WORDS.iter().any(|w| name.contains(w));
    let original = ORIGINAL_WORDS
        .iter()
        .any(|w| has_part(name, w) || name.starts_with(w))
        || name == "id"
        || name.ends_with("_id")
        || name == "key";
    ev.error |= error;
    ev.original |= original;
    error || original
}

/// `INSERT INTO dead_letters (payload, error) ..`: judged by its column list.
fn sql_dead_letter(sql: &str, names: &[String]) -> Option<Missing> {
    // Every string literal comes here: lowercase only an `INSERT INTO` (no other character
    // lowercases to one of its letters but the ASCII ones).
    let head = sql.trim_start().as_bytes();
    if !head
        .get(..11)
        .is_some_and(|h| h.eq_ignore_ascii_case(b"insert into"))
    {
        return None;
    }
    let lower = sql.to_lowercase();
    let rest = lower.trim_start().strip_prefix("insert into")?.trim_start();
    let table_end = rest.find(|c: char| c.is_whitespace() || c == '(')?;
    let table = rest[..table_end].trim_matches('"');
    if !(names.iter().any(|n| has_part(table, n)) || has_part(table, "failed")) {
        return None;
    }
    let cols = rest[table_end..].trim_start().strip_prefix('(')?;
    let cols = &cols[..cols.find(')')?];
    let mut ev = Evidence::default();
    for c in cols.split(',') {
        classify(c.trim().trim_matches('"'), &mut ev);
    }
    if !ev.error {
        Some(Missing::Error)
    } else if !(ev.original || cols.contains("payload") || cols.contains("body")) {
        Some(Missing::Original)
    } else {
        None
    }
}

fn report(cx: &mut LintContext<'_>, f: Finding) {
    let (message, help) = match f.missing {
        Missing::Error => (
            "dead letter sent without the error that put it there",
            "add the last error (and the attempt count) to the dead letter's payload or \
             attributes",
        ),
        Missing::Original => (
            "dead letter sent without the original message or its id",
            "add the original message, or at least its id, so it can be replayed and matched \
             with the idempotency store",
        ),
    };
    cx.span_lint(&DEAD_LETTER_WITHOUT_CONTEXT, f.send, message, |d| {
        d.primary_label("sent here");
        if f.destination != f.send {
            d.span_label(f.destination, "a dead-letter destination");
        }
        d.help(help);
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    fn lint(src: &str) -> Vec<(usize, String)> {
        let package = testing::package("app", &[], &[("crate", src)]);
        crate::check_package(&package, &Default::default(), &|l| {
            l == &DEAD_LETTER_WITHOUT_CONTEXT
        })
        .into_iter()
        .map(|d| (testing::line_of(src, d.span.lo), d.message))
        .collect()
    }

    #[test]
    fn the_payload_is_followed_through_locals_and_struct_fields() {
        let src = "async fn f(dlq: &Tx, msg: Msg, err: Error) {\n    \
                   let body = msg.body.clone();\n    \
                   dlq.send(body).await;\n    \
                   let letter = Letter { id: msg.id, error: err.to_string() };\n    \
                   dlq.send(letter).await;\n}\n";
        assert_eq!(
            lint(src),
            vec![(
                3,
                "dead letter sent without the error that put it there".into()
            )]
        );
    }

    #[test]
    fn a_destination_spelled_with_an_escape_is_read() {
        // `\x66ailed` is `failed`: the literal is read, not the text.
        let src = "async fn f(conn: &C, msg: Msg) {\n    \
                   conn.lpush(\"jobs:\\x66ailed\", msg.body.clone()).await;\n}\n";
        assert_eq!(
            lint(src),
            vec![(
                2,
                "dead letter sent without the error that put it there".into()
            )]
        );
    }

    #[test]
    fn a_payload_from_a_parameter_is_not_judged() {
        let src = "async fn f(dlq: &Tx, body: Vec<u8>) {\n    dlq.send(body).await;\n}\n";
        assert!(lint(src).is_empty());
    }

    #[test]
    fn sql_is_judged_by_its_columns() {
        let names = vec!["dlq".to_owned()];
        assert!(matches!(
            sql_dead_letter(
                "INSERT INTO failed_jobs (id, payload) VALUES ($1, $2)",
                &names
            ),
            Some(Missing::Error)
        ));
        assert!(matches!(
            sql_dead_letter("insert into orders_dlq (error) values ($1)", &names),
            Some(Missing::Original)
        ));
        assert!(sql_dead_letter(
            "INSERT INTO dlq (job_id, last_error) VALUES ($1, $2)",
            &names
        )
        .is_none());
        assert!(sql_dead_letter("INSERT INTO jobs (id) VALUES ($1)", &names).is_none());
    }
}
