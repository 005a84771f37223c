#![allow(unused_variables)]

use idem_guard::{idempotent, Error};

#[derive(Clone)]
struct Database {
    url: String,
}

struct Payments {
    db: Database,
}

impl Payments {
    // `self.db` is not an idempotency store: the error points at it.
    #[idempotent(key = id, store = self.db)]
    async fn charge(&self, id: u64) -> Result<u64, Error> {
        Ok(id)
    }
}

fn main() {}
