use crate::analysis::effects::Effects;
use crate::analysis::entry::{self, EntryPoint};
use crate::analysis::guards::{GuardFinder, GuardedPaths};
use crate::analysis::message_key::{self, MessageKey};
use crate::analysis::{CallGraph, FastMap, FnId};
use crate::catalog::entries::Delivery;
use crate::context::LintContext;
use crate::declare_lint;
use crate::diagnostic::Applicability;
use crate::model::{FnDef, Package, Span};
use std::cell::LazyCell;

declare_lint! {
    /// ### What it does
    /// Finds a side effect (a send, a charge, a refund, a write, an external API call) that one
    /// entry point reaches only after an idempotency guard and another entry point reaches with
    /// no guard at all: a retry worker, an admin "resend" handler or a second route that calls
    /// the effect directly.
    ///
    /// Entry points are `main`, route handlers, Lambda and tower `service_fn` handlers, spawned
    /// tasks (`tokio::spawn`, `spawn_blocking`, a `JoinSet`'s `spawn`, also from a loop over
    /// incoming messages), job handlers, the resolvers of a GraphQL schema (each method of
    /// an async-graphql `#[Object]` or juniper `#[graphql_object]` impl, taken as a route),
    /// the public functions of a library, `#[idempotent]` handlers and the functions named in
    /// `[lints.unguarded_entry_point] entry_points`.
    /// A route table that registers handlers does not call them: each route is its own entry.
    /// A path from an HTTP route, a user's command with its own intent, is compared only with
    /// the guards that routes and entries of unknown callers (`main`, public functions,
    /// spawned tasks) pass, and what a route passes counts only when it is keyed by the
    /// identity of a message or request (an idempotency key, a message or event id, a
    /// dedupe-named table or key, a key-value claim such as `SET NX`, `#[idempotent]`, the
    /// configured `guards`): a user who asks twice for a password reset gets two e-mails, as
    /// asked. A guard that only message consumers, job handlers, framework callbacks, Lambda
    /// handlers and webhooks pass is against their redeliveries; a claim on a resource's
    /// state passed on a route (`UPDATE user SET email_verified_at = now() WHERE ..
    /// email_verified_at IS NULL`) makes that one transition happen once; a lookup that fails
    /// on a missing row (`UPDATE .. WHERE id = $1 AND deleted_at IS NULL RETURNING`, a 404) is
    /// no claim at all: none of them says anything of a login or a password reset. Paths from
    /// the other entries are compared with every guard of the other entries, and with the
    /// keyed guards of routes. A task spawned by an entry receives what that entry receives.
    /// Which entries receive redeliveries is the catalog's table (`catalog::entries`).
    ///
    /// Guards are calls of `#[idempotent]` functions, atomic reservations whose conflict stops
    /// the work (`SET NX`, a conditional `put_item`, `INSERT .. ON CONFLICT DO NOTHING`: its
    /// answer decided on, or the error it fails with on a taken key passed on with `?`; an
    /// insert whose result is only handed on, or whose `?` only passes on a database error,
    /// stops no duplicate), helpers that make one and whose answer the caller looks at the same
    /// way, the functions named in `guards`, and checks that return or skip the item
    /// when the key is already recorded (`if store.is_processed(id) { return }`, a lookup of a
    /// dedupe-named table or by a dedupe-named column such as `uniq_hash`; SQL in the forms
    /// `check_then_act` lists, `query_file!`, `format!` skeletons and sea-query included). Such a check
    /// is not atomic (`check_then_act` reports that), but the path that checks is still
    /// guarded against what a backfill, replay or resend without any check repeats. A guard
    /// counts when every path to the call passes it.
    ///
    /// A guard covers the operation it guards: the function called under it (for
    /// `#[idempotent]`, the function itself and what it calls), and further down only a
    /// function that takes a message's identity (a parameter such as `message_id`,
    /// `event_id` or `idempotency_key`). A helper that the operation shares with other paths
    /// and that takes no such identity, such as the mail transport a reminder goes through
    /// after `claim_step(user, step)` and a password reset also calls, is not covered: a path
    /// that calls it does work of its own and skips nothing.
    ///
    /// Side effects are calls that change something outside and would change it again on a
    /// repeat: AWS SDK operations, HTTP `POST`/`PUT`/`PATCH`, e-mail, payment API calls, store
    /// writes that add a row or increment (not Redis counters and list or stream pushes, the
    /// bookkeeping of queues and rate limits). Operations whose repeat does nothing more are not
    /// effects: reads (`get_*`, `describe_*`, `list_*`, `query`, `scan`, HTTP `GET`), deletes
    /// (`delete_object`, HTTP `DELETE`, store deletes), acknowledgements (SQS
    /// `delete_message`), upserts and overwrites.
    ///
    /// Calls through a trait of the crate reach every production implementation (a call does
    /// what any of them does, up to four); implementations in `#[cfg(test)]` code, test
    /// targets and test doubles (`Mock*`, `Fake*`, `Stub*`) are left out, and a trait method
    /// that calls `self.m(..)` on an inherent method of the same name reaches that method, as
    /// Rust resolves it.
    ///
    /// ### Why is this bad?
    /// A guard that only the happy path passes is no guard. Queues, Lambda retries and
    /// operators re-deliver the same request through the other path, and the e-mail goes out
    /// twice, the card is charged twice.
    ///
    /// ### Known problems
    /// Calls are followed only where the callee is known without type checking (paths, `self`,
    /// receivers of known type, a crate trait's implementations, functions passed as values);
    /// a path through an unknown call (a trait with more than four implementations, a
    /// closure stored in a field, a trait from another crate) is not seen; a GraphQL
    /// resolver's `ctx.data::<T>()` is of unknown type (the turbofish is not read), so calls
    /// on it are followed only when the binding's type is written (`let s: &T =
    /// ctx.data()?`). A path guarded by a
    /// check the analysis does not recognize is reported: name the check in `guards`. A check
    /// counts only when it stops on a recorded key (`if seen { return }`); a check that wraps
    /// the work (`if !seen { work() }`) is not taken as a guard, nor a read that is not
    /// recognizably a processed-key lookup (an existence check such as `exists` or a helper
    /// named `is_processed`/`already_*`/`*seen*`, or a read of a dedupe-named table or key):
    /// a lookup that returns when a user or configuration row is missing is validation, not
    /// a guard. Whether a repeat does anything is judged from the operation's name.
    ///
    /// ### Example
    /// ```rust
    /// pub async fn send_message(req: SendRequest) -> Result<()> {
    ///     assert_not_duplicate(&req.message_id).await?;
    ///     do_send(&req).await
    /// }
    ///
    /// pub async fn retry_failed_message(job: RetryJob) -> Result<()> {
    ///     let req = load_failed_request(&job.message_id).await?;
    ///     do_send(&req).await // skips the guard
    /// }
    /// ```
    ///
    /// ### Use instead
    /// ```rust
    /// pub async fn retry_failed_message(job: RetryJob) -> Result<()> {
    ///     let req = load_failed_request(&job.message_id).await?;
    ///     // A retry is the same request: the same key.
    ///     assert_not_duplicate(&req.message_id).await?;
    ///     do_send(&req).await
    /// }
    ///
    /// pub async fn admin_resend(cmd: ResendCommand) -> Result<()> {
    ///     // A manual resend is a new command: its own key.
    ///     assert_not_duplicate(&cmd.command_id).await?;
    ///     do_send(&load_request(&cmd.message_id).await?).await
    /// }
    /// ```
    pub UNGUARDED_ENTRY_POINT, "unguarded_entry_point", Warn,
    "a side effect is guarded on one entry path and reached without a guard on another"
}

