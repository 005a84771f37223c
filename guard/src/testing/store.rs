//! The store the kit's scenarios act through: any store, with faults armed per message.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::key::Fingerprint;
use crate::store::{OwnerToken, Reservation, Store, StoredResult};
use crate::Error;

/// A [`Store`] wrapping yours (memory, Redis, PostgreSQL, DynamoDB, your own), through which
/// the [`Kit`](super::Kit) makes its faults: every call goes to the inner store unless a
/// scenario armed a fault for the message it delivers. Build the handler under test with it
/// (one per client: [`Kit::store`](super::Kit::store) wraps each).
#[derive(Clone, Debug)]
pub struct TestStore<S> {
    inner: S,
    faults: Arc<Faults>,
}

impl<S> TestStore<S> {
    pub(super) fn new(inner: S, faults: Arc<Faults>) -> Self {
        TestStore { inner, faults }
    }

    /// The wrapped store.
    pub fn inner(&self) -> &S {
        &self.inner
    }
}

/// The faults armed by running scenarios, each for the keys holding its message id.
#[derive(Debug, Default)]
pub(super) struct Faults {
    plans: Mutex<Vec<Arc<Plan>>>,
}

impl Faults {
    pub(super) fn arm(&self, plan: Arc<Plan>) {
        self.lock().push(plan);
    }

    pub(super) fn disarm(&self, plan: &Arc<Plan>) {
        self.lock().retain(|p| !Arc::ptr_eq(p, plan));
    }

    fn is_armed(&self) -> bool {
        !self.lock().is_empty()
    }

