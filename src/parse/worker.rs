//! The parse pool: long-lived threads with a stack sized for the deepest file the nesting scan
//! accepts, where each file is read, parsed and lowered within its time budget, and where the
//! analysis runs too ([`crate::report::check_with`] runs all of its work here): one pool, so
//! no thread of another pool (with a default stack) waits on it while running other work
//! nested on its own stack.
//!
//! syn trees are `!Send` and proc_macro2 spans resolve only on the parsing thread, so parse
//! and lowering happen together here and only the `Send` [`FileModel`] comes back. syn
//! recurses once per nesting level; `idem_lints::model::nesting` rejects files nested deeper
//! than its limit before syn sees them, and the stack holds that limit with room to spare
//! (about 100 KiB a level for the worst case, `Vec<Vec<..>>`, in a debug build; a tenth of
//! that optimized). Only touched pages are committed, so a large stack costs address space.
//!
//! The budget is enforced without abandoning threads: the deadline is checked after syn's
//! parse (which cannot be interrupted, but is linear in the text once nesting is bounded and
//! the text capped in size) and between items and expressions of the lowering. A file over
//! budget therefore releases its thread within a bounded time, and the files after it get
//! the whole pool.

use idem_lints::model::{lower_file_until, FileId, FileModel, LowerError, ParseError};
use std::cell::Cell;
use std::sync::OnceLock;
use std::time::Instant;

/// Stack of each pool thread.
pub const STACK_SIZE: usize = 512 << 20;

/// Name of the pool's threads.
pub const THREAD_NAME: &str = "idem-lint-parse";

thread_local! {
    /// Set while [`parse`] runs on this thread.
    static PARSING: Cell<bool> = const { Cell::new(false) };
}

/// Whether this thread is parsing a file: a panic here is reported as that file's finding,
/// so the binary's panic hook stays quiet (a panic in the analysis, on the same threads, is
/// printed).
pub fn parsing() -> bool {
    PARSING.with(Cell::get)
}

pub enum Outcome {
    /// Boxed: a file model is large next to the other outcomes.
    Parsed(Box<FileModel>),
    Invalid(ParseError),
    TimedOut,
    /// A panic inside syn or the lowering; the message says so.
    Failed(String),
}

/// Runs `work` on the parse pool (one thread per core, built on first use and kept for the
/// process). Nested `rayon` iterators inside `work` run on the pool's threads.
pub fn on_pool<R: Send>(work: impl FnOnce() -> R + Send) -> Result<R, String> {
    static POOL: OnceLock<Result<rayon::ThreadPool, String>> = OnceLock::new();
    let pool = POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(rayon::current_num_threads())
            .stack_size(STACK_SIZE)
            .thread_name(|_| THREAD_NAME.to_string())
            .build()
            .map_err(|e| format!("could not start the parser threads: {e}"))
    });
    match pool {
        Ok(pool) => Ok(pool.install(work)),
        Err(e) => Err(e.clone()),
    }
}

/// Parses and lowers `text` on the current thread (a pool thread: see [`on_pool`]), giving up
/// at `deadline`.
pub fn parse(
    text: &str,
    id: FileId,
    module: Vec<String>,
    in_test: bool,
    deadline: Instant,
) -> Outcome {
    /// Clears [`PARSING`] however the parse ends.
    struct Parsing;
    impl Drop for Parsing {
        fn drop(&mut self) {
            PARSING.with(|p| p.set(false));
        }
    }
    PARSING.with(|p| p.set(true));
    let parsing = Parsing;
    let lowered =
        std::panic::catch_unwind(|| lower_file_until(text, id, module, in_test, Some(deadline)));
    drop(parsing);
    match lowered {
        Ok(Ok(model)) => Outcome::Parsed(Box::new(model)),
        Ok(Err(LowerError::Syntax(e))) => Outcome::Invalid(e),
        Ok(Err(LowerError::OutOfTime)) => Outcome::TimedOut,
        Err(_) => Outcome::Failed("the parser stopped on this file (internal error)".to_string()),
    }
}
