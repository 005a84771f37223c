//! Analysing a package again after an edit of some of its files, from the analysis of the
//! version before it: the language server re-analyses after every keystroke, and most of
//! the package has not changed.
//!
//! [`Retained`] is a package with its analysis, kept by the caller between versions;
//! [`Analysis::reusing`] builds the next version's analysis from it. What is reused must
//! give exactly what a fresh analysis gives, so reuse applies only when the edit leaves
//! every package-wide table as it was: the same files in the same order, each with the same
//! number of fns, and the changed files equal to their previous version in everything but
//! fn bodies and spans (their [`interface`]). Then the resolver, the type tables and the
//! call graph's index are those of the previous version, unchanged files' call edges are
//! too, and [`super::Summaries::reusing`] walks again only the changed files' fns and the
//! fns their changed summaries reach. Anything else is analysed afresh.

use super::entry::EntryParts;
use super::{Analysis, CallGraph, Summaries};
use crate::model::ir::{Path, Type};
use crate::model::{Attr, FileModel, GenericParam, Package, Param, SelfKind, Visibility};
use serde::Serialize;
use std::sync::Arc;

/// A package and its analysis, kept for analysing its next version.
#[derive(Debug)]
pub struct Retained {
    package: Package,
    analysis: Analysis,
    /// What the analysis was built with ([`Catalog`]'s source), as text.
    settings: String,
}

impl Retained {
    pub fn new(
        package: Package,
        analysis: Analysis,
        settings: &crate::settings::Settings,
    ) -> Retained {
        Retained {
            package,
            analysis,
            settings: format!("{settings:?}"),
        }
    }
}

/// How the last [`Analysis::reusing`] went, for tests and benchmarks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reuse {
    /// Nothing reused: the package's files or tables changed (or nothing was kept).
    Fresh,
    /// Tables and unchanged files' call edges reused; summaries computed afresh (a walk
    /// again would have reached a call cycle), or not asked for before.
    Tables,
    /// Summaries reused too: only the changed files' fns and those their summaries reach
    /// were walked again.
    Summaries,
}

impl Analysis {
    /// The analysis of `package` built with `settings`, reusing `prev` where that gives
    /// exactly what [`Analysis::with_catalog`] gives (see the module docs).
    pub fn reusing(
        package: &Package,
        settings: &crate::settings::Settings,
        prev: Option<Retained>,
    ) -> (Analysis, Reuse) {
        let catalog = settings.catalog();
        let fresh = |catalog| {
            let mut analysis = Analysis::with_catalog(package, catalog);
            analysis.entry_names = settings.entry_names();
            (analysis, Reuse::Fresh)
        };
        let Some(prev) = prev else {
            return fresh(catalog);
        };
        let Some(changed) = changed_files(&prev, package, settings) else {
            return fresh(catalog);
        };
        let Analysis {
            resolver,
            types,
            call_graph,
            summaries,
            entry_parts,
            file_memos,
            ..
        } = prev.analysis;
        let analysis = Analysis {
            resolver,
            types,
            catalog,
            call_graph: Default::default(),
            summaries: Default::default(),
            entry_parts: Default::default(),
            file_memos: file_memos.keeping_unchanged(&changed),
            entry_names: settings.entry_names(),
        };
        let Some(prev_graph) = call_graph.into_inner() else {
            return (analysis, Reuse::Tables);
        };
        let graph = CallGraph::reusing(
            package,
            &analysis.resolver,
            &analysis.types,
            prev_graph,
            &changed,
        );
        // The unchanged files' parts: their models, call edges and the resolver are the same.
        if let Some(parts) = entry_parts.into_inner() {
            let configured = parts.configured.clone();
            let kept = EntryParts::new(
                package,
                &analysis.resolver,
                &graph,
                &analysis.catalog.frameworks,
                &configured,
                Some((parts, &changed)),
            );
            let _ = analysis.entry_parts.set(kept);
        }
        let _ = analysis.call_graph.set(graph);
        // After the entry points: which linked fns are walked reads them.
        let walked = analysis.walked_fns(package);
        // A member fn walked now and not before has no summary to keep (nor the reverse).
        let same_walked = |prev: &Summaries| prev.walked() == walked.as_deref();
        let reused = summaries.into_inner().filter(same_walked).and_then(|prev| {
            Summaries::reusing(
                package,
                &analysis.resolver,
                &analysis.types,
                &analysis.catalog,
                analysis.call_graph(package),
                prev,
                &changed,
            )
        });
        match reused {
            Some(s) => {
                let _ = analysis.summaries.set(s);
                (analysis, Reuse::Summaries)
            }
            None => (analysis, Reuse::Tables),
        }
    }

