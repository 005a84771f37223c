//! Entry-point frameworks as data: the web crates whose routes are user commands, the
//! runtimes whose spawns start tasks, the crates whose traits are data or plumbing rather
//! than callbacks that receive deliveries, and how each family marks an entry: the
//! attributes ([`EntryAttr`]), the calls whose fn argument becomes one ([`EntryCall`]) and
//! the calls that receive the next message of a loop ([`RECEIVE_METHODS`]). The engine
//! (`analysis::entry`) keeps the machinery (attributes, route tables, trait impls) and asks
//! [`EntryModels`], which holds these rows and the ones users declare in `idem-lint.toml`.

use super::entries::EntryKind;

/// Web frameworks: a fn their routing functions take is a route handler.
pub const WEB_CRATES: &[&str] = &[
    "axum",
    "actix_web",
    "poem",
    "salvo",
    "warp",
    "tide",
    "rocket",
    "ntex",
];

/// Attributes on an `impl` block that make each of its methods a request handler, with the
/// crate that defines them: GraphQL resolvers, whose mutations are a client's commands like
/// an HTTP route's.
pub const HANDLER_IMPL_ATTRS: &[(&str, &str)] = &[
    ("async_graphql", "Object"),
    ("async_graphql", "ComplexObject"),
    ("juniper", "graphql_object"),
];

/// Runtimes and pools whose `spawn*` functions start a task.
pub const SPAWN_CRATES: &[&str] = &[
    "tokio",
    "std",
    "async_std",
    "smol",
    "actix_rt",
    "actix_web",
    "futures",
    "rayon",
    "tokio_util",
];

/// Crates whose traits a crate implements for data, formatting or plumbing, not as callbacks
/// that receive deliveries: an impl of any other crate's trait method is a framework callback
/// (a tonic service, a lapin consumer delegate, a job runner's task trait).
pub const NON_CALLBACK_CRATES: &[&str] = &[
    "std",
    "core",
    "alloc",
    "serde",
    "serde_json",
    "thiserror",
    "anyhow",
    "futures",
    "futures_util",
    "tokio",
    "tracing",
    "clap",
    "sqlx",
    "diesel",
    "sea_orm",
    "bytes",
    "http",
    "async_trait",
    "schemars",
    "utoipa",
    "validator",
    "strum",
    "derive_more",
];

/// Message brokers whose producers or consumers a lint reads (`rdkafka`'s `ClientConfig`);
/// their consumers are entry points through the receive loops the engine finds.
pub const BROKER_CRATES: &[&str] = &[
    "rdkafka",
    "lapin",
    "async_nats",
    "rumqttc",
    "google_cloud_pubsub",
];

/// An attribute that makes the fn it is on an entry point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryAttr {
    /// The attribute's last path segment (`post` of `#[actix_web::post("/x")]`).
    pub name: &'static str,
    pub kind: EntryKind,
    /// Only with a path literal among its arguments (`#[get("/orders")]`, not a `get` of
    /// another meaning).
    pub path_literal: bool,
}

/// Which forms of call an [`EntryCall`] row is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallForm {
    /// A fn called by path: `tokio::spawn(f)`, `service_fn(f)`.
    Path,
    /// A method: `.build_fn(f)`.
    Method,
    Both,
}

/// A call whose fn argument becomes an entry point: `post(handler)`, `tokio::spawn(worker)`,
/// `.build_fn(job)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryCall {
    /// The fn or method name, or, for a fn called by path, a whole path
    /// (`lambda_runtime::run`, compared with `DefPath::matches`).
    pub name: &'static str,
    pub form: CallForm,
    pub kind: EntryKind,
    /// The crates a fn called by path must come from (empty: any); a glob-imported name
    /// (a path the resolver could not place) is taken for one of them.
    pub crates: &'static [&'static str],
    /// A framework's name shared with other APIs (`get`, `to`): counts only for a fn passed
    /// as a value (`post(handler)`, not `post(handler())`), and a glob-imported name or a
    /// method only in a package that depends on one of `crates`.
    pub framework: bool,
}

impl EntryCall {
    const fn new(name: &'static str, form: CallForm, kind: EntryKind) -> EntryCall {
        EntryCall {
            name,
            form,
            kind,
            crates: &[],
            framework: false,
        }
    }
    const fn of(mut self, crates: &'static [&'static str]) -> EntryCall {
        self.crates = crates;
        self
    }
    const fn framework(mut self) -> EntryCall {
        self.framework = true;
        self
    }
}

/// Web and job frameworks' attributes: route attributes with a path (actix-web, rocket,
/// poem, salvo), poem/salvo `#[handler]`, axum `#[debug_handler]`, sqlxmq `#[job]`,
/// background-job `#[task]`.
pub const ENTRY_ATTRS: &[EntryAttr] = &[
    route_attr("get"),
    route_attr("post"),
    route_attr("put"),
    route_attr("delete"),
    route_attr("patch"),
    route_attr("head"),
    route_attr("options"),
    route_attr("trace"),
    route_attr("connect"),
    route_attr("route"),
    job_attr("handler"),
    job_attr("debug_handler"),
    job_attr("job"),
    job_attr("task"),
];

const fn route_attr(name: &'static str) -> EntryAttr {
    EntryAttr {
        name,
        kind: EntryKind::Route,
        path_literal: true,
    }
}

const fn job_attr(name: &'static str) -> EntryAttr {
    EntryAttr {
        name,
        kind: EntryKind::Job,
        path_literal: false,
    }
}

/// Routing functions and methods of the web frameworks that take a handler (axum,
/// actix-web, poem, salvo).
const fn route(name: &'static str) -> EntryCall {
    EntryCall::new(name, CallForm::Both, EntryKind::Route)
        .of(WEB_CRATES)
        .framework()
}

