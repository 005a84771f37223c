//! Issue 36, the driver's half: the SQL migrations beside a package are read into its model
//! (`src/parse/migrations.rs`), so `check_then_act` knows which keys are unique; a hostile
//! migrations folder (huge, binary, thousands of files, deep, links out or in a loop) gives a
//! clear answer (no key is taken from it, the finding stays) in bounded time, never a panic;
//! and an edited migration invalidates cached findings.

mod common;

use common::{manifest, run_env, s, tree, write, Run};
use std::path::Path;

/// A check by the idempotency key outside the transaction, then the insert and the balance
/// update in one transaction: silent when `transactions.idempotency_key` is unique, a
/// finding on line 17 otherwise.
const DEPOSIT: &str = "pub async fn deposit(pool: &sqlx::PgPool, key: &str, account: i64, amount: i64) -> sqlx::Result<()> {
    let seen: Option<i64> = sqlx::query_scalar(\"SELECT amount FROM transactions WHERE idempotency_key = $1\")
        .bind(key)
        .fetch_optional(pool)
        .await?;
    if seen.is_some() {
        return Ok(());
    }
    let mut tx = pool.begin().await?;
    sqlx::query(\"UPDATE accounts SET balance = balance + $1 WHERE id = $2\")
        .bind(amount)
        .bind(account)
        .execute(&mut *tx)
        .await?;
    // The insert that fails on the key for a racing duplicate.
    let insert = \"INSERT INTO transactions (amount, account_id, idempotency_key) VALUES ($1, $2, $3)\";
    sqlx::query(insert)
        .bind(amount)
        .bind(account)
        .bind(key)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(())
}
";

const UNIQUE: &str = "CREATE TABLE transactions (id BIGSERIAL PRIMARY KEY, amount BIGINT,
    account_id BIGINT, idempotency_key TEXT UNIQUE);\n";
const PLAIN: &str = "CREATE TABLE transactions (id BIGSERIAL PRIMARY KEY, amount BIGINT,
    account_id BIGINT, idempotency_key TEXT);\n";

/// Line of the insert in [`DEPOSIT`].
const INSERT_LINE: u64 = 17;

fn package(migrations: &[(&str, &str)]) -> tempfile::TempDir {
    let toml = manifest("deposits", "[dependencies]\nsqlx = \"0.8\"\n");
    let mut files = vec![("Cargo.toml", toml.as_str()), ("src/lib.rs", DEPOSIT)];
    files.extend_from_slice(migrations);
    tree(&files)
}

fn lint(dir: &Path, cache: Option<&Path>) -> Run {
    let mut args = vec![s(dir), "--message-format", "json"];
    let mut env = Vec::new();
    match cache {
        Some(c) => env.push(("IDEM_LINT_CACHE_DIR", s(c))),
        None => args.push("--no-cache"),
    }
    let out = run_env(dir, &args, &env);
    assert!(matches!(out.code, 0 | 1), "{}", out.stderr);
    assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
    out
}

/// The lines of the `check_then_act` findings.
fn found(dir: &Path, cache: Option<&Path>) -> Vec<u64> {
    lint(dir, cache)
        .findings(dir)
        .into_iter()
        .filter(|(_, _, _, code)| code == "idem::check_then_act")
        .map(|(_, line, _, _)| line)
        .collect()
}

#[test]
fn the_usual_layouts_are_read() {
    // No migrations: the insert is a plain write.
    assert_eq!(found(package(&[]).path(), None), vec![INSERT_LINE]);
    for layout in [
        // sqlx, refinery, diesel, and sqlx's reversible form.
        vec![("migrations/0001_init.sql", UNIQUE)],
        vec![("migrations/V1__init.sql", UNIQUE)],
        vec![
            ("migrations/2024-01-01-000000_init/up.sql", UNIQUE),
            (
                "migrations/2024-01-01-000000_init/down.sql",
                "DROP TABLE transactions;",
            ),
        ],
        vec![
            ("migrations/0001_init.up.sql", UNIQUE),
            ("migrations/0002_x.down.sql", "DROP TABLE transactions;"),
        ],
        // Deeper, as some crates keep them.
        vec![("src/db/postgres/migrations/0001_init.sql", UNIQUE)],
        // One folder per database, each declaring the key.
        vec![
            ("migrations/postgres/0001_init.sql", UNIQUE),
            ("migrations/sqlite/0001_init.sql", UNIQUE),
        ],
    ] {
        assert_eq!(
            found(package(&layout).path(), None),
            Vec::<u64>::new(),
            "{layout:?}"
        );
    }
    for layout in [
        // A later migration drops the key (applied in numeric order: 10 after 9).
        vec![
            ("migrations/V9__init.sql", UNIQUE),
            (
                "migrations/V10__rebuild.sql",
                &format!("DROP TABLE transactions; {PLAIN}"),
            ),
        ],
        // One database lacks it.
        vec![
            ("migrations/postgres/0001_init.sql", UNIQUE),
            ("migrations/sqlite/0001_init.sql", PLAIN),
        ],
        // In a folder of no migrations, or inside the build directory.
        vec![("sql/0001_init.sql", UNIQUE)],
        vec![("target/migrations/0001_init.sql", UNIQUE)],
    ] {
        assert_eq!(
            found(package(&layout).path(), None),
            vec![INSERT_LINE],
            "{layout:?}"
        );
    }
}

