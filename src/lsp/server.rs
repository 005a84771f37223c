//! The server's state and main loop: requests answered in order, buffer changes debounced,
//! and after each analysis the diagnostics of every file that has findings published (and
//! those of files whose findings went away cleared).
//!
//! One thread owns the state. Analysis runs on it too, between messages: a change waits
//! [`Server::debounce`] for the next keystroke, then the root that holds the file is linted
//! with every open buffer standing in for its file. A hover or code action on a root with a
//! change pending runs that analysis first, so it always answers about the text on screen.
//! Every handler runs under `catch_unwind`: a bug answers the request with an error and the
//! session goes on.

use super::convert::{self, UriOf};
use super::documents::{Document, Documents};
use super::engine::{Analysis, Outcome, Root, Settings};
use super::position::Encoding;
use anyhow::{anyhow, bail, Context, Result};
use lsp_server::{Connection, ErrorCode, Message, Notification, Request, Response};
use lsp_types::notification::{self as note, Notification as _};
use lsp_types::request::{self as req, Request as _};
use lsp_types::*;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Names of the files whose saving changes what is linted and how.
const CONFIG_FILES: [&str; 2] = ["Cargo.toml", crate::config::FILE_NAME];

pub struct Server {
    conn: Connection,
    settings: Settings,
    /// How long a change waits for the next one before the analysis runs.
    debounce: Duration,
    enc: Encoding,
    initialized: bool,
    shutdown: bool,
    docs: Documents,
    roots: Vec<RootState>,
    /// Workspace folders without a `Cargo.toml`: a file below one that no cargo package
    /// holds is linted with the folder as a plain directory.
    plain_folders: Vec<PathBuf>,
}

struct RootState {
    root: Root,
    /// When the pending analysis is due.
    due: Option<Instant>,
    last: Option<Arc<Analysis>>,
    /// What was last published per file, to send only what changed.
    published: HashMap<PathBuf, (Option<i32>, Vec<Diagnostic>)>,
}

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

impl Server {
    pub fn new(conn: Connection, settings: Settings, debounce: Duration) -> Server {
        Server {
            conn,
            settings,
            debounce,
            enc: Encoding::Utf16,
            initialized: false,
            shutdown: false,
            docs: Documents::default(),
            roots: Vec::new(),
            plain_folders: Vec::new(),
        }
    }

    /// Serves until `exit` (or the client closes stdin). `exit` without `shutdown` first is
    /// an error, as the protocol says (exit code 1 there; 2 here, like every error).
    pub fn serve(mut self) -> Result<()> {
        loop {
            let next = self.roots.iter().filter_map(|r| r.due).min();
            let msg = match next {
                Some(due) => match self.conn.receiver.recv_deadline(due) {
                    Ok(msg) => msg,
                    Err(e) if e.is_timeout() => {
                        self.analyze_due(Instant::now());
                        continue;
                    }
                    Err(_) => return Ok(()),
                },
                None => match self.conn.receiver.recv() {
                    Ok(msg) => msg,
                    Err(_) => return Ok(()),
                },
            };
            match msg {
                Message::Request(r) => self.on_request(r),
                Message::Notification(n) if n.method == note::Exit::METHOD => {
                    if self.shutdown {
                        return Ok(());
                    }
                    bail!("the client sent `exit` without `shutdown`");
                }
                Message::Notification(n) => self.on_notification(n),
                // The server sends no requests, so no response is awaited.
                Message::Response(_) => {}
            }
        }
    }

    fn on_request(&mut self, r: Request) {
        let id = r.id.clone();
        let method = r.method.clone();
        let answer =
            std::panic::catch_unwind(AssertUnwindSafe(|| self.request(r))).unwrap_or_else(|_| {
                Err(Failure {
                    code: ErrorCode::InternalError,
                    message: format!("internal error while handling `{method}`"),
                })
            });
        let response = match answer {
            Ok(value) => Response::new_ok(id, value),
            Err(f) => Response::new_err(id, f.code as i32, f.message),
        };
        self.send(response.into());
    }

