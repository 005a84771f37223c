//! Key descriptions: how a key expression reads in a message (`order:{id}`), and
//! the placeholder text helpers.

use super::*;

/// How a key is derived, as canonical text: conversions and references stripped, locals
/// replaced by their definitions, parameters as `$0$`, format strings with `{}` holes.
/// `roots` are the variables and fields it depends on, `lits` its literal parts.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KeyDesc {
    pub text: String,
    pub roots: Vec<String>,
    pub lits: Vec<String>,
}

/// Longest description kept; longer keys are compared by roots and literals.
pub(super) const MAX_DESC: usize = 160;

impl KeyDesc {
    pub(super) fn root(text: String) -> KeyDesc {
        KeyDesc {
            roots: vec![text.clone()],
            text,
            lits: Vec::new(),
        }
    }

    pub(super) fn lit(text: String) -> KeyDesc {
        KeyDesc {
            text: format!("{text:?}"),
            roots: Vec::new(),
            lits: vec![text],
        }
    }

    pub(super) fn combine(head: &str, parts: &[KeyDesc]) -> KeyDesc {
        let mut text = format!("{head}(");
        let mut roots = Vec::new();
        let mut lits = Vec::new();
        for (i, p) in parts.iter().enumerate() {
            if i > 0 {
                text.push(',');
            }
            text.push_str(&p.text);
            roots.extend(p.roots.iter().cloned());
            lits.extend(p.lits.iter().cloned());
        }
        text.push(')');
        text.truncate(MAX_DESC);
        roots.sort();
        roots.dedup();
        KeyDesc { text, roots, lits }
    }

    /// Whether two keys are the same key, as far as they can be compared: the same
    /// derivation, or the same variables with the same literal parts.
    pub fn same_key(&self, other: &KeyDesc) -> bool {
        if self.text == other.text {
            return true;
        }
        let shared_root = self.roots.iter().any(|r| other.roots.contains(r));
        let lits_agree = self.lits == other.lits || self.lits.is_empty() || other.lits.is_empty();
        shared_root && lits_agree
    }

    /// The key as the caller sees it: parameter placeholders replaced by the arguments'
    /// descriptions (an argument without one leaves the key without comparable parts).
    /// All placeholders are replaced in one pass: an argument's own description holds the
    /// caller's placeholders (`$1$` of the caller's second parameter), which are not the
    /// callee's and must not be replaced again.
    pub fn instantiate(&self, args: &[Option<KeyDesc>]) -> KeyDesc {
        let mut lits = self.lits.clone();
        let text = replace_placeholders(&self.text, |i| match args.get(i)? {
            Some(a) => {
                lits.extend(a.lits.iter().cloned());
                Some(a.text.clone())
            }
            None => Some(format!("?{i}")),
        });
        let mut roots = Vec::new();
        for r in &self.roots {
            match first_placeholder(r).filter(|(i, _)| *i < args.len()) {
                Some((i, ph)) => {
                    let arg_roots = args[i].as_ref().map_or(&[][..], |a| &a.roots[..]);
                    roots.extend(arg_roots.iter().map(|x| r.replacen(ph, x, 1)));
                }
                None => roots.push(r.clone()),
            }
        }
        KeyDesc { text, roots, lits }
    }
}

/// `text` with each `$i$` replaced by `with(i)` (kept when that is `None`), in one pass.
pub(super) fn replace_placeholders(
    text: &str,
    mut with: impl FnMut(usize) -> Option<String>,
) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some((start, i, ph)) = next_placeholder(rest) {
        out.push_str(&rest[..start]);
        match with(i) {
            Some(r) => out.push_str(&r),
            None => out.push_str(ph),
        }
        rest = &rest[start + ph.len()..];
    }
    out.push_str(rest);
    out
}

/// The first `$i$` in `text`: its index and its text.
pub(super) fn first_placeholder(text: &str) -> Option<(usize, &str)> {
    next_placeholder(text).map(|(_, i, ph)| (i, ph))
}

