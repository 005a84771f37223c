//! Catalogs of known APIs the analyses look for: nondeterministic value sources
//! ([`sources`]), places where a value is used as an idempotency key ([`sinks`]), the
//! operations that take an idempotency token ([`tokens`]) and the names of store checks and
//! marks whose body is not visible ([`store_names`]), the store traits whose methods
//! are also called in path form ([`store_traits`]), the kinds of entry point with
//! whether what they receive can come again ([`entries`]), the store operations of each
//! store crate family ([`stores`]), the entry-point frameworks ([`frameworks`]), the
//! clients whose calls are outside effects ([`effects`]), the macros that build a document
//! from a literal ([`formats`]), the crates that re-export another whole ([`reexports`]),
//! the macros that only log ([`logging`]), the retry crates and their runners
//! ([`retries`]), and which dependencies all of these model ([`coverage`]).
//!
//! Both are data, not code: a lint asks "is this call a source?" or "is this name a key?"
//! and the answer comes from a table that users extend in `idem-lint.toml`, with rows of the
//! same types (`[[models.store]]`, `[[models.entry]]`, ..., read by `settings::models`) or
//! names (`[lints.nondeterministic_key] sources = [..], key_names = [..]`).

pub mod coverage;
pub mod effects;
pub mod entries;
pub mod formats;
pub mod frameworks;
pub mod logging;
pub mod reexports;
pub mod retries;
pub mod sinks;
pub mod sources;
pub mod store_crates;
pub mod store_names;
pub mod store_traits;
pub mod stores;
pub mod tokens;

pub use sinks::{SinkCatalog, SinkKind};
pub use sources::{SourceCatalog, SourceKind};
pub use store_names::{NamedOp, StoreNames};
pub use tokens::{repeat_effect, RepeatEffect};

/// The catalogs an [`crate::analysis::Analysis`] is built with.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    pub sources: SourceCatalog,
    pub sinks: SinkCatalog,
    /// Check and mark names of stores whose body is not visible.
    pub store_names: StoreNames,
    /// How entry points are recognised: the frameworks' rows and the user's.
    pub frameworks: frameworks::EntryModels,
    /// The user's store rows beside the built-in families.
    pub stores: stores::StoreModels,
    /// The package's analysis budget, which the walks look at.
    pub budget: crate::budget::Budget,
}

/// A name from the user's configuration as the `&'static str` the catalog's rows hold, so
/// a user's row has the type of a built-in one. Each distinct name is kept once for the
/// process (a language server re-reading the same configuration adds nothing).
pub fn intern(name: &str) -> &'static str {
    use std::collections::HashSet;
    use std::sync::{Mutex, OnceLock};
    static NAMES: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut names = NAMES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(&kept) = names.get(name) {
        return kept;
    }
    let kept: &'static str = Box::leak(name.to_owned().into_boxed_str());
    names.insert(kept);
    kept
}

/// Whether `hay` holds `needle`, ASCII case ignored (`needle` in lower case).
pub(crate) fn contains_ignore_ascii_case(hay: &[u8], needle: &[u8]) -> bool {
    let Some((&first, rest)) = needle.split_first() else {
        return true;
    };
    memchr::memchr2_iter(first, first.to_ascii_uppercase(), hay).any(|i| {
        hay.len() - i > rest.len() && hay[i + 1..i + 1 + rest.len()].eq_ignore_ascii_case(rest)
    })
}
