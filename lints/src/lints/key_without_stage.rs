//! `key_without_stage`: one message drives several effects under the same idempotency key,
//! so the second effect is deduplicated against the first.

use crate::analysis::chain::Locals;
use crate::analysis::key_text::{self, KeyText};
use crate::analysis::store_ops::{Access, Store};
use crate::analysis::{Call, CallGraph, CallKind, FastMap, FnId, StoreAccess};
use crate::catalog::sinks::SinkCatalog;
use crate::context::LintContext;
use crate::declare_lint;
use crate::model::ir::{Block, Expr, ExprKind};
use crate::model::{AttrArg, FnDef, Package, SelfKind, Span};
use std::cell::OnceCell;

declare_lint! {
    /// ### What it does
    /// Finds one function that uses the same key for two different effects of one message:
    ///
    /// - the same expression given as the idempotency token of two requests (two
    ///   MediaConvert `create_job` calls with one `client_request_token`, a `create_job`
    ///   and a DynamoDB `transact_write_items` sharing it, two Step Functions
    ///   `start_execution` calls with one `name`), directly or through helpers that pass a
    ///   parameter to the token;
    /// - the same key reserved twice: two `SET NX` of one key, two conditional `put_item`s
    ///   of one key into one table, two `INSERT .. ON CONFLICT DO NOTHING` of one key into
    ///   one table (directly or through a helper that builds the key from its parameters),
    ///   two calls of the helpers named in `[lints.key_without_stage] claims`, or two calls
    ///   of `#[idempotent]` functions whose keys come out the same.
    ///
    /// Keys are compared as written, through local variables and conversions: keys that
    /// differ by a literal part (`format!("{id}:thumbnail")` and `format!("{id}:transcode")`)
    /// are different keys. Two uses in different arms of one `if` or `match` (one of them
    /// runs) are not reported, nor two reservations with a delete of the key between them.
    ///
    /// ### Why is this bad?
    /// An idempotency key names one effect. AWS answers a second `create_job` with the
    /// first job's id when the token matches (or fails with a mismatch error), so the
    /// second stage never runs; a second reservation of a taken key says "duplicate" and
    /// the handler skips the second stage, or an `#[idempotent]` store serves the first
    /// stage's result for the second. The key must name the message and the stage (and the
    /// content version when the content can change): `fileId:stage:contentVersion`.
    ///
    /// ### Known problems
    /// Only uses in one function (and helpers one call away) are compared. Keys
    /// built in different ways that happen to be equal at run time are not seen; keys
    /// spelled alike that differ at run time (a variable reassigned in a loop between the
    /// two uses) are reported. Helpers that reserve a key and are not recognized as claims
    /// can be named in `[lints.key_without_stage] claims`.
    ///
    /// ### Example
    /// ```rust
    /// let token = msg.file_id.clone();
    /// mc.create_job().role(&role).settings(hls).client_request_token(&token).send().await?;
    /// mc.create_job().role(&role).settings(thumbs).client_request_token(&token).send().await?;
    /// ```
    ///
    /// ### Use instead
    /// ```rust
    /// let token = |stage: &str| format!("{}:{stage}:{}", msg.file_id, msg.version);
    /// mc.create_job().role(&role).settings(hls).client_request_token(token("hls")).send().await?;
    /// mc.create_job().role(&role).settings(thumbs).client_request_token(token("thumbs")).send().await?;
    /// ```
    pub KEY_WITHOUT_STAGE, "key_without_stage", Allow,
    "one idempotency key is used for two different effects of one message"
}

pub use crate::settings::key_without_stage::Settings;

/// One use of a key for an effect.
#[derive(Debug, Clone)]
struct Use {
    /// The setter, reservation or call.
    span: Span,
    /// The key as spelled at the use.
    key: String,
    key_span: Span,
    /// What the key is used for, for messages: "the `client_request_token` of `create_job`".
    what: String,
    /// Uses compare within one family: tokens with tokens, each store's reservations with
    /// its own, `#[idempotent]` keys with those of the same store.
    family: String,
}

