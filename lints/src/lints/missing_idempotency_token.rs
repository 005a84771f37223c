//! `missing_idempotency_token`: an API call that takes an idempotency token, sent without one.

mod http;
mod sdk;

use crate::analysis::message_key::{self, MessageKey};
use crate::analysis::resolve::Resolver;
use crate::analysis::FastMap;
use crate::analysis::{Analysis, Chain, DefPath, Locals, MethodStep, Step, TypeEnv};
use crate::catalog::tokens::{aws::AWS, Api, Fill, RepeatEffect};
use crate::context::LintContext;
use crate::declare_lint;
use crate::diagnostic::Applicability;
use crate::model::ir::{Block, Expr, ExprKind, Path};
use crate::model::{FileModel, FnDef, Package, Span};
use rayon::prelude::*;
use std::cell::OnceCell;
use std::sync::OnceLock;

declare_lint! {
    /// ### What it does
    /// Finds AWS SDK calls (and calls of APIs added in the config) whose operation takes an
    /// idempotency token, sent with `.send()` without the token ever being set on the request
    /// builder: MediaConvert `create_job` without `client_request_token`, DynamoDB
    /// `transact_write_items` without `client_request_token`, EC2 `run_instances` without
    /// `client_token`, Step Functions `start_execution` without `name`, and about 1,350 other
    /// operations read from the SDK's sources.
    ///
    /// Payment APIs called through a generic HTTP client too: a `POST` (`.post(url)`,
    /// `.request(Method::POST, url)`) to a host of the catalog (`catalog/tokens/payments.rs`:
    /// Stripe, PayPal, Adyen, Square, Checkout.com, GoCardless) sent without the key the
    /// provider takes: an `Idempotency-Key` header to `api.stripe.com`, `PayPal-Request-Id`,
    /// `Cko-Idempotency-Key`, Square's `idempotency_key` body field. A key that is set, even
    /// one minted per call, is not reported here (a fresh `Uuid::new_v4()` per call is
    /// `nondeterministic_key`'s). And async-stripe's create calls (`Refund::create(&client,
    /// params)`, `PaymentIntent::create`, ...) on a client without
    /// `with_strategy(RequestStrategy::Idempotent(key))` where the call's source builds it.
    ///
    /// Only operations whose repeat makes a second resource or effect are reported by
    /// default. Every operation of the table is classified by what a repeat without the
    /// token does (by `scripts/gen-token-catalog.py`, from the SDK sources): `no_effect` when
    /// its verb removes, ends or sets something (`delete_*`, `stop_*`, `cancel_*`,
    /// `update_*`, `put_*`, `associate_*`, ...) and its token is not documented as what keeps a
    /// retry from making a duplicate or a new version (Secrets Manager's `put_secret_value`
    /// adds a version per request, so it duplicates); `conflicts` when it makes a thing
    /// (`create_*`, `register_*`, `import_*`, `copy_*`) whose required input names it
    /// (`name`, `<noun>_name`, `<noun>_identifier`: `create_change_set`'s `change_set_name`,
    /// `create_stack`'s `stack_name`), or applies a one-shot named thing
    /// (`execute_change_set`): a repeat fails with AlreadyExists or finds it done;
    /// `duplicates` for everything else (`create_job`, `run_instances`, `start_execution`,
    /// `transact_write_items`). Of 1,362 operations, 598 duplicate, 340 conflict and 424
    /// have no effect. Report the others too with `repeat_effects = ["duplicates",
    /// "conflicts", "no_effect"]` in `[lints.missing_idempotency_token]`. Configured APIs
    /// count as `duplicates`.
    ///
    /// The lint has no types, so it reports a call only when the source shows whose method it
    /// is: the receiver's type is written as that crate's `Client` (a parameter, a struct
    /// field, possibly behind `Arc`, a `let` ascription, `Client::new`/`from_conf`, a
    /// function's return type, the client imported under another name: `use
    /// aws_sdk_dynamodb::Client as Ddb`), or, for an untyped receiver, the module imports from
    /// that crate, or the package depends on exactly one crate with an operation of that
    /// name. A request builder returned by one of the crate's functions (`fn job(&self) ->
    /// CreateJobFluentBuilder`) and sent by its caller is followed into that function.
    ///
    /// ### Why is this bad?
    /// Queues, Lambda retries and restarted workers deliver the same message more than once.
    /// Without a token derived from the message, each delivery starts a new job, instance or
    /// transaction: a doubled MediaConvert bill, two EC2 instances, a transfer written twice.
    ///
    /// The Rust SDK fills a missing token (a Smithy `@idempotencyToken`, like MediaConvert's
    /// `ClientRequestToken`) with a fresh random UUID on every `send()`. That only makes the
    /// SDK's own HTTP retries of that one `send()` safe. A redelivered message or a restarted
    /// worker calls `send()` again, gets a new UUID, and AWS takes it for a new request: it
    /// starts the work again, or fails on a name the first call already took. The token must
    /// come from the message: its event id, command id, or order id with the stage.
    ///
    /// A token deduplicates only within the service's window (MediaConvert: one minute,
    /// DynamoDB transactions: ten minutes). It makes the call safe to retry; a redelivery
    /// later than that still needs the handler's own guard (`idem_guard`'s `#[idempotent]`).
    ///
    /// ### Known problems
    /// - A token set on any path counts as set: `if retry { req = req.client_token(k) }`
    ///   silences the lint for the other path too. Two builders, one with and one without a
    ///   token, are told apart.
    /// - A builder passed through a function counts as set when the function is outside the
    ///   crate, or is one of the crate's and calls the setter (itself or through its own
    ///   helpers). A builder returned by a helper (also inside `Ok(..)` or `Some(..)`,
    ///   unwrapped by the caller with `?`, a `match` arm, `let .. else` or `if let`) is
    ///   followed one call deep (a helper
    ///   returning another helper's builder is not), and only from a call the source
    ///   resolves (a free function, or a method of a receiver of known type); a builder
    ///   passed into a function and sent there is not followed, and a function with too
    ///   many ways to build the request is skipped.
    /// - The repeat classification reads names, not semantics: a `create_*` whose required
    ///   `name` is not unique in its service is taken to conflict, and an `update_*` that
    ///   starts work (CloudFormation `update_stack`) to have no effect because a repeat with
    ///   the same input changes nothing. The classification is per operation, not per call:
    ///   a `create_change_set` whose name is itself a fresh UUID does not conflict on a
    ///   repeat and is still not reported. A DynamoDB `transact_write_items` is taken to
    ///   conflict (a repeat fails a condition) when every `Put` and `Update` item the crate
    ///   builds (`Put::builder()...build()`) has a `condition_expression`, wherever it is
    ///   built: items are usually built in other functions than the one that sends. One
    ///   unconditional item anywhere in the crate makes every transaction count, and so does
    ///   one whose only condition bounds a sum (`balance + :d >= :zero`): a replayed
    ///   transfer passes the funds check again.
    /// - A receiver of unknown type counts only through the module's imports or the package's
    ///   dependencies, and not when the crate defines a method of the same name itself or the
    ///   receiver comes from another crate's value (`ci.pipeline(p).create_job()`).
    /// - SQS FIFO `message_deduplication_id` is not in the default table: a FIFO queue rejects
    ///   a message without it unless content-based deduplication is on, which the source does
    ///   not show. Add it under `apis` if your queues need it.
    /// - Configured APIs: `[lints.missing_idempotency_token] apis = [{ crate = "payments",
    ///   method = "create_refund", token = "idempotency_key" }]` (`send` names the method that
    ///   sends the request, `"send"` by default). Without `crate`, every `.create_refund()`
    ///   chain that is sent counts, whatever its receiver.
    ///
    /// ### Example
    /// ```rust
    /// async fn on_upload(mc: &aws_sdk_mediaconvert::Client, msg: &UploadEvent) -> Result<()> {
    ///     mc.create_job()
    ///         .role(ROLE_ARN)
    ///         .settings(settings_for(&msg.key))
    ///         .send()
    ///         .await?;
    ///     Ok(())
    /// }
    /// ```
    ///
    /// ### Use instead
    /// ```rust
    /// async fn on_upload(mc: &aws_sdk_mediaconvert::Client, msg: &UploadEvent) -> Result<()> {
    ///     mc.create_job()
    ///         .role(ROLE_ARN)
    ///         .settings(settings_for(&msg.key))
    ///         // Same message, same token: a redelivery returns the first job.
    ///         .client_request_token(format!("transcode-{}", msg.event_id))
    ///         .send()
    ///         .await?;
    ///     Ok(())
    /// }
    /// ```
    pub MISSING_IDEMPOTENCY_TOKEN, "missing_idempotency_token", Warn,
    "an API call that takes an idempotency token is sent without one"
}

