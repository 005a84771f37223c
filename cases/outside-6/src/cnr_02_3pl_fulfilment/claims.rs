use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;

const TABLE: &str = "fulfilment-claims";

pub async fn try_claim(ddb: &Client, order_id: &str) -> anyhow::Result<bool> {
    let ttl = chrono::Utc::now().timestamp() + 3 * 86_400;
    let res = ddb
        .put_item()
        .table_name(TABLE)
        .item("order_id", AttributeValue::S(order_id.into()))
        .item("status", AttributeValue::S("PENDING".into()))
        .item("ttl", AttributeValue::N(ttl.to_string()))
        .condition_expression("attribute_not_exists(order_id)")
        .send()
        .await;
    match res {
        Ok(_) => Ok(true),
        Err(e) if e.as_service_error().is_some_and(|s| s.is_conditional_check_failed_exception()) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

pub async fn complete(ddb: &Client, order_id: &str, shipment_id: &str) -> anyhow::Result<()> {
    ddb.update_item()
        .table_name(TABLE)
        .key("order_id", AttributeValue::S(order_id.into()))
        .update_expression("SET #s = :done, shipment_id = :sid")
        .expression_attribute_names("#s", "status")
        .expression_attribute_values(":done", AttributeValue::S("DONE".into()))
        .expression_attribute_values(":sid", AttributeValue::S(shipment_id.into()))
        .send()
        .await?;
    Ok(())
}
