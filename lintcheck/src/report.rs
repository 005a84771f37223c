//! The Markdown report: totals, per-lint and per-crate tables, every finding grouped by lint
//! with its verdict or **NEW**, the verdicts no finding matched (**VANISHED**), the labelled
//! bugs found and missed, and stubs for the new findings' verdicts.

use crate::crates::CrateSpec;
use crate::verdicts::{self, Bug, Kind, Matched, Verdict};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::time::Duration;

/// `parse_error` says the linter could not read a file, not that the code has an idempotency
/// mistake: it is reported and reviewed, but left out of precision.
pub const NOT_IDEMPOTENCY: &[&str] = &["parse_error"];

pub enum Outcome {
    Linted {
        findings: Vec<Matched>,
        time: Duration,
    },
    Failed(String),
}

pub struct CrateResult {
    pub spec: CrateSpec,
    pub outcome: Outcome,
    pub vanished: Vec<Verdict>,
    /// Each labelled bug and whether a finding catches it (a failed crate finds none).
    pub bugs: Vec<(Bug, bool)>,
}

impl CrateResult {
    pub fn findings(&self) -> &[Matched] {
        match &self.outcome {
            Outcome::Linted { findings, .. } => findings,
            Outcome::Failed(_) => &[],
        }
    }
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub findings: usize,
    pub tp: usize,
    pub fp: usize,
    pub debatable: usize,
    pub new: usize,
}

impl Counts {
    fn add(&mut self, m: &Matched) {
        self.findings += 1;
        match m.verdict.as_ref().map(|v| v.verdict) {
            Some(Kind::Tp) => self.tp += 1,
            Some(Kind::Fp) => self.fp += 1,
            Some(Kind::Debatable) => self.debatable += 1,
            None => self.new += 1,
        }
    }

    /// TP / (TP + FP) over findings with a verdict; `None` when there is none.
    pub fn precision(&self) -> Option<f64> {
        let judged = self.tp + self.fp;
        (judged > 0).then(|| self.tp as f64 / judged as f64)
    }
}

#[derive(Debug, Default, Clone, PartialEq)]
pub struct Totals {
    /// Idempotency lints only (see [`NOT_IDEMPOTENCY`]).
    pub counts: Counts,
    /// The same for the lints a user gets without asking: the lintcheck also turns on the
    /// lints that are `allow` by default (to measure them), and their findings must not blur
    /// the precision of what users see.
    pub on_by_default: Counts,
    pub per_lint: BTreeMap<String, Counts>,
    pub vanished: usize,
    pub bugs: usize,
    pub bugs_found: usize,
    pub failed: usize,
    pub time: Duration,
}

impl Totals {
    pub fn recall(&self) -> Option<f64> {
        (self.bugs > 0).then(|| self.bugs_found as f64 / self.bugs as f64)
    }
}

/// The totals of `results`; `off_by_default` names the lints that are `allow` by default.
pub fn totals(results: &[CrateResult], off_by_default: &[String]) -> Totals {
    let mut t = Totals::default();
    for r in results {
        for m in r.findings() {
            let lint = m.finding.lint.as_str();
            t.per_lint.entry(lint.to_owned()).or_default().add(m);
            if !NOT_IDEMPOTENCY.contains(&lint) {
                t.counts.add(m);
                if !off_by_default.iter().any(|off| off == lint) {
                    t.on_by_default.add(m);
                }
            }
        }
        t.vanished += r.vanished.len();
        t.bugs += r.bugs.len();
        t.bugs_found += r.bugs.iter().filter(|(_, found)| *found).count();
        match &r.outcome {
            Outcome::Linted { time, .. } => t.time += *time,
            Outcome::Failed(_) => t.failed += 1,
        }
    }
    t
}

fn ratio(x: Option<f64>) -> String {
    x.map_or_else(|| "n/a".to_string(), |x| format!("{x:.3}"))
}

fn verdict_cell(v: Option<&Verdict>) -> String {
    match v {
        Some(v) => format!("{}: {}", v.verdict, v.reason),
        None => "**NEW**".to_string(),
    }
}

/// A pinned commit is shown by its first 12 digits; a crate version as it is.
fn shown_version<'a>(unit: &str, version: &'a str) -> &'a str {
    if unit == "app" && version.len() > 12 {
        &version[..12]
    } else {
        version
    }
}

fn ms(d: Duration) -> String {
    format!("{}", d.as_millis())
}

