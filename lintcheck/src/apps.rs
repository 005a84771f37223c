//! The whole-application lintcheck: `lintcheck/apps.toml` pins real application workspaces by
//! git commit; each is extracted from a local bare mirror of its repository and linted the way
//! its users would lint it (`--workspace`, every lint on, from outside the checkout).
//!
//! ```toml
//! [[app]]
//! name = "lemmy"                    # the verdict file is verdicts-apps/lemmy.toml
//! repo = "LemmyNet/lemmy"           # GitHub owner/name
//! commit = "439734dd638a2c06a2f907beab7dcf4646e88f86"
//! workspace = "rust"                # optional: the workspace's directory in the repository
//! why = "ActivityPub server: federation inbox, e-mail, diesel store"
//! ```

use crate::crates::CrateSpec;
use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::collections::HashSet;
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppSpec {
    pub name: String,
    /// `owner/name` of the GitHub repository.
    pub repo: String,
    /// The full commit the verdicts were reviewed on: a branch would move under them.
    pub commit: String,
    /// The workspace's directory inside the repository, when it is not the root.
    #[serde(default)]
    pub workspace: Option<String>,
    /// What store, queue or payment code the application holds.
    pub why: String,
}

impl AppSpec {
    /// The spec the shared report and verdict matching take: the commit is the "version"
    /// verdicts are pinned to.
    pub fn as_crate_spec(&self) -> CrateSpec {
        CrateSpec {
            name: self.name.clone(),
            version: self.commit.clone(),
            why: self.why.clone(),
            expect: None,
        }
    }

    /// The mirror's directory name: `owner+name`, as the search tool's `fetch` lays it out.
    pub fn mirror_name(&self) -> String {
        self.repo.replacen('/', "+", 1)
    }

    /// The bare git directory of the mirror under `mirrors`: `owner+name/repo` (where `fetch`
    /// puts it) or, for a plain `git clone --bare`, `owner+name.git` or `owner+name` itself.
    pub fn find_mirror(&self, mirrors: &Path) -> Option<PathBuf> {
        let base = self.mirror_name();
        [
            mirrors.join(&base).join("repo"),
            mirrors.join(format!("{base}.git")),
            mirrors.join(&base),
        ]
        .into_iter()
        .find(|p| p.join("HEAD").is_file() && p.join("objects").is_dir())
    }

