//! The rules, generic over the store. Each takes a fresh store and a namespace unique to the test.

use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use idem_guard::batch::BatchItem;
use idem_guard::on_error::{Cache, Classified};
use idem_guard::{
    idempotent, Error, Fingerprint, Guard, InFlight, OwnerToken, Rejected, Reservation, Store,
    StoredResult,
};
use serde::Serialize;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::{sleep, sleep_until, Instant};

use crate::common::TestError;

const LEASE: Duration = Duration::from_secs(30);
const SHORT: Duration = Duration::from_millis(300);
const RETENTION: Duration = Duration::from_secs(600);

fn fp(v: &str) -> Fingerprint {
    Fingerprint::of(v).unwrap()
}

fn is_not_owner<T: std::fmt::Debug>(r: Result<T, Error>) -> bool {
    matches!(r, Err(Error::NotOwner { .. }))
}

fn in_progress<T: std::fmt::Debug>(r: &Result<T, Error>) -> Option<Duration> {
    match r {
        Err(Error::Rejected(Rejected::InProgress { retry_after, .. })) => Some(*retry_after),
        _ => None,
    }
}

// No rule assumes a store answers within some time: a step that needs the key reserved waits
// for the body to say it started (`oneshot`), and a check that a record is still live is only
// judged when its answer came before the lease could have ended (`doubling_leases`). A busy
// machine, or moto serving one request at a time, makes the tests slower, not red.

/// Starts a first delivery of `key` that returns 1 once `release` is sent, and returns once its
/// body has started (the key is reserved by then).
async fn hold_first<S: Store + 'static, Pl: Serialize + Send + 'static>(
    guard: &Guard<S>,
    key: &'static str,
    payload: Pl,
) -> (oneshot::Sender<()>, JoinHandle<Result<u32, Error>>) {
    let (release, hold) = oneshot::channel::<()>();
    let (started, has_started) = oneshot::channel();
    let first = tokio::spawn({
        let guard = guard.clone();
        async move {
            guard
                .run(key, &payload, move || async move {
                    started.send(Instant::now()).ok();
                    hold.await.ok();
                    Ok(1)
                })
                .await
        }
    });
    has_started
        .await
        .expect("the first delivery reserves the key and starts its body");
    (release, first)
}

/// Drives a guarded run until its body has started, then drops it mid-way, as a killed worker's
/// future would be. Returns when the body started: the store had taken the reservation by then.
async fn cut_once_started<T: std::fmt::Debug>(
    run: impl Future<Output = T>,
    has_started: oneshot::Receiver<Instant>,
) -> Instant {
    tokio::pin!(run);
    tokio::select! {
        biased;
        out = &mut run => panic!("the run ended before its body started: {out:?}"),
        at = has_started => at.expect("a body sends its start before it ends"),
    }
}

/// Leases to try one after another, doubling from `first` up to 64 times it, each on its own
/// key. That a record is still live can only be checked before its lease can have ended, so a
/// try whose check was answered later proves nothing and the next, longer lease is tried.
fn doubling_leases(first: Duration) -> impl Iterator<Item = (usize, Duration)> {
    (0..7).map(move |i| (i, first * (1 << i)))
}

/// Whether a lease given at `called` or later can have ended by now.
fn lease_may_have_ended(called: Instant, lease: Duration) -> bool {
    called.elapsed() >= lease
}

fn no_lease_was_long_enough(first: Duration) -> ! {
    panic!(
        "the store never answered within the lease, from {first:?} to {:?}",
        first * 64
    )
}

