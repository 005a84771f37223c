//! Whether a package has anything the store and key lints could find, decided before the
//! call graph and the summaries are built: most crates a workspace lints (runtimes,
//! compilers, utilities) have neither a store operation nor an idempotency key, and on them
//! those two structures cost more than parsing.
//!
//! Public API:
//! - [`may_find`]`(package, settings)`: false only when no function of the package
//!   can perform a store operation or use an idempotency key, so `nondeterministic_key`,
//!   `check_then_act`, `unguarded_entry_point` and `mark_outside_transaction` cannot report
//!   anything ([`crate::lints::LintPass::relevant`]).
//! - [`store_crates_named`]`(text)`: the store crates a file names, computed when it is
//!   lowered and kept in its model ([`crate::model::FileModel::store_crates`]);
//!   [`file_may_find`]`(file)`: whether its fns hold a key or a store operation known by
//!   name, computed the first time a package that names no store crate asks, and kept in the
//!   model ([`crate::model::FileModel::may_find`]): a package that depends on a store crate
//!   never walks its bodies for it.
//!
//! `missing_idempotency_token` reads neither structure and has its own per-fn filter; it and
//! `parse_error` always run.
//!
//! The lints that read sends and client configs rather than store operations: a
//! `kafka_producer_not_idempotent` finding starts at a `ClientConfig` or a producer
//! transaction written in the function, which a substring search of the text finds
//! ([`mentions_in`], kept in [`crate::model::FileModel::mentions`]; [`may_find_kafka`]).
//! `retry_without_backoff` starts from loops, which nearly every file has, and
//! `dead_letter_without_context` from any send whose destination holds a dead-letter word in
//! any case (a literal with `failed` is one): a search for those, case ignored, cost more
//! than the pass (measured on tokio), so both always run, with one walk of each body.
//!
//! The test is a necessary condition of every fact those lints start from, never a guess:
//! - a Redis, DynamoDB, SQL or session store operation needs a dependency on the store's crate,
//!   or a path or type of it written in the package ([`super::store_ops::classify`]), and a
//!   crate name can only enter a path as its first segment, followed by `::`, or in a `use`
//!   (`use redis;`, `use {redis, ..}`, `use redis as r`) or an `extern crate`;
//! - a store known by name is a call of a catalogued check or mark with an argument (and a
//!   key-like one for the common words) ([`super::store_ops::named_op`]);
//! - an idempotency key is `#[idempotent]`, a binding, field or setter named like a key, a
//!   Step Functions `start_execution`, a payment SDK's keyed strategy (a call of a path
//!   ending in its variant, `Idempotent(..)`), or an `Idempotency-Key` header, whose name
//!   the walk reads from literals of the package (a string literal, a constant, an included
//!   file) that hold the word `idempotency` or are one of the catalog's key headers
//!   (`PayPal-Request-Id`, `Nats-Msg-Id`);
//! - configured check, mark, guard and key names can be anything, so with any configured the
//!   answer is always true.
//!
//! The test over the UI fixtures (`lints/tests/relevance.rs`) checks, fact by fact, that every
//! store operation and key use the walks find is one this test would have seen.

use super::store_ops::is_key_like;
use crate::catalog::store_crates::store_crates;
pub use crate::catalog::store_crates::{mentions_in, store_crates_named, Mentions};
use crate::catalog::{contains_ignore_ascii_case, Catalog};
use crate::model::ir::{Expr, ExprKind, Lit, Pat};
use crate::model::{FileModel, FnDef, Package};
use crate::settings::Settings;
use std::sync::OnceLock;

/// Whether `kafka_producer_not_idempotent` may report in the package: some file names a
/// `ClientConfig` or a producer transaction.
pub fn may_find_kafka(package: &Package, _: &Settings) -> bool {
    package.files.iter().any(|f| f.mentions.kafka)
}

/// Whether the package may hold a store operation or an idempotency key (see the module
/// docs).
pub fn may_find(package: &Package, settings: &Settings) -> bool {
    configures_names(settings)
        || names_a_store_crate(package)
        || package
            .files
            .iter()
            .any(|f| file_may_find(f) || includes_header_text(f))
}

/// Whether the package depends on a store crate or names one where a path can start: without
/// either, no call is a Redis, DynamoDB, SQL or session store operation.
pub fn names_a_store_crate(package: &Package) -> bool {
    store_crates().any(|k| package.depends_on(k))
        || package.files.iter().any(|f| !f.store_crates.is_empty())
}