    /// Where the workspace's `Cargo.toml` lies once the repository is extracted at `checkout`.
    pub fn workspace_dir(&self, checkout: &Path) -> PathBuf {
        match &self.workspace {
            Some(sub) => checkout.join(sub),
            None => checkout.to_path_buf(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AppList {
    app: Vec<AppSpec>,
}

pub fn load(path: &Path) -> Result<Vec<AppSpec>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("could not read `{}`", path.display()))?;
    parse(&text).with_context(|| format!("in `{}`", path.display()))
}

pub fn parse(text: &str) -> Result<Vec<AppSpec>> {
    let list: AppList = toml::from_str(text)?;
    let mut seen = HashSet::new();
    for app in &list.app {
        let name_ok = !app.name.is_empty()
            && app
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            && !app.name.starts_with('.');
        if !name_ok {
            // The name is a file name (verdict file, checkout directory).
            bail!("app name `{}` is not a plain file name", app.name);
        }
        if !seen.insert(app.name.as_str()) {
            bail!("app `{}` is listed twice", app.name);
        }
        let repo_ok = app.repo.split('/').count() == 2
            && app.repo.split('/').all(|part| {
                !part.is_empty()
                    && !part.starts_with('.')
                    && part
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            });
        if !repo_ok {
            bail!(
                "app `{}`: repo `{}` is not `owner/name`",
                app.name,
                app.repo
            );
        }
        if app.commit.len() != 40 || !app.commit.chars().all(|c| c.is_ascii_hexdigit()) {
            bail!(
                "app `{}`: commit `{}` is not a full 40-digit commit id",
                app.name,
                app.commit
            );
        }
        if let Some(sub) = &app.workspace {
            let plain = !sub.is_empty()
                && Path::new(sub)
                    .components()
                    .all(|c| matches!(c, Component::Normal(_)));
            if !plain {
                bail!(
                    "app `{}`: workspace `{sub}` is not a relative path inside the repository",
                    app.name
                );
            }
        }
    }
    Ok(list.app)
}

/// The mirror is missing: say where it was looked for and how to get it.
pub fn missing_mirror(app: &AppSpec, mirrors: &Path) -> anyhow::Error {
    anyhow::anyhow!(
        "no git mirror of {repo} under `{dir}` (looked for `{base}/repo`, `{base}.git`, `{base}`): \
         get it with the search tool's `fetch github:{repo}` (it lands in \
         `/work/.mirror/{base}/repo`), or `git clone --bare <url of {repo}> {dir}/{base}.git`, \
         then run again (`--mirrors DIR` if it is elsewhere)",
        repo = app.repo,
        dir = mirrors.display(),
        base = app.mirror_name(),
    )
}

/// The paths of the commit's files whose content the mirror lacks (snapshots leave out their
/// largest files): `git archive` of the whole tree would fail on the first of them. Everything
/// else is extracted, since the linter reads more than `.rs` files (`include_str!` of SQL).
fn missing_blobs(git_dir: &Path, commit: &str) -> Result<Vec<String>> {
    let tree = Command::new("git")
        .arg("--git-dir")
        .arg(git_dir)
        .args(["ls-tree", "-r", "-z", "--full-tree", commit])
        .output()
        .context("could not run `git ls-tree`")?;
    if !tree.status.success() {
        let why = crate::fetch::error_line(&tree.stderr)
            .unwrap_or_else(|| format!("exited with {}", tree.status));
        bail!("`git ls-tree {commit}` failed: {why}");
    }
    // `<mode> blob <id>\t<path>` records; submodules (`commit`) are not archived anyway.
    let blobs: Vec<(String, String)> = String::from_utf8_lossy(&tree.stdout)
        .split('\0')
        .filter_map(|rec| {
            let (meta, path) = rec.split_once('\t')?;
            let mut cols = meta.split(' ');
            let (_, kind, id) = (cols.next()?, cols.next()?, cols.next()?);
            (kind == "blob").then(|| (id.to_string(), path.to_string()))
        })
        .collect();
    let mut check = Command::new("git")
        .arg("--git-dir")
        .arg(git_dir)
        .args(["cat-file", "--batch-check=%(objectname)"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("could not run `git cat-file`")?;
    let mut ids = String::new();
    for (id, _) in &blobs {
        ids.push_str(id);
        ids.push('\n');
    }
    let mut stdin = check.stdin.take().context("no stdin for `git cat-file`")?;
    // Written from a thread: the answers fill the stdout pipe while the ids are still going in.
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        stdin.write_all(ids.as_bytes())
    });
    let out = check.wait_with_output().context("`git cat-file` failed")?;
    writer
        .join()
        .map_err(|_| anyhow::anyhow!("the writer to `git cat-file` panicked"))?
        .context("could not write to `git cat-file`")?;
    Ok(missing_of(&blobs, &String::from_utf8_lossy(&out.stdout)))
}

/// The paths whose id `git cat-file --batch-check` answered with `<id> missing`.
fn missing_of(blobs: &[(String, String)], answers: &str) -> Vec<String> {
    let missing: HashSet<&str> = answers
        .lines()
        .filter_map(|l| l.strip_suffix(" missing"))
        .collect();
    blobs
        .iter()
        .filter(|(id, _)| missing.contains(id.as_str()))
        .map(|(_, path)| path.clone())
        .collect()
}

/// The file in a checkout that records which commit it holds, so a re-run skips extraction.
const STAMP: &str = ".lintcheck-commit";

/// Extracts the pinned commit's Rust sources and manifests from the bare `git_dir` into
/// `dest` (replacing an extraction of another commit). Returns `dest`.
pub fn extract(git_dir: &Path, app: &AppSpec, dest: &Path) -> Result<PathBuf> {
    if std::fs::read_to_string(dest.join(STAMP)).ok().as_deref() == Some(app.commit.as_str()) {
        return Ok(dest.to_path_buf());
    }
    let has_commit = Command::new("git")
        .arg("--git-dir")
        .arg(git_dir)
        .args(["cat-file", "-e"])
        .arg(format!("{}^{{commit}}", app.commit))
        .stderr(Stdio::null())
        .status()
        .context("could not run `git`")?;
    if !has_commit.success() {
        bail!(
            "the mirror `{}` has no commit {} of {}: fetch a newer snapshot, or pin the commit \
             it has (`git --git-dir {} rev-parse HEAD`)",
            git_dir.display(),
            app.commit,
            app.repo,
            git_dir.display()
        );
    }
    if dest.exists() {
        std::fs::remove_dir_all(dest)
            .with_context(|| format!("could not remove `{}`", dest.display()))?;
    }
    std::fs::create_dir_all(dest)
        .with_context(|| format!("could not create `{}`", dest.display()))?;
    let missing = missing_blobs(git_dir, &app.commit)?;
    let tar_path = PathBuf::from(format!("{}.tar", dest.display()));
    let archive = Command::new("git")
        .arg("--git-dir")
        .arg(git_dir)
        .args(["archive", "--format=tar", "-o"])
        .arg(&tar_path)
        .arg(&app.commit)
        .arg("--")
        .arg(".")
        .args(
            missing
                .iter()
                .map(|path| format!(":(exclude,literal){path}")),
        )
        .output()
        .context("could not run `git archive`")?;
    if !archive.status.success() {
        let why = crate::fetch::error_line(&archive.stderr)
            .unwrap_or_else(|| format!("exited with {}", archive.status));
        let _ = std::fs::remove_file(&tar_path);
        bail!("`git archive {}` failed: {why}", app.commit);
    }
    let untar = Command::new("tar")
        .arg("-xf")
        .arg(&tar_path)
        .arg("-C")
        .arg(dest)
        .output()
        .context("could not run `tar`")?;
    let _ = std::fs::remove_file(&tar_path);
    if !untar.status.success() {
        let why = crate::fetch::error_line(&untar.stderr)
            .unwrap_or_else(|| format!("exited with {}", untar.status));
        bail!("could not unpack the archive of {}: {why}", app.repo);
    }
    if !missing.is_empty() {
        eprint!("({} files the mirror lacks left out) ", missing.len());
    }
    std::fs::write(dest.join(STAMP), &app.commit)?;
    Ok(dest.to_path_buf())
}

/// The number of workspace members `cargo metadata --no-deps --offline` names: the check that
/// the extracted workspace loads without the network, and the size the report gives.
pub fn members(manifest: &Path) -> Result<usize> {
    let out = Command::new("cargo")
        .args([
            "metadata",
            "--no-deps",
            "--offline",
            "--format-version",
            "1",
            "--manifest-path",
        ])
        .arg(manifest)
        .output()
        .context("could not run `cargo metadata`")?;
    if !out.status.success() {
        let why = crate::fetch::error_line(&out.stderr)
            .unwrap_or_else(|| format!("exited with {}", out.status));
        bail!("`cargo metadata --no-deps --offline` fails on the checkout: {why}");
    }
    count_members(&String::from_utf8_lossy(&out.stdout))
}

/// `workspace_members` of `cargo metadata` JSON.
pub fn count_members(metadata: &str) -> Result<usize> {
    let v: serde_json::Value =
        serde_json::from_str(metadata).context("`cargo metadata` printed no JSON")?;
    v.get("workspace_members")
        .and_then(|m| m.as_array())
        .map(Vec::len)
        .context("`cargo metadata` JSON has no `workspace_members`")
}

/// Lines of Rust under `dir` (every `.rs` file, `target/` and hidden directories left out).
pub fn rust_lines(dir: &Path) -> Result<u64> {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries =
            std::fs::read_dir(&d).with_context(|| format!("could not read `{}`", d.display()))?;
        for entry in entries {
            let entry = entry?;
            let path = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let kind = entry.file_type()?;
            if kind.is_dir() {
                if name != "target" && !name.starts_with('.') {
                    stack.push(path);
                }
            } else if kind.is_file() && name.ends_with(".rs") {
                let bytes = std::fs::read(&path)
                    .with_context(|| format!("could not read `{}`", path.display()))?;
                total += bytes.iter().filter(|&&b| b == b'\n').count() as u64;
                if bytes.last().is_some_and(|&b| b != b'\n') {
                    total += 1;
                }
            }
        }
    }
    Ok(total)
}

/// What the report says of each application besides its findings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AppStats {
    pub members: usize,
    pub lines: u64,
}