/// How the report of the registry crates and that of whole applications differ.
pub struct Layout<'a> {
    /// What one entry is: "crate" or "app".
    pub unit: &'a str,
    /// Where the verdict files live, for the stubs of new findings.
    pub verdict_dir: &'a str,
    /// Markdown inserted after the summary (the table of applications).
    pub after_summary: &'a str,
}

impl Layout<'_> {
    pub const CRATES: Layout<'static> = Layout {
        unit: "crate",
        verdict_dir: "lintcheck/verdicts",
        after_summary: "",
    };
}

/// Renders the whole report. `header` lines (which binary, how it was run) go under the title.
/// `off_by_default` as for [`totals`].
pub fn render(results: &[CrateResult], header: &[String], off_by_default: &[String]) -> String {
    render_with(results, header, off_by_default, &Layout::CRATES)
}

/// [`render`] with the layout of another list (the whole applications).
pub fn render_with(
    results: &[CrateResult],
    header: &[String],
    off_by_default: &[String],
    layout: &Layout,
) -> String {
    let unit = layout.unit;
    let t = totals(results, off_by_default);
    let mut out = String::new();
    let w = &mut out;
    let _ = writeln!(w, "# idem-lint lintcheck report\n");
    for line in header {
        let _ = writeln!(w, "{line}  ");
    }
    let _ = writeln!(w, "\n## Summary\n");
    let c = t.counts;
    let _ = writeln!(w, "| {unit}s | failed | findings | TP | FP | debatable | NEW | VANISHED | precision | precision, lints on by default | bugs found / labelled | recall | lint time (ms) |");
    let _ = writeln!(
        w,
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    );
    let _ = writeln!(
        w,
        "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} / {} | {} | {} |",
        results.len(),
        t.failed,
        c.findings,
        c.tp,
        c.fp,
        c.debatable,
        c.new,
        t.vanished,
        ratio(c.precision()),
        ratio(t.on_by_default.precision()),
        t.bugs_found,
        t.bugs,
        ratio(t.recall()),
        ms(t.time)
    );
    let _ = writeln!(
        w,
        "\nPrecision is TP / (TP + FP) over idempotency findings with a verdict \
         (`parse_error` is counted per lint below, not in precision); \"lints on by default\" \
         leaves out the lints that are `allow` by default, which the lintcheck turns on to \
         measure them; recall is labelled bugs found / labelled bugs.\n"
    );

    let _ = write!(w, "{}", layout.after_summary);
    let _ = writeln!(w, "## Per lint\n");
    let _ = writeln!(
        w,
        "| lint | default | findings | TP | FP | debatable | NEW | precision |"
    );
    let _ = writeln!(w, "| --- | --- | --- | --- | --- | --- | --- | --- |");
    for (lint, c) in &t.per_lint {
        let default = if off_by_default.contains(lint) {
            "allow"
        } else {
            "on"
        };
        let _ = writeln!(
            w,
            "| `{lint}` | {default} | {} | {} | {} | {} | {} | {} |",
            c.findings,
            c.tp,
            c.fp,
            c.debatable,
            c.new,
            ratio(c.precision())
        );
    }

    let heading = if unit == "app" { "Apps" } else { "Crates" };
    let version = if unit == "app" { "commit" } else { "version" };
    let _ = writeln!(w, "\n## {heading}\n");
    let _ = writeln!(w, "| {unit} | {version} | status | time (ms) | findings | TP | FP | debatable | NEW | VANISHED | bugs found / labelled |");
    let _ = writeln!(
        w,
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    );
    for r in results {
        let mut c = Counts::default();
        r.findings().iter().for_each(|m| c.add(m));
        let (status, time) = match &r.outcome {
            Outcome::Linted { time, .. } => {
                let control = r.spec.is_control();
                let status = match (control, c.findings) {
                    (true, 0) => "ok (control, clean)".to_string(),
                    (true, _) => "**control has findings**".to_string(),
                    _ => "ok".to_string(),
                };
                (status, ms(*time))
            }
            Outcome::Failed(why) => (
                format!("**failed**: {}", why.replace('|', "\\|")),
                "-".into(),
            ),
        };
        let found = r.bugs.iter().filter(|(_, f)| *f).count();
        let _ = writeln!(
            w,
            "| {} | {} | {status} | {time} | {} | {} | {} | {} | {} | {} | {found} / {} |",
            r.spec.name,
            shown_version(unit, &r.spec.version),
            c.findings,
            c.tp,
            c.fp,
            c.debatable,
            c.new,
            r.vanished.len(),
            r.bugs.len()
        );
    }

    let _ = writeln!(w, "\n## Findings by lint\n");
    let mut by_lint: BTreeMap<&str, Vec<(&CrateResult, &Matched)>> = BTreeMap::new();
    for r in results {
        for m in r.findings() {
            by_lint.entry(&m.finding.lint).or_default().push((r, m));
        }
    }
    if by_lint.is_empty() {
        let _ = writeln!(w, "No findings.");
    }
    for (lint, list) in &by_lint {
        let _ = writeln!(w, "### `{lint}` ({})\n", list.len());
        for (r, m) in list {
            let f = &m.finding;
            let _ = writeln!(
                w,
                "- `{} {} {}:{}:{}` {}  \n  {}",
                r.spec.name,
                shown_version(unit, &r.spec.version),
                f.file,
                f.line,
                f.column,
                f.message,
                verdict_cell(m.verdict.as_ref())
            );
        }
        let _ = writeln!(w);
    }

    let vanished: Vec<_> = results
        .iter()
        .flat_map(|r| r.vanished.iter().map(move |v| (r, v)))
        .collect();
    let _ = writeln!(w, "## VANISHED verdicts ({})\n", vanished.len());
    if vanished.is_empty() {
        let _ = writeln!(w, "None: every verdict matched a finding.\n");
    }
    for (r, v) in vanished {
        let _ = writeln!(
            w,
            "- **VANISHED** `{} {} {}` `{}` on `{}` (occurrence {}), was {}: {}",
            r.spec.name,
            shown_version(unit, &r.spec.version),
            v.lint,
            v.file,
            v.text,
            v.occurrence,
            v.verdict,
            v.reason
        );
    }

    let _ = writeln!(
        w,
        "\n## Labelled bugs ({} found / {})\n",
        t.bugs_found, t.bugs
    );
    for r in results {
        for (b, found) in &r.bugs {
            let _ = writeln!(
                w,
                "- {} `{} {} {}:{}-{}` in `{}` (`{}`): {}",
                if *found { "found" } else { "**missed**" },
                r.spec.name,
                shown_version(unit, &r.spec.version),
                b.file,
                b.lines[0],
                b.lines[1],
                b.function,
                b.lint,
                b.why
            );
        }
    }

    let news: Vec<_> = results
        .iter()
        .flat_map(|r| {
            r.findings()
                .iter()
                .filter(|m| m.verdict.is_none())
                .map(move |m| (r, m))
        })
        .collect();
    if !news.is_empty() {
        let _ = writeln!(w, "\n## Verdict stubs for NEW findings\n");
        let _ = writeln!(w, "Review each at its location, fill in `verdict` and `reason`, and add it to `{}/<{unit}>.toml`.\n", layout.verdict_dir);
        let mut last = "";
        for (r, m) in news {
            if r.spec.name != last {
                let _ = writeln!(
                    w,
                    "`{}/{}.toml` (version = \"{}\"):\n",
                    layout.verdict_dir, r.spec.name, r.spec.version
                );
                last = &r.spec.name;
            }
            let _ = writeln!(
                w,
                "```toml\n# {}:{}  {}\n{}```\n",
                m.finding.file,
                m.finding.line,
                m.finding.message,
                verdicts::stub(&m.finding)
            );
        }
    }
    out
}

