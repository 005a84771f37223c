//! The user's configuration: `idem-lint.toml` at the workspace root, or
//! `[workspace.metadata.idem-lint]` in the root `Cargo.toml`, then
//! `[package.metadata.idem-lint]` per package, each with the same keys:
//!
//! ```toml
//! file-timeout-ms = 5000           # workspace level only, at most the default
//! max-file-bytes = 1048576         # workspace level only, at most the default
//! allow-outside-workspace = false  # workspace level only, never `true`
//! [lints]
//! check_then_act = "deny"
//! missing_idempotency_token = { level = "warn", extra-apis = [] }
//! [[overrides]]                    # workspace level only
//! paths = ["tests/", "**/migrations/**"]
//! lints = { all = "allow" }
//! ```
//!
//! Every error names the file, the position and the key, on one line.
//!
//! The checkout under review writes these files, so they may only narrow what the linter
//! reads: a larger `file-timeout-ms` or `max-file-bytes` than the default, or
//! `allow-outside-workspace = true`, is an error that names the command-line flag to use
//! instead (a pull request must not switch off the sandbox that reviews it).

mod toml_value;

use crate::discovery::Workspace;
use crate::levels::{LevelFlag, Levels};
use crate::source::{Position, SourceFile};
use anyhow::{anyhow, bail, Result};
use idem_lints::{Level, Lint, Settings};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use toml::de::{DeTable, DeValue};
use toml::Spanned;

pub const FILE_NAME: &str = "idem-lint.toml";

/// Where a key was written, for error messages: `path:line:col`, key `lints.foo`.
#[derive(Debug, Clone)]
pub struct Origin {
    pub file: PathBuf,
    pub line: usize,
    pub column: usize,
    pub key: String,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}:{}: key `{}`",
            self.file.display(),
            self.line,
            self.column,
            self.key
        )
    }
}

/// One config table (workspace or package level).
#[derive(Debug, Clone, Default)]
pub struct Layer {
    pub levels: Vec<(&'static Lint, Level)>,
    pub settings: Vec<LintSettings>,
    pub file_timeout_ms: Option<u64>,
    pub max_file_bytes: Option<u64>,
    pub allow_outside_workspace: Option<bool>,
    /// Where `file-timeout-ms` was written.
    pub file_timeout_at: Option<Origin>,
    /// `[[overrides]]`: levels for the files some paths match, in the order written.
    pub overrides: Vec<PathOverride>,
    /// `[[models.<kind>]]` rows, in the order written.
    pub models: Vec<ModelRow>,
}

/// One `[[models.<kind>]]` table: a row of the catalog's kind `kind`, checked when read.
#[derive(Debug, Clone)]
pub struct ModelRow {
    pub kind: String,
    pub value: serde_json::Value,
    /// The row's table (`models.store[0]`).
    pub origin: Origin,
}

impl ModelRow {
    fn apply(&self, settings: &mut Settings) -> Result<()> {
        settings
            .add_model(&self.kind, self.value.clone())
            .map_err(|e| anyhow!("{}: {e}", self.origin))
    }
}

/// One `[[overrides]]` table: gitignore-style `paths` relative to the workspace root, and
/// the levels its `lints` table sets for the files they match.
#[derive(Debug, Clone)]
pub struct PathOverride {
    pub paths: Vec<String>,
    pub levels: Vec<(&'static Lint, Level)>,
    pub origin: Origin,
    /// `paths` compiled against the workspace root ([`Config::load`]).
    matcher: Option<ignore::gitignore::Gitignore>,
}

impl PathOverride {
    /// Whether `path` (absolute) is one of the files the override is for.
    pub fn matches(&self, path: &Path) -> bool {
        let Some(m) = &self.matcher else {
            return false;
        };
        // The matcher panics on a path outside its root (a module read from outside the
        // workspace with `--allow-outside-workspace`); no pattern is about those.
        path.starts_with(m.path()) && m.matched_path_or_any_parents(path, false).is_ignore()
    }
}

/// A lint's table of settings (`[lints.x]` without `level`), with where each key was
/// written so an error points at the setting at fault.
#[derive(Debug, Clone)]
pub struct LintSettings {
    pub lint: &'static Lint,
    pub value: serde_json::Value,
    /// The lint's key (`lints.x`).
    pub origin: Origin,
    /// Each setting's key (`lints.x.extra-apis`).
    pub keys: Vec<(String, Origin)>,
}

impl LintSettings {
    /// Applies the settings to `settings`; an error names the first setting that is wrong
    /// on its own, else the lint's table.
    fn apply(&self, settings: &mut Settings) -> Result<()> {
        let Err(e) = settings.set(self.lint.name, self.value.clone()) else {
            return Ok(());
        };
        let culprit = self.keys.iter().find(|(key, _)| {
            let alone = serde_json::json!({ key.as_str(): self.value[key.as_str()] });
            Settings::default().set(self.lint.name, alone).is_err()
        });
        let at = culprit.map_or(&self.origin, |(_, origin)| origin);
        bail!("{at}: {e}")
    }
}

/// A lint the configuration sets below the command line's level ([`Config::lowered`]).
#[derive(Debug, Clone)]
pub struct Lowered {
    pub lint: &'static Lint,
    /// The level it gets.
    pub level: Level,
    /// The level the command line alone gives it.
    pub asked: Level,
    /// The packages where it does.
    pub packages: Vec<String>,
}

/// The whole configuration of a run.
#[derive(Debug, Clone, Default)]
pub struct Config {
    pub workspace: Layer,
    /// One per package of the workspace, in the same order.
    pub packages: Vec<Layer>,
}

/// What a package is linted with.
#[derive(Debug, Clone)]
pub struct PackageConfig {
    pub levels: Levels,
    pub settings: Settings,
    /// The workspace's `[[overrides]]`.
    pub overrides: Vec<PathOverride>,
}

impl PackageConfig {
    /// The levels of the file `path`: [`PackageConfig::levels`] with every override whose
    /// paths match it applied in order (after the command line: an override says which
    /// code a lint can judge, not how strict this run is; `-D warnings` still applies).
    /// `None` when no override matches.
    pub fn levels_at(&self, path: &Path) -> Option<Levels> {
        let mut matching = self.overrides.iter().filter(|o| o.matches(path)).peekable();
        matching.peek()?;
        let mut levels = self.levels.clone();
        for o in matching {
            for (lint, level) in &o.levels {
                levels.set(lint, *level);
            }
        }
        Some(levels)
    }

