//! The reviewed verdicts, one file per crate: `lintcheck/verdicts/<crate>.toml`.
//!
//! ```toml
//! version = "0.6.0"            # the crate version the verdicts were reviewed on
//!
//! [[finding]]
//! lint = "check_then_act"
//! file = "src/lib.rs"
//! text = "if store.exists(&key).await? {"   # the flagged line, whitespace collapsed
//! occurrence = 0               # optional: index among findings with the same lint/file/text
//! verdict = "fp"               # tp | fp | debatable
//! reason = "the write is INSERT .. ON CONFLICT DO NOTHING"
//!
//! [[bug]]
//! lint = "unguarded_entry_point"
//! file = "src/worker.rs"
//! function = "retry_failed"
//! lines = [40, 62]             # the function's lines: a finding of `lint` in them finds the bug
//! why = "the retry path sends the mail again without the sent-mark check"
//! ```

use crate::finding::{normalize, Finding, Key};
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::path::Path;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Tp,
    Fp,
    Debatable,
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::Tp => "TP",
            Kind::Fp => "FP",
            Kind::Debatable => "debatable",
        })
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Verdict {
    pub lint: String,
    pub file: String,
    pub text: String,
    #[serde(default)]
    pub occurrence: u32,
    pub verdict: Kind,
    pub reason: String,
}

impl Verdict {
    pub fn key(&self) -> Key {
        Key {
            lint: self.lint.clone(),
            file: self.file.clone(),
            text: normalize(&self.text),
            occurrence: self.occurrence,
        }
    }
}

/// An idempotency bug the crate is known to hold, whether or not the linter finds it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bug {
    pub lint: String,
    pub file: String,
    pub function: String,
    /// First and last line of the function (or the statements) holding the bug. Line numbers
    /// are stable here because the crate version is pinned, and a range accepts a detector
    /// that flags the check instead of the write, or the call instead of its argument.
    pub lines: [u64; 2],
    pub why: String,
}

impl Bug {
    /// Found when a finding of the bug's lint in its file lies within its lines.
    pub fn found_by(&self, findings: &[Finding]) -> bool {
        let [first, last] = self.lines;
        findings
            .iter()
            .any(|f| f.lint == self.lint && f.file == self.file && (first..=last).contains(&f.line))
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CrateVerdicts {
    pub version: String,
    #[serde(default)]
    pub finding: Vec<Verdict>,
    #[serde(default)]
    pub bug: Vec<Bug>,
}

pub fn parse(text: &str) -> Result<CrateVerdicts> {
    let v: CrateVerdicts = toml::from_str(text)?;
    let mut keys = HashSet::new();
    for f in &v.finding {
        if f.reason.trim().is_empty() {
            bail!("verdict for `{}` in `{}` has no reason", f.lint, f.file);
        }
        if !keys.insert(f.key()) {
            bail!(
                "two verdicts for `{}` in `{}` on `{}` occurrence {}",
                f.lint,
                f.file,
                f.text,
                f.occurrence
            );
        }
    }
    for b in &v.bug {
        if b.lines[0] > b.lines[1] || b.lines[0] == 0 {
            bail!(
                "bug in `{}` (`{}`): bad line range {:?}",
                b.file,
                b.function,
                b.lines
            );
        }
    }
    Ok(v)
}

/// Every `<crate>.toml` in `dir`, by crate name. A missing directory is no verdicts.
pub fn load_dir(dir: &Path) -> Result<BTreeMap<String, CrateVerdicts>> {
    let mut out = BTreeMap::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e).with_context(|| format!("could not read `{}`", dir.display())),
    };
    for entry in entries {
        let path = entry?.path();
        if path.extension().and_then(|e| e.to_str()) != Some("toml") {
            continue;
        }
        let Some(name) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("could not read `{}`", path.display()))?;
        let v = parse(&text).with_context(|| format!("in `{}`", path.display()))?;
        out.insert(name.to_string(), v);
    }
    Ok(out)
}

/// A finding with the verdict it matched, if any.
#[derive(Debug, Clone)]
pub struct Matched {
    pub finding: Finding,
    pub verdict: Option<Verdict>,
}

/// Pairs findings with verdicts by identity. Returns the findings (with their verdict or none:
/// new) and the verdicts no finding matched (vanished). Verdicts reviewed on another version
/// of the crate match nothing.
pub fn match_findings(
    findings: &[Finding],
    version: &str,
    verdicts: Option<&CrateVerdicts>,
) -> (Vec<Matched>, Vec<Verdict>) {
    let mut pool: BTreeMap<Key, Verdict> = BTreeMap::new();
    if let Some(v) = verdicts.filter(|v| v.version == version) {
        for f in &v.finding {
            pool.insert(f.key(), f.clone());
        }
    }
    let matched = findings
        .iter()
        .map(|f| Matched {
            finding: f.clone(),
            verdict: pool.remove(&f.key()),
        })
        .collect();
    let mut vanished: Vec<Verdict> = match verdicts {
        Some(v) if v.version != version => v.finding.clone(),
        _ => pool.into_values().collect(),
    };
    vanished.sort_by_key(Verdict::key);
    (matched, vanished)
}

