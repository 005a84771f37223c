//! The lints of `cargo idem-lint` and the analysis they stand on.
//!
//! - [`model`]: each file lowered to a `Send` tree with byte spans ([`model::lower_file`]).
//! - [`diagnostic`], [`lint`]: the finding model and the lint declarations.
//! - [`catalog`]: the tables lints match code against (generated where possible).
//! - [`lints`]: one module per lint, each opening with its documentation; [`lints::ALL`].
//! - [`analysis`], [`catalog`]: the analysis layer (resolution, value flow, store operations,
//!   function summaries) and the catalogs of sources and sinks it looks for.
//! - [`context`]: what a lint sees, and [`check_package`], which runs them all.

pub mod analysis;
pub mod catalog;
pub mod context;
pub mod diagnostic;
pub mod lint;
pub mod lints;
pub mod model;
pub mod settings;
#[doc(hidden)]
pub mod testing;

pub use context::{
    check_package, check_package_retaining, check_package_within, Enabled, LintContext,
};
pub use diagnostic::{Applicability, Diagnostic, Label, Suggestion};
pub use lint::{Level, Lint};
pub use settings::Settings;