    /// Whether `lint` runs: at a level other than `allow` in the package or in an
    /// override.
    pub fn runs(&self, lint: &'static Lint) -> bool {
        self.levels.get(lint) != Level::Allow
            || self.overrides.iter().any(|o| {
                o.levels
                    .iter()
                    .any(|(l, v)| *l == lint && *v != Level::Allow)
            })
    }
}

impl Config {
    /// Reads every config that applies to `ws`.
    pub fn load(ws: &Workspace) -> Result<Config> {
        let dedicated = ws.root.join(FILE_NAME);
        let has_dedicated = dedicated.is_file();
        let mut workspace = if has_dedicated {
            read_layer(&dedicated, &[], "", &ws.root)?.unwrap_or_default()
        } else {
            Layer::default()
        };
        // The root manifest is often also a package's manifest: read and parse it once.
        let root_src = ws
            .root_manifest
            .as_deref()
            .map(|m| read_toml(m, &ws.root))
            .transpose()?;
        let root_doc = root_src.as_ref().map(parse_toml).transpose()?;
        let root = root_src.as_ref().zip(root_doc.as_ref());
        if let Some((src, doc)) = root {
            let path = ["workspace", "metadata", "idem-lint"];
            if let Some(layer) = layer_at(src, doc, &path, "workspace.metadata.idem-lint")? {
                if has_dedicated {
                    let at = key_position(doc, &path).unwrap_or(0);
                    bail!(
                        "{}: `{}` also configures idem-lint; keep one",
                        origin(src, at, &path.join(".")),
                        dedicated.display(),
                    );
                }
                workspace = layer;
            }
        }
        for o in &mut workspace.overrides {
            let mut builder = ignore::gitignore::GitignoreBuilder::new(&ws.root);
            for pattern in &o.paths {
                builder
                    .add_line(None, pattern)
                    .map_err(|e| anyhow!("{}: invalid path pattern `{pattern}`: {e}", o.origin))?;
            }
            o.matcher = Some(
                builder
                    .build()
                    .map_err(|e| anyhow!("{}: invalid path patterns: {e}", o.origin))?,
            );
        }
        let mut packages = Vec::with_capacity(ws.packages.len());
        for p in &ws.packages {
            let path = ["package", "metadata", "idem-lint"];
            let prefix = "package.metadata.idem-lint";
            let layer = match root {
                _ if !p.has_manifest => None,
                Some((src, doc)) if src.path == p.manifest_path => {
                    layer_at(src, doc, &path, prefix)?
                }
                _ => read_layer(&p.manifest_path, &path, prefix, &ws.root)?,
            };
            let layer = layer.unwrap_or_default();
            if let Some(at) = &layer.file_timeout_at {
                bail!("{at}: set the time budget at the workspace level");
            }
            if let Some(o) = layer.overrides.first() {
                bail!("{}: set `overrides` at the workspace level", o.origin);
            }
            let read_keys = [
                ("max-file-bytes", layer.max_file_bytes.is_some()),
                (
                    "allow-outside-workspace",
                    layer.allow_outside_workspace.is_some(),
                ),
            ];
            if let Some((key, _)) = read_keys.iter().find(|(_, set)| *set) {
                bail!(
                    "{}: key `package.metadata.idem-lint.{key}`: set it at the workspace level",
                    p.manifest_path.display()
                );
            }
            packages.push(layer);
        }
        Ok(Config {
            workspace,
            packages,
        })
    }

