//! The server's state and main loop: requests answered in order, buffer changes debounced,
//! and after each analysis the diagnostics of every file that has findings published (and
//! those of files whose findings went away cleared).
//!
//! One thread owns the state and answers every message at once; analyses run on worker
//! threads. A change waits [`Server::debounce`] for the next keystroke, then the root that
//! holds the file goes to a worker with every open buffer standing in for its file. A change
//! that reaches a root while its analysis runs makes that analysis stale: it is told to stop
//! (it gives up between files and before the lints), its result is dropped, and the root is
//! analysed again when it comes back, so only diagnostics of the latest text are published.
//! A hover or code action is answered from the last analysis when it saw the buffer's
//! current text; otherwise it waits for the analysis of that text. Every handler runs under
//! `catch_unwind`: a bug answers the request with an error and the session goes on.

use super::convert::{self, UriOf};
use super::documents::{Document, Documents};
use super::engine::{Analysis, Outcome, Root, Settings};
use super::position::Encoding;
use anyhow::{anyhow, bail, Context, Result};
use crossbeam_channel::{unbounded, Receiver, Sender};
use lsp_server::{Connection, ErrorCode, Message, Notification, Request, Response};
use lsp_types::notification::{self as note, Notification as _};
use lsp_types::request::{self as req, Request as _};
use lsp_types::*;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Names of the files whose saving changes what is linted and how.
const CONFIG_FILES: [&str; 2] = ["Cargo.toml", crate::config::FILE_NAME];

pub struct Server {
    conn: Connection,
    settings: Arc<Settings>,
    /// How long a change waits for the next one before the analysis runs.
    debounce: Duration,
    enc: Encoding,
    initialized: bool,
    shutdown: bool,
    docs: Documents,
    roots: Vec<RootState>,
    /// Id of the next root added.
    next_root: u64,
    /// Workspace folders without a `Cargo.toml`: a file below one that no cargo package
    /// holds is linted with the folder as a plain directory.
    plain_folders: Vec<PathBuf>,
    /// Analyses, first parts and finished ones, sent by the worker threads.
    done_tx: Sender<Event>,
    done_rx: Receiver<Event>,
}

struct RootState {
    /// Stable across folders coming and going (indices are not).
    id: u64,
    dir: PathBuf,
    /// The client named `dir` as a workspace folder: the root publishes for the files below
    /// it and for the buffers opened in this server, never for the rest of a larger cargo
    /// workspace, which may be another server's (an editor that starts one server per
    /// member would otherwise see every finding once per server, and one server's disk text
    /// over another's unsaved buffer).
    folder: bool,
    /// The cargo workspace root, once an analysis discovered it.
    ws_root: Option<PathBuf>,
    /// `None` while a worker analyses it.
    root: Option<Root>,
    /// Counts the changes that reach this root: an analysis started at an older count is
    /// stale when it finishes, and is not published.
    generation: u64,
    /// When the pending analysis is due.
    due: Option<Instant>,
    running: Option<Running>,
    /// A config file was saved while the root was out on a worker: reload it on return.
    reload: bool,
    /// A file was saved or changed on disk while the root was out on a worker: forget its
    /// kept texts on return.
    forget_texts: bool,
    /// An analysis of this root finished and was not stale (whatever its outcome).
    analysed: bool,
    last: Option<Arc<Analysis>>,
    /// What was last published per file, to send only what changed.
    published: HashMap<PathBuf, (Option<i32>, Vec<Diagnostic>)>,
    /// Hovers and code actions on a buffer changed since [`RootState::last`], answered when
    /// the analysis of the text on screen is done.
    waiting: Vec<Request>,
}

/// An analysis out on a worker.
struct Running {
    cancel: Arc<AtomicBool>,
    /// The version of every open buffer it reads, for the diagnostics it publishes.
    versions: HashMap<PathBuf, i32>,
}

/// What a worker sends back: the root it took, and how its analysis went (`None` when the
/// analysis panicked).
struct Done {
    id: u64,
    generation: u64,
    root: Root,
    outcome: Option<Outcome>,
}

/// What a worker sends: the analysis of the edited packages before the whole one
/// ([`Root::analyze_first`]), then the root back.
enum Event {
    First {
        id: u64,
        generation: u64,
        analysis: Arc<Analysis>,
    },
    Done(Box<Done>),
}

/// Stack of an analysis worker: the pipeline's own pools do the deep work, but the worker
/// runs parts of it too and must not be the thread that overflows.
const WORKER_STACK: usize = 64 << 20;

/// An error answer to a request.
struct Failure {
    code: ErrorCode,
    message: String,
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Failure {
        Failure {
            code: ErrorCode::InvalidParams,
            message: format!("{e:#}"),
        }
    }
}

