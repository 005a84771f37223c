#![allow(unused_variables)]

use idem_guard::{idempotent, Error, MemoryStore};

#[idempotent(store = store)]
async fn missing_key(store: &MemoryStore, id: u64) -> Result<(), Error> {
    Ok(())
}

#[idempotent(key = id, store = store, in_flight = "queue")]
async fn bad_in_flight(store: &MemoryStore, id: u64) -> Result<(), Error> {
    Ok(())
}

#[idempotent(key = id, store = store, retries = 3)]
async fn unknown_option(store: &MemoryStore, id: u64) -> Result<(), Error> {
    Ok(())
}

#[idempotent(key = id, store = store)]
fn not_async(store: &MemoryStore, id: u64) -> Result<(), Error> {
    Ok(())
}

fn main() {}
