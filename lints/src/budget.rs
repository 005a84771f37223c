//! A package's analysis budget: a deadline that the walks of the analysis look at, so that a
//! package whose analysis grows faster than its size (every fn of hundreds of files calling
//! every other) ends on time with what was found, instead of running for hours.
//!
//! Once the deadline passes, no more function bodies are walked ([`crate::analysis::flow::walk_bound`]
//! gives an empty flow): the summaries' fixed point settles on what it has and the passes
//! finish on it. Findings that needed the walks not done are missing; the caller says so.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// A deadline shared by the threads of one package's analysis. The default never runs out.
#[derive(Debug, Clone, Default)]
pub struct Budget {
    deadline: Option<Instant>,
    /// Set once the deadline was seen passed, so the answer never goes back.
    spent: Arc<AtomicBool>,
}

impl Budget {
    /// A budget that runs out at `deadline`.
    pub fn until(deadline: Instant) -> Budget {
        Budget {
            deadline: Some(deadline),
            spent: Arc::default(),
        }
    }

    /// Runs the budget out now, whatever its deadline: the caller's own limit was reached
    /// (the run's memory budget, watched by the driver).
    pub fn spend(&self) {
        self.spent.store(true, Ordering::Relaxed);
    }

    /// Whether the deadline has passed.
    pub fn spent(&self) -> bool {
        if self.spent.load(Ordering::Relaxed) {
            return true;
        }
        let spent = self.deadline.is_some_and(|d| Instant::now() >= d);
        if spent {
            self.spent.store(true, Ordering::Relaxed);
        }
        spent
    }
}
