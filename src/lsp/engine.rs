//! What the server asks of the pipeline: one [`Root`] per workspace folder, each discovering
//! its packages and reading its config once (again after a config file is saved), and
//! linting them with the editor's buffers standing in for the files on disk.
//!
//! Everything the analysis needs goes through [`Root::analyze`], so the way a package is
//! re-analysed after a keystroke lives in one place.

use crate::cache::{DiskTexts, Session};
use crate::config::Config;
use crate::discovery::{self, Selection, Workspace};
use crate::parse::{Overlays, ParseOptions};
use crate::report::{Cancelled, Report};
use idem_lints::lint::PARSE_ERROR;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// What every root is linted with: the command line the server was started with (its level
/// flags and time budget apply as they do to a CLI run).
pub type Settings = crate::cli::Args;

/// The findings of one root, with the workspace they are about.
#[derive(Debug)]
pub struct Analysis {
    pub ws: Workspace,
    pub report: Report,
}

/// Why a root could not be linted: a config or manifest error, where it was written when the
/// message says so (1-based line and character column, as the CLI prints them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub file: Option<PathBuf>,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

pub enum Outcome {
    Analysed(Arc<Analysis>),
    Failed(Problem),
    /// Given up because the caller set the cancel flag.
    Cancelled,
}

/// A workspace folder of the client (or the package around a file opened outside them).
pub struct Root {
    pub dir: PathBuf,
    loaded: Option<Result<Loaded, Problem>>,
}

struct Loaded {
    ws: Workspace,
    config: Config,
    opts: ParseOptions,
    /// Parse results and findings of earlier analyses: after a keystroke only the changed
    /// buffer is parsed again, and only its package analysed again.
    session: Arc<Session>,
    /// Texts of the files without a buffer, read again only when their metadata changes.
    texts: Arc<DiskTexts>,
    /// The last text of each buffer that parsed: its module tree is kept while the buffer
    /// is mid-edit ([`Overlays::keep_module_tree`]).
    last_parsed: HashMap<PathBuf, Arc<str>>,
    /// The buffers the last finished analysis read: the ones whose text differs now are the
    /// edit, and their packages are analysed first ([`Root::analyze_first`]).
    analysed_buffers: HashMap<PathBuf, Arc<str>>,
}

impl Root {
    pub fn new(dir: PathBuf) -> Root {
        Root { dir, loaded: None }
    }

    /// Forgets the discovered packages and the config, so the next analysis reads them again
    /// (a `Cargo.toml` or `idem-lint.toml` was saved).
    pub fn reload(&mut self) {
        self.loaded = None;
    }

    /// Reads every file from disk again on the next analysis (the editor saw files change:
    /// the kept texts are checked against metadata, which cannot see every change, see
    /// [`DiskTexts`]).
    pub fn forget_texts(&self) {
        if let Some(Ok(l)) = &self.loaded {
            l.texts.forget();
        }
    }

    /// How many texts of files without a buffer are kept for the next analysis.
    pub fn kept_texts(&self) -> usize {
        match &self.loaded {
            Some(Ok(l)) => l.texts.len(),
            _ => 0,
        }
    }

    /// Whether `path` belongs to this root: below its folder or its cargo workspace.
    pub fn covers(&self, path: &Path) -> bool {
        let ws_root = match &self.loaded {
            Some(Ok(l)) => Some(l.ws.root.as_path()),
            _ => None,
        };
        path.starts_with(&self.dir) || ws_root.is_some_and(|r| path.starts_with(r))
    }

    /// The cargo workspace root, once discovered.
    pub fn workspace_root(&self) -> Option<&Path> {
        match &self.loaded {
            Some(Ok(l)) => Some(&l.ws.root),
            _ => None,
        }
    }

    /// Lints every package of the root, `overlays` replacing files on disk; gives up early
    /// once `cancel` is set.
    pub fn analyze(
        &mut self,
        settings: &Settings,
        overlays: &[(PathBuf, Arc<str>)],
        cancel: &AtomicBool,
    ) -> Outcome {
        self.analyze_first(settings, overlays, cancel, &mut |_| {})
    }

