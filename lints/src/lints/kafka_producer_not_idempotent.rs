//! `kafka_producer_not_idempotent`: an rdkafka producer that may write a message twice, or a
//! transactional consume-transform-produce loop that commits offsets outside the transaction.

use crate::analysis::resolve::{original_name, path_ends_with_in};
use crate::analysis::words::called_path;
use crate::analysis::{Chain, Locals, MethodStep, Step};
use crate::context::LintContext;
use crate::declare_lint;
use crate::diagnostic::Applicability;
use crate::model::ir::{Block, Expr, ExprKind};
use crate::model::{FileModel, FnDef, Package, Span};

declare_lint! {
    /// ### What it does
    /// Finds `rdkafka` producers built from a `ClientConfig::new()` (or `default()`) that
    /// never sets `enable.idempotence` to `"true"` (and no `transactional.id`, which turns
    /// idempotence on), or sets `acks` to anything but `all`/`-1`, in a package that also
    /// consumes from Kafka (a config with `group.id`, or a `StreamConsumer`/`BaseConsumer`).
    /// A config counts as a producer's when `create()` makes a value typed or named as a
    /// producer (`let p: FutureProducer = cfg.create()?`, a `producer` field or binding, a
    /// function returning a producer) or when it sets a producer-only key (`acks`,
    /// `transactional.id`, `linger.ms`, `message.timeout.ms`...), and never `group.id`.
    ///
    /// Also finds, in a function that runs a producer transaction (`begin_transaction`,
    /// `commit_transaction`), a consumer offset committed on its own (`commit_message`,
    /// `commit_consumer_state`, `store_offset`, `commit(.., CommitMode::..)`) when the
    /// function never calls `send_offsets_to_transaction`.
    ///
    /// ### Why is this bad?
    /// librdkafka retries a produce request whose answer was lost: without idempotence the
    /// broker appends the message again, so a consumed message becomes two produced ones (and
    /// order within a partition can change). With `enable.idempotence=true` the broker drops
    /// the retry by its producer id and sequence number; that requires `acks=all`.
    ///
    /// In a transactional consume-transform-produce loop, the consumer's offset must be
    /// committed inside the producer transaction (`send_offsets_to_transaction`): committed
    /// apart, a crash between the two either re-processes a message whose output is already
    /// committed or skips one whose output was aborted.
    ///
    /// ### Known problems
    /// A config that starts from another value (a `ClientConfig` passed in or read from a
    /// file) may carry the keys the source does not show, and is not reported; nor is a key
    /// set from a variable. Whether the producer writes what was consumed is read at the
    /// level of the package: a package that consumes from Kafka anywhere counts. A
    /// producer whose duplicates are harmless (metrics, logs) is reported all the same:
    /// allow the finding on its line.
    ///
    /// ### Example
    /// ```rust
    /// let producer: FutureProducer = ClientConfig::new()
    ///     .set("bootstrap.servers", brokers)
    ///     .set("acks", "1")
    ///     .create()?;
    /// ```
    ///
    /// ### Use instead
    /// ```rust
    /// let producer: FutureProducer = ClientConfig::new()
    ///     .set("bootstrap.servers", brokers)
    ///     .set("enable.idempotence", "true")
    ///     .set("acks", "all")
    ///     .create()?;
    /// ```
    pub KAFKA_PRODUCER_NOT_IDEMPOTENT, "kafka_producer_not_idempotent", Allow,
    "an rdkafka producer without idempotence, or consumer offsets committed outside its transaction"
}

/// Keys only a producer reads.
const PRODUCER_KEYS: &[&str] = &[
    "acks",
    "request.required.acks",
    "transactional.id",
    "linger.ms",
    "queue.buffering.max.ms",
    "message.timeout.ms",
    "delivery.timeout.ms",
    "batch.size",
    "batch.num.messages",
    "compression.type",
    "compression.codec",
    "message.send.max.retries",
    "retries",
    "enable.idempotence",
];

/// Calls that commit or store a consumer offset apart from a producer transaction.
const OFFSET_COMMITS: &[&str] = &[
    "commit_message",
    "commit_consumer_state",
    "store_offset",
    "store_offset_from_message",
    "store_offsets",
];

pub fn check(cx: &mut LintContext<'_>) {
    let package = cx.package;
    let consumes = consumes_kafka(package);
    let mut findings = Vec::new();
    for (file, f) in package.fns().filter(|(_, f)| !f.in_test) {
        let Some(body) = &f.body else { continue };
        if consumes {
            findings.extend(producer_configs(file, f, body));
        }
        findings.extend(offsets_outside_transaction(file, body));
    }
    for finding in findings {
        report(cx, finding);
    }
}

