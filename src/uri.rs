//! Paths as URIs (SARIF artifact locations, cargo package ids, the language server's
//! documents), byte for byte.
//!
//! A file name is bytes, not text: a backslash is a character of the name on Unix and a
//! non-UTF-8 byte is part of it, so each byte outside RFC 3986's unreserved set is
//! percent-encoded on its own and two different paths never give the same URI.

use std::path::{Component, Path, PathBuf};

/// `path` as a URI path: its components joined by `/`, each percent-encoded byte-wise. An
/// absolute path starts with `/`; a relative one gives a relative reference.
pub fn uri_path(path: &Path) -> String {
    let mut out = String::new();
    for component in path.components() {
        match component {
            Component::RootDir => out.push('/'),
            Component::Prefix(p) => encode_into(p.as_os_str().as_encoded_bytes(), &mut out),
            Component::CurDir => push_segment(&mut out, "."),
            Component::ParentDir => push_segment(&mut out, ".."),
            Component::Normal(name) => {
                if !out.is_empty() && !out.ends_with('/') {
                    out.push('/');
                }
                encode_into(name.as_encoded_bytes(), &mut out);
            }
        }
    }
    out
}

/// An absolute `path` as a `file://` URI.
pub fn file_uri(path: &Path) -> String {
    let p = uri_path(path);
    if p.starts_with('/') {
        format!("file://{p}")
    } else {
        // A Windows path starts with its drive: `file:///C:/..`.
        format!("file:///{p}")
    }
}

/// The path a `file://` URI names (`file:///a%20b` → `/a b`), byte for byte: the inverse of
/// [`file_uri`]. `None` for another scheme, a remote host or a bad escape.
pub fn file_path(uri: &str) -> Option<PathBuf> {
    let rest = uri.strip_prefix("file://")?;
    // `file:///x` and `file://localhost/x` name the local file; another host does not.
    let path = rest.strip_prefix("localhost").unwrap_or(rest);
    if !path.starts_with('/') {
        return None;
    }
    let path = path.split(['?', '#']).next().unwrap_or(path);
    let bytes = decode(path)?;
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStringExt;
        Some(PathBuf::from(std::ffi::OsString::from_vec(bytes)))
    }
    #[cfg(not(unix))]
    {
        // `/C:/x` on Windows.
        let text = String::from_utf8(bytes).ok()?;
        Some(PathBuf::from(text.trim_start_matches('/')))
    }
}

fn decode(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len());
    let mut bytes = text.bytes();
    while let Some(b) = bytes.next() {
        if b == b'%' {
            let hex = [bytes.next()?, bytes.next()?];
            let hex = std::str::from_utf8(&hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
        } else {
            out.push(b);
        }
    }
    Some(out)
}

/// `path` with `.` and `name/..` folded away, without touching the file system: a `#[path]`
/// module reached as `src/../../x.rs` lies outside the root although it starts with it.
pub fn lexically_normal(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if matches!(out.components().next_back(), Some(Component::Normal(_))) {
                    out.pop();
                } else if !out.has_root() {
                    out.push("..");
                }
            }
            other => out.push(other),
        }
    }
    out
}

/// Text (a package name) percent-encoded for a URI fragment or path segment.
pub fn encode_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    encode_into(text.as_bytes(), &mut out);
    out
}

fn push_segment(out: &mut String, segment: &str) {
    if !out.is_empty() && !out.ends_with('/') {
        out.push('/');
    }
    out.push_str(segment);
}

fn encode_into(bytes: &[u8], out: &mut String) {
    for &b in bytes {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backslash_is_part_of_the_name() {
        assert_eq!(
            uri_path(Path::new("src/back\\slash.rs")),
            "src/back%5Cslash.rs"
        );
        assert_ne!(
            uri_path(Path::new("back\\slash.rs")),
            uri_path(Path::new("back/slash.rs"))
        );
    }

    #[test]
    fn reserved_characters_and_spaces_are_encoded() {
        assert_eq!(uri_path(Path::new("a b/c#d?.rs")), "a%20b/c%23d%3F.rs");
        assert_eq!(uri_path(Path::new("/abs/x.rs")), "/abs/x.rs");
        assert_eq!(file_uri(Path::new("/abs/é.rs")), "file:///abs/%C3%A9.rs");
    }

    #[test]
    fn file_uris_decode_to_the_path_they_encode() {
        let p = Path::new("/abs/a b/é#?.rs");
        assert_eq!(file_path(&file_uri(p)).as_deref(), Some(p));
        assert_eq!(
            file_path("file://localhost/x/y.rs").as_deref(),
            Some(Path::new("/x/y.rs"))
        );
        assert_eq!(file_path("untitled:Untitled-1"), None);
        assert_eq!(file_path("file://host/x.rs"), None);
        assert_eq!(file_path("file:///x%2"), None);
    }

    #[test]
    fn parent_components_fold_lexically() {
        assert_eq!(
            lexically_normal(Path::new("/ws/src/../../shared/./x.rs")),
            Path::new("/shared/x.rs")
        );
        assert_eq!(lexically_normal(Path::new("/../x.rs")), Path::new("/x.rs"));
        assert_eq!(
            lexically_normal(Path::new("a/../../x.rs")),
            Path::new("../x.rs")
        );
    }

    #[cfg(unix)]
    #[test]
    fn non_utf8_bytes_are_encoded_one_by_one() {
        use std::ffi::OsStr;
        use std::os::unix::ffi::OsStrExt;
        let a = Path::new(OsStr::from_bytes(b"src/\xff.rs"));
        let b = Path::new(OsStr::from_bytes(b"src/\xfe.rs"));
        assert_eq!(uri_path(a), "src/%FF.rs");
        assert_ne!(
            uri_path(a),
            uri_path(b),
            "lossy decoding would make these one file"
        );
    }
}
