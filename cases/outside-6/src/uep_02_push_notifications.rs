//! expect: unguarded_entry_point
//! Notification service: a NATS subscriber sends FCM pushes behind a Redis claim on the
//! notification id; the support tool's "retry" route sends the stored notification directly.
use axum::{extract::{Path, State}, http::StatusCode};
use futures::StreamExt;
use serde::Deserialize;
use std::sync::Arc;

pub struct Notifier {
    pub http: reqwest::Client,
    pub fcm_project: String,
    pub fcm_token: String,
    pub redis: redis::aio::ConnectionManager,
    pub pool: sqlx::PgPool,
}

#[derive(Deserialize, sqlx::FromRow)]
pub struct Notification {
    pub id: String,
    pub device_token: String,
    pub title: String,
    pub body: String,
}

async fn send_push(n: &Notifier, notif: &Notification) -> anyhow::Result<()> {
    let url = format!("https://fcm.googleapis.com/v1/projects/{}/messages:send", n.fcm_project);
    n.http
        .post(url)
        .bearer_auth(&n.fcm_token)
        .json(&serde_json::json!({ "message": {
            "token": notif.device_token,
            "notification": { "title": notif.title, "body": notif.body }
        } }))
        .send()
        .await?
        .error_for_status()?;
    Ok(())
}

pub async fn subscribe(n: Arc<Notifier>, nats: async_nats::Client) -> anyhow::Result<()> {
    let mut sub = nats.queue_subscribe("notifications.push", "pushers".into()).await?;
    while let Some(msg) = sub.next().await {
        let Ok(notif) = serde_json::from_slice::<Notification>(&msg.payload) else { continue };
        let mut redis = n.redis.clone();
        let claimed: Option<String> = redis::cmd("SET")
            .arg(format!("push-sent:{}", notif.id))
            .arg(1)
            .arg("NX")
            .arg("EX")
            .arg(7 * 24 * 3600)
            .query_async(&mut redis)
            .await?;
        if claimed.is_none() {
            continue;
        }
        if let Err(e) = send_push(&n, &notif).await {
            tracing::warn!(id = %notif.id, error = %e, "push failed");
            let _: redis::RedisResult<()> = redis::cmd("DEL").arg(format!("push-sent:{}", notif.id)).query_async(&mut redis).await;
        }
    }
    Ok(())
}

/// POST /support/notifications/:id/retry
pub async fn support_retry(State(n): State<Arc<Notifier>>, Path(id): Path<String>) -> StatusCode {
    let notif: Option<Notification> = sqlx::query_as("SELECT id, device_token, title, body FROM notifications WHERE id = $1")
        .bind(&id)
        .fetch_optional(&n.pool)
        .await
        .ok()
        .flatten();
    let Some(notif) = notif else { return StatusCode::NOT_FOUND };
    match send_push(&n, &notif).await {
        Ok(()) => StatusCode::ACCEPTED,
        Err(_) => StatusCode::BAD_GATEWAY,
    }
}
