//! What the SQLite and MySQL stores share: the row's `state` column and how a live row reads.
//! (The PostgreSQL store keeps its own copy: it reads its row in one statement with the
//! reservation.)

use std::time::Duration;

use crate::key::Fingerprint;
use crate::store::{Reservation, StoredResult};
use crate::Error;

/// How many times a reservation tries again when the row changed between its statements (it
/// was released, completed or taken over meanwhile). Each retry follows another attempt's
/// committed write, so running out means a key under extreme churn, reported as a store error.
pub(crate) const RESERVE_TRIES: usize = 16;

/// The `state` column and the body of a completion.
pub(crate) fn state_of(result: &StoredResult) -> (i8, &str) {
    match result {
        StoredResult::Ok(s) => (1, s),
        StoredResult::Err(s) => (2, s),
        StoredResult::Unreplayable(s) => (3, s),
    }
}

/// What a live row (one whose `expires_at` is still ahead) tells a reservation.
pub(crate) fn live_row(
    key: &str,
    fingerprint: &str,
    state: i8,
    body: Option<String>,
    remaining: Duration,
) -> Result<Reservation, Error> {
    let corrupt = || {
        let key = crate::observe::key_hash(key);
        Error::store(format!("unexpected row stored for #{key}"))
    };
    let fingerprint = Fingerprint::from_hex(fingerprint).ok_or_else(corrupt)?;
    let result = match state {
        0 => {
            return Ok(Reservation::InProgress {
                fingerprint,
                retry_after: remaining,
            })
        }
        1 => StoredResult::Ok(body.unwrap_or_default()),
        2 => StoredResult::Err(body.unwrap_or_default()),
        3 => StoredResult::Unreplayable(body.unwrap_or_default()),
        _ => return Err(corrupt()),
    };
    Ok(Reservation::Completed {
        fingerprint,
        result,
    })
}

/// The error after [`RESERVE_TRIES`] reservations each found the row changed under them.
pub(crate) fn churning(key: &str) -> Error {
    Error::store(format!(
        "the record of #{} changed under {RESERVE_TRIES} reservations in a row",
        crate::observe::key_hash(key)
    ))
}
