//! The entry point that runs every lint pass over one package ([`check_package`] and its
//! variants): which passes run, beside each other, with which analysis and budget.

use crate::analysis::incremental::{Retained, Reuse};
use crate::analysis::{Analysis, Threads};
use crate::budget::Budget;
use crate::context::{fresh_analysis, Enabled, LintContext};
use crate::diagnostic::Diagnostic;
use crate::lints::{LintPass, PASSES};
use crate::model::Package;
use crate::settings::Settings;
use rayon::prelude::*;
use std::sync::OnceLock;

/// Runs every enabled lint over one package and returns the findings sorted by position.
/// Suppression comments and levels are the driver's business.
pub fn check_package(
    package: &Package,
    settings: &Settings,
    enabled: &Enabled<'_>,
) -> Vec<Diagnostic> {
    check_package_within(package, settings, enabled, &Budget::default()).0
}

/// [`check_package`] within `budget`: once it runs out, no more function bodies are walked
/// and the passes finish on what the analysis had, so findings may be missing. Returns the
/// findings and whether the budget ran out.
pub fn check_package_within(
    package: &Package,
    settings: &Settings,
    enabled: &Enabled<'_>,
    budget: &Budget,
) -> (Vec<Diagnostic>, bool) {
    let (found, analysis) = run_passes(package, settings, enabled, OnceLock::new(), budget);
    if let Some(analysis) = analysis {
        analysis.drop_on_pool();
    }
    (found, budget.spent())
}

/// [`check_package`] for a caller that analyses version after version of a package (the
/// language server): `prev` is what the previous call returned, and the analysis reuses it
/// where that gives the same findings ([`Analysis::reusing`]). Returns the findings, what
/// to pass next time, and how much was reused.
pub fn check_package_retaining(
    package: &Package,
    settings: &Settings,
    enabled: &Enabled<'_>,
    prev: Option<Retained>,
) -> (Vec<Diagnostic>, Retained, Reuse) {
    let (analysis, reuse) = Analysis::reusing(package, settings, prev);
    let unbounded = Budget::default();
    let (diags, analysis) = run_passes(
        package,
        settings,
        enabled,
        OnceLock::from(analysis),
        &unbounded,
    );
    let analysis =
        analysis.unwrap_or_else(|| fresh_analysis(package, settings, &unbounded, Threads::Pool));
    (diags, analysis.retain(package, settings), reuse)
}

/// Runs the enabled passes side by side, each with its own findings, and gives the findings
/// in order with the analysis they shared (`analysis`, when set, is one to start from). The
/// passes that start from store operations and keys are skipped where there are none.
fn run_passes(
    package: &Package,
    settings: &Settings,
    enabled: &Enabled<'_>,
    analysis: OnceLock<Analysis>,
    budget: &Budget,
) -> (Vec<Diagnostic>, Option<Analysis>) {
    let passes: Vec<&LintPass> = PASSES
        .iter()
        .filter(|pass| pass.lints.iter().any(|l| enabled(l)))
        .filter(|pass| (pass.relevant)(package, settings))
        .collect();
    if passes.iter().filter(|pass| pass.reads_summaries).count() > 1 {
        build_shared_parts(package, settings, &analysis, budget);
    }
    let found: Vec<Vec<Diagnostic>> = passes
        .par_iter()
        .map(|pass| {
            let mut cx = LintContext::new(package, settings, enabled, &analysis, budget);
            (pass.check)(&mut cx);
            cx.into_diagnostics()
        })
        .collect();
    let mut diags: Vec<Diagnostic> = found.into_iter().flatten().collect();
    diags.sort_by(|a, b| (a.span, a.lint.name).cmp(&(b.span, b.lint.name)));
    diags.dedup_by(|a, b| a.span == b.span && a.lint == b.lint && a.message == b.message);
    (diags, analysis.into_inner())
}

/// Builds, before passes run side by side, the parts of the analysis whose building uses the
/// thread pool (the call graph and the summaries): a pass waiting there could run another
/// pass that asks for the same part, on the same thread, inside its `OnceLock`, and wait for
/// itself. Called only when two passes read them, so they would be built anyway; a pass
/// that reads neither never makes the package pay for them (and builds the resolver and the
/// types it reads without the pool: [`Threads::This`]).
fn build_shared_parts(
    package: &Package,
    settings: &Settings,
    analysis: &OnceLock<Analysis>,
    budget: &Budget,
) {
    let analysis =
        analysis.get_or_init(|| fresh_analysis(package, settings, budget, Threads::Pool));
    analysis.summaries(package);
}
