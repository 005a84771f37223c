//! A small SQL reader for the statements handed to database clients as string literals:
//! enough to tell a read from a write, an atomic claim (`INSERT .. ON CONFLICT DO NOTHING`,
//! `UPDATE .. WHERE id = $1 AND status = 'pending'`) from a plain write, which table, and
//! which placeholder binds which column. Not a parser: it tokenizes and looks at keywords
//! at parenthesis depth 0, which is what these statements need.

/// The statement's verb.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SqlVerb {
    Select,
    Insert,
    Update,
    Delete,
    Other,
}

/// What an `INSERT` does when the row exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnConflict {
    /// A plain insert (fails on a unique constraint, if there is one).
    None,
    /// `ON CONFLICT DO NOTHING`, `INSERT IGNORE`, `INSERT OR IGNORE`, `WHERE NOT EXISTS`.
    DoNothing,
    /// `ON CONFLICT DO UPDATE`, `ON DUPLICATE KEY UPDATE`, `REPLACE`, `INSERT OR REPLACE`.
    DoUpdate,
}

/// What [`parse`] learned about one statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqlStatement {
    pub verb: SqlVerb,
    /// The table read (first `FROM`), inserted into, updated or deleted from; lower-case,
    /// schema and quotes stripped.
    pub table: Option<String>,
    /// `INSERT` columns with the placeholder each one is given (0-based bind index).
    pub columns: Vec<(String, Option<usize>)>,
    /// `ON CONFLICT (a, b)` target columns.
    pub conflict_columns: Vec<String>,
    pub on_conflict: OnConflict,
    /// An `UPDATE`/`DELETE` whose `WHERE` tests more than the key (`AND status = 'new'`,
    /// `processed_at IS NULL`): a compare-and-set when the caller checks rows affected.
    pub conditional_where: bool,
    /// Placeholders (0-based bind indices) in the `WHERE` clause.
    pub where_params: Vec<usize>,
    /// `column = $n` equalities of the `WHERE` clause.
    pub where_eq: Vec<(String, usize)>,
    /// `FOR UPDATE`/`FOR SHARE`, advisory locks: the read holds a lock.
    pub locking: bool,
    pub returning: bool,
    /// Number of distinct placeholders.
    pub params: usize,
    /// Columns given a value: `UPDATE .. SET` (and `DO UPDATE SET`) assignments, `INSERT`
    /// columns with their `VALUES` item.
    pub assigned: Vec<(String, Assigned)>,
}

/// The value a statement gives a column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Assigned {
    /// A literal: `'done'`, `true`, `1`.
    Literal(String),
    /// A placeholder (0-based bind index).
    Param(usize),
    /// A function call: `now()`.
    Call(String),
    /// An expression of the column itself: `balance = balance + $1`.
    SelfRef,
    Other,
}

impl SqlStatement {
    /// Whether the table's name says it records processed messages or idempotency keys.
    pub fn is_dedupe_table(&self) -> bool {
        self.table.as_deref().is_some_and(is_dedupe_table_name)
    }

    /// The bind indices that carry the row's key: for an insert the conflict target, else
    /// key-like columns (`id`, `key`, `*_id`, `*_key`, `*token`); for the others the
    /// `WHERE` placeholders.
    pub fn key_params(&self) -> Vec<usize> {
        match self.verb {
            SqlVerb::Insert => {
                let by_conflict: Vec<usize> = self
                    .columns
                    .iter()
                    .filter(|(c, _)| self.conflict_columns.contains(c))
                    .filter_map(|(_, p)| *p)
                    .collect();
                if !by_conflict.is_empty() {
                    return by_conflict;
                }
                // `uniq_hash`, `idempotency_key`: the column the row is deduplicated by.
                let dedupe: Vec<usize> = self
                    .columns
                    .iter()
                    .filter(|(c, _)| is_dedupe_key_column(c))
                    .filter_map(|(_, p)| *p)
                    .collect();
                if !dedupe.is_empty() {
                    return dedupe;
                }
                let keyish: Vec<usize> = self
                    .columns
                    .iter()
                    .filter(|(c, _)| is_key_column(c))
                    .filter_map(|(_, p)| *p)
                    .collect();
                if !keyish.is_empty() {
                    return keyish;
                }
                self.columns
                    .iter()
                    .filter_map(|(_, p)| *p)
                    .take(1)
                    .collect()
            }
            _ if !self.where_key_params().is_empty() => self.where_key_params(),
            _ if !self.where_params.is_empty() => self.where_params.clone(),
            _ => (0..self.params).collect(),
        }
    }

    /// Placeholders the `WHERE` clause compares with key-like columns (`id = $1`), not with
    /// times or states (`lock_at < $2`, `status = $3`).
    pub fn where_key_params(&self) -> Vec<usize> {
        self.where_eq
            .iter()
            .filter(|(c, _)| is_key_column(c) || is_dedupe_key_column(c))
            .map(|(_, p)| *p)
            .collect()
    }

