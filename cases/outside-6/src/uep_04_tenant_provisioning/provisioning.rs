use sqlx::PgPool;

#[derive(Clone)]
pub struct Provisioner {
    pub pool: PgPool,
    pub http: reqwest::Client,
    pub stripe_key: String,
    pub postmark_token: String,
}

pub struct Installation {
    pub installation_id: i64,
    pub account_login: String,
    pub billing_email: String,
}

pub async fn provision(p: &Provisioner, inst: &Installation) -> anyhow::Result<()> {
    let customer: serde_json::Value = p
        .http
        .post("https://api.stripe.com/v1/customers")
        .basic_auth(&p.stripe_key, Option::<&str>::None)
        .form(&[("email", inst.billing_email.as_str()), ("name", inst.account_login.as_str())])
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let customer_id = customer["id"].as_str().unwrap_or_default();

    sqlx::query("UPDATE tenants SET stripe_customer_id = $2, status = 'active' WHERE installation_id = $1")
        .bind(inst.installation_id)
        .bind(customer_id)
        .execute(&p.pool)
        .await?;

    p.http
        .post("https://api.postmarkapp.com/email/withTemplate")
        .header("X-Postmark-Server-Token", &p.postmark_token)
        .json(&serde_json::json!({
            "From": "hello@ci-insights.dev",
            "To": inst.billing_email,
            "TemplateAlias": "welcome",
            "TemplateModel": { "login": inst.account_login }
        }))
        .send()
        .await?
        .error_for_status()?;
    Ok(())
}