    fn plan_for(&self, key: &str) -> Option<Arc<Plan>> {
        self.lock().iter().find(|p| key.contains(&p.id)).cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Plan>>> {
        // Each update is a push or a retain: a poisoned lock is still consistent.
        self.plans.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// One scenario's fault, for the keys that hold `id` (the kit's message ids are unique, and
/// none holds another).
#[derive(Debug)]
pub(super) struct Plan {
    id: String,
    fault: Fault,
    state: Mutex<State>,
}

/// What goes wrong.
#[derive(Debug, Clone, Copy)]
pub(super) enum Fault {
    /// The store goes down when the first completion is written (after the body's effect) and
    /// stays down for `tries` completions: every call fails meanwhile, the last failed
    /// completion is written all the same (its reply is lost), and the next one gets through.
    Cut { tries: u32 },
    /// The first attempt to be granted the key is killed: see [`super::Kill`]. Its lease is cut
    /// to `lease` so that the redelivery need not wait out the guard's.
    Kill { at: KillPoint, lease: Duration },
}

/// Where the store kills the first attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum KillPoint {
    /// `reserve` panics once the record is written.
    Reservation,
    /// `complete` never answers, so that the kit's abort comes first.
    Abort,
    /// `complete` panics before writing.
    Completion,
}

/// How far a plan got; the kit polls it.
#[derive(Debug, Default, Clone)]
pub(super) struct State {
    /// Cut: failed completions so far (`Some` once the store went down).
    pub(super) failed: Option<u32>,
    /// Cut: the store is back.
    pub(super) up: bool,
    /// Kill: the owner token of the attempt that was granted the key (and is to be killed).
    pub(super) victim: Option<OwnerToken>,
    /// Calls refused on purpose (the cut's outage).
    pub(super) refused: u32,
}

impl Plan {
    pub(super) fn new(id: String, fault: Fault) -> Arc<Plan> {
        Arc::new(Plan {
            id,
            fault,
            state: Mutex::default(),
        })
    }

    pub(super) fn state(&self) -> State {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// During a cut's outage, the refusal every call gets.
    fn outage(&self) -> Result<(), Error> {
        let mut state = self.lock();
        if matches!(self.fault, Fault::Cut { .. }) && state.failed.is_some() && !state.up {
            state.refused += 1;
            return Err(Error::store("the test kit cut the store"));
        }
        Ok(())
    }

    /// The victim's lease, cut short; another attempt's as asked.
    fn lease(&self, owner: &OwnerToken, lease: Duration) -> Duration {
        match self.fault {
            Fault::Kill { lease: short, .. } => {
                let state = self.lock();
                match &state.victim {
                    None => lease.min(short),
                    Some(victim) if victim == owner => lease.min(short),
                    Some(_) => lease,
                }
            }
            Fault::Cut { .. } => lease,
        }
    }

    fn is_victim(&self, owner: &OwnerToken) -> bool {
        self.lock().victim.as_ref() == Some(owner)
    }
}

impl<S: Store> Store for TestStore<S> {
    async fn reserve(
        &self,
        key: &str,
        fingerprint: Fingerprint,
        owner: &OwnerToken,
        lease: Duration,
    ) -> Result<Reservation, Error> {
        let Some(plan) = self.faults.plan_for(key) else {
            // A hashed key hides the message id the faults are armed for: the scenario would
            // pass without its fault. Refused, so that the report says why.
            if self.faults.is_armed() && crate::key::is_hashed(key) {
                return Err(Error::store(
                    "idem_guard::testing: the key is hashed (`Guard::hash_keys`), so the kit cannot find the message id in it to make its fault; build the guard under test without `hash_keys`",
                ));
            }
            return self.inner.reserve(key, fingerprint, owner, lease).await;
        };
        plan.outage()?;
        let lease = plan.lease(owner, lease);
        let found = self.inner.reserve(key, fingerprint, owner, lease).await?;
        if let Fault::Kill { at, .. } = plan.fault {
            let granted = matches!(found, Reservation::Acquired | Reservation::TakenOver);
            let first = granted && {
                let mut state = plan.lock();
                let first = state.victim.is_none();
                if first {
                    state.victim = Some(owner.clone());
                }
                first
            };
            if first && at == KillPoint::Reservation {
                panic!("idem_guard::testing: the delivery was killed right after its reservation (a deliberate fault)");
            }
        }
        Ok(found)
    }

    async fn complete(
        &self,
        key: &str,
        fingerprint: Fingerprint,
        owner: &OwnerToken,
        result: &StoredResult,
        retention: Duration,
    ) -> Result<(), Error> {
        let Some(plan) = self.faults.plan_for(key) else {
            return self
                .inner
                .complete(key, fingerprint, owner, result, retention)
                .await;
        };
        match plan.fault {
            Fault::Cut { tries } => {
                let failed = {
                    let mut state = plan.lock();
                    if state.up {
                        None
                    } else {
                        let failed = state.failed.unwrap_or(0) + 1;
                        state.failed = Some(failed);
                        state.up = failed >= tries.max(1);
                        Some((failed, state.up))
                    }
                };
                match failed {
                    None => {}
                    // The last failed try reaches the store; only its reply is lost.
                    Some((_, true)) => {
                        self.inner
                            .complete(key, fingerprint, owner, result, retention)
                            .await?;
                        return Err(Error::store(
                            "the test kit lost the reply to this completion",
                        ));
                    }
                    Some((_, false)) => {
                        return Err(Error::store("the test kit cut the store"));
                    }
                }
            }
            Fault::Kill { at, .. } if plan.is_victim(owner) => match at {
                KillPoint::Completion => {
                    panic!("idem_guard::testing: the delivery was killed before its completion (a deliberate fault)")
                }
                // Held until the kit aborts the delivery.
                KillPoint::Abort => std::future::pending::<()>().await,
                KillPoint::Reservation => {}
            },
            Fault::Kill { .. } => {}
        }
        self.inner
            .complete(key, fingerprint, owner, result, retention)
            .await
    }

    async fn release(&self, key: &str, owner: &OwnerToken) -> Result<(), Error> {
        if let Some(plan) = self.faults.plan_for(key) {
            plan.outage()?;
        }
        self.inner.release(key, owner).await
    }

    async fn renew(
        &self,
        key: &str,
        fingerprint: Fingerprint,
        owner: &OwnerToken,
        lease: Duration,
    ) -> Result<(), Error> {
        let lease = match self.faults.plan_for(key) {
            Some(plan) => {
                plan.outage()?;
                plan.lease(owner, lease)
            }
            None => lease,
        };
        self.inner.renew(key, fingerprint, owner, lease).await
    }

    fn max_result_len(&self) -> usize {
        self.inner.max_result_len()
    }
}
