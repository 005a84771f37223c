use crate::analysis::entry::entry_points;
use crate::analysis::flow::{FnFlow, KeyUse, Source, Step};
use crate::analysis::message_key::{self, MessageKey};
use crate::analysis::origin::{consumer_running, consumes_deliveries, BodyIndex, Origin};
use crate::analysis::FnId;
use crate::catalog::SinkKind;
use crate::context::LintContext;
use crate::declare_lint;
use crate::diagnostic::Applicability;
use crate::model::ir::{Block, Expr, ExprKind};
use crate::model::{FnDef, Package, Span};
use std::collections::{HashMap, HashSet};

declare_lint! {
    /// ### What it does
    /// Finds idempotency and deduplication keys derived from a clock or a random generator:
    /// `Uuid::new_v4()`, `Uuid::now_v7()`, `Utc::now()`, `SystemTime::now()`,
    /// `Instant::now()`, `rand::random()`, `thread_rng()`, `Ulid::new()`, `nanoid!()`,
    /// `fastrand`, and functions of the crate that return one of them. A key is a value
    /// passed as an AWS idempotency token (`client_request_token`, `client_token`,
    /// `idempotency_token`, `message_deduplication_id`, Step Functions' `name`), the key of
    /// an atomic reservation (`SET NX`, a conditional `put_item`, an insert into a dedupe
    /// table), the `key` of `#[idempotent]`, an `Idempotency-Key` header, or a binding,
    /// field or parameter named like a key (`idempotency_key`, `dedupe_id`,
    /// `request_token`, `processed_id`).
    ///
    /// A random key minted once at the origin of a request and reused is right, and is not
    /// reported: a client that mints the key before its retry loop (`loop`, `while`,
    /// `for _ in 0..n`) and sends it on every attempt, or sets the header once and re-sends
    /// the request in the loop; a key minted only when the caller gave none
    /// (`if !headers.contains_key(..) { headers.insert(.., uuid) }`, the `else` of
    /// `if let Some(k) = given`, the other arm of `match kept.get(id) { Some(k) => k.clone(),
    /// None => mint }`); a key rendered into an HTML form field
    /// (`<input hidden name="idempotency_key" value="{key}">`) that the POST handler reads
    /// back. What is reported is a key minted inside the retry loop, so every attempt is a
    /// new request, and a key minted where a delivery is consumed: in a route, service
    /// (Lambda), job or spawned-task handler, or a function such a handler calls, even
    /// before a retry loop, since every redelivery runs it again.
    ///
    /// ### Why is this bad?
    /// A redelivered message, a retried request or a restarted worker runs the code again
    /// and makes a new key, so the store, the API or the queue never sees the same key
    /// twice and every duplicate is processed as new. The key must come from the intent
    /// (the message), not from the execution.
    ///
    /// ### Known problems
    /// Values are followed through the crate's own code and the workspace members it
    /// depends on by path, but not through other crates: a key built by a registry or git
    /// dependency from a random value is not seen. A timestamp stored as
    /// data, an expiry computed from `now()` and a fresh id for a new record are not keys
    /// and are not reported; neither is test code, nor a random default used only when no
    /// key was given (`given.unwrap_or_else(|| Uuid::new_v4().to_string())`), which is
    /// deliberate: the place to fix is the caller that gives none. Whether a function runs
    /// per delivery is read from the entry points the analysis knows (route attributes and
    /// routers, `service_fn`, job registrations, `tokio::spawn`) and the calls between the
    /// crate's functions: a client function called per delivery only through a trait object
    /// or another crate is taken for an origin, and its key before a retry loop is not
    /// reported. A form is recognised by an `<input` in a format string the key's binding is
    /// formatted into; a template engine's struct (askama, tera) is not. A key minted only
    /// when none was given is recognised in an `if` on a presence test (`if
    /// !headers.contains_key(..) { mint }`), not in a `match` on one (`match
    /// !headers.contains_key(..) { true => mint, .. }`): that spelling is reported (the
    /// rewrite suite's one known gap). Configure more sources with
    /// `sources = ["my_ids::fresh"]` and more key names with `key_names = ["job_key"]` in
    /// `[lints.nondeterministic_key]`.
    ///
    /// ### Example
    /// ```rust
    /// async fn transcode(mc: &aws_sdk_mediaconvert::Client, msg: &Upload) -> Result<(), Error> {
    ///     let token = uuid::Uuid::new_v4().to_string();
    ///     mc.create_job().client_request_token(token).send().await?;
    ///     Ok(())
    /// }
    /// ```
    ///
    /// ### Use instead
    /// ```rust
    /// async fn transcode(mc: &aws_sdk_mediaconvert::Client, msg: &Upload) -> Result<(), Error> {
    ///     let token = format!("{}-transcode-{}", msg.file_id, msg.version);
    ///     mc.create_job().client_request_token(token).send().await?;
    ///     Ok(())
    /// }
    /// ```
    pub NONDETERMINISTIC_KEY, "nondeterministic_key", Warn,
    "an idempotency key is derived from a clock or a random generator"
}

