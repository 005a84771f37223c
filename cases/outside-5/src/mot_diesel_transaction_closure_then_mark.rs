//! expect: mark_outside_transaction
//!
//! Fulfilment job runner on a Postgres job table (diesel). A job is picked atomically with
//! `FOR UPDATE SKIP LOCKED` and a lock deadline; the shipment rows are created inside
//! `conn.transaction(..)`, and the job is set to `done` after the closure returned, outside the
//! transaction. If the runner dies in between, the lock deadline passes and another runner
//! creates the shipments again.

use diesel::pg::PgConnection;
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Text};

mod schema {
    diesel::table! {
        fulfilment_jobs (id) {
            id -> Int8,
            order_id -> Int8,
            status -> Text,
        }
    }
    diesel::table! {
        shipments (id) {
            id -> Int8,
            order_id -> Int8,
            warehouse -> Text,
        }
    }
}

use schema::{fulfilment_jobs, shipments};

#[derive(QueryableByName)]
struct PickedJob {
    #[diesel(sql_type = BigInt)]
    id: i64,
    #[diesel(sql_type = BigInt)]
    order_id: i64,
    #[diesel(sql_type = Text)]
    warehouse: String,
}

#[derive(Insertable)]
#[diesel(table_name = shipments)]
struct NewShipment<'a> {
    order_id: i64,
    warehouse: &'a str,
}

pub fn run_one(conn: &mut PgConnection) -> QueryResult<bool> {
    let picked: Option<PickedJob> = diesel::sql_query(
        "UPDATE fulfilment_jobs SET status = 'running', locked_until = now() + interval '10 minutes' \
         WHERE id = (SELECT id FROM fulfilment_jobs \
                     WHERE status = 'queued' OR (status = 'running' AND locked_until < now()) \
                     ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 1) \
         RETURNING id, order_id, warehouse",
    )
    .get_result(conn)
    .optional()?;
    let Some(job) = picked else { return Ok(false) };

    conn.transaction::<_, diesel::result::Error, _>(|conn| {
        diesel::insert_into(shipments::table)
            .values(&NewShipment { order_id: job.order_id, warehouse: &job.warehouse })
            .execute(conn)?;
        diesel::sql_query("UPDATE orders SET fulfilment_state = 'shipped' WHERE id = $1")
            .bind::<BigInt, _>(job.order_id)
            .execute(conn)?;
        Ok(())
    })?;

    diesel::update(fulfilment_jobs::table.find(job.id))
        .set(fulfilment_jobs::status.eq("done"))
        .execute(conn)?;
    Ok(true)
}
