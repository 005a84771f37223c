use serde_json::Value;

pub struct PayPalClient {
    http: reqwest::Client,
    base_url: String,
    access_token: String,
}

impl PayPalClient {
    pub async fn capture(&self, order_id: &str, request_id: &str) -> anyhow::Result<Value> {
        let url = format!("{}/v2/checkout/orders/{}/capture", self.base_url, order_id);
        let resp = self
            .http
            .post(url)
            .bearer_auth(&self.access_token)
            .header("PayPal-Request-Id", request_id)
            .header("Prefer", "return=representation")
            .json(&serde_json::json!({}))
            .send()
            .await?
            .error_for_status()?;
        Ok(resp.json().await?)
    }
}
