//! Where an inserted line break goes. A lint suggests an insertion at a point of the
//! code (after the last attribute of an item, before `.send()`); this lays it out as rustfmt
//! would, once, so the JSON suggestion, `--fix`, the human snippet and the editor's code
//! action make the same text.

/// `replacement` for the byte range `lo..hi` of `text`, laid out: a method call inserted at
/// the end of a line of a chain written one call per line (`.role(..)\n    .send()`) and an
/// attribute inserted at the end of the line above an item get a line of their own with the
/// next line's indentation; an attribute inserted at the start of an item's line is followed
/// by a line break with that line's indentation. Anything else is returned as it is.
pub fn lay_out(text: &str, lo: usize, hi: usize, replacement: String) -> String {
    let is_call = replacement.starts_with('.');
    let is_attr = replacement.starts_with("#[");
    if lo != hi || !(is_call || is_attr) || replacement.contains('\n') {
        return replacement;
    }
    if lo > text.len() || !text.is_char_boundary(lo) {
        return replacement;
    }
    let line_start = text[..lo].rfind('\n').map_or(0, |i| i + 1);
    let before = &text[line_start..lo];
    if is_attr && before.trim().is_empty() {
        return format!("{replacement}\n{before}");
    }
    let rest = &text[lo..];
    let Some(line_end) = rest.find('\n') else {
        return replacement;
    };
    if !rest[..line_end].trim().is_empty() {
        return replacement;
    }
    let next = &rest[line_end + 1..];
    let indent = &next[..next.len() - next.trim_start_matches([' ', '\t']).len()];
    if is_call && !next[indent.len()..].starts_with('.') {
        return replacement;
    }
    format!("\n{indent}{replacement}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn insert(text: &str, at: usize, what: &str) -> String {
        let laid = lay_out(text, at, at, what.to_string());
        format!("{}{laid}{}", &text[..at], &text[at..])
    }

    #[test]
    fn an_inserted_call_or_attribute_gets_its_own_line() {
        let chain = "c.op()\n    .role(r)\n    .send()";
        let at = chain.find(".send").unwrap() - "\n    ".len();
        assert_eq!(
            insert(chain, at, ".token(k)"),
            "c.op()\n    .role(r)\n    .token(k)\n    .send()"
        );
        let doc = "    /// Resends.\n    pub fn resend() {}\n";
        let at = doc.find('\n').unwrap();
        assert_eq!(
            insert(doc, at, "#[x]"),
            "    /// Resends.\n    #[x]\n    pub fn resend() {}\n"
        );
        let bare = "    pub fn resend() {}\n";
        assert_eq!(
            insert(bare, 4, "#[x]"),
            "    #[x]\n    pub fn resend() {}\n"
        );
        let one_line = "c.op().send()";
        assert_eq!(insert(one_line, 6, ".token(k)"), "c.op().token(k).send()");
        // A replacement, or an insertion past the text, is left alone.
        assert_eq!(lay_out(doc, 0, 3, "#[x]".into()), "#[x]");
        assert_eq!(lay_out(doc, 999, 999, "#[x]".into()), "#[x]");
    }
}
