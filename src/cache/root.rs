//! Where the disk cache may live.
//!
//! The checkout under review can aim its own target directory anywhere: commit `target/` or
//! `target/idem-lint` as a symlink, or name a `build.target-dir` in `.cargo/config.toml`. So
//! the cache goes only where the person running the linter said, or inside the workspace:
//!
//! - `IDEM_LINT_CACHE_DIR`, when set: that directory, as named;
//! - else `idem-lint/` in cargo's target directory, when that is below the workspace root and
//!   every directory from the root down to `idem-lint/` is a real directory (none a symlink);
//! - else, for a target directory outside the workspace, only when the environment named it
//!   (`CARGO_TARGET_DIR` or `CARGO_BUILD_TARGET_DIR`): a checkout's `.cargo/config.toml`
//!   cannot send the cache out of the checkout.
//!
//! Anything else runs without a cache, with a one-line warning saying why and what to set.

use super::nofollow::{self, Dir};
use super::CACHE_DIR_ENV;
use crate::discovery::Workspace;
use std::path::{Component, Path, PathBuf};

/// Environment variables that set cargo's target directory.
const TARGET_DIR_ENVS: [&str; 2] = ["CARGO_TARGET_DIR", "CARGO_BUILD_TARGET_DIR"];

/// The directory the disk cache of `ws` lives in, made if missing: `Ok(None)` when there is
/// none (a plain directory of `.rs` files has no target directory, and the linter does not
/// write into a tree that is not a cargo project unless told where) or it cannot be made;
/// `Err` with the reason when the place is refused.
pub fn disk_root(ws: &Workspace) -> Result<Option<PathBuf>, String> {
    if let Some(dir) = env_path(CACHE_DIR_ENV) {
        return Ok(std::fs::create_dir_all(&dir).is_ok().then_some(dir));
    }
    let Some(target) = &ws.target_dir else {
        return Ok(None);
    };
    if let Some(rel) = plain_below(target, &ws.root) {
        return match nofollow::ensure_dirs_below(&ws.root, &rel.join("idem-lint")) {
            Ok(dir) => Ok(Some(dir)),
            Err(Some(link)) => Err(format!(
                "no re-run cache: `{}` is not a directory (a symbolic link?), and the cache \
                 follows none; set {CACHE_DIR_ENV} to cache elsewhere",
                link.display()
            )),
            Err(None) => Ok(None),
        };
    }
    if !TARGET_DIR_ENVS.iter().any(|v| env_path(v).is_some()) {
        return Err(format!(
            "no re-run cache: cargo's target directory `{}` is outside the workspace, and \
             only the environment may place the cache there; set {CACHE_DIR_ENV} (or \
             CARGO_TARGET_DIR) to cache there",
            target.display()
        ));
    }
    if std::fs::create_dir_all(target).is_err() {
        return Ok(None);
    }
    let dir = target.join("idem-lint");
    match nofollow::ensure_dir(&dir) {
        Ok(Dir::Real) => Ok(Some(dir)),
        Ok(Dir::Other) => Err(format!(
            "no re-run cache: `{}` is not a directory (a symbolic link?), and the cache \
             follows none; set {CACHE_DIR_ENV} to cache elsewhere",
            dir.display()
        )),
        Err(_) => Ok(None),
    }
}

/// `path` relative to `base` when it is below it by plain names (no `..`), else `None`.
fn plain_below(path: &Path, base: &Path) -> Option<PathBuf> {
    let rel = path.strip_prefix(base).ok()?;
    rel.components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
        .then(|| rel.to_path_buf())
}

fn env_path(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::plain_below;
    use std::path::Path;

    #[test]
    fn only_plain_names_are_below() {
        let ws = Path::new("/ws");
        assert_eq!(
            plain_below(Path::new("/ws/target"), ws).as_deref(),
            Some(Path::new("target"))
        );
        assert_eq!(
            plain_below(Path::new("/ws"), ws).as_deref(),
            Some(Path::new(""))
        );
        assert_eq!(plain_below(Path::new("/ws/../etc"), ws), None);
        assert_eq!(plain_below(Path::new("/wsx/target"), ws), None);
        assert_eq!(plain_below(Path::new("/elsewhere"), ws), None);
    }
}
