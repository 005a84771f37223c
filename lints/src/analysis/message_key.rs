//! The identity of the message a function handles, when its parameters show it: what a
//! suggested idempotency key or token is built from.
//!
//! Without types, "the message" is a parameter whose type is a struct of the crate with a
//! field that names a message by its identity (`event_id`, `message_id`, `command_id`,
//! `order_id`, `id`, ...). A fix built from it is a good guess, not a certainty: the same
//! message may start several operations that each need their own key (a stage, an item),
//! so suggestions built on it are at most `MaybeIncorrect`.

use crate::model::ir::{Pat, Type};
use crate::model::{FnDef, Package};

/// Field names that identify a message, best first.
const ID_FIELDS: &[&str] = &[
    "idempotency_key",
    "event_id",
    "message_id",
    "command_id",
    "request_id",
    "order_id",
    "id",
];

/// `event.event_id` of a handler `fn f(.., event: &Event)` where `Event` has `event_id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageKey {
    /// The parameter: `event`.
    pub param: String,
    /// The field: `event_id`.
    pub field: String,
    /// Whether the field is written as a `String`.
    pub is_string: bool,
}

impl MessageKey {
    /// The key as an argument taking `impl Into<String>`: `&event.event_id` for a `String`
    /// field, else `event.event_id.to_string()`.
    pub fn as_string_arg(&self) -> String {
        if self.is_string {
            format!("&{}.{}", self.param, self.field)
        } else {
            format!("{}.{}.to_string()", self.param, self.field)
        }
    }

    /// The key as an owned `String`: `event.event_id.clone()`, or `.to_string()` of a field
    /// of another type.
    pub fn owned_string(&self) -> String {
        let conversion = if self.is_string { "clone" } else { "to_string" };
        format!("{}.{}.{conversion}()", self.param, self.field)
    }

    /// `event.event_id`.
    pub fn expr(&self) -> String {
        format!("{}.{}", self.param, self.field)
    }
}

/// The message key among `f`'s parameters, the best-named field of the first parameter
/// whose struct has one.
pub fn in_params(package: &Package, f: &FnDef) -> Option<MessageKey> {
    f.params.iter().find_map(|p| {
        let Pat::Ident { name, .. } = &p.pat else {
            return None;
        };
        let ty = p.ty.core_path()?.last();
        let def = package
            .files
            .iter()
            .flat_map(|file| &file.structs)
            .find(|s| s.name == ty)?;
        let (field, field_ty) = ID_FIELDS
            .iter()
            .find_map(|want| def.fields.iter().find(|(n, _)| n == want))?;
        Some(MessageKey {
            param: name.clone(),
            field: field.clone(),
            is_string: is_string(field_ty),
        })
    })
}

fn is_string(ty: &Type) -> bool {
    matches!(ty, Type::Path { path, .. } if path.last() == "String")
}
