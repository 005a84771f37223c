//! DynamoDB store (feature `dynamodb`): one item per record, written by conditional requests.
//!
//! # Table
//!
//! One table, any name, with a **string partition key `pk`** and no sort key (on-demand
//! billing suits bursty queues). Enable **Time to Live on the attribute `ttl`** so DynamoDB
//! deletes old records; the guard never needs it to (expiry is checked on every read and write,
//! because TTL deletion runs late, typically within days). [`DynamoDbStore::create_table_if_missing`]
//! makes such a table, for tests and development; in production declare it in your
//! infrastructure code. The names below are the defaults: a table of your own layout (another
//! partition key, a sort key with a fixed value for the records in a single-table design, other
//! attribute or TTL names) is described with [`Attributes`] and
//! [`DynamoDbStore::attributes`]:
//!
//! | attribute | type | meaning |
//! | --- | --- | --- |
//! | `pk` | S | the full key (`prefix:tenant:key`) |
//! | `owner` | S | the owner token of the attempt that reserved it (fencing) |
//! | `fingerprint` | S | the payload's fingerprint (32 hex digits) |
//! | `state` | S | `running`, or the result's kind: `ok`, `err` (cached error), `unreplayable` |
//! | `result` | S | the encoded result (completed records) |
//! | `expires_ms` | N | end of the lease or retention, epoch milliseconds: what conditions compare |
//! | `ttl` | N | epoch seconds after which DynamoDB may delete the item (the TTL attribute): the retention's end, or for a running record one more lease after its lease |
//!
//! # IAM
//!
//! The store calls `dynamodb:PutItem`, `dynamodb:UpdateItem` and `dynamodb:DeleteItem` on the
//! table (and `dynamodb:GetItem` only against a server that does not return the conflicting item
//! of a failed condition, which DynamoDB does). Transactional mode adds
//! `dynamodb:TransactWriteItems`' per-item actions (`PutItem`/`UpdateItem`/`DeleteItem`/
//! `ConditionCheckItem` on every table it writes). `create_table_if_missing` needs
//! `CreateTable`, `DescribeTable` and `UpdateTimeToLive`.
//!
//! # Clocks
//!
//! DynamoDB's conditions have no server clock, so leases and retentions are measured by the
//! writers' clocks (`expires_ms` against the writer's `now`). Keep them synchronized (NTP; Lambda
//! and EC2 are): a writer whose clock runs ahead by *s* sees leases end *s* early.
//!
//! Round trips: reserving, completing, releasing and renewing are one request each, so a first
//! delivery costs two (`PutItem`, `UpdateItem`) and a duplicate one (the `PutItem` whose condition
//! fails returns the live record: `ReturnValuesOnConditionCheckFailure=ALL_OLD`). In
//! transactional mode the completion rides in the caller's `TransactWriteItems`: still two.
//!
//! # A Lambda consumer of an SQS queue
//!
//! Each message runs under its payment's key, up to 8 at once; only the messages that failed
//! are returned as `batchItemFailures`, so only they are redelivered (enable "report batch item
//! failures" on the event source mapping). A redelivered batch replays the messages that
//! already ran. For a FIFO queue use `run_batch` (one message after another, in order).
//!
//! ```
//! use idem_guard::batch::BatchItem;
//! use idem_guard::{DynamoDbStore, Error, Guard};
//! use serde::{Deserialize, Serialize};
//!
//! // The parts of the SQS event and of the partial batch response that the handler uses
//! // (`aws_lambda_events`' `SqsEvent` and `SqsBatchResponse` have these shapes).
//! #[derive(Deserialize)]
//! struct SqsEvent {
//!     #[serde(rename = "Records")]
//!     records: Vec<SqsMessage>,
//! }
//! #[derive(Deserialize)]
//! struct SqsMessage {
//!     #[serde(rename = "messageId")]
//!     message_id: String,
//!     body: String,
//! }
//! #[derive(Serialize)]
//! struct BatchResponse {
//!     #[serde(rename = "batchItemFailures")]
//!     failures: Vec<ItemFailure>,
//! }
//! #[derive(Serialize)]
//! struct ItemFailure {
//!     #[serde(rename = "itemIdentifier")]
//!     id: String,
//! }
//!
//! #[derive(Deserialize, Serialize)]
//! struct Payment {
//!     payment_id: String,
//!     cents: u64,
//! }
//!
//! async fn capture(payment: &Payment) -> Result<String, Error> {
//!     // The effect: runs once per payment_id, however often the message comes.
//!     Ok(format!("receipt-{}-{}", payment.payment_id, payment.cents))
//! }
//!
//! async fn handle(guard: &Guard<DynamoDbStore>, event: SqsEvent) -> BatchResponse {
//!     let mut failed = Vec::new();
//!     let mut payments = Vec::new();
//!     for message in event.records {
//!         match serde_json::from_str::<Payment>(&message.body) {
//!             Ok(payment) => payments.push((message.message_id, payment)),
//!             // Redelivered until the queue's maxReceiveCount sends it to the dead-letter queue.
//!             Err(_) => failed.push(message.message_id),
//!         }
//!     }
//!     let report = guard
//!         .run_batch_concurrent(
//!             payments,
//!             // Key and payload from the body, never the receipt handle or receive count.
//!             |(id, payment)| BatchItem::new(id.clone(), payment.payment_id.clone(), payment),
//!             |(_, payment)| async move { capture(&payment).await },
//!             8,
//!         )
//!         .await;
//!     failed.extend(report.failed_ids().into_iter().map(str::to_owned));
//!     BatchResponse {
//!         failures: failed.into_iter().map(|id| ItemFailure { id }).collect(),
//!     }
//! }
//!
//! // Once per container (cold start):
//! //   let config = aws_config::load_defaults(BehaviorVersion::latest()).await;
//! //   let client = idem_guard::aws_sdk_dynamodb::Client::new(&config);
//! //   let guard = Guard::new(DynamoDbStore::new(client, "idem_guard_records"))
//! //       .prefix("capture")
//! //       .retention(Duration::from_secs(14 * 86_400)); // longer than the queue keeps messages
//! // Per invocation (lambda_runtime), the lease cut at the invocation's deadline:
//! //   let response = handle(&guard.clone().deadline(Instant::now() + remaining), event).await;
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! #     // Runs against the local server that `.ci/run` starts (moto).
//! #     let endpoint = std::env::var("DYNAMODB_ENDPOINT")
//! #         .unwrap_or_else(|_| "http://127.0.0.1:5124".into());
//! #     let table = format!("doc-lambda-{}", std::process::id());
//! #     let store = DynamoDbStore::new(idem_guard::dynamodb::local_client(&endpoint), table);
//! #     store.create_table_if_missing().await.unwrap();
//! #     let replays = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
//! #     let counted = replays.clone();
//! #     let guard = Guard::new(store).prefix("capture").on_replay(move |_| {
//! #         counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
//! #     });
//! #     let event = || -> SqsEvent {
//! #         serde_json::from_str(r#"{"Records": [
//! #             {"messageId": "m1", "body": "{\"payment_id\": \"p1\", \"cents\": 500}"},
//! #             {"messageId": "m2", "body": "not json"},
//! #             {"messageId": "m3", "body": "{\"payment_id\": \"p2\", \"cents\": 700}"}
//! #         ]}"#).unwrap()
//! #     };
//! #     for _delivery in 0..2 {
//! #         let response = serde_json::to_value(handle(&guard, event()).await).unwrap();
//! #         assert_eq!(response, serde_json::json!({"batchItemFailures": [{"itemIdentifier": "m2"}]}));
//! #     }
//! #     // The redelivered batch replayed m1 and m3 instead of capturing them again.
//! #     assert_eq!(replays.load(std::sync::atomic::Ordering::SeqCst), 2);
//! # }
//! ```

