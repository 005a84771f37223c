//! The pinned crate list, `lintcheck/crates.toml`.

use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::collections::HashSet;
use std::path::Path;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CrateSpec {
    pub name: String,
    /// An exact registry version: the list is pinned so two runs lint the same code.
    pub version: String,
    /// What idempotency-relevant code the crate holds.
    pub why: String,
    /// `"clean"` for a control crate, where any finding is a false positive.
    #[serde(default)]
    pub expect: Option<String>,
}

impl CrateSpec {
    pub fn is_control(&self) -> bool {
        self.expect.as_deref() == Some("clean")
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CrateList {
    #[serde(rename = "crate")]
    crates: Vec<CrateSpec>,
}

pub fn load(path: &Path) -> Result<Vec<CrateSpec>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("could not read `{}`", path.display()))?;
    parse(&text).with_context(|| format!("in `{}`", path.display()))
}

pub fn parse(text: &str) -> Result<Vec<CrateSpec>> {
    let list: CrateList = toml::from_str(text)?;
    let mut seen = HashSet::new();
    for spec in &list.crates {
        if !seen.insert(spec.name.as_str()) {
            bail!("crate `{}` is listed twice", spec.name);
        }
        let exact = !spec.version.is_empty()
            && spec
                .version
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_digit())
            && !spec
                .version
                .contains(['*', '^', '~', '<', '>', '=', ',', ' ']);
        if !exact {
            bail!(
                "crate `{}`: version `{}` is not an exact version",
                spec.name,
                spec.version
            );
        }
        if let Some(expect) = &spec.expect {
            if expect != "clean" {
                bail!(
                    "crate `{}`: unknown expect `{expect}` (only \"clean\")",
                    spec.name
                );
            }
        }
    }
    Ok(list.crates)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_specs_and_controls() {
        let specs = parse(
            "[[crate]]\nname = \"a\"\nversion = \"1.2.3-rc.1\"\nwhy = \"w\"\n\
             [[crate]]\nname = \"b\"\nversion = \"0.1.0\"\nwhy = \"w\"\nexpect = \"clean\"\n",
        )
        .unwrap();
        assert_eq!(specs.len(), 2);
        assert_eq!(specs[0].version, "1.2.3-rc.1");
        assert!(!specs[0].is_control());
        assert!(specs[1].is_control());
    }

    #[test]
    fn rejects_ranges_duplicates_and_unknown_keys() {
        let one = |v: &str| format!("[[crate]]\nname = \"a\"\nversion = \"{v}\"\nwhy = \"w\"\n");
        for v in ["^1.0", "1.*", ">=1", "*", ""] {
            let err = parse(&one(v)).unwrap_err().to_string();
            assert!(err.contains("not an exact version"), "{v}: {err}");
        }
        let twice = format!("{}{}", one("1.0.0"), one("1.0.1"));
        assert!(parse(&twice)
            .unwrap_err()
            .to_string()
            .contains("listed twice"));
        assert!(parse(&format!("{}extra = 1\n", one("1.0.0"))).is_err());
    }
}
