use super::ids;
use super::PayoutApproved;
use reqwest::Client;
use serde_json::json;

#[derive(Clone)]
pub struct ModernTreasury {
    pub http: Client,
    pub org_id: String,
    pub api_key: String,
    pub originating_account_id: String,
}

impl ModernTreasury {
    pub async fn create_payment_order(&self, payout: &PayoutApproved) -> anyhow::Result<String> {
        let key = ids::request_key("po");
        let body = json!({
            "type": "ach",
            "direction": "credit",
            "amount": payout.amount_cents,
            "currency": payout.currency,
            "originating_account_id": self.originating_account_id,
            "receiving_account_id": payout.vendor_account_id,
            "metadata": { "payout_id": payout.payout_id },
        });
        let resp = self
            .http
            .post("https://app.moderntreasury.com/api/payment_orders")
            .basic_auth(&self.org_id, Some(&self.api_key))
            .header("Idempotency-Key", &key)
            .json(&body)
            .send()
            .await?
            .error_for_status()?;
        let v: serde_json::Value = resp.json().await?;
        Ok(v["id"].as_str().unwrap_or_default().to_owned())
    }
}
