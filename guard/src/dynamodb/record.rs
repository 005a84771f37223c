//! One record as a DynamoDB item: its attributes, the expressions that write them, and reading
//! an item back into what a reservation reports.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_sdk_dynamodb::types::AttributeValue;

use crate::key::Fingerprint;
use crate::store::{OwnerToken, Reservation, StoredResult};
use crate::Error;

/// The default partition key attribute (string): the guard's full key.
pub const PARTITION_KEY: &str = "pk";
/// The default attribute to enable as the table's TTL: epoch seconds after which DynamoDB may
/// delete the record. It is never before the record's expiry, so DynamoDB never deletes a live
/// record.
pub const TTL_ATTRIBUTE: &str = "ttl";

/// The placeholders (`#name`) every expression uses; [`Attributes`] maps each to the table's
/// attribute name. All names go through placeholders because `owner`, `state`, `result` and
/// `ttl` are DynamoDB reserved words, and the table's own names are the user's choice.
pub(crate) const PK: &str = "pk";
pub(crate) const OWNER: &str = "owner";
pub(crate) const FINGERPRINT: &str = "fingerprint";
pub(crate) const STATE: &str = "state";
pub(crate) const RESULT: &str = "result";
/// When the lease or the retention ends, in epoch milliseconds: what every condition and read
/// compares with the writer's clock. (TTL deletion is lazy, possibly days late, so an item past
/// this instant is treated as absent even though it is still stored.)
pub(crate) const EXPIRES_MS: &str = "expires_ms";
pub(crate) const TTL: &str = "ttl";

/// The attribute names of the store's table, for a table that is not laid out as
/// [`DynamoDbStore::create_table_if_missing`](super::DynamoDbStore::create_table_if_missing)
/// makes it: another partition key name, a sort key with a fixed value (single-table designs),
/// other names for the record's attributes or the TTL attribute. Give them to
/// [`DynamoDbStore::attributes`](super::DynamoDbStore::attributes).
///
/// ```
/// use idem_guard::dynamodb::Attributes;
///
/// // A single table keyed by `PK` and `SK`: the guard's records under `SK = "IDEMPOTENCY"`.
/// let attributes = Attributes::default()
///     .partition_key("PK")
///     .sort_key("SK", "IDEMPOTENCY")
///     .status("idem_status")
///     .expiry("idem_expires_ms")
///     .result("idem_result")
///     .fingerprint("idem_fingerprint")
///     .owner("idem_owner")
///     .ttl("expires_at");
/// ```
///
/// Changing the names of an existing table's records makes those records invisible (a
/// duplicate runs again), as changing the table does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attributes {
    partition_key: String,
    sort_key: Option<(String, String)>,
    owner: String,
    fingerprint: String,
    status: String,
    result: String,
    expiry: String,
    ttl: String,
}

impl Default for Attributes {
    /// The names of the [module docs](super): `pk`, no sort key, `owner`, `fingerprint`,
    /// `state`, `result`, `expires_ms`, `ttl`.
    fn default() -> Self {
        Attributes {
            partition_key: PARTITION_KEY.to_owned(),
            sort_key: None,
            owner: OWNER.to_owned(),
            fingerprint: FINGERPRINT.to_owned(),
            status: STATE.to_owned(),
            result: RESULT.to_owned(),
            expiry: EXPIRES_MS.to_owned(),
            ttl: TTL_ATTRIBUTE.to_owned(),
        }
    }
}

impl Attributes {
    /// The table's partition key (type S), which holds the guard's key.
    pub fn partition_key(mut self, name: impl Into<String>) -> Self {
        self.partition_key = name.into();
        self
    }

    /// The table's sort key (type S) and the value every record of the guard has in it.
    pub fn sort_key(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.sort_key = Some((name.into(), value.into()));
        self
    }

    /// The owner token of the attempt holding the record (fencing); default `owner`.
    pub fn owner(mut self, name: impl Into<String>) -> Self {
        self.owner = name.into();
        self
    }

    /// The payload's fingerprint; default `fingerprint`.
    pub fn fingerprint(mut self, name: impl Into<String>) -> Self {
        self.fingerprint = name.into();
        self
    }

    /// The record's status (`running`, or the result's kind); default `state`.
    pub fn status(mut self, name: impl Into<String>) -> Self {
        self.status = name.into();
        self
    }

