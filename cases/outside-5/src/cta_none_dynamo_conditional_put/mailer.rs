use aws_sdk_sesv2::types::{Body, Content, Destination, EmailContent, Message};
use aws_sdk_sesv2::Client;

pub struct ReceiptMailer {
    pub ses: Client,
    pub from: String,
}

impl ReceiptMailer {
    pub async fn send_receipt(&self, to: &str, order_id: &str) -> anyhow::Result<()> {
        let content = EmailContent::builder()
            .simple(
                Message::builder()
                    .subject(Content::builder().data(format!("Receipt for order {order_id}")).build()?)
                    .body(Body::builder().text(Content::builder().data("Thanks!").build()?).build())
                    .build(),
            )
            .build();
        self.ses
            .send_email()
            .from_email_address(&self.from)
            .destination(Destination::builder().to_addresses(to).build())
            .content(content)
            .send()
            .await?;
        Ok(())
    }
}