    /// Whether [`Self::key_params`] are certainly the row's key rather than a guess.
    pub fn keys_certain(&self) -> bool {
        match self.verb {
            SqlVerb::Insert => !self.conflict_columns.is_empty() || self.is_dedupe_table(),
            _ => !self.where_key_params().is_empty(),
        }
    }

    /// A plain `INSERT` into a dedupe table of its key columns and nothing but timestamps
    /// or literals besides (`(event_id, processed_at) VALUES ($1, now())`): the key is
    /// the table's primary key, so a second insert of the same key fails.
    pub fn inserts_only_key(&self) -> bool {
        let time_or_literal = |c: &str, v: Option<&Assigned>| {
            let time_like = c.ends_with("_at") || c.contains("time") || c.contains("date");
            time_like || matches!(v, Some(Assigned::Literal(_) | Assigned::Call(_)))
        };
        self.verb == SqlVerb::Insert
            && self.on_conflict == OnConflict::None
            && self.is_dedupe_table()
            && self.columns.iter().any(|(c, _)| is_key_column(c))
            && self.columns.iter().all(|(c, _)| {
                let v = self.assigned.iter().find(|(a, _)| a == c).map(|(_, v)| v);
                is_key_column(c) || time_or_literal(c, v)
            })
    }

    /// A `SELECT` that looks a row up by a dedupe-named column (`WHERE uniq_hash = $1`).
    pub fn reads_by_dedupe_key(&self) -> bool {
        self.verb == SqlVerb::Select && self.where_eq.iter().any(|(c, _)| is_dedupe_key_column(c))
    }

    /// Bind indices that are not keys (the data written).
    pub fn value_params(&self) -> Vec<usize> {
        let keys = self.key_params();
        (0..self.params).filter(|p| !keys.contains(p)).collect()
    }
}

/// Table names that record processed messages or idempotency keys.
pub fn is_dedupe_table_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    [
        "processed",
        "dedup",
        "idempot",
        "inbox",
        "seen_",
        "handled",
        "consumed",
    ]
    .iter()
    .any(|w| n.contains(w))
}

/// Tables that record how far a consumer has got (`consumer_positions`, `projection_checkpoints`,
/// `kafka_offsets`, `sync_cursors`): writing one marks everything up to a message as processed.
/// A `positions` table alone is a trading book's; it is a consumer's only next to a word that
/// says whose position it is.
pub fn is_progress_table_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    let parts: Vec<&str> = n
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|p| !p.is_empty())
        .map(|p| p.strip_suffix('s').unwrap_or(p))
        .collect();
    let of_a_consumer = parts.iter().any(|p| {
        matches!(
            *p,
            "consumer"
                | "stream"
                | "subscription"
                | "partition"
                | "projection"
                | "projector"
                | "reader"
                | "subscriber"
                | "shard"
        )
    });
    parts.iter().any(|p| {
        matches!(*p, "checkpoint" | "offset" | "cursor" | "watermark")
            || *p == "position" && of_a_consumer
    })
}

/// Columns whose name says they hold a uniqueness or dedupe key (`uniq_hash`, `unique_key`,
/// `dedupe_id`, `idempotency_key`): a lookup by one asks "was this done already?".
pub fn is_dedupe_key_column(c: &str) -> bool {
    let c = c.rsplit('.').next().unwrap_or(c).to_ascii_lowercase();
    ["uniq", "dedup", "idempot"].iter().any(|w| c.contains(w))
}

/// Columns that hold a row's key rather than data.
fn is_key_column(c: &str) -> bool {
    let time_like = c.ends_with("_at") || c.contains("time") || c.contains("date");
    !time_like
        && (c == "id"
            || c == "key"
            || c == "pk"
            || c.ends_with("_id")
            || c.ends_with("_key")
            || c.ends_with("token"))
}

/// Whether `text` looks like one SQL statement (starts with a statement keyword).
pub fn looks_like_sql(text: &str) -> bool {
    let first = text
        .trim_start()
        .split(|c: char| !c.is_ascii_alphabetic())
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    matches!(
        first.as_str(),
        "select" | "insert" | "update" | "delete" | "with" | "replace" | "upsert" | "merge"
    )
}

/// Whether `text` reads as a whole statement, not only a word that starts like one
/// (`"update:{id}"` is a Redis key): the verb, white space, and the clause that verb needs
/// (`INSERT .. INTO`, `UPDATE .. SET`, `DELETE .. FROM`).
pub fn looks_like_statement(text: &str) -> bool {
    if !looks_like_sql(text) {
        return false;
    }
    let lower = text.trim_start().to_ascii_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .collect();
    let verb_then_space = lower
        .trim_start_matches(|c: char| c.is_ascii_alphabetic())
        .starts_with(char::is_whitespace);
    let needs = match words.first().copied() {
        Some("insert" | "replace" | "upsert") => "into",
        Some("update") => "set",
        Some("delete") => "from",
        Some("select" | "with" | "merge") => return verb_then_space && words.len() > 1,
        _ => return false,
    };
    verb_then_space && words.contains(&needs)
}

