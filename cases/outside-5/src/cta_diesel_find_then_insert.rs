//! expect: check_then_act
//!
//! Nightly invoicing job runner (diesel, r2d2 pool, several runner replicas). Each scheduled
//! job row is picked by every replica's poll; a `processed_jobs` lookup decides whether to run.

use diesel::prelude::*;
use diesel::r2d2::{ConnectionManager, Pool};
use diesel::PgConnection;

mod schema {
    diesel::table! {
        processed_jobs (job_id) {
            job_id -> Int8,
            finished_at -> Timestamptz,
        }
    }
    diesel::table! {
        scheduled_jobs (id) {
            id -> Int8,
            customer_id -> Int8,
            kind -> Text,
        }
    }
}

use schema::{processed_jobs, scheduled_jobs};

#[derive(Queryable)]
pub struct ScheduledJob {
    pub id: i64,
    pub customer_id: i64,
    pub kind: String,
}

#[derive(Queryable)]
pub struct ProcessedJob {
    pub job_id: i64,
    pub finished_at: chrono::DateTime<chrono::Utc>,
}

#[derive(Insertable)]
#[diesel(table_name = processed_jobs)]
struct NewProcessedJob {
    job_id: i64,
    finished_at: chrono::DateTime<chrono::Utc>,
}

pub trait Billing {
    fn issue_invoice(&self, customer_id: i64) -> anyhow::Result<()>;
}

pub fn run_due_jobs(
    pool: &Pool<ConnectionManager<PgConnection>>,
    billing: &dyn Billing,
) -> anyhow::Result<()> {
    let mut conn = pool.get()?;
    let jobs: Vec<ScheduledJob> = scheduled_jobs::table
        .filter(scheduled_jobs::kind.eq("invoice"))
        .load(&mut conn)?;

    for job in jobs {
        let done = processed_jobs::table
            .find(job.id)
            .first::<ProcessedJob>(&mut conn)
            .optional()?;
        if done.is_some() {
            continue;
        }

        billing.issue_invoice(job.customer_id)?;

        diesel::insert_into(processed_jobs::table)
            .values(&NewProcessedJob {
                job_id: job.id,
                finished_at: chrono::Utc::now(),
            })
            .execute(&mut conn)?;
    }
    Ok(())
}
