//! One record as a DynamoDB item: its attributes, the expressions that write them, and reading
//! an item back into what a reservation reports.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_sdk_dynamodb::types::AttributeValue;

use crate::key::Fingerprint;
use crate::store::{OwnerToken, Reservation, StoredResult};
use crate::Error;

/// The table's partition key (string): the guard's full key.
pub const PARTITION_KEY: &str = "pk";
/// The attribute to enable as the table's TTL: epoch seconds after which DynamoDB may delete
/// the record. It is never before the record's expiry, so DynamoDB never deletes a live record.
pub const TTL_ATTRIBUTE: &str = "ttl";

/// Attribute names, all written through `#` placeholders because `owner`, `state`, `result` and
/// `ttl` are DynamoDB reserved words.
pub(crate) const OWNER: &str = "owner";
pub(crate) const FINGERPRINT: &str = "fingerprint";
pub(crate) const STATE: &str = "state";
pub(crate) const RESULT: &str = "result";
/// When the lease or the retention ends, in epoch milliseconds: what every condition and read
/// compares with the writer's clock. (TTL deletion is lazy, possibly days late, so an item past
/// this instant is treated as absent even though it is still stored.)
pub(crate) const EXPIRES_MS: &str = "expires_ms";

/// The `state` of an in-progress record; completed records hold their result's kind.
pub(crate) const RUNNING: &str = "running";

/// `SET` clause of a completion: keeps the reservation's fingerprint (a record recreated after
/// its backend dropped it takes the one given).
pub(crate) const SET_COMPLETED: &str = "SET #owner = :owner, #fingerprint = if_not_exists(#fingerprint, :fingerprint), #state = :state, #result = :result, #expires_ms = :expires_ms, #ttl = :ttl";

/// Condition of a completion: the record is ours (running, or completed by an earlier try of
/// this same completion) or gone (our lease lapsed and nobody took over).
pub(crate) const OURS_OR_GONE: &str = "attribute_not_exists(pk) OR #owner = :owner";

/// Condition of release, renewal and a transactional completion: the record is ours and still
/// running, or gone.
pub(crate) const OURS_RUNNING_OR_GONE: &str =
    "attribute_not_exists(pk) OR (#owner = :owner AND #state = :running)";

/// Now, by this process's clock, in epoch milliseconds.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX / 4)
}

/// The expiry attributes of a record written now that is live for `live` and may be deleted by
/// DynamoDB's TTL after `kept` (at least `live`): `expires_ms` and `ttl` (rounded up to the
/// second, so never before `expires_ms`).
pub(crate) struct Expiry {
    pub(crate) expires_ms: u64,
    pub(crate) ttl_secs: u64,
}

impl Expiry {
    pub(crate) fn from_now(live: Duration, kept: Duration) -> Self {
        let now = now_ms();
        let expires_ms = now.saturating_add(millis(live));
        let kept_until = now.saturating_add(millis(kept.max(live)));
        Expiry {
            expires_ms,
            ttl_secs: kept_until.div_ceil(1000),
        }
    }

    /// An in-progress record: live for its lease, kept one more lease after it, so that the
    /// next reservation still finds it and reports the takeover.
    pub(crate) fn lease(lease: Duration) -> Self {
        Expiry::from_now(lease, lease.saturating_mul(2))
    }

    /// A completed record: live and kept for its retention.
    pub(crate) fn retention(retention: Duration) -> Self {
        Expiry::from_now(retention, retention)
    }
}

pub(crate) fn s(text: impl Into<String>) -> AttributeValue {
    AttributeValue::S(text.into())
}

pub(crate) fn n(number: u64) -> AttributeValue {
    AttributeValue::N(number.to_string())
}

/// The placeholders `#name` of every attribute name the expressions use.
pub(crate) fn names(used: &[&str]) -> HashMap<String, String> {
    used.iter()
        .map(|name| (format!("#{name}"), (*name).to_owned()))
        .collect()
}

/// The attribute values of an in-progress record for `owner`.
pub(crate) fn running_item(
    key: &str,
    fingerprint: Fingerprint,
    owner: &OwnerToken,
    expiry: &Expiry,
) -> HashMap<String, AttributeValue> {
    HashMap::from([
        (PARTITION_KEY.to_owned(), s(key)),
        (OWNER.to_owned(), s(owner.as_str())),
        (FINGERPRINT.to_owned(), s(fingerprint.to_string())),
        (STATE.to_owned(), s(RUNNING)),
        (EXPIRES_MS.to_owned(), n(expiry.expires_ms)),
        (TTL_ATTRIBUTE.to_owned(), n(expiry.ttl_secs)),
    ])
}

/// The `:values` of [`SET_COMPLETED`] for `owner`'s result.
pub(crate) fn completed_values(
    fingerprint: Fingerprint,
    owner: &OwnerToken,
    result: &StoredResult,
    expiry: &Expiry,
) -> HashMap<String, AttributeValue> {
    let (state, text) = state_of(result);
    HashMap::from([
        (":owner".to_owned(), s(owner.as_str())),
        (":fingerprint".to_owned(), s(fingerprint.to_string())),
        (":state".to_owned(), s(state)),
        (":result".to_owned(), s(text)),
        (":expires_ms".to_owned(), n(expiry.expires_ms)),
        (":ttl".to_owned(), n(expiry.ttl_secs)),
    ])
}

