//! expect: check_then_act
//!
//! GitHub App webhook (actix-web). GitHub redelivers on timeouts and the "Redeliver" button;
//! deliveries are deduped on `X-GitHub-Delivery` through a lookup followed by an insert.

use actix_web::{web, HttpRequest, HttpResponse};
use sqlx::PgPool;

pub struct AppCtx {
    pub db: PgPool,
    pub ci: std::sync::Arc<dyn CiTrigger + Send + Sync>,
}

#[async_trait::async_trait]
pub trait CiTrigger {
    async fn start_pipeline(&self, repo: &str, sha: &str) -> anyhow::Result<()>;
}

#[derive(serde::Deserialize)]
pub struct PushEvent {
    pub after: String,
    pub repository: Repo,
}

#[derive(serde::Deserialize)]
pub struct Repo {
    pub full_name: String,
}

pub async fn github_webhook(
    req: HttpRequest,
    ctx: web::Data<AppCtx>,
    body: web::Json<PushEvent>,
) -> actix_web::Result<HttpResponse> {
    let delivery = req
        .headers()
        .get("X-GitHub-Delivery")
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| actix_web::error::ErrorBadRequest("missing delivery id"))?
        .to_owned();

    let existing: Option<(String,)> =
        sqlx::query_as("SELECT delivery_id FROM github_deliveries WHERE delivery_id = $1")
            .bind(&delivery)
            .fetch_optional(&ctx.db)
            .await
            .map_err(actix_web::error::ErrorInternalServerError)?;
    if existing.is_some() {
        return Ok(HttpResponse::Ok().finish());
    }

    ctx.ci
        .start_pipeline(&body.repository.full_name, &body.after)
        .await
        .map_err(actix_web::error::ErrorBadGateway)?;

    sqlx::query("INSERT INTO github_deliveries (delivery_id, received_at) VALUES ($1, now())")
        .bind(&delivery)
        .execute(&ctx.db)
        .await
        .map_err(actix_web::error::ErrorInternalServerError)?;

    Ok(HttpResponse::Accepted().finish())
}
