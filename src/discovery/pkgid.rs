//! Cargo's package ID specifications, as `-p` takes them: `name`, `name@1.2`, `name:1.2.3`,
//! and the URL forms `[kind+]proto://host/path[?query][#name|#version|#name@version]`
//! (`path+file:///repo/a#0.1.0`, `registry+https://...#a@0.1.0`), the form `cargo metadata`
//! prints in package ids.

use anyhow::{bail, Result};
use cargo_metadata::semver::Version;
use std::path::{Path, PathBuf};

/// One parsed `-p` argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackageIdSpec {
    name: String,
    version: Option<PartialVersion>,
    /// The URL form's source: `None` for a bare name.
    source: Option<SpecSource>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum SpecSource {
    /// A `file://` URL without a kind or with `path+`: a local package's directory.
    Dir(PathBuf),
    /// A registry, git or remote URL: never a workspace member.
    Remote,
}

/// `1`, `1.2` or a complete version (pre-release and build included); a partial version
/// matches every version that starts with it, as in cargo.
#[derive(Debug, Clone, PartialEq, Eq)]
enum PartialVersion {
    Major(u64),
    MajorMinor(u64, u64),
    Exact(Version),
}

impl PackageIdSpec {
    pub fn parse(spec: &str) -> Result<PackageIdSpec> {
        let Some((scheme, rest)) = spec.split_once("://") else {
            let (name, version) = name_and_version(spec)?;
            return Ok(PackageIdSpec {
                name,
                version,
                source: None,
            });
        };
        let (kind, proto) = match scheme.split_once('+') {
            Some((kind, proto)) => (Some(kind), proto),
            None => (None, scheme),
        };
        if !matches!(kind, None | Some("path" | "registry" | "sparse" | "git")) {
            bail!("invalid package ID specification `{spec}`: unknown kind `{scheme}`");
        }
        let (location, fragment) = match rest.split_once('#') {
            Some((l, f)) => (l, Some(f)),
            None => (rest, None),
        };
        // `?branch=..` only narrows git sources; members are never git sources.
        let location = location.split('?').next().unwrap_or(location);
        let last_segment = location
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .map(percent_decode)
            .unwrap_or_default();
        let (name, version) = match fragment {
            None => (last_segment, None),
            Some(f) if f.starts_with(|c: char| c.is_ascii_digit()) => {
                (last_segment, Some(partial_version(f, spec)?))
            }
            Some(f) => name_and_version(f)?,
        };
        if name.is_empty() {
            bail!("invalid package ID specification `{spec}`: no package name");
        }
        let source = match (kind, proto) {
            (None | Some("path"), "file") => {
                // `file:///dir` and `file://localhost/dir` both name `/dir`.
                let path = location.strip_prefix("localhost").unwrap_or(location);
                SpecSource::Dir(PathBuf::from(percent_decode(path)))
            }
            _ => SpecSource::Remote,
        };
        Ok(PackageIdSpec {
            name,
            version,
            source: Some(source),
        })
    }

    /// Whether the workspace member `name` at `version`, whose manifest sits in `dir`,
    /// is the package this spec names.
    pub fn matches(&self, name: &str, version: &Version, dir: &Path) -> bool {
        if self.name != name {
            return false;
        }
        if let Some(v) = &self.version {
            let ok = match v {
                PartialVersion::Major(m) => version.major == *m,
                PartialVersion::MajorMinor(m, n) => version.major == *m && version.minor == *n,
                PartialVersion::Exact(e) => e == version,
            };
            if !ok {
                return false;
            }
        }
        match &self.source {
            None => true,
            Some(SpecSource::Remote) => false,
            Some(SpecSource::Dir(d)) => same_dir(d, dir),
        }
    }

    /// The name the spec asks for (to list the members of that name when none matches).
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// `name`, `name@ver` or `name:ver`.
fn name_and_version(s: &str) -> Result<(String, Option<PartialVersion>)> {
    let (name, version) = match s.split_once(['@', ':']) {
        Some((n, v)) => (n, Some(partial_version(v, s)?)),
        None => (s, None),
    };
    let valid = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || c == '-' || c == '_');
    if !valid {
        bail!("invalid package ID specification `{s}`: `{name}` is not a package name");
    }
    Ok((name.to_string(), version))
}

fn partial_version(v: &str, spec: &str) -> Result<PartialVersion> {
    let parts: Vec<&str> = v.split('.').collect();
    let num = |p: &str| p.parse::<u64>().ok();
    let parsed = match parts.as_slice() {
        [major] => num(major).map(PartialVersion::Major),
        [major, minor] => num(major)
            .zip(num(minor))
            .map(|(a, b)| PartialVersion::MajorMinor(a, b)),
        _ => Version::parse(v).ok().map(PartialVersion::Exact),
    };
    match parsed {
        Some(p) => Ok(p),
        None => bail!("invalid package ID specification `{spec}`: `{v}` is not a version"),
    }
}

/// `%xx` escapes of a URL path decoded byte-wise (a path need not be UTF-8).
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The same directory, through symlinks where both exist.
fn same_dir(a: &Path, b: &Path) -> bool {
    let a_trim = a.components().collect::<PathBuf>();
    let b_trim = b.components().collect::<PathBuf>();
    if a_trim == b_trim {
        return true;
    }
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        Version::parse(s).expect("version")
    }

    fn matches(spec: &str, name: &str, version: &str, dir: &str) -> bool {
        PackageIdSpec::parse(spec)
            .unwrap_or_else(|e| panic!("{spec}: {e}"))
            .matches(name, &v(version), Path::new(dir))
    }

    #[test]
    fn every_form_cargo_accepts() {
        let dir = "/repo/crates/a";
        for spec in [
            "a",
            "a@0.1.0",
            "a:0.1.0",
            "a@0",
            "a@0.1",
            "path+file:///repo/crates/a#0.1.0",
            "path+file:///repo/crates/a#a@0.1.0",
            "path+file:///repo/crates/a/",
            "file:///repo/crates/a#a",
            "file:///repo/crates/a",
            "file://localhost/repo/crates/a#a:0.1.0",
        ] {
            assert!(matches(spec, "a", "0.1.0", dir), "{spec}");
        }
    }

    #[test]
    fn a_spec_that_names_something_else_does_not_match() {
        let dir = "/repo/crates/a";
        for spec in [
            "b",
            "a@9.9.9",
            "a:0.2",
            "a@1",
            "path+file:///repo/crates/b#a@0.1.0",
            "path+file:///repo/crates/a#9.9.9",
            "registry+https://github.com/rust-lang/crates.io-index#a@0.1.0",
            "https://github.com/rust-lang/crates.io-index#a",
            "git+ssh://git@github.com/x/a.git?branch=dev#a@0.1.0",
        ] {
            assert!(!matches(spec, "a", "0.1.0", dir), "{spec}");
        }
    }

    #[test]
    fn pre_releases_and_percent_escapes() {
        assert!(matches("a@1.0.0-rc.1", "a", "1.0.0-rc.1", "/x"));
        assert!(!matches("a@1.0.0", "a", "1.0.0-rc.1", "/x"));
        assert!(matches(
            "path+file:///my%20dir/a#0.1.0",
            "a",
            "0.1.0",
            "/my dir/a"
        ));
    }

    #[test]
    fn malformed_specs_are_errors() {
        for spec in [
            "",
            "a@",
            "a@x.y",
            "a@1.2.3.4",
            "a b",
            "foo+file:///x",
            "file:///#1.0.0",
        ] {
            assert!(PackageIdSpec::parse(spec).is_err(), "{spec}");
        }
    }
}