/// What the runner prints when it is done: the totals line, the precision of each lint, and
/// the diff against the verdicts (each finding that appeared without one, each verdict that
/// vanished), so a run with a new binary shows its effect without opening the report.
pub fn summary(results: &[CrateResult], off_by_default: &[String], unit: &str) -> Vec<String> {
    let t = totals(results, off_by_default);
    let c = t.counts;
    let mut out = vec![format!(
        "{} {unit}s ({} failed): {} findings, {} TP, {} FP, {} debatable, {} NEW, {} VANISHED; \
         precision {} ({} for the lints on by default); bugs found {}/{} (recall {}); lint time {} ms",
        results.len(),
        t.failed,
        c.findings,
        c.tp,
        c.fp,
        c.debatable,
        c.new,
        t.vanished,
        ratio(c.precision()),
        ratio(t.on_by_default.precision()),
        t.bugs_found,
        t.bugs,
        ratio(t.recall()),
        t.time.as_millis()
    )];
    for (lint, c) in &t.per_lint {
        let default = if off_by_default.contains(lint) {
            "allow"
        } else {
            "on"
        };
        out.push(format!(
            "  {lint} ({default}): {} findings, {} TP, {} FP, {} debatable, {} NEW; precision {}",
            c.findings,
            c.tp,
            c.fp,
            c.debatable,
            c.new,
            ratio(c.precision())
        ));
    }
    for r in results {
        let v = shown_version(unit, &r.spec.version);
        for m in r.findings().iter().filter(|m| m.verdict.is_none()) {
            let f = &m.finding;
            out.push(format!(
                "  NEW {} {v} {} {}:{}: {}",
                r.spec.name, f.lint, f.file, f.line, f.text
            ));
        }
        for gone in &r.vanished {
            out.push(format!(
                "  VANISHED {} {v} {} {}: {} (was {})",
                r.spec.name, gone.lint, gone.file, gone.text, gone.verdict
            ));
        }
        if let Outcome::Failed(why) = &r.outcome {
            out.push(format!("  FAILED {} {v}: {why}", r.spec.name));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::Finding;

    fn spec(name: &str, expect: Option<&str>) -> CrateSpec {
        CrateSpec {
            name: name.into(),
            version: "1.0.0".into(),
            why: "w".into(),
            expect: expect.map(str::to_string),
        }
    }

    fn matched(lint: &str, text: &str, verdict: Option<Kind>) -> Matched {
        Matched {
            finding: Finding {
                lint: lint.into(),
                file: "src/lib.rs".into(),
                line: 12,
                column: 5,
                message: format!("{lint} message"),
                text: text.into(),
                occurrence: 0,
            },
            verdict: verdict.map(|k| Verdict {
                lint: lint.into(),
                file: "src/lib.rs".into(),
                text: text.into(),
                occurrence: 0,
                verdict: k,
                reason: format!("reason for {text}"),
            }),
        }
    }

    fn bug(found: bool) -> (Bug, bool) {
        let b = Bug {
            lint: "unguarded_entry_point".into(),
            file: "src/retry.rs".into(),
            function: "retry_all".into(),
            lines: [1, 20],
            why: "resends without the check".into(),
        };
        (b, found)
    }

    fn sample() -> Vec<CrateResult> {
        vec![
            CrateResult {
                spec: spec("queue", None),
                outcome: Outcome::Linted {
                    findings: vec![
                        matched("check_then_act", "a()", Some(Kind::Tp)),
                        matched("check_then_act", "b()", Some(Kind::Fp)),
                        matched("nondeterministic_key", "c()", Some(Kind::Tp)),
                        matched("nondeterministic_key", "d()", Some(Kind::Debatable)),
                        matched("nondeterministic_key", "e()", None),
                        matched("parse_error", "mod x;", Some(Kind::Tp)),
                    ],
                    time: Duration::from_millis(40),
                },
                vanished: vec![matched("check_then_act", "old()", Some(Kind::Fp))
                    .verdict
                    .unwrap()],
                bugs: vec![bug(true), bug(false)],
            },
            CrateResult {
                spec: spec("tokio", Some("clean")),
                outcome: Outcome::Linted {
                    findings: vec![],
                    time: Duration::from_millis(2),
                },
                vanished: vec![],
                bugs: vec![],
            },
            CrateResult {
                spec: spec("broken", None),
                outcome: Outcome::Failed("could not download broken@1.0.0: no such version".into()),
                vanished: vec![],
                bugs: vec![bug(false)],
            },
        ]
    }

    #[test]
    fn totals_leave_parse_errors_out_of_precision() {
        let t = totals(&sample(), &[]);
        assert_eq!(
            t.counts,
            Counts {
                findings: 5,
                tp: 2,
                fp: 1,
                debatable: 1,
                new: 1
            }
        );
        assert_eq!(t.counts.precision(), Some(2.0 / 3.0));
        assert_eq!(t.per_lint["parse_error"].tp, 1);
        assert_eq!((t.bugs_found, t.bugs, t.failed, t.vanished), (1, 3, 1, 1));
        assert_eq!(t.recall(), Some(1.0 / 3.0));
        assert_eq!(t.time, Duration::from_millis(42));
    }

    /// A lint that is `allow` by default counts in the overall precision (the lintcheck
    /// measures it) and not in the precision of the lints users get without asking.
    #[test]
    fn lints_off_by_default_are_left_out_of_the_default_precision() {
        let off = vec!["check_then_act".to_string()];
        let t = totals(&sample(), &off);
        assert_eq!(t.counts.precision(), Some(2.0 / 3.0));
        assert_eq!(t.on_by_default.tp + t.on_by_default.fp, 1);
        assert_eq!(t.on_by_default.precision(), Some(1.0));
        let md = render(&sample(), &[], &off);
        assert!(md.contains("| `check_then_act` | allow |"), "{md}");
        assert!(md.contains("| `nondeterministic_key` | on |"), "{md}");
        assert!(md.contains("| 0.667 | 1.000 |"), "{md}");
    }

    #[test]
    fn precision_and_recall_are_undefined_without_data() {
        let t = totals(&[], &[]);
        assert_eq!(t.counts.precision(), None);
        assert_eq!(t.recall(), None);
        assert!(render(&[], &[], &[]).contains("No findings."));
    }

    #[test]
    fn renders_every_finding_with_its_verdict_new_vanished_bugs_and_failures() {
        let md = render(&sample(), &["binary: x".to_string()], &[]);
        assert!(
            md.contains("| 3 | 1 | 5 | 2 | 1 | 1 | 1 | 1 | 0.667 | 0.667 | 1 / 3 | 0.333 | 42 |"),
            "{md}"
        );
        assert!(md.contains("### `check_then_act` (2)"));
        assert!(md.contains(
            "- `queue 1.0.0 src/lib.rs:12:5` check_then_act message  \n  FP: reason for b()"
        ));
        assert!(md.contains("nondeterministic_key message  \n  **NEW**"));
        assert!(md.contains("**VANISHED** `queue 1.0.0 check_then_act` `src/lib.rs` on `old()`"));
        assert!(md.contains("| tokio | 1.0.0 | ok (control, clean) |"));
        assert!(md.contains("| broken | 1.0.0 | **failed**: could not download"));
        assert!(md.contains("- **missed** `queue 1.0.0 src/retry.rs:1-20` in `retry_all`"));
        assert!(md.contains("- found `queue 1.0.0 src/retry.rs:1-20`"));
        assert!(md.contains("`lintcheck/verdicts/queue.toml` (version = \"1.0.0\")"));
        assert!(md.contains("text = \"e()\""));
    }

    #[test]
    fn a_control_with_findings_is_flagged() {
        let mut results = sample();
        results[1].outcome = Outcome::Linted {
            findings: vec![matched("check_then_act", "x()", None)],
            time: Duration::ZERO,
        };
        assert!(render(&results, &[], &[]).contains("| tokio | 1.0.0 | **control has findings** |"));
    }

    #[test]
    fn the_printed_summary_gives_precision_per_lint_and_the_diff() {
        let lines = summary(&sample(), &["check_then_act".to_string()], "crate");
        assert!(
            lines[0].starts_with(
                "3 crates (1 failed): 5 findings, 2 TP, 1 FP, 1 debatable, 1 NEW, 1 VANISHED; \
                 precision 0.667 (1.000 for the lints on by default); bugs found 1/3"
            ),
            "{lines:?}"
        );
        assert!(lines.contains(
            &"  check_then_act (allow): 2 findings, 1 TP, 1 FP, 0 debatable, 0 NEW; precision 0.500"
                .to_string()
        ));
        assert!(lines.contains(
            &"  nondeterministic_key (on): 3 findings, 1 TP, 0 FP, 1 debatable, 1 NEW; precision 1.000"
                .to_string()
        ));
        assert!(lines
            .contains(&"  NEW queue 1.0.0 nondeterministic_key src/lib.rs:12: e()".to_string()));
        assert!(lines.contains(
            &"  VANISHED queue 1.0.0 check_then_act src/lib.rs: old() (was FP)".to_string()
        ));
        assert!(lines
            .iter()
            .any(|l| l.starts_with("  FAILED broken 1.0.0: could not download")));
    }

    /// The applications' report names commits by 12 digits, says "apps", and points the stubs
    /// at their own verdict directory.
    #[test]
    fn the_apps_layout_shortens_commits_and_points_at_its_verdicts() {
        let mut results = sample();
        results[0].spec.version = "439734dd638a2c06a2f907beab7dcf4646e88f86".into();
        let layout = Layout {
            unit: "app",
            verdict_dir: "lintcheck/verdicts-apps",
            after_summary: "## Applications\n\nTABLE\n\n",
        };
        let md = render_with(&results, &[], &[], &layout);
        assert!(md.contains("| apps | failed |"), "{md}");
        assert!(md.contains("## Apps\n"), "{md}");
        assert!(md.contains("| app | commit |"), "{md}");
        assert!(
            md.contains("- `queue 439734dd638a src/lib.rs:12:5`"),
            "{md}"
        );
        assert!(md.contains(
            "`lintcheck/verdicts-apps/queue.toml` (version = \"439734dd638a2c06a2f907beab7dcf4646e88f86\")"
        ));
        let table = md.find("TABLE").unwrap();
        assert!(md.find("## Summary").unwrap() < table && table < md.find("## Per lint").unwrap());
        assert!(summary(&results, &[], "app")[0].starts_with("3 apps (1 failed)"));
    }
}