    fn request(&mut self, r: Request) -> Result<Value, Failure> {
        if r.method == req::Initialize::METHOD {
            let params: InitializeParams = params(r.params)?;
            return Ok(to_value(self.initialize(params)));
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
        match r.method.as_str() {
            req::Shutdown::METHOD => {
                self.shutdown = true;
                Ok(Value::Null)
            }
            req::HoverRequest::METHOD => {
                let p: HoverParams = params(r.params)?;
                let doc = &p.text_document_position_params;
                let path = path_of(&doc.text_document.uri)?;
                let hover = self
                    .current_analysis(&path)
                    .and_then(|a| convert::hover(&a, &path, doc.position, self.enc));
                Ok(to_value(hover))
            }
            req::CodeActionRequest::METHOD => {
                let p: CodeActionParams = params(r.params)?;
                let wants_quickfix = p.context.only.as_ref().is_none_or(|only| {
                    only.iter()
                        .any(|k| k == &CodeActionKind::QUICKFIX || k.as_str().is_empty())
                });
                let path = path_of(&p.text_document.uri)?;
                let actions = match self.current_analysis(&path) {
                    Some(a) if wants_quickfix => {
                        convert::code_actions(&a, &path, p.range, self.enc, &*self)
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
                let p: DidChangeWorkspaceFoldersParams = params(n.params).map_err(fail)?;
                for removed in &p.event.removed {
                    if let Ok(dir) = path_of(&removed.uri) {
                        self.remove_folder(&dir);
                    }
                }
                for added in &p.event.added {
                    if let Ok(dir) = path_of(&added.uri) {
                        self.add_folder(dir);
                    }
                }
            }
            // Nothing to do for the rest (`initialized`, `$/cancelRequest`, `$/setTrace`,
            // configuration changes): requests are answered in order anyway.
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
            for r in self.roots.iter_mut().filter(|r| r.root.covers(path)) {
                r.root.reload();
                r.due = Some(now);
            }
            return;
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
        if !self.roots.iter().any(|r| r.root.dir == dir) {
            self.roots.push(RootState::new(dir));
        }
    }

    fn remove_folder(&mut self, dir: &Path) {
        let dir = canonical(dir);
        self.plain_folders.retain(|d| *d != dir);
        let (gone, kept): (Vec<RootState>, Vec<RootState>) = std::mem::take(&mut self.roots)
            .into_iter()
            .partition(|r| r.root.dir.starts_with(&dir));
        self.roots = kept;
        for r in gone {
            for path in r.published.keys() {
                self.publish(path, Vec::new());
            }
        }
    }

    /// The root `path` belongs to: the innermost that covers it, else a new one for the
    /// package around it (or for the plain folder holding it).
    fn root_of(&mut self, path: &Path) -> Option<usize> {
        let best = self
            .roots
            .iter()
            .enumerate()
            .filter(|(_, r)| r.root.covers(path))
            .max_by_key(|(_, r)| r.root.dir.components().count())
            .map(|(i, _)| i);
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
        self.roots.push(RootState::new(dir));
        Some(self.roots.len() - 1)
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
        let r = &mut self.roots[i];
        r.due = Some(match r.due {
            Some(pending) if pending <= Instant::now() => pending,
            _ => due,
        });
    }

    fn analyze_due(&mut self, now: Instant) {
        for i in 0..self.roots.len() {
            if self.roots[i].due.is_some_and(|d| d <= now) {
                self.analyze(i);
            }
        }
    }

    /// The analysis of the root holding `path`, brought up to date with the buffers first.
    fn current_analysis(&mut self, path: &Path) -> Option<Arc<Analysis>> {
        let i = self.root_of(path)?;
        if self.roots[i].due.is_some() || self.roots[i].last.is_none() {
            self.analyze(i);
        }
        self.roots[i].last.clone()
    }

    fn analyze(&mut self, i: usize) {
        self.roots[i].due = None;
        let overlays: Vec<(PathBuf, Arc<str>)> = self
            .docs
            .overlays()
            .filter(|(p, _)| self.roots[i].root.covers(p))
            .map(|(p, t)| (p.clone(), t.clone()))
            .collect();
        let settings = &self.settings;
        let root = &mut self.roots[i].root;
        let outcome =
            std::panic::catch_unwind(AssertUnwindSafe(|| root.analyze(settings, &overlays)));
        let now: BTreeMap<PathBuf, Vec<Diagnostic>> = match outcome {
            Ok(Outcome::Analysed(a)) => {
                let diags = convert::diagnostics(&a, self.enc, &*self);
                self.roots[i].last = Some(a);
                diags
            }
            Ok(Outcome::Failed(problem)) => {
                self.roots[i].last = None;
                match &problem.file {
                    Some(file) => {
                        let text = self
                            .docs
                            .get(file)
                            .map(|d| d.text.to_string())
                            .or_else(|| std::fs::read_to_string(file).ok());
                        let d = convert::problem_diagnostic(&problem, text.as_deref(), self.enc);
                        BTreeMap::from([(file.clone(), vec![d])])
                    }
                    None => {
                        self.show_error(&problem.message);
                        BTreeMap::new()
                    }
                }
            }
            Err(_) => {
                // The previous diagnostics stay: better stale than none.
                log("internal error during the analysis; diagnostics not updated");
                return;
            }
        };
        let mut now = now;
        // An open buffer always hears back, findings or not: the client learns its version
        // was linted.
        for (path, _) in self.docs.overlays() {
            if self.roots[i].root.covers(path) {
                now.entry(path.clone()).or_default();
            }
        }
        let stale: Vec<PathBuf> = self.roots[i]
            .published
            .keys()
            .filter(|p| !now.contains_key(*p))
            .cloned()
            .collect();
        for path in stale {
            self.roots[i].published.remove(&path);
            self.publish(&path, Vec::new());
        }
        for (path, diags) in now {
            let version = self.docs.get(&path).map(|d| d.version);
            let entry = (version, diags);
            if self.roots[i].published.get(&path) == Some(&entry) {
                continue;
            }
            self.publish(&path, entry.1.clone());
            self.roots[i].published.insert(path, entry);
        }
    }

    fn publish(&self, path: &Path, diagnostics: Vec<Diagnostic>) {
        let Some(uri) = self.uri_of(path) else {
            return;
        };
        let params = PublishDiagnosticsParams {
            uri,
            diagnostics,
            version: self.docs.get(path).map(|d| d.version),
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
    fn new(dir: PathBuf) -> RootState {
        RootState {
            root: Root::new(dir),
            due: None,
            last: None,
            published: HashMap::new(),
        }
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
