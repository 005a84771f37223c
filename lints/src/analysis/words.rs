//! The words an expression is made of: the names of its variables, fields, methods and called
//! functions, and its string literals. Lints that judge a value by what it mentions (a dead
//! letter that carries the error, a delay that uses the attempt number) read these.

use crate::model::ir::{Expr, ExprKind, Lit, Path};

/// One word of an expression, lower-cased.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Word {
    /// A variable or a path segment: `err`, `Duration`, `from_millis`.
    Name(String),
    /// A field or a method: `.error`, `.message_id()`.
    Member(String),
    /// A string literal's text.
    Text(String),
}

impl Word {
    pub fn text(&self) -> &str {
        match self {
            Word::Name(s) | Word::Member(s) | Word::Text(s) => s,
        }
    }
}

/// Every word of `e` and its sub-expressions, in order, lower-cased. A struct literal's field
/// names count as members (`DeadLetter { error: .. }`).
pub fn words(e: &Expr) -> Vec<Word> {
    let mut out = Vec::new();
    e.walk(&mut |e| match &e.kind {
        ExprKind::Path(p) => out.extend(p.segments.iter().map(|s| Word::Name(s.to_lowercase()))),
        ExprKind::Lit(Lit::Str(s)) => out.push(Word::Text(s.to_lowercase())),
        ExprKind::MethodCall { method, .. } => out.push(Word::Member(method.to_lowercase())),
        ExprKind::Field { member, .. } => out.push(Word::Member(member.to_lowercase())),
        ExprKind::Struct { path, fields, .. } => {
            out.extend(path.segments.iter().map(|s| Word::Name(s.to_lowercase())));
            out.extend(fields.iter().map(|(f, _)| Word::Member(f.to_lowercase())));
        }
        ExprKind::Macro(m) => out.push(Word::Name(m.path.last().to_lowercase())),
        _ => {}
    });
    out
}

/// Whether `name` (lower-case, `_`, `-`, `.` or `:` between parts) holds `part` as whole
/// parts: `orders_dlq` and `orders.dlq` hold `dlq`, `dlqueue` does not.
pub fn has_part(name: &str, part: &str) -> bool {
    let parts: Vec<&str> = name
        .split(|c: char| !c.is_alphanumeric())
        .filter(|p| !p.is_empty())
        .collect();
    let want: Vec<&str> = part
        .split(|c: char| !c.is_alphanumeric())
        .filter(|p| !p.is_empty())
        .collect();
    !want.is_empty() && parts.windows(want.len()).any(|w| w == want.as_slice())
}

/// The path of the function a call expression calls: `ClientConfig::new` of
/// `ClientConfig::new()`.
pub fn called_path(e: &Expr) -> Option<&Path> {
    match &e.peel().kind {
        ExprKind::Call { func, .. } => func.as_path(),
        _ => None,
    }
}

/// Whether `path` ends with `suffix` (`["ClientConfig", "new"]` matches
/// `rdkafka::ClientConfig::new`).
pub fn path_ends_with(path: &Path, suffix: &[&str]) -> bool {
    path.segments.len() >= suffix.len()
        && path.segments[path.segments.len() - suffix.len()..]
            .iter()
            .zip(suffix)
            .all(|(a, b)| a == b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_whole_words() {
        assert!(has_part("orders_dlq", "dlq"));
        assert!(has_part("orders.dead-letter", "dead_letter"));
        assert!(has_part("dead_letter_queue", "dead_letter"));
        assert!(!has_part("dlqueue", "dlq"));
        assert!(!has_part("unfailed", "failed"));
    }
}
