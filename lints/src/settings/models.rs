//! `[models]`: the user's own wrappers described in the catalog's form, one array of tables
//! per kind of row (`[[models.store]]`, `[[models.entry]]`, `[[models.effect]]`,
//! `[[models.sink]]`, `[[models.source]]`). Each row is parsed into the type of the
//! built-in rows of its kind ([`MethodRow`], [`EntryAttr`], [`EntryCall`], a token API, a
//! key name, a source path) and the catalog answers from both ([`super::Settings::catalog`]).
//! A row that is wrong is refused with the allowed values, never read as something else.

use super::missing_idempotency_token::ConfiguredApi;
use crate::catalog::entries::EntryKind;
use crate::catalog::frameworks::{CallForm, EntryAttr, EntryCall};
use crate::catalog::intern;
use crate::catalog::stores::{ClaimTest, MethodRow, OpKind, Ttl, TypeRow};
use serde::Deserialize;

/// The kinds of row, as `[[models.<kind>]]` spells them.
pub const KINDS: &[&str] = &["store", "entry", "effect", "sink", "source"];

/// Every row the configuration declares, parsed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Models {
    pub stores: Vec<TypeRow>,
    pub entry_attrs: Vec<EntryAttr>,
    pub entry_calls: Vec<EntryCall>,
    /// Effects that take a token (as `[lints.missing_idempotency_token] apis`).
    pub token_apis: Vec<ConfiguredApi>,
    /// Effects without a token: calls a duplicate must not repeat (as
    /// `[lints.unguarded_entry_point] effects`).
    pub effects: Vec<String>,
    pub key_names: Vec<String>,
    pub sources: Vec<String>,
}

impl Models {
    pub fn is_empty(&self) -> bool {
        *self == Models::default()
    }

    /// Adds one row of kind `kind` (`store`, `entry`, ...). The error says what is wrong and
    /// what is allowed; the driver prefixes where the row was written.
    pub fn add(&mut self, kind: &str, row: serde_json::Value) -> Result<(), String> {
        match kind {
            "store" => self.stores.push(parse::<StoreRow>(row)?.into_row()?),
            "entry" => match parse::<EntryRow>(row)?.into_row()? {
                Entry::Attr(a) => self.entry_attrs.push(a),
                Entry::Call(c) => self.entry_calls.push(c),
            },
            "effect" => {
                let e = parse::<EffectRow>(row)?;
                match e.token {
                    Some(token) => {
                        let api = ConfiguredApi {
                            krate: e.krate.map(|k| k.replace('-', "_")),
                            method: e.method,
                            token,
                            send: e.send.unwrap_or_else(|| "send".to_owned()),
                        };
                        api.check().map_err(|(key, value)| {
                            format!("{key}: `{value}` is not a Rust identifier")
                        })?;
                        self.token_apis.push(api);
                    }
                    None if e.krate.is_some() || e.send.is_some() => {
                        return Err("`crate` and `send` describe the request of an effect \
                                    that takes a `token`; without `token`, an effect is named \
                                    by `method` alone"
                            .to_owned())
                    }
                    None => self.effects.push(non_empty("method", e.method)?),
                }
            }
            "sink" => {
                let s = parse::<SinkRow>(row)?;
                self.key_names.push(non_empty("key_name", s.key_name)?);
            }
            "source" => {
                let s = parse::<SourceRow>(row)?;
                self.sources.push(non_empty("path", s.path)?);
            }
            other => {
                return Err(format!(
                    "unknown kind of model `{other}` (expected one of {})",
                    quoted(KINDS)
                ))
            }
        }
        Ok(())
    }
}

fn parse<T: serde::de::DeserializeOwned>(row: serde_json::Value) -> Result<T, String> {
    serde_json::from_value(row).map_err(|e| e.to_string())
}

