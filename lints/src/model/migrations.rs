//! Which files of a migrations folder build the schema, in which order, and into which
//! sequence: names only, no file system (the driver lists the folder and reads the files).
//!
//! Every `.sql` file below the folder counts, but the ones that undo a migration: diesel's
//! `<ts>_name/down.sql` and sqlx's `<n>_name.down.sql` (their `up.sql` and `.up.sql` count,
//! as do sqlx's plain `<n>_name.sql` and refinery's `V1__name.sql`). Files apply in the
//! order of their paths, digits compared as numbers (refinery's `V2` before `V10`; diesel's
//! timestamps and sqlx's zero-padded numbers sort the same either way).
//!
//! A folder whose first level splits by database (`migrations/postgres`,
//! `migrations/sqlite`, diesel's `migrations/postgresql` and `migrations/mysql`) holds one
//! history per database: each dialect folder is a sequence of its own, and a table's unique
//! key is taken only when every sequence that creates the table declares it (see
//! [`crate::analysis::schema::Schema::of_migrations`]): the code runs against any of them.

use std::cmp::Ordering;

/// Names of folders that hold one database's migrations.
const DIALECTS: &[&str] = &[
    "postgres",
    "postgresql",
    "pg",
    "pgsql",
    "mysql",
    "mariadb",
    "sqlite",
    "sqlite3",
    "mssql",
    "sqlserver",
    "cockroach",
    "cockroachdb",
];

/// Of `files` (paths relative to the migrations folder `folder`, `/`-separated), the ones
/// that build the schema, as `(sequence, file)` in the order they apply.
pub fn plan(folder: &str, files: &[String]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = files
        .iter()
        .filter(|f| builds_schema(f))
        .map(|f| {
            let sequence = match f.split_once('/') {
                Some((first, _)) if is_dialect(first) => format!("{folder}/{first}"),
                _ => folder.to_owned(),
            };
            (sequence, f.clone())
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| natural(&a.1, &b.1)));
    out
}

fn is_dialect(dir: &str) -> bool {
    DIALECTS.iter().any(|d| dir.eq_ignore_ascii_case(d))
}

/// A `.sql` file that is not a down migration.
fn builds_schema(file: &str) -> bool {
    let name = file.rsplit('/').next().unwrap_or(file).to_ascii_lowercase();
    name.ends_with(".sql") && name != "down.sql" && !name.ends_with(".down.sql")
}

/// Compares paths with runs of digits compared as numbers.
pub fn natural(a: &str, b: &str) -> Ordering {
    let (mut a, mut b) = (a.as_bytes(), b.as_bytes());
    loop {
        match (a.first(), b.first()) {
            (None, None) => return Ordering::Equal,
            (None, _) => return Ordering::Less,
            (_, None) => return Ordering::Greater,
            (Some(x), Some(y)) if x.is_ascii_digit() && y.is_ascii_digit() => {
                let da = a.iter().take_while(|c| c.is_ascii_digit()).count();
                let db = b.iter().take_while(|c| c.is_ascii_digit()).count();
                let (na, nb) = (trim_zeros(&a[..da]), trim_zeros(&b[..db]));
                // Longer (without leading zeros) is larger; same length compares as text.
                let ord = na.len().cmp(&nb.len()).then_with(|| na.cmp(nb));
                if ord != Ordering::Equal {
                    return ord;
                }
                a = &a[da..];
                b = &b[db..];
            }
            (Some(x), Some(y)) => {
                if x != y {
                    return x.cmp(y);
                }
                a = &a[1..];
                b = &b[1..];
            }
        }
    }
}

fn trim_zeros(d: &[u8]) -> &[u8] {
    let zeros = d.iter().take_while(|c| **c == b'0').count();
    &d[zeros..]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan_of(files: &[&str]) -> Vec<(String, String)> {
        let files: Vec<String> = files.iter().map(|f| (*f).to_owned()).collect();
        plan("migrations", &files)
    }

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
            .collect()
    }

    #[test]
    fn layouts() {
        // diesel: up.sql, not down.sql.
        assert_eq!(
            plan_of(&[
                "2020-01-02-000000_b/up.sql",
                "2020-01-01-000000_a/down.sql",
                "2020-01-01-000000_a/up.sql",
                "README.md",
            ]),
            pairs(&[
                ("migrations", "2020-01-01-000000_a/up.sql"),
                ("migrations", "2020-01-02-000000_b/up.sql"),
            ])
        );
        // sqlx, reversible and not; refinery's versions in numeric order.
        assert_eq!(
            plan_of(&[
                "0002_b.down.sql",
                "0002_b.up.sql",
                "0001_a.sql",
                "V10__c.sql",
                "V2__b.SQL"
            ]),
            pairs(&[
                ("migrations", "0001_a.sql"),
                ("migrations", "0002_b.up.sql"),
                ("migrations", "V2__b.SQL"),
                ("migrations", "V10__c.sql"),
            ])
        );
        // One sequence per dialect folder; other folders are part of the main sequence.
        assert_eq!(
            plan_of(&["sqlite/1_a/up.sql", "postgresql/1_a/up.sql", "misc/1.sql"]),
            pairs(&[
                ("migrations", "misc/1.sql"),
                ("migrations/postgresql", "postgresql/1_a/up.sql"),
                ("migrations/sqlite", "sqlite/1_a/up.sql"),
            ])
        );
    }

    #[test]
    fn natural_order() {
        assert_eq!(natural("V2__a", "V10__a"), Ordering::Less);
        assert_eq!(natural("0010", "10"), Ordering::Equal);
        assert_eq!(natural("a", "a1"), Ordering::Less);
        assert_eq!(natural(&"9".repeat(500), &"1".repeat(501)), Ordering::Less);
    }
}
