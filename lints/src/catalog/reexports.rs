//! Crates that re-export another crate whole, so that a path through them names the other
//! crate's item: `deadpool_redis::redis::cmd` is `redis::cmd`, and means what the
//! catalog says `redis::cmd` means. Resolution rewrites such paths before anything is
//! matched against them.

/// `(crate, module, crate it is)`: `deadpool_redis::redis` is the crate `redis`.
pub const REEXPORTS: &[(&str, &str, &str)] = &[
    ("deadpool_redis", "redis", "redis"),
    ("bb8_redis", "redis", "redis"),
    ("mobc_redis", "redis", "redis"),
    ("r2d2_redis", "redis", "redis"),
    ("deadpool_postgres", "tokio_postgres", "tokio_postgres"),
    ("bb8_postgres", "tokio_postgres", "tokio_postgres"),
    ("deadpool_lapin", "lapin", "lapin"),
    ("deadpool_sqlite", "rusqlite", "rusqlite"),
    ("r2d2_sqlite", "rusqlite", "rusqlite"),
];

/// The crate `krate::module` is, when it re-exports one whole.
pub fn reexported(krate: &str, module: &str) -> Option<&'static str> {
    REEXPORTS
        .iter()
        .find(|(k, m, _)| *k == krate && *m == module)
        .map(|(_, _, is)| *is)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_name_crates_in_the_form_paths_use() {
        for (k, m, is) in REEXPORTS {
            for name in [k, m, is] {
                assert!(
                    name.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
                    "{name}"
                );
            }
        }
        assert_eq!(reexported("deadpool_redis", "redis"), Some("redis"));
        assert_eq!(reexported("deadpool_redis", "Pool"), None);
    }
}