pub use crate::settings::missing_idempotency_token::{ConfiguredApi, Settings};

pub fn check(cx: &mut LintContext<'_>) {
    let package = cx.package;
    let settings = cx.settings.token_apis();
    let configured;
    let catalog = if settings.apis.is_empty() {
        Catalog::built_in()
    } else {
        configured = Catalog::new(&settings);
        &configured
    };
    let reported = &cx.settings.missing_idempotency_token.repeat_effects;
    let findings = find_unset_tokens(package, cx.analysis(), catalog);
    let mut items_conditional = None;
    let resolver = &cx.analysis().resolver;
    let kept: Vec<Finding<'_>> = findings
        .into_iter()
        .filter(|f| {
            let repeat = if is_dynamodb_transaction(&f.api)
                && *items_conditional
                    .get_or_insert_with(|| every_transaction_item_conditional(package, resolver))
            {
                RepeatEffect::Conflicts
            } else {
                f.api.repeat
            };
            reported.contains(&repeat)
        })
        .collect();
    for f in kept {
        report(cx, f);
    }
    http::check(cx);
    sdk::check(cx);
}

/// DynamoDB `TransactWriteItems`, whose repeat writes again unless its items are conditional.
fn is_dynamodb_transaction(api: &Api<'_>) -> bool {
    api.krate == Some("aws_sdk_dynamodb") && api.method == "transact_write_items"
}