    /// Gives the analysis back with its package, for [`Analysis::reusing`] next time.
    pub fn retain(self, package: &Package, settings: &crate::settings::Settings) -> Retained {
        Retained::new(package.clone(), self, settings)
    }
}

/// Per file of `package`, whether it changed since `prev`; `None` when the change is more
/// than fn bodies and spans of some files.
fn changed_files(
    prev: &Retained,
    package: &Package,
    settings: &crate::settings::Settings,
) -> Option<Vec<bool>> {
    let old = &prev.package;
    if old.name != package.name
        || old.dependencies != package.dependencies
        || old.targets != package.targets
        || old.files.len() != package.files.len()
        || prev.settings != format!("{settings:?}")
    {
        return None;
    }
    let mut changed = Vec::with_capacity(package.files.len());
    for (a, b) in old.files.iter().zip(&package.files) {
        if Arc::ptr_eq(a, b) {
            changed.push(false);
            continue;
        }
        if a.id != b.id || a.fns.len() != b.fns.len() || interface(a)? != interface(b)? {
            return None;
        }
        changed.push(true);
    }
    Some(changed)
}

/// Everything of a file the package-wide tables (and other fns' walks) read, spans left
/// out: the file without its fn bodies (only whether each fn has one).
fn interface(file: &FileModel) -> Option<Vec<u8>> {
    #[derive(Serialize)]
    struct Sig<'a> {
        name: &'a str,
        module: &'a [String],
        self_ty: &'a Option<Type>,
        trait_path: &'a Option<Path>,
        self_kind: &'a SelfKind,
        params: &'a [Param],
        ret: &'a Option<Type>,
        is_async: bool,
        vis: &'a Visibility,
        generics: &'a [GenericParam],
        attrs: &'a [Attr],
        has_body: bool,
        in_test: bool,
        nested: bool,
    }
    let fns: Vec<Sig<'_>> = file
        .fns
        .iter()
        .map(|f| Sig {
            name: &f.name,
            module: &f.module,
            self_ty: &f.self_ty,
            trait_path: &f.trait_path,
            self_kind: &f.self_kind,
            params: &f.params,
            ret: &f.ret,
            is_async: f.is_async,
            vis: &f.vis,
            generics: &f.generics,
            attrs: &f.attrs,
            has_body: f.body.is_some(),
            in_test: f.in_test,
            nested: f.nested,
        })
        .collect();
    let view = (
        (&file.path, file.target, &file.module, file.in_test),
        fns,
        (&file.structs, &file.impls, &file.uses, &file.mods),
        (&file.type_aliases, &file.decls, &file.items),
        (&file.consts, &file.includes),
    );
    crate::model::without_spans(|| serde_json::to_vec(&view).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    const KEYS: &str = "use uuid::Uuid;
        pub fn fresh() -> String { let k = Uuid::new_v4(); format!(\"job-{k}\") }
        pub fn stable(order: &Order) -> String { format!(\"order-{}\", order.id) }
        pub fn looped(n: u32) -> String { if n == 0 { fresh() } else { looped(n - 1) } }";
    const STORE: &str = "pub struct Store { conn: redis::aio::ConnectionManager }
        impl Store {
            pub async fn claim(&self, key: &str) -> bool {
                let mut conn = self.conn.clone();
                conn.set_nx(key, 1).await.unwrap_or(false)
            }
        }";
    const HANDLER: &str = "use crate::keys::*;
        pub async fn handle(store: &crate::store::Store, order: &Order) {
            let key = fresh();
            store.claim(&key).await;
        }
        pub async fn again(store: &crate::store::Store, order: &Order) {
            store.claim(&looped(3)).await;
            store.claim(&stable(order)).await;
        }";

    fn package(keys: &str) -> Package {
        testing::package(
            "app",
            &["uuid", "redis"],
            &[
                ("crate", "mod keys; mod store; mod handler;"),
                ("crate::keys", keys),
                ("crate::store", STORE),
                ("crate::handler", HANDLER),
            ],
        )
    }

    /// The flows and summaries of every fn, and the entry points, as text.
    fn facts(package: &Package, analysis: &Analysis) -> Vec<String> {
        let s = analysis.summaries(package);
        let configured = ["handle".to_string(), "fresh".to_string()];
        let entries = analysis.entry_points(package, &configured);
        assert_eq!(entries.len(), 2, "{entries:?}");
        s.ids()
            .map(|id| format!("{id:?} {:?} {:?}", s.summary(id), s.flow(id)))
            .chain(entries.iter().map(|e| format!("{e:?}")))
            .collect()
    }

    /// Each version of `keys` in turn, the others' models kept: the reused analysis has the
    /// facts of a fresh one, and reused what `expected` says.
    fn replay(versions: &[&str], expected: &[Reuse]) {
        let settings = crate::settings::Settings::default();
        let mut package = package(KEYS);
        let analysis = Analysis::new(&package);
        facts(&package, &analysis);
        let mut kept = analysis.retain(&package, &settings);
        let mut reuses = Vec::new();
        for keys in versions {
            let edited = self::package(keys);
            package.files[1] = edited.files[1].clone();
            let (analysis, reuse) = Analysis::reusing(&package, &settings, Some(kept));
            let fresh = Analysis::new(&package);
            assert_eq!(
                facts(&package, &analysis),
                facts(&package, &fresh),
                "{keys}"
            );
            reuses.push(reuse);
            kept = analysis.retain(&package, &settings);
        }
        assert_eq!(reuses, expected);
    }

    /// Two call cycles in two files that do not reach each other, and a handler above each.
    const PING: &str = "pub fn ping(n: u32) -> String { if n == 0 { uuid::Uuid::new_v4().to_string() } else { pong(n - 1) } }
        pub fn pong(n: u32) -> String { if n == 0 { String::new() } else { ping(n - 1) } }";
    const TICK: &str =
        "pub fn tick(n: u32) -> String { if n == 0 { format!(\"t-{n}\") } else { tock(n - 1) } }
        pub fn tock(n: u32) -> String { if n == 0 { String::new() } else { tick(n - 1) } }";
    const ABOVE: &str = "pub async fn by_ping(c: &mut redis::aio::ConnectionManager) {
            let _: () = redis::cmd(\"SET\").arg(super::ping::ping(3)).query_async(c).await.unwrap();
        }
        pub async fn by_tick(c: &mut redis::aio::ConnectionManager) {
            let _: () = redis::cmd(\"SET\").arg(super::tick::tick(3)).query_async(c).await.unwrap();
        }";

    fn cycles(ping: &str) -> Package {
        testing::package(
            "app",
            &["uuid", "redis"],
            &[
                ("crate", "mod ping; mod tick; mod above;"),
                ("crate::ping", ping),
                ("crate::tick", TICK),
                ("crate::above", ABOVE),
            ],
        )
    }

    #[test]
    fn an_edit_in_a_call_cycle_walks_again_only_its_cycle_and_what_reads_it() {
        let settings = crate::settings::Settings::default();
        let mut package = cycles(PING);
        let analysis = Analysis::new(&package);
        analysis.summaries(&package);
        let mut kept = analysis.retain(&package, &settings);
        // ping's key becomes deterministic, then random again: each time its summary
        // changes, so ping, pong and by_ping above them are walked again; tick and tock,
        // whose cycle reads none of them, and by_tick are not.
        let deterministic = PING.replace("uuid::Uuid::new_v4().to_string()", "String::from(\"p\")");
        for edit in [deterministic.as_str(), PING] {
            package.files[1] = cycles(edit).files[1].clone();
            let (analysis, reuse) = Analysis::reusing(&package, &settings, Some(kept));
            assert_eq!(reuse, Reuse::Summaries);
            let fresh = Analysis::new(&package);
            let text = |a: &Analysis| {
                let s = a.summaries(&package);
                s.ids()
                    .map(|id| format!("{id:?} {:?} {:?}", s.summary(id), s.flow(id)))
                    .collect::<Vec<_>>()
            };
            assert_eq!(text(&analysis), text(&fresh));
            assert_eq!(analysis.summaries(&package).rewalked(), 3, "{edit}");
            kept = analysis.retain(&package, &settings);
        }
    }

    #[test]
    fn body_edits_reuse_the_analysis_and_match_a_fresh_one() {
        let deterministic = KEYS.replace("Uuid::new_v4()", "7");
        let moved = format!("// moved\n\n{KEYS}");
        let renamed = KEYS.replace("fn stable(", "fn steady(");
        let used = format!("use std::fmt::Write;\n{KEYS}");
        replay(
            &[
                // A callee's summary changes: its callers in another file (one of them
                // above the recursive `looped`) are walked again.
                &deterministic,
                KEYS,
                // Every span of the file moves.
                &moved,
                // Items change: nothing is reused.
                &renamed,
                &used,
                KEYS,
            ],
            &[
                Reuse::Summaries,
                Reuse::Summaries,
                Reuse::Summaries,
                Reuse::Fresh,
                Reuse::Fresh,
                Reuse::Fresh,
            ],
        );
    }
}
