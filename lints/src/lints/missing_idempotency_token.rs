//! `missing_idempotency_token`: an API call that takes an idempotency token, sent without one.

use crate::analysis::{Analysis, DefPath, Locals, MethodStep, Step, TypeEnv};
use crate::catalog::tokens::{aws::AWS, Api, Fill};
use crate::context::LintContext;
use crate::declare_lint;
use crate::diagnostic::Applicability;
use crate::model::ir::{Expr, ExprKind};
use crate::model::{FileModel, FnDef, Package, Span};
use serde::Deserialize;
use std::collections::HashMap;

declare_lint! {
    /// ### What it does
    /// Finds AWS SDK calls (and calls of APIs added in the config) whose operation takes an
    /// idempotency token, sent with `.send()` without the token ever being set on the request
    /// builder: MediaConvert `create_job` without `client_request_token`, DynamoDB
    /// `transact_write_items` without `client_request_token`, EC2 `run_instances` without
    /// `client_token`, Step Functions `start_execution` without `name`, and about 1,350 other
    /// operations read from the SDK's sources.
    ///
    /// The lint has no types, so it reports a call only when the source shows whose method it
    /// is: the receiver's type is written as that crate's `Client` (a parameter, a struct
    /// field, a `let` ascription, `Client::new`/`from_conf`, a function's return type), or,
    /// for an untyped receiver, the module imports from that crate, or the package depends
    /// on exactly one crate with an operation of that name.
    ///
    /// ### Why is this bad?
    /// Queues, Lambda retries and restarted workers deliver the same message more than once.
    /// Without a token derived from the message, each delivery starts a new job, instance or
    /// transaction: a doubled MediaConvert bill, two EC2 instances, a transfer written twice.
    ///
    /// The Rust SDK fills a missing token (a Smithy `@idempotencyToken`, like MediaConvert's
    /// `ClientRequestToken`) with a fresh random UUID on every `send()`. That only makes the
    /// SDK's own HTTP retries of that one `send()` safe. A redelivered message or a restarted
    /// worker calls `send()` again, gets a new UUID, and AWS runs the operation again. The
    /// token must come from the message: its event id, command id, or order id with the stage.
    ///
    /// ### Known problems
    /// - A token set on any path counts as set: `if retry { req = req.client_token(k) }`
    ///   silences the lint for the other path too.
    /// - A builder passed to one of the crate's functions that calls the setter, or to any
    ///   function outside the crate, counts as set; a builder made in one function and sent in
    ///   another is not followed.
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

/// `[lints.missing_idempotency_token]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// APIs of other crates (or of AWS operations the table lacks) that take a token.
    pub apis: Vec<ConfiguredApi>,
}

/// `{ crate = "payments", method = "create_refund", token = "idempotency_key" }`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfiguredApi {
    /// The crate whose client has the method, as in `Cargo.toml` (`-` and `_` both work).
    #[serde(rename = "crate")]
    pub krate: Option<String>,
    /// The method starting the request builder.
    pub method: String,
    /// The builder's setter for the token.
    pub token: String,
    /// The method that sends the built request.
    #[serde(default = "default_send")]
    pub send: String,
}

fn default_send() -> String {
    "send".to_owned()
}

impl Settings {
    /// Checks the names and writes crate names as code does (`aws-sdk-s3` → `aws_sdk_s3`).
    pub fn normalize(mut self) -> Result<Settings, String> {
        for (i, api) in self.apis.iter_mut().enumerate() {
            if let Some(k) = &mut api.krate {
                *k = k.replace('-', "_");
            }
            let names = [
                ("crate", api.krate.as_deref().unwrap_or("x")),
                ("method", &api.method),
                ("token", &api.token),
                ("send", &api.send),
            ];
            if let Some((key, value)) = names.iter().find(|(_, v)| !is_ident(v)) {
                return Err(format!(
                    "apis[{i}].{key}: `{value}` is not a Rust identifier"
                ));
            }
        }
        Ok(self)
    }
}

fn is_ident(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_alphabetic() || c == '_')
        && chars.all(|c| c.is_alphanumeric() || c == '_')
}

pub fn check(cx: &mut LintContext<'_>) {
    let package = cx.package;
    let catalog = Catalog::new(&cx.settings.missing_idempotency_token);
    let findings = find_unset_tokens(package, cx.analysis(), &catalog);
    for f in findings {
        report(cx, f);
    }
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
}

