//! Workspace members analysed together (`src/link.rs`): a package is analysed with the
//! libraries of the members it depends on by path, so its findings follow what they do; an
//! edit in such a member is an edit of every package linking it (its cached findings and the
//! language server's kept analysis), and an edit elsewhere leaves the member alone.
//!
//! The fixtures under `fixtures/cross_member/` hold the per-lint cases (run by `tests/ui.rs`);
//! these tests edit one of them in a session, as the language server does.

mod common;

use cargo_idem_lint::cache::{DiskCache, Kind, Session, Store};
use cargo_idem_lint::config::Config;
use cargo_idem_lint::discovery::{self, Selection, Workspace};
use cargo_idem_lint::link::Links;
use cargo_idem_lint::parse::{self, Inputs, Overlays, ParseOptions};
use cargo_idem_lint::report::{self, Report};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A copy of `fixtures/cross_member/nondeterministic_key` (the key helpers in `common`, the
/// claims in `service`), canonical.
fn copy_of_fixture() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let from = common::repo().join("fixtures/cross_member/nondeterministic_key");
    for rel in [
        "Cargo.toml",
        "common/Cargo.toml",
        "common/src/lib.rs",
        "common/src/ids.rs",
        "service/Cargo.toml",
        "service/src/lib.rs",
    ] {
        let to = tmp.path().join(rel);
        std::fs::create_dir_all(to.parent().expect("parent")).expect("mkdir");
        std::fs::copy(from.join(rel), to).expect("copy");
    }
    let root = tmp.path().canonicalize().expect("canonical");
    (tmp, root)
}

fn workspace(dir: &Path) -> (Workspace, Config) {
    let ws = discovery::discover(&Selection {
        path: Some(dir.to_path_buf()),
        workspace: true,
        ..Selection::default()
    })
    .expect("discovers");
    let config = Config::load(&ws).expect("config");
    (ws, config)
}

fn index(ws: &Workspace, name: &str) -> usize {
    ws.packages
        .iter()
        .position(|p| p.name == name)
        .unwrap_or_else(|| panic!("no package {name}"))
}

/// Lines of package `package`'s findings, by lint.
fn findings(report: &Report, package: usize) -> Vec<(u32, &'static str)> {
    report
        .findings
        .iter()
        .filter(|f| f.package == package)
        .map(|f| {
            let src = report.source(package, f.diag.span.file);
            (
                src.position(f.diag.span.lo as usize).line as u32,
                f.diag.lint.name,
            )
        })
        .collect()
}

#[test]
fn discovery_links_a_members_path_dependencies_by_their_crate_name() {
    let (_tmp, dir) = copy_of_fixture();
    let (ws, _) = workspace(&dir);
    let service = &ws.packages[index(&ws, "service")];
    let links: Vec<(&str, &str)> = service
        .links
        .iter()
        .map(|l| (l.krate.as_str(), l.spec.name.as_str()))
        .collect();
    assert_eq!(links, [("common", "common")]);
    // Only the library target is linked: the member's tests and binaries are its own.
    let kinds: Vec<&Vec<String>> = service.links[0]
        .spec
        .targets
        .iter()
        .map(|t| &t.info.kind)
        .collect();
    assert_eq!(kinds, [&vec!["lib".to_owned()]]);
    assert!(ws.packages[index(&ws, "common")].links.is_empty());
}

#[test]
fn an_edit_upstream_reanalyses_the_dependent_and_an_edit_downstream_leaves_upstream_alone() {
    let (_tmp, dir) = copy_of_fixture();
    let (ws, config) = workspace(&dir);
    let (common, service) = (index(&ws, "common"), index(&ws, "service"));
    let session = Session::new();
    let mut buffers = Overlays::new();
    let first = session.check(&ws, &config, &[], &buffers).expect("checks");
    let keys = vec![(13, "nondeterministic_key"), (23, "nondeterministic_key")];
    assert_eq!(findings(&first, service), keys);
    // The member's own finding is its own, once.
    let own = vec![(15, "nondeterministic_key")];
    assert_eq!(findings(&first, common), own);

    // An edit in the service only: the common package's findings come from the session (it
    // is not analysed), the service's are analysed again and stay.
    let service_lib = dir.join("service/src/lib.rs");
    let text = std::fs::read_to_string(&service_lib).expect("read");
    buffers.insert(&service_lib, format!("{text}\n// edited\n").as_str());
    let downstream = session.check(&ws, &config, &[], &buffers).expect("checks");
    assert_eq!(
        downstream.reuse[common], None,
        "upstream not analysed again"
    );
    assert!(downstream.reuse[service].is_some(), "the edited package is");
    assert_eq!(findings(&downstream, service), keys);

    // The id helper made deterministic in `common`: the service's cached findings must not be
    // served, and its keys are no longer findings.
    let ids = dir.join("common/src/ids.rs");
    let text = std::fs::read_to_string(&ids).expect("read");
    let fixed = text.replace("Uuid::new_v4()", "prefix.len()");
    assert_ne!(fixed, text);
    buffers.insert(&ids, fixed.as_str());
    let upstream = session.check(&ws, &config, &[], &buffers).expect("checks");
    assert!(
        upstream.reuse[service].is_some(),
        "the dependent is analysed again"
    );
    assert!(findings(&upstream, service).is_empty());

    // And back: the findings return.
    buffers.remove(&ids);
    let back = session.check(&ws, &config, &[], &buffers).expect("checks");
    assert_eq!(findings(&back, service), keys);
}