/// Buffer changes applied per turn of the main loop while messages may be waiting: one
/// `didChange` can hold thousands (8,000 ranged edits of a 1.1 MB buffer took 0.45 s in one
/// go), and `shutdown`, hovers on other files and new changes are answered between steps.
pub const CHANGES_PER_TURN: usize = 64;

/// Whether the main loop goes on after a turn.
enum Turn {
    Continue,
    Exit,
}

/// What a request handler decided.
enum Answer {
    Now(Value),
    /// Needs the analysis of the current text of this root first.
    Later(u64),
}

impl Server {
    pub fn new(conn: Connection, settings: Settings, debounce: Duration) -> Server {
        let (done_tx, done_rx) = unbounded();
        Server {
            conn,
            settings: Arc::new(settings),
            debounce,
            enc: Encoding::Utf16,
            initialized: false,
            shutdown: false,
            docs: Documents::default(),
            roots: Vec::new(),
            next_root: 0,
            plain_folders: Vec::new(),
            done_tx,
            done_rx,
        }
    }

    /// Serves until `exit` (or the client closes stdin). `exit` without `shutdown` first is
    /// an error, as the protocol says (exit code 1 there; 2 here, like every error).
    pub fn serve(mut self) -> Result<()> {
        loop {
            if let Turn::Exit = self.turn()? {
                return Ok(());
            }
        }
    }

    /// One turn of the main loop: starts the analyses that are due, then handles one
    /// message, one finished analysis, a timer, or a step of the buffer changes not applied
    /// yet ([`CHANGES_PER_TURN`]), whichever comes first.
    fn turn(&mut self) -> Result<Turn> {
        self.start_due(Instant::now());
        let next = self
            .roots
            .iter()
            .filter(|r| r.running.is_none())
            .filter_map(|r| r.due)
            .min();
        let timeout = match next {
            // Changes to apply: a message that came meanwhile goes first (or between steps).
            _ if self.docs.any_pending() => crossbeam_channel::after(Duration::ZERO),
            Some(due) => crossbeam_channel::after(due.saturating_duration_since(Instant::now())),
            None => crossbeam_channel::never(),
        };
        let msg = crossbeam_channel::select! {
            recv(self.conn.receiver) -> m => match m {
                Ok(msg) => msg,
                Err(_) => return Ok(Turn::Exit),
            },
            recv(self.done_rx) -> d => {
                // The server holds a sender, so the channel stays open.
                match d {
                    Ok(Event::Done(done)) => self.finished(*done),
                    Ok(Event::First { id, generation, analysis }) => {
                        self.first_part(id, generation, &analysis);
                        drop_elsewhere(analysis);
                    }
                    Err(_) => {}
                }
                return Ok(Turn::Continue);
            },
            recv(timeout) -> _ => {
                self.docs.step(CHANGES_PER_TURN);
                return Ok(Turn::Continue);
            },
        };
        match msg {
            Message::Request(r) => self.on_request(r),
            Message::Notification(n) if n.method == note::Exit::METHOD => {
                if self.shutdown {
                    return Ok(Turn::Exit);
                }
                bail!("the client sent `exit` without `shutdown`");
            }
            Message::Notification(n) => self.on_notification(n),
            // The server sends no requests, so no response is awaited.
            Message::Response(_) => {}
        }
        Ok(Turn::Continue)
    }

    fn on_request(&mut self, r: Request) {
        let id = r.id.clone();
        let method = r.method.clone();
        let answer = std::panic::catch_unwind(AssertUnwindSafe(|| self.request(&r)))
            .unwrap_or_else(|_| {
                Err(Failure {
                    code: ErrorCode::InternalError,
                    message: format!("internal error while handling `{method}`"),
                })
            });
        let response = match answer {
            Ok(Answer::Now(value)) => Response::new_ok(id, value),
            Ok(Answer::Later(root)) => {
                if let Some(state) = self.roots.iter_mut().find(|s| s.id == root) {
                    state.waiting.push(r);
                }
                return;
            }
            Err(f) => Response::new_err(id, f.code as i32, f.message),
        };
        self.send(response.into());
    }