    /// No configuration at all, for `--isolated`: the defaults and the command line decide,
    /// whatever the checkout's files say.
    pub fn isolated(ws: &Workspace) -> Config {
        Config {
            workspace: Layer::default(),
            packages: vec![Layer::default(); ws.packages.len()],
        }
    }

    /// The lints this configuration sets below the level the command line gives them alone
    /// (their defaults with `flags`), for each with the packages where it does, the level it
    /// gets and the one the command line asked: `-D warnings` does not reach a lint the
    /// checkout allows.
    pub fn lowered(&self, ws: &Workspace, flags: &[LevelFlag]) -> Result<Vec<Lowered>> {
        let mut asked = Levels::default();
        asked.apply_flags(flags)?;
        let mut out: Vec<Lowered> = Vec::new();
        for (i, p) in ws.packages.iter().enumerate() {
            let got = self.package(i, flags)?.levels;
            for &lint in idem_lints::lints::ALL {
                let (level, wanted) = (got.get(lint), asked.get(lint));
                if level >= wanted {
                    continue;
                }
                match out
                    .iter_mut()
                    .find(|l| l.lint.name == lint.name && l.level == level)
                {
                    Some(l) => l.packages.push(p.name.clone()),
                    None => out.push(Lowered {
                        lint,
                        level,
                        asked: wanted,
                        packages: vec![p.name.clone()],
                    }),
                }
            }
        }
        Ok(out)
    }

    /// Levels of the workspace layer with the command line applied (for `--list`).
    pub fn workspace_levels(&self, flags: &[LevelFlag]) -> Result<Levels> {
        let mut levels = Levels::default();
        for (lint, level) in &self.workspace.levels {
            levels.set(lint, *level);
        }
        levels.apply_flags(flags)?;
        Ok(levels)
    }

    /// Levels and settings of package `index`: defaults < workspace < package < flags.
    pub fn package(&self, index: usize, flags: &[LevelFlag]) -> Result<PackageConfig> {
        let mut levels = Levels::default();
        let mut settings = Settings::default();
        let layers = std::iter::once(&self.workspace).chain(self.packages.get(index));
        for layer in layers {
            for (lint, level) in &layer.levels {
                levels.set(lint, *level);
            }
            for lint_settings in &layer.settings {
                lint_settings.apply(&mut settings)?;
            }
            for row in &layer.models {
                row.apply(&mut settings)?;
            }
        }
        levels.apply_flags(flags)?;
        Ok(PackageConfig {
            levels,
            settings,
            overrides: self.workspace.overrides.clone(),
        })
    }
}

/// Reads the table at `path` inside the TOML file `file` (the whole file when `path` is
/// empty); `None` when the file has no such table.
fn read_layer(file: &Path, path: &[&str], prefix: &str, root: &Path) -> Result<Option<Layer>> {
    let src = read_toml(file, root)?;
    let doc = parse_toml(&src)?;
    layer_at(&src, &doc, path, prefix)
}

/// Reads a config file of the checkout as sources are read: a regular file (a FIFO or
/// `/dev/zero` must not hang the run), and, when its path lies inside the workspace `root`,
/// only if it resolves inside it too (a committed `idem-lint.toml` symlink to
/// `~/.aws/credentials` is refused, not quoted in a TOML error).
fn read_toml(file: &Path, root: &Path) -> Result<SourceFile> {
    let canonical_root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    let policy = if file.starts_with(root) || file.starts_with(&canonical_root) {
        crate::source::ReadPolicy::inside(root)
    } else {
        crate::source::ReadPolicy::anywhere()
    };
    let text = crate::source::read_source(file, &policy)
        .map_err(|e| anyhow!("could not read `{}`: {e}", file.display()))?;
    Ok(SourceFile::new(file.to_path_buf(), Arc::from(text)))
}

fn parse_toml(src: &SourceFile) -> Result<Spanned<DeTable<'_>>> {
    DeTable::parse(&src.text).map_err(|e| {
        let at = e.span().map(|s| s.start).unwrap_or(0);
        let Position { line, column } = src.position(at);
        anyhow!(
            "{}:{line}:{column}: invalid TOML: {}",
            src.path.display(),
            e.message().trim()
        )
    })
}

/// The table at `path` inside `doc`, the parsed text of `src`.
fn layer_at(
    src: &SourceFile,
    doc: &Spanned<DeTable<'_>>,
    path: &[&str],
    prefix: &str,
) -> Result<Option<Layer>> {
    let mut table: &DeTable = doc.get_ref();
    for key in path {
        match table.get(*key).map(Spanned::get_ref) {
            Some(DeValue::Table(t)) => table = t,
            Some(_) => {
                let value = table.get(*key).map(|v| v.span().start).unwrap_or(0);
                let origin = origin(src, value, &path.join("."));
                bail!("{origin}: expected a table");
            }
            None => return Ok(None),
        }
    }
    let cx = Cx { src, prefix };
    cx.layer(table).map(Some)
}

struct Cx<'a> {
    src: &'a SourceFile,
    prefix: &'a str,
}