    /// The encoded result; default `result`.
    pub fn result(mut self, name: impl Into<String>) -> Self {
        self.result = name.into();
        self
    }

    /// The end of the lease or retention in epoch milliseconds (what conditions compare);
    /// default `expires_ms`.
    pub fn expiry(mut self, name: impl Into<String>) -> Self {
        self.expiry = name.into();
        self
    }

    /// The attribute to enable as the table's TTL (epoch seconds); default `ttl`.
    pub fn ttl(mut self, name: impl Into<String>) -> Self {
        self.ttl = name.into();
        self
    }

    /// The partition key's name.
    pub fn partition_key_name(&self) -> &str {
        &self.partition_key
    }

    /// The sort key's name and the records' value in it, if the table has one.
    pub fn sort_key_of_records(&self) -> Option<(&str, &str)> {
        self.sort_key
            .as_ref()
            .map(|(n, v)| (n.as_str(), v.as_str()))
    }

    /// The TTL attribute's name.
    pub fn ttl_name(&self) -> &str {
        &self.ttl
    }

    /// Every name non-empty, within DynamoDB's 255 bytes for key attributes (and the same
    /// bound for the others, which a record never needs longer), and no two the same; a sort
    /// key value non-empty.
    pub(crate) fn validate(&self) -> Result<(), Error> {
        let mut all: Vec<(&str, &str)> = vec![
            ("partition key", &self.partition_key),
            ("owner", &self.owner),
            ("fingerprint", &self.fingerprint),
            ("status", &self.status),
            ("result", &self.result),
            ("expiry", &self.expiry),
            ("ttl", &self.ttl),
        ];
        if let Some((name, value)) = &self.sort_key {
            all.push(("sort key", name));
            if value.is_empty() {
                return Err(Error::store(
                    "DynamoDB attributes: the sort key value of the records is empty",
                ));
            }
        }
        for (i, (what, name)) in all.iter().enumerate() {
            if name.is_empty() || name.len() > 255 {
                return Err(Error::store(format!(
                    "DynamoDB attributes: the {what} attribute name must be 1 to 255 bytes long, got {}",
                    name.len()
                )));
            }
            if let Some((other, _)) = all[..i].iter().find(|(_, n)| n == name) {
                return Err(Error::store(format!(
                    "DynamoDB attributes: the {other} and {what} attributes are both named `{name}`"
                )));
            }
        }
        Ok(())
    }

    /// The table's attribute name for a placeholder.
    pub(crate) fn name(&self, placeholder: &str) -> &str {
        match placeholder {
            PK => &self.partition_key,
            OWNER => &self.owner,
            FINGERPRINT => &self.fingerprint,
            STATE => &self.status,
            RESULT => &self.result,
            EXPIRES_MS => &self.expiry,
            TTL => &self.ttl,
            other => unreachable!("no attribute for the placeholder {other}"),
        }
    }

    /// The `#placeholder` to attribute name map of the placeholders an expression uses.
    pub(crate) fn names(&self, used: &[&str]) -> HashMap<String, String> {
        used.iter()
            .map(|p| (format!("#{p}"), self.name(p).to_owned()))
            .collect()
    }

    /// The primary key of `key`'s record: partition key, and sort key if any.
    pub(crate) fn key(&self, key: &str) -> HashMap<String, AttributeValue> {
        let mut item = HashMap::from([(self.partition_key.clone(), s(key))]);
        if let Some((name, value)) = &self.sort_key {
            item.insert(name.clone(), s(value.as_str()));
        }
        item
    }

    /// The attribute names [`SET_COMPLETED`] and its conditions use.
    pub(crate) fn completed_names(&self) -> HashMap<String, String> {
        self.names(&[PK, OWNER, FINGERPRINT, STATE, RESULT, EXPIRES_MS, TTL])
    }

    /// The attribute values of an in-progress record for `owner`.
    pub(crate) fn running_item(
        &self,
        key: &str,
        fingerprint: Fingerprint,
        owner: &OwnerToken,
        expiry: &Expiry,
    ) -> HashMap<String, AttributeValue> {
        let mut item = self.key(key);
        item.extend([
            (self.owner.clone(), s(owner.as_str())),
            (self.fingerprint.clone(), s(fingerprint.to_string())),
            (self.status.clone(), s(RUNNING)),
            (self.expiry.clone(), n(expiry.expires_ms)),
            (self.ttl.clone(), n(expiry.ttl_secs)),
        ]);
        item
    }
}