    fn request(&mut self, r: &Request) -> Result<Answer, Failure> {
        if r.method == req::Initialize::METHOD {
            let params: InitializeParams = params(r.params.clone())?;
            return Ok(Answer::Now(to_value(self.initialize(params))));
        }
        if !self.initialized {
            return Err(Failure {
                code: ErrorCode::ServerNotInitialized,
                message: "the first request must be `initialize`".into(),
            });
        }
        if self.shutdown {
            return Err(Failure {
                code: ErrorCode::InvalidRequest,
                message: "the server is shutting down".into(),
            });
        }
        if r.method == req::Shutdown::METHOD {
            self.shutdown = true;
            self.docs.drop_all_pending();
            // Nothing will be published any more: running analyses stop early, waiting
            // requests get an empty answer.
            for state in &mut self.roots {
                if let Some(run) = &state.running {
                    run.cancel.store(true, Ordering::Relaxed);
                }
                state.due = None;
            }
            let waiting: Vec<Request> = self
                .roots
                .iter_mut()
                .flat_map(|s| std::mem::take(&mut s.waiting))
                .collect();
            for w in waiting {
                self.send(Response::new_ok(w.id, Value::Null).into());
            }
            return Ok(Answer::Now(Value::Null));
        }
        let path = match r.method.as_str() {
            req::HoverRequest::METHOD => {
                let p: HoverParams = params(r.params.clone())?;
                path_of(&p.text_document_position_params.text_document.uri)?
            }
            req::CodeActionRequest::METHOD => {
                let p: CodeActionParams = params(r.params.clone())?;
                path_of(&p.text_document.uri)?
            }
            other => {
                return Err(Failure {
                    code: ErrorCode::MethodNotFound,
                    message: format!("`{other}` is not supported"),
                })
            }
        };
        // Answered about the text the client has, with every change it sent.
        self.docs.settle(&path);
        let Some(i) = self.root_of(&path) else {
            return Ok(Answer::Now(self.answer(r, None)?));
        };
        match self.current_analysis(i, &path) {
            Ok(analysis) => Ok(Answer::Now(self.answer(r, analysis.as_deref())?)),
            Err(()) => Ok(Answer::Later(self.roots[i].id)),
        }
    }

    /// The answer to a hover or code action, from `analysis` (the text on screen).
    fn answer(&self, r: &Request, analysis: Option<&Analysis>) -> Result<Value, Failure> {
        match r.method.as_str() {
            req::HoverRequest::METHOD => {
                let p: HoverParams = params(r.params.clone())?;
                let doc = &p.text_document_position_params;
                let path = path_of(&doc.text_document.uri)?;
                let hover = analysis.and_then(|a| convert::hover(a, &path, doc.position, self.enc));
                Ok(to_value(hover))
            }
            req::CodeActionRequest::METHOD => {
                let p: CodeActionParams = params(r.params.clone())?;
                let wants_quickfix = p.context.only.as_ref().is_none_or(|only| {
                    only.iter()
                        .any(|k| k == &CodeActionKind::QUICKFIX || k.as_str().is_empty())
                });
                let path = path_of(&p.text_document.uri)?;
                let actions = match analysis {
                    Some(a) if wants_quickfix => {
                        convert::code_actions(a, &path, p.range, self.enc, self)
                    }
                    _ => Vec::new(),
                };
                let actions: Vec<CodeActionOrCommand> = actions
                    .into_iter()
                    .map(CodeActionOrCommand::CodeAction)
                    .collect();
                Ok(to_value(actions))
            }
            other => Err(Failure {
                code: ErrorCode::MethodNotFound,
                message: format!("`{other}` is not supported"),
            }),
        }
    }

    /// The analysis a request on `path` (in root `i`) is answered from: the last one when
    /// it saw the buffer's current text (its positions are the screen's, even while a newer
    /// analysis of other files runs); `Err` when the buffer changed since and an analysis
    /// of it is pending or running (the request waits for it).
    fn current_analysis(&mut self, i: usize, path: &Path) -> Result<Option<Arc<Analysis>>, ()> {
        let text = self.docs.get(path).map(|d| d.text.clone());
        let state = &mut self.roots[i];
        let busy = state.running.is_some() || state.due.is_some();
        match &state.last {
            Some(a) if saw(a, path, text.as_deref()) => Ok(Some(a.clone())),
            _ if busy => Err(()),
            // Never analysed (the file was not opened): analyse now and answer then.
            None if !state.analysed => {
                state.due = Some(Instant::now());
                state.generation += 1;
                Err(())
            }
            _ => Ok(None),
        }
    }

    fn initialize(&mut self, p: InitializeParams) -> InitializeResult {
        self.enc = Encoding::negotiate(
            p.capabilities
                .general
                .as_ref()
                .and_then(|g| g.position_encodings.as_deref()),
        );
        #[allow(deprecated)] // `rootUri` is what clients without folders still send.
        let folders: Vec<PathBuf> = match (&p.workspace_folders, &p.root_uri) {
            (Some(folders), _) if !folders.is_empty() => folders
                .iter()
                .filter_map(|f| path_of(&f.uri).ok())
                .collect(),
            (_, Some(uri)) => path_of(uri).ok().into_iter().collect(),
            _ => Vec::new(),
        };
        // A path on the command line is a folder too.
        let from_args: Vec<PathBuf> = self.settings.path.iter().map(|p| canonical(p)).collect();
        for folder in folders.into_iter().chain(from_args) {
            self.add_folder(folder);
        }
        self.initialized = true;
        InitializeResult {
            capabilities: capabilities(self.enc),
            server_info: Some(ServerInfo {
                name: "idem-lint".into(),
                version: Some(env!("CARGO_PKG_VERSION").into()),
            }),
        }
    }

