//! The finding model every emitter renders: one [`Diagnostic`] per finding.

use crate::lint::{Level, Lint};
use crate::model::Span;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// How sure a suggestion is (rustc's `Applicability`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Applicability {
    /// Always right: tools may apply it without asking.
    MachineApplicable,
    /// Probably right, but may change behaviour or not compile.
    MaybeIncorrect,
    /// Right in shape, with `/* placeholders */` the user must fill.
    HasPlaceholders,
    Unspecified,
}

impl Applicability {
    /// The spelling in rustc's JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Applicability::MachineApplicable => "MachineApplicable",
            Applicability::MaybeIncorrect => "MaybeIncorrect",
            Applicability::HasPlaceholders => "HasPlaceholders",
            Applicability::Unspecified => "Unspecified",
        }
    }
}

/// A secondary span with its label (where the bad value came from, the guarded path, ...).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Label {
    pub span: Span,
    pub message: String,
}

/// A concrete edit: replace each span's text with its replacement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Suggestion {
    /// The help line the edit belongs to: "set the token from the message".
    pub message: String,
    pub edits: Vec<(Span, String)>,
    pub applicability: Applicability,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Diagnostic {
    /// Stored by name; a stored name no lint has fails to deserialize.
    #[serde(serialize_with = "lint_name", deserialize_with = "lint_by_name")]
    pub lint: &'static Lint,
    /// The lint's default level when made; the driver sets the effective one.
    pub level: Level,
    /// Lower-case, no trailing period, code in backticks.
    pub message: String,
    pub span: Span,
    /// Label of the primary span.
    pub label: Option<String>,
    pub labels: Vec<Label>,
    pub notes: Vec<String>,
    pub help: Vec<String>,
    pub suggestions: Vec<Suggestion>,
}

impl Diagnostic {
    pub fn new(lint: &'static Lint, span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            lint,
            level: lint.default_level,
            message: message.into(),
            span,
            label: None,
            labels: Vec::new(),
            notes: Vec::new(),
            help: Vec::new(),
            suggestions: Vec::new(),
        }
    }

    pub fn primary_label(&mut self, message: impl Into<String>) -> &mut Self {
        self.label = Some(message.into());
        self
    }

    pub fn span_label(&mut self, span: Span, message: impl Into<String>) -> &mut Self {
        self.labels.push(Label {
            span,
            message: message.into(),
        });
        self
    }

    pub fn note(&mut self, message: impl Into<String>) -> &mut Self {
        self.notes.push(message.into());
        self
    }

    pub fn help(&mut self, message: impl Into<String>) -> &mut Self {
        self.help.push(message.into());
        self
    }

    pub fn suggest(
        &mut self,
        message: impl Into<String>,
        span: Span,
        replacement: impl Into<String>,
        applicability: Applicability,
    ) -> &mut Self {
        self.suggestions.push(Suggestion {
            message: message.into(),
            edits: vec![(span, replacement.into())],
            applicability,
        });
        self
    }
}

fn lint_name<S: Serializer>(lint: &&'static Lint, s: S) -> Result<S::Ok, S::Error> {
    lint.name.serialize(s)
}

fn lint_by_name<'de, D: Deserializer<'de>>(d: D) -> Result<&'static Lint, D::Error> {
    let name = <std::borrow::Cow<'de, str>>::deserialize(d)?;
    crate::lints::find(&name)
        .ok_or_else(|| serde::de::Error::custom(format_args!("no lint named `{name}`")))
}
