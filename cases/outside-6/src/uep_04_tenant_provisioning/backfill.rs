use super::provisioning::{self, Installation, Provisioner};

#[derive(sqlx::FromRow)]
struct Row {
    installation_id: i64,
    login: String,
    email: String,
}

/// `ci-insights backfill-tenants`: provisions installations GitHub told us about while the
/// webhook endpoint was down (read from the App's installations list, cached in `gh_installations`).
pub async fn backfill_tenants(p: Provisioner) -> anyhow::Result<usize> {
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT g.installation_id, g.login, g.email FROM gh_installations g \
         LEFT JOIN tenants t ON t.installation_id = g.installation_id \
         WHERE t.installation_id IS NULL OR t.status <> 'active'",
    )
    .fetch_all(&p.pool)
    .await?;
    let mut done = 0;
    for r in rows {
        let inst = Installation { installation_id: r.installation_id, account_login: r.login, billing_email: r.email };
        provisioning::provision(&p, &inst).await?;
        done += 1;
    }
    Ok(done)
}
