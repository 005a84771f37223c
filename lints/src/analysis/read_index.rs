//! The store reads a function's decisions test, indexed by key, so pairing every write
//! with the reads that may concern the same record costs what the matches cost rather
//! than writes × reads (a handler with thousands of check/write pairs stays linear).

use super::flow::{FnFlow, KeyDesc};
use std::collections::HashMap;

/// A read inside a decision: `(index in FnFlow::decisions, position in its ops)`.
pub type ReadAt = (usize, usize);

/// Every read `keep` accepts, reachable from the parts of its key that
/// [`KeyDesc::same_key`] compares.
#[derive(Debug, Default)]
pub struct ReadIndex {
    /// Reads without a key: they may concern any record.
    keyless: Vec<ReadAt>,
    all: Vec<ReadAt>,
    by_text: HashMap<String, Vec<ReadAt>>,
    /// By root, then by the literal parts (empty literals agree with any).
    by_root: HashMap<String, HashMap<Vec<String>, Vec<ReadAt>>>,
}

impl ReadIndex {
    pub fn new(flow: &FnFlow, keep: impl Fn(usize) -> bool) -> ReadIndex {
        let mut index = ReadIndex::default();
        for (d, decision) in flow.decisions.iter().enumerate() {
            for (pos, &event) in decision.ops.iter().enumerate() {
                if !keep(event) {
                    continue;
                }
                let at = (d, pos);
                index.all.push(at);
                let Some(key) = &flow.store_events[event].access.key else {
                    index.keyless.push(at);
                    continue;
                };
                index.by_text.entry(key.text.clone()).or_default().push(at);
                for root in &key.roots {
                    index
                        .by_root
                        .entry(root.clone())
                        .or_default()
                        .entry(key.lits.clone())
                        .or_default()
                        .push(at);
                }
            }
        }
        index
    }

    /// Every read whose key may be `key` (all of them when `key` is unknown), in decision
    /// order and then op order, each once: a superset of the reads `same_key` accepts.
    pub fn candidates(&self, key: Option<&KeyDesc>) -> Vec<ReadAt> {
        let Some(key) = key else {
            return self.all.clone();
        };
        let mut out = self.keyless.clone();
        out.extend(self.by_text.get(&key.text).into_iter().flatten());
        for root in &key.roots {
            let Some(by_lits) = self.by_root.get(root) else {
                continue;
            };
            if key.lits.is_empty() {
                out.extend(by_lits.values().flatten());
            } else {
                out.extend(by_lits.get(&key.lits).into_iter().flatten());
                out.extend(by_lits.get(&Vec::new()).into_iter().flatten());
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }
}