#[test]
fn a_package_selected_alone_is_still_analysed_with_the_members_it_links() {
    let (_tmp, dir) = copy_of_fixture();
    let ws = discovery::discover(&Selection {
        path: Some(dir.clone()),
        packages: vec!["service".to_owned()],
        ..Selection::default()
    })
    .expect("discovers");
    let config = Config::load(&ws).expect("config");
    assert_eq!(ws.packages.len(), 1);
    let report = Session::new()
        .check(&ws, &config, &[], &Overlays::new())
        .expect("checks");
    assert_eq!(
        findings(&report, 0),
        [(13, "nondeterministic_key"), (23, "nondeterministic_key")]
    );
}

/// A disk cache that counts the models read back.
struct CountingModels {
    inner: DiskCache,
    models: AtomicUsize,
}

impl Store for CountingModels {
    fn get(&self, kind: Kind, key: u128, path: Option<&Path>) -> Option<Arc<[u8]>> {
        let got = self.inner.get(kind, key, path)?;
        if kind == Kind::Model {
            self.models.fetch_add(1, Ordering::SeqCst);
        }
        Some(got)
    }

    fn put(&self, kind: Kind, key: u128, path: Option<&Path>, bytes: Arc<[u8]>) {
        self.inner.put(kind, key, path, bytes);
    }
}

#[test]
fn an_unchanged_rerun_reads_no_model_of_a_linked_member() {
    let (_tmp, dir) = copy_of_fixture();
    let (ws, config) = workspace(&dir);
    let service = index(&ws, "service");
    let cache_dir = tempfile::tempdir().expect("tempdir");
    let store = CountingModels {
        inner: DiskCache::open_build(cache_dir.path(), 11).expect("opens"),
        models: AtomicUsize::new(0),
    };
    let run = || {
        let inputs = Inputs {
            cache: Some(&store),
            ..Inputs::default()
        };
        report::check_with(&ws, &ParseOptions::default(), &config, &[], inputs).expect("checks")
    };
    let keys = vec![(13, "nondeterministic_key"), (23, "nondeterministic_key")];
    assert_eq!(findings(&run(), service), keys);
    store.models.store(0, Ordering::SeqCst);
    // Every package's findings are cached: `common` is loaded for the key only, as the
    // packages themselves are (no file here holds a suppression comment).
    assert_eq!(findings(&run(), service), keys);
    assert_eq!(store.models.load(Ordering::SeqCst), 0);
}

/// The language server keeps each package's analysis and re-walks only the files that
/// changed: the member's files joined to the package must be the same models from one
/// analysis to the next (not copies), and new ones once the member's file is edited.
#[test]
fn a_session_gives_a_package_the_same_linked_models_until_the_member_changes() {
    let (_tmp, dir) = copy_of_fixture();
    let (ws, _) = workspace(&dir);
    let service = index(&ws, "service");
    let session = Session::new();
    let opts = ParseOptions::default();
    let policy = opts.read_policy(&ws);
    let joined = |buffers: &Overlays| {
        let inputs = Inputs {
            overlays: Some(buffers),
            cache: Some(&session),
            ..Inputs::default()
        };
        let mut links = Links::load(&ws, &[], &opts, &policy, inputs);
        links.complete(&vec![true; ws.packages.len()]);
        let own = parse::load_package_with(&ws.packages[service], &opts, &policy, inputs);
        (
            own.package.files.len(),
            links.of(service).join(&own.package),
        )
    };
    let mut buffers = Overlays::new();
    let (own, first) = joined(&buffers);
    let (_, second) = joined(&buffers);
    assert_eq!(first.files.len(), own + 2, "common's lib.rs and ids.rs");
    let same = |a: &idem_lints::model::Package, b: &idem_lints::model::Package| -> Vec<bool> {
        a.files[own..]
            .iter()
            .zip(&b.files[own..])
            .map(|(x, y)| Arc::ptr_eq(x, y))
            .collect()
    };
    assert_eq!(same(&first, &second), [true, true]);

    let ids = dir.join("common/src/ids.rs");
    let text = std::fs::read_to_string(&ids).expect("read");
    buffers.insert(&ids, format!("{text}\npub fn added() {{}}\n").as_str());
    let (_, edited) = joined(&buffers);
    let at = |p: &idem_lints::model::Package| {
        p.files[own..]
            .iter()
            .position(|f| f.path.ends_with("ids.rs"))
            .expect("ids.rs linked")
    };
    let i = at(&edited);
    assert!(!Arc::ptr_eq(
        &edited.files[own + i],
        &second.files[own + at(&second)]
    ));
    assert!(edited.files[own + i].fns.iter().any(|f| f.name == "added"));
    assert_eq!(edited.files[own + i].id.0 as usize, own + i);
}

#[test]
fn a_renamed_path_dependency_is_linked_under_its_new_name() {
    let (_tmp, dir) = copy_of_fixture();
    let manifest = dir.join("service/Cargo.toml");
    let text = std::fs::read_to_string(&manifest).expect("read");
    let renamed = text.replace(
        "common = { path = \"../common\" }",
        "shared = { package = \"common\", path = \"../common\" }",
    );
    assert_ne!(renamed, text);
    std::fs::write(&manifest, renamed).expect("write");
    let lib = dir.join("service/src/lib.rs");
    let text = std::fs::read_to_string(&lib).expect("read");
    std::fs::write(&lib, text.replace("common::", "shared::")).expect("write");
    let (ws, config) = workspace(&dir);
    let service = index(&ws, "service");
    assert_eq!(ws.packages[service].links[0].krate, "shared");
    let report = Session::new()
        .check(&ws, &config, &[], &Overlays::new())
        .expect("checks");
    assert_eq!(
        findings(&report, service),
        [(13, "nondeterministic_key"), (23, "nondeterministic_key")]
    );
}