/// A `[[finding]]` entry ready to paste into a verdict file, for a new finding.
pub fn stub(f: &Finding) -> String {
    let occurrence = if f.occurrence > 0 {
        format!("occurrence = {}\n", f.occurrence)
    } else {
        String::new()
    };
    format!(
        "[[finding]]\nlint = {}\nfile = {}\ntext = {}\n{occurrence}verdict = \"\"  # tp | fp | debatable\nreason = \"\"\n",
        toml_str(&f.lint),
        toml_str(&f.file),
        toml_str(&f.text),
    )
}

fn toml_str(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(lint: &str, text: &str, occurrence: u32) -> Finding {
        Finding {
            lint: lint.into(),
            file: "src/lib.rs".into(),
            line: 3,
            column: 1,
            message: "m".into(),
            text: text.into(),
            occurrence,
        }
    }

    const FILE: &str = r#"
version = "1.0.0"
[[finding]]
lint = "check_then_act"
file = "src/lib.rs"
text = "   if  store.exists(k) {"
verdict = "fp"
reason = "locked"
[[finding]]
lint = "check_then_act"
file = "src/lib.rs"
text = "gone()"
verdict = "tp"
reason = "was real"
[[bug]]
lint = "nondeterministic_key"
file = "src/lib.rs"
function = "handle"
lines = [2, 4]
why = "fresh key per delivery"
"#;

    #[test]
    fn matches_by_identity_and_reports_new_and_vanished() {
        let v = parse(FILE).unwrap();
        let findings = [
            finding("check_then_act", "if store.exists(k) {", 0),
            finding("check_then_act", "if store.exists(k) {", 1),
        ];
        let (m, vanished) = match_findings(&findings, "1.0.0", Some(&v));
        assert_eq!(m[0].verdict.as_ref().map(|v| v.verdict), Some(Kind::Fp));
        assert!(m[1].verdict.is_none(), "second occurrence is new");
        assert_eq!(vanished.len(), 1);
        assert_eq!(vanished[0].text, "gone()");
    }

    #[test]
    fn verdicts_of_another_version_match_nothing() {
        let v = parse(FILE).unwrap();
        let findings = [finding("check_then_act", "if store.exists(k) {", 0)];
        let (m, vanished) = match_findings(&findings, "1.0.1", Some(&v));
        assert!(m[0].verdict.is_none());
        assert_eq!(vanished.len(), 2);
    }

    #[test]
    fn bug_is_found_only_by_its_lint_in_its_file() {
        let v = parse(FILE).unwrap();
        let bug = &v.bug[0];
        assert!(bug.found_by(&[finding(
            "nondeterministic_key",
            "let k = Uuid::new_v4();",
            0
        )]));
        let mut outside = finding("nondeterministic_key", "let k = Uuid::new_v4();", 0);
        outside.line = 5;
        assert!(!bug.found_by(&[outside]));
        assert!(!bug.found_by(&[finding("check_then_act", "let k = Uuid::new_v4();", 0)]));
        let mut other_file = finding("nondeterministic_key", "let k = Uuid::new_v4();", 0);
        other_file.file = "src/other.rs".into();
        assert!(!bug.found_by(&[other_file]));
    }

    #[test]
    fn rejects_duplicates_missing_reasons_and_bad_kinds() {
        let dup = format!(
            "{FILE}[[finding]]\nlint = \"check_then_act\"\nfile = \"src/lib.rs\"\n\
             text = \"if store.exists(k) {{\"\nverdict = \"tp\"\nreason = \"x\"\n"
        );
        assert!(parse(&dup)
            .unwrap_err()
            .to_string()
            .contains("two verdicts"));
        let no_reason = "version = \"1\"\n[[finding]]\nlint = \"l\"\nfile = \"f\"\ntext = \"t\"\nverdict = \"tp\"\nreason = \" \"\n";
        assert!(parse(no_reason)
            .unwrap_err()
            .to_string()
            .contains("no reason"));
        let bad = no_reason
            .replace("\"tp\"", "\"maybe\"")
            .replace("\" \"", "\"r\"");
        assert!(parse(&bad).is_err());
    }

    #[test]
    fn stub_round_trips_once_filled_in() {
        let f = finding("check_then_act", "let q = \"SELECT \\\"x\\\"\";", 2);
        let filled = format!("version = \"1\"\n{}", stub(&f))
            .replace("verdict = \"\"", "verdict = \"tp\"")
            .replace("reason = \"\"", "reason = \"r\"");
        let v = parse(&filled).unwrap();
        assert_eq!(v.finding[0].key(), f.key());
    }
}