enum Finding {
    /// A producer config without `enable.idempotence=true`; `at` is where a `.set(..)` can
    /// go before an existing one.
    NoIdempotence {
        create: Span,
        root: Span,
        disabled: Option<Span>,
        insert_at: Option<Span>,
    },
    /// `acks` set to a literal other than `all`.
    WeakAcks {
        create: Span,
        value: Span,
    },
    OffsetOutside {
        commit: Span,
        transaction: Span,
    },
}

/// One `.set(key, value)` of a config.
struct Setting<'a> {
    key: String,
    value: &'a Expr,
    step: MethodStep<'a>,
}

fn producer_configs<'a>(file: &FileModel, f: &'a FnDef, body: &'a Block) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut creates = Vec::new();
    body.walk(&mut |e| {
        if let Some(step) = MethodStep::of(e) {
            if matches!(step.method, "create" | "create_with_context") {
                creates.push(step);
            }
        }
    });
    if creates.is_empty() {
        return out;
    }
    let locals = Locals::of_body(body);
    for create in creates {
        let Some(chains) = locals.chains(create.receiver) else {
            continue;
        };
        // The ways the config value itself was built, not the values passed into its setters.
        let chains: Vec<Chain<'_>> = chains
            .into_iter()
            .filter(|c| !c.steps.iter().any(|s| matches!(s, Step::Through(_))))
            .collect();
        // Every way the config was built must start empty: one from elsewhere may hold the key.
        if chains.is_empty() || !chains.iter().all(|c| is_new_config(file, c.root)) {
            continue;
        }
        let roots: Vec<Span> = chains.iter().map(|c| c.root.span).collect();
        let settings = settings_of(body, &locals, &chains, &roots);
        if settings
            .iter()
            .any(|s| s.value.as_str_lit().is_none() && is_idempotence_key(&s.key))
            || settings.iter().any(|s| s.key == "group.id")
        {
            continue;
        }
        if !(makes_producer(file, f, body, create.expr)
            || settings
                .iter()
                .any(|s| PRODUCER_KEYS.contains(&s.key.as_str())))
        {
            continue;
        }
        let lit = |key: &str| {
            settings
                .iter()
                .filter(|s| s.key == key)
                .filter_map(|s| s.value.as_str_lit().map(|v| (v.trim().to_lowercase(), s)))
                .next_back()
        };
        if settings.iter().any(|s| s.key == "transactional.id") {
            continue;
        }
        match lit("enable.idempotence") {
            Some((v, _)) if v == "true" => {
                if let Some((acks, s)) = lit("acks").or_else(|| lit("request.required.acks")) {
                    if acks != "all" && acks != "-1" {
                        out.push(Finding::WeakAcks {
                            create: create.call_span(),
                            value: s.value.span,
                        });
                    }
                }
            }
            disabled => out.push(Finding::NoIdempotence {
                create: create.call_span(),
                root: chains[0].root.span,
                disabled: disabled.map(|(_, s)| s.value.span),
                insert_at: settings.first().map(|s| s.step.receiver.span),
            }),
        }
    }
    out
}

fn is_idempotence_key(key: &str) -> bool {
    matches!(
        key,
        "enable.idempotence" | "acks" | "request.required.acks" | "transactional.id"
    )
}

/// `ClientConfig::new()` or `ClientConfig::default()`: a config with nothing set.
fn is_new_config(file: &FileModel, e: &Expr) -> bool {
    called_path(e).is_some_and(|p| {
        path_ends_with_in(file, p, &["ClientConfig", "new"])
            || path_ends_with_in(file, p, &["ClientConfig", "default"])
    })
}

/// The `.set(key, value)` calls applied to the config: in its chains, and as statements on
/// a variable holding it (`cfg.set(..);`).
fn settings_of<'a>(
    body: &'a Block,
    locals: &Locals<'a>,
    chains: &[Chain<'a>],
    roots: &[Span],
) -> Vec<Setting<'a>> {
    let mut steps: Vec<MethodStep<'a>> = chains
        .iter()
        .flat_map(|c| c.methods().copied().collect::<Vec<_>>())
        .filter(|m| m.method == "set")
        .collect();
    body.walk(&mut |e| {
        let Some(step) = MethodStep::of(e).filter(|m| m.method == "set") else {
            return;
        };
        if steps.iter().any(|s| s.expr.span == e.span) {
            return;
        }
        let on_config = locals.chains(step.receiver).is_some_and(|cs| {
            cs.iter().any(|c| {
                roots.contains(&c.root.span)
                    && !c.steps.iter().any(|s| matches!(s, Step::Through(_)))
            })
        });
        if on_config {
            steps.push(step);
        }
    });
    steps.sort_by_key(|s| s.expr.span.lo);
    steps
        .into_iter()
        .filter_map(|step| {
            let [key, value] = step.args else { return None };
            Some(Setting {
                key: key.as_str_lit()?.trim().to_owned(),
                value,
                step,
            })
        })
        .collect()
}

