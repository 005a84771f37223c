#![allow(unused_variables)]

use idem_guard::{idempotent, Error, MemoryStore};

struct Uuid;
impl Uuid {
    fn new_v4() -> u128 {
        4
    }
}

// `Uuid::new_v4()` in the consumer: a fresh key per delivery.
#[idempotent(key = Uuid::new_v4(), store = store, payload = ())]
async fn send_email(store: &MemoryStore, to: String) -> Result<(), Error> {
    let _ = to;
    Ok(())
}

fn main() {}
