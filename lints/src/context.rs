//! What a lint pass sees ([`LintContext`]) and the entry point that runs every pass.

use crate::analysis::incremental::{Retained, Reuse};
use crate::analysis::Analysis;
use crate::catalog::Catalog;
use crate::diagnostic::Diagnostic;
use crate::lint::Lint;
use crate::lints::PASSES;
use crate::model::{Package, Span};
use crate::settings::Settings;
use std::cell::OnceCell;

pub struct LintContext<'a> {
    pub package: &'a Package,
    pub settings: &'a Settings,
    enabled: &'a dyn Fn(&'static Lint) -> bool,
    diagnostics: Vec<Diagnostic>,
    analysis: OnceCell<Analysis>,
}

impl<'a> LintContext<'a> {
    pub fn new(
        package: &'a Package,
        settings: &'a Settings,
        enabled: &'a dyn Fn(&'static Lint) -> bool,
    ) -> Self {
        LintContext {
            package,
            settings,
            enabled,
            diagnostics: Vec::new(),
            analysis: OnceCell::new(),
        }
    }

    /// The package's analysis, built on first use and shared by every pass.
    pub fn analysis(&self) -> &Analysis {
        self.analysis.get_or_init(|| {
            Analysis::with_catalog(self.package, Catalog::from_settings(self.settings))
        })
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

/// Runs every enabled lint over one package and returns the findings sorted by position.
/// Suppression comments and levels are the driver's business.
pub fn check_package(
    package: &Package,
    settings: &Settings,
    enabled: &dyn Fn(&'static Lint) -> bool,
) -> Vec<Diagnostic> {
    let cx = LintContext::new(package, settings, enabled);
    run_passes(cx, enabled).0
}

/// [`check_package`] for a caller that analyses version after version of a package (the
/// language server): `prev` is what the previous call returned, and the analysis reuses it
/// where that gives the same findings ([`Analysis::reusing`]). Returns the findings, what
/// to pass next time, and how much was reused.
pub fn check_package_retaining(
    package: &Package,
    settings: &Settings,
    enabled: &dyn Fn(&'static Lint) -> bool,
    prev: Option<Retained>,
) -> (Vec<Diagnostic>, Retained, Reuse) {
    let (analysis, reuse) = Analysis::reusing(package, settings, prev);
    let cx = LintContext::new(package, settings, enabled);
    let _ = cx.analysis.set(analysis);
    let (diags, analysis) = run_passes(cx, enabled);
    let analysis = analysis
        .unwrap_or_else(|| Analysis::with_catalog(package, Catalog::from_settings(settings)));
    (diags, analysis.retain(package, settings), reuse)
}

fn run_passes(
    mut cx: LintContext<'_>,
    enabled: &dyn Fn(&'static Lint) -> bool,
) -> (Vec<Diagnostic>, Option<Analysis>) {
    for pass in PASSES {
        if pass.lints.iter().any(|l| enabled(l)) {
            (pass.check)(&mut cx);
        }
    }
    let analysis = cx.analysis.take();
    let mut diags = cx.into_diagnostics();
    diags.sort_by(|a, b| (a.span, a.lint.name).cmp(&(b.span, b.lint.name)));
    diags.dedup_by(|a, b| a.span == b.span && a.lint == b.lint && a.message == b.message);
    (diags, analysis)
}
