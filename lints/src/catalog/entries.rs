//! Entry points as data: the kinds of entry the engine recognises ([`EntryKind`]), and for
//! each whether what comes in there can come again ([`Delivery`]): a message consumer, a
//! job runner, a webhook or a Lambda invocation redelivers; an HTTP API route carries a
//! user's command with its own intent (two clicks are two commands).

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum EntryKind {
    /// Handlers that guard themselves: `#[idempotent]`.
    Idempotent,
    Main,
    /// An HTTP route handler.
    Route,
    /// A `service_fn` handler: Lambda, tower, hyper.
    Service,
    /// A job or worker registered with a job runner, or a method of a framework trait.
    Job,
    /// Spawned as a task or thread.
    Spawned,
    /// Named in `[lints.unguarded_entry_point] entry_points`.
    Configured,
    /// A `pub` function of a library's public API.
    PublicApi,
    /// A fn that receives messages in a loop (`analysis::entry::consumer_loops`); not among
    /// `analysis::entry::entry_points`, which the lints of guarded paths read.
    Consumer,
}

impl EntryKind {
    /// How a note names it: "the route handler `refund`".
    pub fn describe(self) -> &'static str {
        match self {
            EntryKind::Idempotent => "the `#[idempotent]` handler",
            EntryKind::Main => "the program entry",
            EntryKind::Route => "the route handler",
            EntryKind::Service => "the service handler",
            EntryKind::Job => "the job handler",
            EntryKind::Spawned => "the spawned task",
            EntryKind::Configured => "the configured entry point",
            EntryKind::PublicApi => "the public function",
            EntryKind::Consumer => "the consumer loop of",
        }
    }
}

impl EntryKind {
    /// How a label at the entry point's span says what happens there.
    pub fn at_span(self) -> &'static str {
        match self {
            EntryKind::Idempotent => "guarded by `#[idempotent]` here",
            EntryKind::Main => "the program starts here",
            EntryKind::Route => "registered as a route handler here",
            EntryKind::Service => "registered as a service handler here",
            EntryKind::Job => "registered as a job handler here",
            EntryKind::Spawned => "spawned as a task here",
            EntryKind::Configured => "named as an entry point in the configuration",
            EntryKind::PublicApi => "public: callers outside the crate come in here",
            EntryKind::Consumer => "messages are received here, in a loop",
        }
    }
}

/// Whether the deliveries an entry point receives can come again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// The same message, job or event can arrive again: a queue or stream consumer, a job
    /// runner's handler, a framework's callback (an ActivityPub inbox, an RPC service), a
    /// Lambda invocation, a webhook, an `#[idempotent]` handler.
    Redelivered,
    /// A user's command: an HTTP API route. A second request is a second command, meant
    /// as such, unless the application guards its commands itself.
    UserCommand,
    /// Callers decide: `main`, a library's public function, a spawned task (it runs again
    /// when its spawner does, which the call graph follows).
    Unknown,
}

/// One row of [`DELIVERIES`]: what an entry of `kind` receives, and why.
#[derive(Debug, Clone, Copy)]
pub struct EntryDelivery {
    pub kind: EntryKind,
    pub delivery: Delivery,
    pub why: &'static str,
}

/// What each kind of entry receives; a route named for a webhook ([`WEBHOOK_WORDS`]) is
/// [`Delivery::Redelivered`] instead.
pub const DELIVERIES: &[EntryDelivery] = &[
    EntryDelivery {
        kind: EntryKind::Idempotent,
        delivery: Delivery::Redelivered,
        why: "its author guards it against duplicates",
    },
    EntryDelivery {
        kind: EntryKind::Main,
        delivery: Delivery::Unknown,
        why: "runs when it is started",
    },
    EntryDelivery {
        kind: EntryKind::Route,
        delivery: Delivery::UserCommand,
        why: "an HTTP request is a user's command",
    },
    EntryDelivery {
        kind: EntryKind::Service,
        delivery: Delivery::Redelivered,
        why: "Lambda and service handlers are invoked again on failure",
    },
    EntryDelivery {
        kind: EntryKind::Job,
        delivery: Delivery::Redelivered,
        why: "job runners and framework callbacks retry",
    },
    EntryDelivery {
        kind: EntryKind::Spawned,
        delivery: Delivery::Unknown,
        why: "a task runs again when its spawner does: one spawned by an entry takes that entry's delivery",
    },
    EntryDelivery {
        kind: EntryKind::Configured,
        delivery: Delivery::Redelivered,
        why: "named in the configuration as a handler of deliveries",
    },
    EntryDelivery {
        kind: EntryKind::PublicApi,
        delivery: Delivery::Unknown,
        why: "its callers are outside the crate",
    },
    EntryDelivery {
        kind: EntryKind::Consumer,
        delivery: Delivery::Redelivered,
        why: "a message received in a loop may come again",
    },
];

/// Words of a route handler's name, module or path that say it receives webhooks.
pub const WEBHOOK_WORDS: &[&str] = &["webhook", "hook", "callback", "ipn", "notification"];

/// What an entry of `kind` receives; `webhook` says the engine found the fn named for one
/// (its name, module or route path: [`names_webhook`]).
pub fn delivery(kind: EntryKind, webhook: bool) -> Delivery {
    if kind == EntryKind::Route && webhook {
        return Delivery::Redelivered;
    }
    DELIVERIES
        .iter()
        .find(|row| row.kind == kind)
        .map_or(Delivery::Unknown, |row| row.delivery)
}

/// Words of a sign-in flow: its `callback` is the user's browser coming back from the
/// identity provider (`/oauth/callback`, `oidc::callback`), a user's command, not a webhook.
pub const SIGN_IN_WORDS: &[&str] = &["oauth", "oidc", "openid", "saml", "sso", "login", "signin"];

/// Whether a name, module segment or route path holds a word of [`WEBHOOK_WORDS`] and none
/// of [`SIGN_IN_WORDS`].
pub fn names_webhook(text: &str) -> bool {
    let text = text.to_ascii_lowercase();
    WEBHOOK_WORDS.iter().any(|w| text.contains(w))
        && !SIGN_IN_WORDS.iter().any(|w| text.contains(w))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind has exactly one row.
    #[test]
    fn each_kind_has_one_row() {
        let kinds = [
            EntryKind::Idempotent,
            EntryKind::Main,
            EntryKind::Route,
            EntryKind::Service,
            EntryKind::Job,
            EntryKind::Spawned,
            EntryKind::Configured,
            EntryKind::PublicApi,
            EntryKind::Consumer,
        ];
        for kind in kinds {
            let rows = DELIVERIES.iter().filter(|r| r.kind == kind).count();
            assert_eq!(rows, 1, "{kind:?}");
        }
        assert_eq!(DELIVERIES.len(), kinds.len());
    }
}
