use serde_json::json;
use sqlx::PgPool;

#[derive(Clone)]
pub struct Gateway {
    pub http: reqwest::Client,
    pub token: String,
}

#[derive(sqlx::FromRow, Clone)]
pub struct Invoice {
    pub id: i64,
    pub payment_method_id: String,
    pub amount: String,
    pub currency: String,
}

/// Charges the stored payment method through Braintree's GraphQL API and records the result.
pub async fn charge_invoice(gw: &Gateway, pool: &PgPool, inv: &Invoice) -> anyhow::Result<String> {
    let mutation = json!({
        "query": "mutation Charge($input: ChargePaymentMethodInput!) { chargePaymentMethod(input: $input) { transaction { id status } } }",
        "variables": { "input": {
            "paymentMethodId": inv.payment_method_id,
            "transaction": { "amount": inv.amount, "orderId": inv.id.to_string() }
        } }
    });
    let v: serde_json::Value = gw
        .http
        .post("https://payments.braintree-api.com/graphql")
        .bearer_auth(&gw.token)
        .header("Braintree-Version", "2024-08-01")
        .json(&mutation)
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let txn = v["data"]["chargePaymentMethod"]["transaction"]["id"].as_str().unwrap_or_default().to_owned();
    sqlx::query("UPDATE invoices SET status = 'paid', gateway_txn = $2 WHERE id = $1")
        .bind(inv.id)
        .bind(&txn)
        .execute(pool)
        .await?;
    Ok(txn)
}
