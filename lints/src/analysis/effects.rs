//! Side effects a duplicate delivery repeats: calls that change something outside the
//! process. An AWS SDK operation that is not a read (`send_email`, `publish`, `create_job`),
//! an HTTP request that is not a `GET`, an e-mail sent through `lettre`, a payment API call,
//! a store write that changes the state again when repeated (an increment, a plain insert),
//! or a fn named in configuration; and, over the call graph, every fn that reaches one.
//!
//! Operations whose repeat changes nothing more are not effects ([`repeat_effect`]): reads
//! (`get_item`, `list_*`, `describe_*`, HTTP `GET`), deletes (`delete_object`, HTTP `DELETE`,
//! store deletes) and acknowledgements (SQS `delete_message`).

use super::callgraph::CallGraph;
use super::chain::Locals;
use super::entry::names_fn;
use super::flow::FnId;
use super::resolve::{DefPath, Resolver};
use super::store_ops::{receiver_name, Access, Store};
use super::summary::Summaries;
use super::types::{TypeEnv, Types};
use super::Analysis;
use crate::catalog::effects::{is_outside_client, HTTP_CLIENTS, PAYMENT_CRATES, PAYMENT_VERBS};
use crate::model::ir::{Expr, ExprKind};
use crate::model::{FileModel, FnDef, Package, Span};
use std::sync::Arc;

/// One side effect performed directly by a fn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Effect {
    pub span: Span,
    /// How a label names it: "`send_email` through the AWS SDK", "an HTTP `POST`".
    pub what: String,
}

/// How a fn comes to have side effects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// It performs this one itself (the first in source order).
    Direct(Effect),
    /// Through the callee of its `call`-th edge.
    Call(u32),
}

/// Which fns of the package have side effects, directly or through callees.
#[derive(Debug)]
pub struct Effects {
    /// Indexed by [`CallGraph::index`].
    reasons: Vec<Option<Reason>>,
}

pub use crate::catalog::RepeatEffect;

/// Operation-name prefixes whose repeat changes nothing more: reads, deletes and
/// acknowledgements (SQS `delete_message` acknowledges a message).
const REPEAT_HARMLESS: &[&str] = &[
    "get_",
    "list_",
    "describe_",
    "head_",
    "query",
    "scan",
    "batch_get",
    "transact_get",
    "search",
    "lookup_",
    "select_",
    "check_",
    "validate_",
    "estimate_",
    "preview_",
    "test_",
    "verify_",
    "delete",
    "batch_delete",
    "remove_",
    "ack",
];

/// What a repeat of operation `op` (an AWS SDK operation, an HTTP verb, a payment call) does.
/// The one place every effect count asks, so a read or a delete is never a duplicated effect
/// in one lint and an effect in another. An AWS operation of the token catalog is judged by
/// the catalog (derived from the SDK's models) when every crate that has it agrees; any other
/// by its name.
pub fn repeat_effect(op: &str) -> RepeatEffect {
    if let Some(known) = crate::catalog::tokens::repeat_effect_of_method(op) {
        return known;
    }
    let op = op.to_ascii_lowercase();
    if REPEAT_HARMLESS.iter().any(|p| op.starts_with(p)) {
        RepeatEffect::NoEffect
    } else {
        RepeatEffect::Duplicates
    }
}

/// Methods that hand out the SDK client rather than start an operation.
const AWS_CLIENT_GETTERS: &[&str] = &["client", "clone", "as_ref", "inner", "get_client", "sdk"];

/// DynamoDB item writes: [`super::store_ops`] judges single items by whether they repeat
/// harmlessly; `batch_write_item` only puts whole items or deletes, which repeat harmlessly.
const DYNAMODB_ITEM_WRITES: &[&str] =
    &["put_item", "update_item", "delete_item", "batch_write_item"];