pub fn check(cx: &mut LintContext<'_>) {
    if !cx.is_enabled(&KEY_WITHOUT_STAGE) {
        return;
    }
    let package = cx.package;
    let analysis = cx.analysis();
    let graph = analysis.call_graph(package);
    let summaries = analysis.summaries(package);
    let sinks = &analysis.catalog.sinks;
    let claims = &cx.settings.key_without_stage.claims;
    // A helper's own keys depend on the helper alone: spelled once, however many callers.
    let mut helper_tokens = HelperKeys::default();
    let mut helper_claims = HelperKeys::default();
    let mut findings = Vec::new();
    for id in graph.ids() {
        let (file, f) = id.def(package);
        let Some(body) = f.body.as_ref().filter(|_| !f.in_test && !file.in_test) else {
            continue;
        };
        let locals = LazyLocals::new(body);
        let mut uses = token_uses(sinks, body, &locals);
        uses.extend(helper_token_uses(
            package,
            graph,
            sinks,
            id,
            body,
            &locals,
            &mut helper_tokens,
        ));
        uses.extend(
            summaries
                .flow(id)
                .store_events
                .iter()
                .filter(|ev| ev.via.is_none())
                .filter_map(|ev| reservation(&ev.access, ev.span, body, &locals)),
        );
        uses.extend(helper_reservations(
            package,
            graph,
            summaries,
            id,
            body,
            &locals,
            &mut helper_claims,
        ));
        uses.extend(idempotent_calls(package, graph, id, body, &locals));
        uses.extend(configured_claims(claims, body, &locals));
        // A finding pairs two uses.
        if uses.len() < 2 {
            continue;
        }
        let deletes: Vec<(Span, String)> = summaries
            .flow(id)
            .store_events
            .iter()
            .filter(|ev| ev.access.access == Access::Delete && ev.via.is_none())
            .filter_map(|ev| {
                let key = expr_at(body, ev.access.key_span?)?;
                Some((ev.span, KeyText::of(locals.get(), key)?.text))
            })
            .collect();
        findings.extend(repeated(body, &uses, &deletes));
    }
    for (first, second) in findings {
        report(cx, &first, &second);
    }
}

/// A body's [`Locals`], built at the first key spelled: most fns use no key.
struct LazyLocals<'a> {
    body: &'a Block,
    locals: OnceCell<Locals<'a>>,
}

impl<'a> LazyLocals<'a> {
    fn new(body: &'a Block) -> Self {
        LazyLocals {
            body,
            locals: OnceCell::new(),
        }
    }

    fn get(&self) -> &Locals<'a> {
        self.locals.get_or_init(|| Locals::of_body(self.body))
    }
}

/// Each helper's own `(key text, what, family)`, by helper.
type HelperKeys = FastMap<FnId, Vec<(String, String, String)>>;

/// Pairs of uses of one key for two effects: the later one with the first one.
fn repeated(body: &Block, uses: &[Use], deletes: &[(Span, String)]) -> Vec<(Use, Use)> {
    let mut sorted: Vec<&Use> = uses.iter().collect();
    sorted.sort_by_key(|u| (u.span.lo, u.span.hi));
    let mut out: Vec<(Use, Use)> = Vec::new();
    for (i, later) in sorted.iter().enumerate() {
        let first = sorted[..i].iter().find(|earlier| {
            earlier.family == later.family
                && earlier.key == later.key
                && earlier.key_span != later.key_span
                && !is_fresh(&later.key)
                && !earlier.span.contains(later.span)
                && !later.span.contains(earlier.span)
                && !key_text::exclusive(body, earlier.span, later.span)
                && !deletes.iter().any(|(at, key)| {
                    *key == later.key && at.lo >= earlier.span.hi && at.hi <= later.span.lo
                })
        });
        if let Some(first) = first {
            if !out.iter().any(|(_, l)| l.span == later.span) {
                out.push(((*first).clone(), (*later).clone()));
            }
        }
    }
    out
}

/// A key made anew at every use (`nondeterministic_key` reports those): spelled alike, it
/// differs at run time.
fn is_fresh(key: &str) -> bool {
    [
        "new_v4",
        "now_v7",
        "now(",
        "now_utc(",
        "random",
        "Ulid::new",
        "nanoid",
        "rand::",
    ]
    .iter()
    .any(|w| key.contains(w))
}