pub async fn reserve_is_exclusive_across_clones<S: Store + 'static>(store: S, ns: &str) {
    let key = format!("{ns}:k");
    let mut tasks = Vec::new();
    for _ in 0..32 {
        let (store, key) = (store.clone(), key.clone());
        tasks.push(tokio::spawn(async move {
            store
                .reserve(&key, fp("p"), &OwnerToken::generate(), LEASE)
                .await
        }));
    }
    let (mut acquired, mut busy) = (0, 0);
    for t in tasks {
        match t.await.unwrap().unwrap() {
            Reservation::Acquired => acquired += 1,
            Reservation::InProgress {
                fingerprint,
                retry_after,
            } => {
                assert_eq!(fingerprint, fp("p"));
                assert!(
                    retry_after <= LEASE && retry_after > LEASE / 2,
                    "{retry_after:?}"
                );
                busy += 1;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!((acquired, busy), (1, 31));
}

pub async fn completed_results_round_trip<S: Store>(store: S, ns: &str) {
    let results = [
        StoredResult::Ok(r#"{"text":"a|b|c ünï","n":[1,2]}"#.into()),
        StoredResult::Ok(String::new()),
        StoredResult::Err(r#"{"Failed":"declined"}"#.into()),
        StoredResult::Unreplayable("could not encode".into()),
    ];
    for (i, result) in results.iter().enumerate() {
        let key = format!("{ns}:{i}");
        let owner = OwnerToken::generate();
        assert_eq!(
            store
                .reserve(&key, fp("first"), &owner, LEASE)
                .await
                .unwrap(),
            Reservation::Acquired
        );
        // The fingerprint of the reservation is kept, whatever `complete` is given.
        store
            .complete(&key, fp("other"), &owner, result, RETENTION)
            .await
            .unwrap();
        let found = store
            .reserve(&key, fp("second"), &OwnerToken::generate(), LEASE)
            .await
            .unwrap();
        assert_eq!(
            found,
            Reservation::Completed {
                fingerprint: fp("first"),
                result: result.clone()
            }
        );
    }
}

pub async fn expired_lease_is_taken_over_and_fences_the_old_owner<S: Store>(store: S, ns: &str) {
    let key = format!("{ns}:k");
    let (a, b) = (OwnerToken::generate(), OwnerToken::generate());
    assert_eq!(
        store.reserve(&key, fp("p"), &a, SHORT).await.unwrap(),
        Reservation::Acquired
    );
    sleep(SHORT + Duration::from_millis(150)).await;
    // The takeover may come with another payload: an expired record is as good as absent. It is
    // reported as a takeover: an earlier attempt started and never finished.
    assert_eq!(
        store.reserve(&key, fp("q"), &b, LEASE).await.unwrap(),
        Reservation::TakenOver
    );
    let done = StoredResult::Ok("1".into());
    assert!(is_not_owner(
        store.complete(&key, fp("p"), &a, &done, RETENTION).await
    ));
    assert!(is_not_owner(store.release(&key, &a).await));
    assert!(is_not_owner(store.renew(&key, fp("p"), &a, LEASE).await));
    let found = store
        .reserve(&key, fp("q"), &OwnerToken::generate(), LEASE)
        .await
        .unwrap();
    assert!(matches!(found, Reservation::InProgress { fingerprint, .. } if fingerprint == fp("q")));
    store
        .complete(&key, fp("q"), &b, &StoredResult::Ok("2".into()), RETENTION)
        .await
        .unwrap();
    let found = store
        .reserve(&key, fp("q"), &OwnerToken::generate(), LEASE)
        .await
        .unwrap();
    assert_eq!(
        found,
        Reservation::Completed {
            fingerprint: fp("q"),
            result: StoredResult::Ok("2".into())
        }
    );
}

pub async fn expired_retention_is_taken_over<S: Store>(store: S, ns: &str) {
    for (i, retention) in doubling_leases(SHORT) {
        let key = format!("{ns}:k{i}");
        let a = OwnerToken::generate();
        store.reserve(&key, fp("p"), &a, LEASE).await.unwrap();
        let called = Instant::now();
        store
            .complete(&key, fp("p"), &a, &StoredResult::Ok("1".into()), retention)
            .await
            .unwrap();
        let completed = Instant::now();
        let found = store
            .reserve(&key, fp("p"), &OwnerToken::generate(), LEASE)
            .await
            .unwrap();
        if lease_may_have_ended(called, retention) {
            continue;
        }
        assert!(matches!(found, Reservation::Completed { .. }), "{found:?}");
        // The store counted the retention from a moment before `complete` answered.
        sleep_until(completed + retention + Duration::from_millis(150)).await;
        assert_eq!(
            store
                .reserve(&key, fp("z"), &OwnerToken::generate(), LEASE)
                .await
                .unwrap(),
            Reservation::Acquired
        );
        return;
    }
    no_lease_was_long_enough(SHORT)
}

pub async fn other_owner_cannot_write_a_live_record<S: Store>(store: S, ns: &str) {
    let key = format!("{ns}:k");
    let (a, b) = (OwnerToken::generate(), OwnerToken::generate());
    store.reserve(&key, fp("p"), &a, LEASE).await.unwrap();
    assert!(is_not_owner(
        store
            .complete(&key, fp("p"), &b, &StoredResult::Ok("1".into()), RETENTION)
            .await
    ));
    assert!(is_not_owner(store.release(&key, &b).await));
    assert!(is_not_owner(store.renew(&key, fp("p"), &b, LEASE).await));
    assert!(matches!(
        store.reserve(&key, fp("p"), &b, LEASE).await.unwrap(),
        Reservation::InProgress { .. }
    ));
    store
        .complete(&key, fp("p"), &a, &StoredResult::Ok("1".into()), RETENTION)
        .await
        .unwrap();
    // Nor can it overwrite or delete a completed one.
    assert!(is_not_owner(
        store
            .complete(&key, fp("p"), &b, &StoredResult::Ok("2".into()), RETENTION)
            .await
    ));
    assert!(is_not_owner(store.release(&key, &b).await));
    let found = store.reserve(&key, fp("p"), &b, LEASE).await.unwrap();
    assert_eq!(
        found,
        Reservation::Completed {
            fingerprint: fp("p"),
            result: StoredResult::Ok("1".into())
        }
    );
}

pub async fn complete_is_idempotent_for_its_owner<S: Store>(store: S, ns: &str) {
    let key = format!("{ns}:k");
    let a = OwnerToken::generate();
    store.reserve(&key, fp("p"), &a, LEASE).await.unwrap();
    let done = StoredResult::Ok("7".into());
    store
        .complete(&key, fp("p"), &a, &done, RETENTION)
        .await
        .unwrap();
    // A retry whose first reply was lost.
    store
        .complete(&key, fp("p"), &a, &done, RETENTION)
        .await
        .unwrap();
    // Renewing or releasing a completed record changes nothing.
    store.renew(&key, fp("p"), &a, LEASE).await.unwrap();
    store.release(&key, &a).await.unwrap();
    let found = store
        .reserve(&key, fp("p"), &OwnerToken::generate(), LEASE)
        .await
        .unwrap();
    assert_eq!(
        found,
        Reservation::Completed {
            fingerprint: fp("p"),
            result: done
        }
    );
}

pub async fn release_frees_the_key<S: Store>(store: S, ns: &str) {
    let key = format!("{ns}:k");
    let a = OwnerToken::generate();
    store.reserve(&key, fp("p"), &a, LEASE).await.unwrap();
    store.release(&key, &a).await.unwrap();
    store.release(&key, &a).await.unwrap();
    store
        .release(&format!("{ns}:never-reserved"), &a)
        .await
        .unwrap();
    assert_eq!(
        store
            .reserve(&key, fp("p"), &OwnerToken::generate(), LEASE)
            .await
            .unwrap(),
        Reservation::Acquired
    );
}

pub async fn renew_extends_the_lease<S: Store>(store: S, ns: &str) {
    let key = format!("{ns}:k");
    let a = OwnerToken::generate();
    store.reserve(&key, fp("p"), &a, SHORT).await.unwrap();
    sleep(SHORT / 2).await;
    store.renew(&key, fp("p"), &a, LEASE).await.unwrap();
    sleep(SHORT).await;
    let found = store
        .reserve(&key, fp("p"), &OwnerToken::generate(), LEASE)
        .await
        .unwrap();
    assert!(
        matches!(found, Reservation::InProgress { retry_after, .. } if retry_after > LEASE / 2),
        "{found:?}"
    );
}

pub async fn lapsed_owner_without_takeover_still_completes<S: Store>(store: S, ns: &str) {
    let key = format!("{ns}:k");
    let a = OwnerToken::generate();
    store
        .reserve(&key, fp("p"), &a, Duration::from_millis(100))
        .await
        .unwrap();
    sleep(Duration::from_millis(250)).await;
    store.renew(&key, fp("p"), &a, LEASE).await.unwrap();
    store
        .complete(&key, fp("p"), &a, &StoredResult::Ok("1".into()), RETENTION)
        .await
        .unwrap();
    let found = store
        .reserve(&key, fp("p"), &OwnerToken::generate(), LEASE)
        .await
        .unwrap();
    assert_eq!(
        found,
        Reservation::Completed {
            fingerprint: fp("p"),
            result: StoredResult::Ok("1".into())
        }
    );
}

pub async fn replays_results_including_unit_and_none<S: Store>(store: S, ns: &str) {
    let guard = Guard::new(store).prefix(ns.to_owned());
    let runs = AtomicU32::new(0);
    let body = |v: u32| {
        runs.fetch_add(1, Ordering::SeqCst);
        async move { Ok::<_, Error>(v) }
    };
    assert_eq!(guard.run("n", &1, || body(5)).await.unwrap(), 5);
    let replay = guard.run_outcome("n", &1, || body(6)).await.unwrap();
    assert!(replay.is_replay());
    assert_eq!(replay.into_inner(), 5);

    let unit = |_: ()| {
        runs.fetch_add(1, Ordering::SeqCst);
        async { Ok::<(), Error>(()) }
    };
    guard.run("unit", &1, || unit(())).await.unwrap();
    assert!(guard
        .run_outcome("unit", &1, || unit(()))
        .await
        .unwrap()
        .is_replay());

    let none = |v: Option<String>| {
        runs.fetch_add(1, Ordering::SeqCst);
        async move { Ok::<_, Error>(v) }
    };
    assert_eq!(guard.run("none", &1, || none(None)).await.unwrap(), None);
    let replay = guard
        .run_outcome("none", &1, || none(Some("x".into())))
        .await
        .unwrap();
    assert_eq!((replay.is_replay(), replay.into_inner()), (true, None));
    assert_eq!(runs.load(Ordering::SeqCst), 3);
}

/// The body learns its key (the same on every delivery) and whether it took over an attempt
/// that was abandoned (here: its future dropped mid-way, as a killed worker's would be).
pub async fn attempt_context_reports_a_takeover<S: Store>(store: S, ns: &str) {
    let guard = Guard::new(store)
        .prefix(ns.to_owned())
        .lease(SHORT)
        .renew_lease(false);
    let seen = std::sync::Mutex::new(Vec::new());
    let (started, has_started) = oneshot::channel();
    let started = cut_once_started(
        guard.run_with("k", &(), |attempt| {
            seen.lock().unwrap().push(attempt);
            started.send(Instant::now()).ok();
            async {
                sleep(Duration::from_secs(30)).await;
                Ok::<u32, Error>(1)
            }
        }),
        has_started,
    )
    .await;
    sleep_until(started + SHORT + Duration::from_millis(150)).await;
    let record = |attempt: idem_guard::Attempt| {
        seen.lock().unwrap().push(attempt);
        async { Ok::<u32, Error>(2) }
    };
    assert_eq!(guard.run_with("k", &(), record).await.unwrap(), 2);
    // A duplicate replays; its body never runs, so it sees no attempt.
    assert_eq!(guard.run_with("k", &(), record).await.unwrap(), 2);
    let seen = seen.into_inner().unwrap();
    assert_eq!(seen.len(), 2);
    assert!(!seen[0].is_takeover());
    assert!(seen[1].is_takeover());
    assert_eq!(seen[0].key(), seen[1].key());
    assert!(seen[0].key().unwrap().ends_with(":k"));
    assert_eq!(seen[0].token(), seen[1].token());
    assert_eq!(seen[0].token().unwrap().len(), 32);
}

/// With a deadline (a Lambda's remaining time) the lease ends there, not a full lease later: an
/// invocation killed at its deadline frees its key for the retry.
pub async fn lease_is_cut_at_the_callers_deadline<S: Store>(store: S, ns: &str) {
    let guard = Guard::new(store).prefix(ns.to_owned()).lease(LEASE);
    let called = Instant::now();
    let deadline = called + SHORT;
    let killed = guard.clone().deadline(deadline);
    let (started, has_started) = oneshot::channel();
    let started = cut_once_started(
        killed.run("k", &(), move || async move {
            started.send(Instant::now()).ok();
            sleep(Duration::from_secs(30)).await;
            Ok::<u32, Error>(1)
        }),
        has_started,
    )
    .await;
    // The lease asked for was at most `deadline - called`, and the store counted it from a
    // moment before the body started.
    sleep_until(started + (deadline - called) + Duration::from_millis(150)).await;
    let retry: Result<u32, Error> = guard.run("k", &(), || async { Ok(2) }).await;
    assert_eq!(
        retry.unwrap(),
        2,
        "taken over after the deadline, not after {LEASE:?}"
    );
    // Without a deadline the same crash blocks the key for the whole lease.
    let (started, has_started) = oneshot::channel();
    cut_once_started(
        guard.run("other", &(), move || async move {
            started.send(Instant::now()).ok();
            sleep(Duration::from_secs(30)).await;
            Ok::<u32, Error>(1)
        }),
        has_started,
    )
    .await;
    let blocked: Result<u32, Error> = guard.run("other", &(), || async { Ok(2) }).await;
    assert!(in_progress(&blocked).is_some(), "{blocked:?}");
}

/// JSON wrote `Some(None)` and `None` alike and could not read `NaN` back.
pub async fn replays_nested_options_and_nan<S: Store>(store: S, ns: &str) {
    let guard = Guard::new(store).prefix(ns.to_owned());
    let first: Result<(Option<Option<u8>>, f64), Error> = guard
        .run("k", &(), || async { Ok((Some(None), f64::NAN)) })
        .await;
    assert!(first.is_ok());
    let again = guard
        .run_outcome("k", &(), || async {
            Ok::<_, Error>((None::<Option<u8>>, 0.0f64))
        })
        .await
        .unwrap();
    assert!(again.is_replay());
    let (option, float): (Option<Option<u8>>, f64) = again.into_inner();
    assert_eq!(option, Some(None));
    assert!(float.is_nan());
}

/// `("acme:eu", "42")` and `("acme", "eu:42")` are two keys, not one record.
pub async fn composite_keys_do_not_collide<S: Store>(store: S, ns: &str) {
    let guard = Guard::new(store).prefix(ns.to_owned());
    let a: Result<String, Error> = guard
        .run(("acme:eu", "42"), &(), || async { Ok("first".into()) })
        .await;
    let b: Result<String, Error> = guard
        .run(("acme", "eu:42"), &(), || async { Ok("second".into()) })
        .await;
    assert_eq!(
        (a.unwrap().as_str(), b.unwrap().as_str()),
        ("first", "second")
    );
}

pub async fn payload_mismatch_is_rejected_on_every_path<S: Store + 'static>(store: S, ns: &str) {
    let guard = Guard::new(store).prefix(ns.to_owned());
    let mismatch = |r: &Result<u32, Error>| {
        matches!(r, Err(Error::Rejected(Rejected::PayloadMismatch { .. })))
    };
    // Completed record (the fast path).
    guard
        .run("done", &("a", 1), || async { Ok::<_, Error>(1) })
        .await
        .unwrap();
    let r = guard
        .run("done", &("a", 2), || async { Ok::<_, Error>(2) })
        .await;
    assert!(mismatch(&r), "{r:?}");
    // In-progress record, whether the duplicate would reject or wait.
    let (release, first) = hold_first(&guard, "busy", ("a", 1)).await;
    let r = guard
        .run("busy", &("a", 2), || async { Ok::<_, Error>(2) })
        .await;
    assert!(mismatch(&r), "{r:?}");
    let waiting = guard
        .clone()
        .in_flight(InFlight::Wait(Duration::from_secs(5)));
    let r = waiting
        .run("busy", &("a", 2), || async { Ok::<_, Error>(2) })
        .await;
    assert!(mismatch(&r), "{r:?}");
    release.send(()).unwrap();
    assert_eq!(first.await.unwrap().unwrap(), 1);
}

pub async fn in_flight_duplicate_is_rejected_with_retry_after<S: Store + 'static>(
    store: S,
    ns: &str,
) {
    let guard = Guard::new(store)
        .prefix(ns.to_owned())
        .lease(Duration::from_secs(20));
    let (release, first) = hold_first(&guard, "k", ()).await;
    let r: Result<u32, Error> = guard
        .run("k", &(), || async { panic!("a duplicate must not run") })
        .await;
    let retry_after = in_progress(&r).unwrap_or_else(|| panic!("{r:?}"));
    assert!(
        retry_after > Duration::from_secs(10) && retry_after <= Duration::from_secs(20),
        "{retry_after:?}"
    );
    release.send(()).unwrap();
    assert_eq!(first.await.unwrap().unwrap(), 1);
}

pub async fn in_flight_wait_returns_the_first_result<S: Store + 'static>(store: S, ns: &str) {
    let guard = Guard::new(store)
        .prefix(ns.to_owned())
        .in_flight(InFlight::Wait(Duration::from_secs(10)));
    let (started, has_started) = oneshot::channel();
    let first = tokio::spawn({
        let guard = guard.clone();
        async move {
            guard
                .run("k", &(), move || async move {
                    started.send(()).ok();
                    sleep(Duration::from_millis(400)).await;
                    Ok::<_, Error>(1)
                })
                .await
        }
    });
    has_started.await.expect("the first delivery starts");
    let second = guard
        .run_outcome("k", &(), || async { Ok::<_, Error>(2) })
        .await
        .unwrap();
    assert_eq!((second.is_replay(), *second.value()), (true, 1));
    assert_eq!(first.await.unwrap().unwrap(), 1);

    // A released record lets the waiter run the body itself.
    let (started, has_started) = oneshot::channel();
    let first = tokio::spawn({
        let guard = guard.clone();
        async move {
            guard
                .run("released", &(), move || async move {
                    started.send(()).ok();
                    sleep(Duration::from_millis(300)).await;
                    Err::<u32, _>(Error::MissingKey)
                })
                .await
        }
    });
    has_started.await.expect("the first delivery starts");
    let second = guard
        .run_outcome("released", &(), || async { Ok::<_, Error>(2) })
        .await
        .unwrap();
    assert_eq!((second.is_replay(), second.into_inner()), (false, 2));
    assert!(first.await.unwrap().is_err());
}

pub async fn in_flight_wait_gives_up_after_its_duration<S: Store + 'static>(store: S, ns: &str) {
    let guard = Guard::new(store).prefix(ns.to_owned());
    let (release, first) = hold_first(&guard, "k", ()).await;
    let waiting = guard
        .clone()
        .in_flight(InFlight::Wait(Duration::from_millis(300)));
    let started = std::time::Instant::now();
    let r: Result<u32, Error> = waiting.run("k", &(), || async { Ok(2) }).await;
    assert!(in_progress(&r).is_some(), "{r:?}");
    assert!(started.elapsed() >= Duration::from_millis(300));
    release.send(()).unwrap();
    first.await.unwrap().unwrap();
}