/// What one `{..}` of a `format!` template holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hole {
    /// A constant text (a literal, a `const`): spliced in as written.
    Text(String),
    /// A value known only at run time; the name it is written with (`table_name` for
    /// `self.table_name`), used as a table or column name when it stands in one.
    Runtime(String),
}

/// The SQL a `format!` builds from `template`, when the template alone decides what the
/// statement does. `hole(name, index)` gives each `{..}`: its name (`""` for `{}`, `"0"`,
/// `"table"`) and its positional index. Constant parts are spliced in; a run-time value is
/// accepted only where it can name a table or column (after `FROM`/`INTO`/`UPDATE`/`JOIN`/
/// `TABLE`, or glued to a name: `{schema}.jobs`, `{prefix}_jobs`) or inside a quoted
/// literal; anywhere else (`VALUES ({list})`, `WHERE {cond}`, `{on_conflict}`) it could change
/// the statement's shape, so there is no text (`None`).
pub fn format_skeleton(
    template: &str,
    hole: &mut dyn FnMut(&str, usize) -> Hole,
) -> Option<String> {
    let mut out = String::with_capacity(template.len());
    let mut chars = template.chars().peekable();
    let mut positional = 0usize;
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                out.push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                out.push('}');
            }
            '{' => {
                let mut spec = String::new();
                loop {
                    match chars.next()? {
                        '}' => break,
                        c => spec.push(c),
                    }
                }
                let name = spec.split(':').next().unwrap_or("").trim();
                let index = match name.parse::<usize>() {
                    Ok(i) => i,
                    Err(_) if name.is_empty() => {
                        positional += 1;
                        positional - 1
                    }
                    Err(_) => usize::MAX,
                };
                match hole(name, index) {
                    Hole::Text(t) => out.push_str(&t),
                    Hole::Runtime(hint) => {
                        let next = chars.peek().copied();
                        if in_quoted_literal(&out) {
                            // A value inside `'..'`: a literal, whatever it holds.
                        } else if names_an_object(&out, next) {
                            out.push_str(&identifier_of(&hint));
                        } else {
                            return None;
                        }
                    }
                }
            }
            c => out.push(c),
        }
    }
    Some(out)
}

/// Whether the text so far ends inside a `'..'` literal.
fn in_quoted_literal(before: &str) -> bool {
    before.chars().filter(|&c| c == '\'').count() % 2 == 1
}

/// Whether a value spliced between `before` and the character `next` stands where a table or
/// column name goes.
fn names_an_object(before: &str, next: Option<char>) -> bool {
    let name_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '"' | '`');
    if before.chars().next_back().is_some_and(name_char) || next.is_some_and(name_char) {
        return true;
    }
    let prev_word = before
        .trim_end()
        .rsplit(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    let ends_name = next.is_none_or(|c| c.is_whitespace() || matches!(c, '(' | ';' | ','));
    ends_name
        && matches!(
            prev_word.as_str(),
            "from" | "into" | "update" | "join" | "table"
        )
}