    fn on_notification(&mut self, n: Notification) {
        if !self.initialized {
            return;
        }
        let method = n.method.clone();
        let done = std::panic::catch_unwind(AssertUnwindSafe(|| self.notification(n)));
        match done {
            Ok(Ok(())) => {}
            Ok(Err(e)) => log(&format!("`{method}`: {e:#}")),
            Err(_) => log(&format!("internal error while handling `{method}`")),
        }
    }

    fn notification(&mut self, n: Notification) -> Result<()> {
        let now = Instant::now();
        match n.method.as_str() {
            note::DidOpenTextDocument::METHOD => {
                let p: DidOpenTextDocumentParams = params(n.params).map_err(fail)?;
                let path = path_of(&p.text_document.uri).map_err(fail)?;
                let doc = Document {
                    uri: p.text_document.uri,
                    version: p.text_document.version,
                    text: Arc::from(p.text_document.text),
                };
                self.docs.open(path.clone(), doc);
                self.schedule(&path, now);
            }
            note::DidChangeTextDocument::METHOD => {
                let p: DidChangeTextDocumentParams = params(n.params).map_err(fail)?;
                let path = path_of(&p.text_document.uri).map_err(fail)?;
                self.docs
                    .change(&path, p.text_document.version, p.content_changes, self.enc)?;
                self.schedule(&path, now + self.debounce);
            }
            note::DidSaveTextDocument::METHOD => {
                let p: DidSaveTextDocumentParams = params(n.params).map_err(fail)?;
                let path = path_of(&p.text_document.uri).map_err(fail)?;
                self.saved(&path, now);
            }
            note::DidCloseTextDocument::METHOD => {
                let p: DidCloseTextDocumentParams = params(n.params).map_err(fail)?;
                let path = path_of(&p.text_document.uri).map_err(fail)?;
                // The file on disk is what counts again.
                if self.docs.close(&path).is_some() {
                    self.schedule(&path, now);
                }
            }
            note::DidChangeWatchedFiles::METHOD => {
                let p: DidChangeWatchedFilesParams = params(n.params).map_err(fail)?;
                for change in p.changes {
                    if let Ok(path) = path_of(&change.uri) {
                        self.saved(&path, now);
                    }
                }
            }
            note::DidChangeWorkspaceFolders::METHOD => {
                for dir in folder_paths(&n.params, "removed") {
                    self.remove_folder(&dir);
                }
                for dir in folder_paths(&n.params, "added") {
                    self.add_folder(dir);
                }
            }
            // Nothing to do for the rest (`initialized`, `$/cancelRequest`, `$/setTrace`,
            // configuration changes).
            _ => {}
        }
        Ok(())
    }

    /// A saved config file reloads the roots it belongs to; a saved source file is linted
    /// at once.
    fn saved(&mut self, path: &Path, now: Instant) {
        let is_config = path
            .file_name()
            .is_some_and(|n| CONFIG_FILES.iter().any(|c| n == *c));
        if is_config {
            for r in self.roots.iter_mut().filter(|r| r.covers(path)) {
                match &mut r.root {
                    Some(root) => root.reload(),
                    None => r.reload = true,
                }
                r.changed(now);
            }
            return;
        }
        // Every root: a file may be read through a symlink from outside the root's folder.
        for r in self.roots.iter_mut() {
            match &r.root {
                Some(root) => root.forget_texts(),
                None => r.forget_texts = true,
            }
        }
        self.schedule(path, now);
    }

    fn add_folder(&mut self, dir: PathBuf) {
        let dir = canonical(&dir);
        if !dir.join("Cargo.toml").is_file() {
            // A folder of several crates (or none): each file is linted with the package
            // around it, found when the file is opened.
            self.plain_folders.push(dir);
            return;
        }
        match self.roots.iter().position(|r| r.dir == dir) {
            Some(i) => self.roots[i].folder = true,
            None => {
                // Linted now, not when a file in it is first opened: the folder's findings
                // are what the user added it for.
                let i = self.add_root(dir);
                self.roots[i].folder = true;
                self.roots[i].changed(Instant::now());
            }
        }
    }

    fn add_root(&mut self, dir: PathBuf) -> usize {
        self.next_root += 1;
        self.roots.push(RootState::new(self.next_root, dir));
        self.roots.len() - 1
    }

