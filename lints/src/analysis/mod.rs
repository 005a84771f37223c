//! The analysis layer lints ask questions of: name resolution, local types, value flow,
//! store operations, function summaries. Built once per package, on demand.
//!
//! - [`resolve`]: paths to definitions ([`Resolver`], [`DefPath`]).
//! - [`callgraph`]: which crate fn each call reaches ([`CallGraph`], reached with
//!   [`Analysis::call_graph`]); [`entry`]: where deliveries come in.
//! - [`dominance`]: what happened on every path to a point of a function.
//! - [`guards`]: guard calls, the calls they dominate, and every fn's first guarded and
//!   unguarded path from the entry points; [`effects`]: fns with side effects.
//! - [`key_text`]: a key expression's spelling through locals, to tell one key from another.
//! - [`message_key`]: the id of the message a function handles, for suggested keys.
//! - [`locks`]: whether a point runs under a lock or a won claim (check and write cannot race).
//! - [`transactions`]: transactions of a function and where each store operation runs;
//!   [`completion`]: completion marks and business writes, through helpers.
//! - [`types`]: local type evidence ([`TypeEnv`]).
//! - [`store_ops`]: is this call a Redis/DynamoDB/SQL read, write or atomic claim, with
//!   which key ([`store_ops::classify`]); [`sql`] reads SQL text, [`query_builders`] diesel
//!   and sea-orm chains; [`schema`] the unique keys a project's migrations declare;
//!   [`expiry`]: when a claim expires; [`durations`]: TTLs and
//!   timeouts written as constants.
//! - [`flow`]: value flow inside one function ([`flow::walk`], [`FnFlow`]);
//!   [`read_index`]: the reads its decisions test, by key.
//! - [`summary`]: every function's [`FnSummary`] to a fixed point ([`Summaries`]), reached
//!   with [`Analysis::summaries`].
//! - [`relevance`]: whether a package has anything the store and key lints could find.
//! - [`incremental`]: the next version's analysis from the previous one's, after an edit of
//!   fn bodies ([`Analysis::reusing`]).

pub use crate::budget;
pub mod binding;
pub mod callgraph;
pub mod chain;
pub mod completion;
pub mod dominance;
pub mod durations;
pub mod effects;
pub mod entry;
pub mod expiry;
pub mod field_texts;
pub(crate) mod file_memo;
pub mod flow;
pub mod guard_key;
pub mod guards;
pub mod incremental;
pub mod key_text;
pub mod kv_store;
pub(crate) mod linked;
pub mod locks;
pub mod message_key;
pub mod mongo_ops;
pub mod origin;
pub mod query_builders;
pub mod read_index;
pub mod relevance;
pub mod resolve;
pub mod schema;
pub mod sql;
pub mod store_ops;
pub mod summary;
pub mod transactions;
pub mod types;
pub mod words;

pub use callgraph::{Call, CallGraph, CallKind};
pub use chain::{Chain, Locals, MethodStep, Step};
pub use flow::{FnFlow, FnId, KeyDesc, Value};
pub use resolve::{DefPath, Krate, Resolver};
pub use store_ops::{Access, Store, StoreOp};
pub use summary::{FnSummary, StoreAccess, Summaries};

use crate::catalog::Catalog;
use crate::model::Package;
use rayon::prelude::*;
use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;
pub use types::{TypeEnv, Types};

/// Where the parts of an analysis built file by file are built.
///
/// A part built lazily by a lint pass (inside a `OnceLock`, while other passes run side by
/// side on the pool) must not use the pool: waiting for its own pool jobs, the thread could
/// pick up another pass that asks for the same part and wait for itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Threads {
    /// On every core of the current rayon pool.
    Pool,
    /// On the calling thread alone.
    This,
}

impl Threads {
    /// `f` of each item, in order, on the threads `self` names.
    pub(crate) fn map<'a, T: Sync, R: Send>(
        self,
        items: &'a [T],
        f: impl Fn(usize, &'a T) -> R + Sync + Send,
    ) -> Vec<R> {
        match self {
            Threads::Pool => items.par_iter().enumerate().map(|(i, t)| f(i, t)).collect(),
            Threads::This => items.iter().enumerate().map(|(i, t)| f(i, t)).collect(),
        }
    }
}

pub(crate) use crate::util::{FastMap, FastSet};

