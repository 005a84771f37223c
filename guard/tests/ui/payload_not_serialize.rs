#![allow(unused_variables)]

use idem_guard::{idempotent, Error, MemoryStore};

struct Card {
    number: String,
}

// `store` is left out of the payload; `card` is not `Serialize`: the error points at it.
#[idempotent(key = order_id, store = store)]
async fn charge(store: &MemoryStore, order_id: u64, card: Card) -> Result<(), Error> {
    Ok(())
}

fn main() {}