/// `self.table_name` -> `table_name`: a name that can stand in SQL text.
fn identifier_of(hint: &str) -> String {
    let id: String = hint
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if id.is_empty() || id.starts_with(|c: char| c.is_ascii_digit()) {
        format!("t{id}")
    } else {
        id.to_ascii_lowercase()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Tok {
    Word(String),
    Open,
    Close,
    Comma,
    /// A placeholder with its 0-based bind index.
    Param(usize),
    Op(String),
    /// A string literal's content.
    Str(String),
}

pub(super) fn tokenize(text: &str) -> (Vec<Tok>, usize) {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let mut positional = 0usize;
    let mut max_param = 0usize;
    while i < b.len() {
        let c = b[i];
        match c {
            b' ' | b'\t' | b'\n' | b'\r' => i += 1,
            b'-' if b.get(i + 1) == Some(&b'-') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                    i += 1;
                }
                i += 2;
            }
            b'\'' => {
                i += 1;
                let start = i;
                while i < b.len() {
                    if b[i] == b'\'' {
                        if b.get(i + 1) == Some(&b'\'') {
                            i += 2;
                            continue;
                        }
                        break;
                    }
                    i += 1;
                }
                out.push(Tok::Str(text[start..i.min(b.len())].replace("''", "'")));
                i += 1;
            }
            b'(' => {
                out.push(Tok::Open);
                i += 1;
            }
            b')' => {
                out.push(Tok::Close);
                i += 1;
            }
            b',' => {
                out.push(Tok::Comma);
                i += 1;
            }
            b'$' | b'?' => {
                let start = i + 1;
                let mut j = start;
                while j < b.len() && b[j].is_ascii_digit() {
                    j += 1;
                }
                let idx = if j > start {
                    text[start..j]
                        .parse::<usize>()
                        .unwrap_or(1)
                        .saturating_sub(1)
                } else {
                    positional += 1;
                    positional - 1
                };
                max_param = max_param.max(idx + 1);
                out.push(Tok::Param(idx));
                i = j.max(i + 1);
            }
            c if c.is_ascii_alphanumeric() || c == b'_' || c == b'"' || c == b'`' || c == b'[' => {
                let mut j = i;
                while j < b.len()
                    && (b[j].is_ascii_alphanumeric()
                        || matches!(b[j], b'_' | b'"' | b'`' | b'.' | b'[' | b']'))
                {
                    j += 1;
                }
                let word: String = text[i..j]
                    .chars()
                    .filter(|c| !matches!(c, '"' | '`' | '[' | ']'))
                    .collect::<String>()
                    .to_ascii_lowercase();
                out.push(Tok::Word(word));
                i = j;
            }
            _ => {
                // A whole character: text outside ASCII is one operator, never half of one.
                let mut j = i + text[i..].chars().next().map_or(1, char::len_utf8);
                while j < b.len() && matches!(b[j], b'<' | b'>' | b'=' | b'!') {
                    j += 1;
                }
                out.push(Tok::Op(text[i..j].to_owned()));
                i = j;
            }
        }
    }
    (out, max_param)
}

pub(super) fn word(t: Option<&Tok>) -> Option<&str> {
    match t {
        Some(Tok::Word(w)) => Some(w),
        _ => None,
    }
}

pub(super) fn table_name(w: &str) -> String {
    w.rsplit('.').next().unwrap_or(w).to_owned()
}

/// Reads one statement.
pub fn parse(text: &str) -> SqlStatement {
    let (toks, params) = tokenize(text);
    // Depth-0 positions; a leading `WITH x AS (...)` is skipped to the main statement.
    let mut depth = 0i32;
    let mut top: Vec<usize> = Vec::new();
    for (i, t) in toks.iter().enumerate() {
        match t {
            Tok::Open => depth += 1,
            Tok::Close => depth -= 1,
            _ if depth == 0 => top.push(i),
            _ => {}
        }
    }
    let is_word = |i: usize, w: &str| word(toks.get(i)) == Some(w);
    let verb_at = top
        .iter()
        .copied()
        .find(|&i| {
            matches!(
                word(toks.get(i)),
                Some("select" | "insert" | "update" | "delete" | "replace" | "upsert")
            )
        })
        .unwrap_or(0);
    let verb_word = word(toks.get(verb_at)).unwrap_or("");
    let verb = match verb_word {
        "select" => SqlVerb::Select,
        "insert" | "replace" | "upsert" => SqlVerb::Insert,
        "update" => SqlVerb::Update,
        "delete" => SqlVerb::Delete,
        _ => SqlVerb::Other,
    };
    let all_words: Vec<&str> = toks.iter().filter_map(|t| word(Some(t))).collect();
    let has_seq = |seq: &[&str]| all_words.windows(seq.len()).any(|w| w == seq);
    let top_after = |from: usize| top.iter().copied().filter(move |&i| i > from);
    let mut st = SqlStatement {
        verb,
        table: None,
        columns: Vec::new(),
        conflict_columns: Vec::new(),
        on_conflict: OnConflict::None,
        conditional_where: false,
        where_params: Vec::new(),
        where_eq: Vec::new(),
        locking: has_seq(&["for", "update"])
            || has_seq(&["for", "share"])
            || has_seq(&["for", "no", "key", "update"])
            || all_words
                .iter()
                .any(|w| w.contains("advisory") && !w.contains("unlock")),
        returning: all_words.contains(&"returning"),
        params,
        assigned: Vec::new(),
    };
    match verb {
        SqlVerb::Insert => {
            let into = (verb_at..toks.len()).find(|&i| is_word(i, "into"));
            if let Some(t) = into.and_then(|i| word(toks.get(i + 1))) {
                st.table = Some(table_name(t));
            }
            if let Some(into) = into {
                st.columns = insert_columns(&toks, into + 2);
                st.assigned = insert_values(&toks, into + 2);
            }
            let ignore = has_seq(&["insert", "ignore"]) || has_seq(&["or", "ignore"]);
            let replace = verb_word == "replace" || has_seq(&["or", "replace"]);
            st.on_conflict = if has_seq(&["do", "nothing"]) || ignore {
                OnConflict::DoNothing
            } else if has_seq(&["do", "update"]) || has_seq(&["duplicate", "key"]) || replace {
                OnConflict::DoUpdate
            } else if has_seq(&["where", "not", "exists"]) || has_seq(&["if", "not", "exists"]) {
                OnConflict::DoNothing
            } else {
                OnConflict::None
            };
            if let Some(i) = (0..toks.len()).find(|&i| is_word(i, "conflict")) {
                if toks.get(i + 1) == Some(&Tok::Open) {
                    let mut j = i + 2;
                    while let Some(w) = word(toks.get(j)) {
                        st.conflict_columns.push(w.to_owned());
                        j += 1;
                        if toks.get(j) == Some(&Tok::Comma) {
                            j += 1;
                        }
                    }
                }
            }
        }
        SqlVerb::Update => {
            if let Some(t) = word(toks.get(verb_at + 1)) {
                st.table = Some(table_name(t));
            }
        }
        SqlVerb::Select | SqlVerb::Delete => {
            if let Some(i) = top_after(verb_at).find(|&i| is_word(i, "from")) {
                st.table = word(toks.get(i + 1)).map(table_name);
            }
        }
        SqlVerb::Other => {}
    }
    for set in top_after(verb_at).filter(|&i| is_word(i, "set")) {
        st.assigned.extend(set_clause(&toks, set + 1));
    }
    if let Some(w) = top_after(verb_at).find(|&i| is_word(i, "where")) {
        let end = top_after(w)
            .find(|&i| {
                matches!(
                    word(toks.get(i)),
                    Some("returning" | "order" | "limit" | "for" | "group" | "on")
                )
            })
            .unwrap_or(toks.len());
        let clause = &toks[w + 1..end];
        st.where_params = clause
            .iter()
            .filter_map(|t| match t {
                Tok::Param(p) => Some(*p),
                _ => None,
            })
            .collect();
        for w in clause.windows(3) {
            match w {
                [Tok::Word(c), Tok::Op(o), Tok::Param(p)]
                | [Tok::Param(p), Tok::Op(o), Tok::Word(c)]
                    if o == "=" =>
                {
                    st.where_eq.push((table_name(c), *p))
                }
                _ => {}
            }
        }
        st.conditional_where = tests_state(clause);
    }
    st
}

