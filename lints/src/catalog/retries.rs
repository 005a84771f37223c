//! Retry crates' entry points: the calls that run an operation under a policy, with which
//! argument is the policy. A policy given there is judged for jitter and a cap
//! (`retry_without_backoff`).

/// Retry crates whose policies are judged (built with or without jitter and a cap).
pub const RETRY_CRATES: &[&str] = &["backon", "again", "tokio_retry", "tokio_retry2", "backoff"];

/// tokio-retry's (and tokio-retry2's) runners, as `Type::function`: the policy is the first
/// argument. 0.3.0 spells them `spawn`, 0.3.2 `start`.
pub const TOKIO_RETRY_RUNNERS: &[&[&str]] = &[
    &["Retry", "spawn"],
    &["Retry", "start"],
    &["RetryIf", "spawn"],
    &["RetryIf", "start"],
];