fn quoted(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn non_empty(key: &str, value: String) -> Result<String, String> {
    if value.trim().is_empty() {
        Err(format!("`{key}` is empty"))
    } else {
        Ok(value)
    }
}

/// `{ type = "MyKv", method = "claim", op = "claim", claim_test = "answer", key = 0 }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoreRow {
    #[serde(rename = "type")]
    ty: String,
    method: String,
    op: Op,
    claim_test: Option<Test>,
    key: usize,
    value: Option<usize>,
    ttl: Option<TtlWord>,
    ttl_secs: Option<usize>,
    ttl_millis: Option<usize>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Op {
    Read,
    Write,
    Upsert,
    Claim,
    Increment,
    Delete,
    Expire,
    TxBegin,
    TxCommit,
    TxRollback,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Test {
    Answer,
    FailsWhenTaken,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum TtlWord {
    Never,
    At,
}

impl StoreRow {
    fn into_row(self) -> Result<TypeRow, String> {
        let op = match (self.op, self.claim_test) {
            (Op::Claim, Some(Test::Answer)) => OpKind::Claim(ClaimTest::Answer),
            (Op::Claim, Some(Test::FailsWhenTaken)) => OpKind::Claim(ClaimTest::FailsWhenTaken),
            (Op::Claim, None) => {
                return Err(
                    "a `claim` needs `claim_test`: how the caller learns it won \
                            (`answer`: by the value it returns, `fails_when_taken`: by an \
                            error when the key is taken)"
                        .to_owned(),
                )
            }
            (_, Some(_)) => return Err("`claim_test` is for `op = \"claim\"` only".to_owned()),
            (Op::Read, None) => OpKind::Read,
            (Op::Write, None) => OpKind::Write,
            (Op::Upsert, None) => OpKind::Upsert,
            (Op::Increment, None) => OpKind::Increment,
            (Op::Delete, None) => OpKind::Delete,
            (Op::Expire, None) => OpKind::Expire,
            // The transaction shapes the engine follows are those of SQL, DynamoDB and
            // Redis; a user's begin/commit would be accepted and read as nothing.
            (Op::TxBegin | Op::TxCommit | Op::TxRollback, None) => {
                return Err("transaction steps of a user's type are not read yet: the \
                            engine follows the transactions of SQL, DynamoDB and Redis \
                            (allowed: `read`, `write`, `upsert`, `claim`, `increment`, \
                            `delete`, `expire`)"
                    .to_owned())
            }
        };
        let ttl =
            match (self.ttl, self.ttl_secs, self.ttl_millis) {
                (None, None, None) => Ttl::Unsaid,
                (Some(TtlWord::Never), None, None) => Ttl::Never,
                (Some(TtlWord::At), None, None) => Ttl::At,
                (None, Some(i), None) => Ttl::Secs(i),
                (None, None, Some(i)) => Ttl::Millis(i),
                _ => return Err(
                    "give at most one of `ttl` (\"never\", \"at\"), `ttl_secs` and `ttl_millis`"
                        .to_owned(),
                ),
            };
        let ty = non_empty("type", self.ty)?;
        let method = non_empty("method", self.method)?;
        let mut row = MethodRow::new(intern(&method), op, self.key).ttl(ttl);
        row.value = self.value;
        if let Some(problem) = row.problem() {
            return Err(format!("`{ty}::{method}`: {problem}"));
        }
        Ok(TypeRow {
            ty: intern(ty.trim_start_matches("::")),
            row,
        })
    }
}

/// `{ attribute = "my_consumer", kind = "job" }`, `{ function = "jobs::register", kind =
/// "job" }`, `{ method = "on_message", kind = "job" }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EntryRow {
    attribute: Option<String>,
    function: Option<String>,
    method: Option<String>,
    kind: Kind,
}

/// The kinds a user's entry can be; what each receives is the built-in kind's
/// (`catalog::entries::delivery`).
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Kind {
    Route,
    Job,
    Service,
    Spawned,
}

enum Entry {
    Attr(EntryAttr),
    Call(EntryCall),
}

impl EntryRow {
    fn into_row(self) -> Result<Entry, String> {
        let kind = match self.kind {
            Kind::Route => EntryKind::Route,
            Kind::Job => EntryKind::Job,
            Kind::Service => EntryKind::Service,
            Kind::Spawned => EntryKind::Spawned,
        };
        let call = |name: String, form| -> Result<Entry, String> {
            let name = non_empty("function", name)?;
            Ok(Entry::Call(EntryCall {
                name: intern(name.trim_start_matches("::")),
                form,
                kind,
                crates: &[],
                framework: false,
            }))
        };
        match (self.attribute, self.function, self.method) {
            (Some(a), None, None) => Ok(Entry::Attr(EntryAttr {
                name: intern(non_empty("attribute", a)?.rsplit("::").next().unwrap_or("")),
                kind,
                path_literal: false,
            })),
            (None, Some(f), None) => call(f, CallForm::Path),
            (None, None, Some(m)) if m.contains("::") => Err(format!(
                "`method = \"{m}\"`: a method is named without its type"
            )),
            (None, None, Some(m)) => call(m, CallForm::Method),
            _ => Err(
                "give exactly one of `attribute` (on the entry fn), `function` (called by \
                 path with the entry fn as an argument) and `method` (the same, called as a \
                 method)"
                    .to_owned(),
            ),
        }
    }
}

/// `{ crate = "payments", method = "create_refund", token = "idempotency_key" }`, or
/// `{ method = "push_notification" }` for an effect that takes no token.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EffectRow {
    #[serde(rename = "crate")]
    krate: Option<String>,
    method: String,
    token: Option<String>,
    send: Option<String>,
}

/// `{ key_name = "job_key" }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SinkRow {
    key_name: String,
}

