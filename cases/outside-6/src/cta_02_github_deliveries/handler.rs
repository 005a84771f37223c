use super::store::DeliveryLog;
use axum::{extract::State, http::{HeaderMap, StatusCode}, Json};
use serde::Deserialize;
use std::sync::Arc;

#[derive(Clone)]
pub struct AppState {
    pub deliveries: Arc<dyn DeliveryLog>,
    pub github: reqwest::Client,
    pub installation_token: String,
}

#[derive(Deserialize)]
pub struct PullRequestEvent {
    pub action: String,
    pub number: u64,
    pub repository: Repo,
}

#[derive(Deserialize)]
pub struct Repo {
    pub full_name: String,
}

pub async fn on_pull_request(
    State(state): State<AppState>,
    headers: HeaderMap,
    Json(event): Json<PullRequestEvent>,
) -> Result<StatusCode, (StatusCode, String)> {
    let internal = |e: anyhow::Error| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string());
    let delivery_id = headers
        .get("X-GitHub-Delivery")
        .and_then(|v| v.to_str().ok())
        .ok_or((StatusCode::BAD_REQUEST, "missing delivery id".into()))?
        .to_owned();
    if event.action != "opened" {
        return Ok(StatusCode::NO_CONTENT);
    }
    if state.deliveries.has_seen(&delivery_id).await.map_err(internal)? {
        return Ok(StatusCode::OK);
    }

    let url = format!(
        "https://api.github.com/repos/{}/issues/{}/comments",
        event.repository.full_name, event.number
    );
    state
        .github
        .post(url)
        .bearer_auth(&state.installation_token)
        .header("User-Agent", "review-checklist-bot")
        .json(&serde_json::json!({ "body": "### Review checklist\n- [ ] tests\n- [ ] changelog" }))
        .send()
        .await
        .and_then(|r| r.error_for_status())
        .map_err(|e| internal(e.into()))?;

    state.deliveries.record(&delivery_id, "pull_request").await.map_err(internal)?;
    Ok(StatusCode::CREATED)
}
