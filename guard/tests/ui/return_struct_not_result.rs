#![allow(unused_variables)]

use idem_guard::{idempotent, MemoryStore};

#[derive(serde::Serialize, serde::Deserialize)]
struct Receipt {
    id: u64,
}

// A type of the user's own that is not a `Result`: one error, at the return type.
#[idempotent(key = id, store = store)]
async fn charge(store: &MemoryStore, id: u64) -> Receipt {
    Receipt { id }
}

fn main() {}