/// `{ path = "my_ids::fresh_id" }` or a whole crate, `{ path = "snowflake::*" }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SourceRow {
    path: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rows_parse_into_the_catalogs_types() {
        let mut m = Models::default();
        m.add(
            "store",
            json!({"type": "MyKv", "method": "claim", "op": "claim", "claim_test": "answer", "key": 0, "value": 1, "ttl_secs": 2}),
        )
        .unwrap();
        let r = m.stores[0];
        assert_eq!(r.ty, "MyKv");
        assert_eq!(r.row.op, OpKind::Claim(ClaimTest::Answer));
        assert_eq!(
            (r.row.key, r.row.value, r.row.ttl),
            (Some(0), Some(1), Ttl::Secs(2))
        );
        m.add(
            "entry",
            json!({"attribute": "my::my_consumer", "kind": "job"}),
        )
        .unwrap();
        assert_eq!(m.entry_attrs[0].name, "my_consumer");
        m.add("entry", json!({"method": "on_message", "kind": "job"}))
            .unwrap();
        assert_eq!(m.entry_calls[0].form, CallForm::Method);
        m.add(
            "effect",
            json!({"crate": "pay-ments", "method": "refund", "token": "key"}),
        )
        .unwrap();
        assert_eq!(m.token_apis[0].krate.as_deref(), Some("pay_ments"));
        m.add("effect", json!({"method": "push"})).unwrap();
        assert_eq!(m.effects, vec!["push"]);
    }

    #[test]
    fn bad_rows_name_what_is_allowed() {
        let mut m = Models::default();
        let err = |m: &mut Models, kind, row| m.add(kind, row).unwrap_err();
        let e = err(&mut m, "stores", json!({}));
        assert!(e.contains("`store`, `entry`"), "{e}");
        let e = err(
            &mut m,
            "store",
            json!({"type": "K", "method": "m", "op": "grab", "key": 0}),
        );
        assert!(e.contains("grab") && e.contains("claim"), "{e}");
        let e = err(
            &mut m,
            "store",
            json!({"type": "K", "method": "m", "op": "claim", "key": 0}),
        );
        assert!(e.contains("claim_test"), "{e}");
        let e = err(
            &mut m,
            "store",
            json!({"type": "K", "method": "m", "op": "read", "key": 0, "value": 0}),
        );
        assert!(e.contains("stores none"), "{e}");
        let e = err(
            &mut m,
            "store",
            json!({"type": "K", "method": "m", "op": "tx_begin", "key": 0}),
        );
        assert!(e.contains("not read yet"), "{e}");
        let e = err(
            &mut m,
            "store",
            json!({"type": "K", "method": "m", "op": "read"}),
        );
        assert!(e.contains("key"), "{e}");
        let e = err(
            &mut m,
            "entry",
            json!({"attribute": "a", "kind": "consumer"}),
        );
        assert!(e.contains("route") && e.contains("spawned"), "{e}");
        let e = err(
            &mut m,
            "entry",
            json!({"attribute": "a", "method": "b", "kind": "job"}),
        );
        assert!(e.contains("exactly one"), "{e}");
        let e = err(&mut m, "effect", json!({"method": "x", "tokn": "k"}));
        assert!(e.contains("tokn") && e.contains("token"), "{e}");
        assert!(m.is_empty());
    }
}
