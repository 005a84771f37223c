//! Downloads a pinned crate's source through cargo and finds it under the registry's `src/`.

use crate::crates::CrateSpec;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

pub fn cargo_home() -> PathBuf {
    if let Some(home) = std::env::var_os("CARGO_HOME") {
        return PathBuf::from(home);
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    home.join(".cargo")
}

/// Where cargo unpacks `name-version` from any registry index: `registry/src/<index>/`.
pub fn find_unpacked(cargo_home: &Path, spec: &CrateSpec) -> Option<PathBuf> {
    let dir = format!("{}-{}", spec.name, spec.version);
    let indexes = std::fs::read_dir(cargo_home.join("registry").join("src")).ok()?;
    let mut found: Vec<PathBuf> = indexes
        .filter_map(|e| e.ok())
        .map(|e| e.path().join(&dir))
        .filter(|p| p.join("Cargo.toml").is_file())
        .collect();
    found.sort();
    found.into_iter().next()
}

/// The crate's unpacked source, downloading it when it is not there yet. `scratch` is a
/// directory for the fallback's throwaway project.
pub fn source_dir(cargo_home: &Path, spec: &CrateSpec, scratch: &Path) -> Result<PathBuf> {
    if let Some(dir) = find_unpacked(cargo_home, spec) {
        return Ok(dir);
    }
    // `cargo info NAME@VERSION` downloads and unpacks that one crate to read its manifest, and
    // none of its dependencies: the cheapest download cargo offers. It runs outside any
    // workspace, or it would describe the workspace's own dependency instead.
    let at = format!("{}@{}", spec.name, spec.version);
    let info = Command::new("cargo")
        .args(["info", &at])
        .current_dir(std::env::temp_dir())
        .output()
        .context("could not run `cargo info`")?;
    if let Some(dir) = find_unpacked(cargo_home, spec) {
        return Ok(dir);
    }
    // Fallback, should a cargo version stop unpacking in `info`: a scratch project with the
    // exact dependency and `cargo fetch`, which downloads the crate and its dependencies.
    let project = scratch.join(format!("{}-{}", spec.name, spec.version));
    std::fs::create_dir_all(project.join("src"))
        .with_context(|| format!("could not create `{}`", project.display()))?;
    std::fs::write(
        project.join("Cargo.toml"),
        format!(
            "[package]\nname = \"lintcheck-fetch\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\n\
             [dependencies]\n{} = \"={}\"\n\n[workspace]\n",
            toml_key(&spec.name),
            spec.version
        ),
    )?;
    std::fs::write(project.join("src/lib.rs"), "")?;
    let fetch = Command::new("cargo")
        .args(["fetch", "--manifest-path"])
        .arg(project.join("Cargo.toml"))
        .output()
        .context("could not run `cargo fetch`")?;
    if let Some(dir) = find_unpacked(cargo_home, spec) {
        return Ok(dir);
    }
    let why = last_line(&fetch.stderr)
        .or_else(|| last_line(&info.stderr))
        .unwrap_or_else(|| "cargo printed nothing".to_string());
    bail!("could not download {at}: {why}")
}

fn toml_key(name: &str) -> String {
    if name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        name.to_string()
    } else {
        format!("{name:?}")
    }
}

/// The last line of a command's stderr that says something (cargo ends with its error).
pub fn last_line(bytes: &[u8]) -> Option<String> {
    String::from_utf8_lossy(bytes)
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(str::to_string)
}