/// A map keyed by names, module paths and [`DefPath`]s that is looked up far more often than
/// it is filled (the resolver's scopes and memos, the call graph's index): hashed with
/// [`PathHash`], which reads a few words of each segment instead of every byte. Equality
/// still decides, so a collision costs a comparison, never a wrong answer.
pub(crate) type PathMap<K, V> = HashMap<K, V, PathHash>;
/// The set counterpart of [`PathMap`].
pub(crate) type PathSet<T> = HashSet<T, PathHash>;

/// Hashes identifiers eight bytes at a time (a word, and the last eight bytes overlapping it
/// for the rest), with their length. Path segments are short words, and foldhash's per-byte
/// work on every segment of every lookup was a tenth of a package's analysis. Every byte
/// counts: the names come from the code being linted, and a hash that skipped some would let
/// a hostile file fill one bucket with thousands of names and make each lookup a scan.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct PathHash;

impl std::hash::BuildHasher for PathHash {
    type Hasher = PathHasher;

    #[inline]
    fn build_hasher(&self) -> PathHasher {
        PathHasher(0x243f_6a88_85a3_08d3)
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct PathHasher(u64);

const MIX: u64 = 0x9e37_79b9_7f4a_7c15;

impl PathHasher {
    #[inline]
    fn mix(&mut self, word: u64) {
        self.0 = (self.0 ^ word).wrapping_mul(MIX).rotate_left(23);
    }
}

impl std::hash::Hasher for PathHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let n = bytes.len();
        let word = |at: usize| {
            let eight: [u8; 8] = bytes[at..at + 8].try_into().expect("eight bytes");
            u64::from_le_bytes(eight)
        };
        let (head, tail) = if n >= 8 {
            // The words before the last, then the last eight bytes (overlapping the one
            // before when `n` is not a multiple of eight).
            let mut at = 0;
            while at + 16 <= n {
                self.mix(word(at));
                at += 8;
            }
            (word(at), word(n - 8))
        } else if n >= 4 {
            let head: [u8; 4] = bytes[..4].try_into().expect("four bytes");
            let tail: [u8; 4] = bytes[n - 4..].try_into().expect("four bytes");
            (
                u64::from(u32::from_le_bytes(head)),
                u64::from(u32::from_le_bytes(tail)),
            )
        } else if n > 0 {
            let tail = u64::from(bytes[n / 2]) << 8 | u64::from(bytes[n - 1]);
            (u64::from(bytes[0]), tail)
        } else {
            (0, 0)
        };
        self.mix(head ^ ((n as u64) << 56));
        self.mix(tail);
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.mix(u64::from(i));
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.mix(u64::from(i));
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.mix(i);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.mix(i as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        // Folded multiply: good bits at both ends (the table uses the top ones as tags).
        let full = u128::from(self.0) * u128::from(MIX ^ 0x6a09_e667_f3bc_c909);
        (full as u64) ^ ((full >> 64) as u64)
    }
}

/// Everything computed once per package that lints share.
#[derive(Debug)]
pub struct Analysis {
    pub resolver: Resolver,
    pub types: Types,
    pub catalog: Catalog,
    call_graph: OnceLock<CallGraph>,
    summaries: OnceLock<Summaries>,
    /// Per file, what its fns make entry points ([`Analysis::entry_points`]), kept for
    /// [`Analysis::reusing`].
    entry_parts: OnceLock<entry::EntryParts>,
    /// Facts of single files that passes asked for ([`Analysis::file_fact`]).
    file_memos: file_memo::FileMemos,
    /// Every entry point the settings name (of every lint): a linked member's fn named
    /// there is walked like the member's other entry points ([`linked`]).
    pub(crate) entry_names: Vec<String>,
}

impl Analysis {
    /// The analysis with the built-in catalogs.
    pub fn new(package: &Package) -> Analysis {
        Analysis::with_catalog(package, Catalog::default())
    }

    /// The analysis with catalogs extended by configuration
    /// ([`crate::settings::Settings::catalog`]).
    pub fn with_catalog(package: &Package, catalog: Catalog) -> Analysis {
        Analysis::with_catalog_on(package, catalog, Threads::Pool)
    }

