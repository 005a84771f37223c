//! Packages and targets from `cargo metadata --no-deps`.

use super::pkgid::PackageIdSpec;
use super::{absolute, LinkSpec, PackageSpec, Selection, Sources, TargetSpec, Workspace};
use anyhow::{anyhow, bail, Context, Result};
use cargo_metadata::{
    DependencyKind, Metadata, MetadataCommand, Package, PackageId, Target, TargetKind,
};
use idem_lints::model::TargetInfo;
use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long `cargo metadata` may take. It reads manifests only (`--no-deps --offline`), which
/// takes well under a second even for large workspaces; past this it is stuck (a manifest that
/// is a FIFO, a hung file system) and the run stops with an error instead of hanging CI.
const METADATA_TIMEOUT: Duration = Duration::from_secs(60);

pub(super) fn discover(manifest: Option<&Path>, sel: &Selection) -> Result<Workspace> {
    let mut cmd = MetadataCommand::new();
    // --offline: nothing here needs the network, and a CI box without it must still work.
    cmd.no_deps().other_options(vec!["--offline".to_string()]);
    if let Some(m) = manifest {
        // Cargo would block reading a FIFO; say what it is instead.
        let meta =
            std::fs::metadata(m).with_context(|| format!("could not read `{}`", m.display()))?;
        if !meta.is_file() {
            bail!("manifest `{}` is not a regular file", m.display());
        }
        cmd.manifest_path(absolute(m));
    }
    let metadata = run_metadata(cmd.cargo_command(), METADATA_TIMEOUT)?;
    let selected = select(&metadata, manifest, sel)?;
    // Only cargo's implicit choice is worth a word: `-p` names what the user wants.
    let implicit = sel.packages.is_empty() && !sel.workspace;
    let unselected = metadata
        .workspace_packages()
        .into_iter()
        .filter(|m| implicit && !selected.iter().any(|s| s.id == m.id))
        .map(|m| m.name.to_string())
        .collect();
    let root = metadata.workspace_root.clone().into_std_path_buf();
    let mut warnings = Vec::new();
    let extra = outside_members(&selected, &metadata, &root, &mut warnings);
    let mut members = metadata.workspace_packages();
    members.extend(extra.iter());
    let ws_root = root.clone();
    let mut linker = Linker::new(&members, &ws_root);
    let root_manifest = root.join("Cargo.toml");
    Ok(Workspace {
        origin: root.clone(),
        root,
        root_manifest: root_manifest.is_file().then_some(root_manifest),
        target_dir: Some(metadata.target_directory.clone().into_std_path_buf()),
        unselected,
        report_root: None,
        packages: selected
            .into_iter()
            .chain(extra.iter())
            .map(|p| {
                let mut spec = package_spec(p, &ws_root)?;
                spec.links = linker.links(p)?;
                Ok(spec)
            })
            .collect::<Result<_>>()?,
        warnings,
    })
}

/// At most this many path dependencies outside the members are read (each is one more
/// `cargo metadata`); the rest are named in a warning.
const MAX_OUTSIDE_MEMBERS: usize = 64;

