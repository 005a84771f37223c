//! The unique keys a project's SQL schema declares (its migrations, read in order): per
//! table, the column sets no two rows may share. An `INSERT` that provides every column of
//! one of them fails when the key is taken, so it is an atomic claim even without
//! `ON CONFLICT` (the code cannot show this; only the schema can).
//!
//! Read: a column's `UNIQUE` or `PRIMARY KEY`; a table constraint `UNIQUE (a, b)`,
//! `PRIMARY KEY (a, b)` (named with `CONSTRAINT x` or not, MySQL's `UNIQUE KEY x (..)`);
//! `CREATE UNIQUE INDEX .. ON t (..)`; `ALTER TABLE t ADD [CONSTRAINT x] UNIQUE|PRIMARY KEY
//! (..)`. Later statements undo earlier ones: `DROP TABLE`, `DROP INDEX x`, `ALTER TABLE t
//! DROP CONSTRAINT x`, `ALTER TABLE t RENAME TO u`. Not unique: a plain `CREATE INDEX`, a
//! partial unique index (`.. WHERE ..`: rows outside it may repeat the key) and an index on
//! an expression (`lower(email)`: not the column as inserted).
//!
//! A package's migrations ([`Schema::of_migrations`]) may hold several sequences, one per
//! database the code runs against (`migrations/postgres` and `migrations/sqlite`, or two
//! migrations folders): a table's unique set counts only when every sequence that creates
//! the table declares it, and none counts when some migration could not be read.
//!
//! The text is a project's file, so any text is accepted: what is not understood is skipped,
//! one statement (up to `;`) at a time, and reading is linear in the text.

use super::sql::{table_name, tokenize, word, Tok};
use crate::model::Migrations;
use std::collections::HashMap;

/// The unique column sets of every table the schema texts create.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Schema {
    /// By lower-case table name (schema prefix dropped).
    tables: HashMap<String, Vec<UniqueSet>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct UniqueSet {
    /// The constraint's or index's name, to drop it by; `None` when unnamed.
    name: Option<String>,
    /// Lower-case column names, sorted, no repeats.
    columns: Vec<String>,
}

