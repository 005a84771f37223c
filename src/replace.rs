//! Writing a file of the user's tree (`--fix`, `--write-baseline`): the new contents go to a
//! fresh temporary file beside it, then a rename puts them in place. A failed write (a full
//! disk, a file size limit) leaves the old file whole where writing in place left it cut; a
//! reader sees the old file or the new one, never half of one; and a symlink at the path is
//! replaced, never followed to wherever a checkout pointed it.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Replaces the file at `path` with `contents`, keeping its permissions when it is a regular
/// file. On error `path` is untouched and the temporary file is gone.
pub fn replace(path: &Path, contents: &[u8]) -> io::Result<()> {
    let old = std::fs::symlink_metadata(path)
        .ok()
        .filter(|m| m.file_type().is_file());
    let (temp, mut file) = create_beside(path)?;
    let written = (|| {
        file.write_all(contents)?;
        if let Some(old) = &old {
            file.set_permissions(old.permissions())?;
        }
        // On disk before the rename, so a crash cannot leave an empty file at `path`.
        file.sync_all()?;
        drop(file);
        std::fs::rename(&temp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written
}

/// A new file in `path`'s directory, named after it, that did not exist before (`create_new`:
/// never an existing file or a symlink planted under that name).
fn create_beside(path: &Path) -> io::Result<(PathBuf, File)> {
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the path names no file"))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut last = None;
    for attempt in 0..100u32 {
        let mut temp_name = std::ffi::OsString::from(".");
        temp_name.push(name);
        temp_name.push(format!(".idem-lint-{}-{attempt}", std::process::id()));
        let temp = dir.join(temp_name);
        match OpenOptions::new().write(true).create_new(true).open(&temp) {
            Ok(file) => return Ok((temp, file)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no free temporary name")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_a_symlink_instead_of_following_it() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let target = tmp.path().join("outside.txt");
        std::fs::write(&target, "keep").expect("write");
        let link = tmp.path().join("link.json");
        std::os::unix::fs::symlink(&target, &link).expect("symlink");
        replace(&link, b"new").expect("replaces");
        assert_eq!(std::fs::read_to_string(&target).expect("read"), "keep");
        assert_eq!(std::fs::read_to_string(&link).expect("read"), "new");
        assert!(!std::fs::symlink_metadata(&link)
            .expect("meta")
            .file_type()
            .is_symlink());
        let left: Vec<_> = std::fs::read_dir(tmp.path()).expect("dir").collect();
        assert_eq!(left.len(), 2, "no temporary file left");
    }

    #[test]
    fn keeps_the_permissions() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().expect("tempdir");
        let file = tmp.path().join("a.rs");
        std::fs::write(&file, "old").expect("write");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).expect("chmod");
        replace(&file, b"new").expect("replaces");
        let mode = std::fs::metadata(&file).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o640);
    }
}