/// Names from the configuration extend what is a store, a key or a guard.
fn configures_names(settings: &Settings) -> bool {
    !(settings.nondeterministic_key.key_names.is_empty()
        && settings.check_then_act.checks.is_empty()
        && settings.check_then_act.marks.is_empty()
        && settings.unguarded_entry_point.guards.is_empty()
        && settings.mark_outside_transaction.marks.is_empty()
        && settings.non_idempotent_update.increments.is_empty()
        && settings.key_without_stage.claims.is_empty()
        && settings.models.is_empty())
}

/// Whether a fn of `file` may hold a key sink or a store operation known by name, by the
/// built-in catalogs (configured names make every package relevant anyway), or a constant
/// holds header text; kept in [`crate::model::FileModel::may_find`] once asked.
pub fn file_may_find(file: &FileModel) -> bool {
    *file.may_find.get_or_init(|| lowered_file_may_find(file))
}

/// [`file_may_find`], computed anew.
pub fn lowered_file_may_find(file: &FileModel) -> bool {
    static BUILT_IN: OnceLock<Catalog> = OnceLock::new();
    let catalog = BUILT_IN.get_or_init(Catalog::default);
    file.fns.iter().any(|f| fn_may_find(f, catalog))
        || file.consts.iter().any(|c| mentions_header(&c.value))
}

/// The texts of `include_str!` are attached after lowering.
fn includes_header_text(file: &FileModel) -> bool {
    file.includes
        .iter()
        .any(|i| i.text.as_deref().is_some_and(names_idempotency))
}

/// Whether `f` itself may hold a key sink or a store operation known by name.
pub fn fn_may_find(f: &FnDef, catalog: &Catalog) -> bool {
    if f.has_attr("idempotent") {
        return true;
    }
    let binds_key = |p: &Pat| {
        p.bindings()
            .iter()
            .any(|(name, _)| catalog.sinks.is_key_name(name))
    };
    if f.params.iter().any(|p| binds_key(&p.pat)) {
        return true;
    }
    let Some(body) = &f.body else {
        return false;
    };
    let mut found = false;
    body.walk(&mut |e| found = found || expr_may_find(e, catalog));
    if !found {
        body.walk_pats(&mut |p| found = found || binds_key(p));
    }
    found
}

/// The sinks and named operations one expression can be, by its own names and literals.
fn expr_may_find(e: &Expr, catalog: &Catalog) -> bool {
    let key_name = |n: &str| catalog.sinks.is_key_name(n);
    match &e.kind {
        ExprKind::MethodCall { method, args, .. } => {
            key_name(method)
                || catalog.sinks.token_setter(method).is_some()
                || method == "start_execution"
                || names_store_op(catalog, method, args)
        }
        ExprKind::Call { func, args } => func.as_path().is_some_and(|p| {
            names_store_op(catalog, p.last(), args) || catalog.sinks.is_keyed_variant(p.last())
        }),
        ExprKind::Path(p) => p.as_ident().is_some_and(key_name),
        ExprKind::Field { member, .. } => key_name(member),
        ExprKind::Struct { fields, .. } => fields.iter().any(|(name, _)| key_name(name)),
        ExprKind::Lit(Lit::Str(s)) => names_idempotency(s),
        _ => false,
    }
}

/// A call that [`super::store_ops::named_op`] could take for a check or a mark: a catalogued
/// name with an argument, a key-like one for the common words (the receiver is not looked
/// at: its type is not known here).
fn names_store_op(catalog: &Catalog, name: &str, args: &[Expr]) -> bool {
    let names = &catalog.store_names;
    names.find(name).is_some()
        && !args.is_empty()
        && (!names.is_common(name) || args.iter().any(is_key_like))
}

/// A constant's value that holds header text.
fn mentions_header(e: &Expr) -> bool {
    let mut found = false;
    e.walk(&mut |x| {
        found = found || matches!(&x.kind, ExprKind::Lit(Lit::Str(s)) if names_idempotency(s))
    });
    found
}

