#![allow(unused_variables)]

use idem_guard::{idempotent, Error, MemoryStore};

static STORE: std::sync::LazyLock<MemoryStore> = std::sync::LazyLock::new(MemoryStore::new);

struct Order {
    id: u64,
}

// The key changes with every delivery, so no duplicate would ever be caught.
#[idempotent(key = format!("{}-{:?}", order.id, std::time::SystemTime::now()), store = STORE)]
async fn ship(order: Order) -> Result<(), Error> {
    let _ = order.id;
    Ok(())
}

fn main() {}
