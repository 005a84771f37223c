//! The store crates the analysis knows, by name, and the scans of a file's text that tell
//! which of them (and which other names the passes start from) it mentions. The lowering
//! runs the scans once per file and keeps their answers in the file's model.

use crate::util::is_ident_byte;
use aho_corasick::{AhoCorasick, MatchKind};
use serde::{Deserialize, Serialize};
use std::sync::OnceLock;

/// Redis clients and pools (crate names as in `use`).
pub(crate) const REDIS_CRATES: &[&str] = super::stores::redis::CRATES;

/// SQL clients, pools and ORMs.
pub(crate) const SQL_CRATES: &[&str] = super::stores::sql::CRATES;

/// Store crates that are not Redis, SQL or a key-value family.
const OTHER_STORE_CRATES: &[&str] = &[
    super::stores::dynamodb::CRATE,
    super::stores::mongodb::CRATE,
    "sea_query",
];

/// Every crate whose paths, types or dependency make a call a store operation.
pub(crate) fn store_crates() -> impl Iterator<Item = &'static str> {
    let kv = super::stores::kv::FAMILIES.iter().flat_map(|f| f.crates);
    REDIS_CRATES
        .iter()
        .chain(SQL_CRATES)
        .chain(kv)
        .chain(OTHER_STORE_CRATES)
        .copied()
}

/// The store crates `text` names where a path can start: the name as a whole word, followed
/// (after whitespace) by `::`, `;`, `,`, `}`, `as`, a comment or the end of the text. Any
/// other use of the word (`mini-redis`, `let redis = ..`, `"redis://"`) is not a crate path;
/// a comment between a name and its `::` is taken for one.
pub fn store_crates_named(text: &str) -> Vec<String> {
    static NAMES: OnceLock<(AhoCorasick, Vec<&'static str>)> = OnceLock::new();
    let (finder, names) = NAMES.get_or_init(|| {
        let names: Vec<&str> = store_crates().collect();
        let finder = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .build(&names)
            .expect("crate names make an automaton");
        (finder, names)
    });
    let b = text.as_bytes();
    let mut out: Vec<String> = Vec::new();
    // Names hold only identifier bytes, so no match spans two words, and the longest match
    // at a word's start is the word itself when the word is a name.
    for m in finder.find_iter(text) {
        let name = names[m.pattern().as_usize()];
        if out.iter().any(|n| n == name)
            || m.start() > 0 && is_ident_byte(b[m.start() - 1])
            || !starts_path(&b[m.end()..])
        {
            continue;
        }
        out.push(name.to_owned());
    }
    out
}

/// Whether what follows a word lets the word be a crate path's first segment.
fn starts_path(rest: &[u8]) -> bool {
    let rest = match rest.iter().position(|c| !c.is_ascii_whitespace()) {
        Some(i) => &rest[i..],
        None => return true,
    };
    match rest[0] {
        b':' => rest.get(1) == Some(&b':'),
        b';' | b',' | b'}' => true,
        b'/' => matches!(rest.get(1), Some(b'/' | b'*')),
        b'a' => rest.get(1) == Some(&b's') && !rest.get(2).copied().is_some_and(is_ident_byte),
        // The word continues (`redis_pool` holds `redis`): not this name.
        _ => false,
    }
}

/// What a file's text names that the passes starting from names rather than from store
/// operations need.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mentions {
    /// `ClientConfig`, `begin_transaction` or `commit_transaction`: every finding of
    /// `kafka_producer_not_idempotent` starts at a path segment or a method so named (a
    /// config imported under another name is named so in the `use`), compared exactly.
    pub kafka: bool,
}

/// Words of a `kafka_producer_not_idempotent` finding.
const KAFKA_WORDS: [&str; 3] = ["ClientConfig", "begin_transaction", "commit_transaction"];

/// The [`Mentions`] of a file's text: a vectorized substring search per word, a small part
/// of what lowering the text costs.
pub fn mentions_in(text: &str) -> Mentions {
    static FINDERS: OnceLock<Vec<memchr::memmem::Finder<'static>>> = OnceLock::new();
    let finders = FINDERS.get_or_init(|| {
        KAFKA_WORDS
            .iter()
            .map(memchr::memmem::Finder::new)
            .collect()
    });
    Mentions {
        kafka: finders.iter().any(|f| f.find(text.as_bytes()).is_some()),
    }
}
