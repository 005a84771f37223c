//! Parses one file on a dedicated thread with a big stack and a time budget.
//!
//! syn trees are `!Send` and proc_macro2 spans resolve only on the parsing thread, so parse
//! and lowering happen together there and only the `Send` [`FileModel`] comes back. syn
//! recurses once per nesting level, so a deeply nested expression needs far more stack than a
//! rayon worker has. Some inputs make syn very slow: past the budget the thread is abandoned
//! (it ends with the process) and the file is reported as skipped.

use idem_lints::model::{lower_file, FileId, FileModel, ParseError};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

pub enum Outcome {
    /// Boxed: a file model is large next to the other outcomes.
    Parsed(Box<FileModel>),
    Invalid(ParseError),
    TimedOut,
    /// The thread could not start or died (a panic inside syn); the message says which.
    Failed(String),
}

pub fn parse(
    text: Arc<str>,
    id: FileId,
    module: Vec<String>,
    in_test: bool,
    stack_size: usize,
    budget: Duration,
) -> Outcome {
    let (tx, rx) = mpsc::sync_channel(1);
    let spawned = std::thread::Builder::new()
        .name("idem-lint-parse".to_string())
        .stack_size(stack_size)
        .spawn(move || {
            let result = lower_file(&text, id, module, in_test);
            // The receiver is gone when the budget ran out; nothing is waiting for the result.
            let _ = tx.send(result);
        });
    if let Err(e) = spawned {
        return Outcome::Failed(format!("could not start a parser thread: {e}"));
    }
    match rx.recv_timeout(budget) {
        Ok(Ok(model)) => Outcome::Parsed(Box::new(model)),
        Ok(Err(e)) => Outcome::Invalid(e),
        Err(mpsc::RecvTimeoutError::Timeout) => Outcome::TimedOut,
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            Outcome::Failed("the parser stopped on this file (internal error)".to_string())
        }
    }
}
