#![allow(unused_variables)]

use idem_guard::{idempotent, MemoryStore};

#[derive(Debug)]
enum AppError {
    Declined,
}

// `AppError` has no `From<idem_guard::Error>`: the error points at it.
#[idempotent(key = id, store = store)]
async fn charge(store: &MemoryStore, id: u64) -> Result<u64, AppError> {
    Ok(id)
}

fn main() {}
