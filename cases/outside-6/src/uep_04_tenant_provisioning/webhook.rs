use super::provisioning::{self, Installation, Provisioner};
use axum::{extract::State, http::StatusCode, Json};
use serde::Deserialize;

#[derive(Deserialize)]
pub struct InstallationEvent {
    pub action: String,
    pub installation: Inst,
}

#[derive(Deserialize)]
pub struct Inst {
    pub id: i64,
    pub account: Account,
}

#[derive(Deserialize)]
pub struct Account {
    pub login: String,
    pub email: Option<String>,
}

/// Reserves the tenant row: only the delivery that inserts it provisions.
async fn reserve_tenant(p: &Provisioner, installation_id: i64, login: &str) -> anyhow::Result<bool> {
    let res = sqlx::query(
        "INSERT INTO tenants (installation_id, login, status, lease_until) VALUES ($1, $2, 'provisioning', now() + interval '15 minutes') \
         ON CONFLICT (installation_id) DO NOTHING",
    )
    .bind(installation_id)
    .bind(login)
    .execute(&p.pool)
    .await?;
    Ok(res.rows_affected() == 1)
}

async fn release_tenant(p: &Provisioner, installation_id: i64) {
    let _ = sqlx::query("DELETE FROM tenants WHERE installation_id = $1 AND status = 'provisioning'")
        .bind(installation_id)
        .execute(&p.pool)
        .await;
}

pub async fn on_installation(State(p): State<Provisioner>, Json(ev): Json<InstallationEvent>) -> StatusCode {
    if ev.action != "created" {
        return StatusCode::NO_CONTENT;
    }
    let inst = Installation {
        installation_id: ev.installation.id,
        account_login: ev.installation.account.login.clone(),
        billing_email: ev.installation.account.email.clone().unwrap_or_default(),
    };
    match reserve_tenant(&p, inst.installation_id, &inst.account_login).await {
        Ok(true) => {}
        Ok(false) => return StatusCode::OK,
        Err(_) => return StatusCode::SERVICE_UNAVAILABLE,
    }
    match provisioning::provision(&p, &inst).await {
        Ok(()) => StatusCode::CREATED,
        Err(e) => {
            tracing::error!(error = %e, "provisioning failed");
            release_tenant(&p, inst.installation_id).await;
            StatusCode::INTERNAL_SERVER_ERROR
        }
    }
}
