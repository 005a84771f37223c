//! Small helpers every layer may use.

use std::collections::{HashMap, HashSet};

/// A map keyed by names and paths. The analysis hashes short strings millions of times on a
/// large crate; foldhash is several times faster than the default SipHash there, and its
/// fixed seed keeps runs identical (no input reaches these maps from outside the package).
pub(crate) type FastMap<K, V> = HashMap<K, V, foldhash::fast::FixedState>;
/// The set counterpart of [`FastMap`].
pub(crate) type FastSet<T> = HashSet<T, foldhash::fast::FixedState>;

/// Whether `c` may be part of an identifier (ASCII letters, digits, `_`, and any byte of a
/// non-ASCII character).
pub(crate) fn is_ident_byte(c: u8) -> bool {
    c == b'_' || c.is_ascii_alphanumeric() || c >= 0x80
}
