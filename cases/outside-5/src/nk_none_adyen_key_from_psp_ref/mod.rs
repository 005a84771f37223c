//! expect: none
//!
//! Adyen standard-notification webhook (actix-web): on AUTHORISATION we capture the payment.
//! The capture's Idempotency-Key is the PSP reference plus the stage, so Adyen's re-sent
//! notifications replay the same capture. The clock is only written into the audit record.

mod adyen;
mod audit;

use actix_web::{post, web, HttpResponse};
use serde::Deserialize;

use self::adyen::AdyenCheckout;
use self::audit::AuditLog;

#[derive(Deserialize)]
pub struct NotificationRequest {
    #[serde(rename = "notificationItems")]
    pub items: Vec<Item>,
}

#[derive(Deserialize)]
pub struct Item {
    #[serde(rename = "NotificationRequestItem")]
    pub inner: NotificationItem,
}

#[derive(Deserialize)]
pub struct NotificationItem {
    #[serde(rename = "eventCode")]
    pub event_code: String,
    #[serde(rename = "pspReference")]
    pub psp_reference: String,
    #[serde(rename = "merchantReference")]
    pub merchant_reference: String,
    pub amount: Amount,
    pub success: String,
}

#[derive(Deserialize, serde::Serialize, Clone)]
pub struct Amount {
    pub currency: String,
    pub value: i64,
}

#[post("/webhooks/adyen")]
pub async fn adyen_notification(
    body: web::Json<NotificationRequest>,
    adyen: web::Data<AdyenCheckout>,
    audit: web::Data<AuditLog>,
) -> actix_web::Result<HttpResponse> {
    for item in &body.items {
        let n = &item.inner;
        if n.event_code != "AUTHORISATION" || n.success != "true" {
            continue;
        }
        let key = adyen::capture_key(&n.psp_reference);
        adyen
            .capture(&n.psp_reference, &n.merchant_reference, n.amount.clone(), &key)
            .await
            .map_err(actix_web::error::ErrorBadGateway)?;
        audit
            .record(&n.psp_reference, "capture_requested")
            .await
            .map_err(actix_web::error::ErrorInternalServerError)?;
    }
    Ok(HttpResponse::Ok().body("[accepted]"))
}
