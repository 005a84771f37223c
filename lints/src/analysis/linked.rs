//! Which fns of the workspace members a package links ([`crate::model::TargetInfo::linked`])
//! its analysis walks: those its own findings can read, not every fn of every member.
//!
//! A member's library is joined to each package that depends on it, and walking all of it
//! in each was most of a workspace run (lemmy: 13 times the files of its 41 members). The
//! package's own fns read a member's fn through their calls, and the comparison of entry
//! points (`unguarded_entry_point`: "without the guard that `receive` passes") reads the
//! paths from the member's entry points. So the walked fns are the callees, transitively,
//! of the package's own fns, of the members' entry points, and of the members' fns that call
//! one of the package's own fns (a trait the package implements). Every other member fn
//! keeps an empty summary and flow: nothing walked calls it, and its own findings are the
//! member's, reported by the member's own run.

use super::callgraph::CallGraph;
use super::entry::EntryPoint;
use super::flow::FnId;
use crate::model::Package;

/// Whether `package` links a member: only then are some fns left unwalked.
pub(crate) fn links_members(package: &Package) -> bool {
    package.targets.iter().any(|t| t.is_linked())
}

/// By [`CallGraph::index`], whether the fn is walked, given the package's `entries` (with
/// every configured entry point: a member's configured entry is compared too).
pub(crate) fn walked_fns(
    package: &Package,
    graph: &CallGraph,
    entries: &[EntryPoint],
) -> Vec<bool> {
    let linked_target: Vec<bool> = package.targets.iter().map(|t| t.is_linked()).collect();
    let linked = |id: FnId| {
        package
            .files
            .get(id.file as usize)
            .and_then(|f| linked_target.get(f.target))
            .copied()
            .unwrap_or(false)
    };
    let mut walked = vec![false; graph.len()];
    let mut stack: Vec<FnId> = Vec::new();
    let mark = |id: FnId, walked: &mut Vec<bool>, stack: &mut Vec<FnId>| {
        let i = graph.index(id);
        if !walked[i] {
            walked[i] = true;
            stack.push(id);
        }
    };
    for id in graph.ids() {
        if !linked(id) || graph.calls(id).iter().any(|c| !linked(c.callee)) {
            mark(id, &mut walked, &mut stack);
        }
    }
    for e in entries {
        mark(e.id, &mut walked, &mut stack);
    }
    while let Some(id) = stack.pop() {
        for call in graph.calls(id) {
            mark(call.callee, &mut walked, &mut stack);
        }
    }
    walked
}

#[cfg(test)]
mod tests {
    use crate::analysis::{Analysis, FnId, Summaries};
    use crate::model::{Package, TargetInfo};
    use crate::testing;

    /// `svc` (file 0) calls `common::used`; of the linked `common` (file 1), `used` calls
    /// `helper`, `job` is an entry point by configuration, and nothing calls `unused`.
    fn linked_package() -> Package {
        const CONN: &str = "c: &mut redis::aio::ConnectionManager";
        const R: &str = "redis::RedisResult<()>";
        let svc = format!("pub async fn handle({CONN}) -> {R} {{ common::used(c).await }}");
        let common = format!(
            "pub async fn used({CONN}) -> {R} {{ helper(c).await }}
             async fn helper({CONN}) -> {R} {{
                 if c.exists(\"seen\").await? {{ return Ok(()); }}
                 c.set(\"seen\", 1).await?;
                 Ok(())
             }}
             pub async fn job({CONN}) -> {R} {{ c.set(\"done\", 1).await?; Ok(()) }}
             pub async fn unused({CONN}) -> {R} {{ c.set(\"other\", 1).await?; Ok(()) }}"
        );
        let mut package =
            testing::package("svc", &["redis"], &[("crate", &svc), ("crate", &common)]);
        package
            .targets
            .push(TargetInfo::linked("common", "common/src/lib.rs".into()));
        std::sync::Arc::make_mut(&mut package.files[1]).target = 1;
        package
    }

    fn id(package: &Package, name: &str) -> FnId {
        let (fi, file) = package
            .files
            .iter()
            .enumerate()
            .find(|(_, f)| f.fns.iter().any(|f| f.name == name))
            .expect("the fn is in the package");
        let ni = file.fns.iter().position(|f| f.name == name).expect("found");
        FnId::new(fi, ni)
    }

    #[test]
    fn a_linked_fn_the_package_never_reaches_is_not_walked_and_the_others_are_as_before() {
        let package = linked_package();
        let mut analysis = Analysis::new(&package);
        analysis.entry_names = vec!["job".to_owned()];
        let walked = analysis.summaries(&package);
        let graph = analysis.call_graph(&package);
        let all = Summaries::compute(
            &package,
            &analysis.resolver,
            &analysis.types,
            &analysis.catalog,
            graph,
        );
        // What the package reads: its own fn, the member fns it calls (and theirs), the
        // member's entry points.
        for name in ["handle", "used", "helper", "job"] {
            let f = id(&package, name);
            assert!(
                walked.summary(f).identical(all.summary(f)),
                "{name}: {:?} against {:?}",
                walked.summary(f),
                all.summary(f)
            );
            assert_eq!(
                walked.flow(f).store_events.len(),
                all.flow(f).store_events.len(),
                "{name}"
            );
        }
        assert!(!walked.summary(id(&package, "helper")).accesses.is_empty());
        assert!(!walked.flow(id(&package, "job")).store_events.is_empty());
        // The member fn nobody here reaches: walked by the member's own run, not here.
        let unused = id(&package, "unused");
        assert!(!all.flow(unused).store_events.is_empty());
        assert!(walked.flow(unused).store_events.is_empty());
        assert_eq!(walked.rewalked(), 4);
    }

    #[test]
    fn a_package_without_linked_members_walks_every_fn() {
        let mut package = linked_package();
        package.targets.truncate(1);
        std::sync::Arc::make_mut(&mut package.files[1]).target = 0;
        let analysis = Analysis::new(&package);
        let s = analysis.summaries(&package);
        assert_eq!(s.rewalked(), analysis.call_graph(&package).len());
        assert!(!s.flow(id(&package, "unused")).store_events.is_empty());
    }
}