/// The `state` of an in-progress record; completed records hold their result's kind.
pub(crate) const RUNNING: &str = "running";

/// `SET` clause of a completion: keeps the reservation's fingerprint (a record recreated after
/// its backend dropped it takes the one given).
pub(crate) const SET_COMPLETED: &str = "SET #owner = :owner, #fingerprint = if_not_exists(#fingerprint, :fingerprint), #state = :state, #result = :result, #expires_ms = :expires_ms, #ttl = :ttl";

/// Condition of a completion: the record is ours (running, or completed by an earlier try of
/// this same completion) or gone (our lease lapsed and nobody took over).
pub(crate) const OURS_OR_GONE: &str = "attribute_not_exists(#pk) OR #owner = :owner";

/// Condition of release, renewal and a transactional completion: the record is ours and still
/// running, or gone.
pub(crate) const OURS_RUNNING_OR_GONE: &str =
    "attribute_not_exists(#pk) OR (#owner = :owner AND #state = :running)";

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

/// A stored item, read back through the table's attribute names.
pub(crate) struct Item<'a> {
    attrs: &'a Attributes,
    item: &'a HashMap<String, AttributeValue>,
}

impl<'a> Item<'a> {
    pub(crate) fn new(attrs: &'a Attributes, item: &'a HashMap<String, AttributeValue>) -> Self {
        Item { attrs, item }
    }

    fn text(&self, placeholder: &str) -> Option<&str> {
        self.item
            .get(self.attrs.name(placeholder))
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
        self.item
            .get(self.attrs.name(EXPIRES_MS))
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
            let until = self
                .expires_ms()
                .ok_or_else(|| corrupt(&format!("no {}", self.attrs.name(EXPIRES_MS))))?;
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
        let attrs = Attributes::default();
        let running = attrs.running_item("k", fp, &owner, &Expiry::lease(Duration::from_secs(60)));
        let item = Item::new(&attrs, &running);
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
            Item::new(&attrs, &completed).to_reservation("k").unwrap(),
            Reservation::Completed {
                fingerprint: fp,
                result: StoredResult::Err("{\"a\":1}".into())
            }
        );
        completed.insert(STATE.into(), s("??"));
        assert!(Item::new(&attrs, &completed).to_reservation("k").is_err());
        completed.remove(FINGERPRINT);
        let err = Item::new(&attrs, &completed)
            .to_reservation("k")
            .unwrap_err();
        assert!(err.to_string().contains("no fingerprint"), "{err}");
    }

    #[test]
    fn custom_names_are_read_and_written_and_checked() {
        let attrs = Attributes::default()
            .partition_key("PK")
            .sort_key("SK", "IDEM")
            .status("st")
            .expiry("exp")
            .ttl("gone_at");
        attrs.validate().unwrap();
        let fp = Fingerprint::of(&1).unwrap();
        let owner = OwnerToken::generate();
        let running = attrs.running_item("k", fp, &owner, &Expiry::lease(Duration::from_secs(9)));
        for name in ["PK", "SK", "st", "exp", "gone_at", "owner", "fingerprint"] {
            assert!(running.contains_key(name), "{name}: {running:?}");
        }
        assert!(!running.contains_key("pk") && !running.contains_key("state"));
        assert!(Item::new(&attrs, &running).is_running());
        assert_eq!(attrs.key("k").len(), 2);
        assert_eq!(attrs.names(&[PK, STATE])["#state"], "st");
        let same = Attributes::default()
            .status("owner")
            .validate()
            .unwrap_err();
        assert!(same.to_string().contains("both named `owner`"), "{same}");
        let empty = Attributes::default()
            .partition_key("")
            .validate()
            .unwrap_err();
        assert!(empty.to_string().contains("partition key"), "{empty}");
        let no_value = Attributes::default().sort_key("SK", "").validate();
        assert!(no_value.is_err());
    }

    #[test]
    fn a_record_without_expiry_counts_as_expired() {
        let mut item = HashMap::new();
        item.insert(PARTITION_KEY.to_owned(), s("k"));
        assert!(Item::new(&Attributes::default(), &item).is_expired(now_ms()));
    }
}
