//! Running `git` on a checkout nobody here has reviewed.
//!
//! A pull request controls every file of the work tree, so nothing it wrote may decide which
//! repository git opens or what git runs. Git itself would take any directory that looks like
//! a repository (`HEAD`, `config`, `objects/`, `refs/`) for one when run there, and would then
//! obey that directory's `config`: `core.fsmonitor` is a shell command that `git diff` and
//! `git ls-files` start. So:
//!
//! - the repository is found here, not by git: the closest directory at or above the place
//!   the user named (the `--manifest-path`, the PATH or the current directory) that holds a
//!   `.git` entry. Git refuses to commit a path named `.git`, so a checkout cannot plant one;
//!   the fake repository of a hostile tree is a directory *without* `.git`, which this never
//!   takes;
//! - every invocation names that repository and its work tree (`--git-dir`, `--work-tree`),
//!   so no discovery runs, and bare repositories are refused outright;
//! - what a repository's configuration can make git start is switched off on the command
//!   line, which wins over every configuration file and whatever they `include`: the file
//!   system monitor, hooks, external diff and textconv drivers, and (through attributes
//!   read from the empty tree instead of the checkout's `.gitattributes`) clean filters.

use anyhow::{bail, Context, Result};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Git's empty tree: attributes read from it are none, whatever `.gitattributes` says.
const EMPTY_TREE: &str = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";

/// A repository found from a place the user chose.
#[derive(Debug, Clone)]
pub struct Repo {
    /// The `.git` directory, or the `.git` file of a worktree or submodule (git follows its
    /// `gitdir:` line).
    pub git_dir: PathBuf,
    /// The directory holding `.git`: the top of the work tree.
    pub work_tree: PathBuf,
}

impl Repo {
    /// The repository around `start`: the closest directory at or above it (symlinks
    /// resolved) holding a `.git` entry. `None` outside any repository.
    pub fn around(start: &Path) -> Option<Repo> {
        let start = std::fs::canonicalize(start).ok()?;
        start.ancestors().find_map(|dir| {
            let dot_git = dir.join(".git");
            let meta = std::fs::metadata(&dot_git).ok()?;
            (meta.is_dir() || meta.is_file()).then(|| Repo {
                git_dir: dot_git,
                work_tree: dir.to_path_buf(),
            })
        })
    }

    /// Runs `git ARGS` on this repository and returns its stdout; its first stderr line is
    /// the error.
    pub fn run(&self, args: &[&str]) -> Result<Vec<u8>> {
        let out = match self.output(args, true) {
            // A git older than 2.40 does not know `--attr-source`; without it only filters
            // that the user's own configuration defines can run.
            Ok(out) if unknown_attr_source(&out.stderr) => self.output(args, false)?,
            out => out?,
        };
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            let first = err
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("failed");
            bail!(
                "`git {}` in `{}`: {}",
                args.join(" "),
                self.work_tree.display(),
                first.trim()
            );
        }
        Ok(out.stdout)
    }

    fn output(&self, args: &[&str], attr_source: bool) -> Result<std::process::Output> {
        Command::new("git")
            .args(self.safe_args(attr_source))
            .args(args)
            .current_dir(&self.work_tree)
            // The repository is the one named on the command line, whatever the caller's
            // environment says.
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .env_remove("GIT_COMMON_DIR")
            .env_remove("GIT_INDEX_FILE")
            .env_remove("GIT_EXTERNAL_DIFF")
            .env("GIT_OPTIONAL_LOCKS", "0")
            .env("GIT_TERMINAL_PROMPT", "0")
            .output()
            .context("could not run `git` (is it installed?)")
    }

    /// The options that come before every command: which repository, and nothing that its
    /// configuration could make git run.
    pub fn safe_args(&self, attr_source: bool) -> Vec<OsString> {
        let mut args: Vec<OsString> = Vec::new();
        let mut push = |a: &str| args.push(a.into());
        push("--no-pager");
        push("-c");
        push("safe.bareRepository=explicit");
        push("-c");
        push("core.fsmonitor=false");
        push("-c");
        push("core.hooksPath=/dev/null");
        push("-c");
        push("diff.external=");
        push("-c");
        push("core.pager=cat");
        if attr_source {
            push(&format!("--attr-source={EMPTY_TREE}"));
        }
        let mut git_dir = OsString::from("--git-dir=");
        git_dir.push(&self.git_dir);
        let mut work_tree = OsString::from("--work-tree=");
        work_tree.push(&self.work_tree);
        args.push(git_dir);
        args.push(work_tree);
        args
    }
}

fn unknown_attr_source(stderr: &[u8]) -> bool {
    let err = String::from_utf8_lossy(stderr);
    err.contains("attr-source") && (err.contains("unknown option") || err.contains("usage"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_shaped_like_a_repository_is_not_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        std::fs::create_dir_all(root.join(".git")).expect("mkdir");
        let fake = root.join("ws");
        std::fs::create_dir_all(fake.join("objects")).expect("mkdir");
        std::fs::create_dir_all(fake.join("refs")).expect("mkdir");
        std::fs::write(fake.join("HEAD"), "ref: refs/heads/main\n").expect("write");
        std::fs::write(fake.join("config"), "[core]\n\tbare = false\n").expect("write");
        let repo = Repo::around(&fake).expect("the real repository");
        let root = std::fs::canonicalize(root).expect("canonical");
        assert_eq!(repo.work_tree, root);
        assert_eq!(repo.git_dir, root.join(".git"));
    }
}
