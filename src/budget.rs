//! The run's own limits on the analysis, beside each package's time budget
//! ([`ParseOptions::package_timeout`]): a deadline for the whole run, and a memory budget.
//! Each package's analysis gets a [`Budget`] that runs out at the first of them, and ends,
//! as with its own deadline, with what it found and a warning.
//!
//! A workspace of 2,000 small members each under its own budget took ten minutes; a call
//! graph of every fn of 1,000 files calling every other grew to 5 GB before its time ran
//! out. Memory is the process's resident set (Linux: `/proc/self/status`), looked at when a
//! package's analysis starts and every few milliseconds while analyses run; past the budget
//! every running analysis stops and the later ones start spent. Elsewhere than Linux there
//! is no memory budget.
//!
//! [`ParseOptions::package_timeout`]: crate::parse::ParseOptions::package_timeout

use idem_lints::analysis::budget::Budget;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What stopped a package's analysis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    Package,
    Run,
    Memory,
}

/// The run's limits, shared by the analyses of its packages.
#[derive(Debug, Default)]
pub struct RunBudget {
    deadline: Option<Instant>,
    max_resident: Option<u64>,
    over_memory: AtomicBool,
    /// The budgets of the analyses started, to spend when memory runs out.
    live: Mutex<Vec<Budget>>,
}

impl RunBudget {
    pub fn new(deadline: Option<Instant>, max_resident: Option<u64>) -> RunBudget {
        RunBudget {
            deadline,
            max_resident,
            ..RunBudget::default()
        }
    }

    /// The budget of one package's analysis starting now, with `package_timeout` of its own.
    pub fn package(&self, package_timeout: Duration) -> Budget {
        let own = Instant::now() + package_timeout;
        let budget = Budget::until(self.deadline.map_or(own, |d| d.min(own)));
        if self.memory_spent() {
            budget.spend();
        }
        if let Ok(mut live) = self.live.lock() {
            live.push(budget.clone());
        }
        budget
    }

    /// Whether memory ran out (looking at it now).
    fn memory_spent(&self) -> bool {
        if self.over_memory.load(Ordering::Relaxed) {
            return true;
        }
        let over = self
            .max_resident
            .is_some_and(|max| resident_bytes().is_some_and(|now| now > max));
        if over {
            self.over_memory.store(true, Ordering::Relaxed);
            if let Ok(live) = self.live.lock() {
                live.iter().for_each(Budget::spend);
            }
        }
        over
    }

    /// Runs `f` (the analyses) while a thread watches the memory.
    pub fn watch<R>(&self, f: impl FnOnce() -> R) -> R {
        if self.max_resident.is_none() || resident_bytes().is_none() {
            return f();
        }
        let (done, stop) = std::sync::mpsc::channel::<()>();
        std::thread::scope(|scope| {
            scope.spawn(move || {
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                    stop.recv_timeout(Duration::from_millis(20))
                {
                    if self.memory_spent() {
                        break;
                    }
                }
            });
            let out = f();
            drop(done);
            out
        })
    }

    /// Which limit a stopped analysis met.
    pub fn limit(&self) -> Limit {
        if self.over_memory.load(Ordering::Relaxed) {
            Limit::Memory
        } else if self.deadline.is_some_and(|d| Instant::now() >= d) {
            Limit::Run
        } else {
            Limit::Package
        }
    }
}

/// The process's resident set in bytes, where the system says it.
fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line
        .trim_start_matches("VmRSS:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}