    /// [`Root::analyze`] that first lints only the packages holding the buffers edited since
    /// the last analysis (each with the members it links) and hands that analysis to
    /// `first`, when they are not every package: the diagnostics of the file being typed
    /// in come from its own package ([`crate::link::PackageLinks::own_findings`] keeps a
    /// package's findings in its own files), and the packages that depend on it, whose
    /// analysis on a large workspace is most of the work, follow in the whole analysis.
    /// Their findings are kept by the session, so the whole analysis does not redo them.
    pub fn analyze_first(
        &mut self,
        settings: &Settings,
        overlays: &[(PathBuf, Arc<str>)],
        cancel: &AtomicBool,
        first: &mut dyn FnMut(Arc<Analysis>),
    ) -> Outcome {
        if self.loaded.is_none() {
            self.loaded = Some(load(&self.dir, settings));
        }
        let loaded = match self.loaded.as_mut() {
            Some(Ok(l)) => l,
            Some(Err(p)) => return Outcome::Failed(p.clone()),
            None => unreachable!("loaded above"),
        };
        if let Some((ws, config)) = edited_packages(loaded, overlays) {
            let part = Loaded::sharing(loaded, ws, config);
            match check(&part, settings, overlays, cancel) {
                Ok(report) => first(Arc::new(Analysis {
                    ws: part.ws.clone(),
                    report,
                })),
                Err(e) if e.is::<Cancelled>() => return Outcome::Cancelled,
                // The whole analysis meets the same error and reports it.
                Err(_) => {}
            }
        }
        match check(loaded, settings, overlays, cancel) {
            Ok(report) => {
                remember_parsed(&mut loaded.last_parsed, &report, overlays);
                loaded.analysed_buffers = overlays.iter().cloned().collect();
                Outcome::Analysed(Arc::new(Analysis {
                    ws: loaded.ws.clone(),
                    report,
                }))
            }
            Err(e) if e.is::<Cancelled>() => Outcome::Cancelled,
            Err(e) => Outcome::Failed(locate(&format!("{e:#}"), &self.dir)),
        }
    }
}

impl Loaded {
    /// `ws` and `config` (a part of `loaded`'s) with `loaded`'s session and kept texts.
    fn sharing(loaded: &Loaded, ws: Workspace, config: Config) -> Loaded {
        Loaded {
            ws,
            config,
            opts: loaded.opts.clone(),
            session: loaded.session.clone(),
            texts: loaded.texts.clone(),
            last_parsed: loaded.last_parsed.clone(),
            analysed_buffers: HashMap::new(),
        }
    }
}

/// The workspace and config of `loaded` cut down to the packages holding the buffers that
/// changed since the last analysis (all buffers before the first one); `None` when that is
/// no package, or every package.
fn edited_packages(
    loaded: &Loaded,
    overlays: &[(PathBuf, Arc<str>)],
) -> Option<(Workspace, Config)> {
    let ws = &loaded.ws;
    let mut keep = vec![false; ws.packages.len()];
    for (path, text) in overlays {
        if loaded.analysed_buffers.get(path) == Some(text) {
            continue;
        }
        if let Some(i) = package_of(ws, path) {
            keep[i] = true;
        }
    }
    let kept = keep.iter().filter(|k| **k).count();
    if kept == 0 || kept == keep.len() {
        return None;
    }
    let mut part = ws.clone();
    let mut config = loaded.config.clone();
    let mut i = 0;
    part.packages.retain(|_| {
        i += 1;
        keep[i - 1]
    });
    if config.packages.len() == keep.len() {
        let mut i = 0;
        config.packages.retain(|_| {
            i += 1;
            keep[i - 1]
        });
    }
    Some((part, config))
}

/// The package whose manifest's directory is the closest one above `path`: the package a
/// file of a normal layout belongs to. (A file another package includes by `#[path]` gets
/// its findings there in the whole analysis.)
fn package_of(ws: &Workspace, path: &Path) -> Option<usize> {
    ws.packages
        .iter()
        .enumerate()
        .filter_map(|(i, p)| Some((i, p.manifest_path.parent()?)))
        .filter(|(_, dir)| path.starts_with(dir))
        .max_by_key(|(_, dir)| dir.components().count())
        .map(|(i, _)| i)
}

fn load(dir: &Path, settings: &Settings) -> Result<Loaded, Problem> {
    let has_manifest = dir.join("Cargo.toml").is_file();
    let selection = Selection {
        path: Some(dir.to_path_buf()),
        // An editor shows every member, not only the root package cargo would pick.
        workspace: has_manifest,
        ..Selection::default()
    };
    let fail = |e: anyhow::Error| locate(&format!("{e:#}"), dir);
    let ws = discovery::discover(&selection).map_err(fail)?;
    let config = Config::load(&ws).map_err(fail)?;
    let opts = crate::parse_options(settings, &config);
    Ok(Loaded {
        ws,
        config,
        opts,
        session: Arc::new(Session::new()),
        texts: Arc::new(DiskTexts::new()),
        last_parsed: HashMap::new(),
        analysed_buffers: HashMap::new(),
    })
}

