#![allow(unused_variables)]

use idem_guard::{idempotent, Error, MemoryStore};

struct Receipt {
    id: u64,
}

// The result is stored for replay, so it must be `Serialize + DeserializeOwned`: the error
// points at `Receipt`.
#[idempotent(key = id, store = store)]
async fn charge(store: &MemoryStore, id: u64) -> Result<Receipt, Error> {
    Ok(Receipt { id })
}

fn main() {}