/// A call that leaves the unguarded part of the crate for a side effect that another path
/// reaches only under a guard.
struct Finding {
    call: Span,
    callee: String,
    entry: String,
    entry_kind: &'static str,
    /// Where the unguarded path's entry point is registered, and what happens there.
    entry_at: (Span, &'static str),
    unguarded_chain: Vec<String>,
    guarded_chain: Vec<String>,
    guarded_entry: String,
    /// What the guard is called (`claim_activity`, `SET NX`).
    guard_name: String,
    /// The guard on the guarded path, and its label.
    guard: (Span, String),
    effect: (Span, String),
    /// Where `#[idempotent(..)]` goes on the unguarded entry point (after its attributes
    /// and doc comments), and the key its parameters offer.
    attr_at: Span,
    key: Option<MessageKey>,
}

pub fn check(cx: &mut LintContext<'_>) {
    let has_guard_crate = cx.package.depends_on("idem_guard");
    for f in find(cx) {
        cx.span_lint(
            &UNGUARDED_ENTRY_POINT,
            f.call,
            format!(
                "`{}` is reached here without the idempotency guard `{}`, which the path from `{}` passes",
                f.callee, f.guard_name, f.guarded_entry
            ),
            |d| {
                d.primary_label(format!(
                    "{} `{}` gets here with no guard on the way",
                    f.entry_kind, f.entry
                ));
                d.span_label(f.entry_at.0, f.entry_at.1);
                d.span_label(f.guard.0, f.guard.1);
                d.span_label(f.effect.0, format!("the side effect a duplicate repeats: {}", f.effect.1));
                d.note(format!("unguarded path: {}", f.unguarded_chain.join(" → ")));
                d.note(format!("guarded path: {}", f.guarded_chain.join(" → ")));
                d.help(format!(
                    "pass a guard before this call too: a retry reuses the original request's key; a manual resend is a new command with its own id, guarded by that id; or make `{}` `#[idempotent]`",
                    f.callee
                ));
                // The store is the application's choice: always a placeholder.
                let key = f
                    .key
                    .as_ref()
                    .map_or("/* the message's id */".to_string(), MessageKey::expr);
                // The full path needs no `use`, and compiles once the crate is a dependency.
                let needs = if has_guard_crate {
                    ""
                } else {
                    " (add the `idem-guard` crate to `[dependencies]`)"
                };
                d.suggest(
                    format!("guard the entry point `{}` itself{needs}", f.entry),
                    f.attr_at,
                    format!("#[idem_guard::idempotent(key = {key}, store = /* store */)]"),
                    Applicability::HasPlaceholders,
                );
            },
        );
    }
}

fn find(cx: &LintContext<'_>) -> Vec<Finding> {
    let package = cx.package;
    let settings = &cx.settings.unguarded_entry_point;
    let analysis = cx.analysis();
    let graph = analysis.call_graph(package);
    let summaries = analysis.summaries(package);
    let entries = analysis.entry_points(package, &settings.entry_points);
    if entries.is_empty() {
        return Vec::new();
    }
    let finder = GuardFinder::new(
        package,
        &analysis.resolver,
        graph,
        summaries,
        &settings.guards,
    );
    // Asked only for a call that skips a guard some other path passes: most packages have
    // none, and then no fn's effects are needed.
    let effect_names = cx.settings.effect_names();
    let effects =
        LazyCell::new(|| Effects::compute_in(package, analysis, graph, summaries, &effect_names));
    // One entry per fn: its delivery by id.
    let deliveries: FastMap<FnId, Delivery> = entries
        .iter()
        .map(|e| e.id)
        .zip(entry::deliveries(package, graph, &entries))
        .collect();
    let delivery = |e: &EntryPoint| deliveries.get(&e.id).copied().unwrap_or(Delivery::Unknown);
    let has_commands = deliveries.values().any(|&d| d == Delivery::UserCommand);
    let mut out = Vec::new();
    if !has_commands {
        let paths = GuardedPaths::compute(&finder, entries);
        find_skips(package, graph, &paths, &[&paths], &effects, &mut out);
        return out;
    }
    // A user's command is meant each time it is given: only a guard keyed by the identity of
    // a message or request (an idempotency key, a message id, a dedupe record) passed on a
    // route says something of another path. A claim on a resource's state (`UPDATE user SET
    // email_verified_at .. WHERE email_verified_at IS NULL`) or a lookup that fails on a
    // missing row guards its own route. A path from a route is compared with those and with
    // the guards of entries of unknown callers; a guard that only message consumers, job
    // handlers and webhooks pass is against their redeliveries.
    let command = |e: &EntryPoint| delivery(e) == Delivery::UserCommand;
    let keyed = finder.keyed_by_message();
    let others = GuardedPaths::compute_from(&finder, entries.clone(), |e| !command(e));
    let commands = GuardedPaths::compute_from(&finder, entries.clone(), command);
    let keyed_commands = GuardedPaths::compute_from(&keyed, entries.clone(), command);
    let unknown =
        GuardedPaths::compute_from(&finder, entries, |e| delivery(e) == Delivery::Unknown);
    find_skips(
        package,
        graph,
        &others,
        &[&others, &keyed_commands],
        &effects,
        &mut out,
    );
    find_skips(
        package,
        graph,
        &commands,
        &[&unknown, &keyed_commands],
        &effects,
        &mut out,
    );
    out
}

/// The calls on `unguarded`'s paths that leave the unguarded part of the crate for an effect
/// that a path of one of `guarded` reaches only under a guard, added to `out` once per call.
fn find_skips(
    package: &Package,
    graph: &CallGraph,
    unguarded: &GuardedPaths,
    guarded: &[&GuardedPaths],
    effects: &Effects,
    out: &mut Vec<Finding>,
) {
    for id in graph.ids() {
        // Reached from an entry point, and never under a guard.
        let guarded_here = guarded.iter().any(|g| g.reached_guarded(graph, id));
        if !unguarded.reached_unguarded(graph, id) || guarded_here {
            continue;
        }
        let Some(guards) = unguarded.guards(graph, id) else {
            continue;
        };
        for (i, call) in graph.calls(id).iter().enumerate() {
            let callee = call.callee;
            // Only the operation a guard guards is skipped: a helper it shares with other
            // paths (a mail transport) is theirs to call too.
            let Some(guarded) = guarded
                .iter()
                .find(|g| g.guards_as_operation(package, graph, callee))
            else {
                continue;
            };
            let skips_guard = guards.reachable[i]
                && guards.dominated_by[i].is_none()
                && !callee.def(package).1.has_attr("idempotent")
                && effects.has_effects(graph, callee);
            // A call through a trait is one edge per implementation: one finding per call.
            let reported = out.iter().any(|f: &Finding| f.call == call.span);
            if skips_guard && !reported {
                out.extend(finding(package, graph, unguarded, guarded, effects, id, i));
            }
        }
    }
}

fn name(package: &Package, id: FnId) -> String {
    id.def(package).1.display_name()
}

/// The fns of a path from its entry point to `last`, as `a → b → c`.
fn chain(
    package: &Package,
    graph: &CallGraph,
    paths: &GuardedPaths,
    last: FnId,
    guarded: bool,
) -> Option<(FnId, Vec<String>)> {
    let (entry, edges) = paths.path(graph, last, guarded)?;
    let mut names = vec![format!("`{}`", name(package, entry.id))];
    for (caller, call, _) in edges {
        names.push(format!(
            "`{}`",
            name(package, graph.calls(caller)[call as usize].callee)
        ));
    }
    Some((entry.id, names))
}

fn finding(
    package: &Package,
    graph: &CallGraph,
    unguarded: &GuardedPaths,
    guarded: &GuardedPaths,
    effects: &Effects,
    id: FnId,
    call: usize,
) -> Option<Finding> {
    let edge = &graph.calls(id)[call];
    let callee = edge.callee;
    let (entry, _) = unguarded.path(graph, id, false)?;
    let entry_fn = entry.id.def(package).1;
    let (_, mut unguarded_chain) = chain(package, graph, unguarded, id, false)?;
    unguarded_chain.push(format!("`{}`", name(package, callee)));
    let (guarded_entry, guarded_chain) = chain(package, graph, guarded, callee, true)?;
    let site = guarded.guard_site(package, graph, callee)?;
    let (_, effect) = effects.witness(graph, callee)?;
    let holder = name(package, site.holder);
    let callee_name = name(package, callee);
    let guard_label = match site.call {
        Some(_) => format!(
            "`{holder}` reaches `{callee_name}` only after `{}`",
            site.guard.name
        ),
        None => format!("`{holder}` is `#[idempotent]`: it reaches `{callee_name}` guarded"),
    };
    Some(Finding {
        call: edge.span,
        callee: callee_name,
        entry: name(package, entry.id),
        entry_kind: entry.kind.describe(),
        entry_at: (entry.span, entry.kind.at_span()),
        unguarded_chain,
        guarded_chain,
        guarded_entry: name(package, guarded_entry),
        guard_name: site.guard.name.clone(),
        guard: (site.guard.span, guard_label),
        effect: (effect.span, effect.what.clone()),
        attr_at: attr_insertion(entry_fn),
        key: message_key::in_params(package, entry_fn),
    })
}

/// Right after `f`'s last attribute or doc comment, or at its start when it has none.
fn attr_insertion(f: &FnDef) -> Span {
    f.attrs
        .iter()
        .map(|a| a.span.shrink_to_hi())
        .max_by_key(|s| s.hi)
        .unwrap_or(f.span.shrink_to_lo())
}

#[cfg(test)]
mod tests {
    use crate::settings::{Settings, UnguardedEntryPointSettings};
    use crate::testing;