    fn remove_folder(&mut self, dir: &Path) {
        let dir = canonical(dir);
        self.plain_folders.retain(|d| *d != dir);
        let (gone, kept): (Vec<RootState>, Vec<RootState>) = std::mem::take(&mut self.roots)
            .into_iter()
            .partition(|r| r.dir.starts_with(&dir));
        self.roots = kept;
        for r in gone {
            if let Some(run) = &r.running {
                // Its result finds no root and is dropped.
                run.cancel.store(true, Ordering::Relaxed);
            }
            for w in r.waiting {
                self.send(Response::new_ok(w.id, Value::Null).into());
            }
            for path in r.published.keys() {
                self.publish(path, None, Vec::new());
            }
        }
    }

    /// The root that answers for `path`: the innermost whose directory holds it, else the
    /// first whose cargo workspace does.
    fn owner(&self, path: &Path) -> Option<usize> {
        self.roots
            .iter()
            .enumerate()
            .filter(|(_, r)| path.starts_with(&r.dir))
            .max_by_key(|(_, r)| r.dir.components().count())
            .or_else(|| self.roots.iter().enumerate().find(|(_, r)| r.covers(path)))
            .map(|(i, _)| i)
    }

    /// Whether root `i` publishes the diagnostics of `path`: it owns the file, and the file
    /// is below the folder the client gave (or the root is the package around a file
    /// opened outside every folder), or is a buffer opened in this server.
    fn publishes(&self, i: usize, path: &Path) -> bool {
        let r = &self.roots[i];
        self.owner(path) == Some(i)
            && (!r.folder || path.starts_with(&r.dir) || self.docs.get(path).is_some())
    }

    /// The root `path` belongs to: [`Server::owner`], else a new one for the package
    /// around it (or for the plain folder holding it).
    fn root_of(&mut self, path: &Path) -> Option<usize> {
        let best = self.owner(path);
        if best.is_some() {
            return best;
        }
        let folder = self
            .plain_folders
            .iter()
            .filter(|f| path.starts_with(f))
            .max_by_key(|f| f.components().count())
            .cloned();
        let package = path
            .ancestors()
            .skip(1)
            .take_while(|d| folder.as_ref().is_none_or(|f| d.starts_with(f)))
            .find(|d| d.join("Cargo.toml").is_file())
            .map(Path::to_path_buf);
        let dir = package.or(folder)?;
        Some(self.add_root(dir))
    }

    /// Marks the root of `path` for analysis at `due` (the earlier of two deadlines wins
    /// only for an immediate one: a keystroke pushes a pending debounce back).
    fn schedule(&mut self, path: &Path, due: Instant) {
        let Some(i) = self.root_of(path) else {
            log(&format!(
                "`{}` is in no cargo package or workspace folder; not linted",
                path.display()
            ));
            return;
        };
        self.roots[i].changed(due);
    }

    /// Starts the analysis of every root that is due and not already out on a worker.
    fn start_due(&mut self, now: Instant) {
        if self.shutdown {
            return;
        }
        for i in 0..self.roots.len() {
            let r = &self.roots[i];
            if r.running.is_none() && r.root.is_some() && r.due.is_some_and(|d| d <= now) {
                // An analysis reads every buffer it covers as the client has it: it starts
                // once their changes are applied.
                let pending = self
                    .docs
                    .iter()
                    .any(|(p, _)| r.covers(p) && self.docs.is_pending(p));
                if !pending {
                    self.start(i);
                }
            }
        }
    }

