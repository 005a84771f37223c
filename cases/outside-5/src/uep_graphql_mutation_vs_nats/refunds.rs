use stripe::{Client, CreateRefund, PaymentIntentId, Refund};

use super::RefundRequest;

pub struct RefundService {
    pub stripe: Client,
}

impl RefundService {
    pub async fn issue(&self, req: &RefundRequest) -> anyhow::Result<String> {
        let pi: PaymentIntentId = req.payment_intent.parse()?;
        let mut params = CreateRefund::new();
        params.payment_intent = Some(pi);
        params.amount = Some(req.amount_cents);
        let refund = Refund::create(&self.stripe, params).await?;
        Ok(refund.id.to_string())
    }
}