    /// The attribute is written with its crate's path, so it needs no `use`; the suggestion
    /// says the dependency is needed when the package does not have it.
    #[test]
    fn the_guard_attribute_names_its_crate_and_the_dependency_it_needs() {
        let src = "
            async fn push_notification(user: &str) {}
            pub async fn send_message(id: String) {
                shared_idem::assert_not_duplicate(&id).await;
                push_notification(&id).await;
            }
            pub async fn replay(id: String) {
                push_notification(&id).await;
            }
        ";
        let settings = Settings {
            unguarded_entry_point: UnguardedEntryPointSettings {
                entry_points: Vec::new(),
                guards: vec!["assert_not_duplicate".into()],
                effects: vec!["push_notification".into()],
            },
            ..Settings::default()
        };
        for (deps, note) in [
            (&["shared_idem"][..], true),
            (&["shared_idem", "idem_guard"][..], false),
        ] {
            let package = testing::package("app", deps, &[("crate", src)]);
            let diags = testing::check(&package, &settings);
            let [d] = diags.as_slice() else {
                panic!("one finding: {diags:?}");
            };
            let s = &d.suggestions[0];
            assert_eq!(
                s.edits[0].1,
                "#[idem_guard::idempotent(key = id, store = /* store */)]"
            );
            assert_eq!(
                s.message
                    .ends_with("(add the `idem-guard` crate to `[dependencies]`)"),
                note,
                "{}",
                s.message
            );
        }
    }