    /// Hands root `i` to a worker thread with the open buffers it covers.
    fn start(&mut self, i: usize) {
        let state = &mut self.roots[i];
        let Some(mut root) = state.root.take() else {
            return;
        };
        state.due = None;
        let mut overlays: Vec<(PathBuf, Arc<str>)> = Vec::new();
        let mut versions = HashMap::new();
        for (path, doc) in self.docs.iter() {
            if state.covers(path) {
                overlays.push((path.clone(), doc.text.clone()));
                versions.insert(path.clone(), doc.version);
            }
        }
        let cancel = Arc::new(AtomicBool::new(false));
        let (id, generation) = (state.id, state.generation);
        state.running = Some(Running {
            cancel: cancel.clone(),
            versions,
        });
        let settings = self.settings.clone();
        let tx = self.done_tx.clone();
        let work = move || {
            let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
                root.analyze_first(&settings, &overlays, &cancel, &mut |analysis| {
                    let _ = tx.send(Event::First {
                        id,
                        generation,
                        analysis,
                    });
                })
            }))
            .ok();
            // The server gone means nobody waits for the result.
            let _ = tx.send(Event::Done(Box::new(Done {
                id,
                generation,
                root,
                outcome,
            })));
        };
        let spawned = std::thread::Builder::new()
            .name("idem-lint-analysis".into())
            .stack_size(WORKER_STACK)
            .spawn(work);
        if let Err(e) = spawned {
            // The root went with the closure; a fresh one reloads on the next change.
            log(&format!("could not start an analysis thread: {e}"));
            let state = &mut self.roots[i];
            state.running = None;
            state.root = Some(Root::new(state.dir.clone()));
        }
    }

    /// A worker is done: the root comes back, and its result is published when nothing
    /// changed since it started.
    fn finished(&mut self, done: Done) {
        let Some(i) = self.roots.iter().position(|r| r.id == done.id) else {
            return;
        };
        let state = &mut self.roots[i];
        let mut root = done.root;
        if std::mem::take(&mut state.reload) {
            root.reload();
        }
        if std::mem::take(&mut state.forget_texts) {
            root.forget_texts();
        }
        state.ws_root = root.workspace_root().map(Path::to_path_buf);
        state.root = Some(root);
        let Some(running) = state.running.take() else {
            return;
        };
        if done.generation != state.generation || self.shutdown {
            // Stale: a newer change is pending (and starts on the next turn of the loop).
            return;
        }
        state.analysed = true;
        self.publish_outcome(i, done.outcome, &running.versions);
        let waiting = std::mem::take(&mut self.roots[i].waiting);
        for r in waiting {
            self.on_request(r);
        }
    }

    /// The analysis of the edited packages, before the whole one: the diagnostics of their
    /// files are published now, when nothing changed since it started; every other file
    /// keeps what it has until the whole analysis is done.
    fn first_part(&mut self, id: u64, generation: u64, analysis: &Analysis) {
        let Some(i) = self.roots.iter().position(|r| r.id == id) else {
            return;
        };
        let state = &self.roots[i];
        let Some(running) = &state.running else {
            return;
        };
        if generation != state.generation || self.shutdown {
            return;
        }
        let versions = running.versions.clone();
        let mut now = convert::diagnostics(analysis, self.enc, &*self);
        // The files of these packages with no finding now are cleared.
        for src in analysis.report.packages.iter().flat_map(|p| &p.sources) {
            now.entry(src.path.clone()).or_default();
        }
        for (path, diags) in now {
            if !self.publishes(i, &path) {
                continue;
            }
            let version = versions.get(&path).copied();
            let entry = (version, diags);
            let published = &self.roots[i].published;
            let unchanged = match published.get(&path) {
                Some(p) => *p == entry,
                None => entry.1.is_empty() && version.is_none(),
            };
            if unchanged {
                continue;
            }
            self.publish(&path, version, entry.1.clone());
            if entry.1.is_empty() && version.is_none() {
                self.roots[i].published.remove(&path);
            } else {
                self.roots[i].published.insert(path, entry);
            }
        }
    }

    fn publish_outcome(
        &mut self,
        i: usize,
        outcome: Option<Outcome>,
        versions: &HashMap<PathBuf, i32>,
    ) {
        let now: BTreeMap<PathBuf, Vec<Diagnostic>> = match outcome {
            Some(Outcome::Analysed(a)) => {
                let mut diags = convert::diagnostics(&a, self.enc, &*self);
                diags.retain(|path, _| self.publishes(i, path));
                drop_elsewhere(self.roots[i].last.replace(a));
                diags
            }
            Some(Outcome::Failed(problem)) => {
                // The findings of the last good configuration stay: a half-edited config
                // must not blank every file while it is being fixed.
                let mut kept = match &self.roots[i].last {
                    Some(a) => convert::diagnostics(a, self.enc, &*self),
                    None => BTreeMap::new(),
                };
                kept.retain(|path, _| self.publishes(i, path));
                match &problem.file {
                    Some(file) => {
                        self.docs.settle(file);
                        let text = self
                            .docs
                            .get(file)
                            .map(|d| d.text.to_string())
                            .or_else(|| std::fs::read_to_string(file).ok());
                        let d = convert::problem_diagnostic(&problem, text.as_deref(), self.enc);
                        kept.entry(file.clone()).or_default().push(d);
                    }
                    None => self.show_error(&problem.message),
                }
                kept
            }
            // Cancelled only when a newer change came, which made this result stale.
            Some(Outcome::Cancelled) => return,
            None => {
                // The previous diagnostics stay: better stale than none.
                log("internal error during the analysis; diagnostics not updated");
                return;
            }
        };
        let mut now = now;
        // An open buffer always hears back, findings or not: the client learns its version
        // was linted.
        for path in versions.keys().filter(|p| self.publishes(i, p)) {
            now.entry(path.clone()).or_default();
        }
        let stale: Vec<PathBuf> = self.roots[i]
            .published
            .keys()
            .filter(|p| !now.contains_key(*p))
            .cloned()
            .collect();
        for path in stale {
            self.roots[i].published.remove(&path);
            self.publish(&path, versions.get(&path).copied(), Vec::new());
        }
        for (path, diags) in now {
            let version = versions.get(&path).copied();
            let entry = (version, diags);
            if self.roots[i].published.get(&path) == Some(&entry) {
                continue;
            }
            self.publish(&path, version, entry.1.clone());
            self.roots[i].published.insert(path, entry);
        }
    }

    fn publish(&self, path: &Path, version: Option<i32>, diagnostics: Vec<Diagnostic>) {
        let Some(uri) = self.uri_of(path) else {
            return;
        };
        let params = PublishDiagnosticsParams {
            uri,
            diagnostics,
            version,
        };
        self.send(Notification::new(note::PublishDiagnostics::METHOD.into(), params).into());
    }

    fn show_error(&self, message: &str) {
        let params = ShowMessageParams {
            typ: MessageType::ERROR,
            message: format!("idem-lint: {message}"),
        };
        self.send(Notification::new(note::ShowMessage::METHOD.into(), params).into());
    }

    fn send(&self, msg: Message) {
        // A closed channel means the client is gone; the loop ends on the next receive.
        let _ = self.conn.sender.send(msg);
    }
}