/// `a = 'done', b = b + $1, c = now()` from `at` to the end of the clause.
fn set_clause(toks: &[Tok], at: usize) -> Vec<(String, Assigned)> {
    let mut out = Vec::new();
    let mut i = at;
    while let (Some(Tok::Word(col)), Some(Tok::Op(eq))) = (toks.get(i), toks.get(i + 1)) {
        if eq != "=" {
            break;
        }
        let col = table_name(col);
        let mut depth = 0;
        let mut j = i + 2;
        while let Some(t) = toks.get(j) {
            match t {
                Tok::Open => depth += 1,
                Tok::Close if depth == 0 => break,
                Tok::Close => depth -= 1,
                Tok::Comma if depth == 0 => break,
                Tok::Word(w)
                    if depth == 0 && matches!(w.as_str(), "where" | "returning" | "from") =>
                {
                    break
                }
                _ => {}
            }
            j += 1;
        }
        out.push((col.clone(), assigned(&toks[i + 2..j], &col)));
        if toks.get(j) != Some(&Tok::Comma) {
            break;
        }
        i = j + 1;
    }
    out
}

/// SQL functions whose result from the stored value and a new one does not change when
/// applied again with the same new one.
const SETTLING_FNS: &[&str] = &["greatest", "least", "coalesce", "ifnull", "max", "min"];

/// Whether the parenthesis opening `toks` closes at its last token.
fn closes_at_end(toks: &[Tok]) -> bool {
    let mut depth = 0;
    for (i, t) in toks.iter().enumerate() {
        match t {
            Tok::Open => depth += 1,
            Tok::Close => {
                depth -= 1;
                if depth == 0 {
                    return i + 1 == toks.len();
                }
            }
            _ => {}
        }
    }
    false
}