    /// Past the function its guard calls, a guard covers a function that takes the message's
    /// identity (an operation on that message, however deep) and not a helper without one
    /// that other paths share (the HTTP transport a ping also uses).
    #[test]
    fn a_guard_covers_its_operation_not_the_helpers_it_shares() {
        let src = r#"
            pub async fn consume(conn: &mut redis::aio::MultiplexedConnection, event_id: String, body: String) {
                if !conn.set_nx(&event_id, 1).await.unwrap_or(false) {
                    return;
                }
                handle(&event_id, &body).await;
            }
            async fn handle(event_id: &str, body: &str) {
                deliver(event_id, body).await;
            }
            async fn deliver(event_id: &str, body: &str) {
                post(body).await;
            }
            async fn post(body: &str) {
                let _ = reqwest::Client::new().post("https://hooks.example.com").body(body.to_owned()).send().await;
            }
            pub async fn replay(event_id: String, body: String) {
                deliver(&event_id, &body).await; //~ WARN unguarded_entry_point
            }
            pub async fn ping(body: String) {
                post(&body).await;
            }
        "#;
        let package = testing::package("app", &["redis", "reqwest"], &[("crate", src)]);
        let texts = vec![src.to_owned()];
        testing::assert_annotations(
            &package,
            &texts,
            &Settings::default(),
            &["unguarded_entry_point"],
        );
    }

    /// Names the analysis cannot infer come from configuration: an external guard, an effect
    /// with no recognizable call, an entry point registered by a macro.
    #[test]
    fn configured_guards_effects_and_entry_points() {
        let src = "
            async fn push_notification(user: &str) {}
            pub async fn send_message(id: String) {
                shared_idem::assert_not_duplicate(&id).await;
                push_notification(&id).await;
            }
            async fn replay(id: String) {
                push_notification(&id).await; //~ WARN unguarded_entry_point
            }
        ";
        let package = testing::package("app", &["shared_idem"], &[("crate", src)]);
        let texts = vec![src.to_owned()];
        let configured = Settings {
            unguarded_entry_point: UnguardedEntryPointSettings {
                entry_points: vec!["replay".into()],
                guards: vec!["assert_not_duplicate".into()],
                effects: vec!["push_notification".into()],
            },
            ..Settings::default()
        };
        testing::assert_annotations(&package, &texts, &configured, &["unguarded_entry_point"]);
        // Without the configuration nothing is known to guard, so nothing is reported.
        let none = vec![src.replace("//~ WARN unguarded_entry_point", "")];
        testing::assert_annotations(
            &package,
            &none,
            &Settings::default(),
            &["unguarded_entry_point"],
        );
    }
}
