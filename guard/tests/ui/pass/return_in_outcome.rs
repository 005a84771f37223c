//! `return` and `?` inside an `#[idempotent]` body keep their meaning, also when the function
//! returns `Outcome` (issue 23, defect 4), and in transactional mode's expansion too.

use idem_guard::sqlx::{Postgres, Transaction};
use idem_guard::{idempotent, Error, MemoryStore, Outcome, PostgresStore};

#[derive(Debug)]
enum AppError {
    Guard(Error),
    Invalid(&'static str),
}

impl From<Error> for AppError {
    fn from(e: Error) -> Self {
        AppError::Guard(e)
    }
}

fn parse(cents: i64) -> Result<u64, AppError> {
    u64::try_from(cents).map_err(|_| AppError::Invalid("negative"))
}

#[idempotent(key = id, store = store)]
async fn refund(store: &MemoryStore, id: u64, cents: i64) -> Result<Outcome<u64>, AppError> {
    if cents == 0 {
        return Ok(Outcome::fresh(0));
    }
    let cents = parse(cents)?;
    Ok(Outcome::fresh(cents))
}

#[idempotent(key = id, store = store)]
async fn plain(store: &MemoryStore, id: u64, cents: i64) -> Result<u64, AppError> {
    if cents == 0 {
        return Ok(0);
    }
    Ok(parse(cents)?)
}

// Transactional mode expands differently (the body runs inline, the transaction is reborrowed
// after it): compiled here, run against PostgreSQL in tests/transactional.rs.
#[allow(dead_code)]
#[idempotent(key = id, store = store, tx = tx, payload = cents)]
async fn credit(
    store: &PostgresStore,
    tx: &mut Transaction<'_, Postgres>,
    id: u64,
    cents: i64,
) -> Result<Outcome<i64>, AppError> {
    if cents == 0 {
        return Ok(Outcome::fresh(0));
    }
    let cents = i64::try_from(parse(cents)?).map_err(|_| AppError::Invalid("too large"))?;
    idem_guard::sqlx::query("SELECT 1")
        .execute(&mut **tx)
        .await
        .map_err(|e| AppError::Guard(Error::store(e)))?;
    Ok(Outcome::fresh(cents))
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let store = MemoryStore::new();
    let first = refund(&store, 1, 0).await.unwrap();
    assert_eq!((*first.value(), first.is_replay()), (0, false));
    let again = refund(&store, 1, 0).await.unwrap();
    assert_eq!((*again.value(), again.is_replay()), (0, true));
    assert_eq!(refund(&store, 2, 70).await.unwrap().into_inner(), 70);
    assert!(matches!(refund(&store, 3, -1).await, Err(AppError::Invalid("negative"))));
    assert_eq!(plain(&store, 4, 0).await.unwrap(), 0);
    assert_eq!(plain(&store, 5, 9).await.unwrap(), 9);
}