/// `.client_request_token(t)` and the other token setters, with the operation they set.
fn token_uses(sinks: &SinkCatalog, body: &Block, locals: &LazyLocals<'_>) -> Vec<Use> {
    let mut out = Vec::new();
    body.walk(&mut |e| {
        let ExprKind::MethodCall {
            receiver,
            method,
            method_span,
            args,
        } = &e.kind
        else {
            return;
        };
        // Step Functions' `name` is the token of `start_execution` only.
        let token = sinks.token_setter(method).or_else(|| {
            // The chain is spelled out for a `name` setter only: every method call comes here.
            (matches!(method.as_str(), "name" | "set_name")
                && sinks.is_step_functions_name(method, &e.method_chain()))
            .then_some("name")
        });
        let (Some(token), [arg]) = (token, args.as_slice()) else {
            return;
        };
        let locals = locals.get();
        let Some(key) = KeyText::of(locals, arg).filter(|k| k.has_value) else {
            return;
        };
        let op = operation(receiver, locals).unwrap_or_else(|| "a request".to_owned());
        let span = Span {
            hi: e.span.hi,
            ..*method_span
        };
        out.push(Use {
            span,
            key: key.text,
            key_span: arg.span,
            what: format!("the `{token}` of {op}"),
            family: "token".to_owned(),
        });
    });
    out
}

/// The client method that starts the request a setter is applied to: `create_job`.
fn operation(receiver: &Expr, locals: &Locals<'_>) -> Option<String> {
    let chains = locals.chains(receiver)?;
    let first = chains.first()?.methods().next()?;
    Some(format!("`{}`", first.method))
}

/// Calls of crate helpers that set a token from one of their parameters as it is: the
/// caller's argument is the token.
fn helper_token_uses(
    package: &Package,
    graph: &CallGraph,
    sinks: &SinkCatalog,
    id: FnId,
    body: &Block,
    locals: &LazyLocals<'_>,
    memo: &mut HelperKeys,
) -> Vec<Use> {
    uses_through_helpers(package, graph, id, body, locals, memo, |_, callee_body| {
        token_uses(sinks, callee_body, &LazyLocals::new(callee_body))
            .into_iter()
            .map(|token| (token.key, token.what, "token".to_owned()))
            .collect()
    })
}

/// The keys a fn's direct calls of crate helpers use, one call deep: `inner` lists a
/// helper's own `(key text, what, family)` (once per helper, kept in `memo`), each spelled
/// with the caller's arguments ([`instantiate`]) and reported at the call.
fn uses_through_helpers(
    package: &Package,
    graph: &CallGraph,
    id: FnId,
    body: &Block,
    locals: &LazyLocals<'_>,
    memo: &mut HelperKeys,
    inner: impl Fn(&Call, &Block) -> Vec<(String, String, String)>,
) -> Vec<Use> {
    let mut out = Vec::new();
    for call in graph
        .calls(id)
        .iter()
        .filter(|c| c.kind == CallKind::Direct)
    {
        let callee = call.callee.def(package).1;
        let Some(callee_body) = &callee.body else {
            continue;
        };
        let keys = memo
            .entry(call.callee)
            .or_insert_with(|| inner(call, callee_body));
        for (text, what, family) in keys.iter() {
            let Some((key, key_span)) = instantiate(body, locals, call.span, callee, text) else {
                continue;
            };
            out.push(Use {
                span: call.span,
                key,
                key_span,
                what: format!("{what} in `{}`", callee.display_name()),
                family: family.clone(),
            });
        }
    }
    out
}

/// A key spelled `text` in `callee` as the call at `span` in `body` makes it: each of the
/// callee's parameters replaced by the caller's argument, with the span of the first
/// argument that takes part. `None` when the key takes no parameter (the callee decides it
/// alone, not the caller) or an argument cannot be spelled.
fn instantiate(
    body: &Block,
    locals: &LazyLocals<'_>,
    span: Span,
    callee: &FnDef,
    text: &str,
) -> Option<(String, Span)> {
    let mut out = text.to_owned();
    let mut first_arg: Option<Span> = None;
    for (i, p) in callee.params.iter().enumerate() {
        let Some(name) = p.pat.simple_name() else {
            continue;
        };
        if !has_word(&out, name) {
            continue;
        }
        let arg = call_arg(body, span, callee, i)?;
        let passed = KeyText::of(locals.get(), arg).filter(|k| k.has_value)?;
        out = replace_word(&out, name, &passed.text);
        first_arg.get_or_insert(arg.span);
    }
    Some((out, first_arg?))
}

fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Each whole-word occurrence of `word` in `text`, outside string literals.
fn word_positions(text: &str, word: &str) -> Vec<usize> {
    let mut out = Vec::new();
    let mut in_str = false;
    let mut prev: Option<char> = None;
    for (i, c) in text.char_indices() {
        if c == '"' && prev != Some('\\') {
            in_str = !in_str;
        }
        let boundary_before = prev.is_none_or(|p| !is_ident_char(p) && p != '.');
        if !in_str && boundary_before && text[i..].starts_with(word) {
            let after = text[i + word.len()..].chars().next();
            if after.is_none_or(|a| !is_ident_char(a)) {
                out.push(i);
            }
        }
        prev = Some(c);
    }
    out
}

fn has_word(text: &str, word: &str) -> bool {
    !word_positions(text, word).is_empty()
}

fn replace_word(text: &str, word: &str, with: &str) -> String {
    let mut out = String::new();
    let mut last = 0;
    for at in word_positions(text, word) {
        out.push_str(&text[last..at]);
        out.push_str(with);
        last = at + word.len();
    }
    out.push_str(&text[last..]);
    out
}

/// The argument a call at `span` in `body` passes for `callee`'s parameter `param`.
fn call_arg<'a>(body: &'a Block, span: Span, callee: &FnDef, param: usize) -> Option<&'a Expr> {
    let mut found = None;
    body.walk(&mut |e| {
        if e.span != span || found.is_some() {
            return;
        }
        found = match &e.kind {
            ExprKind::MethodCall { args, .. } => args.get(param),
            // `Type::method(&x, ..)` passes the receiver first.
            ExprKind::Call { args, .. } => {
                let offset = usize::from(callee.self_kind != SelfKind::None);
                args.get(param + offset)
            }
            _ => None,
        };
    });
    found
}

/// A reservation of a key: `SET NX`, a conditional `put_item`, an `INSERT .. ON CONFLICT DO
/// NOTHING`, with its key spelled in `body`. Conditional updates are state transitions of
/// one item, not reservations, and `SADD`/`HSETNX` are keyed by their set, not by the member
/// they reserve.
fn reservation(a: &StoreAccess, span: Span, body: &Block, locals: &LazyLocals<'_>) -> Option<Use> {
    if a.access != Access::Claim {
        return None;
    }
    let kind = match a.store {
        Store::Redis if matches!(a.command.as_str(), "SET NX" | "set_nx" | "setnx" | "SETNX") => {
            "Redis"
        }
        Store::DynamoDb if a.command == "put_item" => "DynamoDB",
        Store::Sql if a.command.starts_with("INSERT") => "SQL",
        _ => return None,
    };
    let key_span = a.key_span?;
    let key = expr_at(body, key_span).and_then(|k| KeyText::of(locals.get(), k))?;
    key.has_value.then(|| Use {
        span,
        key: key.text,
        key_span,
        what: format!("the key of the `{}` reservation", a.command),
        family: format!("{kind}:{}", a.table.as_deref().unwrap_or("")),
    })
}

/// The expression of `body` at exactly `span`.
fn expr_at(body: &Block, span: Span) -> Option<&Expr> {
    let mut found = None;
    body.walk(&mut |e| {
        if e.span == span && found.is_none() {
            found = Some(e);
        }
    });
    found
}

/// Calls of crate helpers that reserve a key built from their parameters: the key as the
/// caller's arguments make it (one call deep).
fn helper_reservations(
    package: &Package,
    graph: &CallGraph,
    summaries: &crate::analysis::Summaries,
    id: FnId,
    body: &Block,
    locals: &LazyLocals<'_>,
    memo: &mut HelperKeys,
) -> Vec<Use> {
    uses_through_helpers(
        package,
        graph,
        id,
        body,
        locals,
        memo,
        |call, callee_body| {
            let callee_locals = LazyLocals::new(callee_body);
            summaries
                .flow(call.callee)
                .store_events
                .iter()
                .filter(|ev| ev.via.is_none())
                .filter_map(|ev| reservation(&ev.access, ev.span, callee_body, &callee_locals))
                .map(|r| (r.key, r.what, r.family))
                .collect()
        },
    )
}

