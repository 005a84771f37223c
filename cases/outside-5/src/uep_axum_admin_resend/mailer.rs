pub struct ConfirmationMailer {
    pub http: reqwest::Client,
    pub postmark_token: String,
}

impl ConfirmationMailer {
    pub async fn send_confirmation(&self, order_id: &str, email: &str) -> anyhow::Result<()> {
        self.http
            .post("https://api.postmarkapp.com/email/withTemplate")
            .header("X-Postmark-Server-Token", &self.postmark_token)
            .json(&serde_json::json!({
                "TemplateAlias": "order-confirmation",
                "To": email,
                "TemplateModel": { "order_id": order_id },
            }))
            .send()
            .await?
            .error_for_status()?;
        Ok(())
    }
}