/// The packages the selected ones depend on by path (normal and dev dependencies, and theirs
/// in turn) that are no workspace members: a single-package repository whose handlers are in
/// `./handlers`, a directory the workspace `exclude`s. They are compiled into the package,
/// so they are linted as packages of their own, when inside the workspace root (what sources
/// may be read from); one outside it, or whose manifest cargo cannot read, is named in a
/// warning.
fn outside_members(
    selected: &[&Package],
    metadata: &Metadata,
    root: &Path,
    warnings: &mut Vec<String>,
) -> Vec<Package> {
    let members = metadata.workspace_packages();
    let is_member = |dir: &Path| {
        members.iter().any(|m| {
            m.manifest_path
                .parent()
                .is_some_and(|d| d.as_std_path() == dir)
        })
    };
    let mut out: Vec<Package> = Vec::new();
    let mut seen: Vec<std::path::PathBuf> = Vec::new();
    let mut queue: std::collections::VecDeque<Package> =
        selected.iter().map(|p| (*p).clone()).collect();
    while let Some(from) = queue.pop_front() {
        for dep in &from.dependencies {
            let Some(dir) = &dep.path else {
                continue;
            };
            let dir = dir.as_std_path();
            if dep.kind == DependencyKind::Build || is_member(dir) || seen.iter().any(|s| s == dir)
            {
                continue;
            }
            seen.push(dir.to_path_buf());
            let inside = std::fs::canonicalize(dir)
                .is_ok_and(|d| std::fs::canonicalize(root).is_ok_and(|r| d.starts_with(r)));
            let left_out = |why: &str| {
                format!(
                    "path dependency `{}` of `{}` (`{}`) is not a workspace member and {why}; not linted",
                    dep.name,
                    from.name,
                    dir.display()
                )
            };
            if !inside {
                warnings.push(left_out("lies outside the workspace root"));
                continue;
            }
            if out.len() >= MAX_OUTSIDE_MEMBERS {
                warnings.push(left_out(&format!(
                    "more than {MAX_OUTSIDE_MEMBERS} such dependencies are read"
                )));
                continue;
            }
            match package_at(&dir.join("Cargo.toml")) {
                Ok(p) => {
                    queue.push_back(p.clone());
                    out.push(p);
                }
                Err(e) => warnings.push(left_out(&format!("its manifest could not be read ({e})"))),
            }
        }
    }
    out
}

/// The package whose manifest is `manifest`, from its own `cargo metadata --no-deps`.
fn package_at(manifest: &Path) -> Result<Package> {
    let meta = std::fs::metadata(manifest)
        .with_context(|| format!("could not read `{}`", manifest.display()))?;
    if !meta.is_file() {
        bail!("manifest `{}` is not a regular file", manifest.display());
    }
    let mut cmd = MetadataCommand::new();
    cmd.no_deps()
        .other_options(vec!["--offline".to_string()])
        .manifest_path(manifest);
    let metadata = run_metadata(cmd.cargo_command(), METADATA_TIMEOUT)?;
    let wanted = std::fs::canonicalize(manifest)?;
    metadata
        .packages
        .into_iter()
        .find(|p| std::fs::canonicalize(&p.manifest_path).is_ok_and(|m| m == wanted))
        .ok_or_else(|| anyhow!("no package in `{}`", manifest.display()))
}

/// Runs `cargo metadata` and parses its output, killing it past `timeout`.
fn run_metadata(mut cmd: Command, timeout: Duration) -> Result<Metadata> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("could not run `cargo metadata`")?;
    // Both pipes are drained while waiting, so a large output cannot block the child.
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut out = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut out);
            }
            out
        })
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child
            .try_wait()
            .context("could not wait for `cargo metadata`")?
        {
            break status;
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "`cargo metadata` did not finish within {} s (is a manifest a FIFO or on a hung file system?)",
                timeout.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let stdout = stdout.join().unwrap_or_default();
    let stderr = stderr.join().unwrap_or_default();
    if !status.success() {
        bail!(one_line(&String::from_utf8_lossy(&stderr)));
    }
    let json = String::from_utf8_lossy(&stdout);
    let line = json
        .lines()
        .find(|l| l.starts_with('{'))
        .ok_or_else(|| anyhow!("`cargo metadata` printed no metadata"))?;
    MetadataCommand::parse(line).context("could not read the output of `cargo metadata`")
}

/// Cargo's rules: `-p` names packages, `--workspace` takes every member, a package's manifest
/// takes that package, and a virtual manifest takes the default members.
fn select<'m>(
    metadata: &'m Metadata,
    manifest: Option<&Path>,
    sel: &Selection,
) -> Result<Vec<&'m Package>> {
    let members = metadata.workspace_packages();
    if !sel.packages.is_empty() {
        return select_specs(&members, &sel.packages);
    }
    if sel.workspace {
        return Ok(members);
    }
    let manifest = match manifest {
        Some(m) => {
            std::fs::canonicalize(m).with_context(|| format!("could not read `{}`", m.display()))?
        }
        None => {
            // Cargo looked upward from the current directory; the package is the member whose
            // directory contains it.
            let cwd = std::env::current_dir().context("could not read the current directory")?;
            let owner = members
                .iter()
                .filter(|p| p.manifest_path.parent().is_some_and(|d| cwd.starts_with(d)))
                .max_by_key(|p| p.manifest_path.as_str().len());
            match owner {
                Some(p) => p.manifest_path.clone().into_std_path_buf(),
                None => metadata
                    .workspace_root
                    .join("Cargo.toml")
                    .into_std_path_buf(),
            }
        }
    };
    let same = |p: &&Package| {
        std::fs::canonicalize(&p.manifest_path).is_ok_and(|m| m == manifest)
            || p.manifest_path.as_std_path() == manifest
    };
    if let Some(p) = members.iter().copied().find(same) {
        return Ok(vec![p]);
    }
    let defaults = if metadata.workspace_default_members.is_available() {
        metadata.workspace_default_packages()
    } else {
        members
    };
    if defaults.is_empty() {
        bail!(
            "the workspace at `{}` has no members",
            metadata.workspace_root
        );
    }
    Ok(defaults)
}

