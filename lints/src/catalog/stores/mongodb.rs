//! MongoDB (`mongodb::Collection`): operations take a filter or a document built with
//! `doc!`, and the key is a field of it. An `update_one` whose filter tests a state field
//! besides the key, without `upsert(true)`, is a claim its `modified_count` answers; an
//! `insert_one` of a document with its `_id` set fails with a duplicate-key error (`E11000`)
//! when the id is taken, so a test of that error makes it a claim.

use super::{ClaimTest, MethodRow, OpKind};

/// The crate (as in `use`) and its collection type.
pub const CRATE: &str = "mongodb";

/// Macros that build a document (`mongodb::bson::doc!`, `bson!`); the lowering reads their
/// fields as (key, value) pairs.
pub const DOC_MACROS: &[&str] = &["doc", "bson"];

/// The field every collection keeps unique.
pub const ID_FIELD: &str = "_id";

/// Receiver names that stand for a collection when its type is not known (any name
/// holding one of these, ignoring case).
pub const RECEIVER_WORDS: &[&str] = &["coll", "collection"];

/// An operation of a collection. `key` is the argument holding the filter or document the
/// key is read from, `value` the update or replacement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MongoRow {
    pub row: MethodRow,
    /// A filter that tests a state field besides the key makes the write a claim answered
    /// by what it modified (and `upsert(true)` makes it an upsert).
    pub state_filter_claims: bool,
    /// A document with [`ID_FIELD`] set makes the insert a claim that fails when taken.
    pub unique_id_claims: bool,
}

const fn op(row: MethodRow) -> MongoRow {
    MongoRow {
        row,
        state_filter_claims: false,
        unique_id_claims: false,
    }
}

const fn conditional(row: MethodRow) -> MongoRow {
    MongoRow {
        row,
        state_filter_claims: true,
        unique_id_claims: false,
    }
}

pub const METHODS: &[MongoRow] = &[
    op(MethodRow::new("find_one", OpKind::Read, 0)
        .arity(1, 2)
        .unique()),
    op(MethodRow::new("count_documents", OpKind::Read, 0)
        .arity(1, 2)
        .unique()),
    MongoRow {
        row: MethodRow::new("insert_one", OpKind::Write, 0)
            .arity(1, 2)
            .unique(),
        state_filter_claims: false,
        unique_id_claims: true,
    },
    conditional(
        MethodRow::new("update_one", OpKind::Write, 0)
            .value(1)
            .arity(2, 3)
            .unique(),
    ),
    conditional(
        MethodRow::new("find_one_and_update", OpKind::Write, 0)
            .value(1)
            .arity(2, 3)
            .unique(),
    ),
    op(MethodRow::new("replace_one", OpKind::Write, 0)
        .value(1)
        .arity(2, 3)
        .unique()),
    op(MethodRow::new("delete_one", OpKind::Delete, 0)
        .arity(1, 2)
        .unique()),
];

/// What a state-filtered update or an `_id` insert claims by.
pub const FILTER_CLAIM: OpKind = OpKind::Claim(ClaimTest::Answer);
pub const ID_CLAIM: OpKind = OpKind::Claim(ClaimTest::FailsWhenTaken);

/// Option setters and fields that make an update insert a missing document.
pub const UPSERT: &str = "upsert";

/// The row of `method`.
pub fn method(method: &str) -> Option<&'static MongoRow> {
    METHODS.iter().find(|r| r.row.method == method)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_keep_their_invariants() {
        let rows: Vec<MethodRow> = METHODS.iter().map(|r| r.row).collect();
        super::super::check_rows(&rows);
        for r in METHODS {
            // Only writes become claims, and each by one rule.
            assert!(
                !(r.state_filter_claims && r.unique_id_claims),
                "{}",
                r.row.method
            );
            assert!(
                !(r.state_filter_claims || r.unique_id_claims) || r.row.op == OpKind::Write,
                "{}",
                r.row.method
            );
        }
        assert!(method("insert_one").unwrap().unique_id_claims);
    }
}