/// Whether every `Put` and `Update` transaction item the crate builds
/// (`Put::builder()...build()`) carries a `condition_expression`, and it builds at least
/// one: a repeat of such a transaction fails its conditions instead of writing twice. The
/// items are often built in other functions and handed to the one that sends (a
/// `Vec<TransactWriteItem>` parameter), so the whole crate is read rather than the call.
fn every_transaction_item_conditional(package: &Package, resolver: &Resolver) -> bool {
    let mut items = 0usize;
    let mut unconditional = 0usize;
    for (file, f) in package.fns() {
        if is_test_code(package, file, f) {
            continue;
        }
        let Some(body) = &f.body else { continue };
        body.walk(&mut |e| {
            let chain = e.method_chain();
            let resolve = |p: &Path| resolver.resolve(file.target, &f.module, p, None);
            if chain.first() != Some(&"build") || !builds_writing_item(e, resolve) {
                return;
            }
            items += 1;
            if !fails_on_repeat(e) {
                unconditional += 1;
            }
        });
    }
    items > 0 && unconditional == 0
}

/// Whether the item built by the chain `e` has a condition a repeat fails: any
/// `condition_expression` but a bound on a sum (`balance + :d >= :zero`, a funds or stock
/// check), which the repeat of a transfer passes again as long as the money lasts.
fn fails_on_repeat(e: &Expr) -> bool {
    let mut cur = e.peel();
    let mut conditional = false;
    while let ExprKind::MethodCall {
        receiver,
        method,
        args,
        ..
    } = &cur.kind
    {
        if matches!(
            method.as_str(),
            "condition_expression" | "set_condition_expression"
        ) {
            let text = args.first().and_then(|a| a.peel().as_str_lit());
            conditional |= !text.is_some_and(is_bound_on_a_sum);
        }
        cur = receiver.peel();
    }
    conditional
}

/// A condition that only bounds arithmetic on attributes (`balance + :d >= :zero`,
/// `stock - :n >= :zero`): it says nothing of whether the write was made before.
fn is_bound_on_a_sum(condition: &str) -> bool {
    let c = condition.to_ascii_lowercase();
    let bounds = [">=", "<=", ">", "<"].iter().any(|op| c.contains(op));
    let sums = c.contains(" + ") || c.contains(" - ");
    let names_existence = c.contains("attribute_not_exists") || c.contains("attribute_exists");
    bounds && sums && !names_existence && !c.contains(" or ") && !c.contains(" and ")
}

/// `Put::builder()` or `Update::builder()` (of `aws_sdk_dynamodb::types`) at the root of
/// the chain `e`, under whatever name they were imported.
fn builds_writing_item(e: &Expr, resolve: impl Fn(&Path) -> DefPath) -> bool {
    let mut cur = e.peel();
    while let ExprKind::MethodCall { receiver, .. } = &cur.kind {
        cur = receiver.peel();
    }
    let ExprKind::Call { func, .. } = &cur.kind else {
        return false;
    };
    func.as_path().is_some_and(|p| {
        let def = resolve(p);
        let segments = &def.segments;
        let n = segments.len();
        n >= 2
            && segments[n - 1] == "builder"
            && matches!(segments[n - 2].as_str(), "Put" | "Update")
    })
}

/// A sent request whose token is never set.
struct Finding<'a> {
    api: Api<'a>,
    /// The operation's method call: `create_job()`.
    op: Span,
    /// The `send` method that sends it.
    send: Span,
    /// Where the setter goes: right after the receiver of `send`.
    insert_at: Span,
    /// The id of the message the function handles, when its parameters show one.
    key: Option<MessageKey>,
}

fn find_unset_tokens<'a>(
    package: &Package,
    analysis: &Analysis,
    catalog: &Catalog<'a>,
) -> Vec<Finding<'a>> {
    // The files on the pool, their findings in file order (an operation's span names its
    // file, so no two files report the same one).
    let per_file: Vec<Vec<Finding<'a>>> = package
        .files
        .par_iter()
        .enumerate()
        .map(|(fi, file)| {
            let mut findings = Vec::new();
            let calling = analysis.file_fact(fi, || OperationCallers::of(file, catalog));
            for (f, _) in file.fns.iter().zip(&calling.0).filter(|(_, &calls)| calls) {
                if is_test_code(package, file, f) {
                    continue;
                }
                let Some(body) = &f.body else { continue };
                unset_tokens_in(package, analysis, catalog, file, f, body, &mut findings);
            }
            findings
        })
        .collect();
    per_file.into_iter().flatten().collect()
}

/// Per fn of a file, whether it calls a method named like an operation of the catalog, or
/// sends a request a helper may have built: most do not, and need no further look.
struct OperationCallers(Vec<bool>);

