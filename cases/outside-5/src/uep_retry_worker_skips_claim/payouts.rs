use super::PayoutRequested;

pub struct BankClient {
    pub http: reqwest::Client,
    pub base: String,
    pub token: String,
}

/// Sends the SEPA credit transfer. Not idempotent on the bank side.
pub async fn execute(bank: &BankClient, p: &PayoutRequested) -> anyhow::Result<String> {
    let resp: serde_json::Value = bank
        .http
        .post(format!("{}/v1/credit-transfers", bank.base))
        .bearer_auth(&bank.token)
        .json(&serde_json::json!({
            "creditor_iban": p.iban,
            "amount": p.amount_cents,
            "remittance": format!("payout {}", p.payout_id),
        }))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    Ok(resp["id"].as_str().unwrap_or_default().to_string())
}