pub async fn errors_release_by_default<S: Store>(store: S, ns: &str) {
    let guard = Guard::new(store).prefix(ns.to_owned());
    let r: Result<u32, TestError> = guard
        .run("k", &(), || async { Err(TestError::Failed("boom".into())) })
        .await;
    assert_eq!(r, Err(TestError::Failed("boom".into())));
    let r: Result<u32, TestError> = guard.run("k", &(), || async { Ok(2) }).await;
    assert_eq!(r, Ok(2));
}

pub async fn cached_errors_are_replayed<S: Store>(store: S, ns: &str) {
    let guard = Guard::new(store).prefix(ns.to_owned()).on_error(Cache);
    let r: Result<u32, TestError> = guard
        .run("k", &(), || async {
            Err(TestError::Failed("declined".into()))
        })
        .await;
    assert_eq!(r, Err(TestError::Failed("declined".into())));
    let r: Result<u32, TestError> = guard.run("k", &(), || async { Ok(2) }).await;
    assert_eq!(r, Err(TestError::Failed("declined".into())));
    // A guard that does not cache errors cannot decode them, and says so instead of re-running.
    let plain = Guard::new(guard.store().clone()).prefix(ns.to_owned());
    let r: Result<u32, Error> = plain.run("k", &(), || async { Ok(3) }).await;
    assert!(matches!(r, Err(Error::Decode { .. })), "{r:?}");
}