/// Whether the value `create` makes is a producer: typed, named or returned as one.
fn makes_producer(file: &FileModel, f: &FnDef, body: &Block, create: &Expr) -> bool {
    let producer_type = |t: &crate::model::ir::Type| {
        t.core_path()
            .is_some_and(|p| original_name(file, p.last()).ends_with("Producer"))
    };
    let mut found = false;
    body.walk_lets(&mut |pat, init| {
        if init.is_some_and(|i| i.span.contains(create.span)) {
            found |= pat.ascribed_type().is_some_and(producer_type)
                || pat.simple_name().is_some_and(|n| n.contains("producer"));
        }
    });
    body.walk(&mut |e| {
        if let ExprKind::Struct { fields, .. } = &e.kind {
            found |= fields
                .iter()
                .any(|(name, v)| name.contains("producer") && v.span.contains(create.span));
        }
    });
    let returned = body.tail().is_some_and(|t| t.span.contains(create.span));
    found
        || (returned
            && f.ret
                .as_ref()
                .is_some_and(|t| type_mentions(file, t, "Producer")))
}

/// Whether a type written in `file` names a type ending in `suffix`, through renamed imports.
fn type_mentions(file: &FileModel, t: &crate::model::ir::Type, suffix: &str) -> bool {
    use crate::model::ir::Type;
    match t {
        Type::Path { path, args } => {
            original_name(file, path.last()).ends_with(suffix)
                || args.iter().any(|a| type_mentions(file, a, suffix))
        }
        Type::Ref { inner, .. } => type_mentions(file, inner, suffix),
        Type::Tuple(ts) => ts.iter().any(|a| type_mentions(file, a, suffix)),
        _ => false,
    }
}

/// Whether the package consumes from Kafka: a config with `group.id`, or a consumer type.
fn consumes_kafka(package: &Package) -> bool {
    let consumer = |file: &FileModel, t: &crate::model::ir::Type| {
        type_mentions(file, t, "StreamConsumer") || type_mentions(file, t, "BaseConsumer")
    };
    package.files.iter().any(|file| {
        let consumer = |t: &crate::model::ir::Type| consumer(file, t);
        file.structs
            .iter()
            .any(|s| s.fields.iter().any(|(_, t)| consumer(t)))
            || file.fns.iter().any(|f| {
                f.params.iter().any(|p| consumer(&p.ty))
                    || f.ret.as_ref().is_some_and(consumer)
                    || f.body.as_ref().is_some_and(sets_group_id)
            })
    })
}

fn sets_group_id(body: &Block) -> bool {
    let mut found = false;
    body.walk(&mut |e| {
        if let Some(step) = MethodStep::of(e) {
            found |= step.method == "set"
                && step.args.first().and_then(Expr::as_str_lit) == Some("group.id");
        }
    });
    found
}