/// The attribute names [`SET_COMPLETED`] uses.
pub(crate) fn completed_names() -> HashMap<String, String> {
    names(&[OWNER, FINGERPRINT, STATE, RESULT, EXPIRES_MS, TTL_ATTRIBUTE])
}

fn state_of(result: &StoredResult) -> (&'static str, &str) {
    match result {
        StoredResult::Ok(text) => ("ok", text),
        StoredResult::Err(text) => ("err", text),
        StoredResult::Unreplayable(text) => ("unreplayable", text),
    }
}

fn result_of(state: &str, text: String) -> Option<StoredResult> {
    match state {
        "ok" => Some(StoredResult::Ok(text)),
        "err" => Some(StoredResult::Err(text)),
        "unreplayable" => Some(StoredResult::Unreplayable(text)),
        _ => None,
    }
}

/// A stored item, read back.
pub(crate) struct Item<'a>(pub(crate) &'a HashMap<String, AttributeValue>);

impl Item<'_> {
    fn text(&self, name: &str) -> Option<&str> {
        self.0
            .get(name)
            .and_then(|v| v.as_s().ok())
            .map(String::as_str)
    }

    pub(crate) fn owner(&self) -> Option<&str> {
        self.text(OWNER)
    }

    pub(crate) fn is_running(&self) -> bool {
        self.text(STATE) == Some(RUNNING)
    }

    pub(crate) fn is_owned_by(&self, owner: &OwnerToken) -> bool {
        self.owner() == Some(owner.as_str())
    }

    fn expires_ms(&self) -> Option<u64> {
        self.0
            .get(EXPIRES_MS)
            .and_then(|v| v.as_n().ok())
            .and_then(|n| n.parse().ok())
    }

    /// Whether the record's lease or retention has ended by this process's clock: then it is
    /// as good as absent, whether or not DynamoDB has deleted it yet.
    pub(crate) fn is_expired(&self, now_ms: u64) -> bool {
        self.expires_ms().is_none_or(|at| at <= now_ms)
    }

    /// What a reservation that found this live record reports.
    pub(crate) fn to_reservation(&self, key: &str) -> Result<Reservation, Error> {
        let corrupt = |what: &str| {
            Error::store(format!(
                "the DynamoDB item of #{} is not an idem-guard record ({what})",
                crate::observe::key_hash(key)
            ))
        };
        let fingerprint = self
            .text(FINGERPRINT)
            .and_then(Fingerprint::from_hex)
            .ok_or_else(|| corrupt("no fingerprint"))?;
        let state = self.text(STATE).ok_or_else(|| corrupt("no state"))?;
        if state == RUNNING {
            let until = self.expires_ms().ok_or_else(|| corrupt("no expires_ms"))?;
            return Ok(Reservation::InProgress {
                fingerprint,
                retry_after: Duration::from_millis(until.saturating_sub(now_ms())),
            });
        }
        let text = self.text(RESULT).unwrap_or_default().to_owned();
        let result = result_of(state, text).ok_or_else(|| corrupt("unknown state"))?;
        Ok(Reservation::Completed {
            fingerprint,
            result,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_is_never_before_the_expiry() {
        for ms in [1, 300, 999, 1_000, 1_001, 60_000] {
            let e = Expiry::lease(Duration::from_millis(ms));
            assert!(e.ttl_secs * 1000 >= e.expires_ms, "{ms}");
            let e = Expiry::retention(Duration::from_millis(ms));
            assert!(e.ttl_secs * 1000 >= e.expires_ms, "{ms}");
        }
        // A running record is kept one more lease, for the takeover to be reported.
        let e = Expiry::lease(Duration::from_secs(60));
        assert!(e.ttl_secs * 1000 >= e.expires_ms + 59_000);
    }

    #[test]
    fn reads_back_what_it_writes() {
        let fp = Fingerprint::of(&1).unwrap();
        let owner = OwnerToken::generate();
        let running = running_item("k", fp, &owner, &Expiry::lease(Duration::from_secs(60)));
        let item = Item(&running);
        assert!(item.is_running() && item.is_owned_by(&owner));
        assert!(!item.is_expired(now_ms()));
        assert!(matches!(
            item.to_reservation("k").unwrap(),
            Reservation::InProgress { fingerprint, retry_after }
                if fingerprint == fp && retry_after > Duration::from_secs(50)
        ));
        let mut completed = running.clone();
        completed.insert(STATE.into(), s("err"));
        completed.insert(RESULT.into(), s("{\"a\":1}"));
        assert_eq!(
            Item(&completed).to_reservation("k").unwrap(),
            Reservation::Completed {
                fingerprint: fp,
                result: StoredResult::Err("{\"a\":1}".into())
            }
        );
        completed.insert(STATE.into(), s("??"));
        assert!(Item(&completed).to_reservation("k").is_err());
        completed.remove(FINGERPRINT);
        let err = Item(&completed).to_reservation("k").unwrap_err();
        assert!(err.to_string().contains("no fingerprint"), "{err}");
    }

    #[test]
    fn a_record_without_expiry_counts_as_expired() {
        let mut item = HashMap::new();
        item.insert(PARTITION_KEY.to_owned(), s("k"));
        assert!(Item(&item).is_expired(now_ms()));
    }
}
