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

/// `event.event_id` of a handler `fn f(.., event: &Event)` where `Event` has `event_id`, or
/// `order_id` of a handler `fn f(.., order_id: &str)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageKey {
    /// The parameter: `event`, or `order_id` when it is the id itself.
    pub param: String,
    /// The field: `event_id`; `None` when the parameter is the id.
    pub field: Option<String>,
    /// How the id is written.
    pub ty: IdType,
}

/// The type an id is written with, which decides how it becomes a `String`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdType {
    /// `String` (or `&String`).
    String,
    /// `&str`.
    Str,
    /// Anything else with `Display`: a number, a `Uuid`.
    Other,
}

impl MessageKey {
    /// The key as an argument taking `impl Into<String>`: `&event.event_id` for a `String`
    /// field, `order_id` for a `&str` parameter, else `event.event_id.to_string()`.
    pub fn as_string_arg(&self) -> String {
        match (&self.field, self.ty) {
            (Some(_), IdType::String) => format!("&{}", self.expr()),
            (None, IdType::Str) => self.expr(),
            (None, IdType::String) => format!("{}.clone()", self.expr()),
            _ => format!("{}.to_string()", self.expr()),
        }
    }

    /// The key as an owned `String`: `event.event_id.clone()`, or `.to_string()` of an id
    /// of another type.
    pub fn owned_string(&self) -> String {
        let conversion = if self.ty == IdType::String {
            "clone"
        } else {
            "to_string"
        };
        format!("{}.{conversion}()", self.expr())
    }

    /// `event.event_id`, or `order_id`.
    pub fn expr(&self) -> String {
        match &self.field {
            Some(field) => format!("{}.{field}", self.param),
            None => self.param.clone(),
        }
    }

    /// What a help line calls it: "the message's `event_id`", or "`order_id`".
    pub fn describe(&self) -> String {
        match &self.field {
            Some(field) => format!("the message's `{field}`"),
            None => format!("`{}`", self.param),
        }
    }
}

/// The message key among `f`'s parameters: the best-named field of the first parameter
/// whose struct has one, else the best-named parameter that is an id itself (a string or
/// a number: `order_id: &str`).
pub fn in_params(package: &Package, f: &FnDef) -> Option<MessageKey> {
    in_param_structs(package, f).or_else(|| id_param(f))
}

fn in_param_structs(package: &Package, f: &FnDef) -> Option<MessageKey> {
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
            field: Some(field.clone()),
            ty: id_type(field_ty).unwrap_or(IdType::Other),
        })
    })
}

fn id_param(f: &FnDef) -> Option<MessageKey> {
    ID_FIELDS.iter().find_map(|want| {
        f.params.iter().find_map(|p| {
            let Pat::Ident { name, .. } = &p.pat else {
                return None;
            };
            (name == want).then_some(())?;
            Some(MessageKey {
                param: name.clone(),
                field: None,
                ty: id_type(&p.ty)?,
            })
        })
    })
}

/// How an id of type `ty` is written; `None` for a type no id has (an `Option`, a struct).
fn id_type(ty: &Type) -> Option<IdType> {
    const DISPLAY: &[&str] = &[
        "u32", "u64", "u128", "i32", "i64", "i128", "usize", "Uuid", "Ulid",
    ];
    match ty {
        Type::Ref { inner, .. } => match &**inner {
            Type::Path { path, .. } if path.last() == "str" => Some(IdType::Str),
            Type::Path { path, .. } if path.last() == "String" => Some(IdType::String),
            _ => None,
        },
        Type::Path { path, .. } if path.last() == "String" => Some(IdType::String),
        Type::Path { path, .. } if DISPLAY.contains(&path.last()) => Some(IdType::Other),
        _ => None,
    }
}