/// Keeps the text of every buffer the analysis parsed without a problem.
fn remember_parsed(
    last: &mut HashMap<PathBuf, Arc<str>>,
    report: &Report,
    overlays: &[(PathBuf, Arc<str>)],
) {
    // Compared resolved: the module tree and the client may name a file differently.
    let resolved = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let broken: Vec<PathBuf> = report
        .findings
        .iter()
        .filter(|f| f.diag.lint.name == PARSE_ERROR.name)
        .map(|f| resolved(&report.source(f.package, f.diag.span.file).path))
        .collect();
    for (path, text) in overlays {
        if !broken.contains(&resolved(path)) {
            last.insert(path.clone(), text.clone());
        }
    }
}

/// The pipeline with buffers standing in for files.
fn check(
    loaded: &Loaded,
    settings: &Settings,
    overlays: &[(PathBuf, Arc<str>)],
    cancel: &AtomicBool,
) -> anyhow::Result<Report> {
    let mut buffers = Overlays::new().remembering(loaded.texts.clone());
    for (path, text) in overlays {
        buffers.insert(path, text.clone());
        if let Some(parsed) = loaded.last_parsed.get(path) {
            buffers.keep_module_tree(path, parsed.clone());
        }
    }
    loaded.session.check_until(
        &loaded.ws,
        &loaded.opts,
        &loaded.config,
        &settings.level_flags,
        &buffers,
        Some(cancel),
    )
}

/// Where an error message says the error is. The config's errors start with
/// `path:line:column: `; cargo's manifest errors name the manifest and say `line N, column
/// M`. Otherwise the problem is put at the start of the root's `Cargo.toml` (or nowhere when
/// the root has none).
pub fn locate(message: &str, dir: &Path) -> Problem {
    let message = message.trim().to_string();
    if let Some(p) = config_style(&message) {
        return p;
    }
    if let Some(p) = cargo_style(&message) {
        return p;
    }
    let manifest = dir.join("Cargo.toml");
    Problem {
        file: manifest.is_file().then_some(manifest),
        line: 1,
        column: 1,
        message,
    }
}

/// `/abs/path:3:5: rest`.
fn config_style(message: &str) -> Option<Problem> {
    // The path may hold `:`; the position is the first `:N:M: ` after a prefix that exists.
    let bytes = message.as_bytes();
    for (i, _) in message.match_indices(':') {
        let rest = &message[i + 1..];
        let Some((line, rest)) = split_number(rest, ':') else {
            continue;
        };
        let Some((column, rest)) = split_number(rest, ':') else {
            continue;
        };
        let file = PathBuf::from(&message[..i]);
        if bytes.first() == Some(&b'/') && file.is_file() {
            return Some(Problem {
                file: Some(file),
                line,
                column,
                message: rest.trim().to_string(),
            });
        }
    }
    None
}

/// Cargo: "failed to parse manifest at `/x/Cargo.toml` ... TOML parse error at line 3,
/// column 5 ...".
fn cargo_style(message: &str) -> Option<Problem> {
    let after = message.split_once("manifest at `")?.1;
    let file = PathBuf::from(after.split_once('`')?.0);
    let (line, column) = match message.split_once("at line ") {
        Some((_, rest)) => {
            let (line, rest) = split_number(rest, ',')?;
            let column = rest
                .trim_start()
                .strip_prefix("column ")
                .and_then(|r| {
                    let digits: String = r.chars().take_while(char::is_ascii_digit).collect();
                    digits.parse().ok()
                })
                .unwrap_or(1);
            (line, column)
        }
        None => (1, 1),
    };
    Some(Problem {
        file: Some(file),
        line,
        column,
        message: message.to_string(),
    })
}