/// What one value expression gives column `col`.
fn assigned(expr: &[Tok], col: &str) -> Assigned {
    // `EXCLUDED.col` is the new row's value, not the stored one; so is a lone qualified
    // column of another relation (`status = j.status` in `UPDATE .. FROM j`): a copy.
    let copied = matches!(expr, [Tok::Word(w)] if w.contains('.'));
    // `idx = GREATEST(t.idx, $1)`, `x = COALESCE(x, $1)`: the stored value kept or replaced,
    // the same after a repeat (not an increment).
    let settles = match expr {
        [Tok::Word(f), Tok::Open, .., Tok::Close] => {
            SETTLING_FNS.contains(&f.as_str()) && closes_at_end(&expr[1..])
        }
        _ => false,
    };
    let refers_to_col = !copied
        && !settles
        && expr.iter().any(
            |t| matches!(t, Tok::Word(w) if !w.starts_with("excluded.") && table_name(w) == col),
        );
    match expr {
        _ if refers_to_col => Assigned::SelfRef,
        [Tok::Str(s)] => Assigned::Literal(s.clone()),
        [Tok::Word(w)]
            if matches!(w.as_str(), "true" | "false" | "null") || w.parse::<f64>().is_ok() =>
        {
            Assigned::Literal(w.clone())
        }
        [Tok::Param(p)] => Assigned::Param(*p),
        [Tok::Word(f), Tok::Open, ..] => Assigned::Call(f.clone()),
        [Tok::Word(w)] if matches!(w.as_str(), "current_timestamp" | "now") => {
            Assigned::Call(w.clone())
        }
        _ => Assigned::Other,
    }
}

/// `(a, b) VALUES ($1, 'done')`: each column with its value.
fn insert_values(toks: &[Tok], at: usize) -> Vec<(String, Assigned)> {
    let cols: Vec<String> = insert_columns(toks, at)
        .into_iter()
        .map(|(c, _)| c)
        .collect();
    let Some(values) = (at..toks.len()).find(|&i| word(toks.get(i)) == Some("values")) else {
        return Vec::new();
    };
    if toks.get(values + 1) != Some(&Tok::Open) {
        return Vec::new();
    }
    let mut out = Vec::new();
    let (mut depth, mut start, mut col) = (0, values + 2, 0);
    for j in values + 2..toks.len() {
        match &toks[j] {
            Tok::Open => depth += 1,
            Tok::Close | Tok::Comma if depth == 0 => {
                if let Some(c) = cols.get(col) {
                    out.push((c.clone(), assigned(&toks[start..j], c)));
                }
                col += 1;
                start = j + 1;
                if toks[j] == Tok::Close {
                    break;
                }
            }
            Tok::Close => depth -= 1,
            _ => {}
        }
    }
    out
}

/// Whether a `WHERE` clause tests the row's state, not only which row: `IS NULL`, an
/// ordering comparison (`lock_at < $2`, `attempts < 3`), `NOT`, or any comparison of a
/// state-like column (`status = 'new'`, `processed = false`, `version = $3`). `id = $1 AND
/// queue = $2` only selects the row.
fn tests_state(clause: &[Tok]) -> bool {
    let state_column = |c: &str| {
        let c = c.rsplit('.').next().unwrap_or(c);
        [
            "status",
            "state",
            "lock",
            "claim",
            "processed",
            "done",
            "handled",
            "version",
            "attempt",
            "owner",
            "lease",
        ]
        .iter()
        .any(|w| c.contains(w))
            || c.ends_with("_at")
            || c.ends_with("_until")
    };
    clause.iter().enumerate().any(|(i, t)| match t {
        Tok::Word(w) if matches!(w.as_str(), "is" | "not" | "exists") => true,
        Tok::Op(o) if matches!(o.as_str(), "<" | ">" | "<=" | ">=" | "<>" | "!=") => true,
        Tok::Op(o) if o == "=" => {
            let side = |t: Option<&Tok>| matches!(t, Some(Tok::Word(c)) if state_column(c));
            side(i.checked_sub(1).and_then(|j| clause.get(j))) || side(clause.get(i + 1))
        }
        _ => false,
    })
}