mod record;
mod transact;

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::operation::update_time_to_live::UpdateTimeToLiveError;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, KeySchemaElement, KeyType, ReturnValue,
    ReturnValuesOnConditionCheckFailure, ScalarAttributeType, TableStatus, TimeToLiveSpecification,
};
use aws_sdk_dynamodb::Client;

use crate::key::Fingerprint;
use crate::store::{fenced, OwnerToken, Reservation, Store, StoredResult};
use crate::Error;

pub use record::{Attributes, PARTITION_KEY, TTL_ATTRIBUTE};
pub use transact::{Transact, TransactAttempt};

use record::{
    completed_values, n, now_ms, s, Expiry, Item, EXPIRES_MS, OURS_OR_GONE, OURS_RUNNING_OR_GONE,
    OWNER, PK, RUNNING, SET_COMPLETED, STATE, TTL,
};

/// The default of [`DynamoDbStore::max_result_len`]: DynamoDB's item limit (400 KB, attribute
/// names and values together) less 4 KiB for the key (at most [`MAX_KEY_LEN`](crate::MAX_KEY_LEN)
/// bytes) and the record's other attributes.
pub const DEFAULT_MAX_RESULT_LEN: usize = 400 * 1024 - 4 * 1024;

/// Default bound on one store call, retries of the SDK included.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// Records in a DynamoDB table, one item per key (see the [module docs](self) for the schema,
/// the TTL setting and the IAM actions).
///
/// Reserving is one conditional `PutItem` (`attribute_not_exists(pk) OR expires_ms <= :now`):
/// it creates the record or takes over an expired one, and when the condition fails DynamoDB
/// returns the live record with the error, so a duplicate costs one request. Completing,
/// releasing and renewing are conditional on the owner token. [`Guard::run_transact`]
/// completes the record inside a `TransactWriteItems` together with the business writes.
///
/// ```no_run
/// use idem_guard::{dynamodb::DynamoDbStore, Guard};
///
/// # #[tokio::main] async fn main() -> Result<(), idem_guard::Error> {
/// // A client from your configuration (`aws_config::load_defaults(..)`), or for a local server:
/// let client = idem_guard::dynamodb::local_client("http://127.0.0.1:8000");
/// let store = DynamoDbStore::new(client, "idem_guard_records");
/// store.create_table_if_missing().await?; // tests and development only
/// let guard = Guard::new(store).prefix("refund");
/// let refunded: Result<u64, idem_guard::Error> =
///     guard.run("refund-7f3a", &("order-1", 500), || async { Ok(500) }).await;
/// # refunded?; Ok(()) }
/// ```
/// (`no_run` here: it needs a server; `tests/conformance` runs every rule of the `Store`
/// contract against a local DynamoDB-compatible server.)
///
/// [`Guard::run_transact`]: crate::Guard::run_transact
#[derive(Clone)]
pub struct DynamoDbStore {
    client: Client,
    table: Arc<str>,
    timeout: Duration,
    max_result_len: usize,
    attributes: Arc<Attributes>,
}