/// Offsets committed on their own in a function that runs a producer transaction.
fn offsets_outside_transaction(file: &FileModel, body: &Block) -> Vec<Finding> {
    let mut transaction = None;
    let mut sends_offsets = false;
    let mut commits = Vec::new();
    body.walk(&mut |e| {
        let Some(step) = MethodStep::of(e) else {
            return;
        };
        match step.method {
            "begin_transaction" | "commit_transaction" => {
                transaction.get_or_insert(step.call_span());
            }
            "send_offsets_to_transaction" => sends_offsets = true,
            m if OFFSET_COMMITS.contains(&m) => commits.push(step.call_span()),
            "commit" if step.args.iter().any(|a| names_commit_mode(file, a)) => {
                commits.push(step.call_span())
            }
            _ => {}
        }
    });
    match transaction {
        Some(transaction) if !sends_offsets => commits
            .into_iter()
            .map(|commit| Finding::OffsetOutside {
                commit,
                transaction,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// `CommitMode::Async` and the like: the argument that marks a consumer's `commit`.
fn names_commit_mode(file: &FileModel, e: &Expr) -> bool {
    e.as_path().is_some_and(|p| {
        p.segments
            .iter()
            .any(|s| original_name(file, s) == "CommitMode")
    })
}

fn report(cx: &mut LintContext<'_>, finding: Finding) {
    let lint = &KAFKA_PRODUCER_NOT_IDEMPOTENT;
    match finding {
        Finding::NoIdempotence {
            create,
            root,
            disabled,
            insert_at,
        } => {
            let message = if disabled.is_some() {
                "producer created with idempotence turned off, so a retried send can write \
                 the message twice"
            } else {
                "producer created without `enable.idempotence`, so a retried send can write \
                 the message twice"
            };
            cx.span_lint(lint, create, message, |d| {
                d.primary_label("producer created here");
                d.span_label(root, "config built here");
                if let Some(v) = disabled {
                    d.span_label(v, "idempotence turned off here");
                }
                d.help("set `enable.idempotence` to `true` (it needs `acks=all`)");
                match (disabled, insert_at) {
                    (Some(v), _) => {
                        d.suggest(
                            "turn idempotence on",
                            v,
                            "\"true\"",
                            Applicability::MaybeIncorrect,
                        );
                    }
                    (None, Some(at)) => {
                        d.suggest(
                            "set `enable.idempotence`",
                            at.shrink_to_hi(),
                            ".set(\"enable.idempotence\", \"true\")",
                            Applicability::MaybeIncorrect,
                        );
                    }
                    (None, None) => {}
                }
            });
        }
        Finding::WeakAcks { create, value } => {
            let message = "idempotent producer with `acks` other than `all`";
            cx.span_lint(lint, value, message, |d| {
                d.primary_label("`acks` set here");
                d.span_label(create, "producer created here");
                d.note("librdkafka refuses `enable.idempotence=true` without `acks=all`");
                d.suggest(
                    "acknowledge by all in-sync replicas",
                    value,
                    "\"all\"",
                    Applicability::MaybeIncorrect,
                );
            });
        }
        Finding::OffsetOutside {
            commit,
            transaction,
        } => {
            let message = "consumer offset committed outside the producer transaction";
            cx.span_lint(lint, commit, message, |d| {
                d.primary_label("committed on its own");
                d.span_label(transaction, "the producer transaction");
                d.help(
                    "send the offsets with `producer.send_offsets_to_transaction(..)` before \
                     `commit_transaction`, so output and offset commit or abort together",
                );
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    fn lint(src: &str) -> Vec<(usize, String)> {
        let package = testing::package("app", &["rdkafka"], &[("crate", src)]);
        crate::check_package(&package, &Default::default(), &|l| {
            l == &KAFKA_PRODUCER_NOT_IDEMPOTENT
        })
        .into_iter()
        .map(|d| (testing::line_of(src, d.span.lo), d.message))
        .collect()
    }

    const CONSUMER: &str = "fn consumer() -> StreamConsumer {\n    \
                            ClientConfig::new().set(\"group.id\", \"g\").create().unwrap()\n}\n";

    #[test]
    fn a_producer_without_idempotence_is_reported_only_where_kafka_is_consumed() {
        let producer = "fn producer() {\n    \
                        let p: FutureProducer = ClientConfig::new().set(\"a\", \"b\").create().unwrap();\n}\n";
        assert!(lint(producer).is_empty());
        let both = format!("{CONSUMER}{producer}");
        let got = lint(&both);
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].0, 5);
    }

    #[test]
    fn a_consumer_in_a_file_that_names_no_config_counts() {
        // Only the producer's file names a `ClientConfig`; the consumer is a parameter type.
        let producer = "fn producer() {\n    \
                        let p: FutureProducer = ClientConfig::new().set(\"a\", \"b\").create().unwrap();\n}\n";
        let consumer = "fn run(c: StreamConsumer) { c.subscribe(&[\"t\"]).unwrap(); }\n";
        let package = testing::package(
            "app",
            &["rdkafka"],
            &[("crate", producer), ("crate::consume", consumer)],
        );
        let found = crate::check_package(&package, &Default::default(), &|l| {
            l == &KAFKA_PRODUCER_NOT_IDEMPOTENT
        });
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(testing::line_of(producer, found[0].span.lo), 2);
    }

    #[test]
    fn idempotence_or_a_transactional_id_is_enough() {
        for set in [
            ".set(\"enable.idempotence\", \"true\")",
            ".set(\"transactional.id\", \"t\")",
        ] {
            let src = format!(
                "{CONSUMER}fn producer() {{\n    \
                 let p: FutureProducer = ClientConfig::new(){set}.create().unwrap();\n}}\n"
            );
            assert!(lint(&src).is_empty(), "{set}");
        }
    }

    #[test]
    fn statements_on_the_config_variable_count() {
        let src = format!(
            "{CONSUMER}fn producer() {{\n    let mut cfg = ClientConfig::new();\n    \
             cfg.set(\"enable.idempotence\", \"true\");\n    cfg.set(\"acks\", \"1\");\n    \
             let producer: BaseProducer = cfg.create().unwrap();\n}}\n"
        );
        let got = lint(&src);
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(got[0].1.contains("`acks`"), "{got:?}");
    }
}