pub async fn classifier_releases_transient_and_caches_permanent<S: Store>(store: S, ns: &str) {
    let guard = Guard::new(store).prefix(ns.to_owned()).on_error(Classified);
    let r: Result<u32, TestError> = guard
        .run("t", &(), || async {
            Err(TestError::Transient("timeout".into()))
        })
        .await;
    assert!(r.is_err());
    assert_eq!(
        guard
            .run("t", &(), || async { Ok::<_, TestError>(1) })
            .await,
        Ok(1)
    );
    let r: Result<u32, TestError> = guard
        .run("p", &(), || async {
            Err(TestError::Failed("invalid".into()))
        })
        .await;
    assert!(r.is_err());
    assert_eq!(
        guard
            .run("p", &(), || async { Ok::<_, TestError>(1) })
            .await,
        Err(TestError::Failed("invalid".into()))
    );
}

pub async fn lease_is_renewed_while_a_long_body_runs<S: Store + 'static>(store: S, ns: &str) {
    // A renewal is sent when a third of the lease is left, so it must get through within
    // that third: with 100 ms a store slowed by a busy machine (moto, one request at a time)
    // let the lease lapse. Two seconds for a renewal to arrive keeps the test about renewal,
    // not latency.
    let lease = Duration::from_secs(6);
    let guard = Guard::new(store).prefix(ns.to_owned()).lease(lease);
    let (release, hold) = oneshot::channel::<()>();
    let (started, has_started) = oneshot::channel();
    let first = tokio::spawn({
        let guard = guard.clone();
        async move {
            guard
                .run("k", &(), move || async move {
                    started.send(Instant::now()).ok();
                    hold.await.ok();
                    Ok::<_, Error>(1)
                })
                .await
        }
    });
    let started = has_started.await.expect("the first delivery starts");
    // Past the initial lease and past the first renewal's, the key is still held.
    for n in 1..=2 {
        sleep_until(started + lease * n).await;
        let r: Result<u32, Error> = guard
            .run("k", &(), || async { panic!("ran during a renewed lease") })
            .await;
        assert!(in_progress(&r).is_some(), "{r:?}");
    }
    release.send(()).unwrap();
    assert_eq!(first.await.unwrap().unwrap(), 1);
}

