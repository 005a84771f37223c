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

fn ms(d: Duration) -> String {
    format!("{}", d.as_millis())
}

/// Renders the whole report. `header` lines (which binary, how it was run) go under the title.
/// `off_by_default` as for [`totals`].
pub fn render(results: &[CrateResult], header: &[String], off_by_default: &[String]) -> String {
    let t = totals(results, off_by_default);
    let mut out = String::new();
    let w = &mut out;
    let _ = writeln!(w, "# idem-lint lintcheck report\n");
    for line in header {
        let _ = writeln!(w, "{line}  ");
    }
    let _ = writeln!(w, "\n## Summary\n");
    let c = t.counts;
    let _ = writeln!(w, "| crates | failed | findings | TP | FP | debatable | NEW | VANISHED | precision | precision, lints on by default | bugs found / labelled | recall | lint time (ms) |");
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

    let _ = writeln!(w, "\n## Crates\n");
    let _ = writeln!(w, "| crate | version | status | time (ms) | findings | TP | FP | debatable | NEW | VANISHED | bugs found / labelled |");
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
            r.spec.version,
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
                r.spec.version,
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
            r.spec.name, r.spec.version, v.lint, v.file, v.text, v.occurrence, v.verdict, v.reason
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
                r.spec.version,
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
        let _ = writeln!(w, "Review each at its location, fill in `verdict` and `reason`, and add it to `lintcheck/verdicts/<crate>.toml`.\n");
        let mut last = "";
        for (r, m) in news {
            if r.spec.name != last {
                let _ = writeln!(
                    w,
                    "`lintcheck/verdicts/{}.toml` (version = \"{}\"):\n",
                    r.spec.name, r.spec.version
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
}
