//! Which attributes make a fn a test, whose body no lint reads.
//!
//! Only a real test attribute does: the built-in `#[test]` and `#[bench]`, and the test
//! macros of known crates (`#[tokio::test]`, `#[sqlx::test]`, ..). A name is only what it
//! resolves to: `use tracing::instrument as test;` makes `#[test(skip(conn))]` tracing's
//! instrument on a production handler, whose body must be linted.
//!
//! Resolution is read from the whole file's text, every `use` and `extern crate` wherever it
//! stands (a module, a fn body, a macro's input), so a binding in any scope counts in all of
//! them: an attribute is a test only if every binding of its first segment in the file leads
//! to a known test macro, or, with none, the name as written is one and no glob import or
//! module in the file could bind it to something else. The scan that skips test bodies
//! before parsing ([`super::test_bodies`]) and the lowering read the same text, so they
//! agree. Bindings made in another file (a module elsewhere re-exporting
//! `tracing::instrument as test`) are seen only through the glob import that brings them,
//! and not through `use super::*`, which nearly every test module holds.

use std::collections::{HashMap, HashSet};

/// The test macros outside the standard library, by their full path.
const KNOWN: &[&[&str]] = &[
    &["tokio", "test"],
    &["tokio_macros", "test"],
    &["async_std", "test"],
    &["actix_rt", "test"],
    &["actix_web", "test"],
    &["ntex", "test"],
    &["sqlx", "test"],
    &["test_log", "test"],
    &["futures_test", "test"],
    &["googletest", "test"],
];

/// Whether `path` (resolved, without a leading `::`) names a test macro.
fn known(path: &[String]) -> bool {
    match path {
        [one] => one == "test" || one == "bench",
        // `core::prelude::v1::test`, `std::prelude::rust_2021::bench`.
        [krate, prelude, _, last] if krate == "core" || krate == "std" => {
            prelude == "prelude" && (last == "test" || last == "bench")
        }
        _ => KNOWN.iter().any(|k| k.iter().eq(path.iter())),
    }
}

/// The names a file binds by `use` and `extern crate` (each to every path it is bound to),
/// whether it has a glob import, and the names of the modules it declares.
#[derive(Debug, Default)]
pub(super) struct TestAttrs {
    bindings: HashMap<String, Vec<Vec<String>>>,
    glob: bool,
    modules: HashSet<String>,
}

impl TestAttrs {
    /// Reads the bindings of `text`; what does not parse as a `use` binds nothing.
    pub(super) fn of(text: &str) -> TestAttrs {
        let mut out = TestAttrs::default();
        let b = text.as_bytes();
        // Every test attribute, however it is spelled, names `test` or `bench` somewhere in
        // the file (its own name, or the `use` that binds it): without them, nothing to read.
        let mentions = |word: &[u8]| memchr::memmem::find(b, word).is_some();
        if !mentions(b"test") && !mentions(b"bench") {
            return out;
        }
        // One `;` search covers every `use` before it: the scan stays linear.
        let mut next_semi = 0;
        for at in memchr::memmem::find_iter(b, b"use") {
            if !word_at(b, at, 3) {
                continue;
            }
            if next_semi <= at {
                next_semi = memchr::memchr(b';', &b[at..]).map_or(b.len(), |i| at + i);
            }
            // A `use` item is short; a longer stretch is no item worth reading.
            if next_semi - at > 4096 || next_semi == b.len() {
                continue;
            }
            let tree = text[at + 3..next_semi].trim_start();
            let tree = tree.strip_prefix("::").unwrap_or(tree);
            if let Ok(tree) = syn::parse_str::<syn::UseTree>(tree) {
                out.add_tree(&tree, &mut Vec::new());
            }
        }
        for at in memchr::memmem::find_iter(b, b"crate") {
            if !word_at(b, at, 5) {
                continue;
            }
            if !text[..at].trim_end().ends_with("extern") {
                continue;
            }
            let Some(end) = memchr::memchr(b';', &b[at..]).map(|i| at + i + 1) else {
                continue;
            };
            if end - at > 4096 {
                continue;
            }
            let item = format!("extern {}", &text[at..end]);
            if let Ok(e) = syn::parse_str::<syn::ItemExternCrate>(&item) {
                let name = e.rename.as_ref().map_or(&e.ident, |(_, alias)| alias);
                out.bind(unraw(name), vec![unraw(&e.ident)]);
            }
        }
        for at in memchr::memmem::find_iter(b, b"mod") {
            if !word_at(b, at, 3) {
                continue;
            }
            let rest = text[at + 3..].trim_start();
            let rest = rest.strip_prefix("r#").unwrap_or(rest);
            let len = rest
                .bytes()
                .take_while(|&c| c == b'_' || c.is_ascii_alphanumeric())
                .count();
            if len > 0 {
                out.modules.insert(rest[..len].to_owned());
            }
        }
        out
    }