/// The first `$i$` in `text`: where it starts, its index and its text.
pub(super) fn next_placeholder(text: &str) -> Option<(usize, usize, &str)> {
    let mut from = 0;
    while let Some(off) = text[from..].find('$') {
        let start = from + off;
        let digits = text[start + 1..]
            .find(|c: char| !c.is_ascii_digit())
            .map_or(text.len(), |n| start + 1 + n);
        if digits > start + 1 && text[digits..].starts_with('$') {
            if let Ok(i) = text[start + 1..digits].parse() {
                return Some((start, i, &text[start..=digits]));
            }
        }
        from = start + 1;
    }
    None
}

/// `{id}`, `{:?}`, `{0}` → `{}`: format templates compare by their literal parts.
pub(super) fn normalize_template(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut depth = false;
    for c in s.chars() {
        match c {
            '{' if !depth => {
                depth = true;
                out.push_str("{}");
            }
            '}' if depth => depth = false,
            _ if depth => {}
            _ => out.push(c),
        }
    }
    out
}

impl<'a> Walker<'a, '_> {
    // ------------------------------------------------------------ key descriptions

    /// How `e` is derived, for comparing keys.
    pub(super) fn describe(&self, e: &Expr) -> Option<KeyDesc> {
        self.describe_at(e, 0)
    }

    pub(super) fn describe_at(&self, e: &Expr, depth: usize) -> Option<KeyDesc> {
        if depth > MAX_DESC_DEPTH {
            return None;
        }
        let d = depth + 1;
        let e = e.peel();
        match &e.kind {
            ExprKind::Path(p) => match p.as_ident() {
                Some(name) => match self.descs.get(name) {
                    Some(DescSrc::Desc(k)) => Some(k.clone()),
                    Some(DescSrc::Expr(init)) => self.describe_at(init, d),
                    None => Some(KeyDesc::root(name.to_owned())),
                },
                None => Some(KeyDesc::lit(p.segments.join("::"))),
            },
            ExprKind::Lit(Lit::Str(s)) => Some(KeyDesc::lit(s.clone())),
            ExprKind::Lit(_) => Some(KeyDesc::lit(String::from("lit"))),
            ExprKind::Cast { expr, .. } => self.describe_at(expr, d),
            ExprKind::Field { base, member } => {
                let b = self.describe_at(base, d)?;
                let text = format!("{}.{member}", b.text);
                if b.roots.len() == 1 && b.roots[0] == b.text {
                    Some(KeyDesc::root(text))
                } else {
                    Some(KeyDesc { text, ..b })
                }
            }
            ExprKind::MethodCall {
                receiver,
                method,
                args,
                ..
            } => {
                if CONVERSIONS.contains(&method.as_str()) {
                    return self.describe_at(receiver, d);
                }
                let mut parts = vec![self.describe_at(receiver, d)?];
                for a in args {
                    parts.push(self.describe_at(a, d)?);
                }
                Some(KeyDesc::combine(method, &parts))
            }
            ExprKind::Call { func, args } => {
                let p = func.as_path()?;
                // `AttributeValue::S(id)`, `Some(id)`, `String::from(id)`: the same key.
                if args.len() == 1
                    && (p.last().starts_with(char::is_uppercase) || p.last() == "from")
                {
                    return self.describe_at(&args[0], d);
                }
                let parts: Option<Vec<KeyDesc>> =
                    args.iter().map(|a| self.describe_at(a, d)).collect();
                Some(KeyDesc::combine(&p.segments.join("::"), &parts?))
            }
            ExprKind::Macro(m) if FORMAT_MACROS.contains(&m.path.last()) => {
                // `format!("seen:{id}")` and `format!("seen:{}", id)` lower to the same
                // arguments (an inline capture is an extra path argument), and templates
                // compare with `{}` holes.
                let parts: Option<Vec<KeyDesc>> = m
                    .args
                    .iter()
                    .map(|a| match a.as_str_lit() {
                        Some(s) => Some(KeyDesc::lit(normalize_template(s))),
                        None => self.describe_at(a, d),
                    })
                    .collect();
                Some(KeyDesc::combine("fmt", &parts?))
            }
            ExprKind::Binary { lhs, rhs, .. } => Some(KeyDesc::combine(
                "op",
                &[self.describe_at(lhs, d)?, self.describe_at(rhs, d)?],
            )),
            _ => None,
        }
    }
}
