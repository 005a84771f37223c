//! DynamoDB (`aws_sdk_dynamodb`): a request built on the client and run by `.send()`.

use super::{ClaimTest, OpKind};

/// The crate (as in `use`) and the client type whose requests these are.
pub const CRATE: &str = "aws_sdk_dynamodb";
pub const CLIENT: &str = "aws_sdk_dynamodb::Client";

/// The method that runs a built request.
pub const TERMINAL: &str = "send";

/// One request of the client: `client.put_item()..send()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestRow {
    pub operation: &'static str,
    /// What it does without a condition expression.
    pub op: OpKind,
    /// What it does with one.
    pub conditional: OpKind,
    /// The setter whose `(name, value)` pairs hold the key (`None`: the key is read from
    /// the item or not known).
    pub key_setter: Option<&'static str>,
}

const CLAIM: OpKind = OpKind::Claim(ClaimTest::FailsWhenTaken);

pub const REQUESTS: &[RequestRow] = &[
    RequestRow {
        operation: "get_item",
        op: OpKind::Read,
        conditional: OpKind::Read,
        key_setter: Some(KEY),
    },
    RequestRow {
        operation: "query",
        op: OpKind::Read,
        conditional: OpKind::Read,
        key_setter: Some(VALUES),
    },
    RequestRow {
        operation: "delete_item",
        op: OpKind::Delete,
        conditional: OpKind::Delete,
        key_setter: Some(KEY),
    },
    RequestRow {
        operation: "update_item",
        op: OpKind::Write,
        conditional: CLAIM,
        key_setter: Some(KEY),
    },
    RequestRow {
        operation: "put_item",
        op: OpKind::Write,
        conditional: CLAIM,
        key_setter: None,
    },
    RequestRow {
        operation: "transact_write_items",
        op: OpKind::Write,
        conditional: OpKind::Write,
        key_setter: None,
    },
];

/// Setters of a request, by what they give.
pub const TABLE: &[&str] = &["table_name", "set_table_name"];
pub const CONDITION: &[&str] = &["condition_expression", "set_condition_expression"];
pub const UPDATE: &[&str] = &["update_expression", "set_update_expression"];
pub const KEY: &str = "key";
pub const ITEM: &str = "item";
/// The whole item in one map (`set_item(Some(item))`): its attributes are not read.
pub const WHOLE_ITEM: &str = "set_item";
pub const VALUES: &str = "expression_attribute_values";
pub const NAMES: &str = "expression_attribute_names";
/// A transaction's items, and the builders of one item.
pub const TRANSACT_ITEMS: &str = "transact_items";
pub const TRANSACT_ITEM_PARTS: &[&str] = &["update", "put", "set_update", "set_put"];

/// The row of `operation`.
pub fn request(operation: &str) -> Option<&'static RequestRow> {
    REQUESTS.iter().find(|r| r.operation == operation)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_keep_their_invariants() {
        for (i, r) in REQUESTS.iter().enumerate() {
            assert!(REQUESTS[..i].iter().all(|o| o.operation != r.operation));
            // A condition only ever makes a write a claim.
            assert!(r.conditional == r.op || r.op == OpKind::Write && r.conditional == CLAIM);
            assert!(r.key_setter.is_some() || r.op.writes(), "{}", r.operation);
        }
        assert_eq!(request("put_item").unwrap().conditional, CLAIM);
    }
}