/// One finding, gathered before reporting (the analysis borrows the context).
struct Finding {
    /// The function whose flow holds the finding.
    id: FnId,
    sink: SinkKind,
    span: Span,
    source: Source,
    steps: Vec<Step>,
    callee_sink: Option<Span>,
}

pub fn check(cx: &mut LintContext<'_>) {
    let package = cx.package;
    let analysis = cx.analysis();
    let summaries = analysis.summaries(package);
    let mut consumers: Option<HashSet<FnId>> = None;
    let mut findings = Vec::new();
    let mut seen = HashSet::new();
    for id in summaries.ids() {
        if is_test_code(id, package) {
            continue;
        }
        // Built on the fn's first finding, for all of them.
        let mut index = None;
        for f in fn_findings(id, summaries.flow(id)) {
            if !seen.insert((f.source.span, f.span)) {
                continue;
            }
            match minted_where(package, id, &f, &mut index) {
                Some(Origin::RetryLoop(_)) => {
                    // Before a retry loop is the origin's place, unless a delivery's consumer
                    // runs this fn: then every redelivery mints a new key all the same.
                    let consumers = consumers.get_or_insert_with(|| {
                        let graph = analysis.call_graph(package);
                        entry_points(
                            package,
                            &analysis.resolver,
                            graph,
                            &analysis.catalog.frameworks,
                            &[],
                        )
                        .into_iter()
                        .filter(|e| consumes_deliveries(e.kind))
                        .map(|e| e.id)
                        .collect()
                    });
                    let graph = analysis.call_graph(package);
                    if consumer_running(graph, consumers, id).is_some() {
                        findings.push(f);
                    }
                }
                Some(_) => {}
                None => findings.push(f),
            }
        }
    }
    // A fn's findings come together; its possible edits are gathered once for all of them.
    let mut edits: Option<(FnId, Option<SourceEdits<'_>>)> = None;
    for f in findings {
        if edits.as_ref().map(|(id, _)| *id) != Some(f.id) {
            edits = Some((f.id, SourceEdits::of(package, f.id.def(package).1)));
        }
        let fix = edits
            .as_ref()
            .and_then(|(_, e)| e.as_ref())
            .and_then(|e| e.in_place_of(&f.source));
        report(cx, f, fix);
    }
}

/// Where the finding's key is minted, when that is the origin of a request rather than the
/// handling of a delivery: measured from the source when it is in this fn, else from the
/// first step the value took here (the call of the helper that made it).
fn minted_where<'a>(
    package: &'a Package,
    id: FnId,
    f: &Finding,
    index: &mut Option<BodyIndex<'a>>,
) -> Option<Origin> {
    let body = id.def(package).1.body.as_ref()?;
    let mint = std::iter::once(f.source.span)
        .chain(f.steps.iter().map(|s| s.span))
        .find(|s| body.span.contains(*s))?;
    index
        .get_or_insert_with(|| BodyIndex::new(body))
        .minted_at_origin(mint, f.span)
}

/// Keys in tests are test data.
fn is_test_code(id: FnId, package: &Package) -> bool {
    id.def(package).1.in_test
}

/// Each nondeterministic source reaching a key sink in this function, once, at its
/// strongest sink (an API or store sink before a name-only one, then the first).
fn fn_findings(id: FnId, flow: &FnFlow) -> Vec<Finding> {
    let mut best: Vec<(&KeyUse, &Source, Vec<Step>)> = Vec::new();
    // Where each source is in `best`: a fn with thousands of keys looked through all of them
    // for each.
    let mut slots: HashMap<Span, usize> = HashMap::new();
    for ku in &flow.key_uses {
        for (source, trail) in ku.value.nondet() {
            let steps: Vec<Step> = trail.steps().into_iter().cloned().collect();
            match slots.get(&source.span) {
                Some(&i) if stronger(ku, best[i].0) => best[i] = (ku, source, steps),
                Some(_) => {}
                None => {
                    slots.insert(source.span, best.len());
                    best.push((ku, source, steps));
                }
            }
        }
    }
    best.into_iter()
        .map(|(ku, source, steps)| Finding {
            id,
            sink: ku.sink.clone(),
            span: ku.span,
            source: source.clone(),
            steps,
            callee_sink: ku.via.map(|(_, s)| s),
        })
        .collect()
}