impl fmt::Debug for DynamoDbStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DynamoDbStore")
            .field("table", &self.table)
            .field("timeout", &self.timeout)
            .field("attributes", &self.attributes)
            .finish_non_exhaustive()
    }
}

/// A failed DynamoDB request, with what the store was doing.
#[derive(Debug)]
pub(crate) struct StoreFailure {
    context: String,
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl fmt::Display for StoreFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.context)
    }
}

impl std::error::Error for StoreFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// Whether DynamoDB refused a write for the item's size: final, unlike a store failure.
fn over_item_limit<R>(e: &SdkError<UpdateItemError, R>) -> bool {
    e.as_service_error().is_some_and(|e| {
        e.code() == Some("ValidationException")
            && e.message()
                .is_some_and(|m| m.contains("exceeded the maximum allowed size"))
    })
}

/// The answer to a conditional write: done, or refused with the item that refused it (when the
/// server returned it).
enum Conditional<T> {
    Done(T),
    Refused(Option<HashMap<String, AttributeValue>>),
}

impl DynamoDbStore {
    /// Uses `client` (built by you: credentials, region, retries, timeouts) and the table
    /// `table`, which must exist (see [`create_table_if_missing`](Self::create_table_if_missing)).
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        DynamoDbStore {
            client,
            table: Arc::from(table.into()),
            timeout: DEFAULT_TIMEOUT,
            max_result_len: DEFAULT_MAX_RESULT_LEN,
            attributes: Arc::new(Attributes::default()),
        }
    }

    /// Uses the table's own attribute names (a partition key other than `pk`, a sort key with
    /// the records' fixed value, other names for the record's attributes and the TTL), for
    /// a table shared with other items (single-table design) or named by your conventions.
    /// Fails with [`Error::Store`] naming the problem when a name is empty or longer than
    /// 255 bytes, two attributes have the same name, or the sort key value is empty.
    ///
    /// ```
    /// use idem_guard::dynamodb::{Attributes, DynamoDbStore};
    ///
    /// # fn main() -> Result<(), idem_guard::Error> {
    /// let client = idem_guard::dynamodb::local_client("http://127.0.0.1:8000");
    /// let store = DynamoDbStore::new(client, "app").attributes(
    ///     Attributes::default()
    ///         .partition_key("PK")
    ///         .sort_key("SK", "IDEMPOTENCY")
    ///         .status("status")
    ///         .ttl("expires_at"),
    /// )?;
    /// # let _ = store; Ok(()) }
    /// ```
    pub fn attributes(mut self, attributes: Attributes) -> Result<Self, Error> {
        attributes.validate()?;
        self.attributes = Arc::new(attributes);
        Ok(self)
    }

    /// The table's attribute names the store uses.
    pub fn attribute_names(&self) -> &Attributes {
        &self.attributes
    }

    /// The longest result kept, in bytes of its encoded text (default
    /// [`DEFAULT_MAX_RESULT_LEN`], below DynamoDB's 400 KB item limit with room for the key and
    /// the record's other attributes): a longer one fails at once with
    /// [`Error::ResultTooLarge`], never a write DynamoDB would refuse. Raising it above what
    /// the item limit leaves makes DynamoDB refuse the write instead, which the store reports
    /// as the same error.
    pub fn max_result_len(mut self, bytes: usize) -> Self {
        self.max_result_len = bytes;
        self
    }

    /// Bounds every store call (the SDK's own retries included) by `timeout`, default 5 s, so an
    /// unreachable or hung endpoint surfaces as [`Error::Store`] instead of a hang. Give the
    /// client its own `TimeoutConfig` too, so that each attempt is bounded and retried.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The client, to make business requests next to the guard.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The table's name.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// Creates the table if it is missing (string partition key `pk`, or the one of
    /// [`attributes`](Self::attributes) with its string sort key if any; on-demand billing),
    /// waits until it is active, and enables TTL on `ttl` (or the attribute named so). For
    /// tests and development; production tables belong in infrastructure code.
    pub async fn create_table_if_missing(&self) -> Result<(), Error> {
        let attrs = &self.attributes;
        let mut keys = vec![(attrs.partition_key_name(), KeyType::Hash)];
        if let Some((sort_key, _)) = attrs.sort_key_of_records() {
            keys.push((sort_key, KeyType::Range));
        }
        let mut create = self
            .client
            .create_table()
            .table_name(self.table())
            .billing_mode(BillingMode::PayPerRequest);
        for (name, kind) in keys {
            create = create
                .attribute_definitions(
                    AttributeDefinition::builder()
                        .attribute_name(name)
                        .attribute_type(ScalarAttributeType::S)
                        .build()
                        .map_err(Error::store)?,
                )
                .key_schema(
                    KeySchemaElement::builder()
                        .attribute_name(name)
                        .key_type(kind)
                        .build()
                        .map_err(Error::store)?,
                );
        }
        let created = create.send().await;
        match created {
            Ok(_) => {}
            Err(e)
                if e.as_service_error()
                    .is_some_and(|e| e.is_resource_in_use_exception()) => {}
            Err(e) => return Err(self.failure("CreateTable", None, e)),
        }
        self.wait_until_active().await?;
        let ttl = TimeToLiveSpecification::builder()
            .enabled(true)
            .attribute_name(attrs.ttl_name())
            .build()
            .map_err(Error::store)?;
        match self
            .client
            .update_time_to_live()
            .table_name(self.table())
            .time_to_live_specification(ttl)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            // DynamoDB refuses to enable TTL twice; a table made earlier is fine as it is.
            Err(e) if is_ttl_already_enabled(&e) => Ok(()),
            Err(e) => Err(self.failure("UpdateTimeToLive", None, e)),
        }
    }

    async fn wait_until_active(&self) -> Result<(), Error> {
        for _ in 0..120 {
            let described = self
                .client
                .describe_table()
                .table_name(self.table())
                .send()
                .await
                .map_err(|e| self.failure("DescribeTable", None, e))?;
            let status = described.table().and_then(|t| t.table_status());
            if status == Some(&TableStatus::Active) {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        Err(Error::store(format!(
            "DynamoDB table `{}` did not become active within 60 s",
            self.table
        )))
    }

    fn failure<E, R>(&self, action: &str, key: Option<&str>, e: SdkError<E, R>) -> Error
    where
        E: std::error::Error + Send + Sync + 'static,
        R: fmt::Debug + Send + Sync + 'static,
    {
        let on = match key {
            Some(key) => format!("of #{} ", crate::observe::key_hash(key)),
            None => String::new(),
        };
        Error::Store(Box::new(StoreFailure {
            context: format!(
                "DynamoDB {action} {on}on table `{}` failed: {}",
                self.table,
                DisplayErrorContext(&e)
            ),
            source: Some(Box::new(e)),
        }))
    }

    /// Runs one request under the store's timeout.
    async fn bounded<T>(
        &self,
        action: &str,
        key: &str,
        request: impl Future<Output = Result<T, Error>>,
    ) -> Result<T, Error> {
        match tokio::time::timeout(self.timeout, request).await {
            Ok(done) => done,
            Err(_) => Err(Error::Store(Box::new(StoreFailure {
                context: format!(
                    "DynamoDB {action} of #{} on table `{}` got no answer within {} ms",
                    crate::observe::key_hash(key),
                    self.table,
                    self.timeout.as_millis()
                ),
                source: None,
            }))),
        }
    }

    /// Tells a failed condition (with the item, when returned) from every other failure.
    fn conditional<T, E, R>(
        &self,
        action: &str,
        key: &str,
        sent: Result<T, SdkError<E, R>>,
        refused_item: impl FnOnce(&E) -> Option<Option<HashMap<String, AttributeValue>>>,
    ) -> Result<Conditional<T>, Error>
    where
        E: std::error::Error + Send + Sync + 'static,
        R: fmt::Debug + Send + Sync + 'static,
    {
        match sent {
            Ok(output) => Ok(Conditional::Done(output)),
            Err(e) => match e.as_service_error().and_then(refused_item) {
                Some(item) => Ok(Conditional::Refused(item)),
                None => Err(self.failure(action, Some(key), e)),
            },
        }
    }

    /// The stored item of `key`, read consistently: for servers that do not return the item
    /// that failed a condition.
    async fn read(&self, key: &str) -> Result<Option<HashMap<String, AttributeValue>>, Error> {
        let read = self
            .client
            .get_item()
            .table_name(self.table())
            .set_key(Some(self.attributes.key(key)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| self.failure("GetItem", Some(key), e))?;
        Ok(read.item)
    }

    /// The item that refused a condition: the one DynamoDB returned, or a consistent read.
    async fn refusing_item(
        &self,
        key: &str,
        returned: Option<HashMap<String, AttributeValue>>,
    ) -> Result<Option<HashMap<String, AttributeValue>>, Error> {
        match returned {
            Some(item) => Ok(Some(item)),
            None => self.read(key).await,
        }
    }

    async fn try_reserve(
        &self,
        key: &str,
        fingerprint: Fingerprint,
        owner: &OwnerToken,
        lease: Duration,
    ) -> Result<Option<Reservation>, Error> {
        let now = now_ms();
        let sent = self
            .client
            .put_item()
            .table_name(self.table())
            .set_item(Some(self.attributes.running_item(
                key,
                fingerprint,
                owner,
                &Expiry::lease(lease),
            )))
            .condition_expression("attribute_not_exists(#pk) OR #expires_ms <= :now")
            .set_expression_attribute_names(Some(self.attributes.names(&[PK, EXPIRES_MS])))
            .expression_attribute_values(":now", n(now))
            .return_values(ReturnValue::AllOld)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        let refused = |e: &PutItemError| match e {
            PutItemError::ConditionalCheckFailedException(c) => Some(c.item.clone()),
            _ => None,
        };
        match self.conditional("PutItem (reserve)", key, sent, refused)? {
            Conditional::Done(put) => {
                // The old item, if any, was expired: a running one was abandoned.
                let abandoned = put
                    .attributes()
                    .is_some_and(|old| Item::new(&self.attributes, old).is_running());
                Ok(Some(if abandoned {
                    Reservation::TakenOver
                } else {
                    Reservation::Acquired
                }))
            }
            Conditional::Refused(returned) => match self.refusing_item(key, returned).await? {
                Some(item) if !Item::new(&self.attributes, &item).is_expired(now_ms()) => {
                    Item::new(&self.attributes, &item)
                        .to_reservation(key)
                        .map(Some)
                }
                // It expired (or was released) since the condition was checked: try again.
                _ => Ok(None),
            },
        }
    }

    /// Settles a refused release or renewal: a record that we completed stays as it is;
    /// any other owner's record fences us out.
    async fn ours_completed(
        &self,
        key: &str,
        owner: &OwnerToken,
        returned: Option<HashMap<String, AttributeValue>>,
    ) -> Result<(), Error> {
        let item = self.refusing_item(key, returned).await?;
        let ours = item.is_none_or(|item| Item::new(&self.attributes, &item).is_owned_by(owner));
        fenced(ours, key)
    }
}

/// `UpdateTimeToLive` on a table whose TTL is already on (DynamoDB: "TimeToLive is already
/// enabled").
fn is_ttl_already_enabled<R>(e: &SdkError<UpdateTimeToLiveError, R>) -> bool {
    use aws_sdk_dynamodb::error::ProvideErrorMetadata;
    e.as_service_error()
        .and_then(|e| e.message())
        .is_some_and(|m| m.contains("already enabled"))
}

impl Store for DynamoDbStore {
    async fn reserve(
        &self,
        key: &str,
        fingerprint: Fingerprint,
        owner: &OwnerToken,
        lease: Duration,
    ) -> Result<Reservation, Error> {
        self.bounded("PutItem (reserve)", key, async {
            // A refused condition whose record has expired by the time it is read is retried;
            // more than a few in a row means the clocks or the table are not what we think.
            for _ in 0..5 {
                if let Some(found) = self.try_reserve(key, fingerprint, owner, lease).await? {
                    return Ok(found);
                }
            }
            Err(Error::store(format!(
                "DynamoDB kept refusing the reservation of #{} on table `{}` for a record that was already expired",
                crate::observe::key_hash(key),
                self.table
            )))
        })
        .await
    }

    async fn complete(
        &self,
        key: &str,
        fingerprint: Fingerprint,
        owner: &OwnerToken,
        result: &StoredResult,
        retention: Duration,
    ) -> Result<(), Error> {
        self.bounded("UpdateItem (complete)", key, async {
            let sent = self
                .client
                .update_item()
                .table_name(self.table())
                .set_key(Some(self.attributes.key(key)))
                .update_expression(SET_COMPLETED)
                .condition_expression(OURS_OR_GONE)
                .set_expression_attribute_names(Some(self.attributes.completed_names()))
                .set_expression_attribute_values(Some(completed_values(
                    fingerprint,
                    owner,
                    result,
                    &Expiry::retention(retention),
                )))
                .send()
                .await;
            if let Err(e) = &sent {
                if over_item_limit(e) {
                    return Err(Error::ResultTooLarge {
                        key: key.to_owned(),
                        len: result.len(),
                        limit: self.max_result_len,
                    });
                }
            }
            let refused = |e: &UpdateItemError| {
                matches!(e, UpdateItemError::ConditionalCheckFailedException(_)).then_some(None)
            };
            match self.conditional("UpdateItem (complete)", key, sent, refused)? {
                Conditional::Done(_) => Ok(()),
                Conditional::Refused(_) => fenced(false, key),
            }
        })
        .await
    }

    async fn release(&self, key: &str, owner: &OwnerToken) -> Result<(), Error> {
        self.bounded("DeleteItem (release)", key, async {
            let sent = self
                .client
                .delete_item()
                .table_name(self.table())
                .set_key(Some(self.attributes.key(key)))
                .condition_expression(OURS_RUNNING_OR_GONE)
                .set_expression_attribute_names(Some(self.attributes.names(&[PK, OWNER, STATE])))
                .expression_attribute_values(":owner", s(owner.as_str()))
                .expression_attribute_values(":running", s(RUNNING))
                .return_values_on_condition_check_failure(
                    ReturnValuesOnConditionCheckFailure::AllOld,
                )
                .send()
                .await;
            let refused = |e: &DeleteItemError| match e {
                DeleteItemError::ConditionalCheckFailedException(c) => Some(c.item.clone()),
                _ => None,
            };
            match self.conditional("DeleteItem (release)", key, sent, refused)? {
                Conditional::Done(_) => Ok(()),
                Conditional::Refused(item) => self.ours_completed(key, owner, item).await,
            }
        })
        .await
    }

    fn max_result_len(&self) -> usize {
        self.max_result_len
    }

    async fn renew(
        &self,
        key: &str,
        fingerprint: Fingerprint,
        owner: &OwnerToken,
        lease: Duration,
    ) -> Result<(), Error> {
        self.bounded("UpdateItem (renew)", key, async {
            let expiry = Expiry::lease(lease);
            let sent = self
                .client
                .update_item()
                .table_name(self.table())
                .set_key(Some(self.attributes.key(key)))
                .update_expression(
                    "SET #owner = :owner, #fingerprint = :fingerprint, #state = :running, #expires_ms = :expires_ms, #ttl = :ttl",
                )
                .condition_expression(OURS_RUNNING_OR_GONE)
                .set_expression_attribute_names(Some(self.attributes.names(&[
                    PK,
                    OWNER,
                    record::FINGERPRINT,
                    STATE,
                    EXPIRES_MS,
                    TTL,
                ])))
                .expression_attribute_values(":owner", s(owner.as_str()))
                .expression_attribute_values(":fingerprint", s(fingerprint.to_string()))
                .expression_attribute_values(":running", s(RUNNING))
                .expression_attribute_values(":expires_ms", n(expiry.expires_ms))
                .expression_attribute_values(":ttl", n(expiry.ttl_secs))
                .return_values_on_condition_check_failure(
                    ReturnValuesOnConditionCheckFailure::AllOld,
                )
                .send()
                .await;
            let refused = |e: &UpdateItemError| match e {
                UpdateItemError::ConditionalCheckFailedException(c) => Some(c.item.clone()),
                _ => None,
            };
            match self.conditional("UpdateItem (renew)", key, sent, refused)? {
                Conditional::Done(_) => Ok(()),
                Conditional::Refused(item) => self.ours_completed(key, owner, item).await,
            }
        })
        .await
    }
}

/// A client for a local DynamoDB-compatible server (moto, DynamoDB Local) at `endpoint_url`:
/// plain HTTP, static placeholder credentials, region `us-east-1`, and per-attempt timeouts
/// (connect 1 s, attempt 3 s). For tests and development; in production build the client from
/// your AWS configuration (`aws_config`).
pub fn local_client(endpoint_url: &str) -> Client {
    use aws_sdk_dynamodb::config::{timeout::TimeoutConfig, BehaviorVersion, Credentials, Region};
    let timeouts = TimeoutConfig::builder()
        .connect_timeout(Duration::from_secs(1))
        .operation_attempt_timeout(Duration::from_secs(3))
        .build();
    let config = aws_sdk_dynamodb::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .http_client(aws_smithy_http_client::Builder::new().build_http())
        .credentials_provider(Credentials::new("local", "local", None, None, "idem-guard"))
        .region(Region::new("us-east-1"))
        .endpoint_url(endpoint_url)
        .timeout_config(timeouts)
        .build();
    Client::from_conf(config)
}