/// The table of applications for the report: repository, commit, workspace, size, time.
pub fn table(rows: &[(AppSpec, Option<AppStats>, Option<std::time::Duration>)]) -> String {
    let mut out = String::from(
        "## Applications\n\n| app | repository | commit | workspace | members | lines of Rust | lint time (ms) |\n\
         | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for (app, stats, time) in rows {
        let (members, lines) = match stats {
            Some(s) => (s.members.to_string(), s.lines.to_string()),
            None => ("-".into(), "-".into()),
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {members} | {lines} | {} |\n",
            app.name,
            app.repo,
            &app.commit[..12],
            app.workspace.as_deref().unwrap_or("."),
            time.map_or_else(|| "-".to_string(), |t| t.as_millis().to_string()),
        ));
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONE: &str = "[[app]]\nname = \"lemmy\"\nrepo = \"LemmyNet/lemmy\"\n\
                       commit = \"439734dd638a2c06a2f907beab7dcf4646e88f86\"\nwhy = \"w\"\n";

    #[test]
    fn reads_the_list_with_and_without_a_workspace_directory() {
        let text = format!(
            "{ONE}[[app]]\nname = \"svix-server\"\nrepo = \"svix/svix-webhooks\"\n\
             commit = \"4fc0cfb8b426c87ef7e2b937e7d896a71d456a47\"\nworkspace = \"server\"\nwhy = \"w\"\n"
        );
        let apps = parse(&text).unwrap();
        assert_eq!(apps.len(), 2);
        assert_eq!(apps[0].mirror_name(), "LemmyNet+lemmy");
        assert_eq!(apps[0].workspace_dir(Path::new("/c")), Path::new("/c"));
        assert_eq!(
            apps[1].workspace_dir(Path::new("/c")),
            Path::new("/c/server")
        );
        let spec = apps[1].as_crate_spec();
        assert_eq!(spec.version, "4fc0cfb8b426c87ef7e2b937e7d896a71d456a47");
        assert!(!spec.is_control());
    }

    #[test]
    fn rejects_short_commits_bad_repos_escaping_workspaces_and_duplicates() {
        let err = |text: String| parse(&text).unwrap_err().to_string();
        assert!(
            err(ONE.replace("439734dd638a2c06a2f907beab7dcf4646e88f86", "439734dd"))
                .contains("not a full 40-digit commit")
        );
        assert!(
            err(ONE.replace("439734dd638a2c06a2f907beab7dcf4646e88f86", "main"))
                .contains("not a full 40-digit commit")
        );
        for repo in ["lemmy", "a/b/c", "../x", "a/ b"] {
            assert!(
                err(ONE.replace("LemmyNet/lemmy", repo)).contains("is not `owner/name`"),
                "{repo}"
            );
        }
        for sub in ["../elsewhere", "/abs", "a/../../b", ""] {
            let text = format!("{ONE}workspace = \"{sub}\"\n");
            assert!(err(text).contains("not a relative path inside"), "{sub}");
        }
        assert!(err(ONE.replace("name = \"lemmy\"", "name = \"../x\""))
            .contains("not a plain file name"));
        assert!(err(format!("{ONE}{ONE}")).contains("listed twice"));
        assert!(parse(&format!("{ONE}branch = \"main\"\n")).is_err());
    }

    #[test]
    fn the_committed_list_parses() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("apps.toml");
        let apps = load(&path).unwrap();
        assert!(apps.len() >= 20, "{} applications", apps.len());
        // Every verdict file names an application of the list, at its pinned commit.
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("verdicts-apps");
        for (name, v) in crate::verdicts::load_dir(&dir).unwrap() {
            let app = apps
                .iter()
                .find(|a| a.name == name)
                .unwrap_or_else(|| panic!("verdicts-apps/{name}.toml names no application"));
            assert_eq!(v.version, app.commit, "verdicts-apps/{name}.toml");
        }
    }

    /// A finding of a workspace in a subdirectory is named from the repository's root, and
    /// matches a verdict only at the pinned commit.
    #[test]
    fn findings_are_matched_from_the_repository_root_at_the_commit() {
        let app = parse(&format!("{ONE}workspace = \"rust\"\n"))
            .unwrap()
            .remove(0);
        let checkout = Path::new("/t/apps/lemmy");
        let manifest = app.workspace_dir(checkout).join("Cargo.toml");
        assert_eq!(manifest, Path::new("/t/apps/lemmy/rust/Cargo.toml"));
        let json = serde_json::json!({
            "reason": "compiler-message",
            "manifest_path": manifest,
            "message": {
                "message": "m",
                "code": {"code": "idem::check_then_act"},
                "spans": [{"file_name": "/t/apps/lemmy/rust/src/a.rs", "is_primary": true,
                           "line_start": 4, "column_start": 1, "text": [{"text": "  x.update()"}]}]
            }
        })
        .to_string();
        let findings = crate::finding::parse_json(&json, checkout).unwrap();
        assert_eq!(findings[0].file, "rust/src/a.rs");
        let verdicts = crate::verdicts::parse(&format!(
            "version = \"{}\"\n[[finding]]\nlint = \"check_then_act\"\nfile = \"rust/src/a.rs\"\n\
             text = \"x.update()\"\nverdict = \"fp\"\nreason = \"set to value\"\n",
            app.commit
        ))
        .unwrap();
        let spec = app.as_crate_spec();
        let (m, vanished) =
            crate::verdicts::match_findings(&findings, &spec.version, Some(&verdicts));
        assert_eq!(
            m[0].verdict.as_ref().map(|v| v.reason.as_str()),
            Some("set to value")
        );
        assert!(vanished.is_empty());
        // Re-pinned to another commit, the old verdicts match nothing until reviewed again.
        let (m, vanished) = crate::verdicts::match_findings(
            &findings,
            "0000000000000000000000000000000000000000",
            Some(&verdicts),
        );
        assert!(m[0].verdict.is_none());
        assert_eq!(vanished.len(), 1);
    }

    #[test]
    fn a_missing_mirror_says_how_to_get_it() {
        let app = &parse(ONE).unwrap()[0];
        let dir = std::env::temp_dir().join("lintcheck-no-mirrors-here");
        assert_eq!(app.find_mirror(&dir), None);
        let msg = missing_mirror(app, &dir).to_string();
        assert!(msg.contains("fetch github:LemmyNet/lemmy"), "{msg}");
        assert!(msg.contains("git clone --bare"), "{msg}");
    }

    #[test]
    fn files_the_mirror_lacks_are_found_by_id() {
        let blobs = vec![
            ("aa".to_string(), "src/lib.rs".to_string()),
            ("bb".to_string(), "data/big file.bin".to_string()),
            ("aa".to_string(), "src/copy.rs".to_string()),
        ];
        assert_eq!(
            missing_of(&blobs, "aa\nbb missing\n"),
            vec!["data/big file.bin".to_string()]
        );
        assert!(missing_of(&blobs, "aa\nbb\n").is_empty());
    }

    #[test]
    fn counts_members_and_lines() {
        let json = r#"{"packages":[],"workspace_members":["a 0.1.0 (path+file:///a)","b 0.1.0 (path+file:///b)"]}"#;
        assert_eq!(count_members(json).unwrap(), 2);
        assert!(count_members("{}").is_err());
        assert!(count_members("error").is_err());

        let dir = std::env::temp_dir().join(format!("lintcheck-lines-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("src")).unwrap();
        std::fs::create_dir_all(dir.join("target/debug")).unwrap();
        std::fs::write(dir.join("src/lib.rs"), "fn a() {}\nfn b() {}\n").unwrap();
        std::fs::write(dir.join("src/no_newline.rs"), "fn c() {}").unwrap();
        std::fs::write(dir.join("README.md"), "x\ny\n").unwrap();
        std::fs::write(dir.join("target/debug/gen.rs"), "fn d() {}\n").unwrap();
        assert_eq!(rust_lines(&dir).unwrap(), 3);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_table_gives_size_commit_and_time() {
        let app = parse(ONE).unwrap().remove(0);
        let md = table(&[
            (
                app.clone(),
                Some(AppStats {
                    members: 41,
                    lines: 74_000,
                }),
                Some(std::time::Duration::from_millis(1700)),
            ),
            (app, None, None),
        ]);
        assert!(
            md.contains("| lemmy | LemmyNet/lemmy | 439734dd638a | . | 41 | 74000 | 1700 |"),
            "{md}"
        );
        assert!(md.contains("| lemmy | LemmyNet/lemmy | 439734dd638a | . | - | - | - |"));
    }
}