const fn spawn(name: &'static str) -> EntryCall {
    EntryCall::new(name, CallForm::Both, EntryKind::Spawned).of(SPAWN_CRATES)
}

/// Routing functions and methods (axum, actix-web, poem, salvo).
pub const ROUTE_CALLS: &[EntryCall] = &[
    route("get"),
    route("post"),
    route("put"),
    route("delete"),
    route("patch"),
    route("head"),
    route("options"),
    route("trace"),
    route("any"),
    route("on"),
    route("to"),
    route("route"),
    route("get_service"),
    route("post_service"),
];

/// The runtimes' spawns ([`SPAWN_CRATES`]), by path or as a method of a runtime handle or
/// a `JoinSet`.
pub const SPAWN_CALLS: &[EntryCall] = &[
    spawn("spawn"),
    spawn("spawn_blocking"),
    spawn("spawn_local"),
    spawn("spawn_with_handle"),
];

/// Calls that turn a fn into a service: tower/hyper/Lambda `service_fn`, Lambda `run`.
pub const SERVICE_CALLS: &[EntryCall] = &[
    EntryCall::new("service_fn", CallForm::Path, EntryKind::Service),
    EntryCall::new("handler_fn", CallForm::Path, EntryKind::Service),
    EntryCall::new("make_service_fn", CallForm::Path, EntryKind::Service),
    EntryCall::new("lambda_runtime::run", CallForm::Path, EntryKind::Service),
    EntryCall::new(
        "lambda_runtime::run_with_streaming_response",
        CallForm::Path,
        EntryKind::Service,
    ),
    EntryCall::new("lambda_http::run", CallForm::Path, EntryKind::Service),
    EntryCall::new(
        "lambda_http::run_with_streaming_response",
        CallForm::Path,
        EntryKind::Service,
    ),
];

/// Job runners' registration methods (apalis `build_fn`, graphile-worker `define_job`).
pub const JOB_CALLS: &[EntryCall] = &[
    EntryCall::new("build_fn", CallForm::Method, EntryKind::Job),
    EntryCall::new("define_job", CallForm::Method, EntryKind::Job),
    EntryCall::new("register_job", CallForm::Method, EntryKind::Job),
];

/// Methods that receive the next message of a queue, stream or subscription (tokio and
/// crossbeam channels, SQS, NATS, Kafka, Redis streams and lists, lapin).
pub const RECEIVE_METHODS: &[&str] = &[
    "recv",
    "receive",
    "receive_message",
    "receive_messages",
    "next_message",
    "get_messages",
    "fetch_messages",
    "xread_group",
    "xreadgroup",
    "blpop",
    "brpop",
    "brpoplpush",
    "blmove",
    "basic_get",
];

/// Receiver names that make a plain `next()` the next message: `consumer.next()`,
/// `subscription.next()`, `deliveries.next()` (an iterator's `next` is not a delivery).
pub const MESSAGE_STREAM_WORDS: &[&str] = &["consumer", "subscri", "deliver", "messages", "stream"];

/// The entry-point rows the engine asks: the built-in tables above, then the rows users
/// declare in `idem-lint.toml` (`[[models.entry]]`), in that order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryModels {
    pub attrs: Vec<EntryAttr>,
    pub calls: Vec<EntryCall>,
}

impl Default for EntryModels {
    fn default() -> EntryModels {
        EntryModels {
            attrs: ENTRY_ATTRS.to_vec(),
            calls: [SPAWN_CALLS, SERVICE_CALLS, ROUTE_CALLS, JOB_CALLS].concat(),
        }
    }
}

impl EntryModels {
    /// The kind of entry an attribute named `name` makes its fn (`has_path_literal`: one
    /// of its arguments is a literal starting with `/`).
    pub fn by_attribute(&self, name: &str, has_path_literal: bool) -> Option<EntryKind> {
        self.attrs
            .iter()
            .find(|a| a.name == name && (has_path_literal || !a.path_literal))
            .map(|a| a.kind)
    }

    /// The rows for a fn called by path (`form` [`CallForm::Path`] or [`CallForm::Both`]).
    pub fn path_calls(&self) -> impl Iterator<Item = &EntryCall> {
        self.calls.iter().filter(|c| c.form != CallForm::Method)
    }

    /// The rows for a method call.
    pub fn method_calls(&self) -> impl Iterator<Item = &EntryCall> {
        self.calls.iter().filter(|c| c.form != CallForm::Path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_rows_keep_their_invariants() {
        let m = EntryModels::default();
        for (i, c) in m.calls.iter().enumerate() {
            assert!(!c.name.is_empty());
            // A name in two rows of one form would make the first one hide the second.
            assert!(
                m.calls[..i].iter().all(|o| o.name != c.name
                    || (o.form == CallForm::Path && c.form == CallForm::Method)
                    || (o.form == CallForm::Method && c.form == CallForm::Path)),
                "{}: two rows",
                c.name
            );
            assert!(
                !c.name.contains("::") || c.form == CallForm::Path,
                "{}: a path is called by path",
                c.name
            );
            assert!(
                !c.framework || !c.crates.is_empty(),
                "{}: a framework without crates",
                c.name
            );
        }
        for (i, a) in m.attrs.iter().enumerate() {
            assert!(
                m.attrs[..i].iter().all(|o| o.name != a.name),
                "{}: two rows",
                a.name
            );
        }
        assert_eq!(m.by_attribute("post", false), None);
        assert_eq!(m.by_attribute("post", true), Some(EntryKind::Route));
        assert_eq!(m.by_attribute("handler", false), Some(EntryKind::Job));
    }
}