pub async fn stale_owner_cannot_complete_after_takeover<S: Store + 'static>(store: S, ns: &str) {
    let guard = Guard::new(store)
        .prefix(ns.to_owned())
        .lease(SHORT)
        .renew_lease(false);
    // The first body finishes only after the takeover, however long the store takes.
    let (release, hold) = oneshot::channel::<()>();
    let (started, has_started) = oneshot::channel();
    let first = tokio::spawn({
        let guard = guard.clone();
        async move {
            guard
                .run("k", &(), move || async move {
                    started.send(Instant::now()).ok();
                    hold.await.ok();
                    Ok::<_, Error>(1)
                })
                .await
        }
    });
    let started = has_started.await.expect("the first delivery starts");
    sleep_until(started + SHORT + Duration::from_millis(150)).await;
    assert_eq!(
        guard
            .run("k", &(), || async { Ok::<_, Error>(2) })
            .await
            .unwrap(),
        2
    );
    release.send(()).unwrap();
    let stale = first.await.unwrap();
    assert!(matches!(stale, Err(Error::NotOwner { .. })), "{stale:?}");
    assert_eq!(
        guard
            .run("k", &(), || async { Ok::<_, Error>(3) })
            .await
            .unwrap(),
        2
    );
}

pub async fn panicking_body_leaves_a_record_taken_over_after_the_lease<S: Store + 'static>(
    store: S,
    ns: &str,
) {
    let guard = Guard::new(store).prefix(ns.to_owned());
    // With RUST_BACKTRACE=1 the panic's backtrace alone can take longer than a short lease.
    for (i, lease) in doubling_leases(SHORT) {
        let (guard, key) = (guard.clone().lease(lease), format!("k{i}"));
        let called = Instant::now();
        let (started, has_started) = oneshot::channel();
        let crashed = tokio::spawn({
            let (guard, key) = (guard.clone(), key.clone());
            async move {
                guard
                    .run(key.as_str(), &(), move || async move {
                        started.send(Instant::now()).ok();
                        panic!("worker crashed mid-way")
                    })
                    .await as Result<u32, Error>
            }
        });
        assert!(crashed.await.unwrap_err().is_panic());
        let started = has_started.await.expect("the body started, then panicked");
        let r: Result<u32, Error> = guard.run(key.as_str(), &(), || async { Ok(2) }).await;
        if lease_may_have_ended(called, lease) {
            continue;
        }
        assert!(in_progress(&r).is_some(), "{r:?}");
        sleep_until(started + lease + Duration::from_millis(150)).await;
        assert_eq!(
            guard
                .run(key.as_str(), &(), || async { Ok::<_, Error>(2) })
                .await
                .unwrap(),
            2
        );
        return;
    }
    no_lease_was_long_enough(SHORT)
}

