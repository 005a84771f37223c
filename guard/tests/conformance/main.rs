//! The `Store` contract and the guard's behaviour, one test per rule, run against every store:
//! memory, Redis, PostgreSQL, (feature `redis-cluster`) Redis Cluster, (feature `sqlite`) SQLite,
//! (feature `mysql`) MySQL/MariaDB and (feature `dynamodb`) DynamoDB, on real servers (see
//! `tests/common`; DynamoDB is a local moto server, the cluster the six local nodes `.ci/run`
//! starts, SQLite a file per test, MariaDB a database per test).

#[path = "../common/mod.rs"]
mod common;
mod rules;

/// Generates one `#[tokio::test]` per rule for a store. `$make` is an async expression of the
/// test's name giving a fresh store.
macro_rules! conformance_suite {
    ($store:ident, $make:expr, [$($rule:ident),* $(,)?]) => {
        mod $store {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $rule() {
                    let name = concat!(stringify!($store), "_", stringify!($rule));
                    let store = ($make)(name).await;
                    rules::$rule(store, &common::unique(name)).await;
                }
            )*
        }
    };
}

macro_rules! all_stores {
    ($($rule:ident),* $(,)?) => {
        conformance_suite!(memory, |_: &'static str| async { common::memory_store() }, [$($rule),*]);
        conformance_suite!(redis, |_: &'static str| async { common::redis_store().await }, [$($rule),*]);
        #[cfg(feature = "redis-cluster")]
        conformance_suite!(redis_cluster, |_: &'static str| async {
            common::redis_cluster_store().await
        }, [$($rule),*]);
        conformance_suite!(postgres, |name: &'static str| async move {
            common::postgres_store(&common::pg_schema(name).await).await
        }, [$($rule),*]);
        #[cfg(feature = "sqlite")]
        conformance_suite!(sqlite, |name: &'static str| async move {
            common::sqlite_store(name).await
        }, [$($rule),*]);
        #[cfg(feature = "mysql")]
        conformance_suite!(mysql, |name: &'static str| async move {
            common::mysql_store(name).await
        }, [$($rule),*]);
        #[cfg(feature = "dynamodb")]
        conformance_suite!(dynamodb, |name: &'static str| async move {
            common::dynamodb_store(name).await
        }, [$($rule),*]);
        // A table keyed `PK`/`SK` with every record attribute renamed (issue 39).
        #[cfg(feature = "dynamodb")]
        conformance_suite!(dynamodb_custom_attributes, |name: &'static str| async move {
            common::dynamodb_custom_store(name).await
        }, [$($rule),*]);
    };
}

all_stores!(
    // The Store contract itself.
    reserve_is_exclusive_across_clones,
    completed_results_round_trip,
    expired_lease_is_taken_over_and_fences_the_old_owner,
    expired_retention_is_taken_over,
    other_owner_cannot_write_a_live_record,
    complete_is_idempotent_for_its_owner,
    release_frees_the_key,
    renew_extends_the_lease,
    lapsed_owner_without_takeover_still_completes,
    // The guard over the store.
    replays_results_including_unit_and_none,
    replays_nested_options_and_nan,
    attempt_context_reports_a_takeover,
    lease_is_cut_at_the_callers_deadline,
    composite_keys_do_not_collide,
    payload_mismatch_is_rejected_on_every_path,
    in_flight_duplicate_is_rejected_with_retry_after,
    in_flight_wait_returns_the_first_result,
    in_flight_wait_gives_up_after_its_duration,
    errors_release_by_default,
    cached_errors_are_replayed,
    classifier_releases_transient_and_caches_permanent,
    lease_is_renewed_while_a_long_body_runs,
    stale_owner_cannot_complete_after_takeover,
    panicking_body_leaves_a_record_taken_over_after_the_lease,
    cancelled_body_leaves_a_record_taken_over_after_the_lease,
    missing_key_is_an_error_unless_not_required,
    batch_reports_failed_ids,
    tenant_and_prefix_separate_records,
    attribute_guards_a_method,
);
