use super::Amount;

pub struct AdyenCheckout {
    http: reqwest::Client,
    api_key: String,
    merchant_account: String,
}

pub fn capture_key(psp_reference: &str) -> String {
    format!("capture:{psp_reference}")
}

impl AdyenCheckout {
    pub async fn capture(
        &self,
        psp_reference: &str,
        merchant_reference: &str,
        amount: Amount,
        idempotency_key: &str,
    ) -> anyhow::Result<()> {
        let url = format!("https://checkout-test.adyen.com/v71/payments/{psp_reference}/captures");
        self.http
            .post(url)
            .header("X-API-Key", &self.api_key)
            .header("Idempotency-Key", idempotency_key)
            .json(&serde_json::json!({
                "merchantAccount": self.merchant_account,
                "reference": merchant_reference,
                "amount": amount,
            }))
            .send()
            .await?
            .error_for_status()?;
        Ok(())
    }
}