pub async fn cancelled_body_leaves_a_record_taken_over_after_the_lease<S: Store>(
    store: S,
    ns: &str,
) {
    let guard = Guard::new(store).prefix(ns.to_owned());
    for (i, lease) in doubling_leases(SHORT) {
        let (guard, key) = (guard.clone().lease(lease), format!("k{i}"));
        let called = Instant::now();
        let (started, has_started) = oneshot::channel();
        let started = cut_once_started(
            guard.run(key.as_str(), &(), move || async move {
                started.send(Instant::now()).ok();
                sleep(Duration::from_secs(30)).await;
                Ok::<u32, Error>(1)
            }),
            has_started,
        )
        .await;
        let r: Result<u32, Error> = guard.run(key.as_str(), &(), || async { Ok(2) }).await;
        if lease_may_have_ended(called, lease) {
            continue;
        }
        assert!(in_progress(&r).is_some(), "{r:?}");
        sleep_until(started + lease + Duration::from_millis(150)).await;
        assert_eq!(
            guard
                .run(key.as_str(), &(), || async { Ok::<_, Error>(2) })
                .await
                .unwrap(),
            2
        );
        return;
    }
    no_lease_was_long_enough(SHORT)
}

pub async fn missing_key_is_an_error_unless_not_required<S: Store>(store: S, ns: &str) {
    let guard = Guard::new(store).prefix(ns.to_owned());
    let runs = AtomicU32::new(0);
    let r: Result<u32, Error> = guard.run(None::<String>, &(), || async { Ok(1) }).await;
    assert!(matches!(r, Err(Error::MissingKey)));
    let r: Result<u32, Error> = guard.run("", &(), || async { Ok(1) }).await;
    assert!(matches!(r, Err(Error::InvalidKey(_))));
    let lenient = guard.clone().required(false);
    for _ in 0..2 {
        let r: Result<u32, Error> = lenient
            .run(None::<&str>, &(), || async {
                runs.fetch_add(1, Ordering::SeqCst);
                Ok(1)
            })
            .await;
        assert_eq!(r.unwrap(), 1);
    }
    assert_eq!(
        runs.load(Ordering::SeqCst),
        2,
        "an unguarded run runs every time"
    );
}