impl OperationCallers {
    fn of(file: &FileModel, catalog: &Catalog<'_>) -> OperationCallers {
        OperationCallers(
            file.fns
                .iter()
                .map(|f| calls_an_operation(f, catalog))
                .collect(),
        )
    }
}

/// The findings in `f`'s `body`, added to `findings` unless already there.
fn unset_tokens_in<'a>(
    package: &Package,
    analysis: &Analysis,
    catalog: &Catalog<'a>,
    file: &FileModel,
    f: &FnDef,
    body: &Block,
    findings: &mut Vec<Finding<'a>>,
) {
    let fcx = FnCx {
        package,
        analysis,
        file,
        f,
        body,
        env: OnceCell::new(),
        locals: OnceCell::new(),
        catalog,
    };
    body.walk(&mut |e| {
        for finding in fcx.unset_tokens_at(e) {
            if !findings.iter().any(|g| g.op == finding.op) {
                findings.push(finding);
            }
        }
    });
}

/// Whether `f`'s body calls a method named like an operation of the catalog, or sends.
fn calls_an_operation(f: &FnDef, catalog: &Catalog<'_>) -> bool {
    let Some(body) = f.body.as_ref() else {
        return false;
    };
    let mut found = false;
    body.walk(&mut |e| {
        if let (false, ExprKind::MethodCall { method, .. }) = (found, &e.kind) {
            found = catalog.is_send(method) || !catalog.operations(method).is_empty();
        }
    });
    found
}

fn report(cx: &mut LintContext<'_>, f: Finding<'_>) {
    let Finding {
        api,
        op,
        send,
        insert_at,
        key,
    } = f;
    let token = api.token;
    let message = format!(
        "`{}` is sent without `{token}`, its idempotency token",
        api.method
    );
    cx.span_lint(&MISSING_IDEMPOTENCY_TOKEN, op, message, |d| {
        d.primary_label(match api.krate {
            Some(k) => format!("`{k}` operation `{}`", pascal_case(api.method)),
            None => format!("`{}` takes `{token}`", api.method),
        });
        d.span_label(send, format!("sent here without `{token}`"));
        match api.fill {
            Fill::SdkUuid => d.note(format!(
                "the SDK fills a missing `{token}` with a new random UUID on every `send()`: that \
                 covers the SDK's own HTTP retries only; a redelivered message or a restarted \
                 worker sends a new token, and AWS takes it for a new request"
            )),
            Fill::Unset => d.note(format!(
                "without `{token}` every request is a new one: a redelivered message or a \
                 restarted worker starts the operation again"
            )),
        };
        match (api.repeat, api.naming) {
            (RepeatEffect::Conflicts, Some(name)) => d.note(format!(
                "a repeat conflicts rather than duplicates: the request names its target by \
                 `{name}`, so a second one fails or finds the first one's result: reported \
                 because `repeat_effects` includes `conflicts`"
            )),
            (RepeatEffect::NoEffect, _) => d.note(format!(
                "a repeat leaves the state the first `{}` made: reported because \
                 `repeat_effects` includes `no_effect`",
                api.method
            )),
            _ => d,
        };
        if !api.note.is_empty() {
            d.note(format!("`{token}`: {}", api.note));
        }
        d.help(format!(
            "set `{token}` from the message being handled (its event id, command id or order \
             id), so every delivery of it sends the same token"
        ));
        // A key from the handler's message is a likely fix, not a sure one: one message
        // that starts several operations needs a key per operation (add the stage).
        match key {
            Some(key) => d.suggest(
                format!(
                    "set `{token}` from {} before `.{}()` (add the stage or item when one \
                     message starts several of these)",
                    key.describe(),
                    api.send
                ),
                insert_at,
                format!(".{token}({})", key.as_string_arg()),
                Applicability::MaybeIncorrect,
            ),
            None => d.suggest(
                format!("set `{token}` before `.{}()`", api.send),
                insert_at,
                format!(".{token}(/* idempotency key */)"),
                Applicability::HasPlaceholders,
            ),
        };
    });
}

/// The operations to look for, by method name, and the methods that send them.
struct Catalog<'a> {
    /// Looked up for every method call of every fn: a fast hash.
    by_method: FastMap<&'a str, Vec<Api<'a>>>,
    sends: Vec<&'a str>,
}