impl Effects {
    /// The effects of every fn of the package. `configured` names more effect fns
    /// (`[lints.unguarded_entry_point] effects`), crate fns or external ones by name.
    pub fn compute(
        package: &Package,
        resolver: &Resolver,
        types: &Types,
        graph: &CallGraph,
        summaries: &Summaries,
        configured: &[String],
    ) -> Effects {
        let calls = |file: usize| {
            Arc::new(OwnCalls::of_file(
                package, resolver, types, configured, file,
            ))
        };
        Effects::from_calls(graph, summaries, package.files.len(), &calls)
    }

    /// [`Effects::compute`] with each file's calls of outside services kept in `analysis`'s
    /// file facts: after an edit of fn bodies, only the edited files' bodies are walked for
    /// them again ([`Analysis::file_fact`]; the calls read the file, the resolver, the type
    /// tables, the dependencies and the settings, all of which are the previous version's
    /// whenever file facts are kept).
    pub fn compute_in(
        package: &Package,
        analysis: &Analysis,
        graph: &CallGraph,
        summaries: &Summaries,
        configured: &[String],
    ) -> Effects {
        let calls = |file: usize| {
            analysis.file_fact(file, || {
                OwnCalls::of_file(
                    package,
                    &analysis.resolver,
                    &analysis.types,
                    configured,
                    file,
                )
            })
        };
        Effects::from_calls(graph, summaries, package.files.len(), &calls)
    }

    fn from_calls(
        graph: &CallGraph,
        summaries: &Summaries,
        files: usize,
        calls: &dyn Fn(usize) -> Arc<OwnCalls>,
    ) -> Effects {
        let mut reasons: Vec<Option<Reason>> = vec![None; graph.len()];
        let mut queue = Vec::new();
        let mut files: Vec<Option<Arc<OwnCalls>>> = vec![None; files];
        for id in graph.ids() {
            let file = id.file as usize;
            let own = files[file].get_or_insert_with(|| calls(file));
            let direct = match own.by_fn.get(id.index as usize) {
                Some(OwnCall::Configured(e)) => Some(e.clone()),
                Some(OwnCall::Calls(call)) => earliest(store_effect(summaries, id), call.as_ref()),
                None => store_effect(summaries, id),
            };
            if let Some(e) = direct {
                reasons[graph.index(id)] = Some(Reason::Direct(e));
                queue.push(id);
            }
        }
        // Callers of an effectful fn have that effect too.
        while let Some(callee) = queue.pop() {
            for (caller, call) in graph.callers(callee) {
                let i = graph.index(caller);
                if reasons[i].is_none() {
                    let n = graph
                        .calls(caller)
                        .iter()
                        .position(|c| c == call)
                        .unwrap_or(0);
                    reasons[i] = Some(Reason::Call(n as u32));
                    queue.push(caller);
                }
            }
        }
        Effects { reasons }
    }

    pub fn has_effects(&self, graph: &CallGraph, id: FnId) -> bool {
        self.reasons[graph.index(id)].is_some()
    }

    /// The effect `id` ends up performing, with the chain of calls that leads to it from
    /// `id` (empty when `id` performs it itself).
    pub fn witness(&self, graph: &CallGraph, id: FnId) -> Option<(Vec<FnId>, &Effect)> {
        let mut chain = Vec::new();
        let mut cur = id;
        loop {
            match self.reasons[graph.index(cur)].as_ref()? {
                Reason::Direct(e) => return Some((chain, e)),
                Reason::Call(n) => {
                    cur = graph.calls(cur)[*n as usize].callee;
                    if chain.contains(&cur) || chain.len() > graph.len() {
                        return None;
                    }
                    chain.push(cur);
                }
            }
        }
    }
}

/// What the fns of one file do themselves besides their store writes, by index in
/// [`FileModel::fns`].
pub(crate) struct OwnCalls {
    by_fn: Vec<OwnCall>,
}

enum OwnCall {
    /// A fn named as an effect in the settings.
    Configured(Effect),
    /// The first call of an outside service in the body, in walk order among those that
    /// start earliest (none when the package depends on no client crate).
    Calls(Option<Effect>),
}

