use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem};
use chrono::Utc;

use super::BookSeat;

pub const BOOKINGS_TABLE: &str = "bookings";
pub const PROCESSED_TABLE: &str = "processed-messages";

pub fn booking_put(cmd: &BookSeat) -> anyhow::Result<TransactWriteItem> {
    let put = Put::builder()
        .table_name(BOOKINGS_TABLE)
        .item("pk", AttributeValue::S(format!("SHOW#{}", cmd.show_id)))
        .item("sk", AttributeValue::S(format!("SEAT#{}", cmd.seat)))
        .item("booking_id", AttributeValue::S(cmd.booking_id.clone()))
        .item("customer_id", AttributeValue::S(cmd.customer_id.clone()))
        .condition_expression("attribute_not_exists(sk)")
        .build()?;
    Ok(TransactWriteItem::builder().put(put).build())
}

pub fn marker_put(message_id: &str) -> anyhow::Result<TransactWriteItem> {
    let expires = Utc::now().timestamp() + 14 * 24 * 3600;
    let put = Put::builder()
        .table_name(PROCESSED_TABLE)
        .item("pk", AttributeValue::S(format!("MSG#{message_id}")))
        .item("expires_at", AttributeValue::N(expires.to_string()))
        .condition_expression("attribute_not_exists(pk)")
        .build()?;
    Ok(TransactWriteItem::builder().put(put).build())
}