/// `123<sep>rest` → `(123, rest)`.
fn split_number(s: &str, sep: char) -> Option<(usize, &str)> {
    let (n, rest) = s.split_once(sep)?;
    Some((n.parse().ok()?, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A copy of `fixtures/lsp`, canonical.
    fn fixture() -> (tempfile::TempDir, PathBuf) {
        let tmp = tempfile::tempdir().expect("tempdir");
        let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/lsp");
        for rel in ["Cargo.toml", "src/lib.rs", "src/transcode.rs"] {
            let to = tmp.path().join(rel);
            std::fs::create_dir_all(to.parent().expect("parent")).expect("mkdir");
            std::fs::copy(from.join(rel), to).expect("copy");
        }
        let root = tmp.path().canonicalize().expect("canonical");
        (tmp, root)
    }

    fn analysed(outcome: Outcome) -> Arc<Analysis> {
        match outcome {
            Outcome::Analysed(a) => a,
            Outcome::Failed(p) => panic!("analysis failed: {p:?}"),
            Outcome::Cancelled => panic!("not cancelled"),
        }
    }

    #[test]
    fn a_changed_buffer_is_the_only_file_parsed_again() {
        let (_tmp, dir) = fixture();
        let settings = crate::cli::Args::parse_from_env(["cargo-idem-lint".into()]).expect("args");
        let mut root = Root::new(dir.clone());
        let cold = analysed(root.analyze(&settings, &[], &AtomicBool::new(false)));
        assert_eq!(
            cold.report.packages[0].parsed.len(),
            2,
            "both files at first"
        );
        assert_eq!(cold.report.findings.len(), 3);

        let lib = dir.join("src/lib.rs");
        let text = std::fs::read_to_string(&lib).expect("read");
        let edited: Arc<str> = Arc::from(text.replace("Uuid::new_v4()", "order_id"));
        let warm =
            analysed(root.analyze(&settings, &[(lib.clone(), edited)], &AtomicBool::new(false)));
        let pkg = &warm.report.packages[0];
        let parsed: Vec<&Path> = pkg
            .parsed
            .iter()
            .map(|id| pkg.sources[id.0 as usize].path.as_path())
            .collect();
        assert_eq!(parsed, [lib.as_path()], "only the edited buffer");
        assert_eq!(warm.report.findings.len(), 2, "the key finding is gone");
    }

    /// Issue 38, item 4: an edit in a member is analysed first with the member's package
    /// alone, whose findings the whole analysis then takes from the session instead of
    /// analysing it again; the whole analysis gives what a fresh server gives.
    #[test]
    fn the_edited_package_goes_first_and_is_not_analysed_twice() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let from = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/cross_member/nondeterministic_key");
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
        let dir = tmp.path().canonicalize().expect("canonical");
        let settings = crate::cli::Args::parse_from_env(["cargo-idem-lint".into()]).expect("args");
        let no = AtomicBool::new(false);
        let mut root = Root::new(dir.clone());
        let mut firsts = Vec::new();
        let cold = analysed(root.analyze_first(&settings, &[], &no, &mut |a| firsts.push(a)));
        assert!(firsts.is_empty(), "no buffer, nothing first");
        assert_eq!(cold.report.findings.len(), 3);

        let ids = dir.join("common/src/ids.rs");
        let text = std::fs::read_to_string(&ids).expect("read");
        let edited: Arc<str> = Arc::from(text.replace("Uuid::new_v4()", "prefix.len()"));
        let buffers = [(ids.clone(), edited)];
        let warm = analysed(root.analyze_first(&settings, &buffers, &no, &mut |a| firsts.push(a)));
        assert_eq!(firsts.len(), 1);
        let names = |a: &Analysis| -> Vec<String> {
            a.ws.packages.iter().map(|p| p.name.clone()).collect()
        };
        assert_eq!(names(&firsts[0]), ["common"]);
        let common = names(&warm)
            .iter()
            .position(|n| n == "common")
            .expect("common");
        assert_eq!(
            warm.report.reuse[common], None,
            "common's findings come from the first part"
        );
        let fresh = analysed(Root::new(dir.clone()).analyze(&settings, &buffers, &no));
        let texts = |a: &Analysis| -> Vec<String> {
            a.report
                .findings
                .iter()
                .map(|f| format!("{} {:?}", f.diag.message, f.diag.span))
                .collect()
        };
        assert_eq!(texts(&warm), texts(&fresh));
        assert!(warm.report.findings.is_empty(), "{:?}", texts(&warm));

        // The same buffer again: nothing changed since, so nothing goes first.
        firsts.clear();
        analysed(root.analyze_first(&settings, &buffers, &no, &mut |a| firsts.push(a)));
        assert!(firsts.is_empty());
    }

    #[test]
    fn problems_point_where_their_message_says() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let toml = tmp.path().join("idem-lint.toml");
        std::fs::write(&toml, "[lints]\nnope = \"warn\"\n").expect("write");
        let msg = format!(
            "{}:2:1: key `lints.nope`: unknown lint `nope`",
            toml.display()
        );
        let p = locate(&msg, tmp.path());
        assert_eq!(p.file.as_deref(), Some(toml.as_path()));
        assert_eq!((p.line, p.column), (2, 1));
        assert_eq!(p.message, "key `lints.nope`: unknown lint `nope`");

        let manifest = tmp.path().join("Cargo.toml");
        let msg = format!(
            "failed to parse manifest at `{}` Caused by: TOML parse error at line 3, column 7 | x",
            manifest.display()
        );
        let p = locate(&msg, tmp.path());
        assert_eq!(p.file.as_deref(), Some(manifest.as_path()));
        assert_eq!((p.line, p.column), (3, 7));

        let p = locate("something else", tmp.path());
        assert_eq!((p.file, p.line), (None, 1));
    }
}