impl OwnCalls {
    fn of_file(
        package: &Package,
        resolver: &Resolver,
        types: &Types,
        configured: &[String],
        file: usize,
    ) -> OwnCalls {
        // Without a client crate for outside services (or configured effects) no call can be
        // one: only store writes are looked at.
        let calls_out =
            !configured.is_empty() || package.dependencies.iter().any(|d| is_outside_client(d));
        let model = &package.files[file];
        let by_fn = model
            .fns
            .iter()
            .map(|f| {
                if names_fn(configured, resolver, model, f) {
                    return OwnCall::Configured(Effect {
                        span: f.name_span,
                        what: format!("`{}`, configured as an effect", f.display_name()),
                    });
                }
                let call = if calls_out {
                    first_outside_call(package, resolver, types, configured, model, f)
                } else {
                    None
                };
                OwnCall::Calls(call)
            })
            .collect();
        OwnCalls { by_fn }
    }
}

/// A write of `id` itself that is harmful to repeat.
fn store_effect(summaries: &Summaries, id: FnId) -> Option<Effect> {
    // A write that is harmless to repeat (an upsert, `SET x = value`, a completion mark's
    // status) is no effect a duplicate must not repeat.
    // Redis counters and list or stream pushes change on repeat too (a business write for
    // `mark_outside_transaction`), but they are the bookkeeping of queues and rate limits
    // more often than a user's effect: not effects here.
    let write = summaries.flow(id).store_events.iter().find(|ev| {
        ev.via.is_none()
            && matches!(ev.access.access, Access::Write | Access::Upsert)
            && ev.access.changes_on_repeat()
            && !ev.access.dedupe_table
            && ev.access.store != Store::Redis
    });
    write.map(|ev| Effect {
        span: ev.span,
        what: format!(
            "a {} write (`{}`)",
            ev.access.store.name(),
            ev.access.command
        ),
    })
}

/// The effect a fn performs itself: its harmful write, unless a call of an outside service
/// starts before it (a call starting at the same place loses to the write, as a walk that
/// began with the write kept it).
fn earliest(write: Option<Effect>, call: Option<&Effect>) -> Option<Effect> {
    match (write, call) {
        (Some(w), Some(c)) if c.span.lo < w.span.lo => Some(c.clone()),
        (Some(w), _) => Some(w),
        (None, c) => c.cloned(),
    }
}

/// The first call of an outside service in `f`'s body: in walk order, the first of those
/// that start earliest.
fn first_outside_call(
    package: &Package,
    resolver: &Resolver,
    types: &Types,
    configured: &[String],
    file: &FileModel,
    f: &FnDef,
) -> Option<Effect> {
    let body = f.body.as_ref()?;
    let mut found: Option<Effect> = None;
    let mut cx = CallCx {
        package,
        resolver,
        types,
        file,
        f,
        configured,
        env: None,
        locals: None,
    };
    body.walk(&mut |e| {
        if found.as_ref().is_some_and(|x| x.span.lo <= e.span.lo) {
            return;
        }
        if let Some(what) = cx.external_call(e) {
            found = Some(Effect { span: e.span, what });
        }
    });
    found
}

/// What classifying a call in one fn needs; the type environment is built on first need.
struct CallCx<'a> {
    package: &'a Package,
    resolver: &'a Resolver,
    types: &'a Types,
    file: &'a FileModel,
    f: &'a FnDef,
    configured: &'a [String],
    env: Option<TypeEnv<'a>>,
    /// The fn's `let` bindings, built on first need: a request builder kept in a local.
    locals: Option<Locals<'a>>,
}

impl<'a> CallCx<'a> {
    fn type_of(&mut self, e: &Expr) -> Option<DefPath> {
        let (package, resolver, types, file, f) =
            (self.package, self.resolver, self.types, self.file, self.f);
        self.env
            .get_or_insert_with(|| TypeEnv::for_fn(package, resolver, types, file, f))
            .type_of(e)
    }

