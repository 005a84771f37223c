//! Traits of store clients whose methods are also called in path form:
//! `redis::AsyncCommands::set_nx(&mut conn, key, 1)` is `conn.set_nx(key, 1)`. The lowering
//! reads such a call as the method call it stands for, so every lint sees one spelling of a
//! store operation. Only these traits: `Type::function(first, ..)` in general is an
//! associated function whose first argument is no receiver (`Client::new(&config)`).

/// Trait names (the last but one segment of the called path) of the store crates the lints
/// know: redis, fred, diesel, sqlx and tokio-postgres.
const METHOD_TRAITS: &[&str] = &[
    // redis
    "Commands",
    "AsyncCommands",
    "TypedCommands",
    "AsyncTypedCommands",
    "ConnectionLike",
    "JsonCommands",
    "JsonAsyncCommands",
    // fred
    "KeysInterface",
    "HashesInterface",
    "SetsInterface",
    "ListInterface",
    "SortedSetsInterface",
    "StreamsInterface",
    "LuaInterface",
    "TransactionInterface",
    // diesel
    "RunQueryDsl",
    // sqlx
    "Executor",
    // tokio-postgres, deadpool-postgres
    "GenericClient",
];

/// Whether `Trait::method(receiver, ..)` with this trait name is a method call in path form.
pub fn is_method_trait(name: &str) -> bool {
    METHOD_TRAITS.contains(&name)
}
