//! expect: missing_idempotency_token
//! Monthly merchant statements: a fang task per merchant and month runs an Athena query whose
//! result becomes the statement CSV. fang retries a failed task; a worker restart re-runs it.
use aws_sdk_athena::types::{QueryExecutionContext, ResultConfiguration};
use fang::async_trait;
use fang::asynk::async_queue::AsyncQueueable;
use fang::serde::{Deserialize, Serialize};
use fang::typetag;
use fang::{AsyncRunnable, FangError};

#[derive(Serialize, Deserialize, Debug)]
#[serde(crate = "fang::serde")]
pub struct ExportStatement {
    pub merchant_id: String,
    pub month: String,
}

fn fang_err(e: impl std::fmt::Display) -> FangError {
    FangError { description: e.to_string() }
}

#[typetag::serde]
#[async_trait]
impl AsyncRunnable for ExportStatement {
    async fn run(&self, _queue: &mut dyn AsyncQueueable) -> Result<(), FangError> {
        let cfg = aws_config::load_from_env().await;
        let athena = aws_sdk_athena::Client::new(&cfg);
        let sql = format!(
            "SELECT booked_at, reference, amount_minor, currency FROM ledger.entries \
             WHERE merchant_id = '{}' AND date_format(booked_at, '%Y-%m') = '{}' ORDER BY booked_at",
            self.merchant_id, self.month
        );
        let started = athena
            .start_query_execution()
            .query_string(sql)
            .work_group("statements")
            .query_execution_context(QueryExecutionContext::builder().database("ledger").build())
            .result_configuration(
                ResultConfiguration::builder()
                    .output_location(format!("s3://merchant-statements/{}/{}/", self.merchant_id, self.month))
                    .build(),
            )
            .send()
            .await
            .map_err(fang_err)?;
        tracing::info!(
            merchant = %self.merchant_id,
            month = %self.month,
            query = started.query_execution_id().unwrap_or_default(),
            "statement query started"
        );
        Ok(())
    }

    fn task_type(&self) -> String {
        "statements".to_string()
    }
}