pub async fn batch_reports_failed_ids<S: Store>(store: S, ns: &str) {
    #[derive(serde::Serialize, Clone)]
    struct Msg {
        id: String,
        order: u32,
        receive_count: u32,
    }
    let guard = Guard::new(store).prefix(ns.to_owned());
    let runs = Arc::new(AtomicU32::new(0));
    let batch = |receive_count| {
        (1..=3)
            .map(move |order| Msg {
                id: format!("m{order}"),
                order,
                receive_count,
            })
            .collect::<Vec<_>>()
    };
    let handler = |m: Msg| {
        let runs = runs.clone();
        async move {
            runs.fetch_add(1, Ordering::SeqCst);
            if m.order == 2 {
                Err(Error::MissingKey)
            } else {
                Ok(m.order)
            }
        }
    };
    // The payload leaves out the receive count, which changes on every delivery.
    let describe = |m: &Msg| BatchItem::new(m.id.clone(), m.order, &m.order);
    let report = guard.run_batch(batch(1), describe, handler).await;
    assert_eq!(report.failed_ids(), ["m2"]);
    assert_eq!((report.succeeded, report.replayed), (2, 0));
    let report = guard.run_batch(batch(2), describe, handler).await;
    assert_eq!(report.failed_ids(), ["m2"]);
    assert_eq!((report.succeeded, report.replayed), (2, 2));
    assert_eq!(runs.load(Ordering::SeqCst), 4);
}

