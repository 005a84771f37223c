//! expect: unguarded_entry_point
//!
//! Billing gRPC service (tonic). `Charge` reserves the caller's request id before charging the
//! card; `ChargeBatch`, added later for the subscription renewer, charges each line directly.
//! The renewer retries the whole batch on DEADLINE_EXCEEDED.

use std::sync::Arc;

use tonic::{Request, Response, Status};

pub mod pb {
    tonic::include_proto!("billing.v1");
}

use pb::billing_server::Billing;
use pb::{ChargeBatchReply, ChargeBatchRequest, ChargeReply, ChargeRequest};

#[async_trait::async_trait]
pub trait CardProcessor: Send + Sync {
    async fn charge(&self, customer_id: &str, amount_cents: i64, currency: &str) -> anyhow::Result<String>;
}

#[async_trait::async_trait]
pub trait RequestLedger: Send + Sync {
    /// INSERT .. ON CONFLICT DO NOTHING on request_id; true when newly reserved.
    async fn reserve(&self, request_id: &str) -> anyhow::Result<bool>;
    async fn stored_reply(&self, request_id: &str) -> anyhow::Result<Option<String>>;
}

pub struct BillingService {
    processor: Arc<dyn CardProcessor>,
    ledger: Arc<dyn RequestLedger>,
}

#[tonic::async_trait]
impl Billing for BillingService {
    async fn charge(&self, req: Request<ChargeRequest>) -> Result<Response<ChargeReply>, Status> {
        let r = req.into_inner();
        let fresh = self
            .ledger
            .reserve(&r.request_id)
            .await
            .map_err(|e| Status::unavailable(e.to_string()))?;
        if !fresh {
            let prior = self
                .ledger
                .stored_reply(&r.request_id)
                .await
                .map_err(|e| Status::internal(e.to_string()))?;
            return match prior {
                Some(charge_id) => Ok(Response::new(ChargeReply { charge_id })),
                None => Err(Status::aborted("request in progress")),
            };
        }
        let charge_id = self
            .processor
            .charge(&r.customer_id, r.amount_cents, &r.currency)
            .await
            .map_err(|e| Status::internal(e.to_string()))?;
        Ok(Response::new(ChargeReply { charge_id }))
    }

    async fn charge_batch(
        &self,
        req: Request<ChargeBatchRequest>,
    ) -> Result<Response<ChargeBatchReply>, Status> {
        let batch = req.into_inner();
        let mut charge_ids = Vec::with_capacity(batch.lines.len());
        for line in batch.lines {
            let id = self
                .processor
                .charge(&line.customer_id, line.amount_cents, &line.currency)
                .await
                .map_err(|e| Status::internal(e.to_string()))?;
            charge_ids.push(id);
        }
        Ok(Response::new(ChargeBatchReply { charge_ids }))
    }
}