impl Cx<'_> {
    fn origin(&self, at: usize, key: &str) -> Origin {
        let key = if self.prefix.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.prefix)
        };
        origin(self.src, at, &key)
    }

    fn layer(&self, table: &DeTable) -> Result<Layer> {
        let mut layer = Layer::default();
        for (key, value) in table.iter() {
            let at = key.span().start;
            match key.get_ref().as_ref() {
                "lints" => match value.get_ref() {
                    DeValue::Table(lints) => self.lints(lints, &mut layer)?,
                    _ => bail!("{}: expected a table", self.origin(at, "lints")),
                },
                "overrides" => match value.get_ref() {
                    DeValue::Array(tables) => {
                        for (i, t) in tables.iter().enumerate() {
                            let key = format!("overrides[{i}]");
                            let DeValue::Table(t) = t.get_ref() else {
                                bail!("{}: expected a table", self.origin(t.span().start, &key));
                            };
                            let o = self.path_override(t, &key, at)?;
                            layer.overrides.push(o);
                        }
                    }
                    _ => bail!(
                        "{}: expected an array of tables (`[[overrides]]`)",
                        self.origin(at, "overrides")
                    ),
                },
                "models" => match value.get_ref() {
                    DeValue::Table(kinds) => self.models(kinds, &mut layer)?,
                    _ => bail!(
                        "{}: expected a table of arrays of tables (`[[models.store]]`, `[[models.entry]]`, ...)",
                        self.origin(at, "models")
                    ),
                },
                "file-timeout-ms" => match value.get_ref().as_integer() {
                    Some(i) => {
                        // 0 would skip every file, a different set on each run.
                        let ms = u64::from_str_radix(i.as_str(), i.radix())
                            .ok()
                            .filter(|&ms| ms > 0)
                            .ok_or_else(|| {
                                anyhow!(
                                    "{}: expected a positive number of milliseconds",
                                    self.origin(at, "file-timeout-ms")
                                )
                            })?;
                        if ms > crate::parse::DEFAULT_FILE_TIMEOUT.as_millis() as u64 {
                            self.widens(at, "file-timeout-ms", &format!("--file-timeout-ms {ms}"))?;
                        }
                        layer.file_timeout_ms = Some(ms);
                        layer.file_timeout_at = Some(self.origin(at, "file-timeout-ms"));
                    }
                    None => bail!(
                        "{}: expected a number of milliseconds",
                        self.origin(at, "file-timeout-ms")
                    ),
                },
                "max-file-bytes" => {
                    let bytes = value
                        .get_ref()
                        .as_integer()
                        .and_then(|i| u64::from_str_radix(i.as_str(), i.radix()).ok())
                        .filter(|&b| b > 0)
                        .ok_or_else(|| {
                            anyhow!(
                                "{}: expected a positive number of bytes",
                                self.origin(at, "max-file-bytes")
                            )
                        })?;
                    if bytes > crate::source::DEFAULT_MAX_FILE_BYTES {
                        self.widens(at, "max-file-bytes", &format!("--max-file-bytes {bytes}"))?;
                    }
                    layer.max_file_bytes = Some(bytes);
                }
                "allow-outside-workspace" => match value.get_ref().as_bool() {
                    Some(true) => {
                        self.widens(at, "allow-outside-workspace", "--allow-outside-workspace")?
                    }
                    Some(false) => layer.allow_outside_workspace = Some(false),
                    None => bail!(
                        "{}: expected `true` or `false`",
                        self.origin(at, "allow-outside-workspace")
                    ),
                },
                other => bail!(
                    "{}: unknown key (expected `lints`, `models`, `overrides`, `file-timeout-ms`, `max-file-bytes` or `allow-outside-workspace`)",
                    self.origin(at, other)
                ),
            }
        }
        Ok(layer)
    }

    /// One `[[overrides]]` table: `paths = [".."]` and `lints = { name = "level" }` (lint
    /// or group names, levels only).
    fn path_override(&self, t: &DeTable, rel: &str, table_at: usize) -> Result<PathOverride> {
        let origin = self.origin(table_at, rel);
        let mut paths = None;
        let mut levels = None;
        for (key, value) in t.iter() {
            let name = key.get_ref().as_ref();
            let full = format!("{rel}.{name}");
            let at = key.span().start;
            match name {
                "paths" => {
                    let list = match value.get_ref() {
                        DeValue::Array(a) => a
                            .iter()
                            .map(|v| v.get_ref().as_str().map(str::to_string))
                            .collect::<Option<Vec<String>>>(),
                        _ => None,
                    };
                    let list = list.filter(|l| !l.is_empty()).ok_or_else(|| {
                        anyhow!(
                            "{}: expected a non-empty list of path patterns",
                            self.origin(at, &full)
                        )
                    })?;
                    paths = Some(list);
                }
                "lints" => {
                    let DeValue::Table(lints) = value.get_ref() else {
                        bail!("{}: expected a table", self.origin(at, &full));
                    };
                    let mut set = Vec::new();
                    for (k, v) in lints.iter() {
                        let lint_name = k.get_ref().as_ref();
                        let key = format!("{full}.{lint_name}");
                        let at = k.span().start;
                        let Some(s) = v.get_ref().as_str() else {
                            bail!(
                                "{}: expected a level (\"allow\", \"warn\", \"deny\")",
                                self.origin(at, &key)
                            );
                        };
                        let level = self.level(s, at, &key)?;
                        let lints = match crate::levels::group(lint_name) {
                            Some(group) => group,
                            None => vec![idem_lints::lints::find(lint_name).ok_or_else(|| {
                                anyhow!(
                                    "{}: unknown lint `{lint_name}` (see `cargo idem-lint --list`)",
                                    self.origin(at, &key)
                                )
                            })?],
                        };
                        set.extend(lints.into_iter().map(|l| (l, level)));
                    }
                    levels = Some(set);
                }
                other => bail!(
                    "{}: unknown key (expected `paths` or `lints`)",
                    self.origin(at, &format!("{rel}.{other}"))
                ),
            }
        }
        let (Some(paths), Some(levels)) = (paths, levels) else {
            bail!("{origin}: an override needs `paths` and `lints`");
        };
        Ok(PathOverride {
            paths,
            levels,
            origin,
            matcher: None,
        })
    }

    /// The error for a setting that would widen what the linter reads: only the command line
    /// (`flag`) may do that, never the checkout being linted.
    fn widens(&self, at: usize, key: &str, flag: &str) -> Result<()> {
        bail!(
            "{}: a checkout cannot widen what the linter reads (the pull request under review could set it); pass `{flag}` on the command line instead",
            self.origin(at, key)
        )
    }

    /// `[[models.<kind>]]`: each row is checked here, so a wrong one is an error of the
    /// configuration whatever the package.
    fn models(&self, kinds: &DeTable, layer: &mut Layer) -> Result<()> {
        let allowed = idem_lints::settings::models::KINDS
            .iter()
            .map(|k| format!("`{k}`"))
            .collect::<Vec<_>>()
            .join(", ");
        for (key, value) in kinds.iter() {
            let kind = key.get_ref().as_ref();
            let full = format!("models.{kind}");
            let at = key.span().start;
            if !idem_lints::settings::models::KINDS.contains(&kind) {
                bail!(
                    "{}: unknown kind of model `{kind}` (expected one of {allowed})",
                    self.origin(at, &full)
                );
            }
            let DeValue::Array(rows) = value.get_ref() else {
                bail!(
                    "{}: expected an array of tables (`[[{full}]]`)",
                    self.origin(at, &full)
                );
            };
            for (i, row) in rows.iter().enumerate() {
                let key = format!("{full}[{i}]");
                let DeValue::Table(_) = row.get_ref() else {
                    bail!("{}: expected a table", self.origin(row.span().start, &key));
                };
                let row = ModelRow {
                    kind: kind.to_string(),
                    value: toml_value::to_json(row.get_ref()),
                    origin: self.origin(row.span().start, &key),
                };
                row.apply(&mut Settings::default())?;
                layer.models.push(row);
            }
        }
        Ok(())
    }

    fn lints(&self, lints: &DeTable, layer: &mut Layer) -> Result<()> {
        // Groups go first, whatever the order written: a lint named beside its group wins.
        let mut groups = Vec::new();
        for (key, value) in lints.iter() {
            let name = key.get_ref().as_ref();
            let full = format!("lints.{name}");
            let at = key.span().start;
            // A group (`nursery = "warn"`) sets each of its lints.
            if let Some(lints) = crate::levels::group(name) {
                let Some(s) = value.get_ref().as_str() else {
                    bail!(
                        "{}: expected a level (\"allow\", \"warn\", \"deny\") for the group `{name}`",
                        self.origin(at, &full)
                    );
                };
                let level = self.level(s, at, &full)?;
                groups.extend(lints.into_iter().map(|l| (l, level)));
                continue;
            }
            let lint = idem_lints::lints::find(name).ok_or_else(|| {
                anyhow!(
                    "{}: unknown lint `{name}` (see `cargo idem-lint --list`)",
                    self.origin(at, &full)
                )
            })?;
            match value.get_ref() {
                DeValue::String(s) => layer.levels.push((lint, self.level(s, at, &full)?)),
                DeValue::Table(t) => {
                    let mut rest = serde_json::Map::new();
                    let mut keys = Vec::new();
                    for (k, v) in t.iter() {
                        let k_name = k.get_ref().as_ref();
                        if k_name == "level" {
                            let s = v.get_ref().as_str().ok_or_else(|| {
                                anyhow!(
                                    "{}: expected a string",
                                    self.origin(k.span().start, &format!("{full}.level"))
                                )
                            })?;
                            let level = self.level(s, k.span().start, &format!("{full}.level"))?;
                            layer.levels.push((lint, level));
                        } else {
                            rest.insert(k_name.to_string(), toml_value::to_json(v.get_ref()));
                            let key = format!("{full}.{k_name}");
                            keys.push((k_name.to_string(), self.origin(k.span().start, &key)));
                        }
                    }
                    layer.settings.push(LintSettings {
                        lint,
                        value: serde_json::Value::Object(rest),
                        origin: self.origin(at, &full),
                        keys,
                    });
                }
                _ => bail!(
                    "{}: expected a level (\"allow\", \"warn\", \"deny\") or a table",
                    self.origin(at, &full)
                ),
            }
        }
        layer.levels.splice(0..0, groups);
        Ok(())
    }

    fn level(&self, s: &str, at: usize, key: &str) -> Result<Level> {
        // rustc's `forbid` also locks the level against later flags; nothing here can
        // promise that (`-A` on the command line wins), so it is refused, not read as deny.
        if s == "forbid" {
            bail!(
                "{}: level `forbid` is not supported (use \"deny\"; the command line can still override it)",
                self.origin(at, key)
            );
        }
        Level::parse(s).ok_or_else(|| {
            anyhow!(
                "{}: invalid level `{s}` (expected \"allow\", \"warn\" or \"deny\")",
                self.origin(at, key)
            )
        })
    }
}

/// Byte offset of the last key of `path` (a table) in `doc`, as written.
fn key_position(doc: &Spanned<DeTable<'_>>, path: &[&str]) -> Option<usize> {
    let mut table: &DeTable = doc.get_ref();
    let mut at = None;
    for key in path {
        let (k, v) = table.iter().find(|(k, _)| k.get_ref().as_ref() == *key)?;
        at = Some(k.span().start);
        if let DeValue::Table(t) = v.get_ref() {
            table = t;
        }
    }
    at
}

fn origin(src: &SourceFile, at: usize, key: &str) -> Origin {
    let Position { line, column } = src.position(at);
    Origin {
        file: src.path.clone(),
        line,
        column,
        key: key.to_string(),
    }
}
