//! expect: nondeterministic_key
//! Refund worker of a payments service: an apalis job per `RefundRequested`, calling the Stripe
//! REST API with reqwest.
use anyhow::Context;
use apalis::prelude::*;
use reqwest::Client;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RefundRequested {
    pub refund_request_id: String,
    pub charge_id: String,
    pub amount_cents: i64,
    pub reason: String,
}

#[derive(Clone)]
pub struct StripeHttp {
    pub http: Client,
    pub secret_key: String,
}

impl StripeHttp {
    async fn create_refund(&self, req: &RefundRequested) -> anyhow::Result<String> {
        let idempotency_key = Uuid::new_v4().to_string();
        let amount = req.amount_cents.to_string();
        let params = [
            ("charge", req.charge_id.as_str()),
            ("amount", amount.as_str()),
            ("reason", req.reason.as_str()),
            ("metadata[refund_request_id]", req.refund_request_id.as_str()),
        ];
        let resp = self
            .http
            .post("https://api.stripe.com/v1/refunds")
            .basic_auth(&self.secret_key, Option::<&str>::None)
            .header("Idempotency-Key", idempotency_key)
            .form(&params)
            .send()
            .await
            .context("POST /v1/refunds")?
            .error_for_status()?;
        let body: serde_json::Value = resp.json().await?;
        Ok(body["id"].as_str().unwrap_or_default().to_owned())
    }
}

pub async fn process_refund(job: RefundRequested, stripe: Data<StripeHttp>) -> Result<(), Error> {
    tracing::info!(refund_request_id = %job.refund_request_id, "refunding charge");
    let refund_id = stripe
        .create_refund(&job)
        .await
        .map_err(|e| Error::Failed(std::sync::Arc::new(e.into())))?;
    tracing::info!(%refund_id, "refund created");
    Ok(())
}