/// Calls of `#[idempotent(key = ..)]` crate fns, with their keys as the caller passes them.
fn idempotent_calls(
    package: &Package,
    graph: &CallGraph,
    id: FnId,
    body: &Block,
    locals: &LazyLocals<'_>,
) -> Vec<Use> {
    let mut out = Vec::new();
    for call in graph
        .calls(id)
        .iter()
        .filter(|c| c.kind == CallKind::Direct)
    {
        let callee = call.callee.def(package).1;
        let Some(attr) = callee.attrs.iter().find(|a| a.is("idempotent")) else {
            continue;
        };
        let arg = |name: &str| {
            attr.args.iter().find_map(|a| match a {
                AttrArg::NameValue { name: n, value } if n == name => Some(value),
                _ => None,
            })
        };
        let Some(key) = arg("key").and_then(|k| KeyText::of(&Locals::default(), k)) else {
            continue;
        };
        let store = arg("store")
            .and_then(|s| KeyText::of(&Locals::default(), s))
            .map_or_else(String::new, |s| s.text);
        let Some((key, key_span)) = instantiate(body, locals, call.span, callee, &key.text) else {
            continue;
        };
        out.push(Use {
            span: call.span,
            key,
            key_span,
            what: format!("the `#[idempotent]` key of `{}`", callee.display_name()),
            family: format!("idempotent:{store}"),
        });
    }
    out
}

/// Calls of the configured reservation helpers, keyed by their first argument.
fn configured_claims(names: &[String], body: &Block, locals: &LazyLocals<'_>) -> Vec<Use> {
    let mut out = Vec::new();
    if names.is_empty() {
        return out;
    }
    body.walk(&mut |e| {
        let (name, args) = match &e.kind {
            ExprKind::Call { func, args } => match func.as_path() {
                Some(p) => (p.last(), args),
                None => return,
            },
            ExprKind::MethodCall { method, args, .. } => (method.as_str(), args),
            _ => return,
        };
        if !names.iter().any(|n| n == name) {
            return;
        }
        let Some(arg) = args
            .iter()
            .find(|a| crate::analysis::store_ops::is_key_like(a))
            .or(args.first())
        else {
            return;
        };
        if let Some(key) = KeyText::of(locals.get(), arg).filter(|k| k.has_value) {
            out.push(Use {
                span: e.span,
                key: key.text,
                key_span: arg.span,
                what: format!("the key reserved by `{name}`"),
                family: format!("configured:{name}"),
            });
        }
    });
    out
}

fn report(cx: &mut LintContext<'_>, first: &Use, second: &Use) {
    let message = format!(
        "key already used for {} is used again for {}: the second effect is deduplicated \
         against the first",
        first.what, second.what
    );
    cx.span_lint(&KEY_WITHOUT_STAGE, second.key_span, message, |d| {
        d.primary_label("this key was already used for another effect of the same message");
        d.span_label(
            first.key_span,
            format!("first used here, for {}", first.what),
        );
        d.help(
            "give each effect its own key: the message's id with the stage (and the content \
             version), such as `format!(\"{}:thumbnail:{}\", file_id, version)`",
        );
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    fn lint(deps: &[&str], src: &str) -> Vec<usize> {
        let package = testing::package("app", deps, &[("crate", src)]);
        crate::check_package(&package, &Default::default(), &|l| l == &KEY_WITHOUT_STAGE)
            .into_iter()
            .map(|d| testing::line_of(src, d.span.lo))
            .collect()
    }

    #[test]
    fn one_token_for_two_jobs_is_reported_unless_the_stage_differs() {
        let src = "async fn handle(mc: &aws_sdk_mediaconvert::Client, msg: Msg) {\n    \
                   let token = msg.file_id.clone();\n    \
                   mc.create_job().role(r).client_request_token(&token).send().await;\n    \
                   mc.create_job().role(r).client_request_token(token).send().await;\n}\n";
        assert_eq!(lint(&["aws_sdk_mediaconvert"], src), vec![4]);
        let staged = src
            .replace("(&token)", "(format!(\"{token}:hls\"))")
            .replace("(token)", "(format!(\"{token}:thumbs\"))");
        assert!(lint(&["aws_sdk_mediaconvert"], &staged).is_empty());
    }

    #[test]
    fn uses_in_different_arms_are_one_effect() {
        let src = "async fn handle(mc: &aws_sdk_mediaconvert::Client, msg: Msg) {\n    \
                   if msg.hd {\n        mc.create_job().client_request_token(&msg.id).send().await;\n    \
                   } else {\n        mc.create_job().client_request_token(&msg.id).send().await;\n    }\n}\n";
        assert!(lint(&["aws_sdk_mediaconvert"], src).is_empty());
    }
}