    /// `request` of `request.send()` when it is a local bound once (`let request =
    /// ses.send_email()..;`): its initializer, a few deep; else `e`.
    fn builder(&mut self, e: &'a Expr) -> &'a Expr {
        let f = self.f;
        let mut cur = e;
        for _ in 0..4 {
            let Some(name) = cur.peel().as_path().and_then(|p| p.as_ident()) else {
                break;
            };
            let Some(body) = f.body.as_ref() else {
                break;
            };
            let locals = self.locals.get_or_insert_with(|| Locals::of_body(body));
            match locals.defs(name) {
                [one] => cur = one,
                _ => break,
            }
        }
        cur
    }

    /// Whether `e` is a call that changes something outside: what it is, for a label.
    fn external_call(&mut self, e: &'a Expr) -> Option<String> {
        match &e.kind {
            ExprKind::MethodCall {
                receiver,
                method,
                args,
                ..
            } => {
                if self.configured.iter().any(|n| n == method) {
                    return Some(format!("`{method}`, configured as an effect"));
                }
                if method == "send" && args.is_empty() {
                    let http = HTTP_CLIENTS.iter().any(|c| self.package.depends_on(c));
                    let receiver = self.builder(receiver);
                    return aws_operation(self.package, receiver)
                        .or_else(|| http.then(|| http_request(receiver)).flatten());
                }
                if method == "send" && args.len() == 1 && self.package.depends_on("lettre") {
                    let typed = self
                        .type_of(receiver)
                        .is_some_and(|t| t.crate_name() == Some("lettre"));
                    let named = receiver_name(receiver).is_some_and(|n| {
                        let n = n.to_ascii_lowercase();
                        n.contains("mail") || n.contains("smtp") || n.contains("transport")
                    });
                    if typed || named {
                        return Some("an e-mail sent through `lettre`".to_owned());
                    }
                }
                None
            }
            ExprKind::Call { func, .. } => {
                let path = func.as_path()?;
                let def = self.resolver.resolve(
                    self.file.target,
                    &self.f.module,
                    path,
                    self.f.self_ty.as_ref(),
                );
                let krate = def.crate_name()?;
                if self
                    .configured
                    .iter()
                    .any(|n| n == def.last() || *n == def.display())
                {
                    return Some(format!("`{}`, configured as an effect", def.display()));
                }
                let payment = PAYMENT_CRATES.contains(&krate)
                    && PAYMENT_VERBS.iter().any(|v| def.last().starts_with(v))
                    && repeat_effect(def.last()) == RepeatEffect::Duplicates;
                payment.then(|| format!("the payment API call `{}`", path.segments.join("::")))
            }
            _ => None,
        }
    }
}

/// `client.send_email().destination(d).send()`: the operation method right on the client
/// takes no arguments, in a package that depends on an AWS SDK crate.
fn aws_operation(package: &Package, receiver: &Expr) -> Option<String> {
    let aws = package
        .dependencies
        .iter()
        .any(|d| d.starts_with("aws_sdk_"));
    if !aws {
        return None;
    }
    let mut cur = receiver.peel();
    let mut op = None;
    while let ExprKind::MethodCall {
        receiver,
        method,
        args,
        ..
    } = &cur.kind
    {
        // `table.client().get_item()`: the getter that yields the client is no operation.
        if !AWS_CLIENT_GETTERS.contains(&method.as_str()) {
            op = Some((method.as_str(), args.is_empty()));
        }
        cur = receiver.peel();
    }
    let (op, no_args) = op?;
    let client_like = matches!(cur.kind, ExprKind::Path(_) | ExprKind::Field { .. });
    let harmless = repeat_effect(op) != RepeatEffect::Duplicates;
    // DynamoDB item writes are store operations, judged by whether they repeat harmlessly.
    let item_write = DYNAMODB_ITEM_WRITES.contains(&op);
    (no_args && client_like && !harmless && !item_write)
        .then(|| format!("`{op}` through the AWS SDK"))
}

/// `client.post(url)...send()`: an HTTP request that is not a `GET`/`HEAD`.
fn http_request(receiver: &Expr) -> Option<String> {
    let mut cur = receiver.peel();
    while let ExprKind::MethodCall {
        receiver,
        method,
        args,
        ..
    } = &cur.kind
    {
        let verb = match method.as_str() {
            "post" | "put" | "patch" if args.len() == 1 => Some(method.to_uppercase()),
            "request" if args.len() == 2 => args[0]
                .as_path()
                .map(|p| p.last().to_uppercase())
                .filter(|m| !matches!(m.as_str(), "GET" | "HEAD" | "OPTIONS" | "DELETE")),
            _ => None,
        };
        if let Some(verb) = verb {
            return Some(format!("an HTTP `{verb}`"));
        }
        cur = receiver.peel();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::Analysis;
    use crate::testing;

    /// Every fn of `src`: its name, the effect it performs itself, whether it has effects.
    fn effects(deps: &[&str], src: &str) -> Vec<(String, Option<String>, bool)> {
        let package = testing::package("app", deps, &[("crate", src)]);
        let a = Analysis::new(&package);
        let graph = a.call_graph(&package);
        let summaries = a.summaries(&package);
        let effects = Effects::compute(&package, &a.resolver, &a.types, graph, summaries, &[]);
        graph
            .ids()
            .map(|id| {
                let own = effects
                    .witness(graph, id)
                    .filter(|(chain, _)| chain.is_empty())
                    .map(|(_, e)| e.what.clone());
                let name = id.def(&package).1.name.clone();
                (name, own, effects.has_effects(graph, id))
            })
            .collect()
    }

    #[test]
    fn aws_operations_that_change_something_are_effects() {
        let got = effects(
            &["aws-sdk-sesv2", "aws-sdk-dynamodb", "aws-sdk-sqs"],
            "async fn send(ses: &Client) { ses.send_email().content(c).send().await; }
             async fn read(t: &Table) { t.client().get_item().table_name(n).send().await; }
             async fn tget(c: &Client) { c.transact_get_items().send().await; }
             async fn batch(c: &Client) { c.batch_write_item().send().await; }
             async fn tx(c: &Client) { c.transact_write_items().send().await; }
             async fn local_builder(c: &Client) { let q = c.put_item(); q.send().await; }
             async fn ack(sqs: &Client) { sqs.delete_message().queue_url(q).receipt_handle(r).send().await; }
             async fn drop_object(s3: &Client) { s3.delete_object().bucket(b).key(k).send().await; }",
        );
        let own: Vec<(&str, &str)> = got
            .iter()
            .filter_map(|(n, what, _)| Some((n.as_str(), what.as_deref()?)))
            .collect();
        assert_eq!(
            own,
            vec![
                ("send", "`send_email` through the AWS SDK"),
                ("tx", "`transact_write_items` through the AWS SDK")
            ]
        );
    }

    #[test]
    fn http_writes_mail_payments_and_callers_have_effects() {
        let got = effects(
            &["reqwest", "lettre", "stripe"],
            "async fn post(http: &reqwest::Client) { http.post(url).json(&b).send().await; }
             async fn get(http: &reqwest::Client) { http.get(url).send().await; }
             async fn delete(http: &reqwest::Client) { http.delete(url).send().await; }
             async fn mail(mailer: &SmtpTransport) { mailer.send(&email); }
             async fn pay(c: &stripe::Client) { stripe::Refund::create(c, p).await; }
             async fn caller(http: &reqwest::Client) { post(http).await; }",
        );
        let with_effects: Vec<&str> = got
            .iter()
            .filter(|(_, _, has)| *has)
            .map(|(n, _, _)| n.as_str())
            .collect();
        assert_eq!(with_effects, vec!["post", "mail", "pay", "caller"]);
    }
}