impl Schema {
    /// Reads schema texts in the order their migrations apply.
    pub fn read<'a>(texts: impl IntoIterator<Item = &'a str>) -> Schema {
        let mut schema = Schema::default();
        for text in texts {
            let (toks, _) = tokenize(text);
            for stmt in toks.split(|t| matches!(t, Tok::Op(op) if op.starts_with(';'))) {
                schema.statement(stmt);
            }
        }
        schema
    }

    /// The schema of a package's migrations: each sequence read in order, then merged so
    /// that a table keeps the unique sets every sequence creating it agrees on. Empty when a
    /// migration could not be read ([`Migrations::incomplete`]): a later one might have
    /// dropped any key.
    pub fn of_migrations(migrations: &Migrations) -> Schema {
        if migrations.incomplete {
            return Schema::default();
        }
        let mut merged: Option<Schema> = None;
        let mut files = migrations.files.as_slice();
        while let Some(first) = files.first() {
            let n = files
                .iter()
                .take_while(|m| m.sequence == first.sequence)
                .count();
            let one = Schema::read(files[..n].iter().map(|m| &*m.text));
            merged = Some(match merged {
                Some(m) => m.agreeing(one),
                None => one,
            });
            files = &files[n..];
        }
        merged.unwrap_or_default()
    }

    /// The tables of both, each with the unique sets of the schemas that create it in
    /// common: what holds whichever of the two databases the code runs against.
    fn agreeing(mut self, other: Schema) -> Schema {
        for (table, theirs) in other.tables {
            match self.tables.get_mut(&table) {
                Some(ours) => ours.retain(|u| theirs.iter().any(|t| t.columns == u.columns)),
                None => {
                    self.tables.insert(table, theirs);
                }
            }
        }
        self
    }

    /// Whether the schema declares no unique key at all.
    pub fn is_empty(&self) -> bool {
        self.tables.values().all(Vec::is_empty)
    }

    /// The unique column sets of `table` (lower-case names, each sorted).
    pub fn unique_sets<'s>(&'s self, table: &str) -> impl Iterator<Item = &'s [String]> + 's {
        self.tables
            .get(&table_name(&table.to_ascii_lowercase()))
            .into_iter()
            .flatten()
            .map(|u| u.columns.as_slice())
    }

    /// A unique set of `table` whose every column is among `columns` (an insert that provides
    /// them fails when the key is taken). A key the insert leaves to the database (a generated
    /// id) is not among them, so it covers nothing.
    pub fn covering(&self, table: &str, columns: &[&str]) -> Option<&[String]> {
        self.unique_sets(table).find(|set| {
            set.iter()
                .all(|c| columns.iter().any(|i| i.eq_ignore_ascii_case(c)))
        })
    }

    fn statement(&mut self, toks: &[Tok]) {
        let w = |i: usize| word(toks.get(i));
        match (w(0), w(1)) {
            (Some("create"), _) => self.create(toks),
            (Some("alter"), Some("table")) => self.alter_table(toks),
            (Some("drop"), Some("table")) => {
                for name in names_after(toks, 2) {
                    self.tables.remove(&name);
                }
            }
            (Some("drop"), Some("index")) => {
                for name in names_after(toks, 2) {
                    self.drop_named(None, &name);
                }
            }
            _ => {}
        }
    }

    fn create(&mut self, toks: &[Tok]) {
        let mut i = 1;
        // `CREATE [OR REPLACE] [TEMP|TEMPORARY|UNLOGGED] TABLE`, `CREATE UNIQUE INDEX`.
        while let Some(
            "or" | "replace" | "temp" | "temporary" | "unlogged" | "global" | "local" | "virtual",
        ) = word(toks.get(i))
        {
            i += 1;
        }
        match word(toks.get(i)) {
            Some("table") => self.create_table(toks, skip_if_not_exists(toks, i + 1)),
            Some("unique") if word(toks.get(i + 1)) == Some("index") => {
                self.create_unique_index(toks, i + 2)
            }
            _ => {}
        }
    }

    fn create_table(&mut self, toks: &[Tok], at: usize) {
        let Some(table) = word(toks.get(at)).map(table_name) else {
            return;
        };
        // A table created again starts over (a migration that rebuilds it, SQLite's way
        // of changing a column).
        let sets = self.tables.entry(table).or_default();
        sets.clear();
        if toks.get(at + 1) != Some(&Tok::Open) {
            return; // `CREATE TABLE t AS SELECT ..`: no constraints.
        }
        let Some(body) = group(toks, at + 1) else {
            return;
        };
        for def in split_commas(body) {
            if let Some(set) = table_constraint(def) {
                push(sets, set);
            } else if let Some(col) = column_constraint(def) {
                push(sets, col);
            }
        }
    }

    fn create_unique_index(&mut self, toks: &[Tok], mut i: usize) {
        if word(toks.get(i)) == Some("concurrently") {
            i += 1;
        }
        i = skip_if_not_exists(toks, i);
        let name = match word(toks.get(i)) {
            Some("on") => None,
            Some(n) => {
                i += 1;
                Some(table_name(n))
            }
            None => return,
        };
        if word(toks.get(i)) != Some("on") {
            return;
        }
        i += 1;
        if word(toks.get(i)) == Some("only") {
            i += 1;
        }
        let Some(table) = word(toks.get(i)).map(table_name) else {
            return;
        };
        i += 1;
        if word(toks.get(i)) == Some("using") {
            i += 2;
        }
        let Some(cols) = group(toks, i) else {
            return;
        };
        // A partial index leaves the rows outside it free to repeat the key.
        let rest = &toks[(i + cols.len() + 2).min(toks.len())..];
        if rest.iter().any(|t| word(Some(t)) == Some("where")) {
            return;
        }
        if let Some(columns) = column_list(cols) {
            push(
                self.tables.entry(table).or_default(),
                UniqueSet { name, columns },
            );
        }
    }

    fn alter_table(&mut self, toks: &[Tok]) {
        let mut i = skip_if_exists(toks, 2);
        if word(toks.get(i)) == Some("only") {
            i += 1;
        }
        let Some(table) = word(toks.get(i)).map(table_name) else {
            return;
        };
        let actions = toks.get(i + 1..).unwrap_or(&[]);
        for action in split_commas(actions) {
            match (word(action.first()), word(action.get(1))) {
                (Some("add"), _) => {
                    if let Some(set) = table_constraint(&action[1..]) {
                        push(self.tables.entry(table.clone()).or_default(), set);
                    }
                }
                (Some("drop"), Some("constraint")) => {
                    if let Some(name) = names_after(action, 2).into_iter().next() {
                        self.drop_named(Some(&table), &name);
                    }
                }
                (Some("rename"), Some("to")) => {
                    if let Some(new) = word(action.get(2)).map(table_name) {
                        let sets = self.tables.remove(&table).unwrap_or_default();
                        self.tables.insert(new, sets);
                    }
                    return;
                }
                _ => {}
            }
        }
    }

    /// Forgets the constraint or index `name` (of `table` when given).
    fn drop_named(&mut self, table: Option<&str>, name: &str) {
        for (t, sets) in &mut self.tables {
            if table.is_none_or(|want| want == t) {
                sets.retain(|s| s.name.as_deref() != Some(name));
            }
        }
    }
}