pub async fn tenant_and_prefix_separate_records<S: Store>(store: S, ns: &str) {
    let a = Guard::new(store.clone())
        .prefix(ns.to_owned())
        .tenant("tenant-a");
    let b = Guard::new(store.clone())
        .prefix(ns.to_owned())
        .tenant("tenant-b");
    let other_op = Guard::new(store)
        .prefix(format!("{ns}-other"))
        .tenant("tenant-a");
    assert_eq!(
        a.run("k", &(), || async { Ok::<_, Error>(1) })
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        b.run("k", &(), || async { Ok::<_, Error>(2) })
            .await
            .unwrap(),
        2
    );
    assert_eq!(
        other_op
            .run("k", &(), || async { Ok::<_, Error>(3) })
            .await
            .unwrap(),
        3
    );
    assert_eq!(
        a.run("k", &(), || async { Ok::<_, Error>(9) })
            .await
            .unwrap(),
        1
    );
}

struct Ledger<S> {
    store: S,
    ns: String,
    runs: AtomicU32,
}

impl<S: Store> Ledger<S> {
    #[idempotent(key = (order.as_str(), stage), store = self.store, tenant = self.ns, payload = (order, amount))]
    async fn charge(&self, order: String, stage: u8, mut amount: u64) -> Result<u64, Error> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        // Changing an argument in the body does not change the fingerprint, taken before.
        amount += 1;
        if amount > 1_000 {
            return Err(Error::MissingKey);
        }
        Ok(amount)
    }
}

pub async fn attribute_guards_a_method<S: Store>(store: S, ns: &str) {
    let ledger = Ledger {
        store,
        ns: ns.to_owned(),
        runs: AtomicU32::new(0),
    };
    assert_eq!(ledger.charge("o-1".into(), 1, 10).await.unwrap(), 11);
    assert_eq!(ledger.charge("o-1".into(), 1, 10).await.unwrap(), 11);
    assert_eq!(
        ledger.charge("o-1".into(), 2, 10).await.unwrap(),
        11,
        "another stage is another key"
    );
    let r = ledger.charge("o-1".into(), 1, 20).await;
    assert!(
        matches!(r, Err(Error::Rejected(Rejected::PayloadMismatch { .. }))),
        "{r:?}"
    );
    assert!(ledger.charge("o-2".into(), 1, 5_000).await.is_err());
    assert_eq!(ledger.runs.load(Ordering::SeqCst), 3);
}
