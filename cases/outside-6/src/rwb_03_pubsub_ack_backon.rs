//! expect: none
//! Notification preferences sync: calls the CRM with `backon`, exponential with jitter and at
//! most five retries, then gives the message back to Pub/Sub.
use backon::{ExponentialBuilder, Retryable};
use std::time::Duration;

pub async fn sync_preferences(http: &reqwest::Client, crm_url: &str, user_id: &str, prefs: &serde_json::Value) -> anyhow::Result<()> {
    let policy = ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(200))
        .with_max_delay(Duration::from_secs(20))
        .with_max_times(5)
        .with_jitter();
    let call = || async {
        http.put(format!("{crm_url}/contacts/{user_id}/preferences"))
            .json(prefs)
            .send()
            .await?
            .error_for_status()
            .map(|_| ())
    };
    call.retry(policy)
        .when(|e: &reqwest::Error| e.is_timeout() || e.status().map_or(true, |s| s.is_server_error()))
        .notify(|e, dur| tracing::warn!(error = %e, ?dur, "crm call failed, retrying"))
        .await?;
    Ok(())
}