    fn bind(&mut self, name: String, path: Vec<String>) {
        self.bindings.entry(name).or_default().push(path);
    }

    fn add_tree(&mut self, tree: &syn::UseTree, prefix: &mut Vec<String>) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(unraw(&p.ident));
                self.add_tree(&p.tree, prefix);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let (name, path) = if n.ident == "self" {
                    (prefix.last().cloned().unwrap_or_default(), prefix.clone())
                } else {
                    let mut path = prefix.clone();
                    path.push(unraw(&n.ident));
                    (unraw(&n.ident), path)
                };
                self.bind(name, path);
            }
            syn::UseTree::Rename(r) => {
                let mut path = prefix.clone();
                if r.ident != "self" {
                    path.push(unraw(&r.ident));
                }
                self.bind(unraw(&r.rename), path);
            }
            // `use super::*` is what nearly every test module starts with; counting it would
            // lint the tests of every file with one. A `test` it brings from the parent module
            // is not seen (see the module's documentation).
            syn::UseTree::Glob(_) => self.glob |= !matches!(prefix.as_slice(), [s] if s == "super"),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.add_tree(t, prefix);
                }
            }
        }
    }

    /// Whether the attribute path `path` is a test attribute wherever it stands in the file.
    pub(super) fn is_test(&self, path: &syn::Path) -> bool {
        let segs: Vec<String> = path.segments.iter().map(|s| unraw(&s.ident)).collect();
        if path.leading_colon.is_some() {
            return known(&segs);
        }
        let first = &segs[0];
        // A longer path starts from a module of that name (the built-in `test` is a macro,
        // which no module shadows).
        if segs.len() > 1 && self.modules.contains(first) {
            return false;
        }
        match self.bindings.get(first) {
            // `crate::`/`self::`/`super::` paths are the crate's own items, never known.
            Some(paths) => paths.iter().all(|p| {
                let mut full = p.clone();
                full.extend(segs[1..].iter().cloned());
                known(&full)
            }),
            // A glob import may bind the name; else it is the name as written.
            None => !self.glob && known(&segs),
        }
    }
}

/// Whether the `len` bytes at `at` are a whole word.
fn word_at(b: &[u8], at: usize, len: usize) -> bool {
    let ident = |c: u8| c == b'_' || c.is_ascii_alphanumeric();
    let before = at.checked_sub(1).and_then(|i| b.get(i));
    !before.is_some_and(|&c| ident(c)) && !b.get(at + len).is_some_and(|&c| ident(c))
}

fn unraw(id: &proc_macro2::Ident) -> String {
    let s = id.to_string();
    match s.strip_prefix("r#") {
        Some(rest) => rest.to_owned(),
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_test(file: &str, attr: &str) -> bool {
        let path: syn::Path = syn::parse_str(attr).expect("a path");
        TestAttrs::of(&format!("{file}\n#[{attr}]\nfn f() {{}}\n")).is_test(&path)
    }

    #[test]
    fn built_in_and_known_test_macros_are_tests() {
        assert!(is_test("", "test"));
        assert!(is_test("", "bench"));
        assert!(is_test("", "tokio::test"));
        assert!(is_test("", "::tokio::test"));
        assert!(is_test("use tokio::test;", "test"));
        assert!(is_test("use ::tokio::{self as rt};", "rt::test"));
        assert!(is_test("use tokio::{test as t};", "test"));
        assert!(is_test("extern crate tokio as rt;", "tokio::test"));
    }

    #[test]
    fn a_name_bound_to_something_else_is_no_test() {
        assert!(!is_test("use tracing::instrument as test;", "test"));
        assert!(!is_test(
            "fn f() { use tracing::{instrument as r#test}; }",
            "test"
        ));
        assert!(!is_test("m! { use tracing::instrument as test; }", "test"));
        assert!(!is_test("use tracing as tokio;", "tokio::test"));
        assert!(!is_test("extern crate tracing as tokio;", "tokio::test"));
        assert!(!is_test("mod tokio { }", "tokio::test"));
        assert!(!is_test("use crate::prelude::*;", "test"));
        assert!(is_test("mod tests { use super::*; }", "test"));
        assert!(!is_test("use crate::test;", "test"));
        assert!(!is_test("", "tracing::test"));
        assert!(!is_test("", "my::test"));
        assert!(!is_test("", "instrument"));
    }
}
