#![allow(unused_variables)]

use idem_guard::{idempotent, MemoryStore};

// Not a `Result`: the error points at the return type.
#[idempotent(key = id, store = store)]
async fn count(store: &MemoryStore, id: u64) -> u64 {
    id
}

fn main() {}
