//! SQL clients, pools and ORMs: sqlx, diesel, sea-orm, tokio-postgres, deadpool-postgres,
//! rusqlite, libsql, mysql, scylla (CQL), tiberius. What a statement does is read from its
//! text by the engine (`analysis::sql`); these tables say where the text and the bound values
//! are, and which methods run a query or open a transaction.

/// SQL clients, pools and ORMs (crate names as in `use`).
pub const CRATES: &[&str] = &[
    "sqlx",
    "scylla",
    "tokio_postgres",
    "postgres",
    "deadpool_postgres",
    "bb8_postgres",
    "r2d2_postgres",
    "diesel",
    "diesel_async",
    "sea_orm",
    "rusqlite",
    "r2d2_sqlite",
    "mysql",
    "mysql_async",
    "tiberius",
    "libsql",
];

/// Methods that run a prepared query (sqlx, diesel, sea-orm).
pub const RUNNERS: &[&str] = &[
    "execute",
    "fetch_one",
    "fetch_optional",
    "fetch_all",
    "fetch",
    "fetch_many",
    "get_result",
    "get_results",
    "load",
    "first",
    "query_one",
    "query_all",
];

/// Client methods that take SQL text first and the bound values second (tokio-postgres,
/// deadpool-postgres, rusqlite, libsql, mysql, scylla, sea-orm).
pub const TEXT_METHODS: &[&str] = &[
    "execute",
    "query",
    "query_one",
    "query_opt",
    "query_raw",
    "execute_raw",
    "query_typed",
    "query_row",
    "query_map",
    "exec_drop",
    "exec_first",
    "exec",
    "execute_unprepared",
];

/// A function that makes a query from SQL text: where the text is, and where the bound
/// values are when they are given with it (else they come from `.bind(..)` calls).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueryFn {
    pub path: &'static str,
    pub text: usize,
    pub values: Option<usize>,
}

pub const QUERY_FNS: &[QueryFn] = &[
    QueryFn::text_at("sqlx::query", 0),
    QueryFn::text_at("sqlx::query_as", 0),
    QueryFn::text_at("sqlx::query_scalar", 0),
    QueryFn::text_at("sqlx::query_with", 0),
    QueryFn::text_at("sqlx::query_as_with", 0),
    QueryFn::text_at("sqlx::query_scalar_with", 0),
    QueryFn::text_at("sqlx::raw_sql", 0),
    QueryFn::text_at("diesel::sql_query", 0),
    QueryFn {
        path: "sea_orm::Statement::from_sql_and_values",
        text: 1,
        values: Some(2),
    },
    QueryFn::text_at("sea_orm::Statement::from_string", 1),
];

impl QueryFn {
    const fn text_at(path: &'static str, text: usize) -> QueryFn {
        QueryFn {
            path,
            text,
            values: None,
        }
    }
}

/// Binds a value to the query being built.
pub const BIND: &str = "bind";

/// Methods between a query's root and its runner that change neither text nor values.
pub const PASS_THROUGH: &[&str] = &[
    "persistent",
    "bind_all",
    "into_sql",
    "map",
    "try_map",
    "as_mut",
];

/// The crate whose `query*!` macros take SQL text.
pub const MACRO_CRATE: &str = "sqlx";

/// Crates whose presence makes `begin()`/`transaction()` a database transaction.
pub const TX_CRATES: &[&str] = &[
    "sqlx",
    "tokio_postgres",
    "postgres",
    "deadpool_postgres",
    "bb8_postgres",
    "diesel",
    "diesel_async",
    "sea_orm",
    "rusqlite",
    "mysql",
    "mysql_async",
    "tiberius",
    "libsql",
    "deadpool_diesel",
];

/// Methods that open a transaction into a handle (when called without a closure).
pub const TX_BEGIN: &[&str] = &[
    "begin",
    "begin_with",
    "transaction",
    "begin_transaction",
    "start_transaction",
    "start",
];

/// Methods that run a closure in a transaction.
pub const TX_CLOSURE: &[&str] = &[
    "transaction",
    "run",
    "with_transaction",
    "in_transaction",
    "transaction_async",
];

/// Ends a transaction handle, keeping what it wrote.
pub const TX_COMMIT: &str = "commit";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_keep_their_invariants() {
        for (i, q) in QUERY_FNS.iter().enumerate() {
            assert!(q.path.contains("::"), "{}: a path", q.path);
            assert!(QUERY_FNS[..i].iter().all(|o| o.path != q.path));
            assert!(q.values.is_none_or(|v| v != q.text), "{}", q.path);
            let krate = q.path.split("::").next().unwrap();
            assert!(CRATES.contains(&krate), "{}: a crate of the family", q.path);
        }
        for list in [RUNNERS, TEXT_METHODS, TX_BEGIN, TX_CLOSURE, PASS_THROUGH] {
            for (i, m) in list.iter().enumerate() {
                assert!(!list[..i].contains(m), "{m} twice");
            }
        }
        assert!(CRATES.contains(&MACRO_CRATE));
    }
}