fn push(sets: &mut Vec<UniqueSet>, set: UniqueSet) {
    if !sets.iter().any(|s| s.columns == set.columns) {
        sets.push(set);
    }
}

fn skip_if_not_exists(toks: &[Tok], i: usize) -> usize {
    let w = |k: usize| word(toks.get(k));
    if (w(i), w(i + 1), w(i + 2)) == (Some("if"), Some("not"), Some("exists")) {
        i + 3
    } else {
        i
    }
}

fn skip_if_exists(toks: &[Tok], i: usize) -> usize {
    if (word(toks.get(i)), word(toks.get(i + 1))) == (Some("if"), Some("exists")) {
        i + 2
    } else {
        i
    }
}

/// The names after `IF EXISTS` in a `DROP`, up to `CASCADE` or the end.
fn names_after(toks: &[Tok], at: usize) -> Vec<String> {
    let at = skip_if_exists(toks, at);
    toks.get(at..)
        .unwrap_or(&[])
        .iter()
        .map_while(|t| match t {
            Tok::Word(w) if !matches!(w.as_str(), "cascade" | "restrict" | "on") => {
                Some(Some(table_name(w)))
            }
            Tok::Comma => Some(None),
            _ => None,
        })
        .flatten()
        .collect()
}

/// The tokens inside the parenthesis that opens at `open`, without the outer pair.
fn group(toks: &[Tok], open: usize) -> Option<&[Tok]> {
    if toks.get(open) != Some(&Tok::Open) {
        return None;
    }
    let mut depth = 0usize;
    for (k, t) in toks.iter().enumerate().skip(open) {
        match t {
            Tok::Open => depth += 1,
            Tok::Close => {
                depth -= 1;
                if depth == 0 {
                    return Some(&toks[open + 1..k]);
                }
            }
            _ => {}
        }
    }
    None
}

/// Splits at the commas outside parentheses.
fn split_commas(toks: &[Tok]) -> Vec<&[Tok]> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (k, t) in toks.iter().enumerate() {
        match t {
            Tok::Open => depth += 1,
            Tok::Close => depth = depth.saturating_sub(1),
            Tok::Comma if depth == 0 => {
                out.push(&toks[start..k]);
                start = k + 1;
            }
            _ => {}
        }
    }
    out.push(&toks[start..]);
    out
}

/// `a, b` (each optionally `ASC`/`DESC`, a collation): the columns, sorted; `None` when an
/// element is an expression.
fn column_list(toks: &[Tok]) -> Option<Vec<String>> {
    let mut cols = Vec::new();
    for part in split_commas(toks) {
        let col = word(part.first())?;
        // After the column only words (`DESC`, `COLLATE "C"`): `lower(e)` is an expression.
        if !part[1..]
            .iter()
            .all(|t| matches!(t, Tok::Word(_) | Tok::Str(_)))
        {
            return None;
        }
        cols.push(table_name(col));
    }
    cols.sort();
    cols.dedup();
    (!cols.is_empty()).then_some(cols)
}