fn find_unset_tokens<'a>(
    package: &Package,
    analysis: &Analysis,
    catalog: &Catalog<'a>,
) -> Vec<Finding<'a>> {
    let mut findings: Vec<Finding<'a>> = Vec::new();
    for (file, f) in package
        .fns()
        .filter(|(file, f)| !is_test_code(package, file, f))
    {
        let Some(body) = &f.body else {
            continue;
        };
        let fcx = FnCx {
            package,
            analysis,
            file,
            f,
            env: TypeEnv::for_fn(package, &analysis.resolver, &analysis.types, file, f),
            locals: Locals::of_body(body),
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
    findings
}

fn report(cx: &mut LintContext<'_>, f: Finding<'_>) {
    let Finding {
        api,
        op,
        send,
        insert_at,
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
                 worker sends a new token and the operation runs again"
            )),
            Fill::Unset => d.note(format!(
                "without `{token}` every request is a new one: a redelivered message or a \
                 restarted worker runs the operation again"
            )),
        };
        if !api.note.is_empty() {
            d.note(format!("`{token}`: {}", api.note));
        }
        d.help(format!(
            "set `{token}` from the message being handled (its event id, command id or order \
             id), so every delivery of it sends the same token"
        ));
        d.suggest(
            format!("set `{token}` before `.{}()`", api.send),
            insert_at,
            format!(".{token}(/* idempotency key */)"),
            Applicability::HasPlaceholders,
        );
    });
}

/// The operations to look for, by method name.
struct Catalog<'a> {
    by_method: HashMap<&'a str, Vec<Api<'a>>>,
}

impl<'a> Catalog<'a> {
    fn new(settings: &'a Settings) -> Catalog<'a> {
        let mut by_method: HashMap<&'a str, Vec<Api<'a>>> = HashMap::new();
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
        });
        // Configured APIs first: they replace a built-in entry of the same crate and method.
        for api in configured.chain(AWS.iter().map(Api::from)) {
            let apis = by_method.entry(api.method).or_default();
            if !apis.iter().any(|a| a.krate == api.krate) {
                apis.push(api);
            }
        }
        Catalog { by_method }
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
    env: TypeEnv<'p>,
    locals: Locals<'p>,
    catalog: &'p Catalog<'a>,
}

impl<'p, 'a> FnCx<'p, 'a> {
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
        let mut out = Vec::new();
        for chain in self.locals.chains(receiver) {
            let Some((at, api)) = self.operation_in(&chain.steps, send) else {
                continue;
            };
            let Step::Method(op) = chain.steps[at] else {
                continue;
            };
            let later = &chain.steps[at + 1..];
            if self.is_response(later, send) || self.token_may_be_set(later, &api) {
                continue;
            }
            out.push(Finding {
                api,
                op: op.call_span(),
                send: *method_span,
                insert_at: receiver.span.shrink_to_hi(),
            });
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
        match self.env.type_of(step.receiver) {
            Some(ty) => candidates
                .iter()
                .find(|api| is_client_of(&ty, api))
                .copied(),
            None => self.untyped_operation(step.method, candidates),
        }
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

    /// Steps after the operation that go through another `send`: the value reaching this
    /// `send` is a response the request was turned into, not the request.
    fn is_response(&self, later: &[Step<'p>], send: &str) -> bool {
        later
            .iter()
            .any(|s| matches!(s, Step::Method(m) if m.method == send))
    }

    /// Whether a later step sets the token: its setter, `set_<token>(..)` with anything but
    /// `None`, or a call the request was passed through that may set it.
    fn token_may_be_set(&self, later: &[Step<'p>], api: &Api<'_>) -> bool {
        later.iter().any(|s| match s {
            Step::Method(m) => is_setter_call(m, api.token),
            Step::Through(call) => self.helper_may_set(call, api.token),
        })
    }

    /// A call the request was passed to: a function of the crate sets the token if its body
    /// calls the setter; any other function may.
    fn helper_may_set(&self, call: &Expr, token: &str) -> bool {
        let Some((fi, ni)) = self.env.callee(call) else {
            return true;
        };
        let helper = &self.package.files[fi].fns[ni];
        let mut sets = false;
        if let Some(body) = &helper.body {
            body.walk(&mut |e| {
                if let ExprKind::MethodCall {
                    receiver,
                    method,
                    method_span,
                    args,
                } = &e.kind
                {
                    let step = MethodStep {
                        expr: e,
                        receiver,
                        method,
                        method_span: *method_span,
                        args,
                    };
                    sets |= is_setter_call(&step, token);
                }
            });
        }
        sets
    }
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
