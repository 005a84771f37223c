//! The finding model every emitter renders: one [`Diagnostic`] per finding.

use crate::lint::{Level, Lint};
use crate::model::{FileId, Span};
use serde::{Deserialize, Serialize};

mod layout;

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

/// A concrete edit: replace each span's text with its replacement, and move each
/// statement of `moves`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Suggestion {
    /// The help line the edit belongs to: "set the token from the message".
    pub message: String,
    pub edits: Vec<(Span, String)>,
    /// Statements moved elsewhere. The analysis has spans, not text, so a move is made
    /// concrete by whoever holds the text ([`Suggestion::concrete_edits`]).
    pub moves: Vec<Move>,
    pub applicability: Applicability,
}

/// The statement whose expression is `from` (its `;` and its own lines with it), moved to
/// the start of the statement at `to`, with the spans of `substitutions` (inside `from`)
/// replaced: `sqlx::query(..).execute(pool).await?;` moved before `tx.commit()`, with
/// `pool` replaced by `&mut *tx`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Move {
    pub from: Span,
    pub to: Span,
    pub substitutions: Vec<(Span, String)>,
}

impl Suggestion {
    /// The edits as every consumer makes them (the JSON suggestion, `--fix`, the human
    /// snippet, the editor's code action): every move made a deletion and an insertion, and
    /// every insertion laid out with its line break ([`layout::lay_out`]); `text` gives a
    /// file's source. A move whose spans do not fit the text (out of range, a substitution
    /// outside the statement) is left out.
    pub fn concrete_edits<'t>(&self, text: &dyn Fn(FileId) -> &'t str) -> Vec<(Span, String)> {
        let mut out: Vec<(Span, String)> = self
            .edits
            .iter()
            .map(|(at, with)| {
                let laid =
                    layout::lay_out(text(at.file), at.lo as usize, at.hi as usize, with.clone());
                (*at, laid)
            })
            .collect();
        for m in &self.moves {
            out.extend(move_edits(m, text(m.from.file)));
        }
        out
    }
}

/// A [`Move`] as two edits: the statement's lines removed, the statement inserted before
/// `to` followed by a line break and `to`'s indentation.
fn move_edits(m: &Move, text: &str) -> Vec<(Span, String)> {
    let (lo, hi, to) = (m.from.lo as usize, m.from.hi as usize, m.to.lo as usize);
    if lo > hi || hi > text.len() || to > text.len() || !text.is_char_boundary(lo) {
        return Vec::new();
    }
    let mut end = hi;
    let after = &text[hi..];
    if let Some(semi) = after
        .find(|c: char| !c.is_whitespace())
        .filter(|&i| after[i..].starts_with(';'))
    {
        end = hi + semi + 1;
    }
    let mut stmt = String::new();
    let mut at = lo;
    let mut subs: Vec<&(Span, String)> = m.substitutions.iter().collect();
    subs.sort_by_key(|(s, _)| s.lo);
    for (s, with) in subs {
        let (slo, shi) = (s.lo as usize, s.hi as usize);
        if slo < at || shi > end || shi < slo {
            return Vec::new();
        }
        stmt.push_str(&text[at..slo]);
        stmt.push_str(with);
        at = shi;
    }
    stmt.push_str(&text[at..end]);
    // The statement's own lines go with it when nothing else is on them.
    let line_start = text[..lo].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[end..].find('\n').map_or(text.len(), |i| end + i + 1);
    let (cut_lo, cut_hi) =
        if text[line_start..lo].trim().is_empty() && text[end..line_end].trim().is_empty() {
            (line_start, line_end)
        } else {
            (lo, end)
        };
    let to_line = text[..to].rfind('\n').map_or(0, |i| i + 1);
    let indent = &text[to_line..to];
    let indent = if indent.trim().is_empty() { indent } else { "" };
    let file = m.from.file;
    vec![
        (Span::new(file, cut_lo as u32, cut_hi as u32), String::new()),
        (
            Span::new(file, to as u32, to as u32),
            format!("{stmt}\n{indent}"),
        ),
    ]
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Diagnostic {
    /// Stored by name ([`Lint`]'s `Serialize`); a stored name no lint has fails to
    /// deserialize (the lints layer, which knows every lint, implements `Deserialize`).
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
            moves: Vec::new(),
            applicability,
        });
        self
    }

    /// Suggests several edits made together.
    pub fn suggest_edits(
        &mut self,
        message: impl Into<String>,
        edits: Vec<(Span, String)>,
        applicability: Applicability,
    ) -> &mut Self {
        self.suggestions.push(Suggestion {
            message: message.into(),
            edits,
            moves: Vec::new(),
            applicability,
        });
        self
    }

    /// Suggests moving a statement (see [`Move`]).
    pub fn suggest_move(
        &mut self,
        message: impl Into<String>,
        mv: Move,
        applicability: Applicability,
    ) -> &mut Self {
        self.suggestions.push(Suggestion {
            message: message.into(),
            edits: Vec::new(),
            moves: vec![mv],
            applicability,
        });
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_move_takes_its_semicolon_and_lines_and_substitutes() {
        let text = "fn f() {\n    a();\n    tx.commit()?;\n    mark(pool)?;\n}\n";
        let span = |needle: &str| {
            let lo = text.find(needle).expect("needle") as u32;
            Span::new(FileId(0), lo, lo + needle.len() as u32)
        };
        let s = Suggestion {
            message: String::new(),
            edits: Vec::new(),
            moves: vec![Move {
                from: span("mark(pool)?"),
                to: span("tx.commit()").shrink_to_lo(),
                substitutions: vec![(span("pool"), "&mut *tx".into())],
            }],
            applicability: Applicability::MaybeIncorrect,
        };
        let mut edits = s.concrete_edits(&|_| text);
        edits.sort_by_key(|(s, _)| std::cmp::Reverse(s.lo));
        let mut out = text.to_string();
        for (s, with) in edits {
            out.replace_range(s.lo as usize..s.hi as usize, &with);
        }
        assert_eq!(
            out,
            "fn f() {\n    a();\n    mark(&mut *tx)?;\n    tx.commit()?;\n}\n"
        );
    }
}