impl UriOf for Server {
    fn uri_of(&self, path: &Path) -> Option<Uri> {
        match self.docs.get(path) {
            Some(doc) => Some(doc.uri.clone()),
            None => convert::file_uri(path),
        }
    }
}

impl RootState {
    fn new(id: u64, dir: PathBuf) -> RootState {
        RootState {
            id,
            root: Some(Root::new(dir.clone())),
            dir,
            folder: false,
            ws_root: None,
            generation: 0,
            due: None,
            running: None,
            reload: false,
            forget_texts: false,
            analysed: false,
            last: None,
            published: HashMap::new(),
            waiting: Vec::new(),
        }
    }

    /// Whether `path` belongs to this root: below its folder or its cargo workspace.
    fn covers(&self, path: &Path) -> bool {
        path.starts_with(&self.dir) || self.ws_root.as_ref().is_some_and(|r| path.starts_with(r))
    }

    /// Something this root reads changed: what is running is stale (and stops early), and
    /// an analysis is due at `due` (an immediate one already due stays so).
    fn changed(&mut self, due: Instant) {
        self.generation += 1;
        if let Some(run) = &self.running {
            run.cancel.store(true, Ordering::Relaxed);
        }
        self.due = Some(match self.due {
            Some(pending) if pending <= Instant::now() => pending,
            _ => due,
        });
    }
}

/// Drops `value` on a thread of its own: freeing a large crate's models takes tens of
/// milliseconds the main loop owes to the client.
fn drop_elsewhere<T: Send + 'static>(value: T) {
    // Should the thread not start, the closure (and the value) is dropped here instead.
    let _ = std::thread::Builder::new()
        .name("idem-lint-drop".into())
        .spawn(move || drop(value));
}

/// Whether `analysis` saw `text` as the content of `path` (`None`: the file on disk, which
/// is what it read when no buffer was open).
fn saw(analysis: &Analysis, path: &Path, text: Option<&str>) -> bool {
    match (convert::analysed_source(analysis, path), text) {
        (Some(src), Some(text)) => *src.text == *text,
        // Not part of the analysis: it has nothing to say about the file either way.
        (None, _) => true,
        (Some(_), None) => true,
    }
}

fn capabilities(enc: Encoding) -> ServerCapabilities {
    ServerCapabilities {
        position_encoding: Some(enc.kind()),
        text_document_sync: Some(TextDocumentSyncCapability::Options(
            TextDocumentSyncOptions {
                open_close: Some(true),
                change: Some(TextDocumentSyncKind::INCREMENTAL),
                save: Some(TextDocumentSyncSaveOptions::SaveOptions(SaveOptions {
                    include_text: Some(false),
                })),
                ..TextDocumentSyncOptions::default()
            },
        )),
        hover_provider: Some(HoverProviderCapability::Simple(true)),
        code_action_provider: Some(CodeActionProviderCapability::Options(CodeActionOptions {
            code_action_kinds: Some(vec![CodeActionKind::QUICKFIX]),
            ..CodeActionOptions::default()
        })),
        workspace: Some(WorkspaceServerCapabilities {
            workspace_folders: Some(WorkspaceFoldersServerCapabilities {
                supported: Some(true),
                change_notifications: Some(OneOf::Left(true)),
            }),
            file_operations: None,
        }),
        ..ServerCapabilities::default()
    }
}

/// The folders of a `workspace/didChangeWorkspaceFolders` list (`added` or `removed`), each
/// read on its own: Neovim 0.7's `add_workspace_folder()` sends `removed: [[]]`, and one
/// malformed entry must not cost the valid ones.
fn folder_paths(params: &Value, list: &str) -> Vec<PathBuf> {
    let entries = params
        .get("event")
        .and_then(|e| e.get(list))
        .and_then(Value::as_array);
    let mut dirs = Vec::new();
    for entry in entries.into_iter().flatten() {
        match serde_json::from_value::<WorkspaceFolder>(entry.clone()) {
            Ok(folder) => match path_of(&folder.uri) {
                Ok(dir) => dirs.push(dir),
                Err(e) => log(&format!(
                    "workspace folder `{}`: {}",
                    folder.uri.as_str(),
                    e.message
                )),
            },
            // An empty placeholder is what a client sends for "none"; anything else is worth
            // a line in the log.
            Err(_) if is_empty_entry(entry) => {}
            Err(e) => log(&format!(
                "a `{list}` workspace folder was not understood: {e}"
            )),
        }
    }
    dirs
}