/// A table constraint: `[CONSTRAINT x] UNIQUE [KEY|INDEX] [y] (..)` or `[CONSTRAINT x]
/// PRIMARY KEY (..)`.
fn table_constraint(def: &[Tok]) -> Option<UniqueSet> {
    let mut i = 0;
    let mut name = None;
    if word(def.first()) == Some("constraint") {
        name = word(def.get(1)).map(table_name);
        i = 2;
    }
    match (word(def.get(i)), word(def.get(i + 1))) {
        (Some("primary"), Some("key")) => i += 2,
        (Some("unique"), Some("key" | "index")) => i += 2,
        (Some("unique"), _) => i += 1,
        _ => return None,
    }
    // MySQL's index name: `UNIQUE KEY uq_x (a)`.
    if let Some(n) = word(def.get(i)) {
        name = name.or_else(|| Some(table_name(n)));
        i += 1;
    }
    let columns = column_list(group(def, i)?)?;
    Some(UniqueSet { name, columns })
}

/// A column definition marked `UNIQUE` or `PRIMARY KEY`: that column alone.
fn column_constraint(def: &[Tok]) -> Option<UniqueSet> {
    let col = word(def.first())?;
    if matches!(
        col,
        "constraint" | "check" | "foreign" | "key" | "index" | "exclude" | "fulltext" | "spatial"
    ) {
        return None;
    }
    let marked = def.iter().skip(1).scan(0usize, |depth, t| {
        match t {
            Tok::Open => *depth += 1,
            Tok::Close => *depth = depth.saturating_sub(1),
            _ => {}
        }
        Some((*depth, t))
    });
    let (mut prev, mut name, mut found) = (None, None, false);
    for (depth, t) in marked {
        let w = word(Some(t));
        if depth == 0 && prev == Some("constraint") {
            name = w.map(table_name);
        }
        if depth == 0 && (w == Some("unique") || (prev == Some("primary") && w == Some("key"))) {
            found = true;
            break;
        }
        prev = w.filter(|_| depth == 0);
    }
    found.then(|| UniqueSet {
        name,
        columns: vec![table_name(col)],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sets(schema: &Schema, table: &str) -> Vec<Vec<String>> {
        let mut v: Vec<Vec<String>> = schema.unique_sets(table).map(<[_]>::to_vec).collect();
        v.sort();
        v
    }

    fn cols(c: &[&str]) -> Vec<String> {
        c.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn column_and_table_constraints() {
        let s = Schema::read([
            "CREATE TABLE IF NOT EXISTS transactions (
                id UUID PRIMARY KEY,
                amount BIGINT NOT NULL CHECK (amount > 0),
                idempotency_key TEXT UNIQUE,
                created_at TIMESTAMPTZ NOT NULL DEFAULT now()
            );
            CREATE INDEX IF NOT EXISTS idx_tx_key ON transactions(idempotency_key);",
            "CREATE TABLE favorites (
                user_uuid CHAR(36) NOT NULL REFERENCES users (uuid),
                cipher_uuid CHAR(36) NOT NULL REFERENCES ciphers (uuid),
                PRIMARY KEY (user_uuid, cipher_uuid)
            );",
            "create table public.\"Orders\" (a int, b int, c int,
                constraint uq_ab unique (b, a), UNIQUE KEY uq_c (c));",
        ]);
        assert_eq!(
            sets(&s, "transactions"),
            vec![cols(&["id"]), cols(&["idempotency_key"])]
        );
        assert_eq!(
            sets(&s, "favorites"),
            vec![cols(&["cipher_uuid", "user_uuid"])]
        );
        assert_eq!(sets(&s, "orders"), vec![cols(&["a", "b"]), cols(&["c"])]);
        // The covering set is the one the insert provides; a generated id is not provided.
        assert_eq!(
            s.covering("transactions", &["amount", "idempotency_key"]),
            Some(&cols(&["idempotency_key"])[..])
        );
        assert_eq!(s.covering("transactions", &["amount", "created_at"]), None);
        assert_eq!(s.covering("favorites", &["user_uuid"]), None);
    }

    #[test]
    fn a_plain_index_is_not_unique() {
        let s = Schema::read([
            "CREATE TABLE fang_tasks (id uuid PRIMARY KEY DEFAULT uuid_generate_v4(),
                metadata jsonb NOT NULL, uniq_hash CHAR(64));
             CREATE INDEX fang_tasks_uniq_hash ON fang_tasks(uniq_hash);",
        ]);
        assert_eq!(sets(&s, "fang_tasks"), vec![cols(&["id"])]);
        assert_eq!(s.covering("fang_tasks", &["metadata", "uniq_hash"]), None);
    }

    #[test]
    fn indexes_and_alterations() {
        let s = Schema::read(
            ["CREATE TABLE t (id SERIAL, a TEXT, b TEXT, e TEXT, p TEXT);
             CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS t_a ON ONLY t USING btree (a DESC);
             CREATE UNIQUE INDEX t_e ON t (lower(e));
             CREATE UNIQUE INDEX t_p ON t (p) WHERE p IS NOT NULL;
             ALTER TABLE IF EXISTS t ADD CONSTRAINT t_b UNIQUE (b), ADD PRIMARY KEY (id);"],
        );
        assert_eq!(
            sets(&s, "t"),
            vec![cols(&["a"]), cols(&["b"]), cols(&["id"])]
        );
        let s = Schema::read([
            "CREATE TABLE t (a TEXT, b TEXT);
             CREATE UNIQUE INDEX t_a ON t (a);
             ALTER TABLE t ADD CONSTRAINT t_b UNIQUE (b);",
            "DROP INDEX IF EXISTS t_a; ALTER TABLE t DROP CONSTRAINT t_b;",
        ]);
        assert!(s.is_empty());
        let s = Schema::read([
            "CREATE TABLE t (a TEXT PRIMARY KEY); ALTER TABLE t RENAME TO u;",
            "CREATE TABLE gone (a TEXT UNIQUE); DROP TABLE gone;",
        ]);
        assert_eq!(sets(&s, "u"), vec![cols(&["a"])]);
        assert!(sets(&s, "t").is_empty() && sets(&s, "gone").is_empty());
    }

    #[test]
    fn sequences_agree_or_count_nothing() {
        use crate::model::{Migration, Migrations};
        let m = |sequence: &str, text: &str| Migration {
            sequence: sequence.to_owned(),
            path: format!("{sequence}/x.sql"),
            text: text.into(),
        };
        let migrations = Migrations {
            files: vec![
                m(
                    "m/postgres",
                    "CREATE TABLE t (a TEXT UNIQUE, b TEXT UNIQUE);",
                ),
                m("m/postgres", "CREATE TABLE only_pg (k TEXT PRIMARY KEY);"),
                m("m/sqlite", "CREATE TABLE t (a TEXT UNIQUE, b TEXT);"),
                m("m/sqlite", "CREATE TABLE only_lite (k TEXT);"),
            ],
            incomplete: false,
        };
        let s = Schema::of_migrations(&migrations);
        // `b` is unique in one database only; a table one sequence lacks keeps its keys.
        assert_eq!(sets(&s, "t"), vec![cols(&["a"])]);
        assert_eq!(sets(&s, "only_pg"), vec![cols(&["k"])]);
        assert!(sets(&s, "only_lite").is_empty());
        let unread = Migrations {
            incomplete: true,
            ..migrations
        };
        assert!(Schema::of_migrations(&unread).is_empty());
    }

    #[test]
    fn junk_reads_as_nothing() {
        let junk = [
            "",
            ";;;",
            "CREATE",
            "CREATE TABLE",
            "CREATE TABLE t (",
            "CREATE TABLE t (a TEXT UNIQUE",
            "CREATE UNIQUE INDEX ON",
            "CREATE UNIQUE INDEX i ON t (",
            "CREATE UNIQUE INDEX i ON t ()",
            "ALTER TABLE",
            "ALTER TABLE t ADD CONSTRAINT",
            "ALTER TABLE t ADD UNIQUE ((((",
            "DROP INDEX",
            "))))((((,,,, PRIMARY KEY UNIQUE",
            "CREATE TABLE t (PRIMARY KEY (), UNIQUE (), a UNIQUE)) ; UNIQUE",
            "'unterminated CREATE TABLE t (a UNIQUE)",
            "/* never closed CREATE TABLE t (a UNIQUE)",
            "CREATE TABLE é (ü TEXT UNIQUE, \u{0} PRIMARY KEY)",
            "$$ CREATE $1 TABLE ? (",
        ];
        for text in junk {
            let _ = Schema::read([text]);
        }
        let deep = "(".repeat(100_000) + &")".repeat(3);
        assert!(Schema::read([deep.as_str(), "CREATE TABLE t (a"]).is_empty());
        // A column left unconstrained stays so whatever junk follows.
        let s = Schema::read(["CREATE TABLE t (a TEXT, b TEXT) garbage ) UNIQUE (a);"]);
        assert!(s.is_empty());
    }
}