/// `(a, b, c) VALUES ($1, $2, now())` starting at the `(` after the table.
fn insert_columns(toks: &[Tok], at: usize) -> Vec<(String, Option<usize>)> {
    let mut cols = Vec::new();
    if toks.get(at) != Some(&Tok::Open) {
        return cols;
    }
    let mut i = at + 1;
    while let Some(t) = toks.get(i) {
        match t {
            Tok::Word(w) => cols.push((w.clone(), None)),
            Tok::Close => break,
            _ => {}
        }
        i += 1;
    }
    if word(toks.get(i + 1)) != Some("values") || toks.get(i + 2) != Some(&Tok::Open) {
        return cols;
    }
    let mut col = 0;
    let mut depth = 0;
    let mut item_param: Option<usize> = None;
    let mut item_len = 0;
    for t in &toks[i + 3..] {
        match t {
            Tok::Open => depth += 1,
            Tok::Close if depth == 0 => break,
            Tok::Close => depth -= 1,
            Tok::Comma if depth == 0 => {
                if let Some(c) = cols.get_mut(col) {
                    c.1 = item_param.filter(|_| item_len == 1);
                }
                col += 1;
                item_param = None;
                item_len = 0;
                continue;
            }
            _ => {}
        }
        if let Tok::Param(p) = t {
            item_param = Some(*p);
        }
        item_len += 1;
    }
    if let Some(c) = cols.get_mut(col) {
        c.1 = item_param.filter(|_| item_len == 1);
    }
    cols
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_tables_are_a_consumers_positions() {
        for t in [
            "consumer_positions",
            "checkpoint",
            "projection_checkpoints",
            "kafka_offsets",
            "sync_cursors",
            "stream_position",
        ] {
            assert!(is_progress_table_name(t), "{t}");
        }
        for t in [
            "positions",
            "trading_positions",
            "orders",
            "offsetting_entries",
        ] {
            assert!(!is_progress_table_name(t), "{t}");
        }
    }

    #[test]
    fn characters_outside_ascii_are_read_whole() {
        // A panic here once (a slice inside U+202E) took down the analysis of a file.
        let s = parse(
            "UPDATE refund_claims SET status = 'done' WHERE \u{202e}\u{202e}refund_id = $=>1 é→",
        );
        assert_eq!(s.verb, SqlVerb::Update);
        assert_eq!(s.table.as_deref(), Some("refund_claims"));
        for text in ["é", "→=>", "SELECT ∑ FROM t", "\u{202e}"] {
            parse(text);
        }
    }

    #[test]
    fn inserts_know_their_conflict_handling_and_key_binds() {
        let s = parse(
            "INSERT INTO processed_messages (message_id, processed_at) VALUES ($1, $2) \
             ON CONFLICT (message_id) DO NOTHING",
        );
        assert_eq!(s.verb, SqlVerb::Insert);
        assert_eq!(s.table.as_deref(), Some("processed_messages"));
        assert_eq!(s.on_conflict, OnConflict::DoNothing);
        assert!(s.is_dedupe_table());
        assert_eq!(s.key_params(), vec![0]);
        assert_eq!(s.value_params(), vec![1]);
        let s = parse("insert into public.\"orders\" (id, total, created_at) values (?, ?, now())");
        assert_eq!(s.table.as_deref(), Some("orders"));
        assert_eq!(s.on_conflict, OnConflict::None);
        assert_eq!(s.key_params(), vec![0]);
        assert_eq!(
            parse("INSERT INTO t (k) VALUES (?) ON DUPLICATE KEY UPDATE k = k").on_conflict,
            OnConflict::DoUpdate
        );
        assert_eq!(
            parse("INSERT OR IGNORE INTO seen (k) VALUES (?1)").on_conflict,
            OnConflict::DoNothing
        );
        assert_eq!(
            parse("INSERT INTO processed (id) VALUES (?) IF NOT EXISTS").on_conflict,
            OnConflict::DoNothing
        );
    }

    #[test]
    fn key_only_inserts_into_dedupe_tables_fail_on_a_repeat() {
        let yes = |q: &str| parse(q).inserts_only_key();
        assert!(yes("INSERT INTO processed_events (event_id) VALUES ($1)"));
        assert!(yes(
            "INSERT INTO processed_events (event_id, processed_at) VALUES ($1, now())"
        ));
        assert!(yes(
            "INSERT INTO inbox (message_id, status) VALUES ($1, 'done')"
        ));
        assert!(!yes(
            "INSERT INTO processed_events (event_id, body) VALUES ($1, $2)"
        ));
        assert!(!yes("INSERT INTO orders (id) VALUES ($1)"));
        assert!(!yes(
            "INSERT INTO processed_events (event_id) VALUES ($1) ON CONFLICT DO NOTHING"
        ));
    }

    #[test]
    fn selects_updates_and_ctes() {
        let s = parse("SELECT 1 FROM processed WHERE id = $1 -- comment\n");
        assert_eq!(
            (s.verb, s.table.as_deref(), s.where_params.clone()),
            (SqlVerb::Select, Some("processed"), vec![0])
        );
        assert!(!s.locking);
        assert!(parse("SELECT * FROM jobs WHERE id = $1 FOR UPDATE SKIP LOCKED").locking);
        let u = parse("UPDATE jobs SET status = 'running' WHERE id = $2 AND status = 'new'");
        assert_eq!(u.table.as_deref(), Some("jobs"));
        assert!(u.conditional_where);
        assert_eq!(u.where_params, vec![1]);
        assert_eq!(u.key_params(), vec![1]);
        let orphans = parse(
            "UPDATE jobs SET status = 'Pending' WHERE id IN (SELECT id FROM jobs \
             WHERE status = 'Running' AND lock_at < $1)",
        );
        assert!(orphans.conditional_where && !orphans.keys_certain());
        assert!(!parse("UPDATE jobs SET status = $1 WHERE id = $2").conditional_where);
        assert!(
            !parse("UPDATE task SET state = $3 WHERE id = $1 AND queue_name = $2")
                .conditional_where
        );
        assert!(
            parse("UPDATE task SET state = 'run' WHERE id = $1 AND state = 'pending'")
                .conditional_where
        );
        assert!(
            parse("UPDATE t SET done_at = now() WHERE id = $1 AND done_at IS NULL")
                .conditional_where
        );
        assert!(parse("SELECT pg_try_advisory_xact_lock($1)").locking);
        assert!(!parse("SELECT pg_advisory_unlock($1)").locking);
        assert!(!parse("UPDATE t SET x = 1 WHERE id = $1::uuid").conditional_where);
        let c = parse("WITH x AS (SELECT id FROM a) INSERT INTO b (id) SELECT id FROM x");
        assert_eq!((c.verb, c.table.as_deref()), (SqlVerb::Insert, Some("b")));
        assert!(looks_like_sql("  select 1"));
        let u = parse("UPDATE accounts SET balance = balance + $1, status = 'done', seen_at = now() WHERE id = $2");
        assert_eq!(
            u.assigned,
            vec![
                ("balance".to_owned(), Assigned::SelfRef),
                ("status".to_owned(), Assigned::Literal("done".to_owned())),
                ("seen_at".to_owned(), Assigned::Call("now".to_owned())),
            ]
        );
        let copy = parse(
            "UPDATE jobs SET status = j.status, attempts = jobs.attempts + 1 FROM j WHERE jobs.id = j.id",
        );
        assert_eq!(
            copy.assigned,
            vec![
                ("status".to_owned(), Assigned::Other),
                ("attempts".to_owned(), Assigned::SelfRef),
            ]
        );
        let settle =
            parse("UPDATE c SET idx = greatest(c.idx, $1), n = coalesce(n, 0) + 1 WHERE id = $2");
        assert_eq!(
            settle.assigned,
            vec![
                ("idx".to_owned(), Assigned::Call("greatest".to_owned())),
                ("n".to_owned(), Assigned::SelfRef),
            ]
        );
        let i = parse("INSERT INTO processed (id, status, at) VALUES ($1, 'it''s done', now())");
        assert_eq!(
            i.assigned,
            vec![
                ("id".to_owned(), Assigned::Param(0)),
                (
                    "status".to_owned(),
                    Assigned::Literal("it's done".to_owned())
                ),
                ("at".to_owned(), Assigned::Call("now".to_owned())),
            ]
        );
        assert!(!looks_like_sql("hello world"));
    }

    #[test]
    fn format_templates_give_their_constant_skeleton_or_nothing() {
        let run = |t: &str, holes: &[Hole]| {
            let mut holes = holes.iter().cloned();
            format_skeleton(t, &mut |_, _| {
                holes.next().unwrap_or(Hole::Runtime("x".into()))
            })
        };
        let rt = |n: &str| Hole::Runtime(n.to_owned());
        // A run-time table name: the skeleton, with the value's name as the table.
        assert_eq!(
            run("INSERT INTO {} (id) VALUES ($1)", &[rt("view_name")]).as_deref(),
            Some("INSERT INTO view_name (id) VALUES ($1)")
        );
        assert_eq!(
            run("SELECT 1 FROM {}.jobs WHERE id = $1", &[rt("schema")]).as_deref(),
            Some("SELECT 1 FROM schema.jobs WHERE id = $1")
        );
        assert_eq!(
            run("UPDATE t SET s = '{}' WHERE id = $1", &[rt("s")]).as_deref(),
            Some("UPDATE t SET s = '' WHERE id = $1")
        );
        // Constant parts are spliced in, whatever they hold.
        assert_eq!(
            run(
                "INSERT INTO t (id) VALUES ($1) {}",
                &[Hole::Text("ON CONFLICT DO NOTHING".into())]
            )
            .as_deref(),
            Some("INSERT INTO t (id) VALUES ($1) ON CONFLICT DO NOTHING")
        );
        // A run-time value that could change the statement: no text.
        assert_eq!(
            run("INSERT INTO t (id) VALUES ($1) {}", &[rt("tail")]),
            None
        );
        assert_eq!(run("SELECT * FROM t WHERE {}", &[rt("cond")]), None);
        assert_eq!(run("SELECT * FROM t WHERE id IN ({})", &[rt("ids")]), None);
        assert_eq!(run("SELECT {{}} FROM {", &[]), None);
        assert!(looks_like_statement("INSERT INTO t (id) VALUES ($1)"));
        // A dedupe-named column is the key of a lookup and of an insert.
        let find = parse("SELECT id FROM jobs WHERE uniq_hash = $1 AND state = 'new'");
        assert!(find.reads_by_dedupe_key());
        assert_eq!(find.key_params(), vec![0]);
        let insert = parse("INSERT INTO jobs (id, payload, uniq_hash) VALUES ($1, $2, $3)");
        assert_eq!(insert.key_params(), vec![2]);
        assert!(looks_like_statement("update jobs set a = 1"));
        assert!(!looks_like_statement("update:{}"));
        assert!(!looks_like_statement("delete-me"));
    }
}
