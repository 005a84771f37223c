//! Serialization crates whose macros build a document from a literal: `serde_json::json!({
//! "maxReceiveCount": 5, "error": e })`. The lowering reads an object literal's fields as
//! (key text, value) pairs, like a `doc!` ([`super::stores::mongodb::DOC_MACROS`]), so a
//! setting or a payload written as JSON is read as the fields it names.

/// Macros whose input is a JSON object literal (`json!({ .. })`); an array or an expression
/// input stays the expression it is.
pub const OBJECT_MACROS: &[&str] = &["json"];