#[test]
fn a_workspace_shares_its_root_migrations_and_a_member_keeps_its_own() {
    let ws = "[workspace]\nmembers = [\"app\", \"other\"]\nresolver = \"2\"\n";
    let app = manifest("app", "[dependencies]\nsqlx = \"0.8\"\n");
    let other = manifest("other", "");
    // At the workspace root: the members' database.
    let dir = tree(&[
        ("Cargo.toml", ws),
        ("app/Cargo.toml", &app),
        ("app/src/lib.rs", DEPOSIT),
        ("other/Cargo.toml", &other),
        ("other/src/lib.rs", ""),
        ("migrations/0001_init.sql", UNIQUE),
    ]);
    assert_eq!(found(dir.path(), None), Vec::<u64>::new());
    // In another member that `app` does not link: not `app`'s schema.
    let dir = tree(&[
        ("Cargo.toml", ws),
        ("app/Cargo.toml", &app),
        ("app/src/lib.rs", DEPOSIT),
        ("other/Cargo.toml", &other),
        ("other/src/lib.rs", ""),
        ("other/migrations/0001_init.sql", UNIQUE),
    ]);
    assert_eq!(found(dir.path(), None), vec![INSERT_LINE]);
}

/// Whatever the folder holds, the run ends with an answer; a migration that cannot be read
/// means no key is known, so the finding stays.
#[test]
fn hostile_migrations_keep_the_finding_without_a_panic() {
    let unique = ("migrations/0001_init.sql", UNIQUE);
    // Over the 1 MiB cap, after the migration that declares the key.
    let huge = format!("-- {}\n", "x".repeat(2 << 20));
    let dir = package(&[unique, ("migrations/0002_big.sql", &huge)]);
    assert_eq!(found(dir.path(), None), vec![INSERT_LINE]);
    // Not UTF-8.
    let dir = package(&[unique]);
    write(
        dir.path(),
        "migrations/0002_bin.sql",
        &[0xff, 0xfe, 0, 159, 146, 150],
    );
    assert_eq!(found(dir.path(), None), vec![INSERT_LINE]);
    // Deeper than a migrations folder is read.
    let deep = format!("migrations/{}0002.sql", "d/".repeat(40));
    let dir = package(&[unique, (&deep, "SELECT 1;")]);
    assert_eq!(found(dir.path(), None), vec![INSERT_LINE]);
    // More files than are read.
    let dir = package(&[unique]);
    for i in 0..5_001 {
        write(
            dir.path(),
            &format!("migrations/many/{i:05}.sql"),
            b"SELECT 1;",
        );
    }
    assert_eq!(found(dir.path(), None), vec![INSERT_LINE]);
}

#[cfg(unix)]
#[test]
fn links_out_of_the_workspace_or_in_a_loop_are_not_followed() {
    use std::os::unix::fs::symlink;
    let unique = ("migrations/0001_init.sql", UNIQUE);
    // A folder that links to its parent: a loop.
    let dir = package(&[unique]);
    symlink(
        dir.path().join("migrations"),
        dir.path().join("migrations/loop"),
    )
    .expect("link");
    assert_eq!(found(dir.path(), None), vec![INSERT_LINE]);
    // A file linking outside the workspace is not read.
    let outside = tree(&[("secret.sql", UNIQUE)]);
    let dir = package(&[]);
    std::fs::create_dir_all(dir.path().join("migrations")).expect("mkdir");
    symlink(
        outside.path().join("secret.sql"),
        dir.path().join("migrations/0001_init.sql"),
    )
    .expect("link");
    assert_eq!(found(dir.path(), None), vec![INSERT_LINE]);
    // Nor a migrations folder that is a link out of it.
    let dir = package(&[]);
    symlink(outside.path(), dir.path().join("migrations")).expect("link");
    assert_eq!(found(dir.path(), None), vec![INSERT_LINE]);
    // A migrations folder linking inside the workspace is read.
    let dir = package(&[("db/0001_init.sql", UNIQUE)]);
    symlink(dir.path().join("db"), dir.path().join("migrations")).expect("link");
    assert_eq!(found(dir.path(), None), Vec::<u64>::new());
}

#[test]
fn an_edited_migration_invalidates_cached_findings() {
    let dir = package(&[("migrations/0001_init.sql", UNIQUE)]);
    let cache = tempfile::tempdir().expect("tempdir");
    assert_eq!(found(dir.path(), Some(cache.path())), Vec::<u64>::new());
    write(dir.path(), "migrations/0001_init.sql", PLAIN.as_bytes());
    assert_eq!(found(dir.path(), Some(cache.path())), vec![INSERT_LINE]);
    write(dir.path(), "migrations/0001_init.sql", UNIQUE.as_bytes());
    assert_eq!(found(dir.path(), Some(cache.path())), Vec::<u64>::new());
}
