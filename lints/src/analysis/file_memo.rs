//! Facts a lint computes from one file's model alone (with the settings), memoized per file:
//! after an edit, [`super::Analysis::reusing`] keeps those of the files that did not change, so
//! a pass that filters every fn of the package by its syntax pays only for the edited file.

use std::any::{Any, TypeId};
use std::sync::{Arc, Mutex, PoisonError};

type Fact = Arc<dyn Any + Send + Sync>;

/// Per file, the facts asked for so far, one per type.
#[derive(Default)]
pub(crate) struct FileMemos {
    by_file: Mutex<Vec<Vec<(TypeId, Fact)>>>,
}

impl std::fmt::Debug for FileMemos {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n: usize = self.facts().iter().map(Vec::len).sum();
        write!(f, "FileMemos({n} facts)")
    }
}

impl FileMemos {
    /// The `T` of file `file`, computed by `compute` the first time.
    pub(crate) fn get_or_compute<T: Any + Send + Sync>(
        &self,
        file: usize,
        compute: impl FnOnce() -> T,
    ) -> Arc<T> {
        let key = TypeId::of::<T>();
        let find = |by_file: &[Vec<(TypeId, Fact)>]| {
            let facts = by_file.get(file)?;
            facts
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| v.clone())
        };
        let found = find(&self.facts());
        let fact = match found {
            Some(fact) => fact,
            None => {
                // Computed without the lock (passes run side by side); when two passes
                // compute the same fact at once, the first one stored is kept.
                let fact: Fact = Arc::new(compute());
                let mut by_file = self.facts();
                if let Some(first) = find(&by_file) {
                    first
                } else {
                    if by_file.len() <= file {
                        by_file.resize_with(file + 1, Vec::new);
                    }
                    by_file[file].push((key, fact.clone()));
                    fact
                }
            }
        };
        fact.downcast::<T>()
            .unwrap_or_else(|_| unreachable!("facts are stored under their own type"))
    }

    /// The facts of the files `changed` does not mark, for the next version of the package
    /// (same files, same settings).
    pub(crate) fn keeping_unchanged(self, changed: &[bool]) -> FileMemos {
        let mut by_file = self
            .by_file
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        by_file.truncate(changed.len());
        for (facts, &edited) in by_file.iter_mut().zip(changed) {
            if edited {
                facts.clear();
            }
        }
        FileMemos {
            by_file: Mutex::new(by_file),
        }
    }

    /// The table; a pass that panicked while holding it left it whole (facts are pushed,
    /// never half written), so a poisoned lock is taken as is.
    fn facts(&self) -> std::sync::MutexGuard<'_, Vec<Vec<(TypeId, Fact)>>> {
        self.by_file.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