    /// [`Analysis::with_catalog`], its resolver and types built on `threads`.
    pub fn with_catalog_on(package: &Package, catalog: Catalog, threads: Threads) -> Analysis {
        let resolver = Resolver::build(package, threads);
        let types = Types::build(package, &resolver, threads);
        Analysis {
            resolver,
            types,
            catalog,
            call_graph: OnceLock::new(),
            summaries: OnceLock::new(),
            entry_parts: OnceLock::new(),
            file_memos: Default::default(),
            entry_names: Vec::new(),
        }
    }

    /// Frees the analysis on every core of the pool: a large package's analysis, freed on one
    /// thread, left the other cores idle at the end of every run.
    pub fn drop_on_pool(self) {
        let Analysis {
            resolver,
            types,
            catalog,
            call_graph,
            summaries,
            entry_parts,
            file_memos,
            entry_names,
        } = self;
        rayon::join(
            || resolver.drop_on_pool(),
            || {
                rayon::join(
                    || drop((types, catalog, entry_parts, file_memos, entry_names)),
                    || rayon::join(|| drop(call_graph), || drop(summaries)),
                )
            },
        );
    }

    /// The crate's call graph, built on first use. `package` must be the package this
    /// analysis was built for.
    pub fn call_graph(&self, package: &Package) -> &CallGraph {
        self.call_graph
            .get_or_init(|| CallGraph::new(package, &self.resolver, &self.types))
    }

    /// [`entry::entry_points`] of the package with `configured` entry points; kept for the
    /// first `configured` asked for, and after an edit computed again only for the changed
    /// files ([`Analysis::reusing`]).
    pub fn entry_points(&self, package: &Package, configured: &[String]) -> Vec<entry::EntryPoint> {
        let graph = self.call_graph(package);
        let parts = self.entry_parts.get_or_init(|| {
            entry::EntryParts::new(
                package,
                &self.resolver,
                graph,
                &self.catalog.frameworks,
                configured,
                None,
            )
        });
        if parts.configured != configured {
            return entry::entry_points(
                package,
                &self.resolver,
                graph,
                &self.catalog.frameworks,
                configured,
            );
        }
        parts.entry_points()
    }

    /// A fact computed by `compute` from file `file`'s model and the settings alone (nothing
    /// of other files, nor of the analysis but the resolver and the type tables, which are
    /// kept exactly when the facts are), once per file; kept for the unchanged files after
    /// an edit ([`Analysis::reusing`]).
    pub fn file_fact<T: std::any::Any + Send + Sync>(
        &self,
        file: usize,
        compute: impl FnOnce() -> T,
    ) -> std::sync::Arc<T> {
        self.file_memos.get_or_compute(file, compute)
    }

    /// Every function's summary and flow facts, computed on first use. `package` must be
    /// the package this analysis was built for. Of a linked member's fns, only those the
    /// package's findings read are walked ([`linked`]); the others' are empty.
    pub fn summaries(&self, package: &Package) -> &Summaries {
        self.summaries.get_or_init(|| {
            let graph = self.call_graph(package);
            let walked = self.walked_fns(package);
            Summaries::compute_walking(
                package,
                &self.resolver,
                &self.types,
                &self.catalog,
                graph,
                walked,
            )
        })
    }

    /// [`linked::walked_fns`] of the package, `None` when it links no member.
    pub(crate) fn walked_fns(&self, package: &Package) -> Option<Vec<bool>> {
        if !linked::links_members(package) {
            return None;
        }
        let graph = self.call_graph(package);
        let entries = self.entry_points(package, &self.entry_names);
        Some(linked::walked_fns(package, graph, &entries))
    }
}

#[cfg(test)]
mod tests {
    use super::PathHash;
    use std::hash::BuildHasher;

    #[test]
    fn path_hash_reads_every_byte() {
        // Names that differ only in their middle, as a hostile file could write thousands.
        let hashes: std::collections::HashSet<u64> = (0..10_000)
            .map(|i| PathHash.hash_one(format!("handler_{i:05}_refunds")))
            .collect();
        assert_eq!(hashes.len(), 10_000);
        for n in 0..40 {
            let a = "x".repeat(n);
            for at in 0..n {
                let mut b = a.clone().into_bytes();
                b[at] = b'y';
                let b = String::from_utf8(b).expect("ASCII");
                assert_ne!(PathHash.hash_one(&a), PathHash.hash_one(&b), "{n} {at}");
            }
        }
    }
}
