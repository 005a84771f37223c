//! The relevance test ([`idem_lints::analysis::relevance`]) is a necessary condition: on every
//! UI fixture, each store operation and key use the walks find is one it would have seen.

use idem_lints::analysis::relevance::{fn_may_find, may_find, names_a_store_crate};
use idem_lints::analysis::store_ops::Store;
use idem_lints::analysis::{Analysis, FnFlow};
use idem_lints::catalog::{Catalog, SinkKind};
use idem_lints::model::{FnDef, Package};
use idem_lints::{testing, Settings};
use std::path::Path;

#[derive(Default)]
struct Seen {
    crate_ops: usize,
    named_ops: usize,
    key_uses: usize,
}

#[test]
fn every_fact_of_the_fixtures_is_one_the_test_sees() {
    let catalog = Catalog::default();
    let mut seen = Seen::default();
    // Every fixture of a lint or of the demo (the parse error fixtures do not parse).
    let crates: Vec<_> = [
        "nondeterministic_key",
        "check_then_act",
        "missing_idempotency_token",
        "unguarded_entry_point",
        "mark_outside_transaction",
        "demo",
    ]
    .iter()
    .flat_map(|d| testing::fixture_crates(&Path::new("../fixtures").join(d)))
    .collect();
    for dir in &crates {
        check_crate(dir, &catalog, &mut seen);
    }
    // Every kind of fact was met, so no assertion above held for want of cases.
    assert!(crates.len() >= 60, "fixture crates: {}", crates.len());
    assert!(
        seen.crate_ops >= 300,
        "store operations: {}",
        seen.crate_ops
    );
    assert!(
        seen.named_ops >= 15,
        "named store operations: {}",
        seen.named_ops
    );
    assert!(seen.key_uses >= 300, "key uses: {}", seen.key_uses);
}

/// Checks every fact of the crate at `dir`, as it is and without its dependencies: then only
/// paths and types written in the code make store operations, and only the text test can
/// see them.
fn check_crate(dir: &Path, catalog: &Catalog, seen: &mut Seen) {
    let (package, _) = testing::fixture_package(dir);
    let bare = Package {
        dependencies: Vec::new(),
        ..package.clone()
    };
    for package in [package, bare] {
        let analysis = Analysis::new(&package);
        let summaries = analysis.summaries(&package);
        for id in summaries.ids() {
            let (_, f) = id.def(&package);
            let flows = std::iter::once(summaries.flow(id)).chain(summaries.bound_flows(id));
            for flow in flows {
                check_flow(&package, f, flow, catalog, seen)
                    .unwrap_or_else(|fact| panic!("{}: `{}`: {fact}", dir.display(), f.name));
            }
        }
    }
}

/// The facts of `f`'s own walk (not those of callees), each against the condition that
/// stands for it.
fn check_flow(
    package: &Package,
    f: &FnDef,
    flow: &FnFlow,
    catalog: &Catalog,
    seen: &mut Seen,
) -> Result<(), String> {
    for ev in flow.store_events.iter().filter(|e| e.via.is_none()) {
        let ok = match ev.access.store {
            Store::Named => {
                seen.named_ops += 1;
                fn_may_find(f, catalog)
            }
            _ => {
                seen.crate_ops += 1;
                names_a_store_crate(package)
            }
        };
        if !ok {
            return Err(format!("store operation `{}` not seen", ev.access.command));
        }
    }
    for ku in flow.key_uses.iter().filter(|k| k.via.is_none()) {
        seen.key_uses += 1;
        let ok = match &ku.sink {
            SinkKind::GuardKey(_) => names_a_store_crate(package) || fn_may_find(f, catalog),
            // The header's name may be a constant of another item.
            SinkKind::Header(_) => may_find(package, &Settings::default()),
            _ => fn_may_find(f, catalog),
        };
        if !ok {
            return Err(format!("key use {:?} not seen", ku.sink));
        }
    }
    Ok(())
}

/// The same check on real crates: `IDEM_RELEVANCE_DIRS=dir:dir cargo test -p idem-lints --test
/// relevance -- --ignored` (each dir a crate with `Cargo.toml` and `src/`, such as the
/// lintcheck crates under `$CARGO_HOME/registry/src`).
#[test]
#[ignore = "needs crates on disk: set IDEM_RELEVANCE_DIRS"]
fn every_fact_of_real_crates_is_one_the_test_sees() {
    let dirs = std::env::var("IDEM_RELEVANCE_DIRS").expect("IDEM_RELEVANCE_DIRS is set");
    let catalog = Catalog::default();
    let mut seen = Seen::default();
    let mut crates = 0;
    for dir in dirs.split(':').filter(|d| !d.is_empty()) {
        check_crate(Path::new(dir), &catalog, &mut seen);
        crates += 1;
    }
    eprintln!(
        "{crates} crates: {} store operations ({} named), {} key uses, each seen",
        seen.crate_ops + seen.named_ops,
        seen.named_ops,
        seen.key_uses
    );
    assert!(crates > 0 && seen.crate_ops + seen.key_uses > 0);
}
