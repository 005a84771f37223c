//! expect: unguarded_entry_point
//!
//! Subscription renewals. The payment provider's `invoice.payment_succeeded` webhook (poem)
//! claims the invoice id before extending the subscription and e-mailing the receipt. A
//! reconciliation cron, meant to catch missed webhooks, extends and e-mails straight away
//! for every paid invoice it finds, racing the webhook and repeating itself each night.

use std::sync::Arc;

use poem::web::{Data, Json};
use poem::{handler, http::StatusCode};
use sqlx::PgPool;
use tokio_cron_scheduler::{Job, JobScheduler};

#[derive(serde::Deserialize)]
pub struct InvoiceEvent {
    pub invoice_id: String,
    pub subscription_id: String,
    pub customer_email: String,
}

pub struct Renewals {
    pub db: PgPool,
    pub mail: Arc<dyn Mail + Send + Sync>,
}

#[async_trait::async_trait]
pub trait Mail {
    async fn receipt(&self, to: &str, invoice_id: &str) -> anyhow::Result<()>;
}

impl Renewals {
    async fn claim_invoice(&self, invoice_id: &str) -> anyhow::Result<bool> {
        let res = sqlx::query(
            "INSERT INTO handled_invoices (invoice_id) VALUES ($1) ON CONFLICT DO NOTHING",
        )
        .bind(invoice_id)
        .execute(&self.db)
        .await?;
        Ok(res.rows_affected() == 1)
    }

    async fn apply_renewal(&self, ev: &InvoiceEvent) -> anyhow::Result<()> {
        sqlx::query(
            "UPDATE subscriptions SET current_period_end = current_period_end + interval '1 month' \
             WHERE id = $1",
        )
        .bind(&ev.subscription_id)
        .execute(&self.db)
        .await?;
        self.mail.receipt(&ev.customer_email, &ev.invoice_id).await
    }
}

#[handler]
pub async fn invoice_paid(
    Json(ev): Json<InvoiceEvent>,
    Data(renewals): Data<&Arc<Renewals>>,
) -> StatusCode {
    match renewals.claim_invoice(&ev.invoice_id).await {
        Ok(true) => match renewals.apply_renewal(&ev).await {
            Ok(()) => StatusCode::OK,
            Err(_) => StatusCode::INTERNAL_SERVER_ERROR,
        },
        Ok(false) => StatusCode::OK,
        Err(_) => StatusCode::SERVICE_UNAVAILABLE,
    }
}

pub async fn schedule_reconciliation(sched: &JobScheduler, renewals: Arc<Renewals>) -> anyhow::Result<()> {
    sched
        .add(Job::new_async("0 0 3 * * *", move |_uuid, _l| {
            let renewals = renewals.clone();
            Box::pin(async move {
                let paid: Vec<(String, String, String)> = match sqlx::query_as(
                    "SELECT invoice_id, subscription_id, customer_email FROM provider_invoices \
                     WHERE status = 'paid' AND paid_at > now() - interval '2 days'",
                )
                .fetch_all(&renewals.db)
                .await
                {
                    Ok(rows) => rows,
                    Err(e) => {
                        tracing::error!(error = %e, "reconciliation query failed");
                        return;
                    }
                };
                for (invoice_id, subscription_id, customer_email) in paid {
                    let ev = InvoiceEvent { invoice_id, subscription_id, customer_email };
                    if let Err(e) = renewals.apply_renewal(&ev).await {
                        tracing::error!(invoice = %ev.invoice_id, error = %e, "reconcile failed");
                    }
                }
            })
        })?)
        .await?;
    Ok(())
}
