#![allow(unused_variables)]

use idem_guard::{idempotent, Error, MemoryStore, Outcome};

// An early `return` of the value where the function returns `Outcome`: reported at the
// `return`, as without the attribute.
#[idempotent(key = id, store = store)]
async fn refund(store: &MemoryStore, id: u64, cents: u64) -> Result<Outcome<u64>, Error> {
    if cents == 0 {
        return Ok(0);
    }
    Ok(Outcome::fresh(cents))
}

fn main() {}
