//! The lints of `cargo idem-lint` and the analysis they stand on, in layers that import
//! only downward (`ARCHITECTURE.md`; `tests/layers.rs` holds them to it):
//!
//! - base: [`lint`] (lint declarations and levels), [`budget`], [`names`] (definition
//!   paths), small helpers;
//! - [`catalog`]: models as data, what other crates' APIs mean;
//! - [`model`]: each file lowered to a `Send` tree with byte spans ([`model::lower_file`]);
//! - [`diagnostic`] (the finding model) and [`settings`] (the `[lints.<name>]` tables);
//! - [`analysis`]: the engine (resolution, value flow, store operations, function summaries);
//! - [`lints`]: one module per lint, each opening with its documentation ([`lints::ALL`]),
//!   and [`context`], what a lint sees;
//! - [`runner`]: [`check_package`], which runs them all.

pub mod analysis;
pub mod budget;
pub mod catalog;
pub mod context;
pub mod diagnostic;
pub mod lint;
pub mod lints;
pub mod model;
pub mod names;
pub mod runner;
pub mod settings;
#[doc(hidden)]
pub mod testing;
pub(crate) mod util;

pub use context::{Enabled, LintContext};
pub use diagnostic::{Applicability, Diagnostic, Label, Suggestion};
pub use lint::{Level, Lint};
pub use runner::{check_package, check_package_retaining, check_package_within};
pub use settings::Settings;