fn is_empty_entry(entry: &Value) -> bool {
    match entry {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

fn params<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, Failure> {
    serde_json::from_value(value).map_err(|e| Failure {
        code: ErrorCode::InvalidParams,
        message: format!("invalid params: {e}"),
    })
}

fn fail(f: Failure) -> anyhow::Error {
    anyhow!(f.message)
}

fn to_value(v: impl serde::Serialize) -> Value {
    // Serializing the protocol's own types cannot fail (no maps with non-string keys).
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// The file a document URI names, resolved like the paths the pipeline reports.
fn path_of(uri: &Uri) -> Result<PathBuf, Failure> {
    let path = crate::uri::file_path(uri.as_str())
        .with_context(|| format!("`{}` is not a local file URI", uri.as_str()))?;
    Ok(canonical(&path))
}

/// `path` with symlinks resolved when it exists (an unsaved new file keeps its spelling).
fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

fn log(message: &str) {
    crate::stderr_line(&format!("idem-lint lsp: {message}"));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(id: i32, method: &str, params: Value) -> Message {
        Request::new(id.into(), method.into(), params).into()
    }

    fn notification(method: &str, params: Value) -> Message {
        Notification::new(method.into(), params).into()
    }

    /// Issue 24 item 12: one `didChange` of 8,000 ranged edits to a 1.1 MB buffer held the
    /// main loop until every edit was applied, every other message waiting behind it. Here
    /// all messages are queued before the server turns: a hover on another file is answered
    /// while the edits are being applied, a hover on the changed buffer once they all are.
    #[test]
    fn a_huge_did_change_is_applied_between_messages() {
        let (server_side, client) = Connection::memory();
        let args = crate::cli::Args::parse_from_env(["cargo-idem-lint".into()]).expect("args");
        let mut server = Server::new(server_side, args, Duration::from_secs(3600));
        let dir = tempfile::tempdir().expect("tempdir");
        let (big, small) = (dir.path().join("big.rs"), dir.path().join("small.rs"));
        let uri = |p: &Path| format!("file://{}", p.display());
        let lines = 100_000;
        let changes: Vec<Value> = (0..8_000)
            .map(|i| {
                let line = (i * 19) % lines;
                json!({"range": {"start": {"line": line, "character": 4},
                                 "end": {"line": line, "character": 5}},
                       "text": "yy"})
            })
            .collect();
        let hover = |id: i32, p: &Path| {
            request(
                id,
                "textDocument/hover",
                json!({"textDocument": {"uri": uri(p)}, "position": {"line": 0, "character": 0}}),
            )
        };
        let send = |m: Message| client.sender.send(m).expect("send");
        send(request(1, "initialize", json!({"capabilities": {}})));
        send(notification("initialized", json!({})));
        for (p, text) in [
            (&big, "let x = 1;\n".repeat(lines)),
            (&small, "fn f() {}\n".into()),
        ] {
            send(notification(
                "textDocument/didOpen",
                json!({"textDocument": {"uri": uri(p), "languageId": "rust", "version": 1,
                                        "text": text}}),
            ));
        }
        send(notification(
            "textDocument/didChange",
            json!({"textDocument": {"uri": uri(&big), "version": 2}, "contentChanges": changes}),
        ));
        send(hover(2, &small));
        send(hover(3, &big));
        send(request(4, "shutdown", Value::Null));
        // (answer id, `yy`s in the big buffer then, its version then; 0 before it opens)
        let mut answered: Vec<(i32, usize, i32)> = Vec::new();
        while !answered.iter().any(|a| a.0 == 4) {
            assert!(matches!(server.turn().expect("turn"), Turn::Continue));
            while let Ok(Message::Response(r)) = client.receiver.try_recv() {
                let (edits, version) = server
                    .docs
                    .get(&big)
                    .map_or((0, 0), |d| (d.text.matches("yy").count(), d.version));
                let id = r.id.to_string().parse().expect("numeric id");
                answered.push((id, edits, version));
            }
        }
        assert_eq!(
            answered,
            [(1, 0, 0), (2, 0, 1), (3, 8_000, 2), (4, 8_000, 2)],
            "(id, edits applied, version) at each answer"
        );
        send(notification("exit", Value::Null));
        assert!(matches!(server.turn().expect("turn"), Turn::Exit));
    }
}
