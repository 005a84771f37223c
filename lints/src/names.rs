//! Names of definitions: which crate ([`Krate`]) and which path inside it ([`DefPath`]).
//! Resolution (in the engine) produces them; the catalog's tables are matched against them.

use std::sync::Arc;

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Krate {
    /// A crate of this package: the index of its target in [`crate::model::Package::targets`].
    Local(usize),
    /// An external crate by name (`uuid`, `std`), or an unresolved first segment. Shared, as
    /// the segments are, so that a memoized resolution is handed out without copying.
    Extern(Arc<str>),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DefPath {
    pub krate: Krate,
    pub segments: Arc<[String]>,
}

impl DefPath {
    pub fn last(&self) -> &str {
        self.segments.last().map(String::as_str).unwrap_or("")
    }

    pub fn is_local(&self) -> bool {
        matches!(self.krate, Krate::Local(_))
    }

    /// The external crate's name.
    pub fn crate_name(&self) -> Option<&str> {
        match &self.krate {
            Krate::Extern(name) => Some(name),
            Krate::Local(_) => None,
        }
    }

    /// Whether this path is `pattern` (`"chrono::Utc::now"`): same crate, and the pattern's
    /// other segments end this path. `std`, `core` and `alloc` are one crate here.
    pub fn matches(&self, pattern: &str) -> bool {
        let mut parts = pattern.split("::");
        let Some(krate) = parts.next() else {
            return false;
        };
        let tail: Vec<&str> = parts.collect();
        let Some(own) = self.crate_name() else {
            return false;
        };
        let same_crate = own == krate || (is_std(own) && is_std(krate));
        same_crate
            && self.segments.len() >= tail.len()
            && self.segments[self.segments.len() - tail.len()..]
                .iter()
                .zip(&tail)
                .all(|(a, b)| a == b)
    }

    /// `a::b::c` for messages.
    pub fn display(&self) -> String {
        let root = match &self.krate {
            Krate::Local(_) => "crate".to_owned(),
            Krate::Extern(name) => name.to_string(),
        };
        std::iter::once(root)
            .chain(self.segments.iter().cloned())
            .collect::<Vec<_>>()
            .join("::")
    }

    /// The path of item `name` inside this one (`crate::db::Repo` → `crate::db::Repo::get`).
    pub fn child(&self, name: &str) -> DefPath {
        self.extended(&[name.to_owned()])
    }

    /// This path with `tail` appended.
    pub fn extended(&self, tail: &[String]) -> DefPath {
        DefPath {
            krate: self.krate.clone(),
            segments: self.segments.iter().chain(tail).cloned().collect(),
        }
    }

    /// This path without its last segment (the crate root stays the crate root).
    pub fn parent(&self) -> DefPath {
        let end = self.segments.len().saturating_sub(1);
        DefPath {
            krate: self.krate.clone(),
            segments: self.segments[..end].into(),
        }
    }
}

pub(crate) fn is_std(name: &str) -> bool {
    matches!(name, "std" | "core" | "alloc")
}