impl<'a> Catalog<'a> {
    fn new(settings: &'a Settings) -> Catalog<'a> {
        let mut by_method: FastMap<&'a str, Vec<Api<'a>>> = FastMap::default();
        let configured = settings.apis.iter().map(|c| Api {
            krate: c.krate.as_deref(),
            method: &c.method,
            token: &c.token,
            send: &c.send,
            fill: Fill::Unset,
            note: "",
            is_aws: c
                .krate
                .as_deref()
                .is_some_and(|k| k.starts_with("aws_sdk_")),
            repeat: RepeatEffect::Duplicates,
            naming: None,
        });
        let mut sends = Vec::new();
        // Configured APIs first: they replace a built-in entry of the same crate and method.
        for api in configured.chain(AWS.iter().map(Api::from)) {
            let apis = by_method.entry(api.method).or_default();
            if !apis.iter().any(|a| a.krate == api.krate) {
                apis.push(api);
            }
            if !sends.contains(&api.send) {
                sends.push(api.send);
            }
        }
        Catalog { by_method, sends }
    }

    /// The catalog of the built-in table alone (no configured APIs), built once per process:
    /// it has thousands of operations.
    fn built_in() -> &'static Catalog<'static> {
        static DEFAULT_SETTINGS: OnceLock<Settings> = OnceLock::new();
        static BUILT_IN: OnceLock<Catalog<'static>> = OnceLock::new();
        BUILT_IN.get_or_init(|| Catalog::new(DEFAULT_SETTINGS.get_or_init(Settings::default)))
    }

    fn is_send(&self, method: &str) -> bool {
        self.sends.contains(&method)
    }

    fn operations(&self, method: &str) -> &[Api<'a>] {
        self.by_method.get(method).map(Vec::as_slice).unwrap_or(&[])
    }
}

/// What one function's body is checked with.
struct FnCx<'p, 'a> {
    package: &'p Package,
    analysis: &'p Analysis,
    file: &'p FileModel,
    f: &'p FnDef,
    body: &'p Block,
    /// Built at the first send that needs them: most calls named like an operation are not.
    env: OnceCell<TypeEnv<'p>>,
    locals: OnceCell<Locals<'p>>,
    catalog: &'p Catalog<'a>,
}

impl<'p, 'a> FnCx<'p, 'a> {
    fn env(&self) -> &TypeEnv<'p> {
        self.env.get_or_init(|| {
            let analysis = self.analysis;
            TypeEnv::for_fn(
                self.package,
                &analysis.resolver,
                &analysis.types,
                self.file,
                self.f,
            )
        })
    }

