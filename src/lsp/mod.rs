//! `cargo idem-lint lsp`: the language server, over stdio.
//!
//! Diagnostics on open, on every change of an unsaved buffer (debounced) and on save; hover
//! on a finding shows its lint's `--explain` text; every suggestion is a quick fix; config and
//! manifest errors are diagnostics on the file at fault. The rooms:
//!
//! - [`transport`]: framed JSON-RPC on stdin/stdout that survives malformed messages;
//! - [`server`]: state, main loop, debounce, the handlers;
//! - [`documents`]: the open buffers, kept in step with the client's edits;
//! - [`engine`]: workspace folders and the pipeline run with buffers standing in for files;
//! - [`convert`]: findings as diagnostics, hovers and code actions;
//! - [`docs`]: the lint documentation a diagnostic links to;
//! - [`position`]: byte offsets to and from LSP positions (UTF-16, or UTF-8 when offered).

pub mod convert;
pub mod docs;
pub mod documents;
pub mod engine;
pub mod position;
pub mod server;
pub mod transport;

use crate::cli::{Args, LspArgs};
use anyhow::Result;
use std::time::Duration;

/// Runs the server on stdin/stdout until the client says `exit` or closes stdin.
pub fn run(args: &Args, lsp: &LspArgs) -> Result<()> {
    let (conn, writer) = transport::stdio()?;
    let debounce = Duration::from_millis(lsp.debounce_ms);
    let served = server::Server::new(conn, args.clone(), debounce).serve();
    // The server (and with it the sending side) is gone: the writer drains and stops.
    writer.join();
    served
}
