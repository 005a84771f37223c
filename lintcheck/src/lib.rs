//! The lintcheck: lint pinned real crates (and, with `--apps`, pinned whole application
//! workspaces) with `cargo idem-lint`, match every finding against the reviewed verdicts in
//! `lintcheck/verdicts/` (`lintcheck/verdicts-apps/`), and render one Markdown report.
//!
//! A finding is identified without its line number (crate, version, lint, file, the flagged
//! line's text, and its index among findings that share all of those), so an edit elsewhere in
//! a file does not turn a reviewed finding into a new one.

pub mod apps;
pub mod crates;
pub mod fetch;
pub mod finding;
pub mod lint;
pub mod report;
pub mod verdicts;