    fn locals(&self) -> &Locals<'p> {
        self.locals.get_or_init(|| Locals::of_body(self.body))
    }

    /// The requests `e` sends, if it is a `send` call, whose token was set on no way the
    /// request was built.
    fn unset_tokens_at(&self, e: &'p Expr) -> Vec<Finding<'a>> {
        let ExprKind::MethodCall {
            receiver,
            method: send,
            method_span,
            ..
        } = &e.kind
        else {
            return Vec::new();
        };
        if !self.catalog.is_send(send) {
            return Vec::new();
        }
        // Too many ways to follow: one of them might set the token.
        let Some(chains) = self.locals().chains(receiver) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for chain in chains {
            let Some((at, api)) = self.operation_in(&chain.steps, send) else {
                out.extend(self.unset_in_helper(&chain, send, *method_span));
                continue;
            };
            let Step::Method(op) = chain.steps[at] else {
                continue;
            };
            let later = &chain.steps[at + 1..];
            if self.token_may_be_set(self.env(), later, api.token, 0) {
                continue;
            }
            out.push(Finding {
                api,
                op: op.call_span(),
                send: *method_span,
                insert_at: receiver.span.shrink_to_hi(),
                key: message_key::in_params(self.package, self.f),
            });
        }
        out
    }

    /// A request built by a crate helper that returns the builder (`fn job(&self) ->
    /// CreateJobFluentBuilder`) and sent here: the operation is found in the helper's results,
    /// and the token counts as set when the helper or this function sets it. Reported at the
    /// operation, in the helper. Only the nearest helper is looked into, one level deep.
    fn unset_in_helper(&self, chain: &Chain<'p>, send: &str, send_span: Span) -> Vec<Finding<'a>> {
        let calls = std::iter::once((chain.root, 0)).chain(
            chain.steps.iter().enumerate().filter_map(|(i, s)| match s {
                Step::Method(m) => Some((m.expr, i + 1)),
                Step::Through(_) => None,
            }),
        );
        let Some((helper, later_from)) = calls
            .filter_map(|(call, later)| self.env().callee(call).map(|h| (h, later)))
            .next_back()
        else {
            return Vec::new();
        };
        let later = &chain.steps[later_from..];
        let (fi, ni) = helper;
        let file = &self.package.files[fi];
        let f = &file.fns[ni];
        let Some(body) = &f.body else {
            return Vec::new();
        };
        let hcx = FnCx {
            package: self.package,
            analysis: self.analysis,
            file,
            f,
            body,
            env: OnceCell::new(),
            locals: OnceCell::new(),
            catalog: self.catalog,
        };
        let mut out = Vec::new();
        for result in results(body) {
            let Some(chains) = hcx.locals().chains(result) else {
                return Vec::new();
            };
            for hchain in chains {
                let Some((at, api)) = hcx.operation_in(&hchain.steps, send) else {
                    continue;
                };
                let Step::Method(op) = hchain.steps[at] else {
                    continue;
                };
                if hcx.token_may_be_set(hcx.env(), &hchain.steps[at + 1..], api.token, 0)
                    || self.token_may_be_set(self.env(), later, api.token, 0)
                {
                    continue;
                }
                // After the last call the helper makes on the builder.
                let last = hchain.steps[at..].iter().rev().find_map(|s| match s {
                    Step::Method(m) => Some(m.expr.span.shrink_to_hi()),
                    Step::Through(_) => None,
                });
                out.push(Finding {
                    api,
                    op: op.call_span(),
                    send: send_span,
                    insert_at: last.unwrap_or(op.expr.span.shrink_to_hi()),
                    key: message_key::in_params(self.package, f),
                });
            }
        }
        out
    }

    /// The last step that starts an operation sent by `send`, when the source shows whose
    /// operation it is.
    fn operation_in(&self, steps: &[Step<'p>], send: &str) -> Option<(usize, Api<'a>)> {
        steps.iter().enumerate().rev().find_map(|(i, s)| match s {
            Step::Method(m) => self
                .operation(m)
                .filter(|api| api.send == send)
                .map(|api| (i, api)),
            Step::Through(_) => None,
        })
    }

    /// Whose operation `step` calls: decided by the receiver's type when the source writes
    /// it, else by the imports and dependencies of an untyped receiver's crate.
    fn operation(&self, step: &MethodStep<'_>) -> Option<Api<'a>> {
        let candidates = self.catalog.operations(step.method);
        if candidates.is_empty() {
            return None;
        }
        match self.env().type_of(step.receiver) {
            Some(ty) => candidates
                .iter()
                .find(|api| is_client_of(&ty, api))
                .copied(),
            None if self.comes_from_another_crate(step.receiver, candidates) => None,
            None => self.untyped_operation(step.method, candidates),
        }
    }

    /// A receiver got from a method of a value whose type is another crate's
    /// (`octocrab.repos(owner, name).create_file(..)`): AWS operations are methods of the
    /// client itself, so this is not one. Values of `std` types (`clients.get(region)`) say
    /// nothing either way.
    fn comes_from_another_crate(&self, receiver: &Expr, candidates: &[Api<'_>]) -> bool {
        let mut root = receiver.peel();
        while let ExprKind::MethodCall { receiver, .. } = &root.kind {
            root = receiver.peel();
        }
        if std::ptr::eq(root, receiver.peel()) {
            return false;
        }
        let Some(ty) = self.env().type_of(root) else {
            return false;
        };
        let Some(k) = ty.crate_name() else {
            return false;
        };
        !matches!(k, "std" | "core" | "alloc") && candidates.iter().all(|a| a.krate != Some(k))
    }

    fn untyped_operation(&self, method: &str, candidates: &[Api<'a>]) -> Option<Api<'a>> {
        if let Some(api) = candidates.iter().find(|a| a.krate.is_none()) {
            return Some(*api);
        }
        // A receiver of unknown type may be one of the crate's own types with that method.
        if self.package_defines_method(method) {
            return None;
        }
        let imported = |api: &&Api<'a>| {
            api.krate.is_some_and(|k| {
                self.analysis
                    .resolver
                    .imports_from(self.file.target, &self.f.module, k)
            })
        };
        let depended = |api: &&Api<'a>| api.krate.is_some_and(|k| self.package.depends_on(k));
        only(candidates.iter().filter(imported))
            .or_else(|| {
                let any_imported = candidates.iter().any(|a| imported(&a));
                (!any_imported)
                    .then(|| only(candidates.iter().filter(depended)))
                    .flatten()
            })
            .copied()
    }

    fn package_defines_method(&self, method: &str) -> bool {
        self.package
            .fns()
            .any(|(_, f)| f.name == method && f.self_ty.is_some())
    }

    /// Whether a later step sets the token: its setter, `set_<token>(..)` with anything but
    /// `None`, or a call the request was passed through that may set it. `env` is the type
    /// evidence of the function the steps are in.
    fn token_may_be_set(
        &self,
        env: &TypeEnv<'_>,
        later: &[Step<'_>],
        token: &str,
        depth: usize,
    ) -> bool {
        later.iter().any(|s| match s {
            Step::Method(m) => is_setter_call(m, token),
            Step::Through(call) => self.call_may_set(env, call, token, depth),
        })
    }

    /// A call the request was passed through. `Ok`, `Some` and `Box::new` only wrap it; a
    /// function of the crate may set the token if its body calls the setter or a way its
    /// result is built sets it (through its own helpers, up to a depth); any other function
    /// may.
    fn call_may_set(&self, env: &TypeEnv<'_>, call: &Expr, token: &str, depth: usize) -> bool {
        if is_wrapper_call(call) {
            return false;
        }
        let Some((fi, ni)) = env.callee(call) else {
            return true;
        };
        let file = &self.package.files[fi];
        let helper = &file.fns[ni];
        let Some(body) = &helper.body else {
            return true;
        };
        if depth >= MAX_HELPER_DEPTH || calls_setter(body, token) {
            return true;
        }
        let analysis = self.analysis;
        let env = TypeEnv::for_fn(
            self.package,
            &analysis.resolver,
            &analysis.types,
            file,
            helper,
        );
        let locals = Locals::of_body(body);
        results(body).iter().any(|r| match locals.chains(r) {
            None => true,
            Some(chains) => chains
                .iter()
                .any(|c| self.token_may_be_set(&env, &c.steps, token, depth + 1)),
        })
    }
}

/// How deep helpers calling helpers are followed before assuming they set the token.
const MAX_HELPER_DEPTH: usize = 4;

/// `Ok(x)`, `Err(x)`, `Some(x)`, `Box::new(x)`, `Arc::new(x)`: calls that wrap a value and do nothing
/// else to it.
fn is_wrapper_call(call: &Expr) -> bool {
    let ExprKind::Call { func, .. } = &call.peel().kind else {
        return false;
    };
    let Some(path) = func.as_path() else {
        return false;
    };
    match path.segments.as_slice() {
        [one] => matches!(one.as_str(), "Ok" | "Err" | "Some"),
        [.., ty, new] => new == "new" && matches!(ty.as_str(), "Box" | "Arc" | "Rc"),
        [] => false,
    }
}

/// Whether anything in `body` calls the token's setter.
fn calls_setter(body: &Block, token: &str) -> bool {
    let mut found = false;
    body.walk(&mut |e| {
        if let Some(step) = MethodStep::of(e) {
            found |= is_setter_call(&step, token);
        }
    });
    found
}

/// The expressions a body's value comes from: its tail and its `return`s.
fn results(body: &Block) -> Vec<&Expr> {
    let mut out: Vec<&Expr> = body.tail().into_iter().collect();
    body.walk(&mut |e| {
        if let ExprKind::Return(Some(v)) = &e.kind {
            out.push(v);
        }
    });
    out
}

/// `x.client_token(..)`, or `x.set_client_token(v)` with `v` other than `None`.
fn is_setter_call(m: &MethodStep<'_>, token: &str) -> bool {
    if m.method == token {
        return true;
    }
    let sets_none = m
        .args
        .first()
        .and_then(Expr::as_path)
        .is_some_and(|p| p.segments.last().is_some_and(|s| s == "None"));
    m.method.strip_prefix("set_") == Some(token) && !sets_none
}

/// Whether a receiver of type `ty` is the client of `api`'s crate.
fn is_client_of(ty: &DefPath, api: &Api<'_>) -> bool {
    match api.krate {
        None => true,
        Some(k) => ty.crate_name() == Some(k) && (!api.is_aws || ty.last() == "Client"),
    }
}

fn is_test_code(package: &Package, file: &FileModel, f: &FnDef) -> bool {
    f.in_test
        || file.in_test
        || package
            .targets
            .get(file.target)
            .is_some_and(|t| t.is_test_like())
}

/// The single item of an iterator, if it has exactly one.
fn only<T>(mut it: impl Iterator<Item = T>) -> Option<T> {
    let first = it.next()?;
    it.next().is_none().then_some(first)
}

/// `create_job` → `CreateJob`, the operation's name in the AWS documentation.
fn pascal_case(snake: &str) -> String {
    snake
        .split('_')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_uppercase().chain(c).collect::<String>())
                .unwrap_or_default()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnostic::Diagnostic;
    use crate::testing;

    fn lint(deps: &[&str], src: &str, settings: &crate::settings::Settings) -> Vec<Diagnostic> {
        let package = testing::package("app", deps, &[("crate", src)]);
        testing::check(&package, settings)
            .into_iter()
            .filter(|d| d.lint.name == MISSING_IDEMPOTENCY_TOKEN.name)
            .collect()
    }

    fn text(src: &str, span: Span) -> &str {
        &src[span.lo as usize..span.hi as usize]
    }

    #[test]
    fn the_finding_points_at_the_operation_and_suggests_the_setter_before_send() {
        let src = "async fn f(mc: &aws_sdk_mediaconvert::Client) {\n    \
                   mc.create_job()\n        .role(r)\n        .send()\n        .await;\n}\n";
        let diags = lint(&[], src, &Default::default());
        let [d] = diags.as_slice() else {
            panic!("one finding, got {diags:?}");
        };
        assert_eq!(text(src, d.span), "create_job()");
        assert_eq!(
            d.message,
            "`create_job` is sent without `client_request_token`, its idempotency token"
        );
        assert_eq!(
            d.label.as_deref(),
            Some("`aws_sdk_mediaconvert` operation `CreateJob`")
        );
        assert_eq!(text(src, d.labels[0].span), "send");
        assert!(d.notes[0].contains("random UUID on every `send()`"));
        assert!(d.help[0].starts_with("set `client_request_token` from the message"));
        let [s] = d.suggestions.as_slice() else {
            panic!("one suggestion");
        };
        assert_eq!(s.applicability, Applicability::HasPlaceholders);
        let (at, insert) = &s.edits[0];
        assert_eq!(insert, ".client_request_token(/* idempotency key */)");
        let fixed = format!(
            "{}{insert}{}",
            &src[..at.lo as usize],
            &src[at.hi as usize..]
        );
        assert!(fixed.contains(".role(r).client_request_token(/* idempotency key */)\n"));
    }

    #[test]
    fn an_id_parameter_is_the_token_as_the_key_fix_finds_it() {
        let src = "async fn start(mc: &aws_sdk_mediaconvert::Client, order_id: &str) {\n    \
                   mc.create_job().role(r).send().await;\n}\n";
        let diags = lint(&[], src, &Default::default());
        let [s] = diags[0].suggestions.as_slice() else {
            panic!("one suggestion: {diags:?}");
        };
        assert_eq!(s.applicability, Applicability::MaybeIncorrect);
        assert_eq!(s.edits[0].1, ".client_request_token(order_id)");
        assert!(s
            .message
            .starts_with("set `client_request_token` from `order_id` before"));
        // A numeric id becomes text; a parameter not named as an id is no key.
        let src = src.replace("order_id: &str", "event_id: u64");
        let diags = lint(&[], &src, &Default::default());
        assert_eq!(
            diags[0].suggestions[0].edits[0].1,
            ".client_request_token(event_id.to_string())"
        );
        let src = src.replace("event_id: u64", "name: &str");
        let diags = lint(&[], &src, &Default::default());
        assert_eq!(
            diags[0].suggestions[0].applicability,
            Applicability::HasPlaceholders
        );
    }

    #[test]
    fn operations_without_a_fill_say_that_nothing_fills_them() {
        let src = "async fn f(sfn: aws_sdk_sfn::Client) { sfn.start_execution().send().await; }";
        let diags = lint(&[], src, &Default::default());
        assert!(diags[0].notes[0].starts_with("without `name` every request is a new one"));
        assert!(diags[0].notes[1].contains("90 days"));
    }

    fn settings(json: serde_json::Value) -> Result<crate::settings::Settings, String> {
        let mut s = crate::settings::Settings::default();
        s.set("missing_idempotency_token", json)?;
        Ok(s)
    }

    #[test]
    fn configured_apis_name_crates_either_way_and_reject_non_identifiers() {
        let s = settings(serde_json::json!({ "apis": [
            { "crate": "acme-payments", "method": "create_refund", "token": "idempotency_key" }
        ]}))
        .unwrap();
        let api = &s.missing_idempotency_token.apis[0];
        assert_eq!(api.krate.as_deref(), Some("acme_payments"));
        assert_eq!(api.send, "send");
        let bad = settings(serde_json::json!({ "apis": [
            { "method": "create refund", "token": "k" }
        ]}));
        assert_eq!(
            bad.unwrap_err(),
            "apis[0].method: `create refund` is not a Rust identifier"
        );
        let unknown = settings(serde_json::json!({ "apis": [], "extra": 1 }));
        assert!(unknown.unwrap_err().contains("unknown field `extra`"));
    }

    #[test]
    fn a_configured_sqs_fifo_token_is_checked_like_a_built_in_one() {
        let src = "async fn f(sqs: &aws_sdk_sqs::Client, id: &str) {\n    \
                   sqs.send_message().queue_url(FIFO).send().await;\n    \
                   sqs.send_message().queue_url(FIFO).message_deduplication_id(id).send().await;\n}\n";
        assert!(lint(&["aws-sdk-sqs"], src, &Default::default()).is_empty());
        let s = settings(serde_json::json!({ "apis": [{
            "crate": "aws_sdk_sqs", "method": "send_message", "token": "message_deduplication_id"
        }]}))
        .unwrap();
        let diags = lint(&["aws-sdk-sqs"], src, &s);
        assert_eq!(diags.len(), 1);
        assert_eq!(testing::line_of(src, diags[0].span.lo), 2);
    }

    #[test]
    fn a_configured_api_without_a_crate_is_known_by_its_method_alone() {
        let src = "async fn f(ledger: &Ledger, other: impl Sized) {\n    \
                   ledger.post_entry().amount(1).commit().await;\n    \
                   other.post_entry().entry_key(k).commit().await;\n}\n";
        let s = settings(serde_json::json!({ "apis": [{
            "method": "post_entry", "token": "entry_key", "send": "commit"
        }]}))
        .unwrap();
        let diags = lint(&[], src, &s);
        assert_eq!(diags.len(), 1);
        assert_eq!(testing::line_of(src, diags[0].span.lo), 2);
        assert_eq!(
            diags[0].label.as_deref(),
            Some("`post_entry` takes `entry_key`")
        );
    }

    #[test]
    fn pascal_case_names_the_operation_as_aws_does() {
        assert_eq!(pascal_case("transact_write_items"), "TransactWriteItems");
        assert_eq!(pascal_case("run_instances"), "RunInstances");
    }
}
