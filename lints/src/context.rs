//! What a lint pass sees ([`LintContext`]). The runner ([`crate::runner`]) makes one per pass.

use crate::analysis::budget::Budget;
use crate::analysis::{Analysis, Threads};
use crate::diagnostic::Diagnostic;
use crate::lint::Lint;
use crate::model::{Package, Span};
use crate::settings::Settings;
use std::sync::OnceLock;

/// Which lints are on: findings of the others are not shown.
pub type Enabled<'a> = dyn Fn(&'static Lint) -> bool + Sync + 'a;

/// What one pass sees: the package, the settings and the analysis, shared with the passes
/// running beside it, and the findings it reported.
pub struct LintContext<'a> {
    pub package: &'a Package,
    pub settings: &'a Settings,
    enabled: &'a Enabled<'a>,
    diagnostics: Vec<Diagnostic>,
    analysis: &'a OnceLock<Analysis>,
    budget: &'a Budget,
}

impl<'a> LintContext<'a> {
    pub(crate) fn new(
        package: &'a Package,
        settings: &'a Settings,
        enabled: &'a Enabled<'a>,
        analysis: &'a OnceLock<Analysis>,
        budget: &'a Budget,
    ) -> Self {
        LintContext {
            package,
            settings,
            enabled,
            diagnostics: Vec::new(),
            analysis,
            budget,
        }
    }

    /// The package's analysis, built on first use and shared by every pass.
    pub fn analysis(&self) -> &Analysis {
        self.analysis
            // Inside a pass, beside other passes: built without the pool (see [`Threads`]).
            .get_or_init(|| fresh_analysis(self.package, self.settings, self.budget, Threads::This))
    }

    /// Whether findings of `lint` would be shown; passes skip work for disabled lints.
    pub fn is_enabled(&self, lint: &'static Lint) -> bool {
        (self.enabled)(lint)
    }

    /// Reports a finding of `lint` at `span`; `decorate` adds labels, notes, help and
    /// suggestions.
    pub fn span_lint(
        &mut self,
        lint: &'static Lint,
        span: Span,
        message: impl Into<String>,
        decorate: impl FnOnce(&mut Diagnostic),
    ) {
        if !self.is_enabled(lint) {
            return;
        }
        let mut diag = Diagnostic::new(lint, span, message);
        decorate(&mut diag);
        self.diagnostics.push(diag);
    }

    pub fn into_diagnostics(self) -> Vec<Diagnostic> {
        self.diagnostics
    }
}

/// The analysis a pass builds when none was built before it.
pub(crate) fn fresh_analysis(
    package: &Package,
    settings: &Settings,
    budget: &Budget,
    threads: Threads,
) -> Analysis {
    let mut catalog = settings.catalog();
    catalog.budget = budget.clone();
    let mut analysis = Analysis::with_catalog_on(package, catalog, threads);
    analysis.entry_names = settings.entry_names();
    analysis
}
