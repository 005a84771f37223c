//! The editor's open buffers: their text as the client last sent it (saved or not), kept in
//! step with `didOpen` / `didChange` / `didClose`. These texts are the overlays the analysis
//! reads instead of the files on disk.

use super::position::{offset, Encoding};
use crate::source::SourceFile;
use anyhow::{bail, Result};
use lsp_types::{TextDocumentContentChangeEvent, Uri};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One open buffer.
#[derive(Debug, Clone)]
pub struct Document {
    /// The URI the client named it by (diagnostics are published under it).
    pub uri: Uri,
    pub version: i32,
    pub text: Arc<str>,
}

/// Open buffers by file path.
#[derive(Debug, Default)]
pub struct Documents {
    by_path: HashMap<PathBuf, Document>,
}

impl Documents {
    pub fn open(&mut self, path: PathBuf, doc: Document) {
        self.by_path.insert(path, doc);
    }

    pub fn close(&mut self, path: &Path) -> Option<Document> {
        self.by_path.remove(path)
    }

    pub fn get(&self, path: &Path) -> Option<&Document> {
        self.by_path.get(path)
    }

    /// Applies the changes of one `didChange` in order. A change whose range does not fit
    /// the text is clamped as the protocol says for positions; a change to a buffer that
    /// was never opened is an error (the client and the server disagree on what is open).
    pub fn change(
        &mut self,
        path: &Path,
        version: i32,
        changes: Vec<TextDocumentContentChangeEvent>,
        enc: Encoding,
    ) -> Result<()> {
        let Some(doc) = self.by_path.get_mut(path) else {
            bail!("`{}` changed but was never opened", path.display());
        };
        let mut text = doc.text.to_string();
        for change in changes {
            match change.range {
                None => text = change.text,
                Some(range) => {
                    let src = SourceFile::new(path.to_path_buf(), Arc::from(text.as_str()));
                    let start = offset(&src, range.start, enc);
                    let end = offset(&src, range.end, enc).max(start);
                    text.replace_range(start..end, &change.text);
                }
            }
        }
        doc.text = Arc::from(text);
        doc.version = version;
        Ok(())
    }

    /// Every open buffer.
    pub fn iter(&self) -> impl Iterator<Item = (&PathBuf, &Document)> {
        self.by_path.iter()
    }

    /// Every open buffer's path and text.
    pub fn overlays(&self) -> impl Iterator<Item = (&PathBuf, &Arc<str>)> {
        self.by_path.iter().map(|(p, d)| (p, &d.text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lsp_types::{Position, Range};
    use std::str::FromStr;

    #[test]
    fn incremental_changes_apply_in_order_in_utf16() {
        let mut docs = Documents::default();
        let path = PathBuf::from("/x/a.rs");
        docs.open(
            path.clone(),
            Document {
                uri: Uri::from_str("file:///x/a.rs").expect("uri"),
                version: 1,
                text: Arc::from("let s = \"😀\";\nfoo();\n"),
            },
        );
        let edit = |l1, c1, l2, c2, text: &str| TextDocumentContentChangeEvent {
            range: Some(Range::new(Position::new(l1, c1), Position::new(l2, c2))),
            range_length: None,
            text: text.to_string(),
        };
        // The emoji takes UTF-16 columns 9 and 10, the closing quote 11: 12 is after it.
        docs.change(
            &path,
            2,
            vec![edit(0, 12, 0, 12, "!"), edit(1, 0, 1, 3, "bar")],
            Encoding::Utf16,
        )
        .expect("open");
        let doc = docs.get(&path).expect("open");
        assert_eq!(&*doc.text, "let s = \"😀\"!;\nbar();\n");
        assert_eq!(doc.version, 2);
        assert!(docs
            .change(Path::new("/nope.rs"), 1, vec![], Encoding::Utf16)
            .is_err());
    }
}