/// Every idempotency header name (`Idempotency-Key`, `X-Idempotency-Key`) is built from text
/// holding this word, but the catalog's other key headers (`PayPal-Request-Id`,
/// `Nats-Msg-Id`), which are written whole.
fn names_idempotency(text: &str) -> bool {
    static BUILT_IN: OnceLock<Catalog> = OnceLock::new();
    contains_ignore_ascii_case(text.as_bytes(), b"idempotenc")
        || BUILT_IN
            .get_or_init(Catalog::default)
            .sinks
            .is_idempotency_header(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::package;

    #[test]
    fn store_crates_count_only_where_a_path_can_start() {
        for (text, names) in [
            ("use redis::AsyncCommands;", &["redis"][..]),
            ("fn f() { let c = redis::Client::open(u); }", &["redis"]),
            ("extern crate redis as r;", &["redis"]),
            ("use {redis, std::fmt};", &["redis"]),
            ("use sqlx;", &["sqlx"]),
            (
                "fn f(c: &mut deadpool_redis::Connection) {}",
                &["deadpool_redis"],
            ),
            ("fn f() { redis\n    ::cmd(\"SET\"); }", &["redis"]),
            ("fn f() { redis /* why */ ::cmd(\"SET\"); }", &["redis"]),
            (
                "use aws_sdk_dynamodb::Client; use sqlx::PgPool;",
                &["aws_sdk_dynamodb", "sqlx"],
            ),
            ("use r#redis::Cmd;", &["redis"]),
            (
                "//! [mini-redis]: https://github.com/tokio-rs/mini-redis/blob/x",
                &[],
            ),
            ("fn f() { let redis = pool.get(); redis.get(k) }", &[]),
            ("fn f() { let x = redisx::new(); fredis::x(); }", &[]),
            ("fn f() { connect(\"redis://127.0.0.1/\"); }", &[]),
            ("/// see postgres-types or the redis crate", &[]),
        ] {
            assert_eq!(store_crates_named(text), names, "{text}");
        }
    }

    fn finds(deps: &[&str], src: &str) -> bool {
        let p = package("p", deps, &[("crate", src)]);
        may_find(&p, &Settings::default())
    }

    #[test]
    fn code_without_stores_or_keys_has_nothing_to_find() {
        // What a runtime or a compiler writes: the words, none of the facts.
        let src = "
            // Sealing is idempotent; see the mini-redis example.
            fn exists(path: &Path) -> bool { path.exists() }
            fn note(seen: &mut HashSet<u32>, x: u32) -> bool { seen.insert(x) }
            fn set(state: &AtomicUsize) { state.store(1, Ordering::SeqCst) }
            fn log(span: Span) { record(span); tracing::record(\"redis://x\".len()); }
            fn key(map: &HashMap<u32, u32>, k: u32) -> Option<&u32> { map.get(&k) }
        ";
        assert!(!finds(&["tokio"], src));
    }

    #[test]
    fn each_kind_of_fact_makes_a_package_relevant() {
        for (deps, src) in [
            (&["redis"][..], "fn f() {}"),
            (&[], "use redis::AsyncCommands; fn f() {}"),
            (
                &[],
                "#[idempotent(key = req.id)] async fn charge(req: Req) {}",
            ),
            (&[], "fn f() { let idempotency_key = Uuid::new_v4(); }"),
            (&[], "fn f(dedupe_key: String) {}"),
            (
                &[],
                "fn f(c: Client) { c.create_bucket().client_token(t).send(); }",
            ),
            (
                &[],
                "fn f(r: Req, k: String) { r.header(\"Idempotency-Key\", k); }",
            ),
            (&[], "const H: &str = \"X-Idempotency-Key\"; fn f() {}"),
            (
                &[],
                "fn f(store: &dyn Store, m: Msg) -> bool { store.is_processed(&m.id) }",
            ),
            (
                &[],
                "fn f(store: &Db, m: Msg) -> bool { store.exists(&m.event_id) }",
            ),
            (&[], "fn f(c: Sfn) { c.start_execution().name(n).send(); }"),
            (
                &[],
                "fn f(o: Order) -> Req { Req { idempotency_token: o.id } }",
            ),
        ] {
            assert!(finds(deps, src), "{src}");
        }
    }

    #[test]
    fn the_kafka_lint_is_relevant_where_its_words_are_written() {
        for (text, kafka) in [
            ("fn f() { let c = ClientConfig::new(); }", true),
            (
                "fn f() { let c = rdkafka::config::ClientConfig::default(); }",
                true,
            ),
            ("fn f(p: &P) { p.begin_transaction().unwrap(); }", true),
            ("fn f(p: &P) { p.commit_transaction(t).unwrap(); }", true),
            // What other code writes: configs, transactions of other names, sends.
            (
                "fn f(tx: Sender<u8>) { let c = Config::new(); db.begin().await; tx.send(1); }",
                false,
            ),
            (
                "fn f(c: &mut Conn) { c.transaction(|t| t.commit()); }",
                false,
            ),
        ] {
            assert_eq!(mentions_in(text), Mentions { kafka }, "{text}");
            let p = package("p", &[], &[("crate", text)]);
            assert_eq!(may_find_kafka(&p, &Settings::default()), kafka, "{text}");
        }
    }

    #[test]
    fn configured_names_make_every_package_relevant() {
        let p = package("p", &[], &[("crate", "fn f() {}")]);
        let mut settings = Settings::default();
        assert!(!may_find(&p, &settings));
        settings.unguarded_entry_point.guards = vec!["claim".into()];
        assert!(may_find(&p, &settings));
    }
}
