use serde::Deserialize;

#[derive(Deserialize)]
pub struct Order {
    pub order_id: String,
    pub lines: Vec<serde_json::Value>,
    pub address: serde_json::Value,
}

pub struct Wms {
    http: reqwest::Client,
    base: String,
    key: String,
}

impl Wms {
    pub fn from_env() -> anyhow::Result<Self> {
        Ok(Wms { http: reqwest::Client::new(), base: std::env::var("WMS_URL")?, key: std::env::var("WMS_KEY")? })
    }

    pub async fn create_shipment(&self, o: &Order) -> anyhow::Result<String> {
        let v: serde_json::Value = self
            .http
            .post(format!("{}/v1/shipments", self.base))
            .bearer_auth(&self.key)
            .json(&serde_json::json!({ "reference": o.order_id, "lines": o.lines, "ship_to": o.address }))
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        Ok(v["id"].as_str().unwrap_or_default().to_owned())
    }
}