fn stronger(a: &KeyUse, b: &KeyUse) -> bool {
    match (a.sink.is_name_only(), b.sink.is_name_only()) {
        (false, true) => true,
        (true, false) => false,
        _ => a.span.lo < b.span.lo,
    }
}

/// The random or clock value replaced by the id of the message the function handles, where
/// it is only formatted (`Uuid::new_v4().to_string()`, `format!("n-{}", Utc::now().timestamp())`),
/// so any id with `Display` takes its place. `MaybeIncorrect`: one message that makes
/// several keys needs its stage added, and the guess of "the message" is by parameter and
/// field names. Gathered in one walk of the body, by the source each edit would replace:
/// a fn with thousands of keys walked its body once per key.
struct SourceEdits<'a> {
    key: MessageKey,
    body: &'a Block,
    /// The last place (in walk order) that only converts each source.
    by_source: HashMap<Span, Edit>,
}

#[derive(Debug, Clone, Copy)]
enum Edit {
    /// `source.to_string()`, replaced by the key as an owned string.
    ToString(Span),
    /// A format argument, replaced by the key's expression.
    FormatArg(Span),
}

impl<'a> SourceEdits<'a> {
    fn of(package: &Package, f: &'a FnDef) -> Option<SourceEdits<'a>> {
        let body = f.body.as_ref()?;
        let key = message_key::in_params(package, f)?;
        let mut by_source = HashMap::new();
        body.walk(&mut |e| match &e.kind {
            ExprKind::MethodCall {
                receiver,
                method,
                args,
                ..
            } if method == "to_string" && args.is_empty() => {
                for source in converted(receiver) {
                    by_source.insert(source, Edit::ToString(e.span));
                }
            }
            ExprKind::Macro(m)
                if matches!(
                    m.path.last(),
                    "format" | "format_args" | "write" | "writeln"
                ) =>
            {
                // The first argument that converts a source is its edit in this macro.
                let mut here: HashMap<Span, Edit> = HashMap::new();
                for arg in &m.args {
                    for source in converted(arg) {
                        here.entry(source).or_insert(Edit::FormatArg(arg.span));
                    }
                }
                by_source.extend(here);
            }
            _ => {}
        });
        Some(SourceEdits {
            key,
            body,
            by_source,
        })
    }

    fn in_place_of(&self, source: &Source) -> Option<(MessageKey, Vec<(Span, String)>)> {
        if !self.body.span.contains(source.span) {
            return None;
        }
        let edit = match self.by_source.get(&source.span)? {
            Edit::ToString(span) => (*span, self.key.owned_string()),
            Edit::FormatArg(span) => (*span, self.key.expr()),
        };
        Some((self.key.clone(), vec![edit]))
    }
}

/// The spans of the values `e` is made from alone: itself, and down its argument-less calls
/// (`Uuid::new_v4().simple()`, `Utc::now().timestamp_millis()` convert the source).
fn converted(e: &Expr) -> Vec<Span> {
    let mut out = vec![e.span];
    let mut at = e;
    while let ExprKind::MethodCall { receiver, args, .. } = &at.kind {
        if !args.is_empty() {
            break;
        }
        out.push(receiver.span);
        at = receiver;
    }
    out
}

fn report(cx: &mut LintContext<'_>, f: Finding, fix: Option<(MessageKey, Vec<(Span, String)>)>) {
    let message = format!(
        "idempotency key derived from `{}` changes on every delivery, so duplicates are never detected",
        f.source.what.trim_end_matches("()")
    );
    cx.span_lint(&NONDETERMINISTIC_KEY, f.span, message, |d| {
        d.primary_label(f.sink.describe());
        d.span_label(f.source.span, f.source.kind.describe());
        for step in &f.steps {
            if step.span != f.span && step.span != f.source.span {
                d.span_label(step.span, step.note.clone());
            }
        }
        if let Some(s) = f.callee_sink {
            d.span_label(s, "where the called function uses it as a key");
        }
        d.help(
            "derive the key from the message: its event, command or order id, or file id + \
             stage + content version",
        );
        if let Some((key, edits)) = fix {
            d.suggest_edits(
                format!(
                    "derive it from {} (add the stage when one message makes several of \
                     these keys)",
                    key.describe()
                ),
                edits,
                Applicability::MaybeIncorrect,
            );
        }
    });
}