/// The members `-p` names, each once, in the order first named.
fn select_specs<'m>(members: &[&'m Package], specs: &[String]) -> Result<Vec<&'m Package>> {
    let mut out: Vec<&Package> = Vec::new();
    for text in specs {
        let spec = PackageIdSpec::parse(text)?;
        let dir = |p: &Package| {
            p.manifest_path
                .parent()
                .map(|d| d.as_std_path().to_path_buf())
        };
        let found: Vec<&Package> = members
            .iter()
            .copied()
            .filter(|p| dir(p).is_some_and(|d| spec.matches(&p.name, &p.version, &d)))
            .collect();
        if found.is_empty() {
            let same_name: Vec<String> = members
                .iter()
                .filter(|p| p.name.as_str() == spec.name())
                .map(|p| format!("`{}@{}` ({})", p.name, p.version, p.id.repr))
                .collect();
            if same_name.is_empty() {
                bail!("package `{text}` is not a member of the workspace");
            }
            bail!(
                "package `{text}` did not match any member of the workspace; the member named `{}` is {}",
                spec.name(),
                same_name.join(", ")
            );
        }
        for p in found {
            if !out.iter().any(|q| q.id == p.id) {
                out.push(p);
            }
        }
    }
    Ok(out)
}

fn package_spec(p: &Package, workspace_root: &std::path::Path) -> Result<PackageSpec> {
    let targets = p
        .targets
        .iter()
        .filter(|t| linted(t))
        .map(|t| {
            Ok(TargetSpec {
                info: TargetInfo {
                    name: t.name.clone(),
                    kind: t.kind.iter().map(|k| k.to_string()).collect(),
                    root: t.src_path.clone().into_std_path_buf(),
                },
                json: serde_json::to_value(t)
                    .with_context(|| format!("target `{}` of `{}`", t.name, p.name))?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let mut dependencies: Vec<String> = p
        .dependencies
        .iter()
        .map(|d| d.rename.as_deref().unwrap_or(&d.name).replace('-', "_"))
        .collect();
    dependencies.sort();
    dependencies.dedup();
    Ok(PackageSpec {
        name: p.name.to_string(),
        id: p.id.repr.clone(),
        manifest_path: p.manifest_path.clone().into_std_path_buf(),
        has_manifest: true,
        dependencies,
        targets,
        sources: Sources::ModuleTrees,
        links: Vec::new(),
        workspace_root: Some(workspace_root.to_path_buf()),
    })
}

/// Finds the workspace members a package links ([`Linker::links`]). Built once per run: each
/// member's directory indexed, and each member's library spec made once and shared by every
/// package that links it (a chain of n members links n²/2 libraries; made per link, the
/// specs and their targets' JSON were most of the run's memory, and the lookups cubic).
struct Linker<'a> {
    members: &'a [&'a Package],
    /// A member's index by the directory of its manifest.
    by_dir: HashMap<&'a std::path::Path, usize>,
    /// Per member, its library as a link (`None` inside: it has no library), once made.
    libs: Vec<Option<Option<Arc<PackageSpec>>>>,
    /// The workspace root, which each spec carries.
    root: &'a std::path::Path,
}

impl<'a> Linker<'a> {
    fn new(members: &'a [&'a Package], root: &'a std::path::Path) -> Self {
        let mut by_dir = HashMap::new();
        for (i, m) in members.iter().enumerate() {
            if let Some(dir) = m.manifest_path.parent() {
                // The first member of a directory, as a search in member order finds it.
                by_dir.entry(dir.as_std_path()).or_insert(i);
            }
        }
        Linker {
            members,
            by_dir,
            libs: vec![None; members.len()],
            root,
        }
    }

    /// The libraries of the members `p` depends on by path (normal and dev dependencies,
    /// and theirs in turn), nearest first, each once: `cargo metadata --no-deps` lists only
    /// members, so a path dependency is one of them when its directory is a member's.
    fn links(&mut self, p: &Package) -> Result<Vec<LinkSpec>> {
        let mut out: Vec<LinkSpec> = Vec::new();
        let mut seen: HashSet<&PackageId> = [&p.id].into();
        let mut queue: std::collections::VecDeque<&Package> = [p].into();
        while let Some(from) = queue.pop_front() {
            for dep in &from.dependencies {
                if dep.kind == DependencyKind::Build {
                    continue;
                }
                let Some(dir) = &dep.path else {
                    continue;
                };
                let Some(&i) = self.by_dir.get(dir.as_std_path()) else {
                    continue;
                };
                let member: &'a Package = self.members[i];
                if !seen.insert(&member.id) {
                    continue;
                }
                queue.push_back(member);
                let Some(lib) = member.targets.iter().find(|t| is_lib(t)) else {
                    continue;
                };
                let spec = match &self.libs[i] {
                    Some(made) => made.clone(),
                    None => {
                        let mut spec = package_spec(member, self.root)?;
                        spec.targets
                            .retain(|t| t.info.root == lib.src_path.as_std_path());
                        let made = Some(Arc::new(spec));
                        self.libs[i] = Some(made.clone());
                        made
                    }
                };
                let Some(spec) = spec else {
                    continue;
                };
                let krate = dep.rename.as_deref().unwrap_or(&lib.name).replace('-', "_");
                out.push(LinkSpec { krate, spec });
            }
        }
        Ok(out)
    }
}

/// A library target another crate can call into (not a proc macro: its fns run at build time).
fn is_lib(t: &Target) -> bool {
    t.kind.iter().any(|k| {
        matches!(
            k,
            TargetKind::Lib | TargetKind::RLib | TargetKind::DyLib | TargetKind::StaticLib
        )
    })
}

/// Every target a user writes code in: libraries (any crate type), binaries, examples, tests
/// and benches. Build scripts are left out: they run at build time, not on messages.
fn linted(t: &Target) -> bool {
    !t.kind.iter().any(|k| matches!(k, TargetKind::CustomBuild))
}

/// Cargo's multi-line error (with `Caused by:` sections and source snippets) as one line;
/// a snippet's `--> file:line:col` is kept, in front.
fn one_line(stderr: &str) -> String {
    let mut location = None;
    let mut parts: Vec<&str> = Vec::new();
    for line in stderr.lines().map(str::trim) {
        if let Some(at) = line.strip_prefix("-->") {
            location.get_or_insert(at.trim());
            continue;
        }
        let snippet = line.starts_with('|')
            || line.starts_with('^')
            || line.starts_with(|c: char| c.is_ascii_digit());
        if line.is_empty() || line == "Caused by:" || snippet {
            continue;
        }
        parts.push(line.strip_prefix("error: ").unwrap_or(line));
    }
    let message = if parts.is_empty() {
        "`cargo metadata` failed".to_string()
    } else {
        parts.join(": ")
    };
    match location {
        Some(at) => format!("{at}: {message}"),
        None => message,
    }
}

#[cfg(test)]
mod tests {
    use super::one_line;

    #[test]
    fn cargo_errors_become_one_line() {
        let stderr = "error: unclosed table, expected `]`\n --> bm/Cargo.toml:1:9\n  |\n1 | [package\n  |         ^\n";
        assert_eq!(
            one_line(stderr),
            "bm/Cargo.toml:1:9: unclosed table, expected `]`"
        );
        let stderr = "error: failed to parse manifest at `/x/Cargo.toml`\n\nCaused by:\n  TOML parse error at line 1, column 5\n    |\n  1 | [package\n    |     ^\n  invalid table header\n";
        assert_eq!(
            one_line(stderr),
            "failed to parse manifest at `/x/Cargo.toml`: TOML parse error at line 1, column 5: invalid table header"
        );
    }
}
